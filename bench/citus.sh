# bench/citus.sh: the Citus benchmark, sourced by bench/run.
#
# The same consumer, the delegated handler of docs/citus.md (claim, then update the
# account), on one node (with idem_claim) and through a Citus coordinator
# to two workers (with idem_citus_claim, as docs/citus.md's recipe):
#  - one node: bench/run's own cluster, the handler a plain function;
#  - Citus: three more clusters on this machine, with the settings of
#    bench/run's, the handler distributed with force_delegation and
#    co-located with its table, so that each call runs on one worker.
# pgbench, CITUS_SECS seconds per phase at 4 and 16 clients, CITUS_ROUNDS
# rounds with the two sides interleaved; median throughput, and p99 over
# the pooled per-transaction logs of each side.  Deliveries are random
# events over CITUS_EVENTS ids (so some are redeliveries), each event
# always with the same account; the simple query protocol on both sides,
# since Citus delegates only calls whose distribution argument is a
# constant, and a generic plan's is a parameter.
#
# It also says where the CPU went during the last Citus phase at 16
# clients: the machine's idle share, and the share of each node's server
# processes and of pgbench, from /proc.

. "$IDEM_ROOT/scripts/citus.sh"

CITUS_PORTS=()
CITUS_DIRS=()

# citus_node name: a cluster with citus and idempotency preloaded, started
citus_node() {
    local dir=$WORK/citus-$1 port
    port=$(free_port)
    mkdir_pg "$dir"
    as_pg initdb -D "$dir/data" -U postgres -A trust --no-sync >/dev/null
    cat >> "$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
shared_preload_libraries = 'citus,idempotency'
shared_buffers = 512MB
max_wal_size = 8GB
checkpoint_timeout = 30min
wal_buffers = 16MB
max_connections = 200
max_prepared_transactions = 100
idempotency.purge_enabled = off
CONF
    as_pg pg_ctl -D "$dir/data" -l "$dir/log" -w start >/dev/null
    CITUS_DIRS+=("$dir")
    CITUS_PORTS+=("$port")
}

citus_stop_all() {
    local dir
    for dir in "${CITUS_DIRS[@]}"; do
        as_pg pg_ctl -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    done
}

# cpsql i sql...: psql on Citus node i (0 is the coordinator)
cpsql() {
    local i=$1; shift
    as_pg env PGHOST="${CITUS_DIRS[$i]}" PGPORT="${CITUS_PORTS[$i]}" psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"
}

citus_schema() {
    cat <<'SQL'
CREATE TABLE cb_accounts (id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0);
SQL
}

# citus_handler claim: the handler, claiming with claim (docs/citus.md's
# idem_citus_claim with the account's shard on Citus, idem_claim on one node)
citus_handler() {
    local claim=$1
    cat <<SQL
CREATE FUNCTION cb_handle_payment(p_account int, p_event text, p_amount bigint)
RETURNS boolean LANGUAGE plpgsql AS \$\$
BEGIN
    IF NOT $claim THEN
        RETURN false;
    END IF;
    UPDATE cb_accounts SET balance = balance + p_amount WHERE id = p_account;
    RETURN true;
END \$\$;
SQL
}

# citus_phase dir host port clients secs: one pgbench phase, per-transaction
# log in dir; prints tps
citus_phase() {
    local dir=$1 host=$2 port=$3 clients=$4 secs=$5
    rm -rf "$dir"; mkdir_pg "$dir"
    (cd "$dir" && as_pg env PGHOST="$host" PGPORT="$port" pgbench -n -M simple -c "$clients" -j 2 \
        -T "$secs" -l -f "$WORK/citus.pgbench" postgres 2>&1) |
        awk '/^tps = / { printf "%.0f\n", $3 }'
}

# cpu_snapshot: "total idle" jiffies of the machine, then "pid utime+stime"
# of every process
cpu_snapshot() {
    awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print "machine", t, $5 + $6 }' /proc/stat
    local f
    for f in /proc/[0-9]*/stat; do
        awk '{ sub(/^[0-9]+ \(.*\) /, ""); print "'"${f//[^0-9]/}"'", $12 + $13, $2 }' "$f" 2>/dev/null || true
    done
}

bench_citus() {
    ensure_citus >&2
    local events=${CITUS_EVENTS:-1000000} secs=${CITUS_SECS:-15} rounds=${CITUS_ROUNDS:-3}
    local i c r

    # one node
    psql_q -c "SELECT idem_namespace_define('bench_citus', '7 days')" >/dev/null
    { citus_schema; citus_handler "idem_claim(p_event, 'bench_citus')"; } | psql_q >/dev/null
    psql_q -c "INSERT INTO cb_accounts SELECT g FROM generate_series(1, 1000) g"

    # a coordinator and two workers
    citus_node coordinator; citus_node worker1; citus_node worker2
    # (bench/run runs the suites in a subshell, whose own EXIT trap this is)
    trap citus_stop_all EXIT
    for i in 0 1 2; do
        cpsql "$i" -c "CREATE EXTENSION citus" -c "CREATE EXTENSION idempotency"
    done
    cpsql 0 -c "SELECT citus_set_coordinator_host('${CITUS_DIRS[0]}', ${CITUS_PORTS[0]})" >/dev/null
    for i in 1 2; do
        cpsql 0 -c "SELECT citus_add_node('${CITUS_DIRS[$i]}', ${CITUS_PORTS[$i]})" >/dev/null
    done
    cpsql 0 -c "SELECT run_command_on_all_nodes(\$\$SELECT idem_namespace_define('bench_citus', '7 days')\$\$)" >/dev/null
    citus_schema | cpsql 0 >/dev/null
    cpsql 0 -c "SELECT create_distributed_table('cb_accounts', 'id')" >/dev/null
    cpsql 0 -c "INSERT INTO cb_accounts SELECT g FROM generate_series(1, 1000) g"
    citus_handler "idem_citus_claim(p_event, 'bench_citus',
                   get_shard_id_for_distribution_column('cb_accounts', p_account))" | cpsql 0 >/dev/null
    cpsql 0 -c "SELECT create_distributed_function('cb_handle_payment(int,text,bigint)',
                  distribution_arg_name := 'p_account', colocate_with := 'cb_accounts',
                  force_delegation := true)" >/dev/null

    printf '\\set e random(1, %d)\nSELECT cb_handle_payment((:e %% 1000) + 1, '"'"'ev-'"'"' || :e, 1);\n' \
        "$events" > "$WORK/citus.pgbench"
    chmod 644 "$WORK/citus.pgbench"

    echo "The same consumer on one node and through a Citus $(cpsql 0 -c "SELECT extversion FROM pg_extension WHERE extname = 'citus'")"
    echo "coordinator to two workers, all on this machine; pgbench -M simple, ${secs} s per phase,"
    echo "$rounds rounds interleaved; median tps, p99 over the pooled rounds (ms)."
    echo
    printf '%-8s %12s %10s %12s %10s %9s\n' clients "1 node tps" "p99" "Citus tps" "p99" "ratio"
    local snap_a snap_b
    for c in 4 16; do
        local one=() cit=()
        for r in $(seq 1 "$rounds"); do
            one+=("$(citus_phase "$WORK/cb-one-$c-$r" "$PGHOST" "$PGPORT" "$c" "$secs")")
            if [ "$c" -eq 16 ] && [ "$r" -eq "$rounds" ]; then
                ( sleep 2; cpu_snapshot > "$WORK/cpu.a"; sleep $(( secs - 4 )); cpu_snapshot > "$WORK/cpu.b" ) &
            fi
            cit+=("$(citus_phase "$WORK/cb-cit-$c-$r" "${CITUS_DIRS[0]}" "${CITUS_PORTS[0]}" "$c" "$secs")")
            wait
        done
        local m1 m2 p1 p2
        m1=$(printf '%s\n' "${one[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
        m2=$(printf '%s\n' "${cit[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
        p1=$(cat "$WORK"/cb-one-"$c"-*/pgbench_log.* | awk '{ print $3 / 1000.0 }' | sort -n |
             awk '{ v[NR] = $1 } END { printf "%.2f", v[int(NR * 0.99)] }')
        p2=$(cat "$WORK"/cb-cit-"$c"-*/pgbench_log.* | awk '{ print $3 / 1000.0 }' | sort -n |
             awk '{ v[NR] = $1 } END { printf "%.2f", v[int(NR * 0.99)] }')
        printf '%-8s %12s %10s %12s %10s %9.2f\n' "$c" "$m1" "$p1" "$m2" "$p2" "$(awk -v a="$m2" -v b="$m1" 'BEGIN { print a / b }')"
    done

    # the claim itself, in-server on a worker: idem_citus_claim (shard lock
    # and placement check) against idem_claim, new ids, interleaved rounds
    local shard n=${CITUS_CLAIM_N:-200000} t1 t2 ratios=()
    shard=$(cpsql 1 -c "SELECT shardid FROM pg_dist_placement
                        WHERE groupid = (SELECT groupid FROM pg_dist_local_group) ORDER BY shardid LIMIT 1")
    for r in $(seq 1 "$rounds"); do
        t1=$(cpsql 1 -c "DO \$\$ DECLARE t0 timestamptz := clock_timestamp(); n bigint;
                          BEGIN SELECT count(*) FILTER (WHERE idem_claim('q$r-' || g, 'bench_citus_loop')) INTO n
                                  FROM generate_series(1, $n) g;
                                RAISE NOTICE '%', extract(epoch FROM clock_timestamp() - t0); END \$\$" 2>&1 |
             sed -n 's/.*NOTICE:  //p')
        t2=$(cpsql 1 -c "DO \$\$ DECLARE t0 timestamptz := clock_timestamp(); n bigint;
                          BEGIN SELECT count(*) FILTER (WHERE idem_citus_claim('s$r-' || g, 'bench_citus_loop', $shard)) INTO n
                                  FROM generate_series(1, $n) g;
                                RAISE NOTICE '%', extract(epoch FROM clock_timestamp() - t0); END \$\$" 2>&1 |
             sed -n 's/.*NOTICE:  //p')
        ratios+=("$(awk -v a="$t2" -v b="$t1" 'BEGIN { printf "%.3f %.2f %.2f", a / b, 1e6 * b / '"$n"', 1e6 * a / '"$n"' }')")
    done
    echo
    printf '%s\n' "${ratios[@]}" | sort -n | awk -v n="$n" '{ v[NR] = $0 } END { split(v[int((NR + 1) / 2)], m, " ");
        printf "claims on a worker, in-server, %d new ids per loop, median of %d rounds:\n  idem_claim %.2f us, idem_citus_claim %.2f us: ratio %.3f\n", n, NR, m[2], m[3], m[1] }'

    # exactly once on both sides: each account's balance is the count of
    # its claimed events
    local dup_one dup_cit
    dup_one=$(psql_q -c "SELECT (SELECT sum(balance) FROM cb_accounts) - (SELECT count(*) FROM idem_claims WHERE namespace = 'bench_citus')")
    dup_cit=$(cpsql 0 -c "SELECT (SELECT sum(balance) FROM cb_accounts)
                          - (SELECT sum(result::bigint) FROM run_command_on_workers(
                               \$\$SELECT count(*) FROM idem_claims WHERE namespace = 'bench_citus'\$\$))")
    echo
    echo "balance minus claims (0 is exactly once): one node $dup_one, Citus $dup_cit"

    # where the CPU went in the last Citus phase at 16 clients
    local names=(coordinator worker1 worker2) pms=() k
    for i in 0 1 2; do pms+=("$(head -1 "${CITUS_DIRS[$i]}/data/postmaster.pid")"); done
    echo
    echo "CPU during the last 16-client Citus phase (share of the machine's $(nproc) CPUs):"
    awk -v pms="${pms[*]}" -v names="${names[*]}" '
        FNR == 1 { f++ }
        $1 == "machine" { tot[f] = $2; idle[f] = $3; next }
        f == 1 { a[$1] = $2; next }
        { b[$1] = $2; ppid[$1] = $3 }
        END {
            n = split(pms, pm, " "); split(names, nm, " ")
            for (i = 1; i <= n; i++) owner[pm[i]] = nm[i]
            dt = tot[2] - tot[1]
            for (p in b) {
                d = b[p] - (p in a ? a[p] : 0)
                if (p in owner) who = owner[p]
                else if (ppid[p] in owner) who = owner[ppid[p]]
                else who = "other"
                use[who] += d
            }
            for (i = 1; i <= n; i++) printf "  %-12s %5.1f%%\n", nm[i], 100 * use[nm[i]] / dt
            printf "  %-12s %5.1f%%\n", "pgbench etc.", 100 * use["other"] / dt
            printf "  %-12s %5.1f%%\n", "idle", 100 * (idle[2] - idle[1]) / dt
        }' "$WORK/cpu.a" "$WORK/cpu.b"
    citus_stop_all
    trap - EXIT
}
