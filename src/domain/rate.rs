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
