//! What the payment routes share: the sandbox scenario header, sending a payment to the
//! account actor, and mapping its outcome to each family's errors.

use actix_web::HttpRequest;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Caller;
use super::error::{ApiError, Business, Violation};
use super::AppState;
use crate::account::{
    AccountActor, GetBalance, Pay, PayError, PayOutcome, PayRequest, Refusal, RegistryError, Traced,
};
use crate::domain::ledger::{Balance, Rejection};
use crate::domain::med::MedRejection;
use crate::domain::refunds::RefundRejection;
use crate::domain::scenario::{PayoutScenario, PAYOUT_SCENARIOS};

pub const SCENARIO_HEADER: &str = "x-sandbox-scenario";

/// The `X-Sandbox-Scenario` of a payment: only sandbox accounts may send it, and only a
/// value of the cash-out family (decisions.md §6).
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
/// (decisions.md §6), after the body was validated like any other.
pub fn refuse_if_provider_down(scenario: Option<PayoutScenario>) -> Result<(), ApiError> {
    match scenario {
        Some(PayoutScenario::ProviderDown) => Err(ApiError::ProviderDown),
        _ => Ok(()),
    }
}

fn registry_error(e: RegistryError) -> ApiError {
    match e {
        RegistryError::NotFound => ApiError::Unauthorized("the access token was revoked"),
        RegistryError::Repo(r) => ApiError::Storage(r),
    }
}

/// Sends a payment to the caller's account actor.
pub async fn pay(
    state: &AppState,
    caller: &Caller,
    req: PayRequest,
) -> Result<Result<PayOutcome, PayError>, ApiError> {
    ask(state, caller, Pay(req)).await
}

/// Sends a message to the caller's account actor and answers its reply; an actor that
/// cannot be reached is a 503.
pub async fn ask<M, T>(state: &AppState, caller: &Caller, msg: M) -> Result<Result<T, PayError>, ApiError>
where
    M: actix::Message<Result = Result<T, PayError>> + Clone + Send + 'static,
    T: Send + 'static,
    AccountActor: actix::Handler<Traced<M>>,
{
    let msg = Traced { msg, request_id: caller.request_id.clone() };
    // An idle actor may stop between the registry's answer and this message: a closed
    // mailbox means the message was never handled, so it goes to a fresh actor.
    for _ in 0..ASK_ATTEMPTS_MAX - 1 {
        let addr = state.registry.get(caller.account_id).map_err(registry_error)?;
        match addr.send(msg.clone()).await {
            Ok(r) => return Ok(r),
            Err(actix::MailboxError::Closed) => tokio::task::yield_now().await,
            Err(e) => return Err(ApiError::Unavailable(e.to_string())),
        }
    }
    let addr = state.registry.get(caller.account_id).map_err(registry_error)?;
    addr.send(msg).await.map_err(|e| ApiError::Unavailable(e.to_string()))
}

/// Sends to an account actor at most this many times (see [`ask`]).
const ASK_ATTEMPTS_MAX: usize = 5;

/// The caller's balance, once everything its actor applied is durable.
pub async fn balance(state: &AppState, caller: &Caller) -> Result<Balance, ApiError> {
    ask(state, caller, GetBalance).await?.map_err(|e| ApiError::Unavailable(e.to_string()))
}

/// Family A: a rejection is a 400 with its code (a QR cash-out's duplicate is 409).
pub fn family_a_error(e: PayError, external_id: &str, duplicate_is_conflict: bool) -> ApiError {
    match e {
        PayError::Refused(Refusal::Ledger(r)) => match r {
            Rejection::DuplicateExternalId { existing } if duplicate_is_conflict => {
                ApiError::Business(Business::DuplicateExternalIdConflict {
                    external_id: external_id.into(),
                    existing,
                })
            }
            Rejection::DuplicateExternalId { existing } => {
                ApiError::Business(Business::DuplicateExternalId {
                    external_id: external_id.into(),
                    existing,
                })
            }
            Rejection::PerTransactionLimit => ApiError::Business(Business::TransactionLimitExceeded),
            Rejection::DailyLimit => ApiError::Business(Business::DailyLimitExceeded),
            Rejection::NightlyLimit => ApiError::Business(Business::NightLimitExceeded),
            Rejection::InsufficientBalance => ApiError::Business(Business::InsufficientBalance),
            Rejection::IdempotencyKeyReused { .. } | Rejection::Overflow => {
                ApiError::Internal(format!("unexpected rejection {r:?}"))
            }
        },
        PayError::Refused(Refusal::BelowProviderMinimum(minimum)) => {
            ApiError::Business(Business::ProviderExpirationBelowMinimum { minimum })
        }
        PayError::Refused(Refusal::NotPayable(status)) => not_payable(status),
        PayError::Refused(Refusal::TxidTaken) => ApiError::Conflict("txid already exists".into()),
        PayError::Refused(Refusal::Refund(r)) => match r {
            RefundRejection::NotReceived => not_received(),
            RefundRejection::DeadlineExceeded => ApiError::Business(Business::RefundDeadlineExceeded),
            RefundRejection::ExceedsRefundable { refundable } => {
                ApiError::Business(Business::RefundExceedsRefundable {
                    refundable: refundable.to_cents_string(),
                })
            }
        },
        PayError::Refused(Refusal::Med(r)) => med_error(r),
        PayError::Refused(Refusal::Bug(m)) | PayError::Internal(m) => ApiError::Internal(m),
        PayError::Unavailable(m) => ApiError::Unavailable(m),
    }
}

/// A refused MED: unknown 404, already ended 409, anything else about the request 400.
pub fn med_error(r: MedRejection) -> ApiError {
    match r {
        MedRejection::NotFound => ApiError::NotFound(r.to_string()),
        MedRejection::Final(_) => ApiError::Conflict(r.to_string()),
        MedRejection::NotReceived => ApiError::Validation(vec![Violation::new("endToEndId", r.to_string())]),
        MedRejection::AmountRequired | MedRejection::AboveOriginal(_) => {
            ApiError::Validation(vec![Violation::new("amount", r.to_string())])
        }
    }
}

fn not_received() -> ApiError {
    ApiError::NotFound("the original transaction is not a received PIX of this account".into())
}

fn not_payable(status: &str) -> ApiError {
    ApiError::Unprocessable(format!("the charge cannot be paid: its status is {status}"))
}

/// Family B: a business rejection is a 422 with a sentence.
pub fn family_b_error(e: PayError) -> ApiError {
    let m = |s: &str| ApiError::Unprocessable(s.to_owned());
    match e {
        PayError::Refused(Refusal::Ledger(r)) => match r {
            Rejection::InsufficientBalance => m("insufficient balance"),
            Rejection::PerTransactionLimit => m("the amount is above the per-transaction limit"),
            Rejection::DailyLimit => m("the amount would exceed the daily limit"),
            Rejection::NightlyLimit => m("the amount would exceed the night limit"),
            Rejection::IdempotencyKeyReused { .. } => {
                m("x-idempotency-key was already used with a different request")
            }
            Rejection::DuplicateExternalId { .. } | Rejection::Overflow => {
                ApiError::Internal(format!("unexpected rejection {r:?}"))
            }
        },
        PayError::Refused(Refusal::BelowProviderMinimum(minimum)) => {
            ApiError::Unprocessable(format!("the expiration is below the provider minimum of {minimum} s"))
        }
        PayError::Refused(Refusal::NotPayable(status)) => not_payable(status),
        PayError::Refused(Refusal::TxidTaken) => ApiError::Conflict("txid already exists".into()),
        PayError::Refused(Refusal::Refund(r)) => match r {
            RefundRejection::NotReceived => not_received(),
            RefundRejection::DeadlineExceeded => m("the refund deadline (89 days after receipt) has passed"),
            RefundRejection::ExceedsRefundable { refundable } => ApiError::Validation(vec![Violation::new(
                "valor",
                format!("exceeds the amount still refundable ({refundable})"),
            )]),
        },
        PayError::Refused(Refusal::Med(r)) => med_error(r),
        PayError::Refused(Refusal::Bug(msg)) | PayError::Internal(msg) => ApiError::Internal(msg),
        PayError::Unavailable(msg) => ApiError::Unavailable(msg),
    }
}

/// The 201 body of the family A payments.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PaymentCreated {
    pub transaction_id: String,
    pub external_id: Option<String>,
    /// `PENDING`, or `ERROR` for a document mismatch found before the debit.
    pub status: &'static str,
    pub generate_time: String,
}

impl From<&PayOutcome> for PaymentCreated {
    fn from(o: &PayOutcome) -> Self {
        PaymentCreated {
            transaction_id: o.tx.transaction_id.to_string(),
            external_id: o.tx.external_id.clone(),
            status: o.tx.status.as_str(),
            generate_time: super::iso(o.tx.created_at),
        }
    }
}
