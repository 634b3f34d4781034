-- bad input to the claim functions: clear errors, specific SQLSTATEs, and
-- never a partial claim
SET client_min_messages = warning;

SELECT idem_claim(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claim('x', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claim('');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claim(repeat('x', 1025), 'errors');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claim('x', '');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claim('x', repeat('n', 129));
\echo :LAST_ERROR_SQLSTATE
SELECT idem_try_claim(NULL, 'errors');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claimed(NULL, 'errors');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claimed('x', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_release('', 'errors');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_release('x', NULL);
\echo :LAST_ERROR_SQLSTATE
-- the longest id allowed is 1024 bytes, counted in bytes, not characters
SELECT idem_claim(repeat('x', 1024), 'errors') AS max_len;
SELECT idem_claim(repeat('é', 513), 'errors');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS errors_claims FROM idem_claims WHERE namespace = 'errors';

-- no writes in a read-only transaction
BEGIN READ ONLY;
SELECT idem_claim('ro', 'errors');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT idem_try_claim('ro', 'errors');
ROLLBACK;
BEGIN READ ONLY;
SELECT * FROM idem_claim_many(ARRAY['ro'], 'errors');
ROLLBACK;
BEGIN READ ONLY;
SELECT idem_release('x', 'errors');
ROLLBACK;
-- ... but reading is fine
BEGIN READ ONLY;
SELECT idem_claimed(repeat('x', 1024), 'errors') AS readonly_check;
COMMIT;
SET default_transaction_read_only = on;
SELECT idem_claim('ro', 'errors');
RESET default_transaction_read_only;

-- fingerprints: the same id with another payload is a client bug (ID001)
SELECT idem_claim('fp-1', 'errors', 'sha256:aaaa') AS first;
SELECT idem_claim('fp-1', 'errors', 'sha256:aaaa') AS same_fingerprint;
SELECT idem_claim('fp-1', 'errors') AS no_fingerprint_given;
SELECT idem_claim('fp-1', 'errors', 'sha256:bbbb');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_try_claim('fp-1', 'errors', 'sha256:bbbb');
\echo :LAST_ERROR_SQLSTATE
-- a claim made without a fingerprint matches any later one
SELECT idem_claim('fp-2', 'errors') AS first_without;
SELECT idem_claim('fp-2', 'errors', 'sha256:cccc') AS later_with;
-- the error names the key; catch it by SQLSTATE
DO $$
BEGIN
    PERFORM idem_claim('fp-1', 'errors', 'sha256:dddd');
EXCEPTION WHEN SQLSTATE 'ID001' THEN
    RAISE WARNING 'caught %', SQLERRM;
END $$;
SELECT fingerprint_hash IS NOT NULL AS has_fp FROM idem_claims
 WHERE namespace = 'errors' AND event_id IN ('fp-1', 'fp-2') ORDER BY event_id;

-- an error in the middle of a statement leaves no claim behind
SELECT idem_claim(id, 'errors_atomic') FROM (VALUES ('ok-1'), (''), ('ok-2')) v(id);
SELECT count(*) AS partial FROM idem_claims WHERE namespace = 'errors_atomic';

-- the trigger function is for triggers only
SELECT idem_claim_trigger();
\echo :LAST_ERROR_SQLSTATE
