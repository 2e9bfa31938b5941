//! Refunds in the account actor: refund a received PIX (a debit, held until the payer's
//! bank settles it), and take back money a counterparty returns (a credit).
//!
//! The original's `refunded` sum is updated in the same batch as the refund, so the rule
//! "refunds never exceed the amount" holds under any concurrency: the actor decides one
//! refund at a time on the sum that includes every earlier one, pending ones too. A refund
//! that fails gives its amount back to that sum.

use actix::prelude::*;
use uuid::Uuid;

use super::actor::AccountActor;
use super::messages::{PayError, Refund, RefundRequest, ReturnPayment};
use crate::domain::events::event_for;
use crate::domain::ledger::{DebitDecision, DebitRequest, Rejection};
use crate::domain::money::Money;
use crate::domain::refunds::{check_refund, check_return, RefundRejection};
use crate::domain::transaction::{
    end_to_end_id, Family, Natureza, RefundDetails, Transaction, TxKind, TxStatus,
};
use crate::sim::GATEWAY_ISPB;
use crate::store::{Batch, RepoError};

fn unavailable(e: RepoError) -> PayError {
    PayError::Unavailable(e.to_string())
}

impl AccountActor {
    /// The account's own transaction, or "nothing to refund".
    fn own(&mut self, local_id: u64) -> Result<Transaction, PayError> {
        let account = self.account.id;
        self.transaction(local_id)?
            .filter(|t| t.account_id == account)
            .ok_or(PayError::Refund(RefundRejection::NotReceived))
    }

    fn refund(
        &mut self,
        req: RefundRequest,
        ctx: &mut Context<Self>,
    ) -> Result<(Transaction, bool), PayError> {
        let taken = {
            let ledger = self.ledger.as_ref().map_err(|e| PayError::Unavailable(e.clone()))?;
            match req.refund_id.as_deref() {
                Some(id) => match ledger.external_id(id) {
                    Some(local) => Some(local),
                    None => self.stored_keys(Some(id), None)?.external,
                },
                None => None,
            }
        };
        if let Some(existing) = taken {
            // The same id again: the same refund if it asks the same, else a conflict.
            let earlier = self.own(existing)?;
            let same = earlier.kind == TxKind::RefundIn
                && earlier.value == req.value
                && earlier.refund.as_ref().is_some_and(|r| r.original_local_id == req.original_local_id);
            return if same {
                Ok((earlier, true))
            } else {
                Err(PayError::Rejected(Rejection::DuplicateExternalId { existing }))
            };
        }
        let now = self.deps.clock.now();
        let mut original = self.own(req.original_local_id)?;
        check_refund(&original, req.value, now).map_err(PayError::Refund)?;
        let ledger = self.ledger.as_ref().map_err(|e| PayError::Unavailable(e.clone()))?;
        let local_id =
            self.deps.repo.store().generate_id().map_err(|e| PayError::Unavailable(e.to_string()))?;
        let fee = self.fee_rule(TxKind::RefundIn).fee_for(req.value);
        let debit = DebitRequest {
            local_id,
            external_id: req.refund_id.clone(),
            idempotency: None,
            value: req.value,
            fee,
            hold: true,
            limited: false,
            now,
            stored: crate::domain::ledger::StoredKeys::default(),
        };
        let effects = match ledger.decide_debit(&debit, &self.account.settings.limits) {
            Ok(DebitDecision::Accept(e)) => e,
            Ok(DebitDecision::Replay { .. }) => return Err(PayError::Internal("replay of a refund".into())),
            Err(r) => return Err(PayError::Rejected(r)),
        };
        let rtr_id = end_to_end_id('D', GATEWAY_ISPB, now, &Uuid::new_v4().into_bytes());
        let tx = Transaction {
            fee,
            external_id: req.refund_id.clone(),
            end_to_end_id: rtr_id.clone(),
            description: req.reason.clone(),
            counterpart: original.counterpart.clone(),
            scenario: req.scenario,
            refund: Some(RefundDetails {
                original_local_id: original.local_id,
                original_end_to_end_id: original.end_to_end_id.clone(),
                refund_id: req.refund_id,
                rtr_id,
                natureza: req.natureza,
                reason: req.reason,
                family: req.family,
            }),
            ..Transaction::new(local_id, Uuid::new_v4(), self.account.id, TxKind::RefundIn, req.value, now)
        };
        original.refunded =
            original.refunded.checked_add(req.value).ok_or(PayError::Rejected(Rejection::Overflow))?;
        let repo = &self.deps.repo;
        let mut b = Batch::default();
        repo.put_transaction(&mut b, &tx, true, true).map_err(unavailable)?;
        repo.put_transaction(&mut b, &original, false, false).map_err(unavailable)?;
        repo.put_ledger(&mut b, self.account.id, &effects.state).map_err(unavailable)?;
        repo.put_pending(&mut b, self.account.id, local_id, effects.hold).map_err(unavailable)?;
        self.commit(b, &[&tx, &original])?;
        if let Ok(Err(v)) = self.ledger.as_mut().map(|l| l.apply_debit(effects)) {
            return Err(self.broken(&v.to_string(), ctx));
        }
        self.track(tx.clone());
        Ok((tx, false))
    }

    fn take_back(&mut self, msg: ReturnPayment, ctx: &mut Context<Self>) -> Result<Transaction, PayError> {
        let mut original = self.own(msg.original_local_id)?;
        check_return(&original, msg.value).map_err(PayError::Refund)?;
        let ledger = self.ledger.as_ref().map_err(|e| PayError::Unavailable(e.clone()))?;
        let effects = ledger.decide_credit(msg.value, Money::ZERO).map_err(PayError::Rejected)?;
        let now = self.deps.clock.now();
        let local_id =
            self.deps.repo.store().generate_id().map_err(|e| PayError::Unavailable(e.to_string()))?;
        let ispb = original.counterpart.bank.as_ref().map_or("00000000", |b| b.ispb.as_str()).to_owned();
        let rtr_id = end_to_end_id('D', &ispb, now, &Uuid::new_v4().into_bytes());
        let tx = Transaction {
            status: TxStatus::Confirmed,
            end_to_end_id: rtr_id.clone(),
            counterpart: original.counterpart.clone(),
            processed_at: Some(now),
            refund: Some(RefundDetails {
                original_local_id: original.local_id,
                original_end_to_end_id: original.end_to_end_id.clone(),
                refund_id: None,
                rtr_id,
                natureza: Natureza::Original,
                reason: None,
                family: Family::A,
            }),
            ..Transaction::new(local_id, Uuid::new_v4(), self.account.id, TxKind::RefundOut, msg.value, now)
        };
        original.refunded =
            original.refunded.checked_add(msg.value).ok_or(PayError::Rejected(Rejection::Overflow))?;
        let repo = &self.deps.repo;
        let mut b = Batch::default();
        repo.put_transaction(&mut b, &tx, true, true).map_err(unavailable)?;
        repo.put_transaction(&mut b, &original, false, false).map_err(unavailable)?;
        repo.put_ledger(&mut b, self.account.id, &effects.state).map_err(unavailable)?;
        if let Some(ev) = event_for(&tx, now) {
            repo.put_outbox(&mut b, &ev).map_err(unavailable)?;
        }
        self.commit(b, &[&tx, &original])?;
        if let Ok(Err(v)) = self.ledger.as_mut().map(|l| l.apply_credit(effects)) {
            return Err(self.broken(&v.to_string(), ctx));
        }
        Ok(tx)
    }
}

impl Handler<Refund> for AccountActor {
    type Result = ResponseActFuture<Self, Result<(Transaction, bool), PayError>>;

    fn handle(&mut self, msg: Refund, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.refund(msg.0, ctx);
        self.after_flush(reply, |act, ctx, (tx, replayed)| {
            if !replayed && tx.status == TxStatus::Pending {
                act.submit(tx, ctx);
            }
        })
    }
}

impl Handler<ReturnPayment> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Transaction, PayError>>;

    fn handle(&mut self, msg: ReturnPayment, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.take_back(msg, ctx);
        self.after_flush(reply, |_, _, _| {})
    }
}
