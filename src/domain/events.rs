//! The events that state changes leave in the outbox, with the payloads the webhooks
//! will carry (interface.md "Webhooks"; decisions.md "Webhooks").
//!
//! An event keeps the transaction as it was in the step that changed it (or, for a MED, the
//! ready payload), so the outbox says exactly what the state said at that moment. Its JSON
//! is built from that when it is sent ([`OutboxEvent::payload`]), not on the payment path:
//! most events of a busy account go to no endpoint at all.

use std::str::FromStr;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Number, Value};

use super::document::masked_document;
use super::money::Money;
use super::transaction::{BankInfo, Family, Transaction, TxKind, TxStatus};

/// The configurable webhook event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    CashIn,
    CashOut,
    RefundIn,
    RefundOut,
    MedCreated,
    MedAccepted,
    MedRejected,
    /// A Pix Automático recurrence changed status.
    Rec,
    /// A recurring charge changed status, or an attempt to settle it failed.
    Cobr,
    /// A DICT key claim of the account changed status.
    Claim,
    /// A MED 2.0 contest of the account moved (its funds recovery's status, money back).
    Recovery,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OutboxEvent {
    pub account_id: u64,
    pub local_id: u64,
    pub event_type: EventType,
    pub created_at: DateTime<Utc>,
    pub body: EventBody,
}

/// What an event's payload is built from.
#[derive(Debug, Clone, PartialEq)]
pub enum EventBody {
    /// The transaction as the step left it.
    Transaction(Box<Transaction>),
    /// A payload built when the event was made (MED events).
    Json(Value),
}

impl OutboxEvent {
    /// The JSON the webhook carries.
    pub fn payload(&self) -> Value {
        match &self.body {
            EventBody::Json(v) => v.clone(),
            EventBody::Transaction(tx) => match shape_of(tx) {
                Some((_, shape)) => shape.build(tx),
                None => flat_webhook(tx),
            },
        }
    }
}

/// The payload shapes of transaction events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Flat,
    Transfer,
    Receive,
    Refund,
}

impl Shape {
    fn build(self, tx: &Transaction) -> Value {
        match self {
            Shape::Flat => flat_webhook(tx),
            Shape::Transfer => transfer_envelope(tx),
            Shape::Receive => receive_envelope(tx),
            Shape::Refund => refund_envelope(tx),
        }
    }
}

/// The event type and payload shape a transaction's state calls for, if it calls for an
/// event: a final debit, or a received credit.
fn shape_of(tx: &Transaction) -> Option<(EventType, Shape)> {
    Some(match (tx.kind, tx.status) {
        (_, TxStatus::Pending) => return None,
        (TxKind::DictPix, _) => (EventType::CashOut, Shape::Transfer),
        // A cob's payment is a RECEIVE; its expiry or cancellation is no event.
        (TxKind::CashIn, TxStatus::Confirmed) if is_cob(tx) => (EventType::CashIn, Shape::Receive),
        (TxKind::CashIn, _) if is_cob(tx) => return None,
        (TxKind::PixIn | TxKind::CashIn, _) => (EventType::CashIn, Shape::Flat),
        (TxKind::CashOut | TxKind::QrCashOut, _) => (EventType::CashOut, Shape::Flat),
        (TxKind::RefundIn, _) if tx.refund.as_ref().is_some_and(|r| r.family == Family::B) => {
            (EventType::RefundIn, Shape::Refund)
        }
        (TxKind::RefundIn, _) => (EventType::RefundIn, Shape::Flat),
        (TxKind::RefundOut, _) => (EventType::RefundOut, Shape::Flat),
        // The operator's money goes to the webhooks of its direction.
        (TxKind::OperatorCredit, _) => (EventType::CashIn, Shape::Flat),
        (TxKind::OperatorDebit, _) => (EventType::CashOut, Shape::Flat),
    })
}

/// An amount as a JSON number with two decimals (`10.50`, not `10.5`).
pub fn money_number(m: Money) -> Value {
    Number::from_str(&m.to_cents_string()).map(Value::Number).unwrap_or(Value::Null)
}

/// The API Pix's view of a received PIX (`Pix`): its end-to-end id, value, the key it was
/// paid to, when, its payer, the txid it paid, and no devoluções (the HTTP layer adds those
/// it finds; a PIX that has just settled has none).
pub fn pix_json(t: &Transaction, receiving_key: &str) -> Value {
    let document = t.counterpart.document.as_deref();
    let mut pagador = json!({"nome": t.counterpart.name});
    match document.map(str::len) {
        Some(11) => pagador["cpf"] = json!(document),
        Some(_) => pagador["cnpj"] = json!(document),
        None => {}
    }
    let mut v = json!({
        "endToEndId": t.end_to_end_id,
        "valor": t.value.to_cents_string(),
        "chave": receiving_key,
        "horario": iso(t.moved_at()),
        "pagador": pagador,
        "devolucoes": [],
    });
    if let Some(txid) = paid_txid(t) {
        v["txid"] = json!(txid);
    }
    v
}

/// The txid a received PIX paid: its charge's, or the recurring charge's it settled.
pub fn paid_txid(t: &Transaction) -> Option<&str> {
    match &t.charge {
        Some(c) => Some(&c.txid),
        None if t.kind == TxKind::PixIn => t.qr_txid.as_deref(),
        None => None,
    }
}

pub fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn masked(doc: Option<&str>) -> Value {
    masked_document(doc).map(Value::String).unwrap_or(Value::Null)
}

/// A counterpart's bank in the interface's words (`bankISPB`, `bankName`, `bankCode`,
/// `accountBranch`, `accountNumber`): the one shape of the list, the single read and the
/// webhooks, so that a client parses a bank one way wherever it meets one.
pub fn bank_json(b: &BankInfo) -> Value {
    json!({
        "bankISPB": b.ispb, "bankName": b.name, "bankCode": b.code,
        "accountBranch": b.branch, "accountNumber": b.account_number,
    })
}

fn counterpart_json(tx: &Transaction) -> Value {
    let c = &tx.counterpart;
    let bank = c.bank.as_ref().map(bank_json);
    json!({ "name": c.name, "document": masked(c.document.as_deref()), "bank": bank })
}

/// The family A flat webhook (`CashOut`, `CashIn`, …) of a transaction.
pub fn flat_webhook(tx: &Transaction) -> Value {
    let (event, movement) = match tx.kind {
        TxKind::PixIn | TxKind::CashIn => ("CashIn", "CREDIT"),
        TxKind::RefundIn => ("RefundIn", "DEBIT"),
        TxKind::RefundOut => ("RefundOut", "CREDIT"),
        TxKind::OperatorCredit => ("OperatorCredit", "CREDIT"),
        TxKind::OperatorDebit => ("OperatorDebit", "DEBIT"),
        TxKind::CashOut | TxKind::QrCashOut | TxKind::DictPix => ("CashOut", "DEBIT"),
    };
    let error = tx.error_code.filter(|_| tx.status == TxStatus::Error);
    json!({
        "event": event,
        "status": tx.status.as_str(),
        "transactionType": "PIX",
        "movementType": movement,
        "transactionId": tx.transaction_id.to_string(),
        "externalId": tx.external_id,
        "endToEndId": tx.end_to_end_id,
        "pixKey": tx.counterpart.key,
        "feeAmount": money_number(tx.fee),
        "originalAmount": money_number(tx.value),
        "finalAmount": tx.final_amount().map(money_number).unwrap_or(Value::Null),
        "processingDate": iso(tx.processed_at.unwrap_or(tx.created_at)),
        "errorCode": error.map(|e| e.as_str()),
        "errorMessage": error.and(tx.error_message()),
        "counterpart": counterpart_json(tx),
        "metadata": { "localId": tx.local_id, "operation": tx.kind, "splitOf": tx.split_of },
    })
}

/// The V2 TRANSFER envelope of a settled `/dict/pix` transfer. Success is `LIQUIDATED`;
/// a failure (beyond the interface) is `REJECTED` with its `errorCode`.
pub fn transfer_envelope(tx: &Transaction) -> Value {
    let dict = tx.dict.as_ref();
    let bank_ispb = tx.counterpart.bank.as_ref().map(|b| b.ispb.clone());
    let status = if tx.status == TxStatus::Confirmed { "LIQUIDATED" } else { "REJECTED" };
    json!({
        "type": "TRANSFER",
        "data": {
            "id": tx.local_id,
            "txId": Value::Null,
            "pixKey": tx.counterpart.key,
            "status": status,
            "payment": {
                "amount": tx.value.to_cents_string(),
                "currency": dict.map(|d| d.currency.clone()).unwrap_or_else(|| "BRL".into()),
            },
            "endToEndId": tx.end_to_end_id,
            "creditDebitType": "DEBIT",
            "idempotencyKey": dict.map(|d| d.idempotency_key.clone()),
            "creditorAccount": {
                "name": tx.counterpart.name,
                "document": masked(tx.counterpart.document.as_deref()),
                "ispb": bank_ispb,
            },
            "remittanceInformation": tx.description,
            "errorCode": tx.error_code.map(|e| e.as_str()),
        }
    })
}

fn is_cob(tx: &Transaction) -> bool {
    tx.charge.as_ref().is_some_and(|c| c.cob.is_some())
}

/// The V2 RECEIVE envelope of a paid cob.
pub fn receive_envelope(tx: &Transaction) -> Value {
    json!({
        "type": "RECEIVE",
        "data": {
            "id": tx.local_id,
            "txId": tx.charge.as_ref().map(|c| c.txid.clone()),
            "status": "LIQUIDATED",
            "payment": { "amount": tx.value.to_cents_string(), "currency": "BRL" },
            "endToEndId": tx.end_to_end_id,
            "debtorAccount": {
                "name": tx.counterpart.name,
                "document": masked(tx.counterpart.document.as_deref()),
            },
        }
    })
}

/// The V2 REFUND envelope of a family B refund (devolução) that reached its final state.
/// Success is `REFUNDED` with a `LIQUIDATED` refund; a failure (beyond the interface) is
/// `NOT_REFUNDED` with a `REJECTED` refund.
pub fn refund_envelope(tx: &Transaction) -> Value {
    let r = tx.refund.as_ref();
    let ok = tx.status == TxStatus::Confirmed;
    json!({
        "type": "REFUND",
        "data": {
            "id": r.map(|r| r.original_local_id),
            "txId": Value::Null,
            "status": if ok { "REFUNDED" } else { "NOT_REFUNDED" },
            "payment": { "amount": tx.value.to_cents_string(), "currency": "BRL" },
            "refunds": [{
                "status": if ok { "LIQUIDATED" } else { "REJECTED" },
                "payment": { "amount": money_number(tx.value), "currency": "BRL" },
                "endToEndId": r.map(|r| r.rtr_id.clone()),
                "eventDate": iso(tx.processed_at.unwrap_or(tx.created_at)),
                "information": r.and_then(|r| r.reason.clone()),
            }],
            "endToEndId": r.map(|r| r.original_end_to_end_id.clone()),
            "creditDebitType": "DEBIT",
        }
    })
}

/// The outbox event a transaction's current state calls for, if any: a final debit, or a
/// received credit.
pub fn event_for(tx: &Transaction, at: DateTime<Utc>) -> Option<OutboxEvent> {
    let (event_type, _) = shape_of(tx)?;
    Some(OutboxEvent {
        account_id: tx.account_id.get(),
        local_id: tx.local_id,
        event_type,
        created_at: at,
        body: EventBody::Transaction(Box::new(tx.clone())),
    })
}

/// The event type a transaction's webhooks go to.
pub fn event_type_of(kind: TxKind) -> EventType {
    match kind {
        TxKind::PixIn | TxKind::CashIn => EventType::CashIn,
        TxKind::CashOut | TxKind::QrCashOut | TxKind::DictPix => EventType::CashOut,
        TxKind::RefundIn => EventType::RefundIn,
        TxKind::RefundOut => EventType::RefundOut,
        TxKind::OperatorCredit => EventType::CashIn,
        TxKind::OperatorDebit => EventType::CashOut,
    }
}

/// The event that describes a transaction as it is now, for a resend: the event its state
/// calls for, or else the flat webhook of that state (a PENDING cash-out, an expired charge).
pub fn current_event(tx: &Transaction, at: DateTime<Utc>) -> OutboxEvent {
    event_for(tx, at).unwrap_or_else(|| OutboxEvent {
        account_id: tx.account_id.get(),
        local_id: tx.local_id,
        event_type: event_type_of(tx.kind),
        created_at: at,
        body: EventBody::Transaction(Box::new(tx.clone())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::AccountId;
    use crate::domain::transaction::{BankInfo, Counterpart, ErrorCode};
    use uuid::Uuid;

    fn tx(kind: TxKind) -> Transaction {
        Transaction {
            fee: Money::parse("0.25").unwrap(),
            external_id: Some("ext-1".into()),
            end_to_end_id: "E".repeat(32),
            description: Some("rent".into()),
            counterpart: Counterpart {
                name: "Ana".into(),
                document: Some("52998224725".into()),
                key: Some("ana@example.com".into()),
                key_type: None,
                bank: Some(BankInfo {
                    ispb: "00000000".into(),
                    name: "Banco".into(),
                    code: "001".into(),
                    branch: Some("0001".into()),
                    account_number: None,
                }),
            },
            ..Transaction::new(
                7,
                Uuid::nil(),
                AccountId::new(1).unwrap(),
                kind,
                Money::parse("10.5").unwrap(),
                Utc::now(),
            )
        }
    }

    #[test]
    fn a_pending_transaction_has_no_event() {
        assert!(event_for(&tx(TxKind::CashOut), Utc::now()).is_none());
    }

    #[test]
    fn the_cash_out_webhook_has_every_field_of_the_interface() {
        let mut t = tx(TxKind::CashOut);
        t.status = TxStatus::Error;
        t.error_code = Some(ErrorCode::BlockedAccount);
        let e = event_for(&t, Utc::now()).unwrap();
        assert_eq!(e.event_type, EventType::CashOut);
        let p = serde_json::to_string(&e.payload()).unwrap();
        for f in [
            "\"event\":\"CashOut\"",
            "\"status\":\"ERROR\"",
            "\"transactionType\":\"PIX\"",
            "\"movementType\":\"DEBIT\"",
            "\"feeAmount\":0.25",
            "\"originalAmount\":10.50",
            "\"finalAmount\":10.75",
            "\"errorCode\":\"BLOCKED_ACCOUNT\"",
            "\"bankISPB\":\"00000000\"",
            "\"processingDate\"",
            "\"errorMessage\"",
            "\"pixKey\":\"ana@example.com\"",
            "\"metadata\"",
        ] {
            assert!(p.contains(f), "{f} in {p}");
        }
    }

    #[test]
    fn a_paid_cob_is_a_receive_and_its_expiry_no_event() {
        use crate::domain::transaction::{ChargeDetails, CobDetails};
        let mut t = tx(TxKind::CashIn);
        t.charge = Some(ChargeDetails {
            correlation_id: Uuid::nil(),
            txid: "abc".into(),
            pix_code: "000201".into(),
            expires_at: Utc::now(),
            additional_info: Default::default(),
            cob: Some(CobDetails {
                expiracao: 60,
                modalidade_alteracao: 0,
                chave: "k".into(),
                solicitacao_pagador: None,
                info_adicionais: vec![],
                devedor: None,
                vencimento: None,
            }),
            splits: vec![],
            split_transactions: vec![],
        });
        t.status = TxStatus::Confirmed;
        let e = event_for(&t, Utc::now()).unwrap();
        assert_eq!(e.event_type, EventType::CashIn);
        let p = e.payload();
        assert_eq!(p["type"], "RECEIVE");
        assert_eq!(p["data"]["txId"], "abc");
        assert_eq!(p["data"]["status"], "LIQUIDATED");
        assert_eq!(p["data"]["payment"]["amount"], "10.50");
        assert_eq!(p["data"]["debtorAccount"]["document"], "***.982.247-**");
        t.status = TxStatus::Error;
        assert!(event_for(&t, Utc::now()).is_none());
    }

    #[test]
    fn a_resend_describes_any_state() {
        let t = tx(TxKind::CashOut);
        let e = current_event(&t, Utc::now());
        assert_eq!(e.event_type, EventType::CashOut);
        assert_eq!(e.payload()["status"], "PENDING");
        for (kind, ty) in [
            (TxKind::PixIn, EventType::CashIn),
            (TxKind::CashIn, EventType::CashIn),
            (TxKind::QrCashOut, EventType::CashOut),
            (TxKind::DictPix, EventType::CashOut),
            (TxKind::RefundIn, EventType::RefundIn),
            (TxKind::RefundOut, EventType::RefundOut),
        ] {
            assert_eq!(current_event(&tx(kind), Utc::now()).event_type, ty, "{kind:?}");
        }
    }

    #[test]
    fn a_credit_webhook_subtracts_the_fee() {
        let mut t = tx(TxKind::PixIn);
        t.status = TxStatus::Confirmed;
        let p = event_for(&t, Utc::now()).unwrap().payload();
        assert_eq!(p["event"], "CashIn");
        assert_eq!(p["movementType"], "CREDIT");
        assert_eq!(serde_json::to_string(&p["finalAmount"]).unwrap(), "10.25");
        assert_eq!(p["errorCode"], Value::Null);
    }
}
