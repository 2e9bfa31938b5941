//! Balances: `GET /accounts/balances` (family B shape), `GET /api/balance` and
//! `GET /balance` (the standard shape), interface.md "Balances, fees and limits".

use actix_web::{web, HttpResponse};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::ask::balance;
use super::auth::Caller;
use super::error::{ApiError, ExtendedErrorBody, SimpleErrorBody};
use super::{iso, AppState};
use crate::domain::events::money_number;
use crate::domain::money::Money;

#[derive(Serialize, ToSchema)]
pub struct BalanceAmount {
    #[schema(value_type = f64)]
    available: Value,
    #[schema(value_type = f64)]
    blocked: Value,
    #[schema(value_type = f64)]
    overdraft: Value,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BalanceItem {
    event_date: String,
    balance_amount: BalanceAmount,
}

#[derive(Serialize, ToSchema)]
pub struct Balances {
    data: Vec<BalanceItem>,
}

#[utoipa::path(
    get, path = "/accounts/balances", tag = "family B",
    responses((status = 200, body = Balances), (status = 401, body = SimpleErrorBody)),
    security(("bearer" = []))
)]
pub async fn balances(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let b = balance(&state, &caller).await?;
    Ok(HttpResponse::Ok().json(Balances {
        data: vec![BalanceItem {
            event_date: iso(state.clock.now()),
            balance_amount: BalanceAmount {
                available: money_number(b.available),
                blocked: money_number(b.blocked),
                overdraft: money_number(Money::ZERO),
            },
        }],
    }))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"grossBalance": super::openapi::amount("100.00"), "blockedBalance": super::openapi::amount("10.50"), "netBalance": super::openapi::amount("89.50"),
    "consultedAt": "2026-11-25T12:00:00.000Z"}))]
pub struct StandardBalance {
    /// available + blocked
    #[schema(value_type = f64)]
    gross_balance: Value,
    #[schema(value_type = f64)]
    blocked_balance: Value,
    /// available
    #[schema(value_type = f64)]
    net_balance: Value,
    consulted_at: String,
}

async fn standard(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let b = balance(&state, &caller).await?;
    let gross = b.available.checked_add(b.blocked).ok_or_else(|| ApiError::internal("balance overflow"))?;
    Ok(HttpResponse::Ok().json(StandardBalance {
        gross_balance: money_number(gross),
        blocked_balance: money_number(b.blocked),
        net_balance: money_number(b.available),
        consulted_at: iso(state.clock.now()),
    }))
}

#[utoipa::path(
    get, path = "/api/balance", tag = "account",
    responses((status = 200, body = StandardBalance), (status = 401, body = ExtendedErrorBody)),
    security(("bearer" = []))
)]
pub async fn api_balance(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    standard(caller, state).await
}

#[utoipa::path(
    get, path = "/balance", tag = "family B",
    responses((status = 200, body = StandardBalance), (status = 401, body = SimpleErrorBody)),
    security(("bearer" = []))
)]
pub async fn plain_balance(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    standard(caller, state).await
}
