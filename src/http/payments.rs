//! What the payment routes share: the sandbox scenario header, the provider-down
//! scenario, sending a payment, and the 201 body of family A's payments. Their refusals are
//! answered by `error::rejection`'s table.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use super::ask::ask;
use super::auth::Caller;
use super::error::{ApiError, Violation};
use super::AppState;
use crate::account::{Pay, PayOutcome, PayRequest};
use crate::domain::scenario::{PayoutScenario, PAYOUT_SCENARIOS};

pub const SCENARIO_HEADER: &str = "x-sandbox-scenario";

/// The routes that read `X-Sandbox-Scenario` (method, path pattern). Every other route
/// refuses the header with 400 rather than ignore it: a client testing an outcome must not
/// believe it was played when it was not.
pub const SCENARIO_ROUTES: [(&str, &str); 8] = [
    ("POST", "/api/pix/cash-out"),
    ("POST", "/api/pix/cash-out-qrcode"),
    ("POST", "/api/pix/cash-in"),
    ("POST", "/api/pix/refund-in/{id}"),
    ("PUT", "/pix/{e2eid}/devolucao/{id}"),
    ("POST", "/dict/pix"),
    ("PUT", "/cobr/{txid}"),
    ("POST", "/cobr"),
];

/// Middleware: a request that sends `X-Sandbox-Scenario` to a route that takes none gets
/// 400, in the route's error shape, before anything runs. Unknown paths stay 404.
pub async fn scenario_only_where_taken(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    if req.headers().contains_key(SCENARIO_HEADER) {
        if let Some(pattern) = super::authorize::routed_pattern(req.request()) {
            let method = req.method().as_str();
            if !SCENARIO_ROUTES.iter().any(|(m, p)| *m == method && *p == pattern) {
                let e = ApiError::Validation(vec![Violation::new(
                    "X-Sandbox-Scenario",
                    "is not taken by this route: only the payment routes of sandbox accounts take one",
                )]);
                // Kept as an HttpResponse, the error stays attached for `error::envelope`.
                let (request, _) = req.into_parts();
                return Ok(ServiceResponse::new(request, HttpResponse::from_error(e)));
            }
        }
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// The `X-Sandbox-Scenario` of a payment: only sandbox accounts may send it, and only a
/// value of the cash-out family (interface.md "Sandbox scenarios").
pub fn payout_scenario(req: &HttpRequest, caller: &Caller) -> Result<Option<PayoutScenario>, ApiError> {
    let Some(raw) = req.headers().get(SCENARIO_HEADER) else { return Ok(None) };
    let fail = |m: String| ApiError::Validation(vec![Violation::new("X-Sandbox-Scenario", m)]);
    if !caller.sandbox {
        return Err(fail("is only accepted for sandbox accounts".into()));
    }
    raw.to_str()
        .ok()
        .and_then(PayoutScenario::parse)
        .map(Some)
        .ok_or_else(|| fail(format!("must be one of {PAYOUT_SCENARIOS}")))
}

/// `PROVIDER_DOWN`: the provider is unreachable; answer 500 and record nothing
/// (interface.md "Sandbox scenarios"), after the body was validated like any other.
pub fn refuse_if_provider_down(scenario: Option<PayoutScenario>) -> Result<(), ApiError> {
    match scenario {
        Some(PayoutScenario::ProviderDown) => Err(ApiError::ProviderDown),
        _ => Ok(()),
    }
}

/// Who holds `key`, for a payment of `caller` that will carry `end_to_end_id`: an account
/// of this gateway (its receiving key, paid on us whatever the rail), else whoever the
/// directory of the caller's rail names. A lookup the directory refuses (too many, or
/// unreachable) refuses the payment before anything is debited.
pub async fn payee_of(
    state: &AppState,
    caller: &Caller,
    key: &crate::domain::pix_key::DirectoryKey,
    end_to_end_id: Option<&str>,
) -> Result<crate::rail::keys::Answer, ApiError> {
    use crate::rail::keys::{Answer, LookupError, Payee};
    if let Some(id) = state.repo.account_by_receiving_key(&key.key)? {
        if let Some(a) = state.repo.account(id)? {
            return Ok(Answer::Found(Box::new(Payee {
                name: a.profile.name.as_str().to_owned(),
                document: a.profile.document.to_string(),
                ispb: crate::domain::transaction::gateway_ispb().to_owned(),
                bank: Some(crate::rail::sim::bank::gateway_bank()),
                rail: None,
            })));
        }
    }
    state.keys.payee(caller.sandbox, caller.account_id, key, end_to_end_id).await.map_err(|e| match e {
        LookupError::RateLimited(wait) => {
            ApiError::RateLimited { retry_after_seconds: wait.as_secs().max(1) }
        }
        LookupError::Unavailable(why) => {
            tracing::warn!(error = %why, "the key directory did not answer; the payment is refused");
            ApiError::DirectoryDown
        }
    })
}

/// Sends a payment to the caller's account actor.
pub async fn pay(state: &AppState, caller: &Caller, req: PayRequest) -> Result<PayOutcome, ApiError> {
    // The SPI rail cannot send more in time: refused before anything is debited, rather
    // than acknowledged and failed once the payout's bound passes.
    if !caller.sandbox && state.rail_backlog.as_ref().is_some_and(|b| b.is_full()) {
        metrics::counter!("pixgw_spi_payments_refused_backlog_total").increment(1);
        return Err(ApiError::RailBusy);
    }
    Ok(ask(state, caller, Pay(req)).await??)
}

/// The 201 body of the family A payments.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"transactionId": "5cc07301-67d0-4d59-ab5c-c0730167d04e", "externalId": "order-1001",
    "status": "PENDING", "generateTime": "2026-11-25T12:00:00.000Z"}))]
pub struct PaymentCreated {
    pub transaction_id: String,
    pub external_id: Option<String>,
    /// `PENDING`, or `ERROR` for a document mismatch found before the debit.
    pub status: &'static str,
    pub generate_time: String,
    /// Present only when the risk rule flagged the payment: it went, and this says why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk: Option<RiskView>,
}

/// What the risk rule said of a payment that went (docs/decisions.md "Fraud marks and the
/// risk rule"): only a flag is shown, since a refused payment is a 400 and a passed one has
/// nothing to say.
#[derive(Serialize, ToSchema, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"verdict": "FLAG", "reason": "infraction reports are open against the payee's key or its owner"}))]
pub struct RiskView {
    /// Always `FLAG`.
    pub verdict: &'static str,
    pub reason: String,
}

impl RiskView {
    /// The flag a payment carries, if the risk rule flagged it.
    pub fn of(tx: &crate::domain::transaction::Transaction) -> Option<RiskView> {
        let reason = tx.rail.as_ref()?.risk.clone()?;
        Some(RiskView { verdict: "FLAG", reason })
    }
}

impl From<&PayOutcome> for PaymentCreated {
    fn from(o: &PayOutcome) -> Self {
        PaymentCreated::of(&o.tx)
    }
}

impl PaymentCreated {
    /// The answer of the request that made `tx` (its status as it is now).
    pub fn of(tx: &crate::domain::transaction::Transaction) -> PaymentCreated {
        PaymentCreated {
            transaction_id: tx.transaction_id.to_string(),
            external_id: tx.external_id.clone(),
            status: tx.status.as_str(),
            generate_time: super::iso(tx.created_at),
            risk: RiskView::of(tx),
        }
    }
}
