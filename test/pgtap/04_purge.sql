-- pgTAP: the purge's catalog objects, GUCs and privileges.
\set ON_ERROR_STOP 1
\pset format unaligned
\pset tuples_only true
\pset pager off
BEGIN;
SELECT plan(21);

SELECT has_table('idempotency', 'purge_policies', 'purge policies table');
SELECT has_table('idempotency', 'purge_runs', 'purge history table');
SELECT col_is_pk('idempotency', 'purge_policies', 'rel', 'one policy per table');
SELECT col_type_is('idempotency', 'purge_policies', 'rel', 'regclass', 'policies name tables by regclass');
SELECT has_view('public', 'idem_purge_runs', 'the purge history view');
SELECT columns_are('public', 'idem_purge_runs',
                   ARRAY['database', 'table', 'started_at', 'duration', 'rows_deleted',
                         'batches', 'timeouts', 'last_error', 'trigger', 'application_name',
                         'resume_after']);
SELECT is((SELECT 'idempotency.purge_runs'::regclass::oid = ANY (extconfig)
             FROM pg_extension WHERE extname = 'idempotency'),
          false, 'purge history is operational data, not dumped');
SELECT is((SELECT reloptions FROM pg_class WHERE oid = 'idempotency.claims'::regclass),
          ARRAY['vacuum_truncate=false'], 'VACUUM never truncates the claims table (no ACCESS EXCLUSIVE lock)');

SELECT has_function('public', 'idem_purge', ARRAY['bigint']);
SELECT has_function('public', 'idem_purge_policy_add', ARRAY['regclass', 'name', 'interval']);
SELECT has_function('public', 'idem_purge_policy_remove', ARRAY['regclass']);
SELECT function_returns('public', 'idem_purge', ARRAY['bigint'], 'bigint');
SELECT function_privs_are('public', 'idem_purge', ARRAY['bigint'],
                          'public', ARRAY[]::text[], 'a manual purge is for administrators');
SELECT function_privs_are('public', 'idem_purge_policy_add', ARRAY['regclass', 'name', 'interval'],
                          'public', ARRAY['EXECUTE'], 'table owners add policies; the function checks ownership');

SELECT is((SELECT count(*)::int FROM pg_settings
            WHERE name IN ('idempotency.purge_enabled', 'idempotency.purge_interval',
                           'idempotency.purge_batch_size', 'idempotency.purge_max_runtime',
                           'idempotency.purge_history', 'idempotency.log_purge')),
          6, 'the purge GUCs exist');
SELECT is((SELECT array_agg(DISTINCT context) FROM pg_settings
            WHERE (name LIKE 'idempotency.purge%' OR name = 'idempotency.log_purge')
              AND name <> 'idempotency.purge_enabled'),
          ARRAY['sighup'], 'the purge GUCs reload on SIGHUP');
SELECT is((SELECT context FROM pg_settings WHERE name = 'idempotency.purge_enabled'),
          'superuser', 'purge_enabled reloads too, and can be set per database by a superuser');
SELECT is((SELECT unit FROM pg_settings WHERE name = 'idempotency.purge_interval'), 's',
          'the interval is in seconds');
SELECT is((SELECT unit FROM pg_settings WHERE name = 'idempotency.purge_max_runtime'), 'ms',
          'the round bound is in milliseconds');
SELECT columns_are('public', 'idem_stats',
                   ARRAY['namespace', 'claims', 'duplicates', 'waits', 'fingerprint_mismatches',
                         'takeovers', 'busy', 'releases', 'purged', 'request_begins',
                         'request_replays', 'request_in_flight', 'request_mismatches',
                         'request_takeovers', 'request_failures', 'request_forgets']);
SELECT table_privs_are('idempotency', 'purge_runs', 'public', ARRAY[]::text[],
                       'the purge history is for administrators: it holds other owners'' errors');

SELECT * FROM finish();
ROLLBACK;
