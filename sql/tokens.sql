-- single-use tokens: idem_token_issue and idem_token_consume
SET client_min_messages = warning;

-- a token is consumed exactly once, and only in its own scope
SELECT idem_token_issue('checkout') AS t1 \gset
SELECT count(*) AS tokens, min(scope) AS scope,
       bool_and(expires_at > now() + '9 minutes' AND expires_at <= clock_timestamp() + '10 minutes') AS ttl_10min
  FROM idempotency.tokens WHERE token = :'t1';
SELECT idem_token_consume(:'t1', 'other') AS wrong_scope;
SELECT idem_token_consume(:'t1', 'checkout') AS first,
       idem_token_consume(:'t1', 'checkout') AS second;
SELECT idem_token_consume(:'t1', 'checkout') AS third;
SELECT count(*) AS left_over FROM idempotency.tokens WHERE token = :'t1';

-- tokens are distinct
SELECT count(DISTINCT idem_token_issue('form')) AS distinct_tokens FROM generate_series(1, 100);

-- an unknown token is simply not consumable
SELECT idem_token_consume('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'checkout') AS unknown;

-- an expired token gives false, and the purge removes it
SELECT idem_token_issue('checkout', '1 hour') AS t2 \gset
-- in one transaction: the row locked, the live worker (SKIP LOCKED) leaves
-- the expired token to this purge
BEGIN;
UPDATE idempotency.tokens SET expires_at = clock_timestamp() - interval '1 second' WHERE token = :'t2';
SELECT idem_token_consume(:'t2', 'checkout') AS expired;
SELECT count(*) AS before_purge FROM idempotency.tokens WHERE token = :'t2';
SELECT idem_purge() >= 1 AS purged;
COMMIT;
SELECT count(*) AS after_purge FROM idempotency.tokens WHERE token = :'t2';

-- a consume rolled back leaves the token consumable
SELECT idem_token_issue('checkout') AS t3 \gset
BEGIN;
SELECT idem_token_consume(:'t3', 'checkout') AS in_rolled_back_xact;
ROLLBACK;
SELECT idem_token_consume(:'t3', 'checkout') AS after_rollback;
-- and so does an issue rolled back: the token never existed
BEGIN;
SELECT idem_token_issue('checkout') AS t4 \gset
ROLLBACK;
SELECT idem_token_consume(:'t4', 'checkout') AS rolled_back_issue;

-- bad input
SELECT idem_token_issue(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_token_issue('');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_token_issue(repeat('s', 129));
\echo :LAST_ERROR_SQLSTATE
SELECT idem_token_issue('checkout', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_token_issue('checkout', '0');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_token_issue('checkout', '-1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_token_consume(NULL, 'checkout');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_token_consume(:'t1', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_token_consume(:'t1', '');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_token_consume('not-a-uuid', 'checkout');
\echo :LAST_ERROR_SQLSTATE
BEGIN READ ONLY;
SELECT idem_token_issue('checkout');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT idem_token_consume(:'t1', 'checkout');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
