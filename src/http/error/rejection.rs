//! Every business rejection a client can be answered with, and the one table that gives
//! each its status, code and message in both families.
//!
//! A rejection is a rule saying no: the request was understood and changed nothing. The
//! domain's refusals ([`Refusal`]) and the HTTP layer's own (a `/dict/pix` key missing from
//! the directory, an `Idempotency-Key` reused) all become a [`Rejection`] here, and
//! [`Rejection::parts`] is the only place that says how one is answered. The family
//! changes the status where the two families differ (family A answers most rules with 400
//! and a stable code; family B with 422 and a sentence), so a route never chooses a status.
//!
//! The mapping is total: every variant has an answer in both families, so a combination
//! the routes cannot produce today still answers something a client can act on, never a
//! 500.

use actix_web::http::StatusCode;
use serde_json::{json, Value};

use super::validation::Violation;
use super::{ErrorParts, Family, GENERIC_USER_MESSAGE};
use crate::domain::cobr::CobrError;
use crate::domain::decide::Refusal;
use crate::domain::ledger::Rejection as LedgerRejection;
use crate::domain::med::MedRejection;
use crate::domain::money::Money;
use crate::domain::rec::RecError;
use crate::domain::refunds::RefundRejection;

/// A business rejection (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub enum Rejection {
    /// The account already has a transaction with this externalId (family A), or a
    /// devolução with this id of another value or PIX (family B).
    DuplicateExternalId {
        external_id: Option<String>,
        existing: u64,
    },
    /// The QR cash-out answers a repeated externalId with 409, the other cash-outs with 400.
    DuplicateExternalIdOnQr {
        external_id: String,
        existing: u64,
    },
    /// `/dict/pix`: the `x-idempotency-key` was used with another body.
    DictKeyReused,
    /// The `Idempotency-Key` header was used with another request.
    RequestKeyReused,
    TransactionLimitExceeded,
    DailyLimitExceeded,
    NightLimitExceeded,
    InsufficientBalance,
    /// A sum would leave the range the ledger holds (no sane limit lets this happen).
    AmountOutOfRange,
    /// 89 days have passed since the PIX was received.
    RefundDeadlineExceeded,
    /// Refunds would exceed what was received; `refundable` is what is left.
    RefundExceedsRefundable {
        refundable: Money,
    },
    /// A refund names no received PIX of the account.
    NotReceived,
    /// A return (`/sandbox/refund-out`) names no settled payment of the account.
    NotSettledPayment,
    /// A charge's expiration is below the provider's minimum (seconds).
    ExpirationBelowMinimum {
        minimum: u32,
    },
    /// The charge is not open any more; `status` is its status (family A's name).
    ChargeNotOpen {
        status: &'static str,
    },
    /// A cob with this txid exists.
    TxidTaken,
    /// A payment offers another amount than the charge asks today (`due`).
    AmountNotDue {
        due: Money,
    },
    /// A cobv's price today is beyond the largest amount a payment moves.
    Unpriceable,
    /// A cobv was revised since the revision a change was read from.
    RevisedMeanwhile,
    /// A cobv's revised terms can no longer be paid now.
    PastValidity,
    /// The key is not in the directory (the DICT, before any debit).
    KeyNotInDirectory,
    /// The server runs as a closed wallet (`--rail none`): it pays only its own accounts.
    ExternalPayoutsDisabled,
    /// The risk rule refuses a payment to the payee (domain::risk), with its reason.
    PayeeFraudMarked(&'static str),
    /// `/dict/pix`: the key's institution is in `ispbDeny`.
    InstitutionDenied,
    /// `/dict/pix`: `creditorDocument` is not the key holder's.
    CreditorDocumentMismatch,
    Med(MedRejection),
    /// A Pix Automático recurrence's command refused.
    Rec(RecError),
    /// A recurring charge's command refused.
    Cobr(CobrError),
    /// A MED 2.0 contest refused.
    Recovery(crate::domain::recovery::RecoveryRejection),
}

impl Rejection {
    /// The domain's refusal as a rejection, or `None` for [`Refusal::Bug`], which is not an
    /// answer to the client but an internal error.
    pub fn of(refusal: Refusal) -> Option<Rejection> {
        Some(match refusal {
            Refusal::Ledger(r) => match r {
                LedgerRejection::DuplicateExternalId { existing } => {
                    Rejection::DuplicateExternalId { external_id: None, existing }
                }
                LedgerRejection::IdempotencyKeyReused { .. } => Rejection::DictKeyReused,
                LedgerRejection::PerTransactionLimit => Rejection::TransactionLimitExceeded,
                LedgerRejection::DailyLimit => Rejection::DailyLimitExceeded,
                LedgerRejection::NightlyLimit => Rejection::NightLimitExceeded,
                LedgerRejection::InsufficientBalance => Rejection::InsufficientBalance,
                LedgerRejection::Overflow => Rejection::AmountOutOfRange,
            },
            Refusal::BelowProviderMinimum(minimum) => Rejection::ExpirationBelowMinimum { minimum },
            Refusal::NotPayable(status) => Rejection::ChargeNotOpen { status },
            Refusal::TxidTaken => Rejection::TxidTaken,
            Refusal::AmountNotDue(due) => Rejection::AmountNotDue { due },
            Refusal::Unpriceable => Rejection::Unpriceable,
            Refusal::RevisedMeanwhile => Rejection::RevisedMeanwhile,
            Refusal::PastValidity => Rejection::PastValidity,
            Refusal::Refund(r) => match r {
                RefundRejection::NotReceived => Rejection::NotReceived,
                RefundRejection::NotSettledPayment => Rejection::NotSettledPayment,
                RefundRejection::DeadlineExceeded => Rejection::RefundDeadlineExceeded,
                RefundRejection::ExceedsRefundable { refundable } => {
                    Rejection::RefundExceedsRefundable { refundable }
                }
            },
            Refusal::Med(r) => Rejection::Med(r),
            Refusal::Rec(r) => Rejection::Rec(r),
            Refusal::Cobr(r) => Rejection::Cobr(r),
            Refusal::Recovery(r) => Rejection::Recovery(r),
            Refusal::Bug(_) => return None,
        })
    }

    /// The table: status, code and message of every rejection, in `family`.
    pub fn parts(&self, family: Family) -> ErrorParts {
        use StatusCode as S;
        let b = family == Family::Simple;
        // (status in family A, status in family B, code, whether the code is also the
        // `errorCode`, message, details)
        let (a_status, b_status, code, coded, message, details): (
            S,
            S,
            &'static str,
            bool,
            String,
            Option<Value>,
        ) = match self {
            Rejection::DuplicateExternalId { external_id, existing } => (
                S::BAD_REQUEST,
                S::CONFLICT,
                "PIX_DUPLICATE_EXTERNAL_ID",
                true,
                if b {
                    "this id is already used with another valor or PIX".into()
                } else {
                    "externalId already used for this account".into()
                },
                Some(json!({"externalId": external_id, "existingTransactionId": existing})),
            ),
            Rejection::DuplicateExternalIdOnQr { external_id, existing } => (
                S::CONFLICT,
                S::CONFLICT,
                "PIX_DUPLICATE_EXTERNAL_ID",
                true,
                "externalId already used for this account".into(),
                Some(json!({"externalId": external_id, "existingTransactionId": existing})),
            ),
            Rejection::DictKeyReused => (
                S::UNPROCESSABLE_ENTITY,
                S::UNPROCESSABLE_ENTITY,
                "UNPROCESSABLE",
                false,
                "x-idempotency-key was already used with a different request".into(),
                None,
            ),
            Rejection::RequestKeyReused => (
                S::UNPROCESSABLE_ENTITY,
                S::UNPROCESSABLE_ENTITY,
                "UNPROCESSABLE",
                false,
                "this Idempotency-Key was used with another request (method, path or body)".into(),
                None,
            ),
            Rejection::TransactionLimitExceeded => (
                S::BAD_REQUEST,
                S::UNPROCESSABLE_ENTITY,
                "PIX_TRANSACTION_LIMIT_EXCEEDED",
                true,
                "the amount is above the per-transaction limit".into(),
                None,
            ),
            Rejection::DailyLimitExceeded => (
                S::BAD_REQUEST,
                S::UNPROCESSABLE_ENTITY,
                "PIX_DAILY_LIMIT_EXCEEDED",
                true,
                "the amount would exceed the daily limit".into(),
                None,
            ),
            Rejection::NightLimitExceeded => (
                S::BAD_REQUEST,
                S::UNPROCESSABLE_ENTITY,
                "PIX_NIGHT_LIMIT_EXCEEDED",
                true,
                "the amount would exceed the night limit (20:00 to 06:00)".into(),
                None,
            ),
            Rejection::InsufficientBalance => (
                S::BAD_REQUEST,
                S::UNPROCESSABLE_ENTITY,
                "PIX_INSUFFICIENT_BALANCE",
                true,
                "insufficient balance: the available balance is below value plus fee".into(),
                None,
            ),
            Rejection::AmountOutOfRange => (
                S::UNPROCESSABLE_ENTITY,
                S::UNPROCESSABLE_ENTITY,
                "UNPROCESSABLE",
                false,
                "the amount would take a sum beyond what the ledger holds".into(),
                None,
            ),
            Rejection::RefundDeadlineExceeded => (
                S::BAD_REQUEST,
                S::UNPROCESSABLE_ENTITY,
                "REFUND_DEADLINE_EXCEEDED",
                true,
                "the refund deadline (89 days after receipt) has passed".into(),
                None,
            ),
            Rejection::RefundExceedsRefundable { refundable } => (
                S::BAD_REQUEST,
                S::BAD_REQUEST,
                "REFUND_AMOUNT_EXCEEDS_REFUNDABLE",
                true,
                if b {
                    format!("valor exceeds the amount still refundable ({refundable})")
                } else {
                    "refunds would exceed the amount received".into()
                },
                Some(json!({"refundable": refundable.to_cents_string()})),
            ),
            Rejection::NotReceived => (
                S::NOT_FOUND,
                S::NOT_FOUND,
                "NOT_FOUND",
                false,
                "the original transaction is not a received PIX of this account".into(),
                None,
            ),
            Rejection::NotSettledPayment => (
                S::NOT_FOUND,
                S::NOT_FOUND,
                "NOT_FOUND",
                false,
                "no confirmed payment of this account with this end-to-end id".into(),
                None,
            ),
            Rejection::ExpirationBelowMinimum { minimum } => (
                S::BAD_REQUEST,
                S::UNPROCESSABLE_ENTITY,
                "PROVIDER_EXPIRATION_BELOW_MINIMUM",
                true,
                format!("the expiration is below the provider's minimum of {minimum} s"),
                Some(json!({"minimumExpirationTime": minimum})),
            ),
            // Family B meets a closed charge only when it cancels a cob (PATCH): a state
            // conflict. Family A meets it when paying one: the payment cannot be made.
            Rejection::ChargeNotOpen { status } => (
                S::UNPROCESSABLE_ENTITY,
                S::CONFLICT,
                "UNPROCESSABLE",
                false,
                if b {
                    "the charge is no longer ATIVA".into()
                } else {
                    format!("the charge cannot be paid: its status is {status}")
                },
                None,
            ),
            Rejection::TxidTaken => {
                (S::CONFLICT, S::CONFLICT, "CONFLICT", false, "txid already exists".into(), None)
            }
            // A wrong amount, told as every wrong amount is: a violation of the field, code
            // HTTP_ERROR and errorCode PIX_INVALID_AMOUNT (family A), with what is due.
            Rejection::AmountNotDue { due } => {
                let v = crate::http::error::Violation::new(
                    "amount",
                    format!("must be the amount due today, {due}"),
                );
                return ErrorParts {
                    status: if b { S::UNPROCESSABLE_ENTITY } else { S::BAD_REQUEST },
                    code: "HTTP_ERROR",
                    message: json!([v.text()]),
                    user_message: "Some fields of the request are invalid.",
                    details: Some(json!({"violations": [v], "amountDue": due.to_cents_string()})),
                    error_code: Some("PIX_INVALID_AMOUNT"),
                };
            }
            Rejection::Unpriceable => (
                S::UNPROCESSABLE_ENTITY,
                S::UNPROCESSABLE_ENTITY,
                "UNPROCESSABLE",
                false,
                "the amount due today is beyond the largest amount a PIX moves".into(),
                None,
            ),
            Rejection::PastValidity => (
                S::BAD_REQUEST,
                S::BAD_REQUEST,
                "HTTP_ERROR",
                false,
                "with these terms the charge could no longer be paid today".into(),
                None,
            ),
            Rejection::RevisedMeanwhile => (
                S::CONFLICT,
                S::CONFLICT,
                "CONFLICT",
                false,
                "the charge was revised meanwhile: read it again and send the change again".into(),
                None,
            ),
            Rejection::KeyNotInDirectory => (
                S::BAD_REQUEST,
                S::UNPROCESSABLE_ENTITY,
                if b { "UNPROCESSABLE" } else { "PIX_KEY_NOT_FOUND" },
                !b,
                "pixKey not found in the directory".into(),
                None,
            ),
            Rejection::PayeeFraudMarked(why) => (
                S::BAD_REQUEST,
                S::UNPROCESSABLE_ENTITY,
                if b { "UNPROCESSABLE" } else { "PIX_PAYEE_FRAUD_MARKED" },
                !b,
                format!("the payment is refused: {why}; nothing was debited"),
                None,
            ),
            Rejection::ExternalPayoutsDisabled => (
                S::BAD_REQUEST,
                S::UNPROCESSABLE_ENTITY,
                if b { "UNPROCESSABLE" } else { "PIX_EXTERNAL_PAYOUTS_DISABLED" },
                !b,
                "this server pays only accounts of its own (it runs without a rail)".into(),
                None,
            ),
            Rejection::InstitutionDenied => (
                S::UNPROCESSABLE_ENTITY,
                S::UNPROCESSABLE_ENTITY,
                "UNPROCESSABLE",
                false,
                "the key's institution is in ispbDeny".into(),
                None,
            ),
            Rejection::CreditorDocumentMismatch => (
                S::UNPROCESSABLE_ENTITY,
                S::UNPROCESSABLE_ENTITY,
                "UNPROCESSABLE",
                false,
                "creditorDocument does not match the key holder".into(),
                None,
            ),
            Rejection::Med(r) => return med_parts(r),
            Rejection::Rec(r) => return rec_parts(r, family),
            Rejection::Cobr(r) => return cobr_parts(r, family),
            Rejection::Recovery(r) => {
                use crate::domain::recovery::RecoveryRejection as R;
                let (status, code) = match r {
                    R::NotFound => (S::NOT_FOUND, "NOT_FOUND"),
                    R::NotSent => (S::CONFLICT, "PIX_NOT_CONTESTABLE"),
                    R::NotSettled => (S::CONFLICT, "PIX_NOT_SETTLED"),
                    R::TooLate => (S::CONFLICT, "CONTEST_TOO_LATE"),
                    R::AlreadyContested => (S::CONFLICT, "ALREADY_CONTESTED"),
                    R::RailRequired => (S::CONFLICT, "DICT_REQUIRED"),
                    R::NotOpened => (S::CONFLICT, "CONTEST_NOT_OPENED"),
                    R::NotAmendable => (S::CONFLICT, "CONTEST_NOT_AMENDABLE"),
                    R::DetailsRequired => (S::BAD_REQUEST, "PIX_VALIDATION_ERROR"),
                };
                (status, status, code, true, r.to_string(), None)
            }
        };
        ErrorParts {
            status: if b { b_status } else { a_status },
            code,
            message: Value::String(message),
            user_message: GENERIC_USER_MESSAGE,
            details,
            error_code: coded.then_some(code),
        }
    }
}

/// The two shapes of a refusal told in one text: a 400 naming the field it is about, or a
/// status and code of its own.
fn field_or_status(
    text: String,
    family: Family,
) -> (impl Fn(&str) -> ErrorParts, impl Fn(StatusCode, &'static str) -> ErrorParts) {
    let for_field = text.clone();
    let field =
        move |f: &str| super::ApiError::Validation(vec![Violation::new(f, for_field.clone())]).parts(family);
    let status = move |status, code| ErrorParts {
        status,
        code,
        message: Value::String(text.clone()),
        user_message: GENERIC_USER_MESSAGE,
        details: None,
        error_code: None,
    };
    (field, status)
}

/// A refused MED: unknown 404, already ended 409, anything else about the request is a
/// 400 naming its field.
fn med_parts(r: &MedRejection) -> ErrorParts {
    let (field, status) = field_or_status(r.to_string(), Family::Extended);
    match r {
        MedRejection::NotFound => status(StatusCode::NOT_FOUND, "NOT_FOUND"),
        MedRejection::Final(_) => status(StatusCode::CONFLICT, "CONFLICT"),
        MedRejection::NotReceived => field("endToEnd"),
        MedRejection::AmountRequired | MedRejection::AboveOriginal(_) => field("amount"),
        MedRejection::EvidenceFull => status(StatusCode::CONFLICT, "CONFLICT"),
    }
}

/// A refused recurrence command: unknown 404, a state that does not allow it 409, anything
/// about the request a 400 naming its field.
fn rec_parts(r: &RecError, family: Family) -> ErrorParts {
    let (field, status) = field_or_status(r.to_string(), family);
    match r {
        RecError::NotFound | RecError::SolicitationNotFound | RecError::LocationNotFound => {
            status(StatusCode::NOT_FOUND, "NOT_FOUND")
        }
        RecError::LocationTaken(_) => field("loc"),
        RecError::FirstChargeNotFound => field("ativacao.dadosJornada.txid"),
        RecError::NoQrJourney | RecError::FirstChargeUnpaid | RecError::PayerOnUs(_) => {
            status(StatusCode::CONFLICT, "CONFLICT")
        }
        RecError::Final(_)
        | RecError::NotAwaitingAuthorisation(_)
        | RecError::SolicitationAwaiting
        | RecError::SolicitationClosed(_)
        | RecError::NotAuthorised(_)
        | RecError::TooManySolicitations => status(StatusCode::CONFLICT, "CONFLICT"),
        RecError::ExpiryInThePast | RecError::ExpiryTooFar => field("calendario.dataExpiracaoSolicitacao"),
        RecError::MaximumOnFixedValue | RecError::MaximumBelowMinimum(_) => field("valorMaximo"),
        RecError::StartsBeforeToday | RecError::StartsAfterEnd => field("calendario.dataInicial"),
    }
}

/// A refused recurring charge: unknown 404, a state or cycle that does not allow it 409, a
/// rule of the arrangement a 400 naming its field.
fn cobr_parts(r: &CobrError, family: Family) -> ErrorParts {
    use crate::domain::recurrence::RecurrenceRejection as R;
    let (field, status) = field_or_status(r.to_string(), family);
    match r {
        CobrError::NotFound => status(StatusCode::NOT_FOUND, "NOT_FOUND"),
        CobrError::TxidTaken
        | CobrError::RecurrenceNotApproved(_)
        | CobrError::CycleCharged(_)
        | CobrError::Final(_)
        | CobrError::NothingToRetry
        | CobrError::UnderWay(_)
        | CobrError::CancelClosed(..)
        | CobrError::RetryNotPayers => status(StatusCode::CONFLICT, "CONFLICT"),
        CobrError::Rule(rule) => match rule {
            R::BeforeFirstCycle | R::AfterLastDate | R::OutsideSendWindow(_) => {
                field("calendario.dataDeVencimento")
            }
            R::NotTheFixedValue(_) | R::BelowMinimum(_) => field("valor.original"),
            R::RetriesNotAllowed
            | R::TooManyRetries
            | R::RetryOutsideWindow
            | R::RetryInThePast
            | R::RetrySameDate => field("data"),
            R::UnknownPeriodicity => field("periodicidade"),
            R::UnknownRetryPolicy => field("politicaRetentativa"),
            R::EndsBeforeStart => field("dataFinal"),
            R::BadAutoRetryDays => field("automacao.diasRetentativa"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::med::MedError;

    fn every_rejection() -> Vec<Rejection> {
        vec![
            Rejection::DuplicateExternalId { external_id: Some("e".into()), existing: 7 },
            Rejection::DuplicateExternalIdOnQr { external_id: "e".into(), existing: 7 },
            Rejection::DictKeyReused,
            Rejection::RequestKeyReused,
            Rejection::TransactionLimitExceeded,
            Rejection::DailyLimitExceeded,
            Rejection::NightLimitExceeded,
            Rejection::InsufficientBalance,
            Rejection::AmountOutOfRange,
            Rejection::RefundDeadlineExceeded,
            Rejection::RefundExceedsRefundable { refundable: Money::parse("2.50").unwrap() },
            Rejection::NotReceived,
            Rejection::NotSettledPayment,
            Rejection::ExpirationBelowMinimum { minimum: 60 },
            Rejection::ChargeNotOpen { status: "PAID" },
            Rejection::TxidTaken,
            Rejection::AmountNotDue { due: Money::parse("101.50").unwrap() },
            Rejection::Unpriceable,
            Rejection::RevisedMeanwhile,
            Rejection::PastValidity,
            Rejection::KeyNotInDirectory,
            Rejection::ExternalPayoutsDisabled,
            Rejection::PayeeFraudMarked("marked"),
            Rejection::InstitutionDenied,
            Rejection::CreditorDocumentMismatch,
            Rejection::Med(MedRejection::NotFound),
            Rejection::Med(MedRejection::Final(MedError::Final("CANCELLED"))),
            Rejection::Med(MedRejection::NotReceived),
            Rejection::Med(MedRejection::AmountRequired),
            Rejection::Med(MedRejection::AboveOriginal(Money::parse("1").unwrap())),
            Rejection::Rec(RecError::NotFound),
            Rejection::Rec(RecError::SolicitationNotFound),
            Rejection::Rec(RecError::Final("CANCELADA")),
            Rejection::Rec(RecError::NotAwaitingAuthorisation("APROVADA")),
            Rejection::Rec(RecError::SolicitationAwaiting),
            Rejection::Rec(RecError::SolicitationClosed("ACEITA")),
            Rejection::Rec(RecError::TooManySolicitations),
            Rejection::Rec(RecError::ExpiryInThePast),
            Rejection::Rec(RecError::ExpiryTooFar),
            Rejection::Rec(RecError::MaximumOnFixedValue),
            Rejection::Rec(RecError::MaximumBelowMinimum(Money::parse("1").unwrap())),
            Rejection::Rec(RecError::StartsBeforeToday),
            Rejection::Rec(RecError::StartsAfterEnd),
            Rejection::Rec(RecError::NotAuthorised("CRIADA")),
            Rejection::Rec(RecError::LocationNotFound),
            Rejection::Rec(RecError::LocationTaken("RR".into())),
            Rejection::Rec(RecError::FirstChargeNotFound),
            Rejection::Rec(RecError::NoQrJourney),
            Rejection::Rec(RecError::FirstChargeUnpaid),
            Rejection::Rec(RecError::PayerOnUs(7)),
            Rejection::Cobr(CobrError::NotFound),
            Rejection::Cobr(CobrError::TxidTaken),
            Rejection::Cobr(CobrError::CycleCharged(2)),
            Rejection::Cobr(CobrError::NothingToRetry),
            Rejection::Cobr(CobrError::UnderWay(chrono::NaiveDate::from_ymd_opt(2026, 12, 1).unwrap())),
            Rejection::Cobr(CobrError::Rule(
                crate::domain::recurrence::RecurrenceRejection::OutsideSendWindow(1),
            )),
            Rejection::Cobr(CobrError::Rule(crate::domain::recurrence::RecurrenceRejection::RetrySameDate)),
        ]
    }

    #[test]
    fn every_rejection_is_a_client_error_with_a_message_in_both_families() {
        for r in every_rejection() {
            for family in [Family::Extended, Family::Simple] {
                let p = r.parts(family);
                assert!(p.status.is_client_error(), "{r:?} in {family:?}: {}", p.status);
                assert!(!p.code.is_empty());
                let text = match &p.message {
                    Value::String(s) => s.clone(),
                    Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                    other => panic!("{other:?}"),
                };
                assert!(!text.is_empty(), "{r:?}");
            }
        }
    }

    #[test]
    fn family_a_answers_rules_with_400_and_their_code_family_b_with_422() {
        let table = [
            (Rejection::InsufficientBalance, 400, 422, "PIX_INSUFFICIENT_BALANCE"),
            (Rejection::TransactionLimitExceeded, 400, 422, "PIX_TRANSACTION_LIMIT_EXCEEDED"),
            (Rejection::DailyLimitExceeded, 400, 422, "PIX_DAILY_LIMIT_EXCEEDED"),
            (Rejection::NightLimitExceeded, 400, 422, "PIX_NIGHT_LIMIT_EXCEEDED"),
            (Rejection::RefundDeadlineExceeded, 400, 422, "REFUND_DEADLINE_EXCEEDED"),
            (
                Rejection::ExpirationBelowMinimum { minimum: 60 },
                400,
                422,
                "PROVIDER_EXPIRATION_BELOW_MINIMUM",
            ),
            (
                Rejection::DuplicateExternalId { external_id: Some("e".into()), existing: 1 },
                400,
                409,
                "PIX_DUPLICATE_EXTERNAL_ID",
            ),
            (
                Rejection::DuplicateExternalIdOnQr { external_id: "e".into(), existing: 1 },
                409,
                409,
                "PIX_DUPLICATE_EXTERNAL_ID",
            ),
            (Rejection::ChargeNotOpen { status: "PAID" }, 422, 409, "UNPROCESSABLE"),
            (Rejection::TxidTaken, 409, 409, "CONFLICT"),
            (Rejection::AmountNotDue { due: Money::parse("1").unwrap() }, 400, 422, "HTTP_ERROR"),
            (Rejection::RevisedMeanwhile, 409, 409, "CONFLICT"),
            (Rejection::NotReceived, 404, 404, "NOT_FOUND"),
            (Rejection::KeyNotInDirectory, 400, 422, "PIX_KEY_NOT_FOUND"),
            (Rejection::ExternalPayoutsDisabled, 400, 422, "PIX_EXTERNAL_PAYOUTS_DISABLED"),
            (Rejection::PayeeFraudMarked("marked"), 400, 422, "PIX_PAYEE_FRAUD_MARKED"),
        ];
        for (r, a, b, code) in table {
            let pa = r.parts(Family::Extended);
            assert_eq!((pa.status.as_u16(), pa.code), (a, code), "{r:?}");
            assert_eq!(r.parts(Family::Simple).status.as_u16(), b, "{r:?}");
        }
        let p = Rejection::InsufficientBalance.parts(Family::Extended);
        assert_eq!(p.error_code, Some("PIX_INSUFFICIENT_BALANCE"));
        assert_eq!(
            Rejection::KeyNotInDirectory.parts(Family::Extended).error_code,
            Some("PIX_KEY_NOT_FOUND")
        );
        assert_eq!(Rejection::KeyNotInDirectory.parts(Family::Simple).code, "UNPROCESSABLE");
    }

    #[test]
    fn every_domain_refusal_but_a_bug_is_a_rejection() {
        use crate::domain::ledger::Rejection as L;
        let refusals = [
            Refusal::Ledger(L::DuplicateExternalId { existing: 1 }),
            Refusal::Ledger(L::IdempotencyKeyReused { existing: 1 }),
            Refusal::Ledger(L::PerTransactionLimit),
            Refusal::Ledger(L::DailyLimit),
            Refusal::Ledger(L::NightlyLimit),
            Refusal::Ledger(L::InsufficientBalance),
            Refusal::Ledger(L::Overflow),
            Refusal::BelowProviderMinimum(60),
            Refusal::NotPayable("EXPIRED"),
            Refusal::TxidTaken,
            Refusal::AmountNotDue(Money::ZERO),
            Refusal::Unpriceable,
            Refusal::RevisedMeanwhile,
            Refusal::PastValidity,
            Refusal::Refund(RefundRejection::NotReceived),
            Refusal::Refund(RefundRejection::NotSettledPayment),
            Refusal::Refund(RefundRejection::DeadlineExceeded),
            Refusal::Refund(RefundRejection::ExceedsRefundable { refundable: Money::ZERO }),
            Refusal::Med(MedRejection::NotFound),
            Refusal::Rec(RecError::NotFound),
            Refusal::Cobr(CobrError::NotFound),
        ];
        for r in refusals {
            let rejection = Rejection::of(r.clone());
            assert!(rejection.is_some(), "{r:?}");
        }
        assert_eq!(Rejection::of(Refusal::Bug("x".into())), None);
    }

    #[test]
    fn a_recurrence_rejection_is_404_409_or_a_400_naming_its_field() {
        let status = |r: RecError| Rejection::Rec(r).parts(Family::Simple).status.as_u16();
        assert_eq!(status(RecError::SolicitationNotFound), 404);
        assert_eq!(status(RecError::SolicitationAwaiting), 409);
        assert_eq!(status(RecError::PayerOnUs(7)), 409, "the sandbox may not answer for a payer of ours");
        let under_way = CobrError::UnderWay(chrono::NaiveDate::from_ymd_opt(2026, 12, 1).unwrap());
        let p = Rejection::Cobr(under_way).parts(Family::Simple);
        assert_eq!(p.status.as_u16(), 409, "a charge whose attempt began is not cancelled");
        let p = Rejection::Rec(RecError::ExpiryTooFar).parts(Family::Simple);
        assert_eq!(p.status.as_u16(), 400);
        assert!(p.details.unwrap().to_string().contains("calendario.dataExpiracaoSolicitacao"));
    }

    #[test]
    fn a_med_rejection_about_the_request_names_its_field() {
        let p = Rejection::Med(MedRejection::AmountRequired).parts(Family::Extended);
        assert_eq!(p.status, StatusCode::BAD_REQUEST);
        assert_eq!(p.details.unwrap()["violations"][0]["field"], "amount");
        let p = Rejection::Med(MedRejection::NotReceived).parts(Family::Extended);
        assert_eq!(p.details.unwrap()["violations"][0]["field"], "endToEnd");
    }
}
