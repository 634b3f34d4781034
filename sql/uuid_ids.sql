-- uuid event ids: the overloads drivers call when they pass a UUID type
SET client_min_messages = warning;

-- a uuid and its canonical text are the same claim
SELECT idem_claim('6f1c2a9e-0b6d-4c55-9a8e-2f7d3c1b5a40'::uuid, 'uuid_ids');
SELECT idem_claim('6f1c2a9e-0b6d-4c55-9a8e-2f7d3c1b5a40'::uuid, 'uuid_ids');
SELECT idem_claim('6f1c2a9e-0b6d-4c55-9a8e-2f7d3c1b5a40', 'uuid_ids');
SELECT idem_claim('6f1c2a9e-0b6d-4c55-9a8e-2f7d3c1b5a40'::text, 'uuid_ids');
-- a uuid's text form is lowercase: the uppercase text is another id
SELECT idem_claim(upper('6f1c2a9e-0b6d-4c55-9a8e-2f7d3c1b5a40'), 'uuid_ids');
-- the uuid input forms (uppercase, braces) name the uuid, not their text
SELECT idem_claim('{6F1C2A9E-0B6D-4C55-9A8E-2F7D3C1B5A40}'::uuid, 'uuid_ids');
-- and text claimed first is a duplicate for the uuid
SELECT idem_claim('0d6b8a3c-1e2f-4a5b-8c9d-0e1f2a3b4c5d', 'uuid_ids');
SELECT idem_claim('0d6b8a3c-1e2f-4a5b-8c9d-0e1f2a3b4c5d'::uuid, 'uuid_ids');

-- an untyped literal still resolves to the text form, uuid-shaped or not
SELECT idem_claim('not-a-uuid', 'uuid_ids');
SELECT p.oid::regprocedure::text
  FROM pg_proc p WHERE p.proname = 'idem_claim' ORDER BY p.oid::regprocedure::text COLLATE "C";

-- the view shows the uuid as its canonical text
SELECT namespace, event_id FROM idem_claims WHERE namespace = 'uuid_ids' ORDER BY event_id COLLATE "C";

-- the default namespace
SELECT idem_claim('11111111-2222-4333-8444-555555555555'::uuid);
SELECT idem_claimed('11111111-2222-4333-8444-555555555555'::uuid);
SELECT idem_claimed('11111111-2222-4333-8444-555555555555');

-- check and release
SELECT idem_claimed('6f1c2a9e-0b6d-4c55-9a8e-2f7d3c1b5a40'::uuid, 'uuid_ids');
SELECT idem_claimed('6f1c2a9e-0b6d-4c55-9a8e-2f7d3c1b5a40'::uuid, 'no_such_namespace');
SELECT idem_release('6f1c2a9e-0b6d-4c55-9a8e-2f7d3c1b5a40'::uuid, 'uuid_ids');
SELECT idem_claimed('6f1c2a9e-0b6d-4c55-9a8e-2f7d3c1b5a40', 'uuid_ids');
SELECT idem_release('6f1c2a9e-0b6d-4c55-9a8e-2f7d3c1b5a40'::uuid, 'uuid_ids');
SELECT idem_claim('6f1c2a9e-0b6d-4c55-9a8e-2f7d3c1b5a40', 'uuid_ids');
-- released through the text form, claimed through the uuid form
SELECT idem_release('6f1c2a9e-0b6d-4c55-9a8e-2f7d3c1b5a40', 'uuid_ids');
SELECT idem_claim('6f1c2a9e-0b6d-4c55-9a8e-2f7d3c1b5a40'::uuid, 'uuid_ids');

-- try_claim
SELECT idem_try_claim('22222222-3333-4444-8555-666666666666'::uuid, 'uuid_ids');
SELECT idem_try_claim('22222222-3333-4444-8555-666666666666'::uuid, 'uuid_ids');

-- fingerprints are checked whichever form claimed first
SELECT idem_claim('33333333-4444-4555-8666-777777777777'::uuid, 'uuid_fp', 'body-a');
SELECT idem_claim('33333333-4444-4555-8666-777777777777', 'uuid_fp', 'body-a');
SELECT idem_claim('33333333-4444-4555-8666-777777777777'::uuid, 'uuid_fp', 'body-b');
\echo :LAST_ERROR_SQLSTATE

-- a batch of uuids returns uuids, newly claimed, in array order, once each
SELECT pg_typeof(x), x
  FROM idem_claim_many(ARRAY['0d6b8a3c-1e2f-4a5b-8c9d-0e1f2a3b4c5d',
                             'aaaaaaaa-0000-4000-8000-000000000002',
                             'aaaaaaaa-0000-4000-8000-000000000001',
                             'aaaaaaaa-0000-4000-8000-000000000002']::uuid[], 'uuid_ids') x;
SELECT * FROM idem_claim_many(ARRAY['aaaaaaaa-0000-4000-8000-000000000001',
                                    'aaaaaaaa-0000-4000-8000-000000000003']::uuid[], 'uuid_ids');
-- and the text batch sees them
SELECT * FROM idem_claim_many(ARRAY['aaaaaaaa-0000-4000-8000-000000000003',
                                    'aaaaaaaa-0000-4000-8000-000000000004'], 'uuid_ids');
SELECT * FROM idem_claim_many(ARRAY[]::uuid[], 'uuid_ids');
SELECT count(*) FROM idem_claim_many(ARRAY(SELECT md5('many-' || g)::uuid FROM generate_series(1, 500) g), 'uuid_ids');
SELECT count(*) FROM idem_claim_many(ARRAY(SELECT md5('many-' || g)::text FROM generate_series(1, 501) g), 'uuid_ids');

-- a rollback releases
BEGIN;
SELECT idem_claim('44444444-5555-4666-8777-888888888888'::uuid, 'uuid_ids');
ROLLBACK;
SELECT idem_claimed('44444444-5555-4666-8777-888888888888'::uuid, 'uuid_ids');

-- errors
SELECT idem_claim(NULL::uuid, 'uuid_ids');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claim('44444444-5555-4666-8777-888888888888'::uuid, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claim('44444444-5555-4666-8777-888888888888'::uuid, '');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claim('not-a-uuid'::uuid, 'uuid_ids');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_try_claim(NULL::uuid, 'uuid_ids');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claimed(NULL::uuid, 'uuid_ids');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_release(NULL::uuid, 'uuid_ids');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim_many(NULL::uuid[], 'uuid_ids');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim_many(ARRAY['aaaaaaaa-0000-4000-8000-000000000009', NULL]::uuid[], 'uuid_ids');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim_many(ARRAY[['aaaaaaaa-0000-4000-8000-000000000009']]::uuid[], 'uuid_ids');
\echo :LAST_ERROR_SQLSTATE
-- nothing of the failed batches was claimed
SELECT idem_claimed('aaaaaaaa-0000-4000-8000-000000000009'::uuid, 'uuid_ids');

-- the table privileges decide, as for text ids
CREATE ROLE regress_idem_uuid_nobody;
SET ROLE regress_idem_uuid_nobody;
SELECT idem_claim('55555555-6666-4777-8888-999999999999'::uuid, 'uuid_ids');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim_many(ARRAY['55555555-6666-4777-8888-999999999999']::uuid[], 'uuid_ids');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_release('55555555-6666-4777-8888-999999999999'::uuid, 'uuid_ids');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE regress_idem_uuid_nobody;
