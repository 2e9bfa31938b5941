//! The account actor's Pix Automático commands: making a recurrence, changing it (a
//! solicitation, the payer's answer, a withdrawal, a cancellation), expiring its
//! solicitation when the timer for it fires; making a recurring charge, changing it (a
//! retry, a cancellation), and attempting it when its day comes. Gather, decide with
//! [`crate::domain::decide`]'s Pix Automático rules, execute, reply once durable.
//!
//! On us (the payer is an account of this gateway) an attempt is a request to the payer's
//! actor ([`CollectCobr`], through the courier), whose side is a cash-out with the attempt's
//! own externalId: asked twice, it debits once. The charge settles when the debit's credit
//! arrives (`receive_on_us`), or fails on the payer's refusal.

use actix::prelude::*;

use super::actor::AccountActor;
use super::messages::{CollectCobr, Collected, CommandError, PayRequest, Refusal};
use super::on_us::Collect;
use crate::domain::cobr::{Cobr, CobrError, CobrStatus, Due, Failure};
use crate::domain::decide::{self, CobrChange, CobrPayer, CobrRequest, RecChange, RecRequest};
use crate::domain::ids::AccountId;
use crate::domain::ledger::Rejection;
use crate::domain::pix_key::DirectoryKeyType;
use crate::domain::rec::{
    rec_local, solicitation_local, Link, LocRec, PayerSide, RecError, Receiver, Recurrence,
};
use crate::domain::recurrence::{AmountRule, AutoRetry, RetryPolicy, Schedule};
use crate::domain::transaction::{Counterpart, TxKind, TxStatus};

/// Makes a recurrence (`POST /rec`); the receiver is the account itself.
#[derive(Message, Clone)]
#[rtype(result = "Result<Recurrence, CommandError>")]
pub struct CreateRec {
    pub link: Link,
    pub schedule: Schedule,
    pub amount: AmountRule,
    pub retry: RetryPolicy,
    /// The id of a location to link (journey 2).
    pub loc: Option<u64>,
    /// The txid of the cob whose payment authorises it (journey 3).
    pub first_txid: Option<String>,
    /// `recebedor.convenio`.
    pub agreement: Option<String>,
    /// `automacao.diasRetentativa`: the retries the gateway asks for by itself.
    pub auto_retry: AutoRetry,
    /// `automacao.diasAntesEnvio`: the gateway sends each cycle's charge by itself.
    pub auto_send_days: Option<u8>,
}

/// Makes a location for a recurrence (`POST /locrec`).
#[derive(Message, Clone)]
#[rtype(result = "Result<LocRec, CommandError>")]
pub struct CreateLocRec;

/// Unlinks a location from the recurrence it serves (`DELETE /locrec/{id}/idRec`).
#[derive(Message, Clone)]
#[rtype(result = "Result<LocRec, CommandError>")]
pub struct UnlinkLocRec {
    pub id: u64,
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
    /// Who speaks for the payer, in a change of the payer's (`None`: the receiver's own).
    pub payer: Option<PayerSide>,
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
            agreement: msg.agreement.clone(),
        };
        let loc = match msg.loc {
            None => None,
            Some(id) => {
                let found = self.deps.repo.locrec(self.account.id, id);
                let Some(mut loc) = self.read(found, ctx)? else {
                    return Err(CommandError::Refused(Refusal::Rec(RecError::LocationNotFound)));
                };
                // A recurrence still in flight may have taken it.
                if let Some(r) = self.in_flight_rec_of_location(id) {
                    loc.id_rec = Some(r.id.clone());
                }
                Some(loc)
            }
        };
        let first_is_cobv = match &msg.first_txid {
            Some(txid) => self.first_charge_is_cobv(txid, ctx)?,
            None => false,
        };
        let req = RecRequest {
            link: msg.link,
            schedule: msg.schedule,
            amount: msg.amount,
            retry: msg.retry,
            receiver,
            loc,
            first_txid: msg.first_txid,
            first_is_cobv,
            auto_retry: msg.auto_retry,
            auto_send_days: msg.auto_send_days,
        };
        let mut ids = self.draw_ids(1, ctx)?;
        let now = self.now();
        match decide::create_rec(&self.view()?, req, now, &mut ids) {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    /// Whether the first charge a journey 3 or 4 recurrence names (`ativacao.dadosJornada.txid`)
    /// is a cobv; refused when the txid names neither a cob nor a cobv of the account.
    fn first_charge_is_cobv(&mut self, txid: &str, ctx: &mut Context<Self>) -> Result<bool, CommandError> {
        let found = self.deps.repo.charge_by_txid(self.account.id, txid);
        match self.read(found, ctx)? {
            Some(t) if t.is_cob(false) => Ok(false),
            Some(t) if t.is_cob(true) => Ok(true),
            _ => Err(CommandError::Refused(Refusal::Rec(RecError::FirstChargeNotFound))),
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

    fn change_rec(
        &mut self,
        mut msg: ChangeRec,
        ctx: &mut Context<Self>,
    ) -> Result<Recurrence, CommandError> {
        self.view()?;
        let rec = self.find_rec(&msg.rec, ctx)?;
        // A revision names a location and a first cob by id: read here, as for a new one.
        if let RecChange::Revise(r) = &mut msg.change {
            if let Some(id) = r.loc_id {
                let found = self.deps.repo.locrec(self.account.id, id);
                let mut loc = self.read(found, ctx)?;
                if let (Some(l), Some(other)) = (loc.as_mut(), self.in_flight_rec_of_location(id)) {
                    l.id_rec = Some(other.id.clone());
                }
                r.loc = loc;
            }
            if let Some(txid) = r.first_txid.clone() {
                r.first_is_cobv = self.first_charge_is_cobv(&txid, ctx)?;
            }
        }
        // Journey 3 authorises with the first cob's payment: whether it is paid is storage's
        // (or this actor's latest write of it).
        if let (RecChange::ApproveByQr { first_paid, .. }, Some(txid)) = (&mut msg.change, &rec.first_txid) {
            let found = self.deps.repo.charge_by_txid(self.account.id, txid);
            let cob = match self.read(found, ctx)? {
                Some(t) => self.transaction(t.local_id, ctx)?,
                None => None,
            };
            *first_paid = match (cob.filter(|t| t.is_received()), msg.payer) {
                // On us, the first charge authorises only the account whose payment paid it
                // (its payout carries the same end-to-end id; paid, it stays so).
                (Some(t), Some(PayerSide::Account(a))) => {
                    let paid_by = self.deps.repo.payout_by_id(&t.end_to_end_id);
                    self.read(paid_by, ctx)?.is_some_and(|p| p.account_id.get() == a)
                }
                (Some(_), _) => true,
                (None, _) => false,
            };
        }
        let n = usize::from(matches!(msg.change, RecChange::Solicit { .. }));
        let mut ids = self.draw_ids(n, ctx)?;
        let open = self.open_cobrs_of(rec.local_id);
        let now = self.now();
        match decide::change_rec(rec, msg.change, msg.payer, open, now, &mut ids) {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    /// What came due of a recurrence: its solicitation's expiry, or a charge the gateway
    /// sends by itself.
    pub(super) fn expire_rec(&mut self, local_id: u64, ctx: &mut Context<Self>) {
        let Some(rec) = self.held_rec(local_id).cloned() else { return };
        let now = self.now();
        let plan = if rec.awaiting().is_some_and(|s| s.expires_at <= now) {
            decide::expire_rec(rec, now)
        } else {
            let Ok(mut ids) = self.draw_ids(1, ctx) else {
                return self.postpone(local_id, Self::expire_rec, ctx);
            };
            let Ok(view) = self.view() else { return };
            let (repo, account) = (self.deps.repo.clone(), self.account.id);
            // A txid a client took is passed over (the cycle is then the receiver's to charge);
            // one storage cannot tell of is not: the whole is tried again later.
            let unread = std::cell::Cell::new(false);
            let taken = |txid: &str| match repo.cobr_by_txid(account, txid) {
                Ok(found) => found.is_some(),
                Err(_) => {
                    unread.set(true);
                    true
                }
            };
            let decided = decide::auto_send(&view, rec, taken, now, &mut ids);
            if unread.get() {
                return self.postpone(local_id, Self::expire_rec, ctx);
            }
            match decided {
                Ok(plan) => plan,
                Err(r) => {
                    self.refused(r, ctx);
                    return;
                }
            }
        };
        let Some(plan) = plan else { return };
        match self.execute(plan, ctx) {
            Ok(_) => self.forget_when_durable(ctx),
            Err(e) => {
                tracing::error!(account = %self.account.id, local_id, error = %e, "recurrence expiry not recorded");
                if !self.halted() {
                    self.postpone(local_id, Self::expire_rec, ctx);
                }
            }
        }
    }
}

/// Makes a recurring charge for a cycle of the recurrence `id_rec` (`PUT`/`POST /cobr`).
#[derive(Message, Clone)]
#[rtype(result = "Result<Cobr, CommandError>")]
pub struct CreateCobr {
    pub id_rec: String,
    pub request: CobrRequest,
}

/// Changes the recurring charge with this txid.
#[derive(Message, Clone)]
#[rtype(result = "Result<Cobr, CommandError>")]
pub struct ChangeCobr {
    pub txid: String,
    pub change: CobrChange,
}

fn cobr_refused(e: CobrError) -> CommandError {
    CommandError::Refused(Refusal::Cobr(e))
}

impl AccountActor {
    /// The account's recurring charge with this txid, as this actor last wrote it.
    fn find_cobr(&mut self, txid: &str, ctx: &mut Context<Self>) -> Result<Option<Cobr>, CommandError> {
        if let Some(c) = self.in_flight_cobr_by_txid(txid) {
            return Ok(Some(c.clone()));
        }
        let found = self.deps.repo.cobr_by_txid(self.account.id, txid);
        let found = self.read(found, ctx)?;
        // Storage may lag a later write this actor holds.
        Ok(found.map(|c| self.held_cobr(c.local_id).cloned().unwrap_or(c)))
    }

    /// The account's recurring charge with this local id and txid (an on-us credit's
    /// reference names both), as this actor last wrote it.
    pub(super) fn cobr_named(
        &mut self,
        local: u64,
        txid: &str,
        ctx: &mut Context<Self>,
    ) -> Result<Option<Cobr>, CommandError> {
        let found = match self.held_cobr(local) {
            Some(c) => Some(c.clone()),
            None => {
                let r = self.deps.repo.cobr(self.account.id, local);
                self.read(r, ctx)?
            }
        };
        Ok(found.filter(|c| c.txid == txid))
    }

    fn create_cobr(&mut self, msg: CreateCobr, ctx: &mut Context<Self>) -> Result<Cobr, CommandError> {
        self.view()?;
        if self.find_cobr(&msg.request.txid, ctx)?.is_some() {
            return Err(cobr_refused(CobrError::TxidTaken));
        }
        let rec = self.find_rec(&RecRef::Rec(msg.id_rec), ctx)?;
        // The cycle's charges that ended without taking it (cancelled or rejected).
        let mut ended = Vec::new();
        for &(_, local) in &rec.charges {
            let charge = match self.held_cobr(local) {
                Some(c) => Some(c.clone()),
                None => {
                    let r = self.deps.repo.cobr(self.account.id, local);
                    self.read(r, ctx)?
                }
            };
            if charge.is_some_and(|c| matches!(c.status, CobrStatus::Cancelada | CobrStatus::Rejeitada)) {
                ended.push(local);
            }
        }
        let mut ids = self.draw_ids(1, ctx)?;
        let now = self.now();
        match decide::create_cobr(&self.view()?, rec, msg.request, &ended, now, &mut ids) {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    fn change_cobr(&mut self, msg: ChangeCobr, ctx: &mut Context<Self>) -> Result<Cobr, CommandError> {
        self.view()?;
        let Some(cobr) = self.find_cobr(&msg.txid, ctx)? else {
            return Err(cobr_refused(CobrError::NotFound));
        };
        let rec = self.find_rec(&RecRef::Rec(cobr.id_rec.clone()), ctx)?;
        match decide::change_cobr(cobr, msg.change, rec.status, self.now()) {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    /// Makes the attempt (or ends the retry window) of a recurring charge whose time came,
    /// as of that time: a clock that jumped past it (the test clock) carries out each step at
    /// its own hour, so a morning try that failed still has its evening try, which the same
    /// jump then passes too (`Tick` goes on until nothing is due). On a running clock the
    /// time that came is now.
    pub(super) fn attempt_cobr(&mut self, local_id: u64, ctx: &mut Context<Self>) {
        let Some(cobr) = self.held_cobr(local_id).cloned() else { return };
        let now = self.now();
        let at = cobr.deadline().map_or(now, |due| due.min(now));
        if let (Some(payer), Due::Attempt(n)) = (cobr.on_us_payer, cobr.step_due(at)) {
            return self.collect_cobr(cobr, payer, n, ctx);
        }
        let rec = match self.find_rec(&RecRef::Rec(cobr.id_rec.clone()), ctx) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(account = %self.account.id, local_id, error = %e, "the recurrence of a charge could not be read");
                return self.postpone(local_id, Self::attempt_cobr, ctx);
            }
        };
        let payer = CobrPayer {
            name: rec.link.debtor.name.clone(),
            document: rec
                .payer
                .as_ref()
                .map_or_else(|| rec.link.debtor.document.clone(), |p| p.document.clone()),
            bank: rec.payer.as_ref().and_then(|p| self.institution(&p.ispb)),
        };
        let Ok(mut ids) = self.draw_ids(1, ctx) else {
            return self.postpone(local_id, Self::attempt_cobr, ctx);
        };
        let decided = match self.view() {
            Ok(view) => decide::attempt_cobr(&view, cobr, payer, at, &mut ids),
            Err(_) => return,
        };
        match decided {
            Ok(None) => {}
            Ok(Some(plan)) => match self.execute(plan, ctx) {
                Ok(_) => self.forget_when_durable(ctx),
                // A full disk: the attempt is made again once room returns (nothing of it
                // was written, so it is made once).
                Err(_) if !self.halted() => self.postpone(local_id, Self::attempt_cobr, ctx),
                Err(_) => {}
            },
            Err(r) => {
                self.refused(r, ctx);
            }
        }
    }
}

impl AccountActor {
    /// Asks the payer's actor (an account of this gateway) for the money of attempt `n` of
    /// an on-us charge. Nothing is written first: the charge keeps the attempt due until an
    /// answer is written, so after a crash it is asked for again, with the same externalId,
    /// and the payer's account finds the debit it made. A debit's credit settles the charge
    /// when the courier brings it (`receive_on_us`); a refusal is the attempt's failure.
    fn collect_cobr(&mut self, cobr: Cobr, payer: u64, n: usize, ctx: &mut Context<Self>) {
        let local_id = cobr.local_id;
        self.set_aside(local_id);
        let (Some(collector), Some(payer)) = (self.deps.collect.get().cloned(), AccountId::new(payer)) else {
            return self.postpone(local_id, Self::attempt_cobr, ctx);
        };
        let r = self.deps.repo.account(self.account.id);
        let document = match self.read(r, ctx) {
            Ok(Some(record)) => record.profile.document.to_string(),
            _ => return self.postpone(local_id, Self::attempt_cobr, ctx),
        };
        let (name, key) = self.own_key();
        let order = CollectCobr {
            external_id: cobr.debit_external_id(n),
            value: cobr.value,
            id_rec: cobr.id_rec.clone(),
            reference: cobr.reference(),
            receiver_name: name.to_owned(),
            receiver_document: document,
            receiving_key: key.to_owned(),
        };
        let asked = collector.send(Collect { payer, order });
        ctx.spawn(asked.into_actor(self).map(move |answer, act, ctx| match answer {
            // The credit follows through the courier, and settles the charge.
            Ok(Ok(Collected::Debited)) => {}
            Ok(Ok(Collected::Refused(failure))) => act.fail_cobr_on_us(local_id, failure, ctx),
            Ok(Err(e)) => {
                tracing::warn!(account = %act.account.id, local_id, error = %e, "on-us charge: the payer's account did not answer; asking again");
                act.postpone(local_id, Self::attempt_cobr, ctx);
            }
            Err(e) => {
                tracing::warn!(account = %act.account.id, local_id, error = %e, "on-us charge: the courier did not answer; asking again");
                act.postpone(local_id, Self::attempt_cobr, ctx);
            }
        }));
    }

    /// Records the failure the payer's account answered for an on-us charge's attempt.
    fn fail_cobr_on_us(&mut self, local_id: u64, failure: Failure, ctx: &mut Context<Self>) {
        let Some(cobr) = self.held_cobr(local_id).cloned() else { return };
        let Some(plan) = decide::fail_cobr_on_us(cobr, failure, self.now()) else { return };
        match self.execute(plan, ctx) {
            Ok(_) => self.forget_when_durable(ctx),
            // Not written: the attempt is asked for again (the payer answers it anew).
            Err(_) if !self.halted() => self.postpone(local_id, Self::attempt_cobr, ctx),
            Err(_) => {}
        }
    }

    /// The payer's side of an on-us charge: a debit of the account, paid to the receiver's
    /// receiving key, with the attempt's externalId, so it is made once however often it
    /// is asked for. The balance, the limits and the fee are a cash-out's.
    fn collect(&mut self, msg: CollectCobr, ctx: &mut Context<Self>) -> Result<Collected, CommandError> {
        self.view()?;
        let counterpart = Counterpart {
            name: msg.receiver_name,
            document: Some(msg.receiver_document),
            key: Some(msg.receiving_key),
            key_type: Some(DirectoryKeyType::Evp),
            bank: Some(crate::rail::sim::bank::gateway_bank()),
        };
        let req = PayRequest {
            kind: TxKind::CashOut,
            external_id: Some(msg.external_id),
            value: msg.value,
            description: Some(format!("Pix Automático {}", msg.id_rec)),
            counterpart,
            scenario: None,
            document_mismatch: false,
            dict: None,
            qr_txid: Some(msg.reference),
            automatic: true,
            // Its own id, which carries its local id: both sides of an on-us payment share
            // one id, and storage indexes only the receiver's (docs/decisions.md "Pix
            // Automático to the API Pix").
            end_to_end_id: None,
            rail: None,
        };
        match self.pay(req, ctx) {
            Ok(_) => Ok(Collected::Debited),
            Err(CommandError::Refused(Refusal::Ledger(Rejection::DuplicateExternalId { existing }))) => {
                match self.transaction(existing, ctx)? {
                    Some(t) if t.status == TxStatus::Error => Ok(Collected::Refused(Failure::NoFunds)),
                    Some(_) => Ok(Collected::Debited),
                    None => {
                        Err(self.halt(&format!("transaction {existing} of an externalId is missing"), ctx))
                    }
                }
            }
            // The balance or a limit: the payer's account cannot pay it today.
            Err(CommandError::Refused(Refusal::Ledger(_))) => Ok(Collected::Refused(Failure::NoFunds)),
            Err(e) => Err(e),
        }
    }
}

impl Handler<CollectCobr> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Collected, CommandError>>;

    fn handle(&mut self, msg: CollectCobr, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.collect(msg, ctx);
        // Its debit goes to the bank once durable, as a request's does.
        self.forget_when_durable(ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<CreateCobr> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Cobr, CommandError>>;

    fn handle(&mut self, msg: CreateCobr, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.create_cobr(msg, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<ChangeCobr> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Cobr, CommandError>>;

    fn handle(&mut self, msg: ChangeCobr, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.change_cobr(msg, ctx);
        self.reply_when_durable(reply)
    }
}

impl AccountActor {
    fn create_locrec(&mut self, ctx: &mut Context<Self>) -> Result<LocRec, CommandError> {
        self.view()?;
        let mut ids = self.draw_ids(1, ctx)?;
        let now = self.now();
        match decide::create_locrec(&self.view()?, self.deps.rec_locations.as_ref(), now, &mut ids) {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }
}

impl AccountActor {
    fn unlink_locrec(&mut self, id: u64, ctx: &mut Context<Self>) -> Result<LocRec, CommandError> {
        self.view()?;
        let found = self.deps.repo.locrec(self.account.id, id);
        let Some(mut loc) = self.read(found, ctx)? else {
            return Err(CommandError::Refused(Refusal::Rec(RecError::LocationNotFound)));
        };
        // A recurrence still in flight may have taken it.
        if let Some(r) = self.in_flight_rec_of_location(id) {
            loc.id_rec = Some(r.id.clone());
        }
        let Some(id_rec) = loc.id_rec.clone() else { return Ok(loc) };
        let rec = self.find_rec(&RecRef::Rec(id_rec), ctx)?;
        let plan = decide::unlink_locrec(rec, loc, self.now());
        self.execute(plan, ctx)
    }
}

impl Handler<UnlinkLocRec> for AccountActor {
    type Result = ResponseActFuture<Self, Result<LocRec, CommandError>>;

    fn handle(&mut self, msg: UnlinkLocRec, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.unlink_locrec(msg.id, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<CreateLocRec> for AccountActor {
    type Result = ResponseActFuture<Self, Result<LocRec, CommandError>>;

    fn handle(&mut self, _: CreateLocRec, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.create_locrec(ctx);
        self.reply_when_durable(reply)
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
