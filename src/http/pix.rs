//! Family A money out: `POST /api/pix/cash-out` and `POST /api/pix/cash-out-qrcode`.

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};

use super::auth::Caller;
use super::body::{request_object, Fields};
use super::error::Rejection;
use super::error::{ApiError, ExtendedErrorBody, Violation, ViolationKind};
use super::payments::{pay, payee_of, payout_scenario, refuse_if_provider_down, PaymentCreated};
use super::AppState;
use crate::account::PayRequest;
use crate::domain::brcode;
use crate::domain::money::Money;
use crate::domain::pix_key::{parse_cash_out_key, parse_directory_key, CashOutKeyType, DirectoryKey};
use crate::domain::transaction::{Counterpart, TxKind, COUNTERPART_NAME_LEN_MAX, DESCRIPTION_LEN_MAX};
use crate::rail::keys::Answer;

/// A checked cash-out body.
pub struct CashOut {
    value: Money,
    external_id: String,
    description: Option<String>,
    key: DirectoryKey,
    name: String,
    document: String,
    check_document: bool,
}

/// Checks a cash-out body (public for the benchmark of this hot path).
pub fn read_cash_out(obj: &serde_json::Map<String, serde_json::Value>) -> Result<CashOut, ApiError> {
    let mut f = Fields::new(obj);
    let value = f.amount("value", true);
    let external_id = f.external_id("externalId", true);
    let description = f.text("description", false, DESCRIPTION_LEN_MAX);
    let details = f.object("details", |d| {
        let key_type = match d.string("keyType", true) {
            None => None,
            Some(t) => {
                let parsed = CashOutKeyType::parse(t);
                if parsed.is_none() {
                    d.fail_as("keyType", "must be DOCUMENT, EMAIL, PHONE or RANDOM", ViolationKind::Key);
                }
                parsed
            }
        };
        let key = match (d.string("key", true), key_type) {
            (Some(k), Some(t)) => match parse_cash_out_key(t, k) {
                Ok(k) => Some(k),
                Err(e) => {
                    d.fail_as("key", e.to_string(), ViolationKind::Key);
                    None
                }
            },
            _ => None,
        };
        let name = d.text("name", true, COUNTERPART_NAME_LEN_MAX).map(str::to_owned);
        let check = d.boolean("checkPixKeyWithDocument").unwrap_or(false);
        let document = d.document("document", true).map(|t| t.to_string());
        (key, name, document, check)
    });
    if details.is_none() {
        f.fail("details", "is required");
    }
    let violations = std::mem::take(&mut f.violations);
    match (value, external_id, details) {
        (Some(value), Some(ext), Some((Some(key), Some(name), Some(document), check)))
            if violations.is_empty() =>
        {
            Ok(CashOut {
                value,
                external_id: ext.to_owned(),
                description: description.map(str::to_owned),
                key,
                name,
                document,
                check_document: check,
            })
        }
        _ => Err(ApiError::Validation(violations)),
    }
}

#[utoipa::path(
    post, path = "/api/pix/cash-out", tag = "pix",
    request_body(content = super::schemas::CashOutRequest),
    params(("X-Sandbox-Scenario" = Option<String>, Header, description = "sandbox accounts only")),
    responses(
        (status = 201, body = PaymentCreated),
        (status = 400, description = "HTTP_ERROR (validation), PIX_INSUFFICIENT_BALANCE, PIX_*_LIMIT_EXCEEDED, PIX_DUPLICATE_EXTERNAL_ID", body = ExtendedErrorBody),
        (status = 401, body = ExtendedErrorBody),
        (status = 500, description = "The PIX provider is unreachable; nothing recorded", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn cash_out(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let scenario = payout_scenario(&req, &caller)?;
    let input = read_cash_out(&request_object(&req, &bytes)?)?;
    refuse_if_provider_down(scenario)?;
    let end_to_end_id = state.keys.payment_id(caller.sandbox, state.clock.now());
    let payee = match payee_of(&state, &caller, &input.key, end_to_end_id.as_deref()).await? {
        Answer::Found(p) => Some(p),
        Answer::Unknown => None,
        Answer::NotFound => return Err(Rejection::KeyNotInDirectory.into()),
        Answer::Closed => return Err(Rejection::ExternalPayoutsDisabled.into()),
        Answer::Refused(why) => return Err(Rejection::PayeeFraudMarked(why).into()),
    };
    let document_mismatch =
        input.check_document && payee.as_ref().is_some_and(|p| p.document != input.document);
    let rail = payee.as_ref().and_then(|p| p.rail.clone()).map(|mut r| {
        r.instrument = Some("DICT".into());
        r
    });
    let counterpart = Counterpart {
        name: input.name,
        document: Some(input.document),
        key: Some(input.key.key.clone()),
        key_type: Some(input.key.key_type),
        bank: payee.and_then(|p| p.bank),
    };
    let request = PayRequest {
        kind: TxKind::CashOut,
        external_id: Some(input.external_id.clone()),
        value: input.value,
        description: input.description,
        counterpart,
        scenario,
        document_mismatch,
        dict: None,
        qr_txid: None,
        automatic: false,
        end_to_end_id,
        rail,
    };
    let outcome =
        pay(&state, &caller, request).await.map_err(|e| e.with_external_id(Some(&input.external_id)))?;
    Ok(HttpResponse::Created().json(PaymentCreated::from(&outcome)))
}

struct QrCashOut {
    value: Money,
    code: brcode::BrCode,
    external_id: String,
    description: Option<String>,
    name: Option<String>,
    document: Option<String>,
}

fn read_qr(obj: &serde_json::Map<String, serde_json::Value>) -> Result<QrCashOut, ApiError> {
    let mut f = Fields::new(obj);
    let value = f.amount("value", true);
    let code = f.string("qrCode", true).and_then(|c| match brcode::parse(c) {
        Ok(code) => Some(code),
        Err(e) => {
            f.fail("qrCode", format!("is not a valid PIX code: it {e}"));
            None
        }
    });
    let external_id = f.external_id("externalId", true);
    let description = f.text("description", false, DESCRIPTION_LEN_MAX).map(str::to_owned);
    let name = f.text("name", false, COUNTERPART_NAME_LEN_MAX).map(str::to_owned);
    let document = f.document("document", false).map(|t| t.to_string());
    if let (Some(v), Some(embedded)) = (value, code.as_ref().and_then(|c| c.amount)) {
        if v != embedded {
            f.fail_as(
                "value",
                format!("must equal the amount in the QR code ({embedded})"),
                ViolationKind::Amount,
            );
        }
    }
    match (value, code, external_id) {
        (Some(value), Some(code), Some(ext)) if f.violations.is_empty() => {
            Ok(QrCashOut { value, code, external_id: ext.to_owned(), description, name, document })
        }
        _ => Err(ApiError::Validation(f.violations)),
    }
}

/// A code with no amount that names a charge with a due date of an account of this gateway
/// (an on-us cobv) is priced as its payer's institution would: the value must be the amount
/// due today, and a cobv that can no longer be paid is refused before any money moves.
fn check_charge_of_code(state: &AppState, input: &QrCashOut) -> Result<(), ApiError> {
    let (None, Some(key), Some(reference)) = (input.code.amount, &input.code.key, &input.code.txid) else {
        return Ok(());
    };
    let Some(payee) = state.repo.account_by_receiving_key(key)? else { return Ok(()) };
    let Some(charge) = state.repo.charge_by_code(payee, reference)?.filter(|t| t.cobv().is_some()) else {
        return Ok(());
    };
    let fail =
        |m: String| ApiError::Validation(vec![Violation::new("value", m).of_kind(ViolationKind::Amount)]);
    match crate::domain::decide::amount_due(&charge, state.clock.now()) {
        Some(due) if due == input.value => Ok(()),
        Some(due) => {
            Err(fail(format!("must equal the amount the charge of this QR code asks today ({due})")))
        }
        None => Err(ApiError::Validation(vec![Violation::new(
            "qrCode",
            "names a charge that can no longer be paid (paid, removed or past its validity)",
        )])),
    }
}

#[utoipa::path(
    post, path = "/api/pix/cash-out-qrcode", tag = "pix",
    request_body(content = super::schemas::QrCashOutRequest),
    params(("X-Sandbox-Scenario" = Option<String>, Header, description = "sandbox accounts only")),
    responses(
        (status = 201, body = PaymentCreated),
        (status = 400, description = "invalid data or QR code, value differing from the code, insufficient balance, limits", body = ExtendedErrorBody),
        (status = 401, body = ExtendedErrorBody),
        (status = 409, description = "PIX_DUPLICATE_EXTERNAL_ID", body = ExtendedErrorBody),
        (status = 500, body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn cash_out_qrcode(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let scenario = payout_scenario(&req, &caller)?;
    let input = read_qr(&request_object(&req, &bytes)?)?;
    check_charge_of_code(&state, &input)?;
    refuse_if_provider_down(scenario)?;
    let end_to_end_id = state.keys.payment_id(caller.sandbox, state.clock.now());
    // A static code names its key. A dynamic one (a URL) names none: on the SPI rail its
    // payload location is read and verified, and names the key, the txid and the amount;
    // on the simulator the directory stands for the payee of its location.
    let mut dynamic = None;
    let key = match (&input.code.key, &input.code.url) {
        (Some(k), _) => parse_directory_key(k).ok(),
        (None, Some(url)) if end_to_end_id.is_some() => {
            let Some(reader) = state.payloads.as_deref() else {
                return Err(ApiError::Validation(vec![Violation::new(
                    "qrCode",
                    "is a dynamic code (a location URL), which this server's rail does not pay",
                )]));
            };
            let charge = reader.read(url, state.clock.now()).await.map_err(|e| {
                ApiError::Validation(vec![Violation::new(
                    "qrCode",
                    format!("is a dynamic code whose payload location {e}"),
                )])
            })?;
            if !charge.amount_editable && charge.amount != input.value {
                return Err(ApiError::Validation(vec![Violation::new(
                    "value",
                    format!("must equal the amount the charge of this QR code asks ({})", charge.amount),
                )
                .of_kind(ViolationKind::Amount)]));
            }
            let key = parse_directory_key(&charge.key).ok();
            dynamic = Some(charge);
            key
        }
        (None, Some(url)) => state.directory.resolve_url(url).and_then(|e| parse_directory_key(&e.key).ok()),
        (None, None) => None,
    };
    let payee = match &key {
        Some(k) => match payee_of(&state, &caller, k, end_to_end_id.as_deref()).await? {
            Answer::Found(p) => Some(p),
            Answer::Unknown => None,
            Answer::NotFound => return Err(Rejection::KeyNotInDirectory.into()),
            Answer::Closed => return Err(Rejection::ExternalPayoutsDisabled.into()),
            Answer::Refused(why) => return Err(Rejection::PayeeFraudMarked(why).into()),
        },
        None => None,
    };
    let rail = payee.as_ref().and_then(|p| p.rail.clone()).map(|mut r| {
        r.instrument = Some(if dynamic.is_some() { "QRDN" } else { "QRES" }.into());
        r
    });
    let counterpart = Counterpart {
        name: input.name.unwrap_or_else(|| input.code.merchant_name.clone()),
        document: input.document.or_else(|| payee.as_ref().map(|p| p.document.clone())),
        key: key.as_ref().map(|k| k.key.clone()),
        key_type: key.as_ref().map(|k| k.key_type),
        bank: payee.and_then(|p| p.bank),
    };
    let request = PayRequest {
        kind: TxKind::QrCashOut,
        external_id: Some(input.external_id.clone()),
        value: input.value,
        description: input.description,
        counterpart,
        scenario,
        document_mismatch: false,
        dict: None,
        qr_txid: dynamic.map(|d| d.txid).or(input.code.txid),
        automatic: false,
        end_to_end_id,
        rail,
    };
    let outcome =
        pay(&state, &caller, request).await.map_err(|e| e.duplicate_as_conflict(&input.external_id))?;
    Ok(HttpResponse::Created().json(PaymentCreated::from(&outcome)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::body::testing::{object, violations};
    use crate::http::error::Family;

    #[test]
    fn every_invalid_field_of_a_cash_out_has_its_own_message() {
        let body = serde_json::json!({
            "value": "10",
            "externalId": "",
            "description": "d".repeat(141),
            "details": {"key": "x", "keyType": "CPF", "name": "n".repeat(101), "document": "123"}
        });
        let e = read_cash_out(&object(&body.to_string())).err().unwrap();
        assert_eq!(e.parts(Family::Extended).error_code, None, "mixed kinds earn no errorCode");
        let texts: Vec<String> = violations(e).into_iter().map(|(_, t)| t).collect();
        assert_eq!(
            texts,
            vec![
                "value must be a JSON number such as 10.50, not a string",
                "externalId must not be empty",
                "description must have at most 140 characters",
                "details.keyType must be DOCUMENT, EMAIL, PHONE or RANDOM",
                "details.name must have at most 100 characters",
                "details.document must be a CPF (11 digits) or CNPJ (14 characters): must have 11 (CPF) or 14 (CNPJ) characters",
            ]
        );
        let e = read_cash_out(&object(r#"{"value": 1, "externalId": "x"}"#)).err().unwrap();
        assert_eq!(violations(e), vec![("details".to_owned(), "details is required".to_owned())]);
    }

    #[test]
    fn a_key_that_does_not_fit_its_key_type_is_pix_invalid_pix_key() {
        let body = |key_type: &str, key: &str| {
            let v = serde_json::json!({"value": 1, "externalId": "k", "details": {"key": key, "keyType": key_type, "name": "N", "document": "52998224725"}});
            read_cash_out(&object(&v.to_string()))
        };
        for (key_type, key) in [
            ("DOCUMENT", "52998224724"),
            ("EMAIL", "not-an-email"),
            ("PHONE", "+5511987654321"),
            ("RANDOM", "xyz"),
        ] {
            let e = body(key_type, key).err().unwrap();
            assert_eq!(e.parts(Family::Extended).error_code, Some("PIX_INVALID_PIX_KEY"), "{key_type} {key}");
            assert_eq!(violations(e).len(), 1, "{key_type} {key}");
        }
        for (key_type, key) in [
            ("DOCUMENT", "52998224725"),
            ("DOCUMENT", "11222333000181"),
            ("EMAIL", "someone@example.com"),
            ("PHONE", "11987654321"),
            ("PHONE", "1133334444"),
            ("RANDOM", "3f2b8c1e9d4a4e6b8a7c1d2e3f4a5b6c"),
            ("RANDOM", "3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c"),
        ] {
            assert!(body(key_type, key).is_ok(), "{key_type} {key}");
        }
    }

    #[test]
    fn an_amount_with_three_decimals_is_pix_invalid_amount() {
        let e = read_cash_out(&object(
            r#"{"value": 10.005, "externalId": "k", "details": {"key": "a@b.co", "keyType": "EMAIL", "name": "N", "document": "52998224725"}}"#,
        ))
        .err()
        .unwrap();
        assert_eq!(e.parts(Family::Extended).error_code, Some("PIX_INVALID_AMOUNT"));
        assert_eq!(violations(e)[0].0, "value");
    }
}
