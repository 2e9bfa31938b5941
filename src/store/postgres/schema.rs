//! The database's schema: versioned migrations kept in this repository
//! (`src/store/postgres/migrations/`), applied at start.
//!
//! `pixgw_schema` lists the versions applied. A start takes a transaction-scoped advisory
//! lock, so two nodes starting together migrate once, applies every version it knows and
//! the database lacks, each with its row, in one transaction, and refuses a database whose
//! schema is newer than this release knows: an older binary must never write records it
//! cannot read back.

use tokio_postgres::Client;

/// Every migration, in order: its version and its SQL. A released version is never edited;
/// a change is a new version.
pub const MIGRATIONS: &[(i32, &str)] = &[(1, include_str!("migrations/0001_initial.sql"))];

/// The newest version this release knows.
pub fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// The advisory lock that serializes migrations (any fixed number; "pixgw" in ASCII).
const MIGRATION_LOCK: i64 = 0x0070_6978_6777;

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error(
        "the database has pixgw schema version {found}, newer than this release knows ({known}): \
         run a release at least as new as the one that migrated it"
    )]
    TooNew { found: i32, known: i32 },
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
        return Err(SchemaError::TooNew { found, known: latest() });
    }
    for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 > found) {
        tx.batch_execute(sql).await?;
        tx.execute("INSERT INTO pixgw_schema (version) VALUES ($1)", &[version]).await?;
    }
    tx.commit().await?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_dense_and_increasing_from_one() {
        for (i, (version, sql)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(*version, i as i32 + 1);
            assert!(!sql.trim().is_empty());
        }
        assert_eq!(latest(), MIGRATIONS.len() as i32);
    }
}
