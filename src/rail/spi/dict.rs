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

fn stamp(at: DateTime<Utc>) -> String {
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
        let _ = write!(
            out,
            "<KeyType>{}</KeyType><Account><Participant>{}</Participant>",
            escape_text(&self.key_type),
            self.participant
        );
        if let Some(b) = &self.branch {
            let _ = write!(out, "<Branch>{}</Branch>", escape_text(b));
        }
        let _ = write!(
            out,
            "<AccountNumber>{}</AccountNumber><AccountType>{}</AccountType><OpeningDate>{}</OpeningDate></Account><Owner><Type>{}</Type><TaxIdNumber>{}</TaxIdNumber><Name>{}</Name>",
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
        out.push_str("</Owner>");
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

    /// Reads an `Entry` element (the key may be absent in a create request: `""`).
    pub fn read(e: &Element) -> Result<Entry, String> {
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
        let key_type = text(&["KeyType"])?;
        if !KEY_TYPES.contains(&key_type.as_str()) {
            return Err(format!("{key_type} is not a key type"));
        }
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
pub fn create_request(entry: &Entry, reason: &str, request_id: &uuid::Uuid) -> String {
    let with_key = !(entry.key_type == "EVP" && entry.key.is_empty());
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CreateEntryRequest>{}<Reason>{}</Reason><RequestId>{request_id}</RequestId></CreateEntryRequest>",
        entry.write(with_key, false),
        escape_text(reason)
    )
}

/// A `DeleteEntryRequest`, unsigned.
pub fn delete_request(key: &str, participant: &Ispb, reason: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><DeleteEntryRequest><Key>{}</Key><Participant>{participant}</Participant><Reason>{}</Reason></DeleteEntryRequest>",
        escape_text(key),
        escape_text(reason)
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
}
