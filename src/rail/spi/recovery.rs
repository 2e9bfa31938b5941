//! The DICT's XML bodies of MED 2.0 (API 2.12.1): funds recoveries, the infraction reports a
//! recovery opens against each institution the money went through, and the event
//! notifications that tell the recovery's creator of its steps. Written and read here for
//! both ends: pixgw's client ([`super::directory`]) and the simulator's DICT.
//!
//! - `POST /funds-recoveries/` takes a signed `CreateFundsRecoveryRequest` (`Participant`,
//!   `FundsRecovery`: `RootTransactionId`, `SituationType`, `ReportDetails`,
//!   `ContactInformation`; and the `TrackingGraphParameters`) and answers the recovery with its
//!   `Id`, `Status` and times, and the tracking graph the DICT drew.
//! - `GET /funds-recoveries/{Id}` answers a `GetFundsRecoveryResponse`; `POST .../refund` and
//!   `POST .../cancel` take a signed request naming `Participant` and `FundsRecoveryId`.
//! - `GET /infraction-reports/?Participant=...&IsCounterparty=true&Status=OPEN,ACKNOWLEDGED`
//!   lists the reports against the participant; `POST .../acknowledge` and `POST .../close`
//!   (`AnalysisResult` `AGREED` with a `FraudType`, or `DISAGREED`) answer one.
//! - `GET /event-notifications?Participant=...&Cursor=...` lists events
//!   (`FUNDS_RECOVERY_ANALYSED`, `_COMPLETED`, `_INFORMATION_UPDATED`, `_CANCELLED`) with a
//!   `NextCursor` to go on from.
//!
//! Field order in answers may change (the API says so), so readers look fields up by name.

use std::fmt::Write;

use chrono::{DateTime, Utc};

use super::dict::stamp;
use super::message::Ispb;
use super::xml::{escape_text, Document, Element};
use crate::domain::money::Money;

/// The situations a recovery or a report names (`UNKNOWN` is only the API 1.x's).
pub const SITUATION_TYPES: [&str; 5] = ["SCAM", "ACCOUNT_TAKEOVER", "COERCION", "FRAUDULENT_ACCESS", "OTHER"];
/// A recovery's statuses, in the order it goes through them (`CANCELLED` ends it anywhere).
pub const RECOVERY_STATUSES: [&str; 7] =
    ["CREATED", "TRACKED", "AWAITING_ANALYSIS", "ANALYSED", "REFUNDING", "COMPLETED", "CANCELLED"];
/// An infraction report's statuses.
pub const REPORT_STATUSES: [&str; 4] = ["OPEN", "ACKNOWLEDGED", "CLOSED", "CANCELLED"];
/// The events of a recovery.
pub const EVENT_TYPES: [&str; 4] = [
    "FUNDS_RECOVERY_ANALYSED",
    "FUNDS_RECOVERY_COMPLETED",
    "FUNDS_RECOVERY_INFORMATION_UPDATED",
    "FUNDS_RECOVERY_CANCELLED",
];
/// Items one list answer holds at most (the API's `Limit` maximum, and its page of events).
pub const LIST_MAX: usize = 200;
/// The longest `ReportDetails` and `AnalysisDetails`.
pub const DETAILS_LEN_MAX: usize = 2000;

fn text_of(e: &Element, name: &str) -> Option<String> {
    e.text_at(&[name]).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty())
}

fn need(e: &Element, what: &str, name: &str) -> Result<String, String> {
    text_of(e, name).ok_or_else(|| format!("{what}/{name} is missing"))
}

fn time_of(e: &Element, what: &str, name: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(&need(e, what, name)?)
        .map(|d| d.with_timezone(&Utc))
        .map_err(|_| format!("{what}/{name} is not a date-time"))
}

fn amount_of(e: &Element, what: &str, name: &str) -> Result<Money, String> {
    let t = need(e, what, name)?;
    Money::parse_two_places(&t).ok_or_else(|| format!("{what}/{name} {t} is not an amount"))
}

/// A funds recovery (`ExtendedFundsRecovery`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FundsRecovery {
    pub id: String,
    /// The end-to-end id of the payment reported as fraud.
    pub root_transaction_id: String,
    pub situation_type: String,
    pub details: Option<String>,
    pub email: String,
    pub phone: String,
    pub status: String,
    pub reporter: String,
    pub created: DateTime<Utc>,
    pub modified: DateTime<Utc>,
}

impl FundsRecovery {
    /// The `FundsRecovery` element; `extended` adds the DICT's fields.
    pub fn write(&self, extended: bool) -> String {
        let mut out = format!(
            "<FundsRecovery><RootTransactionId>{}</RootTransactionId><SituationType>{}</SituationType>",
            escape_text(&self.root_transaction_id),
            escape_text(&self.situation_type)
        );
        if let Some(d) = &self.details {
            let _ = write!(out, "<ReportDetails>{}</ReportDetails>", escape_text(d));
        }
        let _ = write!(
            out,
            "<ContactInformation><Email>{}</Email><Phone>{}</Phone></ContactInformation>",
            escape_text(&self.email),
            escape_text(&self.phone)
        );
        if extended {
            let _ = write!(
                out,
                "<Id>{}</Id><Status>{}</Status><ReporterParticipant>{}</ReporterParticipant><CreationTime>{}</CreationTime><LastModified>{}</LastModified>",
                escape_text(&self.id),
                escape_text(&self.status),
                escape_text(&self.reporter),
                stamp(self.created),
                stamp(self.modified)
            );
        }
        out.push_str("</FundsRecovery>");
        out
    }

    /// Reads a `FundsRecovery`; `extended` requires the DICT's fields.
    pub fn read(e: &Element, extended: bool) -> Result<FundsRecovery, String> {
        const W: &str = "FundsRecovery";
        let situation_type = need(e, W, "SituationType")?;
        if !SITUATION_TYPES.contains(&situation_type.as_str()) && situation_type != "UNKNOWN" {
            return Err(format!("{W}/SituationType {situation_type} is not a situation"));
        }
        let contact = e.child("ContactInformation");
        let contact_text = |n: &str| contact.and_then(|c| text_of(c, n)).unwrap_or_default();
        let (id, status, reporter, created, modified) = if extended {
            let status = need(e, W, "Status")?;
            if !RECOVERY_STATUSES.contains(&status.as_str()) {
                return Err(format!("{W}/Status {status} is not a status"));
            }
            (
                need(e, W, "Id")?,
                status,
                need(e, W, "ReporterParticipant")?,
                time_of(e, W, "CreationTime")?,
                time_of(e, W, "LastModified")?,
            )
        } else {
            (String::new(), String::new(), String::new(), DateTime::UNIX_EPOCH, DateTime::UNIX_EPOCH)
        };
        Ok(FundsRecovery {
            id,
            root_transaction_id: need(e, W, "RootTransactionId")?,
            situation_type,
            details: text_of(e, "ReportDetails"),
            email: contact_text("Email"),
            phone: contact_text("Phone"),
            status,
            reporter,
            created,
            modified,
        })
    }
}

/// How far the DICT traces the money: the API's defaults, which are also its maxima.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphParameters {
    pub min_amount: Money,
    pub max_transactions: u32,
    pub hop_window_hours: u32,
    pub max_hops: u32,
}

/// The API's limits of a tracking graph (`TrackingGraphParameters`' defaults and maxima).
pub const GRAPH_MAX: GraphParameters = GraphParameters {
    min_amount: Money::from_cents_const(20_000),
    max_transactions: 5,
    hop_window_hours: 2,
    max_hops: 2,
};

impl GraphParameters {
    pub fn write(&self, name: &str) -> String {
        format!(
            "<{name}><MinTransactionAmount>{}</MinTransactionAmount><MaxTransactions>{}</MaxTransactions><HopWindow>PT{}H</HopWindow><MaxHops>{}</MaxHops></{name}>",
            self.min_amount.to_cents_string(),
            self.max_transactions,
            self.hop_window_hours,
            self.max_hops
        )
    }

    /// Reads the parameters; what is absent takes the API's default, and what passes its
    /// maximum is refused (`FundsRecoveryTrackingGraphParameterInvalid`).
    pub fn read(e: Option<&Element>) -> Result<GraphParameters, String> {
        let mut p = GRAPH_MAX;
        let Some(e) = e else { return Ok(p) };
        if let Some(t) = text_of(e, "MinTransactionAmount") {
            p.min_amount = Money::parse_two_places(&t).ok_or("MinTransactionAmount is not an amount")?;
        }
        let number = |n: &str, max: u32| -> Result<Option<u32>, String> {
            match text_of(e, n) {
                None => Ok(None),
                Some(t) => match t.parse::<u32>() {
                    Ok(v) if v >= 1 && v <= max => Ok(Some(v)),
                    _ => Err(format!("{n} {t} is not between 1 and {max}")),
                },
            }
        };
        if let Some(v) = number("MaxTransactions", GRAPH_MAX.max_transactions)? {
            p.max_transactions = v;
        }
        if let Some(v) = number("MaxHops", GRAPH_MAX.max_hops)? {
            p.max_hops = v;
        }
        if let Some(t) = text_of(e, "HopWindow") {
            let hours = t
                .strip_prefix("PT")
                .and_then(|h| h.strip_suffix('H'))
                .and_then(|h| h.parse::<u32>().ok())
                .filter(|h| (1..=GRAPH_MAX.hop_window_hours).contains(h))
                .ok_or_else(|| format!("HopWindow {t} is not PT1H or PT2H"))?;
            p.hop_window_hours = hours;
        }
        Ok(p)
    }
}

/// An account of a tracking graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphAccount {
    pub id: u32,
    pub owner_id: u32,
    pub participant: String,
}

/// A transaction of a tracking graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphTransaction {
    pub id: String,
    pub debtor_account: u32,
    pub creditor_account: u32,
    pub amount: Money,
    pub refundable: Money,
    pub settled: DateTime<Utc>,
}

/// The money's path as the DICT traced it from the root payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackingGraph {
    pub recovery_id: String,
    pub root_transaction_id: String,
    pub created: DateTime<Utc>,
    pub parameters: GraphParameters,
    pub accounts: Vec<GraphAccount>,
    pub transactions: Vec<GraphTransaction>,
}

impl TrackingGraph {
    pub fn write(&self) -> String {
        let mut out = format!(
            "<TrackingGraph><FundsRecoveryId>{}</FundsRecoveryId><RootTransactionId>{}</RootTransactionId><CreationTime>{}</CreationTime>{}<Persons>",
            escape_text(&self.recovery_id),
            escape_text(&self.root_transaction_id),
            stamp(self.created),
            self.parameters.write("Parameters")
        );
        let mut owners: Vec<u32> = self.accounts.iter().map(|a| a.owner_id).collect();
        owners.sort_unstable();
        owners.dedup();
        for o in owners {
            let _ = write!(out, "<Person><Id>{o}</Id><Type>NATURAL_PERSON</Type></Person>");
        }
        out.push_str("</Persons><Accounts>");
        for a in &self.accounts {
            let _ = write!(
                out,
                "<Account><Id>{}</Id><OwnerId>{}</OwnerId><Participant>{}</Participant></Account>",
                a.id,
                a.owner_id,
                escape_text(&a.participant)
            );
        }
        out.push_str("</Accounts><Transactions>");
        for t in &self.transactions {
            let _ = write!(
                out,
                "<Transaction><Id>{}</Id><DebtorAccountId>{}</DebtorAccountId><CreditorAccountId>{}</CreditorAccountId><Amount>{}</Amount><RefundableAmount>{}</RefundableAmount><SettlementTime>{}</SettlementTime></Transaction>",
                escape_text(&t.id),
                t.debtor_account,
                t.creditor_account,
                t.amount.to_cents_string(),
                t.refundable.to_cents_string(),
                stamp(t.settled)
            );
        }
        out.push_str("</Transactions></TrackingGraph>");
        out
    }

    pub fn read(e: &Element) -> Result<TrackingGraph, String> {
        const W: &str = "TrackingGraph";
        let number = |e: &Element, w: &str, n: &str| -> Result<u32, String> {
            need(e, w, n)?.parse().map_err(|_| format!("{w}/{n} is not a number"))
        };
        let mut accounts = Vec::new();
        for a in e.child("Accounts").into_iter().flat_map(|l| l.elements()).filter(|a| &*a.local == "Account")
        {
            accounts.push(GraphAccount {
                id: number(a, "Account", "Id")?,
                owner_id: number(a, "Account", "OwnerId")?,
                participant: need(a, "Account", "Participant")?,
            });
        }
        let mut transactions = Vec::new();
        for t in e
            .child("Transactions")
            .into_iter()
            .flat_map(|l| l.elements())
            .filter(|t| &*t.local == "Transaction")
        {
            transactions.push(GraphTransaction {
                id: need(t, "Transaction", "Id")?,
                debtor_account: number(t, "Transaction", "DebtorAccountId")?,
                creditor_account: number(t, "Transaction", "CreditorAccountId")?,
                amount: amount_of(t, "Transaction", "Amount")?,
                refundable: amount_of(t, "Transaction", "RefundableAmount")?,
                settled: time_of(t, "Transaction", "SettlementTime")?,
            });
        }
        Ok(TrackingGraph {
            recovery_id: need(e, W, "FundsRecoveryId")?,
            root_transaction_id: need(e, W, "RootTransactionId")?,
            created: time_of(e, W, "CreationTime")?,
            parameters: GraphParameters::read(e.child("Parameters"))?,
            accounts,
            transactions,
        })
    }
}

/// A `CreateFundsRecoveryRequest`, unsigned.
pub fn create_request(participant: &Ispb, recovery: &FundsRecovery, parameters: &GraphParameters) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CreateFundsRecoveryRequest><Participant>{participant}</Participant>{}{}</CreateFundsRecoveryRequest>",
        recovery.write(false),
        parameters.write("TrackingGraphParameters")
    )
}

/// A request that names only the participant and the recovery (`RefundFundsRecoveryRequest`,
/// `CancelFundsRecoveryRequest`), unsigned.
/// An `UpdateFundsRecoveryRequest`, unsigned: the fields the creator may change while the
/// recovery is `CREATED`, `TRACKED` or `AWAITING_ANALYSIS` (its situation, details and
/// contact), as `r` now has them.
pub fn update_request(participant: &Ispb, r: &FundsRecovery) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><UpdateFundsRecoveryRequest><FundsRecoveryId>{}</FundsRecoveryId><Participant>{participant}</Participant><SituationType>{}</SituationType>",
        escape_text(&r.id),
        escape_text(&r.situation_type)
    );
    let _ = write!(
        out,
        "<ContactInformation><Email>{}</Email><Phone>{}</Phone></ContactInformation>",
        escape_text(&r.email),
        escape_text(&r.phone)
    );
    if let Some(d) = &r.details {
        let _ = write!(out, "<ReportDetails>{}</ReportDetails>", escape_text(d));
    }
    out.push_str("</UpdateFundsRecoveryRequest>");
    out
}

/// The statuses in which the creator may update a recovery.
pub const UPDATABLE: [&str; 3] = ["CREATED", "TRACKED", "AWAITING_ANALYSIS"];

pub fn step_request(root: &str, participant: &Ispb, id: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><{root}><Participant>{participant}</Participant><FundsRecoveryId>{}</FundsRecoveryId></{root}>",
        escape_text(id)
    )
}

/// A response carrying a recovery (and its graph, when drawn), unsigned.
pub fn recovery_response(
    root: &str,
    r: &FundsRecovery,
    graph: Option<&TrackingGraph>,
    correlation_id: &str,
    now: DateTime<Utc>,
) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><{root}><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId>{}{}</{root}>",
        stamp(now),
        r.write(true),
        graph.map(TrackingGraph::write).unwrap_or_default()
    )
}

/// The recovery of a response that carries one, and its graph if it does.
pub fn read_recovery(doc: &Document) -> Result<(FundsRecovery, Option<TrackingGraph>), String> {
    let r =
        FundsRecovery::read(doc.root.child("FundsRecovery").ok_or("the answer has no FundsRecovery")?, true)?;
    let graph = doc.root.child("TrackingGraph").map(TrackingGraph::read).transpose()?;
    Ok((r, graph))
}

/// An infraction report (`ExtendedInfractionReport`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfractionReport {
    pub id: String,
    /// The end-to-end id of the payment it is about.
    pub transaction_id: String,
    pub situation_type: String,
    pub details: Option<String>,
    pub recovery_id: Option<String>,
    pub status: String,
    pub reporter: String,
    pub counterparty: String,
    pub analysis_result: Option<String>,
    pub analysis_details: Option<String>,
    pub fraud_marker_id: Option<String>,
    /// What the counterparty is to block.
    pub amount: Option<Money>,
    pub created: DateTime<Utc>,
    pub modified: DateTime<Utc>,
}

impl InfractionReport {
    pub fn write(&self) -> String {
        let mut out = format!(
            "<InfractionReport><TransactionId>{}</TransactionId><Reason>REFUND_REQUEST</Reason><SituationType>{}</SituationType>",
            escape_text(&self.transaction_id),
            escape_text(&self.situation_type)
        );
        if let Some(d) = &self.details {
            let _ = write!(out, "<ReportDetails>{}</ReportDetails>", escape_text(d));
        }
        let _ = write!(out, "<Id>{}</Id>", escape_text(&self.id));
        if let Some(r) = &self.recovery_id {
            let _ = write!(out, "<FundsRecoveryId>{}</FundsRecoveryId>", escape_text(r));
        }
        let _ = write!(
            out,
            "<Status>{}</Status><ReporterParticipant>{}</ReporterParticipant><CounterpartyParticipant>{}</CounterpartyParticipant>",
            escape_text(&self.status),
            escape_text(&self.reporter),
            escape_text(&self.counterparty)
        );
        if let Some(f) = &self.fraud_marker_id {
            let _ = write!(out, "<FraudMarkerId>{}</FraudMarkerId>", escape_text(f));
        }
        if let Some(r) = &self.analysis_result {
            let _ = write!(out, "<AnalysisResult>{}</AnalysisResult>", escape_text(r));
        }
        if let Some(d) = &self.analysis_details {
            let _ = write!(out, "<AnalysisDetails>{}</AnalysisDetails>", escape_text(d));
        }
        if let Some(a) = self.amount {
            let _ = write!(out, "<InfractionAmount>{}</InfractionAmount>", a.to_cents_string());
        }
        let _ = write!(
            out,
            "<CreationTime>{}</CreationTime><LastModified>{}</LastModified></InfractionReport>",
            stamp(self.created),
            stamp(self.modified)
        );
        out
    }

    pub fn read(e: &Element) -> Result<InfractionReport, String> {
        const W: &str = "InfractionReport";
        let status = need(e, W, "Status")?;
        if !REPORT_STATUSES.contains(&status.as_str()) {
            return Err(format!("{W}/Status {status} is not a status"));
        }
        Ok(InfractionReport {
            id: need(e, W, "Id")?,
            transaction_id: need(e, W, "TransactionId")?,
            situation_type: need(e, W, "SituationType")?,
            details: text_of(e, "ReportDetails"),
            recovery_id: text_of(e, "FundsRecoveryId"),
            status,
            reporter: need(e, W, "ReporterParticipant")?,
            counterparty: need(e, W, "CounterpartyParticipant")?,
            analysis_result: text_of(e, "AnalysisResult"),
            analysis_details: text_of(e, "AnalysisDetails"),
            fraud_marker_id: text_of(e, "FraudMarkerId"),
            amount: text_of(e, "InfractionAmount")
                .map(|_| amount_of(e, W, "InfractionAmount"))
                .transpose()?,
            created: time_of(e, W, "CreationTime")?,
            modified: time_of(e, W, "LastModified")?,
        })
    }
}

/// A `ListInfractionReportsResponse`, unsigned.
pub fn list_reports_response(
    reports: &[InfractionReport],
    more: bool,
    correlation_id: &str,
    now: DateTime<Utc>,
) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListInfractionReportsResponse><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId><HasMoreElements>{more}</HasMoreElements><InfractionReports>",
        stamp(now)
    );
    for r in reports {
        out.push_str(&r.write());
    }
    out.push_str("</InfractionReports></ListInfractionReportsResponse>");
    out
}

/// The reports of a `ListInfractionReportsResponse`.
pub fn read_reports(doc: &Document) -> Result<Vec<InfractionReport>, String> {
    match doc.root.child("InfractionReports") {
        Some(l) => {
            l.elements().filter(|e| &*e.local == "InfractionReport").map(InfractionReport::read).collect()
        }
        None => Ok(Vec::new()),
    }
}

/// An `AcknowledgeInfractionReportRequest`, unsigned.
pub fn acknowledge_request(participant: &Ispb, id: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><AcknowledgeInfractionReportRequest><InfractionReportId>{}</InfractionReportId><Participant>{participant}</Participant></AcknowledgeInfractionReportRequest>",
        escape_text(id)
    )
}

/// A `CloseInfractionReportRequest`, unsigned: `fraud_type` is given with `AGREED` only.
pub fn close_request(
    participant: &Ispb,
    id: &str,
    agreed: bool,
    fraud_type: &str,
    details: Option<&str>,
) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CloseInfractionReportRequest><InfractionReportId>{}</InfractionReportId><Participant>{participant}</Participant>",
        escape_text(id)
    );
    if agreed {
        let _ = write!(
            out,
            "<FraudType>{}</FraudType><AnalysisResult>AGREED</AnalysisResult>",
            escape_text(fraud_type)
        );
    } else {
        out.push_str("<AnalysisResult>DISAGREED</AnalysisResult>");
    }
    if let Some(d) = details {
        let _ = write!(out, "<AnalysisDetails>{}</AnalysisDetails>", escape_text(d));
    }
    out.push_str("</CloseInfractionReportRequest>");
    out
}

/// A response carrying one report (`root`), unsigned.
pub fn report_response(root: &str, r: &InfractionReport, correlation_id: &str, now: DateTime<Utc>) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><{root}><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId>{}</{root}>",
        stamp(now),
        r.write()
    )
}

/// The report of a response that carries one.
pub fn read_report(doc: &Document) -> Result<InfractionReport, String> {
    InfractionReport::read(doc.root.child("InfractionReport").ok_or("the answer has no InfractionReport")?)
}

/// An event notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventNotification {
    pub id: u64,
    pub event: String,
    pub entity_id: String,
    pub at: DateTime<Utc>,
    pub participant: String,
}

/// A `ListEventNotificationsResponse`, unsigned.
pub fn events_response(
    events: &[EventNotification],
    next_cursor: &str,
    more: bool,
    correlation_id: &str,
    now: DateTime<Utc>,
) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListEventNotificationsResponse><ResponseTime>{}</ResponseTime><CorrelationId>{correlation_id}</CorrelationId><HasMoreElements>{more}</HasMoreElements><NextCursor>{}</NextCursor><EventNotifications>",
        stamp(now),
        escape_text(next_cursor)
    );
    for e in events {
        let _ = write!(
            out,
            "<EventNotification><Id>{}</Id><Event>{}</Event><EntityType>FUNDS_RECOVERY</EntityType><EntityId>{}</EntityId><Timestamp>{}</Timestamp><Participant>{}</Participant></EventNotification>",
            e.id,
            escape_text(&e.event),
            escape_text(&e.entity_id),
            stamp(e.at),
            escape_text(&e.participant)
        );
    }
    out.push_str("</EventNotifications></ListEventNotificationsResponse>");
    out
}

/// The events of a `ListEventNotificationsResponse`, where the next list starts, and
/// whether more wait. An event of a type this version does not know is kept (its type is
/// logged by the reader); its id still moves the cursor.
pub fn read_events(doc: &Document) -> Result<(Vec<EventNotification>, Option<String>, bool), String> {
    const W: &str = "EventNotification";
    let mut events = Vec::new();
    for e in
        doc.root.child("EventNotifications").into_iter().flat_map(|l| l.elements()).filter(|e| &*e.local == W)
    {
        events.push(EventNotification {
            id: need(e, W, "Id")?.parse().map_err(|_| "EventNotification/Id is not a number".to_owned())?,
            event: need(e, W, "Event")?,
            entity_id: need(e, W, "EntityId")?,
            at: time_of(e, W, "Timestamp")?,
            participant: text_of(e, "Participant").unwrap_or_default(),
        });
    }
    let cursor = text_of(&doc.root, "NextCursor");
    let more = doc.root.text_at(&["HasMoreElements"]).is_some_and(|t| t.trim() == "true");
    Ok((events, cursor, more))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Document {
        Document::parse(text.as_bytes()).unwrap()
    }

    fn recovery() -> FundsRecovery {
        let at = DateTime::parse_from_rfc3339("2026-11-28T10:00:00Z").unwrap().with_timezone(&Utc);
        FundsRecovery {
            id: "ca1b9c01-ff9e-4a58-90ab-d31512e15ce0".into(),
            root_transaction_id: "E9999901012341234123412345678900".into(),
            situation_type: "SCAM".into(),
            details: Some("boleto & QR <falso>".into()),
            email: "abc@pix.br".into(),
            phone: "+5561988887777".into(),
            status: "CREATED".into(),
            reporter: "99999010".into(),
            created: at,
            modified: at,
        }
    }

    #[test]
    fn a_recovery_and_its_graph_read_back_as_written() {
        let r = recovery();
        let graph = TrackingGraph {
            recovery_id: r.id.clone(),
            root_transaction_id: r.root_transaction_id.clone(),
            created: r.created,
            parameters: GRAPH_MAX,
            accounts: vec![
                GraphAccount { id: 1, owner_id: 1, participant: "99999010".into() },
                GraphAccount { id: 2, owner_id: 2, participant: "88888888".into() },
            ],
            transactions: vec![GraphTransaction {
                id: r.root_transaction_id.clone(),
                debtor_account: 1,
                creditor_account: 2,
                amount: Money::parse_two_places("1000.20").unwrap(),
                refundable: Money::parse_two_places("900.10").unwrap(),
                settled: r.created,
            }],
        };
        let text = recovery_response("CreateFundsRecoveryResponse", &r, Some(&graph), "c", r.created);
        assert_eq!(read_recovery(&parse(&text)).unwrap(), (r, Some(graph)));
    }

    #[test]
    fn the_apis_create_request_example_reads_and_its_parameters_past_the_maxima_are_refused() {
        // The API's own example asks for 500 transactions, PT24H and 5 hops: beyond its
        // documented maxima, which the simulator refuses as the DICT says it does.
        let example = "<CreateFundsRecoveryRequest><Participant>99999010</Participant><FundsRecovery><RootTransactionId>E9999901012341234123412345678900</RootTransactionId><SituationType>SCAM</SituationType><ReportDetails>x</ReportDetails><ContactInformation><Email>abc@pix.br</Email><Phone>+5561988887777</Phone></ContactInformation></FundsRecovery><TrackingGraphParameters><MinTransactionAmount>200.00</MinTransactionAmount><MaxTransactions>500</MaxTransactions><HopWindow>PT24H</HopWindow><MaxHops>5</MaxHops></TrackingGraphParameters></CreateFundsRecoveryRequest>";
        let doc = parse(example);
        let r = FundsRecovery::read(doc.root.child("FundsRecovery").unwrap(), false).unwrap();
        assert_eq!((r.situation_type.as_str(), r.email.as_str()), ("SCAM", "abc@pix.br"));
        assert!(GraphParameters::read(doc.root.child("TrackingGraphParameters")).is_err());
        let ours = parse(&create_request(&Ispb::parse("99999010").unwrap(), &r, &GRAPH_MAX));
        assert_eq!(GraphParameters::read(ours.root.child("TrackingGraphParameters")).unwrap(), GRAPH_MAX);
        assert_eq!(GraphParameters::read(None).unwrap(), GRAPH_MAX);
    }

    #[test]
    fn a_report_and_a_page_of_events_read_back_as_written() {
        let at = recovery().created;
        let report = InfractionReport {
            id: "91d65e98-97c0-4b0f-b577-73625da1f9fc".into(),
            transaction_id: "E9999901012341234123412345678901".into(),
            situation_type: "SCAM".into(),
            details: None,
            recovery_id: Some("ca1b9c01-ff9e-4a58-90ab-d31512e15ce0".into()),
            status: "OPEN".into(),
            reporter: "99999010".into(),
            counterparty: "99999011".into(),
            analysis_result: None,
            analysis_details: None,
            fraud_marker_id: None,
            amount: Some(Money::parse_two_places("200.00").unwrap()),
            created: at,
            modified: at,
        };
        let list = list_reports_response(std::slice::from_ref(&report), false, "c", at);
        assert_eq!(read_reports(&parse(&list)).unwrap(), vec![report]);
        let events = vec![EventNotification {
            id: 10000,
            event: "FUNDS_RECOVERY_ANALYSED".into(),
            entity_id: "91d65e98-97c0-4b0f-b577-73625da1f9fc".into(),
            at,
            participant: "12345678".into(),
        }];
        let page = events_response(&events, "10001", true, "c", at);
        assert_eq!(read_events(&parse(&page)).unwrap(), (events, Some("10001".into()), true));
    }

    #[test]
    fn a_close_names_the_fraud_type_only_when_agreed() {
        let p = Ispb::parse("12345678").unwrap();
        let agreed = parse(&close_request(&p, "id", true, "MULE_ACCOUNT", Some("bloqueado")));
        assert_eq!(agreed.root.text_at(&["FraudType"]).as_deref(), Some("MULE_ACCOUNT"));
        assert_eq!(agreed.root.text_at(&["AnalysisResult"]).as_deref(), Some("AGREED"));
        let disagreed = parse(&close_request(&p, "id", false, "MULE_ACCOUNT", None));
        assert_eq!(disagreed.root.text_at(&["FraudType"]), None);
        assert_eq!(disagreed.root.text_at(&["AnalysisResult"]).as_deref(), Some("DISAGREED"));
    }
}
