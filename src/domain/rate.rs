//! Sliding windows of calls per key: how the HTTP layer limits a route's calls per account
//! (webhook resends, the MED list). Pure: the time of each call comes in as an argument.
//!
//! Memory: a key keeps at most `max` call times, and the times that left the window are
//! dropped on the key's next call.

use std::collections::{HashMap, VecDeque};

use chrono::{DateTime, Duration, Utc};

/// A sliding window of calls per key: at most `max` calls in any `window`.
#[derive(Debug)]
pub struct RateWindow {
    max: usize,
    window: Duration,
    calls: HashMap<u64, VecDeque<DateTime<Utc>>>,
}

impl RateWindow {
    pub fn new(max: usize, window: Duration) -> RateWindow {
        RateWindow { max, window, calls: HashMap::new() }
    }

    /// Counts a call at `now`, or answers how long until one is allowed again.
    pub fn hit(&mut self, key: u64, now: DateTime<Utc>) -> Result<(), Duration> {
        let calls = self.calls.entry(key).or_default();
        while calls.front().is_some_and(|t| *t + self.window <= now) {
            calls.pop_front();
        }
        if calls.len() >= self.max {
            let oldest = calls.front().copied().unwrap_or(now);
            return Err(oldest + self.window - now);
        }
        calls.push_back(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 11, 22, 12, 0, 0).unwrap()
    }

    #[test]
    fn the_rate_window_slides() {
        let now = t0();
        let mut w = RateWindow::new(3, Duration::seconds(60));
        for i in 0..3 {
            assert_eq!(w.hit(1, now + Duration::seconds(i)), Ok(()));
        }
        assert_eq!(w.hit(1, now + Duration::seconds(10)), Err(Duration::seconds(50)));
        assert_eq!(w.hit(2, now + Duration::seconds(10)), Ok(()), "another key has its own window");
        assert_eq!(w.hit(1, now + Duration::seconds(60)), Ok(()), "the first call left the window");
        assert_eq!(w.hit(1, now + Duration::seconds(60)), Err(Duration::seconds(1)));
    }
}

/// A token bucket per key: its `per_second` calls a second on average, at most `per_second`
/// at once. It keeps three numbers per key (what a sliding window would keep a time per
/// call for, too much at thousands of calls a second). Tokens are counted in thousandths,
/// so the refill of a millisecond is exact.
#[derive(Debug)]
pub struct TokenBuckets {
    /// Per key: thousandths of a token, when they were counted, and the key's rate.
    buckets: HashMap<u64, (u64, DateTime<Utc>, u64)>,
}

/// Keys a [`TokenBuckets`] holds at most; past it, the full buckets (keys idle long enough
/// to have refilled) are dropped, since a full bucket and no bucket say the same.
pub const TOKEN_BUCKETS_MAX: usize = 100_000;

impl TokenBuckets {
    pub fn new() -> TokenBuckets {
        TokenBuckets { buckets: HashMap::new() }
    }

    /// Takes a token for `key`, whose rate is `per_second` tokens a second with a burst of
    /// as many, at `now`; or answers how long until one is there. A key's rate may change
    /// between calls: the bucket keeps what it holds, up to the new burst.
    pub fn take(&mut self, key: u64, per_second: u64, now: DateTime<Utc>) -> Result<(), Duration> {
        let per_second = per_second.max(1);
        let full = per_second * 1000;
        if self.buckets.len() >= TOKEN_BUCKETS_MAX {
            self.buckets.retain(|_, (tokens, at, rate)| {
                let elapsed = u64::try_from((now - *at).num_milliseconds()).unwrap_or(0);
                tokens.saturating_add(elapsed.saturating_mul(*rate)) < *rate * 1000
            });
        }
        let (tokens, at, rate) = self.buckets.entry(key).or_insert((full, now, per_second));
        *rate = per_second;
        // Time only ever refills: a clock that went back moves nothing.
        if now > *at {
            let elapsed = u64::try_from((now - *at).num_milliseconds()).unwrap_or(0);
            *tokens = tokens.saturating_add(elapsed.saturating_mul(per_second));
            *at = now;
        }
        *tokens = (*tokens).min(full);
        if *tokens >= 1000 {
            *tokens -= 1000;
            return Ok(());
        }
        let missing = 1000 - *tokens;
        Err(Duration::milliseconds(i64::try_from(missing.div_ceil(per_second)).unwrap_or(i64::MAX)))
    }
}

impl Default for TokenBuckets {
    fn default() -> Self {
        TokenBuckets::new()
    }
}

#[cfg(test)]
mod bucket_tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_bucket_allows_its_rate_with_a_burst_of_as_much_and_says_when_the_next_token_comes() {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 26, 12, 0, 0).unwrap();
        let mut b = TokenBuckets::new();
        for _ in 0..5 {
            assert_eq!(b.take(1, 5, t0), Ok(()));
        }
        assert_eq!(b.take(1, 5, t0), Err(Duration::milliseconds(200)), "one token every 200 ms");
        assert_eq!(b.take(2, 5, t0), Ok(()), "another key has its own bucket");
        assert_eq!(b.take(1, 5, t0 + Duration::milliseconds(199)), Err(Duration::milliseconds(1)));
        assert_eq!(b.take(1, 5, t0 + Duration::milliseconds(200)), Ok(()));
        // Idle long enough, the bucket is full again, never more.
        let later = t0 + Duration::seconds(60);
        for _ in 0..5 {
            assert_eq!(b.take(1, 5, later), Ok(()));
        }
        assert!(b.take(1, 5, later).is_err());
        // A clock that goes back refills nothing, then or after.
        assert!(b.take(1, 5, later - Duration::seconds(10)).is_err());
        assert_eq!(b.take(1, 5, later + Duration::milliseconds(199)), Err(Duration::milliseconds(1)));
    }

    #[test]
    fn each_key_has_its_own_rate_and_a_changed_rate_applies_at_once() {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 27, 12, 0, 0).unwrap();
        let mut b = TokenBuckets::new();
        for _ in 0..2 {
            assert_eq!(b.take(1, 2, t0), Ok(()));
        }
        assert_eq!(b.take(1, 2, t0), Err(Duration::milliseconds(500)));
        for _ in 0..10 {
            assert_eq!(b.take(2, 10, t0), Ok(()), "another key at its own rate");
        }
        assert!(b.take(2, 10, t0).is_err());
        // Raised: it refills at the new rate, up to the new burst.
        assert_eq!(b.take(1, 100, t0 + Duration::milliseconds(10)), Ok(()));
        let later = t0 + Duration::seconds(5);
        for _ in 0..100 {
            assert_eq!(b.take(1, 100, later), Ok(()));
        }
        assert!(b.take(1, 100, later).is_err());
        // Lowered: what it holds shrinks to the new burst at once.
        let much_later = later + Duration::seconds(5);
        for _ in 0..3 {
            assert_eq!(b.take(1, 3, much_later), Ok(()));
        }
        assert!(b.take(1, 3, much_later).is_err());
    }
}
