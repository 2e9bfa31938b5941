//! The messages pixgw sends, made from what it stored: a payout's pacs.008 or pacs.004, and
//! the pacs.002 that answers what it received. Pure: the same transaction makes the same
//! message (but its creation time), so a message sent again after a crash is the same
//! message, with the same `BizMsgIdr`, and the SPI takes it once.
//!
//! Message ids: a payment's is `M` + ISPB + the last 23 characters of its end-to-end id (a
//! return's, of its return id), which are unique to it; an answer's is `M` + ISPB + 23
//! characters of the SHA-256 of what it answers, so answering the same thing again repeats
//! the id too.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use super::message::{
    AccountType, Body, CreditTransfer, Instrument, Ispb, Message, Priority, Purpose, Return, ReturnReason,
    StatusReport, UserAccount, REMITTANCE_LEN_MAX,
};
use crate::domain::transaction::{Natureza, Transaction, TxKind};
use crate::rail::Payer;

/// The message id of the message that carries the payment or return `id` (32 characters).
pub fn msg_id_of(ispb: &Ispb, id: &str) -> String {
    format!("M{ispb}{}", id.get(9..).unwrap_or(""))
}

/// The payment or return ids a message id made by [`msg_id_of`] may stand for.
pub fn ids_of_msg_id(ispb: &Ispb, msg_id: &str) -> Option<[String; 2]> {
    let tail = msg_id.strip_prefix('M')?.strip_prefix(ispb.as_str())?;
    (tail.len() == 23).then(|| [format!("E{ispb}{tail}"), format!("D{ispb}{tail}")])
}

/// An account number as the catalogue takes it: digits and upper-case letters, at most 20.
fn account_number(text: &str) -> String {
    text.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_uppercase()).take(20).collect()
}

/// A branch as the catalogue takes it: up to four digits.
fn branch(text: Option<&str>) -> Option<String> {
    text.map(|b| b.chars().filter(char::is_ascii_digit).collect::<String>())
        .filter(|b| !b.is_empty() && b.len() <= 4)
}

/// The account of ours a payment leaves from (a payment account numbered by account id).
pub fn our_account(ispb: &Ispb, payer: &Payer) -> UserAccount {
    UserAccount {
        ispb: ispb.clone(),
        branch: None,
        number: payer.account.to_string(),
        kind: AccountType::Payment,
    }
}

/// A payout's pacs.008 (cash-out, QR cash-out, `/dict/pix`, split) from participant `ispb`.
pub fn payment(ispb: &Ispb, tx: &Transaction, payer: &Payer, now: DateTime<Utc>) -> Result<Message, String> {
    let rail = tx.rail.as_ref().ok_or("the payment has no SPI details")?;
    let bank = tx.counterpart.bank.as_ref().ok_or("the payment names no payee institution")?;
    let payee_ispb = Ispb::parse(&bank.ispb).ok_or_else(|| format!("{} is not an ISPB", bank.ispb))?;
    let instrument = rail.instrument.as_deref().and_then(Instrument::parse).unwrap_or(Instrument::Key);
    let kind =
        rail.creditor_account_type.as_deref().and_then(AccountType::parse).unwrap_or(AccountType::Current);
    let creditor_document = rail
        .creditor_document
        .clone()
        .or_else(|| tx.counterpart.document.clone())
        .ok_or("the payment names no payee document")?;
    let number = account_number(bank.account_number.as_deref().unwrap_or(""));
    if number.is_empty() {
        return Err("the payee's account has no number".into());
    }
    // A static code without a txid writes `***` in its place: the message then has none.
    let tx_id = tx.qr_txid.clone().filter(|t| {
        instrument.tx_id_lengths().is_some_and(|range| range.contains(&t.len()))
            && t.bytes().all(|b| b.is_ascii_alphanumeric())
    });
    let t = CreditTransfer {
        end_to_end_id: tx.end_to_end_id.clone(),
        tx_id,
        amount: tx.value,
        accepted_at: tx.created_at,
        instrument,
        initiator: None,
        debtor_name: payer.name.chars().take(super::message::NAME_LEN_MAX).collect(),
        debtor_document: payer.document.clone(),
        debtor_account: our_account(ispb, payer),
        creditor_document,
        creditor_account: UserAccount {
            ispb: payee_ispb,
            branch: branch(bank.branch.as_deref()),
            number,
            kind,
        },
        proxy: tx
            .counterpart
            .key
            .clone()
            .filter(|_| instrument.needs_proxy() || instrument == Instrument::Key),
        purpose: Purpose::Payment,
        remittance: tx
            .description
            .as_ref()
            .map(|d| d.chars().take(REMITTANCE_LEN_MAX).collect())
            .filter(|d: &String| !d.is_empty()),
    };
    Ok(Message::new(
        ispb.clone(),
        Ispb::spi(),
        msg_id_of(ispb, &tx.end_to_end_id),
        now,
        Body::CreditTransfers { priority: Priority::Immediate, txs: vec![t] },
    ))
}

/// The return reason of a refund's `natureza`.
pub fn return_reason(n: Natureza) -> ReturnReason {
    match n {
        Natureza::Original => ReturnReason::Requested,
        Natureza::Retirada => ReturnReason::WithdrawalError,
        Natureza::MedOperacional => ReturnReason::BankError,
        Natureza::MedFraude => ReturnReason::Fraud,
    }
}

/// A refund's pacs.004: the money of a PIX this account received goes back to its payer.
pub fn refund(ispb: &Ispb, tx: &Transaction, now: DateTime<Utc>) -> Result<Message, String> {
    let r = tx.refund.as_ref().ok_or("the refund has no refund details")?;
    let payer_bank = tx.counterpart.bank.as_ref().ok_or("the refund names no payer institution")?;
    let payer_ispb =
        Ispb::parse(&payer_bank.ispb).ok_or_else(|| format!("{} is not an ISPB", payer_bank.ispb))?;
    let ret = Return {
        return_id: r.rtr_id.clone(),
        original_end_to_end_id: r.original_end_to_end_id.clone(),
        amount: tx.value,
        priority_immediate: true,
        reason: return_reason(r.natureza),
        additional_info: r
            .reason
            .as_ref()
            .map(|s| s.chars().take(super::message::ADDITIONAL_INFO_LEN_MAX).collect())
            .filter(|s: &String| !s.is_empty()),
        remittance: tx
            .description
            .as_ref()
            .map(|d| d.chars().take(REMITTANCE_LEN_MAX).collect())
            .filter(|d: &String| !d.is_empty()),
        original_debtor_agent: payer_ispb,
        original_creditor_agent: ispb.clone(),
    };
    Ok(Message::new(ispb.clone(), Ispb::spi(), msg_id_of(ispb, &r.rtr_id), now, Body::Returns(vec![ret])))
}

/// The message a payout travels in.
pub fn payout(ispb: &Ispb, tx: &Transaction, payer: &Payer, now: DateTime<Utc>) -> Result<Message, String> {
    match tx.kind {
        TxKind::RefundIn => refund(ispb, tx, now),
        _ => payment(ispb, tx, payer, now),
    }
}

/// The pacs.002 that answers `reports`, with an id that depends only on them.
pub fn answer(ispb: &Ispb, reports: Vec<StatusReport>, now: DateTime<Utc>) -> Message {
    let mut h = Sha256::new();
    for r in &reports {
        h.update(r.original_instruction_id.as_bytes());
        h.update(r.status.code().as_bytes());
    }
    let digest = h.finalize();
    let id = super::message::msg_id(ispb, &digest);
    Message::new(ispb.clone(), Ispb::spi(), id, now, Body::Statuses(reports))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::AccountId;
    use crate::domain::money::Money;
    use crate::domain::transaction::{BankInfo, Counterpart, RailDetails};
    use crate::rail::spi::xml::Document;

    fn ispb() -> Ispb {
        Ispb::parse("1234ABCD").unwrap()
    }

    fn payer() -> Payer {
        Payer { account: AccountId::new(42).unwrap(), name: "Acme".into(), document: "11222333000181".into() }
    }

    fn cash_out() -> Transaction {
        let at = DateTime::parse_from_rfc3339("2026-11-26T10:00:00Z").unwrap().with_timezone(&Utc);
        Transaction {
            end_to_end_id: "E1234ABCD202611261000abcdefghijk".into(),
            description: Some("pedido 7".into()),
            counterpart: Counterpart {
                name: "Fabio".into(),
                document: Some("98369006086".into()),
                key: Some("98369006086".into()),
                key_type: Some(crate::domain::pix_key::DirectoryKeyType::Cpf),
                bank: Some(BankInfo {
                    ispb: "60746948".into(),
                    name: "Bradesco".into(),
                    code: "237".into(),
                    branch: Some("8065".into()),
                    account_number: Some("3815772-5".into()),
                }),
            },
            rail: Some(RailDetails {
                instrument: Some("DICT".into()),
                creditor_document: Some("98369006086".into()),
                creditor_account_type: Some("SVGS".into()),
                reason: None,
                risk: None,
            }),
            ..Transaction::new(
                7,
                uuid::Uuid::nil(),
                AccountId::new(42).unwrap(),
                TxKind::CashOut,
                Money::parse("10").unwrap(),
                at,
            )
        }
    }

    #[test]
    fn a_cash_out_becomes_a_pacs_008_that_reads_back_with_its_ids() {
        let m = payment(&ispb(), &cash_out(), &payer(), Utc::now()).unwrap();
        assert_eq!(m.msg_id, "M1234ABCD202611261000abcdefghijk");
        assert_eq!(ids_of_msg_id(&ispb(), &m.msg_id).unwrap()[0], "E1234ABCD202611261000abcdefghijk");
        let read = Message::read(&Document::parse(m.write().as_bytes()).unwrap()).unwrap();
        let Body::CreditTransfers { txs, .. } = read.body else { panic!() };
        let t = &txs[0];
        assert_eq!(t.creditor_account.number, "38157725");
        assert_eq!(t.creditor_account.kind, AccountType::Savings);
        assert_eq!(t.debtor_account.number, "42");
        assert_eq!(t.proxy.as_deref(), Some("98369006086"));
        assert_eq!(t.remittance.as_deref(), Some("pedido 7"));
        // The same payout again is the same message (but for its creation time).
        let again = payment(&ispb(), &cash_out(), &payer(), m.created).unwrap();
        assert_eq!(again, m);
    }

    #[test]
    fn a_payout_without_what_the_spi_needs_is_not_sent() {
        let mut tx = cash_out();
        tx.rail = None;
        assert!(payment(&ispb(), &tx, &payer(), Utc::now()).is_err());
        let mut tx = cash_out();
        tx.counterpart.bank = None;
        assert!(payment(&ispb(), &tx, &payer(), Utc::now()).is_err());
    }

    #[test]
    fn an_answer_has_the_same_id_for_the_same_reports() {
        let r = StatusReport {
            original_instruction_id: "E1234ABCD202611261000abcdefghijk".into(),
            original_end_to_end_id: "E1234ABCD202611261000abcdefghijk".into(),
            status: super::super::message::TxStatus::Accepted,
            reason: None,
            additional_info: None,
            settled_at: None,
        };
        let a = answer(&ispb(), vec![r.clone()], Utc::now());
        let b = answer(&ispb(), vec![r.clone()], Utc::now());
        assert_eq!(a.msg_id, b.msg_id);
        let rejected = StatusReport {
            status: super::super::message::TxStatus::Rejected,
            reason: Some("AC03".into()),
            ..r
        };
        assert_ne!(answer(&ispb(), vec![rejected], Utc::now()).msg_id, a.msg_id);
    }
}
