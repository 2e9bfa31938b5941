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
    if state.keys.rail_name() == "spi" {
        rail_gauges(&state);
    }
    crate::telemetry::record_process_metrics();
    HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(metrics_handle().render())
}

/// The SPI rail's state, read as Prometheus scrapes: payouts waiting for the SPI by age,
/// unmatched items open, the send queue, and how long since ICOM last answered. A read the
/// store fails leaves the last value (and says why in the log).
fn rail_gauges(state: &super::AppState) {
    use crate::rail::spi::sent::ANSWER_WITHIN;
    let now = state.clock.now();
    let ours = crate::domain::transaction::gateway_ispb();
    match state.repo.pending_transactions() {
        Ok(txs) => {
            let waiting = txs.iter().filter(|t| crate::domain::reconcile::pending_payout(t, ours));
            let (mut fresh, mut aged) = (0u64, 0u64);
            for t in waiting {
                if crate::domain::reconcile::aged_payout(t, ours, now, ANSWER_WITHIN) {
                    aged += 1;
                } else {
                    fresh += 1;
                }
            }
            metrics::gauge!("pixgw_spi_payouts_pending", "age" => "within_limit").set(fresh as f64);
            metrics::gauge!("pixgw_spi_payouts_pending", "age" => "aged").set(aged as f64);
        }
        Err(e) => tracing::warn!(error = %e, "the pending payouts could not be counted"),
    }
    match state.repo.unmatched_items() {
        Ok(items) => metrics::gauge!("pixgw_spi_unmatched_open")
            .set(items.iter().filter(|i| i.resolution.is_none()).count() as f64),
        Err(e) => tracing::warn!(error = %e, "the unmatched items could not be counted"),
    }
    let held = state.rail_hold.as_ref().is_some_and(crate::rail::spi::rail::Hold::is_held);
    metrics::gauge!("pixgw_spi_rail_held").set(if held { 1.0 } else { 0.0 });
    if let Some(b) = &state.rail_backlog {
        crate::rail::spi::rail::record_backlog(b);
    }
    crate::rail::spi::rail::record_rail_gauges();
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
