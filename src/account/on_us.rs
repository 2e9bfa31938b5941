//! The courier of on-us credits: carries each credit an account of this gateway is owed
//! (`domain::decide::on_us`) to the payee's actor, at least once.
//!
//! A payer's actor hands it a credit once the settlement that wrote it is durable; at start
//! it is handed every credit still written (a crash may have come between the payer's
//! settlement and the payee's credit). The payee carries a credit out and deletes it in one
//! batch, and answers a credit it already carried out with success, so delivering twice is
//! harmless. A delivery that fails (the payee's actor restarting, a full disk) is tried
//! again after [`ON_US_RETRY_AFTER`].
//!
//! It also carries an on-us recurring charge's request for money ([`Collect`]) from the
//! receiver's actor to the payer's, and the answer back: that request is not kept, because
//! the receiver's charge keeps its due attempt until the answer is written, and asks again.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::messages::{CollectCobr, Collected, CommandError, ReceiveOnUs};
use super::registry::Registry;
use crate::cause::Cause;
use crate::domain::decide::OnUsCredit;
use crate::domain::ids::AccountId;

/// How long a failed delivery waits before it is tried again.
pub const ON_US_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Carry this credit to its payee.
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct DeliverOnUs(pub OnUsCredit);

pub struct OnUsCourier {
    registry: Arc<Registry>,
}

impl OnUsCourier {
    pub fn new(registry: Arc<Registry>) -> OnUsCourier {
        OnUsCourier { registry }
    }
}

impl Actor for OnUsCourier {
    type Context = Context<Self>;
}

/// Carries an on-us recurring charge's request for money to the payer's actor and its
/// answer back (the receiver's actor does not hold the registry).
#[derive(Message)]
#[rtype(result = "Result<Collected, CommandError>")]
pub struct Collect {
    pub payer: AccountId,
    pub order: CollectCobr,
}

impl Handler<Collect> for OnUsCourier {
    type Result = ResponseFuture<Result<Collected, CommandError>>;

    fn handle(&mut self, msg: Collect, _: &mut Context<Self>) -> Self::Result {
        let addr = self.registry.get(msg.payer);
        Box::pin(async move {
            let addr = addr.map_err(|e| CommandError::Unavailable(Cause::new(e)))?;
            addr.send(msg.order).await.map_err(|e| CommandError::Unavailable(Cause::new(e)))?
        })
    }
}

impl Handler<DeliverOnUs> for OnUsCourier {
    type Result = ();

    fn handle(&mut self, msg: DeliverOnUs, ctx: &mut Context<Self>) {
        let credit = msg.0;
        let addr = match self.registry.get(credit.payee) {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(payee = %credit.payee, e2e = %credit.end_to_end_id, error = %e, "on-us credit: no payee actor; trying again");
                ctx.notify_later(DeliverOnUs(credit), ON_US_RETRY_AFTER);
                return;
            }
        };
        let sent = addr.send(ReceiveOnUs(credit.clone()));
        ctx.spawn(sent.into_actor(self).map(move |answer, _, ctx| match answer {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(e2e = %credit.end_to_end_id, error = %e, "on-us credit not carried out yet; trying again");
                ctx.notify_later(DeliverOnUs(credit), ON_US_RETRY_AFTER);
            }
            Err(e) => {
                tracing::warn!(e2e = %credit.end_to_end_id, error = %e, "on-us credit: the payee's actor stopped; trying again");
                ctx.notify_later(DeliverOnUs(credit), ON_US_RETRY_AFTER);
            }
        }));
    }
}
