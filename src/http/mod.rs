//! The HTTP adapter: DTOs, handlers, authentication extractors, the one error mapping, and
//! the route table.
//!
//! Every route is registered through [`RouteTable`], with its error family and who may call
//! it (`authorize`, which decides that once per request), and the table remembers what it
//! registered so a test can check that the OpenAPI document describes each one.

pub mod access;
pub mod admin;
pub mod api_pix;
pub mod ask;
pub mod auth;
pub mod authorize;
pub mod automatic;
pub mod balance;
pub mod body;
pub mod charges;
pub mod claims;
pub mod cob;
pub mod cobr;
pub mod cobv;
pub mod dict;
pub mod error;
pub mod fraud;
pub mod gate;
pub mod idempotency;
pub mod me;
pub mod med;
pub mod openapi;
pub mod ops;
pub mod payload;
pub mod payments;
pub mod pix;
pub mod rec;
pub mod rec_schemas;
pub mod received;
pub mod recoveries;
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
use crate::rail::sim::directory::Directory;
use crate::store::Repo;

/// A timestamp as every response writes it: UTC, RFC 3339, milliseconds, `Z`
/// (interface.md "Time").
pub fn iso(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Counts a call of `caller` in `window`; too many answer 429 with the seconds until the
/// oldest call leaves the window (rounded up, at least 1).
pub fn rate_limit(
    window: &std::sync::Mutex<crate::domain::rate::RateWindow>,
    caller: &auth::Caller,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), error::ApiError> {
    let hit = window
        .lock()
        .map_err(|_| error::ApiError::internal("rate window lock poisoned"))?
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
    /// The operators' named tokens (hashed); SIGHUP reads their file again.
    pub admin_tokens: Arc<std::sync::RwLock<crate::auth::admin_tokens::AdminTokens>>,
    pub registry: Arc<Registry>,
    pub directory: Arc<Directory>,
    /// Who holds a key, by the rail of the caller's account.
    pub keys: crate::rail::keys::Keys,
    /// Every authenticated request must present its token's certificate
    /// (`--require-client-cert`).
    pub require_client_cert: bool,
    /// The production profile: no account is a sandbox account here.
    pub production: bool,
    /// Which requests get an access line.
    pub access_log: crate::config::AccessLog,
    /// Requests with an `Idempotency-Key` running now.
    pub idempotency: idempotency::InFlight,
    /// How long a request's body may take to arrive (`--body-timeout-ms`).
    pub body_timeout: std::time::Duration,
    /// Which webhook URLs are accepted: plain http (`PIXGW_WEBHOOK_ALLOW_HTTP`), local
    /// addresses (`PIXGW_WEBHOOK_ALLOW_PRIVATE`).
    pub webhook_policy: crate::webhooks::sender::Policy,
    pub webhooks: crate::webhooks::Webhooks,
    /// Resend calls per account (interface.md "Limits": 60 a minute).
    pub resend_rate: std::sync::Mutex<crate::domain::rate::RateWindow>,
    /// Failed token requests, per certificate and per clientId (`domain::throttle`).
    pub token_throttle: std::sync::Mutex<
        crate::domain::throttle::TokenThrottle<
            crate::domain::certificate::Fingerprint,
            crate::domain::ids::ClientId,
        >,
    >,
    /// `GET /api/med` calls per account.
    pub med_list_rate: std::sync::Mutex<crate::domain::rate::RateWindow>,
    /// Whether the API may be served now (a node on a shared database); `None`: always.
    pub gate: gate::SharedGate,
    /// The payload locations of dynamic QR codes (`--payload-host`); `None`: not served.
    pub locations: Option<Arc<payload::Locations>>,
    /// The server's `--account-rate-limit`, for accounts without a limit of their own.
    pub account_rate_limit: Option<u64>,
    /// Every limited account's bucket.
    pub account_rate: std::sync::Mutex<crate::domain::rate::TokenBuckets>,
    /// Reads other institutions' dynamic QR codes (the SPI rail); `None`: not paid.
    pub payloads: Option<Arc<crate::rail::spi::payload_reader::PayloadReader>>,
    /// The largest operator credit one operator makes alone (`--operator-credit-single-max`).
    pub operator_credit_single_max: crate::domain::money::Money,
    /// The SPI rail's hold (a restored or migrated store); `None`: not on the SPI rail.
    pub rail_hold: Option<crate::rail::spi::rail::Hold>,
    /// The SPI rail's payout backlog; `None`: not on the SPI rail.
    pub rail_backlog: Option<Arc<crate::rail::spi::rail::Backlog>>,
}

/// What the route table says of a route besides its handler: the shape of its error bodies
/// and who may call it.
#[derive(Debug, Clone, Copy)]
pub struct Kind(pub error::Family, pub authorize::Access);

/// Registers routes grouped by path (so one path answers several methods and 405 for the
/// others) and records each (method, path) pair.
#[derive(Default)]
pub struct RouteTable {
    resources: Vec<(&'static str, Resource)>,
    registered: Vec<(Method, &'static str)>,
    families: error::RouteFamilies,
    access: authorize::RouteAccess,
}

impl RouteTable {
    /// Registers `handler` for `method` on `path`, whose errors answer in `kind`'s family's
    /// body shape and whose callers `kind`'s access admits (one kind per path).
    pub fn add<F, Args>(&mut self, kind: Kind, method: Method, path: &'static str, handler: F)
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
        self.access.declare(path, method.clone(), kind.1);
        self.registered.push((method, path));
        self.families.declare(path, kind.0);
    }

    /// Hands the resources, their families (for `error::envelope`) and their access (for
    /// `authorize`) to actix, and answers what was registered.
    pub fn register(self, cfg: &mut web::ServiceConfig) -> Vec<(Method, &'static str)> {
        for (_, res) in self.resources {
            cfg.service(res);
        }
        cfg.app_data(self.families);
        cfg.app_data(self.access);
        self.registered
    }
}

/// Registers the route table of the whole server; answers what was registered.
pub fn routes(cfg: &mut web::ServiceConfig) -> Vec<(Method, &'static str)> {
    table().register(cfg)
}

/// The route table of the whole server.
fn table() -> RouteTable {
    // Family A and the operator routes answer errors in the extended shape; family B (the
    // API Pix style) and `/balance` in the simple one. Each route also says who may call
    // it (`authorize`): a client (`a`, `b`), a sandbox account's client, an operator, or
    // anyone.
    use authorize::Access;
    use error::Family::{Extended, Simple};
    let (a, b) = (Kind(Extended, Access::Client), Kind(Simple, Access::Client));
    let (open, open_b) = (Kind(Extended, Access::Open), Kind(Simple, Access::Open));
    let (sandbox, admin) = (Kind(Extended, Access::Sandbox), Kind(Extended, Access::Admin));
    let mut t = RouteTable::default();
    t.add(open, Method::POST, "/api/auth/token", token::issue_token);
    t.add(a, Method::GET, "/api/account", me::my_account);
    t.add(a, Method::POST, "/api/pix/cash-out", pix::cash_out);
    t.add(a, Method::POST, "/api/pix/cash-out-qrcode", pix::cash_out_qrcode);
    t.add(a, Method::POST, "/api/pix/cash-in", charges::cash_in);
    t.add(a, Method::POST, "/api/pix/refund-in/{id}", refunds::refund_in);
    t.add(b, Method::GET, "/pix", received::list_pix);
    t.add(b, Method::GET, "/pix/{e2eid}", received::get_pix);
    t.add(b, Method::PUT, "/pix/{e2eid}/devolucao/{id}", refunds::devolucao);
    t.add(b, Method::GET, "/pix/{e2eid}/devolucao/{id}", refunds::get_devolucao);
    t.add(b, Method::POST, "/cob", cob::post_cob);
    t.add(b, Method::GET, "/cob", cob::list_cobs);
    t.add(b, Method::PUT, "/cob/{txid}", cob::put_cob);
    t.add(b, Method::GET, "/cob/{txid}", cob::get_cob);
    t.add(b, Method::PATCH, "/cob/{txid}", cob::patch_cob);
    t.add(b, Method::GET, "/cobv", cobv::list_cobvs);
    t.add(b, Method::PUT, "/cobv/{txid}", cobv::put_cobv);
    t.add(b, Method::GET, "/cobv/{txid}", cobv::get_cobv);
    t.add(b, Method::PATCH, "/cobv/{txid}", cobv::patch_cobv);
    t.add(b, Method::POST, "/rec", rec::post_rec);
    t.add(b, Method::GET, "/rec", rec::list_recs);
    t.add(b, Method::GET, "/rec/{idRec}", rec::get_rec);
    t.add(b, Method::PATCH, "/rec/{idRec}", rec::patch_rec);
    t.add(b, Method::POST, "/locrec", rec::post_locrec);
    t.add(b, Method::GET, "/locrec", rec::list_locrecs);
    t.add(b, Method::GET, "/locrec/{id}", rec::get_locrec);
    t.add(b, Method::DELETE, "/locrec/{id}/idRec", rec::unlink_locrec);
    t.add(b, Method::POST, "/solicrec", rec::post_solicrec);
    t.add(b, Method::GET, "/solicrec/{idSolicRec}", rec::get_solicrec);
    t.add(b, Method::PATCH, "/solicrec/{idSolicRec}", rec::patch_solicrec);
    t.add(b, Method::PUT, "/cobr/{txid}", cobr::put_cobr);
    t.add(b, Method::POST, "/cobr", cobr::post_cobr);
    t.add(b, Method::GET, "/cobr", cobr::list_cobrs);
    t.add(b, Method::GET, "/cobr/{txid}", cobr::get_cobr);
    t.add(b, Method::PATCH, "/cobr/{txid}", cobr::patch_cobr);
    t.add(b, Method::POST, "/cobr/{txid}/retentativa/{data}", cobr::retry);
    t.add(b, Method::PUT, "/webhookrec", webhooks::api_pix::put_rec);
    t.add(b, Method::GET, "/webhookrec", webhooks::api_pix::get_rec);
    t.add(b, Method::DELETE, "/webhookrec", webhooks::api_pix::delete_rec);
    t.add(b, Method::PUT, "/webhookcobr", webhooks::api_pix::put_cobr);
    t.add(b, Method::GET, "/webhookcobr", webhooks::api_pix::get_cobr);
    t.add(b, Method::DELETE, "/webhookcobr", webhooks::api_pix::delete_cobr);
    t.add(a, Method::GET, "/api/balance", balance::api_balance);
    t.add(a, Method::GET, "/api/transactions", transactions::list_transactions);
    t.add(a, Method::GET, "/api/med", med::list);
    t.add(a, Method::POST, "/api/med/recoveries", recoveries::contest);
    t.add(a, Method::GET, "/api/med/recoveries", recoveries::list);
    t.add(a, Method::GET, "/api/med/recoveries/{id}", recoveries::get);
    t.add(a, Method::POST, "/api/med/recoveries/{id}/cancel", recoveries::cancel);
    t.add(a, Method::PATCH, "/api/med/recoveries/{id}", recoveries::amend);
    t.add(a, Method::POST, "/api/med/{id}/evidence", recoveries::evidence);
    t.add(a, Method::POST, "/api/dict/claims", claims::client_open);
    t.add(a, Method::GET, "/api/dict/claims", claims::client_list);
    t.add(a, Method::GET, "/api/dict/claims/{id}", claims::client_get);
    t.add(a, Method::POST, "/api/dict/claims/{id}/{step}", claims::client_step);
    t.add(a, Method::GET, "/api/automatic-pix/recurrences", automatic::list);
    t.add(a, Method::POST, "/api/automatic-pix/authorisations", automatic::authorise);
    t.add(a, Method::POST, "/api/automatic-pix/recurrences/{idRec}/answer", automatic::answer);
    t.add(a, Method::POST, "/api/automatic-pix/recurrences/{idRec}/cancel", automatic::cancel);
    t.add(a, Method::POST, "/api/automatic-pix/recurrences/{idRec}/maximum", automatic::maximum);
    t.add(
        a,
        Method::POST,
        "/api/automatic-pix/recurrences/{idRec}/charges/{txid}/cancel",
        automatic::cancel_charge,
    );
    t.add(sandbox, Method::POST, "/sandbox/med", med::open);
    t.add(sandbox, Method::POST, "/sandbox/med/{id}/analyze", med::analyze);
    t.add(sandbox, Method::POST, "/sandbox/med/{id}/cancel", med::cancel);
    t.add(a, Method::GET, "/api/transactions/{id}", transactions::get_transaction);
    t.add(a, Method::POST, "/api/webhooks", webhooks::configure);
    t.add(a, Method::GET, "/api/webhooks", webhooks::list);
    t.add(a, Method::GET, "/api/webhooks/logs", webhooks::logs);
    t.add(a, Method::DELETE, "/api/webhooks/{eventType}", webhooks::remove);
    t.add(a, Method::POST, "/api/resend-webhook/{transactionIdentifier}", webhooks::resend);
    t.add(b, Method::POST, "/dict/pix", dict::dict_pix);
    t.add(open_b, Method::GET, "/qr/jwks", payload::jwks);
    t.add(open_b, Method::GET, "/qr/cobv/{token}", payload::cobv_payload);
    t.add(open_b, Method::GET, "/qr/rec/{token}", payload::rec_payload);
    t.add(open_b, Method::GET, "/qr/{token}", payload::cob_payload);
    t.add(b, Method::GET, "/accounts/balances", balance::balances);
    t.add(b, Method::GET, "/balance", balance::plain_balance);
    t.add(sandbox, Method::POST, "/sandbox/pix-in", sandbox::pix_in);
    t.add(sandbox, Method::POST, "/sandbox/pay", sandbox::pay);
    t.add(sandbox, Method::POST, "/sandbox/refund-out", sandbox::refund_out);
    t.add(sandbox, Method::POST, "/sandbox/solicrec/{idSolicRec}/answer", rec::sandbox_answer);
    t.add(sandbox, Method::POST, "/sandbox/rec/{idRec}/cancel", rec::sandbox_cancel);
    t.add(sandbox, Method::POST, "/sandbox/rec/{idRec}/maximum", rec::sandbox_maximum);
    t.add(sandbox, Method::POST, "/sandbox/rec/{idRec}/approve", rec::sandbox_approve);

    t.add(admin, Method::POST, "/admin/accounts", admin::create_account);
    t.add(admin, Method::GET, "/admin/accounts/{id}", admin::get_account);
    t.add(admin, Method::PATCH, "/admin/accounts/{id}", admin::patch_account);
    t.add(admin, Method::POST, "/admin/accounts/{id}/certificates", admin::register_certificate);
    t.add(
        admin,
        Method::DELETE,
        "/admin/accounts/{id}/certificates/{fingerprint}",
        admin::revoke_certificate,
    );
    t.add(admin, Method::POST, "/admin/accounts/{id}/secret", admin::rotate_secret);
    t.add(admin, Method::PUT, "/admin/accounts/{id}/name", admin::rename_account);
    t.add(admin, Method::POST, "/admin/accounts/{id}/keys", admin::register_key);
    t.add(admin, Method::POST, "/admin/accounts/{id}/adjustments", admin::adjust);
    t.add(admin, Method::POST, "/admin/accounts/{id}/med/{medId}/analysis", med::admin_analyze);
    t.add(admin, Method::GET, "/admin/accounts/{id}/med", med::admin_list);
    t.add(admin, Method::GET, "/admin/accounts/{id}/keys", admin::list_keys);
    t.add(admin, Method::POST, "/admin/accounts/{id}/claims", claims::admin_open);
    t.add(admin, Method::POST, "/admin/fraud-markers", fraud::mark);
    t.add(admin, Method::GET, "/admin/fraud-markers", fraud::list);
    t.add(admin, Method::POST, "/admin/fraud-markers/{id}/cancel", fraud::cancel);
    t.add(admin, Method::GET, "/admin/accounts/{id}/claims", claims::admin_list);
    t.add(admin, Method::POST, "/admin/accounts/{id}/claims/{claimId}/{step}", claims::admin_step);
    t.add(admin, Method::DELETE, "/admin/accounts/{id}/keys/{key}", admin::remove_key);
    t.add(admin, Method::GET, "/admin/rail/reconciliation", admin::reconciliation);
    t.add(admin, Method::POST, "/admin/rail/resolutions", admin::propose_resolution);
    t.add(admin, Method::POST, "/admin/rail/release", admin::release_rail);
    t.add(admin, Method::GET, "/admin/rail/resolutions", admin::list_resolutions);
    t.add(admin, Method::POST, "/admin/rail/resolutions/{id}/approval", admin::approve_resolution);
    t.add(admin, Method::POST, "/admin/token-key/rotation", admin::rotate_token_key);
    t.add(admin, Method::POST, "/admin/clock", admin::move_clock);
    t.add(admin, Method::GET, "/admin/backup", admin::backup);

    t.add(open, Method::GET, "/healthz", ops::healthz);
    t.add(open, Method::GET, "/metrics", ops::metrics);
    t.add(open, Method::GET, "/openapi.json", ops::openapi);
    t.add(open, Method::GET, "/docs", ops::docs_redirect);
    t
}

/// The family of every route, as [`routes`] declares it (for the OpenAPI document, which
/// is built without a running server).
pub fn route_families() -> error::RouteFamilies {
    table().families
}

/// Who may call every route, as [`routes`] declares it.
pub fn route_access() -> authorize::RouteAccess {
    table().access
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

    /// Who may call each route, as the table declares it, is what its operation in the
    /// OpenAPI document says: a client's bearer token, an operator's admin token, or nothing.
    #[test]
    fn each_routes_access_is_the_security_its_operation_declares() {
        use authorize::Access;
        let mut registered = Vec::new();
        let _app = actix_web::App::new().configure(|cfg| registered = routes(cfg));
        let access = route_access();
        let json = serde_json::to_value(openapi::ApiDoc::openapi()).unwrap();
        for (method, path) in registered {
            let op = &json["paths"][path][method.as_str().to_lowercase()];
            let schemes: Vec<&str> = op["security"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|r| r.as_object().unwrap().keys().map(String::as_str))
                .collect();
            let declared = access.get(path, &method).unwrap();
            let expected: &[&str] = match declared {
                Access::Open => &[],
                Access::Client | Access::Sandbox => &["bearer"],
                Access::Admin => &["admin"],
            };
            assert_eq!(schemes, expected, "{method} {path} is {declared:?}");
            assert_eq!(declared == Access::Sandbox, path.starts_with("/sandbox/"), "{method} {path}");
            assert_eq!(declared == Access::Admin, path.starts_with("/admin/"), "{method} {path}");
        }
        assert_eq!(access.get("/cob/{txid}", &Method::DELETE), None, "a method the route does not answer");
    }

    /// The route table's own index finds, for any path, the route actix's router matches
    /// (authorization reads it, so the two must never differ): every route's path, and
    /// encoded, doubled, dotted, trailing-slash and upper-case spellings of it.
    #[actix_web::test]
    async fn the_route_tables_index_finds_the_route_the_router_matches() {
        use actix_web::body::{BoxBody, MessageBody};
        use actix_web::dev::{ServiceRequest, ServiceResponse};
        use actix_web::middleware::{from_fn, Next};
        use actix_web::test::{call_service, init_service, TestRequest};
        async fn compare(
            req: ServiceRequest,
            _: Next<impl MessageBody + 'static>,
        ) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
            let path = authorize::routed_path(req.request()).to_owned();
            let router = req.request().resource_map().match_pattern(&path);
            let index = req.app_data::<authorize::RouteAccess>().and_then(|t| t.find(&path));
            let same = router.as_deref() == index;
            let answer = actix_web::HttpResponse::Ok()
                .insert_header(("x-same", if same { "yes" } else { "no" }))
                .body(format!("{path}: router {router:?}, index {index:?}"));
            Ok(req.into_response(answer))
        }
        let mut registered = Vec::new();
        let app = init_service(
            actix_web::App::new().wrap(from_fn(compare)).configure(|cfg| registered = routes(cfg)),
        )
        .await;
        let mut tried = 0;
        for (method, pattern) in &registered {
            let path: String = pattern
                .split('/')
                .map(|seg| if seg.starts_with('{') { "x1" } else { seg })
                .collect::<Vec<_>>()
                .join("/");
            let first = path.as_bytes()[1];
            let variants = [
                path.clone(),
                format!("/%{first:02x}{}", &path[2..]),
                format!("/%25{first:02x}{}", &path[2..]),
                format!("/{path}"),
                format!("/.{path}"),
                format!("{path}/"),
                path.to_uppercase(),
                format!("{path}/extra"),
                path.rsplit_once('/')
                    .map_or(path.clone(), |(head, _)| format!("/{}", head.trim_start_matches('/'))),
            ];
            for uri in variants {
                let req = TestRequest::default().method(method.clone()).uri(&uri).to_request();
                let res = call_service(&app, req).await;
                let same = res.headers().get("x-same").cloned();
                let body = actix_web::test::read_body(res).await;
                assert_eq!(
                    same.as_ref().map(|v| v.as_bytes()),
                    Some(&b"yes"[..]),
                    "{}",
                    String::from_utf8_lossy(&body)
                );
                tried += 1;
            }
        }
        assert!(tried > 800, "{tried}");
    }

    /// interface.md's list of family B names every family B resource of the route table
    /// (by its first segment), so the list cannot fall behind a new route again.
    #[test]
    fn the_interface_lists_every_family_b_resource() {
        let interface = include_str!(concat!("../../docs/interface", ".", "md"));
        let start = interface.find("- **Family B**").expect("interface.md lists family B");
        let end = start + interface[start..].find("\n\n").unwrap_or(interface.len() - start);
        let listed = &interface[start..end];
        for (pattern, family) in table().families.iter() {
            if family != error::Family::Simple {
                continue;
            }
            let first = pattern.split('/').nth(1).unwrap_or_default();
            assert!(
                listed.contains(&format!("`/{first}")) || listed.contains(&format!(" /{first}")),
                "/{first} ({pattern}) is family B and interface.md's list does not name it"
            );
        }
    }

    /// The routes that take `X-Sandbox-Scenario` are exactly those whose OpenAPI operation
    /// declares the header; every other route refuses it.
    #[test]
    fn the_scenario_routes_are_the_ones_the_document_declares() {
        let mut registered = Vec::new();
        let _app = actix_web::App::new().configure(|cfg| registered = routes(cfg));
        let json = serde_json::to_value(openapi::ApiDoc::openapi()).unwrap();
        let mut declaring = Vec::new();
        for (method, path) in &registered {
            let op = &json["paths"][*path][method.as_str().to_lowercase()];
            let params = op["parameters"].as_array().cloned().unwrap_or_default();
            if params.iter().any(|p| p["name"] == "X-Sandbox-Scenario" && p["in"] == "header") {
                declaring.push((method.as_str().to_owned(), (*path).to_owned()));
            }
        }
        let mut taken: Vec<(String, String)> =
            payments::SCENARIO_ROUTES.iter().map(|(m, p)| ((*m).to_owned(), (*p).to_owned())).collect();
        declaring.sort();
        taken.sort();
        assert_eq!(declaring, taken);
    }
}
