//! Charges: create, pay, expire, cancel (family A cash-in and family B cob).
//!
//! A charge moves no money until it is paid: creating it only takes its externalId. Paid
//! while `now < expiresAt`, it credits value minus the cash-in fee and becomes CONFIRMED;
//! each of its splits then becomes a transfer out of the account, holding its amount (no fee,
//! no limit), or ERROR / INSUFFICIENT_BALANCE when the balance cannot cover it. At
//! `expiresAt` it becomes ERROR / EXPIRED and can no longer be paid; the receiver may cancel
//! it (ERROR / CANCELLED). Every change writes the `cash_in` event its state calls for.
//!
//! A charge with a due date (a `cobv`) is the same machine with a price that depends on the
//! day: its BR Code carries no amount, each payment is priced on the Sao Paulo day it is
//! made (`domain::cobv`) and moves the price of that day (the charge's value becomes the
//! amount paid), and it expires at the end of its last payable day. While open, the receiver
//! may revise it (a new revision of its terms, same code) or remove it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::domain::cobv::{payment_day, PriceError};

use super::{Account, Ids, Plan, Record, Refusal};
use crate::domain::brcode::{generate, BrCodeSpec};
use crate::domain::document::TaxId;
use crate::domain::ledger::{DebitDecision, DebitRequest, Limited, StoredKeys};
use crate::domain::money::Money;
use crate::domain::scenario::ChargeScenario;
use crate::domain::splits::{next_run, Split};
use crate::domain::transaction::{
    code_reference, end_to_end_id, BankInfo, ChargeDetails, CobDetails, Counterpart, ErrorCode, Transaction,
    TxKind, TxStatus, PAYER_ISPB, SANDBOX_PAYER_DOCUMENT, SANDBOX_PAYER_NAME,
};

/// The city a charge's BR Code names (the gateway's accounts carry no address).
pub const CHARGE_CITY: &str = "SAO PAULO";
/// Characters of the txid a family A charge's BR Code carries (the EMV field holds 25).
pub const CHARGE_TXID_LEN: usize = 25;

/// A charge to create (`POST /api/pix/cash-in`, `PUT /cob/{txid}`).
#[derive(Debug, Clone)]
pub struct ChargeRequest {
    /// Family A charges have one; a cob has its txid instead.
    pub external_id: Option<String>,
    /// A cob's txid, chosen by the client (unique per account).
    pub txid: Option<String>,
    pub cob: Option<CobDetails>,
    pub value: Money,
    pub description: String,
    pub payer_name: String,
    pub payer_document: Option<String>,
    pub expiration_seconds: u32,
    pub additional_info: BTreeMap<String, String>,
    pub scenario: Option<ChargeScenario>,
    pub splits: Vec<Split>,
}

/// Creates a charge. `txid_taken` says whether a charge of the account has the cob's txid;
/// `stored`, what storage holds for its externalId.
pub fn create_charge(
    account: &Account,
    req: ChargeRequest,
    txid_taken: bool,
    stored: StoredKeys,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Transaction>, Refusal> {
    let minimum = match req.scenario {
        Some(ChargeScenario::ProviderExpirationMin(s)) => s,
        _ => account.settings.provider_min_expiration_seconds,
    };
    // The provider minimum is a family A rule; a cob's expiracao is the client's.
    if req.cob.is_none() && req.expiration_seconds < minimum {
        return Err(Refusal::BelowProviderMinimum(minimum));
    }
    if req.txid.is_some() && txid_taken {
        return Err(Refusal::TxidTaken);
    }
    let fresh = ids.take()?;
    // Creating a charge takes its externalId and nothing else.
    let mut ledger = account.ledger.draft();
    let take_id = DebitRequest {
        local_id: fresh.local_id,
        external_id: req.external_id.clone(),
        idempotency: None,
        value: req.value,
        fee: Money::ZERO,
        hold: false,
        limited: Limited::No,
        now,
        stored,
    };
    if let DebitDecision::Replay { .. } =
        ledger.debit(&take_id, &account.settings.limits).map_err(Refusal::Ledger)?
    {
        return Err(Refusal::Bug("a charge replayed".into()));
    }
    let txid = req.txid.unwrap_or_else(|| fresh.hex(CHARGE_TXID_LEN));
    let cobv = req.cob.as_ref().and_then(|c| c.vencimento.as_ref());
    let expires_at = match cobv {
        Some(v) => v.terms.closes_at(),
        None => expiration(now, req.expiration_seconds),
    };
    let pix_code = generate(&BrCodeSpec {
        single_use: true,
        key: account.receiving_key.to_owned(),
        info: None,
        // A cobv's price depends on the day it is paid: its code names the charge, and
        // the payer is asked the day's amount.
        amount: if cobv.is_some() { None } else { Some(req.value) },
        merchant_name: account.name.to_owned(),
        merchant_city: CHARGE_CITY.into(),
        txid: Some(code_reference(&txid, fresh.local_id)),
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
            correlation_id: fresh.second_uuid(),
            txid,
            pix_code,
            expires_at,
            additional_info: req.additional_info,
            cob: req.cob,
            splits: req.splits,
            split_transactions: Vec::new(),
        }),
        ..Transaction::new(fresh.local_id, fresh.transaction_id(), account.id, TxKind::CashIn, req.value, now)
    };
    let mut plan = Plan::new(tx.clone());
    plan.ledger = Some(ledger.finish()?);
    plan.write(Record::NewTransaction(tx), now);
    Ok(plan)
}

/// When a charge made at `now` expires: at the millisecond precision clients see it with, so
/// that it has expired exactly at its `expirationDate` and not a fraction of a millisecond
/// later (the test clock can be set to that instant).
fn expiration(now: DateTime<Utc>, seconds: u32) -> DateTime<Utc> {
    let exact = now + chrono::Duration::seconds(i64::from(seconds));
    DateTime::from_timestamp_millis(exact.timestamp_millis()).unwrap_or(exact)
}

/// A charge as the actor knows it: open (its latest state), or not (its status, if any).
#[derive(Debug, Clone)]
pub enum ChargeState {
    Open(Box<Transaction>),
    Closed(Option<TxStatus>),
}

/// How a payment of a charge ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ChargeOutcome {
    Paid(Box<Transaction>),
    /// It was due at or before `now`: it expired instead.
    Expired,
}

/// What a charge asks of a payment made at `at`: its value, or a cobv's price on that day;
/// `None` when it cannot be paid then (paid, ended, expired, or a price out of range).
pub fn amount_due(charge: &Transaction, at: DateTime<Utc>) -> Option<Money> {
    let details = charge.charge.as_ref()?;
    if charge.is_final() || at >= details.expires_at {
        return None;
    }
    match charge.cobv() {
        Some(v) => v.terms.price(payment_day(at)).ok().map(|p| p.due),
        None => Some(charge.value),
    }
}

/// What a payment offers a charge: who pays (`None`: the charge's debtor, else the sandbox
/// payer), an amount (`None`: whatever is due) and the instant it is priced at (`None`:
/// now). An on-us payment is priced when the payer made it, which may be a moment before its
/// credit reaches the payee.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Offer {
    pub payer: Option<Payer>,
    pub amount: Option<Money>,
    pub at: Option<DateTime<Utc>>,
}

impl Offer {
    /// Whatever is due now, from the charge's debtor.
    pub const ANY: Offer = Offer { payer: None, amount: None, at: None };
}

/// Who pays a charge, when the request says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payer {
    pub name: String,
    pub document: TaxId,
    /// The payer's end-to-end id when its institution is known to have made one (an on-us
    /// payment); else the simulated payer's bank makes one.
    pub end_to_end_id: Option<String>,
}

/// A payer pays an open charge. The payer is the one given; else the debtor the charge names
/// (a family A charge's payer, a cob's `devedor`); else the simulated sandbox payer, so a
/// received payment always names a payer with a document. `payer_bank` is the payer's bank;
/// `split_banks`, the bank of each split's key (in the order of the charge's splits). Ids:
/// one for the payer's end-to-end id, one per split.
pub fn pay_charge(
    account: &Account,
    charge: ChargeState,
    offer: Offer,
    payer_bank: Option<BankInfo>,
    split_banks: &[Option<BankInfo>],
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<ChargeOutcome>, Refusal> {
    let mut tx = match charge {
        ChargeState::Open(tx) => *tx,
        ChargeState::Closed(status) => {
            return Err(Refusal::NotPayable(status.map_or("UNKNOWN", TxStatus::as_str)))
        }
    };
    let Some(details) = tx.charge.clone() else {
        return Err(Refusal::Bug("a charge without details".into()));
    };
    let Offer { payer, amount, at } = offer;
    let priced_at = at.unwrap_or(now);
    if priced_at >= details.expires_at {
        return Ok(close(tx, ErrorCode::Expired, now).with_reply(ChargeOutcome::Expired));
    }
    if let Some(v) = tx.cobv() {
        tx.value = match v.terms.price(payment_day(priced_at)) {
            Ok(price) => price.due,
            Err(PriceError::Expired) => {
                return Ok(close(tx, ErrorCode::Expired, now).with_reply(ChargeOutcome::Expired))
            }
            Err(PriceError::OutOfRange) => return Err(Refusal::Unpriceable),
        };
    }
    if amount.is_some_and(|a| a != tx.value) {
        return Err(Refusal::AmountNotDue(tx.value));
    }
    let fee = account.fee_rule(TxKind::CashIn).fee_for(tx.value);
    let mut ledger = account.ledger.draft();
    ledger.credit(tx.value, fee).map_err(Refusal::Ledger)?;
    tx.status = TxStatus::Confirmed;
    tx.fee = fee;
    tx.processed_at = Some(now);
    let drawn = ids.take()?;
    // The payer's institution made this id.
    tx.end_to_end_id = match payer.as_ref().and_then(|p| p.end_to_end_id.clone()) {
        Some(e2e) => e2e,
        None => end_to_end_id('E', PAYER_ISPB, now, &drawn.entropy()),
    };
    tx.counterpart.bank = payer_bank;
    match payer {
        Some(p) => {
            tx.counterpart.name = p.name;
            tx.counterpart.document = Some(p.document.to_string());
        }
        None if tx.counterpart.document.is_some() => {}
        None => {
            tx.counterpart.name = SANDBOX_PAYER_NAME.into();
            tx.counterpart.document = Some(SANDBOX_PAYER_DOCUMENT.into());
        }
    }
    // The credit and every split's hold are one change: each split is decided on the
    // balance the credit and the splits before it leave.
    let mut splits = Vec::with_capacity(details.splits.len());
    for (i, split) in details.splits.iter().enumerate() {
        let fresh = ids.take()?;
        let mut t = Transaction {
            end_to_end_id: fresh.end_to_end_id('E', now),
            description: Some(format!("split of charge {}", tx.local_id)),
            counterpart: Counterpart {
                name: split.name.clone(),
                document: Some(split.document.clone()),
                key: Some(split.key.key.clone()),
                key_type: Some(split.key.key_type),
                bank: split_banks.get(i).cloned().flatten(),
            },
            split_of: Some(tx.local_id),
            scheduled_for: (!split.immediate).then(|| next_run(account.settings.split_frequency, now)),
            ..Transaction::new(
                fresh.local_id,
                fresh.transaction_id(),
                account.id,
                TxKind::CashOut,
                split.amount,
                now,
            )
        };
        let hold = DebitRequest {
            local_id: fresh.local_id,
            external_id: None,
            idempotency: None,
            value: split.amount,
            fee: Money::ZERO,
            hold: true,
            limited: Limited::No,
            now,
            stored: StoredKeys::default(),
        };
        if ledger.debit(&hold, &account.settings.limits).is_err() {
            t.settle(Err(ErrorCode::InsufficientBalance), now).map_err(|e| Refusal::Bug(e.to_string()))?;
        }
        splits.push(t);
    }
    if let Some(c) = tx.charge.as_mut() {
        c.split_transactions = splits.iter().map(|s| s.local_id).collect();
    }
    let mut plan = Plan::new(ChargeOutcome::Paid(Box::new(tx.clone())));
    plan.ledger = Some(ledger.finish()?);
    plan.write(Record::Transaction(tx), now);
    for s in splits {
        plan.write(Record::NewTransaction(s), now);
    }
    Ok(plan)
}

/// Closes an open charge as ERROR with `why`.
fn close(mut tx: Transaction, why: ErrorCode, now: DateTime<Utc>) -> Plan<Transaction> {
    tx.status = TxStatus::Error;
    tx.error_code = Some(why);
    tx.processed_at = Some(now);
    let mut plan = Plan::new(tx.clone());
    plan.write(Record::Transaction(tx), now);
    plan
}

/// An open charge reaches its expiration: ERROR / EXPIRED.
pub fn expire_charge(charge: Transaction, now: DateTime<Utc>) -> Plan<Transaction> {
    close(charge, ErrorCode::Expired, now)
}

/// The receiver revises an open cobv (`PATCH /cobv/{txid}`) into `revised`, the whole
/// request its changes make, read from the revision `based_on`: its terms, debtor and texts
/// are replaced, its revision counts one more, its code stays. A revision made meanwhile
/// (another `based_on`) refuses it, so that two revisions never silently undo each other.
pub fn revise_charge(
    charge: ChargeState,
    revised: ChargeRequest,
    based_on: u32,
    now: DateTime<Utc>,
) -> Result<Plan<Transaction>, Refusal> {
    let mut tx = match charge {
        ChargeState::Open(tx) => *tx,
        ChargeState::Closed(status) => {
            return Err(Refusal::NotPayable(status.map_or("UNKNOWN", TxStatus::as_str)))
        }
    };
    let (Some(current), Some(mut cob)) = (tx.cobv().map(|v| v.revisao), revised.cob) else {
        return Err(Refusal::Bug("a revision of a charge without a due date".into()));
    };
    if current != based_on {
        return Err(Refusal::RevisedMeanwhile);
    }
    let Some(details) = tx.charge.as_mut() else {
        return Err(Refusal::Bug("a charge without details".into()));
    };
    let Some(v) = cob.vencimento.as_mut() else {
        return Err(Refusal::Bug("a revision without terms".into()));
    };
    v.revisao = current.saturating_add(1);
    details.expires_at = v.terms.closes_at();
    details.cob = Some(cob);
    tx.value = revised.value;
    tx.description = Some(revised.description);
    tx.counterpart.name = revised.payer_name;
    tx.counterpart.document = revised.payer_document;
    // The route checked the terms against its own clock reading; midnight may have passed
    // since. A client's answer, never a bug (a bug stops the actor).
    if now >= details.expires_at {
        return Err(Refusal::PastValidity);
    }
    let mut plan = Plan::new(tx.clone());
    // Still ATIVA: a revision changes no status, so it calls for no event.
    plan.update(Record::Transaction(tx));
    Ok(plan)
}

/// The receiver cancels a charge (`PATCH /cob/{txid}`): ERROR / CANCELLED if it is open.
pub fn cancel_charge(charge: ChargeState, now: DateTime<Utc>) -> Result<Plan<Transaction>, Refusal> {
    match charge {
        ChargeState::Open(tx) => Ok(close(*tx, ErrorCode::Cancelled, now)),
        ChargeState::Closed(status) => Err(Refusal::NotPayable(status.map_or("UNKNOWN", TxStatus::as_str))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::domain::account::FeeRule;
    use crate::domain::ledger::{Balance, Rejection};
    use crate::domain::money::Percent;
    use crate::domain::pix_key::{parse_directory_key, DirectoryKeyType};

    fn request(value: &str) -> ChargeRequest {
        charge_request(value)
    }

    fn split(amount: &str, immediate: bool) -> Split {
        Split {
            key: parse_directory_key("ana@example.com").unwrap(),
            name: "Ana".into(),
            document: "52998224725".into(),
            amount: m(amount),
            immediate,
        }
    }

    fn open(f: &mut Fixture, req: ChargeRequest, local: u64) -> Transaction {
        let plan = create_charge(&f.account(), req, false, StoredKeys::default(), noon(), &mut ids(&[local]))
            .unwrap();
        f.apply(&plan);
        plan.reply
    }

    #[test]
    fn creating_a_charge_takes_its_external_id_and_moves_no_money() {
        let mut f = Fixture::with_balance("0");
        let plan =
            create_charge(&f.account(), request("25"), false, StoredKeys::default(), noon(), &mut ids(&[5]))
                .unwrap();
        let tx = &plan.reply;
        assert_eq!((tx.kind, tx.status), (TxKind::CashIn, TxStatus::Pending));
        let c = tx.charge.as_ref().unwrap();
        assert_eq!(c.txid.len(), CHARGE_TXID_LEN);
        assert!(c.pix_code.starts_with("000201"));
        assert_eq!(c.expires_at, noon() + chrono::Duration::seconds(600));
        assert!(plan.events.is_empty());
        assert_eq!(plan.ledger.as_ref().unwrap().state(), None);
        f.apply(&plan);
        let again =
            create_charge(&f.account(), request("1"), false, StoredKeys::default(), noon(), &mut ids(&[6]));
        assert_eq!(again.unwrap_err(), Refusal::Ledger(Rejection::DuplicateExternalId { existing: 5 }));
    }

    #[test]
    fn the_provider_minimum_and_a_taken_txid_refuse_a_charge() {
        let f = Fixture::with_balance("0");
        let mut short = request("1");
        short.expiration_seconds = 10;
        short.scenario = Some(ChargeScenario::ProviderExpirationMin(60));
        let got = create_charge(&f.account(), short, false, StoredKeys::default(), noon(), &mut ids(&[1]));
        assert_eq!(got.unwrap_err(), Refusal::BelowProviderMinimum(60));
        let mut cob = request("1");
        cob.txid = Some("a".repeat(26));
        let got = create_charge(&f.account(), cob, true, StoredKeys::default(), noon(), &mut ids(&[1]));
        assert_eq!(got.unwrap_err(), Refusal::TxidTaken);
    }

    #[test]
    fn paying_credits_net_of_fee_and_each_split_holds_what_the_balance_allows() {
        let mut f = Fixture::with_balance("0");
        f.settings.fees.cash_in = FeeRule { fixed: m("1"), percent: Percent::parse("0").unwrap() };
        let mut req = request("10");
        // 9 net: 5 is held, then 3, then 2 cannot be covered.
        req.splits = vec![split("5", true), split("3", false), split("2", true)];
        let charge = open(&mut f, req, 1);
        let plan = pay_charge(
            &f.account(),
            ChargeState::Open(Box::new(charge)),
            Offer::ANY,
            None,
            &[],
            noon(),
            &mut ids(&[2, 3, 4, 5]),
        )
        .unwrap();
        let ChargeOutcome::Paid(paid) = &plan.reply else { panic!("not paid") };
        assert_eq!((paid.status, paid.fee), (TxStatus::Confirmed, m("1")));
        assert_eq!(paid.charge.as_ref().unwrap().split_transactions, vec![3, 4, 5]);
        let written = transactions(&plan);
        assert_eq!(written.len(), 4);
        assert_eq!(written[1].status, TxStatus::Pending);
        assert_eq!(written[1].scheduled_for, None, "immediate");
        assert!(written[2].scheduled_for.is_some(), "at the split frequency");
        assert_eq!(written[3].error_code, Some(ErrorCode::InsufficientBalance));
        // The charge's event and the failed split's.
        assert_eq!(plan.events.len(), 2);
        f.apply(&plan);
        assert_eq!(f.ledger.balance(), Balance { available: m("1"), blocked: m("8") });
    }

    #[test]
    fn a_charge_paid_at_its_expiration_expires_instead_and_a_closed_one_is_not_payable() {
        let mut f = Fixture::with_balance("0");
        let charge = open(&mut f, request("10"), 1);
        let due = charge.charge.as_ref().unwrap().expires_at;
        let plan = pay_charge(
            &f.account(),
            ChargeState::Open(Box::new(charge.clone())),
            Offer::ANY,
            None,
            &[],
            due,
            &mut ids(&[2]),
        )
        .unwrap();
        assert_eq!(plan.reply, ChargeOutcome::Expired);
        assert_eq!(transactions(&plan)[0].error_code, Some(ErrorCode::Expired));
        assert_eq!(plan.events.len(), 1, "the cash_in event of the expiry");
        let got = pay_charge(
            &f.account(),
            ChargeState::Closed(Some(TxStatus::Error)),
            Offer::ANY,
            None,
            &[],
            due,
            &mut ids(&[2]),
        );
        assert_eq!(got.unwrap_err(), Refusal::NotPayable("ERROR"));
        assert_eq!(
            cancel_charge(ChargeState::Closed(None), due).unwrap_err(),
            Refusal::NotPayable("UNKNOWN")
        );
        let cancelled = cancel_charge(ChargeState::Open(Box::new(charge)), due).unwrap();
        assert_eq!(cancelled.reply.error_code, Some(ErrorCode::Cancelled));
    }

    #[test]
    fn a_paid_charge_names_the_payer_given_else_its_debtor_else_the_sandbox_payer() {
        let paid_by = |req: ChargeRequest, payer: Option<Payer>| {
            let mut f = Fixture::with_balance("0");
            let charge = open(&mut f, req, 1);
            let plan = pay_charge(
                &f.account(),
                ChargeState::Open(Box::new(charge)),
                Offer { payer, ..Offer::ANY },
                None,
                &[],
                noon(),
                &mut ids(&[2]),
            )
            .unwrap();
            let ChargeOutcome::Paid(tx) = plan.reply else { panic!("not paid") };
            (tx.counterpart.name, tx.counterpart.document)
        };
        let bia = Payer {
            name: "Bia".into(),
            document: TaxId::parse("12ABC34501DE35").unwrap(),
            end_to_end_id: None,
        };
        assert_eq!(paid_by(request("1"), Some(bia)), ("Bia".into(), Some("12ABC34501DE35".into())));
        assert_eq!(paid_by(request("1"), None), ("Ana".into(), Some("52998224725".into())), "the debtor");
        let mut nobody = request("1");
        nobody.payer_name = String::new();
        nobody.payer_document = None;
        assert_eq!(
            paid_by(nobody, None),
            (SANDBOX_PAYER_NAME.into(), Some(SANDBOX_PAYER_DOCUMENT.into())),
            "a cob without devedor"
        );
        assert!(TaxId::parse(SANDBOX_PAYER_DOCUMENT).is_ok());
    }

    #[test]
    fn a_charge_expires_at_the_millisecond_its_expiration_date_shows() {
        let now = at("2026-11-23T02:40:04.418765432Z");
        let due = expiration(now, 600);
        assert_eq!(due.to_rfc3339(), "2026-11-23T02:50:04.418+00:00");
        assert_eq!(due.timestamp_subsec_nanos() % 1_000_000, 0);
    }

    #[test]
    fn split_keys_of_every_type_are_kept_on_their_transfer() {
        let mut f = Fixture::with_balance("0");
        let mut req = request("10");
        let mut s = split("1", true);
        s.key = parse_directory_key("+5511987654321").unwrap();
        req.splits = vec![s];
        let charge = open(&mut f, req, 1);
        let plan = pay_charge(
            &f.account(),
            ChargeState::Open(Box::new(charge)),
            Offer::ANY,
            None,
            &[None],
            noon(),
            &mut ids(&[2, 3]),
        )
        .unwrap();
        let t = transactions(&plan)[1];
        assert_eq!(t.counterpart.key_type, Some(DirectoryKeyType::Phone));
        assert_eq!(t.split_of, Some(1));
    }

    // ---- charges with a due date -----------------------------------------------------------

    fn pay_at(
        f: &Fixture,
        charge: &Transaction,
        offer: Offer,
        now: DateTime<Utc>,
    ) -> Result<Plan<ChargeOutcome>, Refusal> {
        pay_charge(
            &f.account(),
            ChargeState::Open(Box::new(charge.clone())),
            offer,
            None,
            &[],
            now,
            &mut ids(&[2]),
        )
    }

    fn paid(plan: Plan<ChargeOutcome>) -> Transaction {
        match plan.reply {
            ChargeOutcome::Paid(tx) => *tx,
            ChargeOutcome::Expired => panic!("expired"),
        }
    }

    #[test]
    fn a_cobv_has_a_code_without_amount_and_closes_at_the_end_of_its_last_day() {
        let mut f = Fixture::with_balance("0");
        let c = open(&mut f, cobv_request(0), 1);
        let code = crate::domain::brcode::parse(&c.charge.as_ref().unwrap().pix_code).unwrap();
        assert_eq!(code.amount, None, "priced on the day it is paid");
        assert_eq!(code.txid.as_deref(), Some("COB00000000000000000001"));
        // Last day 4 December; closed from 00:00 of the 5th in Sao Paulo (03:00 UTC).
        assert_eq!(c.charge.unwrap().expires_at, at("2026-12-05T03:00:00Z"));
    }

    #[test]
    fn a_cobv_is_paid_at_the_price_of_its_day_and_its_value_becomes_what_was_paid() {
        let mut f = Fixture::with_balance("0");
        let c = open(&mut f, cobv_request(0), 1);
        // Sao Paulo days: the 20th (discount), the 24th (the original), the 25th (the fine).
        for (now, due) in [
            ("2026-11-20T15:00:00Z", "95.00"),
            ("2026-11-25T02:59:59Z", "100.00"),
            ("2026-11-25T03:00:00Z", "102.00"),
        ] {
            let tx = paid(pay_at(&f, &c, Offer::ANY, at(now)).unwrap());
            assert_eq!((tx.status, tx.value), (TxStatus::Confirmed, m(due)), "{now}");
            assert_eq!(tx.cobv().unwrap().terms.original, m("100"), "the terms keep the original");
        }
        let plan =
            pay_at(&f, &c, Offer { amount: Some(m("102.00")), ..Offer::ANY }, at("2026-12-01T12:00:00Z"))
                .unwrap();
        f.apply(&plan);
        assert_eq!(f.ledger.balance().available, m("102.00"), "the amount paid is credited");
    }

    #[test]
    fn another_amount_than_the_days_is_refused_and_after_the_validity_the_cobv_expires() {
        let mut f = Fixture::with_balance("0");
        let c = open(&mut f, cobv_request(0), 1);
        let wrong = Offer { amount: Some(m("100.00")), ..Offer::ANY };
        assert_eq!(
            pay_at(&f, &c, wrong, at("2026-11-26T12:00:00Z")).unwrap_err(),
            Refusal::AmountNotDue(m("102.00"))
        );
        let plan = pay_at(&f, &c, Offer::ANY, at("2026-12-05T03:00:00Z")).unwrap();
        assert_eq!(plan.reply, ChargeOutcome::Expired);
        assert_eq!(transactions(&plan)[0].error_code, Some(ErrorCode::Expired), "REMOVIDA_PELO_PSP");
        // Priced when the payer paid: a moment before the end is still payable after it.
        let before = Offer { amount: Some(m("102.00")), at: Some(at("2026-12-05T02:59:59Z")), payer: None };
        assert_eq!(paid(pay_at(&f, &c, before, at("2026-12-05T03:00:01Z")).unwrap()).value, m("102.00"));
        assert_eq!(amount_due(&c, at("2026-12-05T02:59:59Z")), Some(m("102.00")));
        assert_eq!(amount_due(&c, at("2026-12-05T03:00:00Z")), None);
    }

    #[test]
    fn a_revision_replaces_the_terms_counts_one_more_and_refuses_a_stale_or_closed_cobv() {
        let mut f = Fixture::with_balance("0");
        let c = open(&mut f, cobv_request(0), 1);
        let mut revised = cobv_request(0);
        if let Some(v) = revised.cob.as_mut().and_then(|c| c.vencimento.as_mut()) {
            v.terms.original = m("80");
            v.terms.due = chrono::NaiveDate::from_ymd_opt(2026, 12, 10).unwrap();
        }
        revised.value = m("80");
        let plan = revise_charge(ChargeState::Open(Box::new(c.clone())), revised.clone(), 0, noon()).unwrap();
        let r = plan.reply.clone();
        assert_eq!((r.value, r.cobv().unwrap().revisao, r.status), (m("80"), 1, TxStatus::Pending));
        assert_eq!(r.charge.as_ref().unwrap().expires_at, at("2026-12-21T03:00:00Z"), "the new last day");
        assert_eq!(r.charge.as_ref().unwrap().pix_code, c.charge.as_ref().unwrap().pix_code, "same code");
        assert!(plan.events.is_empty(), "still ATIVA: no webhook");
        assert_eq!(
            revise_charge(ChargeState::Open(Box::new(r)), revised.clone(), 0, noon()).unwrap_err(),
            Refusal::RevisedMeanwhile
        );
        // Terms already past their validity when the actor decides: the client's answer.
        let after = at("2026-12-21T03:00:00Z");
        let c2 = ChargeState::Open(Box::new(c.clone()));
        assert_eq!(revise_charge(c2, revised.clone(), 0, after).unwrap_err(), Refusal::PastValidity);
        assert_eq!(
            revise_charge(ChargeState::Closed(Some(TxStatus::Confirmed)), revised, 0, noon()).unwrap_err(),
            Refusal::NotPayable("CONFIRMED")
        );
        assert_eq!(amount_due(&c, noon()), Some(m("95.00")), "before the revision");
    }
}
