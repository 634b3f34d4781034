-- pgTAP: privileges set by the install script.  Claims are governed by
-- table privileges on idempotency.claims; admin functions are revoked from
-- PUBLIC; no SECURITY DEFINER function leaves search_path open.
\set ON_ERROR_STOP 1
\pset format unaligned
\pset tuples_only true
\pset pager off
BEGIN;
SELECT plan(36);

SELECT table_privs_are('idempotency', 'claims', 'public', ARRAY[]::text[],
                       'PUBLIC has no privileges on claims until granted');
SELECT table_privs_are('idempotency', 'namespaces', 'public', ARRAY['SELECT'],
                       'PUBLIC may read namespaces');
SELECT schema_privs_are('idempotency', 'public', ARRAY['USAGE'],
                        'PUBLIC may use the idempotency schema');

SELECT function_privs_are('public', 'idem_namespace_define', ARRAY['text', 'interval'],
                          'public', ARRAY[]::text[], 'defining namespaces is for administrators');
SELECT function_privs_are('public', 'idem_stats_reset', ARRAY[]::text[],
                          'public', ARRAY[]::text[], 'resetting statistics is for administrators');
SELECT function_privs_are('idempotency', 'idem_table_changed', ARRAY[]::text[],
                          'public', ARRAY[]::text[], 'the cache trigger is not callable by PUBLIC');
SELECT function_privs_are('public', 'idem_claim', ARRAY['text', 'text', 'text'],
                          'public', ARRAY['EXECUTE'], 'idem_claim is executable; the table privilege decides');
SELECT function_privs_are('public', 'idem_try_claim', ARRAY['text', 'text', 'text'],
                          'public', ARRAY['EXECUTE']);
SELECT function_privs_are('public', 'idem_claim_many', ARRAY['text[]', 'text'],
                          'public', ARRAY['EXECUTE']);
SELECT function_privs_are('public', 'idem_claimed', ARRAY['text', 'text'],
                          'public', ARRAY['EXECUTE']);
SELECT function_privs_are('public', 'idem_release', ARRAY['text', 'text'],
                          'public', ARRAY['EXECUTE']);
SELECT table_privs_are('idempotency', 'watermarks', 'public', ARRAY[]::text[],
                       'PUBLIC has no privileges on watermarks until granted');
SELECT function_privs_are('public', 'idem_advance', ARRAY['text', 'integer', 'bigint', 'bigint'],
                          'public', ARRAY['EXECUTE'], 'idem_advance is executable; the table privileges decide');
SELECT function_privs_are('public', 'idem_watermark', ARRAY['text', 'integer'],
                          'public', ARRAY['EXECUTE']);
SELECT function_privs_are('public', 'idem_stream_drop', ARRAY['text'],
                          'public', ARRAY[]::text[], 'dropping a stream is for administrators');
SELECT table_privs_are('idempotency', 'namespace_grants', 'public', ARRAY[]::text[],
                       'PUBLIC has no privileges on the namespace grants');
SELECT function_privs_are('public', 'idem_namespace_grant', ARRAY['text', 'regrole', 'text'],
                          'public', ARRAY[]::text[], 'granting namespace privileges is for administrators');
SELECT function_privs_are('public', 'idem_namespace_revoke', ARRAY['text', 'regrole', 'text'],
                          'public', ARRAY[]::text[], 'revoking them too');
SELECT function_privs_are('idempotency', 'idem_claims_policies', ARRAY['regclass'],
                          'public', ARRAY[]::text[], 'creating the claims policies is for administrators');
SELECT is((SELECT count(*)::int FROM pg_policy
            WHERE polrelid = 'idempotency.claims'::regclass AND polname LIKE 'claims_namespace_%'),
          4, 'the claims carry the four namespace policies');
SELECT function_privs_are('idempotency', 'idem_namespace_visible', ARRAY['text'],
                          'public', ARRAY['EXECUTE'], 'the idem_claims filter is executable by everyone');
SELECT is((SELECT prosecdef FROM pg_proc
            WHERE oid = 'idem_namespace_grant(text,regrole,text)'::regprocedure),
          false, 'idem_namespace_grant runs as the caller: the table privileges decide');
SELECT function_privs_are('public', 'idem_claim', ARRAY['uuid', 'text', 'text'],
                          'public', ARRAY['EXECUTE'], 'the uuid forms too');
SELECT function_privs_are('public', 'idem_try_claim', ARRAY['uuid', 'text', 'text'],
                          'public', ARRAY['EXECUTE']);
SELECT function_privs_are('public', 'idem_claim_many', ARRAY['uuid[]', 'text'],
                          'public', ARRAY['EXECUTE']);
SELECT function_privs_are('public', 'idem_claimed', ARRAY['uuid', 'text'],
                          'public', ARRAY['EXECUTE']);
SELECT function_privs_are('public', 'idem_release', ARRAY['uuid', 'text'],
                          'public', ARRAY['EXECUTE']);

SELECT is((SELECT count(*)::int FROM pg_proc p
             JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
             JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
            WHERE p.prosecdef
              AND NOT coalesce(array_to_string(p.proconfig, ',') ~ 'search_path=', false)),
          0, 'every SECURITY DEFINER function pins search_path');

-- behaviour behind the ACLs, for a fresh role
CREATE ROLE tap_idem_app;
CREATE ROLE tap_idem_stranger;
GRANT INSERT, SELECT ON idempotency.claims TO tap_idem_app;
SET LOCAL ROLE tap_idem_app;
SELECT ok(idem_claim('tap-1', 'tap_privs'), 'a granted role claims');
SELECT throws_ok($$SELECT idem_release('tap-1', 'tap_privs')$$, '42501',
                 NULL, 'release needs DELETE');
RESET ROLE;
SET LOCAL ROLE tap_idem_stranger;
SELECT throws_ok($$SELECT idem_claim('tap-2', 'tap_privs')$$, '42501',
                 'permission denied for table idempotency.claims', 'an ungranted role cannot claim');
SELECT throws_ok($$SELECT idem_namespace_define('tap_privs', '1 day')$$, '42501',
                 NULL, 'an ungranted role cannot define namespaces');
SELECT lives_ok($$SELECT * FROM idem_stats$$, 'anyone may read idem_stats');
RESET ROLE;

-- a restricted namespace: the table privileges are not enough
CREATE ROLE tap_idem_tenant;
GRANT INSERT, SELECT ON idempotency.claims TO tap_idem_tenant;
SELECT idem_namespace_grant('tap_tenant', 'tap_idem_tenant', 'claim');
SET LOCAL ROLE tap_idem_app;
SELECT throws_ok($$SELECT idem_claim('tap-3', 'tap_tenant')$$, '42501',
                 'permission denied for namespace "tap_tenant"',
                 'a role with INSERT on the claims cannot claim in a restricted namespace');
RESET ROLE;
SET LOCAL ROLE tap_idem_tenant;
SELECT ok(idem_claim('tap-3', 'tap_tenant'), 'its grantee claims');
SELECT throws_ok($$SELECT idem_claimed('tap-3', 'tap_tenant')$$, '42501',
                 'permission denied for namespace "tap_tenant"',
                 'claim does not imply check');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
