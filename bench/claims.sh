# bench/claims.sh: the claim benchmark, sourced by bench/run.
#
# In-server loops of N calls on 36-character UUID text ids, idem_claim
# against the PL/pgSQL INSERT ... ON CONFLICT DO NOTHING baseline, new ids
# and duplicates, median of ROUNDS rounds that alternate which side goes
# first, after a warm-up round that is not counted.  Then new ids with a
# second index on both sides (the claim's executor path), the same
# duplicates with the claim cache disabled, after a restart, and the bytes
# each claim takes on disk.

bench_claims() {
    local n=${CLAIMS_N:-300000} rounds=${CLAIMS_ROUNDS:-3} r
    local loop="SELECT count(*) FILTER (WHERE id IS NOT NULL) FROM bench_ids"
    local base="SELECT count(*) FILTER (WHERE bench_base_claim(id, 'bench')) FROM bench_ids"
    local ours="SELECT count(*) FILTER (WHERE idem_claim(id, 'bench')) FROM bench_ids"

    say "claims: $rounds rounds of $n calls" >&2
    psql_q -v n="$n" -f "$IDEM_ROOT/bench/claims.sql" >/dev/null

    timed() { psql_q -c "INSERT INTO bench_results SELECT $1, '$2', bench_time(\$q\$$3\$q\$)"; }
    base_side() {
        psql_q -c "TRUNCATE bench_base; CHECKPOINT"
        timed "$1" base_new "$base"; timed "$1" base_dup "$base"
        psql_q -c "INSERT INTO bench_results SELECT $1, 'base_bytes',
                   pg_total_relation_size('bench_base')::float8 / $n"
    }
    ours_side() {
        psql_q -c "TRUNCATE idempotency.claims; CHECKPOINT"
        timed "$1" ours_new "$ours"; timed "$1" ours_dup "$ours"
        psql_q -c "INSERT INTO bench_results SELECT $1, 'ours_bytes',
                   bench_store_bytes('total') / $n;
                   INSERT INTO bench_results SELECT $1, 'ours_heap_bytes',
                   bench_store_bytes('heap') / $n;
                   INSERT INTO bench_results SELECT $1, 'ours_index_bytes',
                   bench_store_bytes('index') / $n"
    }
    # round 0 warms shared buffers and caches up and is not counted
    for r in $(seq 0 "$rounds"); do
        timed "$r" loop "$loop"
        if [ $((r % 2)) -eq 1 ]; then base_side "$r"; ours_side "$r"; else ours_side "$r"; base_side "$r"; fi
        printf '  round %d done\n' "$r" >&2
    done

    # new ids with a second index on both sides: the claim then goes
    # through the executor's ExecInsertIndexTuples instead of one direct
    # index_insert, which is what this measures; the index goes on the
    # open generation, where the claims go
    psql_q -c "DO \$\$ BEGIN
                 EXECUTE format('CREATE INDEX bench_claims_at ON %s (claimed_at)',
                                (SELECT relation FROM idem_generations WHERE state = 'open'));
               END \$\$;
               CREATE INDEX bench_base_at ON bench_base (claimed_at)"
    for r in $(seq 0 "$rounds"); do
        if [ $((r % 2)) -eq 1 ]; then
            psql_q -c "TRUNCATE bench_base; CHECKPOINT"; timed "$r" base_new2 "$base"
            psql_q -c "TRUNCATE idempotency.claims; CHECKPOINT"; timed "$r" ours_new2 "$ours"
        else
            psql_q -c "TRUNCATE idempotency.claims; CHECKPOINT"; timed "$r" ours_new2 "$ours"
            psql_q -c "TRUNCATE bench_base; CHECKPOINT"; timed "$r" base_new2 "$base"
        fi
    done
    psql_q -c "DROP INDEX idempotency.bench_claims_at; DROP INDEX bench_base_at"

    # duplicates that miss the cache: restart without it
    cluster_stop
    cluster_conf "idempotency.claim_cache_size = 0"
    cluster_start
    for r in $(seq 0 "$rounds"); do
        timed "$r" base_dup_nocache "$base"
        timed "$r" ours_dup_nocache "$ours"
    done
    sed -i '/^idempotency.claim_cache_size = 0$/d' "$PGDATA_DIR/postgresql.conf"
    cluster_restart

    psql_q -v n="$n" -v rounds="$rounds" <<'SQL'
\pset tuples_only off
\pset format aligned
\pset footer off
WITH m AS (
    SELECT what, percentile_cont(0.5) WITHIN GROUP (ORDER BY usec) AS v
      FROM bench_results WHERE round > 0 GROUP BY what),
v AS (SELECT jsonb_object_agg(what, v) AS j FROM m),
rows AS (
    SELECT 1 AS o, 'new ids' AS case_, (j->>'ours_new')::float8 / :n AS ours,
           (j->>'base_new')::float8 / :n AS base, 0.4 AS bar FROM v
    UNION ALL
    SELECT 2, 'duplicates', (j->>'ours_dup')::float8 / :n,
           (j->>'base_dup')::float8 / :n, 0.2 FROM v
    UNION ALL
    SELECT 3, 'duplicates, claim cache off', (j->>'ours_dup_nocache')::float8 / :n,
           (j->>'base_dup_nocache')::float8 / :n, NULL FROM v
    UNION ALL
    SELECT 4, 'new ids, a second index on both sides', (j->>'ours_new2')::float8 / :n,
           (j->>'base_new2')::float8 / :n, NULL FROM v
    UNION ALL
    SELECT 5, 'loop alone (no claim)', (j->>'loop')::float8 / :n, NULL, NULL FROM v)
SELECT case_ AS "per call",
       round(ours::numeric, 2) AS "idem_claim us",
       round(base::numeric, 2) AS "baseline us",
       round((ours / base)::numeric, 3) AS ratio,
       coalesce('<= ' || bar, '') AS bar,
       CASE WHEN bar IS NULL THEN '' WHEN ours / base <= bar THEN 'PASS' ELSE 'MISS' END AS result
  FROM rows ORDER BY o;

WITH m AS (
    SELECT what, percentile_cont(0.5) WITHIN GROUP (ORDER BY usec) AS v
      FROM bench_results WHERE round > 0 GROUP BY what)
SELECT 'bytes per claim' AS "storage (heap + index)",
       round((SELECT v FROM m WHERE what = 'ours_bytes')::numeric) AS idem_claim,
       round((SELECT v FROM m WHERE what = 'ours_heap_bytes')::numeric) AS "of which heap",
       round((SELECT v FROM m WHERE what = 'ours_index_bytes')::numeric) AS "of which index",
       round((SELECT v FROM m WHERE what = 'base_bytes')::numeric) AS baseline,
       round(((SELECT v FROM m WHERE what = 'ours_bytes') /
              (SELECT v FROM m WHERE what = 'base_bytes'))::numeric, 2) AS ratio;
SQL
}
