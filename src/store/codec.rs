//! The record formats of what the payment path writes: transactions, the ledger, holds and
//! outbox events. Each record starts with its format byte, so a release reads every format
//! it ever wrote:
//!
//! | format byte | what |
//! |---|---|
//! | `{` (0x7B) or `"` (0x22) | format 0: the JSON of the releases before 2026-11-23, read only (start-up migrates it) |
//! | [`FORMAT_BINARY_V1`] (0xB1) | format 1: the compact binary layout below |
//!
//! Format 1 writes integers as LEB128 varints (amounts as whole centavos), instants as
//! 8-byte little-endian nanoseconds since the Unix epoch, texts as a varint length and UTF-8
//! bytes, an optional value as a 0 tag (absent) or 1 followed by the value, and enums as one
//! stable code byte each (the tables below; a code is never reused). A transaction starts
//! with a fixed header that index maintenance reads without decoding the rest:
//!
//! | bytes | content |
//! |---|---|
//! | 0 | format byte (0xB1) |
//! | 1 | kind code |
//! | 2 | status code |
//! | 3..11 | account id, u64 LE |
//! | 11..19 | created at, i64 LE nanoseconds |
//!
//! A JSON transaction is about 900 bytes; the same in format 1 about 200.
//!
//! Parts added to format 1 after its first release follow the last field as tagged
//! sections (a tag byte, then the part), written only when the transaction has the part: a
//! record without them is byte for byte what the first release wrote and reads, and a record
//! that ends before a section has none of it. Section tags:
//!
//! | tag | section |
//! |---|---|
//! | [`SECTION_COBV`] (1) | a cobv's revision and price terms (the charge's `cob.vencimento`) |
//! | [`SECTION_RAIL`] (2) | what a payment on the SPI rail keeps (`rail`): four optional texts |
//! | [`SECTION_OPERATOR`] (3) | who made an operator's move (`operator`): a text |
//! | [`SECTION_RISK`] (4) | why the risk rule flagged a payment on the SPI rail (`rail.risk`): a text, after the rail section |
//!
//! A release reads the sections it knows and refuses a record with one it does not: 0.2.0
//! cannot read an operator's move that 0.3.0 made (docs/deploy.md, rolling upgrades).

use chrono::{DateTime, Datelike, NaiveDate, Utc};
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::domain::cobv::{Amount, Days, Discount, Interest, Period, Terms};

use crate::domain::events::{EventBody, EventType, OutboxEvent};
use crate::domain::ids::AccountId;
use crate::domain::ledger::{Balance, LedgerState, Totals};
use crate::domain::limits::LimitCounters;
use crate::domain::money::{Money, Percent};
use crate::domain::pix_key::{DirectoryKey, DirectoryKeyType};
use crate::domain::scenario::PayoutScenario;
use crate::domain::splits::Split;
use crate::domain::transaction::{
    BankInfo, ChargeDetails, CobDetails, CobvDetails, Counterpart, DictDetails, ErrorCode, Family, Natureza,
    Priority, RailDetails, RefundDetails, Transaction, TxKind, TxStatus,
};

/// The first byte of every format-1 record.
pub const FORMAT_BINARY_V1: u8 = 0xB1;
/// Bytes of a format-1 transaction's fixed header.
pub const TX_HEADER_BYTES: usize = 19;
/// The tag of a transaction's cobv section.
pub const SECTION_COBV: u8 = 1;
/// The tag of a transaction's SPI rail section.
pub const SECTION_RAIL: u8 = 2;
/// The tag of a transaction's operator section.
pub const SECTION_OPERATOR: u8 = 3;
/// The tag of a flagged payment's risk section; it follows the rail section.
pub const SECTION_RISK: u8 = 4;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("the record ends early")]
    Truncated,
    #[error("unknown record format {0:#04x}")]
    Format(u8),
    #[error("bad {0}")]
    Bad(&'static str),
    #[error("bad JSON: {0}")]
    Json(String),
}

// ---- primitives ----------------------------------------------------------------------------

struct Writer<'a>(&'a mut Vec<u8>);

impl Writer<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn u64_le(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn instant(&mut self, t: DateTime<Utc>) {
        // Instants out of the nanosecond range (after 2262) are refused upstream by chrono's
        // own limits long before; saturate rather than panic.
        self.0.extend_from_slice(&t.timestamp_nanos_opt().unwrap_or(i64::MAX).to_le_bytes());
    }

    fn money(&mut self, m: Money) {
        self.varint(m.cents());
    }

    fn text(&mut self, s: &str) {
        self.varint(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }

    fn opt<T: ?Sized>(&mut self, v: Option<&T>, f: impl FnOnce(&mut Self, &T)) {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                f(self, v);
            }
        }
    }

    fn opt_text(&mut self, s: Option<&str>) {
        self.opt(s, |w, s| w.text(s));
    }

    fn uuid(&mut self, u: &Uuid) {
        self.0.extend_from_slice(u.as_bytes());
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if self.0.len() < n {
            return Err(CodecError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take(1)?[0])
    }

    fn varint(&mut self) -> Result<u64, CodecError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7F) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(CodecError::Bad("varint"))
    }

    fn u64_le(&mut self) -> Result<u64, CodecError> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }

    fn instant(&mut self) -> Result<DateTime<Utc>, CodecError> {
        Ok(DateTime::from_timestamp_nanos(self.u64_le()? as i64))
    }

    fn money(&mut self) -> Result<Money, CodecError> {
        Money::from_cents(self.varint()?).ok_or(CodecError::Bad("amount"))
    }

    fn text(&mut self) -> Result<String, CodecError> {
        let n = usize::try_from(self.varint()?).map_err(|_| CodecError::Bad("length"))?;
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| CodecError::Bad("text"))
    }

    fn opt<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, CodecError>,
    ) -> Result<Option<T>, CodecError> {
        match self.u8()? {
            0 => Ok(None),
            1 => f(self).map(Some),
            _ => Err(CodecError::Bad("option tag")),
        }
    }

    fn opt_text(&mut self) -> Result<Option<String>, CodecError> {
        self.opt(Self::text)
    }

    fn uuid(&mut self) -> Result<Uuid, CodecError> {
        let b = self.take(16)?;
        Uuid::from_slice(b).map_err(|_| CodecError::Bad("uuid"))
    }

    fn list<T>(
        &mut self,
        mut f: impl FnMut(&mut Self) -> Result<T, CodecError>,
    ) -> Result<Vec<T>, CodecError> {
        let n = self.varint()?;
        // Each element takes at least one byte: a length beyond the rest is damage.
        if n > self.0.len() as u64 {
            return Err(CodecError::Bad("list length"));
        }
        (0..n).map(|_| f(self)).collect()
    }

    fn end(&self) -> Result<(), CodecError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(CodecError::Bad("trailing bytes"))
        }
    }
}

/// Stable one-byte codes of an enum: `$code` never changes meaning once written.
macro_rules! codes {
    ($name:ident, $enc:ident, $dec:ident, { $($variant:path => $code:expr),+ $(,)? }) => {
        fn $enc(v: $name) -> u8 {
            match v { $($variant => $code),+ }
        }
        fn $dec(c: u8) -> Result<$name, CodecError> {
            match c {
                $($code => Ok($variant),)+
                _ => Err(CodecError::Bad(stringify!($name))),
            }
        }
    };
}

codes!(TxKind, kind_code, kind_of, {
    TxKind::CashOut => 1, TxKind::QrCashOut => 2, TxKind::DictPix => 3, TxKind::PixIn => 4,
    TxKind::CashIn => 5, TxKind::RefundIn => 6, TxKind::RefundOut => 7, TxKind::OperatorCredit => 8,
    TxKind::OperatorDebit => 9,
});
codes!(TxStatus, status_code, status_of, {
    TxStatus::Pending => 1, TxStatus::Confirmed => 2, TxStatus::Error => 3,
});
codes!(ErrorCode, error_code, error_of, {
    ErrorCode::TaxIdMismatch => 1, ErrorCode::InvalidTaxId => 2, ErrorCode::BlockedAccount => 3,
    ErrorCode::AccountClosed => 4, ErrorCode::OrderRejected => 5, ErrorCode::PaymentExpired => 6,
    ErrorCode::SettlementTimeout => 7, ErrorCode::Expired => 8, ErrorCode::Cancelled => 9,
    ErrorCode::InsufficientBalance => 10,
});
codes!(DirectoryKeyType, key_type_code, key_type_of, {
    DirectoryKeyType::Cpf => 1, DirectoryKeyType::Cnpj => 2, DirectoryKeyType::Email => 3,
    DirectoryKeyType::Phone => 4, DirectoryKeyType::Evp => 5,
});
codes!(Priority, priority_code, priority_of, { Priority::High => 1, Priority::Norm => 2 });
codes!(Natureza, natureza_code, natureza_of, {
    Natureza::Original => 1, Natureza::Retirada => 2, Natureza::MedOperacional => 3, Natureza::MedFraude => 4,
});
codes!(Family, family_code, family_of, { Family::A => 1, Family::B => 2 });
codes!(EventType, event_type_code, event_type_of, {
    EventType::CashIn => 1, EventType::CashOut => 2, EventType::RefundIn => 3, EventType::RefundOut => 4,
    EventType::MedCreated => 5, EventType::MedAccepted => 6, EventType::MedRejected => 7,
    EventType::Rec => 8, EventType::Cobr => 9, EventType::Claim => 10,
    EventType::Recovery => 11,
});

fn json_err(e: serde_json::Error) -> CodecError {
    CodecError::Json(e.to_string())
}

fn is_json(bytes: &[u8]) -> bool {
    matches!(bytes.first(), Some(b'{' | b'"'))
}

// ---- transactions --------------------------------------------------------------------------

/// Writes a transaction in format 1.
pub fn encode_transaction(tx: &Transaction, out: &mut Vec<u8>) {
    out.reserve(256);
    let mut w = Writer(out);
    w.u8(FORMAT_BINARY_V1);
    w.u8(kind_code(tx.kind));
    w.u8(status_code(tx.status));
    w.u64_le(tx.account_id.get());
    w.instant(tx.created_at);
    w.varint(tx.local_id);
    w.uuid(&tx.transaction_id);
    w.u8(tx.error_code.map_or(0, error_code));
    w.money(tx.value);
    w.money(tx.fee);
    w.money(tx.refunded);
    w.opt_text(tx.external_id.as_deref());
    w.text(&tx.end_to_end_id);
    w.opt_text(tx.description.as_deref());
    let c = &tx.counterpart;
    w.text(&c.name);
    w.opt_text(c.document.as_deref());
    w.opt_text(c.key.as_deref());
    w.u8(c.key_type.map_or(0, key_type_code));
    w.opt(c.bank.as_ref(), |w, b| {
        w.text(&b.ispb);
        w.text(&b.name);
        w.text(&b.code);
        w.opt_text(b.branch.as_deref());
        w.opt_text(b.account_number.as_deref());
    });
    w.opt(tx.processed_at.as_ref(), |w, t| w.instant(*t));
    w.opt(tx.scenario.as_ref(), |w, s| match s {
        PayoutScenario::Confirm => w.u8(1),
        PayoutScenario::Reject(code) => {
            w.u8(2);
            w.u8(error_code(*code));
        }
        PayoutScenario::Delay(ms) => {
            w.u8(3);
            w.varint(*ms);
        }
        PayoutScenario::Stuck => w.u8(4),
        PayoutScenario::ProviderDown => w.u8(5),
    });
    w.opt(tx.dict.as_ref(), |w, d| {
        w.text(&d.idempotency_key);
        w.text(&d.request_hash);
        w.u8(priority_code(d.priority));
        w.varint(u64::from(d.expiration_seconds));
        w.text(&d.currency);
        w.text(&d.provisional_end_to_end_id);
    });
    w.opt_text(tx.qr_txid.as_deref());
    w.opt(tx.charge.as_ref(), |w, c| encode_charge(w, c));
    w.opt(tx.refund.as_ref(), |w, r| {
        w.varint(r.original_local_id);
        w.text(&r.original_end_to_end_id);
        w.opt_text(r.refund_id.as_deref());
        w.text(&r.rtr_id);
        w.u8(natureza_code(r.natureza));
        w.opt_text(r.reason.as_deref());
        w.u8(family_code(r.family));
    });
    w.opt(tx.split_of.as_ref(), |w, s| w.varint(*s));
    w.opt(tx.scheduled_for.as_ref(), |w, t| w.instant(*t));
    if let Some(v) = tx.cobv() {
        w.u8(SECTION_COBV);
        encode_cobv(&mut w, v);
    }
    if let Some(d) = &tx.rail {
        w.u8(SECTION_RAIL);
        w.opt_text(d.instrument.as_deref());
        w.opt_text(d.creditor_document.as_deref());
        w.opt_text(d.creditor_account_type.as_deref());
        w.opt_text(d.reason.as_deref());
        // Its own section, not a fifth text of the rail's: a record of a payment that was
        // not flagged stays what the releases before the flag wrote and read.
        if let Some(why) = &d.risk {
            w.u8(SECTION_RISK);
            w.text(why);
        }
    }
    if let Some(name) = &tx.operator {
        w.u8(SECTION_OPERATOR);
        w.text(name);
    }
}

fn encode_date(w: &mut Writer, d: NaiveDate) {
    w.varint(u64::try_from(d.num_days_from_ce()).unwrap_or(0));
}

fn decode_date(r: &mut Reader) -> Result<NaiveDate, CodecError> {
    i32::try_from(r.varint()?)
        .ok()
        .and_then(NaiveDate::from_num_days_from_ce_opt)
        .ok_or(CodecError::Bad("date"))
}

/// A percent as whole ten-thousandths (it has at most four decimals).
fn encode_percent(w: &mut Writer, p: Percent) {
    let units = (p.as_decimal() * Decimal::from(10_000)).trunc();
    w.varint(u64::try_from(units).unwrap_or(0));
}

fn decode_percent(r: &mut Reader) -> Result<Percent, CodecError> {
    Percent::try_from(Decimal::new(i64::try_from(r.varint()?).unwrap_or(-1), 4).normalize())
        .map_err(|_| CodecError::Bad("percent"))
}

/// An adjustment: 1 and a value, or 2 and a percent.
fn encode_amount(w: &mut Writer, a: Amount) {
    match a {
        Amount::Value(m) => {
            w.u8(1);
            w.money(m);
        }
        Amount::Percent(p) => {
            w.u8(2);
            encode_percent(w, p);
        }
    }
}

fn decode_amount(r: &mut Reader) -> Result<Amount, CodecError> {
    match r.u8()? {
        1 => Ok(Amount::Value(r.money()?)),
        2 => Ok(Amount::Percent(decode_percent(r)?)),
        _ => Err(CodecError::Bad("adjustment")),
    }
}

codes!(Days, days_code, days_of, { Days::Calendar => 1, Days::Business => 2 });
codes!(Period, period_code, period_of, { Period::Day => 1, Period::Month => 2, Period::Year => 3 });

fn encode_cobv(w: &mut Writer, v: &CobvDetails) {
    let t = &v.terms;
    w.varint(u64::from(v.revisao));
    w.money(t.original);
    encode_date(w, t.due);
    w.varint(u64::from(t.validity_after_due_days));
    w.opt(t.abatement.as_ref(), |w, a| encode_amount(w, *a));
    w.opt(t.discount.as_ref(), |w, d| match d {
        Discount::UntilDates(dates) => {
            w.u8(1);
            w.varint(dates.len() as u64);
            for (day, a) in dates {
                encode_date(w, *day);
                encode_amount(w, *a);
            }
        }
        Discount::PerDayEarly(a, days) => {
            w.u8(2);
            encode_amount(w, *a);
            w.u8(days_code(*days));
        }
    });
    w.opt(t.fine.as_ref(), |w, a| encode_amount(w, *a));
    w.opt(t.interest.as_ref(), |w, i| match i {
        Interest::ValuePerDay(m, days) => {
            w.u8(1);
            w.money(*m);
            w.u8(days_code(*days));
        }
        Interest::Percent(p, period, days) => {
            w.u8(2);
            encode_percent(w, *p);
            w.u8(period_code(*period));
            w.u8(days_code(*days));
        }
    });
}

fn decode_cobv(r: &mut Reader) -> Result<CobvDetails, CodecError> {
    let revisao = u32::try_from(r.varint()?).map_err(|_| CodecError::Bad("revisao"))?;
    let original = r.money()?;
    let due = decode_date(r)?;
    let validity_after_due_days = u32::try_from(r.varint()?).map_err(|_| CodecError::Bad("validity"))?;
    let abatement = r.opt(decode_amount)?;
    let discount = r.opt(|r| match r.u8()? {
        1 => Ok(Discount::UntilDates(r.list(|r| Ok((decode_date(r)?, decode_amount(r)?)))?)),
        2 => Ok(Discount::PerDayEarly(decode_amount(r)?, days_of(r.u8()?)?)),
        _ => Err(CodecError::Bad("discount")),
    })?;
    let fine = r.opt(decode_amount)?;
    let interest = r.opt(|r| match r.u8()? {
        1 => Ok(Interest::ValuePerDay(r.money()?, days_of(r.u8()?)?)),
        2 => Ok(Interest::Percent(decode_percent(r)?, period_of(r.u8()?)?, days_of(r.u8()?)?)),
        _ => Err(CodecError::Bad("interest")),
    })?;
    let terms = Terms { original, due, validity_after_due_days, abatement, discount, fine, interest };
    Ok(CobvDetails { revisao, terms })
}

fn encode_charge(w: &mut Writer, c: &ChargeDetails) {
    w.uuid(&c.correlation_id);
    w.text(&c.txid);
    w.text(&c.pix_code);
    w.instant(c.expires_at);
    w.varint(c.additional_info.len() as u64);
    for (k, v) in &c.additional_info {
        w.text(k);
        w.text(v);
    }
    w.opt(c.cob.as_ref(), |w, cob| {
        w.varint(u64::from(cob.expiracao));
        w.u8(cob.modalidade_alteracao);
        w.text(&cob.chave);
        w.opt_text(cob.solicitacao_pagador.as_deref());
        w.varint(cob.info_adicionais.len() as u64);
        for (k, v) in &cob.info_adicionais {
            w.text(k);
            w.text(v);
        }
        // The debtor is kept as the client sent it: JSON text.
        w.opt(cob.devedor.as_ref(), |w, d| w.text(&d.to_string()));
    });
    w.varint(c.splits.len() as u64);
    for s in &c.splits {
        w.text(&s.key.key);
        w.u8(key_type_code(s.key.key_type));
        w.text(&s.name);
        w.text(&s.document);
        w.money(s.amount);
        w.u8(u8::from(s.immediate));
    }
    w.varint(c.split_transactions.len() as u64);
    for id in &c.split_transactions {
        w.varint(*id);
    }
}

fn decode_charge(r: &mut Reader) -> Result<ChargeDetails, CodecError> {
    let correlation_id = r.uuid()?;
    let txid = r.text()?;
    let pix_code = r.text()?;
    let expires_at = r.instant()?;
    let additional_info = r.list(|r| Ok((r.text()?, r.text()?)))?.into_iter().collect();
    let cob = r.opt(|r| {
        Ok(CobDetails {
            expiracao: u32::try_from(r.varint()?).map_err(|_| CodecError::Bad("expiracao"))?,
            modalidade_alteracao: r.u8()?,
            chave: r.text()?,
            solicitacao_pagador: r.opt_text()?,
            info_adicionais: r.list(|r| Ok((r.text()?, r.text()?)))?,
            devedor: r.opt(|r| serde_json::from_str(&r.text()?).map_err(json_err))?,
            vencimento: None,
        })
    })?;
    let splits = r.list(|r| {
        Ok(Split {
            key: DirectoryKey { key: r.text()?, key_type: key_type_of(r.u8()?)? },
            name: r.text()?,
            document: r.text()?,
            amount: r.money()?,
            immediate: r.u8()? != 0,
        })
    })?;
    let split_transactions = r.list(Reader::varint)?;
    Ok(ChargeDetails {
        correlation_id,
        txid,
        pix_code,
        expires_at,
        additional_info,
        cob,
        splits,
        split_transactions,
    })
}

/// Reads a transaction in any format this release knows.
pub fn decode_transaction(bytes: &[u8]) -> Result<Transaction, CodecError> {
    match bytes.first() {
        Some(&FORMAT_BINARY_V1) => decode_transaction_v1(&bytes[1..]),
        Some(b'{') => serde_json::from_slice(bytes).map_err(json_err),
        Some(&other) => Err(CodecError::Format(other)),
        None => Err(CodecError::Truncated),
    }
}

fn decode_transaction_v1(bytes: &[u8]) -> Result<Transaction, CodecError> {
    let mut r = Reader(bytes);
    let kind = kind_of(r.u8()?)?;
    let status = status_of(r.u8()?)?;
    let account_id = AccountId::new(r.u64_le()?).ok_or(CodecError::Bad("account id"))?;
    let created_at = r.instant()?;
    let local_id = r.varint()?;
    let transaction_id = r.uuid()?;
    let error_code = match r.u8()? {
        0 => None,
        c => Some(error_of(c)?),
    };
    let value = r.money()?;
    let fee = r.money()?;
    let refunded = r.money()?;
    let external_id = r.opt_text()?;
    let end_to_end_id = r.text()?;
    let description = r.opt_text()?;
    let counterpart = Counterpart {
        name: r.text()?,
        document: r.opt_text()?,
        key: r.opt_text()?,
        key_type: match r.u8()? {
            0 => None,
            c => Some(key_type_of(c)?),
        },
        bank: r.opt(|r| {
            Ok(BankInfo {
                ispb: r.text()?,
                name: r.text()?,
                code: r.text()?,
                branch: r.opt_text()?,
                account_number: r.opt_text()?,
            })
        })?,
    };
    let processed_at = r.opt(Reader::instant)?;
    let scenario = r.opt(|r| {
        Ok(match r.u8()? {
            1 => PayoutScenario::Confirm,
            2 => PayoutScenario::Reject(error_of(r.u8()?)?),
            3 => PayoutScenario::Delay(r.varint()?),
            4 => PayoutScenario::Stuck,
            5 => PayoutScenario::ProviderDown,
            _ => return Err(CodecError::Bad("scenario")),
        })
    })?;
    let dict = r.opt(|r| {
        Ok(DictDetails {
            idempotency_key: r.text()?,
            request_hash: r.text()?,
            priority: priority_of(r.u8()?)?,
            expiration_seconds: u32::try_from(r.varint()?).map_err(|_| CodecError::Bad("expiration"))?,
            currency: r.text()?,
            provisional_end_to_end_id: r.text()?,
        })
    })?;
    let qr_txid = r.opt_text()?;
    let charge = r.opt(decode_charge)?;
    let refund = r.opt(|r| {
        Ok(RefundDetails {
            original_local_id: r.varint()?,
            original_end_to_end_id: r.text()?,
            refund_id: r.opt_text()?,
            rtr_id: r.text()?,
            natureza: natureza_of(r.u8()?)?,
            reason: r.opt_text()?,
            family: family_of(r.u8()?)?,
        })
    })?;
    let split_of = r.opt(Reader::varint)?;
    let scheduled_for = r.opt(Reader::instant)?;
    let mut charge = charge;
    let mut rail = None;
    let mut operator = None;
    while !r.0.is_empty() {
        match r.u8()? {
            SECTION_COBV => {
                let v = decode_cobv(&mut r)?;
                let cob =
                    charge.as_mut().and_then(|c| c.cob.as_mut()).ok_or(CodecError::Bad("cobv section"))?;
                cob.vencimento = Some(v);
            }
            SECTION_RAIL => {
                rail = Some(RailDetails {
                    instrument: r.opt_text()?,
                    creditor_document: r.opt_text()?,
                    creditor_account_type: r.opt_text()?,
                    reason: r.opt_text()?,
                    risk: None,
                })
            }
            SECTION_RISK => {
                let why = r.text()?;
                rail.as_mut().ok_or(CodecError::Bad("risk section"))?.risk = Some(why);
            }
            SECTION_OPERATOR => operator = Some(r.text()?),
            _ => return Err(CodecError::Bad("section")),
        }
    }
    Ok(Transaction {
        local_id,
        transaction_id,
        account_id,
        kind,
        status,
        error_code,
        value,
        fee,
        external_id,
        end_to_end_id,
        description,
        counterpart,
        created_at,
        processed_at,
        scenario,
        dict,
        qr_txid,
        charge,
        refund,
        refunded,
        split_of,
        scheduled_for,
        rail,
        operator,
    })
}

/// What index maintenance needs of a transaction record, read without decoding it whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxSummary {
    pub account_id: u64,
    pub created_at: DateTime<Utc>,
    pub kind: TxKind,
    pub status: TxStatus,
}

/// The header of a transaction record (any format).
pub fn transaction_summary(bytes: &[u8]) -> Result<TxSummary, CodecError> {
    if bytes.first() != Some(&FORMAT_BINARY_V1) {
        let tx = decode_transaction(bytes)?;
        return Ok(TxSummary {
            account_id: tx.account_id.get(),
            created_at: tx.created_at,
            kind: tx.kind,
            status: tx.status,
        });
    }
    let mut r = Reader(bytes.get(1..TX_HEADER_BYTES).ok_or(CodecError::Truncated)?);
    let kind = kind_of(r.u8()?)?;
    let status = status_of(r.u8()?)?;
    let account_id = r.u64_le()?;
    let created_at = r.instant()?;
    Ok(TxSummary { account_id, created_at, kind, status })
}

// ---- the ledger and holds ------------------------------------------------------------------

fn encode_day(w: &mut Writer, day: &(NaiveDate, Money)) {
    // Days since 0001-01-01 (CE), always positive for the dates a ledger sees.
    w.varint(u64::try_from(chrono::Datelike::num_days_from_ce(&day.0)).unwrap_or(0));
    w.money(day.1);
}

fn decode_day(r: &mut Reader) -> Result<(NaiveDate, Money), CodecError> {
    let days = i32::try_from(r.varint()?).map_err(|_| CodecError::Bad("date"))?;
    let date = NaiveDate::from_num_days_from_ce_opt(days).ok_or(CodecError::Bad("date"))?;
    Ok((date, r.money()?))
}

/// Writes a ledger record in format 1.
pub fn encode_ledger(state: &LedgerState, out: &mut Vec<u8>) {
    let mut w = Writer(out);
    w.u8(FORMAT_BINARY_V1);
    w.money(state.balance.available);
    w.money(state.balance.blocked);
    w.money(state.totals.credited);
    w.money(state.totals.debited);
    w.opt(state.counters.day.as_ref(), encode_day);
    w.opt(state.counters.night.as_ref(), encode_day);
}

pub fn decode_ledger(bytes: &[u8]) -> Result<LedgerState, CodecError> {
    match bytes.first() {
        Some(&FORMAT_BINARY_V1) => {
            let mut r = Reader(&bytes[1..]);
            let balance = Balance { available: r.money()?, blocked: r.money()? };
            let totals = Totals { credited: r.money()?, debited: r.money()? };
            let counters = LimitCounters { day: r.opt(decode_day)?, night: r.opt(decode_day)? };
            r.end()?;
            Ok(LedgerState { balance, counters, totals })
        }
        Some(b'{') => serde_json::from_slice(bytes).map_err(json_err),
        Some(&other) => Err(CodecError::Format(other)),
        None => Err(CodecError::Truncated),
    }
}

/// Writes the hold of a pending debit in format 1.
pub fn encode_hold(hold: Money) -> Vec<u8> {
    let mut out = Vec::with_capacity(6);
    let mut w = Writer(&mut out);
    w.u8(FORMAT_BINARY_V1);
    w.money(hold);
    out
}

pub fn decode_hold(bytes: &[u8]) -> Result<Money, CodecError> {
    match bytes.first() {
        Some(&FORMAT_BINARY_V1) => {
            let mut r = Reader(&bytes[1..]);
            let m = r.money()?;
            r.end()?;
            Ok(m)
        }
        Some(b'"') => serde_json::from_slice(bytes).map_err(json_err),
        Some(&other) => Err(CodecError::Format(other)),
        None => Err(CodecError::Truncated),
    }
}

// ---- outbox events -------------------------------------------------------------------------

/// What the dispatcher needs of an outbox event to schedule it, read without its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventHeader {
    pub account_id: u64,
    pub local_id: u64,
    pub event_type: EventType,
}

/// Writes an outbox event in format 1: its header, the instant, then its body (1: a
/// transaction record, 2: JSON text).
pub fn encode_event(e: &OutboxEvent, out: &mut Vec<u8>) {
    let mut w = Writer(out);
    w.u8(FORMAT_BINARY_V1);
    w.varint(e.account_id);
    w.varint(e.local_id);
    w.u8(event_type_code(e.event_type));
    w.instant(e.created_at);
    match &e.body {
        EventBody::Transaction(tx) => {
            w.u8(1);
            encode_transaction(tx, w.0);
        }
        EventBody::Json(v) => {
            w.u8(2);
            w.text(&v.to_string());
        }
    }
}

pub fn event_header(bytes: &[u8]) -> Result<EventHeader, CodecError> {
    if is_json(bytes) {
        let e = decode_event(bytes)?;
        return Ok(EventHeader { account_id: e.account_id, local_id: e.local_id, event_type: e.event_type });
    }
    let mut r = event_reader(bytes)?;
    Ok(EventHeader { account_id: r.varint()?, local_id: r.varint()?, event_type: event_type_of(r.u8()?)? })
}

fn event_reader(bytes: &[u8]) -> Result<Reader<'_>, CodecError> {
    match bytes.first() {
        Some(&FORMAT_BINARY_V1) => Ok(Reader(&bytes[1..])),
        Some(&other) => Err(CodecError::Format(other)),
        None => Err(CodecError::Truncated),
    }
}

/// The event of the releases before format 1 (format 0).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsonEvent {
    account_id: u64,
    local_id: u64,
    event_type: EventType,
    created_at: DateTime<Utc>,
    payload: serde_json::Value,
}

pub fn decode_event(bytes: &[u8]) -> Result<OutboxEvent, CodecError> {
    if is_json(bytes) {
        let e: JsonEvent = serde_json::from_slice(bytes).map_err(json_err)?;
        return Ok(OutboxEvent {
            account_id: e.account_id,
            local_id: e.local_id,
            event_type: e.event_type,
            created_at: e.created_at,
            body: EventBody::Json(e.payload),
        });
    }
    let mut r = event_reader(bytes)?;
    let account_id = r.varint()?;
    let local_id = r.varint()?;
    let event_type = event_type_of(r.u8()?)?;
    let created_at = r.instant()?;
    let body = match r.u8()? {
        1 => EventBody::Transaction(Box::new(decode_transaction(r.0)?)),
        2 => {
            let text = r.text()?;
            r.end()?;
            EventBody::Json(serde_json::from_str(&text).map_err(json_err)?)
        }
        _ => return Err(CodecError::Bad("event body")),
    };
    Ok(OutboxEvent { account_id, local_id, event_type, created_at, body })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::events::event_for;
    use std::collections::BTreeMap;

    fn m(s: &str) -> Money {
        Money::parse(s).unwrap()
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    /// A transaction with every optional part filled.
    fn full() -> Transaction {
        let mut info = BTreeMap::new();
        info.insert("pedido".to_string(), "42".to_string());
        Transaction {
            status: TxStatus::Error,
            error_code: Some(ErrorCode::SettlementTimeout),
            fee: m("0.25"),
            external_id: Some("ext-é-1".into()),
            end_to_end_id: "E99999999202611230400A0000000001".into(),
            description: Some("aluguel".into()),
            counterpart: Counterpart {
                name: "Ana".into(),
                document: Some("52998224725".into()),
                key: Some("ana@example.com".into()),
                key_type: Some(DirectoryKeyType::Email),
                bank: Some(BankInfo {
                    ispb: "00000000".into(),
                    name: "Banco".into(),
                    code: "001".into(),
                    branch: Some("0001".into()),
                    account_number: None,
                }),
            },
            processed_at: Some(at("2026-11-23T04:00:01.123456789Z")),
            scenario: Some(PayoutScenario::Reject(ErrorCode::BlockedAccount)),
            dict: Some(DictDetails {
                idempotency_key: "k".into(),
                request_hash: "h".into(),
                priority: Priority::High,
                expiration_seconds: 600,
                currency: "BRL".into(),
                provisional_end_to_end_id: "E1".into(),
            }),
            qr_txid: Some("qr".into()),
            charge: Some(ChargeDetails {
                correlation_id: Uuid::from_u128(7),
                txid: "abc".into(),
                pix_code: "000201".into(),
                expires_at: at("2026-11-24T04:00:00Z"),
                additional_info: info,
                cob: Some(CobDetails {
                    expiracao: 3600,
                    modalidade_alteracao: 1,
                    chave: "k".into(),
                    solicitacao_pagador: Some("pague".into()),
                    info_adicionais: vec![("a".into(), "b".into())],
                    devedor: Some(serde_json::json!({"cpf": "52998224725", "nome": "Ana"})),
                    vencimento: None,
                }),
                splits: vec![Split {
                    key: DirectoryKey { key: "+5511987654321".into(), key_type: DirectoryKeyType::Phone },
                    name: "S".into(),
                    document: "52998224725".into(),
                    amount: m("1.50"),
                    immediate: true,
                }],
                split_transactions: vec![8, 9],
            }),
            refund: Some(RefundDetails {
                original_local_id: 3,
                original_end_to_end_id: "E3".into(),
                refund_id: Some("r".into()),
                rtr_id: "D1".into(),
                natureza: Natureza::MedFraude,
                reason: None,
                family: Family::B,
            }),
            refunded: m("2"),
            split_of: Some(4),
            scheduled_for: Some(at("2026-11-24T03:00:00Z")),
            ..Transaction::new(
                123_456_789,
                Uuid::from_u128(99),
                AccountId::new(5).unwrap(),
                TxKind::DictPix,
                m("1234.56"),
                at("2026-11-23T04:00:00.987654321Z"),
            )
        }
    }

    fn encoded(tx: &Transaction) -> Vec<u8> {
        let mut out = Vec::new();
        encode_transaction(tx, &mut out);
        out
    }

    #[test]
    fn a_transaction_round_trips_with_every_part_and_with_none() {
        let f = full();
        assert_eq!(decode_transaction(&encoded(&f)).unwrap(), f);
        let bare = Transaction::new(
            0,
            Uuid::nil(),
            AccountId::new(1).unwrap(),
            TxKind::CashOut,
            m("0.01"),
            at("2026-01-01T00:00:00Z"),
        );
        assert_eq!(decode_transaction(&encoded(&bare)).unwrap(), bare);
    }

    /// `full()` as a cobv with the given terms' adjustments.
    fn cobv(
        abatement: Option<Amount>,
        discount: Option<Discount>,
        fine: Option<Amount>,
        interest: Option<Interest>,
    ) -> Transaction {
        let mut t = full();
        let due = NaiveDate::from_ymd_opt(2026, 12, 24).unwrap();
        let terms = Terms {
            original: m("100.00"),
            due,
            validity_after_due_days: 30,
            abatement,
            discount,
            fine,
            interest,
        };
        if let Some(cob) = t.charge.as_mut().and_then(|c| c.cob.as_mut()) {
            cob.vencimento = Some(CobvDetails { revisao: 3, terms });
        }
        t
    }

    #[test]
    fn a_cobv_round_trips_with_every_modality_in_a_section_after_the_first_format() {
        let p = |s: &str| Percent::parse(s).unwrap();
        let day = |d: u32| NaiveDate::from_ymd_opt(2026, 12, d).unwrap();
        let cases = [
            cobv(None, None, None, None),
            cobv(
                Some(Amount::Value(m("1.25"))),
                Some(Discount::UntilDates(vec![
                    (day(10), Amount::Value(m("5"))),
                    (day(20), Amount::Percent(p("2.5"))),
                ])),
                Some(Amount::Percent(p("2"))),
                Some(Interest::ValuePerDay(m("0.33"), Days::Business)),
            ),
            cobv(
                Some(Amount::Percent(p("100"))),
                Some(Discount::PerDayEarly(Amount::Percent(p("0.0001")), Days::Calendar)),
                Some(Amount::Value(m("9.99"))),
                Some(Interest::Percent(p("12.3456"), Period::Year, Days::Calendar)),
            ),
            cobv(
                None,
                Some(Discount::PerDayEarly(Amount::Value(m("0.10")), Days::Business)),
                None,
                Some(Interest::Percent(p("1"), Period::Month, Days::Business)),
            ),
        ];
        let plain = encoded(&full());
        for t in cases {
            let bytes = encoded(&t);
            assert_eq!(decode_transaction(&bytes).unwrap(), t);
            // The first format's record, then the section: what it wrote, it still reads.
            assert_eq!(&bytes[..plain.len()], plain.as_slice());
            assert_eq!(bytes[plain.len()], SECTION_COBV);
            let event = OutboxEvent {
                account_id: 5,
                local_id: t.local_id,
                event_type: EventType::CashIn,
                created_at: t.created_at,
                body: EventBody::Transaction(Box::new(t.clone())),
            };
            let mut out = Vec::new();
            encode_event(&event, &mut out);
            assert_eq!(decode_event(&out).unwrap(), event, "inside an outbox event too");
        }
        // An unknown section, or a cobv section on a transaction that is no cob, is damage.
        let mut unknown = plain.clone();
        unknown.push(0x7F);
        assert_eq!(decode_transaction(&unknown), Err(CodecError::Bad("section")));
        let mut bare = full();
        bare.charge = None;
        let mut orphan = encoded(&bare);
        orphan.extend_from_slice(&encoded(&cobv(None, None, None, None))[plain.len()..]);
        assert_eq!(decode_transaction(&orphan), Err(CodecError::Bad("cobv section")));
    }

    #[test]
    fn a_binary_transaction_is_a_fraction_of_its_json() {
        let mut cash_out = full();
        cash_out.kind = TxKind::CashOut;
        (cash_out.dict, cash_out.charge, cash_out.refund, cash_out.qr_txid) = (None, None, None, None);
        let json = serde_json::to_vec(&cash_out).unwrap();
        let binary = encoded(&cash_out);
        assert!(binary.len() * 3 < json.len(), "{} vs {}", binary.len(), json.len());
    }

    #[test]
    fn the_json_of_the_release_before_is_still_read() {
        let f = full();
        let json = serde_json::to_vec(&f).unwrap();
        assert_eq!(decode_transaction(&json).unwrap(), f);
        assert_eq!(transaction_summary(&json).unwrap().status, TxStatus::Error);
    }

    #[test]
    fn the_header_names_account_day_kind_and_status_without_a_decode() {
        let f = full();
        let s = transaction_summary(&encoded(&f)).unwrap();
        assert_eq!(
            s,
            TxSummary {
                account_id: 5,
                created_at: f.created_at,
                kind: TxKind::DictPix,
                status: TxStatus::Error
            }
        );
    }

    #[test]
    fn every_cut_and_an_unknown_format_are_refused_never_misread() {
        let bytes = encoded(&full());
        for cut in 0..bytes.len() {
            assert!(decode_transaction(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(decode_transaction(&longer), Err(CodecError::Bad("section")), "no section has tag 0");
        // Inside a section, every cut is refused too. A cut right before it reads as the
        // record without it, as the first format wrote it: records are whole or absent (the
        // journal's checksum and sled's batches see to that), never cut there.
        let cobv = encoded(&cobv(
            Some(Amount::Value(m("1"))),
            Some(Discount::PerDayEarly(Amount::Value(m("0.10")), Days::Calendar)),
            None,
            Some(Interest::ValuePerDay(m("0.01"), Days::Business)),
        ));
        for cut in bytes.len() + 1..cobv.len() {
            assert!(decode_transaction(&cobv[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(decode_transaction(&[0xB2, 1, 2]), Err(CodecError::Format(0xB2)));
    }

    #[test]
    fn ledger_and_hold_round_trip_in_both_formats() {
        let state = LedgerState {
            balance: Balance { available: m("10.50"), blocked: m("1") },
            counters: LimitCounters {
                day: Some((NaiveDate::from_ymd_opt(2026, 11, 23).unwrap(), m("3"))),
                night: None,
            },
            totals: Totals { credited: m("11.50"), debited: m("0") },
        };
        let mut out = Vec::new();
        encode_ledger(&state, &mut out);
        assert_eq!(decode_ledger(&out).unwrap(), state);
        assert_eq!(decode_ledger(&serde_json::to_vec(&state).unwrap()).unwrap(), state);
        assert_eq!(decode_hold(&encode_hold(m("10.60"))).unwrap(), m("10.60"));
        assert_eq!(decode_hold(&serde_json::to_vec(&m("10.60")).unwrap()).unwrap(), m("10.60"));
    }

    #[test]
    fn a_payment_on_the_spi_rail_keeps_its_rail_section_and_reads_back() {
        let plain = encoded(&full());
        for rail in [
            RailDetails::default(),
            RailDetails {
                instrument: Some("DICT".into()),
                creditor_document: Some("11222333000181".into()),
                creditor_account_type: Some("CACC".into()),
                reason: Some("AC03".into()),
                risk: None,
            },
        ] {
            let t = Transaction { rail: Some(rail), ..full() };
            let bytes = encoded(&t);
            assert_eq!(decode_transaction(&bytes).unwrap(), t);
            assert_eq!(
                &bytes[..plain.len()],
                plain.as_slice(),
                "the first format's record, then the section"
            );
            assert_eq!(bytes[plain.len()], SECTION_RAIL);
        }
    }

    #[test]
    fn a_flagged_payment_keeps_its_risk_section_after_the_rail_section_and_reads_back() {
        let rail = RailDetails { instrument: Some("DICT".into()), ..RailDetails::default() };
        let unflagged = encoded(&Transaction { rail: Some(rail.clone()), ..full() });
        let why = "infraction reports are open against the payee's key or its owner";
        let t = Transaction { rail: Some(RailDetails { risk: Some(why.into()), ..rail }), ..full() };
        let bytes = encoded(&t);
        assert_eq!(decode_transaction(&bytes).unwrap(), t);
        assert_eq!(&bytes[..unflagged.len()], unflagged.as_slice(), "the unflagged record, then the section");
        assert_eq!(bytes[unflagged.len()], SECTION_RISK);
        // A risk section with no rail section before it is not a record this release wrote.
        let plain = encoded(&full());
        let mut stray = plain.clone();
        stray.push(SECTION_RISK);
        stray.extend_from_slice(b"\x01x");
        assert_eq!(decode_transaction(&stray), Err(CodecError::Bad("risk section")));
        let with_operator = Transaction { operator: Some("ops".into()), ..t };
        assert_eq!(decode_transaction(&encoded(&with_operator)).unwrap(), with_operator);
    }

    #[test]
    fn an_operators_move_keeps_its_operator_section_and_reads_back() {
        let plain = encoded(&full());
        let t = Transaction { operator: Some("ops-ana".into()), ..full() };
        let bytes = encoded(&t);
        assert_eq!(decode_transaction(&bytes).unwrap(), t);
        assert_eq!(&bytes[..plain.len()], plain.as_slice(), "the first format's record, then the section");
        assert_eq!(&bytes[plain.len()..], b"\x03\x07ops-ana");
        let both = Transaction { rail: Some(RailDetails::default()), ..t };
        assert_eq!(decode_transaction(&encoded(&both)).unwrap(), both, "sections follow one another");
    }

    #[test]
    fn an_event_keeps_its_transaction_and_builds_the_same_payload() {
        let mut tx = full();
        tx.kind = TxKind::CashOut;
        let e = event_for(&tx, at("2026-11-23T05:00:00Z")).unwrap();
        let mut out = Vec::new();
        encode_event(&e, &mut out);
        let back = decode_event(&out).unwrap();
        assert_eq!(back, e);
        assert_eq!(back.payload(), e.payload());
        assert_eq!(
            event_header(&out).unwrap(),
            EventHeader { account_id: 5, local_id: 123_456_789, event_type: EventType::CashOut }
        );
        let med =
            OutboxEvent { body: EventBody::Json(serde_json::json!({"event": "MedCreated"})), ..e.clone() };
        out.clear();
        encode_event(&med, &mut out);
        assert_eq!(decode_event(&out).unwrap(), med);
        // The JSON event of the release before: its payload as it was written.
        let old = serde_json::json!({
            "accountId": 5, "localId": 7, "eventType": "cash_out",
            "createdAt": "2026-11-23T05:00:00Z", "payload": {"event": "CashOut"}
        });
        let old = serde_json::to_vec(&old).unwrap();
        assert_eq!(event_header(&old).unwrap().local_id, 7);
        assert_eq!(decode_event(&old).unwrap().payload(), serde_json::json!({"event": "CashOut"}));
    }
}
