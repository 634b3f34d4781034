# bench/purge.sh: the purge benchmark, sourced by bench/run.
#
#  1. Throughput: the worker purges a backlog of PURGE_N expired claims;
#     rows per second from its own record in idempotency.purge_runs.
#  2. Latency: claims' p99 (pgbench -M prepared, per-transaction log) with
#     the purge paused, then with it running a round every second: first
#     through a backlog of PURGE_LAT_N rows, then through the claims the
#     load itself makes, which expire after 10 s, vacuuming after each
#     round; PURGE_LAT_ROUNDS such pairs of PURGE_LAT_SECS phases,
#     alternating, each p99 over the pooled phases of its kind, so that the
#     machine's drift between two phases weighs less.
#  3. Steady state: a sustained claim load with a TTL of STEADY_TTL seconds
#     for STEADY_CYCLES TTLs; then the store's size on disk against the size
#     of its live rows packed into a fresh table and index.

purge_backlog() {
    # expired claims, written straight into the table: faster than claiming
    psql_q -c "INSERT INTO idempotency.claims (claimed_at, ns, key)
               SELECT now() - interval '1 day',
                      (SELECT id FROM idempotency.namespaces WHERE name = 'bench_backlog'),
                      uuid_send(gen_random_uuid())
                 FROM generate_series(1, $1)"
}

purge_set() {
    psql_q -c "ALTER SYSTEM SET $1 = '$2'" -c "SELECT pg_reload_conf()" >/dev/null
}

# p99 and mean latency in ms of a pgbench per-transaction log directory
purge_latency() {
    cat "$1"/pgbench_log.* | awk '{ print $3 / 1000.0 }' | sort -n |
        awk '{ v[NR] = $1; s += $1 } END { i = int(NR * 0.99); if (i < 1) i = 1;
              printf "%.3f %.3f %d\n", v[i], s / NR, NR }'
}

purge_pgbench() {
    local dir=$1 secs=$2 rate=${3:-}
    rm -rf "$dir"; mkdir_pg "$dir"
    (cd "$dir" && as_pg pgbench -n -M prepared -c "${PURGE_CLIENTS:-2}" -j 2 -T "$secs" \
        ${rate:+-R "$rate"} -l -f "$IDEM_ROOT/bench/purge_claim.pgbench" postgres >/dev/null 2>&1)
}

bench_purge() {
    local n=${PURGE_N:-1000000} lat_secs=${PURGE_LAT_SECS:-6}
    local lat_n=${PURGE_LAT_N:-600000} lat_rounds=${PURGE_LAT_ROUNDS:-5} r
    local ttl=${STEADY_TTL:-10} cycles=${STEADY_CYCLES:-6} rate=${STEADY_RATE:-1500}

    say "purge: $n-row backlog, $lat_rounds pairs of ${lat_secs}s latency phases, $cycles cycles of a ${ttl}s TTL" >&2
    psql_q -c "SELECT idem_namespace_define('bench_backlog', '1 hour'),
                      idem_namespace_define('bench_lat', '1 day'),
                      idem_namespace_define('bench_steady', '$ttl seconds')" >/dev/null
    purge_set idempotency.purge_interval 1s

    # 1. throughput
    purge_set idempotency.purge_enabled off
    psql_q -c "TRUNCATE idempotency.claims, idempotency.purge_runs" >/dev/null
    purge_backlog "$n"
    psql_q -c "VACUUM ANALYZE idempotency.claims" -c "CHECKPOINT" >/dev/null
    purge_set idempotency.purge_max_runtime 600s
    purge_set idempotency.purge_enabled on
    until [ "$(psql_q -c "SELECT count(*) FROM idem_purge_runs WHERE rows_deleted > 0")" -gt 0 ]; do sleep 1; done
    local thr_rows thr_secs
    read -r thr_rows thr_secs < <(psql_q -F ' ' -c "
        SELECT rows_deleted, extract(epoch FROM duration)
          FROM idem_purge_runs WHERE rows_deleted > 0 ORDER BY started_at LIMIT 1")
    printf '  throughput measured\n' >&2

    # 2. latency: paused, then purging a backlog, in alternating rounds
    local busy=0 b
    mkdir_pg "$WORK/lat_off"; mkdir_pg "$WORK/lat_on"
    for r in $(seq 1 "$lat_rounds"); do
        purge_set idempotency.purge_enabled off
        sleep 1
        purge_backlog "$lat_n"
        psql_q -c "VACUUM ANALYZE idempotency.claims" -c "CHECKPOINT" >/dev/null
        purge_pgbench "$WORK/lat_off_$r" "$lat_secs"
        psql_q -c "DELETE FROM idempotency.purge_runs" >/dev/null
        purge_set idempotency.purge_enabled on
        purge_pgbench "$WORK/lat_on_$r" "$lat_secs"
        b=$(psql_q -c "SELECT coalesce(sum(rows_deleted), 0) FROM idempotency.purge_runs")
        busy=$((busy + b))
        cat "$WORK/lat_off_$r"/pgbench_log.* > "$WORK/lat_off/pgbench_log.$r"
        cat "$WORK/lat_on_$r"/pgbench_log.* > "$WORK/lat_on/pgbench_log.$r"
        until [ "$(psql_q -c "SELECT count(*) FROM idempotency.claims WHERE claimed_at < now() - interval '1 hour'")" -eq 0 ]; do sleep 1; done
    done
    read -r p99_off mean_off n_off < <(purge_latency "$WORK/lat_off")
    read -r p99_on mean_on n_on < <(purge_latency "$WORK/lat_on")
    printf '  latency measured\n' >&2

    # 3. steady state under a sustained load with a short TTL
    until [ "$(psql_q -c "SELECT count(*) FROM idempotency.claims")" -lt 1000 ]; do sleep 1; done
    psql_q -c "TRUNCATE idempotency.claims" -c "VACUUM idempotency.claims" >/dev/null
    purge_pgbench "$WORK/steady" $((ttl * cycles)) "$rate"
    local sizes
    sizes=$(psql_q -F ' ' -c "
        CREATE TEMP TABLE live AS SELECT * FROM idempotency.claims
         WHERE claimed_at > now() - interval '$ttl seconds';
        ALTER TABLE live ADD PRIMARY KEY (key, ns);
        SELECT pg_total_relation_size('idempotency.claims'),
               pg_total_relation_size('live'),
               (SELECT count(*) FROM live),
               (SELECT count(*) FROM idempotency.claims)")
    read -r store_bytes live_bytes live_rows all_rows <<<"$sizes"
    printf '  steady state measured\n' >&2

    psql_q <<SQL
\\pset tuples_only off
\\pset format aligned
\\pset footer off
SELECT 'worker purge of a backlog' AS "purge",
       $thr_rows AS rows,
       round($thr_secs::numeric, 2) AS seconds,
       round(($thr_rows / $thr_secs)::numeric) AS "rows/s",
       '>= 100000' AS bar,
       CASE WHEN $thr_rows / $thr_secs >= 100000 THEN 'PASS' ELSE 'MISS' END AS result;

SELECT 'claim latency (pgbench, ${PURGE_CLIENTS:-2} clients, ${lat_rounds}x${lat_secs}s each)' AS "latency",
       round($p99_off::numeric, 3) AS "p99 ms, purge paused",
       round($p99_on::numeric, 3) AS "p99 ms, purge running",
       round(($p99_on / $p99_off)::numeric, 3) AS ratio,
       '<= 1.3' AS bar,
       CASE WHEN $p99_on / $p99_off <= 1.3 THEN 'PASS' ELSE 'MISS' END AS result,
       $busy AS "rows purged meanwhile";
SELECT 'means: ' || round($mean_off::numeric, 3) || ' ms paused, ' || round($mean_on::numeric, 3)
       || ' ms running; ' || $n_off || ' and ' || $n_on || ' claims' AS "latency detail";

SELECT 'steady state, ${cycles} TTLs of ${ttl}s at ${rate} claims/s' AS "steady state",
       pg_size_pretty($store_bytes::bigint) AS "store on disk",
       pg_size_pretty($live_bytes::bigint) AS "live rows packed",
       round(($store_bytes::numeric / $live_bytes), 2) AS ratio,
       '<= 1.5' AS bar,
       CASE WHEN $store_bytes::numeric / $live_bytes <= 1.5 THEN 'PASS' ELSE 'MISS' END AS result,
       $live_rows || ' live of ' || $all_rows AS rows;
SQL
}
