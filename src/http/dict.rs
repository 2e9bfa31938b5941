//! Family B: `POST /dict/pix`, a transfer to a key of the directory, idempotent by
//! `x-idempotency-key` (interface.md "Idempotency", "Life cycles").

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::auth::Caller;
use super::body::{request_object, Fields};
use super::error::{ApiError, Rejection, SimpleErrorBody, Violation, ViolationKind};
use super::payments::{pay, payee_of, payout_scenario, refuse_if_provider_down};
use super::AppState;
use crate::account::{DictRequest, PayRequest};
use crate::domain::ids::ClientId;
use crate::domain::money::Money;
use crate::domain::pix_key::{parse_directory_key, DirectoryKey};
use crate::domain::scenario::PayoutScenario;
use crate::domain::transaction::{Counterpart, Priority, TxKind, DESCRIPTION_LEN_MAX};
use crate::rail::keys::Answer;

pub const IDEMPOTENCY_HEADER: &str = "x-idempotency-key";
pub const EXPIRATION_SECONDS_MIN: u64 = 1;
pub const EXPIRATION_SECONDS_MAX: u64 = 10_800;
pub const EXPIRATION_SECONDS_DEFAULT: u32 = 600;
/// Institutions an `ispbDeny` list may name.
pub const ISPB_DENY_LEN_MAX: usize = 50;

struct DictInput {
    key: DirectoryKey,
    creditor_document: Option<String>,
    priority: Priority,
    description: Option<String>,
    expiration: u32,
    currency: String,
    amount: Money,
    ispb_deny: Vec<String>,
}

impl DictInput {
    /// A digest of the request as understood (not as spelled), so `10.5` and `10.50` are
    /// the same request and a different amount is not.
    fn hash(&self) -> String {
        let canonical = serde_json::json!([
            self.key.key,
            self.creditor_document,
            self.priority,
            self.description,
            self.expiration,
            self.currency,
            self.amount.to_cents_string(),
            self.ispb_deny,
        ]);
        crate::auth::secrets::hex(&Sha256::digest(canonical.to_string().as_bytes()))
    }
}

fn read(obj: &serde_json::Map<String, Value>) -> Result<DictInput, ApiError> {
    let mut f = Fields::new(obj);
    // Family B refuses a member it does not know (a typo never drops data silently).
    f.only(&["pixKey", "creditorDocument", "priority", "description", "expiration", "payment", "ispbDeny"]);
    let key = f.string("pixKey", true).and_then(|k| match parse_directory_key(k) {
        Ok(k) => Some(k),
        Err(e) => {
            f.fail_as("pixKey", e.to_string(), ViolationKind::Key);
            None
        }
    });
    let creditor_document = f.document("creditorDocument", false).map(|t| t.to_string());
    let priority = match f.string("priority", false) {
        None | Some("NORM") => Priority::Norm,
        Some("HIGH") => Priority::High,
        Some(_) => {
            f.fail("priority", "must be HIGH or NORM");
            Priority::Norm
        }
    };
    if priority == Priority::High && creditor_document.is_none() && obj.get("creditorDocument").is_none() {
        f.fail("creditorDocument", "is required when priority is HIGH");
    }
    let description = f.text("description", false, DESCRIPTION_LEN_MAX).map(str::to_owned);
    let expiration = f.integer("expiration", EXPIRATION_SECONDS_MIN, EXPIRATION_SECONDS_MAX);
    let payment = f.object("payment", |p| {
        p.only(&["currency", "amount"]);
        let currency = p.string("currency", true).and_then(|c| {
            if c == "BRL" {
                Some(c.to_owned())
            } else {
                p.fail("currency", "must be BRL");
                None
            }
        });
        (currency, p.amount("amount", true))
    });
    if payment.is_none() {
        f.fail("payment", "is required");
    }
    let ispb_deny = read_ispb_deny(&mut f, obj);
    match (key, payment) {
        (Some(key), Some((Some(currency), Some(amount)))) if f.violations.is_empty() => Ok(DictInput {
            key,
            creditor_document,
            priority,
            description,
            expiration: expiration.and_then(|e| u32::try_from(e).ok()).unwrap_or(EXPIRATION_SECONDS_DEFAULT),
            currency,
            amount,
            ispb_deny,
        }),
        _ => Err(ApiError::Validation(f.violations)),
    }
}

fn read_ispb_deny(f: &mut Fields<'_>, obj: &serde_json::Map<String, Value>) -> Vec<String> {
    match obj.get("ispbDeny") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) if items.len() <= ISPB_DENY_LEN_MAX => {
            let ispbs: Vec<String> = items
                .iter()
                .filter_map(|v| v.as_str().filter(|s| s.len() == 8 && s.bytes().all(|b| b.is_ascii_digit())))
                .map(str::to_owned)
                .collect();
            if ispbs.len() != items.len() {
                f.fail("ispbDeny", "must list ISPB codes of 8 digits");
            }
            ispbs
        }
        Some(_) => {
            f.fail("ispbDeny", format!("must be an array of at most {ISPB_DENY_LEN_MAX} ISPB codes"));
            Vec::new()
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct DictPayment {
    #[schema(value_type = f64)]
    amount: Value,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DictTransfer {
    /// Provisional; the settled one comes in the TRANSFER webhook.
    end_to_end_id: String,
    event_date: String,
    id: u64,
    payment: DictPayment,
    /// `PENDING` at creation.
    #[serde(rename = "type")]
    kind: &'static str,
}

#[utoipa::path(
    post, path = "/dict/pix", tag = "family B",
    request_body(content = super::schemas::DictPixRequest),
    params(
        ("x-idempotency-key" = String, Header, description = "UUID v4"),
        ("X-Sandbox-Scenario" = Option<String>, Header, description = "sandbox accounts only"),
    ),
    responses(
        (status = 201, body = DictTransfer),
        (status = 200, description = "A replay of the same request: the first transfer", body = DictTransfer),
        (status = 400, body = SimpleErrorBody),
        (status = 401, body = SimpleErrorBody),
        (status = 422, description = "key not in the directory, insufficient balance, denied institution, key reused with another body", body = SimpleErrorBody),
        (status = 500, description = "The PIX provider is unreachable (sandbox scenario); nothing recorded", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn dict_pix(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let idempotency_key = req
        .headers()
        .get(IDEMPOTENCY_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|k| ClientId::parse(k).is_some())
        .ok_or_else(|| {
            ApiError::Validation(vec![Violation::new(
                IDEMPOTENCY_HEADER,
                "header is required and must be a UUID v4",
            )])
        })?
        .to_ascii_lowercase();
    let scenario = payout_scenario(&req, &caller)?;
    let obj = request_object(&req, &bytes)?;
    let input = read(&obj)?;
    refuse_if_provider_down(scenario)?;
    let end_to_end_id = state.keys.payment_id(caller.sandbox, state.clock.now());
    let payee = match payee_of(&state, &caller, &input.key, end_to_end_id.as_deref()).await? {
        Answer::Found(p) => Some(p),
        Answer::Unknown | Answer::NotFound => None,
        Answer::Closed => return Err(Rejection::ExternalPayoutsDisabled.into()),
        Answer::Refused(why) => return Err(Rejection::PayeeFraudMarked(why).into()),
    };
    let directory_decides = matches!(scenario, None | Some(PayoutScenario::Confirm));
    if payee.is_none() && directory_decides {
        return Err(Rejection::KeyNotInDirectory.into());
    }
    if let Some(p) = &payee {
        if input.ispb_deny.contains(&p.ispb) {
            return Err(Rejection::InstitutionDenied.into());
        }
        if input.creditor_document.as_ref().is_some_and(|d| *d != p.document) {
            return Err(Rejection::CreditorDocumentMismatch.into());
        }
    }
    let request_hash = input.hash();
    let rail = payee.as_ref().and_then(|p| p.rail.clone()).map(|mut r| {
        r.instrument = Some("DICT".into());
        r
    });
    let counterpart = match payee {
        Some(p) => Counterpart {
            name: p.name,
            document: Some(p.document),
            key: Some(input.key.key.clone()),
            key_type: Some(input.key.key_type),
            bank: p.bank,
        },
        None => Counterpart {
            name: String::new(),
            document: input.creditor_document.clone(),
            key: Some(input.key.key.clone()),
            key_type: Some(input.key.key_type),
            bank: None,
        },
    };
    let request = PayRequest {
        kind: TxKind::DictPix,
        external_id: None,
        value: input.amount,
        description: input.description,
        counterpart,
        scenario,
        document_mismatch: false,
        dict: Some(DictRequest {
            idempotency_key,
            request_hash,
            priority: input.priority,
            expiration_seconds: input.expiration,
            currency: input.currency,
        }),
        qr_txid: None,
        automatic: false,
        end_to_end_id,
        rail,
    };
    let outcome = pay(&state, &caller, request).await?;
    let tx = &outcome.tx;
    let body = DictTransfer {
        end_to_end_id: tx
            .dict
            .as_ref()
            .map_or_else(|| tx.end_to_end_id.clone(), |d| d.provisional_end_to_end_id.clone()),
        event_date: super::iso(tx.created_at),
        id: tx.local_id,
        payment: DictPayment { amount: crate::domain::events::money_number(tx.value) },
        kind: "PENDING",
    };
    Ok(if outcome.replayed { HttpResponse::Ok().json(body) } else { HttpResponse::Created().json(body) })
}
