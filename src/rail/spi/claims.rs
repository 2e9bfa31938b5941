//! The DICT's XML bodies of key claims (API 2.12.1, `/claims/`), written and read here for
//! both ends: pixgw's client ([`super::directory`]) and the simulator's DICT.
//!
//! - `POST /claims/` takes a signed `CreateClaimRequest` (the claim's type, the key, the
//!   claimer's account and the claimer) and answers `CreateClaimResponse` with the claim.
//! - `GET /claims/?Participant=...&ModifiedAfter=...` answers `ListClaimsResponse`, oldest
//!   change first (`LastModified` ascending), with `HasMoreElements`.
//! - `GET /claims/{ClaimId}` answers `GetClaimResponse`.
//! - `POST /claims/{ClaimId}/acknowledge|confirm|cancel|complete` take the signed
//!   `AcknowledgeClaimRequest`, `ConfirmClaimRequest`, `CancelClaimRequest` and
//!   `CompleteClaimRequest` (`ClaimId`, `Participant`, and `Reason` or `RequestId`) and
//!   answer the claim as it now is (`CompleteClaimResponse` adds the new entry's dates).
//!
//! The claim (`Claim`): `Type`, `Key`, `KeyType`, `ClaimerAccount`, `Claimer`,
//! `DonorParticipant`, `Id`, `Status`, `ResolutionPeriodEnd`, `CompletionPeriodEnd`
//! (ownership only), `LastModified`, `ConfirmReason`, `CancelReason`, `CancelledBy`. The
//! claimer's ISPB is its account's `Participant`. Readers look fields up by name.

use std::fmt::Write;

use chrono::{DateTime, Utc};

use super::dict::{stamp, Entry, KEY_TYPES};
use super::message::Ispb;
use super::xml::{escape_text, Document, Element};
use crate::domain::claim::{ClaimStatus, ClaimType, Reason, Role, Seen, Step};

/// Claims one list answer holds at most (the API's `Limit` maximum).
pub const CLAIMS_LIST_MAX: usize = 200;

/// A claim as the DICT holds it: the claimer's side as an [`Entry`] (the key, the claimer's
/// account and the claimer), and the claim's own fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DictClaim {
    pub claimer: Entry,
    pub claim_type: ClaimType,
    pub donor: Ispb,
    pub id: String,
    pub status: ClaimStatus,
    pub resolution_end: DateTime<Utc>,
    pub completion_end: Option<DateTime<Utc>>,
    pub modified: DateTime<Utc>,
    pub confirm_reason: Option<Reason>,
    pub cancel_reason: Option<Reason>,
    pub cancelled_by: Option<Role>,
}

/// The `ClaimerAccount` and `Claimer` of an entry's account and owner.
fn write_claimer(out: &mut String, e: &Entry) {
    e.write_holder(out, "ClaimerAccount", "Claimer");
}

impl DictClaim {
    /// A claim as a claimer asks for it, before the DICT has it: no id, status `OPEN`, no
    /// dates; the donor is the DICT's to find (the key's holder), the claimer stands in.
    pub fn asked(claim_type: ClaimType, claimer: Entry) -> DictClaim {
        DictClaim {
            donor: claimer.participant.clone(),
            claimer,
            claim_type,
            id: String::new(),
            status: ClaimStatus::Open,
            resolution_end: DateTime::<Utc>::UNIX_EPOCH,
            completion_end: None,
            modified: DateTime::<Utc>::UNIX_EPOCH,
            confirm_reason: None,
            cancel_reason: None,
            cancelled_by: None,
        }
    }

    /// The `Claim` element (an `ExtendedClaim`).
    pub fn write(&self) -> String {
        let mut out = String::with_capacity(900);
        let _ = write!(
            out,
            "<Claim><Type>{}</Type><Key>{}</Key><KeyType>{}</KeyType>",
            self.claim_type.as_str(),
            escape_text(&self.claimer.key),
            escape_text(&self.claimer.key_type)
        );
        write_claimer(&mut out, &self.claimer);
        let _ = write!(
            out,
            "<DonorParticipant>{}</DonorParticipant><Id>{}</Id><Status>{}</Status><ResolutionPeriodEnd>{}</ResolutionPeriodEnd>",
            self.donor,
            escape_text(&self.id),
            self.status.as_str(),
            stamp(self.resolution_end)
        );
        if let Some(c) = self.completion_end {
            let _ = write!(out, "<CompletionPeriodEnd>{}</CompletionPeriodEnd>", stamp(c));
        }
        let _ = write!(out, "<LastModified>{}</LastModified>", stamp(self.modified));
        if let Some(r) = self.confirm_reason {
            let _ = write!(out, "<ConfirmReason>{}</ConfirmReason>", r.as_str());
        }
        if let Some(r) = self.cancel_reason {
            let _ = write!(out, "<CancelReason>{}</CancelReason>", r.as_str());
        }
        if let Some(r) = self.cancelled_by {
            let _ = write!(out, "<CancelledBy>{}</CancelledBy>", r.as_str());
        }
        out.push_str("</Claim>");
        out
    }

    /// Reads a `Claim` element; `extended` false reads a create request's claim (no id,
    /// donor, status or dates).
    pub fn read(e: &Element, extended: bool) -> Result<DictClaim, String> {
        let text = |path: &[&str]| -> Result<String, String> {
            e.text_at(path)
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .ok_or_else(|| format!("Claim/{} is missing", path.join("/")))
        };
        let optional = |name: &str| e.text_at(&[name]).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
        let time = |t: &str, name: &str| -> Result<DateTime<Utc>, String> {
            DateTime::parse_from_rfc3339(t)
                .map(|d| d.with_timezone(&Utc))
                .map_err(|_| format!("Claim/{name} is not a date-time"))
        };
        let reason = |name: &str| -> Result<Option<Reason>, String> {
            optional(name)
                .map(|r| Reason::parse(&r).ok_or_else(|| format!("Claim/{name} {r} is not a reason")))
                .transpose()
        };
        let kind = text(&["Type"])?;
        let claim_type =
            ClaimType::parse(&kind).ok_or_else(|| format!("Claim/Type {kind} is not a claim type"))?;
        let key_type = text(&["KeyType"])?;
        if !KEY_TYPES.contains(&key_type.as_str()) {
            return Err(format!("Claim/KeyType {key_type} is not a key type"));
        }
        let participant = text(&["ClaimerAccount", "Participant"])?;
        let opening = text(&["ClaimerAccount", "OpeningDate"])?;
        let claimer = Entry {
            key: text(&["Key"])?,
            key_type,
            participant: Ispb::parse(&participant).ok_or_else(|| format!("{participant} is not an ISPB"))?,
            branch: e.text_at(&["ClaimerAccount", "Branch"]).filter(|b| !b.is_empty()),
            account_number: text(&["ClaimerAccount", "AccountNumber"])?,
            account_type: text(&["ClaimerAccount", "AccountType"])?,
            opening_date: time(&opening, "ClaimerAccount/OpeningDate")?,
            owner_type: text(&["Claimer", "Type"])?,
            tax_id: text(&["Claimer", "TaxIdNumber"])?,
            name: text(&["Claimer", "Name"])?,
            trade_name: e.text_at(&["Claimer", "TradeName"]).filter(|t| !t.is_empty()),
            creation_date: DateTime::<Utc>::UNIX_EPOCH,
            key_ownership_date: DateTime::<Utc>::UNIX_EPOCH,
        };
        if !extended {
            return Ok(DictClaim::asked(claim_type, claimer));
        }
        let donor = text(&["DonorParticipant"])?;
        let status = text(&["Status"])?;
        Ok(DictClaim {
            claimer,
            claim_type,
            donor: Ispb::parse(&donor).ok_or_else(|| format!("{donor} is not an ISPB"))?,
            id: text(&["Id"])?,
            status: ClaimStatus::parse(&status)
                .ok_or_else(|| format!("Claim/Status {status} is not a status"))?,
            resolution_end: time(&text(&["ResolutionPeriodEnd"])?, "ResolutionPeriodEnd")?,
            completion_end: optional("CompletionPeriodEnd")
                .map(|t| time(&t, "CompletionPeriodEnd"))
                .transpose()?,
            modified: time(&text(&["LastModified"])?, "LastModified")?,
            confirm_reason: reason("ConfirmReason")?,
            cancel_reason: reason("CancelReason")?,
            cancelled_by: optional("CancelledBy")
                .map(|r| Role::parse(&r).ok_or_else(|| format!("Claim/CancelledBy {r} is not a side")))
                .transpose()?,
        })
    }

    /// The claim as the domain reads it.
    pub fn seen(&self) -> Seen {
        Seen {
            id: self.id.clone(),
            claim_type: self.claim_type,
            key: self.claimer.key.clone(),
            key_type: self.claimer.key_type.clone(),
            claimer: self.claimer.participant.to_string(),
            claimer_account: self.claimer.account_number.clone(),
            claimer_tax_id: self.claimer.tax_id.clone(),
            claimer_name: self.claimer.name.clone(),
            claimer_cid: (self.status == ClaimStatus::Completed).then(|| {
                super::sync::cid_of(
                    &self.claimer,
                    &completion_request_id(&self.claimer.participant, &self.id),
                )
            }),
            claimer_request_id: (self.status == ClaimStatus::Completed)
                .then(|| completion_request_id(&self.claimer.participant, &self.id)),
            donor: self.donor.to_string(),
            status: self.status,
            resolution_end: self.resolution_end,
            completion_end: self.completion_end,
            modified: self.modified,
            confirm_reason: self.confirm_reason,
            cancel_reason: self.cancel_reason,
            cancelled_by: self.cancelled_by,
        }
    }
}

/// The `RequestId` of a claim's completion: a UUID v4 in form, drawn from the SHA-256 of
/// the participant and the claim's id, so a completion tried again (after a lost answer, or
/// a crash) is the same request, which the DICT answers as it did the first time, and the
/// entry it makes has the same CID.
pub fn completion_request_id(participant: &Ispb, claim_id: &str) -> uuid::Uuid {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for part in ["completeClaim", participant.as_str(), claim_id] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// A `CreateClaimRequest`, unsigned: `claimer` names the key, the claimer's account and the
/// claimer.
pub fn create_request(claim_type: ClaimType, claimer: &Entry) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CreateClaimRequest><Claim><Type>{}</Type><Key>{}</Key><KeyType>{}</KeyType>",
        claim_type.as_str(),
        escape_text(&claimer.key),
        escape_text(&claimer.key_type)
    );
    write_claimer(&mut out, claimer);
    out.push_str("</Claim></CreateClaimRequest>");
    out
}

/// The request of a step (`AcknowledgeClaimRequest`, ...), unsigned. `request_id` names a
/// completion (the new entry's, and the step's idempotency key).
pub fn step_request(step: Step, id: &str, participant: &Ispb, request_id: &uuid::Uuid) -> String {
    let root = step_root(step);
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><{root}><ClaimId>{}</ClaimId><Participant>{participant}</Participant>",
        escape_text(id)
    );
    match step {
        Step::Confirm(r) | Step::Cancel(r) => {
            let _ = write!(out, "<Reason>{}</Reason>", r.as_str());
        }
        Step::Complete => {
            let _ = write!(out, "<RequestId>{request_id}</RequestId>");
        }
        Step::Acknowledge => {}
    }
    let _ = write!(out, "</{root}>");
    out
}

/// The root element of a step's request.
pub fn step_root(step: Step) -> &'static str {
    match step {
        Step::Acknowledge => "AcknowledgeClaimRequest",
        Step::Confirm(_) => "ConfirmClaimRequest",
        Step::Cancel(_) => "CancelClaimRequest",
        Step::Complete => "CompleteClaimRequest",
    }
}

/// A step's request as the DICT reads it: the claim's id, the participant, and the step
/// (with its reason) or why it is not one.
pub fn read_step_request(
    doc: &Document,
    name: &str,
) -> Result<(String, String, Step, Option<String>), String> {
    let root = &doc.root;
    let text = |n: &str| root.text_at(&[n]).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
    let id = text("ClaimId").ok_or("ClaimId is missing")?;
    let participant = text("Participant").ok_or("Participant is missing")?;
    let reason = || -> Result<Reason, String> {
        let r = text("Reason").ok_or("Reason is missing")?;
        Reason::parse(&r).ok_or_else(|| format!("{r} is not a reason"))
    };
    let step = match name {
        "acknowledge" => Step::Acknowledge,
        "confirm" => Step::Confirm(reason()?),
        "cancel" => Step::Cancel(reason()?),
        "complete" => Step::Complete,
        other => return Err(format!("{other} is not a step of a claim")),
    };
    if &*root.local != step_root(step) {
        return Err(format!("a {name} takes a {}", step_root(step)));
    }
    Ok((id, participant, step, text("RequestId")))
}

/// A response that carries one claim (`root`: `CreateClaimResponse`, `GetClaimResponse`,
/// ...), unsigned; `entry_dates` adds a completion's `EntryCreationDate` and
/// `KeyOwnershipDate`.
pub fn claim_response(
    root: &str,
    claim: &DictClaim,
    entry_dates: Option<(DateTime<Utc>, DateTime<Utc>)>,
    correlation_id: &str,
    now: DateTime<Utc>,
) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><{root}><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId>{}",
        stamp(now),
        claim.write()
    );
    if let Some((created, owned)) = entry_dates {
        let _ = write!(
            out,
            "<EntryCreationDate>{}</EntryCreationDate><KeyOwnershipDate>{}</KeyOwnershipDate>",
            stamp(created),
            stamp(owned)
        );
    }
    let _ = write!(out, "</{root}>");
    out
}

/// The claim of a response that carries one.
pub fn read_claim(doc: &Document) -> Result<DictClaim, String> {
    DictClaim::read(doc.root.child("Claim").ok_or("the answer has no Claim")?, true)
}

/// A `ListClaimsResponse`, unsigned.
pub fn list_response(claims: &[DictClaim], more: bool, correlation_id: &str, now: DateTime<Utc>) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListClaimsResponse><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId><HasMoreElements>{more}</HasMoreElements><Claims>",
        stamp(now)
    );
    for c in claims {
        out.push_str(&c.write());
    }
    out.push_str("</Claims></ListClaimsResponse>");
    out
}

/// The claims of a `ListClaimsResponse`, and whether more follow.
pub fn read_list(doc: &Document) -> Result<(Vec<DictClaim>, bool), String> {
    let claims = match doc.root.child("Claims") {
        Some(list) => list
            .elements()
            .filter(|e| &*e.local == "Claim")
            .map(|e| DictClaim::read(e, true))
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    Ok((claims, doc.root.text_at(&["HasMoreElements"]).is_some_and(|t| t.trim() == "true")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn claim() -> DictClaim {
        DictClaim {
            claimer: Entry {
                key: "+5561988887777".into(),
                key_type: "PHONE".into(),
                participant: Ispb::parse("1234ABCD").unwrap(),
                branch: Some("0001".into()),
                account_number: "42".into(),
                account_type: "TRAN".into(),
                opening_date: at("2026-01-01T03:00:00Z"),
                owner_type: "NATURAL_PERSON".into(),
                tax_id: "52998224725".into(),
                name: "Joana & Filhos".into(),
                trade_name: None,
                creation_date: DateTime::<Utc>::UNIX_EPOCH,
                key_ownership_date: DateTime::<Utc>::UNIX_EPOCH,
            },
            claim_type: ClaimType::Ownership,
            donor: Ispb::parse("99999A04").unwrap(),
            id: "5a0a5b8e-8f3f-4c4c-9b4d-2f1b5e2c9a11".into(),
            status: ClaimStatus::Cancelled,
            resolution_end: at("2026-01-17T10:00:00Z"),
            completion_end: Some(at("2026-01-24T10:00:00Z")),
            modified: at("2026-01-12T10:00:00.250Z"),
            confirm_reason: None,
            cancel_reason: Some(Reason::Fraud),
            cancelled_by: Some(Role::Donor),
        }
    }

    #[test]
    fn a_claim_reads_back_as_written_in_a_response_and_in_a_list() {
        let c = claim();
        let doc = Document::parse(
            claim_response("GetClaimResponse", &c, None, "ab", at("2026-01-12T11:00:00Z")).as_bytes(),
        )
        .unwrap();
        assert_eq!(read_claim(&doc).unwrap(), c);
        let doc = Document::parse(list_response(&[c.clone(), c.clone()], true, "ab", c.modified).as_bytes())
            .unwrap();
        let (list, more) = read_list(&doc).unwrap();
        assert_eq!((list.len(), more), (2, true));
        let empty = Document::parse(list_response(&[], false, "ab", c.modified).as_bytes()).unwrap();
        assert_eq!(read_list(&empty).unwrap(), (Vec::new(), false));
    }

    #[test]
    fn a_create_request_carries_the_claimer_and_reads_back_without_the_dicts_fields() {
        let c = claim();
        let doc = Document::parse(create_request(ClaimType::Portability, &c.claimer).as_bytes()).unwrap();
        assert_eq!(&*doc.root.local, "CreateClaimRequest");
        let read = DictClaim::read(doc.root.child("Claim").unwrap(), false).unwrap();
        assert_eq!((read.claimer, read.claim_type), (c.claimer, ClaimType::Portability));
    }

    #[test]
    fn each_step_has_its_root_and_its_reason_or_request_id() {
        let p = Ispb::parse("1234ABCD").unwrap();
        let rid = uuid::Uuid::nil();
        for (step, name) in [
            (Step::Acknowledge, "acknowledge"),
            (Step::Confirm(Reason::UserRequested), "confirm"),
            (Step::Cancel(Reason::DefaultOperation), "cancel"),
            (Step::Complete, "complete"),
        ] {
            let doc = Document::parse(step_request(step, "id-1", &p, &rid).as_bytes()).unwrap();
            let (id, who, read, request) = read_step_request(&doc, name).unwrap();
            assert_eq!((id.as_str(), who.as_str(), read), ("id-1", "1234ABCD", step));
            assert_eq!(request.is_some(), step == Step::Complete);
        }
        let doc = Document::parse(step_request(Step::Acknowledge, "id-1", &p, &rid).as_bytes()).unwrap();
        assert!(read_step_request(&doc, "confirm").is_err(), "a confirm needs its reason and its root");
    }

    #[test]
    fn a_claim_with_an_unknown_status_or_reason_is_refused_with_the_field_named() {
        let text = claim().write().replace("CANCELLED", "LOST");
        let doc = Document::parse(text.as_bytes()).unwrap();
        assert!(DictClaim::read(&doc.root, true).unwrap_err().contains("Status"));
        let text = claim().write().replace("<CancelReason>FRAUD", "<CancelReason>WHIM");
        let doc = Document::parse(text.as_bytes()).unwrap();
        assert!(DictClaim::read(&doc.root, true).unwrap_err().contains("CancelReason"));
    }
}
