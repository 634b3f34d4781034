# bench/strategies.sh: the seed articles' strategies side by side, sourced
# by bench/run.
#
# One C client (bench/consumer.c, libpq and hiredis) runs every strategy
# on the same at-least-once stream at 1, 4, 8 and 16 consumers, then once
# more at 8 consumers with a fault injected halfway: Redis restarted
# without its data, and PostgreSQL stopped in immediate mode and started
# again.  Each run reports events per second, p50 and p99 latency, and
# events applied twice or lost, against exactly once.  The pairs the bars
# compare also run at the same time (consumer --pair), so that both see the
# same noise: those ratios are medians over rounds of such paired runs.
# Writes the tables to stdout (bench/results.md) and bench/throughput.png.
#
# Environment: STRAT_EVENTS (deliveries per single-event run, 10000),
# STRAT_BATCH_EVENTS (deliveries per batched run, 100000), STRAT_DUP (the
# duplicate ratio, 0.3), STRAT_CONSUMERS ("1 4 8 16"),
# STRAT_FAULT_CONSUMERS (8), STRAT_BATCH (100), STRAT_ACCOUNTS (100000),
# STRAT_ROUNDS (paired runs of idem_claim and idem_claim_many against the
# unique table, the median kept; 3).

SINGLE=(naive unique redis redis_unique idem cas_sql cas)
BATCHED=(unique_batch idem_many redis_pipe unique_batch_only idem_many_only redis_pipe_only)

# start_redis: a private redis-server on loopback, no persistence
start_redis() {
    REDIS_PORT=$(free_port)
    cat > "$WORK/redis-start" <<SH
#!/bin/sh
exec redis-server --port $REDIS_PORT --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize yes --pidfile $WORK/redis.pid --logfile $WORK/redis.log --dir $WORK
SH
    cat > "$WORK/fault-redis" <<SH
#!/bin/sh
# Redis restarted, losing its data
redis-cli -p $REDIS_PORT shutdown nosave >/dev/null 2>&1
while redis-cli -p $REDIS_PORT ping >/dev/null 2>&1; do sleep 0.05; done
$WORK/redis-start
until redis-cli -p $REDIS_PORT ping >/dev/null 2>&1; do sleep 0.05; done
SH
    cat > "$WORK/fault-pg" <<SH
#!/bin/sh
# PostgreSQL stopped in immediate mode, then started: crash recovery
${RUNAS[*]} env PATH="$PATH" pg_ctl -D "$PGDATA_DIR" -m immediate -w stop >/dev/null
${RUNAS[*]} env PATH="$PATH" pg_ctl -D "$PGDATA_DIR" -l "$WORK/postgres.log" -w start >/dev/null
SH
    chmod 755 "$WORK/redis-start" "$WORK/fault-redis" "$WORK/fault-pg"
    "$WORK/redis-start"
    until redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; do sleep 0.05; done
}

stop_redis() { redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true; }

bench_strategies() {
    local events=${STRAT_EVENTS:-10000} bevents=${STRAT_BATCH_EVENTS:-100000}
    local dup=${STRAT_DUP:-0.3} batch=${STRAT_BATCH:-100}
    local accounts=${STRAT_ACCOUNTS:-100000} rounds=${STRAT_ROUNDS:-3}
    local fault_consumers=${STRAT_FAULT_CONSUMERS:-8} consumers s c r run=0
    local tsv="$WORK/strategies.tsv" incdir libdir
    read -r -a consumers <<< "${STRAT_CONSUMERS:-1 4 8 16}"

    say "strategies: ${#SINGLE[@]} single-event ($events deliveries) and ${#BATCHED[@]} batched ($bevents) strategies at ${consumers[*]} consumers, $dup duplicates; faults at $fault_consumers" >&2
    incdir=$("$PG_CONFIG" --includedir)
    libdir=$("$PG_CONFIG" --libdir)
    gcc -O2 -std=gnu11 -Wall -Wextra -Werror -pthread -I"$incdir" \
        -o "$WORK/consumer" "$IDEM_ROOT/bench/consumer.c" -L"$libdir" -lpq -lhiredis \
        || die "cannot build bench/consumer.c"
    psql_q -f "$IDEM_ROOT/bench/strategies.sql" >/dev/null
    start_redis
    : > "$tsv"

    one() {   # one strategy consumers fault-label [fault-cmd [paired-strategy]]
        local out n=$events args=()
        case " ${BATCHED[*]} " in *" $1 "*) n=$bevents ;; esac
        run=$((run + 1))
        psql_q -c "CALL bench_strategies_reset($accounts, $n)" \
               -c "VACUUM ANALYZE accounts, ledger, processed, processed_naive, orders_sql, orders_cas, idempotency.claims" \
               -c "CHECKPOINT" >/dev/null
        redis-cli -p "$REDIS_PORT" flushall >/dev/null
        [ -n "${4:-}" ] && args+=(--fault-cmd "$4")
        [ -n "${5:-}" ] && args+=(--pair "$5")
        out=$("$WORK/consumer" --strategy "$1" --consumers "$2" --events "$n" \
              --dup-ratio "$dup" --batch "$batch" --accounts "$accounts" --seed 42 \
              --pg "host=$PGHOST port=$PGPORT user=postgres dbname=postgres" \
              --redis-port "$REDIS_PORT" --namespace "bench_r$run" --fault "$3" "${args[@]}") \
            || die "consumer failed: $1 $2 $3"
        printf '%s\n' "$out" >> "$tsv"
        awk -F'\t' '{ printf "  %-17s %2s consumers  %-6s %8s ev/s  p99 %7s ms  twice %s  lost %s\n", $1, $2, $3, $7, $9, $10, $11 }' \
            <<< "$out" >&2
    }
    for c in "${consumers[@]}"; do
        for s in "${SINGLE[@]}" "${BATCHED[@]}"; do one "$s" "$c" none; done
        # the bars: pairs run at the same time, alternating which goes first
        for r in $(seq 1 "$rounds"); do
            if [ $((r % 2)) -eq 1 ]; then
                one unique "$c" paired "" idem; one unique_batch "$c" paired "" idem_many
            else
                one idem "$c" paired "" unique; one idem_many "$c" paired "" unique_batch
            fi
        done
        one unique_batch_only "$c" paired "" idem_many_only
        one redis_pipe "$c" paired "" idem_many
        one redis_pipe_only "$c" paired "" idem_many_only
        one cas_sql "$c" paired "" cas
    done
    for s in "${SINGLE[@]}" "${BATCHED[@]:0:3}"; do
        one "$s" "$fault_consumers" redis "$WORK/fault-redis"
        one "$s" "$fault_consumers" pg "$WORK/fault-pg"
    done
    stop_redis

    perl "$IDEM_ROOT/bench/strategies_report.pl" "$tsv" "$IDEM_ROOT/bench/throughput.png" \
        "duplicates $dup, $accounts accounts, batches of $batch, $rounds paired runs for the first two bars (median)"
}
