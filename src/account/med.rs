//! MED cases in the account actor (decisions.md §5): opening one blocks the disputed
//! amount, capped at what is available, as a ledger hold named by the MED's id; the
//! analysis debits it as a Refund in (APPROVED) or releases it (REJECTED), and so does a
//! cancellation. Each step writes the MED, the ledger, any transaction and the outbox event
//! in one batch, like every payment.

use actix::prelude::*;
use uuid::Uuid;

use super::actor::AccountActor;
use super::messages::{CloseMed, OpenMed, PayError};
use crate::domain::events::EventType;
use crate::domain::events::{event_for, OutboxEvent};
use crate::domain::ledger::{DebitDecision, DebitRequest};
use crate::domain::med::{
    AnalysisResult, Bank, Med, MedReason, MedRejection, MedStatus, OriginalTransaction,
};
use crate::domain::money::Money;
use crate::domain::transaction::{end_to_end_id, Family, RefundDetails, Transaction, TxKind, TxStatus};
use crate::sim::GATEWAY_ISPB;
use crate::store::{Batch, RepoError};

fn unavailable(e: RepoError) -> PayError {
    PayError::Unavailable(e.to_string())
}

/// The event of a MED step, carrying the MED record.
fn med_event(med: &Med, event_type: EventType, name: &str) -> OutboxEvent {
    OutboxEvent {
        account_id: med.account_id,
        local_id: med.id,
        event_type,
        created_at: med.updated_at,
        payload: serde_json::json!({ "event": name, "med": med.to_json() }),
    }
}

impl AccountActor {
    fn open_med(&mut self, msg: OpenMed) -> Result<Med, PayError> {
        let now = self.deps.clock.now();
        let account = self.account.id;
        let found = self.deps.repo.transaction_by_e2e(&msg.end_to_end).map_err(unavailable)?;
        let original = match found {
            Some(t) if t.account_id == account => {
                let received =
                    matches!(t.kind, TxKind::PixIn | TxKind::CashIn) && t.status == TxStatus::Confirmed;
                if !received {
                    return Err(PayError::Med(MedRejection::NotReceived));
                }
                // The actor's own view: storage may lag its latest write of it.
                self.transaction(t.local_id)?
            }
            _ => None,
        };
        let amount = match (&original, msg.amount) {
            (Some(o), Some(a)) if a.as_decimal() > o.value.as_decimal() => {
                return Err(PayError::Med(MedRejection::AboveOriginal(o.value)))
            }
            (_, Some(a)) => a,
            (Some(o), None) => o.value,
            (None, None) => return Err(PayError::Med(MedRejection::AmountRequired)),
        };
        let ledger = self.ledger.as_ref().map_err(|e| PayError::Unavailable(e.clone()))?;
        let available = ledger.balance().available;
        let blocked = if amount.as_decimal() > available.as_decimal() { available } else { amount };
        let id = self.deps.repo.store().generate_id().map_err(|e| PayError::Unavailable(e.to_string()))?;
        let effects = if blocked.is_zero() {
            None
        } else {
            let hold = DebitRequest {
                local_id: id,
                external_id: None,
                idempotency: None,
                value: blocked,
                fee: Money::ZERO,
                hold: true,
                limited: false,
                now,
                stored: crate::domain::ledger::StoredKeys::default(),
            };
            match ledger.decide_debit(&hold, &self.account.settings.limits) {
                Ok(DebitDecision::Accept(e)) => Some(e),
                Ok(DebitDecision::Replay { .. }) => {
                    return Err(PayError::Internal("a MED hold replayed".into()))
                }
                Err(r) => return Err(PayError::Rejected(r)),
            }
        };
        let requesting_bank = original
            .as_ref()
            .and_then(|o| o.counterpart.bank.as_ref())
            .map(|b| Bank { ispb: b.ispb.clone(), name: b.name.clone() })
            .or_else(|| {
                // An unmatched end-to-end id still names the payer's institution.
                let ispb = msg.end_to_end.get(1..9)?;
                let inst = self.deps.directory.institution(ispb)?;
                Some(Bank { ispb: inst.ispb.clone(), name: inst.name.clone() })
            })
            .unwrap_or_else(|| Bank { ispb: "00000000".into(), name: "Unknown institution".into() });
        let mut med = Med {
            id,
            account_id: account.get(),
            end_to_end: msg.end_to_end,
            status: MedStatus::Open,
            reason: MedReason::RefundRequest,
            cause: Some(msg.cause),
            description: msg.description,
            analysis_result: None,
            analysis_details: None,
            requesting_bank,
            contested_bank: Bank { ispb: GATEWAY_ISPB.into(), name: "pixgw".into() },
            original: original.as_ref().map(|o| OriginalTransaction {
                amount: o.value,
                kind: serde_json::to_value(o.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                name: o.counterpart.name.clone(),
                document: crate::domain::document::masked_document(o.counterpart.document.as_deref()),
                date_time: o.created_at,
            }),
            original_transaction_id: original.as_ref().map(|o| o.local_id),
            amount,
            blocked,
            refund_transaction_id: None,
            created_at: now,
            updated_at: now,
        };
        let created = med_event(&med, EventType::MedCreated, "MedCreated");
        med.acknowledge(now);
        let repo = &self.deps.repo;
        let mut b = Batch::default();
        let write = (|| {
            repo.put_med(&mut b, &med)?;
            if let Some(e) = &effects {
                repo.put_ledger(&mut b, account, &e.state)?;
                repo.put_pending(&mut b, account, id, e.hold)?;
            }
            repo.put_outbox(&mut b, &created)?;
            Ok::<(), RepoError>(())
        })();
        write.map_err(unavailable)?;
        self.commit(b, &[])?;
        if let Some(e) = effects {
            if let Ok(Err(v)) = self.ledger.as_mut().map(|l| l.apply_debit(e)) {
                return Err(PayError::Internal(v.to_string()));
            }
        }
        Ok(med)
    }

    fn close_med(&mut self, msg: CloseMed) -> Result<Med, PayError> {
        let now = self.deps.clock.now();
        let account = self.account.id;
        let mut med = match self.meds.get(&msg.id) {
            Some(m) => m.clone(),
            None => self
                .deps
                .repo
                .med(account, msg.id)
                .map_err(unavailable)?
                .ok_or(PayError::Med(MedRejection::NotFound))?,
        };
        let approved = msg.result == Some(AnalysisResult::Approved);
        match msg.result {
            Some(result) => med.analyze(result, msg.details, now),
            None => med.cancel(now),
        }
        .map_err(|e| PayError::Med(MedRejection::Final(e)))?;
        // An approval debits what was blocked; anything else gives it back.
        let ledger = self.ledger.as_ref().map_err(|e| PayError::Unavailable(e.clone()))?;
        let settle = if med.blocked.is_zero() { None } else { ledger.decide_settle(med.id, approved) };
        if !med.blocked.is_zero() && settle.is_none() {
            return Err(PayError::Internal(format!("MED {} has no hold", med.id)));
        }
        let mut refund = None;
        let mut original = None;
        if approved && !med.blocked.is_zero() {
            let local_id =
                self.deps.repo.store().generate_id().map_err(|e| PayError::Unavailable(e.to_string()))?;
            let tx = Transaction {
                status: TxStatus::Confirmed,
                end_to_end_id: end_to_end_id('D', GATEWAY_ISPB, now, &Uuid::new_v4().into_bytes()),
                counterpart: crate::domain::transaction::Counterpart {
                    name: med
                        .original
                        .as_ref()
                        .map_or_else(|| med.requesting_bank.name.clone(), |o| o.name.clone()),
                    document: None,
                    key: None,
                    key_type: None,
                    bank: None,
                },
                processed_at: Some(now),
                description: Some(format!("MED {}", med.id)),
                refund: Some(RefundDetails {
                    original_local_id: med.original_transaction_id.unwrap_or(0),
                    original_end_to_end_id: med.end_to_end.clone(),
                    refund_id: None,
                    rtr_id: String::new(),
                    natureza: med.natureza(),
                    reason: med.cause.clone(),
                    family: Family::A,
                }),
                ..Transaction::new(local_id, Uuid::new_v4(), account, TxKind::RefundIn, med.blocked, now)
            };
            // Local ids start at 0: the Option says whether there is an original.
            if let Some(r) = med.original_transaction_id {
                if let Some(mut o) = self.transaction(r)? {
                    o.refunded = o.refunded.checked_add(med.blocked).unwrap_or(o.refunded);
                    original = Some(o);
                }
            }
            med.refund_transaction_id = Some(local_id);
            let mut tx = tx;
            if let Some(r) = tx.refund.as_mut() {
                r.rtr_id = tx.end_to_end_id.clone();
            }
            refund = Some(tx);
        }
        let event = match msg.result {
            Some(AnalysisResult::Approved) => Some(med_event(&med, EventType::MedAccepted, "MedAccepted")),
            Some(AnalysisResult::Rejected) => Some(med_event(&med, EventType::MedRejected, "MedRejected")),
            None => None,
        };
        let repo = &self.deps.repo;
        let mut b = Batch::default();
        let write = (|| {
            repo.put_med(&mut b, &med)?;
            if let Some(s) = &settle {
                repo.put_ledger(&mut b, account, &s.state)?;
                repo.delete_pending(&mut b, account, med.id);
            }
            if let Some(t) = &refund {
                repo.put_transaction(&mut b, t, true, true)?;
                if let Some(e) = event_for(t, now) {
                    repo.put_outbox(&mut b, &e)?;
                }
            }
            if let Some(o) = &original {
                repo.put_transaction(&mut b, o, false, false)?;
            }
            if let Some(e) = &event {
                repo.put_outbox(&mut b, e)?;
            }
            Ok::<(), RepoError>(())
        })();
        write.map_err(unavailable)?;
        let mut written: Vec<&Transaction> = refund.iter().collect();
        written.extend(original.iter());
        self.commit(b, &written)?;
        if let Some(s) = settle {
            if let Ok(Err(v)) = self.ledger.as_mut().map(|l| l.apply_settle(s)) {
                return Err(PayError::Internal(v.to_string()));
            }
        }
        self.meds.remove(&med.id);
        Ok(med)
    }
}

impl Handler<OpenMed> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Med, PayError>>;

    fn handle(&mut self, msg: OpenMed, _: &mut Context<Self>) -> Self::Result {
        let reply = self.open_med(msg);
        if let Ok(m) = &reply {
            // Storage lags this actor by up to one group; a quick analysis reads it here.
            self.meds.insert(m.id, m.clone());
        }
        self.after_flush(reply, |_, _, _| {})
    }
}

impl Handler<CloseMed> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Med, PayError>>;

    fn handle(&mut self, msg: CloseMed, _: &mut Context<Self>) -> Self::Result {
        let reply = self.close_med(msg);
        self.after_flush(reply, |_, _, _| {})
    }
}
