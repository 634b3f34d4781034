-- the direct claim path against a claims table a DBA has changed: it
-- maintains every index, honours constraints, and refuses what it cannot
-- honour (columns, triggers, rules, other unique indexes, row security)
-- with an error that says what to remove; never silently.
-- The table itself: this file's claims stay in it, whatever generation the
-- worker (live, as the README configures it) opens for their class.
SET idempotency.generation_min_ttl = 2147483647;

-- an index a DBA adds is maintained by every claim
CREATE INDEX claims_claimed_at_test ON idempotency.claims (claimed_at);
SELECT count(*) FILTER (WHERE idem_claim('layout-' || i, 'layout')) AS claimed
  FROM generate_series(1, 50) i;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) AS via_new_index FROM idempotency.claims
 WHERE claimed_at > '-infinity' AND ns = (SELECT id FROM idem_namespaces WHERE name = 'layout');
RESET enable_seqscan;
RESET enable_bitmapscan;
-- a partial expression index too
CREATE INDEX claims_expr_test ON idempotency.claims ((octet_length(key))) WHERE fingerprint IS NOT NULL;
SELECT idem_claim('layout-fp', 'layout', 'payload') AS claimed_with_fp;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) AS via_partial_index FROM idempotency.claims
 WHERE octet_length(key) = 9 AND fingerprint IS NOT NULL;
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP INDEX idempotency.claims_expr_test;
DROP INDEX idempotency.claims_claimed_at_test;

-- a column the extension did not create: claims are refused, reads work
ALTER TABLE idempotency.claims ADD COLUMN extra text;
SELECT idem_claim('layout-extra', 'layout');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claimed('layout-1', 'layout') AS still_readable;
SELECT count(*) AS rows_with_extra FROM idempotency.claims WHERE extra IS NOT NULL;
ALTER TABLE idempotency.claims DROP COLUMN extra;
-- a dropped column is fine
SELECT idem_claim('layout-extra', 'layout') AS after_drop;

-- a trigger would never fire: refused for every write, reads work
CREATE FUNCTION layout_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'fired'; RETURN NEW; END $$;
CREATE TRIGGER layout_t BEFORE INSERT ON idempotency.claims
    FOR EACH ROW EXECUTE FUNCTION layout_trg();
SELECT idem_claim('layout-trg', 'layout');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim_many(ARRAY['layout-trg'], 'layout');
SELECT idem_release('layout-1', 'layout');
SELECT idem_claimed('layout-1', 'layout') AS readable_with_trigger;
-- a disabled trigger fires for nobody: claims go on
ALTER TABLE idempotency.claims DISABLE TRIGGER layout_t;
SELECT idem_claim('layout-trg', 'layout') AS with_disabled_trigger;
DROP TRIGGER layout_t ON idempotency.claims;
DROP FUNCTION layout_trg();

-- a CHECK constraint is honoured, as INSERT honours it
ALTER TABLE idempotency.claims ADD CONSTRAINT layout_short_keys CHECK (octet_length(key) < 20) NOT VALID;
\set VERBOSITY terse
SELECT idem_claim('layout-this-id-is-too-long', 'layout');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim_many(ARRAY['layout-ok-2', 'layout-this-one-is-too-long'], 'layout');
\set VERBOSITY default
SELECT idem_claimed('layout-ok-2', 'layout') AS batch_rolled_back;
SELECT idem_claimed('layout-this-id-is-too-long', 'layout') AS stored;
SELECT idem_claim('layout-ok', 'layout') AS short_is_fine;
ALTER TABLE idempotency.claims DROP CONSTRAINT layout_short_keys;

-- a unique index on anything but (key, ns) would turn new events into
-- duplicates: refused
CREATE UNIQUE INDEX layout_uniq_key ON idempotency.claims (key, ns, claimed_at);
SELECT idem_claim('layout-uniq', 'layout');
\echo :LAST_ERROR_SQLSTATE
DROP INDEX idempotency.layout_uniq_key;
-- a second unique index on (key, ns), as REINDEX CONCURRENTLY makes, is fine
CREATE UNIQUE INDEX layout_uniq_copy ON idempotency.claims (ns, key);
SELECT idem_claim('layout-uniq', 'layout') AS with_two_unique, idem_claim('layout-uniq', 'layout') AS again;
DROP INDEX idempotency.layout_uniq_copy;

-- row-level security is refused for the roles it applies to, not bypassed:
-- the extension's own policies (namespace privileges, see
-- namespace_privileges) are accepted, any other one is refused
CREATE ROLE layout_tenant;
GRANT SELECT, INSERT, DELETE ON idempotency.claims TO layout_tenant;
SELECT relrowsecurity AS installed_with_rls FROM pg_class WHERE oid = 'idempotency.claims'::regclass;
ALTER TABLE idempotency.claims ENABLE ROW LEVEL SECURITY;
CREATE POLICY layout_one_ns ON idempotency.claims TO layout_tenant
    USING (ns = (SELECT id FROM idem_namespaces WHERE name = 'layout'));
SET ROLE layout_tenant;
SELECT idem_claimed('layout-1', 'layout');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claim('layout-rls', 'other_tenant');
SELECT idem_release('layout-1', 'layout');
RESET ROLE;
-- the owner is not subject to it
SELECT idem_claimed('layout-ok', 'layout') AS owner_reads;
DROP POLICY layout_one_ns ON idempotency.claims;
SET ROLE layout_tenant;
SELECT idem_claim('layout-rls', 'other_tenant') AS with_own_policies_only;
RESET ROLE;
REVOKE ALL ON idempotency.claims FROM layout_tenant;
DROP ROLE layout_tenant;

-- a rule would never apply: refused for writes
CREATE RULE layout_rule AS ON INSERT TO idempotency.claims DO ALSO NOTIFY layout;
SELECT idem_claim('layout-rule', 'layout');
DROP RULE layout_rule ON idempotency.claims;
SELECT idem_claim('layout-rule', 'layout') AS after_rule;

-- idem_key_text decodes claim keys, and refuses bytes that are not text
SELECT idempotency.idem_key_text('\x6162'::bytea) AS ab;
SELECT idempotency.idem_key_text('\x610062'::bytea);
\echo :LAST_ERROR_SQLSTATE
SELECT idempotency.idem_key_text('\xff'::bytea);
SELECT idempotency.idem_key_text(''::bytea);

-- a TRUNCATE in the transaction that last truncated the table shortens it
-- in place, under the claim cache's remembered TIDs: a miss, not an error
BEGIN;
TRUNCATE idempotency.claims;
SELECT idem_claim('trunc-1', 'layout_trunc');
SELECT idem_claim('trunc-1', 'layout_trunc');
TRUNCATE idempotency.claims;
SELECT idem_claim('trunc-1', 'layout_trunc');
SELECT idem_claim('trunc-1', 'layout_trunc');
ROLLBACK;
