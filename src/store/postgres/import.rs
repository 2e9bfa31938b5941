//! Moving an embedded store into an empty database (`pixgw migrate`): every key of the
//! snapshot store, as stored (pages included), written in **one transaction**.
//!
//! One transaction makes the move all or nothing: a migration that stops half-way (a lost
//! connection, a full disk, Ctrl-C) leaves the database as empty as it found it, and the
//! operator runs it again. PostgreSQL takes a transaction of millions of rows in its stride.
//!
//! The transaction first locks the lease row and refuses while a node's lease is live, then
//! refuses a database that holds any pixgw data, and bumps the epoch: a node that starts
//! while the import runs waits for the lock, finds the data afterwards, and one that held a
//! lease before can never write again.

use std::sync::mpsc;
use std::sync::Arc;

use super::{Pg, PgError, PG_CALL_TIMEOUT};

/// Rows sent to the database per statement.
pub const IMPORT_ROWS_PER_STATEMENT_MAX: usize = 1_000;
/// Statements' worth of rows queued between the reader and the database.
const IMPORT_QUEUED_MAX: usize = 4;
/// The lease holder's name while an import runs.
pub const IMPORT_HOLDER: &str = "pixgw migrate";

type Rows = Vec<(Vec<u8>, Vec<u8>)>;

enum Step {
    Rows(Rows),
    Commit,
}

/// An import under way: [`Import::put`] every pair, then [`Import::finish`]. Dropped
/// without `finish`, the transaction is rolled back.
pub struct Import {
    steps: Option<tokio::sync::mpsc::Sender<Step>>,
    outcome: mpsc::Receiver<Result<u64, PgError>>,
    rows: Rows,
}

impl Pg {
    /// Opens the import's transaction (see the module doc); refuses, before anything is
    /// copied, a database with a live lease or any pixgw data.
    pub fn begin_import(self: &Arc<Self>) -> Result<Import, PgError> {
        let mut client = self.connect()?;
        let (steps, mut queued) = tokio::sync::mpsc::channel::<Step>(IMPORT_QUEUED_MAX);
        let (ready_tx, ready) = mpsc::sync_channel::<Result<(), PgError>>(1);
        let (done, outcome) = mpsc::sync_channel(1);
        self.handle().spawn(async move {
            let timed =
                |what: &'static str| move |_| PgError::Other(format!("{what} took over {PG_CALL_TIMEOUT:?}"));
            let run = async {
                let tx = client.transaction().await?;
                let lease = tokio::time::timeout(
                    PG_CALL_TIMEOUT,
                    tx.query_one(
                        "SELECT holder, expires_at > now() FROM pixgw_lease WHERE id = 1 FOR UPDATE",
                        &[],
                    ),
                )
                .await
                .map_err(timed("locking the lease"))??;
                let (holder, live): (String, bool) = (lease.get(0), lease.get(1));
                let preflight = if live {
                    Err(PgError::Other(format!(
                        "a pixgw node ({holder}) holds this database's lease: stop every node first"
                    )))
                } else {
                    let data = tx
                        .query_opt(
                            "SELECT 1 FROM pixgw_kv UNION ALL SELECT 1 FROM pixgw_journal LIMIT 1",
                            &[],
                        )
                        .await?;
                    match data {
                        Some(_) => Err(PgError::Other(
                            "the database already holds pixgw data; migrate only into an empty one".into(),
                        )),
                        None => Ok(()),
                    }
                };
                let ok = preflight.is_ok();
                let _ = ready_tx.send(preflight);
                if !ok {
                    return Ok(0);
                }
                tx.execute(
                    "UPDATE pixgw_lease SET epoch = epoch + 1, holder = $1, expires_at = now() WHERE id = 1",
                    &[&IMPORT_HOLDER],
                )
                .await?;
                let insert = tx
                    .prepare(
                        "INSERT INTO pixgw_kv (key, value) SELECT * FROM unnest($1::bytea[], $2::bytea[])",
                    )
                    .await?;
                let mut written = 0u64;
                while let Some(step) = queued.recv().await {
                    match step {
                        Step::Rows(rows) => {
                            let (keys, values): (Vec<Vec<u8>>, Vec<Vec<u8>>) = rows.into_iter().unzip();
                            written +=
                                tokio::time::timeout(PG_CALL_TIMEOUT, tx.execute(&insert, &[&keys, &values]))
                                    .await
                                    .map_err(timed("writing rows"))??;
                        }
                        Step::Commit => {
                            tokio::time::timeout(PG_CALL_TIMEOUT, tx.commit())
                                .await
                                .map_err(timed("the commit"))??;
                            return Ok(written);
                        }
                    }
                }
                // The caller went away without finishing: dropping `tx` rolls it back.
                Err(PgError::Other("the import was abandoned; nothing was written".into()))
            };
            let out = run.await;
            let _ = done.send(out);
        });
        match ready.recv() {
            Ok(Ok(())) => Ok(Import { steps: Some(steps), outcome, rows: Vec::new() }),
            Ok(Err(refused)) => Err(refused),
            // The task ended before its checks answered: its outcome says why.
            Err(_) => Err(outcome.recv().map_or_else(
                |_| PgError::Other("the import's task ended without an answer".into()),
                |r| r.err().unwrap_or_else(|| PgError::Other("the import ended early".into())),
            )),
        }
    }
}

impl Import {
    /// Adds one key and its value.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), PgError> {
        self.rows.push((key.to_vec(), value.to_vec()));
        if self.rows.len() >= IMPORT_ROWS_PER_STATEMENT_MAX {
            self.send()?;
        }
        Ok(())
    }

    fn send(&mut self) -> Result<(), PgError> {
        let rows = std::mem::take(&mut self.rows);
        let sent = self.steps.as_ref().map(|s| s.blocking_send(Step::Rows(rows)).is_ok());
        if sent == Some(true) {
            return Ok(());
        }
        // The database side stopped: its outcome says why.
        self.steps = None;
        Err(self.outcome())
    }

    fn outcome(&self) -> PgError {
        match self.outcome.recv() {
            Ok(Err(e)) => e,
            Ok(Ok(_)) => PgError::Other("the import ended early".into()),
            Err(_) => PgError::Other("the import's task ended without an answer".into()),
        }
    }

    /// Writes what is left and commits; answers the rows written.
    pub fn finish(mut self) -> Result<u64, PgError> {
        if !self.rows.is_empty() {
            self.send()?;
        }
        let Some(steps) = self.steps.take() else { return Err(self.outcome()) };
        if steps.blocking_send(Step::Commit).is_err() {
            return Err(self.outcome());
        }
        drop(steps);
        self.outcome
            .recv()
            .unwrap_or_else(|_| Err(PgError::Other("the import's task ended without an answer".into())))
    }
}
