//! Webhook delivery as the domain sees it (decisions.md "Webhooks"): the retry schedule, the
//! addresses a delivery may never reach, the scheduler that decides which delivery goes
//! next, and the resend limit (counted by `rate::RateWindow`).
//!
//! Nothing here reads a clock or draws a random number: `now` and the jitter come in as
//! arguments, so every rule is tested exactly.
//!
//! Scheduler invariants:
//! - the deliveries of one transaction go out one at a time, oldest first: the next one is
//!   eligible only when the previous one was delivered or given up;
//! - at most `per_account_max` deliveries of one account and `total_max` overall are in
//!   flight, so a receiver that never answers holds a few slots of its own account and
//!   nothing of the others';
//! - among eligible deliveries the one due first goes first, one account at a time.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use chrono::{DateTime, Duration, Utc};

/// Waits after the 1st, 2nd, … failed attempt, in seconds: 5 s, 5 min, 30 min, 2 h, 5 h,
/// 10 h, 10 h. After the attempt that follows the last wait fails, the delivery is failed.
pub const RETRY_DELAYS_SECONDS: [i64; 7] = [5, 300, 1_800, 7_200, 18_000, 36_000, 36_000];
/// Attempts of one delivery at most: the first and one per retry delay.
pub const ATTEMPTS_MAX: u32 = RETRY_DELAYS_SECONDS.len() as u32 + 1;
/// The jitter added to a retry delay, in thousandths of the delay (0 to 10 %). It spreads
/// the retries of many events that failed together, so a receiver that comes back is not
/// hit by all of them in the same second.
pub const JITTER_PERMILLE_MAX: u32 = 100;
/// Resend calls per account in any window of [`RESEND_WINDOW_SECONDS`] (interface.md "Limits").
pub const RESEND_PER_WINDOW_MAX: usize = 60;
pub const RESEND_WINDOW_SECONDS: i64 = 60;

/// When the next attempt is due after `failed_attempts` attempts that all failed, or `None`
/// when that was the last one. `jitter_permille` above the maximum counts as the maximum.
pub fn next_attempt_at(
    failed_attempts: u32,
    now: DateTime<Utc>,
    jitter_permille: u32,
) -> Option<DateTime<Utc>> {
    let index = usize::try_from(failed_attempts.checked_sub(1)?).ok()?;
    let delay_ms = RETRY_DELAYS_SECONDS.get(index)? * 1000;
    let jitter = i64::from(jitter_permille.min(JITTER_PERMILLE_MAX));
    Some(now + Duration::milliseconds(delay_ms + delay_ms * jitter / 1000))
}

/// Whether a delivery may connect to `ip`: never to loopback, private, shared (carrier
/// NAT), link-local, unspecified or broadcast addresses, in IPv4 or IPv6 (including IPv4
/// written as IPv6), which would let a webhook URL reach inside the gateway's network.
pub fn address_allowed(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_allowed(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4_allowed(v4),
            None => v6_allowed(v6),
        },
    }
}

fn v4_allowed(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    let shared = a == 100 && (64..128).contains(&b);
    let this_network = a == 0;
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || shared
        || this_network)
}

fn v6_allowed(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    let unique_local = first & 0xfe00 == 0xfc00;
    let link_local = first & 0xffc0 == 0xfe80;
    // ::a.b.c.d, the deprecated IPv4-compatible form, reaches IPv4 too.
    let compatible = ip.segments()[..6].iter().all(|s| *s == 0);
    if compatible && !ip.is_unspecified() && !ip.is_loopback() {
        return v4_allowed(Ipv4Addr::from_bits(ip.to_bits() as u32));
    }
    !(ip.is_loopback() || ip.is_unspecified() || unique_local || link_local)
}

/// One delivery the scheduler knows: an outbox event not yet delivered or given up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The outbox sequence number; it names the delivery (`webhook-id` = `msg_{seq}`).
    pub seq: u64,
    pub account: u64,
    /// The transaction the event is about; its deliveries keep their order.
    pub transaction: u64,
    /// Which of the account's endpoints it goes to.
    pub event_type: super::events::EventType,
    /// Attempts made so far (all failed).
    pub attempts: u32,
    pub due: DateTime<Utc>,
}

#[derive(Debug, Default)]
struct AccountQueue {
    /// Heads of this account's transaction chains that wait for their turn: (due, seq).
    waiting: BTreeSet<(DateTime<Utc>, u64)>,
    in_flight: usize,
    /// The key under which this account sits in `Scheduler::eligible`, if it does.
    eligible_as: Option<DateTime<Utc>>,
}

/// Which delivery goes next (see the module's invariants).
#[derive(Debug)]
pub struct Scheduler {
    per_account_max: usize,
    total_max: usize,
    deliveries: HashMap<u64, Delivery>,
    /// Every transaction's undelivered events, oldest first; only the head may be sent.
    chains: HashMap<(u64, u64), VecDeque<u64>>,
    accounts: HashMap<u64, AccountQueue>,
    /// Accounts with a waiting head and a free slot, by their earliest due time.
    eligible: BTreeSet<(DateTime<Utc>, u64)>,
    in_flight: usize,
}

impl Scheduler {
    pub fn new(per_account_max: usize, total_max: usize) -> Scheduler {
        Scheduler {
            per_account_max: per_account_max.max(1),
            total_max: total_max.max(1),
            deliveries: HashMap::new(),
            chains: HashMap::new(),
            accounts: HashMap::new(),
            eligible: BTreeSet::new(),
            in_flight: 0,
        }
    }

    /// Deliveries known (waiting, blocked behind an earlier one, or in flight).
    pub fn len(&self) -> usize {
        self.deliveries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.deliveries.is_empty()
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Adds a delivery; answers false (and changes nothing) if its seq is already known.
    /// Deliveries of one transaction must be added in their order.
    pub fn add(&mut self, d: Delivery) -> bool {
        if self.deliveries.contains_key(&d.seq) {
            return false;
        }
        let chain = self.chains.entry((d.account, d.transaction)).or_default();
        chain.push_back(d.seq);
        let is_head = chain.len() == 1;
        let (seq, account, due) = (d.seq, d.account, d.due);
        self.deliveries.insert(seq, d);
        if is_head {
            self.wait(account, due, seq);
        }
        true
    }

    /// Takes the deliveries to send now, marking them in flight.
    pub fn take_due(&mut self, now: DateTime<Utc>) -> Vec<Delivery> {
        let mut out = Vec::new();
        while self.in_flight < self.total_max {
            let Some(&(due, account)) = self.eligible.first() else { break };
            if due > now {
                break;
            }
            let popped = self.accounts.get_mut(&account).and_then(|q| {
                let head = q.waiting.pop_first();
                if head.is_some() {
                    q.in_flight += 1;
                }
                head
            });
            let Some((_, seq)) = popped else {
                // Not reachable while `refresh` keeps `eligible` exact; never loop on it.
                self.eligible.remove(&(due, account));
                continue;
            };
            self.in_flight += 1;
            self.refresh(account);
            if let Some(d) = self.deliveries.get(&seq) {
                out.push(d.clone());
            }
        }
        out
    }

    /// When the earliest waiting delivery that has a free slot is due.
    pub fn next_due(&self) -> Option<DateTime<Utc>> {
        self.eligible.first().map(|(due, _)| *due)
    }

    /// An in-flight delivery's request is over: its slot is free for another delivery,
    /// but the transaction's next event still waits for [`Scheduler::finish`] or
    /// [`Scheduler::retry`] (called once the attempt's record is durable).
    pub fn landed(&mut self, seq: u64) {
        if let Some(account) = self.deliveries.get(&seq).map(|d| d.account) {
            self.land(account);
            self.refresh(account);
        }
    }

    /// A landed delivery failed and will be tried again at `due`.
    pub fn retry(&mut self, seq: u64, attempts: u32, due: DateTime<Utc>) {
        let Some(d) = self.deliveries.get_mut(&seq) else { return };
        d.attempts = attempts;
        d.due = due;
        let account = d.account;
        self.wait(account, due, seq);
    }

    /// A landed delivery ended (delivered or given up): the next event of its transaction,
    /// if any, becomes eligible.
    pub fn finish(&mut self, seq: u64) {
        let Some(d) = self.deliveries.remove(&seq) else { return };
        let key = (d.account, d.transaction);
        let next = self.chains.get_mut(&key).and_then(|chain| {
            if chain.front() == Some(&seq) {
                chain.pop_front();
            }
            chain.front().copied()
        });
        match next.and_then(|s| self.deliveries.get(&s)).map(|n| (n.due, n.seq)) {
            Some((due, next_seq)) => self.wait(d.account, due, next_seq),
            None => {
                self.chains.remove(&key);
                self.refresh(d.account);
            }
        }
    }

    fn land(&mut self, account: u64) {
        if let Some(q) = self.accounts.get_mut(&account) {
            if q.in_flight > 0 {
                q.in_flight -= 1;
                self.in_flight -= 1;
            }
        }
    }

    fn wait(&mut self, account: u64, due: DateTime<Utc>, seq: u64) {
        self.accounts.entry(account).or_default().waiting.insert((due, seq));
        self.refresh(account);
    }

    /// Puts the account in `eligible` under its earliest due time, or takes it out.
    fn refresh(&mut self, account: u64) {
        let Some(q) = self.accounts.get_mut(&account) else { return };
        if let Some(old) = q.eligible_as.take() {
            self.eligible.remove(&(old, account));
        }
        if q.in_flight < self.per_account_max {
            if let Some(&(due, _)) = q.waiting.first() {
                q.eligible_as = Some(due);
                self.eligible.insert((due, account));
            }
        }
        if q.waiting.is_empty() && q.in_flight == 0 {
            self.accounts.remove(&account);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap()
    }

    fn d(seq: u64, account: u64, transaction: u64, due: DateTime<Utc>) -> Delivery {
        Delivery {
            seq,
            account,
            transaction,
            event_type: crate::domain::events::EventType::CashOut,
            attempts: 0,
            due,
        }
    }

    #[test]
    fn retries_follow_the_schedule_then_stop() {
        let now = t0();
        let expected = [5, 300, 1800, 7200, 18000, 36000, 36000];
        for (i, secs) in expected.iter().enumerate() {
            let failed = i as u32 + 1;
            assert_eq!(
                next_attempt_at(failed, now, 0),
                Some(now + Duration::seconds(*secs)),
                "after {failed}"
            );
        }
        assert_eq!(ATTEMPTS_MAX, 8);
        assert_eq!(next_attempt_at(ATTEMPTS_MAX, now, 0), None);
        assert_eq!(next_attempt_at(0, now, 0), None);
    }

    #[test]
    fn jitter_adds_at_most_ten_percent() {
        let now = t0();
        assert_eq!(next_attempt_at(1, now, 100), Some(now + Duration::milliseconds(5_500)));
        assert_eq!(next_attempt_at(1, now, 5_000), Some(now + Duration::milliseconds(5_500)));
        assert_eq!(next_attempt_at(2, now, 1), Some(now + Duration::milliseconds(300_300)));
    }

    #[test]
    fn inside_addresses_are_refused_and_public_ones_allowed() {
        let refused = [
            "127.0.0.1",
            "127.9.9.9",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::10.1.2.3",
        ];
        for a in refused {
            assert!(!address_allowed(a.parse().unwrap()), "{a} must be refused");
        }
        let allowed =
            ["8.8.8.8", "172.32.0.1", "100.128.0.1", "203.0.113.7", "2001:4860:4860::8888", "::ffff:8.8.8.8"];
        for a in allowed {
            assert!(address_allowed(a.parse().unwrap()), "{a} must be allowed");
        }
    }

    #[test]
    fn one_transaction_s_events_go_one_at_a_time_in_order() {
        let now = t0();
        let mut s = Scheduler::new(8, 64);
        assert!(s.add(d(1, 1, 10, now)));
        assert!(s.add(d(2, 1, 10, now)));
        assert!(s.add(d(3, 1, 11, now)));
        assert!(!s.add(d(1, 1, 10, now)), "a known seq is ignored");
        let first: Vec<u64> = s.take_due(now).iter().map(|d| d.seq).collect();
        assert_eq!(first, vec![1, 3], "seq 2 waits behind seq 1 of the same transaction");
        assert!(s.take_due(now).is_empty());
        s.landed(1);
        assert!(s.take_due(now).is_empty(), "landed is not finished: seq 2 still waits");
        s.finish(1);
        assert_eq!(s.take_due(now).iter().map(|d| d.seq).collect::<Vec<_>>(), vec![2]);
        for seq in [2, 3] {
            s.landed(seq);
            s.finish(seq);
        }
        assert!(s.is_empty());
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.next_due(), None);
    }

    #[test]
    fn a_retry_keeps_the_transaction_s_later_events_waiting() {
        let now = t0();
        let mut s = Scheduler::new(8, 64);
        s.add(d(1, 1, 10, now));
        s.add(d(2, 1, 10, now));
        assert_eq!(s.take_due(now).len(), 1);
        let later = now + Duration::seconds(5);
        s.landed(1);
        s.retry(1, 1, later);
        assert!(s.take_due(now).is_empty(), "neither the retry nor the next event is due");
        assert_eq!(s.next_due(), Some(later));
        let again = s.take_due(later);
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].seq, again[0].attempts), (1, 1));
        s.landed(1);
        s.finish(1);
        assert_eq!(s.take_due(later).iter().map(|d| d.seq).collect::<Vec<_>>(), vec![2]);
    }

    #[test]
    fn a_stuck_account_holds_only_its_own_slots() {
        let now = t0();
        let mut s = Scheduler::new(2, 3);
        for seq in 1..=10 {
            s.add(d(seq, 1, seq, now));
        }
        s.add(d(11, 2, 100, now + Duration::seconds(1)));
        let taken = s.take_due(now);
        assert_eq!(taken.len(), 2, "account 1 is capped at 2 in flight");
        assert!(taken.iter().all(|d| d.account == 1));
        // Account 2's delivery is due later, but goes as soon as it is due even though
        // account 1 has eight more waiting.
        let taken = s.take_due(now + Duration::seconds(1));
        assert_eq!(taken.iter().map(|d| d.seq).collect::<Vec<_>>(), vec![11]);
        assert_eq!(s.in_flight(), 3);
        s.add(d(12, 3, 200, now));
        assert!(s.take_due(now + Duration::seconds(2)).is_empty(), "the total cap holds");
        s.landed(11);
        assert_eq!(
            s.take_due(now + Duration::seconds(2)).iter().map(|d| d.seq).collect::<Vec<_>>(),
            vec![12]
        );
    }

    #[test]
    fn the_earliest_due_goes_first_across_accounts() {
        let now = t0();
        let mut s = Scheduler::new(1, 1);
        s.add(d(1, 1, 1, now + Duration::seconds(3)));
        s.add(d(2, 2, 2, now + Duration::seconds(1)));
        s.add(d(3, 3, 3, now + Duration::seconds(2)));
        let later = now + Duration::seconds(10);
        let mut order = Vec::new();
        while let Some(x) = s.take_due(later).pop() {
            order.push(x.seq);
            s.landed(x.seq);
            s.finish(x.seq);
        }
        assert_eq!(order, vec![2, 3, 1]);
    }
}
