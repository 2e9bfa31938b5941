//! The dispatcher: one actor that turns the durable outbox into deliveries.
//!
//! It learns of new events from the group committer, after they are on disk (so a crash
//! can never take back an event it already sent), and of old ones by scanning the outbox
//! at start. The pure [`Scheduler`] decides what goes next; a pool of [`Sender`] actors
//! makes the requests. After each attempt the dispatcher writes its log record and the
//! delivery's new state through group commit, and only once that is durable does it let
//! the transaction's next event go, so the order per transaction survives a crash too.
//!
//! Guarantees (decisions.md "Webhooks"): at least once; the same `webhook-id` (`msg_{seq}`) on
//! every attempt of an event, across restarts; a kill -9 between a send and its record
//! sends once more, with that id. Retries follow [`next_attempt_at`] on the server clock.
//!
//! Memory is bounded: the scheduler holds at most [`SCHEDULED_MAX`] events (no payloads);
//! beyond that new events stay on disk only, and the outbox is scanned again once the
//! scheduler has room.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actix_web::web::Bytes;
use chrono::{DateTime, Utc};

use super::sender::{Attempt, Request, Send, Sender};
use crate::clock::Clock;
use crate::domain::delivery::{next_attempt_at, Delivery, Scheduler, JITTER_PERMILLE_MAX};
use crate::domain::events::{current_event, EventType, OutboxEvent};
use crate::domain::ids::AccountId;
use crate::domain::transaction::Transaction;
use crate::domain::webhooks::{secret_key, sign};
use crate::store::{
    AttemptOutcome, Batch, CommitError, DeliveryLog, DeliveryState, GroupCommit, Repo, RepoError,
    WebhookConfig,
};
use crate::telemetry::{Admit, LineBudget};

/// Requests in flight at once, over all accounts.
pub const DELIVERIES_IN_FLIGHT_MAX: usize = 512;
/// Requests of one account in flight at once: a receiver that never answers holds this
/// many slots for [`super::sender::DELIVERY_TIMEOUT`] each, and no more (so it takes 32
/// dead receivers to fill every slot). At 20 ms per answer it is 800 deliveries a second.
pub const ACCOUNT_DELIVERIES_IN_FLIGHT_MAX: usize = 16;
/// Undelivered events the dispatcher keeps in memory; the rest wait on disk.
pub const SCHEDULED_MAX: usize = 100_000;
/// How often due retries are looked for (the clock route also wakes the dispatcher).
const TICK_EVERY: Duration = Duration::from_secs(1);

/// New outbox entries, durable, as the committer saw them: (seq, JSON of the event).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Durable(pub Vec<(u64, Vec<u8>)>);

/// Sends whatever is due now (the test clock moved); answers once it is handed to senders.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Wake;

/// Sends a transaction's webhook now, once, outside the retry schedule.
#[derive(Message)]
#[rtype(result = "Result<DeliveryLog, ResendError>")]
pub struct Resend {
    pub tx: Transaction,
    /// A URL for this send only; else the one configured for the event type.
    pub url: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ResendError {
    #[error("no webhook URL is configured for {0} and none was given")]
    NoUrl(&'static str),
    #[error(transparent)]
    Storage(#[from] RepoError),
    #[error("the delivery log was not written: {0}")]
    NotDurable(String),
}

pub struct Dispatcher {
    repo: Repo,
    commit: Arc<GroupCommit>,
    clock: Arc<Clock>,
    senders: Vec<Addr<Sender>>,
    scheduler: Scheduler,
    /// New events were left on disk because the scheduler was full.
    spilled: bool,
    /// Events announced before the outbox was first scanned (see [`Load`]).
    early: Option<Vec<(u64, Vec<u8>)>>,
    /// Failed attempts are logged within a budget: a receiver that is down fails every
    /// event of its account.
    failure_lines: LineBudget,
}

/// Failed webhook attempts logged per [`FAILURE_LINES_WINDOW`]; the rest are counted and
/// reported with the next line written.
pub const FAILURE_LINES_PER_WINDOW_MAX: u32 = 20;
const FAILURE_LINES_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// Scans the outbox once, at start. It is sent after the dispatcher is registered with the
/// committer, so no event falls between the scan and the announcements; what is announced
/// before it is held until the scan is done, so a transaction's older events, found by the
/// scan, still go first.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Load;

impl Dispatcher {
    /// A dispatcher that holds nothing until [`Load`] arrives.
    pub fn new(
        repo: Repo,
        commit: Arc<GroupCommit>,
        clock: Arc<Clock>,
        senders: Vec<Addr<Sender>>,
    ) -> Dispatcher {
        Dispatcher {
            repo,
            commit,
            clock,
            senders,
            scheduler: Scheduler::new(ACCOUNT_DELIVERIES_IN_FLIGHT_MAX, DELIVERIES_IN_FLIGHT_MAX),
            spilled: false,
            early: Some(Vec::new()),
            failure_lines: LineBudget::new(FAILURE_LINES_PER_WINDOW_MAX, FAILURE_LINES_WINDOW),
        }
    }

    /// Adds the outbox's undelivered events the scheduler does not hold yet.
    fn rescan(&mut self) -> Result<(), RepoError> {
        let now = self.clock.now();
        let room = SCHEDULED_MAX.saturating_sub(self.scheduler.len());
        // Known events count against the limit of the scan too; ask for enough to pass them.
        let (found, more) = self.repo.undelivered(room + self.scheduler.len())?;
        for u in found {
            if self.scheduler.len() >= SCHEDULED_MAX {
                self.spilled = true;
                return Ok(());
            }
            self.scheduler.add(Delivery {
                seq: u.seq,
                account: u.account_id,
                transaction: u.local_id,
                event_type: u.event_type,
                attempts: u.state.map_or(0, |s| s.attempts),
                due: u.state.map_or(now, |s| s.next_attempt_at),
            });
        }
        self.spilled = more;
        if !self.scheduler.is_empty() {
            tracing::info!(events = self.scheduler.len(), more, "webhook deliveries to resume");
        }
        Ok(())
    }

    fn sender_for(&self, account: u64) -> Option<Addr<Sender>> {
        let n = self.senders.len();
        (n > 0).then(|| self.senders[(account % n as u64) as usize].clone())
    }

    /// Hands every due delivery to a sender.
    fn dispatch(&mut self, ctx: &mut Context<Self>) {
        if self.early.is_some() {
            return;
        }
        if self.spilled && self.scheduler.len() < SCHEDULED_MAX / 2 {
            if let Err(e) = self.rescan() {
                tracing::error!(error = %e, "cannot scan the outbox");
            }
        }
        metrics::gauge!("pixgw_webhook_backlog").set(self.scheduler.len() as f64);
        let now = self.clock.now();
        // Deliveries without an endpoint free their slot at once, so take until nothing is due
        // or every slot holds a request.
        let mut ended = Vec::new();
        let mut b = Batch::default();
        loop {
            let due = self.scheduler.take_due(now);
            if due.is_empty() {
                break;
            }
            for d in due {
                match self.prepare(&d, now) {
                    Ok(Some((request, config))) => self.send(d, request, config, ctx),
                    // No endpoint for this event type: nothing to send, ever (a resend can
                    // still send it once one is configured).
                    Ok(None) => {
                        self.scheduler.landed(d.seq);
                        self.repo.end_delivery(&mut b, d.seq, d.attempts > 0);
                        ended.push(d.seq);
                    }
                    Err(e) => {
                        tracing::error!(seq = d.seq, error = %e, "cannot prepare a webhook; trying again later");
                        self.scheduler.landed(d.seq);
                        self.scheduler.retry(d.seq, d.attempts, now + chrono::Duration::seconds(5));
                    }
                }
            }
        }
        if !ended.is_empty() {
            self.record(ended, b, None, ctx);
        }
    }

    /// The signed request of an event, or `None` when it has no endpoint.
    fn prepare(
        &self,
        d: &Delivery,
        now: DateTime<Utc>,
    ) -> Result<Option<(Request, WebhookConfig)>, RepoError> {
        // The endpoint first: most events of a busy account may go to none, and then the
        // event itself is never read.
        let Some(account) = AccountId::new(d.account) else { return Ok(None) };
        let Some(config) = self.repo.webhook_config(account, d.event_type)?.filter(|c| c.is_active) else {
            return Ok(None);
        };
        let Some(event) = self.repo.outbox_event(d.seq)? else { return Ok(None) };
        let request =
            self.signed(account, &config.target(), &config.headers, &event, &format!("msg_{}", d.seq), now)?;
        Ok(Some((request, config)))
    }

    /// A request carrying `event`, signed with the account's secret.
    fn signed(
        &self,
        account: AccountId,
        url: &str,
        custom: &[(String, String)],
        event: &OutboxEvent,
        webhook_id: &str,
        now: DateTime<Utc>,
    ) -> Result<Request, RepoError> {
        let secret = self.repo.account(account)?.map(|a| a.webhook_secret).unwrap_or_default();
        let key = secret_key(&secret).unwrap_or_else(|| secret.into_bytes());
        let body = serde_json::to_vec(&event.payload()).unwrap_or_default();
        let timestamp = now.timestamp();
        let signature = sign(&key, webhook_id, timestamp, &body);
        let mut headers = custom.to_vec();
        headers.extend([
            ("content-type".to_owned(), "application/json".to_owned()),
            ("webhook-id".to_owned(), webhook_id.to_owned()),
            ("webhook-timestamp".to_owned(), timestamp.to_string()),
            ("webhook-signature".to_owned(), signature),
        ]);
        Ok(Request { url: url.to_owned(), headers, body: Bytes::from(body) })
    }

    fn send(&mut self, d: Delivery, request: Request, config: WebhookConfig, ctx: &mut Context<Self>) {
        let Some(sender) = self.sender_for(d.account) else { return };
        let sent_at = self.clock.now();
        let url = request.url.clone();
        let attempt = async move {
            sender.send(Send(request)).await.unwrap_or_else(|e| Attempt {
                status: None,
                error: Some(format!("sender unavailable: {e}")),
                duration: Duration::ZERO,
            })
        };
        ctx.spawn(attempt.into_actor(self).map(move |attempt, act, ctx| {
            // The request is over: its slot can serve another delivery while this one's
            // record is written.
            act.scheduler.landed(d.seq);
            act.attempted(d, config.event_type, url, sent_at, &attempt, ctx);
            act.dispatch(ctx);
        }));
    }

    /// Records an attempt: delivered, to be retried, or failed for good.
    fn attempted(
        &mut self,
        d: Delivery,
        event_type: EventType,
        url: String,
        sent_at: DateTime<Utc>,
        attempt: &Attempt,
        ctx: &mut Context<Self>,
    ) {
        let attempts = d.attempts + 1;
        let now = self.clock.now();
        let jitter = getrandom::u32().unwrap_or(0) % (JITTER_PERMILLE_MAX + 1);
        let next = if attempt.delivered() { None } else { next_attempt_at(attempts, now, jitter) };
        let outcome = match (attempt.delivered(), next) {
            (true, _) => AttemptOutcome::Delivered,
            (false, Some(_)) => AttemptOutcome::Retrying,
            (false, None) => AttemptOutcome::Failed,
        };
        let mut b = Batch::default();
        let log = self.repo.store().generate_id().map_err(RepoError::from).and_then(|id| {
            let log = log_record(
                id,
                &d,
                &format!("msg_{}", d.seq),
                event_type,
                url,
                attempts,
                sent_at,
                attempt,
                outcome,
                next,
            );
            self.repo.put_delivery_log(&mut b, &log)?;
            match next {
                Some(at) => self.repo.put_delivery_state(
                    &mut b,
                    d.seq,
                    &DeliveryState { attempts, next_attempt_at: at },
                )?,
                None => self.repo.end_delivery(&mut b, d.seq, true),
            }
            Ok(log)
        });
        if let Err(e) = log {
            // Not recorded: the event stays in the outbox and goes again after a restart.
            tracing::error!(seq = d.seq, error = %e, "webhook attempt not recorded");
            return;
        }
        if outcome != AttemptOutcome::Delivered {
            if let Admit::Write { suppressed } = self.failure_lines.admit(std::time::Instant::now()) {
                let (status, error) = (attempt.status, attempt.error.as_deref());
                let event = event_type.as_str();
                let (account, seq) = (d.account, d.seq);
                match next {
                    Some(at) => tracing::warn!(
                        account, seq, event, attempts, status, error, next_attempt_at = %at, suppressed,
                        "webhook not delivered; it will be retried"
                    ),
                    None => tracing::error!(
                        account,
                        seq,
                        event,
                        attempts,
                        status,
                        error,
                        suppressed,
                        "webhook not delivered after the last retry; given up"
                    ),
                }
            }
        }
        match outcome {
            AttemptOutcome::Delivered => metrics::counter!("pixgw_webhooks_delivered_total").increment(1),
            AttemptOutcome::Failed => metrics::counter!("pixgw_webhooks_failed_total").increment(1),
            _ => metrics::counter!("pixgw_webhooks_retried_total").increment(1),
        }
        self.record(vec![d.seq], b, next.map(|at| (attempts, at)), ctx);
    }

    /// Commits `b`, then ends the deliveries `seqs` in the scheduler, or schedules the retry
    /// of the one delivery `seqs` holds.
    fn record(
        &mut self,
        seqs: Vec<u64>,
        b: Batch,
        retry: Option<(u32, DateTime<Utc>)>,
        ctx: &mut Context<Self>,
    ) {
        let commit = Arc::clone(&self.commit);
        let durable = async move {
            let ticket = commit.submit(b)?;
            commit.durable(ticket).await
        };
        ctx.spawn(durable.into_actor(self).map(move |done, act, ctx| {
            match done {
                Ok(()) => {}
                // Slow, not lost: the write still lands. Going on can at worst send an event
                // once more after a crash, which at-least-once allows.
                Err(CommitError::NotDurable(_)) => {}
                // A full disk refused the record: the delivery goes on in memory, and after a
                // restart the outbox may send the event once more, which at-least-once allows.
                Err(CommitError::Full(_)) => {}
                Err(e @ CommitError::Failed(_)) => {
                    // Storage failed and the server is unhealthy: leave these deliveries
                    // unfinished, so nothing is sent again before a restart reloads the outbox.
                    tracing::error!(?seqs, error = %e, "webhook delivery state not durable");
                    return;
                }
            }
            for seq in seqs {
                match retry {
                    Some((attempts, at)) => act.scheduler.retry(seq, attempts, at),
                    None => act.scheduler.finish(seq),
                }
            }
            act.dispatch(ctx);
        }));
    }

    fn resend(&mut self, msg: Resend) -> ResponseActFuture<Self, Result<DeliveryLog, ResendError>> {
        let prepared = (|| {
            let now = self.clock.now();
            let account = msg.tx.account_id;
            let event = current_event(&msg.tx, now);
            let config = self.repo.webhook_config(account, event.event_type)?;
            let url = match (msg.url, &config) {
                (Some(u), _) => u,
                (None, Some(c)) => c.target(),
                (None, None) => return Err(ResendError::NoUrl(event.event_type.as_str())),
            };
            let log_id = self.repo.store().generate_id().map_err(RepoError::from)?;
            let webhook_id = format!("msg_resend_{log_id}");
            let custom = config.map(|c| c.headers).unwrap_or_default();
            let request = self.signed(account, &url, &custom, &event, &webhook_id, now)?;
            Ok((log_id, event, request, now))
        })();
        let (log_id, event, request, sent_at) = match prepared {
            Ok(p) => p,
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        let sender = self.sender_for(event.account_id);
        let url = request.url.clone();
        let attempt = async move {
            match sender {
                Some(s) => s.send(Send(request)).await.ok(),
                None => None,
            }
            .unwrap_or_else(|| Attempt {
                status: None,
                error: Some("no sender".into()),
                duration: Duration::ZERO,
            })
        };
        Box::pin(attempt.into_actor(self).then(move |attempt, act, _| {
            let d = Delivery {
                seq: 0,
                account: event.account_id,
                transaction: event.local_id,
                event_type: event.event_type,
                attempts: 0,
                due: sent_at,
            };
            let webhook_id = format!("msg_resend_{log_id}");
            let log = log_record(
                log_id,
                &d,
                &webhook_id,
                event.event_type,
                url,
                1,
                sent_at,
                &attempt,
                AttemptOutcome::Resent,
                None,
            );
            let mut b = Batch::default();
            let written = act.repo.put_delivery_log(&mut b, &log);
            let commit = Arc::clone(&act.commit);
            async move {
                written?;
                let ticket = commit.submit(b).map_err(|e| ResendError::NotDurable(e.to_string()))?;
                commit.durable(ticket).await.map_err(|e| ResendError::NotDurable(e.to_string()))?;
                Ok(log)
            }
            .into_actor(act)
        }))
    }
}

#[allow(clippy::too_many_arguments)]
fn log_record(
    id: u64,
    d: &Delivery,
    webhook_id: &str,
    event_type: EventType,
    url: String,
    attempt_no: u32,
    sent_at: DateTime<Utc>,
    attempt: &Attempt,
    outcome: AttemptOutcome,
    next: Option<DateTime<Utc>>,
) -> DeliveryLog {
    DeliveryLog {
        webhook_log_id: id,
        account_id: d.account,
        transaction_id: d.transaction,
        event_type,
        webhook_id: webhook_id.to_owned(),
        url,
        attempt: attempt_no,
        status_code: attempt.status,
        error: attempt.error.clone(),
        duration_ms: u64::try_from(attempt.duration.as_millis()).unwrap_or(u64::MAX),
        sent_at,
        outcome,
        next_attempt_at: next,
    }
}

impl Actor for Dispatcher {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(TICK_EVERY, |act, ctx| act.dispatch(ctx));
    }
}

impl Handler<Load> for Dispatcher {
    type Result = ();

    fn handle(&mut self, _: Load, ctx: &mut Context<Self>) {
        if let Err(e) = self.rescan() {
            // Scanned again at the next tick.
            tracing::error!(error = %e, "cannot scan the outbox");
            self.spilled = true;
        }
        let early = self.early.take().unwrap_or_default();
        self.handle(Durable(early), ctx);
    }
}

impl Handler<Durable> for Dispatcher {
    type Result = ();

    fn handle(&mut self, msg: Durable, ctx: &mut Context<Self>) {
        if let Some(early) = &mut self.early {
            early.extend(msg.0);
            return;
        }
        let now = self.clock.now();
        for (seq, bytes) in msg.0 {
            if self.spilled || self.scheduler.len() >= SCHEDULED_MAX {
                // Left on disk; the rescan picks it up in order.
                self.spilled = true;
                continue;
            }
            match crate::store::codec::event_header(&bytes) {
                Ok(e) => {
                    self.scheduler.add(Delivery {
                        seq,
                        account: e.account_id,
                        transaction: e.local_id,
                        event_type: e.event_type,
                        attempts: 0,
                        due: now,
                    });
                }
                Err(e) => tracing::error!(seq, error = %e, "unreadable outbox event"),
            }
        }
        self.dispatch(ctx);
    }
}

impl Handler<Wake> for Dispatcher {
    type Result = ();

    fn handle(&mut self, _: Wake, ctx: &mut Context<Self>) {
        self.dispatch(ctx);
    }
}

impl Handler<Resend> for Dispatcher {
    type Result = ResponseActFuture<Self, Result<DeliveryLog, ResendError>>;

    fn handle(&mut self, msg: Resend, _: &mut Context<Self>) -> Self::Result {
        self.resend(msg)
    }
}
