//! `GET /api/account` (beyond the interface): the caller's own account, its limits and fees,
//! so an integrator can check a token and see the rules that apply to it.

use actix_web::{web, HttpResponse};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::admin::settings_json;
use super::auth::Caller;
use super::error::{ApiError, ExtendedErrorBody};
use super::AppState;

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MyAccount {
    account_id: u64,
    name: String,
    /// Masked.
    document: String,
    sandbox: bool,
    client_id: String,
    /// The EVP key that this account's charges carry.
    receiving_key: String,
    #[schema(value_type = super::schemas::SettingsView)]
    settings: Value,
}

#[utoipa::path(
    get, path = "/api/account", tag = "account",
    responses((status = 200, body = MyAccount), (status = 401, body = ExtendedErrorBody)),
    security(("bearer" = []))
)]
pub async fn my_account(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let record = state
        .repo
        .account(caller.account_id)?
        .ok_or(ApiError::Unauthorized("the access token was revoked"))?;
    Ok(HttpResponse::Ok().json(MyAccount {
        account_id: record.id.get(),
        name: record.profile.name.as_str().to_owned(),
        document: record.profile.document.masked(),
        sandbox: record.profile.sandbox,
        client_id: caller.client_id.to_string(),
        receiving_key: record.receiving_key,
        settings: settings_json(&record.settings),
    }))
}
