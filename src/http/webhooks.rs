//! Webhook configuration: `POST /api/webhooks` (upsert per event type) and
//! `GET /api/webhooks` (decisions.md §7). Delivery is not built yet.

use actix_web::http::Uri;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::auth::Caller;
use super::body::{request_object, Fields};
use super::error::{ApiError, ExtendedErrorBody};
use super::{iso, AppState};
use crate::domain::events::EventType;
use crate::domain::webhooks::{check_header, WEBHOOK_HEADERS_MAX, WEBHOOK_URL_LEN_MAX};
use crate::store::WebhookConfig;

/// An http(s) URL with a host; plain http only when allowed.
fn check_url(url: &str, allow_http: bool) -> Result<(), &'static str> {
    let uri: Uri = url.parse().map_err(|_| "must be an absolute URL")?;
    match uri.scheme_str() {
        Some("https") => {}
        Some("http") if allow_http => {}
        _ => return Err("must be an https URL"),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err("must name a host");
    }
    Ok(())
}

fn headers(f: &mut Fields<'_>, obj: &serde_json::Map<String, Value>) -> Vec<(String, String)> {
    let items = match obj.get("headers") {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(items)) if items.len() <= WEBHOOK_HEADERS_MAX => items,
        Some(_) => {
            f.fail("headers", format!("must be an array of at most {WEBHOOK_HEADERS_MAX} {{key, value}}"));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let (Some(k), Some(v)) =
            (item.get("key").and_then(Value::as_str), item.get("value").and_then(Value::as_str))
        else {
            f.fail(&format!("headers[{i}]"), "must be {key, value} strings");
            continue;
        };
        match check_header(k, v) {
            Ok(()) => out.push((k.to_owned(), v.to_owned())),
            Err(e) => f.fail(&format!("headers[{i}]"), format!("{k}: {e}")),
        }
    }
    out
}

#[derive(Serialize, ToSchema)]
pub struct Configured {
    success: bool,
    message: String,
}

#[utoipa::path(
    post, path = "/api/webhooks", tag = "webhooks",
    request_body(content = Object, description = "{url (https), eventType, headers?: [{key, value}] (at most 5)}"),
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
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    let url =
        f.text("url", true, WEBHOOK_URL_LEN_MAX).and_then(|u| match check_url(u, state.webhook_allow_http) {
            Ok(()) => Some(u.to_owned()),
            Err(e) => {
                f.fail("url", e);
                None
            }
        });
    let event_type = f.string("eventType", true).and_then(|t| {
        let parsed = EventType::parse(t);
        if parsed.is_none() {
            f.fail(
                "eventType",
                "must be one of cash_in, cash_out, refund_in, refund_out, med_created, med_accepted, med_rejected",
            );
        }
        parsed
    });
    let headers = headers(&mut f, &obj);
    let (Some(url), Some(event_type), true) = (url, event_type, f.violations.is_empty()) else {
        return Err(ApiError::Validation(f.violations));
    };
    let now = state.clock.now();
    let existing =
        state.repo.webhook_configs(caller.account_id)?.into_iter().find(|c| c.event_type == event_type);
    let created = existing.is_none();
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
    };
    state.repo.put_webhook_config(&config)?;
    let message =
        format!("webhook for {} {}", event_type.as_str(), if created { "created" } else { "updated" });
    let body = Configured { success: true, message };
    Ok(if created { HttpResponse::Created().json(body) } else { HttpResponse::Ok().json(body) })
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookRecord {
    id: u64,
    #[serde(rename = "type")]
    kind: &'static str,
    url: String,
    #[schema(value_type = Object)]
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
    get, path = "/api/webhooks", tag = "webhooks",
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
