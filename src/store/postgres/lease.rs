//! The leader's lease in `pixgw_lease`: one row, an epoch, a holder and an expiry, all on
//! the database's clock (never a node's).
//!
//! A node takes the lease when it has expired (or names the node itself, after a restart
//! of the same node), and every take bumps the epoch, which fences every write of the
//! holder before (see the module doc of [`super`]). The holder renews it well within its
//! length; a renewal that finds another epoch tells the node it was deposed. A node that
//! stops on purpose ends its lease at once, so the next node need not wait it out.

use std::sync::Arc;
use std::time::Duration;

use super::{Pg, PgError};

/// How long a lease lasts after its last renewal, unless configured.
pub const LEASE_MS_DEFAULT: u64 = 5_000;
/// How often the leader renews it (and a standby tries to take it), unless configured.
pub const LEASE_RENEW_MS_DEFAULT: u64 = 1_000;
/// The shortest lease accepted, and the most renewals a lease must allow for.
pub const LEASE_MS_MIN: u64 = 1_000;
pub const LEASE_MS_MAX: u64 = 600_000;
/// A lease must outlast this many renewal periods, so one slow renewal never loses it.
pub const LEASE_RENEWALS_MIN: u64 = 3;

/// The lease's length and renewal period, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimes {
    lease: Duration,
    renew_every: Duration,
}

impl LeaseTimes {
    pub fn new(lease_ms: u64, renew_ms: u64) -> Result<LeaseTimes, &'static str> {
        if !(LEASE_MS_MIN..=LEASE_MS_MAX).contains(&lease_ms) {
            return Err("the lease must last 1000 to 600000 ms");
        }
        if renew_ms == 0 || renew_ms.saturating_mul(LEASE_RENEWALS_MIN) > lease_ms {
            return Err("the lease must be renewed at least three times within its length");
        }
        Ok(LeaseTimes {
            lease: Duration::from_millis(lease_ms),
            renew_every: Duration::from_millis(renew_ms),
        })
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    pub fn renew_every(&self) -> Duration {
        self.renew_every
    }
}

impl Default for LeaseTimes {
    fn default() -> Self {
        LeaseTimes {
            lease: Duration::from_millis(LEASE_MS_DEFAULT),
            renew_every: Duration::from_millis(LEASE_RENEW_MS_DEFAULT),
        }
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Pg {
    /// Takes the lease if it has expired or is this node's; answers the new epoch, which
    /// this node writes under from now on.
    pub async fn try_acquire(self: &Arc<Self>, times: LeaseTimes) -> Result<Option<u64>, PgError> {
        let (pool, node, ms) = (self.pool.clone(), self.node.clone(), millis(times.lease));
        let epoch = self
            .run(async move {
                let c = Pg::pooled(pool).await?;
                let row = c
                    .query_opt(
                        "UPDATE pixgw_lease SET epoch = epoch + 1, holder = $1, \
                         expires_at = now() + ($2::bigint * interval '1 millisecond') \
                         WHERE id = 1 AND (expires_at <= now() OR holder = $1) RETURNING epoch",
                        &[&node, &ms],
                    )
                    .await?;
                Ok(row.map(|r| r.get::<_, i64>(0) as u64))
            })
            .await?;
        if let Some(e) = epoch {
            self.set_epoch(e);
        }
        Ok(epoch)
    }

    /// Extends the lease from the database's now; `false`: another node took it.
    pub async fn renew(self: &Arc<Self>, times: LeaseTimes) -> Result<bool, PgError> {
        let (pool, epoch, ms) = (self.pool.clone(), self.epoch(), millis(times.lease));
        self.run(async move {
            let c = Pg::pooled(pool).await?;
            let n = c
                .execute(
                    "UPDATE pixgw_lease SET expires_at = now() + ($2::bigint * interval '1 millisecond') \
                     WHERE id = 1 AND epoch = $1",
                    &[&(epoch as i64), &ms],
                )
                .await?;
            Ok(n == 1)
        })
        .await
    }

    /// Records this node's release and role in `pixgw_nodes` (schema version 2), for
    /// operators following a rolling upgrade. Best effort: a failure is the caller's to log.
    pub async fn announce(self: &Arc<Self>, role: &'static str) -> Result<(), PgError> {
        let (pool, node) = (self.pool.clone(), self.node.clone());
        self.run(async move {
            let c = Pg::pooled(pool).await?;
            c.execute(
                "INSERT INTO pixgw_nodes (name, release, role, since) VALUES ($1, $2, $3, now()) \
                 ON CONFLICT (name) DO UPDATE SET release = EXCLUDED.release, role = EXCLUDED.role, \
                 since = EXCLUDED.since",
                &[&node, &env!("CARGO_PKG_VERSION"), &role],
            )
            .await?;
            Ok(())
        })
        .await
    }

    /// Ends this node's lease now (a graceful stop), so a standby need not wait it out.
    pub async fn release(self: &Arc<Self>) -> Result<(), PgError> {
        let (pool, epoch) = (self.pool.clone(), self.epoch());
        self.run(async move {
            let c = Pg::pooled(pool).await?;
            c.execute(
                "UPDATE pixgw_lease SET expires_at = now() WHERE id = 1 AND epoch = $1",
                &[&(epoch as i64)],
            )
            .await?;
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_renewed_at_least_three_times_within_its_length() {
        assert!(LeaseTimes::new(3_000, 1_000).is_ok());
        assert!(LeaseTimes::new(2_999, 1_000).is_err());
        assert!(LeaseTimes::new(LEASE_MS_MIN, 333).is_ok());
        assert!(LeaseTimes::new(LEASE_MS_MIN - 1, 100).is_err());
        assert!(LeaseTimes::new(LEASE_MS_MAX, 1_000).is_ok());
        assert!(LeaseTimes::new(LEASE_MS_MAX + 1, 1_000).is_err());
        assert!(LeaseTimes::new(5_000, 0).is_err());
        let d = LeaseTimes::default();
        assert_eq!(LeaseTimes::new(LEASE_MS_DEFAULT, LEASE_RENEW_MS_DEFAULT), Ok(d));
    }
}
