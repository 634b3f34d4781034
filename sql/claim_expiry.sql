-- expiry: a claim lives until claimed_at + its namespace's TTL; an expired
-- claim counts as absent everywhere, and a new claim takes it over
SET client_min_messages = warning;
-- expiry in the plain store, where a takeover renews the claim in place
-- (generations.sql tests generations): without this the live worker may
-- open this TTL class's first generation between a claim and its
-- takeover, which then claims afresh there (the package run's failure on 18)
SET idempotency.generation_min_ttl = 2147483647;

SELECT idem_namespace_define('expiry', '1 hour');
SELECT idem_claim('exp-1', 'expiry') AS first, idem_claim('exp-2', 'expiry') AS second;

-- The live worker would purge the claims aged by hand below at a moment
-- the test does not know: it pauses in this database until the checks of
-- expiry and takeover are done (purge.sql tests it), and any round under
-- way here ends first
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I SET idempotency.purge_enabled = off', current_database());
END $$;
DO $$
DECLARE idle int := 0;
BEGIN
    WHILE idle < 20 LOOP
        idle := CASE WHEN EXISTS (SELECT FROM pg_stat_activity
                                   WHERE datname = current_database()
                                     AND backend_type = 'idempotency purge worker')
                     THEN 0 ELSE idle + 1 END;
        PERFORM pg_sleep(0.01);
    END LOOP;
END $$;

-- age the claims by hand: exp-1 is now 2 hours old, exp-2 30 minutes
UPDATE idempotency.claims SET claimed_at = claimed_at - interval '2 hours'
 WHERE idempotency.idem_key_text(key) = 'exp-1';
UPDATE idempotency.claims SET claimed_at = claimed_at - interval '30 minutes'
 WHERE idempotency.idem_key_text(key) = 'exp-2';

SELECT event_id, expired, expires_at - claimed_at AS lifetime
  FROM idem_claims WHERE namespace = 'expiry' ORDER BY event_id;
SELECT idem_claimed('exp-1', 'expiry') AS exp1_claimed,
       idem_claimed('exp-2', 'expiry') AS exp2_claimed;

-- a TTL change applies to existing claims: with 3 hours, exp-1 lives again
SELECT idem_namespace_define('expiry', '3 hours');
SELECT idem_claimed('exp-1', 'expiry') AS exp1_with_3h;
SELECT idem_claim('exp-1', 'expiry') AS exp1_claim_with_3h;
SELECT idem_namespace_define('expiry', '1 hour');

-- the expired claim is taken over: true, and the stored row is renewed
SELECT idem_claim('exp-1', 'expiry') AS takeover, idem_claim('exp-2', 'expiry') AS live_duplicate;
SELECT event_id, expired, now() - claimed_at < interval '1 minute' AS renewed
  FROM idem_claims WHERE namespace = 'expiry' ORDER BY event_id;
SELECT count(*) AS rows_for_exp1 FROM idempotency.claims c
 WHERE idempotency.idem_key_text(c.key) = 'exp-1';

-- a takeover rolled back leaves the expired claim in place
UPDATE idempotency.claims SET claimed_at = claimed_at - interval '2 hours'
 WHERE idempotency.idem_key_text(key) = 'exp-1';
BEGIN;
SELECT idem_claim('exp-1', 'expiry') AS takeover_in_xact;
ROLLBACK;
SELECT event_id, expired FROM idem_claims WHERE event_id = 'exp-1';

-- idem_release of an expired claim removes it but reports false
SELECT idem_release('exp-1', 'expiry') AS released_expired;
SELECT count(*) AS left_for_exp1 FROM idem_claims WHERE event_id = 'exp-1';
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I RESET idempotency.purge_enabled', current_database());
END $$;

-- expiry uses calendar arithmetic in UTC, whatever the session time zone
SELECT idem_namespace_define('expiry_month', '1 month');
SELECT idem_claim('m-1', 'expiry_month');
-- in one transaction: the row locked, the live worker skips the expired
-- claim until the checks are done
BEGIN;
UPDATE idempotency.claims SET claimed_at = '2026-01-31 12:00:00+00'
 WHERE idempotency.idem_key_text(key) = 'm-1';
SET TimeZone = 'America/New_York';
SELECT expires_at AT TIME ZONE 'UTC' AS expires_utc FROM idem_claims WHERE event_id = 'm-1';
RESET TimeZone;
-- the SQL rule (idempotency.idem_expires_at, inlined) names its operators
-- with their schema: a "+" of the session's own, first in its search_path,
-- changes nothing
CREATE SCHEMA regress_evil;
CREATE FUNCTION regress_evil.plus(timestamp, interval) RETURNS timestamp
    LANGUAGE sql AS 'SELECT $1 - $2';
CREATE OPERATOR regress_evil.+ (LEFTARG = timestamp, RIGHTARG = interval, FUNCTION = regress_evil.plus);
SET search_path = regress_evil, pg_catalog, public;
SELECT '2026-01-31 12:00:00'::timestamp + interval '1 month' AS evil_plus;
SELECT expires_at AT TIME ZONE 'UTC' AS expires_utc FROM idem_claims WHERE event_id = 'm-1';
RESET search_path;
DROP SCHEMA regress_evil CASCADE;
-- the C code agrees with the view on month-long TTLs
UPDATE idempotency.claims SET claimed_at = now() - interval '20 days'
 WHERE idempotency.idem_key_text(key) = 'm-1';
SELECT idem_claimed('m-1', 'expiry_month') AS alive_at_20_days;
UPDATE idempotency.claims SET claimed_at = now() - interval '40 days'
 WHERE idempotency.idem_key_text(key) = 'm-1';
SELECT idem_claimed('m-1', 'expiry_month') AS alive_at_40_days;
COMMIT;
