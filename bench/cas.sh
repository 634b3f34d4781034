# bench/cas.sh: the state-machine benchmark, sourced by bench/run.
#
# Row CAS: idem_cas_row on N rows of a bound table (guard trigger
# installed), PENDING -> PAID, against a PL/pgSQL function doing
# UPDATE ... WHERE id = $1 AND status = ANY(<allowed predecessors>) on the
# same table; the applied path, then the repeat ('already' for the CAS, no
# matching row for the UPDATE).  The pure checker: per-call cost of
# idem_cas_status(machine, current, target) in an in-server loop, minus the
# loop's own cost.

bench_cas() {
    local n=${CAS_N:-100000} rounds=${CAS_ROUNDS:-3} checks=${CAS_CHECKS:-1000000} r
    local base="SELECT count(*) FILTER (WHERE bench_base_cas(id)) FROM bench_cas_ids"
    local ours="SELECT count(*) FILTER (WHERE idem_cas_row('bench_orders'::regclass, id, 'PAID') = 'applied') FROM bench_cas_ids"
    local check="SELECT count(*) FILTER (WHERE idem_cas_status('bench_order', 'PENDING', 'PAID') = 'applied') FROM generate_series(1, $checks)"
    local loop="SELECT count(*) FILTER (WHERE 'applied' = 'applied'::text) FROM generate_series(1, $checks)"

    say "cas: $rounds rounds of $n rows, $checks checker calls" >&2
    psql_q -v n="$n" -f "$IDEM_ROOT/bench/cas.sql" >/dev/null

    timed() { psql_q -c "INSERT INTO bench_cas_results SELECT $1, '$2', bench_time(\$q\$$3\$q\$)"; }
    reset() { psql_q -c "CALL bench_cas_reset()" -c "VACUUM bench_orders" -c "CHECKPOINT"; }
    side() {
        reset
        timed "$1" "$2_applied" "$3"
        timed "$1" "$2_repeat" "$3"
    }
    for r in $(seq 0 "$rounds"); do
        if [ $((r % 2)) -eq 1 ]; then side "$r" base "$base"; side "$r" ours "$ours"
        else side "$r" ours "$ours"; side "$r" base "$base"; fi
        timed "$r" check "$check"
        timed "$r" check_loop "$loop"
        printf '  round %d done\n' "$r" >&2
    done

    psql_q -v n="$n" -v checks="$checks" <<'SQL'
\pset tuples_only off
\pset format aligned
\pset footer off
WITH m AS (
    SELECT what, percentile_cont(0.5) WITHIN GROUP (ORDER BY usec) AS v
      FROM bench_cas_results WHERE round > 0 GROUP BY what),
v AS (SELECT jsonb_object_agg(what, v) AS j FROM m),
rows AS (
    SELECT 1 AS o, 'row CAS, applied' AS case_, (j->>'ours_applied')::float8 / :n AS ours,
           (j->>'base_applied')::float8 / :n AS base, 1.2 AS bar FROM v
    UNION ALL
    SELECT 2, 'row CAS, repeat (already)', (j->>'ours_repeat')::float8 / :n,
           (j->>'base_repeat')::float8 / :n, 1.2 FROM v)
SELECT case_ AS "per call",
       round(ours::numeric, 2) AS "idem_cas_row us",
       round(base::numeric, 2) AS "PL/pgSQL UPDATE us",
       round((ours / base)::numeric, 3) AS ratio,
       '<= ' || bar AS bar,
       CASE WHEN ours / base <= bar THEN 'PASS' ELSE 'MISS' END AS result
  FROM rows ORDER BY o;

WITH m AS (
    SELECT what, percentile_cont(0.5) WITHIN GROUP (ORDER BY usec) AS v
      FROM bench_cas_results WHERE round > 0 GROUP BY what)
SELECT 'pure checker' AS "per call",
       round((((SELECT v FROM m WHERE what = 'check') - (SELECT v FROM m WHERE what = 'check_loop'))
              / :checks)::numeric, 3) AS "us (loop subtracted)",
       round(((SELECT v FROM m WHERE what = 'check_loop') / :checks)::numeric, 3) AS "loop us",
       '< 1 us' AS bar,
       CASE WHEN ((SELECT v FROM m WHERE what = 'check') - (SELECT v FROM m WHERE what = 'check_loop'))
                 / :checks < 1 THEN 'PASS' ELSE 'MISS' END AS result;
SQL
}
