//! The SPI rail: live accounts' payouts leave as signed ISO 20022 messages through ICOM, and
//! what the SPI sends pixgw is read from its streams and carried to the accounts.
//!
//! It runs on two threads of its own (the ICOM client is not `Send`). The *inbound* thread
//! holds what has a deadline or a client waiting: the DICT client (a cash-out waits for its
//! lookup), the `streams` readers, and [`SENDERS`] tasks posting the answers to what they
//! read (the SPI times out an arrival answered late). The *payout* thread holds the actor
//! that takes [`Payout`]s, makes and signs their messages, and [`SENDERS`] tasks posting
//! them. It runs only on CPU time nothing else wants ([`run_this_thread_when_idle`]): a
//! payout's debit is already durable and acknowledged, so when clients and the rail want
//! the same cores the acknowledgements go first and the payouts follow in the time left,
//! instead of every acknowledgement waiting behind an RSA signature (docs/decisions.md
//! "The SPI rail").
//!
//! **Sending, exactly once.** A payout reaches the rail only once its pending debit is
//! durable; at every start each pending debit is handed over again. Its message is made
//! from the stored transaction (its `BizMsgIdr` derived from its end-to-end id), so a
//! resend is the same message and the SPI takes it once. A message is posted until ICOM
//! answers 201: 429 waits as long as `Retry-After` says, 503 and network failures back off;
//! only a 4xx refusal gives up (the payout fails as `PAYMENT_EXPIRED`, with the reason).
//!
//! **Reading, exactly once.** A read is confirmed (the next read, which asks ICOM for more)
//! only after everything it delivered has its effect on disk: an arrival's acceptance or
//! refusal, and the answer to it posted with 201; a settlement's credit or debit. If the
//! accounts cannot answer, the stream is left unconfirmed and ICOM delivers the batch again;
//! since every effect is idempotent by end-to-end or return id, doing it again changes
//! nothing.
//!
//! **Bad input.** A message that is not XML, does not verify against the configured SPI
//! certificates (unless unsigned messages are accepted), breaks the catalogue's rules, or
//! is not addressed to this participant is logged, counted, and credits nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_web::web::Bytes;
use chrono::Utc;
use tokio::sync::{mpsc, oneshot};

use super::directory::{DictClient, DictError, EntryCache, Lookup};
use super::dsig::{self, Profile};
use super::icom::{IcomClient, IcomError, Pulled, MESSAGES_PER_REQUEST_MAX};
use super::message::{Body, CreditTransfer, Ispb, Message, Return, StatusReport, TxStatus};
use super::outgoing;
use super::settings::SpiSettings;
use super::xml::Document;
use crate::domain::decide::IncomingRefusal;
use crate::domain::pix_key::DirectoryKey;
use crate::domain::transaction::{gateway_ispb, ErrorCode, RailDetails, RailOutcome};
use crate::rail::sim::bank::OnUsResolver;
use crate::rail::{Arrival, ArrivalTo, Inbound, Payout, PayoutEnded, Refuse, Settled};

/// Tasks posting messages at once, on each of the two threads.
pub const SENDERS: usize = 2;
/// The longest a transient failure makes a sender or reader wait before trying again.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// How long a payout whose payee could not be looked up waits before it tries again.
pub const LOOKUP_RETRY_AFTER: Duration = Duration::from_secs(5);

/// The interface's error code for a rejection reason of the SPI or the receiver (the table
/// of docs/interface.md). A reason about this participant's own standing (its settlement
/// account, its signature, its messages) is not the payee's doing: `PAYMENT_EXPIRED`, which
/// a client may send again, and an operator alert.
pub fn reject_code(reason: &str) -> ErrorCode {
    match reason {
        "AB03" => ErrorCode::SettlementTimeout,
        "AC06" => ErrorCode::BlockedAccount,
        "AC07" => ErrorCode::AccountClosed,
        "BE01" | "CH11" => ErrorCode::TaxIdMismatch,
        "AB11" | "AM04" | "DS0G" | "DS27" | "AGNT" | "BE05" | "CH16" | "DT02" | "AM12" | "AM18" | "FF07"
        | "DUPL" | "AM01" | "ED05" => ErrorCode::PaymentExpired,
        _ => ErrorCode::OrderRejected,
    }
}

/// Whether a reason is about this participant itself: worth an operator's attention.
pub fn is_operator_reason(reason: &str) -> bool {
    reject_code(reason) == ErrorCode::PaymentExpired
}

/// The catalogue's reason for an arrival this participant refuses.
pub fn refusal_reason(r: &Refuse) -> &'static str {
    match r {
        Refuse::UnknownAccount => "AC03",
        Refuse::NotAccepted => "AG03",
        Refuse::Account(IncomingRefusal::DocumentMismatch) => "BE01",
        Refuse::Account(IncomingRefusal::UnknownCharge) => "BE17",
        Refuse::Account(IncomingRefusal::ChargePaid) => "DUPL",
        Refuse::Account(IncomingRefusal::ChargeClosed) => "BE17",
        Refuse::Account(IncomingRefusal::WrongAmount) => "AM09",
        Refuse::Account(IncomingRefusal::OriginalNotFound) => "DS04",
        Refuse::Account(IncomingRefusal::ReturnTooLarge) => "AM09",
    }
}

/// One message waiting to be posted, and who waits for its 201.
struct Outbound {
    body: Bytes,
    done: Option<oneshot::Sender<Result<(), IcomError>>>,
}

/// The rail's actor: takes payouts.
pub struct SpiRail {
    settings: SpiSettings,
    outbox: mpsc::UnboundedSender<Outbound>,
    dict: Addr<DictClient>,
    /// Which account of this gateway a key is the receiving key of: a payment to it is
    /// settled on us, never sent (the SPI refuses a transfer within one participant).
    on_us: OnUsResolver,
}

/// The SPI rail, started but not reading yet (see [`Started::read`]).
pub struct Started {
    pub rail: Addr<SpiRail>,
    pub dict: Addr<DictClient>,
    /// The DICT's fresh answers, which request handlers read before asking `dict`.
    pub dict_cache: EntryCache,
    handle: ArbiterHandle,
    settings: SpiSettings,
    outbox: mpsc::UnboundedSender<Outbound>,
}

/// Starts the rail on its two threads: the payout actor and its senders, the DICT client
/// and the answers' senders. It reads nothing until [`Started::read`] gives it the accounts
/// to carry what it reads to.
pub fn start(settings: SpiSettings, on_us: OnUsResolver) -> Started {
    crate::telemetry::zero_spi_counters();
    // Both arbiters live as long as the process.
    let inbound = Arbiter::new();
    let in_handle = inbound.handle();
    std::mem::forget(inbound);
    let payouts = Arbiter::new();
    let out_handle = payouts.handle();
    std::mem::forget(payouts);
    out_handle.spawn(async { run_this_thread_when_idle() });

    let dict_settings = settings.clone();
    let dict_cache = EntryCache::default();
    let client_cache = dict_cache.clone();
    let dict =
        DictClient::start_in_arbiter(&in_handle, move |_| DictClient::new(dict_settings, client_cache));
    let (payouts_tx, payouts_rx) = mpsc::unbounded_channel::<Outbound>();
    let rail_settings = settings.clone();
    let rail_dict = dict.clone();
    let rail = SpiRail::start_in_arbiter(&out_handle, move |_| SpiRail {
        settings: rail_settings,
        outbox: payouts_tx,
        dict: rail_dict,
        on_us,
    });
    spawn_senders(&out_handle, &settings, payouts_rx);
    let (answers_tx, answers_rx) = mpsc::unbounded_channel::<Outbound>();
    spawn_senders(&in_handle, &settings, answers_rx);
    Started { rail, dict, dict_cache, handle: in_handle, settings, outbox: answers_tx }
}

/// [`SENDERS`] tasks on `thread` posting what `rx` receives.
fn spawn_senders(thread: &ArbiterHandle, settings: &SpiSettings, rx: mpsc::UnboundedReceiver<Outbound>) {
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let settings = settings.clone();
    thread.spawn(async move {
        match icom_client(&settings) {
            Some(icom) => {
                for _ in 0..SENDERS {
                    actix_web::rt::spawn(sender(icom.clone(), Arc::clone(&rx)));
                }
            }
            None => tracing::error!("the SPI rail cannot send: no ICOM client"),
        }
    });
}

/// Puts the calling thread under the idle scheduling policy (Linux's `SCHED_IDLE`; elsewhere
/// this does nothing): it runs on whatever CPU time no other thread wants, and any thread
/// of normal policy that wakes takes the core from it at once. A failure is logged: the
/// rail works without it.
pub fn run_this_thread_when_idle() {
    #[cfg(target_os = "linux")]
    {
        use thread_priority::unix::{
            set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy,
            ThreadSchedulePolicy,
        };
        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        if let Err(e) =
            set_thread_priority_and_policy(thread_native_id(), thread_priority::ThreadPriority::Min, idle)
        {
            tracing::warn!(error = ?e, "the payout thread keeps its scheduling policy");
        }
    }
}

fn icom_client(settings: &SpiSettings) -> Option<IcomClient> {
    IcomClient::new(Arc::clone(&settings.tls), &settings.icom_url, settings.ispb.clone())
        .map_err(|e| tracing::error!(error = %e, "no ICOM client"))
        .ok()
}

impl Started {
    /// Starts the streams, which carry what they read to `inbound`.
    pub fn read(&self, inbound: Arc<dyn Inbound>) {
        let settings = self.settings.clone();
        let outbox = self.outbox.clone();
        self.handle.spawn(med_refunds(self.dict.clone(), Arc::clone(&inbound), settings.med_poll));
        self.handle.spawn(async move {
            let Some(icom) = icom_client(&settings) else { return };
            for n in 0..settings.streams {
                actix_web::rt::spawn(reader(
                    n,
                    icom.clone(),
                    settings.clone(),
                    Arc::clone(&inbound),
                    outbox.clone(),
                ));
            }
        });
    }
}

impl Actor for SpiRail {
    type Context = Context<Self>;
}

/// The MED on the SPI rail: asks the DICT, every `every`, for the refund requests open
/// against this participant's payments; each opens its account's MED once, and once the MED
/// has ended (its analysis, and for an approval the return settled by the SPI) the request
/// is closed with its result. The DICT holds the state: an open request is asked about again
/// until it is closed, so a crash or a failed close loses nothing.
async fn med_refunds(dict: Addr<DictClient>, inbound: Arc<dyn Inbound>, every: Duration) {
    use super::directory::{CloseRefund, OpenRefunds};
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A 404 here is the DICT (or what answers at its address) not serving the list: said
    // once as an error, not every turn, until the list is read again.
    let mut missing = false;
    loop {
        tick.tick().await;
        let refunds = match dict.send(OpenRefunds).await {
            Ok(Ok(r)) => {
                if std::mem::take(&mut missing) {
                    tracing::info!("the DICT's refund requests are read again");
                }
                r
            }
            Ok(Err(DictError::NotFound)) => {
                if !std::mem::replace(&mut missing, true) {
                    tracing::error!("the DICT answered 404 to the list of refund requests: the DICT address (dict_url) serves no MED route, so no refund request is read until it does");
                }
                continue;
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the DICT's refund requests could not be read; asking again later");
                continue;
            }
            Err(_) => return,
        };
        for r in refunds {
            let asked = crate::rail::RefundAsked {
                id: r.id.clone(),
                end_to_end_id: r.transaction_id,
                amount: r.amount,
                fraud: r.reason == "FRAUD",
                details: r.details,
            };
            let close = match inbound.refund_asked(asked).await {
                Ok(crate::rail::RefundAnswer::Close { result, details, refund_transaction_id }) => {
                    CloseRefund { id: r.id.clone(), result, details, refund_transaction_id }
                }
                Ok(crate::rail::RefundAnswer::Waiting) => continue,
                Err(e) => {
                    tracing::warn!(refund = r.id, error = %e, "a refund request waits: the accounts did not answer");
                    continue;
                }
            };
            let result = close.result;
            match dict.send(close).await {
                Ok(Ok(())) => {
                    tracing::info!(refund = r.id, result, "a MED refund request was closed in the DICT")
                }
                Ok(Err(e)) => {
                    tracing::warn!(refund = r.id, error = %e, "closing a refund request failed; it is tried again")
                }
                Err(_) => return,
            }
        }
    }
}

impl SpiRail {
    /// Signs and queues a payout's message; a payout that cannot be sent fails.
    fn send(&self, payout: Payout) {
        let now = Utc::now();
        let made = outgoing::payout(&self.settings.ispb, &payout.tx, &payout.payer, now)
            .and_then(|m| dsig::sign_spi(&m.write(), &self.settings.signer).map_err(|e| e.to_string()));
        let local_id = payout.tx.local_id;
        let body = match made {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(local_id, error = %e, "a payout cannot be sent on the SPI");
                let outcome = RailOutcome {
                    result: Err(ErrorCode::OrderRejected),
                    reason: Some("NOT_SENDABLE".into()),
                };
                payout.reply_to.do_send(Settled { local_id, outcome, on_us: None });
                return;
            }
        };
        let (done, answered) = oneshot::channel();
        if self.outbox.send(Outbound { body: Bytes::from(body), done: Some(done) }).is_err() {
            return;
        }
        // A payment to a key looked up gives the payer's lookup token back.
        if payout.tx.refund.is_none() && payout.tx.counterpart.key.is_some() {
            self.dict.do_send(super::directory::Paid { payer_document: payout.payer.document.clone() });
        }
        metrics::counter!("pixgw_spi_messages_sent_total", "kind" => if payout.tx.refund.is_some() { "pacs.004" } else { "pacs.008" }).increment(1);
        let reply_to = payout.reply_to;
        actix_web::rt::spawn(async move {
            if let Ok(Err(IcomError::Refused(status, text))) = answered.await {
                tracing::error!(local_id, status, text, "ICOM refused a payout's message");
                let outcome = RailOutcome {
                    result: Err(ErrorCode::PaymentExpired),
                    reason: Some(format!("ICOM_{status}")),
                };
                reply_to.do_send(Settled { local_id, outcome, on_us: None });
            }
        });
    }
}

impl Handler<Payout> for SpiRail {
    type Result = ();

    fn handle(&mut self, payout: Payout, ctx: &mut Context<Self>) {
        let tx = &payout.tx;
        let ours = tx.counterpart.bank.as_ref().is_some_and(|b| b.ispb == gateway_ispb());
        let payee = match (&tx.counterpart.key, tx.counterpart.key_type, ours, tx.refund.is_some()) {
            (Some(k), Some(t), true, false) => (self.on_us)(&DirectoryKey { key: k.clone(), key_type: t }),
            _ => None,
        };
        // A refund of an on-us payment goes back to the account that paid, on us too.
        let payee = payee.or(payout.returns_on_us);
        if let Some(payee) = payee {
            let outcome = RailOutcome::settled(Some(crate::rail::sim::bank::gateway_bank()));
            payout.reply_to.do_send(Settled { local_id: tx.local_id, outcome, on_us: Some(payee) });
            return;
        }
        let complete =
            payout.tx.rail.as_ref().is_some_and(|r| r.creditor_document.is_some() && r.instrument.is_some())
                || payout.tx.refund.is_some();
        if complete {
            return self.send(payout);
        }
        // A payout made without a lookup (a charge's split): the payee's key is looked up
        // now, for the same end-to-end id.
        let Some(key) = payout.tx.counterpart.key.clone() else {
            let outcome =
                RailOutcome { result: Err(ErrorCode::OrderRejected), reason: Some("NO_PAYEE_KEY".into()) };
            payout.reply_to.do_send(Settled { local_id: payout.tx.local_id, outcome, on_us: None });
            return;
        };
        let lookup = Lookup {
            key,
            payer_document: payout.payer.document.clone(),
            end_to_end_id: payout.tx.end_to_end_id.clone(),
        };
        ctx.spawn(self.dict.send(lookup).into_actor(self).map(move |found, act, ctx| match found {
            Ok(Ok(entry)) => {
                let mut payout = payout;
                apply_entry(&mut payout.tx, &entry);
                act.send(payout);
            }
            Ok(Err(DictError::NotFound)) => {
                let outcome = RailOutcome {
                    result: Err(ErrorCode::OrderRejected),
                    reason: Some("DICT_NOT_FOUND".into()),
                };
                payout.reply_to.do_send(Settled { local_id: payout.tx.local_id, outcome, on_us: None });
            }
            Ok(Err(e)) => {
                tracing::warn!(local_id = payout.tx.local_id, error = %e, "a payout waits for the DICT");
                let me = ctx.address();
                ctx.run_later(LOOKUP_RETRY_AFTER, move |_, _| me.do_send(payout));
            }
            Err(_) => {}
        }));
    }
}

/// What the DICT said of a payee, written into the payout (its message needs it).
pub fn apply_entry(tx: &mut crate::domain::transaction::Transaction, entry: &super::dict::Entry) {
    let rail = tx.rail.get_or_insert_with(RailDetails::default);
    rail.instrument.get_or_insert_with(|| "DICT".into());
    rail.creditor_document = Some(entry.tax_id.clone());
    rail.creditor_account_type = Some(entry.account_type.clone());
    let bank = tx.counterpart.bank.get_or_insert_with(|| crate::domain::transaction::BankInfo {
        ispb: entry.participant.to_string(),
        name: format!("ISPB {}", entry.participant),
        code: String::new(),
        branch: None,
        account_number: None,
    });
    bank.ispb = entry.participant.to_string();
    bank.branch = entry.branch.clone();
    bank.account_number = Some(entry.account_number.clone());
}

/// Posts what waits, up to ten messages a request, until ICOM takes them.
async fn sender(icom: IcomClient, rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Outbound>>>) {
    loop {
        let mut batch = Vec::with_capacity(MESSAGES_PER_REQUEST_MAX);
        {
            let mut rx = rx.lock().await;
            match rx.recv().await {
                Some(first) => batch.push(first),
                None => return,
            }
            while batch.len() < MESSAGES_PER_REQUEST_MAX {
                match rx.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
        }
        post(&icom, batch).await;
    }
}

/// Posts one batch until it is taken; a refused batch of several is posted one by one, so
/// one bad message does not fail the others.
async fn post(icom: &IcomClient, batch: Vec<Outbound>) {
    let bodies: Vec<Bytes> = batch.iter().map(|o| o.body.clone()).collect();
    let mut backoff = BACKOFF_MIN;
    loop {
        let started = Instant::now();
        let sent = icom.send(&bodies).await;
        metrics::histogram!("pixgw_icom_send_seconds").record(started.elapsed().as_secs_f64());
        match sent {
            Ok(_) => {
                for o in batch {
                    if let Some(d) = o.done {
                        let _ = d.send(Ok(()));
                    }
                }
                return;
            }
            Err(IcomError::Throttled(wait)) => {
                metrics::counter!("pixgw_icom_throttled_total", "direction" => "send").increment(1);
                tokio::time::sleep(wait).await;
            }
            Err(IcomError::Unavailable(e)) | Err(IcomError::Refused(503, e)) => {
                metrics::counter!("pixgw_icom_unavailable_total", "direction" => "send").increment(1);
                tracing::warn!(error = %e, wait_ms = backoff.as_millis() as u64, "ICOM did not take a batch; sending it again");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
            Err(e) if batch.len() > 1 => {
                tracing::warn!(error = %e, "ICOM refused a batch; sending its messages one by one");
                for o in batch {
                    Box::pin(post(icom, vec![o])).await;
                }
                return;
            }
            Err(e) => {
                metrics::counter!("pixgw_icom_refused_total").increment(1);
                for o in batch {
                    if let Some(d) = o.done {
                        let _ = d.send(Err(e.clone()));
                    }
                }
                return;
            }
        }
    }
}

/// Queues a message and waits until ICOM took it.
async fn post_and_wait(outbox: &mpsc::UnboundedSender<Outbound>, body: String) -> Result<(), String> {
    let (done, taken) = oneshot::channel();
    outbox
        .send(Outbound { body: Bytes::from(body), done: Some(done) })
        .map_err(|_| "the senders stopped".to_owned())?;
    match taken.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the senders stopped".into()),
    }
}

/// Reads one stream for ever: each batch's effects on disk before it is confirmed.
async fn reader(
    n: usize,
    icom: IcomClient,
    settings: SpiSettings,
    inbound: Arc<dyn Inbound>,
    outbox: mpsc::UnboundedSender<Outbound>,
) {
    let mut next: Option<String> = None;
    let mut backoff = BACKOFF_MIN;
    loop {
        let started = Instant::now();
        let read = match &next {
            None => icom.start().await,
            Some(url) => icom.pull(url).await,
        };
        match read {
            Ok(Pulled { messages, next: following }) => {
                metrics::histogram!("pixgw_icom_read_seconds").record(started.elapsed().as_secs_f64());
                backoff = BACKOFF_MIN;
                let handled = handle_batch(&settings, &inbound, &outbox, messages).await;
                match (handled, following) {
                    (Ok(()), Some(f)) => next = Some(f),
                    (Ok(()), None) => next = None,
                    (Err(e), _) => {
                        // Not confirmed: ICOM delivers the batch again on a new stream.
                        tracing::warn!(stream = n, error = %e, "a read could not be carried out; it will be read again");
                        next = None;
                        tokio::time::sleep(BACKOFF_MAX).await;
                    }
                }
            }
            Err(IcomError::Throttled(wait)) => {
                metrics::counter!("pixgw_icom_throttled_total", "direction" => "read").increment(1);
                tokio::time::sleep(wait).await;
            }
            Err(IcomError::Gone) => next = None,
            Err(e) => {
                metrics::counter!("pixgw_icom_unavailable_total", "direction" => "read").increment(1);
                tracing::warn!(stream = n, error = %e, "ICOM read failed; trying again");
                if !e.is_transient() {
                    next = None;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// Carries out one read's messages: `Err` when any could not be (the read stays
/// unconfirmed).
async fn handle_batch(
    settings: &SpiSettings,
    inbound: &Arc<dyn Inbound>,
    outbox: &mpsc::UnboundedSender<Outbound>,
    messages: Vec<super::icom::Part>,
) -> Result<(), String> {
    for part in messages {
        let read_at = Instant::now();
        let resource = part.resource_id.as_deref();
        // What cannot be applied is kept, durably, before the read is confirmed: the
        // stream goes on, and an operator sees it (`Inbound::unmatched`).
        let keep = |kind: &str, reference: &str, why: String| {
            let item = crate::rail::Unmatched::of(&part.body, kind, reference, why, resource, Utc::now());
            inbound.unmatched(item)
        };
        let message = match check(settings, &part.body, resource) {
            Ok(m) => m,
            Err(why) => {
                keep("unreadable", resource.unwrap_or("-"), why).await.map_err(|e| e.0)?;
                continue;
            }
        };
        let kind = message.kind().name();
        metrics::counter!("pixgw_spi_messages_received_total", "kind" => message.kind().name()).increment(1);
        let lag = (Utc::now() - message.created).to_std().unwrap_or_default();
        metrics::histogram!("pixgw_spi_stream_lag_seconds").record(lag.as_secs_f64());
        match message.body {
            Body::CreditTransfers { txs, .. } => {
                let mut reports = Vec::with_capacity(txs.len());
                for tx in txs {
                    reports.push(arrival_answer(settings, inbound, tx).await?);
                }
                answer(settings, outbox, reports, read_at, "pacs.008").await?;
            }
            Body::Returns(returns) => {
                let mut reports = Vec::with_capacity(returns.len());
                for r in returns {
                    reports.push(return_answer(settings, inbound, r).await?);
                }
                answer(settings, outbox, reports, read_at, "pacs.004").await?;
            }
            Body::Statuses(reports) => {
                for r in reports {
                    if let Some(why) = status(inbound, &r).await? {
                        keep(kind, &status_id(&r), why).await.map_err(|e| e.0)?;
                    }
                }
            }
            Body::Reject(r) => {
                metrics::counter!("pixgw_spi_admi002_total", "reason" => r.reason.clone()).increment(1);
                tracing::error!(reference = %r.reference, reason = %r.reason, location = ?r.location, description = ?r.description, "the SPI refused a message of ours (admi.002)");
                let outcome = RailOutcome {
                    result: Err(ErrorCode::PaymentExpired),
                    reason: Some(format!("admi.002 {}", r.reason)),
                };
                let mut why =
                    Some(format!("an admi.002 ({}) whose reference names no payout of ours", r.reason));
                for id in outgoing::ids_of_msg_id(&settings.ispb, &r.reference).unwrap_or_default() {
                    match inbound.payout_ended(id, outcome.clone()).await.map_err(|e| e.0)? {
                        PayoutEnded::Applied => why = None,
                        PayoutEnded::Contradicts(w) => why = Some(format!("an admi.002 ({}): {w}", r.reason)),
                        PayoutEnded::NotOurs => {}
                    }
                }
                if let Some(why) = why {
                    keep(kind, &r.reference, why).await.map_err(|e| e.0)?;
                }
            }
        }
    }
    Ok(())
}

/// A received message, once it verifies and follows the catalogue; else why not.
fn check(settings: &SpiSettings, body: &[u8], resource: Option<&str>) -> Result<Message, String> {
    let bad = |what: &'static str, e: String| {
        metrics::counter!("pixgw_spi_messages_refused_total", "why" => what).increment(1);
        tracing::error!(resource, why = what, error = %e, "a message from the SPI is refused; it credits nothing");
        Err(format!("{what}: {e}"))
    };
    let doc = match Document::parse(body) {
        Ok(d) => d,
        Err(e) => return bad("xml", e.to_string()),
    };
    if !(settings.accept_unsigned && dsig::signature_of(&doc, Profile::Spi).is_none()) {
        if let Err(e) = dsig::verify(&doc, Profile::Spi, &settings.trusted) {
            return bad("signature", e.to_string());
        }
    }
    let m = match Message::read(&doc) {
        Ok(m) => m,
        Err(e) => return bad("catalogue", e.to_string()),
    };
    if m.to != settings.ispb || m.from != Ispb::spi() {
        return bad("address", format!("from {} to {}", m.from, m.to));
    }
    Ok(m)
}

fn report(id: &str, original: &str, refused: Option<&str>) -> StatusReport {
    StatusReport {
        original_instruction_id: id.to_owned(),
        original_end_to_end_id: original.to_owned(),
        status: if refused.is_some() { TxStatus::Rejected } else { TxStatus::Accepted },
        reason: refused.map(str::to_owned),
        additional_info: None,
        settled_at: None,
    }
}

async fn arrival_answer(
    settings: &SpiSettings,
    inbound: &Arc<dyn Inbound>,
    t: CreditTransfer,
) -> Result<StatusReport, String> {
    let id = t.end_to_end_id.clone();
    if t.creditor_account.ispb != settings.ispb {
        return Ok(report(&id, &id, Some("AGNT")));
    }
    let arrival = Arrival {
        id: id.clone(),
        value: t.amount,
        payer_name: t.debtor_name,
        payer_document: t.debtor_document,
        payer_ispb: t.debtor_account.ispb.to_string(),
        paid_at: t.accepted_at,
        creditor_document: t.creditor_document,
        to: ArrivalTo::Payment { key: t.proxy, account: t.creditor_account.number, reference: t.tx_id },
    };
    let answered = inbound.accept(arrival).await.map_err(|e| e.0)?;
    let refused = answered.err().map(|r| refusal_reason(&r));
    if let Some(reason) = refused {
        metrics::counter!("pixgw_spi_arrivals_refused_total", "reason" => reason).increment(1);
    }
    Ok(report(&id, &id, refused))
}

async fn return_answer(
    settings: &SpiSettings,
    inbound: &Arc<dyn Inbound>,
    r: Return,
) -> Result<StatusReport, String> {
    if r.original_debtor_agent != settings.ispb {
        return Ok(report(&r.return_id, &r.original_end_to_end_id, Some("AGNT")));
    }
    let arrival = Arrival {
        id: r.return_id.clone(),
        value: r.amount,
        payer_name: String::new(),
        payer_document: String::new(),
        payer_ispb: r.original_creditor_agent.to_string(),
        paid_at: Utc::now(),
        creditor_document: String::new(),
        to: ArrivalTo::Return { original_end_to_end_id: r.original_end_to_end_id.clone() },
    };
    let answered = inbound.accept(arrival).await.map_err(|e| e.0)?;
    let refused = answered.err().map(|r| refusal_reason(&r));
    Ok(report(&r.return_id, &r.original_end_to_end_id, refused))
}

/// Signs and posts the answer to what was read, and waits for ICOM to take it.
async fn answer(
    settings: &SpiSettings,
    outbox: &mpsc::UnboundedSender<Outbound>,
    reports: Vec<StatusReport>,
    read_at: Instant,
    to: &'static str,
) -> Result<(), String> {
    let m = outgoing::answer(&settings.ispb, reports, Utc::now());
    let signed = dsig::sign_spi(&m.write(), &settings.signer).map_err(|e| e.to_string())?;
    post_and_wait(outbox, signed).await?;
    metrics::histogram!("pixgw_spi_answer_seconds", "to" => to).record(read_at.elapsed().as_secs_f64());
    metrics::counter!("pixgw_spi_messages_sent_total", "kind" => "pacs.002").increment(1);
    Ok(())
}

/// A status the SPI reports: the end of one of our payouts, or of something we accepted.
/// The id a status report is about: a return's id, else the payment's end-to-end id.
fn status_id(r: &StatusReport) -> String {
    if r.original_instruction_id.starts_with('D') {
        r.original_instruction_id.clone()
    } else {
        r.original_end_to_end_id.clone()
    }
}

/// Applies a status report; answers why it could not be, when nothing of ours waits under
/// its id (the caller keeps it as unmatched).
async fn status(inbound: &Arc<dyn Inbound>, r: &StatusReport) -> Result<Option<String>, String> {
    let id = status_id(r);
    let contradicted = |why: String| Ok(Some(format!("an {}: {why}", r.status.code())));
    let found = match r.status {
        TxStatus::SettledForPayer => {
            match inbound.payout_ended(id, RailOutcome::settled(None)).await.map_err(|e| e.0)? {
                PayoutEnded::Applied => true,
                PayoutEnded::NotOurs => false,
                PayoutEnded::Contradicts(why) => return contradicted(why),
            }
        }
        TxStatus::SettledForReceiver => inbound.incoming_ended(id, true).await.map_err(|e| e.0)?,
        TxStatus::Rejected => {
            let reason = r.reason.clone().unwrap_or_else(|| "ED05".into());
            metrics::counter!("pixgw_spi_rejections_total", "reason" => reason.clone()).increment(1);
            if reason == "AB03" {
                metrics::counter!("pixgw_spi_timeouts_total").increment(1);
            }
            if is_operator_reason(&reason) {
                tracing::error!(id, reason, "the SPI rejected a payment for a reason about this participant");
            }
            let outcome = RailOutcome { result: Err(reject_code(&reason)), reason: Some(reason) };
            match inbound.payout_ended(id.clone(), outcome).await.map_err(|e| e.0)? {
                PayoutEnded::Applied => true,
                PayoutEnded::NotOurs => inbound.incoming_ended(id, false).await.map_err(|e| e.0)?,
                PayoutEnded::Contradicts(why) => return contradicted(why),
            }
        }
        // The SPI does not send ACSP: one is read and needs nothing.
        TxStatus::Accepted => true,
    };
    Ok((!found).then(|| {
        format!("a {} status of a payment or return that is not ours or not known", r.status.code())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_maps_to_the_interfaces_code_and_ours_alert_the_operator() {
        for (reason, code) in [
            ("AB03", ErrorCode::SettlementTimeout),
            ("AC06", ErrorCode::BlockedAccount),
            ("AC07", ErrorCode::AccountClosed),
            ("BE01", ErrorCode::TaxIdMismatch),
            ("DS04", ErrorCode::OrderRejected),
            ("AC03", ErrorCode::OrderRejected),
            ("AB09", ErrorCode::OrderRejected),
            ("AM04", ErrorCode::PaymentExpired),
            ("DS0G", ErrorCode::PaymentExpired),
        ] {
            assert_eq!(reject_code(reason), code, "{reason}");
        }
        assert!(is_operator_reason("AM04"));
        assert!(!is_operator_reason("AC06"));
    }

    /// The scheduling policy of the calling thread, from /proc (field 41 of its stat line).
    #[cfg(target_os = "linux")]
    fn policy_of_this_thread() -> u32 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // The command name (field 2) may hold spaces; the fields after its ')' do not.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        rest.split(' ').nth(38).unwrap().parse().unwrap()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_payout_thread_runs_when_idle_and_no_other_thread_does() {
        const SCHED_OTHER: u32 = 0;
        const SCHED_IDLE: u32 = 5;
        let before = policy_of_this_thread();
        let idle = std::thread::spawn(|| {
            run_this_thread_when_idle();
            policy_of_this_thread()
        })
        .join()
        .unwrap();
        assert_eq!((before, idle), (SCHED_OTHER, SCHED_IDLE));
        assert_eq!(policy_of_this_thread(), SCHED_OTHER, "the caller's thread is untouched");
    }

    #[test]
    fn every_refusal_of_an_arrival_has_a_catalogue_reason() {
        use IncomingRefusal::*;
        let all = [
            (Refuse::UnknownAccount, "AC03"),
            (Refuse::NotAccepted, "AG03"),
            (Refuse::Account(DocumentMismatch), "BE01"),
            (Refuse::Account(UnknownCharge), "BE17"),
            (Refuse::Account(ChargePaid), "DUPL"),
            (Refuse::Account(ChargeClosed), "BE17"),
            (Refuse::Account(WrongAmount), "AM09"),
            (Refuse::Account(OriginalNotFound), "DS04"),
            (Refuse::Account(ReturnTooLarge), "AM09"),
        ];
        for (r, code) in all {
            assert_eq!(refusal_reason(&r), code, "{r:?}");
        }
    }
}
