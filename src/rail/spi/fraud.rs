//! The DICT's XML bodies of fraud marks and anti-fraud counters (API 2.12.1), written and
//! read here for both ends: pixgw's client ([`super::directory`]) and the simulator's DICT.
//!
//! - `POST /fraud-markers/` takes a signed `CreateFraudMarkerRequest` (`Participant`,
//!   `FraudMarker`: `TaxIdNumber`, `Key`, `FraudType`; and a `RequestId`, its idempotency
//!   key) and answers the mark with its `Id`, `Status` (`REGISTERED`, `CANCELLED`) and times.
//! - `POST /fraud-markers/{Id}/cancel` takes a signed `CancelFraudMarkerRequest`.
//! - `GET /fraud-markers/?Participant=...&TaxIdNumber=...` lists a person's marks.
//! - A lookup with `IncludeStatistics=true` carries `KeyStatistics` and `OwnerStatistics`:
//!   `FraudMarkers` (`ApplicationFrauds`, `MuleAccounts`, `ScammerAccounts`, `OtherFrauds`,
//!   each with `d90`, `m12`, `m60` attributes) and `InfractionReports` (`OpenReports`, ...).

use std::fmt::Write;

use chrono::{DateTime, Utc};

use super::dict::stamp;
use super::message::Ispb;
use super::xml::{escape_text, Document, Element};
use crate::domain::risk::{Counters, Signals, Windowed};

/// The fraud types a mark may have (`UNKNOWN` is the API 1.x's, refused in 2.x).
pub const FRAUD_TYPES: [&str; 4] = ["APPLICATION_FRAUD", "MULE_ACCOUNT", "SCAMMER_ACCOUNT", "OTHER"];

/// A fraud mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FraudMarker {
    pub tax_id: String,
    pub key: Option<String>,
    pub fraud_type: String,
    /// The DICT's, once made.
    pub id: String,
    /// `REGISTERED` or `CANCELLED`.
    pub status: String,
    pub created: DateTime<Utc>,
    pub modified: DateTime<Utc>,
}

impl FraudMarker {
    /// The `FraudMarker` element; `extended` adds the DICT's fields.
    pub fn write(&self, extended: bool) -> String {
        let mut out = format!("<FraudMarker><TaxIdNumber>{}</TaxIdNumber>", escape_text(&self.tax_id));
        if let Some(k) = &self.key {
            let _ = write!(out, "<Key>{}</Key>", escape_text(k));
        }
        let _ = write!(out, "<FraudType>{}</FraudType>", escape_text(&self.fraud_type));
        if extended {
            let _ = write!(
                out,
                "<Id>{}</Id><Status>{}</Status><CreationTime>{}</CreationTime><LastModified>{}</LastModified>",
                escape_text(&self.id),
                escape_text(&self.status),
                stamp(self.created),
                stamp(self.modified)
            );
        }
        out.push_str("</FraudMarker>");
        out
    }

    pub fn read(e: &Element) -> Result<FraudMarker, String> {
        let text = |n: &str| e.text_at(&[n]).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
        let time = |n: &str| {
            text(n)
                .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
                .map_or(DateTime::<Utc>::UNIX_EPOCH, |d| d.with_timezone(&Utc))
        };
        let fraud_type = text("FraudType").ok_or("FraudMarker/FraudType is missing")?;
        if !FRAUD_TYPES.contains(&fraud_type.as_str()) {
            return Err(format!("FraudMarker/FraudType {fraud_type} is not a fraud type"));
        }
        Ok(FraudMarker {
            tax_id: text("TaxIdNumber").ok_or("FraudMarker/TaxIdNumber is missing")?,
            key: text("Key"),
            fraud_type,
            id: text("Id").unwrap_or_default(),
            status: text("Status").unwrap_or_default(),
            created: time("CreationTime"),
            modified: time("LastModified"),
        })
    }
}

/// A `CreateFraudMarkerRequest`, unsigned.
pub fn create_request(participant: &Ispb, marker: &FraudMarker, request_id: &uuid::Uuid) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CreateFraudMarkerRequest><Participant>{participant}</Participant>{}<RequestId>{request_id}</RequestId></CreateFraudMarkerRequest>",
        marker.write(false)
    )
}

/// A `CancelFraudMarkerRequest`, unsigned.
pub fn cancel_request(participant: &Ispb, id: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CancelFraudMarkerRequest><FraudMarkerId>{}</FraudMarkerId><Participant>{participant}</Participant></CancelFraudMarkerRequest>",
        escape_text(id)
    )
}

/// A response carrying one mark (`root`), unsigned.
pub fn marker_response(root: &str, m: &FraudMarker, correlation_id: &str, now: DateTime<Utc>) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><{root}><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId>{}</{root}>",
        stamp(now),
        m.write(true)
    )
}

/// The mark of a response that carries one.
pub fn read_marker(doc: &Document) -> Result<FraudMarker, String> {
    FraudMarker::read(doc.root.child("FraudMarker").ok_or("the answer has no FraudMarker")?)
}

/// A `ListFraudMarkersResponse`, unsigned.
pub fn list_response(markers: &[FraudMarker], correlation_id: &str, now: DateTime<Utc>) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListFraudMarkersResponse><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId><HasMoreElements>false</HasMoreElements><Total>{}</Total><FraudMarkers>",
        stamp(now),
        markers.len()
    );
    for m in markers {
        out.push_str(&m.write(true));
    }
    out.push_str("</FraudMarkers></ListFraudMarkersResponse>");
    out
}

/// The marks of a `ListFraudMarkersResponse`.
pub fn read_list(doc: &Document) -> Result<Vec<FraudMarker>, String> {
    match doc.root.child("FraudMarkers") {
        Some(list) => list.elements().filter(|e| &*e.local == "FraudMarker").map(FraudMarker::read).collect(),
        None => Ok(Vec::new()),
    }
}

fn write_windowed(out: &mut String, name: &str, w: Windowed) {
    let _ = write!(out, "<{name} d90=\"{}\" m12=\"{}\" m60=\"{}\"/>", w.d90, w.m12, w.m60);
}

/// The `KeyStatistics` or `OwnerStatistics` (`root`) of counters; `accounts` is the key's
/// distinct accounts or the owner's registered ones (the `Entries` each requires).
pub fn write_statistics(root: &str, c: &Counters, accounts: u32, watermark: DateTime<Utc>) -> String {
    let mut out = format!("<{root}><FraudMarkers><Watermark>{}</Watermark>", stamp(watermark));
    write_windowed(&mut out, "ApplicationFrauds", c.application_frauds);
    write_windowed(&mut out, "MuleAccounts", c.mule_accounts);
    write_windowed(&mut out, "ScammerAccounts", c.scammer_accounts);
    write_windowed(&mut out, "OtherFrauds", c.other_frauds);
    let _ = write!(
        out,
        "</FraudMarkers><InfractionReports><Watermark>{}</Watermark><OpenReports>{}</OpenReports></InfractionReports><Entries><Watermark>{}</Watermark><{entries}>{accounts}</{entries}></Entries></{root}>",
        stamp(watermark),
        c.open_reports,
        stamp(watermark),
        entries = if root == "KeyStatistics" { "DistinctAccounts" } else { "RegisteredAccounts" },
    );
    out
}

fn read_counters(e: Option<&Element>) -> Counters {
    let Some(e) = e else { return Counters::default() };
    let windowed = |name: &str| {
        let Some(w) = e.path(&["FraudMarkers", name]) else { return Windowed::default() };
        let n = |a: &str| w.attr(a).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
        Windowed { d90: n("d90"), m12: n("m12"), m60: n("m60") }
    };
    Counters {
        application_frauds: windowed("ApplicationFrauds"),
        mule_accounts: windowed("MuleAccounts"),
        scammer_accounts: windowed("ScammerAccounts"),
        other_frauds: windowed("OtherFrauds"),
        open_reports: e
            .text_at(&["InfractionReports", "OpenReports"])
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0),
    }
}

/// The counters a lookup's answer carries (zeros for what it leaves out).
pub fn read_signals(doc: &Document) -> Signals {
    Signals {
        key: read_counters(doc.root.child("KeyStatistics")),
        owner: read_counters(doc.root.child("OwnerStatistics")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn marks_and_counters_read_back_as_written() {
        let m = FraudMarker {
            tax_id: "52998224725".into(),
            key: Some("golpe@example.com".into()),
            fraud_type: "SCAMMER_ACCOUNT".into(),
            id: "f1".into(),
            status: "REGISTERED".into(),
            created: at("2026-02-01T10:00:00Z"),
            modified: at("2026-02-01T10:00:00Z"),
        };
        let doc =
            Document::parse(marker_response("CreateFraudMarkerResponse", &m, "c", m.created).as_bytes())
                .unwrap();
        assert_eq!(read_marker(&doc).unwrap(), m);
        let doc =
            Document::parse(list_response(std::slice::from_ref(&m), "c", m.created).as_bytes()).unwrap();
        assert_eq!(read_list(&doc).unwrap(), vec![m.clone()]);
        let rid = uuid::Uuid::nil();
        let req =
            Document::parse(create_request(&Ispb::parse("1234ABCD").unwrap(), &m, &rid).as_bytes()).unwrap();
        let asked = FraudMarker::read(req.root.child("FraudMarker").unwrap()).unwrap();
        assert_eq!((asked.tax_id, asked.key, asked.fraud_type), (m.tax_id, m.key, m.fraud_type));

        let c = Counters {
            mule_accounts: Windowed { d90: 1, m12: 2, m60: 3 },
            open_reports: 4,
            ..Counters::default()
        };
        let body = format!(
            "<GetEntryResponse>{}{}</GetEntryResponse>",
            write_statistics("KeyStatistics", &c, 1, m.created),
            write_statistics("OwnerStatistics", &Counters::default(), 1, m.created)
        );
        let s = read_signals(&Document::parse(body.as_bytes()).unwrap());
        assert_eq!(s, Signals { key: c, owner: Counters::default() });
        assert_eq!(read_signals(&Document::parse(b"<GetEntryResponse/>").unwrap()), Signals::default());
    }
}
