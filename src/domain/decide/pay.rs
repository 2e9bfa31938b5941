//! Money out and its settlement, and the received PIX that funds an account.
//!
//! A payment (cash-out, QR cash-out, `/dict/pix`) holds its value and fee in `blocked` from
//! acceptance until the bank settles it: success debits the hold, failure returns it. A
//! `checkPixKeyWithDocument` mismatch is recorded ERROR / TAX_ID_MISMATCH at once and moves
//! no money, but takes the externalId. A `/dict/pix` request seen before answers the first
//! transfer (same key and request) or is refused (same key, another request).

use chrono::{DateTime, Utc};

use super::{Account, Ids, Plan, Record, Refusal};
use crate::domain::ledger::{DebitDecision, DebitRequest, Limited, StoredKeys};
use crate::domain::money::Money;
use crate::domain::scenario::PayoutScenario;
use crate::domain::transaction::{
    end_to_end_id, own_or_random_end_to_end_id, BankInfo, Counterpart, DictDetails, E2eVariant, ErrorCode,
    Priority, RailOutcome, Transaction, TxKind, TxStatus, PAYER_ISPB, SANDBOX_PAYER_DOCUMENT,
};

/// The `/dict/pix` parts of a payment.
#[derive(Debug, Clone)]
pub struct DictRequest {
    pub idempotency_key: String,
    pub request_hash: String,
    pub priority: Priority,
    pub expiration_seconds: u32,
    pub currency: String,
}

/// A payment out of the account (cash-out, QR cash-out, `/dict/pix`).
#[derive(Debug, Clone)]
pub struct PayRequest {
    pub kind: TxKind,
    pub external_id: Option<String>,
    pub value: Money,
    pub description: Option<String>,
    /// The payee; its key is what the bank settles to.
    pub counterpart: Counterpart,
    pub scenario: Option<PayoutScenario>,
    /// checkPixKeyWithDocument found another holder: record ERROR / TAX_ID_MISMATCH at
    /// once and move no money.
    pub document_mismatch: bool,
    pub dict: Option<DictRequest>,
    pub qr_txid: Option<String>,
    /// A Pix Automático debit the payer authorised beforehand, made at the arrangement's
    /// hour: the night's limit does not apply (`ledger::Limited::NotNightly`).
    pub automatic: bool,
    /// The end-to-end id the payment must carry, when one was made before it was decided
    /// (the SPI rail's: the DICT lookup that precedes the debit names it).
    pub end_to_end_id: Option<String>,
    /// What the SPI rail learnt of the payee before the debit (the DICT's answer).
    pub rail: Option<crate::domain::transaction::RailDetails>,
}

/// A payment decided: a new transfer, or the answer of one made before.
#[derive(Debug, Clone, PartialEq)]
pub enum PayDecision {
    /// The same `/dict/pix` request again: answer transaction `0`, move nothing.
    Replay(u64),
    Plan(Box<Plan<Transaction>>),
}

/// Decides a payment; `stored` is what storage holds for its externalId and idempotency key.
pub fn pay(
    account: &Account,
    req: PayRequest,
    stored: StoredKeys,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<PayDecision, Refusal> {
    let fresh = ids.take()?;
    let fee = if req.document_mismatch { Money::ZERO } else { account.fee_rule(req.kind).fee_for(req.value) };
    let mut ledger = account.ledger.draft();
    let debit = DebitRequest {
        local_id: fresh.local_id,
        external_id: req.external_id.clone(),
        idempotency: req.dict.as_ref().map(|d| (d.idempotency_key.clone(), d.request_hash.clone())),
        value: req.value,
        fee,
        hold: !req.document_mismatch,
        limited: if req.automatic { Limited::NotNightly } else { Limited::All },
        now,
        stored,
    };
    if let DebitDecision::Replay { existing } =
        ledger.debit(&debit, &account.settings.limits).map_err(Refusal::Ledger)?
    {
        return Ok(PayDecision::Replay(existing));
    }
    let e2e = req.end_to_end_id.unwrap_or_else(|| fresh.end_to_end_id('E', now));
    let mut tx = Transaction {
        rail: req.rail,
        fee,
        external_id: req.external_id,
        end_to_end_id: e2e.clone(),
        description: req.description,
        counterpart: req.counterpart,
        scenario: req.scenario,
        dict: req.dict.map(|d| DictDetails {
            idempotency_key: d.idempotency_key,
            request_hash: d.request_hash,
            priority: d.priority,
            expiration_seconds: d.expiration_seconds,
            currency: d.currency,
            provisional_end_to_end_id: e2e,
        }),
        qr_txid: req.qr_txid,
        ..Transaction::new(fresh.local_id, fresh.transaction_id(), account.id, req.kind, req.value, now)
    };
    if req.document_mismatch {
        tx.settle(Err(ErrorCode::TaxIdMismatch), now).map_err(|e| Refusal::Bug(e.to_string()))?;
    }
    let mut plan = Plan::new(tx.clone());
    plan.ledger = Some(ledger.finish()?);
    plan.write(Record::NewTransaction(tx), now);
    Ok(PayDecision::Plan(Box::new(plan)))
}

/// Ends a pending debit with the bank's answer (or a `/dict/pix` transfer's expiry).
/// `original` is the received PIX a refund refunds, as it is now. `None` when there is
/// nothing to do: the debit is no longer pending (a repeated answer).
/// `on_us` names the payee when the transfer went to a key of an account of this gateway:
/// a confirmed transfer then writes the credit it owes ([`super::OnUsCredit`]) in the same
/// batch as its settlement. For a refund it names the account that made the refunded
/// payment, which the confirmed refund owes its money back.
pub fn settle(
    account: &Account,
    mut tx: Transaction,
    outcome: RailOutcome,
    original: Option<Transaction>,
    on_us: Option<&super::OnUsPayer>,
    now: DateTime<Utc>,
) -> Result<Option<Plan<()>>, Refusal> {
    let RailOutcome { result, reason } = outcome;
    let mut ledger = account.ledger.draft();
    if ledger.settle(tx.local_id, result.is_ok()).is_none() {
        return Ok(None);
    }
    if let Ok(Some(bank)) = &result {
        tx.counterpart.bank = Some(bank.clone());
    }
    if let Some(code) = reason {
        tx.rail.get_or_insert_with(Default::default).reason = Some(code);
    }
    // A transfer on the SPI carries its real end-to-end id from the start; on the
    // simulator the provisional id answered at creation gives way to the settled one.
    if tx.kind == TxKind::DictPix && result.is_ok() && tx.rail.as_ref().is_none_or(|r| r.instrument.is_none())
    {
        let entropy = *tx.transaction_id.as_bytes();
        tx.end_to_end_id = own_or_random_end_to_end_id('E', now, tx.local_id, E2eVariant::Settled, &entropy);
    }
    if tx.settle(result.map(|_| ()), now).is_err() {
        return Ok(None);
    }
    let mut plan = Plan::new(());
    plan.ledger = Some(ledger.finish()?);
    // A refund that did not happen no longer counts against the original.
    if let (TxKind::RefundIn, TxStatus::Error, Some(mut o)) = (tx.kind, tx.status, original) {
        o.refunded = o.refunded.checked_sub(tx.value).unwrap_or(Money::ZERO);
        plan.update(Record::Transaction(o));
    }
    if let (Some(payer), TxStatus::Confirmed, TxKind::CashOut | TxKind::QrCashOut | TxKind::DictPix) =
        (on_us, tx.status, tx.kind)
    {
        plan.update(Record::OnUsCredit(super::credit_of(&tx, payer)));
    }
    // A refund of a payment an account of this gateway made gives that account its money back.
    if let (Some(payer), TxStatus::Confirmed, TxKind::RefundIn) = (on_us, tx.status, tx.kind) {
        if let Some(back) = super::return_of(&tx, payer) {
            plan.update(Record::OnUsCredit(back));
        }
    }
    plan.write(Record::Transaction(tx), now);
    Ok(Some(plan))
}

/// A received PIX (sandbox): the payer, and the bank it pays from.
#[derive(Debug, Clone)]
pub struct PixInRequest {
    pub value: Money,
    pub payer_name: String,
    pub payer_document: Option<String>,
    pub payer_bank: Option<BankInfo>,
    /// The payer's end-to-end id when known (an on-us payment); else the simulated payer's
    /// bank makes one.
    pub end_to_end_id: Option<String>,
    /// The txid of the recurring charge (`cobr`) this PIX settles, if it settles one.
    pub paid_txid: Option<String>,
}

/// A received PIX: credits value minus the cash-in fee, recorded CONFIRMED. A payer sent
/// without a document is given the sandbox payer's, so every received payment names one.
pub fn pix_in(
    account: &Account,
    req: PixInRequest,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Transaction>, Refusal> {
    let fresh = ids.take()?;
    let fee = account.fee_rule(TxKind::PixIn).fee_for(req.value);
    let mut ledger = account.ledger.draft();
    ledger.credit(req.value, fee).map_err(Refusal::Ledger)?;
    let tx = Transaction {
        status: TxStatus::Confirmed,
        fee,
        // The payer's institution made this id.
        end_to_end_id: req
            .end_to_end_id
            .unwrap_or_else(|| end_to_end_id('E', PAYER_ISPB, now, &fresh.entropy())),
        counterpart: Counterpart {
            name: req.payer_name,
            document: Some(req.payer_document.unwrap_or_else(|| SANDBOX_PAYER_DOCUMENT.into())),
            key: None,
            key_type: None,
            bank: req.payer_bank,
        },
        processed_at: Some(now),
        qr_txid: req.paid_txid,
        ..Transaction::new(fresh.local_id, fresh.transaction_id(), account.id, TxKind::PixIn, req.value, now)
    };
    let mut plan = Plan::new(tx.clone());
    plan.ledger = Some(ledger.finish()?);
    plan.write(Record::NewTransaction(tx), now);
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::domain::account::FeeRule;
    use crate::domain::events::EventType;
    use crate::domain::ledger::{Balance, Rejection};
    use crate::domain::money::Percent;

    fn cash_out(ext: &str, value: &str) -> PayRequest {
        PayRequest {
            kind: TxKind::CashOut,
            external_id: Some(ext.into()),
            value: m(value),
            description: None,
            counterpart: Counterpart { name: "Ana".into(), ..Counterpart::default() },
            scenario: None,
            document_mismatch: false,
            dict: None,
            qr_txid: None,
            automatic: false,
            end_to_end_id: None,
            rail: None,
        }
    }

    fn planned(d: PayDecision) -> Plan<Transaction> {
        match d {
            PayDecision::Plan(p) => *p,
            PayDecision::Replay(id) => panic!("replay of {id}"),
        }
    }

    #[test]
    fn a_cash_out_holds_value_and_fee_and_writes_one_pending_transaction() {
        let mut f = Fixture::with_balance("100");
        f.settings.fees.cash_out = FeeRule { fixed: m("0.50"), percent: Percent::parse("1").unwrap() };
        let plan = planned(
            pay(&f.account(), cash_out("a", "10"), StoredKeys::default(), noon(), &mut ids(&[7])).unwrap(),
        );
        let tx = &plan.reply;
        assert_eq!((tx.local_id, tx.status, tx.fee), (7, TxStatus::Pending, m("0.60")));
        assert_eq!(tx.end_to_end_id.len(), 32);
        assert_eq!(plan.records, vec![Record::NewTransaction(tx.clone())]);
        assert!(plan.events.is_empty(), "no event until it settles");
        let change = plan.ledger.as_ref().unwrap();
        assert_eq!(change.holds_taken(), &[(7, m("10.60"))]);
        f.apply(&plan);
        assert_eq!(f.ledger.balance(), Balance { available: m("89.40"), blocked: m("10.60") });
    }

    #[test]
    fn a_refused_payment_plans_nothing() {
        let f = Fixture::with_balance("5");
        let got = pay(&f.account(), cash_out("a", "10"), StoredKeys::default(), noon(), &mut ids(&[1]));
        assert_eq!(got, Err(Refusal::Ledger(Rejection::InsufficientBalance)));
        let stored = StoredKeys { external: Some(3), idempotency: None };
        let got = pay(&f.account(), cash_out("a", "1"), stored, noon(), &mut ids(&[1]));
        assert_eq!(got, Err(Refusal::Ledger(Rejection::DuplicateExternalId { existing: 3 })));
    }

    #[test]
    fn a_document_mismatch_is_recorded_as_an_error_with_its_event_and_moves_no_money() {
        let f = Fixture::with_balance("1");
        let mut req = cash_out("a", "10");
        req.document_mismatch = true;
        let plan = planned(pay(&f.account(), req, StoredKeys::default(), noon(), &mut ids(&[2])).unwrap());
        assert_eq!(plan.reply.status, TxStatus::Error);
        assert_eq!(plan.reply.error_code, Some(ErrorCode::TaxIdMismatch));
        assert_eq!(plan.events.len(), 1);
        assert_eq!(plan.events[0].event_type, EventType::CashOut);
        let change = plan.ledger.as_ref().unwrap();
        assert_eq!(change.state(), None, "no money moved");
        assert!(change.holds_taken().is_empty());
    }

    #[test]
    fn a_dict_request_seen_before_replays_or_conflicts_by_its_hash() {
        let f = Fixture::with_balance("100");
        let dict = |hash: &str| DictRequest {
            idempotency_key: "k".into(),
            request_hash: hash.into(),
            priority: Priority::Norm,
            expiration_seconds: 600,
            currency: "BRL".into(),
        };
        let req = |hash: &str| PayRequest {
            kind: TxKind::DictPix,
            external_id: None,
            dict: Some(dict(hash)),
            ..cash_out("", "1")
        };
        let stored = StoredKeys { external: None, idempotency: Some((4, "h1".into())) };
        assert_eq!(
            pay(&f.account(), req("h1"), stored.clone(), noon(), &mut ids(&[9])),
            Ok(PayDecision::Replay(4))
        );
        assert_eq!(
            pay(&f.account(), req("h2"), stored, noon(), &mut ids(&[9])),
            Err(Refusal::Ledger(Rejection::IdempotencyKeyReused { existing: 4 }))
        );
        let plan =
            planned(pay(&f.account(), req("h1"), StoredKeys::default(), noon(), &mut ids(&[9])).unwrap());
        let d = plan.reply.dict.as_ref().unwrap();
        assert_eq!(d.provisional_end_to_end_id, plan.reply.end_to_end_id);
    }

    #[test]
    fn settling_debits_or_returns_the_hold_once_with_the_event() {
        let mut f = Fixture::with_balance("100");
        let plan = planned(
            pay(&f.account(), cash_out("a", "10"), StoredKeys::default(), noon(), &mut ids(&[1])).unwrap(),
        );
        f.apply(&plan);
        let tx = plan.reply;
        let ok = settle(&f.account(), tx.clone(), RailOutcome::settled(None), None, None, noon())
            .unwrap()
            .unwrap();
        let written = transactions(&ok);
        assert_eq!(written.len(), 1);
        assert_eq!(written[0].status, TxStatus::Confirmed);
        assert_eq!(ok.events.len(), 1);
        assert_eq!(ok.ledger.as_ref().unwrap().holds_released(), &[1]);
        let failed = settle(
            &f.account(),
            tx.clone(),
            RailOutcome::refused(ErrorCode::OrderRejected),
            None,
            None,
            noon(),
        )
        .unwrap()
        .unwrap();
        f.apply(&failed);
        assert_eq!(f.ledger.balance(), Balance { available: m("100"), blocked: m("0") });
        assert_eq!(
            settle(&f.account(), tx, RailOutcome::settled(None), None, None, noon()),
            Ok(None),
            "not pending any more"
        );
    }

    #[test]
    fn a_confirmed_refund_of_an_on_us_payment_owes_the_payer_its_money_back() {
        use crate::domain::decide::{OnUsPayer, RefundDecision, RefundRequest};
        use crate::domain::transaction::{Family, Natureza};
        let mut f = Fixture::with_balance("0");
        let req = PixInRequest {
            value: m("10"),
            payer_name: "Demo".into(),
            payer_document: Some("52998224725".into()),
            payer_bank: Some(crate::rail::sim::bank::gateway_bank()),
            end_to_end_id: Some("E99999999202611231200A0000000042".into()),
            paid_txid: None,
        };
        let received = pix_in(&f.account(), req, noon(), &mut ids(&[1])).unwrap();
        f.apply(&received);
        let req = RefundRequest {
            original_local_id: 1,
            value: m("3"),
            refund_id: Some("back1".into()),
            reason: None,
            natureza: Natureza::Original,
            family: Family::B,
            scenario: None,
        };
        let RefundDecision::Plan(plan) = super::super::refund(
            &f.account(),
            req,
            None,
            Some(received.reply.clone()),
            noon(),
            &mut ids(&[2]),
        )
        .unwrap() else {
            panic!("a new refund")
        };
        f.apply(&plan);
        let payer = crate::domain::ids::AccountId::new(2).unwrap();
        let on_us = OnUsPayer { payee: payer, name: "Demo".into(), document: "52998224725".into() };
        let refund = plan.reply;
        let credit = |p: &Plan<()>| {
            p.records.iter().find_map(|r| if let Record::OnUsCredit(c) = r { Some(c.clone()) } else { None })
        };
        let ok = settle(&f.account(), refund.clone(), RailOutcome::settled(None), None, Some(&on_us), noon())
            .unwrap()
            .unwrap();
        let back = credit(&ok).expect("the payer's money back");
        let rtr = refund.refund.as_ref().unwrap().rtr_id.clone();
        assert_eq!((back.payee, back.value, &back.end_to_end_id), (payer, m("3"), &rtr));
        assert_eq!(back.returns.as_deref(), Some(received.reply.end_to_end_id.as_str()));
        // Refused, or not on us, it owes nothing.
        let refused = RailOutcome::refused(ErrorCode::OrderRejected);
        let failed =
            settle(&f.account(), refund.clone(), refused, Some(received.reply), Some(&on_us), noon());
        assert_eq!(failed.unwrap().and_then(|p| credit(&p)), None);
        let away = settle(&f.account(), refund, RailOutcome::settled(None), None, None, noon());
        assert_eq!(away.unwrap().and_then(|p| credit(&p)), None);
    }

    #[test]
    fn a_confirmed_transfer_to_an_account_of_this_gateway_writes_the_credit_it_owes_with_its_settlement() {
        use crate::domain::decide::{OnUsCredit, OnUsPayer};
        let mut f = Fixture::with_balance("100");
        let plan = planned(
            pay(&f.account(), cash_out("a", "10"), StoredKeys::default(), noon(), &mut ids(&[1])).unwrap(),
        );
        f.apply(&plan);
        let tx = plan.reply;
        let payee = crate::domain::ids::AccountId::new(2).unwrap();
        let payer = OnUsPayer { payee, name: "Acme".into(), document: "11222333000181".into() };
        let ok = settle(&f.account(), tx.clone(), RailOutcome::settled(None), None, Some(&payer), noon())
            .unwrap()
            .unwrap();
        let credits: Vec<&OnUsCredit> = ok
            .records
            .iter()
            .filter_map(|r| if let Record::OnUsCredit(c) = r { Some(c) } else { None })
            .collect();
        assert_eq!(credits.len(), 1);
        assert_eq!((credits[0].payee, credits[0].value), (payee, m("10")));
        assert_eq!(credits[0].end_to_end_id, transactions(&ok)[0].end_to_end_id);
        // A rejected one owes nothing.
        let failed = settle(
            &f.account(),
            tx,
            RailOutcome::refused(ErrorCode::OrderRejected),
            None,
            Some(&payer),
            noon(),
        )
        .unwrap()
        .unwrap();
        assert!(!failed.records.iter().any(|r| matches!(r, Record::OnUsCredit(_))));
    }

    #[test]
    fn a_settled_dict_transfer_gets_a_new_end_to_end_id_and_a_failed_refund_gives_back_its_sum() {
        let mut f = Fixture::with_balance("100");
        let mut req = cash_out("", "5");
        req.kind = TxKind::DictPix;
        req.external_id = None;
        req.dict = Some(DictRequest {
            idempotency_key: "k".into(),
            request_hash: "h".into(),
            priority: Priority::High,
            expiration_seconds: 600,
            currency: "BRL".into(),
        });
        let plan = planned(pay(&f.account(), req, StoredKeys::default(), noon(), &mut ids(&[1])).unwrap());
        f.apply(&plan);
        let settled =
            settle(&f.account(), plan.reply.clone(), RailOutcome::settled(None), None, None, noon())
                .unwrap()
                .unwrap();
        let t = transactions(&settled)[0];
        assert_ne!(t.end_to_end_id, plan.reply.end_to_end_id);
        assert_eq!(t.dict.as_ref().unwrap().provisional_end_to_end_id, plan.reply.end_to_end_id);

        // A refund (a debit) of 4 of a received 10 fails: the original's refunded sum drops by 4.
        let mut refund = plan.reply.clone();
        refund.kind = TxKind::RefundIn;
        refund.dict = None;
        let mut original =
            Transaction::new(50, uuid::Uuid::nil(), f.account().id, TxKind::PixIn, m("10"), noon());
        original.refunded = m("5");
        let failed = settle(
            &f.account(),
            refund,
            RailOutcome::refused(ErrorCode::OrderRejected),
            Some(original),
            None,
            noon(),
        )
        .unwrap()
        .unwrap();
        let written = transactions(&failed);
        assert_eq!(written[0].local_id, 50);
        assert_eq!(written[0].refunded, m("0"), "5 - 5 refunded");
    }

    #[test]
    fn a_received_pix_credits_value_minus_fee() {
        let mut f = Fixture::with_balance("0");
        f.settings.fees.cash_in = FeeRule { fixed: m("1"), percent: Percent::parse("0").unwrap() };
        let req = PixInRequest {
            value: m("10"),
            payer_name: "Ana".into(),
            payer_document: None,
            payer_bank: None,
            end_to_end_id: None,
            paid_txid: None,
        };
        let plan = pix_in(&f.account(), req, noon(), &mut ids(&[3])).unwrap();
        assert_eq!(plan.reply.status, TxStatus::Confirmed);
        assert!(plan.reply.end_to_end_id.starts_with(&format!("E{PAYER_ISPB}")));
        let payer = &plan.reply.counterpart;
        assert_eq!((payer.name.as_str(), payer.document.as_deref()), ("Ana", Some(SANDBOX_PAYER_DOCUMENT)));
        assert_eq!(plan.events.len(), 1);
        f.apply(&plan);
        assert_eq!(f.ledger.balance().available, m("9"));
    }

    /// A Pix Automático debit is not held to the night's limit (the arrangement chose the
    /// hour, not the payer); any other debit at that hour is.
    #[test]
    fn an_automatic_debit_at_midnight_is_not_held_to_the_nights_limit() {
        let f = Fixture::with_balance("20000");
        let midnight = at("2026-11-25T03:00:00Z");
        let plain = cash_out("night", "10000.01");
        let refused = pay(&f.account(), plain.clone(), StoredKeys::default(), midnight, &mut ids(&[9]));
        assert_eq!(refused, Err(Refusal::Ledger(Rejection::NightlyLimit)));
        let automatic = PayRequest { automatic: true, ..plain };
        let accepted = pay(&f.account(), automatic, StoredKeys::default(), midnight, &mut ids(&[9]));
        assert!(matches!(accepted, Ok(PayDecision::Plan(_))), "{accepted:?}");
    }
}
