//! Reaching the caller's account actor: [`ask`] sends it a message and answers its reply,
//! and what cannot reach it becomes the client's 503 (or 401 for a revoked account).

use super::auth::Caller;
use super::error::{ApiError, Cause};
use super::AppState;
use crate::account::{acknowledged, AccountActor, CommandError, Early, GetBalance, Traced};
use crate::domain::ids::AccountId;
use crate::domain::ledger::Balance;

/// Sends to an account actor at most this many times (see [`ask`]).
const ASK_ATTEMPTS_MAX: usize = 5;

/// Sends a message to the caller's account actor and answers its reply once the writes it
/// rests on are durable (the actor answers before; see `Early`); an actor that cannot be
/// reached is a 503. The message carries the request's id for the log.
pub async fn ask<M, T>(state: &AppState, caller: &Caller, msg: M) -> Result<Result<T, CommandError>, ApiError>
where
    M: actix::Message<Result = Result<T, CommandError>> + Clone + Send + 'static,
    T: Send + 'static,
    AccountActor: actix::Handler<Traced<M>>,
{
    ask_account(state, caller, caller.account_id, msg).await
}

/// [`ask`] of another account's actor, on the caller's behalf: for a change that account
/// owns and the caller may ask for (a payer of this gateway answering a recurrence that its
/// receiver's actor holds). The message itself says who asks; the actor checks it.
pub async fn ask_account<M, T>(
    state: &AppState,
    caller: &Caller,
    account: AccountId,
    msg: M,
) -> Result<Result<T, CommandError>, ApiError>
where
    M: actix::Message<Result = Result<T, CommandError>> + Clone + Send + 'static,
    T: Send + 'static,
    AccountActor: actix::Handler<Traced<M>>,
{
    let early = send(state, caller, account, msg).await?;
    Ok(acknowledged(&state.registry.deps().commit, early).await)
}

async fn send<M, T>(
    state: &AppState,
    caller: &Caller,
    account: AccountId,
    msg: M,
) -> Result<Early<Result<T, CommandError>>, ApiError>
where
    M: actix::Message<Result = Result<T, CommandError>> + Clone + Send + 'static,
    T: Send + 'static,
    AccountActor: actix::Handler<Traced<M>>,
{
    let msg = Traced { msg, request_id: caller.request_id.clone() };
    // An idle actor may stop between the registry's answer and this message: a closed
    // mailbox means the message was never handled, so it goes to a fresh actor.
    for _ in 0..ASK_ATTEMPTS_MAX - 1 {
        let addr = state.registry.get(account)?;
        match addr.send(msg.clone()).await {
            Ok(r) => return Ok(r),
            Err(actix::MailboxError::Closed) => tokio::task::yield_now().await,
            Err(e) => return Err(ApiError::Unavailable(Cause::new(e))),
        }
    }
    let addr = state.registry.get(account)?;
    addr.send(msg).await.map_err(|e| ApiError::Unavailable(Cause::new(e)))
}

/// The caller's balance, once everything its actor applied is durable.
pub async fn balance(state: &AppState, caller: &Caller) -> Result<Balance, ApiError> {
    Ok(ask(state, caller, GetBalance).await??)
}
