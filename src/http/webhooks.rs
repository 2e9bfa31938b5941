//! The webhook routes (decisions.md "Webhooks"): configuration (`POST /api/webhooks`, an upsert per
//! event type, `GET /api/webhooks` and `DELETE /api/webhooks/{eventType}`), `POST /api/resend-webhook/{id}` and, beyond the
//! interface, the delivery log `GET /api/webhooks/logs`. Delivery itself is
//! [`crate::webhooks`].

use actix_web::http::Uri;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::auth::Caller;
use super::body::{request_object, Fields};
use super::error::{ApiError, Cause, ExtendedErrorBody};
use super::transactions::find_own;
use super::{iso, AppState};
use crate::domain::events::EventType;
use crate::domain::webhooks::{check_header, WEBHOOK_HEADERS_MAX, WEBHOOK_URL_LEN_MAX};
use crate::store::{AttemptOutcome, DeliveryLog, WebhookConfig};
use crate::webhooks::dispatcher::{Resend, ResendError};
use crate::webhooks::sender::Policy;

/// Entries `GET /api/webhooks/logs` answers at most.
pub const WEBHOOK_LOGS_LIMIT_MAX: usize = 100;
const WEBHOOK_LOGS_LIMIT_DEFAULT: usize = 50;

const EVENT_TYPES_MESSAGE: &str =
    "must be one of cash_in, cash_out, refund_in, refund_out, med_created, med_accepted, med_rejected, rec, cobr, claim";

/// An http(s) URL with a host; plain http only when allowed. A host that can only ever be
/// a loopback, private or link-local address (an IP literal of one, `localhost`) is refused
/// here, unless private addresses are allowed, since every delivery to it would be refused:
/// the sender still checks the address a name resolves to when it sends, as DNS answers
/// change.
fn check_url(url: &str, policy: Policy) -> Result<(), &'static str> {
    let uri: Uri = url.parse().map_err(|_| "must be an absolute URL")?;
    match uri.scheme_str() {
        Some("https") => {}
        Some("http") if policy.allow_http => {}
        _ if policy.allow_http => return Err("must be an http or https URL"),
        _ => return Err("must be an https URL"),
    }
    let Some(host) = uri.host().filter(|h| !h.is_empty()) else { return Err("must name a host") };
    if !policy.allow_private && always_local(host) {
        return Err("must not name a loopback, private or link-local address (PIXGW_WEBHOOK_ALLOW_PRIVATE)");
    }
    Ok(())
}

/// Whether a URL's host can only be a local address: an IP literal that deliveries refuse,
/// or a name under `localhost` (RFC 6761 keeps those on the machine itself).
fn always_local(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => !crate::domain::delivery::address_allowed(ip),
        Err(_) => {
            let name = bare.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
    }
}

/// The `url` member, checked by [`check_url`].
fn url_field(f: &mut Fields<'_>, required: bool, policy: Policy) -> Option<String> {
    f.text("url", required, WEBHOOK_URL_LEN_MAX).map(str::to_owned).and_then(|u| {
        match check_url(&u, policy) {
            Ok(()) => Some(u),
            Err(e) => {
                f.fail("url", e);
                None
            }
        }
    })
}

/// The custom headers: an array of `{key, value}` (the interface's request shape) or an
/// object of name to value (the shape the configuration is read back in), so a client can
/// send back what it read.
fn headers(f: &mut Fields<'_>, obj: &serde_json::Map<String, Value>) -> Vec<(String, String)> {
    let pairs: Vec<(String, Option<&str>, Option<&str>)> = match obj.get("headers") {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(items)) if items.len() <= WEBHOOK_HEADERS_MAX => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let text = |name: &str| item.get(name).and_then(Value::as_str);
                (format!("headers[{i}]"), text("key"), text("value"))
            })
            .collect(),
        Some(Value::Object(map)) if map.len() <= WEBHOOK_HEADERS_MAX => {
            map.iter().map(|(k, v)| (format!("headers.{k}"), Some(k.as_str()), v.as_str())).collect()
        }
        Some(_) => {
            f.fail(
                "headers",
                format!(
                    "must be an array of at most {WEBHOOK_HEADERS_MAX} {{key, value}}, or an object of at most \
                     {WEBHOOK_HEADERS_MAX} names and values"
                ),
            );
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (at, k, v) in pairs {
        let (Some(k), Some(v)) = (k, v) else {
            f.fail(&at, "must be {key, value} strings (or a name with a string value)");
            continue;
        };
        match check_header(k, v) {
            Ok(()) => out.push((k.to_owned(), v.to_owned())),
            Err(e @ crate::domain::webhooks::HeaderError::BadValue) => {
                f.fail(&format!("{at}.value"), e.to_string())
            }
            Err(e) => f.fail(&format!("{at}.key"), format!("{e} ({k})")),
        }
    }
    out
}

#[derive(Serialize, ToSchema)]
pub struct Configured {
    success: bool,
    message: String,
}

/// A configuration body as read: its URL, event type and custom headers.
type ConfigBody = (String, EventType, Vec<(String, String)>);

/// A configuration body: its URL (checked against `policy`), event type and headers.
fn read_config(obj: &serde_json::Map<String, Value>, policy: Policy) -> Result<ConfigBody, ApiError> {
    let mut f = Fields::new(obj);
    let url = url_field(&mut f, true, policy);
    let event_type = f.string("eventType", true).and_then(|t| {
        let parsed = EventType::parse(t);
        if parsed.is_none() {
            f.fail("eventType", EVENT_TYPES_MESSAGE);
        }
        parsed
    });
    let headers = headers(&mut f, obj);
    match (url, event_type, f.violations.is_empty()) {
        (Some(url), Some(event_type), true) => Ok((url, event_type, headers)),
        _ => Err(ApiError::Validation(f.violations)),
    }
}

/// Sets the account's endpoint for `event_type`; answers the configuration it replaced.
fn upsert(
    state: &AppState,
    caller: &Caller,
    event_type: EventType,
    url: String,
    headers: Vec<(String, String)>,
    api_pix_callback: bool,
) -> Result<Option<WebhookConfig>, ApiError> {
    let now = state.clock.now();
    let existing =
        state.repo.webhook_configs(caller.account_id)?.into_iter().find(|c| c.event_type == event_type);
    let config = WebhookConfig {
        id: match &existing {
            Some(c) => c.id,
            None => state.repo.store().generate_id().map_err(crate::store::RepoError::from)?,
        },
        account_id: caller.account_id.get(),
        event_type,
        url,
        headers,
        is_active: true,
        created_at: existing.as_ref().map_or(now, |c| c.created_at),
        updated_at: now,
        api_pix_callback,
    };
    state.repo.put_webhook_config(&config)?;
    Ok(existing)
}

/// The API Pix's webhook of a Pix Automático event type (`/webhookrec`, `/webhookcobr`):
/// the same configuration `POST /api/webhooks` sets for `rec` and `cobr`, in the API Pix's
/// words (`webhookUrl`, `criacao`).
pub mod api_pix {
    use super::*;
    use crate::http::error::SimpleErrorBody;

    #[derive(Serialize, ToSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct PixWebhook {
        webhook_url: String,
        /// RFC 3339, UTC: when it was first set.
        criacao: String,
    }

    /// `PUT /webhookrec` and `PUT /webhookcobr`.
    #[derive(ToSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    pub struct PixWebhookRequest {
        /// An https URL (http only when the server allows it), not to a private address.
        #[schema(min_length = 1, max_length = 2048)]
        webhook_url: String,
    }

    fn view(c: &WebhookConfig) -> PixWebhook {
        PixWebhook { webhook_url: c.url.clone(), criacao: iso(c.created_at) }
    }

    async fn put(
        caller: Caller,
        req: HttpRequest,
        bytes: Bytes,
        state: &AppState,
        t: EventType,
    ) -> Result<HttpResponse, ApiError> {
        let obj = request_object(&req, &bytes)?;
        let mut f = Fields::new(&obj);
        f.only(&["webhookUrl"]);
        let url =
            f.text("webhookUrl", true, WEBHOOK_URL_LEN_MAX).map(str::to_owned).and_then(|u| match check_url(
                &u,
                state.webhook_policy,
            ) {
                Ok(()) => Some(u),
                Err(e) => {
                    f.fail("webhookUrl", e);
                    None
                }
            });
        let (Some(url), true) = (url, f.violations.is_empty()) else {
            return Err(ApiError::Validation(f.violations));
        };
        // Custom headers set through `POST /api/webhooks` are kept.
        let headers = state.repo.webhook_config(caller.account_id, t)?.map(|c| c.headers).unwrap_or_default();
        // Its events go where the API Pix's callbacks are written: `{webhookUrl}/rec`, `/cobr`.
        upsert(state, &caller, t, url, headers, true)?;
        get(caller, state, t)
    }

    fn get(caller: Caller, state: &AppState, t: EventType) -> Result<HttpResponse, ApiError> {
        match state.repo.webhook_config(caller.account_id, t)? {
            Some(c) => Ok(HttpResponse::Ok().json(view(&c))),
            None => Err(ApiError::NotFound("no webhook is set for this event".into())),
        }
    }

    fn delete(caller: Caller, state: &AppState, t: EventType) -> Result<HttpResponse, ApiError> {
        if state.repo.delete_webhook_config(caller.account_id, t)? {
            Ok(HttpResponse::NoContent().finish())
        } else {
            Err(ApiError::NotFound("no webhook is set for this event".into()))
        }
    }

    #[utoipa::path(put, operation_id = "put_webhookrec", path = "/webhookrec", tag = "automatic-pix", request_body(content = PixWebhookRequest),
        responses((status = 200, description = "Set: each recurrence's status change is sent there", body = PixWebhook), (status = 400, body = SimpleErrorBody)),
        security(("bearer" = [])))]
    pub async fn put_rec(
        caller: Caller,
        req: HttpRequest,
        bytes: Bytes,
        state: web::Data<AppState>,
    ) -> Result<HttpResponse, ApiError> {
        put(caller, req, bytes, &state, EventType::Rec).await
    }

    #[utoipa::path(get, operation_id = "get_webhookrec", path = "/webhookrec", tag = "automatic-pix",
        responses((status = 200, body = PixWebhook), (status = 404, body = SimpleErrorBody)), security(("bearer" = [])))]
    pub async fn get_rec(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
        get(caller, &state, EventType::Rec)
    }

    #[utoipa::path(delete, operation_id = "delete_webhookrec", path = "/webhookrec", tag = "automatic-pix",
        responses((status = 204, description = "Removed"), (status = 404, body = SimpleErrorBody)), security(("bearer" = [])))]
    pub async fn delete_rec(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
        delete(caller, &state, EventType::Rec)
    }

    #[utoipa::path(put, operation_id = "put_webhookcobr", path = "/webhookcobr", tag = "automatic-pix", request_body(content = PixWebhookRequest),
        responses((status = 200, description = "Set: each recurring charge's status change and failed attempt is sent there", body = PixWebhook), (status = 400, body = SimpleErrorBody)),
        security(("bearer" = [])))]
    pub async fn put_cobr(
        caller: Caller,
        req: HttpRequest,
        bytes: Bytes,
        state: web::Data<AppState>,
    ) -> Result<HttpResponse, ApiError> {
        put(caller, req, bytes, &state, EventType::Cobr).await
    }

    #[utoipa::path(get, operation_id = "get_webhookcobr", path = "/webhookcobr", tag = "automatic-pix",
        responses((status = 200, body = PixWebhook), (status = 404, body = SimpleErrorBody)), security(("bearer" = [])))]
    pub async fn get_cobr(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
        get(caller, &state, EventType::Cobr)
    }

    #[utoipa::path(delete, operation_id = "delete_webhookcobr", path = "/webhookcobr", tag = "automatic-pix",
        responses((status = 204, description = "Removed"), (status = 404, body = SimpleErrorBody)), security(("bearer" = [])))]
    pub async fn delete_cobr(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
        delete(caller, &state, EventType::Cobr)
    }
}

#[utoipa::path(
    post, operation_id = "configure_webhook", path = "/api/webhooks", tag = "webhooks",
    request_body(content = super::schemas::WebhookRequest),
    responses(
        (status = 201, description = "Created", body = Configured),
        (status = 200, description = "The event type's endpoint was replaced", body = Configured),
        (status = 400, body = ExtendedErrorBody),
        (status = 401, body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn configure(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (url, event_type, headers) = read_config(&request_object(&req, &bytes)?, state.webhook_policy)?;
    let created = upsert(&state, &caller, event_type, url, headers, false)?.is_none();
    let message =
        format!("webhook for {} {}", event_type.as_str(), if created { "created" } else { "updated" });
    let body = Configured { success: true, message };
    Ok(if created { HttpResponse::Created().json(body) } else { HttpResponse::Ok().json(body) })
}

#[utoipa::path(
    delete, operation_id = "remove_webhook", path = "/api/webhooks/{eventType}", tag = "webhooks",
    params(("eventType" = String, Path, description = "cash_in, cash_out, refund_in, refund_out, med_created, med_accepted, med_rejected, rec or cobr")),
    responses(
        (status = 204, description = "Removed: events of this type are no longer delivered, pending retries included"),
        (status = 400, description = "not an event type", body = ExtendedErrorBody),
        (status = 401, body = ExtendedErrorBody),
        (status = 404, description = "no endpoint is configured for this event type", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn remove(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let name = path.into_inner();
    let Some(event_type) = EventType::parse(&name) else {
        return Err(ApiError::Validation(vec![super::error::Violation::new(
            "eventType",
            EVENT_TYPES_MESSAGE,
        )]));
    };
    if state.repo.delete_webhook_config(caller.account_id, event_type)? {
        Ok(HttpResponse::NoContent().finish())
    } else {
        Err(ApiError::NotFound(format!("no webhook is configured for {name}")))
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookRecord {
    id: u64,
    #[serde(rename = "type")]
    kind: &'static str,
    url: String,
    /// The custom headers, name to value.
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    headers: Value,
    is_active: bool,
    created_at: String,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookList {
    account_id: u64,
    webhooks: Vec<WebhookRecord>,
    total: usize,
}

#[utoipa::path(
    get, operation_id = "list_webhooks", path = "/api/webhooks", tag = "webhooks",
    responses((status = 200, body = WebhookList), (status = 401, body = ExtendedErrorBody)),
    security(("bearer" = []))
)]
pub async fn list(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let webhooks: Vec<WebhookRecord> = state
        .repo
        .webhook_configs(caller.account_id)?
        .into_iter()
        .map(|c| WebhookRecord {
            id: c.id,
            kind: c.event_type.as_str(),
            url: c.url,
            headers: Value::Object(c.headers.into_iter().map(|(k, v)| (k, Value::String(v))).collect()),
            is_active: c.is_active,
            created_at: iso(c.created_at),
        })
        .collect();
    Ok(HttpResponse::Ok().json(WebhookList {
        account_id: caller.account_id.get(),
        total: webhooks.len(),
        webhooks,
    }))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resent {
    message: String,
    webhook_log_id: u64,
    sent_at: String,
    /// The receiver's status; 0 when it could not be reached.
    status_code: u16,
    /// Why the receiver could not be reached (beyond the interface).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[utoipa::path(
    post, operation_id = "resend_webhook", path = "/api/resend-webhook/{transactionIdentifier}", tag = "webhooks",
    params(("transactionIdentifier" = String, Path, description = "numeric id, transactionId, externalId or end-to-end id")),
    request_body(content = super::schemas::ResendRequest, description = "optional {url}: send there this once instead of the configured URL"),
    responses(
        (status = 200, description = "Sent once, whatever the receiver answered", body = Resent),
        (status = 400, description = "Invalid url, or no URL configured nor given", body = ExtendedErrorBody),
        (status = 401, body = ExtendedErrorBody),
        (status = 404, description = "Unknown, or another account's, transaction", body = ExtendedErrorBody),
        (status = 429, description = "More than 60 calls in a minute; see Retry-After", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn resend(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    super::rate_limit(&state.resend_rate, &caller, state.clock.now())?;
    let url = if bytes.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        let obj = request_object(&req, &bytes)?;
        let mut f = Fields::new(&obj);
        let url = url_field(&mut f, false, state.webhook_policy);
        if !f.violations.is_empty() {
            return Err(ApiError::Validation(f.violations));
        }
        url
    };
    let tx = find_own(&state, &caller, &path.into_inner())?
        .ok_or_else(|| ApiError::NotFound("transaction not found".into()))?;
    let log = state
        .webhooks
        .dispatcher
        .send(Resend { tx, url })
        .await
        .map_err(|e| ApiError::Unavailable(Cause::new(e)))?
        .map_err(|e| match e {
            ResendError::NoUrl(_) => ApiError::BadRequest(e.to_string()),
            ResendError::Storage(r) => ApiError::Storage(r),
            ResendError::NotDurable(m) => ApiError::Unavailable(Cause::msg(m)),
        })?;
    Ok(HttpResponse::Ok().json(Resent {
        message: "webhook resent".into(),
        webhook_log_id: log.webhook_log_id,
        sent_at: iso(log.sent_at),
        status_code: log.status_code.unwrap_or(0),
        error: log.error,
    }))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogEntry {
    webhook_log_id: u64,
    /// The transaction's numeric id.
    transaction_id: u64,
    event_type: &'static str,
    webhook_id: String,
    url: String,
    attempt: u32,
    /// The receiver's status; null when it could not be reached (see `error`).
    status_code: Option<u16>,
    error: Option<String>,
    duration_ms: u64,
    sent_at: String,
    outcome: AttemptOutcome,
    next_attempt_at: Option<String>,
}

impl From<DeliveryLog> for LogEntry {
    fn from(l: DeliveryLog) -> Self {
        LogEntry {
            webhook_log_id: l.webhook_log_id,
            transaction_id: l.transaction_id,
            event_type: l.event_type.as_str(),
            webhook_id: l.webhook_id,
            url: l.url,
            attempt: l.attempt,
            status_code: l.status_code,
            error: l.error,
            duration_ms: l.duration_ms,
            sent_at: iso(l.sent_at),
            outcome: l.outcome,
            next_attempt_at: l.next_attempt_at.map(iso),
        }
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogList {
    account_id: u64,
    logs: Vec<LogEntry>,
    total: usize,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogQuery {
    transaction_id: Option<String>,
    limit: Option<String>,
}

#[utoipa::path(
    get, operation_id = "list_webhook_logs", path = "/api/webhooks/logs", tag = "webhooks",
    params(
        ("transactionId" = Option<String>, Query, description = "only this transaction's attempts (any identifier kind)"),
        ("limit" = Option<u32>, Query, description = "1 to 100, default 50"),
    ),
    responses(
        (status = 200, description = "Attempts, newest first", body = LogList),
        (status = 400, body = ExtendedErrorBody),
        (status = 401, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn logs(
    caller: Caller,
    query: web::Query<LogQuery>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let limit = match query.limit.as_deref().map(str::parse::<usize>) {
        None => WEBHOOK_LOGS_LIMIT_DEFAULT,
        Some(Ok(n)) if (1..=WEBHOOK_LOGS_LIMIT_MAX).contains(&n) => n,
        Some(_) => {
            return Err(ApiError::Validation(vec![super::error::Violation::new(
                "limit",
                format!("must be an integer from 1 to {WEBHOOK_LOGS_LIMIT_MAX}"),
            )]))
        }
    };
    let transaction = match &query.transaction_id {
        None => None,
        Some(id) => Some(
            find_own(&state, &caller, id)?
                .ok_or_else(|| ApiError::NotFound("transaction not found".into()))?
                .local_id,
        ),
    };
    let logs: Vec<LogEntry> = state
        .repo
        .delivery_logs(caller.account_id, transaction, limit)?
        .into_iter()
        .map(LogEntry::from)
        .collect();
    Ok(HttpResponse::Ok().json(LogList { account_id: caller.account_id.get(), total: logs.len(), logs }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::body::testing::{object, violations};
    use serde_json::json;

    #[test]
    fn every_configuration_rule_is_checked_and_names_its_field() {
        let h = |k: &str| json!({"key": k, "value": "v"});
        let cases = [
            (json!({"eventType": "cash_out"}), "url"),
            (json!({"url": "http://hooks.example.com", "eventType": "cash_out"}), "url"),
            (json!({"url": "ftp://hooks.example.com", "eventType": "cash_out"}), "url"),
            (json!({"url": "not a url", "eventType": "cash_out"}), "url"),
            (json!({"url": "https://hooks.example.com", "eventType": "CASH_OUT"}), "eventType"),
            (json!({"url": "https://hooks.example.com"}), "eventType"),
            (
                json!({"url": "https://hooks.example.com", "eventType": "cash_out", "headers": [h("a"), h("b"), h("c"), h("d"), h("e"), h("f")]}),
                "headers",
            ),
            (
                json!({"url": "https://hooks.example.com", "eventType": "cash_out", "headers": [{"key": "X-A"}]}),
                "headers[0]",
            ),
            (
                json!({"url": "https://hooks.example.com", "eventType": "cash_out", "headers": [h("bad name")]}),
                "headers[0].key",
            ),
            (
                json!({"url": "https://hooks.example.com", "eventType": "cash_out", "headers": [{"key": "X-A", "value": "a\u{1}"}]}),
                "headers[0].value",
            ),
        ];
        for (body, field) in cases {
            let v = violations(read_config(&object(&body.to_string()), Policy::default()).err().unwrap());
            assert_eq!(v[0].0, field, "{body}");
        }
        for blocked in [
            "host",
            "Content-Length",
            "connection",
            "transfer-encoding",
            "content-type",
            "User-Agent",
            "webhook-signature",
        ] {
            let body =
                json!({"url": "https://hooks.example.com", "eventType": "cash_out", "headers": [h(blocked)]});
            let v = violations(read_config(&object(&body.to_string()), Policy::default()).err().unwrap());
            assert!(v[0].1.contains("reserved"), "{blocked}: {v:?}");
        }
        let five = json!({"url": "https://hooks.example.com", "eventType": "cash_out", "headers": [h("a"), h("b"), h("c"), h("d"), h("e")]});
        let (url, event_type, headers) = read_config(&object(&five.to_string()), Policy::default()).unwrap();
        assert_eq!(
            (url.as_str(), event_type, headers.len()),
            ("https://hooks.example.com", EventType::CashOut, 5)
        );
        let plain = json!({"url": "http://hooks.example.com", "eventType": "cash_out"});
        let http = Policy { allow_http: true, allow_private: false };
        assert!(read_config(&object(&plain.to_string()), http).is_ok(), "plain http when allowed");
    }

    #[test]
    fn a_host_that_can_only_be_local_is_refused_unless_private_addresses_are_allowed() {
        let local = [
            "https://169.254.169.254/latest",
            "https://127.0.0.1/",
            "https://127.1.2.3:8443/",
            "https://10.0.0.1/",
            "https://172.16.0.1/",
            "https://192.168.1.1/",
            "https://100.64.0.1/",
            "https://0.0.0.0/",
            "https://[::1]/",
            "https://[fe80::1]/",
            "https://[fd00::1]/",
            "https://[::ffff:10.0.0.1]/",
            "https://localhost/",
            "https://LocalHost./",
            "https://api.localhost/",
        ];
        let strict = Policy::default();
        let lenient = Policy { allow_http: false, allow_private: true };
        for url in local {
            let e = check_url(url, strict).unwrap_err();
            assert!(e.contains("PIXGW_WEBHOOK_ALLOW_PRIVATE"), "{url}: {e}");
            assert_eq!(check_url(url, lenient), Ok(()), "{url}");
        }
        // A public address, and names: those are checked where they resolve, when sending.
        for url in [
            "https://8.8.8.8/",
            "https://[2001:4860::8888]/",
            "https://hooks.example.com/",
            "https://localhost.example.com/",
        ] {
            assert_eq!(check_url(url, strict), Ok(()), "{url}");
        }
    }
}
