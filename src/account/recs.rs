//! The account actor's Pix Automático commands: making a recurrence, changing it (a
//! solicitation, the payer's answer, a withdrawal, a cancellation) and expiring its
//! solicitation when the timer for it fires. Gather, decide with
//! [`crate::domain::decide`]'s recurrence rules, execute, reply once durable.

use actix::prelude::*;

use super::actor::AccountActor;
use super::messages::{CommandError, Refusal};
use crate::domain::decide::{self, RecChange, RecRequest};
use crate::domain::rec::{rec_local, solicitation_local, Link, RecError, Receiver, Recurrence};
use crate::domain::recurrence::{AmountRule, RetryPolicy, Schedule};

/// Makes a recurrence (`POST /rec`); the receiver is the account itself.
#[derive(Message, Clone)]
#[rtype(result = "Result<Recurrence, CommandError>")]
pub struct CreateRec {
    pub link: Link,
    pub schedule: Schedule,
    pub amount: AmountRule,
    pub retry: RetryPolicy,
}

/// Which recurrence a change is for: by its `idRec`, or by the `idSolicRec` of one of its
/// solicitations.
#[derive(Debug, Clone)]
pub enum RecRef {
    Rec(String),
    Solicitation(String),
}

/// Changes one of the account's recurrences.
#[derive(Message, Clone)]
#[rtype(result = "Result<Recurrence, CommandError>")]
pub struct ChangeRec {
    pub rec: RecRef,
    pub change: RecChange,
}

fn not_found(r: &RecRef) -> CommandError {
    CommandError::Refused(Refusal::Rec(match r {
        RecRef::Rec(_) => RecError::NotFound,
        RecRef::Solicitation(_) => RecError::SolicitationNotFound,
    }))
}

impl AccountActor {
    fn create_rec(&mut self, msg: CreateRec, ctx: &mut Context<Self>) -> Result<Recurrence, CommandError> {
        self.view()?;
        let r = self.deps.repo.account(self.account.id);
        let Some(record) = self.read(r, ctx)? else {
            return Err(self.halt("the account's record is missing", ctx));
        };
        let receiver = Receiver {
            name: record.profile.name.as_str().to_owned(),
            document: record.profile.document.to_string(),
        };
        let req = RecRequest {
            link: msg.link,
            schedule: msg.schedule,
            amount: msg.amount,
            retry: msg.retry,
            receiver,
        };
        let mut ids = self.draw_ids(1, ctx)?;
        let now = self.now();
        match decide::create_rec(&self.view()?, req, now, &mut ids) {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    /// The account's recurrence `r` names, as this actor last wrote it.
    fn find_rec(&mut self, r: &RecRef, ctx: &mut Context<Self>) -> Result<Recurrence, CommandError> {
        let account = self.account.id;
        let local = match r {
            RecRef::Rec(id) => rec_local(id),
            RecRef::Solicitation(id) => match solicitation_local(id) {
                None => None,
                Some(s) => match self.held_rec_of_solicitation(s) {
                    Some(rec) => Some(rec.local_id),
                    None => {
                        let found = self.deps.repo.rec_of_solicitation(account, s);
                        self.read(found, ctx)?
                    }
                },
            },
        };
        let Some(local) = local else { return Err(not_found(r)) };
        if let Some(rec) = self.held_rec(local) {
            return Ok(rec.clone());
        }
        let found = self.deps.repo.rec(account, local);
        let rec = self.read(found, ctx)?.filter(|rec| match r {
            RecRef::Rec(id) => &rec.id == id,
            RecRef::Solicitation(id) => rec.solicitation(id).is_some(),
        });
        rec.ok_or_else(|| not_found(r))
    }

    fn change_rec(&mut self, msg: ChangeRec, ctx: &mut Context<Self>) -> Result<Recurrence, CommandError> {
        self.view()?;
        let rec = self.find_rec(&msg.rec, ctx)?;
        let n = usize::from(matches!(msg.change, RecChange::Solicit { .. }));
        let mut ids = self.draw_ids(n, ctx)?;
        let now = self.now();
        match decide::change_rec(rec, msg.change, now, &mut ids) {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    /// Expires the solicitation of a recurrence whose expiry came.
    pub(super) fn expire_rec(&mut self, local_id: u64, ctx: &mut Context<Self>) {
        let Some(rec) = self.held_rec(local_id).cloned() else { return };
        let Some(plan) = decide::expire_rec(rec, self.now()) else { return };
        match self.execute(plan, ctx) {
            Ok(_) => self.forget_when_durable(ctx),
            Err(e) => {
                tracing::error!(account = %self.account.id, local_id, error = %e, "recurrence expiry not recorded")
            }
        }
    }
}

impl Handler<CreateRec> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Recurrence, CommandError>>;

    fn handle(&mut self, msg: CreateRec, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.create_rec(msg, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<ChangeRec> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Recurrence, CommandError>>;

    fn handle(&mut self, msg: ChangeRec, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.change_rec(msg, ctx);
        self.reply_when_durable(reply)
    }
}
