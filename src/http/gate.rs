//! Whether this node may serve the API now, and the standby's answers.
//!
//! A node on a shared database serves only while it holds the lease (`crate::node`). The
//! HTTP layer does not know the lease, only a [`Gate`]: while it refuses, every route but
//! `/healthz` and `/metrics` answers 503 with `Retry-After` in its family's error shape, so
//! a proxy in front tries another node. A node on the embedded store has no gate.

use std::sync::Arc;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, HttpResponse};
use serde_json::json;

use super::error::ApiError;
use super::AppState;
use crate::cause::Cause;

/// Says whether the API may be served now.
pub trait Gate: Send + Sync {
    /// Why not, if it may not.
    fn refusal(&self) -> Option<String>;
    /// The node's role, for `/healthz` (`leader` or `standby`).
    fn role(&self) -> &'static str;
}

/// Routes served whatever the gate says: they tell an operator or a proxy what the node is.
fn always_served(path: &str) -> bool {
    matches!(path, "/healthz" | "/metrics")
}

/// The middleware of a node with a gate.
pub async fn while_open(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let refusal = match req.app_data::<web::Data<AppState>>().and_then(|s| s.gate.clone()) {
        Some(gate) if !always_served(super::authorize::routed_path(req.request())) => gate.refusal(),
        _ => None,
    };
    match refusal {
        Some(why) => Err(ApiError::Unavailable(Cause::msg(why)).into()),
        None => Ok(next.call(req).await?.map_into_boxed_body()),
    }
}

/// What a standby answers on every API route: 503, try the leader.
pub async fn standby_refusal() -> Result<HttpResponse, ApiError> {
    Err(ApiError::Unavailable(Cause::msg("this node is a standby; the leader serves the API")))
}

/// A standby's `/healthz`: 503 (a proxy's health check routes elsewhere), with its role.
pub async fn standby_health() -> HttpResponse {
    HttpResponse::ServiceUnavailable()
        .insert_header(("Retry-After", super::error::UNAVAILABLE_RETRY_AFTER_SECONDS.to_string()))
        .json(json!({ "status": "standby", "role": "standby" }))
}

/// A standby's `/metrics`: the process metrics.
pub async fn standby_metrics() -> HttpResponse {
    crate::telemetry::record_process_metrics();
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(crate::telemetry::metrics_handle().render())
}

/// A gate that never opens (a standby's app has no state of its own).
pub struct Closed;

impl Gate for Closed {
    fn refusal(&self) -> Option<String> {
        Some("this node is a standby".into())
    }
    fn role(&self) -> &'static str {
        "standby"
    }
}

/// The gate of a node that serves, if any.
pub type SharedGate = Option<Arc<dyn Gate>>;
