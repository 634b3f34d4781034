-- idem_claim_many: a poll batch in one call
SET client_min_messages = warning;

SELECT idem_claim('m-2', 'many');
SELECT * FROM idem_claim_many(ARRAY['m-1', 'm-2', 'm-3', 'm-1', 'm-4', 'm-3'], 'many');
SELECT * FROM idem_claim_many(ARRAY['m-4', 'm-5', 'm-1'], 'many');
SELECT * FROM idem_claim_many(ARRAY[]::text[], 'many');
SELECT count(*) FROM idem_claim_many(ARRAY['m-1'], 'many');

-- the default namespace, and a set-returning call in the target list
SELECT idem_claim_many(ARRAY['many-default-1', 'many-default-2']) ORDER BY 1;

-- results come back in array order, not key order
SELECT * FROM idem_claim_many(ARRAY['zz', 'aa', 'mm', 'aa'], 'many_order');

-- a batch rolls back as a whole
BEGIN;
SELECT * FROM idem_claim_many(ARRAY['rb-1', 'rb-2'], 'many');
ROLLBACK;
SELECT * FROM idem_claim_many(ARRAY['rb-2', 'rb-1'], 'many');

-- a large batch
SELECT count(*) FROM idem_claim_many(ARRAY(SELECT 'big-' || g FROM generate_series(1, 2000) g), 'many');
SELECT count(*) FROM idem_claim_many(ARRAY(SELECT 'big-' || g FROM generate_series(1, 2001) g), 'many');

-- errors
SELECT * FROM idem_claim_many(NULL::text[], 'many');
\echo :LAST_ERROR_SQLSTATE
-- an untyped array could be text[] or uuid[]: it needs a cast
SELECT * FROM idem_claim_many(NULL, 'many');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim_many('{m-1,m-9}', 'many');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim_many('{m-1,m-9}'::text[], 'many');
SELECT * FROM idem_claim_many(ARRAY['a'], NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim_many(ARRAY['ok', NULL], 'many');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim_many(ARRAY['ok', ''], 'many');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim_many(ARRAY[['a', 'b'], ['c', 'd']], 'many');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim_many(ARRAY['ok', repeat('x', 1025)], 'many');
\echo :LAST_ERROR_SQLSTATE
-- none of the failed batches claimed 'ok'
SELECT idem_claimed('ok', 'many') AS ok_claimed;
