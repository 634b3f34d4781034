# Exactly-once on a real Citus cluster: a coordinator and two workers on
# loopback (unix sockets), each with idempotency preloaded beside citus.
#  - The delegated handler of docs/citus.md ("Running on Citus"): a
#    PL/pgSQL function that claims and then writes, distributed with
#    force_delegation and co-located with its table, so that each call runs
#    on the worker holding the account's shard, its claim in that worker's
#    idempotency.claims, in the same local transaction as the write.
#  - Under a 4-client redelivery load (pgbench, random events, each event
#    always with the same account), then every event redelivered once
#    more: every balance is exact (0 applied twice, 0 lost), every event is
#    claimed exactly once across the workers, and amcheck is clean on each.
#  - The guard rail: on the coordinator, a claim in a transaction that
#    writes a distributed table is refused (its commit would not be atomic
#    with the workers'), whichever comes first, a COPY and a reference
#    table included; a Citus local table, on the coordinator alone, is not
#    refused.
#  - Namespaces reach every node through run_command_on_all_nodes, and so
#    do reads of claims across the cluster, as docs/citus.md shows.
#  - Shard moves during a load (logical replication and block_writes),
#    then the rebalancer: idem_citus_claim keeps each claim with its
#    account's shard and the move takes the claims along, so each node
#    holds only the claims of its shards, the balances hold exactly the
#    claimed events, and a full redelivery leaves every balance exact; a
#    move of such a shard to the coordinator and a split of it are refused.
#  - A worker killed with -9 in the middle of a load and restarted: once
#    every event is redelivered, every balance is still exact, and no
#    prepared transaction is left.
#  - Explicit transactions of two force-delegated calls, on the two
#    workers, under load; the coordinator frozen until a worker holds one of
#    its prepared transactions, and killed with -9 there: after the restart
#    and Citus's recovery, no transaction has one claim without the other,
#    the balances hold exactly the claimed events, and a redelivery of
#    every pair leaves every account exact.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;
use IPC::Run;
use Time::HiRes qw(usleep);

my $libdir = `pg_config --pkglibdir`;
chomp $libdir;
if (!-f "$libdir/citus.so")
{
	diag("SKIPPED: citus is not installed in $libdir; test/run tap builds it with scripts/citus.sh");
	plan skip_all => "SKIPPED: citus is not installed ($libdir/citus.so is missing)";
}

my @nodes;
for my $name (qw(coordinator worker1 worker2))
{
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'citus,idempotency'
max_connections = 60
max_worker_processes = 16
max_prepared_transactions = 20
wal_level = logical
max_wal_senders = 10
max_replication_slots = 10
idempotency.purge_enabled = off
citus.log_remote_commands = off
});
	# Citus connects to the node itself (shard moves) at citus.local_hostname
	$node->append_conf('postgresql.conf', "citus.local_hostname = '" . $node->host . "'");
	$node->start;
	# amcheck too, before the node joins: Citus then refuses CREATE EXTENSION on a worker
	$node->safe_psql('postgres', 'CREATE EXTENSION citus; CREATE EXTENSION idempotency; CREATE EXTENSION amcheck;');
	push @nodes, $node;
}
my ($coord, @workers) = @nodes;
$coord->safe_psql('postgres', sprintf(q{SELECT citus_set_coordinator_host('%s', %d)},
	$coord->host, $coord->port));
$coord->safe_psql('postgres', sprintf(q{SELECT citus_add_node('%s', %d)}, $_->host, $_->port))
  foreach @workers;
is($coord->safe_psql('postgres', 'SELECT count(*) FROM citus_get_active_worker_nodes()'),
	'2', 'a coordinator and two workers');

# --- the extension's tables cannot become Citus tables (issue 13, item 2) ----
# (Citus refuses some of them itself, such as tables with triggers; the
# extension refuses the rest at commit, whatever the call)
foreach my $try (
	[q{SELECT create_distributed_table('idempotency.claims', 'ns')}, 'distributing the claims',
	 qr/the idempotency extension's tables cannot be Citus tables/],
	[q{SELECT create_reference_table('idempotency.claims')}, 'making the claims a reference table',
	 qr/the idempotency extension's tables cannot be Citus tables/],
	[q{SELECT create_reference_table('idempotency.purge_policies')}, 'making the purge policies a reference table',
	 qr/cannot be Citus tables|cannot distribute/],
	[q{SELECT create_reference_table('idempotency.namespaces')}, 'making the namespaces a reference table',
	 qr/cannot be Citus tables|cannot distribute/])
{
	my ($sql, $what, $why) = @$try;
	my ($out, $err) = ('', '');
	my $rc = $coord->psql('postgres', $sql, stdout => \$out, stderr => \$err);
	isnt($rc, 0, "$what is refused");
	like($err, $why, "$what: the error says why");
}
is($coord->safe_psql('postgres', q{
	SELECT count(*) FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
	 WHERE c.relnamespace = 'idempotency'::regnamespace}),
	'0', 'no table of the extension is a Citus table afterwards');
is($coord->safe_psql('postgres', q{SELECT idem_claim('after-refusal', 'payments')}), 't',
	'claims still work on the coordinator');
$coord->safe_psql('postgres', q{SELECT idem_release('after-refusal', 'payments')});

# --- the recipe of docs/citus.md (its SQL is run here as written there) ----
my $guide = slurp_file("$ENV{IDEMPOTENCY_ROOT}/docs/citus.md");
my ($section) = $guide =~ /\A# Running on Citus\n(.*)\z/ms;
ok(defined $section, 'docs/citus.md is the "Running on Citus" guide');
my @blocks = ($section // '') =~ /<!-- citus-test -->\n```sql\n(.*?)```/gs;
cmp_ok(scalar(@blocks), '>=', 2, 'with SQL blocks marked for this test');
for my $i (0 .. $#blocks)
{
	my ($rc, $out, $err) = $coord->psql('postgres', $blocks[$i], on_error_stop => 1);
	is($rc, 0, "docs/citus.md block $i runs on the coordinator") or diag($err);
}

is($coord->safe_psql('postgres', q{SELECT balance FROM accounts WHERE id = 42}), '1999',
	"the guide's event is applied once, though delivered twice");
# the worker holding account 42 releases the claim: the event applies again
my $shard42 = $coord->safe_psql('postgres',
	q{SELECT get_shard_id_for_distribution_column('accounts', 42)});
my ($holder) = grep {
	$_->safe_psql('postgres', "SELECT count(*) FROM pg_dist_placement WHERE shardid = $shard42"
		. " AND groupid = (SELECT groupid FROM pg_dist_local_group)") eq '1' } @workers;
is($holder->safe_psql('postgres', "SELECT idem_citus_release('evt-1', 'payments', $shard42)"), 't',
	'idem_citus_release on the worker holding the shard releases the claim');
is($coord->safe_psql('postgres', q{SELECT handle_payment(42, 'evt-1', 1999)}), 't',
	'and the next delivery applies the event again');
my ($other) = grep { $_ != $holder } @workers;
my ($rc_o, $out_o, $err_o) = $other->psql('postgres', "SELECT idem_citus_claim('evt-2', 'payments', $shard42)");
like($err_o, qr/ERROR:  shard \d+ is not placed on this node/,
	'a claim kept with a shard on a worker that does not hold it is refused (40001: retry)');
# a new TTL of the namespace reaches its shard namespaces
$coord->safe_psql('postgres',
	q{SELECT run_command_on_all_nodes($$SELECT idem_namespace_define('payments', '8 days')$$)});
is($holder->safe_psql('postgres', q{
	SELECT string_agg(DISTINCT ttl::text, ',') FROM idem_namespaces WHERE name LIKE 'payments%'}),
	'8 days', 'idem_namespace_define gives the shard namespaces the new TTL too');
$coord->safe_psql('postgres', q{UPDATE accounts SET balance = 0});

# --- a 4-client redelivery load through the delegated handler --------------
my $events = 4000;
my $script = "$PostgreSQL::Test::Utils::tmp_check/citus_deliver.pgbench";
open(my $fh, '>', $script) or die $!;
print $fh "\\set e random(1, $events)\n"
  . "SELECT handle_payment((:e % 100) + 1, 'ev-' || :e, 1);\n";
close $fh;
$coord->command_ok(
	[ 'pgbench', '-n', '-c', '4', '-j', '2', '-t', '2000', '-f', $script, 'postgres' ],
	'4 clients deliver 8,000 payments with repeats through the delegated handler');
# then every event once more, as a broker redelivering its whole log: one
# call per statement, as docs/citus.md says (several in one statement would
# run on the coordinator, which the guard rail refuses)
$coord->safe_psql('postgres',
	join('', map { sprintf("SELECT handle_payment(%d, 'ev-%d', 1);\n", ($_ % 100) + 1, $_) } 1 .. $events));

my $per_account = $events / 100;
is($coord->safe_psql('postgres', qq{
	SELECT count(*) FROM accounts WHERE balance <> $per_account}),
	'0', "every balance is exact ($per_account): 0 applied twice, 0 lost");
is($coord->safe_psql('postgres', q{SELECT sum(balance) FROM accounts}),
	$events, "the balances add up to the $events events");
is($coord->safe_psql('postgres', q{
	SELECT sum(result::bigint) FROM run_command_on_workers(
	  $$SELECT count(*) FROM idem_claims WHERE namespace = 'payments' AND event_id LIKE 'ev-%'$$)}),
	$events, 'every event is claimed exactly once, on the worker holding its account');
is($coord->safe_psql('postgres', q{
	SELECT count(*) FROM idem_claims WHERE namespace = 'payments'}),
	'0', 'and none on the coordinator');

# --- the guard rail on the coordinator ------------------------------------
$coord->safe_psql('postgres', q{
	CREATE TABLE currencies (code text PRIMARY KEY);
	SELECT create_reference_table('currencies');
	CREATE TABLE coord_audit (event text);
	SELECT citus_add_local_table_to_metadata('coord_audit');});
is($coord->safe_psql('postgres', q{
	SELECT string_agg(logicalrelid::text || ':' || partmethod::text, ',' ORDER BY logicalrelid::text)
	  FROM pg_dist_partition WHERE logicalrelid IN ('currencies'::regclass, 'coord_audit'::regclass)}),
	'coord_audit:n,currencies:n', 'a reference table and a Citus local table');
my ($rc, $out, $err) = $coord->psql('postgres', q{
	BEGIN;
	UPDATE accounts SET balance = balance WHERE id = 1;
	SELECT idem_claim('coord-1', 'payments');
	COMMIT;});
like($err, qr/ERROR:  a claim on a Citus coordinator cannot commit with writes to distributed tables/,
	'a claim after a write to a distributed table on the coordinator is refused');
($rc, $out, $err) = $coord->psql('postgres', q{
	BEGIN;
	SELECT idem_claim('coord-2', 'payments');
	UPDATE accounts SET balance = balance WHERE id = 1;
	COMMIT;});
like($err, qr/ERROR:  a claim on a Citus coordinator cannot commit with writes to distributed tables/,
	'a write to a distributed table after a claim on the coordinator is refused');
like($err, qr/HINT:  .*create_distributed_function/, 'the hint points to the delegated handler');
is($coord->safe_psql('postgres', q{SELECT idem_claim('coord-3', 'payments')}), 't',
	'a claim on the coordinator with no distributed write still works');
($rc, $out, $err) = $coord->psql('postgres', qq{
	BEGIN;
	SELECT idem_claim('coord-copy', 'payments');
	COPY accounts (id) FROM STDIN;
1001
\\.
	COMMIT;});
like($err, qr/ERROR:  a claim on a Citus coordinator cannot commit with writes to distributed tables/,
	'a COPY into a distributed table after a claim on the coordinator is refused');
($rc, $out, $err) = $coord->psql('postgres', q{
	BEGIN;
	SELECT idem_claim('coord-ref', 'payments');
	INSERT INTO currencies VALUES ('EUR');
	COMMIT;});
like($err, qr/ERROR:  a claim on a Citus coordinator cannot commit with writes to distributed tables/,
	'a write to a reference table after a claim on the coordinator is refused');
# a Citus local table lives on the coordinator alone: its writes commit in
# the coordinator's own transaction, with the claim
($rc, $out, $err) = $coord->psql('postgres', q{
	BEGIN;
	INSERT INTO coord_audit VALUES ('coord-loc-1');
	SELECT idem_claim('coord-loc-1', 'payments');
	INSERT INTO coord_audit VALUES ('coord-loc-2');
	COMMIT;});
is($rc, 0, 'a claim beside writes to a Citus local table on the coordinator commits') or diag($err);
is($coord->safe_psql('postgres', q{SELECT count(*) FROM coord_audit}) . '/'
   . $coord->safe_psql('postgres', q{SELECT idem_claimed('coord-loc-1', 'payments')}),
	'2/t', 'with both of its writes');
($rc, $out, $err) = $coord->psql('postgres', q{
	BEGIN;
	SAVEPOINT s;
	SELECT idem_claim('coord-4', 'payments');
	ROLLBACK TO SAVEPOINT s;
	UPDATE accounts SET balance = balance WHERE id = 1;
	COMMIT;});
is($rc, 0, 'a claim rolled back to a savepoint no longer stands in the way of a distributed write')
  or diag($err);
# a handler that is not delegated runs on the coordinator: the guard catches
# it, in an explicit transaction without force_delegation, and with several
# calls in one statement
$coord->safe_psql('postgres', q{
	CREATE FUNCTION handle_payment_nd(p_account int, p_event text, p_amount bigint)
	RETURNS boolean LANGUAGE plpgsql AS $$
	BEGIN
	    IF NOT idem_claim(p_event, 'payments') THEN RETURN false; END IF;
	    UPDATE accounts SET balance = balance + p_amount WHERE id = p_account;
	    RETURN true;
	END $$;
	SELECT create_distributed_function('handle_payment_nd(int,text,bigint)',
	                                   distribution_arg_name := 'p_account',
	                                   colocate_with := 'accounts');});
# delegated on its own, it claims on the worker in a namespace of its own,
# which would stay behind when the shard moves: refused there, with the
# recipe in the hint (the moves below redeliver every event of the recipe)
($rc, $out, $err) = $coord->psql('postgres', q{SELECT handle_payment_nd(7, 'nd-1', 1)});
like($err, qr/a claim in a call Citus routed to this node must be kept with a shard.*HINT:  Claim with idem_citus_claim/s,
	'a plain idem_claim in a delegated call is refused on the worker, pointing to idem_citus_claim');
($rc, $out, $err) = $coord->psql('postgres', q{
	BEGIN;
	SELECT handle_payment_nd(7, 'nd-2', 1);
	COMMIT;});
like($err, qr/a claim on a Citus coordinator cannot commit with writes to distributed tables/,
	'in an explicit transaction without force_delegation the call runs on the coordinator, and is refused');
($rc, $out, $err) = $coord->psql('postgres', q{
	SELECT handle_payment(7, 'nd-3', 1), handle_payment(8, 'nd-4', 1);});
like($err, qr/ERROR:  claims kept with a Citus shard live on workers, not on the coordinator/,
	'two calls in one statement run on the coordinator, and are refused there');
is($coord->safe_psql('postgres', q{SELECT sum(balance) FROM accounts}), $events,
	'the refused transactions changed nothing');

# Every event <prefix>-1 .. <prefix>-n redelivered, one call per statement,
# as a broker would until every delivery is acknowledged: passes over the
# whole log until one meets no error (a node may still be recovering, a
# shard may have just moved).  True once a pass is clean.
my $redeliver_all = sub {
	my ($prefix, $n) = @_;
	my $sql = join('', map { sprintf("SELECT handle_payment(%d, '%s-%d', 1);\n", ($_ % 100) + 1, $prefix, $_) }
		  1 .. $n);
	for my $pass (1 .. 30)
	{
		my ($rc2, $out2, $err2) = $coord->psql('postgres', $sql, on_error_stop => 0);
		return 1 if $rc2 == 0 && $err2 !~ /ERROR|FATAL/;
		sleep 1;
	}
	return 0;
};

# --- shard moves and rebalancing during a load ------------------------------
# idem_citus_claim keeps each claim with the shard of the account's row;
# when Citus moves the shard, the move takes the claims along.  Moves use
# logical replication (the default) and block_writes; then the rebalancer.
$coord->safe_psql('postgres', 'UPDATE accounts SET balance = 0');
my $placement = sub {
	return $coord->safe_psql('postgres', q{
		SELECT string_agg(shardid || '@' || nodeport, ',' ORDER BY shardid)
		  FROM pg_dist_shard_placement
		 WHERE shardid IN (SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'accounts'::regclass)});
};
my $before = $placement->();
my $mv_events = 20000;
my $mv_script = "$PostgreSQL::Test::Utils::tmp_check/citus_move.pgbench";
open($fh, '>', $mv_script) or die $!;
print $fh "\\set e random(1, $mv_events)\n"
  . "SELECT handle_payment((:e % 100) + 1, 'mv-' || :e, 1);\n";
close $fh;
my ($mv_out, $mv_err) = ('', '');
my $mv_bench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '4', '-j', '2', '-T', '600', '--max-tries=1000', '-f', $mv_script,
	  '-h', $coord->host, '-p', $coord->port, 'postgres' ],
	'>', \$mv_out, '2>', \$mv_err);
my $mv_claimed = sub {
	return $coord->safe_psql('postgres', q{
		SELECT sum(result::bigint) FROM run_command_on_workers(
		  $$SELECT count(*) FROM idem_claims WHERE namespace = 'payments' AND event_id LIKE 'mv-%'$$)});
};
sleep 1;
my $claimed_before = $mv_claimed->();
my @w1_shards = split /\n/, $coord->safe_psql('postgres', sprintf(q{
	SELECT shardid FROM pg_dist_shard_placement
	 WHERE nodeport = %d AND shardid IN (SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'accounts'::regclass)
	 ORDER BY shardid LIMIT 3}, $workers[0]->port));
my @moves = (
	[ $w1_shards[0], 'auto' ], [ $w1_shards[1], 'block_writes' ], [ $w1_shards[2], 'auto' ]);
foreach my $m (@moves)
{
	my ($shard, $mode) = @$m;
	my ($rc_m, $out_m, $err_m) = $coord->psql('postgres', sprintf(
		q{SELECT citus_move_shard_placement(%s, '%s', %d, '%s', %d, shard_transfer_mode => '%s')},
		$shard, $workers[0]->host, $workers[0]->port, $workers[1]->host, $workers[1]->port, $mode));
	is($rc_m, 0, "shard $shard moves from worker1 to worker2 ($mode) during the load") or diag($err_m);
}
my ($rc_r, $out_r, $err_r) = $coord->psql('postgres',
	q{SELECT citus_rebalance_start(); SELECT citus_rebalance_wait();});
is($rc_r, 0, 'the rebalancer runs during the load') or diag($err_r);
my $claimed_after = $mv_claimed->();
# the load ran until now: stop it (a consumer that dies mid-call)
# (TERM: INT is ignored when the run is a shell's background job)
$mv_bench->signal('TERM');
$mv_bench->finish;
# and wait for the calls it left in flight to end
$coord->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM pg_stat_activity
	 WHERE query LIKE '%handle_payment%' AND pid <> pg_backend_pid() AND state <> 'idle'})
  or die 'the load\'s calls did not end';
cmp_ok($claimed_after, '>', $claimed_before,
	'the load claimed new events while the shards moved (' . ($claimed_after - $claimed_before) . ')');
my $after = $placement->();
isnt($after, $before, 'the shards of the accounts are placed differently afterwards');
# before any redelivery: each claim is on the node holding its shard, and
# every applied event is claimed exactly once
foreach my $w (@workers)
{
	is($w->safe_psql('postgres', q{
		SELECT count(*) FROM idempotency.claims c JOIN idem_namespaces n ON n.id = c.ns
		 WHERE pg_catalog.split_part(n.name, E'\x1f', 1) = 'payments'
		   AND pg_catalog.split_part(n.name, E'\x1f', 2) <> ''
		   AND pg_catalog.split_part(n.name, E'\x1f', 2)::bigint NOT IN
		       (SELECT shardid FROM pg_dist_placement
		         WHERE groupid = (SELECT groupid FROM pg_dist_local_group))}),
		'0', $w->name . ' holds claims only of the shards it holds');
}
my $mv_claims = $coord->safe_psql('postgres', q{
	SELECT sum(result::bigint) FROM run_command_on_workers(
	  $$SELECT count(*) FROM idem_claims WHERE namespace = 'payments' AND event_id LIKE 'mv-%'$$)});
is($coord->safe_psql('postgres', q{SELECT sum(balance) FROM accounts}), $mv_claims,
	"the balances hold exactly the $mv_claims claimed events, across the moves");
ok($redeliver_all->('mv', $mv_events), 'a redelivery of every event passes without an error');
my $mv_per_account = $mv_events / 100;
is($coord->safe_psql('postgres', qq{SELECT count(*) FROM accounts WHERE balance <> $mv_per_account}),
	'0', "after the moves and a full redelivery, every balance is exact ($mv_per_account): 0 applied twice, 0 lost");
is($coord->safe_psql('postgres', q{
	SELECT sum(result::bigint) FROM run_command_on_workers(
	  $$SELECT count(*) FROM idem_claims WHERE namespace = 'payments' AND event_id LIKE 'mv-%'$$)}),
	$mv_events, 'every event is claimed exactly once across the workers');
amcheck_claims($_, 'postgres', $_->name . ' after the moves') foreach @workers;
# the coordinator holds no claims: a shard with claims cannot move there
$coord->safe_psql('postgres', sprintf(q{SELECT citus_set_node_property('%s', %d, 'shouldhaveshards', true)},
	$coord->host, $coord->port));
my $to_coord = $coord->safe_psql('postgres', sprintf(q{
	SELECT shardid FROM pg_dist_shard_placement
	 WHERE nodeport = %d AND shardid IN (SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'accounts'::regclass)
	 ORDER BY shardid LIMIT 1}, $workers[1]->port));
($rc, $out, $err) = $coord->psql('postgres', sprintf(
	q{SELECT citus_move_shard_placement(%s, '%s', %d, '%s', %d, shard_transfer_mode => 'block_writes')},
	$to_coord, $workers[1]->host, $workers[1]->port, $coord->host, $coord->port));
like($err, qr/shard \d+ cannot move to the coordinator: it has claims/,
	'a move of a shard with claims to the coordinator is refused');
is($coord->safe_psql('postgres', "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = $to_coord"),
	$workers[1]->port, 'and the shard stays where it was');
$coord->safe_psql('postgres', sprintf(q{SELECT citus_set_node_property('%s', %d, 'shouldhaveshards', false)},
	$coord->host, $coord->port));
# a split would leave the claims behind, under the old shard: refused
my ($split_shard, $split_min, $split_max, $split_node) = split /\|/, $coord->safe_psql('postgres', q{
	SELECT s.shardid, s.shardminvalue, s.shardmaxvalue, n.nodeid
	  FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid)
	 WHERE s.logicalrelid = 'accounts'::regclass ORDER BY s.shardid LIMIT 1});
my $split_point = int(($split_min + $split_max) / 2);
($rc, $out, $err) = $coord->psql('postgres', sprintf(
	q{SELECT citus_split_shard_by_split_points(%s, ARRAY['%d'], ARRAY[%d, %d], shard_transfer_mode => 'block_writes')},
	$split_shard, $split_point, $split_node, $split_node));
like($err, qr/shard \d+ cannot be split: it has claims/, 'a split of a shard with claims is refused');
is($coord->safe_psql('postgres', "SELECT count(*) FROM pg_dist_shard WHERE shardid = $split_shard"), '1',
	'and the shard is still there, whole');

# --- a worker killed with -9 mid-load, then restarted ----------------------
$coord->safe_psql('postgres', 'UPDATE accounts SET balance = 0');
my $kill_events = 3000;
my $kill_script = "$PostgreSQL::Test::Utils::tmp_check/citus_kill.pgbench";
open($fh, '>', $kill_script) or die $!;
print $fh "\\set e random(1, $kill_events)\n"
  . "SELECT handle_payment((:e % 100) + 1, 'kill-' || :e, 1);\n";
close $fh;
my ($bench_out, $bench_err) = ('', '');
my $bench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '4', '-j', '2', '-T', '8', '-f', $kill_script,
	  '-h', $coord->host, '-p', $coord->port, 'postgres' ],
	'>', \$bench_out, '2>', \$bench_err);
sleep 3;
my ($old_pid) = split /\n/, slurp_file($workers[0]->data_dir . '/postmaster.pid');
$workers[0]->kill9;
# restart (crash recovery) once the killed postmaster is gone
for (1 .. 60)
{
	last unless kill(0, $old_pid);
	usleep(250_000);
}
ok(!kill(0, $old_pid), 'the killed worker postmaster is gone');
$workers[0]->start;
$bench->finish;
like($bench_err, qr/connection|terminat|server closed|lost/i,
	'the load met the crashed worker (its clients got errors)');
ok($redeliver_all->('kill', $kill_events), 'a redelivery of every event passes without an error');
$coord->safe_psql('postgres', 'SELECT recover_prepared_transactions()');
my $kill_per_account = $kill_events / 100;
is($coord->safe_psql('postgres', qq{SELECT count(*) FROM accounts WHERE balance <> $kill_per_account}),
	'0', "after a worker kill -9 and everything redelivered, every balance is exact ($kill_per_account)");
is($coord->safe_psql('postgres', q{
	SELECT sum(result::bigint) FROM run_command_on_workers($$SELECT count(*) FROM pg_prepared_xacts$$)}),
	'0', 'no prepared transaction is left on the workers');

# --- explicit two-call transactions across both workers, and a coordinator
# killed between PREPARE and COMMIT PREPARED --------------------------------
# With force_delegation, each call of a transaction block runs on its
# account's worker, and the coordinator commits the workers with two-phase
# commit: the claims commit or abort with their writes on every worker.
$coord->safe_psql('postgres', q{
	UPDATE accounts SET balance = 0;
	CREATE TABLE tp_pairs (k int PRIMARY KEY, a int NOT NULL, b int NOT NULL);
	WITH placed AS (
	  SELECT id, p.groupid, row_number() OVER (PARTITION BY p.groupid ORDER BY id) AS r
	    FROM generate_series(1, 100) id
	    JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('accounts', id)),
	  g AS (SELECT min(groupid) AS g1, max(groupid) AS g2 FROM placed),
	  one AS (SELECT id, r FROM placed, g WHERE groupid = g1),
	  two AS (SELECT id, r FROM placed, g WHERE groupid = g2)
	INSERT INTO tp_pairs
	  SELECT k, one.id, two.id
	    FROM generate_series(1, 2000) k
	    JOIN one ON one.r = 1 + k % (SELECT count(*) FROM one)
	    JOIN two ON two.r = 1 + k % (SELECT count(*) FROM two);});
is($coord->safe_psql('postgres', q{
	SELECT count(DISTINCT (pa.groupid, pb.groupid)) FILTER (WHERE pa.groupid <> pb.groupid)
	     = count(DISTINCT (pa.groupid, pb.groupid))
	  FROM tp_pairs t
	  JOIN pg_dist_placement pa ON pa.shardid = get_shard_id_for_distribution_column('accounts', t.a)
	  JOIN pg_dist_placement pb ON pb.shardid = get_shard_id_for_distribution_column('accounts', t.b)}),
	't', 'each pair of events writes accounts on the two workers');
my $tp_script = "$PostgreSQL::Test::Utils::tmp_check/citus_2pc.pgbench";
open($fh, '>', $tp_script) or die $!;
print $fh "\\set k random(1, 2000)\n"
  . "SELECT a, b FROM tp_pairs WHERE k = :k \\gset\n"
  . "BEGIN;\n"
  . "SELECT handle_payment(:a, 'tp-' || :k || '-a', 1);\n"
  . "SELECT handle_payment(:b, 'tp-' || :k || '-b', 1);\n"
  . "COMMIT;\n";
close $fh;
($rc, $out, $err) = $coord->psql('postgres', q{
	BEGIN;
	SELECT handle_payment(a, 'tp-1-a', 1) FROM tp_pairs WHERE k = 1;
	COMMIT;});
like($err, qr/ERROR:  claims kept with a Citus shard live on workers, not on the coordinator/,
	'a handler call that is not a constant call is not delegated, and is refused on the coordinator');

# every process of the coordinator, postmaster first
my $coord_pids = sub {
	my ($pm) = split /\n/, slurp_file($coord->data_dir . '/postmaster.pid');
	my @kids = split ' ', `pgrep -P $pm`;
	return ($pm, @kids);
};
my $worker_prepared = sub {
	my $n = 0;
	$n += $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') foreach @workers;
	return $n;
};
($bench_out, $bench_err) = ('', '');
$bench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '4', '-j', '2', '-T', '60', '-f', $tp_script,
	  '-h', $coord->host, '-p', $coord->port, 'postgres' ],
	'>', \$bench_out, '2>', \$bench_err);
sleep 2;
# freeze the coordinator until a worker holds one of its prepared
# transactions (between PREPARE and COMMIT PREPARED), then kill it there
my ($caught, @frozen) = (0);
for my $try (1 .. 200)
{
	@frozen = $coord_pids->();
	kill 'STOP', @frozen;
	last if ($caught = $worker_prepared->());
	kill 'CONT', @frozen;
	usleep(int(rand(20_000)));
}
kill 'KILL', @frozen[1 .. $#frozen];
$coord->kill9;
ok($caught, "the coordinator was killed with $caught transactions prepared on the workers");
for (1 .. 60)
{
	last unless grep { kill(0, $_) } @frozen;
	usleep(250_000);
}
$bench->finish;
$coord->start;
# Citus's recovery commits the prepared transactions whose commit the
# coordinator recorded, and aborts the others
for (1 .. 60)
{
	last if $worker_prepared->() == 0;
	$coord->safe_psql('postgres', 'SELECT recover_prepared_transactions()');
	sleep 1;
}
is($worker_prepared->(), 0, 'after the coordinator restarts, no prepared transaction is left');
my %claimed;
foreach my $w (@workers)
{
	$claimed{$_} = 1 foreach split /\n/, $w->safe_psql('postgres',
		q{SELECT event_id FROM idem_claims WHERE namespace = 'payments' AND event_id LIKE 'tp-%'});
}
my ($pairs, $halves) = (0, 0);
foreach my $k (1 .. 2000)
{
	my ($x, $y) = ($claimed{"tp-$k-a"} // 0, $claimed{"tp-$k-b"} // 0);
	$pairs++ if $x && $y;
	$halves++ if $x != $y;
}
cmp_ok($pairs, '>', 0, "$pairs two-call transactions committed before the kill");
is($halves, 0, 'no transaction has one of its two claims without the other');
is($coord->safe_psql('postgres', q{SELECT sum(balance) FROM accounts}), 2 * $pairs,
	'the balances hold exactly the claimed events (0 applied twice, 0 lost)');
# the broker redelivers every pair, in the same transactions
my $again = $coord->safe_psql('postgres', q{
	SELECT string_agg(format(E'BEGIN;\nSELECT handle_payment(%s, %L, 1);\nSELECT handle_payment(%s, %L, 1);\nCOMMIT;',
	                         a, 'tp-' || k || '-a', b, 'tp-' || k || '-b'), E'\n' ORDER BY k)
	  FROM tp_pairs});
$coord->safe_psql('postgres', $again);
is($coord->safe_psql('postgres', q{SELECT sum(balance) FROM accounts}), 4000,
	'once every pair is redelivered, the balances hold each of the 4,000 events once');
is($coord->safe_psql('postgres', q{
	WITH due AS (SELECT id, count(*) AS n FROM tp_pairs, LATERAL (VALUES (a), (b)) v(id) GROUP BY id)
	SELECT count(*) FROM accounts x LEFT JOIN due USING (id) WHERE x.balance <> coalesce(due.n, 0)}),
	'0', 'and every account holds exactly its own events: 0 applied twice, 0 lost');
amcheck_claims($_, 'postgres', $_->name . ' after the coordinator crash') foreach @workers;
amcheck_claims($_, 'postgres', $_->name) foreach @workers;
$_->stop foreach reverse @nodes;
done_testing();
