-- idem_citus_claim and idem_citus_release: claims kept with a Citus shard
-- (src/citusshard.c).  Their moves are tested on a real Citus cluster
-- (test/t/014_citus_cluster.pl); here, without Citus, only their argument
-- checks and their refusal.
SELECT idem_citus_claim(NULL, 'cc', 102008);
SELECT idem_citus_claim('e1', NULL, 102008);
SELECT idem_citus_claim('e1', 'cc', NULL);
SELECT idem_citus_claim('e1', '', 102008);
SELECT idem_citus_claim('e1', 'cc', 0);
SELECT idem_citus_claim('e1', 'cc', -5);
SELECT idem_citus_release('e1', 'cc', NULL);
SELECT idem_citus_release('e1', 'cc', 0);
-- no Citus here: refused, with a pointer to idem_claim
SELECT idem_citus_claim('e1', 'cc', 102008);
SELECT idem_citus_release('e1', 'cc', 102008);
-- the byte 0x1f is reserved for the shards' namespaces: no user name holds it
SELECT idem_citus_claim('e1', E'cc\x1f1', 102008);
SELECT idem_claim('e1', E'cc\x1f102008');
SELECT idem_try_claim('e1', E'cc\x1f102008');
SELECT idem_claims_import('e1', E'cc\x1f102008', now() - interval '1 hour');
SELECT idem_namespace_define(E'cc\x1f102008', '1 day');
SELECT idem_claimed('e1', E'cc\x1f102008');
SELECT idem_release('e1', E'cc\x1f102008');
-- and nothing was claimed or created
SELECT count(*) FROM idem_claims WHERE namespace LIKE 'cc%';
SELECT count(*) FROM idem_namespaces WHERE name LIKE 'cc%';
