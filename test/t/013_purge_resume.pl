# A table too big to read through in one purge round is still purged to
# its end: a batch reads at most a window of pages, however few expired
# rows they hold, and a worker round that stops short at purge_max_runtime
# leaves in idempotency.purge_runs where the next round goes on.  A round
# may last 100 ms here.
#  - A purge policy table of 2M live rows, then 1,000 expired ones: one
#    statement reading it whole takes longer than a round, so before
#    windows that batch was cancelled at the deadline every round and the
#    expired tail was never reached.
#  - The claims: 3M live claims, then 1,000 expired.  The native batch reads
#    3M claims within 100 ms on a fast machine, so this part holds with or
#    without windows; it checks that windows and resume points lose nothing.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('resume');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.purge_enabled = off
idempotency.purge_interval = '1s'
idempotency.purge_max_runtime = '100ms'
idempotency.purge_batch_size = 100
shared_buffers = '256MB'
log_statement = none
});
$node->start;
create_extension_with_namespaces($node, ['postgres'], { long => '1 day', short => '1 second' });

$node->safe_psql('postgres', q{
	INSERT INTO idempotency.claims (claimed_at, ns, key)
	SELECT now(), (SELECT id FROM idempotency.namespaces WHERE name = 'long' LIMIT 1),
	       uuid_send(gen_random_uuid())
	  FROM generate_series(1, 3000000);
	INSERT INTO idempotency.claims (claimed_at, ns, key)
	SELECT now() - interval '1 hour', (SELECT id FROM idempotency.namespaces WHERE name = 'short' LIMIT 1),
	       uuid_send(gen_random_uuid())
	  FROM generate_series(1, 1000);
	VACUUM ANALYZE idempotency.claims;
	CREATE TABLE events (id bigint, at timestamptz NOT NULL, payload text);
	INSERT INTO events SELECT g, now(), repeat('x', 40) FROM generate_series(1, 2000000) g;
	INSERT INTO events SELECT g, now() - interval '1 day', 'old' FROM generate_series(1, 1000) g;
	VACUUM ANALYZE events;
	SELECT idem_purge_policy_add('events', 'at', '1 hour');
});
my $pages = $node->safe_psql('postgres', q{SELECT pg_relation_size('idempotency.claims') / 8192});
cmp_ok($pages, '>', 10 * 1024, "the claims heap spans more than ten windows ($pages pages)");

$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.purge_enabled = on; SELECT pg_reload_conf()});
# The waits bound a purge that stalls, not how fast a round is: on a
# loaded machine (CI beside other jobs) a 100 ms round gets through fewer
# windows, and 120 s once ran out with the whole tail still there.
my $start = time();
my $left;
while (time() - $start < 240)
{
	$left = $node->safe_psql('postgres', q{
		SELECT count(*) FROM idem_claims WHERE namespace = 'short'});
	last if $left eq '0';
	usleep(250_000);
}
is($left, '0', sprintf('the expired tail of the claims is purged (%.1f s)', time() - $start));
while (time() - $start < 420)
{
	$left = $node->safe_psql('postgres', q{SELECT count(*) FROM events WHERE payload = 'old'});
	last if $left eq '0';
	usleep(250_000);
}
is($left, '0', sprintf("the policy table's expired tail is purged, round after round (%.1f s)",
	time() - $start));
cmp_ok($node->safe_psql('postgres', q{
	SELECT count(*) FROM idempotency.purge_runs
	 WHERE target = 'public.events' AND trigger = 'worker' AND resume_after > '(0,0)'}),
	'>', 0, 'rounds that stopped short in the policy table recorded where the next goes on');
is($node->safe_psql('postgres', q{SELECT count(*) FROM events WHERE payload <> 'old'}), '2000000',
	'no live row of the policy table is purged');
cmp_ok($node->safe_psql('postgres', q{
	SELECT count(*) FROM idempotency.purge_runs
	 WHERE target = 'idempotency.claims' AND trigger = 'worker' AND resume_after > '(0,0)'}),
	'>', 0, 'rounds that stopped short recorded where the next goes on');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idem_claims WHERE namespace = 'long'}),
	'3000000', 'no live claim is purged');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM idempotency.purge_runs
	 WHERE trigger = 'worker' AND finished_at - started_at > interval '3 seconds'}),
	'0', 'no worker run lasts much beyond its 100 ms');

amcheck_claims($node, 'postgres');
$node->stop;
done_testing();
