# Claim generations on a whole cluster: a redelivery load while
# generations switch under it, restarts (filters reloaded from the
# catalog), a standby reading sealed generations, a crash in the middle of
# switches, a dump and restore, logical decoding of a new generation, and
# pg_upgrade.  Every phase ends with 0 applied twice and 0 lost.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Cwd;
use IdemCheck;

my $IDS = 3000;

my $node = PostgreSQL::Test::Cluster->new('generations');
$node->init(allows_streaming => 'logical');
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
max_connections = 40
$IdemCheck::WORKER_LIVE
log_statement = none
});
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION idempotency;
SELECT idem_namespace_define('gen', '2 hours');
SELECT idem_generation_switch();
CREATE TABLE applied (k text NOT NULL);
CREATE FUNCTION consume(p text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF idem_claim(p, 'gen') THEN
        INSERT INTO applied VALUES (p);
    END IF;
END $$;
CREATE FUNCTION redeliver_all(n int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE before bigint; after bigint;
BEGIN
    SELECT count(*) INTO before FROM applied;
    PERFORM consume('g-' || i) FROM generate_series(1, n) i;
    SELECT count(*) INTO after FROM applied;
    RETURN after - before;
END $$;
});

my $dir = PostgreSQL::Test::Utils::tempdir();
my $consume = "$dir/consume.sql";
PostgreSQL::Test::Utils::append_to_file($consume, qq{
\\set k random(1, $IDS)
SELECT consume('g-' || :k);
});
my $switch = "$dir/switch.sql";
PostgreSQL::Test::Utils::append_to_file($switch, q{
SELECT idem_generation_switch();
});

# 0 applied twice, and exactly the live claims applied
sub ledger_ok
{
	my ($n, $db, $label) = @_;
	is($n->safe_psql($db, 'SELECT count(*) FROM (SELECT k FROM applied GROUP BY k HAVING count(*) > 1) d'),
		'0', "$label: no event applied twice");
	is($n->safe_psql($db, q{
		SELECT count(*) FROM applied a WHERE NOT idem_claimed(a.k, 'gen')}),
		'0', "$label: every applied event is claimed");
	is($n->safe_psql($db, q{
		SELECT count(*) FROM idem_claims c
		 WHERE namespace = 'gen' AND NOT EXISTS (SELECT 1 FROM applied a WHERE a.k = c.event_id)}),
		'0', "$label: every claim was applied (none lost)");
}

# --- a load with switches under it ------------------------------------------
$node->command_ok(
	[
		'pgbench', '-n', '-c', '6', '-j', '2', '-T', '10',
		'-f', "$consume\@40", '-f', "$switch\@1",
		'-h', $node->host, '-p', $node->port, 'postgres'
	],
	'claims while generations switch: no errors');

my $gens = $node->safe_psql('postgres', 'SELECT count(*) FROM idem_generations');
cmp_ok($gens, '>=', 5, "the load ran across many generations ($gens live)");
my $spread = $node->safe_psql('postgres', q{
	SELECT count(DISTINCT tableoid) FROM idempotency.claims});
cmp_ok($spread, '>=', 3, "claims live in $spread generation tables");
ledger_ok($node, 'postgres', 'after the switching load');
my $missing = $node->safe_psql('postgres', "SELECT $IDS - count(DISTINCT k) FROM applied");
is($node->safe_psql('postgres', "SELECT redeliver_all($IDS)"), $missing,
	"redelivering every id applies only the $missing never delivered");
is($node->safe_psql('postgres', "SELECT redeliver_all($IDS)"), '0',
	'a second redelivery applies nothing: duplicates found in every generation');
ledger_ok($node, 'postgres', 'after redelivery');
amcheck_claims($node, 'postgres', 'after the switching load');

# --- REINDEX CONCURRENTLY and a new index on the open generation, under load
my $open = $node->safe_psql('postgres', q{
	SELECT relation FROM idem_generations WHERE state = 'open' AND ttl_class = 12});
my $ddl_load = IPC::Run::start(
	[
		'pgbench', '-n', '-c', '4', '-j', '2', '-T', '6', '-f', $consume,
		'-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', "$dir/ddl.out", '2>', "$dir/ddl.err");
sleep 1;
$node->safe_psql('postgres', "REINDEX TABLE CONCURRENTLY $open");
$node->safe_psql('postgres', "CREATE INDEX CONCURRENTLY gen_claimed_at ON $open (claimed_at)");
$ddl_load->finish;
is($?, 0, 'claims ran through REINDEX CONCURRENTLY and CREATE INDEX CONCURRENTLY of the open generation');
ledger_ok($node, 'postgres', 'after DDL on the open generation');
amcheck_claims($node, 'postgres', 'after DDL on the open generation');
$node->safe_psql('postgres', 'DROP INDEX idempotency.gen_claimed_at');

# the seal read every claim of a sealed generation into its filter
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM idem_generations g
	 WHERE state = 'sealed' AND claims < (SELECT count(*) FROM idempotency.claims c
	                                       WHERE c.tableoid = g.relation::regclass)}),
	'0', 'no sealed generation holds more claims than its seal counted');

# --- a restart: filters come back from the catalog ----------------------------
$node->restart;
is($node->safe_psql('postgres', "SELECT redeliver_all($IDS)"), '0',
	'after a restart, duplicates are still found');
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idem_claimed('g-' || i, 'gen')) FROM generate_series(1, 3000) i}),
	$IDS, 'after a restart, every id reads as claimed');

# --- a standby reads every generation -----------------------------------------
$node->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('generations_standby');
$standby->init_from_backup($node, 'b1', has_streaming => 1);
$standby->start;
$node->safe_psql('postgres', q{
	SELECT consume('late-' || i) FROM generate_series(1, 50) i;
	SELECT idem_generation_switch();});
$node->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idem_claimed('g-' || i, 'gen')) FROM generate_series(1, 3000) i}),
	$IDS, 'the standby reads every claim, in sealed generations too');
is($standby->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idem_claimed('late-' || i, 'gen')) FROM generate_series(1, 50) i}),
	'50', 'the standby reads claims sealed after it started');
is($standby->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idem_claimed('never-' || i, 'gen')) FROM generate_series(1, 500) i}),
	'0', 'the standby finds no claim that was never made');
amcheck_claims($standby, 'postgres', 'on the standby');
$standby->stop;

# --- a crash in the middle of switches and drops (an immediate stop) ---------
# expired generations for the switches of the load to drop meanwhile
foreach my $i (1 .. 5)
{
	$node->safe_psql('postgres', q{
		SELECT idem_namespace_define('gen_exp', '1 hour');
		SELECT idem_generation_switch('gen_exp');
		SELECT count(*) FROM (SELECT idem_claims_import('e-' || i || '-' || random(), 'gen_exp',
		                                                 now() - interval '59 minutes 58 seconds')
		                        FROM generate_series(1, 1000) i) s;});
}
$node->safe_psql('postgres', q{SELECT idem_generation_switch('gen_exp')});
sleep 3;
my $load = IPC::Run::start(
	[
		'pgbench', '-n', '-c', '4', '-j', '2', '-T', '30',
		'-f', "$consume\@10", '-f', "$switch\@1",
		'-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', "$dir/crash.out", '2>', "$dir/crash.err");
sleep 3;
$node->stop('immediate');    # no shutdown checkpoint: recovery replays the switches
$load->finish;
$node->start;
# the worker, live, may switch or drop a generation while these checks read
# the store: the generations table's row and the catalog's table are read
# under snapshots of their own (a query's, and the catalog's, which is
# newer), so a drop committing in between would show a row without its
# table.  A SHARE lock on the generations table holds switches and drops
# out for the checks, which then see one state.
sub consistent
{
	my ($sql) = @_;
	return $node->safe_psql('postgres',
		"BEGIN; LOCK idempotency.generations IN SHARE MODE; $sql; COMMIT");
}
is(consistent(q{
	SELECT count(*) FROM idempotency.generations g
	 WHERE to_regclass('idempotency.claims_g' || g.id) IS NULL}),
	'0', 'after the crash, every generation has its table');
is(consistent(q{
	SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
	 WHERE i.inhparent = 'idempotency.claims'::regclass
	   AND NOT EXISTS (SELECT 1 FROM idempotency.generations g WHERE 'claims_g' || g.id = c.relname)}),
	'0', 'after the crash, every generation table has its row');
is(consistent(q{SELECT count(*) - count(DISTINCT ttl_class) FROM idempotency.generations WHERE state = 'open'}),
	'0', 'after the crash, one open generation per class at most');
$missing = $node->safe_psql('postgres', "SELECT $IDS - count(DISTINCT k) FILTER (WHERE k LIKE 'g-%') FROM applied");
is($node->safe_psql('postgres', "SELECT redeliver_all($IDS)"), $missing,
	'after the crash, redelivery applies only what was never applied');
ledger_ok($node, 'postgres', 'after the crash');
amcheck_claims($node, 'postgres', 'after the crash');

# --- the purge drops expired generations, and gives the space back -----------
# the WAL of the drop itself is measured: the worker, live every second,
# pauses in this database for that step alone (it would drop the
# generation itself, at a moment the test does not know)
pause_worker($node, 'postgres');
$node->safe_psql('postgres', q{
	SELECT idem_namespace_define('gen_drop', '1 hour');
	SELECT idem_generation_switch();
	SELECT idem_claims_import('d-' || i, 'gen_drop', now() - interval '59 minutes 59 seconds')
	  FROM generate_series(1, 50000) i;
	SELECT idem_generation_switch();});
my $size = $node->safe_psql('postgres', q{
	SELECT sum(heap_bytes) FROM idem_generations WHERE ttl_class = 11});
cmp_ok($size, '>', 500000, "the expiring generation holds its claims ($size bytes)");
sleep 2;
my $wal0 = $node->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
my $purged = $node->safe_psql('postgres', 'SELECT idem_purge()');
my $wal = $node->safe_psql('postgres', "SELECT pg_current_wal_insert_lsn() - '$wal0'");
resume_worker($node, 'postgres');
cmp_ok($purged, '>=', 50000, "the purge reclaimed the expired generation ($purged claims)");
cmp_ok($wal / 50000, '<', 2, "with under 2 bytes of WAL per claim ($wal bytes)");
is($node->safe_psql('postgres', q{
	SELECT coalesce(sum(heap_bytes), 0) FROM idem_generations WHERE ttl_class = 11 AND state = 'sealed'}),
	'0', 'its space went back to the operating system');
ledger_ok($node, 'postgres', 'after the drop');

# --- a size bound: the claimer that fills the open generation wakes the
# launcher, which switches it at once, not at the next purge interval (an
# hour here)
$node->safe_psql('postgres', 'ALTER SYSTEM SET idempotency.generation_max_claims = 500');
$node->reload;
my $open_before = $node->safe_psql('postgres', q{
	SELECT id FROM idem_generations WHERE state = 'open'
	   AND ttl_class = (SELECT floor(log(2, extract(epoch FROM ttl)))::int FROM idem_namespaces WHERE name = 'gen')});
for my $batch (0 .. 2)
{
	$node->safe_psql('postgres', qq{
		SELECT count(*) FROM (SELECT consume('size-' || i) FROM generate_series($batch * 400 + 1, $batch * 400 + 400) i) c});
}
ok($node->poll_query_until('postgres', qq{
	SELECT state = 'sealed' FROM idem_generations WHERE id = $open_before}),
	'size bound: the filled generation was switched and sealed without waiting for the purge interval');
my $sealed = $node->safe_psql('postgres', "SELECT claims FROM idem_generations WHERE id = $open_before");
ok($sealed >= 500 && $sealed <= 1200, "size bound: the switched generation holds $sealed claims, from 500 on");
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idem_claim('size-' || i, 'gen')) FROM generate_series(1, 1200) i}),
	'0', 'size bound: every claim made across the switch is a duplicate');
ledger_ok($node, 'postgres', 'size bound');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET idempotency.generation_max_claims');
$node->reload;

# --- logical decoding sees claims in a new generation --------------------------
$node->safe_psql('postgres', q{
	CREATE PUBLICATION claims_pub FOR TABLES IN SCHEMA idempotency;
	SELECT pg_create_logical_replication_slot('gen_slot', 'test_decoding');
	SELECT idem_generation_switch();
	SELECT consume('decoded-1');});
my $newest = $node->safe_psql('postgres', q{
	SELECT 'claims_g' || max(id) FROM idem_generations WHERE ttl_class = 12});
like($node->safe_psql('postgres', q{
	SELECT string_agg(data, E'\n') FROM pg_logical_slot_get_changes('gen_slot', NULL, NULL)}),
	qr/table idempotency\.$newest: INSERT/, 'the claim in the new generation is decoded');
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM pg_publication_tables
	 WHERE pubname = 'claims_pub' AND schemaname = 'idempotency' AND tablename = '$newest'}),
	'1', 'a publication FOR TABLES IN SCHEMA idempotency covers the new generation');
$node->safe_psql('postgres', q{SELECT pg_drop_replication_slot('gen_slot'); DROP PUBLICATION claims_pub});

# --- dump and restore ----------------------------------------------------------
my $dump = "$dir/gen.dump";
$node->command_ok(['pg_dump', '-Fc', '-f', $dump, '-h', $node->host, '-p', $node->port, 'postgres'],
	'pg_dump of a store in generations');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok(['pg_restore', '-d', 'restored', '-h', $node->host, '-p', $node->port, $dump],
	'pg_restore of it');
is($node->safe_psql('restored', 'SELECT count(*) FROM idem_claims'),
	$node->safe_psql('postgres', 'SELECT count(*) FROM idem_claims'),
	'every claim of every generation is restored');
# both workers are live: an empty generation may be dropped, and an open
# one switched and sealed, on either side; a sealed generation holding live
# claims is final, so each of the source's is sealed in the restored store
my $sealed_sql = q{SELECT id FROM idem_generations WHERE state = 'sealed' AND claims > 0 ORDER BY id};
my %restored_sealed = map { $_ => 1 } split /\n/, $node->safe_psql('restored', $sealed_sql);
my @not_sealed = grep { !$restored_sealed{$_} } split /\n/, $node->safe_psql('postgres', $sealed_sql);
is("@not_sealed", '', 'the sealed generations are restored as sealed');
is($node->safe_psql('restored', "SELECT redeliver_all($IDS)"), '0',
	'the restored store refuses every redelivery');
ledger_ok($node, 'restored', 'after the restore');
$node->safe_psql('restored', 'SELECT idem_generation_switch()');
is($node->safe_psql('restored', 'SELECT redeliver_all(100)'), '0', 'and keeps doing so across a switch');
$node->safe_psql('restored', 'DROP EXTENSION idempotency');
is($node->safe_psql('restored', q{SELECT count(*) FROM pg_class WHERE relname LIKE 'claims_g%'}),
	'0', 'DROP EXTENSION drops the generations with it');

# --- pg_upgrade ------------------------------------------------------------------
$node->safe_psql('postgres', 'DROP DATABASE restored');
my $claims_before = $node->safe_psql('postgres', 'SELECT count(*) FROM idem_claims');
$node->stop;
my $new = PostgreSQL::Test::Cluster->new('generations_upgraded');
$new->init;
$new->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'\n");
my $bindir = $node->config_data('--bindir');
{
	# pg_upgrade writes its logs into the current directory's output dir
	my $cwd = Cwd::getcwd();
	chdir $dir;
	command_ok(
		[
			'pg_upgrade', '--no-sync', '-d', $node->data_dir, '-D', $new->data_dir,
			'-b', $bindir, '-B', $bindir, '-s', $new->host,
			'-p', $node->port, '-P', $new->port
		],
		'pg_upgrade of a store in generations');
	chdir $cwd;
}
$new->start;
is($new->safe_psql('postgres', 'SELECT count(*) FROM idem_claims'), $claims_before,
	'after pg_upgrade, every claim is there');
is($new->safe_psql('postgres', "SELECT redeliver_all($IDS)"), '0',
	'after pg_upgrade, every redelivery is refused');
$new->safe_psql('postgres', 'SELECT idem_generation_switch()');
is($new->safe_psql('postgres', 'SELECT redeliver_all(200)'), '0', 'also across a switch');
ledger_ok($new, 'postgres', 'after pg_upgrade');
amcheck_claims($new, 'postgres', 'after pg_upgrade');
$new->stop;
done_testing();
