//! Operations routes (beyond the interface): health, metrics, the OpenAPI document and the
//! docs page. Requests are counted and timed by the access middleware (`access.rs`).

use actix_web::{web, HttpResponse};
use serde::Serialize;
use utoipa::{OpenApi, ToSchema};

use super::error::{ApiError, ExtendedErrorBody};
use super::openapi::ApiDoc;
use super::AppState;
use crate::telemetry::metrics_handle;

#[derive(Serialize, ToSchema)]
pub struct Health {
    /// `ok`
    status: &'static str,
    /// `leader`: this node serves the API (a node on the embedded store always does);
    /// `standby`: another node holds the lease (then the status is 503).
    role: &'static str,
}

#[utoipa::path(
    get, path = "/healthz", tag = "operations",
    responses((status = 200, body = Health), (status = 503, description = "Storage does not answer", body = ExtendedErrorBody))
)]
pub async fn healthz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.repo.ping()?;
    if state.registry.deps().commit.has_failed() {
        return Err(ApiError::Unavailable(crate::cause::Cause::msg("storage failed; restart the server")));
    }
    let role = match &state.gate {
        Some(gate) => {
            if let Some(why) = gate.refusal() {
                return Err(ApiError::Unavailable(crate::cause::Cause::msg(why)));
            }
            gate.role()
        }
        None => "leader",
    };
    Ok(HttpResponse::Ok().json(Health { status: "ok", role }))
}

#[utoipa::path(
    get, operation_id = "prometheus_metrics", path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain"))
)]
pub async fn metrics(state: actix_web::web::Data<super::AppState>) -> HttpResponse {
    metrics::gauge!("pixgw_account_actors").set(state.registry.live_count() as f64);
    metrics::gauge!("pixgw_commit_queue_depth").set(state.registry.deps().commit.queue_depth() as f64);
    crate::telemetry::record_process_metrics();
    HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(metrics_handle().render())
}

#[utoipa::path(
    get, operation_id = "openapi_document", path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "This document", content_type = "application/json"))
)]
pub async fn openapi() -> HttpResponse {
    HttpResponse::Ok().json(ApiDoc::openapi())
}

#[utoipa::path(
    get, path = "/docs", tag = "operations",
    responses((status = 308, description = "Redirect to the browsable docs page at /docs/"))
)]
pub async fn docs_redirect() -> HttpResponse {
    HttpResponse::PermanentRedirect().insert_header(("Location", "/docs/")).finish()
}
