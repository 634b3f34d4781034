# Restoring into a live server keeps every claim.  The purge worker runs
# every second in every database, the half-restored one included: while
# pg_restore -j has loaded the generations' rows and tables but not yet the
# namespaces (pg_restore loads the smallest table last) or the primary keys
# (post-data), the store is incomplete, and the worker must not switch,
# seal or drop anything there; it says so once, in the log and in
# idem_purge_runs.  Three restores, each followed by a full redelivery:
#
#   1. staged, deterministic: pre-data, then all data but the namespaces',
#      then a wait until the worker has held back, then the rest, held
#      again while the post-data lacks the generations' policies, and
#      while a session named pg_restore is connected;
#   2. pg_restore -j 4 --exit-on-error of the whole dump;
#   3. pg_dump | psql -v ON_ERROR_STOP=1;
#   4. and a pg_dump connected to a database: expired generations wait.
#
# After each: the claims are all there, redelivering every event applies
# none again (ledger: 0 applied twice, 0 lost), the indexes pass amcheck,
# and the worker maintains the restored store again.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;

my $node = PostgreSQL::Test::Cluster->new('restore_live');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.purge_interval = '1s'
max_worker_processes = 16
});
$node->start;

# --- the source: 30 sealed generations, an open one, a large business table
$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
CREATE EXTENSION idempotency;
SELECT idem_namespace_define('pay', '7 days');
SELECT idem_namespace_define('ship', '1 day');
CREATE TABLE events (id text, ns text);
CREATE TABLE ledger (event_id text, ns text, applied_at timestamptz DEFAULT clock_timestamp());
-- the consumer: the claim and the business write in one transaction
CREATE FUNCTION deliver(id text, ns text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF idem_claim(id, ns) THEN
        INSERT INTO ledger (event_id, ns) VALUES (id, ns);
        RETURN true;
    END IF;
    RETURN false;
END $$;
CREATE TABLE big AS SELECT g AS id, md5(g::text) AS body FROM generate_series(1, 400000) g;
});
for my $gen (1 .. 30)
{
	$node->safe_psql('src', qq{
		INSERT INTO events SELECT 'e$gen-' || g, CASE WHEN g % 4 = 0 THEN 'ship' ELSE 'pay' END
		  FROM generate_series(1, 400) g;
		SELECT count(*) FILTER (WHERE deliver(id, ns)) FROM events WHERE id LIKE 'e$gen-%';
		SELECT idem_generation_switch();
	});
}
$node->safe_psql('src', q{
	INSERT INTO events SELECT 'open-' || g, 'pay' FROM generate_series(1, 2000) g;
	SELECT count(*) FILTER (WHERE deliver(id, ns)) FROM events WHERE id LIKE 'open-%';
});
my $nevents = $node->safe_psql('src', 'SELECT count(*) FROM events');
is($nevents, 30 * 400 + 2000, 'source: events delivered');
is($node->safe_psql('src', 'SELECT count(*) FROM ledger'), $nevents, 'source: each applied once');
my $nclaims = $node->safe_psql('src', 'SELECT count(*) FROM idempotency.claims');
is($nclaims, $nevents, 'source: one claim per event');
cmp_ok($node->safe_psql('src', q{SELECT count(*) FROM idempotency.generations WHERE state = 'sealed'}),
	'>=', 30, 'source: sealed generations');

my $dir = PostgreSQL::Test::Utils::tempdir();
my $dump = "$dir/src.dump";
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('src') ], 'pg_dump -Fc');

# Everything the worker must keep, checked after each restore
sub check_restored
{
	my ($db) = @_;

	# a few worker rounds over the restored store
	sleep 3;
	is($node->safe_psql($db, 'SELECT count(*) FROM idempotency.claims'), $nclaims,
		"$db: every claim is there");
	is($node->safe_psql($db, 'SELECT count(*) FILTER (WHERE deliver(id, ns)) FROM events'), '0',
		"$db: redelivering every event applies none again");
	is($node->safe_psql($db, q{
		SELECT (count(*) - count(DISTINCT (event_id, ns))) || ' applied twice, '
		       || (SELECT count(*) FROM events e WHERE NOT EXISTS
		             (SELECT FROM ledger l WHERE l.event_id = e.id AND l.ns = e.ns)) || ' lost'
		  FROM ledger}), '0 applied twice, 0 lost', "$db: ledger");
	amcheck_claims($node, $db, $db);
	# maintenance resumed: a switch runs, and a new id is claimed once
	cmp_ok($node->safe_psql($db, 'SELECT idem_generation_switch()'), '>=', 1,
		"$db: generations are maintained again");
	is($node->safe_psql($db, q{SELECT deliver('after-restore', 'pay')::text || deliver('after-restore', 'pay')::text}),
		'truefalse', "$db: claims work after the restore");
}

# --- 1. staged: the window the worker met, held open on purpose
$node->safe_psql('postgres', 'CREATE DATABASE dst_staged');
my $cs = $node->connstr('dst_staged');
my ($list) = run_command([ 'pg_restore', '-l', $dump ]);
my @toc = split /\n/, $list;
my @ns_data = grep { /TABLE DATA idempotency namespaces / } @toc;
is(scalar @ns_data, 1, 'the dump holds the namespaces as one TABLE DATA entry');
open my $fh, '>', "$dir/without_ns.list" or die;
print $fh join("\n", grep { !/TABLE DATA idempotency namespaces / } @toc), "\n";
close $fh;
open $fh, '>', "$dir/ns.list" or die;
print $fh "$ns_data[0]\n";
close $fh;

my $log_offset = -s $node->logfile;
$node->command_ok([ 'pg_restore', '--exit-on-error', '--section=pre-data', '-d', $cs, $dump ],
	'staged: pre-data');
$node->command_ok([ 'pg_restore', '--exit-on-error', '--section=data', '-j', '4',
		'-L', "$dir/without_ns.list", '-d', $cs, $dump ], 'staged: data, less the namespaces');

# the worker meets the half-restored store and holds back, saying why
my $held = q{SELECT count(*) FROM idempotency.purge_runs
			  WHERE target = 'idempotency.generations' AND error IS NOT NULL};
# (during the data step it may have said another thing missing: the
# generations' rows, say; the state the window holds says the primary keys)
my $last_reason = q{SELECT error FROM idempotency.purge_runs WHERE target = 'idempotency.generations'
					 ORDER BY run_id DESC LIMIT 1};
ok($node->poll_query_until('dst_staged', "SELECT ($last_reason) ~ 'no valid unique index on \\(key, ns\\)'"),
	'staged: the worker held back and recorded why, naming what is missing');
my $rows_held = $node->safe_psql('dst_staged', $held);
sleep 4;	# four more rounds in the same state
is($node->safe_psql('dst_staged', $held), $rows_held, 'staged: recorded once, not every round');
is($node->safe_psql('dst_staged', 'SELECT count(*) FROM idempotency.claims'), $nclaims,
	'staged: no claim dropped while incomplete');
is($node->safe_psql('dst_staged', 'SELECT count(*) FROM idempotency.generations'),
	$node->safe_psql('src', 'SELECT count(*) FROM idempotency.generations'),
	'staged: no generation switched or dropped while incomplete');
ok($node->log_contains('idempotency left claim generations alone in database "dst_staged"', $log_offset),
	'staged: the log says so');

$node->command_ok([ 'pg_restore', '--exit-on-error', '-L', "$dir/ns.list", '-d', $cs, $dump ],
	'staged: the namespaces');
# A serial pg_restore creates every index before any policy: a store
# restored up to its primary keys looks whole but for the namespace
# policies, and a generation dropped there fails the CREATE POLICY to come
my @post = grep { !/ (POLICY|ROW SECURITY) / } @toc;
open $fh, '>', "$dir/without_policies.list" or die;
print $fh join("\n", @post), "\n";
close $fh;
$node->command_ok([ 'pg_restore', '--exit-on-error', '--section=post-data',
		'-L', "$dir/without_policies.list", '-d', $cs, $dump ],
	'staged: post-data but the policies');
ok($node->poll_query_until('dst_staged',
		"SELECT ($last_reason) ~ 'lacks a namespace policy that idempotency.claims has'"),
	'staged: held while a generation lacks the policies of idempotency.claims');
is($node->safe_psql('dst_staged', 'SELECT count(*) FROM idempotency.generations'),
	$node->safe_psql('src', 'SELECT count(*) FROM idempotency.generations'),
	'staged: no generation switched or dropped before the policies');

# a pg_restore connected to the database holds maintenance too: its last
# steps (grants, comments) may name a generation table.  A session that
# names itself so stands in for it while the policies are restored.
my $restorer = $node->background_psql('dst_staged');
$restorer->query_safe(q{SET application_name = 'pg_restore'});
open $fh, '>', "$dir/policies.list" or die;
print $fh join("\n", grep { / (POLICY|ROW SECURITY) / } @toc), "\n";
close $fh;
$node->command_ok([ 'pg_restore', '--exit-on-error', '-L', "$dir/policies.list", '-d', $cs, $dump ],
	'staged: the policies');
ok($node->poll_query_until('dst_staged',
		qq{SELECT ($last_reason) = 'a pg_restore is connected to database "dst_staged"'}),
	'staged: held while a pg_restore is connected');
$restorer->quit;
ok($node->poll_query_until('dst_staged', q{
	SELECT error IS NULL FROM idempotency.purge_runs WHERE target = 'idempotency.generations'
	 ORDER BY run_id DESC LIMIT 1}), 'staged: the worker records that it maintains the store again');
check_restored('dst_staged');

# --- 2. pg_restore -j 4 of the whole dump, the worker live
$node->safe_psql('postgres', 'CREATE DATABASE dst_parallel');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-j', '4', '-d', $node->connstr('dst_parallel'), $dump ],
	'pg_restore -j 4 --exit-on-error');
check_restored('dst_parallel');

# --- 3. pg_dump | psql, the worker live
$node->safe_psql('postgres', 'CREATE DATABASE dst_plain');
my $plain = "$dir/src.sql";
$node->command_ok([ 'pg_dump', '-f', $plain, '-d', $node->connstr('src') ], 'pg_dump (plain)');
$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', $plain, '-d', $node->connstr('dst_plain') ],
	'psql -v ON_ERROR_STOP=1 < dump');
check_restored('dst_plain');

# --- 4. a pg_dump connected: expired generations wait for it to end
# pg_dump reads the list of tables, then locks each; a generation dropped
# in between fails the whole dump (TAP 016 met it).  A session named
# pg_dump stands in for one that is between the two.
$node->safe_psql('postgres', 'CREATE DATABASE dumped');
$node->safe_psql('dumped', q{
	CREATE EXTENSION idempotency;
	SELECT idem_namespace_define('soon', '1 hour');
	SELECT idem_generation_switch();
	SELECT idem_claims_import('x-' || i, 'soon', now() - interval '59 minutes 55 seconds')
	  FROM generate_series(1, 1000) i;
	SELECT idem_generation_switch();});
my $dumper = $node->background_psql('dumped');
$dumper->query_safe(q{SET application_name = 'pg_dump'});
ok($node->poll_query_until('dumped',
		qq{SELECT ($last_reason) ~ '^a pg_dump is connected to database "dumped"'}),
	'pg_dump connected: the worker holds the expired generation back, and says why');
is($node->safe_psql('dumped', q{SELECT count(*) FROM idem_claims WHERE namespace = 'soon'}),
	'1000', 'pg_dump connected: the expired generation is still there');
$dumper->quit;
ok($node->poll_query_until('dumped',
		q{SELECT count(*) = 0 FROM idem_claims WHERE namespace = 'soon'}),
	'pg_dump gone: the expired generation is dropped');

$node->stop;
done_testing();
