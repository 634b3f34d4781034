-- API-style requests: idem_begin, idem_complete, idem_fail; every status
-- and every error
SET client_min_messages = warning;
SELECT idem_namespace_define('api', '1 day');

-- the 422 error of a key reused with another payload, with the stored
-- record's timestamp masked
CREATE FUNCTION pg_temp.mismatch(k text, fp text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    m text;
    d text;
    h text;
BEGIN
    PERFORM idem_begin(k, 'api', fp);
    RETURN NEXT 'no error';
EXCEPTION WHEN SQLSTATE 'ID001' THEN
    GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RETURN NEXT 'ID001: ' || m;
    RETURN NEXT regexp_replace(d, '"created_at": "[^"]+"', '"created_at": "..."');
    RETURN NEXT h;
END
$$;

-- a new key: started, with an owner and a lease
SELECT status, owner IS NOT NULL AS has_owner, result, attempts,
       lease_expires_at > now() AND lease_expires_at <= clock_timestamp() + '30 seconds' AS lease_30s
  FROM idem_begin('r-1', 'api', 'sha:1');
SELECT owner AS o1 FROM idempotency.requests WHERE idempotency.idem_key_text(key) = 'r-1' \gset

-- the same key while the lease is live: in_progress (409), no owner shown,
-- with the lease's end for a Retry-After
SELECT status, owner, result, attempts,
       lease_expires_at = (SELECT lease_expires_at FROM idem_requests WHERE key = 'r-1') AS same_lease
  FROM idem_begin('r-1', 'api', 'sha:1');
-- without a fingerprint the caller is not checked against the stored one
SELECT status FROM idem_begin('r-1', 'api');

-- the same key with another payload: 422, nothing of the stored record in
-- the detail (with colliding keys it is another client's)
SELECT * FROM pg_temp.mismatch('r-1', 'sha:2');

-- the owner completes; every retry gets the stored result
SELECT idem_complete('r-1', :'o1', '{"charge": "ch_1", "amount": 100}', 'api');
SELECT status, owner, result, attempts, lease_expires_at FROM idem_begin('r-1', 'api', 'sha:1');
SELECT status, result FROM idem_begin('r-1', 'api');
-- the mismatch check still applies to completed records
SELECT * FROM pg_temp.mismatch('r-1', 'sha:9');
-- completing again with the same owner is a harmless repeat ...
SELECT idem_complete('r-1', :'o1', '{"charge": "ch_other"}', 'api');
SELECT result FROM idem_requests WHERE key = 'r-1';
-- ... but failing it now, or any other owner, is refused
SELECT idem_fail('r-1', :'o1', '{"e": 1}', false, 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_complete('r-1', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{}', 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT namespace, key, status, attempts, fingerprint, result, lease_expires_at,
       completed_at IS NOT NULL AS completed, expired
  FROM idem_requests WHERE namespace = 'api' ORDER BY key;

-- a permanent failure is stored and replayed
SELECT owner AS o2 FROM idem_begin('r-2', 'api') \gset
SELECT idem_fail('r-2', :'o2', '{"code": "card_declined"}', false, 'api');
SELECT status, owner, result, attempts FROM idem_begin('r-2', 'api');
SELECT idem_fail('r-2', :'o2', '{"code": "again"}', false, 'api');
\echo :LAST_ERROR_SQLSTATE

-- a retryable failure releases the key: the retry starts afresh
SELECT owner AS o3 FROM idem_begin('r-3', 'api', 'sha:3') \gset
SELECT idem_fail('r-3', :'o3', '{"code": "timeout"}', true, 'api');
SELECT count(*) AS r3_rows FROM idem_requests WHERE key = 'r-3';
SELECT status, attempts, result FROM idem_begin('r-3', 'api', 'sha:other');
-- the released owner can no longer finish
SELECT idem_complete('r-3', :'o3', '{}', 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail('r-3', :'o3', '{}', true, 'api');
\echo :LAST_ERROR_SQLSTATE

-- an expired lease is taken over: a new owner, attempts + 1; the stale
-- owner's complete is refused and overwrites nothing
SELECT owner AS o4 FROM idem_begin('r-4', 'api', 'sha:4', '1 hour') \gset
UPDATE idempotency.requests SET lease_expires_at = clock_timestamp() - interval '1 second'
 WHERE idempotency.idem_key_text(key) = 'r-4';
SELECT status, owner IS NOT NULL AND owner <> :'o4' AS new_owner, attempts,
       lease_expires_at > now() + '50 minutes' AS lease_1h
  FROM idem_begin('r-4', 'api', 'sha:4', '1 hour');
SELECT idem_complete('r-4', :'o4', '{"stale": true}', 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail('r-4', :'o4', '{"stale": true}', true, 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT status, attempts, result FROM idem_requests WHERE key = 'r-4';
-- the takeover also needs the same payload
UPDATE idempotency.requests SET lease_expires_at = clock_timestamp() - interval '1 second'
 WHERE idempotency.idem_key_text(key) = 'r-4';
SELECT * FROM pg_temp.mismatch('r-4', 'sha:not-4');
SELECT status, attempts FROM idem_begin('r-4', 'api', 'sha:4');
SELECT status, attempts FROM idem_requests WHERE key = 'r-4';

-- a record past the namespace TTL counts as absent: a fresh start, attempts 1,
-- another fingerprint accepted
UPDATE idempotency.requests SET created_at = now() - interval '3 days',
       completed_at = now() - interval '2 days'
 WHERE idempotency.idem_key_text(key) = 'r-1';
SELECT key, expired FROM idem_requests WHERE key = 'r-1';
SELECT status, attempts, result FROM idem_begin('r-1', 'api', 'sha:new');
SELECT key, status, expired, fingerprint FROM idem_requests WHERE key = 'r-1';

-- wait: a bounded wait on a live lease ends in_progress when it runs out ...
SELECT status FROM idem_begin('r-1', 'api', 'sha:new', wait => '50 milliseconds');
-- ... and on a lease that expires within the wait, the waiter takes over
SELECT status, attempts FROM idem_begin('r-5', 'api', lease => '200 milliseconds');
SELECT status, attempts FROM idem_begin('r-5', 'api', wait => '5 seconds');
-- zero wait means no wait
SELECT status FROM idem_begin('r-5', 'api', wait => '0');

-- namespaces: the same key in two namespaces is two requests; a namespace
-- is created on first use, and 'default' is the default
SELECT status FROM idem_begin('r-1', 'api_other');
SELECT status FROM idem_begin('r-1');
SELECT namespace, count(*) FROM idem_requests
 WHERE namespace IN ('api', 'api_other', 'default') GROUP BY 1 ORDER BY 1;
-- finishing in an unknown namespace is refused
SELECT idem_complete('r-1', :'o1', '{}', 'no_such_ns');
\echo :LAST_ERROR_SQLSTATE

-- bad input: clear errors, and nothing written
SELECT * FROM idem_begin(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_begin('x', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_begin('x', 'api', lease => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_begin('', 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_begin(repeat('x', 1025), 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_begin('x', '');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_begin('x', 'api', lease => '0');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_begin('x', 'api', lease => '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_begin('x', 'api', wait => '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_complete(NULL, :'o1', '{}', 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_complete('x', NULL, '{}', 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_complete('x', :'o1', NULL, 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_complete('x', :'o1', '{}', NULL);
\echo :LAST_ERROR_SQLSTATE
-- (a failure needs no error payload: this one fails only on the owner)
SELECT idem_fail('x', :'o1', NULL, false, 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail('x', :'o1', '{}', NULL, 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS x_rows FROM idem_requests WHERE key = 'x';

-- no writes in a read-only transaction or on a standby
BEGIN READ ONLY;
SELECT * FROM idem_begin('ro', 'api');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT idem_complete('r-1', :'o1', '{}', 'api');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT idem_fail('r-1', :'o1', '{}', true, 'api');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- a begin rolled back leaves nothing behind
BEGIN;
SELECT status FROM idem_begin('rb', 'api');
ROLLBACK;
SELECT count(*) AS rb_rows FROM idem_requests WHERE key = 'rb';

-- TTL counts from completion: a result is replayed for the namespace's TTL
-- after it was stored, however long the work took
UPDATE idempotency.requests SET created_at = now() - interval '2 days'
 WHERE idempotency.idem_key_text(key) = 'r-2';
SELECT key, status, expired FROM idem_requests WHERE key = 'r-2';
SELECT status, result FROM idem_begin('r-2', 'api');

-- the purge takes finished records past their TTL, never a live lease,
-- even one whose record is past its TTL.  The records are aged and purged
-- in one transaction: the purge worker, live in this database, would
-- otherwise take them first (it once did, and idem_purge() found none).
SELECT owner AS o6 FROM idem_begin('r-6', 'api', lease => '1 hour') \gset
SELECT owner AS o7 FROM idem_begin('r-7', 'api') \gset
SELECT idem_complete('r-7', :'o7', '{"ok": true}', 'api');
SELECT owner AS o8 FROM idem_begin('r-8', 'api', lease => '1 hour') \gset
BEGIN;
UPDATE idempotency.requests
   SET created_at = now() - interval '2 days',
       completed_at = CASE WHEN completed_at IS NOT NULL THEN now() - interval '2 days' END,
       lease_expires_at = CASE idempotency.idem_key_text(key)
                          WHEN 'r-8' THEN clock_timestamp() - interval '1 second'
                          ELSE lease_expires_at END
 WHERE ns = (SELECT id FROM idempotency.namespaces WHERE name = 'api')
   AND idempotency.idem_key_text(key) IN ('r-6', 'r-7', 'r-8');
SELECT key, status, lease_expires_at > clock_timestamp() AS live_lease, expired
  FROM idem_requests WHERE key IN ('r-6', 'r-7', 'r-8') ORDER BY key;
SELECT count(*) AS requests_before FROM idempotency.requests \gset
SELECT idem_purge() >= 2 AS purged;
SELECT :requests_before - count(*) AS requests_purged FROM idempotency.requests;
COMMIT;
SELECT key, status FROM idem_requests WHERE namespace = 'api' ORDER BY key;
-- the lease holder of r-6 can still finish it, and its result is replayed
SELECT idem_complete('r-6', :'o6', '{"late": true}', 'api');
SELECT status, result FROM idem_begin('r-6', 'api');
-- the owner of the purged r-8 cannot
SELECT idem_complete('r-8', :'o8', '{}', 'api');
\echo :LAST_ERROR_SQLSTATE

-- idem_begin never waits on its own transaction: a second idem_begin of a
-- key this transaction started errors at once, even with a wait
BEGIN;
SELECT status FROM idem_begin('self-held', 'api', lease => '3 seconds');
SELECT status FROM idem_begin('self-held', 'api', lease => '3 seconds', wait => '10 seconds');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- finished in the same transaction, it replays as usual
BEGIN;
SELECT owner AS self_owner FROM idem_begin('self-done', 'api') \gset
SELECT idem_complete('self-done', :'self_owner', '{"ok": true}', 'api');
SELECT status, result FROM idem_begin('self-done', 'api');
ROLLBACK;

-- idem_extend: the lease owner's heartbeat
SELECT owner AS ext_owner FROM idem_begin('ext-1', 'api', lease => '5 seconds') \gset
SELECT idem_extend('ext-1', :'ext_owner', '1 hour', 'api') > now() + interval '59 minutes' AS extended;
SELECT lease_expires_at > now() + interval '59 minutes' AS lease_seen_by_others
  FROM idem_requests WHERE key = 'ext-1';
SELECT idem_extend('ext-1', gen_random_uuid(), '1 hour', 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_extend('ext-1', :'ext_owner', '-1 minute', 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_extend('ext-1', :'ext_owner', NULL, 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_complete('ext-1', :'ext_owner', '{"done": 1}', 'api');
SELECT idem_extend('ext-1', :'ext_owner', '1 hour', 'api');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_extend('never-begun', gen_random_uuid(), '1 hour', 'api');
\echo :LAST_ERROR_SQLSTATE
