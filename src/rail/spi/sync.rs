//! The DICT's XML bodies of reconciliation (API 2.12.1, "Reconciliação"), written and read
//! here for both ends: pixgw's client ([`super::directory`]) and the simulator's DICT.
//!
//! - `POST /sync-verifications/` takes a signed `CreateSyncVerificationRequest`
//!   (`SyncVerification`: `Participant`, `KeyType`, `ParticipantSyncVerifier`) and answers
//!   the verification with its `Id` and `Result` (`OK` or `NOK`).
//! - `POST /cids/files/` takes a signed `CreateCidSetFileRequest` (`Participant`, `KeyType`)
//!   and answers a `CidSetFile`; `GET /cids/files/{Id}` answers it as it now is: `Status`
//!   (`REQUESTED`, `PROCESSING`, `AVAILABLE`, `UNAVAILABLE`, `ERROR`) and, once available,
//!   its `Url`, `Bytes` and `Sha256`. The file holds one CID a line.
//! - `GET /cids/entries/{Cid}` answers `GetEntryByCidResponse`: the `Cid`, the active
//!   `Entry` and the `RequestId` that created it.

use std::fmt::Write;

use chrono::{DateTime, Utc};

use super::dict::{stamp, Entry};
use super::message::Ispb;
use super::xml::{escape_text, Document};

/// A sync verification's request, unsigned.
pub fn verification_request(participant: &Ispb, key_type: &str, vsync: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CreateSyncVerificationRequest><SyncVerification><Participant>{participant}</Participant><KeyType>{}</KeyType><ParticipantSyncVerifier>{}</ParticipantSyncVerifier></SyncVerification></CreateSyncVerificationRequest>",
        escape_text(key_type),
        escape_text(vsync)
    )
}

/// A sync verification's request as the DICT reads it: participant, key type, VSync.
pub fn read_verification_request(doc: &Document) -> Result<(String, String, String), String> {
    let text = |n: &str| {
        doc.root
            .text_at(&["SyncVerification", n])
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| format!("SyncVerification/{n} is missing"))
    };
    Ok((text("Participant")?, text("KeyType")?, text("ParticipantSyncVerifier")?))
}

/// A sync verification's answer, unsigned.
pub fn verification_response(
    participant: &Ispb,
    key_type: &str,
    vsync: &str,
    id: u64,
    ok: bool,
    correlation_id: &str,
    now: DateTime<Utc>,
) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CreateSyncVerificationResponse><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId><SyncVerification><Participant>{participant}</Participant><KeyType>{}</KeyType><ParticipantSyncVerifier>{}</ParticipantSyncVerifier><Id>{id}</Id><Result>{}</Result></SyncVerification></CreateSyncVerificationResponse>",
        stamp(now),
        escape_text(key_type),
        escape_text(vsync),
        if ok { "OK" } else { "NOK" }
    )
}

/// A verification answer's result: `true` for `OK`.
pub fn read_verification_result(doc: &Document) -> Result<bool, String> {
    match doc.root.text_at(&["SyncVerification", "Result"]).as_deref().map(str::trim) {
        Some("OK") => Ok(true),
        Some("NOK") => Ok(false),
        other => Err(format!("SyncVerification/Result is {other:?}")),
    }
}

/// A CID set file request, unsigned.
pub fn cid_file_request(participant: &Ispb, key_type: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CreateCidSetFileRequest><Participant>{participant}</Participant><KeyType>{}</KeyType></CreateCidSetFileRequest>",
        escape_text(key_type)
    )
}

/// A CID set file as the DICT describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CidFile {
    pub id: u64,
    /// `REQUESTED`, `PROCESSING`, `AVAILABLE`, `UNAVAILABLE` or `ERROR`.
    pub status: String,
    pub participant: String,
    pub key_type: String,
    pub requested: DateTime<Utc>,
    /// Once `AVAILABLE`: where to read it, its size and its SHA-256 (hex).
    pub url: Option<String>,
    pub bytes: Option<u64>,
    pub sha256: Option<String>,
}

/// A response carrying a `CidSetFile` (`root`: `CreateCidSetFileResponse` or
/// `GetCidSetFileResponse`), unsigned.
pub fn cid_file_response(root: &str, f: &CidFile, correlation_id: &str, now: DateTime<Utc>) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><{root}><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId><CidSetFile><Id>{}</Id><Status>{}</Status><Participant>{}</Participant><KeyType>{}</KeyType><RequestTime>{}</RequestTime>",
        stamp(now),
        f.id,
        escape_text(&f.status),
        escape_text(&f.participant),
        escape_text(&f.key_type),
        stamp(f.requested)
    );
    if let (Some(url), Some(bytes), Some(sha)) = (&f.url, f.bytes, &f.sha256) {
        let _ = write!(
            out,
            "<CreationTime>{}</CreationTime><Url>{}</Url><Bytes>{bytes}</Bytes><Sha256>{}</Sha256>",
            stamp(now),
            escape_text(url),
            escape_text(sha)
        );
    }
    let _ = write!(out, "</CidSetFile></{root}>");
    out
}

/// The `CidSetFile` of a response.
pub fn read_cid_file(doc: &Document) -> Result<CidFile, String> {
    let f = doc.root.child("CidSetFile").ok_or("the answer has no CidSetFile")?;
    let text = |n: &str| f.text_at(&[n]).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
    let need = |n: &str| text(n).ok_or_else(|| format!("CidSetFile/{n} is missing"));
    let requested = need("RequestTime")?;
    Ok(CidFile {
        id: need("Id")?.parse().map_err(|_| "CidSetFile/Id is not a number")?,
        status: need("Status")?,
        participant: need("Participant")?,
        key_type: need("KeyType")?,
        requested: DateTime::parse_from_rfc3339(&requested)
            .map_err(|_| "CidSetFile/RequestTime is not a date-time")?
            .with_timezone(&Utc),
        url: text("Url"),
        bytes: text("Bytes").and_then(|b| b.parse().ok()),
        sha256: text("Sha256"),
    })
}

/// A CID event (`CidSetEvent`): a CID of the participant's set added or removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CidEvent {
    /// `ADDED` or `REMOVED`.
    pub kind: String,
    pub cid: String,
    pub at: DateTime<Utc>,
}

/// Events one list answer holds at most (the API's `Limit` maximum).
pub const CID_EVENTS_LIST_MAX: usize = 200;

/// The window a list of CID events covers: its start and end, and the VSync of the
/// participant's set of that key type at each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CidWindow {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub vsync_start: String,
    pub vsync_end: String,
}

/// A `ListCidSetEventsResponse`, unsigned.
pub fn cid_events_response(
    participant: &str,
    key_type: &str,
    events: &[CidEvent],
    window: &CidWindow,
    more: bool,
    correlation_id: &str,
    now: DateTime<Utc>,
) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListCidSetEventsResponse><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId><HasMoreElements>{more}</HasMoreElements><Participant>{}</Participant><KeyType>{}</KeyType><StartTime>{}</StartTime><EndTime>{}</EndTime><SyncVerifierStart>{}</SyncVerifierStart><SyncVerifierEnd>{}</SyncVerifierEnd>",
        stamp(now),
        escape_text(participant),
        escape_text(key_type),
        stamp(window.start),
        stamp(window.end),
        escape_text(&window.vsync_start),
        escape_text(&window.vsync_end)
    );
    out.push_str("<CidSetEvents>");
    for e in events {
        let _ = write!(
            out,
            "<CidSetEvent><Type>{}</Type><Cid>{}</Cid><Timestamp>{}</Timestamp></CidSetEvent>",
            escape_text(&e.kind),
            escape_text(&e.cid),
            stamp(e.at)
        );
    }
    out.push_str("</CidSetEvents></ListCidSetEventsResponse>");
    out
}

/// The events of a `ListCidSetEventsResponse`, oldest first, and whether more follow.
pub fn read_cid_events(doc: &Document) -> Result<(Vec<CidEvent>, bool), String> {
    let mut events = Vec::new();
    for e in doc
        .root
        .child("CidSetEvents")
        .into_iter()
        .flat_map(|l| l.elements())
        .filter(|e| &*e.local == "CidSetEvent")
    {
        let text = |n: &str| e.text_at(&[n]).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
        let kind = text("Type")
            .filter(|k| k == "ADDED" || k == "REMOVED")
            .ok_or("CidSetEvent/Type is not ADDED or REMOVED")?;
        let cid = text("Cid").ok_or("CidSetEvent/Cid is missing")?.to_ascii_lowercase();
        let at = text("Timestamp")
            .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
            .ok_or("CidSetEvent/Timestamp is not a date-time")?
            .with_timezone(&Utc);
        events.push(CidEvent { kind, cid, at });
    }
    let more = doc.root.text_at(&["HasMoreElements"]).is_some_and(|t| t.trim() == "true");
    Ok((events, more))
}

/// A `GetEntryByCidResponse`, unsigned.
pub fn entry_by_cid_response(
    cid: &str,
    entry: &Entry,
    request_id: &uuid::Uuid,
    correlation_id: &str,
    now: DateTime<Utc>,
) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><GetEntryByCidResponse><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId><Cid>{}</Cid>{}<RequestId>{request_id}</RequestId></GetEntryByCidResponse>",
        stamp(now),
        escape_text(cid),
        entry.write(true, true)
    )
}

/// The entry and its creating `RequestId` of a `GetEntryByCidResponse`.
pub fn read_entry_by_cid(doc: &Document) -> Result<(Entry, uuid::Uuid), String> {
    let entry = Entry::read(doc.root.child("Entry").ok_or("the answer has no Entry")?)?;
    let rid = doc.root.text_at(&["RequestId"]).ok_or("the answer has no RequestId")?;
    let rid = uuid::Uuid::parse_str(rid.trim()).map_err(|_| "RequestId is not a UUID")?;
    Ok((entry, rid))
}

/// The CID of an entry created under `request_id`.
pub fn cid_of(entry: &Entry, request_id: &uuid::Uuid) -> String {
    let participant = entry.participant.to_string();
    crate::domain::cid::cid(
        &crate::domain::cid::CidAttributes {
            key_type: &entry.key_type,
            key: &entry.key,
            tax_id: &entry.tax_id,
            name: &entry.name,
            trade_name: entry.trade_name.as_deref().unwrap_or(""),
            participant: &participant,
            branch: entry.branch.as_deref().unwrap_or(""),
            account_number: &entry.account_number,
            account_type: &entry.account_type,
        },
        request_id.as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn verifications_files_and_entries_by_cid_read_back_as_written() {
        let p = Ispb::parse("1234ABCD").unwrap();
        let now = at("2026-02-01T10:00:00Z");
        let req = Document::parse(verification_request(&p, "EMAIL", &"a".repeat(64)).as_bytes()).unwrap();
        assert_eq!(
            read_verification_request(&req).unwrap(),
            ("1234ABCD".into(), "EMAIL".into(), "a".repeat(64))
        );
        for ok in [true, false] {
            let res = verification_response(&p, "EMAIL", &"a".repeat(64), 9, ok, "c", now);
            assert_eq!(read_verification_result(&Document::parse(res.as_bytes()).unwrap()), Ok(ok));
        }
        let f = CidFile {
            id: 3,
            status: "AVAILABLE".into(),
            participant: "1234ABCD".into(),
            key_type: "PHONE".into(),
            requested: now,
            url: Some("https://dict/cids/files/3/content".into()),
            bytes: Some(130),
            sha256: Some("f".repeat(64)),
        };
        let doc =
            Document::parse(cid_file_response("GetCidSetFileResponse", &f, "c", now).as_bytes()).unwrap();
        assert_eq!(read_cid_file(&doc).unwrap(), f);
        let waiting = CidFile { status: "PROCESSING".into(), url: None, bytes: None, sha256: None, ..f };
        let doc =
            Document::parse(cid_file_response("CreateCidSetFileResponse", &waiting, "c", now).as_bytes())
                .unwrap();
        assert_eq!(read_cid_file(&doc).unwrap(), waiting);
    }

    #[test]
    fn the_cid_of_an_entry_covers_its_essential_attributes_under_its_request_id() {
        let e = Entry {
            key: "+5511987654321".into(),
            key_type: "PHONE".into(),
            participant: Ispb::parse("12345678").unwrap(),
            branch: Some("00001".into()),
            account_number: "0007654321".into(),
            account_type: "CACC".into(),
            opening_date: at("2026-01-01T00:00:00Z"),
            owner_type: "NATURAL_PERSON".into(),
            tax_id: "11122233300".into(),
            name: "João Silva".into(),
            trade_name: None,
            creation_date: at("2026-01-01T00:00:00Z"),
            key_ownership_date: at("2026-01-01T00:00:00Z"),
        };
        let rid = uuid::Uuid::from_bytes(core::array::from_fn(|i| u8::try_from(i + 1).unwrap()));
        // The API's example, through the entry.
        assert_eq!(cid_of(&e, &rid), "28c06eb41c4dc9c3ae114831efcac7446c8747777fca8b145ecd31ff8480ae88");
        let doc = Document::parse(
            entry_by_cid_response(&cid_of(&e, &rid), &e, &rid, "c", e.creation_date).as_bytes(),
        )
        .unwrap();
        let (read, read_rid) = read_entry_by_cid(&doc).unwrap();
        assert_eq!((cid_of(&read, &read_rid), read_rid), (cid_of(&e, &rid), rid));
    }
}
