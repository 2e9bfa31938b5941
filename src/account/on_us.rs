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
//! At most [`ON_US_IN_FLIGHT_PER_PAYEE_MAX`] credits are on their way to one payee at a time;
//! the others wait here, in order. A payee owed thousands at once (a merchant's recurring
//! charges due at the same instant) would otherwise have them all queued in its mailbox, and
//! each of its own requests would wait behind every one of them.
//!
//! It also carries an on-us recurring charge's request for money ([`Collect`]) from the
//! receiver's actor to the payer's, and the answer back: that request is not kept, because
//! the receiver's charge keeps its due attempt until the answer is written, and asks again.

use std::collections::{HashMap, VecDeque};
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

/// Credits on their way to one payee at a time. A credit's answer waits for its write to be
/// durable, so a payee takes about this many per group commit; a request of the payee's
/// waits behind at most this many credits (each about 40 µs of its actor's time, so about
/// 5 ms). `benches/pix_automatico/due_at_once.sh` with `ON_US=1`: 10,000 charges due at once
/// settled in 0.9 to 1.6 s with the slowest read 28 to 51 ms; with 32 it took 1.7 to 2.2 s,
/// and with no bound the slowest read waited 343 to 557 ms.
pub const ON_US_IN_FLIGHT_PER_PAYEE_MAX: usize = 128;

/// Carry this credit to its payee.
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct DeliverOnUs(pub OnUsCredit);

pub struct OnUsCourier {
    registry: Arc<Registry>,
    /// Per payee with credits on their way.
    payees: HashMap<AccountId, PayeeQueue>,
}

/// The credits of one payee: how many are on their way, and those waiting for room.
#[derive(Default)]
struct PayeeQueue {
    in_flight: usize,
    waiting: VecDeque<OnUsCredit>,
}

impl PayeeQueue {
    /// A credit to deliver: given back when it may go now, else kept until one ends.
    fn offer(&mut self, credit: OnUsCredit) -> Option<OnUsCredit> {
        if self.in_flight >= ON_US_IN_FLIGHT_PER_PAYEE_MAX {
            self.waiting.push_back(credit);
            return None;
        }
        self.in_flight += 1;
        Some(credit)
    }

    /// One on its way ended: the next to send in its place, if one waits.
    fn ended(&mut self) -> Option<OnUsCredit> {
        let next = self.waiting.pop_front();
        if next.is_none() {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
        next
    }
}

impl OnUsCourier {
    pub fn new(registry: Arc<Registry>) -> OnUsCourier {
        OnUsCourier { registry, payees: HashMap::new() }
    }

    /// Sends the credit now, or queues it while its payee has the most on their way.
    fn deliver(&mut self, credit: OnUsCredit, ctx: &mut Context<Self>) {
        if let Some(now) = self.payees.entry(credit.payee).or_default().offer(credit) {
            self.send(now, ctx);
        }
    }

    /// A credit's delivery ended (carried out, or to be tried again later): the next one
    /// waiting for the same payee goes.
    fn ended(&mut self, payee: AccountId, ctx: &mut Context<Self>) {
        let Some(queue) = self.payees.get_mut(&payee) else { return };
        match queue.ended() {
            Some(next) => self.send(next, ctx),
            None if queue.in_flight == 0 => {
                self.payees.remove(&payee);
            }
            None => {}
        }
    }

    fn send(&mut self, credit: OnUsCredit, ctx: &mut Context<Self>) {
        let payee = credit.payee;
        let addr = match self.registry.get(payee) {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(payee = %payee, e2e = %credit.end_to_end_id, error = %e, "on-us credit: no payee actor; trying again");
                // It keeps its place among the payee's credits on their way.
                ctx.run_later(ON_US_RETRY_AFTER, move |act, ctx| act.send(credit, ctx));
                return;
            }
        };
        let sent = addr.send(ReceiveOnUs(credit.clone()));
        ctx.spawn(sent.into_actor(self).map(move |answer, act, ctx| {
            match answer {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(e2e = %credit.end_to_end_id, error = %e, "on-us credit not carried out yet; trying again");
                    ctx.notify_later(DeliverOnUs(credit), ON_US_RETRY_AFTER);
                }
                Err(e) => {
                    tracing::warn!(e2e = %credit.end_to_end_id, error = %e, "on-us credit: the payee's actor stopped; trying again");
                    ctx.notify_later(DeliverOnUs(credit), ON_US_RETRY_AFTER);
                }
            }
            act.ended(payee, ctx);
        }));
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
        self.deliver(msg.0, ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credit(n: u64) -> OnUsCredit {
        OnUsCredit {
            payee: AccountId::new(1).unwrap(),
            end_to_end_id: format!("E{n}"),
            value: crate::domain::money::Money::parse("1").unwrap(),
            payer_name: "Bia".into(),
            payer_document: "52998224725".into(),
            reference: None,
            paid_at: None,
            returns: None,
        }
    }

    #[test]
    fn a_payee_has_at_most_its_share_on_the_way_and_the_rest_follow_in_order() {
        let mut q = PayeeQueue::default();
        let max = ON_US_IN_FLIGHT_PER_PAYEE_MAX as u64;
        let sent: Vec<u64> = (0..max + 3)
            .filter_map(|n| q.offer(credit(n)))
            .map(|c| c.end_to_end_id[1..].parse().unwrap())
            .collect();
        assert_eq!(sent, (0..max).collect::<Vec<_>>(), "the first ones go at once");
        let next: Vec<String> = (0..3).filter_map(|_| q.ended()).map(|c| c.end_to_end_id).collect();
        assert_eq!(next, [format!("E{max}"), format!("E{}", max + 1), format!("E{}", max + 2)]);
        assert_eq!(q.in_flight, ON_US_IN_FLIGHT_PER_PAYEE_MAX, "each took the place of one that ended");
        for _ in 0..max {
            assert!(q.ended().is_none());
        }
        assert_eq!(q.in_flight, 0);
        assert!(q.offer(credit(99)).is_some(), "room again");
    }
}
