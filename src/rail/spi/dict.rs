//! The DICT's XML bodies (API 2.x, `application/xml`, no namespace; errors are RFC 7807
//! `problem` documents), written and read here for both ends: pixgw's client
//! ([`super::directory`]) and the simulator's DICT.
//!
//! - `GET /entries/{Key}` (headers `PI-RequestingParticipant`, `PI-PayerId`,
//!   `PI-EndToEndId`) answers a signed `GetEntryResponse` with the key's `Entry`: its account
//!   at a participant and its owner.
//! - `POST /entries/` takes a signed `CreateEntryRequest` (an EVP key is made by the DICT
//!   when the request names none) and answers a signed `CreateEntryResponse`.
//! - `POST /entries/{Key}/delete` takes a signed `DeleteEntryRequest`.
//! - `PUT /entries/{Key}` takes a signed `UpdateEntryRequest` (the entry's account, its
//!   owner's name and trade name, with a reason the key's type allows) and answers a signed
//!   `UpdateEntryResponse` with the entry as it now is.
//! - `GET /refunds/?Participant=...&Role=CONTESTED&Status=OPEN` answers a signed
//!   `ListRefundsResponse`: the MED's refund requests against the participant's payments.
//! - `POST /refunds/{RefundId}/close` takes a signed `CloseRefundRequest` (the analysis, and
//!   the return that gave the money back) and answers a signed `CloseRefundResponse`.
//!
//! Field order in answers may change (the API says so), so readers look fields up by name.

use std::fmt::Write;

use chrono::{DateTime, Utc};

use super::message::Ispb;
use super::xml::{escape_text, Document, Element};

/// The key types of the DICT.
pub const KEY_TYPES: [&str; 5] = ["CPF", "CNPJ", "PHONE", "EMAIL", "EVP"];
/// The longest key.
pub const KEY_LEN_MAX: usize = 77;
/// The longest owner name (API 2.x).
pub const OWNER_NAME_LEN_MAX: usize = 150;

/// A key and what it points to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub key_type: String,
    pub participant: Ispb,
    pub branch: Option<String>,
    pub account_number: String,
    /// CACC, TRAN, SVGS, SLRY or OTHR.
    pub account_type: String,
    pub opening_date: DateTime<Utc>,
    /// NATURAL_PERSON or LEGAL_PERSON.
    pub owner_type: String,
    pub tax_id: String,
    pub name: String,
    pub trade_name: Option<String>,
    pub creation_date: DateTime<Utc>,
    pub key_ownership_date: DateTime<Utc>,
}

pub(crate) fn stamp(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// The owner type of a tax id: 11 digits a person, 14 characters a company.
pub fn owner_type_of(tax_id: &str) -> &'static str {
    if tax_id.len() == 11 {
        "NATURAL_PERSON"
    } else {
        "LEGAL_PERSON"
    }
}

impl Entry {
    /// The `Entry` element. `with_key` false leaves the key out (an EVP the DICT makes);
    /// `extended` adds the dates the DICT answers with.
    pub fn write(&self, with_key: bool, extended: bool) -> String {
        let mut out = String::with_capacity(600);
        out.push_str("<Entry>");
        if with_key {
            let _ = write!(out, "<Key>{}</Key>", escape_text(&self.key));
        }
        let _ = write!(out, "<KeyType>{}</KeyType>", escape_text(&self.key_type));
        self.write_holder(&mut out, "Account", "Owner");
        if extended {
            let _ = write!(
                out,
                "<CreationDate>{}</CreationDate><KeyOwnershipDate>{}</KeyOwnershipDate>",
                stamp(self.creation_date),
                stamp(self.key_ownership_date)
            );
        }
        out.push_str("</Entry>");
        out
    }

    /// The account (a `BrazilianAccount` named `account`) and its holder (a `Person` named
    /// `owner`): an entry's `Account` and `Owner`, a claim's `ClaimerAccount` and `Claimer`.
    pub(crate) fn write_holder(&self, out: &mut String, account: &str, owner: &str) {
        let _ = write!(out, "<{account}><Participant>{}</Participant>", self.participant);
        if let Some(b) = &self.branch {
            let _ = write!(out, "<Branch>{}</Branch>", escape_text(b));
        }
        let _ = write!(
            out,
            "<AccountNumber>{}</AccountNumber><AccountType>{}</AccountType><OpeningDate>{}</OpeningDate></{account}><{owner}><Type>{}</Type><TaxIdNumber>{}</TaxIdNumber><Name>{}</Name>",
            escape_text(&self.account_number),
            escape_text(&self.account_type),
            stamp(self.opening_date),
            escape_text(&self.owner_type),
            escape_text(&self.tax_id),
            escape_text(&self.name)
        );
        if let Some(t) = &self.trade_name {
            let _ = write!(out, "<TradeName>{}</TradeName>", escape_text(t));
        }
        let _ = write!(out, "</{owner}>");
    }

    /// Reads an `Entry` element (the key may be absent in a create request: `""`).
    pub fn read(e: &Element) -> Result<Entry, String> {
        let key_type = e.text_at(&["KeyType"]).filter(|t| !t.is_empty()).ok_or("Entry/KeyType is missing")?;
        if !KEY_TYPES.contains(&key_type.as_str()) {
            return Err(format!("{key_type} is not a key type"));
        }
        Entry::read_as(e, key_type)
    }

    /// Reads an element holding an entry's `Key`, `Account` and `Owner` (and its dates, when
    /// it has them), with the key type given.
    fn read_as(e: &Element, key_type: String) -> Result<Entry, String> {
        let text = |path: &[&str]| -> Result<String, String> {
            e.text_at(path)
                .filter(|t| !t.is_empty())
                .ok_or_else(|| format!("Entry/{} is missing", path.join("/")))
        };
        let time = |path: &[&str]| -> Result<DateTime<Utc>, String> {
            match e.text_at(path) {
                None => Ok(DateTime::<Utc>::UNIX_EPOCH),
                Some(t) => DateTime::parse_from_rfc3339(&t)
                    .map(|d| d.with_timezone(&Utc))
                    .map_err(|_| format!("Entry/{} is not a date-time", path.join("/"))),
            }
        };
        let participant = text(&["Account", "Participant"])?;
        Ok(Entry {
            key: e.text_at(&["Key"]).unwrap_or_default(),
            key_type,
            participant: Ispb::parse(&participant).ok_or_else(|| format!("{participant} is not an ISPB"))?,
            branch: e.text_at(&["Account", "Branch"]).filter(|b| !b.is_empty()),
            account_number: text(&["Account", "AccountNumber"])?,
            account_type: text(&["Account", "AccountType"])?,
            opening_date: time(&["Account", "OpeningDate"])?,
            owner_type: text(&["Owner", "Type"])?,
            tax_id: text(&["Owner", "TaxIdNumber"])?,
            name: text(&["Owner", "Name"])?,
            trade_name: e.text_at(&["Owner", "TradeName"]).filter(|t| !t.is_empty()),
            creation_date: time(&["CreationDate"])?,
            key_ownership_date: time(&["KeyOwnershipDate"])?,
        })
    }
}

/// A `GetEntryResponse` or `CreateEntryResponse` (`root`), unsigned.
pub fn entry_response(root: &str, entry: &Entry, correlation_id: &str, now: DateTime<Utc>) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><{root}><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId>{}</{root}>",
        stamp(now),
        entry.write(true, true)
    )
}

/// A `DeleteEntryResponse`, unsigned.
pub fn delete_response(key: &str, correlation_id: &str, now: DateTime<Utc>) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><DeleteEntryResponse><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId><Key>{}</Key></DeleteEntryResponse>",
        stamp(now),
        escape_text(key)
    )
}

/// A `CreateEntryRequest`, unsigned: an EVP entry without a key asks the DICT to make one.
/// The `RequestId` of a registration: a UUID v4 in form, drawn from the SHA-256 of what
/// the registration is (the participant, the account, the key's type and value, and how many
/// keys the account had registered before), so the same registration tried again after a
/// failure is the same request, which the DICT answers as it did the first time, and
/// another registration (a second EVP of the account) is another request.
pub fn request_id_of(participant: &Ispb, account: u64, key_type: &str, key: &str, nth: usize) -> uuid::Uuid {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for part in [participant.as_str(), &account.to_string(), key_type, key, &nth.to_string()] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

pub fn create_request(entry: &Entry, reason: &str, request_id: &uuid::Uuid) -> String {
    let with_key = !(entry.key_type == "EVP" && entry.key.is_empty());
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CreateEntryRequest>{}<Reason>{}</Reason><RequestId>{request_id}</RequestId></CreateEntryRequest>",
        entry.write(with_key, false),
        escape_text(reason)
    )
}

/// The reasons an entry's update may give (API 2.12.1, `updateEntry`).
pub const UPDATE_REASONS: [&str; 4] =
    ["USER_REQUESTED", "BRANCH_TRANSFER", "RECONCILIATION", "RFB_VALIDATION"];

/// Whether an update of a key of `key_type` may give `reason`: an EVP, which its holder did
/// not choose, is not updated because the user asked (`USER_REQUESTED`); every other
/// reason of [`UPDATE_REASONS`] goes for every type.
pub fn update_reason_allowed(key_type: &str, reason: &str) -> bool {
    UPDATE_REASONS.contains(&reason) && !(key_type == "EVP" && reason == "USER_REQUESTED")
}

/// Whether an update the DICT refused (its problem type, first in `refusal`) may go later:
/// a claim in progress locks the entry, and another operation on it is a conflict of the
/// moment. Every other refusal is final.
pub fn update_waits(refusal: &str) -> bool {
    let kind = refusal.split(':').next().unwrap_or_default().trim();
    matches!(kind, "EntryLockedByClaim" | "ResourceConflict")
}

/// An `UpdateEntryRequest`, unsigned: the entry's key, its account and owner as they now
/// are, and why.
pub fn update_request(entry: &Entry, reason: &str) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><UpdateEntryRequest><Key>{}</Key>",
        escape_text(&entry.key)
    );
    entry.write_holder(&mut out, "Account", "Owner");
    let _ = write!(out, "<Reason>{}</Reason></UpdateEntryRequest>", escape_text(reason));
    out
}

/// What an `UpdateEntryRequest` asks: the key, the reason, and the entry as the request
/// would have it (its key type and dates are the DICT's, left at their defaults here).
pub fn read_update_request(doc: &Document) -> Result<(String, String, Entry), String> {
    let root = &doc.root;
    let key = root.text_at(&["Key"]).map(|k| k.trim().to_owned()).filter(|k| !k.is_empty());
    let key = key.ok_or("Key is missing")?;
    let reason = root.text_at(&["Reason"]).map(|r| r.trim().to_owned()).ok_or("Reason is missing")?;
    // The request carries no KeyType: its Account and Owner are read as an entry's, and
    // the key type is left empty for the DICT to take from the entry it holds.
    let entry = Entry::read_as(root, String::new())?;
    Ok((key, reason, entry))
}

/// A `DeleteEntryRequest`, unsigned.
pub fn delete_request(key: &str, participant: &Ispb, reason: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><DeleteEntryRequest><Key>{}</Key><Participant>{participant}</Participant><Reason>{}</Reason></DeleteEntryRequest>",
        escape_text(key),
        escape_text(reason)
    )
}

/// A refund request of the MED (`Refund`): the payer's participant asks the payee's (the
/// contested one) to give back a payment, for fraud or an operational flaw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refund {
    pub id: String,
    /// The end-to-end id of the payment to give back.
    pub transaction_id: String,
    /// `FRAUD` or `OPERATION_FLAW`.
    pub reason: String,
    pub amount: crate::domain::money::Money,
    pub details: Option<String>,
    /// `OPEN`, `CLOSED` or `CANCELLED`.
    pub status: String,
    pub contested: String,
    pub requesting: String,
    pub created: DateTime<Utc>,
    pub modified: DateTime<Utc>,
    /// `TOTALLY_ACCEPTED`, `PARTIALLY_ACCEPTED` or `REJECTED`, once closed.
    pub analysis_result: Option<String>,
    pub analysis_details: Option<String>,
    /// The return that gave the money back (its `RtrId`), once accepted.
    pub refund_transaction_id: Option<String>,
    /// The funds recovery (MED 2.0) that asked for it, if one did.
    pub funds_recovery_id: Option<String>,
}

/// Refund requests one list answer holds at most (the API's `Limit` maximum).
pub const REFUNDS_LIST_MAX: usize = 200;
/// The refund reasons of the DICT.
pub const REFUND_REASONS: [&str; 2] = ["FRAUD", "OPERATION_FLAW"];
/// The analysis results a refund request closes with.
pub const REFUND_RESULTS: [&str; 3] = ["TOTALLY_ACCEPTED", "PARTIALLY_ACCEPTED", "REJECTED"];

impl Refund {
    pub fn write(&self) -> String {
        let mut out = format!(
            "<Refund><TransactionId>{}</TransactionId><RefundReason>{}</RefundReason><RefundAmount>{}</RefundAmount>",
            escape_text(&self.transaction_id),
            escape_text(&self.reason),
            self.amount.to_cents_string()
        );
        if let Some(d) = &self.details {
            let _ = write!(out, "<RefundDetails>{}</RefundDetails>", escape_text(d));
        }
        if let Some(f) = &self.funds_recovery_id {
            let _ = write!(out, "<FundsRecoveryId>{}</FundsRecoveryId>", escape_text(f));
        }
        let _ = write!(
            out,
            "<Id>{}</Id><Status>{}</Status><ContestedParticipant>{}</ContestedParticipant><RequestingParticipant>{}</RequestingParticipant><CreationTime>{}</CreationTime><LastModified>{}</LastModified>",
            escape_text(&self.id),
            escape_text(&self.status),
            escape_text(&self.contested),
            escape_text(&self.requesting),
            stamp(self.created),
            stamp(self.modified)
        );
        if let Some(r) = &self.analysis_result {
            let _ = write!(out, "<AnalysisResult>{}</AnalysisResult>", escape_text(r));
        }
        if let Some(d) = &self.analysis_details {
            let _ = write!(out, "<AnalysisDetails>{}</AnalysisDetails>", escape_text(d));
        }
        if let Some(t) = &self.refund_transaction_id {
            let _ = write!(out, "<RefundTransactionId>{}</RefundTransactionId>", escape_text(t));
        }
        out.push_str("</Refund>");
        out
    }

    pub fn read(e: &Element) -> Result<Refund, String> {
        let text = |name: &str| -> Result<String, String> {
            e.text_at(&[name])
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .ok_or_else(|| format!("Refund/{name} is missing"))
        };
        let optional = |name: &str| e.text_at(&[name]).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
        let time = |name: &str| -> Result<DateTime<Utc>, String> {
            DateTime::parse_from_rfc3339(&text(name)?)
                .map(|d| d.with_timezone(&Utc))
                .map_err(|_| format!("Refund/{name} is not a date-time"))
        };
        let amount = text("RefundAmount")?;
        Ok(Refund {
            id: text("Id")?,
            transaction_id: text("TransactionId")?,
            reason: text("RefundReason")?,
            amount: crate::domain::money::Money::parse_two_places(&amount)
                .ok_or_else(|| format!("Refund/RefundAmount {amount} is not an amount"))?,
            details: optional("RefundDetails"),
            status: text("Status")?,
            contested: text("ContestedParticipant")?,
            requesting: text("RequestingParticipant")?,
            created: time("CreationTime")?,
            modified: time("LastModified")?,
            analysis_result: optional("AnalysisResult"),
            analysis_details: optional("AnalysisDetails"),
            refund_transaction_id: optional("RefundTransactionId"),
            funds_recovery_id: optional("FundsRecoveryId"),
        })
    }
}

/// A `ListRefundsResponse`, unsigned.
pub fn list_refunds_response(
    refunds: &[Refund],
    more: bool,
    correlation_id: &str,
    now: DateTime<Utc>,
) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListRefundsResponse><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId><HasMoreElements>{more}</HasMoreElements><Refunds>",
        stamp(now)
    );
    for r in refunds {
        out.push_str(&r.write());
    }
    out.push_str("</Refunds></ListRefundsResponse>");
    out
}

/// The refunds of a `ListRefundsResponse`, and whether more follow.
pub fn read_refunds(doc: &Document) -> Result<(Vec<Refund>, bool), String> {
    let list = doc.root.child("Refunds").ok_or("the answer has no Refunds")?;
    let refunds =
        list.elements().filter(|e| &*e.local == "Refund").map(Refund::read).collect::<Result<_, _>>()?;
    Ok((refunds, doc.root.text_at(&["HasMoreElements"]).is_some_and(|t| t.trim() == "true")))
}

/// A `CloseRefundRequest`, unsigned.
pub fn close_refund_request(
    id: &str,
    participant: &Ispb,
    result: &str,
    details: Option<&str>,
    refund_transaction_id: Option<&str>,
) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CloseRefundRequest><RefundId>{}</RefundId><Participant>{participant}</Participant><RefundAnalysisResult>{}</RefundAnalysisResult>",
        escape_text(id),
        escape_text(result)
    );
    if let Some(d) = details {
        let _ = write!(out, "<RefundAnalysisDetails>{}</RefundAnalysisDetails>", escape_text(d));
    }
    if let Some(t) = refund_transaction_id {
        let _ = write!(out, "<RefundTransactionId>{}</RefundTransactionId>", escape_text(t));
    }
    out.push_str("</CloseRefundRequest>");
    out
}

/// A `CloseRefundResponse`, unsigned.
pub fn close_refund_response(refund: &Refund, correlation_id: &str, now: DateTime<Utc>) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CloseRefundResponse><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId>{}</CloseRefundResponse>",
        stamp(now),
        refund.write()
    )
}

/// An RFC 7807 problem of the DICT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The last part of its `type` (`NotFound`, `RateLimited`, `EntryAlreadyExists`...).
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: Option<String>,
}

impl Problem {
    pub fn write(&self) -> String {
        let mut out = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><problem xmlns=\"urn:ietf:rfc:7807\"><type>https://dict.pi.rsfn.net.br/api/v2/error/{}</type><title>{}</title><status>{}</status>",
            escape_text(&self.kind),
            escape_text(&self.title),
            self.status
        );
        if let Some(d) = &self.detail {
            let _ = write!(out, "<detail>{}</detail>", escape_text(d));
        }
        out.push_str("</problem>");
        out
    }

    pub fn read(doc: &Document) -> Option<Problem> {
        let r = &doc.root;
        if &*r.local != "problem" {
            return None;
        }
        let kind = r.text_at(&["type"])?.rsplit('/').next()?.to_owned();
        Some(Problem {
            kind,
            title: r.text_at(&["title"]).unwrap_or_default(),
            status: r.text_at(&["status"]).and_then(|s| s.trim().parse().ok()).unwrap_or(0),
            detail: r.text_at(&["detail"]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_tried_again_has_its_request_id_and_another_one_its_own() {
        let ispb = Ispb::parse("1234ABCD").unwrap();
        let id = request_id_of(&ispb, 7, "EVP", "", 0);
        assert_eq!(id, request_id_of(&ispb, 7, "EVP", "", 0), "the same registration again");
        assert_eq!(id.get_version_num(), 4, "a UUID v4 in form, as the API asks");
        assert_ne!(id, request_id_of(&ispb, 7, "EVP", "", 1), "the account's second EVP");
        assert_ne!(id, request_id_of(&ispb, 8, "EVP", "", 0), "another account");
        assert_ne!(
            request_id_of(&ispb, 7, "EMAIL", "a@b.c", 0),
            request_id_of(&ispb, 7, "EMAIL", "a@b.cd", 0)
        );
    }

    #[test]
    fn an_evp_is_not_updated_because_its_user_asked_and_every_other_reason_goes_for_every_type() {
        for key_type in KEY_TYPES {
            for reason in ["BRANCH_TRANSFER", "RECONCILIATION", "RFB_VALIDATION"] {
                assert!(update_reason_allowed(key_type, reason), "{key_type} {reason}");
            }
            assert_eq!(update_reason_allowed(key_type, "USER_REQUESTED"), key_type != "EVP", "{key_type}");
            for never in ["ACCOUNT_CLOSURE", "FRAUD", "", "rfb_validation"] {
                assert!(!update_reason_allowed(key_type, never), "{key_type} {never:?}");
            }
        }
    }

    #[test]
    fn an_update_refused_for_a_claim_or_a_conflict_waits_and_any_other_refusal_is_final() {
        assert!(update_waits("EntryLockedByClaim: a claim in progress locks the entry"));
        assert!(update_waits("ResourceConflict: busy"));
        for final_ in
            ["Forbidden: another's", "InvalidReason: no", "EntryInvalid: x", "", "EntryLockedByClaimX: y"]
        {
            assert!(!update_waits(final_), "{final_:?}");
        }
    }

    #[test]
    fn an_update_request_reads_back_its_key_reason_account_and_owner() {
        let mut e = entry();
        e.name = "Ana <Souza> & Filhos".into();
        e.trade_name = Some("Ana's".into());
        let doc = Document::parse(update_request(&e, "RFB_VALIDATION").as_bytes()).unwrap();
        assert_eq!(&*doc.root.local, "UpdateEntryRequest");
        let (key, reason, read) = read_update_request(&doc).unwrap();
        assert_eq!((key.as_str(), reason.as_str()), (e.key.as_str(), "RFB_VALIDATION"));
        assert_eq!((read.name.as_str(), read.trade_name.as_deref()), ("Ana <Souza> & Filhos", Some("Ana's")));
        assert_eq!(
            (read.tax_id, read.account_number, read.participant),
            (e.tax_id, e.account_number, e.participant)
        );
        assert_eq!(read.key_type, "", "the request names no key type");
        let no_key = "<UpdateEntryRequest><Reason>RFB_VALIDATION</Reason></UpdateEntryRequest>";
        assert!(read_update_request(&Document::parse(no_key.as_bytes()).unwrap()).is_err());
    }

    fn entry() -> Entry {
        let t = DateTime::parse_from_rfc3339("2026-11-26T10:00:00Z").unwrap().with_timezone(&Utc);
        Entry {
            key: "ana@example.com".into(),
            key_type: "EMAIL".into(),
            participant: Ispb::parse("1234ABCD").unwrap(),
            branch: Some("1".into()),
            account_number: "42".into(),
            account_type: "TRAN".into(),
            opening_date: t,
            owner_type: "NATURAL_PERSON".into(),
            tax_id: "52998224725".into(),
            name: "Ana & Cia".into(),
            trade_name: None,
            creation_date: t,
            key_ownership_date: t,
        }
    }

    #[test]
    fn an_entry_reads_back_from_every_body_it_travels_in() {
        let e = entry();
        let answer =
            entry_response("GetEntryResponse", &e, "0123456789abcdef0123456789abcdef", e.creation_date);
        let d = Document::parse(answer.as_bytes()).unwrap();
        assert_eq!(Entry::read(d.root.child("Entry").unwrap()).unwrap(), e);
        let evp = Entry { key: String::new(), key_type: "EVP".into(), ..e.clone() };
        let req = create_request(&evp, "USER_REQUESTED", &uuid::Uuid::nil());
        assert!(!req.contains("<Key>"), "an EVP is made by the DICT");
        let d = Document::parse(req.as_bytes()).unwrap();
        assert_eq!(Entry::read(d.root.child("Entry").unwrap()).unwrap().key, "");
    }

    #[test]
    fn a_problem_reads_back() {
        let p = Problem {
            kind: "NotFound".into(),
            title: "Not found".into(),
            status: 404,
            detail: Some("no entry".into()),
        };
        assert_eq!(Problem::read(&Document::parse(p.write().as_bytes()).unwrap()), Some(p));
        assert_eq!(Problem::read(&Document::parse(b"<x/>").unwrap()), None);
    }

    #[test]
    fn the_dict_apis_refund_examples_read_back_and_a_close_request_has_their_fields() {
        let doc =
            Document::parse(include_bytes!("../../../tests/data/dict/ListRefundsResponse.xml")).unwrap();
        let (refunds, more) = read_refunds(&doc).unwrap();
        assert!(more);
        let r = &refunds[0];
        assert_eq!(
            (r.id.as_str(), r.transaction_id.as_str()),
            ("91d65e98-97c0-4b0f-b577-73625da1f9fc", "E9999901012341234123412345678900")
        );
        assert_eq!(
            (r.reason.as_str(), r.amount.to_cents_string().as_str(), r.status.as_str()),
            ("FRAUD", "200.00", "CLOSED")
        );
        assert_eq!((r.contested.as_str(), r.requesting.as_str()), ("99999010", "99999011"));
        assert_eq!(r.analysis_result.as_deref(), Some("TOTALLY_ACCEPTED"));
        assert_eq!(r.analysis_details.as_deref(), Some("Valor totalemente extornado."));
        assert_eq!(r.refund_transaction_id.as_deref(), Some("D9999901012341234123412345678900"));
        // What pixgw writes reads back the same.
        let again =
            Document::parse(list_refunds_response(&refunds, false, "c", Utc::now()).as_bytes()).unwrap();
        assert_eq!(read_refunds(&again).unwrap(), (refunds.clone(), false));
        // A close request carries the example's elements, in its order.
        let ours = close_refund_request(
            "91d65e98-97c0-4b0f-b577-73625da1f9fc",
            &Ispb::parse("12345678").unwrap(),
            "TOTALLY_ACCEPTED",
            Some("Valor totalmente extornado ao demandante."),
            Some("D9999901012341234123412345678900"),
        );
        let names = |xml: &[u8]| {
            let doc = Document::parse(xml).unwrap();
            let texts: Vec<(String, String)> = doc
                .root
                .elements()
                .filter(|e| &*e.local != "Signature")
                .map(|e| (e.local.to_string(), e.text().trim().to_owned()))
                .collect();
            texts
        };
        assert_eq!(
            names(ours.as_bytes()),
            names(include_bytes!("../../../tests/data/dict/CloseRefundRequest.xml"))
        );
    }
}
