//! The ledger of one account: its balance, limit counters, idempotency indexes and pending
//! debits, and the rules that move money (docs/interface.md "Balances, fees and limits" and
//! "Idempotency").
//!
//! Every change is decided on a [`LedgerDraft`]: one command may take several steps (a paid
//! charge is a credit, then one hold per split), each seeing the ones before it. The draft
//! changes nothing; [`LedgerDraft::finish`] checks the invariants on the state the steps lead
//! to and answers a [`LedgerChange`], the only value [`Ledger::apply`] takes. So a change is
//! checked before it is written, and applying it cannot fail: the account actor writes the
//! change, then applies it, and a storage failure in between leaves nothing half done.
//!
//! Invariants, checked by `finish`:
//! - `available >= 0` and `blocked >= 0` (the types cannot go negative);
//! - `blocked` is the sum of the holds of pending debits;
//! - `available + blocked + debited == credited` (money is conserved), where `credited` is
//!   every net credit including the opening balance and `debited` every settled debit's
//!   value and fee.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::account::Limits;
use super::limits::{LimitBreach, LimitCounters};
use super::money::Money;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Balance {
    pub available: Money,
    pub blocked: Money,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Totals {
    pub credited: Money,
    pub debited: Money,
}

/// The part of the ledger stored as one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LedgerState {
    pub balance: Balance,
    pub counters: LimitCounters,
    pub totals: Totals,
}

/// Rejections of a debit, in precedence order (the first that applies is answered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    DuplicateExternalId {
        existing: u64,
    },
    IdempotencyKeyReused {
        existing: u64,
    },
    PerTransactionLimit,
    DailyLimit,
    NightlyLimit,
    InsufficientBalance,
    /// A sum left the representable range; unreachable with sane limits.
    Overflow,
}

/// Which of the account's limits a debit counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limited {
    /// None (refunds, MED, a charge's split).
    No,
    /// All: the transaction's, the day's and, at night, the night's.
    All,
    /// The transaction's and the day's, not the night's: a debit the payer authorised
    /// beforehand and the arrangement makes at its own hour (Pix Automático).
    NotNightly,
}

/// A debit to decide.
#[derive(Debug, Clone)]
pub struct DebitRequest {
    pub local_id: u64,
    pub external_id: Option<String>,
    /// `(key, request hash)` of a `/dict/pix` transfer.
    pub idempotency: Option<(String, String)>,
    pub value: Money,
    pub fee: Money,
    /// False records the transaction without moving money (a document mismatch found
    /// before the debit, a charge taking its externalId): it takes the externalId but no
    /// balance and no limit.
    pub hold: bool,
    /// Which limits the debit counts against (refunds: none).
    pub limited: Limited,
    pub now: DateTime<Utc>,
    /// What storage holds for this externalId and idempotency key.
    pub stored: StoredKeys,
}

/// The index entries storage holds for a debit's externalId and idempotency key. The ledger
/// keeps only the keys whose writes are still in flight (memory must not grow with
/// history); the caller looks older ones up in storage and hands them in here, so the rule
/// that uses them stays in [`LedgerDraft::debit`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoredKeys {
    /// The transaction that took the externalId.
    pub external: Option<u64>,
    /// The transaction of the idempotency key, and the hash of its request.
    pub idempotency: Option<(u64, String)>,
}

/// What a debit decided on a draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DebitDecision {
    /// The same `/dict/pix` request again: answer the first transfer, move nothing.
    Replay { existing: u64 },
    /// Accepted: this much (value and fee, or nothing for a record without hold) is held.
    Accepted { hold: Money },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ledger invariant broken: {0}")]
pub struct InvariantViolation(pub String);

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ledger {
    state: LedgerState,
    /// The keys of debits whose writes are in flight; `None` when none are (most of the
    /// time for most accounts: an account's memory is kept small).
    keys: Option<Box<KeysInFlight>>,
    pending: HashMap<u64, Money>,
    /// The sum of `pending`, kept as holds come and go, so the check of every change is
    /// O(1) rather than a sum over every pending debit (a hot account has thousands).
    held: Money,
}

/// The externalIds and idempotency keys of debits whose writes are in flight.
#[derive(Debug, Clone, Default, PartialEq)]
struct KeysInFlight {
    external_ids: HashMap<String, u64>,
    idempotency: HashMap<String, (u64, String)>,
}

/// A checked change to a ledger: made only by [`LedgerDraft::finish`].
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerChange {
    state: LedgerState,
    state_changed: bool,
    held: Money,
    holds_taken: Vec<(u64, Money)>,
    holds_released: Vec<u64>,
    external_ids: Vec<(String, u64)>,
    idempotency: Vec<(String, u64, String)>,
}

impl LedgerChange {
    /// The ledger record to write, when the balance, counters or totals changed.
    pub fn state(&self) -> Option<&LedgerState> {
        self.state_changed.then_some(&self.state)
    }

    /// Holds of pending debits this change takes: (local id, amount).
    pub fn holds_taken(&self) -> &[(u64, Money)] {
        &self.holds_taken
    }

    /// Holds this change releases (their debits settled, or their MED ended).
    pub fn holds_released(&self) -> &[u64] {
        &self.holds_released
    }
}

/// Steps of one command decided on a ledger, not yet applied (see the module doc).
#[derive(Debug)]
pub struct LedgerDraft<'a> {
    base: &'a Ledger,
    state: LedgerState,
    held: Money,
    holds_taken: Vec<(u64, Money)>,
    holds_released: Vec<u64>,
    external_ids: Vec<(String, u64)>,
    idempotency: Vec<(String, u64, String)>,
}

impl Ledger {
    /// A new account's ledger, holding its opening balance.
    pub fn opening(balance: Money) -> Ledger {
        let mut l = Ledger::default();
        l.state.balance.available = balance;
        l.state.totals.credited = balance;
        l
    }

    /// A ledger restored from storage (its key indexes stay there; see [`StoredKeys`]).
    pub fn restore(state: LedgerState, pending: HashMap<u64, Money>) -> Result<Ledger, InvariantViolation> {
        let held = pending
            .values()
            .try_fold(Money::ZERO, |acc, h| acc.checked_add(*h))
            .ok_or_else(|| InvariantViolation("pending holds overflow".into()))?;
        check(&state, held)?;
        Ok(Ledger { state, keys: None, pending, held })
    }

    pub fn state(&self) -> &LedgerState {
        &self.state
    }

    pub fn balance(&self) -> Balance {
        self.state.balance
    }

    pub fn external_id(&self, external_id: &str) -> Option<u64> {
        self.keys.as_ref()?.external_ids.get(external_id).copied()
    }

    fn idempotency_key(&self, key: &str) -> Option<(u64, String)> {
        self.keys.as_ref()?.idempotency.get(key).cloned()
    }

    pub fn pending(&self) -> impl Iterator<Item = (u64, Money)> + '_ {
        self.pending.iter().map(|(k, v)| (*k, *v))
    }

    /// Entries of the key indexes held in memory.
    pub fn keys_held(&self) -> usize {
        self.keys.as_ref().map_or(0, |k| k.external_ids.len() + k.idempotency.len())
    }

    /// Forgets the key index entries of every transaction but those `in_flight` says are
    /// (their writes are durable, so storage answers for them from now on).
    pub fn retain_keys(&mut self, in_flight: impl Fn(u64) -> bool) {
        let Some(keys) = self.keys.as_mut() else { return };
        keys.external_ids.retain(|_, local| in_flight(*local));
        keys.idempotency.retain(|_, (local, _)| in_flight(*local));
        if keys.external_ids.is_empty() && keys.idempotency.is_empty() {
            self.keys = None;
        }
    }

    pub fn is_pending(&self, local_id: u64) -> bool {
        self.pending.contains_key(&local_id)
    }

    /// Starts deciding a command's steps on this ledger.
    pub fn draft(&self) -> LedgerDraft<'_> {
        LedgerDraft {
            base: self,
            state: self.state,
            held: self.held,
            holds_taken: Vec::new(),
            holds_released: Vec::new(),
            external_ids: Vec::new(),
            idempotency: Vec::new(),
        }
    }

    /// Applies a checked change. It cannot break an invariant: [`LedgerDraft::finish`]
    /// checked the state it leads to.
    pub fn apply(&mut self, change: LedgerChange) {
        self.state = change.state;
        self.held = change.held;
        for local in change.holds_released {
            self.pending.remove(&local);
        }
        self.pending.extend(change.holds_taken);
        if self.pending.is_empty() {
            self.pending.shrink_to_fit();
        }
        if !change.external_ids.is_empty() || !change.idempotency.is_empty() {
            let keys = self.keys.get_or_insert_with(Box::default);
            keys.external_ids.extend(change.external_ids);
            keys.idempotency
                .extend(change.idempotency.into_iter().map(|(k, local, hash)| (k, (local, hash))));
        }
    }
}

impl LedgerDraft<'_> {
    /// The balance as the steps so far leave it.
    pub fn balance(&self) -> Balance {
        self.state.balance
    }

    fn external_owner(&self, external_id: &str) -> Option<u64> {
        self.external_ids
            .iter()
            .find(|(e, _)| e == external_id)
            .map(|(_, local)| *local)
            .or_else(|| self.base.external_id(external_id))
    }

    fn idempotency_owner(&self, key: &str) -> Option<(u64, String)> {
        self.idempotency
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, local, hash)| (*local, hash.clone()))
            .or_else(|| self.base.idempotency_key(key))
    }

    /// A debit: takes its keys, checks the limits and the balance, and holds value and fee.
    pub fn debit(&mut self, req: &DebitRequest, limits: &Limits) -> Result<DebitDecision, Rejection> {
        let taken = req.external_id.as_deref().and_then(|e| self.external_owner(e)).or(req.stored.external);
        if let Some(existing) = taken {
            return Err(Rejection::DuplicateExternalId { existing });
        }
        if let Some((key, hash)) = &req.idempotency {
            let first = self.idempotency_owner(key).or_else(|| req.stored.idempotency.clone());
            if let Some((existing, first_hash)) = first {
                return if &first_hash == hash {
                    Ok(DebitDecision::Replay { existing })
                } else {
                    Err(Rejection::IdempotencyKeyReused { existing })
                };
            }
        }
        let mut state = self.state;
        let mut hold = Money::ZERO;
        if req.hold && req.limited != Limited::No {
            let by_night = req.limited == Limited::All;
            state.counters =
                self.state.counters.admit(limits, req.value, req.now, by_night).map_err(|b| match b {
                    LimitBreach::PerTransaction => Rejection::PerTransactionLimit,
                    LimitBreach::Daily => Rejection::DailyLimit,
                    LimitBreach::Nightly => Rejection::NightlyLimit,
                })?;
        }
        if req.hold {
            hold = req.value.checked_add(req.fee).ok_or(Rejection::Overflow)?;
            state.balance.available =
                state.balance.available.checked_sub(hold).ok_or(Rejection::InsufficientBalance)?;
            state.balance.blocked = state.balance.blocked.checked_add(hold).ok_or(Rejection::Overflow)?;
        }
        let held = self.held.checked_add(hold).ok_or(Rejection::Overflow)?;
        self.state = state;
        self.held = held;
        if !hold.is_zero() {
            self.holds_taken.push((req.local_id, hold));
        }
        if let Some(ext) = &req.external_id {
            self.external_ids.push((ext.clone(), req.local_id));
        }
        if let Some((key, hash)) = &req.idempotency {
            self.idempotency.push((key.clone(), req.local_id, hash.clone()));
        }
        Ok(DebitDecision::Accepted { hold })
    }

    /// Settles a pending debit (or ends a MED's hold): success debits the hold, failure
    /// returns it to available. `None` when it is not pending (already settled, or it never
    /// held money), which makes a repeated settlement a no-op.
    pub fn settle(&mut self, local_id: u64, success: bool) -> Option<Money> {
        if self.holds_released.contains(&local_id) {
            return None;
        }
        let hold = self
            .holds_taken
            .iter()
            .find(|(l, _)| *l == local_id)
            .map(|(_, h)| *h)
            .or_else(|| self.base.pending.get(&local_id).copied())?;
        let mut state = self.state;
        state.balance.blocked = state.balance.blocked.checked_sub(hold)?;
        if success {
            state.totals.debited = state.totals.debited.checked_add(hold)?;
        } else {
            state.balance.available = state.balance.available.checked_add(hold)?;
        }
        self.held = self.held.checked_sub(hold)?;
        self.state = state;
        if let Some(at) = self.holds_taken.iter().position(|(l, _)| *l == local_id) {
            self.holds_taken.remove(at);
        } else {
            self.holds_released.push(local_id);
        }
        Some(hold)
    }

    /// Blocks `extra` more under the hold `local_id` (made here when it has none): what a
    /// MED 2.0 case blocks of money that arrives after it opened.
    pub fn grow_hold(&mut self, local_id: u64, extra: Money) -> Result<(), Rejection> {
        if self.holds_released.contains(&local_id) {
            return Err(Rejection::Overflow);
        }
        let had = self
            .holds_taken
            .iter()
            .find(|(l, _)| *l == local_id)
            .map(|(_, h)| *h)
            .or_else(|| self.base.pending.get(&local_id).copied())
            .unwrap_or(Money::ZERO);
        let mut state = self.state;
        state.balance.available =
            state.balance.available.checked_sub(extra).ok_or(Rejection::InsufficientBalance)?;
        state.balance.blocked = state.balance.blocked.checked_add(extra).ok_or(Rejection::Overflow)?;
        let total = had.checked_add(extra).ok_or(Rejection::Overflow)?;
        self.held = self.held.checked_add(extra).ok_or(Rejection::Overflow)?;
        self.state = state;
        self.holds_taken.retain(|(l, _)| *l != local_id);
        self.holds_taken.push((local_id, total));
        Ok(())
    }

    /// A received payment of `value` with `fee` charged: `value - fee` becomes available
    /// (never below zero). Answers the net amount.
    pub fn credit(&mut self, value: Money, fee: Money) -> Result<Money, Rejection> {
        let net = value.checked_sub(fee).unwrap_or(Money::ZERO);
        let mut state = self.state;
        state.balance.available = state.balance.available.checked_add(net).ok_or(Rejection::Overflow)?;
        state.totals.credited = state.totals.credited.checked_add(net).ok_or(Rejection::Overflow)?;
        self.state = state;
        Ok(net)
    }

    /// Checks the invariants on the state the steps lead to, and answers the change.
    pub fn finish(self) -> Result<LedgerChange, InvariantViolation> {
        check(&self.state, self.held)?;
        Ok(LedgerChange {
            state_changed: self.state != self.base.state,
            state: self.state,
            held: self.held,
            holds_taken: self.holds_taken,
            holds_released: self.holds_released,
            external_ids: self.external_ids,
            idempotency: self.idempotency,
        })
    }
}

fn check(state: &LedgerState, held: Money) -> Result<(), InvariantViolation> {
    let b = state.balance;
    if held != b.blocked {
        return Err(InvariantViolation(format!("blocked {} != pending holds {held}", b.blocked)));
    }
    let lhs = b.available.checked_add(b.blocked).and_then(|s| s.checked_add(state.totals.debited));
    if lhs != Some(state.totals.credited) {
        return Err(InvariantViolation(format!(
            "available {} + blocked {} + debited {} != credited {}",
            b.available, b.blocked, state.totals.debited, state.totals.credited
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn m(s: &str) -> Money {
        Money::parse(s).unwrap()
    }

    fn big_limits() -> Limits {
        Limits { per_transaction: m("1000000"), daily: m("100000000"), nightly: m("100000000") }
    }

    fn req(id: u64, ext: &str, value: &str, fee: &str) -> DebitRequest {
        DebitRequest {
            local_id: id,
            external_id: Some(ext.into()),
            idempotency: None,
            value: m(value),
            fee: m(fee),
            hold: true,
            limited: Limited::All,
            now: DateTime::parse_from_rfc3339("2026-03-10T15:00:00Z").unwrap().with_timezone(&Utc),
            stored: StoredKeys::default(),
        }
    }

    /// Decides one debit on its own draft.
    fn decide(l: &Ledger, r: &DebitRequest, limits: &Limits) -> Result<DebitDecision, Rejection> {
        l.draft().debit(r, limits)
    }

    fn accept(l: &mut Ledger, r: &DebitRequest) -> Result<(), Rejection> {
        let mut d = l.draft();
        match d.debit(r, &big_limits())? {
            DebitDecision::Accepted { .. } => {
                let change = d.finish().unwrap();
                l.apply(change);
                Ok(())
            }
            DebitDecision::Replay { .. } => unreachable!(),
        }
    }

    /// Settles on its own draft and applies; answers the released hold.
    fn settle(l: &mut Ledger, local: u64, ok: bool) -> Option<Money> {
        let mut d = l.draft();
        let released = d.settle(local, ok)?;
        let change = d.finish().unwrap();
        l.apply(change);
        Some(released)
    }

    #[test]
    fn an_external_id_only_storage_knows_is_still_a_duplicate() {
        let l = Ledger::opening(m("100"));
        let mut r = req(5, "taken-long-ago", "1", "0");
        r.stored.external = Some(3);
        assert_eq!(decide(&l, &r, &big_limits()), Err(Rejection::DuplicateExternalId { existing: 3 }));
    }

    #[test]
    fn an_idempotency_key_only_storage_knows_replays_or_conflicts_by_its_hash() {
        let l = Ledger::opening(m("100"));
        let mut r = req(5, "e", "1", "0");
        r.external_id = None;
        r.idempotency = Some(("k".into(), "h1".into()));
        r.stored.idempotency = Some((3, "h1".into()));
        assert_eq!(decide(&l, &r, &big_limits()), Ok(DebitDecision::Replay { existing: 3 }));
        r.stored.idempotency = Some((3, "h2".into()));
        assert_eq!(decide(&l, &r, &big_limits()), Err(Rejection::IdempotencyKeyReused { existing: 3 }));
    }

    #[test]
    fn forgetting_durable_keys_keeps_those_in_flight_and_changes_no_money() {
        let mut l = Ledger::opening(m("100"));
        accept(&mut l, &req(1, "a", "1", "0")).unwrap();
        accept(&mut l, &req(2, "b", "1", "0")).unwrap();
        let before = *l.state();
        l.retain_keys(|local| local == 2);
        assert_eq!(l.keys_held(), 1);
        assert_eq!((l.external_id("a"), l.external_id("b")), (None, Some(2)));
        assert_eq!(*l.state(), before);
        // Still pending and held: settling 1 works as before.
        assert!(settle(&mut l, 1, true).is_some());
    }

    #[test]
    fn a_debit_holds_value_and_fee_and_settlement_moves_it() {
        let mut l = Ledger::opening(m("100"));
        accept(&mut l, &req(1, "a", "10", "0.50")).unwrap();
        assert_eq!(l.balance(), Balance { available: m("89.50"), blocked: m("10.50") });
        assert_eq!(settle(&mut l, 1, true), Some(m("10.50")));
        assert_eq!(l.balance(), Balance { available: m("89.50"), blocked: m("0") });
        assert_eq!(settle(&mut l, 1, true), None);
        accept(&mut l, &req(2, "b", "20", "0")).unwrap();
        assert_eq!(settle(&mut l, 2, false), Some(m("20")));
        assert_eq!(l.balance(), Balance { available: m("89.50"), blocked: m("0") });
    }

    #[test]
    fn rejections_come_in_precedence_order() {
        let mut l = Ledger::opening(m("50"));
        accept(&mut l, &req(1, "dup", "1", "0")).unwrap();
        // A duplicate wins even over a limit and the balance.
        let r = decide(&l, &req(2, "dup", "999999999", "0"), &big_limits());
        assert_eq!(r, Err(Rejection::DuplicateExternalId { existing: 1 }));
        let small = Limits { per_transaction: m("10"), daily: m("100"), nightly: m("100") };
        assert_eq!(decide(&l, &req(3, "x", "60", "0"), &small), Err(Rejection::PerTransactionLimit));
        assert_eq!(decide(&l, &req(3, "x", "10", "40"), &small), Err(Rejection::InsufficientBalance));
        // The fee counts for the balance, not for the limits.
        assert!(decide(&l, &req(3, "x", "10", "39"), &small).is_ok());
    }

    #[test]
    fn an_unlimited_debit_skips_the_limits_but_not_the_balance() {
        let l = Ledger::opening(m("500"));
        let tiny = Limits { per_transaction: m("1"), daily: m("1"), nightly: m("1") };
        let mut r = req(1, "refund", "400", "0");
        assert_eq!(decide(&l, &r, &tiny), Err(Rejection::PerTransactionLimit));
        r.limited = Limited::No;
        assert!(matches!(decide(&l, &r, &tiny), Ok(DebitDecision::Accepted { .. })));
        r.value = m("501");
        assert_eq!(decide(&l, &r, &tiny), Err(Rejection::InsufficientBalance));
    }

    #[test]
    fn the_balance_covers_value_plus_fee_exactly() {
        let mut l = Ledger::opening(m("10.50"));
        assert_eq!(
            decide(&l, &req(1, "a", "10", "0.51"), &big_limits()),
            Err(Rejection::InsufficientBalance)
        );
        accept(&mut l, &req(1, "a", "10", "0.50")).unwrap();
        assert_eq!(l.balance().available, Money::ZERO);
    }

    #[test]
    fn idempotency_keys_replay_or_conflict() {
        let mut l = Ledger::opening(m("100"));
        let mut r = req(1, "", "10", "0");
        r.external_id = None;
        r.idempotency = Some(("k".into(), "h1".into()));
        accept(&mut l, &r).unwrap();
        let mut again = r.clone();
        again.local_id = 2;
        assert_eq!(decide(&l, &again, &big_limits()), Ok(DebitDecision::Replay { existing: 1 }));
        again.idempotency = Some(("k".into(), "h2".into()));
        assert_eq!(decide(&l, &again, &big_limits()), Err(Rejection::IdempotencyKeyReused { existing: 1 }));
        assert_eq!(l.balance().available, m("90"));
    }

    #[test]
    fn a_record_without_hold_takes_the_external_id_and_no_money() {
        let mut l = Ledger::opening(m("5"));
        let mut r = req(1, "mismatch", "10", "0");
        r.hold = false;
        accept(&mut l, &r).unwrap();
        assert_eq!(l.balance(), Balance { available: m("5"), blocked: m("0") });
        assert_eq!(l.external_id("mismatch"), Some(1));
        assert_eq!(settle(&mut l, 1, true), None);
    }

    #[test]
    fn steps_on_one_draft_see_each_other_and_apply_as_one_change() {
        let mut l = Ledger::opening(m("10"));
        let mut d = l.draft();
        // A credit, then two holds that only the credit can cover, then one settled at once.
        assert_eq!(d.credit(m("30"), m("1")), Ok(m("29")));
        assert_eq!(
            d.debit(&req(1, "a", "20", "0"), &big_limits()),
            Ok(DebitDecision::Accepted { hold: m("20") })
        );
        assert_eq!(
            d.debit(&req(2, "a", "1", "0"), &big_limits()),
            Err(Rejection::DuplicateExternalId { existing: 1 })
        );
        assert_eq!(
            d.debit(&req(2, "b", "19", "0"), &big_limits()),
            Ok(DebitDecision::Accepted { hold: m("19") })
        );
        assert_eq!(d.debit(&req(3, "c", "0.01", "0"), &big_limits()), Err(Rejection::InsufficientBalance));
        assert_eq!(d.settle(2, false), Some(m("19")));
        assert_eq!(d.settle(2, false), None, "released once");
        assert_eq!(d.balance(), Balance { available: m("19"), blocked: m("20") });
        let change = d.finish().unwrap();
        assert_eq!(change.holds_taken(), &[(1, m("20"))]);
        assert!(change.holds_released().is_empty(), "a hold taken and released in one change is neither");
        assert_eq!(l.balance(), Balance { available: m("10"), blocked: m("0") }, "a draft changes nothing");
        l.apply(change);
        assert_eq!(l.balance(), Balance { available: m("19"), blocked: m("20") });
        assert_eq!((l.external_id("a"), l.external_id("b")), (Some(1), Some(2)));
        assert!(l.is_pending(1) && !l.is_pending(2));
    }

    #[test]
    fn a_change_that_moves_no_money_writes_no_ledger_record() {
        let l = Ledger::opening(m("10"));
        let mut d = l.draft();
        let mut r = req(1, "charge", "5", "0");
        r.hold = false;
        r.limited = Limited::No;
        assert_eq!(d.debit(&r, &big_limits()), Ok(DebitDecision::Accepted { hold: Money::ZERO }));
        let change = d.finish().unwrap();
        assert_eq!(change.state(), None);
        assert!(change.holds_taken().is_empty());
    }

    #[test]
    fn a_restored_ledger_that_breaks_an_invariant_is_refused() {
        let mut state = *Ledger::opening(m("10")).state();
        state.balance.blocked = m("1");
        state.balance.available = m("9");
        assert!(Ledger::restore(state, HashMap::new()).is_err(), "blocked without a hold");
        assert!(Ledger::restore(state, HashMap::from([(7, m("1"))])).is_ok());
        state.totals.credited = m("11");
        assert!(Ledger::restore(state, HashMap::from([(7, m("1"))])).is_err(), "money not conserved");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Debit { ext: u8, cents: u32, fee: u8 },
        Settle { pick: u8, ok: bool },
        Credit { cents: u32 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..20, 1u32..50_000, 0u8..3).prop_map(|(ext, cents, fee)| Op::Debit { ext, cents, fee }),
            (any::<u8>(), any::<bool>()).prop_map(|(pick, ok)| Op::Settle { pick, ok }),
            (1u32..30_000).prop_map(|cents| Op::Credit { cents }),
        ]
    }

    /// A reference model in whole cents with plain integers.
    #[derive(Default)]
    struct Model {
        available: i64,
        blocked: i64,
        pending: Vec<(u64, i64)>,
        externals: std::collections::HashSet<u8>,
    }

    fn cents(m: Money) -> i64 {
        (m.as_decimal() * rust_decimal::Decimal::ONE_HUNDRED).try_into().unwrap()
    }

    proptest! {
        #[test]
        fn the_ledger_matches_a_reference_model(ops in proptest::collection::vec(op(), 1..200)) {
            let mut l = Ledger::opening(m("100"));
            let mut model = Model { available: 10_000, ..Model::default() };
            let mut next_id = 1u64;
            let mut txs_by_external = std::collections::HashMap::new();
            for op in ops {
                match op {
                    Op::Debit { ext, cents: c, fee } => {
                        let value = Money::try_from(rust_decimal::Decimal::new(i64::from(c), 2)).unwrap();
                        let fee_m = Money::try_from(rust_decimal::Decimal::new(i64::from(fee) * 25, 2)).unwrap();
                        let r = req(next_id, &format!("e{ext}"), "0", "0");
                        let r = DebitRequest { value, fee: fee_m, ..r };
                        let hold = i64::from(c) + i64::from(fee) * 25;
                        let got = decide(&l, &r, &big_limits());
                        if model.externals.contains(&ext) {
                            let dup = matches!(got, Err(Rejection::DuplicateExternalId { .. }));
                            prop_assert!(dup, "expected a duplicate");
                        } else if model.available < hold {
                            prop_assert_eq!(got, Err(Rejection::InsufficientBalance));
                        } else {
                            let Ok(DebitDecision::Accepted { .. }) = got else { panic!("expected accept") };
                            accept(&mut l, &r).unwrap();
                            model.available -= hold;
                            model.blocked += hold;
                            model.pending.push((next_id, hold));
                            model.externals.insert(ext);
                            txs_by_external.insert(ext, next_id);
                        }
                        next_id += 1;
                    }
                    Op::Settle { pick, ok } => {
                        if model.pending.is_empty() {
                            prop_assert_eq!(settle(&mut l, next_id + 1000, ok), None);
                            continue;
                        }
                        let (id, hold) = model.pending.remove(usize::from(pick) % model.pending.len());
                        prop_assert_eq!(settle(&mut l, id, ok), Some(Money::try_from(rust_decimal::Decimal::new(hold, 2)).unwrap()));
                        model.blocked -= hold;
                        if !ok { model.available += hold; }
                        // Settling again changes nothing.
                        prop_assert_eq!(settle(&mut l, id, ok), None);
                    }
                    Op::Credit { cents: c } => {
                        let value = Money::try_from(rust_decimal::Decimal::new(i64::from(c), 2)).unwrap();
                        let mut d = l.draft();
                        d.credit(value, Money::ZERO).unwrap();
                        let change = d.finish().unwrap();
                        l.apply(change);
                        model.available += i64::from(c);
                    }
                }
                prop_assert!(model.available >= 0);
                prop_assert_eq!(cents(l.balance().available), model.available);
                prop_assert_eq!(cents(l.balance().blocked), model.blocked);
            }
            // One transaction per externalId.
            for (ext, id) in txs_by_external {
                prop_assert_eq!(l.external_id(&format!("e{ext}")), Some(id));
            }
        }
    }
    #[test]
    fn a_hold_grows_in_place_and_settles_whole() {
        let mut ledger = Ledger::opening(Money::parse("20").unwrap());
        let mut d = ledger.draft();
        d.grow_hold(5, Money::parse("3").unwrap()).unwrap();
        d.grow_hold(5, Money::parse("4").unwrap()).unwrap();
        assert!(d.grow_hold(6, Money::parse("14").unwrap()).is_err(), "not more than is available");
        ledger.apply(d.finish().unwrap());
        assert_eq!(ledger.balance().blocked, Money::parse("7").unwrap());
        let mut d = ledger.draft();
        d.grow_hold(5, Money::parse("1").unwrap()).unwrap();
        ledger.apply(d.finish().unwrap());
        assert_eq!(ledger.pending().collect::<Vec<_>>(), vec![(5, Money::parse("8").unwrap())]);
        let mut d = ledger.draft();
        assert_eq!(d.settle(5, false), Some(Money::parse("8").unwrap()));
        ledger.apply(d.finish().unwrap());
        assert_eq!(ledger.balance().available, Money::parse("20").unwrap());
    }
}
