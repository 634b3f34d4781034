-- idem_claims and idem_stats
SET client_min_messages = warning;

SELECT idem_namespace_define('views', '2 days');
SELECT idem_claim('v-1', 'views'), idem_claim('v-2', 'views', 'fp'), idem_claim('v-1', 'views');

SELECT namespace, event_id, expires_at - claimed_at AS lifetime, expired,
       fingerprint_hash IS NOT NULL AS has_fp
  FROM idem_claims WHERE namespace = 'views' ORDER BY event_id;

-- the view's columns
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute WHERE attrelid = 'idem_claims'::regclass AND attnum > 0
 ORDER BY attnum;
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute WHERE attrelid = 'idem_stats'::regclass AND attnum > 0
 ORDER BY attnum;

-- counters: claims, duplicates, fingerprint mismatches, busy, releases,
-- takeovers (waits are covered by the isolation tests)
SELECT idem_claim('s-1', 'stats'), idem_claim('s-1', 'stats'), idem_claim('s-1', 'stats');
SELECT idem_claim('s-2', 'stats', 'a');
SELECT idem_claim('s-2', 'stats', 'b');
SELECT idem_release('s-1', 'stats'), idem_release('s-404', 'stats');
SELECT idem_claim('s-3', 'stats');
UPDATE idempotency.claims SET claimed_at = claimed_at - interval '30 days'
 WHERE idempotency.idem_key_text(key) = 's-3';
SELECT idem_claim('s-3', 'stats') AS takeover;
SELECT * FROM idem_stats WHERE namespace = 'stats';

-- a reset zeroes this database's counters
SELECT idem_stats_reset();
SELECT claims, duplicates, fingerprint_mismatches, releases, takeovers
  FROM idem_stats WHERE namespace = 'stats';
