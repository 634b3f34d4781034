# bench/scale.sh: how the cost of claims and of reclaiming grows with the
# store, sourced by bench/run.  Opt-in (bench/run scale): it builds a store
# of 30M claims and a baseline of the same size, some 10 GB and 30 minutes.
#
# For each size in SCALE_SIZES (live claims, 7-day TTL; default 0, 1M, 10M
# and 30M) the store is grown to that size on both sides with the same ids,
# in generations of generation_max_claims, then given an empty open
# generation, vacuumed, analyzed and checkpointed, and both sides' files
# read into the OS cache (scale_os_cache); then:
#
#  1. New ids: SCALE_N calls of idem_claim on fresh UUID ids against the
#     baseline's PL/pgSQL INSERT ... ON CONFLICT DO NOTHING (bench/claims.sql)
#     on a table of the same size; median of SCALE_ROUNDS rounds, sides
#     alternating, after a warm-up round.  The open generation grows by
#     SCALE_N a round from empty at every size, and is switched between
#     rounds once it holds generation_max_claims, as the worker would
#     (idem_purge(), untimed; the worker is off), so that the sizes differ
#     in their sealed generations alone.  In the same rounds, in turn with
#     the two, the same loop on an empty store (database scale_empty, made
#     anew for each size): the store-size bar compares those two.
#  2. Old duplicates: SCALE_N ids drawn at random from the whole store, so
#     almost none is in the claim cache, against the baseline on the same
#     ids.
#  3. Reclaiming, seven times (medians: its times are milliseconds):
#     SCALE_EXPIRED (1M) expired claims are added beside the live ones in a
#     generation of their own, sealed (timed, with its WAL) and
#     checkpointed; then idem_purge() (its shared buffers hit and read, and
#     its WAL, from EXPLAIN (ANALYZE, BUFFERS, WAL)) and the VACUUM of
#     idempotency.claims a worker round would run (none is needed), per
#     expired claim; the space given back against what the expired
#     generation took; then a round with nothing to reclaim.  At the
#     largest size, in turn with the same on a store of 1M live claims
#     (database scale_1m), which the bar on a round's time compares it
#     with.
#  4. Steady state with generations (scale_steady), its store sampled in
#     the steady class's relations alone (scale_class_rows).
#
# The bars are issue 12's.  Timings are in-server (no client round trip).
# As root, the cluster runs the suite on huge pages (scale_huge_pages).

scale_vacuum_all() {    # idempotency.claims and every generation of it
    psql_q <<'SQL' >/dev/null
VACUUM ANALYZE idempotency.claims;
SELECT format('VACUUM ANALYZE %s', inhrelid::regclass) FROM pg_inherits
 WHERE inhparent = 'idempotency.claims'::regclass \gexec
SQL
}

# Both sides' tables and indexes read into the operating system's cache
# (pg_prewarm's 'read', which leaves shared_buffers alone), as on a server
# that has served them for a while: the build leaves in that cache what it
# wrote last (the baseline, grown after the store), and a loop that read
# the rest from disk would time the disk.
scale_os_cache() {
    psql_q <<'SQL' >/dev/null
CREATE EXTENSION IF NOT EXISTS pg_prewarm;
SELECT sum(pg_prewarm(c.oid, 'read'))
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind IN ('r', 'i')
   AND (n.nspname = 'idempotency' OR c.oid = 'bench_base'::regclass
        OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'bench_base'::regclass));
SQL
}

# Each timed loop starts after a CHECKPOINT, so that no loop pays for
# writing out the pages another loop dirtied (the baseline's new ids dirty
# a leaf of its index each).
# The query runs in database $SCALE_DB (default postgres); its time is
# recorded in postgres.
scale_timed() {     # size round what query
    local t
    t=$(psql_q -d "${SCALE_DB:-postgres}" -c "CHECKPOINT" -c "SELECT bench_time(\$q\$$4\$q\$)")
    psql_q -c "INSERT INTO scale_results VALUES ($1, $2, '$3', $t)"
}

# A database made anew, with the bench's functions and an empty store
scale_fresh_db() {  # name
    psql_q -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null
    psql_q -d "$1" -f "$IDEM_ROOT/bench/common.sql" >/dev/null
    psql_q -d "$1" -f "$IDEM_ROOT/bench/scale.sql" >/dev/null
}

# Fresh ids for the next new-id loops, in both databases
scale_new_ids() {   # n
    local db
    for db in postgres scale_empty; do
        psql_q -d "$db" -c "TRUNCATE scale_ids" \
               -c "INSERT INTO scale_ids SELECT gen_random_uuid()::text FROM generate_series(1, $1)"
    done
}

scale_loops() {     # size rounds n
    local s=$1 rounds=$2 n=$3 r
    local ours_new="SELECT count(*) FILTER (WHERE idem_claim(id, 'scale_live')) FROM scale_ids"
    local base_new="SELECT count(*) FILTER (WHERE bench_base_claim(id, 'scale')) FROM scale_ids"
    for r in $(seq 0 "$rounds"); do
        # the switch the worker makes once the open generation reaches
        # generation_max_claims (the worker is off, to leave the loops alone
        # on the machine): so every generation has the bound's geometry,
        # and shares a stripe with the others
        psql_q -c "SELECT idem_purge()" >/dev/null
        psql_q -d scale_empty -c "SELECT idem_purge()" >/dev/null
        scale_new_ids "$n"
        # the three loops in turn: the store, the empty store, the baseline
        case $((r % 3)) in
            0) scale_timed "$s" "$r" ours_new "$ours_new"
               SCALE_DB=scale_empty scale_timed "$s" "$r" empty_new "$ours_new"
               scale_timed "$s" "$r" base_new "$base_new" ;;
            1) SCALE_DB=scale_empty scale_timed "$s" "$r" empty_new "$ours_new"
               scale_timed "$s" "$r" base_new "$base_new"
               scale_timed "$s" "$r" ours_new "$ours_new" ;;
            2) scale_timed "$s" "$r" base_new "$base_new"
               scale_timed "$s" "$r" ours_new "$ours_new"
               SCALE_DB=scale_empty scale_timed "$s" "$r" empty_new "$ours_new" ;;
        esac
        if [ "$s" -gt 0 ]; then
            # ids of the store, at random: the same ids on both sides
            psql_q -c "TRUNCATE scale_ids" \
                   -c "INSERT INTO scale_ids SELECT scale_live_id(1 + floor(random() * $s)::bigint)::text
                         FROM generate_series(1, $n)"
            if [ $((r % 2)) -eq 1 ]; then
                scale_timed "$s" "$r" base_dup "$base_new"; scale_timed "$s" "$r" ours_dup "$ours_new"
            else
                scale_timed "$s" "$r" ours_dup "$ours_new"; scale_timed "$s" "$r" base_dup "$base_new"
            fi
        fi
    done
}

scale_reclaim() {   # size expired round
    local s=$1 e=$2 r=$3 out lsn0 lsn1 t0 t1 db=${SCALE_DB:-postgres}
    # a pass first, unmeasured: the loops grew the live class's open
    # generation past generation_max_claims, and its switch and seal (which
    # the worker would have done meanwhile) are not the reclaim's
    psql_q -d "$db" -c "SELECT idem_purge()" >/dev/null
    psql_q -d "$db" -c "SELECT scale_expired($e)" >/dev/null
    # the seal: paid once per generation, when it stops taking claims
    lsn0=$(psql_q -d "$db" -c "SELECT pg_current_wal_insert_lsn()")
    t0=$(date +%s%N)
    psql_q -d "$db" -c "SELECT idem_generation_switch('scale_exp')" >/dev/null
    t1=$(date +%s%N)
    lsn1=$(psql_q -d "$db" -c "SELECT pg_current_wal_insert_lsn()")
    psql_q -d "$db" -c "INSERT INTO scale_results VALUES
               ($s, $r, 'seal_ms', ($t1 - $t0) / 1e6),
               ($s, $r, 'seal_wal', pg_wal_lsn_diff('$lsn1', '$lsn0'))"
    psql_q -d "$db" -c "VACUUM ANALYZE idempotency.claims" -c "CHECKPOINT" >/dev/null
    psql_q -d "$db" -c "INSERT INTO scale_results SELECT $s, $r, 'bytes_before', bench_store_bytes('total')"
    # the relations that hold the expired claims, which the purge should give back whole
    psql_q -d "$db" -c "INSERT INTO scale_results
               SELECT $s, $r, 'bytes_expired', coalesce(sum(pg_total_relation_size(relation::regclass)), 0)
                 FROM idem_generations
                WHERE state = 'sealed' AND expires_at < now()"
    psql_q -d "$db" -c "INSERT INTO scale_results
               SELECT $s, $r, k, (p->>f)::float8
                 FROM scale_explain('SELECT idem_purge()') p,
                      (VALUES ('purge_ms', 'Actual Total Time'), ('purge_hit', 'Shared Hit Blocks'),
                              ('purge_read', 'Shared Read Blocks'), ('purge_wal', 'WAL Bytes')) m(k, f)"
    # the VACUUM a worker round runs after deleting from idempotency.claims
    # itself; generations need none, but it is measured all the same
    # (timed by psql in its session: the command alone, without the start
    # of a psql process and a backend, which cost as much again)
    lsn0=$(psql_q -d "$db" -c "SELECT pg_current_wal_insert_lsn()")
    out=$(psql_q -d "$db" -c '\timing on' -c "VACUUM (VERBOSE) idempotency.claims" 2>&1)
    lsn1=$(psql_q -d "$db" -c "SELECT pg_current_wal_insert_lsn()")
    local vac_ms
    vac_ms=$(printf '%s\n' "$out" | awk '/^Time: / { t = $2 } END { print t + 0 }')
    # every "buffer usage: H hits, M misses, D dirtied" line of the table, its index and TOAST
    local bufs
    bufs=$(printf '%s\n' "$out" | awk '/buffer usage:/ { for (i = 1; i <= NF; i++) if ($(i+1) ~ /^(hits|misses),?$/) s += $i } END { print s + 0 }')
    psql_q -d "$db" -c "INSERT INTO scale_results VALUES
               ($s, $r, 'vacuum_ms', $vac_ms),
               ($s, $r, 'vacuum_bufs', $bufs),
               ($s, $r, 'vacuum_wal', pg_wal_lsn_diff('$lsn1', '$lsn0'))"
    psql_q -d "$db" -c "INSERT INTO scale_results SELECT $s, $r, 'bytes_after', bench_store_bytes('total')"
    psql_q -d "$db" -c "INSERT INTO scale_results
               SELECT $s, $r, k, (p->>f)::float8
                 FROM scale_explain('SELECT idem_purge()') p,
                      (VALUES ('empty_ms', 'Actual Total Time'), ('empty_hit', 'Shared Hit Blocks'),
                              ('empty_read', 'Shared Read Blocks')) m(k, f)"
}

# A database whose store holds 1M live claims, reclaimed in the same
# rounds as the largest store: the bar on a round's time compares the two,
# not times taken half an hour apart.  Its results go to the main
# database's scale_results as the largest size's r1m_* rows.
scale_reclaim_pair() {  # size expired rounds chunk
    local s=$1 e=$2 rounds=$3 chunk=$4 r
    scale_fresh_db scale_1m
    psql_q -d scale_1m -c "SELECT scale_grow(0, 1000000, $chunk)" >/dev/null
    psql_q -d scale_1m -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null
    for r in $(seq 1 "$rounds"); do
        if [ $((r % 2)) -eq 1 ]; then
            scale_reclaim "$s" "$e" "$r"; SCALE_DB=scale_1m scale_reclaim "$s" "$e" "$r"
        else
            SCALE_DB=scale_1m scale_reclaim "$s" "$e" "$r"; scale_reclaim "$s" "$e" "$r"
        fi
    done >/dev/null
    psql_q -d scale_1m -c "COPY (SELECT size, round, 'r1m_' || what, v FROM scale_results) TO STDOUT" |
        psql_q -c "COPY scale_results FROM STDIN"
    psql_q -c "DROP DATABASE scale_1m" >/dev/null
}

# Steady state: a sustained claim load at SCALE_STEADY_RATE claims/s for
# 3 TTLs of SCALE_STEADY_TTL seconds (generation_min_ttl lowered so that
# such a TTL gets generations, and the worker running a round a second);
# the store's rows against its live ones, sampled every 2 s after the
# first TTL and a span.  Prints "max_ratio mean_ratio samples".
scale_steady() {
    local ttl=${SCALE_STEADY_TTL:-20} rate=${SCALE_STEADY_RATE:-1500} dir=$WORK/steady_gen
    local q="SELECT round(total::numeric / greatest(live, 1), 4) FROM scale_class_rows('scale_steady', $ttl)"
    psql_q -c "ALTER SYSTEM SET idempotency.generation_min_ttl = '10s'" \
           -c "ALTER SYSTEM SET idempotency.purge_interval = '1s'" \
           -c "ALTER SYSTEM SET idempotency.purge_enabled = on" -c "SELECT pg_reload_conf()" >/dev/null
    psql_q -c "SELECT idem_namespace_define('scale_steady', '$ttl seconds')" \
           -c "SELECT idem_generation_switch('scale_steady')" >/dev/null
    rm -rf "$dir"; mkdir_pg "$dir"
    (cd "$dir" && as_pg pgbench -n -M prepared -c 2 -j 2 -T $((ttl * 3)) -R "$rate" \
        -f "$IDEM_ROOT/bench/scale_claim.pgbench" postgres >/dev/null 2>&1) &
    local pid=$! t=0 samples=()
    while kill -0 "$pid" 2>/dev/null; do
        sleep 2; t=$((t + 2))
        [ "$t" -gt $((ttl + ttl / 4 + 2)) ] && samples+=("$(psql_q -c "$q")")
    done
    wait "$pid" || true
    psql_q -c "ALTER SYSTEM RESET idempotency.generation_min_ttl" \
           -c "ALTER SYSTEM RESET idempotency.purge_interval" \
           -c "ALTER SYSTEM RESET idempotency.purge_enabled" -c "SELECT pg_reload_conf()" >/dev/null
    printf '%s\n' "${samples[@]}" | awk '{ s += $1; if ($1 > m) m = $1 } END { printf "%s %.4f %d\n", m, s / NR, NR }'
}

scale_report() {    # expired n steady_max steady_mean steady_samples
    psql_q -v e="$1" -v n="$2" -v smax="$3" -v smean="$4" -v ssamples="$5" <<'SQL'
\pset tuples_only off
\pset format aligned
\pset footer off
CREATE TEMP VIEW m AS
    SELECT size, what, percentile_cont(0.5) WITHIN GROUP (ORDER BY v) AS v
      FROM scale_results WHERE round > 0 OR what NOT LIKE '%\_new' AND what NOT LIKE '%\_dup'
     GROUP BY size, what;
CREATE TEMP VIEW s AS
    SELECT size, jsonb_object_agg(what, v) AS j FROM m GROUP BY size;
SELECT to_char(size, 'FM999,999,999') AS "live claims",
       round(((j->>'ours_new')::float8 / :n)::numeric, 2) AS "new id us",
       round(((j->>'base_new')::float8 / :n)::numeric, 2) AS "baseline us",
       round(((j->>'ours_new')::float8 / (j->>'base_new')::float8)::numeric, 3) AS ratio,
       round(((j->>'empty_new')::float8 / :n)::numeric, 2) AS "empty store us",
       round(((j->>'ours_new')::float8 / (j->>'empty_new')::float8)::numeric, 3) AS "store / empty",
       round(((j->>'ours_dup')::float8 / :n)::numeric, 2) AS "old dup us",
       round(((j->>'base_dup')::float8 / :n)::numeric, 2) AS "baseline us ",
       round(((j->>'ours_dup')::float8 / (j->>'base_dup')::float8)::numeric, 3) AS "ratio "
  FROM s ORDER BY size;
\echo
SELECT to_char(size, 'FM999,999,999') AS "live claims",
       round(((j->>'purge_ms')::float8 / 1000)::numeric, 2) AS "purge s",
       round(((j->>'vacuum_ms')::float8 / 1000)::numeric, 2) AS "vacuum s",
       round((((j->>'purge_hit')::float8 + (j->>'purge_read')::float8 + (j->>'vacuum_bufs')::float8) / :e)::numeric, 3)
           AS "buffers per expired",
       round((((j->>'purge_wal')::float8 + (j->>'vacuum_wal')::float8) / :e)::numeric, 1) AS "WAL bytes per expired",
       pg_size_pretty(((j->>'bytes_before')::float8 - (j->>'bytes_after')::float8)::bigint) AS "given back",
       round(((j->>'empty_ms')::float8 / 1000)::numeric, 2) AS "empty round s",
       ((j->>'empty_hit')::float8 + (j->>'empty_read')::float8)::bigint AS "its buffers",
       round(((j->>'seal_ms')::float8 / 1000)::numeric, 2) AS "seal s",
       round(((j->>'seal_wal')::float8 / :e)::numeric, 2) AS "seal WAL bytes per claim"
  FROM s ORDER BY size;
\echo
SELECT 'steady state, 3 TTLs' AS "generations", :smax AS "max store/live rows", :smean AS "mean", :ssamples AS samples;
\echo
SELECT 'a 1M store, in the largest size''s rounds' AS "reclaim round",
       round(((j->>'r1m_purge_ms')::float8 / 1000)::numeric, 3) AS "purge s",
       round(((j->>'r1m_vacuum_ms')::float8 / 1000)::numeric, 3) AS "vacuum s",
       round(((j->>'purge_ms')::float8 / 1000)::numeric, 3) AS "largest store's purge s",
       round(((j->>'vacuum_ms')::float8 / 1000)::numeric, 3) AS "its vacuum s"
  FROM s ORDER BY size DESC LIMIT 1;
\echo
WITH big AS (SELECT j FROM s ORDER BY size DESC LIMIT 1),
     bars AS (
    SELECT 1 AS o, 'reclaiming: buffers per expired claim, largest store' AS bar,
           ((b.j->>'purge_hit')::float8 + (b.j->>'purge_read')::float8 + (b.j->>'vacuum_bufs')::float8) / :e AS v,
           0.05 AS lim, '<=' AS op FROM big b
    UNION ALL
    SELECT 2, 'reclaiming: WAL bytes per expired claim, largest store',
           ((b.j->>'purge_wal')::float8 + (b.j->>'vacuum_wal')::float8) / :e, 2, '<=' FROM big b
    UNION ALL
    SELECT 3, 'reclaiming: space given back / what the expired claims took, largest store',
           ((b.j->>'bytes_before')::float8 - (b.j->>'bytes_after')::float8)
             / nullif((b.j->>'bytes_expired')::float8, 0), 0.95, '>=' FROM big b
    UNION ALL
    SELECT 4, 'round time (purge + VACUUM), largest store / a 1M store in the same rounds',
           ((b.j->>'purge_ms')::float8 + (b.j->>'vacuum_ms')::float8)
             / ((b.j->>'r1m_purge_ms')::float8 + (b.j->>'r1m_vacuum_ms')::float8), 1.2, '<=' FROM big b
    UNION ALL
    SELECT 5, 'new id, largest store / empty store (timed in the same rounds)',
           (b.j->>'ours_new')::float8 / (b.j->>'empty_new')::float8, 1.5, '<=' FROM big b
    UNION ALL
    SELECT 6, 'new id / baseline, largest store',
           (b.j->>'ours_new')::float8 / (b.j->>'base_new')::float8, 0.45, '<=' FROM big b
    UNION ALL
    SELECT 7, 'old duplicate / baseline, largest store',
           (b.j->>'ours_dup')::float8 / (b.j->>'base_dup')::float8, 0.5, '<=' FROM big b
    UNION ALL
    SELECT 8, 'steady state: store rows / live rows, at most', :smax, 1.3, '<=')
SELECT bar, round(v::numeric, 3) AS value, op || ' ' || lim AS "bar ",
       CASE WHEN v IS NULL THEN 'n/a'
            WHEN (op = '<=' AND v <= lim) OR (op = '>=' AND v >= lim) THEN 'PASS' ELSE 'FAIL' END AS result
  FROM bars ORDER BY o;
SQL
}

scale_plot() {      # n png
    local data; data=$(mktemp)
    psql_q -F ' ' -c "
        SELECT size / 1e6, ours_new / $1, base_new / $1, ours_dup / $1, base_dup / $1, empty_new / $1 FROM (
          SELECT size,
                 percentile_cont(0.5) WITHIN GROUP (ORDER BY v) FILTER (WHERE what = 'ours_new') AS ours_new,
                 percentile_cont(0.5) WITHIN GROUP (ORDER BY v) FILTER (WHERE what = 'empty_new') AS empty_new,
                 percentile_cont(0.5) WITHIN GROUP (ORDER BY v) FILTER (WHERE what = 'base_new') AS base_new,
                 percentile_cont(0.5) WITHIN GROUP (ORDER BY v) FILTER (WHERE what = 'ours_dup') AS ours_dup,
                 percentile_cont(0.5) WITHIN GROUP (ORDER BY v) FILTER (WHERE what = 'base_dup') AS base_dup
            FROM scale_results WHERE round > 0 GROUP BY size) x ORDER BY size" > "$data"
    gnuplot <<EOF
set terminal png size 800,480 noenhanced
set output '$2'
set title 'Cost per call against store size (in-server loops, median of rounds)'
set xlabel 'live claims in the store (millions)'
set ylabel 'microseconds per call'
set key top left
set grid
set datafile missing 'NaN'
plot '$data' using 1:2 with linespoints title 'idem_claim, new id', \
     '$data' using 1:3 with linespoints title 'ON CONFLICT baseline, new id', \
     '$data' using 1:4 with linespoints title 'idem_claim, old duplicate', \
     '$data' using 1:5 with linespoints title 'ON CONFLICT baseline, old duplicate', \
     '$data' using 1:6 with linespoints dashtype 2 title 'idem_claim, new id, empty store (same rounds)'
EOF
    rm -f "$data"
}

# scale_huge_pages: restart the cluster on huge pages (huge_pages = on), as
# PostgreSQL advises for shared memory this large, where this machine can
# give them: as root, vm.nr_hugepages is raised by what the cluster needs
# (shared_memory_size_in_huge_pages) and put back by scale_huge_restore.
# Every claim reads random lines of the filter arena, the claim cache and
# the buffer table; on 4 kB pages each is a TLB miss too.  SCALE_HUGE_PAGES
# = off keeps 4 kB pages.  Sets SCALE_PAGES to what the suite runs on.  The
# count to put back is kept in a file: bench/run's exit trap runs outside
# the subshell the suites run in.
scale_huge_pages() {
    local need free saved
    SCALE_PAGES="4 kB pages"
    if [ "${SCALE_HUGE_PAGES:-on}" != on ]; then
        SCALE_PAGES="4 kB pages (SCALE_HUGE_PAGES = off)"; return 0
    fi
    if [ "$(id -u)" -ne 0 ] || [ ! -w /proc/sys/vm/nr_hugepages ]; then
        say "scale: NO HUGE PAGES (not root): figures are with 4 kB pages" >&2
        SCALE_PAGES="4 kB pages (huge pages need root here)"; return 0
    fi
    cluster_stop
    need=$(as_pg postgres -D "$PGDATA_DIR" -C shared_memory_size_in_huge_pages)
    if [ "$need" -le 0 ]; then     # -1: no huge pages on this system
        cluster_start
        say "scale: NO HUGE PAGES (none on this system): figures are with 4 kB pages" >&2
        SCALE_PAGES="4 kB pages (no huge pages on this system)"; return 0
    fi
    saved=$(cat /proc/sys/vm/nr_hugepages)
    echo "$saved" > "$WORK/nr_hugepages.saved"
    free=$(scale_huge_ask $((saved + need)))
    if [ "$free" -lt "$need" ] && [ -w /proc/sys/vm/compact_memory ]; then
        # memory too fragmented for that many 2 MB pages: compact, ask again
        echo 1 > /proc/sys/vm/compact_memory
        free=$(scale_huge_ask $((saved + need)))
    fi
    if [ "$free" -lt "$need" ]; then
        scale_huge_restore
        cluster_start
        say "scale: NO HUGE PAGES (the kernel gave $free of $need): figures are with 4 kB pages" >&2
        SCALE_PAGES="4 kB pages (the kernel gave $free of $need huge pages)"; return 0
    fi
    cluster_conf "huge_pages = on"
    cluster_start
    SCALE_PAGES="huge pages ($need pages of $(awk '/^Hugepagesize/ {print $2 " " $3}' /proc/meminfo)), huge_pages = on"
}

# scale_huge_ask: set vm.nr_hugepages to n; print how many huge pages are free
scale_huge_ask() {  # n
    echo "$1" > /proc/sys/vm/nr_hugepages
    awk '/^HugePages_Free/ {print $2}' /proc/meminfo
}

# scale_huge_restore: vm.nr_hugepages as it was, if scale_huge_pages raised
# it (the cluster stopped first, or its pages go back as it stops)
scale_huge_restore() {
    [ -n "${WORK:-}" ] && [ -f "$WORK/nr_hugepages.saved" ] || return 0
    cat "$WORK/nr_hugepages.saved" > /proc/sys/vm/nr_hugepages
    rm -f "$WORK/nr_hugepages.saved"
}

bench_scale() {
    local sizes=${SCALE_SIZES:-"0 1000000 10000000 30000000"} e=${SCALE_EXPIRED:-1000000}
    local n=${SCALE_N:-100000} rounds=${SCALE_ROUNDS:-3} prev=0 s
    local chunk=${SCALE_CHUNK:-250000} steady largest

    say "scale: stores of $sizes live claims, $e expired, $rounds rounds of $n calls" >&2
    largest=$(printf '%s\n' $sizes | sort -n | tail -1)
    scale_huge_pages
    echo "Shared memory on $SCALE_PAGES."
    echo
    psql_q -f "$IDEM_ROOT/bench/scale.sql" >/dev/null
    for s in $sizes; do
        if [ "$s" -gt "$prev" ]; then
            psql_q -c "SELECT scale_grow($prev, $s, $chunk)" >/dev/null
            prev=$s
        fi
        scale_vacuum_all
        psql_q -c "VACUUM ANALYZE bench_base" -c "CHECKPOINT" >/dev/null
        scale_os_cache
        # an empty store, made anew for each size: its new ids are timed in
        # the same rounds as the store's, so that the bar comparing the two
        # does not compare times taken half an hour apart on a shared machine
        scale_fresh_db scale_empty
        scale_loops "$s" "$rounds" "$n" >/dev/null
        # the reclaim seven times (SCALE_RECLAIMS), medians reported: its
        # times are milliseconds; at the largest size, in turn with a 1M store
        if [ "$s" = "$largest" ]; then
            scale_reclaim_pair "$s" "$e" "${SCALE_RECLAIMS:-7}" "$chunk"
        else
            for r in $(seq 1 "${SCALE_RECLAIMS:-7}"); do scale_reclaim "$s" "$e" "$r" >/dev/null; done
        fi
        printf '  %s live claims done\n' "$s" >&2
    done
    steady=$(scale_steady)
    printf '  steady state measured\n' >&2
    # shellcheck disable=SC2086
    scale_report "$e" "$n" $steady
    scale_plot "$n" "$IDEM_ROOT/bench/scale.png"
    # the suites after this one on 4 kB pages again, as before it
    if [ -f "$WORK/nr_hugepages.saved" ]; then
        cluster_stop
        scale_huge_restore
        cluster_conf "huge_pages = try"
        cluster_start
    fi
}
