-- Old duplicates in a sealed generation: once VACUUM has made its pages
-- all-visible, the index entry alone answers (claimstore.c), and the leaf
-- holding it is found through the index's fences (btprobe.c), one index
-- page per probe instead of a descent from the root.  Every answer stays
-- exact when the index changes under the fences: leaves emptied and
-- deleted by VACUUM, REINDEX, REINDEX CONCURRENTLY.  The claims are
-- written by hand, so that the claim cache cannot answer for the index,
-- and each step probes ids of its own (phase), which the claim cache has
-- not seen yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE EXTENSION IF NOT EXISTS pgstattuple;
SELECT idem_namespace_define('probe', '13 hours') IS NOT NULL AS defined;
SELECT idem_generation_switch('probe') > 0 AS switched;
SELECT g.relation AS probe_rel, n.id AS probe_ns
  FROM idem_generations g, idempotency.namespaces n
 WHERE n.name = 'probe' AND g.state = 'open'
   AND g.ttl_class = floor(log(2, extract(epoch FROM interval '13 hours')))::int \gset
-- the ids; those whose key starts below 0x10 (about a sixteenth: the
-- index's first leaves) are released later
CREATE TABLE probe_ids AS
SELECT md5('probe-' || i)::uuid AS id, i % 4 AS phase,
       md5('probe-' || i)::uuid < '10000000-0000-0000-0000-000000000000' AS low
  FROM generate_series(1, 12000) i;
SELECT count(*) FILTER (WHERE low) AS low, count(*) AS ids FROM probe_ids;
INSERT INTO :probe_rel (claimed_at, ns, key) SELECT now(), :probe_ns, uuid_send(id) FROM probe_ids;
SELECT idem_generation_switch('probe') > 0 AS sealed;
SELECT state, claims FROM idem_generations WHERE relation = :'probe_rel';
-- VACUUM marks the pages all-visible unless a snapshot (autovacuum's
-- ANALYZE, say) still sees the insertion as running: then again
VACUUM :probe_rel;
SELECT relallvisible < relpages AS retry FROM pg_class WHERE oid = :'probe_rel'::regclass \gset
\if :retry
SELECT pg_sleep(1) AS slept \gset
VACUUM :probe_rel;
\endif
SELECT relallvisible = relpages AS all_visible FROM pg_class WHERE oid = :'probe_rel'::regclass;
SELECT indexrelid::regclass AS probe_idx FROM pg_index WHERE indrelid = :'probe_rel'::regclass \gset
-- more pages than one leaf: probes without fences descend from a root
SELECT pg_relation_size(:'probe_idx') / current_setting('block_size')::int > 20 AS several_leaves;

-- index pages read per probe of one phase's ids, from the statistics
CREATE FUNCTION probe_pages(rel regclass) RETURNS bigint
LANGUAGE sql AS $$
    SELECT sum(idx_blks_read + idx_blks_hit)::bigint FROM pg_statio_all_indexes WHERE relid = rel
$$;
CREATE TABLE probe_mark (pages bigint);
INSERT INTO probe_mark VALUES (0);

-- every claim of the sealed generation is a duplicate, at one index page
-- each (the statistics of what came before flushed first)
SELECT pg_stat_force_next_flush();
UPDATE probe_mark SET pages = probe_pages(:'probe_rel');
SELECT count(*) FILTER (WHERE idem_claim(id, 'probe')) AS claimed_again FROM probe_ids WHERE phase = 0;
SELECT pg_stat_force_next_flush();
SELECT round((probe_pages(:'probe_rel') - pages) / count(*), 1) AS pages_per_probe
  FROM probe_mark, probe_ids WHERE phase = 0 GROUP BY pages;

-- release the low ids, which empties the first leaves, and let VACUUM
-- delete those: the fences still point there, and the descent answers
SELECT count(*) FILTER (WHERE idem_release(id, 'probe')) AS released FROM probe_ids WHERE low;
VACUUM :probe_rel;
SELECT relallvisible < relpages AS retry FROM pg_class WHERE oid = :'probe_rel'::regclass \gset
\if :retry
SELECT pg_sleep(1) AS slept \gset
VACUUM :probe_rel;
\endif
SELECT deleted_pages > 0 AS leaves_deleted FROM pgstatindex(:'probe_idx');
SELECT pg_stat_force_next_flush();
UPDATE probe_mark SET pages = probe_pages(:'probe_rel');
SELECT count(*) FILTER (WHERE idem_claim(id, 'probe')) AS claimed_again FROM probe_ids WHERE phase = 1 AND NOT low;
SELECT pg_stat_force_next_flush();
SELECT round((probe_pages(:'probe_rel') - pages) / count(*), 1) AS pages_per_probe
  FROM probe_mark, probe_ids WHERE phase = 1 AND NOT low GROUP BY pages;
SELECT count(*) FILTER (WHERE idem_claim(id, 'probe')) AS low_claimed_anew,
       count(*) FILTER (WHERE idem_claimed(id, 'probe')) AS claimed_now
  FROM probe_ids WHERE low;
SELECT count(*) AS low_left_here FROM :probe_rel WHERE key < '\x10'::bytea;

-- REINDEX gives the index a new file: new fences, the same answers
SELECT pg_relation_filenode(:'probe_idx') AS filenode_before \gset
REINDEX INDEX :probe_idx;
SELECT pg_relation_filenode(:'probe_idx') <> :filenode_before AS new_file;
SELECT pg_stat_force_next_flush();
UPDATE probe_mark SET pages = probe_pages(:'probe_rel');
SELECT count(*) FILTER (WHERE idem_claim(id, 'probe')) AS claimed_again FROM probe_ids WHERE phase = 2 AND NOT low;
SELECT pg_stat_force_next_flush();
SELECT round((probe_pages(:'probe_rel') - pages) / count(*), 1) AS pages_per_probe
  FROM probe_mark, probe_ids WHERE phase = 2 AND NOT low GROUP BY pages;

-- REINDEX CONCURRENTLY builds a new index and swaps it in
SELECT :'probe_idx'::regclass::oid AS index_before \gset
REINDEX INDEX CONCURRENTLY :probe_idx;
SELECT indexrelid::regclass AS probe_idx FROM pg_index WHERE indrelid = :'probe_rel'::regclass \gset
SELECT :'probe_idx'::regclass::oid <> :index_before AS new_index;
SELECT pg_stat_force_next_flush();
UPDATE probe_mark SET pages = probe_pages(:'probe_rel');
SELECT count(*) FILTER (WHERE idem_claim(id, 'probe')) AS claimed_again FROM probe_ids WHERE phase = 3 AND NOT low;
SELECT pg_stat_force_next_flush();
SELECT round((probe_pages(:'probe_rel') - pages) / count(*), 1) AS pages_per_probe
  FROM probe_mark, probe_ids WHERE phase = 3 AND NOT low GROUP BY pages;
SELECT bt_index_parent_check(:'probe_idx', true);

-- every id is a duplicate, and new ids are new
SELECT count(*) FILTER (WHERE idem_claim(id, 'probe')) AS claimed_again FROM probe_ids;
SELECT count(*) FILTER (WHERE idem_claim(md5('probe-new-' || i)::uuid, 'probe')) AS new_claimed,
       count(*) FILTER (WHERE idem_claim(md5('probe-new-' || i)::uuid, 'probe')) AS claimed_twice
  FROM generate_series(1, 1000) i;

DROP TABLE probe_mark, probe_ids;
DROP FUNCTION probe_pages(regclass);
