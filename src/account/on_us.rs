//! The courier of on-us credits: carries each credit an account of this gateway is owed
//! (`domain::decide::on_us`) to the payee's actor, at least once.
//!
//! A payer's actor hands it a credit once the settlement that wrote it is durable; at start
//! it is handed every credit still written (a crash may have come between the payer's
//! settlement and the payee's credit). The payee carries a credit out and deletes it in one
//! batch, and answers a credit it already carried out with success, so delivering twice is
//! harmless. A delivery that fails (the payee's actor restarting, a full disk) is tried
//! again after [`ON_US_RETRY_AFTER`].

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::messages::ReceiveOnUs;
use super::registry::Registry;
use crate::domain::decide::OnUsCredit;

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
