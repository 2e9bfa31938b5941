//! Webhooks: each account's endpoint per event type, the outbox of events whose delivery
//! has not ended, their delivery state between attempts, and the delivery log.

use crate::domain::events::OutboxEvent;
use crate::domain::ids::AccountId;

use super::{corrupt, parse_json, to_json, Repo, RepoError};
use crate::store::records::*;

use crate::store::{codec, keys, Batch};

impl Repo {
    /// The account's webhook configurations, by event type.
    pub fn webhook_configs(&self, id: AccountId) -> Result<Vec<WebhookConfig>, RepoError> {
        let prefix = keys::webhook_configs_prefix(id);
        self.store.scan_prefix(&prefix)?.into_iter().map(|(k, v)| parse_json(&k, &v)).collect()
    }

    /// Creates or replaces the configuration of its account and event type (flushed).
    pub fn put_webhook_config(&self, c: &WebhookConfig) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(keys::webhook_config(c.account_id, c.event_type.as_str()), to_json(c)?);
        self.commit(&b)
    }

    /// Removes the configuration of an account's event type (flushed); answers whether there
    /// was one.
    pub fn delete_webhook_config(
        &self,
        id: AccountId,
        event_type: crate::domain::events::EventType,
    ) -> Result<bool, RepoError> {
        if self.webhook_config(id, event_type)?.is_none() {
            return Ok(false);
        }
        let mut b = Batch::default();
        b.delete(keys::webhook_config(id.get(), event_type.as_str()));
        self.commit(&b)?;
        Ok(true)
    }

    /// The account's endpoint for one event type, if configured.
    pub fn webhook_config(
        &self,
        id: AccountId,
        event_type: crate::domain::events::EventType,
    ) -> Result<Option<WebhookConfig>, RepoError> {
        self.get_json(&keys::webhook_config(id.get(), event_type.as_str()))
    }

    /// Adds an event to the outbox in `b`; answers its sequence number.
    pub fn put_outbox(&self, b: &mut Batch, event: &OutboxEvent) -> Result<u64, RepoError> {
        let seq = self.store.generate_id()?;
        let mut record = Vec::with_capacity(300);
        codec::encode_event(event, &mut record);
        b.insert(keys::outbox(seq), record);
        Ok(seq)
    }

    /// One event still in the outbox.
    pub fn outbox_event(&self, seq: u64) -> Result<Option<OutboxEvent>, RepoError> {
        let key = keys::outbox(seq);
        match self.store.get(&key)? {
            None => Ok(None),
            Some(bytes) => codec::decode_event(&bytes).map(Some).map_err(|e| corrupt(&key, e)),
        }
    }

    /// Events whose delivery has not ended, oldest first, with their delivery state: at
    /// most `limit`, and whether more remain.
    pub fn undelivered(&self, limit: usize) -> Result<(Vec<Undelivered>, bool), RepoError> {
        let mut out = Vec::new();
        let mut more = false;
        for (k, v) in self.store.scan_prefix(keys::OUTBOX)? {
            if out.len() >= limit {
                more = true;
                break;
            }
            let seq = keys::outbox_seq(&k).ok_or_else(|| RepoError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: "no sequence number".into(),
            })?;
            let event = codec::event_header(&v).map_err(|e| corrupt(&k, e))?;
            let state: Option<DeliveryState> = self.get_json(&keys::delivery_state(seq))?;
            out.push(Undelivered {
                seq,
                account_id: event.account_id,
                local_id: event.local_id,
                event_type: event.event_type,
                state,
            });
        }
        Ok((out, more))
    }

    /// Records in `b` that the delivery of event `seq` failed and when it is tried again.
    pub fn put_delivery_state(
        &self,
        b: &mut Batch,
        seq: u64,
        state: &DeliveryState,
    ) -> Result<(), RepoError> {
        b.put(keys::delivery_state(seq), to_json(state)?);
        Ok(())
    }

    /// Removes in `b` an event whose delivery ended (its log stays); `attempted`: an attempt
    /// was made, so its delivery state exists too.
    pub fn end_delivery(&self, b: &mut Batch, seq: u64, attempted: bool) {
        b.delete(keys::outbox(seq));
        if attempted {
            b.delete(keys::delivery_state(seq));
        }
    }

    pub fn put_delivery_log(&self, b: &mut Batch, log: &DeliveryLog) -> Result<(), RepoError> {
        b.put(keys::delivery_log(log.account_id, log.webhook_log_id), to_json(log)?);
        Ok(())
    }

    /// The account's delivery log, newest first, optionally of one transaction only.
    pub fn delivery_logs(
        &self,
        id: AccountId,
        transaction: Option<u64>,
        limit: usize,
    ) -> Result<Vec<DeliveryLog>, RepoError> {
        // Newest first, reading no further back than the page needs (the log grows with every
        // attempt and is never read whole).
        let (from, to) = keys::delivery_logs_range(id);
        let mut out = Vec::new();
        let mut bad = None;
        self.store.scan_rev(&from, &to, &mut |k, v| {
            match parse_json::<DeliveryLog>(k, v) {
                Ok(log) if transaction.is_none_or(|t| t == log.transaction_id) => out.push(log),
                Ok(_) => {}
                Err(e) => bad = Some(e),
            }
            out.len() < limit && bad.is_none()
        })?;
        match bad {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}
