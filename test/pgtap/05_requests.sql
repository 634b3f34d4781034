-- pgTAP: the objects of API-style idempotency (requests, tokens, keyed
-- locks): tables, constraints, functions, privileges and pg_dump marks.
\set ON_ERROR_STOP 1
\pset format unaligned
\pset tuples_only true
\pset pager off
BEGIN;
SELECT plan(37);

-- requests: one record per (key, namespace), as claims
SELECT has_table('idempotency', 'requests', 'requests table');
SELECT columns_are('idempotency', 'requests',
                   ARRAY['key', 'ns', 'status', 'owner', 'attempts', 'fingerprint', 'result',
                         'lease_expires_at', 'created_at', 'completed_at', 'response_status',
                         'response_headers', 'response_body', 'heartbeat_at']);
SELECT col_type_is('idempotency', 'requests', 'response_body', 'bytea',
                   'a stored HTTP body is bytes, replayed as they were');
SELECT col_is_pk('idempotency', 'requests', ARRAY['key', 'ns'], 'requests are unique on (key, ns)');
SELECT col_type_is('idempotency', 'requests', 'owner', 'uuid', 'owners are uuids');
SELECT col_type_is('idempotency', 'requests', 'result', 'jsonb', 'results are jsonb');
SELECT has_check('idempotency', 'requests', 'the stored status is checked');
SELECT throws_ok($$INSERT INTO idempotency.requests (key, ns, status, attempts, created_at)
                  VALUES ('\x00', 1, 'started', 1, now())$$,
                 '23514', NULL, '''started'' is an answer of idem_begin, never a stored status');
SELECT indexes_are('idempotency', 'requests', ARRAY['requests_pkey'], 'a single index');

-- tokens
SELECT has_table('idempotency', 'tokens', 'tokens table');
SELECT col_is_pk('idempotency', 'tokens', 'token', 'tokens are unique');
SELECT columns_are('idempotency', 'tokens', ARRAY['token', 'scope', 'expires_at', 'issued_at']);

-- both are dumped: a restore must not forget stored results or live tokens
SELECT ok((SELECT 'idempotency.requests'::regclass::oid = ANY (extconfig)
             FROM pg_extension WHERE extname = 'idempotency'), 'requests are dumped');
SELECT ok((SELECT 'idempotency.tokens'::regclass::oid = ANY (extconfig)
             FROM pg_extension WHERE extname = 'idempotency'), 'tokens are dumped');

-- functions and their signatures
SELECT has_function('public', 'idem_begin', ARRAY['text', 'text', 'text', 'interval', 'interval']);
SELECT has_function('public', 'idem_complete', ARRAY['text', 'uuid', 'jsonb', 'text', 'integer', 'jsonb', 'bytea']);
SELECT has_function('public', 'idem_fail', ARRAY['text', 'uuid', 'jsonb', 'boolean', 'text', 'integer', 'jsonb', 'bytea']);
SELECT has_function('public', 'idem_request_forget', ARRAY['text', 'text']);
SELECT has_function('public', 'idem_grant_app', ARRAY['regrole']);
SELECT has_function('public', 'idem_revoke_app', ARRAY['regrole']);
SELECT is((SELECT pronargdefaults::int FROM pg_proc
            WHERE oid = 'idem_fail(text,uuid,jsonb,boolean,text,integer,jsonb,bytea)'::regprocedure),
          6, 'idem_fail needs only key and owner');
SELECT has_function('public', 'idem_token_issue', ARRAY['text', 'interval']);
SELECT has_function('public', 'idem_token_consume', ARRAY['uuid', 'text']);
SELECT has_function('public', 'idem_lock', ARRAY['text']);
SELECT has_function('public', 'idem_try_lock', ARRAY['text']);
SELECT function_returns('public', 'idem_token_issue', ARRAY['text', 'interval'], 'uuid');
SELECT function_returns('public', 'idem_token_consume', ARRAY['uuid', 'text'], 'boolean');
SELECT function_returns('public', 'idem_try_lock', ARRAY['text'], 'boolean');
SELECT is((SELECT string_agg(n || ' ' || format_type(t, NULL), ', ' ORDER BY o)
             FROM pg_proc p,
                  unnest(p.proallargtypes, p.proargnames, p.proargmodes) WITH ORDINALITY AS a(t, n, m, o)
            WHERE p.oid = 'idem_begin(text,text,text,interval,interval)'::regprocedure AND m = 'o'),
          'status text, owner uuid, result jsonb, attempts integer, lease_expires_at timestamp with time zone, '
          'response_status integer, response_headers jsonb, response_body bytea, retry_after interval',
          'idem_begin returns status, owner, result, attempts, lease_expires_at, the stored response and a Retry-After hint');
SELECT is((SELECT pronargdefaults::int FROM pg_proc
            WHERE oid = 'idem_begin(text,text,text,interval,interval)'::regprocedure),
          4, 'idem_begin defaults namespace, fingerprint, lease and wait');
SELECT is((SELECT array_agg(DISTINCT proparallel) FROM pg_proc
            WHERE proname IN ('idem_begin', 'idem_complete', 'idem_fail', 'idem_token_issue',
                              'idem_token_consume', 'idem_lock', 'idem_try_lock')),
          ARRAY['u']::"char"[], 'all are PARALLEL UNSAFE');
SELECT is((SELECT count(*)::int FROM pg_proc
            WHERE proname IN ('idem_begin', 'idem_complete', 'idem_fail', 'idem_token_issue',
                              'idem_token_consume', 'idem_lock', 'idem_try_lock')
              AND (proisstrict OR prosecdef)),
          0, 'none is strict (NULLs get errors) or SECURITY DEFINER');

-- privileges: table rights govern use, checked as the caller
SELECT table_privs_are('idempotency', 'requests', 'public', ARRAY[]::text[],
                       'PUBLIC has no rights on requests until granted');
SELECT table_privs_are('idempotency', 'tokens', 'public', ARRAY[]::text[],
                       'PUBLIC has no rights on tokens until granted');
SELECT has_view('public', 'idem_requests', 'the requests view');
SELECT columns_are('public', 'idem_requests',
                   ARRAY['namespace', 'key', 'status', 'attempts', 'fingerprint', 'result',
                         'lease_expires_at', 'created_at', 'completed_at', 'expires_at', 'expired',
                         'response_status', 'response_headers', 'response_body', 'heartbeat_at']);
SELECT hasnt_column('public', 'idem_requests', 'owner', 'the view never shows owners');

SELECT * FROM finish();
ROLLBACK;
