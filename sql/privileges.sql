-- who may claim, check, release and define namespaces
SET client_min_messages = warning;

CREATE ROLE regress_idem_app LOGIN;
CREATE ROLE regress_idem_reader LOGIN;
CREATE ROLE regress_idem_nobody LOGIN;
GRANT INSERT, SELECT, DELETE ON idempotency.claims TO regress_idem_app;
GRANT SELECT ON idempotency.claims TO regress_idem_reader;
SELECT idem_namespace_define('priv', '1 day');

-- nobody: no table privileges, so no claims, checks or releases
SET ROLE regress_idem_nobody;
SELECT idem_claim('p-1', 'priv');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_try_claim('p-1', 'priv');
SELECT * FROM idem_claim_many(ARRAY['p-1'], 'priv');
SELECT idem_claimed('p-1', 'priv');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_release('p-1', 'priv');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM idem_claims;
\echo :LAST_ERROR_SQLSTATE
-- namespace creation on first use is part of claiming, so it is denied too
SELECT idem_claim('p-1', 'priv_new_ns');
RESET ROLE;
SELECT count(*) AS priv_new_ns FROM idempotency.namespaces WHERE name = 'priv_new_ns';

-- the app role claims, checks and releases; first use creates namespaces
SET ROLE regress_idem_app;
SELECT idem_claim('p-1', 'priv') AS claim, idem_claim('p-1', 'priv') AS dup;
SELECT idem_claimed('p-1', 'priv') AS claimed;
SELECT idem_claim('p-2', 'priv_app_ns') AS claim_new_ns;
SELECT idem_release('p-2', 'priv_app_ns') AS release;
SELECT event_id FROM idem_claims WHERE namespace = 'priv' ORDER BY 1;
-- but it may not define namespaces, reset statistics or edit the tables
SELECT idem_namespace_define('priv', '1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_stats_reset();
\echo :LAST_ERROR_SQLSTATE
UPDATE idempotency.namespaces SET ttl = '1 hour';
\echo :LAST_ERROR_SQLSTATE
UPDATE idempotency.claims SET claimed_at = now();
\echo :LAST_ERROR_SQLSTATE
-- everyone may read namespaces and statistics
SELECT name, ttl FROM idempotency.namespaces WHERE name = 'priv';
SELECT count(*) >= 0 AS stats_readable FROM idem_stats;
RESET ROLE;

-- the reader only checks
SET ROLE regress_idem_reader;
SELECT idem_claimed('p-1', 'priv') AS reader_check;
SELECT idem_claim('p-3', 'priv');
SELECT idem_release('p-1', 'priv');
RESET ROLE;

-- a revoked privilege takes effect at once in a session that used it
SET ROLE regress_idem_app;
SELECT idem_claim('p-4', 'priv') AS before_revoke;
RESET ROLE;
REVOKE INSERT ON idempotency.claims FROM regress_idem_app;
SET ROLE regress_idem_app;
SELECT idem_claim('p-5', 'priv');
RESET ROLE;
-- ... and so does one gained through role membership
CREATE ROLE regress_idem_claimers NOLOGIN;
GRANT INSERT ON idempotency.claims TO regress_idem_claimers;
GRANT regress_idem_claimers TO regress_idem_app;
SET ROLE regress_idem_app;
SELECT idem_claim('p-5', 'priv') AS via_membership;
RESET ROLE;
REVOKE regress_idem_claimers FROM regress_idem_app;
SET ROLE regress_idem_app;
SELECT idem_claim('p-6', 'priv');
RESET ROLE;

-- the inbox trigger claims with the inserting user's rights
CREATE TABLE priv_inbox (id text);
CREATE TRIGGER priv_inbox_dedup BEFORE INSERT ON priv_inbox
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('id', 'priv');
GRANT INSERT, SELECT ON priv_inbox TO regress_idem_nobody;
SET ROLE regress_idem_nobody;
INSERT INTO priv_inbox VALUES ('p-7');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- requests: INSERT and UPDATE on idempotency.requests to begin, UPDATE to
-- complete or fail permanently, DELETE to fail retryably
SET ROLE regress_idem_nobody;
SELECT status FROM idem_begin('q-1', 'priv');
\echo :LAST_ERROR_SQLSTATE
SELECT status FROM idem_begin('q-1', 'priv_req_ns');
RESET ROLE;
SELECT count(*) AS priv_req_ns FROM idempotency.namespaces WHERE name = 'priv_req_ns';
GRANT INSERT, UPDATE ON idempotency.requests TO regress_idem_app;
SET ROLE regress_idem_app;
SELECT owner AS q1 FROM idem_begin('q-1', 'priv') \gset
SELECT owner AS q2 FROM idem_begin('q-2', 'priv') \gset
SELECT idem_complete('q-1', :'q1', '{"ok": 1}', 'priv');
SELECT status, result FROM idem_begin('q-1', 'priv');
SELECT idem_fail('q-2', :'q2', '{"e": 1}', true, 'priv');
\echo :LAST_ERROR_SQLSTATE
-- reading stored records, through the view too, needs SELECT
SELECT key, status, result FROM idem_requests WHERE namespace = 'priv' ORDER BY key;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT DELETE ON idempotency.requests TO regress_idem_app;
GRANT SELECT ON idempotency.requests TO regress_idem_reader;
SET ROLE regress_idem_reader;
SELECT key, status, result FROM idem_requests WHERE namespace = 'priv' ORDER BY key;
SELECT status FROM idem_begin('q-3', 'priv');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_idem_app;
SELECT idem_fail('q-2', :'q2', '{"e": 1}', true, 'priv');
RESET ROLE;
-- another user cannot finish an attempt without its owner uuid, and
-- without UPDATE cannot even try
SET ROLE regress_idem_nobody;
SELECT idem_complete('q-2', :'q2', '{}', 'priv');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- tokens: INSERT on idempotency.tokens to issue, DELETE to consume
SET ROLE regress_idem_nobody;
SELECT idem_token_issue('priv');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT INSERT ON idempotency.tokens TO regress_idem_app;
SET ROLE regress_idem_app;
SELECT idem_token_issue('priv') AS tok \gset
SELECT idem_token_consume(:'tok', 'priv');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT DELETE ON idempotency.tokens TO regress_idem_app;
SET ROLE regress_idem_app;
SELECT idem_token_consume(:'tok', 'priv') AS consumed;
RESET ROLE;

-- keyed locks are open to everyone, like pg_advisory_xact_lock
SET ROLE regress_idem_nobody;
BEGIN;
SELECT idem_try_lock('priv-lock') AS nobody_locks;
ROLLBACK;
RESET ROLE;

-- the function ACLs the install script sets
SELECT p.oid::regprocedure::text AS function, has_function_privilege('regress_idem_nobody', p.oid, 'EXECUTE') AS public_execute
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
 ORDER BY p.oid::regprocedure::text COLLATE "C";
-- no SECURITY DEFINER function without a pinned search_path
SELECT count(*) AS unsafe_secdef
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
 WHERE p.prosecdef AND NOT coalesce(array_to_string(p.proconfig, ',') LIKE '%search_path=%', false);

-- internal queries run as the table owner with search_path pinned, so a
-- caller's operator cannot be slipped into them
CREATE SCHEMA regress_evil;
CREATE FUNCTION regress_evil.texteq_hijack(text, text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RAISE WARNING 'hijacked by %', current_user;
    RETURN $1 OPERATOR(pg_catalog.=) $2;
END $$;
CREATE OPERATOR regress_evil.= (LEFTARG = text, RIGHTARG = text,
                                FUNCTION = regress_evil.texteq_hijack);
SET search_path = regress_evil, pg_catalog, public;
SELECT 'a'::text = 'a'::text AS operator_is_hijackable;
SELECT idem_claim('h-1', 'priv_hijack') AS claim_in_new_ns;
SELECT idem_namespace_define('priv_hijack', '1 day');
SELECT status FROM idem_begin('h-2', 'priv_hijack') AS begin_hijack;
SELECT idem_token_consume(idem_token_issue('priv_hijack'), 'priv_hijack') AS token_hijack;
RESET search_path;
DROP SCHEMA regress_evil CASCADE;

DROP TABLE priv_inbox;
REVOKE ALL ON idempotency.claims FROM regress_idem_app, regress_idem_reader, regress_idem_claimers;
REVOKE ALL ON idempotency.requests, idempotency.tokens FROM regress_idem_app, regress_idem_reader;
DROP ROLE regress_idem_app, regress_idem_reader, regress_idem_nobody, regress_idem_claimers;
