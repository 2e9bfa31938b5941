//! Pix Automático as commands (`domain::rec` and `domain::cobr` hold the records and their
//! life cycles): each change is one plan that writes the records as they now are and, when
//! a status moved (or an attempt to settle failed), the event its webhook (`rec`, `cobr`)
//! carries. A recurring charge that settles is a received PIX of the account, credited in
//! the same plan that records it, so it is paid once or not at all. On us the money is the
//! payer's account's debit: [`settle_on_us`] settles the charge with its credit (deleting
//! the credit in the same plan), [`fail_on_us`] records the payer's refusal.

use chrono::{DateTime, Utc};

use chrono::NaiveDate;

use super::OnUsCredit;
use super::{pix_in, Account, Ids, PixInRequest, Plan, Record, Refusal};
use crate::domain::cobr::{
    Attempted, Canceller, Cobr, CobrError, CobrStatus, DebtorDetails, Due, Failure, ReceiverAccount,
    SettleScenario,
};
use crate::domain::cobv::payment_day;
use crate::domain::events::{EventBody, EventType, OutboxEvent};
use crate::domain::listing::local_day;
use crate::domain::location::RecLocations;
use crate::domain::money::Money;
use crate::domain::rec::{
    Answer, Link, LocRec, Party, PayerAuthorisation, PayerSide, RecError, RecStatus, Receiver, Recipient,
    Recurrence, Revision,
};
use crate::domain::recurrence::{
    check_amount, check_send_window, AmountRule, AutoRetry, RetryPolicy, Schedule, SEND_DAYS_BEFORE_MIN,
};
use crate::domain::transaction::{BankInfo, Transaction};

/// A new recurrence, as the receiver asks for it (`POST /rec`).
#[derive(Debug, Clone)]
pub struct RecRequest {
    pub link: Link,
    pub schedule: Schedule,
    pub amount: AmountRule,
    pub retry: RetryPolicy,
    /// The receiver's name and document, as its recurrences show them.
    pub receiver: Receiver,
    /// Its location (journey 2), as stored: it must not be linked yet.
    pub loc: Option<LocRec>,
    /// The txid of an existing cob of the account whose payment authorises it (journey 3),
    /// or of a cobv (journey 4, `first_is_cobv`).
    pub first_txid: Option<String>,
    pub first_is_cobv: bool,
    /// The retries the gateway asks for by itself (checked against `retry` already).
    pub auto_retry: AutoRetry,
    /// The gateway sends each cycle's charge this many days before its due date (checked
    /// already: within the sending window, for a fixed value).
    pub auto_send_days: Option<u8>,
}

/// A change of a recurrence.
#[derive(Debug, Clone)]
pub enum RecChange {
    /// Send a solicitation to the payer's institution (`POST /solicrec`).
    Solicit { recipient: Recipient, expires_at: DateTime<Utc> },
    /// The payer's institution answers the solicitation (sandbox).
    Answer { solicitation: String, answer: Answer },
    /// The receiver withdraws the solicitation before an answer (`PATCH /solicrec`).
    Withdraw { solicitation: String },
    /// One side cancels the recurrence (`PATCH /rec` by the receiver; sandbox for the payer).
    Cancel(Party),
    /// The payer authorises it by a QR code (journeys 2 and 3; sandbox): `first_paid` says
    /// whether its first cob is paid.
    ApproveByQr { payer: PayerAuthorisation, first_paid: bool },
    /// The receiver revises it (`PATCH /rec` beyond `status`).
    Revise(Revision),
    /// The payer changes its maximum (`None`: none); its charges not yet tried follow it.
    Maximum(Option<Money>),
}

/// The event of a recurrence's status change: the webhook carries its view.
fn rec_event(rec: &Recurrence) -> OutboxEvent {
    OutboxEvent {
        account_id: rec.account_id,
        local_id: rec.local_id,
        event_type: EventType::Rec,
        created_at: rec.updated_at,
        body: EventBody::Json(serde_json::json!({ "recs": [rec.to_json()] })),
    }
}

/// The same event for the payer's account, when the payer is an account of this gateway
/// (on us) other than the receiver: the payer hears of what is asked of it (a solicitation,
/// each charge scheduled, failed, paid or cancelled) at its own endpoint for that type.
fn for_payer(e: &OutboxEvent, payer: Option<u64>) -> Option<OutboxEvent> {
    payer.filter(|p| *p != e.account_id).map(|account_id| OutboxEvent { account_id, ..e.clone() })
}

/// A recurrence's event, and the on-us payer's copy of it (in the payer's view).
fn rec_events(rec: &Recurrence) -> impl Iterator<Item = OutboxEvent> {
    let e = rec_event(rec);
    let copy = payer_rec_event(rec, &e);
    std::iter::once(e).chain(copy)
}

/// The on-us payer's copy of a recurrence's event `e`, carrying the payer's view.
fn payer_rec_event(rec: &Recurrence, e: &OutboxEvent) -> Option<OutboxEvent> {
    let mut copy = for_payer(e, rec.on_us_payer())?;
    copy.body = EventBody::Json(serde_json::json!({ "recs": [rec.to_payer_json(copy.account_id)] }));
    Some(copy)
}

/// A recurring charge's event, and the on-us payer's copy of it.
fn cobr_events(c: &Cobr) -> impl Iterator<Item = OutboxEvent> {
    let e = cobr_event(c, None);
    let copy = for_payer(&e, c.on_us_payer);
    std::iter::once(e).chain(copy)
}

/// The events of a recurring charge that `pix` has just settled: the receiver's carries
/// the PIX as the API Pix's `CobRNotification` does (`pix`, as `GET /cobr/{txid}` shows
/// it); the on-us payer's copy does not.
fn settled_cobr_events(
    c: &Cobr,
    pix: &Transaction,
    receiving_key: &str,
) -> impl Iterator<Item = OutboxEvent> {
    let copy = for_payer(&cobr_event(c, None), c.on_us_payer);
    std::iter::once(cobr_event(c, Some(crate::domain::events::pix_json(pix, receiving_key)))).chain(copy)
}

/// Writes the recurrence, with its event when its status moved.
fn written(rec: Recurrence, status_moved: bool) -> Plan<Recurrence> {
    let mut plan = Plan::new(rec.clone());
    if status_moved {
        plan.events.extend(rec_events(&rec));
    }
    plan.records.push(Record::Recurrence(rec));
    plan
}

/// Makes a recurrence (`CRIADA`). Ids: one, the recurrence's.
pub fn create_rec(
    account: &Account,
    req: RecRequest,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Recurrence>, Refusal> {
    if req.schedule.start() < local_day(now) {
        return Err(Refusal::Rec(RecError::StartsBeforeToday));
    }
    if let Some(id) = req.loc.as_ref().and_then(|l| l.id_rec.clone()) {
        return Err(Refusal::Rec(RecError::LocationTaken(id)));
    }
    let local_id = ids.take()?.local_id;
    let mut rec = Recurrence::new(
        account.id.get(),
        local_id,
        req.link,
        req.schedule,
        req.amount,
        req.retry,
        req.receiver,
        now,
    )
    .ok_or_else(|| Refusal::Bug(format!("local id {local_id} does not fit an idRec")))?;
    rec.first_txid = req.first_txid;
    rec.first_is_cobv = req.first_is_cobv;
    rec.auto_retry = req.auto_retry;
    rec.auto_send_days = req.auto_send_days;
    let linked = req.loc.map(|l| LocRec { id_rec: Some(rec.id.clone()), ..l });
    rec.loc = linked.clone();
    let mut plan = written(rec, true);
    if let Some(l) = linked {
        plan.records.push(Record::LocRec(l));
    }
    Ok(plan)
}

/// Makes a location for a recurrence (`POST /locrec`): served at `served` when the server
/// serves locations (`GET /qr/rec/{token}`), else on the sandbox's host, its random part
/// naming it. Ids: one, the location's.
pub fn create_locrec(
    account: &Account,
    served: Option<&RecLocations>,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<LocRec>, Refusal> {
    let fresh = ids.take()?;
    let location = served
        .and_then(|s| s.location(account.id.get(), fresh.local_id))
        .unwrap_or_else(|| format!("{LOCATION_HOST}/rec/{}", fresh.hex(32)));
    let loc = LocRec {
        account_id: account.id.get(),
        local_id: fresh.local_id,
        location,
        created_at: now,
        id_rec: None,
    };
    let mut plan = Plan::new(loc.clone());
    plan.records.push(Record::LocRec(loc));
    Ok(plan)
}

/// Unlinks `loc` from the recurrence it serves (`DELETE /locrec/{id}/idRec`): the location
/// serves none, and the recurrence no longer shows it (nor journey 2's code); its status
/// does not change.
pub fn unlink_locrec(mut rec: Recurrence, loc: LocRec, now: DateTime<Utc>) -> Plan<LocRec> {
    let loc = LocRec { id_rec: None, ..loc };
    if rec.loc.as_ref().is_some_and(|l| l.local_id == loc.local_id) {
        rec.loc = None;
        rec.updated_at = now;
    }
    let mut plan = Plan::new(loc.clone());
    plan.records.push(Record::LocRec(loc));
    plan.records.push(Record::Recurrence(rec));
    plan
}

/// The host a location names. The sandbox's payer's institution reads a recurrence through
/// the sandbox routes, not through this address, which no server answers.
pub const LOCATION_HOST: &str = "qr.pixgw.sandbox";

/// Changes a recurrence. `payer` is who speaks for the payer in a change of the payer's
/// (an answer, the payer's cancellation, a QR approval): a payer that is an account of this
/// gateway speaks only for itself (`Recurrence::check_payer_side`); `None` for the
/// receiver's own changes. `open` are its recurring charges not yet final: a cancellation
/// cancels them with it, but for one whose attempt is under way, which settles or fails.
/// Ids: one for a solicitation, none otherwise.
pub fn change_rec(
    mut rec: Recurrence,
    change: RecChange,
    payer: Option<PayerSide>,
    open: Vec<Cobr>,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Recurrence>, Refusal> {
    let payers = matches!(
        change,
        RecChange::Answer { .. }
            | RecChange::Cancel(Party::UsuarioPagador)
            | RecChange::ApproveByQr { .. }
            | RecChange::Maximum(_)
    );
    match (payers, payer) {
        // A QR code is open to whoever holds it: an account of this gateway may authorise
        // with it a recurrence no other payer holds (journeys 2 to 4 on us).
        (true, Some(PayerSide::Account(a))) if matches!(change, RecChange::ApproveByQr { .. }) => {
            rec.check_qr_payer(a).map_err(Refusal::Rec)?
        }
        (true, side) => rec.check_payer_side(side.unwrap_or(PayerSide::Sandbox)).map_err(Refusal::Rec)?,
        // A payer's account asks only for the payer's changes.
        (false, Some(_)) => return Err(Refusal::Rec(RecError::NotFound)),
        (false, None) => {}
    }
    let before = rec.status;
    let solicited = matches!(change, RecChange::Solicit { .. });
    let mut side_records = Vec::new();
    let by = match &change {
        RecChange::Cancel(Party::UsuarioPagador) => Canceller::Payer,
        _ => Canceller::Receiver,
    };
    match change {
        RecChange::Solicit { recipient, expires_at } => {
            let local_id = ids.take()?.local_id;
            rec.solicit(local_id, recipient, expires_at, now).map(|_| ())
        }
        RecChange::Answer { solicitation, answer } => rec.answer(&solicitation, answer, now),
        RecChange::Withdraw { solicitation } => rec.withdraw(&solicitation, now),
        RecChange::Cancel(by) => rec.cancel(by, now),
        RecChange::ApproveByQr { payer: mut who, first_paid } => {
            // The payer on us is the account that speaks, whatever the request said.
            who.on_us = match payer {
                Some(PayerSide::Account(a)) => Some(a),
                _ => None,
            };
            rec.approve_by_qr(who, first_paid, now)
        }
        RecChange::Maximum(maximum) => rec.change_maximum(maximum, now).map(|()| {
            for mut c in open.iter().filter(|c| c.rec_local == rec.local_id && !c.status.is_final()).cloned()
            {
                c.payer_maximum = maximum;
                side_records.push(Record::Cobr(c));
            }
        }),
        RecChange::Revise(revision) => {
            let linked = revision.loc_id.is_some();
            rec.revise(revision, local_day(now), now).map(|unlinked| {
                if linked {
                    side_records.extend(rec.loc.clone().map(Record::LocRec));
                }
                side_records.extend(unlinked.map(Record::LocRec));
            })
        }
    }
    .map_err(Refusal::Rec)?;
    let moved = rec.status != before;
    // A solicitation leaves the status CRIADA: the receiver hears nothing new, but a payer of
    // this gateway is asked something.
    let asked = (solicited && !moved).then(|| payer_rec_event(&rec, &rec_event(&rec))).flatten();
    let mut plan = written(rec, moved);
    plan.events.extend(asked);
    plan.records.extend(side_records);
    if plan.reply.status == RecStatus::Cancelada {
        for mut c in open.into_iter().filter(|c| c.rec_local == plan.reply.local_id) {
            if c.cancel(by, "the recurrence was cancelled", now).is_ok() {
                plan.events.extend(cobr_events(&c));
                plan.records.push(Record::Cobr(c));
            }
        }
    }
    Ok(plan)
}

/// The txid of the charge the gateway sends by itself for cycle `n` of the recurrence with
/// local id `local`: 32 letters and digits, one per cycle.
pub fn auto_txid(local: u64, n: u32) -> String {
    format!("pixgwauto{local:0>14}{n:0>9}")
}

/// The charge the gateway sends by itself (`automacao.diasAntesEnvio`) when its day has
/// come: for the first cycle from `rec.auto_next_cycle` that was not charged yet, that is
/// still at least [`SEND_DAYS_BEFORE_MIN`] days ahead, and whose txid no charge of the
/// account has (`taken`); the cycles before it are passed over. The plan writes the
/// recurrence with the cycle to look at next, so its timer moves on. `None` when nothing is
/// due. Ids: one, for the charge.
pub fn auto_send(
    account: &Account,
    mut rec: Recurrence,
    taken: impl Fn(&str) -> bool,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Option<Plan<Recurrence>>, Refusal> {
    let (Some(days), AmountRule::Fixed(value), RecStatus::Aprovada) =
        (rec.auto_send_days, rec.amount, rec.status)
    else {
        return Ok(None);
    };
    let today = local_day(now);
    let first = rec.auto_next_cycle;
    let mut n = first;
    loop {
        let due = rec.schedule.cycle_start(n);
        let not_yet = due.is_none_or(|d| today < d - chrono::Duration::days(i64::from(days)));
        if not_yet {
            rec.auto_next_cycle = n;
            return Ok((n != first).then(|| written(rec, false)));
        }
        let Some(due) = due else { return Ok(None) };
        let txid = auto_txid(rec.local_id, n);
        let passed = rec.charges.iter().any(|(c, _)| *c == n)
            || (due - today).num_days() < SEND_DAYS_BEFORE_MIN
            || taken(&txid);
        if passed {
            n += 1;
            continue;
        }
        rec.auto_next_cycle = n + 1;
        let req = CobrRequest {
            txid,
            due,
            adjust: true,
            value,
            info: None,
            scenario: SettleScenario::Pay,
            receiver_account: None,
            debtor_details: None,
        };
        let plan = create_cobr(account, rec, req, &[], now, ids)?;
        let rec = plan.records.iter().find_map(|r| match r {
            Record::Recurrence(r) => Some(r.clone()),
            _ => None,
        });
        return match rec {
            Some(rec) => Ok(Some(plan.with_reply(rec))),
            None => Err(Refusal::Bug("a charge made without its recurrence".into())),
        };
    }
}

/// Expires the recurrence's solicitation if its time has come (`None`: nothing is due).
pub fn expire_rec(mut rec: Recurrence, now: DateTime<Utc>) -> Option<Plan<Recurrence>> {
    rec.expire(now).then(|| written(rec, true))
}

/// The event of a recurring charge's status change or failed attempt; `pix`, the PIX that
/// settled it.
fn cobr_event(c: &Cobr, pix: Option<serde_json::Value>) -> OutboxEvent {
    let mut charge = c.to_json();
    if let Some(pix) = pix {
        charge["pix"] = serde_json::json!([pix]);
    }
    OutboxEvent {
        account_id: c.account_id,
        local_id: c.local_id,
        event_type: EventType::Cobr,
        created_at: c.updated_at,
        body: EventBody::Json(serde_json::json!({ "cobsr": [charge] })),
    }
}

/// A recurring charge, as the receiver asks for it (`PUT`/`POST /cobr`).
#[derive(Debug, Clone)]
pub struct CobrRequest {
    pub txid: String,
    pub due: NaiveDate,
    pub adjust: bool,
    pub value: Money,
    pub info: Option<String>,
    pub scenario: SettleScenario,
    pub receiver_account: Option<ReceiverAccount>,
    pub debtor_details: Option<DebtorDetails>,
}

/// Makes a recurring charge for one cycle of `rec`, `ATIVA` with its attempt scheduled.
/// `ended` are the local ids of the recurrence's charges that ended `CANCELADA` or
/// `REJEITADA`: those leave their cycle free for another (the API Pix refuses a second
/// charge only while the cycle has one in any other status). Ids: one, the charge's.
pub fn create_cobr(
    account: &Account,
    mut rec: Recurrence,
    req: CobrRequest,
    ended: &[u64],
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Cobr>, Refusal> {
    let refuse = |e: CobrError| Refusal::Cobr(e);
    if rec.status != RecStatus::Aprovada {
        return Err(refuse(CobrError::RecurrenceNotApproved(rec.status.as_str())));
    }
    let cycle = rec.schedule.cycle_of(req.due).map_err(|e| refuse(e.into()))?;
    if rec.charges.iter().any(|(c, local)| *c == cycle && !ended.contains(local)) {
        return Err(refuse(CobrError::CycleCharged(cycle)));
    }
    check_send_window(payment_day(now), req.due).map_err(|e| refuse(e.into()))?;
    check_amount(rec.amount, req.value).map_err(|e| refuse(e.into()))?;
    let local_id = ids.take()?.local_id;
    let mut cobr = Cobr {
        account_id: account.id.get(),
        local_id,
        txid: req.txid,
        rec_local: rec.local_id,
        id_rec: rec.id.clone(),
        cycle,
        due: req.due,
        adjust: req.adjust,
        value: req.value,
        info: req.info,
        retry: rec.retry,
        payer_maximum: rec.payer.as_ref().and_then(|p| p.maximum),
        on_us_payer: rec.payer.as_ref().and_then(|p| p.on_us),
        scenario: req.scenario,
        status: CobrStatus::Criada,
        history: Vec::new(),
        attempts: Vec::new(),
        closing: None,
        created_at: now,
        updated_at: now,
        receiver_account: req.receiver_account,
        debtor_details: req.debtor_details,
        receiver: Some((rec.receiver.name.clone(), rec.receiver.document.clone())),
        debtor_document: Some(rec.link.debtor.document.clone()),
        agreement: rec.receiver.agreement.clone(),
        auto_retry: rec.auto_retry.clone(),
    };
    cobr.activate(now);
    // The payer's institution receives it now and checks the payer's maximum then, so the
    // receiver learns of a refusal days before the due date, not on it.
    if cobr.payer_maximum.is_some_and(|max| cobr.value > max) {
        cobr.failed(Failure::AboveMaximum, now);
    }
    rec.charges.push((cycle, local_id));
    let mut plan = Plan::new(cobr.clone());
    plan.events.extend(cobr_events(&cobr));
    plan.records.push(Record::Cobr(cobr));
    plan.records.push(Record::Recurrence(rec));
    Ok(plan)
}

/// A change the receiver makes to a recurring charge.
#[derive(Debug, Clone)]
pub enum CobrChange {
    /// `POST /cobr/{txid}/retentativa/{data}`.
    Retry(NaiveDate),
    /// `PATCH /cobr/{txid}` with `CANCELADA`.
    Cancel,
    /// The payer (an account of this gateway, by its id) cancels this one payment, until the
    /// end of the day before its attempt; the recurrence goes on.
    CancelByPayer { payer: u64, id_rec: String },
}

/// Changes a recurring charge. `rec_status` is its recurrence's: a retry is a new attempt to
/// take the payer's money, so it is asked for only while the recurrence is `APROVADA` (a
/// charge whose attempt was under way when either side cancelled the recurrence finishes
/// that attempt, and no other).
pub fn change_cobr(
    mut cobr: Cobr,
    change: CobrChange,
    rec_status: RecStatus,
    now: DateTime<Utc>,
) -> Result<Plan<Cobr>, Refusal> {
    match change {
        CobrChange::Retry(_) if rec_status != RecStatus::Aprovada && !cobr.status.is_final() => {
            Err(CobrError::RecurrenceNotApproved(rec_status.as_str()))
        }
        CobrChange::Retry(date) => cobr.ask_retry(date, now),
        CobrChange::Cancel => cobr.cancel(Canceller::Receiver, "cancelled by the receiver", now),
        // To any other account, and under another recurrence, the charge does not exist.
        CobrChange::CancelByPayer { payer, id_rec }
            if cobr.on_us_payer != Some(payer) || cobr.id_rec != id_rec =>
        {
            Err(CobrError::NotFound)
        }
        // The payer cancels a payment on its due date; a retry is the receiver's.
        CobrChange::CancelByPayer { .. } if cobr.attempts.last().is_some_and(|a| a.retry) => {
            Err(CobrError::RetryNotPayers)
        }
        CobrChange::CancelByPayer { .. } => {
            cobr.cancel(Canceller::Payer, "this payment was cancelled by the payer", now)
        }
    }
    .map_err(Refusal::Cobr)?;
    let mut plan = Plan::new(cobr.clone());
    plan.events.extend(cobr_events(&cobr));
    plan.records.push(Record::Cobr(cobr));
    Ok(plan)
}

/// Who pays a recurring charge: the payer its recurrence was authorised by.
#[derive(Debug, Clone)]
pub struct CobrPayer {
    pub name: String,
    pub document: String,
    pub bank: Option<BankInfo>,
}

/// What is due of a recurring charge at `now` (`None`: nothing). A settled attempt credits
/// the account with a received PIX of the charge's value in the same plan. Ids: one, for
/// that PIX.
pub fn attempt_cobr(
    account: &Account,
    mut cobr: Cobr,
    payer: CobrPayer,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Option<Plan<Cobr>>, Refusal> {
    let Some(attempted) = cobr.attempt(now) else { return Ok(None) };
    let mut plan = match attempted {
        Attempted::Failed | Attempted::Refused => {
            let mut plan = Plan::new(cobr.clone());
            plan.events.extend(cobr_events(&cobr));
            plan
        }
        Attempted::Settles => {
            let req = PixInRequest {
                value: cobr.value,
                payer_name: payer.name,
                payer_document: Some(payer.document),
                payer_bank: payer.bank,
                // The id the attempt was scheduled with.
                end_to_end_id: cobr.due_end_to_end_id().map(str::to_owned),
                paid_txid: Some(cobr.txid.clone()),
            };
            let received = pix_in(account, req, now, ids)?;
            cobr.settled(received.reply.end_to_end_id.clone(), now);
            let events: Vec<OutboxEvent> =
                settled_cobr_events(&cobr, &received.reply, account.receiving_key).collect();
            let mut plan = received.with_reply(cobr.clone());
            plan.events.extend(events);
            plan
        }
    };
    plan.records.push(Record::Cobr(cobr));
    Ok(Some(plan))
}

/// The payer's account refused an on-us charge's debit (`failure`): the scheduled attempt
/// fails, as the sandbox's would. `None` when no attempt is due any more (it settled or
/// ended meanwhile).
pub fn fail_on_us(mut cobr: Cobr, failure: Failure, now: DateTime<Utc>) -> Option<Plan<Cobr>> {
    if !matches!(cobr.step_due(now), Due::Attempt(_)) {
        return None;
    }
    cobr.failed(failure, now);
    let mut plan = Plan::new(cobr.clone());
    plan.events.extend(cobr_events(&cobr));
    plan.records.push(Record::Cobr(cobr));
    Some(plan)
}

/// The credit of an on-us charge's debit arrives: when the charge's attempt awaits it, the
/// charge settles with the payer's end-to-end id, credited as a received PIX, and the
/// credit's record is deleted, all in one plan. `None` when the charge no longer awaits
/// one (the caller then credits it as a received PIX like any other: the money left the
/// payer). Ids: one, for that PIX.
pub fn settle_on_us(
    account: &Account,
    mut cobr: Cobr,
    credit: &OnUsCredit,
    payer_bank: Option<BankInfo>,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Option<Plan<Cobr>>, Refusal> {
    let awaits = cobr.status == CobrStatus::Ativa
        && cobr.attempts.last().is_some_and(|a| a.outcome.is_none())
        && credit.value == cobr.value;
    if !awaits {
        return Ok(None);
    }
    let req = PixInRequest {
        value: credit.value,
        payer_name: credit.payer_name.clone(),
        payer_document: Some(credit.payer_document.clone()),
        payer_bank,
        end_to_end_id: Some(credit.end_to_end_id.clone()),
        paid_txid: Some(cobr.txid.clone()),
    };
    let received = pix_in(account, req, now, ids)?;
    cobr.settled(credit.end_to_end_id.clone(), now);
    let events: Vec<OutboxEvent> =
        settled_cobr_events(&cobr, &received.reply, account.receiving_key).collect();
    let mut plan = received.with_reply(cobr.clone());
    plan.events.extend(events);
    plan.records.push(Record::Cobr(cobr));
    plan.update(Record::OnUsCredited(credit.end_to_end_id.clone()));
    Ok(Some(plan))
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::super::testing::*;
    use super::*;
    use crate::domain::rec::{Debtor, Journey, RecStatus};
    use crate::domain::recurrence::Periodicity;

    fn request(start: NaiveDate) -> RecRequest {
        RecRequest {
            link: Link {
                object: None,
                contract: "c-1".into(),
                debtor: Debtor { name: "Ana".into(), document: "52998224725".into() },
            },
            schedule: Schedule::new(start, Periodicity::Monthly, None).unwrap(),
            amount: AmountRule::Fixed(m("30")),
            retry: RetryPolicy::NotAllowed,
            receiver: Receiver { name: "Shop".into(), document: "11222333000181".into(), agreement: None },
            loc: None,
            first_txid: None,
            first_is_cobv: false,
            auto_retry: AutoRetry::default(),
            auto_send_days: None,
        }
    }

    fn recipient() -> Recipient {
        Recipient {
            document: "52998224725".into(),
            account: "1".into(),
            branch: None,
            ispb: "00000000".into(),
            on_us: None,
        }
    }

    #[test]
    fn a_recurrence_starts_today_or_later_and_its_creation_is_an_event() {
        let f = Fixture::with_balance("0");
        let now: DateTime<Utc> = "2026-11-26T02:00:00Z".parse().unwrap();
        // 23:00 on the 25th in São Paulo: the 25th is still today there.
        let today = NaiveDate::from_ymd_opt(2026, 11, 25).unwrap();
        let plan = create_rec(&f.account(), request(today), now, &mut ids(&[9])).unwrap();
        assert_eq!((plan.reply.status, plan.reply.local_id), (RecStatus::Criada, 9));
        assert!(plan.reply.id.starts_with("RN") && plan.reply.id.contains("20261125"));
        assert_eq!(plan.events.len(), 1);
        assert_eq!(plan.events[0].event_type, EventType::Rec);
        assert_eq!(plan.records, vec![Record::Recurrence(plan.reply.clone())]);
        let yesterday = today.pred_opt().unwrap();
        assert_eq!(
            create_rec(&f.account(), request(yesterday), now, &mut ids(&[9])).map(|p| p.reply),
            Err(Refusal::Rec(RecError::StartsBeforeToday))
        );
    }

    #[test]
    fn only_a_change_of_status_is_an_event_and_a_refused_change_writes_nothing() {
        let f = Fixture::with_balance("0");
        let now: DateTime<Utc> = "2026-11-26T12:00:00Z".parse().unwrap();
        let today = local_day(now);
        let rec = create_rec(&f.account(), request(today), now, &mut ids(&[9])).unwrap().reply;
        let expires_at = now + chrono::Duration::hours(1);
        let sent = change_rec(
            rec,
            RecChange::Solicit { recipient: recipient(), expires_at },
            None,
            vec![],
            now,
            &mut ids(&[10]),
        )
        .unwrap();
        assert!(sent.events.is_empty(), "a solicitation leaves the recurrence CRIADA");
        let rec = sent.reply;
        let sid = rec.solicitations[0].id.clone();
        assert_eq!(
            change_rec(
                rec.clone(),
                RecChange::Answer { solicitation: "SC0".into(), answer: Answer::Reject },
                None,
                vec![],
                now,
                &mut ids(&[])
            )
            .map(|p| p.reply),
            Err(Refusal::Rec(RecError::SolicitationNotFound))
        );
        assert!(expire_rec(rec.clone(), expires_at - chrono::Duration::seconds(1)).is_none());
        let expired = expire_rec(rec.clone(), expires_at).unwrap();
        assert_eq!((expired.reply.status, expired.events.len()), (RecStatus::Expirada, 1));
        let approved = change_rec(
            rec,
            RecChange::Answer {
                solicitation: sid,
                answer: Answer::Approve { maximum: None, municipality: None },
            },
            None,
            vec![],
            now,
            &mut ids(&[]),
        )
        .unwrap();
        assert_eq!(approved.events.len(), 1);
        assert_eq!(approved.events[0].payload()["recs"][0]["status"], "APROVADA");
    }

    #[test]
    fn an_account_of_this_gateway_authorises_by_a_qr_code_for_itself_and_only_where_no_other_payer_is() {
        let f = Fixture::with_balance("0");
        let now: DateTime<Utc> = "2026-11-26T12:00:00Z".parse().unwrap();
        let mut req = request(local_day(now));
        req.loc = Some(LocRec {
            account_id: 1,
            local_id: 3,
            location: "qr.example/qr/rec/x".into(),
            created_at: now,
            id_rec: None,
        });
        let rec = create_rec(&f.account(), req, now, &mut ids(&[9])).unwrap().reply;
        // The request names no account (or another): the account that speaks is the payer.
        let payer = PayerAuthorisation {
            document: "52998224725".into(),
            ispb: "99999999".into(),
            maximum: None,
            municipality: None,
            on_us: Some(77),
        };
        let qr = |rec: &Recurrence, side: PayerSide| {
            let change = RecChange::ApproveByQr { payer: payer.clone(), first_paid: false };
            change_rec(rec.clone(), change, Some(side), vec![], now, &mut ids(&[])).map(|p| p.reply)
        };
        let by_five = qr(&rec, PayerSide::Account(5)).unwrap();
        assert_eq!(
            (by_five.status, by_five.journey, by_five.on_us_payer()),
            (RecStatus::Aprovada, Some(Journey::Two), Some(5))
        );
        assert_eq!(qr(&rec, PayerSide::Sandbox).unwrap().on_us_payer(), None, "the sandbox's payer");
        // Once account 5 holds it, another account does not see it; account 5 is told why.
        assert_eq!(qr(&by_five, PayerSide::Account(6)), Err(Refusal::Rec(RecError::NotFound)));
        assert_eq!(
            qr(&by_five, PayerSide::Account(5)),
            Err(Refusal::Rec(RecError::NotAwaitingAuthorisation("APROVADA")))
        );
        // Asked of account 5 by a solicitation, the recurrence is not another account's to take.
        let mut asked = recipient();
        asked.on_us = Some(5);
        let solicit = RecChange::Solicit { recipient: asked, expires_at: now + chrono::Duration::hours(1) };
        let sent = change_rec(rec, solicit, None, vec![], now, &mut ids(&[10])).unwrap().reply;
        assert_eq!(qr(&sent, PayerSide::Account(6)), Err(Refusal::Rec(RecError::NotFound)));
        assert_eq!(qr(&sent, PayerSide::Account(5)), Err(Refusal::Rec(RecError::SolicitationAwaiting)));
    }

    /// An approved monthly recurrence of 30.00 from `start`, made at `now`.
    fn approved(f: &Fixture, start: NaiveDate, now: DateTime<Utc>) -> Recurrence {
        let rec = create_rec(&f.account(), request(start), now, &mut ids(&[9])).unwrap().reply;
        let solicit =
            RecChange::Solicit { recipient: recipient(), expires_at: now + chrono::Duration::hours(1) };
        let rec = change_rec(rec, solicit, None, vec![], now, &mut ids(&[10])).unwrap().reply;
        let sid = rec.solicitations[0].id.clone();
        let approve = RecChange::Answer {
            solicitation: sid,
            answer: Answer::Approve { maximum: None, municipality: None },
        };
        change_rec(rec, approve, None, vec![], now, &mut ids(&[])).unwrap().reply
    }

    fn charge(due: NaiveDate, value: &str) -> CobrRequest {
        CobrRequest {
            txid: "a".repeat(26),
            due,
            adjust: false,
            value: m(value),
            info: None,
            scenario: SettleScenario::Pay,
            receiver_account: None,
            debtor_details: None,
        }
    }

    #[test]
    fn the_gateway_asks_for_the_next_retry_itself_when_the_recurrence_says_so() {
        let f = Fixture::with_balance("0");
        let now: DateTime<Utc> = "2026-11-26T12:00:00Z".parse().unwrap();
        let start = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
        let mut rec = approved(&f, start, now);
        rec.retry = RetryPolicy::ThreeWithinSevenDays;
        rec.auto_retry = AutoRetry::parse(&[2, 4], rec.retry).unwrap();
        let req = CobrRequest { scenario: SettleScenario::NoFunds { failures: 2 }, ..charge(start, "30") };
        let cobr = create_cobr(&f.account(), rec, req, &[], now, &mut ids(&[20])).unwrap().reply;
        let due = crate::domain::cobv::start_of_day(start);
        let payer = || CobrPayer { name: "Ana".into(), document: "52998224725".into(), bank: None };
        let morning = attempt_cobr(&f.account(), cobr, payer(), due, &mut ids(&[21])).unwrap().unwrap().reply;
        let evening = due + chrono::Duration::hours(crate::domain::cobr::EVENING_ATTEMPT_HOUR);
        let failed =
            attempt_cobr(&f.account(), morning, payer(), evening, &mut ids(&[22])).unwrap().unwrap().reply;
        let v = failed.to_json();
        let kinds: Vec<(&str, &str, &str)> = v["tentativas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["tipo"].as_str().unwrap(),
                    t["status"].as_str().unwrap(),
                    t["dataLiquidacao"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("AGND", "EXPIRADA", "2026-12-01"),
                ("RIFL", "EXPIRADA", "2026-12-01"),
                ("NTAG", "AGENDADA", "2026-12-03")
            ],
            "{v}"
        );
        assert_eq!(
            failed.deadline(),
            Some(crate::domain::cobv::start_of_day(NaiveDate::from_ymd_opt(2026, 12, 3).unwrap()))
        );
    }

    #[test]
    fn the_gateway_sends_a_cycles_charge_on_its_day_and_passes_over_what_it_may_not_send() {
        let f = Fixture::with_balance("0");
        let now: DateTime<Utc> = "2026-11-26T12:00:00Z".parse().unwrap();
        let start = NaiveDate::from_ymd_opt(2026, 11, 27).unwrap();
        let mut rec = approved(&f, start, now);
        let free = |_: &str| false;
        assert_eq!(
            auto_send(&f.account(), rec.clone(), free, now, &mut ids(&[20])),
            Ok(None),
            "off by default"
        );
        rec.auto_send_days = Some(3);
        // Cycle 0 (tomorrow) is too near: passed over; cycle 1 (27 December) waits for the 24th.
        let moved = auto_send(&f.account(), rec.clone(), free, now, &mut ids(&[20])).unwrap().unwrap();
        assert_eq!(
            (moved.reply.auto_next_cycle, moved.records.len()),
            (1, 1),
            "only the recurrence: {:?}",
            moved.records
        );
        let rec = moved.reply;
        let dec = |d: u32| NaiveDate::from_ymd_opt(2026, 12, d).unwrap();
        assert_eq!(rec.deadline(), Some(crate::domain::cobv::start_of_day(dec(24))));
        let early = crate::domain::cobv::start_of_day(dec(24)) - chrono::Duration::seconds(1);
        assert_eq!(auto_send(&f.account(), rec.clone(), free, early, &mut ids(&[20])), Ok(None));
        let on_day = crate::domain::cobv::start_of_day(dec(24));
        let sent = auto_send(&f.account(), rec.clone(), free, on_day, &mut ids(&[20])).unwrap().unwrap();
        let Some(Record::Cobr(c)) = sent.records.first() else { panic!("{:?}", sent.records) };
        assert_eq!(
            (c.txid.as_str(), c.due, c.cycle, c.adjust),
            (auto_txid(rec.local_id, 1).as_str(), dec(27), 1, true)
        );
        assert_eq!((sent.reply.auto_next_cycle, sent.reply.charges.clone()), (2, vec![(1, 20)]));
        // A txid a client took, or a cycle the receiver charged, is passed over too.
        let taken = |t: &str| t == auto_txid(rec.local_id, 1);
        let passed = auto_send(&f.account(), rec.clone(), taken, on_day, &mut ids(&[20])).unwrap().unwrap();
        assert_eq!((passed.reply.auto_next_cycle, passed.records.len()), (2, 1));
        let mut charged = rec.clone();
        charged.charges.push((1, 5));
        let passed = auto_send(&f.account(), charged, free, on_day, &mut ids(&[20])).unwrap().unwrap();
        assert_eq!(passed.reply.auto_next_cycle, 2);
        // Not authorised (cancelled): nothing, and no timer.
        let mut cancelled = rec;
        cancelled.status = RecStatus::Cancelada;
        assert_eq!(cancelled.deadline(), None);
        assert_eq!(auto_send(&f.account(), cancelled, free, on_day, &mut ids(&[20])), Ok(None));
    }

    #[test]
    fn only_its_payer_cancels_one_payment_on_its_due_date_and_only_before_its_day() {
        let f = Fixture::with_balance("0");
        let now: DateTime<Utc> = "2026-11-26T12:00:00Z".parse().unwrap();
        let start = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
        let rec = approved(&f, start, now);
        let mut cobr = create_cobr(&f.account(), rec.clone(), charge(start, "30"), &[], now, &mut ids(&[20]))
            .unwrap()
            .reply;
        cobr.on_us_payer = Some(7);
        let by = |payer: u64, id_rec: &str| CobrChange::CancelByPayer { payer, id_rec: id_rec.into() };
        for wrong in [by(8, &rec.id), by(7, "RR999999992026112600000000009")] {
            assert_eq!(
                change_cobr(cobr.clone(), wrong, RecStatus::Aprovada, now).map(|p| p.reply.status),
                Err(Refusal::Cobr(CobrError::NotFound))
            );
        }
        let due = crate::domain::cobv::start_of_day(start);
        assert_eq!(
            change_cobr(cobr.clone(), by(7, &rec.id), RecStatus::Aprovada, due).map(|p| p.reply.status),
            Err(Refusal::Cobr(CobrError::UnderWay(start))),
            "from 00:00 of its day"
        );
        // A retry the receiver asked for is not the payer's to cancel, however early.
        let mut retried = cobr.clone();
        retried.attempts.last_mut().unwrap().retry = true;
        assert_eq!(
            change_cobr(retried, by(7, &rec.id), RecStatus::Aprovada, now).map(|p| p.reply.status),
            Err(Refusal::Cobr(CobrError::RetryNotPayers))
        );
        let cancelled =
            change_cobr(cobr, by(7, &rec.id), RecStatus::Aprovada, due - chrono::Duration::seconds(1))
                .unwrap();
        let v = cancelled.reply.to_json();
        assert_eq!(v["encerramento"]["cancelamento"]["solicitante"], "USUARIO_PAGADOR", "{v}");
        assert_eq!(v["encerramento"]["cancelamento"]["codigo"], "SLBD");
    }

    #[test]
    fn the_payers_maximum_is_checked_when_a_charge_arrives_and_the_payer_may_change_it() {
        let f = Fixture::with_balance("0");
        let now: DateTime<Utc> = "2026-11-26T12:00:00Z".parse().unwrap();
        let start = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
        let variable = RecRequest { amount: AmountRule::Variable { minimum: None }, ..request(start) };
        let rec = create_rec(&f.account(), variable, now, &mut ids(&[9])).unwrap().reply;
        let solicit =
            RecChange::Solicit { recipient: recipient(), expires_at: now + chrono::Duration::hours(1) };
        let rec = change_rec(rec, solicit, None, vec![], now, &mut ids(&[10])).unwrap().reply;
        let sid = rec.solicitations[0].id.clone();
        let approve = RecChange::Answer {
            solicitation: sid,
            answer: Answer::Approve { maximum: Some(m("25")), municipality: None },
        };
        let rec = change_rec(rec, approve, None, vec![], now, &mut ids(&[])).unwrap().reply;

        // Above the maximum: refused when it arrives, days before its due date.
        let refused = create_cobr(&f.account(), rec, charge(start, "30"), &[], now, &mut ids(&[20])).unwrap();
        let v = refused.reply.to_json();
        assert_eq!((refused.reply.status, refused.reply.deadline()), (CobrStatus::Rejeitada, None));
        assert_eq!(v["encerramento"]["rejeicao"]["codigo"], "AM02", "{v}");
        assert_eq!(v["tentativas"][0]["status"], "REJEITADA");
        let Some(Record::Recurrence(rec)) = refused.records.get(1).cloned() else {
            panic!("{:?}", refused.records)
        };

        // The cycle is free again; a charge within the maximum is scheduled.
        let within =
            create_cobr(&f.account(), rec.clone(), charge(start, "20"), &[20], now, &mut ids(&[21])).unwrap();
        assert_eq!(within.reply.status, CobrStatus::Ativa);
        let Some(Record::Recurrence(rec)) = within.records.get(1).cloned() else {
            panic!("{:?}", within.records)
        };

        // The payer raises its maximum: its charges not yet tried follow it.
        let raise = RecChange::Maximum(Some(m("40")));
        let raised =
            change_rec(rec.clone(), raise, None, vec![within.reply.clone()], now, &mut ids(&[])).unwrap();
        assert_eq!(raised.reply.payer.as_ref().and_then(|p| p.maximum), Some(m("40")));
        assert!(
            raised.records.iter().any(
                |r| matches!(r, Record::Cobr(c) if c.local_id == 21 && c.payer_maximum == Some(m("40")))
            ),
            "{:?}",
            raised.records
        );
        // The rules of an approval's maximum hold; only an authorised recurrence has one.
        let fixed = approved(&f, start, now);
        assert_eq!(
            change_rec(fixed, RecChange::Maximum(Some(m("40"))), None, vec![], now, &mut ids(&[]))
                .map(|p| p.reply.status),
            Err(Refusal::Rec(RecError::MaximumOnFixedValue))
        );
        let fresh = create_rec(
            &f.account(),
            RecRequest { amount: AmountRule::Variable { minimum: None }, ..request(start) },
            now,
            &mut ids(&[30]),
        )
        .unwrap()
        .reply;
        assert_eq!(
            change_rec(fresh, RecChange::Maximum(None), None, vec![], now, &mut ids(&[]))
                .map(|p| p.reply.status),
            Err(Refusal::Rec(RecError::NotAuthorised("CRIADA")))
        );
    }

    #[test]
    fn a_cycle_is_charged_once_inside_the_window_at_the_recurrences_value() {
        let f = Fixture::with_balance("0");
        let now: DateTime<Utc> = "2026-11-26T12:00:00Z".parse().unwrap();
        let start = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
        let rec = create_rec(&f.account(), request(start), now, &mut ids(&[9])).unwrap().reply;
        let refused = |r: Result<Plan<Cobr>, Refusal>| r.map(|p| p.reply).unwrap_err();
        assert_eq!(
            refused(create_cobr(&f.account(), rec, charge(start, "30"), &[], now, &mut ids(&[20]))),
            Refusal::Cobr(CobrError::RecurrenceNotApproved("CRIADA"))
        );
        let rec = approved(&f, start, now);
        assert_eq!(
            refused(create_cobr(&f.account(), rec.clone(), charge(start, "31"), &[], now, &mut ids(&[20]))),
            Refusal::Cobr(CobrError::Rule(crate::domain::recurrence::RecurrenceRejection::NotTheFixedValue(
                m("30")
            )))
        );
        let too_soon = NaiveDate::from_ymd_opt(2026, 11, 27).unwrap();
        assert!(matches!(
            refused(create_cobr(
                &f.account(),
                rec.clone(),
                charge(too_soon, "30"),
                &[],
                now,
                &mut ids(&[20])
            )),
            Refusal::Cobr(CobrError::Rule(_))
        ));
        let plan = create_cobr(&f.account(), rec, charge(start, "30"), &[], now, &mut ids(&[20])).unwrap();
        assert_eq!((plan.reply.status, plan.reply.cycle), (CobrStatus::Ativa, 0));
        assert_eq!(plan.events.len(), 1);
        let Some(Record::Recurrence(rec)) = plan.records.get(1).cloned() else {
            panic!("{:?}", plan.records)
        };
        assert_eq!(rec.charges, vec![(0, 20)]);
        let same_cycle = NaiveDate::from_ymd_opt(2026, 12, 5).unwrap();
        assert_eq!(
            refused(create_cobr(
                &f.account(),
                rec.clone(),
                charge(same_cycle, "30"),
                &[],
                now,
                &mut ids(&[21])
            )),
            Refusal::Cobr(CobrError::CycleCharged(0))
        );
        // Its charge cancelled or rejected, the cycle takes another.
        let again =
            create_cobr(&f.account(), rec, charge(same_cycle, "30"), &[20], now, &mut ids(&[21])).unwrap();
        let Some(Record::Recurrence(rec)) = again.records.get(1).cloned() else {
            panic!("{:?}", again.records)
        };
        assert_eq!(rec.charges, vec![(0, 20), (0, 21)]);
    }

    #[test]
    fn a_settled_charge_credits_a_received_pix_that_names_it_and_a_cancelled_recurrence_cancels_its_charges()
    {
        let mut f = Fixture::with_balance("0");
        let now: DateTime<Utc> = "2026-11-26T12:00:00Z".parse().unwrap();
        let start = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
        let rec = approved(&f, start, now);
        let cobr = create_cobr(&f.account(), rec.clone(), charge(start, "30"), &[], now, &mut ids(&[20]))
            .unwrap()
            .reply;
        let payer = CobrPayer { name: "Ana".into(), document: "11144477735".into(), bank: None };
        let early = crate::domain::cobv::start_of_day(start) - chrono::Duration::seconds(1);
        assert_eq!(attempt_cobr(&f.account(), cobr.clone(), payer.clone(), early, &mut ids(&[30])), Ok(None));
        let due = crate::domain::cobv::start_of_day(start);
        let plan = attempt_cobr(&f.account(), cobr.clone(), payer, due, &mut ids(&[30])).unwrap().unwrap();
        f.apply(&plan);
        assert_eq!(f.ledger.balance().available, m("30"));
        let Some(Record::NewTransaction(pix)) = plan.records.first() else { panic!("{:?}", plan.records) };
        assert_eq!(
            (pix.qr_txid.as_deref(), pix.counterpart.name.as_str()),
            (Some(cobr.txid.as_str()), "Ana")
        );
        assert_eq!(plan.reply.status, CobrStatus::Concluida);
        assert_eq!(plan.reply.to_json()["tentativas"][0]["endToEndId"], pix.end_to_end_id.as_str());
        let kinds: Vec<EventType> = plan.events.iter().map(|e| e.event_type).collect();
        assert_eq!(kinds, [EventType::CashIn, EventType::Cobr]);
        // The charge's notification carries the PIX that settled it (`CobRNotification`).
        let EventBody::Json(body) = &plan.events[1].body else { panic!("{:?}", plan.events[1]) };
        let paid = &body["cobsr"][0]["pix"][0];
        assert_eq!(
            (paid["endToEndId"].as_str(), paid["valor"].as_str(), paid["txid"].as_str()),
            (Some(pix.end_to_end_id.as_str()), Some("30.00"), Some(cobr.txid.as_str())),
            "{body}"
        );
        assert_eq!(
            (paid["chave"].as_str(), paid["pagador"]["cpf"].as_str()),
            (Some(f.account().receiving_key), Some("11144477735"))
        );

        let cancelled =
            change_rec(rec, RecChange::Cancel(Party::UsuarioPagador), None, vec![cobr], now, &mut ids(&[]))
                .unwrap();
        let Some(Record::Cobr(c)) = cancelled.records.get(1) else { panic!("{:?}", cancelled.records) };
        assert_eq!((c.status, c.deadline()), (CobrStatus::Cancelada, None));
        assert_eq!(cancelled.events.len(), 2, "the recurrence's event and its charge's");
    }

    /// On us: the payer's refusal fails the due attempt (and nothing else); the credit of the
    /// payer's debit settles the charge with the payer's end-to-end id and deletes the credit,
    /// in one plan, only while the attempt awaits it; an attempt under way outlives a
    /// cancelled recurrence, which then allows no retry.
    #[test]
    fn an_on_us_attempt_fails_on_the_payers_refusal_and_settles_on_its_credit() {
        let mut f = Fixture::with_balance("0");
        let now: DateTime<Utc> = "2026-11-26T12:00:00Z".parse().unwrap();
        let start = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
        let rec = approved(&f, start, now);
        let mut cobr = create_cobr(&f.account(), rec.clone(), charge(start, "30"), &[], now, &mut ids(&[20]))
            .unwrap()
            .reply;
        (cobr.on_us_payer, cobr.retry) = (Some(7), RetryPolicy::ThreeWithinSevenDays);
        let due = crate::domain::cobv::start_of_day(start);
        assert!(fail_on_us(cobr.clone(), Failure::NoFunds, due - chrono::Duration::seconds(1)).is_none());
        let failed = fail_on_us(cobr.clone(), Failure::NoFunds, due).unwrap();
        assert_eq!(failed.reply.to_json()["tentativas"][0]["status"], "EXPIRADA");
        assert_eq!(
            (failed.ledger.is_none(), failed.events.len()),
            (true, 2),
            "nothing moves; a webhook to each side"
        );
        assert_eq!(failed.events.iter().map(|e| e.account_id).collect::<Vec<_>>(), [f.account().id.get(), 7]);

        let credit = OnUsCredit {
            payee: f.account().id,
            end_to_end_id: "E99999999202612010300A0000000042".into(),
            value: m("30"),
            payer_name: "Bia".into(),
            payer_document: "52998224725".into(),
            reference: Some(cobr.reference()),
            paid_at: Some(due),
            returns: None,
        };
        let plan =
            settle_on_us(&f.account(), cobr.clone(), &credit, None, due, &mut ids(&[30])).unwrap().unwrap();
        assert_eq!(plan.reply.status, CobrStatus::Concluida);
        assert_eq!(plan.reply.to_json()["tentativas"][0]["endToEndId"], credit.end_to_end_id.as_str());
        assert!(plan.records.contains(&Record::OnUsCredited(credit.end_to_end_id.clone())));
        f.apply(&plan);
        assert_eq!(f.ledger.balance().available, m("30"));
        assert_eq!(settle_on_us(&f.account(), plan.reply, &credit, None, due, &mut ids(&[31])), Ok(None));

        // The recurrence is cancelled while the attempt is under way: the charge is left to
        // finish; failed, it may not be retried.
        let cancelled = change_rec(
            rec,
            RecChange::Cancel(Party::UsuarioPagador),
            None,
            vec![cobr.clone()],
            due,
            &mut ids(&[]),
        )
        .unwrap();
        assert_eq!(cancelled.records.len(), 1, "only the recurrence: {:?}", cancelled.records);
        let failed = fail_on_us(cobr, Failure::NoFunds, due).unwrap().reply;
        let retry = CobrChange::Retry(start + chrono::Duration::days(1));
        assert_eq!(
            change_cobr(failed, retry, RecStatus::Cancelada, due).map(|p| p.reply.status),
            Err(Refusal::Cobr(CobrError::RecurrenceNotApproved("CANCELADA")))
        );
    }
}
