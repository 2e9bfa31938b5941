//! Throttling failed token requests (`POST /api/auth/token`), so a client secret cannot be
//! guessed at the server's speed, without handing anyone a way to lock a client out.
//!
//! Failures are counted in a sliding window on the server clock, in two ways:
//! - **per certificate**: every failed attempt that presented a registered certificate. Past
//!   [`TOKEN_FAILURES_PER_CERT_MAX`] the certificate gets 429 before any credential is read.
//!   Behind a proxy that terminates mutual TLS only the certificate's holder can present it,
//!   so only they can throttle it.
//! - **per clientId, across accounts**: failed attempts on one clientId with a certificate
//!   that is not registered to that client's account (which is how someone else's secret
//!   would be guessed, spread over many certificates). Past [`TOKEN_FAILURES_PER_CLIENT_MAX`]
//!   such attempts get 429; attempts with the client's own account's certificate never
//!   count here and are never refused by it, so knowing or guessing a clientId locks no one
//!   out. An unknown clientId is counted like a known one, so 429 tells nothing of which
//!   ids exist.
//!
//! The throttle is refused or counted before the secret is checked, so a throttled caller
//! learns nothing about the secret. Memory is bounded: windows that ended are dropped, and
//! at most [`THROTTLE_KEYS_MAX`] keys are kept per dimension.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use chrono::{DateTime, Duration, Utc};

/// The window failures are counted in (seconds).
pub const TOKEN_FAILURE_WINDOW_SECONDS: i64 = 60;
/// Failed attempts with one certificate per window.
pub const TOKEN_FAILURES_PER_CERT_MAX: usize = 10;
/// Failed attempts on one clientId with other accounts' certificates per window.
pub const TOKEN_FAILURES_PER_CLIENT_MAX: usize = 20;
/// Keys a throttle remembers at most; past it, a new key is not counted until old windows
/// end (the other dimension still applies).
pub const THROTTLE_KEYS_MAX: usize = 100_000;

/// Failures per key in a sliding window.
#[derive(Debug)]
pub struct FailureWindow<K> {
    max: usize,
    window: Duration,
    failures: HashMap<K, VecDeque<DateTime<Utc>>>,
}

impl<K: Hash + Eq + Clone> FailureWindow<K> {
    pub fn new(max: usize, window: Duration) -> FailureWindow<K> {
        FailureWindow { max, window, failures: HashMap::new() }
    }

    /// `Err(wait)` when `key` has had its maximum of failures within the window at `now`:
    /// how long until the oldest leaves it.
    pub fn check(&mut self, key: &K, now: DateTime<Utc>) -> Result<(), Duration> {
        let window = self.window;
        let Some(times) = self.failures.get_mut(key) else { return Ok(()) };
        while times.front().is_some_and(|t| *t + window <= now) {
            times.pop_front();
        }
        if times.is_empty() {
            self.failures.remove(key);
            return Ok(());
        }
        match times.front() {
            Some(oldest) if times.len() >= self.max => Err(*oldest + window - now),
            _ => Ok(()),
        }
    }

    /// Counts a failure of `key` at `now`.
    pub fn fail(&mut self, key: &K, now: DateTime<Utc>) {
        if !self.failures.contains_key(key) && self.failures.len() >= THROTTLE_KEYS_MAX {
            let window = self.window;
            self.failures.retain(|_, times| times.back().is_some_and(|t| *t + window > now));
            if self.failures.len() >= THROTTLE_KEYS_MAX {
                return;
            }
        }
        self.failures.entry(key.clone()).or_default().push_back(now);
    }

    pub fn keys(&self) -> usize {
        self.failures.len()
    }
}

/// The token endpoint's two throttles. `C` names a certificate, `I` a clientId.
#[derive(Debug)]
pub struct TokenThrottle<C, I> {
    per_cert: FailureWindow<C>,
    per_client: FailureWindow<I>,
}

impl<C: Hash + Eq + Clone, I: Hash + Eq + Clone> Default for TokenThrottle<C, I> {
    fn default() -> Self {
        let window = Duration::seconds(TOKEN_FAILURE_WINDOW_SECONDS);
        TokenThrottle {
            per_cert: FailureWindow::new(TOKEN_FAILURES_PER_CERT_MAX, window),
            per_client: FailureWindow::new(TOKEN_FAILURES_PER_CLIENT_MAX, window),
        }
    }
}

impl<C: Hash + Eq + Clone, I: Hash + Eq + Clone> TokenThrottle<C, I> {
    /// Whether an attempt may have its credentials checked; `own_account` says whether the
    /// certificate is registered to the clientId's account. `Err(wait)` otherwise.
    pub fn admit(
        &mut self,
        cert: &C,
        client: &I,
        own_account: bool,
        now: DateTime<Utc>,
    ) -> Result<(), Duration> {
        self.per_cert.check(cert, now)?;
        if own_account {
            return Ok(());
        }
        self.per_client.check(client, now)
    }

    /// Counts a failed attempt.
    pub fn fail(&mut self, cert: &C, client: &I, own_account: bool, now: DateTime<Utc>) {
        self.per_cert.fail(cert, now);
        if !own_account {
            self.per_client.fail(client, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap()
    }

    fn secs(s: i64) -> Duration {
        Duration::seconds(s)
    }

    #[test]
    fn a_certificate_is_refused_at_its_maximum_until_the_oldest_failure_leaves_the_window() {
        let mut t: TokenThrottle<&str, &str> = TokenThrottle::default();
        for i in 0..TOKEN_FAILURES_PER_CERT_MAX {
            assert_eq!(t.admit(&"cert", &"client", true, t0() + secs(i as i64)), Ok(()), "{i}");
            t.fail(&"cert", &"client", true, t0() + secs(i as i64));
        }
        let at = t0() + secs(30);
        assert_eq!(t.admit(&"cert", &"client", true, at), Err(secs(30)), "the first left at 60 s");
        assert_eq!(t.admit(&"cert", &"other", false, at), Err(secs(30)), "whatever the clientId");
        assert_eq!(t.admit(&"another cert", &"client", true, at), Ok(()));
        // The first failure leaves the window at exactly 60 s.
        assert_eq!(t.admit(&"cert", &"client", true, t0() + secs(59)), Err(secs(1)));
        assert_eq!(t.admit(&"cert", &"client", true, t0() + secs(60)), Ok(()));
    }

    #[test]
    fn guesses_on_a_client_id_from_other_accounts_never_lock_out_its_own_certificate() {
        let mut t: TokenThrottle<u32, &str> = TokenThrottle::default();
        // Many certificates of other accounts, each under its own maximum.
        for i in 0..TOKEN_FAILURES_PER_CLIENT_MAX {
            let cert = i as u32;
            assert_eq!(t.admit(&cert, &"victim", false, t0()), Ok(()));
            t.fail(&cert, &"victim", false, t0());
        }
        assert_eq!(t.admit(&999, &"victim", false, t0()), Err(secs(TOKEN_FAILURE_WINDOW_SECONDS)));
        assert_eq!(t.admit(&1000, &"victim", true, t0()), Ok(()), "the client's own certificate");
        assert_eq!(t.admit(&999, &"someone else", false, t0()), Ok(()));
    }

    #[test]
    fn own_account_failures_count_only_against_the_certificate() {
        let mut t: TokenThrottle<usize, &str> = TokenThrottle::default();
        for cert in 0..TOKEN_FAILURES_PER_CLIENT_MAX {
            t.fail(&cert, &"client", true, t0());
        }
        assert_eq!(t.admit(&999, &"client", false, t0()), Ok(()));
    }

    #[test]
    fn memory_is_bounded_and_ended_windows_are_dropped() {
        let mut w: FailureWindow<usize> = FailureWindow::new(1, secs(60));
        for k in 0..THROTTLE_KEYS_MAX {
            w.fail(&k, t0());
        }
        assert_eq!(w.keys(), THROTTLE_KEYS_MAX);
        w.fail(&THROTTLE_KEYS_MAX, t0() + secs(1));
        assert_eq!(w.keys(), THROTTLE_KEYS_MAX, "full: the new key is not counted");
        assert_eq!(w.check(&THROTTLE_KEYS_MAX, t0() + secs(1)), Ok(()));
        // Once the old windows end, they make room.
        w.fail(&THROTTLE_KEYS_MAX, t0() + secs(60));
        assert_eq!(w.keys(), 1);
        assert_eq!(w.check(&THROTTLE_KEYS_MAX, t0() + secs(60)), Err(secs(60)));
        assert_eq!(w.check(&0, t0() + secs(60)), Ok(()));
    }
}
