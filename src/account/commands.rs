//! The account actor's handlers: for each message, gather what its command needs, decide it
//! with [`crate::domain::decide`], execute the plan, and reply once it is durable.

use actix::prelude::*;

use super::actor::AccountActor;
use super::messages::*;
use crate::domain::decide::{
    self, ChargeOutcome, ChargeState, CloseMedRequest, OpenMedRequest, PayDecision, Payer, PixInRequest,
    RefundDecision, Refusal,
};
use crate::domain::ledger::Balance;
use crate::domain::med::{AnalysisResult, Med, Participant};
use crate::domain::money::Money;
use crate::domain::scenario::ChargeScenario;
use crate::domain::transaction::{Transaction, TxKind, TxStatus, PAYER_ISPB};
use crate::rail::Settled;

impl AccountActor {
    pub(super) fn pay(
        &mut self,
        req: PayRequest,
        ctx: &mut Context<Self>,
    ) -> Result<PayOutcome, CommandError> {
        self.view()?;
        let stored = self.stored_keys(
            req.external_id.as_deref(),
            req.dict.as_ref().map(|d| d.idempotency_key.as_str()),
            ctx,
        )?;
        let mut ids = self.draw_ids(1, ctx)?;
        let now = self.now();
        let decided = decide::pay(&self.view()?, req, stored, now, &mut ids);
        match decided {
            Ok(PayDecision::Plan(plan)) => {
                self.execute(*plan, ctx).map(|tx| PayOutcome { tx, replayed: false })
            }
            Ok(PayDecision::Replay(existing)) => match self.transaction(existing, ctx)? {
                Some(tx) => Ok(PayOutcome { tx, replayed: true }),
                None => {
                    Err(self.halt(&format!("transaction {existing} of an idempotency key is missing"), ctx))
                }
            },
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    fn adjust(
        &mut self,
        req: crate::domain::decide::Adjustment,
        ctx: &mut Context<Self>,
    ) -> Result<PayOutcome, CommandError> {
        self.view()?;
        let stored = self.stored_keys(Some(&req.external_id()), None, ctx)?;
        let mut ids = self.draw_ids(1, ctx)?;
        let now = self.now();
        match decide::adjust(&self.view()?, req, stored, now, &mut ids) {
            Ok(PayDecision::Plan(plan)) => {
                self.execute(*plan, ctx).map(|tx| PayOutcome { tx, replayed: false })
            }
            Ok(PayDecision::Replay(existing)) => {
                match self.transaction(existing, ctx)? {
                    Some(tx) => Ok(PayOutcome { tx, replayed: true }),
                    None => Err(self
                        .halt(&format!("transaction {existing} of an operator reference is missing"), ctx)),
                }
            }
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    fn pix_in(&mut self, msg: PixIn, ctx: &mut Context<Self>) -> Result<Transaction, CommandError> {
        self.view()?;
        let mut ids = self.draw_ids(1, ctx)?;
        let req = PixInRequest {
            value: msg.value,
            payer_name: msg.payer_name,
            payer_document: msg.payer_document,
            payer_bank: self.institution(PAYER_ISPB),
            end_to_end_id: None,
            paid_txid: None,
        };
        let now = self.now();
        let decided = decide::pix_in(&self.view()?, req, now, &mut ids);
        match decided {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    /// Whether a charge of this account has this txid: open, in flight, or stored.
    fn txid_taken(&mut self, txid: &str, ctx: &mut Context<Self>) -> Result<bool, CommandError> {
        let has = |t: &Transaction| t.charge.as_ref().is_some_and(|c| c.txid == txid);
        if self.open_charges_any(has) || self.unapplied_any(has) {
            return Ok(true);
        }
        let r = self.deps.repo.charge_by_txid(self.account.id, txid);
        Ok(self.read(r, ctx)?.is_some())
    }

    fn create_charge(
        &mut self,
        req: ChargeRequest,
        ctx: &mut Context<Self>,
    ) -> Result<Transaction, CommandError> {
        self.view()?;
        let txid_taken = match &req.txid {
            Some(txid) => self.txid_taken(txid, ctx)?,
            None => false,
        };
        let stored = self.stored_keys(req.external_id.as_deref(), None, ctx)?;
        let mut ids = self.draw_ids(1, ctx)?;
        let scenario = req.scenario;
        let now = self.now();
        let decided = decide::create_charge(&self.view()?, req, txid_taken, stored, now, &mut ids);
        let tx = match decided {
            Ok(plan) => self.execute(plan, ctx)?,
            Err(r) => return Err(self.refused(r, ctx)),
        };
        match scenario {
            Some(ChargeScenario::PayNow) => {
                self.pay_charge(tx.local_id, None, None, ctx)?;
            }
            Some(ChargeScenario::ExpireNow) => {
                let plan = decide::expire_charge(tx.clone(), self.now());
                self.execute(plan, ctx)?;
            }
            _ => {}
        }
        Ok(tx)
    }

    /// A charge as this actor knows it: open, or its status.
    fn charge_state(&mut self, local_id: u64, ctx: &mut Context<Self>) -> Result<ChargeState, CommandError> {
        if let Some(tx) = self.open_charge(local_id) {
            return Ok(ChargeState::Open(Box::new(tx.clone())));
        }
        Ok(ChargeState::Closed(self.transaction(local_id, ctx)?.map(|t| t.status)))
    }

    fn pay_charge(
        &mut self,
        local_id: u64,
        payer: Option<Payer>,
        amount: Option<Money>,
        ctx: &mut Context<Self>,
    ) -> Result<Transaction, CommandError> {
        self.view()?;
        let charge = self.charge_state(local_id, ctx)?;
        let splits = match &charge {
            ChargeState::Open(tx) => tx.charge.as_ref().map(|c| c.splits.clone()).unwrap_or_default(),
            ChargeState::Closed(_) => Vec::new(),
        };
        let directory = &self.deps.directory;
        let split_banks: Vec<_> =
            splits.iter().map(|s| directory.lookup(&s.key).and_then(|e| directory.bank_of(e))).collect();
        let payer_bank = self.institution(PAYER_ISPB);
        // One for the payer's end-to-end id, one per split.
        let mut ids = self.draw_ids(1 + splits.len(), ctx)?;
        let now = self.now();
        let offer = decide::Offer { payer, amount, at: None };
        let decided =
            decide::pay_charge(&self.view()?, charge, offer, payer_bank, &split_banks, now, &mut ids);
        match decided {
            Ok(plan) => match self.execute(plan, ctx)? {
                ChargeOutcome::Paid(tx) => Ok(*tx),
                ChargeOutcome::Expired => {
                    Err(CommandError::Refused(Refusal::NotPayable(TxStatus::Error.as_str())))
                }
            },
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    /// Carries out a credit an on-us payment owes this account, once: a credit whose record
    /// is gone, or whose transaction is still in flight, was carried out before.
    fn receive_on_us(
        &mut self,
        credit: decide::OnUsCredit,
        ctx: &mut Context<Self>,
    ) -> Result<(), CommandError> {
        self.view()?;
        let e2e = credit.end_to_end_id.clone();
        // A credit's transaction (an account may pay itself: its own debit has this id too).
        let credit_tx = |t: &Transaction| {
            t.end_to_end_id == e2e && matches!(t.kind, TxKind::PixIn | TxKind::CashIn | TxKind::RefundOut)
        };
        if self.unapplied_any(credit_tx) {
            return Ok(());
        }
        let r = self.deps.repo.on_us_credit(&e2e);
        if self.read(r, ctx)?.is_none() {
            return Ok(());
        }
        // Money back of a payment this account made: a Refund out of that payment.
        if let Some(paid) = credit.returns.clone() {
            let account = self.account.id;
            let r = self.deps.repo.transactions_by_e2e(account, &paid);
            let payment =
                self.read(r, ctx)?.into_iter().find(|t| t.kind.is_debit() && t.end_to_end_id == paid);
            // As this actor has it now: an earlier return may not be in storage yet.
            let original = match payment {
                Some(t) => self.transaction(t.local_id, ctx)?,
                None => None,
            };
            let mut ids = self.draw_ids(1, ctx)?;
            let now = self.now();
            return match decide::receive_on_us_return(&self.view()?, credit, original, now, &mut ids) {
                Ok(plan) => self.execute(plan, ctx).map(|_| ()),
                Err(r) => Err(self.refused(r, ctx)),
            };
        }
        // The debit of an on-us recurring charge settles the charge that awaits it.
        let awaiting = match credit.reference.as_deref().and_then(crate::domain::cobr::cobr_of_reference) {
            Some((local, txid)) => self.cobr_named(local, txid, ctx)?,
            None => None,
        };
        if let Some(cobr) = awaiting {
            let mut ids = self.draw_ids(1, ctx)?;
            let bank = Some(crate::rail::sim::bank::gateway_bank());
            let now = self.now();
            match decide::settle_cobr_on_us(&self.view()?, cobr, &credit, bank, now, &mut ids) {
                Ok(Some(plan)) => return self.execute(plan, ctx).map(|_| ()),
                // It no longer awaits one: a received PIX like any other, below.
                Ok(None) => {}
                Err(r) => return Err(self.refused(r, ctx)),
            }
        }
        let charge = match credit.reference.as_deref() {
            Some(reference) => match self.open_charge_matching(|c| decide::names_charge(reference, c)) {
                Some(open) => Some(open),
                // Its deadline may have closed it after the payer paid: the rules decide.
                None => self.charge_named(reference, ctx)?,
            },
            None => None,
        };
        let splits =
            charge.as_ref().and_then(|c| c.charge.as_ref()).map(|c| c.splits.clone()).unwrap_or_default();
        let directory = &self.deps.directory;
        let split_banks: Vec<_> =
            splits.iter().map(|s| directory.lookup(&s.key).and_then(|e| directory.bank_of(e))).collect();
        let payer_bank = Some(crate::rail::sim::bank::gateway_bank());
        let mut ids = self.draw_ids(1 + splits.len(), ctx)?;
        let now = self.now();
        let decided =
            decide::receive_on_us(&self.view()?, credit, charge, payer_bank, &split_banks, now, &mut ids);
        match decided {
            Ok(plan) => self.execute(plan, ctx).map(|_| ()),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    /// The charge of this account a BR Code's reference names, in whatever state.
    pub(super) fn charge_named(
        &mut self,
        reference: &str,
        ctx: &mut Context<Self>,
    ) -> Result<Option<Transaction>, CommandError> {
        use crate::domain::transaction::{parse_code_reference, CodeReference};
        let local = match parse_code_reference(reference) {
            CodeReference::Local(local) => Some(local),
            CodeReference::Txid(txid) => {
                let r = self.deps.repo.charge_by_txid(self.account.id, txid);
                self.read(r, ctx)?.map(|t| t.local_id)
            }
        };
        let Some(local) = local else { return Ok(None) };
        Ok(self.transaction(local, ctx)?.filter(|t| decide::names_charge(reference, t)))
    }

    fn revise_charge(
        &mut self,
        msg: ReviseCharge,
        ctx: &mut Context<Self>,
    ) -> Result<Transaction, CommandError> {
        self.view()?;
        let charge = self.charge_state(msg.local_id, ctx)?;
        match decide::revise_charge(charge, msg.request, msg.based_on, self.now()) {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    fn cancel_charge(&mut self, local_id: u64, ctx: &mut Context<Self>) -> Result<Transaction, CommandError> {
        self.view()?;
        let charge = self.charge_state(local_id, ctx)?;
        match decide::cancel_charge(charge, self.now()) {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    fn refund(
        &mut self,
        req: RefundRequest,
        ctx: &mut Context<Self>,
    ) -> Result<(Transaction, bool), CommandError> {
        let in_flight = req.refund_id.as_deref().and_then(|id| self.view().ok()?.ledger.external_id(id));
        self.view()?;
        let owner = match (req.refund_id.as_deref(), in_flight) {
            (_, Some(local)) => Some(local),
            (Some(id), None) => self.stored_keys(Some(id), None, ctx)?.external,
            (None, None) => None,
        };
        let taken = match owner {
            Some(existing) => Some((existing, self.transaction(existing, ctx)?)),
            None => None,
        };
        let original = match taken {
            Some(_) => None,
            None => self.transaction(req.original_local_id, ctx)?,
        };
        let mut ids = self.draw_ids(1, ctx)?;
        let now = self.now();
        let decided = decide::refund(&self.view()?, req, taken, original, now, &mut ids);
        match decided {
            Ok(RefundDecision::Replay(tx)) => Ok((*tx, true)),
            Ok(RefundDecision::Plan(plan)) => self.execute(*plan, ctx).map(|tx| (tx, false)),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    fn take_back(
        &mut self,
        msg: ReturnPayment,
        ctx: &mut Context<Self>,
    ) -> Result<Transaction, CommandError> {
        self.view()?;
        let original = self.transaction(msg.original_local_id, ctx)?;
        let mut ids = self.draw_ids(1, ctx)?;
        let now = self.now();
        let decided = decide::take_back(&self.view()?, original, msg.value, None, now, &mut ids);
        match decided {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    fn open_med(&mut self, msg: OpenMed, ctx: &mut Context<Self>) -> Result<Med, CommandError> {
        self.view()?;
        if let Some(report) = msg.infraction.as_ref().map(|i| i.report_id.clone()) {
            if let Some(med) = self.med_of_report(&report, ctx)? {
                return Ok(med);
            }
        }
        // The receipt first: an account that paid itself has its payment under the same id.
        let r = self.deps.repo.transactions_by_e2e(self.account.id, &msg.end_to_end);
        let mut found = self.read(r, ctx)?;
        found.retain(|t| t.account_id == self.account.id);
        found.sort_by_key(|t| !t.is_received());
        let found = found.into_iter().next();
        // The actor's own view: storage may lag its latest write of it.
        let original = match found {
            Some(t) => self.transaction(t.local_id, ctx)?,
            None => None,
        };
        let institution = msg
            .end_to_end
            .get(1..9)
            .and_then(|ispb| self.deps.directory.institution(ispb))
            .map(|i| Participant { ispb: i.ispb.clone(), name: i.name.clone() });
        let req = OpenMedRequest {
            end_to_end: msg.end_to_end,
            cause: msg.cause,
            amount: msg.amount,
            description: msg.description,
            dict_refund_id: msg.dict_refund_id,
            infraction: msg.infraction,
        };
        let mut ids = self.draw_ids(1, ctx)?;
        let now = self.now();
        let decided = decide::open_med(&self.view()?, req, original, institution, now, &mut ids);
        match decided {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    /// A MED as it is now: the actor's copy ahead of storage, or storage's.
    fn latest_med(&mut self, id: u64, ctx: &mut Context<Self>) -> Result<Option<Med>, CommandError> {
        match self.unclosed_med(id) {
            Some(m) => Ok(Some(m.clone())),
            None => {
                let r = self.deps.repo.med(self.account.id, id);
                self.read(r, ctx)
            }
        }
    }

    /// The MED 2.0 case that answers infraction report `report`, if one does.
    fn med_of_report(&mut self, report: &str, ctx: &mut Context<Self>) -> Result<Option<Med>, CommandError> {
        let of = |m: &Med| m.infraction.as_ref().is_some_and(|i| i.report_id == report);
        if let Some(m) = self.live_meds().into_iter().find(|m| of(m)) {
            return Ok(Some(m));
        }
        let r = self.deps.repo.meds_page(self.account.id, of, 0, 1).map(|(m, _)| m);
        let Some(m) = self.read(r, ctx)?.into_iter().next() else { return Ok(None) };
        self.latest_med(m.id, ctx)
    }

    fn return_med(&mut self, msg: ReturnMed, ctx: &mut Context<Self>) -> Result<Med, CommandError> {
        self.view()?;
        let med = self.latest_med(msg.id, ctx)?;
        if let Some(m) = med.as_ref().filter(|m| {
            !m.awaiting_return() && m.infraction.as_ref().is_some_and(|i| i.returned_at.is_some())
        }) {
            // Asked again (a lost answer, a restart): the return it made already.
            return Ok(m.clone());
        }
        let original = match med.as_ref().and_then(|m| m.original_transaction_id) {
            Some(local) => self.transaction(local, ctx)?,
            None => None,
        };
        let mut ids = self.draw_ids(1, ctx)?;
        let now = self.now();
        let decided = decide::return_med(&self.view()?, med, msg.requested, original, now, &mut ids);
        match decided {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    fn release_case(&mut self, msg: ReleaseCase, ctx: &mut Context<Self>) -> Result<Med, CommandError> {
        self.view()?;
        let med = self.latest_med(msg.id, ctx)?;
        if let Some(m) = med.as_ref().filter(|m| m.status == crate::domain::med::MedStatus::Cancelled) {
            return Ok(m.clone());
        }
        match decide::release_case(&self.view()?, med, self.now()) {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    fn add_evidence(&mut self, msg: AddEvidence, ctx: &mut Context<Self>) -> Result<Med, CommandError> {
        self.view()?;
        let med = self.latest_med(msg.id, ctx)?;
        match decide::add_evidence(med, msg.text, self.now()) {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    /// Blocks what arrived for the MED 2.0 cases that lack part of their amount (right after
    /// a credit, in the same turn of the actor: nothing can spend it in between). The live
    /// cases are the actor's: loaded when it starts, kept as they are written.
    pub(super) fn top_up_meds(&mut self, ctx: &mut Context<Self>) -> Result<(), CommandError> {
        let mut short: Vec<Med> = self.live_meds();
        short.retain(|m| !m.shortfall().is_zero());
        if short.is_empty() {
            return Ok(());
        }
        match decide::top_up(&self.view()?, short, self.now()) {
            Ok(Some(plan)) => self.execute(plan, ctx),
            Ok(None) => Ok(()),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    fn close_med(&mut self, msg: CloseMed, ctx: &mut Context<Self>) -> Result<Med, CommandError> {
        self.view()?;
        let med = self.latest_med(msg.id, ctx)?;
        let approved = msg.result == Some(AnalysisResult::Approved);
        let original = match med.as_ref().and_then(|m| m.original_transaction_id.filter(|_| approved)) {
            Some(local) => self.transaction(local, ctx)?,
            None => None,
        };
        let mut ids = self.draw_ids(usize::from(approved), ctx)?;
        let req = CloseMedRequest { result: msg.result, details: msg.details, fraud_type: msg.fraud_type };
        let now = self.now();
        let decided = decide::close_med(&self.view()?, med, req, original, now, &mut ids);
        match decided {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }
}

impl Handler<Pay> for AccountActor {
    type Result = ResponseActFuture<Self, Result<PayOutcome, CommandError>>;

    fn handle(&mut self, msg: Pay, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.pay(msg.0, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<PixIn> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Transaction, CommandError>>;

    fn handle(&mut self, msg: PixIn, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.pix_in(msg, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<GetBalance> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Balance, CommandError>>;

    fn handle(&mut self, _: GetBalance, _: &mut Context<Self>) -> Self::Result {
        let reply = self.view().map(|v| v.ledger.balance());
        self.reply_when_durable(reply)
    }
}

impl Handler<Settled> for AccountActor {
    type Result = ();

    fn handle(&mut self, msg: Settled, ctx: &mut Context<Self>) {
        self.settle(msg.local_id, msg.outcome, msg.on_us, ctx);
    }
}

impl Handler<Tick> for AccountActor {
    type Result = ResponseActFuture<Self, Result<(), CommandError>>;

    /// Does everything due, in one go, and answers once it is on disk, so the clock route's
    /// caller reads it back (the timer does it in turns instead: `expire_due`).
    fn handle(&mut self, _: Tick, ctx: &mut Context<Self>) -> Self::Result {
        // The clock may have moved (the test clock): the timer's wait was measured on the
        // old time, so it is armed again on the new one.
        self.disarm(ctx);
        // What a round does may set a deadline that has come too (it would otherwise be
        // left to the timer, after this answer): rounds go on until nothing is due.
        for _ in 0..super::actor::TICK_ROUNDS_MAX {
            self.expire_due_up_to(usize::MAX, ctx);
            if self.halted() || !self.anything_due() {
                break;
            }
        }
        // Time moving is not a request: it must not keep an idle actor alive.
        self.untouched_reply()
    }
}

impl Handler<SettingsChanged> for AccountActor {
    type Result = ();

    fn handle(&mut self, msg: SettingsChanged, _: &mut Context<Self>) {
        self.account.settings = msg.0;
    }
}

impl Handler<Adjust> for AccountActor {
    type Result = ResponseActFuture<Self, Result<PayOutcome, CommandError>>;

    fn handle(&mut self, msg: Adjust, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.adjust(msg.0, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<super::messages::NameChanged> for AccountActor {
    type Result = ();

    fn handle(&mut self, msg: super::messages::NameChanged, _: &mut Context<Self>) {
        self.set_name(msg.0);
    }
}

impl Handler<ReceivingKeyChanged> for AccountActor {
    type Result = ();

    fn handle(&mut self, msg: ReceivingKeyChanged, _: &mut Context<Self>) {
        self.set_receiving_key(msg.0);
    }
}

impl Handler<CreateCharge> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Transaction, CommandError>>;

    fn handle(&mut self, msg: CreateCharge, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.create_charge(msg.0, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<PayCharge> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Transaction, CommandError>>;

    fn handle(&mut self, msg: PayCharge, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.pay_charge(msg.local_id, msg.payer, msg.amount, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<ReviseCharge> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Transaction, CommandError>>;

    fn handle(&mut self, msg: ReviseCharge, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.revise_charge(msg, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<ReceiveOnUs> for AccountActor {
    type Result = ResponseActFuture<Self, Result<(), CommandError>>;

    fn handle(&mut self, msg: ReceiveOnUs, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.receive_on_us(msg.0, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<CancelCharge> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Transaction, CommandError>>;

    fn handle(&mut self, msg: CancelCharge, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.cancel_charge(msg.local_id, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<Refund> for AccountActor {
    type Result = ResponseActFuture<Self, Result<(Transaction, bool), CommandError>>;

    fn handle(&mut self, msg: Refund, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.refund(msg.0, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<ReturnPayment> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Transaction, CommandError>>;

    fn handle(&mut self, msg: ReturnPayment, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.take_back(msg, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<OpenMed> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Med, CommandError>>;

    fn handle(&mut self, msg: OpenMed, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.open_med(msg, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<ReturnMed> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Med, CommandError>>;

    fn handle(&mut self, msg: ReturnMed, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.return_med(msg, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<ReleaseCase> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Med, CommandError>>;

    fn handle(&mut self, msg: ReleaseCase, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.release_case(msg, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<AddEvidence> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Med, CommandError>>;

    fn handle(&mut self, msg: AddEvidence, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.add_evidence(msg, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<CloseMed> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Med, CommandError>>;

    fn handle(&mut self, msg: CloseMed, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.close_med(msg, ctx);
        self.reply_when_durable(reply)
    }
}
