//! Charges in the account actor: create, pay, expire (issue "Money in and back").
//!
//! A charge moves no money until it is paid: creating it only takes its externalId. Paid
//! while `now < expiresAt` on the server clock, it credits value minus the cash-in fee and
//! becomes CONFIRMED; at `expiresAt` it becomes ERROR / EXPIRED and can no longer be paid.
//! Both changes write the `cash_in` event.

use actix::prelude::*;
use uuid::Uuid;

use super::actor::AccountActor;
use super::messages::{CancelCharge, ChargeRequest, CreateCharge, PayCharge, PayError};
use crate::domain::brcode::{generate, BrCodeSpec};
use crate::domain::events::event_for;
use crate::domain::ledger::{DebitDecision, DebitRequest};
use crate::domain::money::Money;
use crate::domain::scenario::ChargeScenario;
use crate::domain::splits::next_run;
use crate::domain::transaction::{
    end_to_end_id, BankInfo, ChargeDetails, Counterpart, ErrorCode, Transaction, TxKind, TxStatus,
};
use crate::store::{Batch, RepoError};

/// The city a charge's BR Code names (the gateway's accounts carry no address).
pub const CHARGE_CITY: &str = "SAO PAULO";
/// The ISPB of the simulated payers' bank.
pub const PAYER_ISPB: &str = "00000000";

fn unavailable(e: RepoError) -> PayError {
    PayError::Unavailable(e.to_string())
}

impl AccountActor {
    /// Whether a charge of this account has this txid: open, queued, or stored.
    fn txid_taken(&mut self, txid: &str) -> Result<bool, PayError> {
        let has = |t: &Transaction| t.charge.as_ref().is_some_and(|c| c.txid == txid);
        if self.open_charges.values().any(has) || self.unapplied_any(has) {
            return Ok(true);
        }
        Ok(self.deps.repo.charge_by_txid(self.account.id, txid).map_err(unavailable)?.is_some())
    }

    fn create_charge(
        &mut self,
        req: ChargeRequest,
        ctx: &mut Context<Self>,
    ) -> Result<Transaction, PayError> {
        let minimum = match req.scenario {
            Some(ChargeScenario::ProviderExpirationMin(s)) => s,
            _ => self.account.settings.provider_min_expiration_seconds,
        };
        // The provider minimum is a family A rule; a cob's expiracao is the client's.
        if req.cob.is_none() && req.expiration_seconds < minimum {
            return Err(PayError::BelowProviderMinimum(minimum));
        }
        if let Some(txid) = &req.txid {
            if self.txid_taken(txid)? {
                return Err(PayError::TxidTaken);
            }
        }
        let ledger = self.ledger.as_ref().map_err(|e| PayError::Unavailable(e.clone()))?;
        let now = self.deps.clock.now();
        let local_id =
            self.deps.repo.store().generate_id().map_err(|e| PayError::Unavailable(e.to_string()))?;
        // Creating a charge takes its externalId and nothing else.
        let take_id = DebitRequest {
            local_id,
            external_id: req.external_id.clone(),
            idempotency: None,
            value: req.value,
            fee: Money::ZERO,
            hold: false,
            limited: false,
            now,
            stored: self.stored_keys(req.external_id.as_deref(), None)?,
        };
        let effects = match ledger.decide_debit(&take_id, &self.account.settings.limits) {
            Ok(DebitDecision::Accept(e)) => e,
            Ok(DebitDecision::Replay { .. }) => return Err(PayError::Internal("replay of a charge".into())),
            Err(r) => return Err(PayError::Rejected(r)),
        };
        let txid: String = req
            .txid
            .clone()
            .unwrap_or_else(|| Uuid::new_v4().simple().to_string().chars().take(25).collect());
        let pix_code = generate(&BrCodeSpec {
            single_use: true,
            key: self.account.receiving_key.clone(),
            info: None,
            amount: Some(req.value),
            merchant_name: self.account.profile.name.as_str().to_owned(),
            merchant_city: CHARGE_CITY.into(),
            txid: Some(txid.clone()),
        });
        let tx = Transaction {
            external_id: req.external_id,
            description: Some(req.description),
            counterpart: Counterpart {
                name: req.payer_name,
                document: req.payer_document,
                ..Counterpart::default()
            },
            charge: Some(ChargeDetails {
                correlation_id: Uuid::new_v4(),
                txid,
                pix_code,
                expires_at: expiration(now, req.expiration_seconds),
                additional_info: req.additional_info,
                cob: req.cob,
                splits: req.splits,
                split_transactions: Vec::new(),
            }),
            ..Transaction::new(local_id, Uuid::new_v4(), self.account.id, TxKind::CashIn, req.value, now)
        };
        let repo = &self.deps.repo;
        let mut b = Batch::default();
        repo.put_transaction(&mut b, &tx, true, false).map_err(unavailable)?;
        repo.put_open_charge(&mut b, self.account.id, local_id);
        self.commit(b, &[&tx])?;
        if let Ok(Err(v)) = self.ledger.as_mut().map(|l| l.apply_debit(effects)) {
            return Err(self.broken(&v.to_string(), ctx));
        }
        self.track_charge(tx.clone());
        match req.scenario {
            Some(ChargeScenario::PayNow) => {
                self.pay_charge(local_id, ctx)?;
            }
            Some(ChargeScenario::ExpireNow) => self.expire_charge(local_id)?,
            _ => {}
        }
        Ok(tx)
    }

    /// Pays an open charge; one paid at or after its expiration expires instead.
    pub(super) fn pay_charge(
        &mut self,
        local_id: u64,
        ctx: &mut Context<Self>,
    ) -> Result<Transaction, PayError> {
        let now = self.deps.clock.now();
        let Some(mut tx) = self.open_charges.get(&local_id).cloned() else {
            let status = self.transaction(local_id)?.map(|t| t.status);
            return Err(PayError::NotPayable(status.map_or("UNKNOWN", TxStatus::as_str)));
        };
        let expires_at = tx.charge.as_ref().map(|c| c.expires_at).unwrap_or(now);
        if now >= expires_at {
            self.expire_charge(local_id)?;
            return Err(PayError::NotPayable("ERROR"));
        }
        let ledger = self.ledger.as_ref().map_err(|e| PayError::Unavailable(e.clone()))?;
        let fee = self.fee_rule(TxKind::CashIn).fee_for(tx.value);
        let effects = ledger.decide_credit(tx.value, fee).map_err(PayError::Rejected)?;
        let split_ids = (0..tx.charge.as_ref().map_or(0, |c| c.splits.len()))
            .map(|_| self.deps.repo.store().generate_id().map_err(|e| PayError::Unavailable(e.to_string())))
            .collect::<Result<Vec<u64>, _>>()?;
        tx.status = TxStatus::Confirmed;
        tx.fee = fee;
        tx.processed_at = Some(now);
        tx.end_to_end_id = end_to_end_id('E', PAYER_ISPB, now, &Uuid::new_v4().into_bytes());
        tx.counterpart.bank = self.deps.directory.institution(PAYER_ISPB).map(|i| BankInfo {
            ispb: i.ispb.clone(),
            name: i.name.clone(),
            code: i.code.clone(),
            branch: None,
            account_number: None,
        });
        // The credit and every split's hold are one step: applied to the ledger in order
        // here, written in one batch below. If that batch cannot be queued the actor stops
        // and reloads from disk, where none of it happened.
        if let Ok(Err(v)) = self.ledger.as_mut().map(|l| l.apply_credit(effects)) {
            return Err(self.broken(&v.to_string(), ctx));
        }
        let splits = self.split_transfers(&tx, &split_ids, now, ctx)?;
        if let Some(c) = tx.charge.as_mut() {
            c.split_transactions = split_ids;
        }
        let state = *self.ledger.as_ref().map_err(|e| PayError::Unavailable(e.clone()))?.state();
        let repo = &self.deps.repo;
        let mut b = Batch::default();
        repo.put_transaction(&mut b, &tx, false, true).map_err(unavailable)?;
        repo.put_ledger(&mut b, self.account.id, &state).map_err(unavailable)?;
        repo.delete_open_charge(&mut b, self.account.id, local_id);
        if let Some(ev) = event_for(&tx, now) {
            repo.put_outbox(&mut b, &ev).map_err(unavailable)?;
        }
        for s in &splits {
            repo.put_transaction(&mut b, s, true, true).map_err(unavailable)?;
            if s.status == TxStatus::Pending {
                repo.put_pending(&mut b, self.account.id, s.local_id, s.value).map_err(unavailable)?;
            } else if let Some(ev) = event_for(s, now) {
                repo.put_outbox(&mut b, &ev).map_err(unavailable)?;
            }
        }
        let mut written: Vec<&Transaction> = vec![&tx];
        written.extend(splits.iter());
        if let Err(e) = self.commit(b, &written) {
            return Err(self.broken(&e.to_string(), ctx));
        }
        self.untrack_charge(&tx);
        for s in splits.into_iter().filter(|s| s.status == TxStatus::Pending) {
            self.track(s.clone());
            match s.scheduled_for {
                Some(at) => {
                    self.scheduled.insert((at, s.local_id));
                }
                None => self.ready.push(s),
            }
        }
        Ok(tx)
    }

    /// The transfers a paid charge's splits become: each holds its amount (no fee, no
    /// limit); one the balance cannot cover is recorded ERROR / INSUFFICIENT_BALANCE.
    fn split_transfers(
        &mut self,
        charge: &Transaction,
        ids: &[u64],
        now: chrono::DateTime<chrono::Utc>,
        ctx: &mut Context<Self>,
    ) -> Result<Vec<Transaction>, PayError> {
        let splits = charge.charge.as_ref().map(|c| c.splits.clone()).unwrap_or_default();
        let frequency = self.account.settings.split_frequency;
        let mut out = Vec::new();
        for (split, id) in splits.into_iter().zip(ids) {
            let entry = self.deps.directory.lookup(&split.key);
            let mut t = Transaction {
                end_to_end_id: end_to_end_id(
                    'E',
                    crate::sim::GATEWAY_ISPB,
                    now,
                    &Uuid::new_v4().into_bytes(),
                ),
                description: Some(format!("split of charge {}", charge.local_id)),
                counterpart: Counterpart {
                    name: split.name.clone(),
                    document: Some(split.document.clone()),
                    key: Some(split.key.key.clone()),
                    key_type: Some(split.key.key_type),
                    bank: entry.and_then(|e| self.deps.directory.bank_of(e)),
                },
                split_of: Some(charge.local_id),
                scheduled_for: (!split.immediate).then(|| next_run(frequency, now)),
                ..Transaction::new(*id, Uuid::new_v4(), self.account.id, TxKind::CashOut, split.amount, now)
            };
            let ledger = self.ledger.as_ref().map_err(|e| PayError::Unavailable(e.clone()))?;
            let debit = DebitRequest {
                local_id: *id,
                external_id: None,
                idempotency: None,
                value: split.amount,
                fee: Money::ZERO,
                hold: true,
                limited: false,
                now,
                stored: crate::domain::ledger::StoredKeys::default(),
            };
            match ledger.decide_debit(&debit, &self.account.settings.limits) {
                Ok(DebitDecision::Accept(e)) => {
                    if let Ok(Err(v)) = self.ledger.as_mut().map(|l| l.apply_debit(e)) {
                        return Err(self.broken(&v.to_string(), ctx));
                    }
                }
                _ => {
                    let _ = t.settle(Err(ErrorCode::InsufficientBalance), now);
                }
            }
            out.push(t);
        }
        Ok(out)
    }

    /// Closes an open charge as ERROR / EXPIRED.
    pub(super) fn expire_charge(&mut self, local_id: u64) -> Result<(), PayError> {
        self.close_charge(local_id, ErrorCode::Expired).map(|_| ())
    }

    /// Closes an open charge as ERROR with `why`; answers it (None if it was not open).
    fn close_charge(&mut self, local_id: u64, why: ErrorCode) -> Result<Option<Transaction>, PayError> {
        let Some(mut tx) = self.open_charges.get(&local_id).cloned() else { return Ok(None) };
        let now = self.deps.clock.now();
        tx.status = TxStatus::Error;
        tx.error_code = Some(why);
        tx.processed_at = Some(now);
        let repo = &self.deps.repo;
        let mut b = Batch::default();
        repo.put_transaction(&mut b, &tx, false, false).map_err(unavailable)?;
        repo.delete_open_charge(&mut b, self.account.id, local_id);
        if let Some(ev) = event_for(&tx, now) {
            repo.put_outbox(&mut b, &ev).map_err(unavailable)?;
        }
        self.commit(b, &[&tx])?;
        self.untrack_charge(&tx);
        Ok(Some(tx))
    }
}

/// When a charge made at `now` expires: at the millisecond precision clients see it with, so
/// that it has expired exactly at its `expirationDate` and not a fraction of a millisecond
/// later (the test clock can be set to that instant).
fn expiration(now: chrono::DateTime<chrono::Utc>, seconds: u32) -> chrono::DateTime<chrono::Utc> {
    let exact = now + chrono::Duration::seconds(i64::from(seconds));
    chrono::DateTime::from_timestamp_millis(exact.timestamp_millis()).unwrap_or(exact)
}

impl Handler<CreateCharge> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Transaction, PayError>>;

    fn handle(&mut self, msg: CreateCharge, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.create_charge(msg.0, ctx);
        self.after_flush(reply, |act, ctx, _| act.submit_ready(ctx))
    }
}

impl Handler<PayCharge> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Transaction, PayError>>;

    fn handle(&mut self, msg: PayCharge, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.pay_charge(msg.local_id, ctx);
        self.after_flush(reply, |act, ctx, _| act.submit_ready(ctx))
    }
}

impl Handler<CancelCharge> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Transaction, PayError>>;

    fn handle(&mut self, msg: CancelCharge, _: &mut Context<Self>) -> Self::Result {
        let reply = match self.close_charge(msg.local_id, ErrorCode::Cancelled) {
            Ok(Some(tx)) => Ok(tx),
            Ok(None) => {
                let status = self.transaction(msg.local_id).map(|t| t.map(|t| t.status));
                match status {
                    Ok(s) => Err(PayError::NotPayable(s.map_or("UNKNOWN", TxStatus::as_str))),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        self.after_flush(reply, |_, _, _| {})
    }
}

#[cfg(test)]
mod tests {
    use super::expiration;

    #[test]
    fn a_charge_expires_at_the_millisecond_its_expiration_date_shows() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-23T02:40:04.418765432Z").unwrap().to_utc();
        let at = expiration(now, 600);
        assert_eq!(at.to_rfc3339(), "2026-11-23T02:50:04.418+00:00");
        assert_eq!(at.timestamp_subsec_nanos() % 1_000_000, 0);
    }
}
