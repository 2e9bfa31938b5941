-- pixgw schema, version 2. Expand only: a release that knows version 1 alone keeps running
-- on it, so two nodes are upgraded one at a time (docs/deploy.md "Rolling upgrade of two
-- nodes on PostgreSQL"). It is written to run again after a rollback removed its row.

-- Whether a release that does not know a version may still run on a database that has it.
-- A migration that only adds (a table, a nullable column, an index) leaves it false; one
-- that changes or removes what an older release reads or writes sets it, and an older
-- release then refuses the database.
ALTER TABLE pixgw_schema ADD COLUMN IF NOT EXISTS breaks_older boolean NOT NULL DEFAULT false;

-- Each node that has started on this database: its release and its role, for operators
-- (a rolling upgrade is over when every node says the new release).
CREATE TABLE IF NOT EXISTS pixgw_nodes (
    name    text        PRIMARY KEY,
    release text        NOT NULL,
    role    text        NOT NULL,
    since   timestamptz NOT NULL
);
