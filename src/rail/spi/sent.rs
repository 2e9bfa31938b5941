//! What this participant sent on the SPI, kept so that the SPI's settlement stays the truth.
//!
//! A payout's message is built, signed and stored once, before it is first posted
//! ([`SentMessage`]). Every resend (a retry after an answer that never came, a start after a
//! crash) posts those same bytes: same `BizMsgIdr`, same timestamps, so the SPI's
//! idempotency by message id applies and a resend can never become a second payment.
//!
//! Each posting that may have reached the SPI is counted durably before it leaves
//! (`attempts`), and every resource id ICOM answers (`PI-ResourceId`) is kept with the
//! posting that got it. So a refusal (an admi.002) can be told apart: the refusal of the
//! original posting fails the payout; the refusal of a repeat (the SPI refusing a copy of
//! a message it already has) changes nothing; a refusal naming only the message id of a
//! message posted more than once cannot be placed, so it fails nothing and is kept for an
//! operator while the payout waits for the SPI's answer to its original.
//!
//! The rules here are pure: the store is behind [`SentLog`].

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;

use crate::rail::Unavailable;

/// How long after its debit a payout may still leave, by default: well inside the 40 s the
/// SPI gives a payment, so a message never leaves already late.
pub const LEAVE_WITHIN_DEFAULT: Duration = Duration::from_secs(15);
/// The shortest and longest bound an operator may set (`spi.leave_within_ms`).
pub const LEAVE_WITHIN_MIN: Duration = Duration::from_secs(1);
pub const LEAVE_WITHIN_MAX: Duration = Duration::from_secs(35);

/// How long a payout whose message left may go without a final status before it is aged
/// (listed, counted by the gauge, alerted): past the SPI's own limit for an answer.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// A payout's message as it was built, signed and stored before its first posting.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SentMessage {
    /// The payout's end-to-end id (a payment) or return id (a refund).
    pub id: String,
    /// Its `BizMsgIdr`.
    pub msg_id: String,
    /// When it was built: its `CreDt` and the payment's `AccptncDtTm`.
    pub built_at: DateTime<Utc>,
    /// The signed message, byte for byte what every posting sends.
    pub body: String,
    /// Postings that may have reached the SPI, counted before each leaves: 1 once it is
    /// first posted; one more for each posting after one whose outcome is unknown (no
    /// answer, a 5xx) and for the first posting after a restart.
    pub attempts: u32,
}

/// What becomes of a payout handed to the rail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leave {
    /// Its message was stored by an earlier hand-over and ICOM took a posting of it (201):
    /// the SPI holds it, so nothing is sent; its answer comes on the stream.
    Await,
    /// Its message was stored by an earlier hand-over and no posting is known to have been
    /// taken: post those bytes again (counted as one more attempt, since the earlier one
    /// may have reached the SPI).
    Resend(SentMessage),
    /// Build, sign and store its message now, then post it.
    Build,
    /// Too late to leave: it was debited longer ago than the bound and never left. It fails
    /// before anything is sent, and its amount is released.
    TooLate { waited: Duration },
}

/// The pure rule for a payout debited at `created_at`, handed to the rail at `now`;
/// `taken` is the posting of its stored message that ICOM answered 201, if one was.
pub fn leave(
    stored: Option<SentMessage>,
    taken: Option<u32>,
    created_at: DateTime<Utc>,
    now: DateTime<Utc>,
    bound: Duration,
) -> Leave {
    if let Some(m) = stored {
        // Once sent, never rebuilt: only the SPI's answer ends it.
        return match taken {
            Some(_) => Leave::Await,
            None => Leave::Resend(m),
        };
    }
    let waited = (now - created_at).to_std().unwrap_or_default();
    if waited > bound {
        Leave::TooLate { waited }
    } else {
        Leave::Build
    }
}

/// Which posting of a message a refusal is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedCopy {
    /// The original (the first posting that may have reached the SPI): the payout fails.
    Original,
    /// A repeat of a message the SPI may already hold: nothing changes.
    Repeat,
    /// Named by message id only, of a message posted more than once: which copy is
    /// refused cannot be known, so nothing changes and the refusal is kept for an operator.
    Unknown,
}

/// The copy a refusal names: `posting` is the attempt whose resource id it names, `None`
/// when it names the message id.
pub fn refused_copy(sent: &SentMessage, posting: Option<u32>) -> RefusedCopy {
    match posting {
        Some(1) => RefusedCopy::Original,
        Some(_) => RefusedCopy::Repeat,
        None if sent.attempts <= 1 => RefusedCopy::Original,
        None => RefusedCopy::Unknown,
    }
}

/// Whether a rejection's reason may be the answer to a copy rather than to the payment:
/// `DUPL`, which the catalogue gives a receiver for a payment it already took (a charge
/// paid twice) and which may equally answer a repeated posting. Like a refusal named by
/// message id, it fails a payout whose message was posted once, and no other.
pub fn may_answer_a_copy(reason: &str) -> bool {
    reason == "DUPL"
}

/// Where the rail keeps what it sent (the store implements it; every write is durable
/// before its future answers).
pub trait SentLog: Send + Sync + 'static {
    /// A payout's stored message.
    fn sent(&self, id: &str) -> Result<Option<SentMessage>, Unavailable>;
    /// The payout and posting a resource id belongs to.
    fn posting_of(&self, resource_id: &str) -> Result<Option<(String, u32)>, Unavailable>;
    /// Stores (or replaces, with more attempts) a payout's message.
    fn keep(&self, m: SentMessage) -> BoxFuture<'static, Result<(), Unavailable>>;
    /// Which posting of payout `id`'s message ICOM took (answered 201), if one was.
    fn taken(&self, id: &str) -> Result<Option<u32>, Unavailable>;
    /// Records the resource ids ICOM answered to one request: each `(id, attempt,
    /// resource id)` names posting `attempt` of payout `id`, which ICOM took. One durable
    /// write.
    fn posted(&self, postings: Vec<(String, u32, String)>) -> BoxFuture<'static, Result<(), Unavailable>>;
    /// Where each reader's stream stood when it was last written down: `(reader, the
    /// PI-Pull-Next)`, every read before it carried out.
    fn streams(&self) -> Result<Vec<(u64, String)>, Unavailable>;
    /// Writes down where reader `reader`'s stream stands (`None`: it has none open).
    fn stream_at(&self, reader: u64, next: Option<String>) -> BoxFuture<'static, Result<(), Unavailable>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn message(attempts: u32) -> SentMessage {
        SentMessage {
            id: "E1234ABCD202611281200abcdefghijk".into(),
            msg_id: "M1234ABCD202611281200abcdefghijk".into(),
            built_at: at("2026-11-28T12:00:01Z"),
            body: "<Envelope/>".into(),
            attempts,
        }
    }

    #[test]
    fn a_payout_leaves_within_its_bound_or_fails_and_once_sent_is_never_rebuilt() {
        let created = at("2026-11-28T12:00:00Z");
        let bound = Duration::from_secs(15);
        assert_eq!(
            leave(None, None, created, at("2026-11-28T12:00:15Z"), bound),
            Leave::Build,
            "at the bound"
        );
        assert_eq!(
            leave(None, None, created, at("2026-11-28T12:00:15.001Z"), bound),
            Leave::TooLate { waited: Duration::from_millis(15_001) },
            "a millisecond past it"
        );
        // A clock behind the debit (another node's) waits nothing.
        assert_eq!(leave(None, None, created, at("2026-11-28T11:59:00Z"), bound), Leave::Build);
        // Stored and never known taken: resent as it is, however late (the SPI may hold it
        // already).
        let stored = message(1);
        assert_eq!(
            leave(Some(stored.clone()), None, created, at("2026-11-29T00:00:00Z"), bound),
            Leave::Resend(stored.clone())
        );
        // Stored and taken by ICOM (any posting): the SPI holds it; nothing is sent.
        assert_eq!(
            leave(Some(stored.clone()), Some(1), created, at("2026-11-28T12:00:01Z"), bound),
            Leave::Await
        );
        assert_eq!(
            leave(Some(message(3)), Some(2), created, at("2026-11-29T00:00:00Z"), bound),
            Leave::Await
        );
    }

    #[test]
    fn only_a_refusal_that_can_be_of_the_original_posting_fails_a_payout() {
        // By resource id: the posting it names decides.
        assert_eq!(refused_copy(&message(3), Some(1)), RefusedCopy::Original);
        assert_eq!(refused_copy(&message(3), Some(2)), RefusedCopy::Repeat);
        assert_eq!(refused_copy(&message(1), Some(1)), RefusedCopy::Original);
        // By message id: certain only of a message posted once.
        assert_eq!(refused_copy(&message(1), None), RefusedCopy::Original);
        assert_eq!(refused_copy(&message(0), None), RefusedCopy::Original);
        assert_eq!(refused_copy(&message(2), None), RefusedCopy::Unknown);
    }

    #[test]
    fn only_dupl_may_answer_a_copy() {
        assert!(may_answer_a_copy("DUPL"));
        assert!(!may_answer_a_copy("AC06") && !may_answer_a_copy("AB03") && !may_answer_a_copy(""));
    }
}
