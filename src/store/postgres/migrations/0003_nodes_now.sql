-- pixgw schema, version 3. Expand only (a view): a release that knows version 2 alone keeps
-- running on it. It is written to run again after a rollback removed its row.

-- pixgw_nodes as it stands now. A node records its role when it changes, so a node killed
-- while it led stays `leader` in pixgw_nodes; here a node is `leader` only while it holds
-- the lease and the lease has not expired, and a node recorded as leader that does not is
-- `gone` (killed, or stopped without a word). Operators read this view.
CREATE OR REPLACE VIEW pixgw_nodes_now AS
SELECT n.name,
       n.release,
       CASE
           WHEN n.role = 'leader' AND NOT (l.holder = n.name AND l.expires_at > now()) THEN 'gone'
           ELSE n.role
       END AS role,
       n.since
FROM pixgw_nodes n
CROSS JOIN pixgw_lease l;
