-- pgTAP: the state machine catalog objects and their privileges.
\set ON_ERROR_STOP 1
\pset format unaligned
\pset tuples_only true
\pset pager off
BEGIN;
SELECT plan(27);

SELECT has_table('idempotency', 'machines', 'machines table');
SELECT has_table('idempotency', 'machine_bindings', 'machine bindings table');
SELECT columns_are('idempotency', 'machines', ARRAY['name', 'transitions', 'defined_at']);
SELECT columns_are('idempotency', 'machine_bindings',
                   ARRAY['rel', 'status_column', 'machine', 'version_column', 'check_inserts', 'bound_at']);
SELECT col_type_is('idempotency', 'machines', 'transitions', 'jsonb', 'transitions are jsonb');
SELECT col_type_is('idempotency', 'machine_bindings', 'rel', 'regclass',
                   'bindings name tables by regclass, which dumps and restores by name');
SELECT col_is_pk('idempotency', 'machines', 'name', 'machines are keyed by name');
SELECT col_is_pk('idempotency', 'machine_bindings', 'rel', 'one binding per table');
SELECT has_trigger('idempotency', 'machines', 'machines_changed', 'machine changes invalidate caches');
SELECT has_trigger('idempotency', 'machine_bindings', 'machine_bindings_changed',
                   'binding changes invalidate caches');
SELECT is((SELECT count(*)::int FROM pg_event_trigger WHERE evtname = 'idem_forget_dropped_tables'),
          1, 'an event trigger forgets the bindings of dropped tables');

SELECT has_function('public', 'idem_machine_define', ARRAY['text', 'jsonb']);
SELECT has_function('public', 'idem_machine_drop', ARRAY['text']);
SELECT has_function('public', 'idem_machine_bind', ARRAY['regclass', 'name', 'text', 'name', 'boolean']);
SELECT has_function('public', 'idem_machine_unbind', ARRAY['regclass']);
SELECT has_function('public', 'idem_cas_status', ARRAY['text', 'text', 'text']);
SELECT has_function('public', 'idem_cas_row', ARRAY['regclass', 'anyelement', 'text', 'bigint']);
SELECT has_function('public', 'idem_state_guard', ARRAY[]::text[]);
SELECT function_returns('public', 'idem_cas_status', ARRAY['text', 'text', 'text'], 'text');
SELECT volatility_is('public', 'idem_cas_status', ARRAY['text', 'text', 'text'], 'stable');
SELECT volatility_is('public', 'idem_cas_row', ARRAY['regclass', 'anyelement', 'text', 'bigint'], 'volatile');

SELECT function_privs_are('public', 'idem_machine_define', ARRAY['text', 'jsonb'],
                          'public', ARRAY[]::text[], 'defining machines is for administrators');
SELECT function_privs_are('public', 'idem_machine_drop', ARRAY['text'],
                          'public', ARRAY[]::text[], 'dropping machines is for administrators');
SELECT function_privs_are('idempotency', 'idem_forget_dropped_tables', ARRAY[]::text[],
                          'public', ARRAY[]::text[], 'the event trigger function is not callable by PUBLIC');
SELECT is((SELECT prosecdef AND array_to_string(proconfig, ',') LIKE 'search_path=%'
             FROM pg_proc WHERE oid = 'idempotency.idem_forget_dropped_tables'::regproc),
          true, 'the SECURITY DEFINER event trigger function pins search_path');
SELECT table_privs_are('idempotency', 'machines', 'public', ARRAY['SELECT'],
                       'PUBLIC may read machines');
SELECT table_privs_are('idempotency', 'machine_bindings', 'public', ARRAY['SELECT'],
                       'PUBLIC may read bindings');

SELECT * FROM finish();
ROLLBACK;
