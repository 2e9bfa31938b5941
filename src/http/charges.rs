//! `POST /api/pix/cash-in`: a charge with its BR Code (and QR image on request).
//!
//! Splits are checked here (format, and together not above the amount) and executed by the
//! account actor when the charge is paid.

use std::collections::BTreeMap;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::ask::ask;
use super::auth::Caller;
use super::body::{request_object, Fields};
use super::error::{ApiError, Cause, ExtendedErrorBody, Violation, ViolationKind};
use super::payments::SCENARIO_HEADER;
use super::{iso, AppState};
use crate::account::{ChargeRequest, CreateCharge};
use crate::domain::money::Money;
use crate::domain::pix_key::{parse_cash_out_key, CashOutKeyType, DirectoryKey};
use crate::domain::qr_image;
use crate::domain::scenario::{ChargeScenario, CHARGE_SCENARIOS};
use crate::domain::splits::{amounts, Split, SplitValue, SPLITS_MAX, SPLIT_TEXT_LEN_MAX};
use crate::domain::transaction::{
    ADDITIONAL_INFO_KEYS_MAX, CHARGE_EXPIRATION_SECONDS_DEFAULT, CHARGE_EXPIRATION_SECONDS_MAX,
    CHARGE_EXPIRATION_SECONDS_MIN, COUNTERPART_NAME_LEN_MAX, DESCRIPTION_LEN_MAX,
};

/// Characters of an additionalInfo key and value.
pub const ADDITIONAL_INFO_KEY_LEN_MAX: usize = 50;
pub const ADDITIONAL_INFO_VALUE_LEN_MAX: usize = 200;

fn charge_scenario(req: &HttpRequest, caller: &Caller) -> Result<Option<ChargeScenario>, ApiError> {
    let Some(raw) = req.headers().get(SCENARIO_HEADER) else { return Ok(None) };
    let fail = |m: String| ApiError::Validation(vec![Violation::new("X-Sandbox-Scenario", m)]);
    if !caller.sandbox {
        return Err(fail("is only accepted for sandbox accounts".into()));
    }
    raw.to_str()
        .ok()
        .and_then(ChargeScenario::parse)
        .map(Some)
        .ok_or_else(|| fail(format!("must be one of {CHARGE_SCENARIOS}")))
}

fn additional_info(f: &mut Fields<'_>, obj: &serde_json::Map<String, Value>) -> BTreeMap<String, String> {
    match obj.get("additionalInfo") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(m)) if m.len() <= ADDITIONAL_INFO_KEYS_MAX => {
            let mut out = BTreeMap::new();
            for (k, v) in m {
                match v.as_str() {
                    Some(v)
                        if k.chars().count() <= ADDITIONAL_INFO_KEY_LEN_MAX
                            && v.chars().count() <= ADDITIONAL_INFO_VALUE_LEN_MAX =>
                    {
                        out.insert(k.clone(), v.to_owned());
                    }
                    _ => f.fail(
                        "additionalInfo",
                        format!("values must be strings (keys up to {ADDITIONAL_INFO_KEY_LEN_MAX} characters, values up to {ADDITIONAL_INFO_VALUE_LEN_MAX})"),
                    ),
                }
            }
            out
        }
        Some(Value::Object(_)) => {
            f.fail("additionalInfo", format!("must have at most {ADDITIONAL_INFO_KEYS_MAX} keys"));
            BTreeMap::new()
        }
        Some(_) => {
            f.fail("additionalInfo", "must be an object of strings");
            BTreeMap::new()
        }
    }
}

/// One split's key: its type and a key of that format, in the directory's form.
fn split_key(f: &mut Fields<'_>) -> Option<DirectoryKey> {
    let kind = f.string("pixKeyType", true);
    let key = f.text("pixKey", true, SPLIT_TEXT_LEN_MAX)?;
    let (parse_as, digits) = match kind? {
        "EMAIL" => (CashOutKeyType::Email, None),
        "PHONE" => (CashOutKeyType::Phone, None),
        "CPF" => (CashOutKeyType::Document, Some(11)),
        "CNPJ" => (CashOutKeyType::Document, Some(14)),
        "RANDOM" => (CashOutKeyType::Random, None),
        _ => {
            f.fail_as("pixKeyType", "must be EMAIL, PHONE, CPF, CNPJ or RANDOM", ViolationKind::Key);
            return None;
        }
    };
    match parse_cash_out_key(parse_as, key) {
        Ok(k) if digits.is_none_or(|n| key.len() == n) => Some(k),
        Ok(_) => {
            f.fail_as("pixKey", "does not match pixKeyType", ViolationKind::Key);
            None
        }
        Err(e) => {
            f.fail_as("pixKey", e.to_string(), ViolationKind::Key);
            None
        }
    }
}

fn split_value(f: &mut Fields<'_>) -> Option<SplitValue> {
    let kind = f.string("type", true);
    let value = f.amount("value", true);
    match (kind?, value?) {
        ("FIXED", v) => Some(SplitValue::Fixed(v)),
        ("PERCENTAGE", v) if v.as_decimal() <= rust_decimal::Decimal::ONE_HUNDRED => {
            Some(SplitValue::Percentage(v.as_decimal()))
        }
        ("PERCENTAGE", _) => {
            f.fail_as("value", "must be at most 100 when it is a percentage", ViolationKind::Amount);
            None
        }
        _ => {
            f.fail("type", "must be FIXED or PERCENTAGE");
            None
        }
    }
}

/// `splits`: at most 10, each valid, together not above the gross amount.
fn read_splits(f: &mut Fields<'_>, obj: &serde_json::Map<String, Value>, gross: Option<Money>) -> Vec<Split> {
    let items = match obj.get("splits") {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(items)) if items.len() <= SPLITS_MAX => items,
        Some(_) => {
            f.fail("splits", format!("must be an array of at most {SPLITS_MAX} splits"));
            return Vec::new();
        }
    };
    let mut read = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(o) = item.as_object() else {
            f.fail(&format!("splits[{i}]"), "must be an object");
            continue;
        };
        let mut s = Fields::nested(o, format!("splits[{i}]."));
        let key = split_key(&mut s);
        let name = s.text("name", true, SPLIT_TEXT_LEN_MAX).map(str::to_owned);
        let document = s.document("document", true).map(|d| d.to_string());
        let value = split_value(&mut s);
        let immediate = s.boolean("immediate").unwrap_or(false);
        f.violations.append(&mut s.violations);
        if let (Some(key), Some(name), Some(document), Some(value)) = (key, name, document, value) {
            read.push((key, name, document, value, immediate));
        }
    }
    if read.len() != items.len() {
        return Vec::new();
    }
    let Some(gross) = gross else { return Vec::new() };
    let values: Vec<SplitValue> = read.iter().map(|r| r.3).collect();
    match amounts(gross, &values) {
        Some(amounts) => read
            .into_iter()
            .zip(amounts)
            .map(|((key, name, document, _, immediate), amount)| Split {
                key,
                name,
                document,
                amount,
                immediate,
            })
            .collect(),
        None => {
            f.fail("splits", "add up to more than the transaction value");
            Vec::new()
        }
    }
}

/// The checked body, and whether a QR image was asked for.
fn read(obj: &serde_json::Map<String, Value>) -> Result<(ChargeRequest, bool), ApiError> {
    let mut f = Fields::new(obj);
    let t = f.object("transaction", |t| {
        let value = t.amount("value", true);
        let description = t.text("description", true, DESCRIPTION_LEN_MAX).map(str::to_owned);
        let external_id = t.external_id("externalId", true).map(str::to_owned);
        let expiration = t
            .integer("expirationTime", CHARGE_EXPIRATION_SECONDS_MIN, CHARGE_EXPIRATION_SECONDS_MAX)
            .unwrap_or(CHARGE_EXPIRATION_SECONDS_DEFAULT);
        let qr = t.boolean("generateQrCode").unwrap_or(false);
        (value, description, external_id, expiration, qr)
    });
    if t.is_none() {
        f.fail("transaction", "is required");
    }
    let payer = f.object("payer", |p| {
        (p.text("fullName", true, COUNTERPART_NAME_LEN_MAX).map(str::to_owned), p.document("document", true))
    });
    if payer.is_none() {
        f.fail("payer", "is required");
    }
    let info = additional_info(&mut f, obj);
    let gross = t.as_ref().and_then(|t| t.0);
    let splits = read_splits(&mut f, obj, gross);
    match (t, payer) {
        (
            Some((Some(value), Some(description), Some(external_id), expiration, qr)),
            Some((Some(name), Some(doc))),
        ) if f.violations.is_empty() => {
            let request = ChargeRequest {
                external_id: Some(external_id),
                txid: None,
                cob: None,
                value,
                description,
                payer_name: name,
                payer_document: Some(doc.to_string()),
                expiration_seconds: u32::try_from(expiration).unwrap_or(u32::MAX),
                additional_info: info,
                scenario: None,
                splits,
            };
            Ok((request, qr))
        }
        _ => Err(ApiError::Validation(f.violations)),
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"transactionId": "21f78410-de06-44aa-9f21-f78410de0645", "correlationId": "21f78410-de06-44aa-9f21-f78410de0645",
    "externalId": "charge-77", "status": "PENDING",
    "pixCode": "00020101021226580014br.gov.bcb.pix0136123e4567-e89b-12d3-a456-42661417400052040000530398654042500",
    "generateTime": "2026-11-25T12:00:00.000Z", "expirationDate": "2026-11-26T12:00:00.000Z"}))]
pub struct ChargeCreated {
    transaction_id: String,
    correlation_id: String,
    external_id: Option<String>,
    /// `PENDING` (awaiting payment)
    status: &'static str,
    /// The BR Code (copy and paste)
    pix_code: String,
    generate_time: String,
    expiration_date: String,
    /// Base64 PNG; only when generateQrCode is true
    #[serde(skip_serializing_if = "Option::is_none")]
    qr_code_image: Option<String>,
}

#[utoipa::path(
    post, path = "/api/pix/cash-in", tag = "pix",
    request_body(content = super::schemas::CashInRequest),
    params(("X-Sandbox-Scenario" = Option<String>, Header, description = "PAY_NOW, EXPIRE_NOW, PROVIDER_EXPIRATION_MIN_<s>; sandbox accounts only")),
    responses(
        (status = 201, body = ChargeCreated),
        (status = 400, description = "HTTP_ERROR (validation), PIX_DUPLICATE_EXTERNAL_ID, PROVIDER_EXPIRATION_BELOW_MINIMUM", body = ExtendedErrorBody),
        (status = 401, body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn cash_in(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let scenario = charge_scenario(&req, &caller)?;
    let (mut request, with_image) = read(&request_object(&req, &bytes)?)?;
    request.scenario = scenario;
    let external_id = request.external_id.clone().unwrap_or_default();
    let tx = ask(&state, &caller, CreateCharge(request))
        .await?
        .map_err(|e| ApiError::from(e).with_external_id(Some(&external_id)))?;
    let charge = tx.charge.as_ref().ok_or_else(|| ApiError::internal("charge without details"))?;
    let qr_code_image = if with_image {
        Some(qr_image::png_base64(&charge.pix_code).map_err(|e| ApiError::Internal(Cause::new(e)))?)
    } else {
        None
    };
    Ok(HttpResponse::Created().json(ChargeCreated {
        transaction_id: tx.transaction_id.to_string(),
        correlation_id: charge.correlation_id.to_string(),
        external_id: tx.external_id.clone(),
        status: tx.status.as_str(),
        pix_code: charge.pix_code.clone(),
        generate_time: iso(tx.created_at),
        expiration_date: iso(charge.expires_at),
        qr_code_image,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::body::testing::{object, violations};

    fn charge(extra: &str) -> String {
        format!(
            r#"{{"transaction": {{"value": 1, "description": "order", "externalId": "x"{extra}}}, "payer": {{"fullName": "Ana Payer", "document": "52998224725"}}}}"#
        )
    }

    #[test]
    fn every_field_rule_of_a_charge_is_checked_and_each_names_its_field() {
        let info: serde_json::Map<String, Value> =
            (0..11).map(|i| (format!("k{i}"), serde_json::json!("v"))).collect();
        let body = serde_json::json!({
            "transaction": {"value": 0.001, "description": "", "externalId": "", "expirationTime": 29},
            "payer": {"fullName": "n".repeat(101), "document": "123"},
            "additionalInfo": info,
            "splits": [{"pixKey": "a@b.co", "pixKeyType": "CPF", "name": "A", "document": "52998224725", "type": "FIXED", "value": 1}]
        });
        let fields: Vec<String> =
            violations(read(&object(&body.to_string())).err().unwrap()).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            vec![
                "transaction.value",
                "transaction.description",
                "transaction.externalId",
                "transaction.expirationTime",
                "payer.fullName",
                "payer.document",
                "additionalInfo",
                "splits[0].pixKey"
            ]
        );
        for (extra, field) in [
            (r#", "expirationTime": 604801"#, "transaction.expirationTime"),
            (r#", "generateQrCode": "yes""#, "transaction.generateQrCode"),
        ] {
            let v = violations(read(&object(&charge(extra))).err().unwrap());
            assert_eq!(v[0].0, field);
        }
        let v = violations(read(&object(r#"{"transaction": {"value": 1}}"#)).err().unwrap());
        assert!(v.iter().any(|(_, t)| t == "payer is required"), "{v:?}");
        // The interface's limits are inclusive.
        let (request, with_image) = read(&object(&charge(r#", "expirationTime": 604800"#))).unwrap();
        assert_eq!(request.expiration_seconds, 604_800);
        assert!(!with_image);
    }
}
