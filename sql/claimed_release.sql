-- idem_claimed reads, idem_release allows a retry
SET client_min_messages = warning;

SELECT idem_claimed('r-1', 'release') AS before;
SELECT idem_claim('r-1', 'release') AS claim;
SELECT idem_claimed('r-1', 'release') AS after, idem_claimed('r-2', 'release') AS other;

-- the temporary-failure path: release, and the redelivery is processed
SELECT idem_release('r-1', 'release') AS released;
SELECT idem_claimed('r-1', 'release') AS after_release;
SELECT idem_release('r-1', 'release') AS released_again;
SELECT idem_claim('r-1', 'release') AS reclaim;

-- releasing rolls back like anything else
BEGIN;
SELECT idem_release('r-1', 'release') AS released_in_xact;
SELECT idem_claimed('r-1', 'release') AS inside;
ROLLBACK;
SELECT idem_claimed('r-1', 'release') AS after_rollback;

-- claim, check and release within one statement and one transaction
SELECT idem_claim('r-3', 'release') AS c, idem_claimed('r-3', 'release') AS seen,
       idem_release('r-3', 'release') AS r, idem_claimed('r-3', 'release') AS gone,
       idem_claim('r-3', 'release') AS again;
BEGIN;
SELECT idem_claim('r-4', 'release');
SELECT idem_claimed('r-4', 'release') AS own_claim_visible;
SELECT idem_release('r-4', 'release');
SELECT idem_claim('r-4', 'release') AS reclaim_in_xact;
COMMIT;
SELECT event_id FROM idem_claims WHERE namespace = 'release' ORDER BY event_id;

