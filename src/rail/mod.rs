//! How money moves: the rail a payment travels on, behind one port.
//!
//! The account actor knows only this port: it hands a [`Payout`] (a pending debit, written
//! and durable) to the [`Rail`] its account was given, and the rail answers [`Settled`]
//! once the payment ended. Which rail runs is chosen once, at start-up
//! ([`RailKind`], `--rail`), and per account: a sandbox account always pays on the
//! simulator; a live account on the rail the server runs.
//!
//! - `sim`: the simulated bank and key directory (the default, the sandbox, the load tests).
//! - `spi`: the central bank's rails, to their published specifications: ISO 20022
//!   messages over ICOM, their XML signatures, and the DICT.
//!
//! A rail must be idempotent by transaction: after a restart every pending debit is handed
//! to it again, and it must not pay twice what it already paid (the SPI's end-to-end id and
//! message id do that on the real rail; the simulator decides the same outcome again).

use actix::{Message, Recipient};
use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;

use crate::domain::decide::IncomingRefusal;
use crate::domain::ids::AccountId;
use crate::domain::money::Money;
use crate::domain::transaction::{RailOutcome, Transaction};

pub mod keys;
pub mod sim;
pub mod spi;

/// Which rail live accounts pay on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RailKind {
    /// The in-process simulator (today's behaviour, and the default).
    #[default]
    Sim,
    /// The central bank's SPI and DICT.
    Spi,
    /// No rail: a closed wallet. Payments between accounts of this gateway settle on us;
    /// every payment out of it is refused.
    None,
}

impl RailKind {
    pub fn parse(text: &str) -> Option<RailKind> {
        match text {
            "sim" => Some(RailKind::Sim),
            "spi" => Some(RailKind::Spi),
            "none" => Some(RailKind::None),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RailKind::Sim => "sim",
            RailKind::Spi => "spi",
            RailKind::None => "none",
        }
    }
}

/// Who pays a payout: the account, as the rail's messages name the payer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payer {
    pub account: AccountId,
    pub name: String,
    /// CPF or CNPJ, digits.
    pub document: String,
}

/// A pending debit, written and durable, for the rail to carry out.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Payout {
    pub tx: Box<Transaction>,
    pub payer: Payer,
    pub reply_to: Recipient<Settled>,
    /// A refund of a payment an account of this gateway made: that account. The refund
    /// settles on us (its money goes back to that account, never out to another bank).
    pub returns_on_us: Option<AccountId>,
}

/// How a payout ended, sent to the account that made it.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct Settled {
    pub local_id: u64,
    pub outcome: RailOutcome,
    /// The payee, when the payment confirmed to an account of this gateway.
    pub on_us: Option<AccountId>,
}

/// Where an account's payouts go.
pub type Rail = Recipient<Payout>;

/// The rails of a server: the simulator every sandbox account pays on, and the rail of the
/// live accounts (the simulator too, unless `--rail` says otherwise).
#[derive(Clone)]
pub struct Rails {
    pub sandbox: Rail,
    pub live: Rail,
}

impl Rails {
    pub fn for_account(&self, sandbox: bool) -> Rail {
        if sandbox {
            self.sandbox.clone()
        } else {
            self.live.clone()
        }
    }
}

/// A payment or return that arrived for an account of this gateway, as the rail read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// The payment's end-to-end id, or the return's id.
    pub id: String,
    pub value: Money,
    pub payer_name: String,
    pub payer_document: String,
    pub payer_ispb: String,
    /// When the payer's institution accepted it.
    pub paid_at: DateTime<Utc>,
    /// The payee's CPF or CNPJ as the message names it.
    pub creditor_document: String,
    pub to: ArrivalTo,
}

/// What an arrival pays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArrivalTo {
    /// A payment to an account number (`account`, of type `account_type`, the catalogue's
    /// code), naming the key it was paid to when there was one; `reference` is the
    /// receiver's id it carries (a charge's).
    Payment { key: Option<String>, account: String, account_type: Option<String>, reference: Option<String> },
    /// A return of our payment with this end-to-end id.
    Return { original_end_to_end_id: String },
}

/// Why an arrival is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refuse {
    /// No account of ours has that number (or the payment returned is not ours).
    #[error("no such account")]
    UnknownAccount,
    /// The key the payment names is no key of ours (unknown, or registered elsewhere).
    #[error("the key is not one of this institution's")]
    KeyNotOurs,
    /// The key the payment names belongs to another account than the one it names.
    #[error("the key belongs to another account")]
    KeyOfAnotherAccount,
    /// The account is of another type than the payment names (every account here is a
    /// payment account, `TRAN`).
    #[error("the account is of another type")]
    AccountType,
    /// The account takes no money from a real rail (a sandbox account).
    #[error("the account does not take this payment")]
    NotAccepted,
    /// The account's rules refused it.
    #[error(transparent)]
    Account(IncomingRefusal),
}

/// The catalogue's code of the accounts of this institution: payment accounts.
pub const OUR_ACCOUNT_TYPE: &str = "TRAN";

/// The account a payment is for, by the receiving rules: it is a payment account, its
/// number names an account, and the key it names, if any, is ours and that account's.
/// `key_holder` is what the key resolves to: `None` when the payment names no key,
/// `Some(None)` when no account of ours holds it. Whether the account exists, and its
/// holder's tax id, are the account's to check.
pub fn payee_of_payment(
    account: &str,
    account_type: Option<&str>,
    key_holder: Option<Option<AccountId>>,
) -> Result<AccountId, Refuse> {
    if account_type.is_some_and(|t| t != OUR_ACCOUNT_TYPE) {
        return Err(Refuse::AccountType);
    }
    // A bank may pad the number with zeros: "0005" is account 5.
    let numbered =
        account.trim_start_matches('0').parse::<AccountId>().map_err(|_| Refuse::UnknownAccount)?;
    match key_holder {
        None => Ok(numbered),
        Some(None) => Err(Refuse::KeyNotOurs),
        Some(Some(holder)) if holder == numbered => Ok(numbered),
        Some(Some(_)) => Err(Refuse::KeyOfAnotherAccount),
    }
}

/// Why the account side could not answer (the rail answers nothing and tries again later).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unavailable: {0}")]
pub struct Unavailable(pub String);

/// A refund request of the MED, as the DICT reported it, against a payment this gateway
/// received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundAsked {
    /// The DICT's id of the request.
    pub id: String,
    pub end_to_end_id: String,
    pub amount: Money,
    /// For fraud (else an operational flaw).
    pub fraud: bool,
    pub details: Option<String>,
    /// The funds recovery (MED 2.0) that asked, if one did: its case here is the one its
    /// infraction report opened, approved already.
    pub funds_recovery_id: Option<String>,
    /// When the DICT made the request.
    pub created: DateTime<Utc>,
}

/// An infraction report of MED 2.0 against a payment this gateway received, as the DICT
/// reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportSeen {
    pub id: String,
    pub end_to_end_id: String,
    pub situation: String,
    pub details: Option<String>,
    pub recovery_id: Option<String>,
    /// `OPEN` or `ACKNOWLEDGED`.
    pub acknowledged: bool,
    /// What to block: the DICT's amount, or the whole payment when it names none.
    pub amount: Option<Money>,
    pub created: DateTime<Utc>,
}

/// What the accounts say of an infraction report, for the rail to tell the DICT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportAction {
    /// The case is open (the money blocked): acknowledge the report.
    Acknowledge,
    /// The analysis ended: close the report (`agreed` with its fraud type).
    Close { agreed: bool, fraud_type: String, details: Option<String> },
    /// The analysis is not done and not due.
    Wait,
}

/// What the accounts say of a refund request, for the rail to tell the DICT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundAnswer {
    /// Nothing to tell yet: its MED waits for its analysis, or its return for the SPI.
    Waiting,
    /// Close it: `result` is the DICT's word (`TOTALLY_ACCEPTED`, `PARTIALLY_ACCEPTED`,
    /// `REJECTED`), with the return that gave the money back when accepted.
    Close { result: &'static str, details: Option<String>, refund_transaction_id: Option<String> },
}

/// Characters of a message an unmatched item keeps at most (the SPI's messages are a few
/// KiB; a larger text is cut, and its digest still names the whole).
pub const UNMATCHED_TEXT_LEN_MAX: usize = 64 * 1024;

/// A message the rail read and could not apply: a status of a payment that is not ours or
/// not known, an admi.002 that names no message of ours, a message that does not verify or
/// does not follow the catalogue. It is recorded durably before its read is confirmed, so a
/// stream never waits on it, and it stays listed (the reconciliation read) with the message
/// itself until an operator resolves it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unmatched {
    /// SHA-256 (hex) of the id it names and the message as read: the item's identity, so a
    /// message delivered again is the same item, and two reports of one message are two.
    pub digest: String,
    /// What was read: `pacs.002`, `admi.002`, `pacs.008`, `pacs.004`, or `unreadable`.
    pub kind: String,
    /// The id it names (an end-to-end or return id, the refused message's reference), or
    /// what could be read of it.
    pub reference: String,
    /// Why it could not be applied, in words.
    pub why: String,
    /// ICOM's id of the message (`PI-ResourceId`), when it had one.
    pub resource_id: Option<String>,
    pub read_at: DateTime<Utc>,
    /// The message as read (UTF-8, lossily), at most [`UNMATCHED_TEXT_LEN_MAX`] characters.
    pub text: String,
    /// How two operators closed it; absent while it is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Resolved>,
}

/// How an open rail item (an unmatched message, an aged payout) was closed: one operator
/// proposed, another approved, with the evidence they went by.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolved {
    /// The resolution's id.
    pub id: String,
    pub outcome: String,
    pub proposed_by: String,
    pub approved_by: String,
    pub approved_at: DateTime<Utc>,
    pub evidence: String,
}

impl Unmatched {
    /// The item a message `body` makes; `read_at` the server's time of reading.
    pub fn of(
        body: &[u8],
        kind: &str,
        reference: &str,
        why: impl Into<String>,
        resource_id: Option<&str>,
        read_at: DateTime<Utc>,
    ) -> Unmatched {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(reference.as_bytes());
        hash.update([0u8]);
        hash.update(body);
        let digest = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        let mut text = String::from_utf8_lossy(body).into_owned();
        if text.len() > UNMATCHED_TEXT_LEN_MAX {
            let mut cut = UNMATCHED_TEXT_LEN_MAX;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        Unmatched {
            digest,
            kind: kind.to_owned(),
            reference: reference.to_owned(),
            why: why.into(),
            resource_id: resource_id.map(str::to_owned),
            read_at,
            text,
            resolution: None,
        }
    }
}

/// What became of an answer about a payout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayoutEnded {
    /// Its payout takes it (or already had it).
    Applied,
    /// No payout of ours has that id.
    NotOurs,
    /// It contradicts the payout's recorded final status (why, in words): nothing changes.
    Contradicts(String),
}

/// What a rail that brings money in calls on the accounts (the port the SPI rail needs;
/// `account::inbound` implements it). Every call is idempotent: the rail may repeat any.
pub trait Inbound: Send + Sync + 'static {
    /// A refund request of the MED: opens the account's MED once, and says, when it has
    /// ended, how to close the request.
    fn refund_asked(&self, asked: RefundAsked) -> BoxFuture<'static, Result<RefundAnswer, Unavailable>>;
    /// An infraction report (MED 2.0) against a payment of ours: opens the case that blocks
    /// the money once, and says what to tell the DICT (with the analysis deadline kept on
    /// the server clock).
    fn report_seen(&self, report: ReportSeen) -> BoxFuture<'static, Result<ReportAction, Unavailable>>;
    /// The MED 2.0 cases still live (open, or approved and awaiting the DICT's refund
    /// request), of every account.
    fn live_cases(&self) -> Result<Vec<crate::domain::med::Med>, Unavailable>;
    /// The DICT withdrew a case (its report or its recovery cancelled): its block is
    /// released, durably.
    fn release_case(&self, case: crate::domain::med::Med) -> BoxFuture<'static, Result<(), Unavailable>>;
    /// The contests (MED 2.0, the payer's side) not yet final.
    fn open_recoveries(&self) -> Result<Vec<crate::domain::recovery::Recovery>, Unavailable>;
    /// The contest of the DICT's recovery `dict_id`, or of the payment `end_to_end_id`.
    fn recovery_of(
        &self,
        dict_id: &str,
        end_to_end_id: Option<&str>,
    ) -> Result<Option<crate::domain::recovery::Recovery>, Unavailable>;
    /// The DICT said this of a contest: its account records it durably; answers the record.
    fn recovery_seen(
        &self,
        contest: crate::domain::recovery::Recovery,
        seen: crate::domain::recovery::Seen,
    ) -> BoxFuture<'static, Result<crate::domain::recovery::Recovery, Unavailable>>;
    /// Where the DICT's next list of event notifications starts (`None`: its first).
    fn events_cursor(&self) -> Result<Option<String>, Unavailable>;
    /// Every event before `cursor` is recorded.
    fn set_events_cursor(&self, cursor: &str) -> Result<(), Unavailable>;
    /// Accept an arrival durably (answer once it is on disk), or refuse it.
    fn accept(&self, arrival: Arrival) -> BoxFuture<'static, Result<Result<(), Refuse>, Unavailable>>;
    /// What was accepted under `id` settled (`true`) or was rejected; `false` when nothing
    /// of ours waits under that id.
    fn incoming_ended(&self, id: String, settled: bool) -> BoxFuture<'static, Result<bool, Unavailable>>;
    /// A payout of ours (by its end-to-end or return id) ended.
    fn payout_ended(
        &self,
        id: String,
        outcome: RailOutcome,
    ) -> BoxFuture<'static, Result<PayoutEnded, Unavailable>>;
    /// Records a message the rail could not apply, durably (answer once it is on disk).
    fn unmatched(&self, item: Unmatched) -> BoxFuture<'static, Result<(), Unavailable>>;
    /// The DICT answered this claim: each account of ours it concerns (as claimer, donor, or
    /// both when a key moves between two of our accounts; `ours` is our ISPB) records it
    /// durably. Answers their copies; none when no account of ours is named.
    fn claim_seen(
        &self,
        seen: crate::domain::claim::Seen,
        ours: String,
    ) -> BoxFuture<'static, Result<Vec<crate::domain::claim::Claim>, Unavailable>>;
    /// The claims of our accounts not yet final, and the server clock's now.
    fn open_claims(&self) -> Result<(Vec<crate::domain::claim::Claim>, DateTime<Utc>), Unavailable>;
    /// Where the next list of the DICT's claims starts (`None`: from the first).
    fn claims_after(&self) -> Result<Option<DateTime<Utc>>, Unavailable>;
    /// Every claim the DICT changed before `at` is recorded.
    fn set_claims_after(&self, at: DateTime<Utc>) -> Result<(), Unavailable>;
    /// The CIDs of our accounts' keys of a type, as recorded (what the sync verification
    /// counts).
    fn dict_cids(&self, key_type: &str) -> Result<Vec<String>, Unavailable>;
    /// The DICT holds this entry for us under a CID we do not have: the DICT wins, the
    /// account it names takes the key (or the key it has takes the CID).
    fn sync_take_in(&self, found: SyncEntry) -> Result<Repair, Unavailable>;
    /// Where the DICT's CID events of a key type are read from (`None`: never yet).
    fn cid_events_after(&self, key_type: &str) -> Result<Option<DateTime<Utc>>, Unavailable>;
    /// The CID events of a key type before `at` are reflected in our keys.
    fn set_cid_events_after(&self, key_type: &str, at: DateTime<Utc>) -> Result<(), Unavailable>;
    /// We hold a key under a CID the DICT does not have: the DICT wins, the key is dropped.
    fn sync_drop(&self, cid: &str) -> Result<Repair, Unavailable>;
    /// The DICT's entries of our keys waiting for an update (a rename of their account's
    /// holder), a turn's worth at most.
    fn pending_key_updates(&self) -> Result<Vec<KeyUpdate>, Unavailable>;
    /// The update ended: the DICT took it (`Some`, with the entry's new CID when it can be
    /// computed) or refused it for good (`None`). Answers whether it ended (a later rename
    /// leaves another to send).
    fn key_update_ended(&self, update: &KeyUpdate, cid: Option<Option<String>>) -> Result<bool, Unavailable>;
    /// The live holders with a CPF and keys in the DICT, which the tax register checks.
    fn tax_holders(&self) -> Result<Vec<Holder>, Unavailable>;
    /// The tax register names the holder so: the account is renamed, and its keys' entries
    /// follow. Answers how many updates that asked for.
    fn holder_renamed(&self, account: AccountId, name: &str) -> Result<usize, Unavailable>;
    /// The DICT no longer holds this key of the account (removed for the holder's CPF).
    fn key_removed(&self, account: AccountId, key: &str) -> Result<(), Unavailable>;
}

/// A live account's holder, as the tax register's check reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub account: AccountId,
    pub name: String,
    pub cpf: String,
    /// Its keys, all in the DICT.
    pub keys: Vec<String>,
}

/// The update a DICT entry of one of our keys waits for: the account's holder was renamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyUpdate {
    pub account: AccountId,
    pub key: String,
    pub key_type: String,
    /// The holder's name to send.
    pub name: String,
    pub document: String,
    /// The account's opening date, as its entries carry it.
    pub opened: DateTime<Utc>,
    /// What the key's CID is computed under, when the gateway knows it.
    pub request_id: Option<uuid::Uuid>,
}

/// An entry the DICT holds for this participant, found by its CID in a repair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncEntry {
    pub key: String,
    pub key_type: String,
    pub participant: String,
    pub account_number: String,
    pub created: DateTime<Utc>,
    pub cid: String,
    /// The `RequestId` the DICT computes the CID under.
    pub request_id: uuid::Uuid,
}

/// What a repair of a sync difference did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    /// The key was added to the account the DICT names.
    Added,
    /// The account had the key: it now has the DICT's CID for it.
    Adopted,
    /// The key the DICT does not hold for us was dropped.
    Removed,
    /// Not changed: the key is an account's receiving key (an operator decides), or the
    /// entry names no account of ours.
    Kept,
    Unattributed,
}

impl Repair {
    pub fn as_str(self) -> &'static str {
        match self {
            Repair::Added => "added",
            Repair::Adopted => "adopted",
            Repair::Removed => "removed",
            Repair::Kept => "kept",
            Repair::Unattributed => "unattributed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payment_is_credited_only_to_the_payment_account_it_names_and_its_key_names() {
        let id = |n| AccountId::new(n).unwrap();
        assert_eq!(payee_of_payment("5", Some("TRAN"), None), Ok(id(5)));
        assert_eq!(payee_of_payment("5", None, Some(Some(id(5)))), Ok(id(5)));
        assert_eq!(payee_of_payment("0005", Some("TRAN"), Some(Some(id(5)))), Ok(id(5)));
        // The account 777 the message names is not the key's (account 5).
        assert_eq!(
            payee_of_payment("777", Some("TRAN"), Some(Some(id(5)))),
            Err(Refuse::KeyOfAnotherAccount)
        );
        assert_eq!(payee_of_payment("5", Some("TRAN"), Some(None)), Err(Refuse::KeyNotOurs));
        for other in ["CACC", "SVGS", "SLRY", "OTHR"] {
            assert_eq!(
                payee_of_payment("5", Some(other), Some(Some(id(5)))),
                Err(Refuse::AccountType),
                "{other}"
            );
        }
        for bad in ["", "0", "abc", "5-1", "99999999999999999999999"] {
            assert_eq!(payee_of_payment(bad, Some("TRAN"), None), Err(Refuse::UnknownAccount), "{bad:?}");
        }
    }

    #[test]
    fn an_unmatched_item_is_named_by_its_id_and_message_and_keeps_a_bounded_text() {
        let at: DateTime<Utc> = "2026-11-28T12:00:00Z".parse().unwrap();
        let a = Unmatched::of(b"<msg/>", "pacs.002", "E1", "why", Some("r1"), at);
        let again = Unmatched::of(b"<msg/>", "pacs.002", "E1", "said otherwise", None, at);
        assert_eq!(a.digest, again.digest, "the same message and id: one item");
        assert_eq!(a.digest.len(), 64);
        let other_report = Unmatched::of(b"<msg/>", "pacs.002", "E2", "why", Some("r1"), at);
        assert_ne!(a.digest, other_report.digest, "two reports of one message: two items");
        assert_eq!((a.text.as_str(), a.resource_id.as_deref()), ("<msg/>", Some("r1")));
        // Cut at the limit, on a character boundary; the digest still names the whole.
        let long = "é".repeat(UNMATCHED_TEXT_LEN_MAX);
        let cut = Unmatched::of(long.as_bytes(), "unreadable", "-", "why", None, at);
        assert!(cut.text.len() <= UNMATCHED_TEXT_LEN_MAX && cut.text.len() > UNMATCHED_TEXT_LEN_MAX - 2);
        assert!(cut.text.chars().all(|c| c == 'é'));
        let shorter =
            Unmatched::of(&long.as_bytes()[..UNMATCHED_TEXT_LEN_MAX], "unreadable", "-", "why", None, at);
        assert_ne!(cut.digest, shorter.digest);
    }
}
