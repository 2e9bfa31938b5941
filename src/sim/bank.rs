//! The settling bank: takes a payment, waits the settle delay, and tells the account actor
//! how it ended, as a message. The outcome is a function of the scenario and the
//! directory, so a payment resubmitted after a restart ends the same way.

use std::sync::Arc;
use std::time::Duration;

use actix::{Actor, AsyncContext, Context, Handler, Message, Recipient};

use super::directory::Directory;
use crate::domain::pix_key::DirectoryKey;
use crate::domain::scenario::PayoutScenario;
use crate::domain::transaction::{BankInfo, ErrorCode};

/// How a payment ended, sent to the account that made it.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct Settled {
    pub local_id: u64,
    pub result: Result<Option<BankInfo>, ErrorCode>,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Submit {
    pub local_id: u64,
    /// The payee's key; `None` (nothing the directory knows) is rejected.
    pub key: Option<DirectoryKey>,
    pub scenario: Option<PayoutScenario>,
    /// `/dict/pix` priority HIGH settles at once.
    pub immediate: bool,
    /// A refund to the payer of a received PIX: the payer's bank takes it back unless a
    /// scenario says otherwise.
    pub refund: bool,
    pub reply_to: Recipient<Settled>,
}

pub struct Bank {
    directory: Arc<Directory>,
    settle_delay: Duration,
}

impl Bank {
    pub fn new(directory: Arc<Directory>, settle_delay: Duration) -> Bank {
        Bank { directory, settle_delay }
    }

    /// The outcome of a payment, and after how long (None: it never settles).
    pub fn outcome(
        &self,
        key: Option<&DirectoryKey>,
        scenario: Option<PayoutScenario>,
        immediate: bool,
        refund: bool,
    ) -> Option<(Duration, Result<Option<BankInfo>, ErrorCode>)> {
        let base = if immediate { Duration::ZERO } else { self.settle_delay };
        let entry = key.and_then(|k| self.directory.lookup(k));
        let bank = entry.and_then(|e| self.directory.bank_of(e));
        match scenario {
            Some(PayoutScenario::Stuck) => None,
            Some(PayoutScenario::Reject(code)) => Some((base, Err(code))),
            Some(PayoutScenario::Delay(ms)) => Some((Duration::from_millis(ms), Ok(bank))),
            // PROVIDER_DOWN never reaches the bank; treat it as the default if it does.
            Some(PayoutScenario::Confirm | PayoutScenario::ProviderDown) | None if refund => {
                Some((base, Ok(bank)))
            }
            Some(PayoutScenario::Confirm | PayoutScenario::ProviderDown) | None => {
                Some((base, entry.map(|_| bank).ok_or(ErrorCode::OrderRejected)))
            }
        }
    }
}

impl Actor for Bank {
    type Context = Context<Self>;
}

impl Handler<Submit> for Bank {
    type Result = ();

    fn handle(&mut self, msg: Submit, ctx: &mut Context<Self>) {
        let Some((delay, result)) = self.outcome(msg.key.as_ref(), msg.scenario, msg.immediate, msg.refund)
        else {
            return;
        };
        let settled = Settled { local_id: msg.local_id, result };
        if delay.is_zero() {
            msg.reply_to.do_send(settled);
        } else {
            ctx.run_later(delay, move |_, _| msg.reply_to.do_send(settled));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pix_key::{parse_directory_key, DirectoryKeyType};

    fn bank() -> Bank {
        Bank::new(Arc::new(Directory::embedded().unwrap()), Duration::from_millis(200))
    }

    #[test]
    fn outcomes_by_scenario_and_directory() {
        let b = bank();
        let d = Directory::embedded().unwrap();
        let known = d.keys_of_type(DirectoryKeyType::Email)[0].clone();
        let known = parse_directory_key(&known).ok();
        let unknown = parse_directory_key("nobody@nowhere.example").ok();
        let (known, unknown) = (known.as_ref(), unknown.as_ref());
        let ms = Duration::from_millis;
        assert!(matches!(b.outcome(known, None, false, false), Some((d, Ok(Some(_)))) if d == ms(200)));
        assert!(matches!(b.outcome(known, None, true, false), Some((d, Ok(Some(_)))) if d.is_zero()));
        assert_eq!(b.outcome(unknown, None, false, false), Some((ms(200), Err(ErrorCode::OrderRejected))));
        assert_eq!(
            b.outcome(known, Some(PayoutScenario::Reject(ErrorCode::BlockedAccount)), false, false),
            Some((ms(200), Err(ErrorCode::BlockedAccount)))
        );
        assert!(
            matches!(b.outcome(unknown, Some(PayoutScenario::Delay(5)), false, false), Some((d, Ok(None))) if d == ms(5))
        );
        assert_eq!(b.outcome(known, Some(PayoutScenario::Stuck), false, false), None);
        // A refund goes back to the payer, who needs no key in the directory.
        assert_eq!(b.outcome(None, None, false, true), Some((ms(200), Ok(None))));
    }
}
