//! The server clock: the one source of time for every rule (token expiry, certificate
//! validity, limits' day and night, expiries, deadlines, webhook retries, rate windows).
//!
//! It is the system clock plus an offset. The offset is zero unless the server runs with
//! `--test-clock`, where `POST /admin/clock` moves it forward (never backwards) and the
//! caller persists it, so a restart keeps the same clock (decisions.md "Clock").

use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Duration, Utc};

/// The farthest one `advanceSeconds` may move the test clock (about 100 years).
pub const CLOCK_ADVANCE_SECONDS_MAX: i64 = 100 * 366 * 24 * 3600;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClockError {
    #[error("the test clock is not enabled")]
    Disabled,
    #[error("the clock never moves backwards")]
    Backwards,
    #[error("the jump is too large")]
    TooFar,
}

#[derive(Debug)]
pub struct Clock {
    offset_ms: AtomicI64,
    adjustable: bool,
}

impl Clock {
    /// The real clock: no offset, not adjustable.
    pub fn system() -> Clock {
        Clock { offset_ms: AtomicI64::new(0), adjustable: false }
    }

    /// The test clock, starting from a persisted offset.
    pub fn test(offset_ms: i64) -> Clock {
        Clock { offset_ms: AtomicI64::new(offset_ms), adjustable: true }
    }

    pub fn is_adjustable(&self) -> bool {
        self.adjustable
    }

    pub fn now(&self) -> DateTime<Utc> {
        Utc::now() + Duration::milliseconds(self.offset_ms.load(Ordering::Relaxed))
    }

    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }

    /// Jumps to `target`; returns the new offset for the caller to persist.
    pub fn set(&self, target: DateTime<Utc>) -> Result<i64, ClockError> {
        if !self.adjustable {
            return Err(ClockError::Disabled);
        }
        let now = self.now();
        if target < now {
            return Err(ClockError::Backwards);
        }
        if (target - now).num_seconds() > CLOCK_ADVANCE_SECONDS_MAX {
            return Err(ClockError::TooFar);
        }
        // Round up: the clock must not land short of the target by a fraction of a
        // millisecond (a rule at exactly `target` would not fire yet).
        let gap = target - now;
        let mut delta = gap.num_milliseconds();
        if gap > Duration::milliseconds(delta) {
            delta += 1;
        }
        Ok(self.offset_ms.fetch_add(delta, Ordering::SeqCst) + delta)
    }

    /// Moves forward by `seconds`; returns the new offset for the caller to persist.
    pub fn advance(&self, seconds: i64) -> Result<i64, ClockError> {
        if !self.adjustable {
            return Err(ClockError::Disabled);
        }
        if seconds < 0 {
            return Err(ClockError::Backwards);
        }
        if seconds > CLOCK_ADVANCE_SECONDS_MAX {
            return Err(ClockError::TooFar);
        }
        let delta = seconds * 1000;
        Ok(self.offset_ms.fetch_add(delta, Ordering::SeqCst) + delta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_cannot_be_moved() {
        let c = Clock::system();
        assert_eq!(c.advance(1), Err(ClockError::Disabled));
        assert_eq!(c.set(Utc::now() + Duration::days(1)), Err(ClockError::Disabled));
    }

    #[test]
    fn the_test_clock_moves_forward_only() {
        let c = Clock::test(0);
        assert_eq!(c.advance(60), Ok(60_000));
        assert_eq!(c.advance(-1), Err(ClockError::Backwards));
        assert_eq!(c.set(c.now() - Duration::seconds(5)), Err(ClockError::Backwards));
        assert_eq!(c.advance(CLOCK_ADVANCE_SECONDS_MAX + 1), Err(ClockError::TooFar));
        let target = c.now() + Duration::days(2) + Duration::microseconds(1);
        let offset = c.set(target).unwrap();
        assert!(c.now() >= target, "the clock lands at or after the target");
        assert!(offset >= 2 * 24 * 3600 * 1000 + 60_000 - 1000);
        assert!((c.now() - target).num_seconds().abs() <= 1);
    }

    #[test]
    fn a_persisted_offset_is_restored() {
        let c = Clock::test(3_600_000);
        let skew = (c.now() - Utc::now()).num_seconds();
        assert!((3599..=3601).contains(&skew));
    }
}
