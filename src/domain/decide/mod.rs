//! Decide: the pure rules of every command an account carries out.
//!
//! A command is decided by one function of the account's state, the command, `now` and
//! fresh ids, into a [`Plan`] (or a [`Refusal`]): the ledger's change, the records to write,
//! the events for the outbox, and the reply. Nothing here reads storage, a clock or a
//! random source. The account actor gathers what a command needs first (the original of a
//! refund, the stored owner of an externalId, fresh ids), decides, and carries the plan out
//! in one step: write it, apply it, reply once it is durable (`account::actor`).
//!
//! A plan is complete: everything the actor does after a command (track a pending debit,
//! send it to the bank, forget a closed charge) follows from the records the plan writes,
//! so no rule lives in the actor.

mod adjust;
mod charges;
mod claims;
mod incoming;
mod med;
mod on_us;
mod pay;
mod recoveries;
mod recurrences;
mod refunds;

pub use adjust::{
    adjust, second_operator, Adjustment, CreditApproval, CreditProposal, ADJUSTMENT_REASON_LEN_MAX,
    ADJUSTMENT_REFERENCE_LEN_MAX, OPERATOR_CREDIT_SINGLE_MAX_DEFAULT, OPERATOR_EXTERNAL_ID_PREFIX,
};
pub use charges::{
    amount_due, cancel_charge, create_charge, expire_charge, pay_charge, revise_charge, ChargeOutcome,
    ChargeRequest, ChargeState, Offer, Payer,
};
pub use claims::{observe_claim, ClaimAccount};
pub use incoming::{
    accept as accept_incoming, drop_incoming, settle as settle_incoming, Incoming, IncomingKind,
    IncomingRefusal, Named,
};
pub use med::{
    add_evidence, close_med, open_med, release_case, return_med, top_up, CloseMedRequest, OpenMedRequest,
};
pub use on_us::{
    credit_of, names_charge, receive as receive_on_us, receive_return as receive_on_us_return, return_of,
    OnUsCredit, OnUsPayer,
};
pub use pay::{pay, pix_in, settle, DictRequest, PayDecision, PayRequest, PixInRequest};
pub use recoveries::{amend_contest, contest, observe_recovery, ContestRequest};
pub use recurrences::{
    attempt_cobr, auto_send, auto_txid, change_cobr, change_rec, create_cobr, create_locrec, create_rec,
    expire_rec, fail_on_us as fail_cobr_on_us, settle_on_us as settle_cobr_on_us, unlink_locrec, CobrChange,
    CobrPayer, CobrRequest, RecChange, RecRequest, LOCATION_HOST,
};
pub use refunds::{refund, take_back, RefundDecision, RefundRequest};

use uuid::Uuid;

use super::money::Money;

use super::account::{AccountSettings, FeeRule};
use super::claim::Claim;
use super::cobr::{Cobr, CobrError};
use super::events::OutboxEvent;
use super::ids::AccountId;
use super::ledger::{InvariantViolation, Ledger, LedgerChange, Rejection};
use super::med::{Med, MedRejection};
use super::rec::{LocRec, RecError, Recurrence};
use super::refunds::RefundRejection;
use super::transaction::{own_or_random_end_to_end_id, E2eVariant, Transaction, TxKind};

/// What a command reads of its account.
#[derive(Debug, Clone, Copy)]
pub struct Account<'a> {
    pub id: AccountId,
    pub settings: &'a AccountSettings,
    /// The name its charges' BR Codes carry.
    pub name: &'a str,
    /// The EVP key its charges' BR Codes carry.
    pub receiving_key: &'a str,
    pub ledger: &'a Ledger,
}

impl Account<'_> {
    /// The fee rule of an operation (refunds of money we paid out carry none).
    pub fn fee_rule(&self, kind: TxKind) -> FeeRule {
        let fees = &self.settings.fees;
        match kind {
            TxKind::CashOut | TxKind::QrCashOut => fees.cash_out,
            TxKind::DictPix => fees.dict_pix,
            TxKind::PixIn | TxKind::CashIn => fees.cash_in,
            TxKind::RefundIn => fees.refund,
            // Money of ours coming back, and the operator's, carry no fee.
            TxKind::RefundOut | TxKind::OperatorCredit | TxKind::OperatorDebit => FeeRule::default(),
        }
    }
}

/// Random bytes a fresh record draws its public ids from.
pub const FRESH_RANDOM_BYTES: usize = 64;

/// A fresh identity for a new record: a local id never handed out before, and random bytes
/// for the parts of its public ids that must not be guessable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fresh {
    pub local_id: u64,
    pub random: [u8; FRESH_RANDOM_BYTES],
}

impl Fresh {
    /// The `i`-th 16 random bytes (0 to 3).
    fn slot(&self, i: usize) -> [u8; 16] {
        let mut out = [0u8; 16];
        out.copy_from_slice(&self.random[16 * i..16 * (i + 1)]);
        out
    }

    /// The transactionId of the record made with this identity: it carries the local id
    /// (see [`crate::domain::ids::transaction_uuid`]).
    pub fn transaction_id(&self) -> Uuid {
        crate::domain::ids::transaction_uuid(self.local_id, self.slot(0))
    }

    /// Entropy for an end-to-end id made elsewhere (the payer's).
    pub fn entropy(&self) -> [u8; 16] {
        self.slot(1)
    }

    /// The end-to-end id this gateway makes for the record: it carries the local id.
    pub fn end_to_end_id(&self, prefix: char, at: chrono::DateTime<chrono::Utc>) -> String {
        own_or_random_end_to_end_id(prefix, at, self.local_id, E2eVariant::Created, &self.slot(1))
    }

    /// A second UUID v4, independent of [`Fresh::uuid`].
    pub fn second_uuid(&self) -> Uuid {
        uuid::Builder::from_random_bytes(self.slot(2)).into_uuid()
    }

    /// A text of `len` (up to 32) lower-case hex characters.
    pub fn hex(&self, len: usize) -> String {
        let mut out = String::with_capacity(32);
        for b in self.slot(3) {
            out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
            out.push(char::from_digit(u32::from(b & 15), 16).unwrap_or('0'));
        }
        out.truncate(len);
        out
    }
}

/// The fresh identities a command may use, drawn before it is decided.
#[derive(Debug, Clone, Default)]
pub struct Ids {
    fresh: std::collections::VecDeque<Fresh>,
}

impl Ids {
    pub fn new(fresh: impl IntoIterator<Item = Fresh>) -> Ids {
        Ids { fresh: fresh.into_iter().collect() }
    }

    fn take(&mut self) -> Result<Fresh, Refusal> {
        self.fresh.pop_front().ok_or_else(|| Refusal::Bug("the command drew too few fresh ids".into()))
    }
}

/// What one write of a plan stores.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// A transaction's first write: its record and its indexes.
    NewTransaction(Transaction),
    /// A later write of a transaction (its status, its refunded sum, ...).
    Transaction(Transaction),
    /// A MED case as it now is.
    Med(Med),
    /// A credit owed to an account of this gateway, written with the payer's settlement.
    OnUsCredit(OnUsCredit),
    /// The payee carried the credit of this end-to-end id out: it is deleted.
    OnUsCredited(String),
    /// A payment or return in from the SPI that the account accepted (until it settles).
    Incoming(Incoming),
    /// The SPI settled or rejected the incoming of this id: it is deleted.
    IncomingDone(String),
    /// A recurrence as it now is (Pix Automático).
    Recurrence(Recurrence),
    /// A recurring charge as it now is.
    Cobr(Cobr),
    /// A recurrence's location as it now is.
    LocRec(LocRec),
    /// A DICT key claim of the account as it now is.
    Claim(Claim),
    /// A MED 2.0 contest of the account as it now is.
    Recovery(super::recovery::Recovery),
    /// A key a claim brought: it is the account's from now on (its type, since when).
    KeyArrived {
        key: String,
        key_type: String,
        at: chrono::DateTime<chrono::Utc>,
        cid: Option<String>,
        request_id: Option<uuid::Uuid>,
        /// The holder's name the DICT's entry must take (the account was renamed since the
        /// claim was opened).
        update_to: Option<String>,
    },
    /// A key a claim took away; `receiving` is the account's new receiving key when the key
    /// that left was it.
    KeyLeft { key: String, receiving: Option<String> },
}

/// Everything one command does (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan<R> {
    /// The ledger's change, checked; `None` when the command moves no money and takes no key.
    pub ledger: Option<LedgerChange>,
    pub records: Vec<Record>,
    pub events: Vec<OutboxEvent>,
    pub reply: R,
}

impl<R> Plan<R> {
    fn new(reply: R) -> Plan<R> {
        Plan { ledger: None, records: Vec::new(), events: Vec::new(), reply }
    }

    /// The same writes with another reply.
    pub fn with_reply<S>(self, reply: S) -> Plan<S> {
        Plan { ledger: self.ledger, records: self.records, events: self.events, reply }
    }

    /// Writes a record whose state changed, and the event that state calls for (if any).
    fn write(&mut self, record: Record, now: chrono::DateTime<chrono::Utc>) {
        let tx = match &record {
            Record::NewTransaction(t) | Record::Transaction(t) => Some(t),
            Record::Med(_)
            | Record::OnUsCredit(_)
            | Record::OnUsCredited(_)
            | Record::Incoming(_)
            | Record::IncomingDone(_)
            | Record::Recurrence(_)
            | Record::Cobr(_)
            | Record::LocRec(_)
            | Record::Claim(_)
            | Record::Recovery(_)
            | Record::KeyArrived { .. }
            | Record::KeyLeft { .. } => None,
        };
        if let Some(event) = tx.and_then(|t| super::events::event_for(t, now)) {
            self.events.push(event);
        }
        self.records.push(record);
    }

    /// Writes a record whose state did not change (an original's refunded sum): no event.
    fn update(&mut self, record: Record) {
        self.records.push(record);
    }
}

/// Why a command is refused. Every variant but [`Refusal::Bug`] is an answer to the client
/// and changes nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    #[error("rejected: {0:?}")]
    Ledger(Rejection),
    /// A charge's expiration is below the provider's minimum (seconds).
    #[error("expiration below the provider minimum of {0} s")]
    BelowProviderMinimum(u32),
    /// The charge is not open: paid, or expired (its status).
    #[error("the charge is not payable: {0}")]
    NotPayable(&'static str),
    /// A cob with this txid exists (409).
    #[error("txid already exists")]
    TxidTaken,
    /// The payment offers another amount than the charge asks today (the amount asked).
    #[error("the amount differs from the amount due, {0}")]
    AmountNotDue(Money),
    /// A cobv's price on the day is beyond the largest amount a payment can move.
    #[error("the amount due is out of range")]
    Unpriceable,
    /// A cobv's revised terms can no longer be paid now.
    #[error("the revised charge could no longer be paid")]
    PastValidity,
    /// The cobv was revised since the revision a change was read from (409).
    #[error("the charge was revised meanwhile")]
    RevisedMeanwhile,
    #[error("refund refused: {0:?}")]
    Refund(RefundRejection),
    #[error("MED refused: {0}")]
    Med(MedRejection),
    #[error("recurrence refused: {0}")]
    Rec(RecError),
    #[error("recurring charge refused: {0}")]
    Cobr(CobrError),
    #[error("contest refused: {0}")]
    Recovery(super::recovery::RecoveryRejection),
    /// The plan would break a rule no client input can break: a bug. Nothing is written and
    /// the actor stops.
    #[error("{0}")]
    Bug(String),
}

impl From<InvariantViolation> for Refusal {
    fn from(v: InvariantViolation) -> Self {
        Refusal::Bug(v.to_string())
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! What the decide tests share: an account, fresh ids, a clock reading.

    use chrono::{DateTime, Utc};

    use super::*;
    use crate::domain::money::Money;

    /// A family A charge of `value`, payer Ana, due in 600 s, externalId `charge-1`.
    pub fn charge_request(value: &str) -> ChargeRequest {
        ChargeRequest {
            external_id: Some("charge-1".into()),
            txid: None,
            cob: None,
            value: m(value),
            description: "order".into(),
            payer_name: "Ana".into(),
            payer_document: Some("52998224725".into()),
            expiration_seconds: 600,
            additional_info: Default::default(),
            scenario: None,
            splits: vec![],
        }
    }

    /// A cobv of 100.00 due Tuesday 24 November 2026, payable 10 days after, with a 2.00 fine
    /// and a 5.00 discount until the 20th.
    pub fn cobv_request(revisao: u32) -> ChargeRequest {
        use crate::domain::cobv::{Amount, Discount, Terms};
        use crate::domain::transaction::{CobDetails, CobvDetails};
        let terms = Terms {
            original: m("100"),
            due: chrono::NaiveDate::from_ymd_opt(2026, 11, 24).unwrap(),
            validity_after_due_days: 10,
            abatement: None,
            discount: Some(Discount::UntilDates(vec![(
                chrono::NaiveDate::from_ymd_opt(2026, 11, 20).unwrap(),
                Amount::Value(m("5")),
            )])),
            fine: Some(Amount::Value(m("2"))),
            interest: None,
        };
        ChargeRequest {
            external_id: None,
            txid: Some("boleto20261124abcdefghijk01".into()),
            value: m("100"),
            description: "cobv".into(),
            payer_name: "Ana".into(),
            payer_document: Some("52998224725".into()),
            expiration_seconds: 0,
            additional_info: Default::default(),
            scenario: None,
            splits: vec![],
            cob: Some(CobDetails {
                expiracao: 0,
                modalidade_alteracao: 0,
                chave: "3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c".into(),
                solicitacao_pagador: None,
                info_adicionais: vec![],
                devedor: None,
                vencimento: Some(CobvDetails { revisao, terms }),
            }),
        }
    }

    pub fn m(s: &str) -> Money {
        Money::parse(s).unwrap()
    }

    pub fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    /// Noon in Sao Paulo, outside the night window.
    pub fn noon() -> DateTime<Utc> {
        at("2026-03-10T15:00:00Z")
    }

    pub fn fresh(local_id: u64) -> Fresh {
        let mut random = [0u8; FRESH_RANDOM_BYTES];
        for (i, b) in random.iter_mut().enumerate() {
            *b = (local_id as u8).wrapping_mul(31).wrapping_add(i as u8);
        }
        Fresh { local_id, random }
    }

    pub fn ids(locals: &[u64]) -> Ids {
        Ids::new(locals.iter().map(|l| fresh(*l)))
    }

    pub struct Fixture {
        pub settings: AccountSettings,
        pub ledger: Ledger,
    }

    impl Fixture {
        pub fn with_balance(balance: &str) -> Fixture {
            Fixture { settings: AccountSettings::default(), ledger: Ledger::opening(m(balance)) }
        }

        pub fn account(&self) -> Account<'_> {
            Account {
                id: AccountId::new(1).unwrap(),
                settings: &self.settings,
                name: "Acme",
                receiving_key: "3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c",
                ledger: &self.ledger,
            }
        }

        /// Applies a plan's ledger change, as the actor does once it is written.
        pub fn apply<R>(&mut self, plan: &Plan<R>) {
            if let Some(change) = &plan.ledger {
                self.ledger.apply(change.clone());
            }
        }
    }

    /// A PIX of `value` received at noon by account 1, local id 10, from a payer's bank.
    pub fn received(value: &str) -> Transaction {
        use crate::domain::transaction::{BankInfo, Counterpart, TxStatus};
        Transaction {
            status: TxStatus::Confirmed,
            processed_at: Some(noon()),
            end_to_end_id: "E00000000202603101500abcdefghijk".into(),
            counterpart: Counterpart {
                name: "Payer".into(),
                document: Some("52998224725".into()),
                bank: Some(BankInfo {
                    ispb: "00000000".into(),
                    name: "Banco".into(),
                    code: "001".into(),
                    branch: None,
                    account_number: None,
                }),
                ..Counterpart::default()
            },
            ..Transaction::new(
                10,
                uuid::Uuid::nil(),
                AccountId::new(1).unwrap(),
                TxKind::PixIn,
                m(value),
                noon(),
            )
        }
    }

    /// The transactions a plan writes, new or updated.
    pub fn transactions<R>(plan: &Plan<R>) -> Vec<&Transaction> {
        plan.records
            .iter()
            .filter_map(|r| match r {
                Record::NewTransaction(t) | Record::Transaction(t) => Some(t),
                Record::Med(_)
                | Record::OnUsCredit(_)
                | Record::OnUsCredited(_)
                | Record::Incoming(_)
                | Record::IncomingDone(_)
                | Record::Recurrence(_)
                | Record::Cobr(_)
                | Record::LocRec(_)
                | Record::Claim(_)
                | Record::Recovery(_)
                | Record::KeyArrived { .. }
                | Record::KeyLeft { .. } => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn fresh_ids_give_distinct_uuids_and_bounded_hex() {
        let f = fresh(7);
        assert_ne!(f.transaction_id(), f.second_uuid());
        assert_eq!(f.transaction_id().get_version_num(), 4);
        assert_eq!(crate::domain::ids::local_id_in_uuid(&f.transaction_id()), 7);
        let e2e = f.end_to_end_id('E', noon());
        assert_eq!(crate::domain::transaction::local_id_in_end_to_end(&e2e), Some(7));
        assert_eq!(f.hex(25).len(), 25);
        assert!(f.hex(25).chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn a_command_that_draws_more_ids_than_it_was_given_is_a_bug() {
        let mut ids = ids(&[1]);
        assert!(ids.take().is_ok());
        assert!(matches!(ids.take(), Err(Refusal::Bug(_))));
    }
}
