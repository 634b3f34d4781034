-- namespaces: defined explicitly or created on first use
SET client_min_messages = warning;

SELECT idem_namespace_define('ns_explicit', '90 days');
SELECT name, ttl FROM idempotency.namespaces WHERE name = 'ns_explicit';

-- redefining changes the TTL, and keeps the id
SELECT id AS first_id FROM idempotency.namespaces WHERE name = 'ns_explicit' \gset
SELECT idem_namespace_define('ns_explicit', '1 day 12 hours');
SELECT name, ttl, id = :first_id AS same_id FROM idempotency.namespaces WHERE name = 'ns_explicit';

-- first use creates a namespace with idempotency.default_ttl
SHOW idempotency.default_ttl;
SELECT idem_claim('x', 'ns_implicit_default');
SET idempotency.default_ttl = '45min';
SELECT idem_claim('x', 'ns_implicit_45min');
RESET idempotency.default_ttl;
SELECT name, ttl FROM idempotency.namespaces
 WHERE name IN ('ns_implicit_default', 'ns_implicit_45min') ORDER BY name;

-- a namespace created in a rolled-back transaction disappears with it
BEGIN;
SELECT idem_claim('x', 'ns_rolled_back');
ROLLBACK;
SELECT count(*) AS rolled_back_ns FROM idempotency.namespaces WHERE name = 'ns_rolled_back';
SELECT idem_claim('x', 'ns_rolled_back') AS claim_after_rollback;

-- ... also when created inside a rolled-back savepoint
BEGIN;
SAVEPOINT a;
SELECT idem_claim('x', 'ns_savepoint');
ROLLBACK TO SAVEPOINT a;
SELECT idem_claim('y', 'ns_savepoint') AS recreated_in_same_xact;
COMMIT;
SELECT count(*) AS ns_savepoint_rows FROM idempotency.namespaces WHERE name = 'ns_savepoint';
SELECT event_id FROM idem_claims WHERE namespace = 'ns_savepoint' ORDER BY event_id;

-- idem_claimed and idem_release do not create namespaces
SELECT idem_claimed('x', 'ns_never') AS claimed, idem_release('x', 'ns_never') AS released;
SELECT count(*) AS ns_never_rows FROM idempotency.namespaces WHERE name = 'ns_never';

-- a hand-made TTL change reaches the cache too (statement trigger)
SELECT idem_claim('hand', 'ns_by_hand');
UPDATE idempotency.claims SET claimed_at = claimed_at - interval '10 days'
 WHERE idempotency.idem_key_text(key) = 'hand';
SELECT idem_claimed('hand', 'ns_by_hand') AS before_edit;
UPDATE idempotency.namespaces SET ttl = '30 days' WHERE name = 'ns_by_hand';
SELECT idem_claimed('hand', 'ns_by_hand') AS after_edit;

-- bad input
SELECT idem_namespace_define(NULL, '1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_define('ns_bad', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_define('', '1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_define(repeat('n', 129), '1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_define('ns_bad', '0 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_define('ns_bad', '-5 minutes');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_define('ns_bad', '1 month -40 days');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_define('ns_bad', '101 years');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS ns_bad_rows FROM idempotency.namespaces WHERE name = 'ns_bad';
SET idempotency.default_ttl = 0;
SET idempotency.default_ttl = '-1s';
SET idempotency.nonexistent = 1;
BEGIN READ ONLY;
SELECT idem_namespace_define('ns_ro', '1 day');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- a TTL must be positive on every date: '1 mon -29 days' is a day in
-- March but nothing in February
SELECT idem_namespace_define('ns_bad', '1 mon -29 days');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_namespace_define('ns_months_ok', '1 mon -27 days');
SELECT name, ttl FROM idem_namespaces WHERE name = 'ns_months_ok';

-- redefining keeps the id and takes the new TTL; idem_namespaces shows one row
SELECT id AS months_id FROM idem_namespaces WHERE name = 'ns_months_ok' \gset
SELECT idem_namespace_define('ns_months_ok', '2 days');
SELECT ttl, id = :months_id AS same_id, count(*) OVER () AS rows
  FROM idem_namespaces WHERE name = 'ns_months_ok';

-- default_ttl is for superusers: a plain role must not shorten the window
-- of namespaces others create on first use
CREATE ROLE ns_plain_role;
SET ROLE ns_plain_role;
SET idempotency.default_ttl = '2s';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE ns_plain_role;
