//! The database's schema: versioned migrations kept in this repository
//! (`src/store/postgres/migrations/`), applied at start.
//!
//! `pixgw_schema` lists the versions applied. A start takes a transaction-scoped advisory
//! lock, so two nodes starting together migrate once, applies every version it knows and
//! the database lacks, each with its row, in one transaction.
//!
//! A database with versions this release does not know is refused if any of them
//! `breaks_older` (from version 2 on, each row says): an older binary must never write
//! records it cannot read back. One whose newer versions only add (a table, a nullable
//! column) is run on as it is, which is what lets two nodes be upgraded one at a time while
//! the other, older, keeps serving (docs/deploy.md "Rolling upgrade of two nodes on
//! PostgreSQL"). Releases that knew only version 1 refuse any newer version.

use tokio_postgres::Client;

/// One migration: its version, whether a release that does not know it must refuse the
/// database after it, and its SQL.
pub struct Migration {
    pub version: i32,
    pub breaks_older: bool,
    pub sql: &'static str,
}

/// Every migration, in order. A released version is never edited; a change is a new version.
pub const MIGRATIONS: &[Migration] = &[
    Migration { version: 1, breaks_older: true, sql: include_str!("migrations/0001_initial.sql") },
    Migration { version: 2, breaks_older: false, sql: include_str!("migrations/0002_nodes.sql") },
    Migration { version: 3, breaks_older: false, sql: include_str!("migrations/0003_nodes_now.sql") },
];

/// The first version whose row says whether it breaks older releases.
const FIRST_FLAGGED_VERSION: i32 = 2;

/// The newest version this release knows.
pub fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// The advisory lock that serializes migrations (any fixed number; "pixgw" in ASCII).
const MIGRATION_LOCK: i64 = 0x0070_6978_6777;

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error(
        "the database has pixgw schema version {found}, newer than this release knows ({known}), \
         and version {breaking} of it changes what this release reads: run a release at least as \
         new as the one that migrated it"
    )]
    TooNew { found: i32, known: i32, breaking: i32 },
    #[error("migrating the database schema: {0}")]
    Db(#[from] tokio_postgres::Error),
}

/// Brings the schema to [`latest`]; answers the version found before.
pub async fn migrate(client: &mut Client) -> Result<i32, SchemaError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS pixgw_schema (
             version    integer     PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await?;
    let found: Option<i32> = tx.query_one("SELECT max(version) FROM pixgw_schema", &[]).await?.get(0);
    let found = found.unwrap_or(0);
    if found > latest() {
        // Every version above ours is flagged (ours is at least the first flagged one).
        let breaking: Option<i32> = tx
            .query_one(
                "SELECT min(version) FROM pixgw_schema WHERE version > $1 AND breaks_older",
                &[&latest()],
            )
            .await?
            .get(0);
        if let Some(breaking) = breaking {
            return Err(SchemaError::TooNew { found, known: latest(), breaking });
        }
        tx.commit().await?;
        return Ok(found);
    }
    for m in MIGRATIONS.iter().filter(|m| m.version > found) {
        tx.batch_execute(m.sql).await?;
        if m.version >= FIRST_FLAGGED_VERSION {
            tx.execute(
                "INSERT INTO pixgw_schema (version, breaks_older) VALUES ($1, $2)",
                &[&m.version, &m.breaks_older],
            )
            .await?;
        } else {
            tx.execute("INSERT INTO pixgw_schema (version) VALUES ($1)", &[&m.version]).await?;
        }
    }
    tx.commit().await?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_dense_and_increasing_from_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i32 + 1);
            assert!(!m.sql.trim().is_empty());
        }
        assert_eq!(latest(), MIGRATIONS.len() as i32);
        // Versions are flagged from the one that adds the flag.
        assert!(MIGRATIONS[FIRST_FLAGGED_VERSION as usize - 1]
            .sql
            .contains("ADD COLUMN IF NOT EXISTS breaks_older"));
    }
}
