-- idem_citus_claim: a claim kept with a Citus shard (src/citusshard.c).
-- Its moves are tested on a real Citus cluster (test/t/014_citus_cluster.pl);
-- here, without Citus, only its argument checks and its refusal.
SELECT idem_citus_claim(NULL, 'cc', 102008);
SELECT idem_citus_claim('e1', NULL, 102008);
SELECT idem_citus_claim('e1', 'cc', NULL);
SELECT idem_citus_claim('e1', '', 102008);
SELECT idem_citus_claim('e1', 'cc', 0);
SELECT idem_citus_claim('e1', 'cc', -5);
-- no Citus here: refused, with a pointer to idem_claim
SELECT idem_citus_claim('e1', 'cc', 102008);
-- and nothing was claimed or created
SELECT count(*) FROM idem_claims WHERE namespace = 'cc';
SELECT count(*) FROM idem_namespaces WHERE name LIKE 'cc%';
-- the idem_claims view shows a shard namespace's claims under its namespace
SELECT idem_namespace_define('cc', '3 days');
SELECT idem_claims_import('e2', E'cc\x1f102008', now() - interval '1 hour');
SELECT namespace, event_id FROM idem_claims WHERE event_id = 'e2';
-- and idem_namespace_define passes a new TTL on to the shard namespaces
SELECT idem_namespace_define('cc', '5 days');
SELECT replace(name, E'\x1f', '/') AS name, ttl FROM idem_namespaces WHERE name LIKE 'cc%' ORDER BY name;
SELECT idem_release('e2', E'cc\x1f102008');
