-- per-namespace privileges: restricted namespaces, their grantees, role
-- membership, and what a grant or revoke changes
SET client_min_messages = warning;

CREATE ROLE regress_nsp_admin LOGIN;
CREATE ROLE regress_nsp_team NOLOGIN;
CREATE ROLE regress_nsp_alice LOGIN IN ROLE regress_nsp_team;
CREATE ROLE regress_nsp_bob LOGIN;
CREATE ROLE regress_nsp_noinherit LOGIN NOINHERIT IN ROLE regress_nsp_team;
GRANT INSERT, SELECT, DELETE ON idempotency.claims
    TO regress_nsp_alice, regress_nsp_bob, regress_nsp_noinherit;
-- a TTL class of its own, the only one with generations here, so that its
-- claims are in a generation and no other file's are
SELECT idem_namespace_define('nsp_pay', '400 days');
SET idempotency.generation_min_ttl = '300d';
SELECT idem_generation_switch('nsp_pay') AS nsp_pay_generations_opened;
RESET idempotency.generation_min_ttl;
SELECT idem_claim('before', 'nsp_pay') AS claimed_before_any_grant;

-- an unrestricted namespace: everyone with the table privileges may act
SET ROLE regress_nsp_bob;
SELECT idem_claim('b-0', 'nsp_open') AS claim_open, idem_claimed('b-0', 'nsp_open') AS check_open;
RESET ROLE;

-- the functions are for administrators; PUBLIC has no EXECUTE
SELECT p.proname, has_function_privilege('regress_nsp_bob', p.oid, 'EXECUTE') AS bob_may
  FROM pg_proc p
 WHERE p.proname IN ('idem_namespace_grant', 'idem_namespace_revoke')
 ORDER BY p.proname COLLATE "C";
SET ROLE regress_nsp_bob;
SELECT idem_namespace_grant('nsp_pay', 'regress_nsp_bob', 'claim');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- an administrator needs EXECUTE and the privileges on the grants table
GRANT EXECUTE ON FUNCTION idem_namespace_grant(text, regrole, text) TO regress_nsp_admin;
SET ROLE regress_nsp_admin;
SELECT idem_namespace_grant('nsp_pay', 'regress_nsp_bob', 'claim');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT INSERT ON idempotency.namespace_grants TO regress_nsp_admin;
SET ROLE regress_nsp_admin;
SELECT idem_namespace_grant('nsp_admin_made', 'regress_nsp_alice', 'check') AS admin_grants;
RESET ROLE;

-- grants; a second identical grant returns false
SELECT idem_namespace_grant('nsp_pay', 'regress_nsp_team', 'claim') AS team_claim;
SELECT idem_namespace_grant('nsp_pay', 'regress_nsp_team', 'claim') AS again;
SELECT idem_namespace_grant('nsp_pay', 'regress_nsp_alice', 'check') AS alice_check;
SELECT namespace, grantee, privilege FROM idem_namespace_privileges
 ORDER BY namespace COLLATE "C", grantee::text COLLATE "C", privilege COLLATE "C";

-- alice is a member of the team: she may claim, and check by her own grant
SET ROLE regress_nsp_alice;
SELECT idem_claim('a-1', 'nsp_pay') AS claim, idem_claim('a-1', 'nsp_pay') AS dup;
SELECT idem_try_claim('a-2', 'nsp_pay') AS try_claim;
SELECT * FROM idem_claim_many(ARRAY['a-3', 'a-1']::text[], 'nsp_pay') AS batch;
SELECT idem_claim('00000000-0000-0000-0000-000000000001'::uuid, 'nsp_pay') AS uuid_claim;
SELECT idem_claimed('a-1', 'nsp_pay') AS check;
SELECT event_id FROM idem_claims WHERE namespace = 'nsp_pay' ORDER BY event_id COLLATE "C";
-- but not release
SELECT idem_release('a-1', 'nsp_pay');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- bob holds nothing: every action is refused, and idem_claims hides the rows
SET ROLE regress_nsp_bob;
SELECT idem_claim('b-1', 'nsp_pay');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_try_claim('b-1', 'nsp_pay');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim_many(ARRAY['b-1']::text[], 'nsp_pay');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim_many(ARRAY[]::text[], 'nsp_pay');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claim('00000000-0000-0000-0000-000000000002'::uuid, 'nsp_pay');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claimed('a-1', 'nsp_pay');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claimed('00000000-0000-0000-0000-000000000001'::uuid, 'nsp_pay');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_release('a-1', 'nsp_pay');
\echo :LAST_ERROR_SQLSTATE
SELECT namespace, count(*) FROM idem_claims WHERE namespace LIKE 'nsp%'
 GROUP BY namespace ORDER BY namespace COLLATE "C";
-- statements on the table itself honour the grants too (row-level
-- security): bob sees, deletes and inserts nothing in nsp_pay
SELECT count(*) AS bob_sees_in_pay FROM idempotency.claims
 WHERE ns = (SELECT id FROM idem_namespaces WHERE name = 'nsp_pay');
SELECT count(*) > 0 AS bob_sees_open FROM idempotency.claims
 WHERE ns = (SELECT id FROM idem_namespaces WHERE name = 'nsp_open');
DELETE FROM idempotency.claims WHERE ns = (SELECT id FROM idem_namespaces WHERE name = 'nsp_pay');
INSERT INTO idempotency.claims (claimed_at, ns, key)
    VALUES (now(), (SELECT id FROM idem_namespaces WHERE name = 'nsp_pay'), '\x6231');
\echo :LAST_ERROR_SQLSTATE
-- nor with an id no namespace has yet: a restricted namespace may get it
INSERT INTO idempotency.claims (claimed_at, ns, key)
    VALUES (now(), (SELECT max(id) + 1 FROM idempotency.namespaces), '\x6232');
\echo :LAST_ERROR_SQLSTATE
-- and row_security = off cannot lift them
SET row_security = off;
SELECT count(*) FROM idempotency.claims;
\echo :LAST_ERROR_SQLSTATE
RESET row_security;
-- bob may not grant himself, nor edit the grants by hand
INSERT INTO idempotency.namespace_grants (namespace, grantee, privilege)
    VALUES ('nsp_pay', 'regress_nsp_bob', 'claim');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- a generation's table, named directly by a role that may read every
-- table (pg_read_all_data), has the same policies
CREATE ROLE regress_nsp_reader IN ROLE pg_read_all_data;
SET ROLE regress_nsp_reader;
SELECT count(*) AS reader_sees_in_pay_generation
  FROM idempotency.claims c
 WHERE c.tableoid <> 'idempotency.claims'::regclass
   AND c.ns = (SELECT id FROM idem_namespaces WHERE name = 'nsp_pay');
RESET ROLE;
SELECT count(*) > 0 AS owner_sees_in_pay_generation
  FROM idempotency.claims c
 WHERE c.tableoid <> 'idempotency.claims'::regclass
   AND c.ns = (SELECT id FROM idem_namespaces WHERE name = 'nsp_pay');
SET ROLE regress_nsp_reader;
DO $$
DECLARE
    rel regclass;
    n bigint;
    total bigint := 0;
BEGIN
    FOR rel IN SELECT i.inhrelid::regclass FROM pg_inherits i
                WHERE i.inhparent = 'idempotency.claims'::regclass LOOP
        EXECUTE format('SELECT count(*) FROM %s c WHERE c.ns = (SELECT id FROM idem_namespaces WHERE name = %L)',
                       rel, 'nsp_pay') INTO n;
        total := total + n;
    END LOOP;
    RAISE WARNING 'restricted claims the reader sees in generation tables: %', total;
END
$$;
RESET ROLE;
SELECT count(*) AS generations_without_the_policies
  FROM pg_inherits i
 WHERE i.inhparent = 'idempotency.claims'::regclass
   AND (NOT (SELECT relrowsecurity FROM pg_class WHERE oid = i.inhrelid)
        OR (SELECT count(*) FROM pg_policy p WHERE p.polrelid = i.inhrelid
             AND p.polname LIKE 'claims_namespace_%') <> 4);

-- NOINHERIT: membership without inheritance does not count, SET ROLE does
SET ROLE regress_nsp_noinherit;
SELECT idem_claim('n-1', 'nsp_pay');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- alice's direct statements in nsp_pay follow her grants: she sees the
-- claims (check) and may insert (claim), but deletes nothing (no release)
SET ROLE regress_nsp_alice;
SELECT count(*) AS alice_sees_in_pay FROM idempotency.claims
 WHERE ns = (SELECT id FROM idem_namespaces WHERE name = 'nsp_pay');
DELETE FROM idempotency.claims WHERE ns = (SELECT id FROM idem_namespaces WHERE name = 'nsp_pay');
RESET ROLE;

-- the claim functions accept the extension's own policies only: with
-- another one, or without the one a function's statement would need,
-- they refuse (as for any row-level security they cannot apply)
ALTER POLICY claims_namespace_release ON idempotency.claims USING (true);
SET ROLE regress_nsp_bob;
SELECT idem_claim('b-rls', 'nsp_open');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
ALTER POLICY claims_namespace_release ON idempotency.claims
    USING (idempotency.idem_namespace_allows(ns, 'release'));
SET ROLE regress_nsp_bob;
SELECT idem_claim('b-rls', 'nsp_open') AS own_policies_again;
RESET ROLE;
DROP POLICY claims_namespace_release ON idempotency.claims;
SET ROLE regress_nsp_bob;
SELECT idem_claim('b-rls-2', 'nsp_open') AS claims_need_no_delete_policy;
SELECT idem_release('b-rls-2', 'nsp_open');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
CREATE POLICY claims_namespace_release ON idempotency.claims FOR DELETE
    USING (idempotency.idem_namespace_allows(ns, 'release'));

-- the trigger form
CREATE TABLE nsp_inbox (event_id text PRIMARY KEY, body text);
CREATE TRIGGER nsp_inbox_claim BEFORE INSERT ON nsp_inbox
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('event_id', 'nsp_pay');
GRANT INSERT, SELECT ON nsp_inbox TO regress_nsp_alice, regress_nsp_bob;
SET ROLE regress_nsp_alice;
INSERT INTO nsp_inbox VALUES ('t-1', 'x'), ('t-1', 'y') ON CONFLICT DO NOTHING;
SELECT count(*) AS alice_rows FROM nsp_inbox;
RESET ROLE;
SET ROLE regress_nsp_bob;
INSERT INTO nsp_inbox VALUES ('t-2', 'x');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- a grant takes effect at the next statement, in the same transaction
BEGIN;
SET LOCAL ROLE regress_nsp_bob;
SELECT idem_claimed('a-1', 'nsp_pay');
ROLLBACK;
BEGIN;
SELECT idem_namespace_grant('nsp_pay', 'regress_nsp_bob', 'check');
SET LOCAL ROLE regress_nsp_bob;
SELECT idem_claimed('a-1', 'nsp_pay') AS bob_checks_after_grant;
RESET ROLE;
-- and a rollback takes it back
ROLLBACK;
SET ROLE regress_nsp_bob;
SELECT idem_claimed('a-1', 'nsp_pay');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- a grant restricts a namespace before its first claim, without creating it
SELECT idem_namespace_grant('nsp_fresh', 'regress_nsp_alice', 'claim') AS fresh;
SELECT count(*) AS fresh_ns_rows FROM idempotency.namespaces WHERE name = 'nsp_fresh';
SET ROLE regress_nsp_bob;
SELECT idem_claim('f-1', 'nsp_fresh');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT count(*) AS still_no_ns_row FROM idempotency.namespaces WHERE name = 'nsp_fresh';
SET ROLE regress_nsp_alice;
SELECT idem_claim('f-1', 'nsp_fresh') AS alice_fresh;
RESET ROLE;

-- superusers are never refused
SELECT idem_claimed('a-1', 'nsp_pay') AS superuser_check, idem_release('a-2', 'nsp_pay') AS superuser_release;

-- a security definer function acts with its owner's privileges
CREATE FUNCTION nsp_claim_as_alice(id text) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public
    AS $$SELECT idem_claim(id, 'nsp_pay')$$;
ALTER FUNCTION nsp_claim_as_alice(text) OWNER TO regress_nsp_alice;
GRANT EXECUTE ON FUNCTION nsp_claim_as_alice(text) TO regress_nsp_bob;
SET ROLE regress_nsp_bob;
SELECT nsp_claim_as_alice('d-1') AS definer_claim;
RESET ROLE;

-- revoking the team's claim: alice may no longer claim, and the namespace
-- stays restricted while it has any grant
SELECT idem_namespace_revoke('nsp_pay', 'regress_nsp_team', 'claim') AS revoked;
SELECT idem_namespace_revoke('nsp_pay', 'regress_nsp_team', 'claim') AS revoked_again;
SET ROLE regress_nsp_alice;
SELECT idem_claim('a-9', 'nsp_pay');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claimed('a-1', 'nsp_pay') AS alice_still_checks;
RESET ROLE;
-- the last grant gone, the namespace is open again
SELECT idem_namespace_revoke('nsp_pay', 'regress_nsp_alice', 'check') AS last_revoked;
SET ROLE regress_nsp_bob;
SELECT idem_claim('b-9', 'nsp_pay') AS bob_claims_open_again;
RESET ROLE;

-- a change by hand reaches the cache too
INSERT INTO idempotency.namespace_grants (namespace, grantee, privilege)
    VALUES ('nsp_pay', 'regress_nsp_alice', 'claim');
SET ROLE regress_nsp_bob;
SELECT idem_claim('b-10', 'nsp_pay');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
TRUNCATE idempotency.namespace_grants;
SET ROLE regress_nsp_bob;
SELECT idem_claim('b-10', 'nsp_pay') AS open_after_truncate;
RESET ROLE;

-- bad arguments
SELECT idem_namespace_grant(NULL, 'regress_nsp_bob', 'claim');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_grant('nsp_pay', NULL, 'claim');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_grant('nsp_pay', 'regress_nsp_bob', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_grant('nsp_pay', 'regress_nsp_bob', 'CLAIM');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_grant('', 'regress_nsp_bob', 'claim');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_grant(repeat('n', 129), 'regress_nsp_bob', 'claim');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_grant(E'a\x1fb', 'regress_nsp_bob', 'claim');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_grant('nsp_pay', 'regress_nsp_nosuch', 'claim');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_grant('nsp_pay', 0, 'claim');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_revoke('nsp_pay', 'regress_nsp_bob', 'bogus');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO idempotency.namespace_grants (namespace, grantee, privilege, granted_at)
    VALUES ('nsp_pay', 'regress_nsp_bob', 'admin', '2026-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO idempotency.namespace_grants (namespace, grantee, privilege, granted_at)
    VALUES (E'a\x1fb', 'regress_nsp_bob', 'check', '2026-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE

-- DROP ROLE refuses a grantee; DROP OWNED BY revokes its namespace privileges
SELECT idem_namespace_grant('nsp_pay', 'regress_nsp_bob', 'check');
REVOKE ALL ON idempotency.claims FROM regress_nsp_bob;
REVOKE ALL ON nsp_inbox FROM regress_nsp_bob;
DROP ROLE regress_nsp_bob;
\echo :LAST_ERROR_SQLSTATE
DROP ROLE IF EXISTS regress_nsp_bob;
\echo :LAST_ERROR_SQLSTATE
DROP OWNED BY regress_nsp_bob;
SELECT count(*) AS bob_grants FROM idempotency.namespace_grants
 WHERE grantee = 'regress_nsp_bob'::regrole;
DROP ROLE regress_nsp_bob;

-- a transaction that opened a generation cannot be prepared (and its
-- rollback leaves the generations as they were)
BEGIN;
SET LOCAL idempotency.generation_min_ttl = '300d';
SELECT idem_generation_switch('nsp_pay') AS opened;
PREPARE TRANSACTION 'nsp_switch';
\echo :LAST_ERROR_SQLSTATE

-- idem_claims_policies takes the claims or a generation, and refuses
-- anything else before any DDL
SELECT idempotency.idem_claims_policies(0);
\echo :LAST_ERROR_SQLSTATE
SELECT idempotency.idem_claims_policies(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idempotency.idem_claims_policies('nsp_inbox');
\echo :LAST_ERROR_SQLSTATE
SELECT idempotency.idem_claims_policies('idempotency.namespaces');
\echo :LAST_ERROR_SQLSTATE
-- a table of the claims' shape is not one of them either
CREATE TABLE nsp_lookalike (LIKE idempotency.claims);
SELECT idempotency.idem_claims_policies('nsp_lookalike');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS no_policies_made FROM pg_policy
 WHERE polrelid IN ('nsp_inbox'::regclass, 'idempotency.namespaces'::regclass, 'nsp_lookalike'::regclass);
SELECT relrowsecurity AS lookalike_rls FROM pg_class WHERE oid = 'nsp_lookalike'::regclass;
DROP TABLE nsp_lookalike;
-- on the claims themselves it gets as far as the policies already there
SELECT idempotency.idem_claims_policies('idempotency.claims');
\echo :LAST_ERROR_SQLSTATE
DROP TABLE nsp_inbox;
DROP FUNCTION nsp_claim_as_alice(text);
SELECT idem_namespace_revoke(g.namespace, g.grantee, g.privilege)
  FROM idempotency.namespace_grants g;
REVOKE ALL ON idempotency.claims FROM regress_nsp_alice, regress_nsp_noinherit;
REVOKE ALL ON idempotency.namespace_grants FROM regress_nsp_admin;
REVOKE ALL ON FUNCTION idem_namespace_grant(text, regrole, text) FROM regress_nsp_admin;
DROP ROLE regress_nsp_admin, regress_nsp_alice, regress_nsp_noinherit, regress_nsp_team,
    regress_nsp_reader;
