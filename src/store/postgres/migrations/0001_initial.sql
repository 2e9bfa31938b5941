-- pixgw schema, version 1: the key-value snapshot, the journal of groups not yet in it,
-- and the leader's lease.

-- The snapshot: every key of the repository (docs/storage.md "Record formats", "Pages"),
-- brought up to date from the journal by the leader's checkpoints.
CREATE TABLE pixgw_kv (
    key   bytea PRIMARY KEY,
    value bytea NOT NULL
);

-- One row per group of the group commit: its redo payload (docs/storage.md "The journal's
-- format", payload only), written in the same statement that checks the writer's epoch.
-- Rows at or below the snapshot's meta/applied_seq are deleted by checkpoints.
CREATE TABLE pixgw_journal (
    seq     bigint PRIMARY KEY,
    epoch   bigint NOT NULL,
    payload bytea  NOT NULL
);

-- The one writer: the node that holds the lease (epoch bumped at every takeover) and keeps
-- renewing it on the database's clock.
CREATE TABLE pixgw_lease (
    id         smallint    PRIMARY KEY CHECK (id = 1),
    epoch      bigint      NOT NULL,
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL
);
INSERT INTO pixgw_lease (id, epoch, holder, expires_at) VALUES (1, 0, '', '-infinity');
