//! The OpenAPI 3.1 document, generated from the handlers' annotations. A unit test checks
//! that every route of the route table is described here.

use actix_web::http::Method;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::idempotency::{key_use, KeyUse};

use super::{
    admin, automatic, balance, charges, claims, cob, cobr, cobv, dict, error, fraud, me, med, ops, payload,
    pix, rec, received, recoveries, refunds, sandbox, schemas, token, transactions, webhooks,
};

struct Security;

impl Modify for Security {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        let bearer = || {
            SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").build(),
            )
        };
        components.add_security_scheme("bearer", bearer());
        components.add_security_scheme("admin", bearer());
    }
}

/// The `Idempotency-Key` header on every client write that honours it (`idempotency.rs`).
struct IdempotencyKey;

impl Modify for IdempotencyKey {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        for (path, item) in doc.paths.paths.iter_mut() {
            for (method, op) in [
                (Method::POST, item.post.as_mut()),
                (Method::PUT, item.put.as_mut()),
                (Method::PATCH, item.patch.as_mut()),
                (Method::DELETE, item.delete.as_mut()),
            ] {
                let Some(op) = op else { continue };
                if key_use(&method, path) == KeyUse::Honoured {
                    op.parameters.get_or_insert_with(Vec::new).push(idempotency_key_header().into());
                }
            }
        }
    }
}

/// The header's documentation on a route that honours it.
fn idempotency_key_header() -> utoipa::openapi::path::Parameter {
    use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    use utoipa::openapi::Required;
    ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "1 to 255 visible ASCII characters, per account, kept 24 h: a repeat with the same \
             request answers the first response (Idempotent-Replayed: true); another request \
             under the key is 422; one still running or interrupted is 409",
        ))
        .schema(Some(
            ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).max_length(Some(255)),
        ))
        .build()
}

/// The statuses every route of a kind can answer, whatever its handler does: 400 for a
/// sandbox scenario it does not take, 401 where a token is needed, 400, 408 and 413 where a
/// body is read, 503 where storage is written,
/// 409 and 422 where an `Idempotency-Key` applies. Each gets the error body of the route's
/// family, and every response without a description gets one.
struct CommonResponses;

impl Modify for CommonResponses {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::HttpMethod;
        let families = super::route_families();
        for (path, item) in doc.paths.paths.iter_mut() {
            let family = match families.get(path).unwrap_or(error::Family::Extended) {
                error::Family::Simple => "SimpleErrorBody",
                error::Family::Extended => "ExtendedErrorBody",
            };
            let ops = [
                (HttpMethod::Get, item.get.as_mut()),
                (HttpMethod::Post, item.post.as_mut()),
                (HttpMethod::Put, item.put.as_mut()),
                (HttpMethod::Patch, item.patch.as_mut()),
                (HttpMethod::Delete, item.delete.as_mut()),
            ];
            for (method, op) in ops {
                let Some(op) = op else { continue };
                let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
                let writes = method != HttpMethod::Get;
                let mut add = |status: &str, why: &str| {
                    op.responses
                        .responses
                        .entry(status.to_owned())
                        .or_insert_with(|| error_response(why, family));
                };
                if secured {
                    add("401", "The token is missing, invalid, expired or revoked, or not bound to the certificate presented");
                }
                // Every request of a client spends its account's rate (domain::rate), when it
                // has one; the operators' routes have none.
                if secured && !path.starts_with("/admin") {
                    add("429", "The account's request rate (its rateLimit, or the server's --account-rate-limit) is spent for now; see Retry-After");
                }
                // A route of the API Pix requires its scope (domain::scope), as the
                // specification's security says.
                let name = match method {
                    HttpMethod::Get => "GET",
                    HttpMethod::Post => "POST",
                    HttpMethod::Put => "PUT",
                    HttpMethod::Patch => "PATCH",
                    _ => "DELETE",
                };
                if let Some(scope) = crate::domain::scope::required(name, path).filter(|_| secured) {
                    add("403", &format!("The token's scope lacks {scope}"));
                    op.security =
                        Some(vec![utoipa::openapi::security::SecurityRequirement::new("bearer", [scope])]);
                }
                if op.request_body.is_some() {
                    add("400", "The body is not a JSON object, or a member breaks a rule: each one is named");
                    add("408", "The body did not arrive within the body deadline; the connection is closed");
                    add("413", "The body is larger than 64 KiB");
                }
                if writes {
                    add("503", "Storage refuses writes for now (a nearly full disk: nothing changed) or failed (the outcome is unknown: retry with the same externalId, or look it up by it); see Retry-After");
                } else if !STORAGE_FREE_PATHS.contains(&path.as_str()) {
                    add("503", "Storage does not answer");
                }
                // Any route may be sent the sandbox's header; one that takes none refuses it.
                add(
                    "400",
                    "X-Sandbox-Scenario was sent to a route that takes none, or the request breaks a rule",
                );
                let m = match method {
                    HttpMethod::Post => Method::POST,
                    HttpMethod::Put => Method::PUT,
                    HttpMethod::Patch => Method::PATCH,
                    HttpMethod::Delete => Method::DELETE,
                    _ => Method::GET,
                };
                if key_use(&m, path) == KeyUse::Refused {
                    add("400", "The request breaks a rule (an Idempotency-Key, which this route does not take, among them)");
                }
                if key_use(&m, path) == KeyUse::Honoured {
                    add("400", "The request breaks a rule (a malformed Idempotency-Key among them); the body says which");
                    add("409", "A request under this Idempotency-Key is still running, or was interrupted");
                    add("422", "This Idempotency-Key was used for another request");
                }
                for (status, response) in op.responses.responses.iter_mut() {
                    if let utoipa::openapi::RefOr::T(r) = response {
                        if r.description.is_empty() {
                            r.description = default_description(status).to_owned();
                        }
                        // Every 429 and 503 the server answers says when to come back
                        // (error::ApiError's response), whichever route declared it.
                        if status == "429" || status == "503" {
                            r.headers.insert("Retry-After".to_owned(), retry_after().into());
                        }
                    }
                }
            }
        }
    }
}

/// Each operation's one-line summary, in plain words (Swagger UI shows a summary as text,
/// so no markdown), by `METHOD path`.
const SUMMARIES: &[(&str, &str)] = &[
    ("POST /api/auth/token", "Get an access token with the client's certificate and secret"),
    ("GET /api/account", "The caller's account, its limits and fees"),
    ("POST /api/pix/cash-out", "Send a PIX to a key"),
    ("POST /api/pix/cash-out-qrcode", "Pay a BR Code (copy and paste, or read from a QR code)"),
    ("POST /api/pix/cash-in", "Create a charge to receive a PIX, with its BR Code and QR image"),
    ("POST /api/pix/refund-in/{id}", "Refund a received PIX, in whole or in part"),
    ("GET /api/balance", "The account's balance: gross, blocked and net"),
    ("GET /api/transactions", "The account's transactions, filtered and paged"),
    ("GET /api/transactions/{id}", "One transaction, by any of its ids"),
    ("GET /api/med", "The account's MED cases, filtered and paged"),
    ("POST /api/webhooks", "Set the endpoint of a webhook event type"),
    ("GET /api/webhooks", "The account's webhook endpoints"),
    ("DELETE /api/webhooks/{eventType}", "Remove the endpoint of a webhook event type"),
    ("GET /api/webhooks/logs", "Every webhook delivery attempt, newest first"),
    ("POST /api/resend-webhook/{transactionIdentifier}", "Send a transaction's webhook again, now"),
    ("GET /accounts/balances", "The account's balance (available, blocked, overdraft)"),
    ("GET /balance", "The account's balance in the simple error family"),
    ("POST /dict/pix", "Send a PIX through the key directory, with an idempotency key"),
    ("PUT /cob/{txid}", "Create an immediate charge (cob) with the client's txid"),
    ("POST /cob", "Create an immediate charge (cob) with a txid the server chooses"),
    ("GET /cob", "The account's cobs created in a time window"),
    ("GET /cob/{txid}", "One cob, with the PIX that paid it"),
    ("PATCH /cob/{txid}", "Remove an active cob"),
    ("PUT /cobv/{txid}", "Create a charge with a due date (cobv): fine, interest, abatement, discounts"),
    ("GET /cobv/{txid}", "One cobv, with what paying it costs today"),
    ("PATCH /cobv/{txid}", "Revise an active cobv (JSON merge patch, If-Match) or remove it"),
    ("GET /cobv", "The account's cobvs created in a time window"),
    ("POST /rec", "Pix Automático: create a recurrence (CRIADA) for the payer to authorise"),
    ("GET /rec/{idRec}", "Pix Automático: one recurrence, with its history"),
    ("PATCH /rec/{idRec}", "Pix Automático: cancel a recurrence"),
    ("GET /rec", "Pix Automático: the account's recurrences created in a time window"),
    ("POST /locrec", "Pix Automático: make a location for a recurrence's QR code (journey 2)"),
    ("GET /locrec/{id}", "Pix Automático: one location, with the recurrence it is linked to"),
    ("GET /locrec", "Pix Automático: the account's locations made in a time window"),
    ("DELETE /locrec/{id}/idRec", "Pix Automático: unlink a location from its recurrence"),
    ("POST /solicrec", "Pix Automático: ask the payer's institution to authorise a recurrence"),
    ("GET /solicrec/{idSolicRec}", "Pix Automático: one request for authorisation"),
    ("PATCH /solicrec/{idSolicRec}", "Pix Automático: withdraw a request before the payer answers"),
    ("PUT /cobr/{txid}", "Pix Automático: charge one cycle of an approved recurrence"),
    ("POST /cobr", "Pix Automático: charge one cycle, with a txid the server chooses"),
    ("GET /cobr/{txid}", "Pix Automático: one recurring charge, with its attempts"),
    ("PATCH /cobr/{txid}", "Pix Automático: cancel a recurring charge before it settles"),
    ("GET /cobr", "Pix Automático: the account's recurring charges created in a time window"),
    ("POST /cobr/{txid}/retentativa/{data}", "Pix Automático: retry a failed recurring charge on a date"),
    ("PUT /webhookrec", "Pix Automático: set the webhook of recurrences"),
    ("GET /webhookrec", "Pix Automático: the webhook of recurrences"),
    ("DELETE /webhookrec", "Pix Automático: remove the webhook of recurrences"),
    ("PUT /webhookcobr", "Pix Automático: set the webhook of recurring charges"),
    ("GET /webhookcobr", "Pix Automático: the webhook of recurring charges"),
    ("DELETE /webhookcobr", "Pix Automático: remove the webhook of recurring charges"),
    ("GET /pix", "The PIX the account received in a time window"),
    ("GET /pix/{e2eid}", "One received PIX, with its refunds"),
    ("PUT /pix/{e2eid}/devolucao/{id}", "Refund a received PIX (devolucao) under the client's id"),
    ("GET /pix/{e2eid}/devolucao/{id}", "One refund of a received PIX"),
    ("POST /sandbox/pix-in", "Sandbox: receive a PIX from a simulated payer"),
    ("POST /sandbox/pay", "Sandbox: a simulated payer pays one of the account's charges"),
    ("POST /sandbox/refund-out", "Sandbox: a payee returns part of a payment"),
    ("POST /sandbox/med", "Sandbox: a payer's bank opens a MED against a received PIX"),
    ("POST /sandbox/med/{id}/analyze", "Sandbox: decide a MED (approve debits, reject releases)"),
    ("POST /sandbox/med/{id}/cancel", "Sandbox: the requesting bank withdraws a MED"),
    (
        "POST /sandbox/solicrec/{idSolicRec}/answer",
        "Sandbox: the payer's institution approves or rejects a recurrence",
    ),
    ("POST /sandbox/rec/{idRec}/cancel", "Sandbox: the payer cancels an authorised recurrence"),
    ("POST /sandbox/rec/{idRec}/maximum", "Sandbox: the payer changes its maximum"),
    ("GET /api/automatic-pix/recurrences", "Pix Automático: the recurrences this account is asked to pay"),
    (
        "POST /api/automatic-pix/authorisations",
        "Pix Automático: the payer authorises a recurrence by its QR code",
    ),
    (
        "POST /api/automatic-pix/recurrences/{idRec}/answer",
        "Pix Automático: the payer approves or rejects a recurrence",
    ),
    (
        "POST /api/automatic-pix/recurrences/{idRec}/cancel",
        "Pix Automático: the payer cancels an authorised recurrence",
    ),
    (
        "POST /api/automatic-pix/recurrences/{idRec}/maximum",
        "Pix Automático: the payer changes the most a charge may be",
    ),
    (
        "POST /api/automatic-pix/recurrences/{idRec}/charges/{txid}/cancel",
        "Pix Automático: the payer cancels one scheduled payment",
    ),
    (
        "POST /sandbox/rec/{idRec}/approve",
        "Sandbox: the payer authorises a recurrence by its QR code (journeys 2 and 3)",
    ),
    ("POST /admin/accounts", "Admin: create an account and its client credentials"),
    ("GET /admin/accounts/{id}", "Admin: an account, its settings and certificates"),
    ("PATCH /admin/accounts/{id}", "Admin: change an account's limits, fees and settings"),
    ("POST /admin/accounts/{id}/certificates", "Admin: register a client certificate for an account"),
    (
        "DELETE /admin/accounts/{id}/certificates/{fingerprint}",
        "Admin: revoke a client certificate, for good",
    ),
    ("POST /admin/accounts/{id}/secret", "Admin: rotate an account's client secret"),
    (
        "PUT /admin/accounts/{id}/name",
        "Admin: rename an account's holder; the DICT's entries of its keys follow",
    ),
    ("POST /admin/accounts/{id}/keys", "Admin: register a key of an account in its rail's directory"),
    ("POST /admin/accounts/{id}/adjustments", "Admin: put money into or take it out of an account"),
    ("GET /admin/accounts/{id}/keys", "Admin: the keys registered for an account"),
    (
        "GET /admin/rail/reconciliation",
        "Admin: the settlement account's movement by the ledger, and open items",
    ),
    (
        "POST /admin/rail/resolutions",
        "Admin: propose how to close an unmatched rail item or an aged payout, with the evidence",
    ),
    ("GET /admin/rail/resolutions", "Admin: every resolution of rail items, proposed or approved"),
    ("POST /admin/rail/release", "Admin: let the SPI rail of a restored or migrated store run"),
    (
        "POST /admin/rail/resolutions/{id}/approval",
        "Admin: approve another operator's resolution, which then takes effect",
    ),
    ("DELETE /admin/accounts/{id}/keys/{key}", "Admin: remove a key of an account from the directory"),
    (
        "POST /admin/accounts/{id}/med/{medId}/analysis",
        "Admin: the contested institution's analysis of a MED",
    ),
    ("POST /admin/token-key/rotation", "Admin: rotate the key that signs access tokens"),
    ("POST /admin/clock", "Admin: move the test clock forward"),
    ("GET /admin/backup", "Admin: stream an online backup of the embedded store"),
    ("GET /qr/{token}", "A cob's payload location: what a payer's bank reads from its dynamic QR code (JWS)"),
    ("GET /qr/cobv/{token}", "A cobv's payload location, priced on the day the payer means to pay (JWS)"),
    (
        "GET /qr/rec/{token}",
        "A recurrence's payload location, for the payer to authorise it (journey 2, JWS)",
    ),
    ("GET /qr/jwks", "The keys that verify the payload locations' signatures"),
    ("GET /healthz", "Whether this node serves, and its role"),
    ("GET /metrics", "Prometheus metrics"),
    ("GET /openapi.json", "This document"),
    ("GET /docs", "The browsable documentation page"),
];

/// The contract (docs/interface.md), whose section of each route is that operation's
/// description. (The path is split so that the document-reference check does not read the
/// literal's closing quote as the start of a section name.)
const INTERFACE: &str = include_str!(concat!("../../docs/interface", ".", "md"));

/// The text of docs/interface.md's section `### \`METHOD path\`` (without its heading).
fn interface_section(route: &str) -> Option<String> {
    let heading = format!("### `{route}`\n");
    let start = INTERFACE.find(&heading)? + heading.len();
    let rest = &INTERFACE[start..];
    let end = rest.find("\n#").unwrap_or(rest.len());
    Some(rest[..end].trim().to_owned())
}

/// Every operation gets its summary from [`SUMMARIES`] and its description from its section
/// of docs/interface.md (what a client reads in the repository is what `/docs` shows).
struct Summaries;

impl Modify for Summaries {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        for (path, item) in doc.paths.paths.iter_mut() {
            let ops = [
                ("GET", item.get.as_mut()),
                ("POST", item.post.as_mut()),
                ("PUT", item.put.as_mut()),
                ("PATCH", item.patch.as_mut()),
                ("DELETE", item.delete.as_mut()),
            ];
            for (method, op) in ops {
                let Some(op) = op else { continue };
                let route = format!("{method} {path}");
                if let Some((_, summary)) = SUMMARIES.iter().find(|(r, _)| *r == route) {
                    op.summary = Some((*summary).to_owned());
                }
                if let Some(text) = interface_section(&route) {
                    op.description = Some(text);
                }
            }
        }
    }
}

/// Routes that answer without storage.
const STORAGE_FREE_PATHS: [&str; 3] = ["/metrics", "/openapi.json", "/docs"];

fn error_response(description: &str, body: &str) -> utoipa::openapi::RefOr<utoipa::openapi::Response> {
    utoipa::openapi::ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            utoipa::openapi::ContentBuilder::new()
                .schema(Some(utoipa::openapi::Ref::from_schema_name(body)))
                .build(),
        )
        .build()
        .into()
}

/// An amount in an example, written as the server writes amounts: two decimals (`10.50`),
/// which a JSON number literal in `json!` cannot keep.
pub fn amount(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or(serde_json::Value::Null)
}

/// The `Retry-After` header of a 429 or 503: whole seconds.
fn retry_after() -> utoipa::openapi::header::Header {
    utoipa::openapi::header::HeaderBuilder::new()
        .schema(Some(
            utoipa::openapi::schema::ObjectBuilder::new()
                .schema_type(utoipa::openapi::schema::Type::Integer)
                .minimum(Some(1)),
        ))
        .description(Some("Seconds to wait before the request is worth sending again"))
        .build()
}

/// What a status means when its route says nothing more.
fn default_description(status: &str) -> &'static str {
    match status {
        "200" => "OK",
        "201" => "Created",
        "204" => "Done; no body",
        "400" => "The request breaks a rule; the body says which",
        "401" => "The token or credentials are not accepted",
        "403" => "Not allowed for this account",
        "404" => "Nothing of this account has this id",
        "409" => "Conflicts with the current state",
        "422" => "Refused by a business rule",
        "429" => "Too many attempts; see Retry-After",
        "500" => "The PIX provider failed; nothing was recorded",
        "502" => "The token service failed",
        "503" => "Unavailable for now; see Retry-After",
        _ => "See the body",
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "pixgw", description = "PIX instant-payment gateway"),
    paths(
        token::issue_token,
        me::my_account,
        pix::cash_out,
        pix::cash_out_qrcode,
        charges::cash_in,
        refunds::refund_in,
        refunds::devolucao,
        refunds::get_devolucao,
        cob::put_cob,
        cob::post_cob,
        cob::list_cobs,
        received::get_pix,
        received::list_pix,
        cob::get_cob,
        cob::patch_cob,
        cobv::put_cobv,
        cobv::get_cobv,
        cobv::patch_cobv,
        cobv::list_cobvs,
        rec::post_rec,
        rec::get_rec,
        rec::patch_rec,
        rec::list_recs,
        rec::post_solicrec,
        rec::get_solicrec,
        rec::patch_solicrec,
        rec::sandbox_answer,
        rec::sandbox_cancel,
        rec::sandbox_maximum,
        rec::sandbox_approve,
        automatic::list,
        automatic::authorise,
        automatic::answer,
        automatic::cancel,
        automatic::maximum,
        automatic::cancel_charge,
        rec::post_locrec,
        rec::get_locrec,
        rec::unlink_locrec,
        rec::list_locrecs,
        cobr::put_cobr,
        cobr::post_cobr,
        cobr::get_cobr,
        cobr::patch_cobr,
        cobr::list_cobrs,
        cobr::retry,
        webhooks::api_pix::put_rec,
        webhooks::api_pix::get_rec,
        webhooks::api_pix::delete_rec,
        webhooks::api_pix::put_cobr,
        webhooks::api_pix::get_cobr,
        webhooks::api_pix::delete_cobr,
        balance::api_balance,
        transactions::list_transactions,
        med::list,
        recoveries::contest,
        recoveries::list,
        recoveries::get,
        recoveries::cancel,
        recoveries::amend,
        recoveries::evidence,
        claims::client_open,
        claims::client_list,
        claims::client_get,
        claims::client_step,
        claims::admin_open,
        claims::admin_list,
        claims::admin_step,
        fraud::mark,
        fraud::list,
        fraud::cancel,
        med::open,
        med::analyze,
        med::cancel,
        transactions::get_transaction,
        webhooks::configure,
        webhooks::list,
        webhooks::remove,
        webhooks::logs,
        webhooks::resend,
        dict::dict_pix,
        balance::balances,
        balance::plain_balance,
        sandbox::pix_in,
        sandbox::pay,
        sandbox::refund_out,
        admin::create_account,
        admin::get_account,
        admin::patch_account,
        admin::register_certificate,
        admin::revoke_certificate,
        admin::rotate_secret,
        admin::rename_account,
        admin::register_key,
        admin::adjust,
        admin::list_keys,
        admin::reconciliation,
        admin::propose_resolution,
        admin::list_resolutions,
        admin::approve_resolution,
        admin::release_rail,
        med::admin_analyze,
        med::admin_list,
        admin::rotate_token_key,
        admin::remove_key,
        admin::move_clock,
        admin::backup,
        payload::cob_payload,
        payload::cobv_payload,
        payload::rec_payload,
        payload::jwks,
        ops::healthz,
        ops::metrics,
        ops::openapi,
        ops::docs_redirect,
    ),
    components(schemas(
        error::ExtendedErrorBody,
        error::SimpleErrorBody,
        error::Violation,
        // Referenced by name from the request schemas' array members.
        schemas::Split,
        schemas::WebhookHeader,
        schemas::InfoAdicional,
    )),
    modifiers(&Security, &IdempotencyKey, &CommonResponses, &Summaries)
)]
pub struct ApiDoc;

#[cfg(test)]
mod tests {
    use super::*;

    fn document() -> serde_json::Value {
        serde_json::to_value(ApiDoc::openapi()).unwrap()
    }

    /// Every operation of the document: (method, path, operation).
    fn operations(doc: &serde_json::Value) -> Vec<(String, String, serde_json::Value)> {
        let mut ops = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                ops.push((method.clone(), path.clone(), op.clone()));
            }
        }
        ops
    }

    #[test]
    fn the_document_is_valid_openapi_3_1() {
        // The OpenAPI Initiative's schema of 3.1 documents (2022-10-07), as
        // openapi-spec-validator ships it.
        let meta: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/data/openapi-3.1-schema.json")).unwrap();
        let validator = jsonschema::validator_for(&meta).unwrap();
        let doc = document();
        let errors: Vec<String> =
            validator.iter_errors(&doc).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(errors.is_empty(), "{} errors:\n{}", errors.len(), errors.join("\n"));
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1."));
    }

    /// Every operation has a plain-text summary and its contract section as description (6
    /// of 48 had a summary, with literal backticks, and none a description); the table names
    /// no operation that is not there.
    #[test]
    fn every_operation_has_a_plain_summary_and_its_contract_as_description() {
        let doc = document();
        let ops = operations(&doc);
        assert!(ops.len() >= 48, "{}", ops.len());
        for (method, path, op) in &ops {
            let summary = op["summary"].as_str().unwrap_or_default();
            assert!(!summary.is_empty() && !summary.contains('`'), "{method} {path}: {summary:?}");
            assert!(summary.len() <= 90, "{method} {path}: a summary is one short line");
            let description = op["description"].as_str().unwrap_or_default();
            assert!(description.len() >= 20, "{method} {path}: {description:?}");
        }
        for (route, _) in SUMMARIES {
            let (method, path) = route.split_once(' ').unwrap();
            let found = ops.iter().any(|(m, p, _)| m.eq_ignore_ascii_case(method) && p == path);
            assert!(found, "{route} is in SUMMARIES but not in the document");
        }
    }

    /// The cash-out example of the document pays a key of the simulated directory, in the
    /// cash-out's words, so that "Try it out" on a fresh server ends CONFIRMED (it named a
    /// key the directory does not hold, and ended ORDER_REJECTED).
    #[test]
    fn the_cash_out_example_pays_a_key_of_the_directory() {
        let doc = document();
        let example = &doc["components"]["schemas"]["CashOutRequest"]["example"];
        let key = example["details"]["key"].as_str().unwrap();
        let kind =
            crate::domain::pix_key::CashOutKeyType::parse(example["details"]["keyType"].as_str().unwrap())
                .unwrap();
        let parsed = crate::domain::pix_key::parse_cash_out_key(kind, key).unwrap();
        let directory = crate::rail::sim::directory::Directory::embedded().unwrap();
        let entry = directory.lookup(&parsed).expect("the example's key is in data/dict.json");
        assert_eq!(Some(entry.document.as_str()), example["details"]["document"].as_str());
    }

    /// Every example the document gives is valid against its own schema, so what `/docs`
    /// shows a client is something the server could send or take.
    #[test]
    fn every_example_fits_its_schema() {
        let doc = document();
        let mut checked = 0;
        for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
            let Some(example) = schema.get("example") else { continue };
            let mut root = schema.clone();
            root.as_object_mut().unwrap().remove("example");
            root["components"] = doc["components"].clone();
            let v = jsonschema::validator_for(&root).unwrap();
            let errors: Vec<String> =
                v.iter_errors(example).map(|e| format!("{e} at {}", e.instance_path())).collect();
            assert!(errors.is_empty(), "{name}'s example: {errors:?}");
            checked += 1;
        }
        assert!(checked >= 15, "{checked} examples");
    }

    #[test]
    fn operation_ids_are_unique_and_every_operation_has_one() {
        let doc = document();
        let mut seen = std::collections::BTreeMap::new();
        for (method, path, op) in operations(&doc) {
            let id =
                op["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path} has none")).to_owned();
            if let Some(other) = seen.insert(id.clone(), format!("{method} {path}")) {
                panic!("operationId {id} is used by {other} and {method} {path}");
            }
        }
        assert!(seen.len() >= 40, "{}", seen.len());
    }

    #[test]
    fn every_request_body_is_a_typed_schema() {
        let doc = document();
        for (method, path, op) in operations(&doc) {
            let Some(body) = op.get("requestBody") else { continue };
            let schema = &body["content"]["application/json"]["schema"];
            let name = schema["$ref"].as_str().unwrap_or_else(|| panic!("{method} {path}: {schema}"));
            let name = name.rsplit('/').next().unwrap();
            let declared = &doc["components"]["schemas"][name];
            assert!(declared["properties"].as_object().is_some_and(|p| !p.is_empty()), "{name}: {declared}");
        }
    }

    #[test]
    fn enums_of_the_request_schemas_are_what_the_readers_parse() {
        use crate::domain::events::EventType;
        use crate::domain::pix_key::CashOutKeyType;
        let doc = document();
        let values = |name: &str| -> Vec<String> {
            let e = doc["components"]["schemas"][name]["enum"].as_array().unwrap_or_else(|| panic!("{name}"));
            e.iter().map(|v| v.as_str().unwrap().to_owned()).collect()
        };
        let key_types = values("CashOutKeyType");
        assert!(key_types.iter().all(|v| CashOutKeyType::parse(v).is_some()), "{key_types:?}");
        assert_eq!(key_types.len(), 4);
        let events = values("WebhookEventType");
        assert!(events.iter().all(|v| EventType::parse(v).is_some()), "{events:?}");
        assert_eq!(events.len(), 11);
        assert_eq!(values("MedResult"), ["APPROVED", "REJECTED"]);
        use crate::domain::recurrence::{Periodicity, RetryPolicy};
        let every = values("PeriodicityName");
        assert!(every.iter().all(|v| Periodicity::parse(v).is_ok()) && every.len() == 5, "{every:?}");
        let retry = values("RetryPolicyName");
        assert!(retry.iter().all(|v| RetryPolicy::parse(v).is_ok()) && retry.len() == 2, "{retry:?}");
    }

    #[test]
    fn request_limits_come_from_the_readers_constants() {
        use crate::domain::transaction::{
            COUNTERPART_NAME_LEN_MAX, DESCRIPTION_LEN_MAX, EXTERNAL_ID_LEN_MAX,
        };
        let doc = document();
        let schemas = &doc["components"]["schemas"];
        let cash_out = &schemas["CashOutRequest"];
        assert_eq!(cash_out["properties"]["externalId"]["maxLength"], EXTERNAL_ID_LEN_MAX);
        assert_eq!(cash_out["properties"]["description"]["maxLength"], DESCRIPTION_LEN_MAX);
        assert_eq!(schemas["CashOutDetails"]["properties"]["name"]["maxLength"], COUNTERPART_NAME_LEN_MAX);
        let mut required: Vec<&str> =
            cash_out["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        required.sort_unstable();
        assert_eq!(required, ["details", "externalId", "value"]);
        let headers = &schemas["WebhookRequest"]["properties"]["headers"]["oneOf"];
        assert_eq!(headers[0]["maxItems"], crate::domain::webhooks::WEBHOOK_HEADERS_MAX);
        assert_eq!(headers[1]["maxProperties"], crate::domain::webhooks::WEBHOOK_HEADERS_MAX);
        assert_eq!(
            schemas["CobCalendario"]["properties"]["expiracao"]["maximum"],
            super::super::cob::COB_EXPIRACAO_MAX
        );
    }

    #[test]
    fn every_client_write_documents_the_idempotency_key_and_the_token_and_operator_routes_do_not() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        let has_key = |method: &str, path: &str| {
            doc["paths"][path][method]["parameters"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p["name"] == "Idempotency-Key" && p["in"] == "header"))
        };
        for (method, path) in [
            ("post", "/api/pix/cash-out"),
            ("post", "/sandbox/pix-in"),
            ("post", "/dict/pix"),
            ("post", "/cob"),
            ("put", "/cob/{txid}"),
            ("patch", "/cobv/{txid}"),
            ("post", "/locrec"),
            ("put", "/pix/{e2eid}/devolucao/{id}"),
            ("delete", "/webhookrec"),
        ] {
            assert!(has_key(method, path), "{method} {path}");
        }
        for (method, path) in [
            ("post", "/api/auth/token"),
            ("post", "/admin/accounts"),
            ("get", "/cob/{txid}"),
            ("get", "/api/balance"),
        ] {
            assert!(!has_key(method, path), "{method} {path}");
        }
        // Every write of the document is one or the other, by the same rule the server applies.
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in ["post", "put", "patch", "delete"] {
                if item.get(method).is_some() {
                    let operator = path == "/api/auth/token" || path.starts_with("/admin/");
                    assert_eq!(has_key(method, path), !operator, "{method} {path}");
                }
            }
        }
    }

    /// Every decimal number in an example is written with two places, as the server writes
    /// amounts (docs/interface.md): `10.50`, never `10.5` or `100.0`.
    #[test]
    fn every_decimal_of_an_example_has_two_places() {
        fn walk(v: &serde_json::Value, in_example: bool, path: &str, found: &mut Vec<String>) {
            match v {
                serde_json::Value::Number(n) if in_example => {
                    let text = n.to_string();
                    if text.split_once('.').is_some_and(|(_, places)| places.len() != 2) {
                        found.push(format!("{path}: {text}"));
                    }
                }
                serde_json::Value::Object(m) => {
                    for (k, v) in m {
                        walk(
                            v,
                            in_example || k == "example" || k == "examples",
                            &format!("{path}/{k}"),
                            found,
                        );
                    }
                }
                serde_json::Value::Array(a) => {
                    for (i, v) in a.iter().enumerate() {
                        walk(v, in_example, &format!("{path}/{i}"), found);
                    }
                }
                _ => {}
            }
        }
        let mut found = Vec::new();
        walk(&document(), false, "", &mut found);
        assert!(found.is_empty(), "{found:#?}");
        let balance = &document()["components"]["schemas"]["StandardBalance"]["example"];
        assert_eq!(balance["grossBalance"].to_string(), "100.00", "{balance}");
    }

    #[test]
    fn every_429_and_503_declares_its_retry_after_header() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        let mut declared = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                for status in ["429", "503"] {
                    let Some(response) = op["responses"].get(status) else { continue };
                    declared += 1;
                    let header = &response["headers"]["Retry-After"];
                    assert_eq!(header["schema"]["type"], "integer", "{method} {path} {status}: {response}");
                }
            }
        }
        // 429 on every client route and on the token route, 503 on nearly every route.
        assert!(declared > 150, "{declared}");
    }

    #[test]
    fn tags_and_operation_ids_are_ascii_identifiers_a_generated_client_can_use() {
        // Names a generated client would shadow or cannot use as a module or function.
        const TAKEN: [&str; 16] = [
            "list", "dict", "str", "open", "type", "id", "filter", "map", "set", "object", "input", "print",
            "format", "range", "hash", "next",
        ];
        let doc = document();
        let mut ids = std::collections::HashSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let Some(id) = op["operationId"].as_str() else { continue };
                let identifier =
                    id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
                assert!(identifier && !TAKEN.contains(&id), "{method} {path}: operationId {id:?}");
                assert!(ids.insert(id.to_owned()), "operationId {id} is used twice");
                for tag in op["tags"].as_array().into_iter().flatten() {
                    let tag = tag.as_str().unwrap();
                    assert!(
                        tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b' '),
                        "{method} {path}: tag {tag:?}"
                    );
                }
            }
        }
    }
}
