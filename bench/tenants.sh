# bench/tenants.sh: a database per tenant, sourced by bench/run.
#
# TENANTS_DBS databases (100) made from one template (the extension, a
# namespace of a week's TTL whose claims live in generations, the ids),
# each of which switches its generations and claims once, so that each
# has taken its shared per-database state.  Then in-server loops of
# TENANTS_N claims of new 36-character UUID ids (100000), median of
# TENANTS_ROUNDS rounds (3) after a warm-up round, in the first database
# and in the last, alternately first: the last must cost at most 1.5 times
# the first (a claim used to re-read the generation map through SPI on
# every call past the 64th database).  Then the server restarts without
# shared_preload_libraries (no shared filters, bitmaps or claim cache) and
# the same loops run in the last database: reported against the preloaded
# figure, with no bar.  A missed bar makes bench/run exit non-zero.

bench_tenants() {
    local n=${TENANTS_N:-100000} rounds=${TENANTS_ROUNDS:-3} dbs=${TENANTS_DBS:-100} i r
    local ours="SELECT count(*) FILTER (WHERE idem_claim(id, 'bench')) FROM bench_ids"

    say "tenants: $dbs databases, $rounds rounds of $n new ids" >&2
    # what an interrupted run left
    psql_q -c "DROP DATABASE IF EXISTS bench_tenant_tpl" >/dev/null 2>&1
    for i in $(seq 1 "$dbs"); do psql_q -c "DROP DATABASE IF EXISTS bench_tenant_$i" >/dev/null 2>&1; done
    psql_q -c "CREATE DATABASE bench_tenant_tpl"
    psql_q -d bench_tenant_tpl -f "$IDEM_ROOT/bench/common.sql" >/dev/null
    psql_q -d bench_tenant_tpl -v n="$n" <<'SQL' >/dev/null
SET client_min_messages = warning;
SELECT idem_namespace_define('bench', '7 days');
CREATE TABLE bench_ids AS SELECT gen_random_uuid()::text AS id FROM generate_series(1, :n);
ANALYZE bench_ids;
SQL
    for i in $(seq 1 "$dbs"); do
        psql_q -c "CREATE DATABASE bench_tenant_$i TEMPLATE bench_tenant_tpl"
        # its own open generation, and a claim: it takes its shared state
        psql_q -d "bench_tenant_$i" -c "SELECT idem_generation_switch()" \
            -c "SELECT idem_claim('warm', 'bench')" >/dev/null
    done
    psql_q -c "SET client_min_messages = warning; DROP TABLE IF EXISTS bench_tenant_results;
               CREATE TABLE bench_tenant_results (round int, what text, usec float8)"

    # one loop of new ids in database $2, recorded as $3 of round $1
    tenant_loop() {
        local t
        # the library loaded and the namespace read before the timed loop
        t=$(psql_q -d "$2" -c "TRUNCATE idempotency.claims" -c "CHECKPOINT" \
                   -c "SELECT idem_claimed('warm', 'bench')" \
                   -c "SELECT bench_time(\$q\$$ours\$q\$)" | tail -1)
        psql_q -c "INSERT INTO bench_tenant_results VALUES ($1, '$3', $t)"
    }
    for r in $(seq 0 "$rounds"); do
        if [ $((r % 2)) -eq 1 ]; then
            tenant_loop "$r" "bench_tenant_$dbs" last; tenant_loop "$r" bench_tenant_1 first
        else
            tenant_loop "$r" bench_tenant_1 first; tenant_loop "$r" "bench_tenant_$dbs" last
        fi
        printf '  round %d done\n' "$r" >&2
    done

    # without shared_preload_libraries: the library loads in each backend
    sed -i "s/^shared_preload_libraries = 'idempotency'$/#&/" "$PGDATA_DIR/postgresql.conf"
    cluster_restart
    for r in $(seq 0 "$rounds"); do tenant_loop "$r" "bench_tenant_$dbs" nopreload; done
    sed -i "s/^#\(shared_preload_libraries = 'idempotency'\)$/\1/" "$PGDATA_DIR/postgresql.conf"
    cluster_restart

    psql_q -v n="$n" -v dbs="$dbs" <<'SQL'
\pset tuples_only off
\pset format aligned
\pset footer off
WITH m AS (
    SELECT what, percentile_cont(0.5) WITHIN GROUP (ORDER BY usec) / :n AS v
      FROM bench_tenant_results WHERE round > 0 GROUP BY what),
v AS (SELECT jsonb_object_agg(what, v) AS j FROM m)
SELECT 'new ids, database ' || :dbs || ' of ' || :dbs AS "per call",
       round((j->>'last')::numeric, 2) AS "us",
       round((j->>'first')::numeric, 2) AS "database 1 us",
       round(((j->>'last')::float8 / (j->>'first')::float8)::numeric, 3) AS ratio,
       '<= 1.5' AS bar,
       CASE WHEN (j->>'last')::float8 / (j->>'first')::float8 <= 1.5 THEN 'PASS' ELSE 'MISS' END AS result
  FROM v
UNION ALL
SELECT 'new ids, no shared_preload_libraries',
       round((j->>'nopreload')::numeric, 2),
       round((j->>'first')::numeric, 2),
       round(((j->>'nopreload')::float8 / (j->>'first')::float8)::numeric, 3),
       '', ''
  FROM v;
SQL
    local missed
    missed=$(psql_q -v n="$n" <<'SQL'
WITH m AS (
    SELECT what, percentile_cont(0.5) WITHIN GROUP (ORDER BY usec) AS v
      FROM bench_tenant_results WHERE round > 0 GROUP BY what)
SELECT (SELECT v FROM m WHERE what = 'last') > 1.5 * (SELECT v FROM m WHERE what = 'first');
SQL
)
    [ "$missed" = "f" ] || echo "tenants: new ids in the last database cost more than 1.5 times the first" >> "$WORK/bench_missed"
    for i in $(seq 1 "$dbs"); do psql_q -c "DROP DATABASE bench_tenant_$i" >/dev/null; done
    psql_q -c "DROP DATABASE bench_tenant_tpl" >/dev/null
}
