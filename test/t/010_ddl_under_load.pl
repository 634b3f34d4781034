# DDL on idempotency.claims while claims are being made.
#
# The claim path writes the claims heap and its indexes itself, not through
# the executor, so every DDL that rebuilds, adds or swaps an index, or
# rewrites the heap, is a chance for a claim to miss an index (the new index
# of a REINDEX CONCURRENTLY, an index being built by CREATE INDEX
# CONCURRENTLY) or to write to a stale heap or index.  Each step below runs
# one DDL while pgbench delivers ids of a bounded range, with redeliveries,
# to a consumer that applies an id to a ledger only when idem_claim (or
# idem_claim_many) says it is new; then it checks
#
#   - every btree index of the claims table with amcheck (heapallindexed),
#   - exactly-once on the ledger: no id applied twice, no delivered id lost,
#     every applied id claimed, one claim row per applied id,
#   - that redelivering the whole range applies only the ids never
#     delivered, and, after a restart (an empty claim cache, so that every
#     duplicate is found through the index), applies none at all.
#
# Each step has its own namespace, so its checks see only its own claims.
# A step that fails leaves the table healed (duplicate heap rows deleted,
# indexes rebuilt from the heap) so that the next step's failures are its
# own.
#
# A separate last section, without load, checks that schema changes the
# claim path cannot honour (an added column, a user trigger, a CHECK
# constraint) make a claim fail with a clear error instead of being
# silently bypassed.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use IdemCheck;

my $RANGE   = 60000;     # ids per step: e-1 .. e-$RANGE
my $SECONDS = 5;         # seconds of load after each step's DDL
my $CLIENTS = 6;
my $PRELOAD = 150000;    # claims in place before the steps, so builds take a while

# An unexpected error (safe_psql dies) would otherwise only reach the
# regress log: say it in the TAP output too
$SIG{__DIE__} = sub { diag("test died: $_[0]") unless $^S; };

my $t_start = time;
my $node = PostgreSQL::Test::Cluster->new('ddl_under_load');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
$IdemCheck::WORKER_LIVE
max_connections = 40
log_statement = none
});
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION idempotency;
CREATE EXTENSION amcheck;
CREATE TABLE delivered (ns text NOT NULL, event_id text NOT NULL);
CREATE TABLE applied (ns text NOT NULL, event_id text NOT NULL);
-- the consumer: log the delivery, apply the event only if it is new
CREATE FUNCTION consume(p text, s text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO delivered VALUES (s, p);
    IF idem_claim(p, s) THEN
        INSERT INTO applied VALUES (s, p);
        RETURN true;
    END IF;
    RETURN false;
END $$;
CREATE FUNCTION consume_batch(ps text[], s text) RETURNS void LANGUAGE sql AS $$
    INSERT INTO delivered SELECT s, unnest(ps);
    INSERT INTO applied SELECT s, x FROM idem_claim_many(ps, s) x;
$$;
-- a statement's outcome as text: 'ok:<value>' or 'error:<sqlstate>:<message>'
CREATE FUNCTION outcome(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    EXECUTE q INTO r;
    RETURN 'ok:' || coalesce(r, '<null>');
EXCEPTION WHEN OTHERS THEN
    RETURN 'error:' || SQLSTATE || ':' || SQLERRM;
END $$;
});
{
	my ($out, $err) = ('', '');
	$node->safe_psql('postgres', q{SELECT idem_namespace_define('bulk', '1 day')});
	$node->psql('postgres', qq{
SELECT count(*) FROM idem_claim_many(
    ARRAY(SELECT 'bulk-' || g FROM generate_series(1, $PRELOAD) g), 'bulk');
}, stdout => \$out, stderr => \$err);
	$err =~ s/\s+$//;
	is($err eq '' ? $out : $err, $PRELOAD, "the preload claims $PRELOAD ids with idem_claim_many");
}
amcheck_claims($node, 'postgres', 'after the preload');

my $tmp = PostgreSQL::Test::Utils::tempdir();

# Reads that must see the heap, not an index that may be missing entries
my $HEAP_ONLY = "SET enable_indexscan = off; SET enable_indexonlyscan = off; "
  . "SET enable_bitmapscan = off;\n";

sub failures
{
	return scalar grep { !$_ } Test::More->builder->summary;
}

sub applied_count
{
	my ($ns) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM applied WHERE ns = '$ns'");
}

# Exactly-once on the ledger of namespace $ns
sub ledger_checks
{
	my ($ns, $label) = @_;
	is($node->safe_psql('postgres', qq{
		SELECT count(*) FROM (SELECT event_id FROM applied WHERE ns = '$ns'
		                       GROUP BY 1 HAVING count(*) > 1) d}),
		'0', "$label: no id was applied twice");
	is($node->safe_psql('postgres', qq{
		SELECT count(*) FROM (SELECT DISTINCT event_id FROM delivered WHERE ns = '$ns') d
		 WHERE NOT EXISTS (SELECT 1 FROM applied a
		                    WHERE a.ns = '$ns' AND a.event_id = d.event_id)}),
		'0', "$label: no delivered id was lost (every one was applied)");
	# with parallel plans made cheap, so that idem_claimed (PARALLEL
	# RESTRICTED) filters above a Gather and meets its namespace in
	# parallel mode, where it must take no snapshot
	is($node->safe_psql('postgres', qq{
		SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
		SET min_parallel_table_scan_size = 0;
		SELECT count(*) FROM (SELECT DISTINCT event_id FROM applied WHERE ns = '$ns') a
		 WHERE NOT idem_claimed(event_id, '$ns')}),
		'0', "$label: idem_claimed is true for every applied id");
	is($node->safe_psql('postgres', $HEAP_ONLY . qq{
		SELECT (SELECT count(*) FROM idem_claims WHERE namespace = '$ns')
		     - (SELECT count(DISTINCT event_id) FROM applied WHERE ns = '$ns')}),
		'0', "$label: the claims heap holds exactly one claim per applied id");
}

# Redeliver every id of the range in one statement; returns how many it applied
sub redeliver_all
{
	my ($ns) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE consume('e-' || g, '$ns'))
		  FROM generate_series(1, $RANGE) g});
}

# After a failed step: drop what a failed concurrent build left, delete
# duplicate claims (committed ids claimed again), rebuild the indexes from
# the heap
sub heal
{
	my ($label) = @_;
	diag("$label failed: healing the claims table (duplicate heap rows deleted, "
		  . "invalid indexes dropped, REINDEX TABLE) so that later steps fail on their own");
	$node->safe_psql('postgres', $HEAP_ONLY . q{
DO $$
DECLARE
    i regclass;
BEGIN
    FOR i IN SELECT indexrelid::regclass FROM pg_index
              WHERE indrelid = 'idempotency.claims'::regclass AND NOT indisvalid
    LOOP
        EXECUTE format('DROP INDEX %s', i);
    END LOOP;
END $$;
DELETE FROM idempotency.claims a USING idempotency.claims b
 WHERE a.ns = b.ns AND a.key = b.key AND a.ctid > b.ctid;
REINDEX TABLE idempotency.claims;
});
}

# CREATE INDEX CONCURRENTLY's index must find every claim
sub check_claimed_at_index
{
	my ($label) = @_;
	my $heap = $node->safe_psql('postgres',
		$HEAP_ONLY . 'SELECT count(*) FROM idempotency.claims');
	my $sql = "SET enable_seqscan = off; SET enable_bitmapscan = off;\n";
	my $q = "SELECT count(*) FROM idempotency.claims WHERE claimed_at > '-infinity'";
	my $plan = $node->safe_psql('postgres', $sql . "EXPLAIN (COSTS OFF) $q");
	like($plan, qr/Index (Only )?Scan using claims_claimed_at/,
		"$label: the count over claimed_at is planned as a scan of claims_claimed_at");
	my $indexed = $node->safe_psql('postgres', $sql . $q);
	is($indexed, $heap,
		"$label: an index scan on claimed_at finds as many claims as the heap holds");
}

# Alternate benign settings for about a second, ending on fillfactor 90
# and statistics 200: many relcache invalidations while claims are made
my $ALTER_LOOP = join('', map {
	"ALTER TABLE idempotency.claims SET (fillfactor = 90);\n"
	  . "ALTER TABLE idempotency.claims ALTER COLUMN claimed_at SET STATISTICS 200;\n"
	  . "SELECT pg_sleep(0.05);\n"
	  . "ALTER TABLE idempotency.claims RESET (fillfactor);\n"
	  . "ALTER TABLE idempotency.claims ALTER COLUMN claimed_at SET STATISTICS -1;\n"
	  . "SELECT pg_sleep(0.05);\n"
} 1 .. 8)
  . "ALTER TABLE idempotency.claims SET (fillfactor = 90);\n"
  . "ALTER TABLE idempotency.claims ALTER COLUMN claimed_at SET STATISTICS 200;\n";

my @steps = (
	{
		name       => 'reindex_index',
		label      => 'REINDEX INDEX CONCURRENTLY claims_pkey',
		ddl        => 'REINDEX INDEX CONCURRENTLY idempotency.claims_pkey;',
		concurrent => 1,
	},
	{
		name       => 'reindex_table',
		label      => 'REINDEX TABLE CONCURRENTLY claims',
		ddl        => 'REINDEX TABLE CONCURRENTLY idempotency.claims;',
		concurrent => 1,
	},
	{
		name       => 'create_index',
		label      => 'CREATE INDEX CONCURRENTLY claims_claimed_at',
		ddl => 'CREATE INDEX CONCURRENTLY claims_claimed_at ON idempotency.claims (claimed_at);',
		concurrent => 1,
		extra      => \&check_claimed_at_index,
	},
	{
		name  => 'vacuum_full',
		label => 'VACUUM FULL claims',
		ddl   => 'VACUUM FULL idempotency.claims;',
	},
	{
		name  => 'cluster',
		label => 'CLUSTER claims USING claims_pkey',
		ddl   => 'CLUSTER idempotency.claims USING claims_pkey;',
	},
	{
		name  => 'alter',
		label => 'ALTER TABLE claims SET (fillfactor) / SET STATISTICS',
		ddl   => $ALTER_LOOP,
	},
);

foreach my $step (@steps)
{
	my $ns    = "ddl_$step->{name}";
	my $label = $step->{label};
	my $failures_before = failures();
	my $t_step = time;

	$node->safe_psql('postgres', "SELECT idem_namespace_define('$ns', '1 day')");
	my $single = "$tmp/$ns.sql";
	my $batch  = "$tmp/$ns-batch.sql";
	PostgreSQL::Test::Utils::append_to_file($single, qq{
\\set k random(1, $RANGE)
SELECT consume('e-' || :k, '$ns');
});
	PostgreSQL::Test::Utils::append_to_file($batch, qq{
\\set a random(1, $RANGE)
\\set b random(1, $RANGE)
\\set c random(1, $RANGE)
\\set d random(1, $RANGE)
SELECT consume_batch(ARRAY['e-' || :a, 'e-' || :b, 'e-' || :c, 'e-' || :d], '$ns');
});

	# the load: single claims and batches of four, with redeliveries; it
	# runs until $SECONDS after the DDL has ended, however long the warm-up
	# and the DDL take on a loaded machine, and is then interrupted (its
	# -T is only a bound): a fixed -T could end before a slow DDL did
	my ($bench_out, $bench_err) = ('', '');
	my $bench = IPC::Run::start(
		[
			'pgbench', '-n', '-c', $CLIENTS, '-j', '2', '-T', 600,
			'-f', "$single\@3", '-f', "$batch\@1",
			'-h', $node->host, '-p', $node->port, 'postgres'
		],
		'>', \$bench_out, '2>', \$bench_err);

	# wait until it is claiming
	my $running = 0;
	for (my $deadline = time + 20; time < $deadline;)
	{
		if (applied_count($ns) >= 1000) { $running = 1; last; }
		$bench->pump_nb;
		last unless $bench->pumpable;
		usleep(50_000);
	}
	ok($running, "$label: the claim load is claiming before the DDL starts")
	  or diag("pgbench: $bench_err");

	# the DDL, from another session, while the load runs
	my $before = applied_count($ns);
	my $t_ddl = time;
	my ($ddl_out, $ddl_err) = ('', '');
	my $ddl_rc = $node->psql('postgres', "SET statement_timeout = '60s';\n$step->{ddl}",
		stdout => \$ddl_out, stderr => \$ddl_err, on_error_stop => 1);
	my $ddl_time = time - $t_ddl;
	my $after_ddl = applied_count($ns);
	$ddl_err =~ s/\s+$//;
	is($ddl_rc == 0 ? '' : $ddl_err, '', "$label: the DDL succeeds under the claim load");
	my $during = $after_ddl - $before;
	if ($step->{concurrent})
	{
		cmp_ok($during, '>', 0,
			"$label: ids were claimed while the DDL ran (the build overlapped claims)");
	}

	# $SECONDS more of load, then the interrupt: pgbench must still be
	# running then, and have printed no error (an aborted client prints one)
	for (my $until = time + $SECONDS; time < $until;)
	{
		$bench->pump_nb;
		last unless $bench->pumpable;
		usleep(50_000);
	}
	my $alive = $bench->pumpable;
	# TERM: a shell's background job (nohup, CI's &) ignores INT, and its
	# children inherit that
	$bench->signal('TERM') if $alive;
	eval { $bench->finish; };
	my @bench_errors = grep { /error|abort/i } split /\n/, $bench_err;
	is(($alive && !@bench_errors) ? ''
		: join("\n", $alive ? () : 'pgbench ended before its interrupt',
			@bench_errors[0 .. ($#bench_errors < 4 ? $#bench_errors : 4)]),
		'', "$label: no claim of the load failed (pgbench ran to its interrupt, no error)");
	my $end = applied_count($ns);
	cmp_ok($end, '>', $after_ddl,
		"$label: the load went on claiming after the DDL (the DDL ran inside the load)");
	note(sprintf("%s: DDL %.2fs, %d ids applied before it, %d during, %d after",
			$label, $ddl_time, $before, $during, $end - $after_ddl));

	# the indexes, then the ledger
	amcheck_claims($node, 'postgres', "after $label");
	$step->{extra}->($label) if $step->{extra};
	ledger_checks($ns, "after $label");

	# redeliver everything: only never-delivered ids are applied
	my $distinct = $node->safe_psql('postgres',
		"SELECT count(DISTINCT event_id) FROM applied WHERE ns = '$ns'");
	my $newly = redeliver_all($ns);
	is($newly, $RANGE - $distinct,
		"$label: redelivering every id applies only the $RANGE - $distinct never delivered");
	is($node->safe_psql('postgres', qq{
		SELECT count(*) || ' rows, ' || count(DISTINCT event_id) || ' ids'
		  FROM applied WHERE ns = '$ns'}),
		"$RANGE rows, $RANGE ids",
		"$label: after the redelivery every id of the range is applied exactly once");

	# and again with an empty claim cache: every duplicate found by the index
	$node->restart;
	is(redeliver_all($ns), '0',
		"$label: after a restart (cold claim cache) redelivering every id applies none again");

	if (failures() > $failures_before)
	{
		heal($label);
		if ($step->{name} eq 'create_index')
		{
			diag("dropping claims_claimed_at: the load does not maintain it, "
				  . "so later steps would fail on it too");
			$node->safe_psql('postgres', 'DROP INDEX IF EXISTS idempotency.claims_claimed_at');
		}
	}
	note(sprintf("%s: step took %.1fs", $label, time - $t_step));
}

# Every step's range once more, after all the DDL: no committed claim of an
# earlier step was lost by a later one
$node->restart;
foreach my $step (@steps)
{
	is(redeliver_all("ddl_$step->{name}"), '0',
		"after all the DDL, redelivering the range of $step->{label} applies none again");
}
amcheck_claims($node, 'postgres', 'after all the DDL steps');

###########################################################################
# Schema changes the claim path cannot honour: refused, not bypassed.
# No load.  Each claim below must either fail with a clear error (any
# SQLSTATE but XX000, internal_error) and write nothing, or, where stated,
# honour the change.
###########################################################################

$node->safe_psql('postgres', q{SELECT idem_namespace_define('refuse', '1 day')});

sub outcome
{
	my ($sql) = @_;
	$sql =~ s/'/''/g;
	return $node->safe_psql('postgres', "SELECT outcome('$sql')");
}

sub claim_rows
{
	my ($id) = @_;
	return $node->safe_psql('postgres', $HEAP_ONLY . qq{
		SELECT count(*) FROM idem_claims WHERE namespace = 'refuse' AND event_id = '$id'});
}

# $what must fail with a clear error and leave no claim of @ids
sub refused
{
	my ($what, $result, @ids) = @_;
	my $ok = like($result, qr/^error:(?!XX000)/,
		"$what raises a clear error, not XX000, rather than succeeding (got '$result')");
	is(claim_rows($_), '0', "$what stores no claim of $_") foreach @ids;
	return $ok;
}

# Once the change is undone, an id refused under it must be claimable; only
# meaningful if it was refused (else it is stored already)
sub claimable_after
{
	my ($what, $refused, $id) = @_;
  SKIP:
	{
		skip "$id was not refused, so it is claimed already", 1 unless $refused;
		is(outcome("SELECT idem_claim('$id', 'refuse')::text"), 'ok:true',
			"$what, the id refused before ($id) is claimable: the refusal stored nothing");
	}
}

sub claims_work
{
	my ($what, $id) = @_;
	is(outcome("SELECT idem_claim('$id', 'refuse')::text"), 'ok:true',
		"$what: idem_claim works again");
	is(outcome("SELECT idem_claim('$id', 'refuse')::text"), 'ok:false',
		"$what: and a redelivery is a duplicate");
}

# --- an added column ---------------------------------------------------------
$node->safe_psql('postgres', 'ALTER TABLE idempotency.claims ADD COLUMN extra text');
my $refused = refused('idem_claim with an added column extra',
	outcome(q{SELECT idem_claim('add-1', 'refuse')::text}), 'add-1');
refused('idem_claim_many with an added column extra',
	outcome(q{SELECT string_agg(x, ',') FROM idem_claim_many(ARRAY['add-m1', 'add-m2'], 'refuse') x}),
	'add-m1', 'add-m2');
is($node->safe_psql('postgres', $HEAP_ONLY
	  . 'SELECT count(*) FROM idempotency.claims WHERE extra IS NOT NULL'),
	'0', 'the added column extra got no values (no garbage) from claims');
$node->safe_psql('postgres', 'ALTER TABLE idempotency.claims DROP COLUMN extra');
claims_work('after DROP COLUMN extra (a dropped attribute remains)', 'add-after');
claimable_after('after DROP COLUMN extra', $refused, 'add-1');

# --- a user trigger ----------------------------------------------------------
$node->safe_psql('postgres', q{
CREATE TABLE trigger_fired (key bytea);
CREATE FUNCTION claims_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO trigger_fired VALUES (NEW.key);
    RETURN NEW;
END $$;
CREATE TRIGGER t BEFORE INSERT ON idempotency.claims
    FOR EACH ROW EXECUTE FUNCTION claims_trigger();
});
$refused = refused('idem_claim with a user BEFORE INSERT trigger on claims',
	outcome(q{SELECT idem_claim('trg-1', 'refuse')::text}), 'trg-1');
refused('idem_claim_many with a user BEFORE INSERT trigger on claims',
	outcome(q{SELECT string_agg(x, ',') FROM idem_claim_many(ARRAY['trg-m1', 'trg-m2'], 'refuse') x}),
	'trg-m1', 'trg-m2');
$node->safe_psql('postgres', 'DROP TRIGGER t ON idempotency.claims');
claims_work('after DROP TRIGGER', 'trg-after');
claimable_after('after DROP TRIGGER', $refused, 'trg-1');
is($node->safe_psql('postgres', 'SELECT count(*) FROM trigger_fired'), '0',
	'no trigger firing was recorded by a claim that was refused');

# --- a CHECK constraint (NOT VALID: existing keys are longer) ----------------
# Either honoured (a long key is rejected with 23514, a short one claimed) or
# refused (every claim fails); never a long key stored.
$node->safe_psql('postgres', q{
ALTER TABLE idempotency.claims ADD CONSTRAINT c CHECK (octet_length(key) < 5) NOT VALID});
$refused = refused('idem_claim of an id violating CHECK (octet_length(key) < 5)',
	outcome(q{SELECT idem_claim('check-long-id', 'refuse')::text}), 'check-long-id');
refused('idem_claim_many of ids violating CHECK (octet_length(key) < 5)',
	outcome(q{SELECT string_agg(x, ',') FROM idem_claim_many(ARRAY['check-m1', 'check-m2'], 'refuse') x}),
	'check-m1', 'check-m2');
my $short = outcome(q{SELECT idem_claim('ok1', 'refuse')::text});
my $short_rows = claim_rows('ok1');
ok(($short eq 'ok:true' && $short_rows eq '1')
	  || ($short =~ /^error:(?!XX000)/ && $short_rows eq '0'),
	"a claim satisfying the CHECK constraint is either made or refused cleanly "
	  . "(got '$short', $short_rows rows)");
is($node->safe_psql('postgres', $HEAP_ONLY . q{
	SELECT count(*) FROM idem_claims
	 WHERE namespace = 'refuse' AND event_id LIKE 'check-%'}),
	'0', 'no claim violating the CHECK constraint is in the heap');
$node->safe_psql('postgres', 'ALTER TABLE idempotency.claims DROP CONSTRAINT c');
claims_work('after DROP CONSTRAINT c', 'check-after');
claimable_after('after DROP CONSTRAINT c', $refused, 'check-long-id');

amcheck_claims($node, 'postgres', 'after the refusal section');

$node->stop;
note(sprintf('total %.1fs', time - $t_start));
done_testing();
