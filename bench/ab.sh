#!/usr/bin/env bash
#
# bench/ab.sh OLD.so NEW.so: an A/B of two builds of idempotency.so, for a
# change that claims a gain or denies a loss.  The two libraries take
# turns in one cluster, a restart each (the order alternating per round),
# and each turn times new ids and duplicates of idem_claim and of the
# baseline in in-server loops of N calls (bench/claims.sql), so that the
# machine's drift reaches both alike.  Prints the median, min and max of
# ROUNDS rounds after a warm-up round, in microseconds per loop.  Leaves
# NEW.so installed.  Run as root (it replaces the installed library).
set -euo pipefail
. "$(dirname "$0")/../scripts/common.sh"
OLD=${1:?old library}; NEW=${2:?new library}
LIB=$("$PG_CONFIG" --pkglibdir)/idempotency.so
N=${N:-300000}; ROUNDS=${ROUNDS:-5}
cluster_init ab
trap 'cp "$NEW" "$LIB"; cluster_cleanup $?' EXIT
cluster_conf "shared_buffers = 512MB" "max_wal_size = 8GB" "checkpoint_timeout = 30min" "wal_buffers = 16MB" "idempotency.purge_enabled = off"
cp "$NEW" "$LIB"
cluster_start
psql_q -f $IDEM_ROOT/bench/common.sql >/dev/null
psql_q -v n=$N -f $IDEM_ROOT/bench/claims.sql >/dev/null
ours="SELECT count(*) FILTER (WHERE idem_claim(id, 'bench')) FROM bench_ids"
base="SELECT count(*) FILTER (WHERE bench_base_claim(id, 'bench')) FROM bench_ids"
t() { psql_q -c "INSERT INTO bench_results SELECT $1, '$2', bench_time(\$q\$$3\$q\$)"; }
for r in $(seq 0 $ROUNDS); do
  for v in old new; do
    [ $((r % 2)) -eq 1 ] && { [ $v = old ] && v=new || v=old; }
    if [ $v = old ]; then cp "$OLD" "$LIB"; else cp "$NEW" "$LIB"; fi
    cluster_restart
    psql_q -c "TRUNCATE idempotency.claims; CHECKPOINT"
    t $r ${v}_new "$ours"; t $r ${v}_dup "$ours"
    psql_q -c "TRUNCATE bench_base; CHECKPOINT"
    t $r ${v}_bnew "$base"; t $r ${v}_bdup "$base"
  done
  echo "round $r" >&2
done
psql_q -c "\pset tuples_only off" -c "SELECT what, round(percentile_cont(0.5) WITHIN GROUP (ORDER BY usec)::numeric, 3) med, round(min(usec)::numeric,3) mn, round(max(usec)::numeric,3) mx, count(*) FROM bench_results WHERE round > 0 GROUP BY 1 ORDER BY 1"
