//! The SPI's ISO 20022 messages that pixgw exchanges, as the message catalogue (5.13.1)
//! defines them: pacs.008 (a payment), pacs.002 (its status), pacs.004 (a return) and
//! admi.002 (a message refused), each inside the SPI's envelope (`AppHdr` + `Document`, one
//! default namespace `https://www.bcb.gov.br/pi/<message>/<version>`).
//!
//! Pure: a [`Message`] is written to the text that is signed and sent ([`Message::write`],
//! with an empty `Sgntr` for [`super::dsig::sign_spi`]), and read back from a parsed
//! document ([`Message::read`]), which checks every field a rule of the catalogue's schema
//! constrains and says where a message breaks one. Writing follows the schema's element
//! order exactly; `tests/api/spi_xsd.rs` validates what it writes against the schema files
//! in `data/spi/xsd`.
//!
//! Identifiers are the catalogue's: `BizMsgIdr` = `MsgId` = `M` + ISPB + 23 alphanumerics;
//! `EndToEndId` = `E` + ISPB + `yyyyMMddHHmm` (UTC) + 11 alphanumerics; `RtrId` the same with
//! `D`. The random parts come from the caller (the domain draws them), so the same message
//! written twice is the same text.

use std::fmt::Write;

use chrono::{DateTime, Utc};

use super::xml::{escape_attr, escape_text, Document, Element};
use crate::domain::money::Money;

/// The SPI's own ISPB: the sender of what pixgw reads, the receiver of what it sends.
pub const SPI_ISPB: &str = "00038166";
/// Characters of the random tail of a `MsgId`.
pub const MSG_ID_RANDOM_LEN: usize = 23;
/// Characters of the random tail of an `EndToEndId` or `RtrId`.
pub const E2E_RANDOM_LEN: usize = 11;
/// The longest remittance text (`Ustrd`).
pub const REMITTANCE_LEN_MAX: usize = 140;
/// The longest name (`Nm`).
pub const NAME_LEN_MAX: usize = 140;
/// The longest proxy (a PIX key, `Prxy/Id`).
pub const PROXY_LEN_MAX: usize = 77;
/// The longest `TxId`.
pub const TX_ID_LEN_MAX: usize = 35;
/// The longest free text of a status or return reason (`AddtlInf`).
pub const ADDITIONAL_INFO_LEN_MAX: usize = 105;
/// Transactions one message may carry (pixgw writes one; the SPI may send more).
pub const TXS_PER_MESSAGE_MAX: usize = 1000;

const ALPHANUMERIC: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A participant's ISPB: eight digits or upper-case letters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ispb(String);

impl Ispb {
    pub fn parse(text: &str) -> Option<Ispb> {
        let ok = text.len() == 8 && text.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase());
        ok.then(|| Ispb(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The SPI's ISPB.
    pub fn spi() -> Ispb {
        Ispb(SPI_ISPB.to_owned())
    }
}

impl std::fmt::Display for Ispb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn alphanumeric(random: &[u8], len: usize) -> String {
    random
        .iter()
        .cycle()
        .take(len)
        .map(|b| ALPHANUMERIC[usize::from(*b) % ALPHANUMERIC.len()] as char)
        .collect()
}

/// A message id of `ispb`: `M` + ISPB + 23 characters drawn from `random` (at least one byte).
pub fn msg_id(ispb: &Ispb, random: &[u8]) -> String {
    format!("M{ispb}{}", alphanumeric(random, MSG_ID_RANDOM_LEN))
}

/// An end-to-end id (`prefix` `E`) or return id (`D`) made by `ispb` at `at`.
pub fn end_to_end_id(prefix: char, ispb: &Ispb, at: DateTime<Utc>, random: &[u8]) -> String {
    format!("{prefix}{ispb}{}{}", at.format("%Y%m%d%H%M"), alphanumeric(random, E2E_RANDOM_LEN))
}

/// Whether `text` is an end-to-end id (`prefix` `E`) or a return id (`D`) of the catalogue's
/// form: its pattern bounds each digit of the time stamp (month `[0-1][0-9]`, day
/// `[0-3][0-9]`...) but does not ask for a date of the calendar, and neither does this.
pub fn is_end_to_end_id(text: &str, prefix: char) -> bool {
    let b = text.as_bytes();
    if b.len() != 32 || b[0] != prefix as u8 || Ispb::parse(&text[1..9]).is_none() {
        return false;
    }
    let stamp = &b[9..21];
    let bounds = b"999919392959";
    stamp.iter().zip(bounds).all(|(c, max)| c.is_ascii_digit() && c <= max)
        && b[21..].iter().all(u8::is_ascii_alphanumeric)
}

fn is_msg_id(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 32
        && b[0] == b'M'
        && Ispb::parse(&text[1..9]).is_some()
        && b[9..].iter().all(u8::is_ascii_alphanumeric)
}

/// A CPF (11 digits) or CNPJ (12 digits or upper-case letters, then 2 digits).
fn is_document(text: &str) -> bool {
    let b = text.as_bytes();
    match b.len() {
        11 => b.iter().all(u8::is_ascii_digit),
        14 => {
            b[..12].iter().all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
                && b[12..].iter().all(u8::is_ascii_digit)
        }
        _ => false,
    }
}

macro_rules! codes {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vdoc])* $variant),+ }

        impl $name {
            pub fn code(self) -> &'static str {
                match self { $($name::$variant => $code),+ }
            }

            pub fn parse(text: &str) -> Option<$name> {
                match text { $($code => Some($name::$variant),)+ _ => None }
            }
        }
    };
}

codes!(
    /// How the payer started the payment (`LclInstrm/Prtry`).
    Instrument {
        Manual = "MANU",
        Key = "DICT",
        DynamicQr = "QRDN",
        StaticQr = "QRES",
        Initiator = "INIC",
        DynamicAutomatic = "APDN",
        StaticAutomatic = "APES",
        Automatic = "AUTO",
    }
);

impl Instrument {
    /// Whether the catalogue requires the creditor's key (`Prxy`) with this instrument.
    pub fn needs_proxy(self) -> bool {
        matches!(
            self,
            Instrument::Key
                | Instrument::DynamicQr
                | Instrument::StaticQr
                | Instrument::Initiator
                | Instrument::DynamicAutomatic
        )
    }

    /// The lengths a `TxId` may have with this instrument (`None`: it must be absent).
    pub fn tx_id_lengths(self) -> Option<std::ops::RangeInclusive<usize>> {
        match self {
            Instrument::Manual | Instrument::Key => None,
            Instrument::StaticQr | Instrument::Initiator | Instrument::StaticAutomatic => Some(1..=25),
            Instrument::DynamicQr | Instrument::DynamicAutomatic | Instrument::Automatic => Some(26..=35),
        }
    }
}

codes!(
    /// Why the payment is made (`Purp/Cd`).
    Purpose { Payment = "IPAY", Change = "GSCB", Withdrawal = "OTHR", Tax = "IPRT", MedRefund = "REFU" }
);

codes!(
    /// The kind of a user's account (`Tp/Cd`).
    AccountType { Current = "CACC", Savings = "SVGS", Payment = "TRAN", Salary = "SLRY", Other = "OTHR" }
);

codes!(
    /// A transaction's status in a pacs.002 (`TxSts`).
    TxStatus {
        /// The receiver accepted it; the SPI is settling.
        Accepted = "ACSP",
        /// Settled: told to the payer.
        SettledForPayer = "ACSC",
        /// Settled: told to the receiver.
        SettledForReceiver = "ACCC",
        Rejected = "RJCT",
    }
);

codes!(
    /// Why money is returned (pacs.004 `RtrRsnInf/Rsn/Cd`).
    ReturnReason {
        /// A MED for an operational failure of the receiver's institution.
        BankError = "BE08",
        /// A MED for fraud.
        Fraud = "FR01",
        /// Asked by the receiving user (an ordinary devolução).
        Requested = "MD06",
        /// A Pix Saque or Troco that failed.
        WithdrawalError = "SL02",
    }
);

/// Priority and service level of a payment (`InstrPrty` + `SvcLvl/Prtry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// Settle at once (`HIGH` / `PAGPRI`): every PIX a user starts now.
    Immediate,
    /// A scheduled payment (`NORM` / `PAGAGD`).
    Scheduled,
    /// Held for fraud analysis (`NORM` / `PAGFRD`).
    FraudCheck,
}

impl Priority {
    fn codes(self) -> (&'static str, &'static str) {
        match self {
            Priority::Immediate => ("HIGH", "PAGPRI"),
            Priority::Scheduled => ("NORM", "PAGAGD"),
            Priority::FraudCheck => ("NORM", "PAGFRD"),
        }
    }

    fn parse(priority: &str, level: &str) -> Option<Priority> {
        match (priority, level) {
            ("HIGH", "PAGPRI") => Some(Priority::Immediate),
            ("NORM", "PAGAGD") => Some(Priority::Scheduled),
            ("NORM", "PAGFRD") => Some(Priority::FraudCheck),
            _ => None,
        }
    }
}

/// A user's account at a participant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserAccount {
    pub ispb: Ispb,
    /// The branch (`Issr`), up to 4 digits; none for a payment institution.
    pub branch: Option<String>,
    /// Up to 20 digits or upper-case letters.
    pub number: String,
    pub kind: AccountType,
}

/// One payment of a pacs.008.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditTransfer {
    pub end_to_end_id: String,
    /// The receiver's reconciliation id (a charge's txid), for the instruments that take one.
    pub tx_id: Option<String>,
    pub amount: Money,
    /// When the payer's institution accepted the payment (the time limits count from it).
    pub accepted_at: DateTime<Utc>,
    pub instrument: Instrument,
    /// The CNPJ of a payment initiator, if one started it.
    pub initiator: Option<String>,
    pub debtor_name: String,
    pub debtor_document: String,
    pub debtor_account: UserAccount,
    pub creditor_document: String,
    pub creditor_account: UserAccount,
    /// The creditor's key, when the payment was made to one.
    pub proxy: Option<String>,
    pub purpose: Purpose,
    pub remittance: Option<String>,
}

/// One status of a pacs.002.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusReport {
    /// The original's `InstrId`, or its end-to-end id when it had none (the catalogue's
    /// examples repeat it).
    pub original_instruction_id: String,
    pub original_end_to_end_id: String,
    pub status: TxStatus,
    /// The catalogue's reason code, for a rejection.
    pub reason: Option<String>,
    pub additional_info: Option<String>,
    /// When the SPI settled it (`FctvIntrBkSttlmDt/DtTm`).
    pub settled_at: Option<DateTime<Utc>>,
}

/// One return of a pacs.004.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Return {
    pub return_id: String,
    pub original_end_to_end_id: String,
    pub amount: Money,
    pub priority_immediate: bool,
    pub reason: ReturnReason,
    pub additional_info: Option<String>,
    pub remittance: Option<String>,
    /// The original payment's payer's institution (the return's receiver).
    pub original_debtor_agent: Ispb,
    /// The original payment's receiver's institution (the return's sender).
    pub original_creditor_agent: Ispb,
}

/// An admi.002: the SPI refused a message it could not process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reject {
    /// The refused message's `MsgId` (or ICOM's resource id when it could not be read).
    pub reference: String,
    /// The catalogue's reason code.
    pub reason: String,
    pub rejected_at: Option<DateTime<Utc>>,
    pub location: Option<String>,
    pub description: Option<String>,
}

/// What a message carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    CreditTransfers { priority: Priority, txs: Vec<CreditTransfer> },
    Statuses(Vec<StatusReport>),
    Returns(Vec<Return>),
    Reject(Reject),
}

/// The kinds of message, with the versions pixgw writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Pacs008,
    Pacs002,
    Pacs004,
    Admi002,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Pacs008 => "pacs.008",
            Kind::Pacs002 => "pacs.002",
            Kind::Pacs004 => "pacs.004",
            Kind::Admi002 => "admi.002",
        }
    }

    /// The catalogue version written (5.13.1).
    pub fn version(self) -> &'static str {
        match self {
            Kind::Pacs008 => "1.16",
            Kind::Pacs002 => "1.17",
            Kind::Pacs004 => "1.5",
            Kind::Admi002 => "1.5",
        }
    }

    pub fn namespace(self) -> String {
        format!("https://www.bcb.gov.br/pi/{}/{}", self.name(), self.version())
    }

    pub fn definition(self) -> String {
        format!("{}.spi.{}", self.name(), self.version())
    }

    fn document_child(self) -> &'static str {
        match self {
            Kind::Pacs008 => "FIToFICstmrCdtTrf",
            Kind::Pacs002 => "FIToFIPmtStsRpt",
            Kind::Pacs004 => "PmtRtr",
            Kind::Admi002 => "admi.002.001.01",
        }
    }

    fn of_namespace(ns: &str) -> Option<Kind> {
        let rest = ns.strip_prefix("https://www.bcb.gov.br/pi/")?;
        let (name, version) = rest.split_once('/')?;
        if version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return None;
        }
        [Kind::Pacs008, Kind::Pacs002, Kind::Pacs004, Kind::Admi002].into_iter().find(|k| k.name() == name)
    }
}

impl Body {
    pub fn kind(&self) -> Kind {
        match self {
            Body::CreditTransfers { .. } => Kind::Pacs008,
            Body::Statuses(_) => Kind::Pacs002,
            Body::Returns(_) => Kind::Pacs004,
            Body::Reject(_) => Kind::Admi002,
        }
    }
}

/// A whole message: its application header and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub from: Ispb,
    pub to: Ispb,
    /// `BizMsgIdr`, also the group header's `MsgId`.
    pub msg_id: String,
    pub created: DateTime<Utc>,
    /// The `MsgDefIdr` read (written: the kind's definition).
    pub definition: String,
    pub body: Body,
}

/// Where a message read breaks the catalogue's rules, and how.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {reason}")]
pub struct ReadError {
    /// The element's path (`Document/FIToFICstmrCdtTrf/...`).
    pub location: String,
    pub reason: String,
}

fn stamp(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

impl Message {
    pub fn new(from: Ispb, to: Ispb, msg_id: String, created: DateTime<Utc>, body: Body) -> Message {
        let definition = body.kind().definition();
        Message { from, to, msg_id, created, definition, body }
    }

    pub fn kind(&self) -> Kind {
        self.body.kind()
    }

    /// The message as sent, with an empty `Sgntr` for the signature.
    pub fn write(&self) -> String {
        let kind = self.kind();
        let mut out = String::with_capacity(3072);
        let _ = write!(
            out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Envelope xmlns=\"{}\"><AppHdr><Fr><FIId><FinInstnId><Othr><Id>{}</Id></Othr></FinInstnId></FIId></Fr><To><FIId><FinInstnId><Othr><Id>{}</Id></Othr></FinInstnId></FIId></To><BizMsgIdr>{}</BizMsgIdr><MsgDefIdr>{}</MsgDefIdr><CreDt>{}</CreDt><Sgntr></Sgntr></AppHdr><Document><{}>",
            escape_attr(&kind.namespace()),
            self.from,
            self.to,
            escape_text(&self.msg_id),
            kind.definition(),
            stamp(self.created),
            kind.document_child(),
        );
        match &self.body {
            Body::CreditTransfers { priority, txs } => self.write_pacs008(*priority, txs, &mut out),
            Body::Statuses(reports) => self.write_pacs002(reports, &mut out),
            Body::Returns(returns) => self.write_pacs004(returns, &mut out),
            Body::Reject(r) => write_admi002(r, &mut out),
        }
        let _ = write!(out, "</{}></Document></Envelope>", kind.document_child());
        out
    }

    fn write_group_header(&self, out: &mut String, count: Option<usize>) {
        let _ = write!(
            out,
            "<GrpHdr><MsgId>{}</MsgId><CreDtTm>{}</CreDtTm>",
            escape_text(&self.msg_id),
            stamp(self.created)
        );
        if let Some(n) = count {
            let _ = write!(out, "<NbOfTxs>{n}</NbOfTxs><SttlmInf><SttlmMtd>CLRG</SttlmMtd></SttlmInf>");
        }
    }

    fn write_pacs008(&self, priority: Priority, txs: &[CreditTransfer], out: &mut String) {
        self.write_group_header(out, Some(txs.len()));
        let (p, level) = priority.codes();
        let _ = write!(
            out,
            "<PmtTpInf><InstrPrty>{p}</InstrPrty><SvcLvl><Prtry>{level}</Prtry></SvcLvl></PmtTpInf></GrpHdr>"
        );
        for t in txs {
            out.push_str("<CdtTrfTxInf><PmtId>");
            let _ = write!(out, "<EndToEndId>{}</EndToEndId>", escape_text(&t.end_to_end_id));
            if let Some(id) = &t.tx_id {
                let _ = write!(out, "<TxId>{}</TxId>", escape_text(id));
            }
            let _ = write!(
                out,
                "</PmtId><IntrBkSttlmAmt Ccy=\"BRL\">{}</IntrBkSttlmAmt><AccptncDtTm>{}</AccptncDtTm><ChrgBr>SLEV</ChrgBr><MndtRltdInf><Tp><LclInstrm><Prtry>{}</Prtry></LclInstrm></Tp></MndtRltdInf>",
                t.amount,
                stamp(t.accepted_at),
                t.instrument.code()
            );
            if let Some(cnpj) = &t.initiator {
                let _ = write!(
                    out,
                    "<InitgPty><Id><OrgId><Othr><Id>{}</Id></Othr></OrgId></Id></InitgPty>",
                    escape_text(cnpj)
                );
            }
            let _ = write!(
                out,
                "<Dbtr><Nm>{}</Nm><Id><PrvtId><Othr><Id>{}</Id></Othr></PrvtId></Id></Dbtr>",
                escape_text(&t.debtor_name),
                escape_text(&t.debtor_document)
            );
            write_account(out, "DbtrAcct", &t.debtor_account, None);
            let _ = write!(
                out,
                "<DbtrAgt><FinInstnId><ClrSysMmbId><MmbId>{}</MmbId></ClrSysMmbId></FinInstnId></DbtrAgt><CdtrAgt><FinInstnId><ClrSysMmbId><MmbId>{}</MmbId></ClrSysMmbId></FinInstnId></CdtrAgt>",
                t.debtor_account.ispb, t.creditor_account.ispb
            );
            let _ = write!(
                out,
                "<Cdtr><Id><PrvtId><Othr><Id>{}</Id></Othr></PrvtId></Id></Cdtr>",
                escape_text(&t.creditor_document)
            );
            write_account(out, "CdtrAcct", &t.creditor_account, t.proxy.as_deref());
            let _ = write!(out, "<Purp><Cd>{}</Cd></Purp>", t.purpose.code());
            if let Some(text) = &t.remittance {
                let _ = write!(out, "<RmtInf><Ustrd>{}</Ustrd></RmtInf>", escape_text(text));
            }
            out.push_str("</CdtTrfTxInf>");
        }
    }

    fn write_pacs002(&self, reports: &[StatusReport], out: &mut String) {
        self.write_group_header(out, None);
        out.push_str("</GrpHdr>");
        for r in reports {
            let _ = write!(
                out,
                "<TxInfAndSts><OrgnlInstrId>{}</OrgnlInstrId><OrgnlEndToEndId>{}</OrgnlEndToEndId><TxSts>{}</TxSts>",
                escape_text(&r.original_instruction_id),
                escape_text(&r.original_end_to_end_id),
                r.status.code()
            );
            if r.reason.is_some() || r.additional_info.is_some() {
                out.push_str("<StsRsnInf>");
                if let Some(code) = &r.reason {
                    let _ = write!(out, "<Rsn><Cd>{}</Cd></Rsn>", escape_text(code));
                }
                if let Some(info) = &r.additional_info {
                    let _ = write!(out, "<AddtlInf>{}</AddtlInf>", escape_text(info));
                }
                out.push_str("</StsRsnInf>");
            }
            if let Some(at) = r.settled_at {
                let _ = write!(out, "<FctvIntrBkSttlmDt><DtTm>{}</DtTm></FctvIntrBkSttlmDt>", stamp(at));
            }
            out.push_str("</TxInfAndSts>");
        }
    }

    fn write_pacs004(&self, returns: &[Return], out: &mut String) {
        self.write_group_header(out, Some(returns.len()));
        out.push_str("</GrpHdr>");
        for r in returns {
            let _ = write!(
                out,
                "<TxInf><RtrId>{}</RtrId><OrgnlEndToEndId>{}</OrgnlEndToEndId><RtrdIntrBkSttlmAmt Ccy=\"BRL\">{}</RtrdIntrBkSttlmAmt><SttlmPrty>{}</SttlmPrty><ChrgBr>SLEV</ChrgBr><RtrRsnInf><Rsn><Cd>{}</Cd></Rsn>",
                escape_text(&r.return_id),
                escape_text(&r.original_end_to_end_id),
                r.amount,
                if r.priority_immediate { "HIGH" } else { "NORM" },
                r.reason.code()
            );
            if let Some(info) = &r.additional_info {
                let _ = write!(out, "<AddtlInf>{}</AddtlInf>", escape_text(info));
            }
            out.push_str("</RtrRsnInf><OrgnlTxRef>");
            if let Some(text) = &r.remittance {
                let _ = write!(out, "<RmtInf><Ustrd>{}</Ustrd></RmtInf>", escape_text(text));
            }
            let _ = write!(
                out,
                "<DbtrAgt><FinInstnId><ClrSysMmbId><MmbId>{}</MmbId></ClrSysMmbId></FinInstnId></DbtrAgt><CdtrAgt><FinInstnId><ClrSysMmbId><MmbId>{}</MmbId></ClrSysMmbId></FinInstnId></CdtrAgt></OrgnlTxRef></TxInf>",
                r.original_debtor_agent, r.original_creditor_agent
            );
        }
    }

    /// Reads a message from its parsed document (the signature is checked elsewhere).
    pub fn read(doc: &Document) -> Result<Message, ReadError> {
        let root = &doc.root;
        let ns = root.ns.as_deref().unwrap_or("");
        let kind =
            Kind::of_namespace(ns).ok_or_else(|| err("Envelope", format!("unknown namespace {ns:?}")))?;
        if &*root.local != "Envelope" {
            return Err(err(&root.local, "the root is not Envelope"));
        }
        let mut r = Reader { path: vec!["Envelope".into()] };
        let hdr = r.child(root, "AppHdr")?;
        r.path.push("AppHdr".into());
        let from = r.ispb(hdr, &["Fr", "FIId", "FinInstnId", "Othr", "Id"])?;
        let to = r.ispb(hdr, &["To", "FIId", "FinInstnId", "Othr", "Id"])?;
        let msg_id = r.text(hdr, &["BizMsgIdr"])?;
        if !is_msg_id(&msg_id) {
            return Err(r.fail("BizMsgIdr", "is not a message id"));
        }
        let definition = r.text(hdr, &["MsgDefIdr"])?;
        if !definition.starts_with(kind.name()) {
            return Err(r.fail("MsgDefIdr", format!("{definition} is not a {}", kind.name())));
        }
        let created = r.time(hdr, &["CreDt"])?;
        r.child(hdr, "Sgntr")?;
        r.path = vec!["Envelope".into(), "Document".into()];
        let document = r.child(root, "Document")?;
        let inner = r.child(document, kind.document_child())?;
        r.path.push(kind.document_child().into());
        if document.elements().count() != 1 {
            return Err(r.fail("Document", "holds more than one message"));
        }
        if kind != Kind::Admi002 {
            let group_id = r.text(inner, &["GrpHdr", "MsgId"])?;
            if group_id != msg_id && !is_msg_id(&group_id) {
                return Err(r.fail("GrpHdr/MsgId", "is not a message id"));
            }
        }
        let body = match kind {
            Kind::Pacs008 => r.pacs008(inner)?,
            Kind::Pacs002 => Body::Statuses(r.each(inner, "TxInfAndSts", Reader::status)?),
            Kind::Pacs004 => Body::Returns(r.each(inner, "TxInf", Reader::ret)?),
            Kind::Admi002 => Body::Reject(r.admi002(inner)?),
        };
        Ok(Message { from, to, msg_id, created, definition, body })
    }
}

fn write_account(out: &mut String, tag: &str, a: &UserAccount, proxy: Option<&str>) {
    let _ = write!(out, "<{tag}><Id><Othr><Id>{}</Id>", escape_text(&a.number));
    if let Some(branch) = &a.branch {
        let _ = write!(out, "<Issr>{}</Issr>", escape_text(branch));
    }
    let _ = write!(out, "</Othr></Id><Tp><Cd>{}</Cd></Tp>", a.kind.code());
    if let Some(key) = proxy {
        let _ = write!(out, "<Prxy><Id>{}</Id></Prxy>", escape_text(key));
    }
    let _ = write!(out, "</{tag}>");
}

fn write_admi002(r: &Reject, out: &mut String) {
    let _ = write!(
        out,
        "<RltdRef><Ref>{}</Ref></RltdRef><Rsn><RjctgPtyRsn>{}</RjctgPtyRsn>",
        escape_text(&r.reference),
        escape_text(&r.reason)
    );
    if let Some(at) = r.rejected_at {
        let _ = write!(out, "<RjctnDtTm>{}</RjctnDtTm>", stamp(at));
    }
    if let Some(l) = &r.location {
        let _ = write!(out, "<ErrLctn>{}</ErrLctn>", escape_text(l));
    }
    if let Some(d) = &r.description {
        let _ = write!(out, "<RsnDesc>{}</RsnDesc>", escape_text(d));
    }
    out.push_str("</Rsn>");
}

fn err(location: &str, reason: impl Into<String>) -> ReadError {
    ReadError { location: location.to_owned(), reason: reason.into() }
}

/// Reads fields, keeping the path it is at for the errors it reports.
struct Reader {
    path: Vec<String>,
}

impl Reader {
    fn fail(&self, at: &str, reason: impl Into<String>) -> ReadError {
        let mut location = self.path.join("/");
        if !at.is_empty() {
            location.push('/');
            location.push_str(at);
        }
        err(&location, reason)
    }

    fn child<'a>(&self, e: &'a Element, name: &str) -> Result<&'a Element, ReadError> {
        e.child(name).ok_or_else(|| self.fail(name, "is missing"))
    }

    fn opt_text(&self, e: &Element, path: &[&str]) -> Option<String> {
        e.text_at(path)
    }

    fn text(&self, e: &Element, path: &[&str]) -> Result<String, ReadError> {
        match e.text_at(path) {
            Some(t) if !t.is_empty() => Ok(t),
            Some(_) => Err(self.fail(&path.join("/"), "is empty")),
            None => Err(self.fail(&path.join("/"), "is missing")),
        }
    }

    fn bounded(&self, e: &Element, path: &[&str], max: usize) -> Result<Option<String>, ReadError> {
        match self.opt_text(e, path) {
            None => Ok(None),
            Some(t) if t.is_empty() || t.chars().count() > max => {
                Err(self.fail(&path.join("/"), format!("must have 1 to {max} characters")))
            }
            Some(t) => Ok(Some(t)),
        }
    }

    fn ispb(&self, e: &Element, path: &[&str]) -> Result<Ispb, ReadError> {
        let t = self.text(e, path)?;
        Ispb::parse(&t).ok_or_else(|| self.fail(&path.join("/"), format!("{t} is not an ISPB")))
    }

    fn time(&self, e: &Element, path: &[&str]) -> Result<DateTime<Utc>, ReadError> {
        let t = self.text(e, path)?;
        let ok = t.len() == 24 && t.ends_with('Z') && t.as_bytes()[19] == b'.';
        let parsed = DateTime::parse_from_rfc3339(&t).ok().filter(|_| ok);
        parsed
            .map(|d| d.with_timezone(&Utc))
            .ok_or_else(|| self.fail(&path.join("/"), format!("{t} is not yyyy-MM-ddThh:mm:ss.sssZ")))
    }

    fn amount(&self, e: &Element, name: &str) -> Result<Money, ReadError> {
        let el = self.child(e, name)?;
        if el.attr("Ccy") != Some("BRL") {
            return Err(self.fail(name, "the currency is not BRL"));
        }
        let t = el.text();
        let well_formed =
            !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') && t.len() <= 19;
        match Money::parse(&t) {
            Ok(m) if well_formed && !m.is_zero() => Ok(m),
            _ => Err(self.fail(name, format!("{t} is not a positive amount with at most 2 decimals"))),
        }
    }

    fn document(&self, e: &Element, path: &[&str]) -> Result<String, ReadError> {
        let t = self.text(e, path)?;
        if is_document(&t) {
            Ok(t)
        } else {
            Err(self.fail(&path.join("/"), "is not a CPF or CNPJ"))
        }
    }

    fn e2e(&self, e: &Element, name: &str, prefix: char) -> Result<String, ReadError> {
        let t = self.text(e, &[name])?;
        if is_end_to_end_id(&t, prefix) {
            Ok(t)
        } else {
            Err(self.fail(name, format!("{t} is not an id of the catalogue's form")))
        }
    }

    fn each<T>(
        &mut self,
        e: &Element,
        name: &str,
        f: fn(&mut Reader, &Element) -> Result<T, ReadError>,
    ) -> Result<Vec<T>, ReadError> {
        let items: Vec<&Element> = e.elements().filter(|c| &*c.local == name).collect();
        if items.is_empty() {
            return Err(self.fail(name, "is missing"));
        }
        if items.len() > TXS_PER_MESSAGE_MAX {
            return Err(self.fail(name, format!("more than {TXS_PER_MESSAGE_MAX} transactions")));
        }
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            self.path.push(format!("{name}[{}]", i + 1));
            let read = f(self, item);
            self.path.pop();
            out.push(read?);
        }
        Ok(out)
    }

    fn pacs008(&mut self, inner: &Element) -> Result<Body, ReadError> {
        let p = self.text(inner, &["GrpHdr", "PmtTpInf", "InstrPrty"])?;
        let level = self.text(inner, &["GrpHdr", "PmtTpInf", "SvcLvl", "Prtry"])?;
        let priority = Priority::parse(&p, &level)
            .ok_or_else(|| self.fail("GrpHdr/PmtTpInf", format!("{p}/{level} is not a priority")))?;
        if self.text(inner, &["GrpHdr", "SttlmInf", "SttlmMtd"])? != "CLRG" {
            return Err(self.fail("GrpHdr/SttlmInf/SttlmMtd", "is not CLRG"));
        }
        let txs = self.each(inner, "CdtTrfTxInf", Reader::credit_transfer)?;
        let count = self.text(inner, &["GrpHdr", "NbOfTxs"])?;
        if count != txs.len().to_string() {
            return Err(self.fail("GrpHdr/NbOfTxs", format!("says {count}, the message holds {}", txs.len())));
        }
        Ok(Body::CreditTransfers { priority, txs })
    }

    fn account(&self, e: &Element, tag: &str, agent: &str) -> Result<UserAccount, ReadError> {
        let acct = self.child(e, tag)?;
        let number = self.text(acct, &["Id", "Othr", "Id"])?;
        if number.len() > 20 || !number.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()) {
            return Err(self.fail(&format!("{tag}/Id/Othr/Id"), "is not an account number"));
        }
        let branch = self.opt_text(acct, &["Id", "Othr", "Issr"]);
        if branch
            .as_ref()
            .is_some_and(|b| b.is_empty() || b.len() > 4 || !b.bytes().all(|c| c.is_ascii_digit()))
        {
            return Err(self.fail(&format!("{tag}/Id/Othr/Issr"), "is not a branch of up to 4 digits"));
        }
        let kind_code = self.text(acct, &["Tp", "Cd"])?;
        let kind = AccountType::parse(&kind_code).ok_or_else(|| {
            self.fail(&format!("{tag}/Tp/Cd"), format!("{kind_code} is not an account type"))
        })?;
        let ispb = self.ispb(e, &[agent, "FinInstnId", "ClrSysMmbId", "MmbId"])?;
        Ok(UserAccount { ispb, branch, number, kind })
    }

    fn credit_transfer(&mut self, t: &Element) -> Result<CreditTransfer, ReadError> {
        let pmt = self.child(t, "PmtId")?;
        let end_to_end_id = self.e2e(pmt, "EndToEndId", 'E')?;
        let tx_id = self.opt_text(pmt, &["TxId"]);
        if tx_id.as_ref().is_some_and(|id| {
            id.is_empty() || id.len() > TX_ID_LEN_MAX || !id.bytes().all(|b| b.is_ascii_alphanumeric())
        }) {
            return Err(self.fail("PmtId/TxId", "is not 1 to 35 letters and digits"));
        }
        let amount = self.amount(t, "IntrBkSttlmAmt")?;
        let accepted_at = self.time(t, &["AccptncDtTm"])?;
        if self.text(t, &["ChrgBr"])? != "SLEV" {
            return Err(self.fail("ChrgBr", "is not SLEV"));
        }
        let code = self.text(t, &["MndtRltdInf", "Tp", "LclInstrm", "Prtry"])?;
        let instrument = Instrument::parse(&code).ok_or_else(|| {
            self.fail("MndtRltdInf/Tp/LclInstrm/Prtry", format!("{code} is not a way to start a payment"))
        })?;
        match (instrument.tx_id_lengths(), &tx_id) {
            (None, Some(_)) => return Err(self.fail("PmtId/TxId", format!("must be absent with {code}"))),
            (Some(range), Some(id)) if !range.contains(&id.len()) => {
                return Err(self.fail(
                    "PmtId/TxId",
                    format!("must have {} to {} characters with {code}", range.start(), range.end()),
                ))
            }
            _ => {}
        }
        let initiator = match t.child("InitgPty") {
            Some(i) => Some(self.document(i, &["Id", "OrgId", "Othr", "Id"])?),
            None => None,
        };
        let debtor_name = self.text(t, &["Dbtr", "Nm"])?;
        if debtor_name.chars().count() > NAME_LEN_MAX {
            return Err(self.fail("Dbtr/Nm", format!("is over {NAME_LEN_MAX} characters")));
        }
        let debtor_document = self.document(t, &["Dbtr", "Id", "PrvtId", "Othr", "Id"])?;
        let debtor_account = self.account(t, "DbtrAcct", "DbtrAgt")?;
        let creditor_document = self.document(t, &["Cdtr", "Id", "PrvtId", "Othr", "Id"])?;
        let creditor_account = self.account(t, "CdtrAcct", "CdtrAgt")?;
        let proxy = self.bounded(t, &["CdtrAcct", "Prxy", "Id"], PROXY_LEN_MAX)?;
        match (instrument.needs_proxy(), &proxy) {
            (true, None) => return Err(self.fail("CdtrAcct/Prxy", format!("is required with {code}"))),
            (false, Some(_)) if matches!(instrument, Instrument::Manual | Instrument::Automatic) => {
                return Err(self.fail("CdtrAcct/Prxy", format!("must be absent with {code}")))
            }
            _ => {}
        }
        let purpose_code = self.text(t, &["Purp", "Cd"])?;
        let purpose = Purpose::parse(&purpose_code)
            .ok_or_else(|| self.fail("Purp/Cd", format!("{purpose_code} is not a purpose")))?;
        let remittance = self.bounded(t, &["RmtInf", "Ustrd"], REMITTANCE_LEN_MAX)?;
        Ok(CreditTransfer {
            end_to_end_id,
            tx_id,
            amount,
            accepted_at,
            instrument,
            initiator,
            debtor_name,
            debtor_document,
            debtor_account,
            creditor_document,
            creditor_account,
            proxy,
            purpose,
            remittance,
        })
    }

    fn status(&mut self, s: &Element) -> Result<StatusReport, ReadError> {
        let original_instruction_id = self.text(s, &["OrgnlInstrId"])?;
        if !is_end_to_end_id(&original_instruction_id, 'E')
            && !is_end_to_end_id(&original_instruction_id, 'D')
        {
            return Err(self.fail("OrgnlInstrId", "is not an end-to-end or return id"));
        }
        let original_end_to_end_id = self.e2e(s, "OrgnlEndToEndId", 'E')?;
        let code = self.text(s, &["TxSts"])?;
        let status =
            TxStatus::parse(&code).ok_or_else(|| self.fail("TxSts", format!("{code} is not a status")))?;
        let reason = self.opt_text(s, &["StsRsnInf", "Rsn", "Cd"]);
        let additional_info = self.bounded(s, &["StsRsnInf", "AddtlInf"], ADDITIONAL_INFO_LEN_MAX)?;
        if status == TxStatus::Rejected && reason.is_none() {
            return Err(self.fail("StsRsnInf/Rsn/Cd", "is required for RJCT"));
        }
        let settled_at = match s.path(&["FctvIntrBkSttlmDt", "DtTm"]) {
            Some(_) => Some(self.time(s, &["FctvIntrBkSttlmDt", "DtTm"])?),
            None => None,
        };
        Ok(StatusReport {
            original_instruction_id,
            original_end_to_end_id,
            status,
            reason,
            additional_info,
            settled_at,
        })
    }

    fn ret(&mut self, t: &Element) -> Result<Return, ReadError> {
        let return_id = self.e2e(t, "RtrId", 'D')?;
        let original_end_to_end_id = self.e2e(t, "OrgnlEndToEndId", 'E')?;
        let amount = self.amount(t, "RtrdIntrBkSttlmAmt")?;
        let priority_immediate = match self.text(t, &["SttlmPrty"])?.as_str() {
            "HIGH" => true,
            "NORM" => false,
            other => return Err(self.fail("SttlmPrty", format!("{other} is not a priority"))),
        };
        let code = self.text(t, &["RtrRsnInf", "Rsn", "Cd"])?;
        let reason = ReturnReason::parse(&code)
            .ok_or_else(|| self.fail("RtrRsnInf/Rsn/Cd", format!("{code} is not a return reason")))?;
        let additional_info = self.bounded(t, &["RtrRsnInf", "AddtlInf"], ADDITIONAL_INFO_LEN_MAX)?;
        let remittance = self.bounded(t, &["OrgnlTxRef", "RmtInf", "Ustrd"], REMITTANCE_LEN_MAX)?;
        let original_debtor_agent =
            self.ispb(t, &["OrgnlTxRef", "DbtrAgt", "FinInstnId", "ClrSysMmbId", "MmbId"])?;
        let original_creditor_agent =
            self.ispb(t, &["OrgnlTxRef", "CdtrAgt", "FinInstnId", "ClrSysMmbId", "MmbId"])?;
        Ok(Return {
            return_id,
            original_end_to_end_id,
            amount,
            priority_immediate,
            reason,
            additional_info,
            remittance,
            original_debtor_agent,
            original_creditor_agent,
        })
    }

    fn admi002(&mut self, inner: &Element) -> Result<Reject, ReadError> {
        let reference = self.text(inner, &["RltdRef", "Ref"])?;
        let reason = self.text(inner, &["Rsn", "RjctgPtyRsn"])?;
        let rejected_at = match inner.path(&["Rsn", "RjctnDtTm"]) {
            Some(_) => Some(self.time(inner, &["Rsn", "RjctnDtTm"])?),
            None => None,
        };
        Ok(Reject {
            reference,
            reason,
            rejected_at,
            location: self.opt_text(inner, &["Rsn", "ErrLctn"]),
            description: self.opt_text(inner, &["Rsn", "RsnDesc"]),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn ispb(s: &str) -> Ispb {
        Ispb::parse(s).unwrap()
    }

    pub(crate) fn payment() -> CreditTransfer {
        CreditTransfer {
            end_to_end_id: end_to_end_id('E', &ispb("99999999"), at("2026-11-26T10:00:00Z"), b"abc"),
            tx_id: None,
            amount: Money::parse("10.50").unwrap(),
            accepted_at: at("2026-11-26T10:00:00.123Z"),
            instrument: Instrument::Key,
            initiator: None,
            debtor_name: "Ana & Filhos <Ltda>".into(),
            debtor_document: "52998224725".into(),
            debtor_account: UserAccount {
                ispb: ispb("99999999"),
                branch: None,
                number: "42".into(),
                kind: AccountType::Payment,
            },
            creditor_document: "11222333000181".into(),
            creditor_account: UserAccount {
                ispb: ispb("0000000A"),
                branch: Some("1".into()),
                number: "123456".into(),
                kind: AccountType::Current,
            },
            proxy: Some("ana@example.com".into()),
            purpose: Purpose::Payment,
            remittance: Some("pedido 1".into()),
        }
    }

    fn read_back(m: &Message) -> Message {
        Message::read(&Document::parse(m.write().as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn ids_have_the_catalogues_form_for_isbps_with_letters_too() {
        let a = ispb("1234ABCD");
        let id = msg_id(&a, &[0, 61, 62, 255]);
        assert_eq!(id.len(), 32);
        assert!(id.starts_with("M1234ABCD0z0"));
        assert!(is_msg_id(&id));
        let e2e = end_to_end_id('E', &a, at("2026-11-26T23:59:59Z"), &[7; 11]);
        assert_eq!(&e2e[..21], "E1234ABCD202611262359");
        assert!(is_end_to_end_id(&e2e, 'E'));
        assert!(!is_end_to_end_id(&e2e, 'D'));
        assert!(is_end_to_end_id(&end_to_end_id('D', &a, at("2026-11-26T00:00:00Z"), b"x"), 'D'));
        // The schema's pattern bounds digits, not dates: 2026-12-34 passes, month 20 does not.
        assert!(is_end_to_end_id("E1234ABCD202612342359aaaaaaaaaaa", 'E'));
        for bad in [
            "E1234abcd202611262359aaaaaaaaaaa",
            "E1234ABCD202620262359aaaaaaaaaaa",
            "E1234ABCD20261126235!aaaaaaaaaaa",
            "E1234ABCD",
        ] {
            assert!(!is_end_to_end_id(bad, 'E'), "{bad}");
        }
        assert!(Ispb::parse("0000000a").is_none());
        assert!(Ispb::parse("000000000").is_none());
    }

    #[test]
    fn a_payment_reads_back_as_written() {
        let m = Message::new(
            ispb("99999999"),
            Ispb::spi(),
            msg_id(&ispb("99999999"), b"q"),
            at("2026-11-26T10:00:01Z"),
            Body::CreditTransfers { priority: Priority::Immediate, txs: vec![payment()] },
        );
        let text = m.write();
        assert!(text.contains("<Nm>Ana &amp; Filhos &lt;Ltda&gt;</Nm>"));
        assert!(text.contains("<Sgntr></Sgntr>"));
        assert_eq!(read_back(&m), m);
        let qr =
            CreditTransfer { instrument: Instrument::DynamicQr, tx_id: Some("a".repeat(26)), ..payment() };
        let m = Message {
            body: Body::CreditTransfers { priority: Priority::Scheduled, txs: vec![qr, payment()] },
            ..m
        };
        assert_eq!(read_back(&m), m);
    }

    #[test]
    fn statuses_returns_and_rejects_read_back_as_written() {
        let from = ispb("99999999");
        let id = msg_id(&from, b"s");
        let e2e = payment().end_to_end_id;
        let statuses = Body::Statuses(vec![
            StatusReport {
                original_instruction_id: e2e.clone(),
                original_end_to_end_id: e2e.clone(),
                status: TxStatus::Accepted,
                reason: None,
                additional_info: None,
                settled_at: None,
            },
            StatusReport {
                original_instruction_id: e2e.clone(),
                original_end_to_end_id: e2e.clone(),
                status: TxStatus::Rejected,
                reason: Some("AC03".into()),
                additional_info: Some("no such account".into()),
                settled_at: None,
            },
            StatusReport {
                original_instruction_id: e2e.clone(),
                original_end_to_end_id: e2e.clone(),
                status: TxStatus::SettledForPayer,
                reason: None,
                additional_info: None,
                settled_at: Some(at("2026-11-26T10:00:02.5Z")),
            },
        ]);
        let ret = Body::Returns(vec![Return {
            return_id: end_to_end_id('D', &from, at("2026-11-27T10:00:00Z"), b"r"),
            original_end_to_end_id: e2e,
            amount: Money::parse("1").unwrap(),
            priority_immediate: true,
            reason: ReturnReason::Requested,
            additional_info: Some("devolução".into()),
            remittance: None,
            original_debtor_agent: ispb("0000000A"),
            original_creditor_agent: from.clone(),
        }]);
        let reject = Body::Reject(Reject {
            reference: id.clone(),
            reason: "DS0G".into(),
            rejected_at: Some(at("2026-11-26T10:00:03Z")),
            location: Some("AppHdr/Sgntr".into()),
            description: Some("assinatura inválida".into()),
        });
        for body in [statuses, ret, reject] {
            let m = Message::new(from.clone(), Ispb::spi(), id.clone(), at("2026-11-26T10:00:01Z"), body);
            assert_eq!(read_back(&m), m);
        }
    }

    fn broken(edit: impl Fn(String) -> String) -> ReadError {
        let m = Message::new(
            ispb("99999999"),
            Ispb::spi(),
            msg_id(&ispb("99999999"), b"q"),
            at("2026-11-26T10:00:01Z"),
            Body::CreditTransfers { priority: Priority::Immediate, txs: vec![payment()] },
        );
        let text = edit(m.write());
        Message::read(&Document::parse(text.as_bytes()).unwrap()).unwrap_err()
    }

    #[test]
    fn a_message_that_breaks_a_rule_of_the_catalogue_says_where() {
        let e = broken(|t| t.replace(">10.50<", ">10.505<"));
        assert_eq!(e.location, "Envelope/Document/FIToFICstmrCdtTrf/CdtTrfTxInf[1]/IntrBkSttlmAmt");
        assert!(broken(|t| t.replace("Ccy=\"BRL\"", "Ccy=\"USD\"")).reason.contains("BRL"));
        assert!(broken(|t| t.replace(">0.00<", ">0<").replace(">10.50<", ">0.00<"))
            .reason
            .contains("positive"));
        assert_eq!(
            broken(|t| t.replace("<Prtry>DICT</Prtry>", "<Prtry>MANU</Prtry>")).location,
            "Envelope/Document/FIToFICstmrCdtTrf/CdtTrfTxInf[1]/CdtrAcct/Prxy"
        );
        assert!(broken(|t| t.replace("pacs.008/1.16", "pacs.009/1.0")).reason.contains("namespace"));
        assert!(broken(|t| t.replace("<NbOfTxs>1<", "<NbOfTxs>2<")).reason.contains("holds 1"));
        assert!(broken(|t| t.replace("<Id>52998224725</Id>", "<Id>5299822472</Id>")).reason.contains("CPF"));
        assert!(broken(|t| t.replace(".123Z", "Z")).reason.contains("sss"));
        let no_e2e = broken(|t| {
            let start = t.find("<EndToEndId>").unwrap();
            let end = t.find("</EndToEndId>").unwrap() + "</EndToEndId>".len();
            format!("{}{}", &t[..start], &t[end..])
        });
        assert_eq!(no_e2e.reason, "is missing");
    }

    #[test]
    fn the_catalogues_own_examples_read() {
        for (name, kind) in [
            ("pacs.008_END_1_msg.xml", Kind::Pacs008),
            ("pacs.002_PSP_1_msg.xml", Kind::Pacs002),
            ("pacs.004_SPI_1_msg.xml", Kind::Pacs004),
        ] {
            let path = format!("{}/tests/data/spi/examples/{name}", env!("CARGO_MANIFEST_DIR"));
            let d = Document::parse(&std::fs::read(&path).unwrap()).unwrap();
            let m = Message::read(&d).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(m.kind(), kind);
        }
        let d = Document::parse(
            &std::fs::read(format!(
                "{}/tests/data/spi/real_signed_pacs.008.spi.1.13_from_00038166.xml",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap(),
        )
        .unwrap();
        let m = Message::read(&d).unwrap();
        let Body::CreditTransfers { txs, .. } = m.body else { panic!("not a payment") };
        assert_eq!(txs[0].amount, Money::parse("6.00").unwrap());
        assert_eq!(txs[0].instrument, Instrument::Manual);
    }
}
