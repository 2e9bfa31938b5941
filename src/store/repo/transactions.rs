//! Transactions: their records, the indexes that find them (transactionId, end-to-end id,
//! externalId, the `/dict/pix` idempotency key, the list index and its day counters), and
//! the batch that carries out an account's plan.
//!
//! A transaction's indexes are written with its first write and never change, except the
//! list entry, whose value is the status the committer counts.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, Utc};
use uuid::Uuid;

use crate::domain::decide::Record;
use crate::domain::events::OutboxEvent;
use crate::domain::ids::{local_id_in_uuid, AccountId};
use crate::domain::ledger::LedgerChange;
use crate::domain::listing::{day_start, summary, summary_matches, Operation};
use crate::domain::transaction::{local_id_in_end_to_end, Transaction, TxKind, TxStatus};

use super::{corrupt, to_json, Repo, RepoError};

use crate::store::{codec, keys, Batch, CountedIndex, GroupCommit, StoreError};

/// An instant as the list keys spell it: milliseconds since the epoch.
fn millis(t: DateTime<Utc>) -> u64 {
    u64::try_from(t.timestamp_millis()).unwrap_or(0)
}

impl Repo {
    /// One page of the account's payments in (received PIX and charges, paid or not)
    /// created in `[from, to]` that `keep` keeps, newest first, after `skip` of them, and how
    /// many it keeps in all (the cob lists). The list index is read over the range and each
    /// payment in it loaded, so the cost grows with the account's payments in the range;
    /// only the page and the ids of the range are held.
    pub fn payments_in_page(
        &self,
        id: AccountId,
        range: (DateTime<Utc>, DateTime<Utc>),
        keep: impl Fn(&Transaction) -> bool,
        skip: usize,
        size: usize,
    ) -> Result<(Vec<Transaction>, usize), RepoError> {
        let locals = self.list_range(id, range, Operation::of(TxKind::CashIn))?;
        self.page_of(locals, keep, skip, size)
    }

    /// One page of the PIX the account received in `[from, to]`, by when their money
    /// arrived (the `pixin/` index), newest first; as [`Repo::payments_in_page`] otherwise
    /// (`GET /pix`).
    pub fn received_in_page(
        &self,
        id: AccountId,
        range: (DateTime<Utc>, DateTime<Utc>),
        keep: impl Fn(&Transaction) -> bool,
        skip: usize,
        size: usize,
    ) -> Result<(Vec<Transaction>, usize), RepoError> {
        let locals = self.received_range(id, range)?;
        self.page_of(locals, keep, skip, size)
    }

    fn page_of(
        &self,
        locals: Vec<u64>,
        keep: impl Fn(&Transaction) -> bool,
        skip: usize,
        size: usize,
    ) -> Result<(Vec<Transaction>, usize), RepoError> {
        let (mut page, mut total) = (Vec::new(), 0usize);
        for local in locals {
            let Some(tx) = self.transaction(local)? else { continue };
            if keep(&tx) {
                if total >= skip && page.len() < size {
                    page.push(tx);
                }
                total += 1;
            }
        }
        Ok((page, total))
    }

    /// The refunds (requested, done or failed) of the account's transactions `originals`,
    /// by original, oldest first. Refunds come after their original and within the refund
    /// deadline, so only that span of the list index is read.
    pub fn refunds_of(
        &self,
        id: AccountId,
        originals: &[&Transaction],
    ) -> Result<HashMap<u64, Vec<Transaction>>, RepoError> {
        let mut out: HashMap<u64, Vec<Transaction>> = HashMap::new();
        let (Some(first), Some(last)) =
            (originals.iter().map(|t| t.moved_at()).min(), originals.iter().map(|t| t.moved_at()).max())
        else {
            return Ok(out);
        };
        let wanted: std::collections::HashSet<u64> = originals.iter().map(|t| t.local_id).collect();
        let until = last + chrono::Duration::days(crate::domain::refunds::REFUND_DEADLINE_DAYS + 1);
        let mut locals = self.list_range(id, (first, until), Operation::of(TxKind::RefundIn))?;
        locals.reverse();
        for local in locals {
            let Some(tx) = self.transaction(local)? else { continue };
            if let Some(original) =
                tx.refund.as_ref().map(|r| r.original_local_id).filter(|o| wanted.contains(o))
            {
                out.entry(original).or_default().push(tx);
            }
        }
        Ok(out)
    }

    /// The local ids of the account's list entries of `operation` created in `[from, to]`,
    /// newest first.
    /// The local ids of the PIX `id` received in `[from, to]` (by when the money arrived),
    /// newest first.
    fn received_range(
        &self,
        id: AccountId,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
    ) -> Result<Vec<u64>, RepoError> {
        let end = keys::received_from(id, millis(to).saturating_add(1));
        self.locals_rev(&keys::received_from(id, millis(from)), &end, |_| true)
    }

    fn list_range(
        &self,
        id: AccountId,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        operation: Operation,
    ) -> Result<Vec<u64>, RepoError> {
        let end = keys::list_from(id, millis(to).saturating_add(1));
        self.locals_rev(&keys::list_from(id, millis(from)), &end, |v| {
            summary_matches(v, None, Some(operation))
        })
    }

    /// The local ids at the end of the keys in `[start, end)` whose value `keep` keeps, in
    /// reverse key order.
    fn locals_rev(
        &self,
        start: &[u8],
        end: &[u8],
        keep: impl Fn(&[u8]) -> bool,
    ) -> Result<Vec<u64>, RepoError> {
        let mut locals = Vec::new();
        let mut bad = None;
        self.store.scan_rev(start, end, &mut |k, v| {
            if keep(v) {
                match keys::local_at_end(k) {
                    Some(local) => locals.push(local),
                    None => bad = Some(String::from_utf8_lossy(k).into_owned()),
                }
            }
            bad.is_none()
        })?;
        match bad {
            Some(key) => Err(RepoError::Corrupt { key, reason: "no local id".into() }),
            None => Ok(locals),
        }
    }

    /// Puts a transaction; `first` (its first write) also writes its indexes, which never
    /// change afterwards, as inserts: they are new keys. Its transactionId and its own
    /// end-to-end ids carry its local id, so they need no index; an end-to-end id made
    /// elsewhere (a received PIX, given when it is paid) is indexed whenever it is written.
    pub fn put_transaction(&self, b: &mut Batch, tx: &Transaction, first: bool) -> Result<(), RepoError> {
        let mut record = Vec::with_capacity(256);
        codec::encode_transaction(tx, &mut record);
        // The list entry is rewritten on every write: the committer counts a status change
        // from the old value.
        let entry = summary(tx.status, Operation::of(tx.kind)).to_vec();
        let list_key = keys::list_entry(tx.account_id, tx.created_at, tx.local_id);
        let local = tx.local_id.to_be_bytes().to_vec();
        if !tx.end_to_end_id.is_empty() && local_id_in_end_to_end(&tx.end_to_end_id) != Some(tx.local_id) {
            b.put(keys::end_to_end(&tx.end_to_end_id), local.clone());
        }
        // A received PIX by when its money arrived (set once: rewriting it is a no-op).
        if tx.is_received() {
            b.put(keys::received_entry(tx.account_id, tx.moved_at(), tx.local_id), Vec::new());
        }
        if !first {
            b.put(keys::transaction(tx.local_id), record);
            b.put(list_key, entry);
            return Ok(());
        }
        b.insert(keys::transaction(tx.local_id), record);
        b.insert(list_key, entry);
        if let Some(c) = &tx.charge {
            b.insert(keys::charge_txid(tx.account_id, &c.txid), local.clone());
        }
        if local_id_in_uuid(&tx.transaction_id) != tx.local_id {
            b.insert(keys::transaction_id(&tx.transaction_id), local.clone());
        }
        if let Some(ext) = &tx.external_id {
            b.insert(keys::external_id(tx.account_id, ext), local);
        }
        if let Some(d) = &tx.dict {
            let v = to_json(&(tx.local_id, &d.request_hash))?;
            b.insert(keys::dict_idempotency(tx.account_id, &d.idempotency_key), v);
        }
        Ok(())
    }

    /// The writes that carry out a plan of an account's command: its records and their
    /// indexes, the ledger's change (its record, holds taken and released), and its events.
    pub fn plan_batch(
        &self,
        id: AccountId,
        ledger: Option<&LedgerChange>,
        records: &[Record],
        events: &[OutboxEvent],
    ) -> Result<Batch, RepoError> {
        let mut b = Batch::default();
        for record in records {
            match record {
                Record::NewTransaction(tx) => {
                    self.put_transaction(&mut b, tx, true)?;
                    if tx.kind == TxKind::CashIn && tx.status == TxStatus::Pending {
                        self.put_open_charge(&mut b, id, tx.local_id);
                    }
                }
                Record::Transaction(tx) => {
                    self.put_transaction(&mut b, tx, false)?;
                    if tx.kind == TxKind::CashIn && tx.status != TxStatus::Pending {
                        self.delete_open_charge(&mut b, id, tx.local_id);
                    }
                }
                Record::Med(med) => self.put_med(&mut b, med)?,
                Record::OnUsCredit(c) => b.put(keys::on_us(&c.end_to_end_id), to_json(c)?),
                Record::OnUsCredited(e2e) => b.delete(keys::on_us(e2e)),
                Record::Incoming(i) => b.put(keys::incoming(&i.id), to_json(i)?),
                Record::IncomingDone(id) => b.delete(keys::incoming(id)),
                Record::Recurrence(rec) => self.put_rec(&mut b, rec)?,
                Record::Cobr(c) => self.put_cobr(&mut b, c)?,
                Record::LocRec(l) => b.put(keys::locrec(l.account_id, l.local_id), to_json(l)?),
                Record::Claim(c) => self.put_claim(&mut b, c)?,
                Record::Recovery(r) => self.put_recovery(&mut b, r)?,
                Record::KeyArrived { key, key_type, at, cid, request_id, update_to } => {
                    if let Some(name) = update_to {
                        b.put(keys::key_update(id, key), name.as_bytes().to_vec());
                    }
                    let record = crate::store::KeyRecord {
                        key: key.clone(),
                        key_type: key_type.clone(),
                        registered_at: *at,
                        cid: cid.clone(),
                        request_id: *request_id,
                    };
                    b.put(keys::receiving_key(key), id.get().to_be_bytes().to_vec());
                    b.put(keys::account_key(id, key), to_json(&record)?);
                }
                Record::KeyLeft { key, receiving } => {
                    b.delete(keys::receiving_key(key));
                    b.delete(keys::account_key(id, key));
                    if let Some(new) = receiving {
                        if let Some(mut a) = self.account(id)? {
                            a.receiving_key = new.clone();
                            b.put(keys::account(id), self.account_json(&a)?);
                        }
                    }
                }
            }
        }
        if let Some(change) = ledger {
            if let Some(state) = change.state() {
                self.put_ledger(&mut b, id, state)?;
            }
            for (local, hold) in change.holds_taken() {
                self.put_pending(&mut b, id, *local, *hold);
            }
            for local in change.holds_released() {
                self.delete_pending(&mut b, id, *local);
            }
        }
        for event in events {
            self.put_outbox(&mut b, event)?;
        }
        Ok(b)
    }

    /// The index of the transactions list, for the committer to count (see the key layout).
    pub fn transaction_index() -> CountedIndex {
        keys::list_index()
    }

    /// One page of an account's transactions on the local days `[first, last]`, newest
    /// first, with the filters, after `offset` matching ones; and how many match in all.
    /// Totals come from the per-day counters; whole days before the page are skipped by
    /// their counts, so only the page's own day is read entry by entry.
    pub fn transactions_page(
        &self,
        id: AccountId,
        (first, last): (NaiveDate, NaiveDate),
        (status, operation): (Option<TxStatus>, Option<Operation>),
        offset: u64,
        size: usize,
    ) -> Result<(Vec<Transaction>, u64), RepoError> {
        let mut days = Vec::new();
        let mut day = first;
        while day <= last {
            let prefix = keys::list_counters_prefix(id, day);
            let mut n = 0u64;
            for (k, v) in self.store.scan_prefix(&prefix)? {
                if summary_matches(&k[prefix.len()..], status, operation) {
                    let count: [u8; 8] = v.as_slice().try_into().map_err(|_| RepoError::Corrupt {
                        key: String::from_utf8_lossy(&k).into_owned(),
                        reason: "not an i64".into(),
                    })?;
                    n += u64::try_from(i64::from_be_bytes(count)).unwrap_or(0);
                }
            }
            days.push((day, n));
            day += chrono::Duration::days(1);
        }
        let total = days.iter().map(|(_, n)| n).sum();
        let mut skip = offset;
        let mut ids = Vec::new();
        for (day, n) in days.into_iter().rev() {
            if ids.len() >= size {
                break;
            }
            if n == 0 || (ids.is_empty() && skip >= n) {
                skip = skip.saturating_sub(n);
                continue;
            }
            let millis = |d| u64::try_from(day_start(d).timestamp_millis()).unwrap_or(0);
            let from = keys::list_from(id, millis(day));
            let to = keys::list_from(id, millis(day + chrono::Duration::days(1)));
            let mut bad = None;
            self.store.scan_rev(&from, &to, &mut |k, v| {
                if !summary_matches(v, status, operation) {
                    return true;
                }
                if skip > 0 {
                    skip -= 1;
                    return true;
                }
                match std::str::from_utf8(k)
                    .ok()
                    .and_then(|t| t.rsplit('/').next())
                    .and_then(|n| n.parse().ok())
                {
                    Some(local) => ids.push(local),
                    None => bad = Some(String::from_utf8_lossy(k).into_owned()),
                }
                ids.len() < size && bad.is_none()
            })?;
            if let Some(key) = bad {
                return Err(RepoError::Corrupt { key, reason: "no local id".into() });
            }
        }
        let mut page = Vec::with_capacity(ids.len());
        for local in ids {
            if let Some(t) = self.transaction(local)? {
                page.push(t);
            }
        }
        Ok((page, total))
    }

    /// Writes the list index of transactions stored before it existed (once per database;
    /// a crash midway redoes it, and rewriting an entry changes no count).
    pub fn backfill_transaction_index(&self, commit: &GroupCommit) -> Result<usize, RepoError> {
        self.backfill(commit, keys::TLIST_BUILT, |tx| {
            Some((
                keys::list_entry(tx.account_id, tx.created_at, tx.local_id),
                summary(tx.status, Operation::of(tx.kind)).to_vec(),
            ))
        })
    }

    /// Writes the `pixin/` index of the PIX received before it existed (once per database;
    /// a crash midway redoes it, and rewriting an entry changes nothing).
    pub fn backfill_received_index(&self, commit: &GroupCommit) -> Result<usize, RepoError> {
        self.backfill(commit, keys::PIXIN_BUILT, |tx| {
            tx.is_received()
                .then(|| (keys::received_entry(tx.account_id, tx.moved_at(), tx.local_id), Vec::new()))
        })
    }

    /// Puts the entry `entry_of` makes of each stored transaction (none for `None`), 1,000
    /// a write, then `built`; nothing when `built` is there already. Answers how many.
    fn backfill(
        &self,
        commit: &GroupCommit,
        built: &[u8],
        entry_of: impl Fn(&Transaction) -> Option<(Vec<u8>, Vec<u8>)>,
    ) -> Result<usize, RepoError> {
        if self.store.get(built)?.is_some() {
            return Ok(0);
        }
        let submit =
            |b: Batch| commit.submit(b).map_err(|e| RepoError::Store(StoreError::Engine(e.to_string())));
        let mut written = 0;
        let mut b = Batch::default();
        for (k, v) in self.store.scan_prefix(keys::TRANSACTIONS)? {
            let tx = codec::decode_transaction(&v).map_err(|e| corrupt(&k, e))?;
            let Some((key, value)) = entry_of(&tx) else { continue };
            b.put(key, value);
            written += 1;
            if b.len_hint() >= 1000 {
                submit(std::mem::take(&mut b))?;
            }
        }
        b.put(built.to_vec(), vec![1]);
        submit(b)?;
        Ok(written)
    }

    /// An account's transaction by the externalId its client gave.
    pub fn transaction_by_external_id(
        &self,
        id: AccountId,
        external_id: &str,
    ) -> Result<Option<Transaction>, RepoError> {
        match self.local_by(&keys::external_id(id, external_id))? {
            Some(local) => self.transaction(local),
            None => Ok(None),
        }
    }

    pub fn transaction(&self, local: u64) -> Result<Option<Transaction>, RepoError> {
        let key = keys::transaction(local);
        match self.store.get(&key)? {
            None => Ok(None),
            Some(bytes) => codec::decode_transaction(&bytes).map(Some).map_err(|e| corrupt(&key, e)),
        }
    }

    /// Every transaction of an account, oldest first (a full scan of its list index; for
    /// tools and tests).
    pub fn transactions_of(&self, id: AccountId) -> Result<Vec<Transaction>, RepoError> {
        let mut out = Vec::new();
        for (k, _) in self.store.scan_prefix(&keys::list_prefix(id))? {
            let local = keys::local_at_end(&k).ok_or_else(|| RepoError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: "bad local id".into(),
            })?;
            if let Some(t) = self.transaction(local)? {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// A transaction by its transactionId: the local id it carries, else the index of
    /// transactionIds that carry none.
    pub fn transaction_by_uuid(&self, id: &Uuid) -> Result<Option<Transaction>, RepoError> {
        if let Some(t) = self.transaction(local_id_in_uuid(id))?.filter(|t| t.transaction_id == *id) {
            return Ok(Some(t));
        }
        match self.local_by(&keys::transaction_id(id))? {
            Some(local) => self.transaction(local),
            None => Ok(None),
        }
    }

    /// The account's transaction one of its end-to-end ids names (its own, a `/dict/pix`
    /// transfer's provisional one, a return's): the first of [`Repo::transactions_by_e2e`].
    pub fn transaction_by_e2e(
        &self,
        account: AccountId,
        e2e: &str,
    ) -> Result<Option<Transaction>, RepoError> {
        Ok(self.transactions_by_e2e(account, e2e)?.into_iter().next())
    }

    /// The PIX the account received under an end-to-end id. When an account pays itself
    /// on us, its payment and its receipt share one id: this is the receipt.
    pub fn received_by_e2e(&self, account: AccountId, e2e: &str) -> Result<Option<Transaction>, RepoError> {
        Ok(self.transactions_by_e2e(account, e2e)?.into_iter().find(Transaction::is_received))
    }

    /// The PIX received (by any account) under an end-to-end id: what a refund request of
    /// the MED names.
    pub fn received_by_id(&self, e2e: &str) -> Result<Option<Transaction>, RepoError> {
        match self.local_by(&keys::end_to_end(e2e))? {
            Some(local) => Ok(self.transaction(local)?.filter(|t| t.is_received() && t.end_to_end_id == e2e)),
            None => Ok(None),
        }
    }

    /// The account that a credit from another participant (a PIX received, a return of
    /// one of our payments) went to, by its end-to-end or return id: what a repeated
    /// settlement of an arrival already credited names.
    pub fn credited_account_by_id(&self, id: &str) -> Result<Option<AccountId>, RepoError> {
        let Some(local) = self.local_by(&keys::end_to_end(id))? else { return Ok(None) };
        Ok(self
            .transaction(local)?
            .filter(|t| !t.kind.is_debit() || t.refund.as_ref().is_some_and(|r| r.rtr_id == id))
            .map(|t| t.account_id))
    }

    /// The payout (a debit of any account) that an end-to-end id or return id names: what
    /// the SPI's answers to our messages name.
    pub fn payout_by_id(&self, id: &str) -> Result<Option<Transaction>, RepoError> {
        let names = |t: &Transaction| {
            t.kind.is_debit() && (t.end_to_end_id == id || t.refund.as_ref().is_some_and(|r| r.rtr_id == id))
        };
        if let Some(t) =
            local_id_in_end_to_end(id).map(|l| self.transaction(l)).transpose()?.flatten().filter(names)
        {
            return Ok(Some(t));
        }
        match self.local_by(&keys::end_to_end(id))? {
            Some(local) => Ok(self.transaction(local)?.filter(names)),
            None => Ok(None),
        }
    }

    /// Every transaction of the account an end-to-end id names, at most two: an on-us
    /// payment's two sides carry one id, the payer's (found by the local id the id
    /// carries) and the payee's (indexed); when the account paid itself, both are its own.
    pub fn transactions_by_e2e(&self, account: AccountId, e2e: &str) -> Result<Vec<Transaction>, RepoError> {
        let names = |t: &Transaction| {
            t.account_id == account
                && (t.end_to_end_id == e2e
                    || t.dict.as_ref().is_some_and(|d| d.provisional_end_to_end_id == e2e)
                    || t.refund.as_ref().is_some_and(|r| r.rtr_id == e2e))
        };
        let mut found = Vec::with_capacity(2);
        if let Some(local) = local_id_in_end_to_end(e2e) {
            found.extend(self.transaction(local)?.filter(names));
        }
        if let Some(local) = self.local_by(&keys::end_to_end(e2e))? {
            if !found.iter().any(|t| t.local_id == local) {
                found.extend(self.transaction(local)?.filter(|t| t.account_id == account));
            }
        }
        Ok(found)
    }
}
