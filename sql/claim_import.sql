-- idem_claims_import: claims moved between nodes when resharding keep their
-- claimed_at and fingerprint; exported through the idem_claims view
SET client_min_messages = warning;
SELECT idem_namespace_define('imp', '1 day');
SELECT idem_namespace_define('imp_src', '1 day');

-- a claim on the "old" partition, with a fingerprint, an hour old
SELECT idem_claim('imp-1', 'imp_src', 'payload-a');
UPDATE idempotency.claims SET claimed_at = now() - interval '1 hour'
 WHERE idempotency.idem_key_text(key) = 'imp-1';
CREATE TEMP TABLE exported AS
    SELECT event_id, claimed_at, fingerprint_hash FROM idem_claims
     WHERE namespace = 'imp_src' AND NOT expired;

-- imported on the "new" one: same claimed_at, same fingerprint
SELECT idem_claims_import(event_id, 'imp', claimed_at, fingerprint_hash) AS imported
  FROM exported;
SELECT e.claimed_at = c.claimed_at AS same_claimed_at,
       e.fingerprint_hash = c.fingerprint_hash AS same_fingerprint
  FROM exported e JOIN idem_claims c ON c.event_id = e.event_id AND c.namespace = 'imp';
-- a redelivery there is a duplicate; another payload is still refused
SELECT idem_claim('imp-1', 'imp', 'payload-a') AS redelivered;
SELECT idem_claim('imp-1', 'imp', 'payload-b');
\echo :LAST_ERROR_SQLSTATE
-- importing again, or over a live claim, changes nothing
SELECT idem_claims_import('imp-1', 'imp', now() - interval '2 hours') AS again;
SELECT claimed_at = (SELECT claimed_at FROM exported) AS kept FROM idem_claims
 WHERE namespace = 'imp' AND event_id = 'imp-1';
-- an already expired claim is not imported; an expired claim here is taken over
SELECT idem_claims_import('imp-2', 'imp', now() - interval '2 days') AS expired_import;
SELECT count(*) AS imp2_rows FROM idem_claims WHERE event_id = 'imp-2';
SELECT idem_claim('imp-3', 'imp');
UPDATE idempotency.claims SET claimed_at = now() - interval '3 days'
 WHERE idempotency.idem_key_text(key) = 'imp-3';
SELECT idem_claims_import('imp-3', 'imp', now() - interval '10 minutes') AS over_expired;
-- (one live row: the expired one may stay beside it, in the claims table
-- or a sealed generation, when the live worker opened a generation between)
SELECT count(*) FILTER (WHERE NOT expired) AS live_rows FROM idem_claims WHERE event_id = 'imp-3';
-- imported in a transaction that rolls back: gone
BEGIN;
SELECT idem_claims_import('imp-4', 'imp', now() - interval '1 minute') AS in_xact;
ROLLBACK;
SELECT idem_claimed('imp-4', 'imp') AS after_rollback;

-- bad input
SELECT idem_claims_import('imp-5', 'imp', now() + interval '1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claims_import('imp-5', 'imp', 'infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claims_import('imp-5', 'imp', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_claims_import(NULL, 'imp', now());
SELECT idem_claims_import('', 'imp', now());
\echo :LAST_ERROR_SQLSTATE
-- admin only: it can give a claim any past claimed_at
CREATE ROLE regress_idem_importer;
GRANT INSERT, SELECT ON idempotency.claims TO regress_idem_importer;
SET ROLE regress_idem_importer;
SELECT idem_claims_import('imp-6', 'imp', now());
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
REVOKE ALL ON idempotency.claims FROM regress_idem_importer;
DROP ROLE regress_idem_importer;
DELETE FROM idempotency.claims
 WHERE ns IN (SELECT id FROM idempotency.namespaces WHERE name IN ('imp', 'imp_src'));
