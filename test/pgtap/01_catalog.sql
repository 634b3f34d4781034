-- pgTAP: the extension's catalog objects, schema placement and pg_dump
-- registration.
\set ON_ERROR_STOP 1
\pset format unaligned
\pset tuples_only true
\pset pager off
BEGIN;
SELECT plan(70);

-- the extension and its schemas
SELECT has_extension('idempotency');
SELECT has_schema('idempotency');
SELECT is((SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'idempotency'),
          'public', 'the API lives in the schema CREATE EXTENSION chose');
SELECT is((SELECT extrelocatable FROM pg_extension WHERE extname = 'idempotency'),
          false, 'not relocatable: the C code finds its tables by schema name');

-- internal tables live in the extension's own schema, never in public
SELECT has_table('idempotency', 'claims', 'claims table');
SELECT has_table('idempotency', 'namespaces', 'namespaces table');
SELECT has_sequence('idempotency', 'namespace_id_seq', 'namespace id sequence');
SELECT is((SELECT count(*)::int FROM pg_class c
             JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
             JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
            WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'S', 'i', 'p')),
          0, 'no tables, sequences or indexes of the extension in public');

-- the claims table: small, exact, unique on (key, ns)
SELECT columns_are('idempotency', 'claims', ARRAY['claimed_at', 'ns', 'key', 'fingerprint']);
SELECT col_type_is('idempotency', 'claims', 'claimed_at', 'timestamp with time zone', 'claimed_at is timestamptz');
SELECT col_type_is('idempotency', 'claims', 'ns', 'integer', 'ns is a 4-byte namespace id');
SELECT col_type_is('idempotency', 'claims', 'key', 'bytea', 'key is the compact exact encoding');
SELECT col_type_is('idempotency', 'claims', 'fingerprint', 'bigint', 'fingerprint is a 64-bit hash');
SELECT col_not_null('idempotency', 'claims', 'key', 'key is NOT NULL');
SELECT col_not_null('idempotency', 'claims', 'ns', 'ns is NOT NULL');
SELECT col_is_null('idempotency', 'claims', 'fingerprint', 'fingerprint is optional');
SELECT col_is_pk('idempotency', 'claims', ARRAY['key', 'ns'], 'claims are unique on (key, ns)');
SELECT index_is_unique('idempotency', 'claims', 'claims_pkey', 'claims_pkey is unique');
SELECT index_is_type('idempotency', 'claims', 'claims_pkey', 'btree', 'claims_pkey is a btree');
SELECT indexes_are('idempotency', 'claims', ARRAY['claims_pkey'],
                   'a single index: every extra index would slow every claim');
SELECT is((SELECT indimmediate FROM pg_index WHERE indexrelid = 'idempotency.claims_pkey'::regclass),
          true, 'the unique check is immediate, as speculative insertion needs');

-- namespaces
SELECT columns_are('idempotency', 'namespaces', ARRAY['id', 'name', 'ttl', 'created_at', 'defined_at']);
SELECT indexes_are('idempotency', 'namespaces', ARRAY['namespaces_name_idx', 'namespaces_id_idx'],
                   'namespaces are found by name and by id');
SELECT is((SELECT count(*)::int FROM pg_index WHERE indrelid = 'idempotency.namespaces'::regclass AND indisunique),
          0, 'no unique index on namespaces: a first use adopts an in-flight id instead of waiting on one');
SELECT has_trigger('idempotency', 'namespaces', 'namespaces_changed', 'changes to namespaces invalidate caches');
SELECT has_check('idempotency', 'namespaces', 'namespace names and TTLs are checked');

-- functions
SELECT has_function('public', 'idem_claim', ARRAY['text', 'text', 'text']);
SELECT has_function('public', 'idem_try_claim', ARRAY['text', 'text', 'text']);
SELECT has_function('public', 'idem_claim_many', ARRAY['text[]', 'text']);
SELECT has_function('public', 'idem_claimed', ARRAY['text', 'text']);
SELECT has_function('public', 'idem_release', ARRAY['text', 'text']);
SELECT has_function('public', 'idem_claim', ARRAY['uuid', 'text', 'text']);
SELECT has_function('public', 'idem_try_claim', ARRAY['uuid', 'text', 'text']);
SELECT has_function('public', 'idem_claim_many', ARRAY['uuid[]', 'text']);
SELECT has_function('public', 'idem_claimed', ARRAY['uuid', 'text']);
SELECT has_function('public', 'idem_release', ARRAY['uuid', 'text']);
SELECT has_function('public', 'idem_namespace_define', ARRAY['text', 'interval']);
SELECT has_function('public', 'idem_advance', ARRAY['text', 'integer', 'bigint', 'bigint']);
SELECT has_function('public', 'idem_watermark', ARRAY['text', 'integer']);
SELECT has_function('public', 'idem_stream_drop', ARRAY['text']);
SELECT has_table('idempotency', 'watermarks', 'the watermarks table (1.1)');
SELECT col_is_pk('idempotency', 'watermarks', ARRAY['stream', 'partition'], 'a mark per (stream, partition)');
SELECT has_view('public', 'idem_streams', 'the idem_streams view');
SELECT is((SELECT count(*)::int FROM pg_extension e, unnest(e.extconfig) c
            WHERE e.extname = 'idempotency' AND c = 'idempotency.watermarks'::regclass),
          1, 'pg_dump dumps the watermarks');
SELECT has_function('public', 'idem_namespace_grant', ARRAY['text', 'regrole', 'text']);
SELECT has_function('public', 'idem_namespace_revoke', ARRAY['text', 'regrole', 'text']);
SELECT has_function('idempotency', 'idem_namespace_visible', ARRAY['text']);
SELECT has_table('idempotency', 'namespace_grants', 'the namespace grants table (1.1)');
SELECT col_is_pk('idempotency', 'namespace_grants', ARRAY['namespace', 'grantee', 'privilege'],
                 'a grant per (namespace, grantee, privilege)');
SELECT col_type_is('idempotency', 'namespace_grants', 'grantee', 'regrole',
                   'grantees are regroles, so pg_dump writes role names');
SELECT has_trigger('idempotency', 'namespace_grants', 'namespace_grants_changed',
                   'every backend hears of a change to the grants');
SELECT has_view('public', 'idem_namespace_privileges', 'the idem_namespace_privileges view');
SELECT has_function('public', 'idem_claim_trigger', ARRAY[]::text[]);
SELECT has_function('public', 'idem_stats_reset', ARRAY[]::text[]);
SELECT function_returns('public', 'idem_claim', ARRAY['text', 'text', 'text'], 'boolean');
SELECT function_returns('public', 'idem_claim_many', ARRAY['text[]', 'text'], 'setof text');
SELECT function_returns('public', 'idem_claim_many', ARRAY['uuid[]', 'text'], 'setof uuid');
SELECT isnt_strict('public', 'idem_claim', ARRAY['uuid', 'text', 'text'],
                   'idem_claim(uuid) is not strict either');
SELECT function_returns('public', 'idem_claim_trigger', ARRAY[]::text[], 'trigger');
SELECT isnt_strict('public', 'idem_claim', ARRAY['text', 'text', 'text'],
                   'idem_claim is not strict: NULL arguments get an error, not a NULL');
SELECT volatility_is('public', 'idem_claim', ARRAY['text', 'text', 'text'], 'volatile');
SELECT is((SELECT array_agg(DISTINCT proparallel) FROM pg_proc
            WHERE proname IN ('idem_claim', 'idem_try_claim', 'idem_claim_many', 'idem_release', 'idem_namespace_define')),
          ARRAY['u']::"char"[], 'writing functions are PARALLEL UNSAFE');
SELECT is((SELECT pronargdefaults::int FROM pg_proc WHERE oid = 'idem_claim(text,text,text)'::regprocedure),
          2, 'idem_claim defaults namespace and fingerprint');
SELECT is((SELECT pronargdefaults::int FROM pg_proc WHERE oid = 'idem_claim(uuid,text,text)'::regprocedure),
          2, 'idem_claim(uuid) defaults namespace and fingerprint');

-- views
SELECT has_view('public', 'idem_claims', 'idem_claims view');
SELECT has_view('public', 'idem_stats', 'idem_stats view');
SELECT columns_are('public', 'idem_claims',
                   ARRAY['namespace', 'event_id', 'claimed_at', 'expires_at', 'expired', 'fingerprint_hash']);

-- pg_dump carries the claims, namespaces, generations and their sequences
SELECT set_eq($$SELECT unnest(extconfig)::regclass::text FROM pg_extension WHERE extname = 'idempotency'$$,
              ARRAY['idempotency.claims', 'idempotency.namespaces', 'idempotency.namespace_id_seq',
                    'idempotency.machines', 'idempotency.machine_bindings',
                    'idempotency.purge_policies', 'idempotency.requests', 'idempotency.tokens',
                    'idempotency.generations', 'idempotency.generation_id_seq', 'idempotency.watermarks',
                    'idempotency.namespace_grants'],
              'internal tables are marked with pg_extension_config_dump');
SELECT is((SELECT count(*)::int FROM pg_class c
            WHERE c.relnamespace = 'idempotency'::regnamespace
              AND NOT EXISTS (SELECT 1 FROM pg_depend d
                               WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                                 AND d.deptype IN ('e', 'a', 'i'))),
          0, 'every relation in the idempotency schema belongs to the extension');

-- the shared library is preloaded in the test cluster, so statistics work
SELECT ok((SELECT setting FROM pg_settings WHERE name = 'shared_preload_libraries') LIKE '%idempotency%',
          'the test cluster preloads the library');

SELECT * FROM finish();
ROLLBACK;
