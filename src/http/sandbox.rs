//! Sandbox routes (decisions.md §1): only for sandbox accounts (403 otherwise).

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::auth::Caller;
use super::body::{request_object, Fields};
use super::error::{ApiError, ExtendedErrorBody};
use super::AppState;
use crate::account::{PayError, PixIn};
use crate::domain::events::money_number;
use crate::domain::transaction::COUNTERPART_NAME_LEN_MAX;

fn sandbox_only(caller: &Caller) -> Result<(), ApiError> {
    if caller.sandbox {
        Ok(())
    } else {
        Err(ApiError::Forbidden("sandbox routes are only for sandbox accounts"))
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PixInCreated {
    transaction_id: String,
    end_to_end_id: String,
    #[schema(value_type = f64)]
    amount: Value,
    status: &'static str,
}

#[utoipa::path(
    post, path = "/sandbox/pix-in", tag = "sandbox",
    request_body(content = Object, description = "{amount (number), payerName?, payerDocument?}"),
    responses((status = 201, body = PixInCreated), (status = 400, body = ExtendedErrorBody), (status = 403, body = ExtendedErrorBody)),
    security(("bearer" = []))
)]
pub async fn pix_in(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    sandbox_only(&caller)?;
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    let amount = f.amount("amount", true);
    let payer_name =
        f.text("payerName", false, COUNTERPART_NAME_LEN_MAX).unwrap_or("Sandbox Payer").to_owned();
    let payer_document = f.document("payerDocument", false).map(|t| t.to_string());
    let (Some(value), true) = (amount, f.violations.is_empty()) else {
        return Err(ApiError::Validation(f.violations));
    };
    let addr = state.registry.get(caller.account_id).map_err(|e| ApiError::Unavailable(e.to_string()))?;
    let tx = addr
        .send(PixIn { value, payer_name, payer_document })
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))?
        .map_err(|e| match e {
            PayError::Rejected(r) => ApiError::BadRequest(format!("amount cannot be credited: {r:?}")),
            PayError::Unavailable(m) => ApiError::Unavailable(m),
            PayError::Internal(m) => ApiError::Internal(m),
        })?;
    Ok(HttpResponse::Created().json(PixInCreated {
        transaction_id: tx.transaction_id.to_string(),
        end_to_end_id: tx.end_to_end_id,
        amount: money_number(tx.value),
        status: tx.status.as_str(),
    }))
}
