# bench/streams.sh: the watermark benchmark, sourced by bench/run.
#
#  1. In-server: idem_advance against the PL/pgSQL INSERT ... ON CONFLICT
#     DO UPDATE ... WHERE stored.seq < excluded.seq baseline
#     (bench/streams.sql) on the same data: STREAMS_PAIRS (512) pairs, each
#     advanced once per round, a round one statement (its own transaction,
#     as a consumer's batches are), all rounds in one session (a consumer
#     keeps its connection); STREAMS_ROUNDS (30) rounds per side, sides
#     alternating, after 5 warm-up rounds; medians.  Then the same
#     for redeliveries (seq at the mark).
#  2. Over the wire: bench/stream_consumer.py consumes STREAMS_EVENTS (1M)
#     events of 8 partitions in batches of 100, each batch one transaction
#     with its business writes, advancing the partition's mark once per
#     batch, against the same consumer claiming each event with
#     idem_claim_many; throughput, and what each leaves in the store.
#
# The bar is issue 15's: idem_advance at most 0.5 of the baseline.

# one timed round, as a statement of the script the rounds run in
streams_timed() {   # round what n query
    printf "INSERT INTO streams_results SELECT %s, '%s', bench_time(\$q\$%s\$q\$) / %s;\n" "$1" "$2" "$4" "$3"
}

bench_streams() {
    local pairs=${STREAMS_PAIRS:-512} rounds=${STREAMS_ROUNDS:-30} events=${STREAMS_EVENTS:-1000000} r seq
    local ours base
    say "streams: $pairs pairs, $rounds rounds per side; a consumer of $events events" >&2
    ensure_packages python3-psycopg
    psql_q -f "$IDEM_ROOT/bench/streams.sql" >/dev/null
    # all rounds in one session, as a consumer keeps its connection; each
    # statement its own transaction
    for r in $(seq -5 "$rounds"); do
        seq=$((r + 10))
        ours="SELECT count(*) FILTER (WHERE idem_advance('s', g, $seq)) FROM generate_series(1, $pairs) g"
        base="SELECT count(*) FILTER (WHERE bench_base_advance('s', g, $seq)) FROM generate_series(1, $pairs) g"
        if [ $((r % 2)) -eq 0 ]; then
            streams_timed "$r" ours "$pairs" "$ours"; streams_timed "$r" base "$pairs" "$base"
        else
            streams_timed "$r" base "$pairs" "$base"; streams_timed "$r" ours "$pairs" "$ours"
        fi
        # the same seq again: every call a redelivery
        if [ $((r % 2)) -eq 0 ]; then
            streams_timed "$r" ours_dup "$pairs" "$ours"; streams_timed "$r" base_dup "$pairs" "$base"
        else
            streams_timed "$r" base_dup "$pairs" "$base"; streams_timed "$r" ours_dup "$pairs" "$ours"
        fi
    done > "$WORK/streams_rounds.sql"
    psql_q -f "$WORK/streams_rounds.sql" >/dev/null
    printf '  in-server rounds done\n' >&2

    local adv claim
    # the consumer's store alone: the in-server pairs go
    psql_q -c "SELECT idem_stream_drop('s')" -c "VACUUM FULL idempotency.watermarks" \
           -c "TRUNCATE stream_effects" -c "CHECKPOINT" >/dev/null
    adv=$(as_pg env PGHOST="$PGHOST" PGPORT="$PGPORT" /usr/bin/python3 "$IDEM_ROOT/bench/stream_consumer.py" advance "$events")
    psql_q -c "INSERT INTO streams_results VALUES (0, 'wire_advance_eps', $(echo "$adv" | cut -d' ' -f2)),
               (0, 'wire_advance_bytes', pg_total_relation_size('idempotency.watermarks'))"
    psql_q -c "TRUNCATE stream_effects" -c "CHECKPOINT" >/dev/null
    claim=$(as_pg env PGHOST="$PGHOST" PGPORT="$PGPORT" /usr/bin/python3 "$IDEM_ROOT/bench/stream_consumer.py" claim "$events")
    psql_q -c "INSERT INTO streams_results VALUES (0, 'wire_claim_eps', $(echo "$claim" | cut -d' ' -f2)),
               (0, 'wire_claim_bytes', (SELECT sum(pg_total_relation_size(c)) FROM
                  (SELECT 'idempotency.claims'::regclass AS c UNION ALL
                   SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'idempotency.claims'::regclass) s)),
               (0, 'wire_claim_rows', (SELECT count(*) FROM idem_claims WHERE namespace = 'bench_stream'))"
    printf '  consumers done\n' >&2

    psql_q -v events="$events" -v pairs="$pairs" <<'SQL'
\pset tuples_only off
\pset format aligned
\pset footer off
CREATE TEMP VIEW m AS
    SELECT what, percentile_cont(0.5) WITHIN GROUP (ORDER BY v) AS v
      FROM streams_results WHERE round > 0 OR what LIKE 'wire%' GROUP BY what;
CREATE TEMP VIEW j AS SELECT jsonb_object_agg(what, v) AS j FROM m;
SELECT 'advance (seq above the mark)' AS "in-server, per call",
       round((j->>'ours')::numeric, 2) AS "idem_advance us",
       round((j->>'base')::numeric, 2) AS "baseline us",
       round(((j->>'ours')::float8 / (j->>'base')::float8)::numeric, 3) AS ratio FROM j
UNION ALL
SELECT 'redelivery (seq at the mark)', round((j->>'ours_dup')::numeric, 2), round((j->>'base_dup')::numeric, 2),
       round(((j->>'ours_dup')::float8 / (j->>'base_dup')::float8)::numeric, 3) FROM j;
\echo
SELECT 'idem_advance once per batch' AS "consumer of 8 partitions, batches of 100",
       to_char((j->>'wire_advance_eps')::float8, 'FM999,999,999') AS "events/s",
       pg_size_pretty((j->>'wire_advance_bytes')::bigint) AS "store after the events",
       '8 marks' AS "rows" FROM j
UNION ALL
SELECT 'idem_claim_many per batch', to_char((j->>'wire_claim_eps')::float8, 'FM999,999,999'),
       pg_size_pretty((j->>'wire_claim_bytes')::bigint),
       to_char((j->>'wire_claim_rows')::float8, 'FM999,999,999') || ' claims' FROM j;
\echo
SELECT 'idem_advance / baseline (advance), at most 0.5' AS bar,
       round(((j->>'ours')::float8 / (j->>'base')::float8)::numeric, 3) AS value,
       CASE WHEN (j->>'ours')::float8 / (j->>'base')::float8 <= 0.5 THEN 'PASS' ELSE 'FAIL' END AS result FROM j;
SQL
}
