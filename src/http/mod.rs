//! The HTTP adapter: DTOs, handlers, authentication extractors, the one error mapping, and
//! the route table.
//!
//! Every route is registered through [`RouteTable`], which remembers what it registered so
//! a test can check that the OpenAPI document describes each one.

pub mod access;
pub mod admin;
pub mod auth;
pub mod balance;
pub mod body;
pub mod charges;
pub mod cob;
pub mod dict;
pub mod error;
pub mod idempotency;
pub mod me;
pub mod med;
pub mod openapi;
pub mod ops;
pub mod payments;
pub mod pix;
pub mod refunds;
pub mod sandbox;
pub mod schemas;
pub mod token;
pub mod transactions;
pub mod webhooks;

use std::sync::Arc;

use actix_web::dev::HttpServiceFactory;
use actix_web::http::Method;
use actix_web::{web, FromRequest, Handler, Resource, Responder};

use crate::account::Registry;
use crate::auth::tokens::TokenKeys;
use crate::clock::Clock;
use crate::sim::directory::Directory;
use crate::store::Repo;

/// A timestamp as every response writes it: UTC, RFC 3339, milliseconds, `Z`
/// (decisions.md §2).
pub fn iso(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Counts a call of `caller` in `window`; too many answer 429 with the seconds until the
/// oldest call leaves the window (rounded up, at least 1).
pub fn rate_limit(
    window: &std::sync::Mutex<crate::domain::delivery::RateWindow>,
    caller: &auth::Caller,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), error::ApiError> {
    let hit = window
        .lock()
        .map_err(|_| error::ApiError::Internal("rate window lock poisoned".into()))?
        .hit(caller.account_id.get(), now);
    hit.map_err(|wait| error::ApiError::RateLimited {
        retry_after_seconds: u64::try_from((wait.num_milliseconds() + 999) / 1000).unwrap_or(1).max(1),
    })
}

/// What every handler can reach.
pub struct AppState {
    pub repo: Repo,
    pub clock: Arc<Clock>,
    pub tokens: TokenKeys,
    /// Hash of the admin token (`secrets::hash_secret("", token)`).
    pub admin_token_hash: String,
    pub registry: Arc<Registry>,
    pub directory: Arc<Directory>,
    /// Every authenticated request must present its token's certificate
    /// (`--require-client-cert`).
    pub require_client_cert: bool,
    /// Requests with an `Idempotency-Key` running now.
    pub idempotency: idempotency::InFlight,
    /// How long a request's body may take to arrive (`--body-timeout-ms`).
    pub body_timeout: std::time::Duration,
    /// Plain http webhook URLs are accepted (`PIXGW_WEBHOOK_ALLOW_HTTP`).
    pub webhook_allow_http: bool,
    pub webhooks: crate::webhooks::Webhooks,
    /// Resend calls per account (interface.md: 60 per minute).
    pub resend_rate: std::sync::Mutex<crate::domain::delivery::RateWindow>,
    /// Failed token requests, per certificate and per clientId (`domain::throttle`).
    pub token_throttle: std::sync::Mutex<
        crate::domain::throttle::TokenThrottle<
            crate::domain::certificate::Fingerprint,
            crate::domain::ids::ClientId,
        >,
    >,
    /// `GET /api/med` calls per account.
    pub med_list_rate: std::sync::Mutex<crate::domain::delivery::RateWindow>,
}

/// Registers routes grouped by path (so one path answers several methods and 405 for the
/// others) and records each (method, path) pair.
#[derive(Default)]
pub struct RouteTable {
    resources: Vec<(&'static str, Resource)>,
    registered: Vec<(Method, &'static str)>,
}

impl RouteTable {
    pub fn add<F, Args>(&mut self, method: Method, path: &'static str, handler: F)
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        let route = web::method(method.clone()).to(handler);
        match self.resources.iter_mut().find(|(p, _)| *p == path) {
            Some((_, res)) => {
                let taken = std::mem::replace(res, web::resource(path));
                *res = taken.route(route);
            }
            None => self.resources.push((path, web::resource(path).route(route))),
        }
        self.registered.push((method, path));
    }

    /// Hands the resources to actix and answers what was registered.
    pub fn register(self, cfg: &mut web::ServiceConfig) -> Vec<(Method, &'static str)> {
        for (_, res) in self.resources {
            cfg.service(res);
        }
        self.registered
    }
}

/// The route table of the whole server.
pub fn routes(cfg: &mut web::ServiceConfig) -> Vec<(Method, &'static str)> {
    let mut t = RouteTable::default();
    t.add(Method::POST, "/api/auth/token", token::issue_token);
    t.add(Method::GET, "/api/account", me::my_account);
    t.add(Method::POST, "/api/pix/cash-out", pix::cash_out);
    t.add(Method::POST, "/api/pix/cash-out-qrcode", pix::cash_out_qrcode);
    t.add(Method::POST, "/api/pix/cash-in", charges::cash_in);
    t.add(Method::POST, "/api/pix/refund-in/{id}", refunds::refund_in);
    t.add(Method::PUT, "/pix/{e2eid}/devolucao/{id}", refunds::devolucao);
    t.add(Method::GET, "/pix/{e2eid}/devolucao/{id}", refunds::get_devolucao);
    t.add(Method::PUT, "/cob/{txid}", cob::put_cob);
    t.add(Method::GET, "/cob/{txid}", cob::get_cob);
    t.add(Method::PATCH, "/cob/{txid}", cob::patch_cob);
    t.add(Method::GET, "/api/balance", balance::api_balance);
    t.add(Method::GET, "/api/transactions", transactions::list_transactions);
    t.add(Method::GET, "/api/med", med::list);
    t.add(Method::POST, "/sandbox/med", med::open);
    t.add(Method::POST, "/sandbox/med/{id}/analyze", med::analyze);
    t.add(Method::POST, "/sandbox/med/{id}/cancel", med::cancel);
    t.add(Method::GET, "/api/transactions/{id}", transactions::get_transaction);
    t.add(Method::POST, "/api/webhooks", webhooks::configure);
    t.add(Method::GET, "/api/webhooks", webhooks::list);
    t.add(Method::GET, "/api/webhooks/logs", webhooks::logs);
    t.add(Method::DELETE, "/api/webhooks/{eventType}", webhooks::remove);
    t.add(Method::POST, "/api/resend-webhook/{transactionIdentifier}", webhooks::resend);
    t.add(Method::POST, "/dict/pix", dict::dict_pix);
    t.add(Method::GET, "/accounts/balances", balance::balances);
    t.add(Method::GET, "/balance", balance::plain_balance);
    t.add(Method::POST, "/sandbox/pix-in", sandbox::pix_in);
    t.add(Method::POST, "/sandbox/pay", sandbox::pay);
    t.add(Method::POST, "/sandbox/refund-out", sandbox::refund_out);

    t.add(Method::POST, "/admin/accounts", admin::create_account);
    t.add(Method::GET, "/admin/accounts/{id}", admin::get_account);
    t.add(Method::PATCH, "/admin/accounts/{id}", admin::patch_account);
    t.add(Method::POST, "/admin/accounts/{id}/certificates", admin::register_certificate);
    t.add(Method::DELETE, "/admin/accounts/{id}/certificates/{fingerprint}", admin::revoke_certificate);
    t.add(Method::POST, "/admin/accounts/{id}/secret", admin::rotate_secret);
    t.add(Method::POST, "/admin/clock", admin::move_clock);

    t.add(Method::GET, "/healthz", ops::healthz);
    t.add(Method::GET, "/metrics", ops::metrics);
    t.add(Method::GET, "/openapi.json", ops::openapi);
    t.add(Method::GET, "/docs", ops::docs_redirect);
    t.register(cfg)
}

/// The browsable docs page, from assets vendored into the binary (works offline).
pub fn docs_service() -> impl HttpServiceFactory {
    utoipa_swagger_ui::SwaggerUi::new("/docs/{_:.*}")
        .config(utoipa_swagger_ui::Config::new(["/openapi.json"]))
}

/// Answers every unmatched path with a JSON 404.
pub async fn not_found() -> Result<actix_web::HttpResponse, error::ApiError> {
    Err(error::ApiError::NotFound("no route matches this path".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::OpenApi;

    #[test]
    fn every_registered_route_is_described_in_the_openapi_document() {
        let mut registered = Vec::new();
        let _app = actix_web::App::new().configure(|cfg| registered = routes(cfg));
        assert!(registered.len() >= 10);
        let doc = openapi::ApiDoc::openapi();
        let json = serde_json::to_value(&doc).unwrap();
        assert_eq!(json["openapi"], "3.1.0");
        for (method, path) in registered {
            let op = &json["paths"][path][method.as_str().to_lowercase()];
            assert!(op.is_object(), "{method} {path} is not in the OpenAPI document");
        }
    }
}
