# A purge round is bounded by idempotency.purge_max_runtime whatever a
# plain role does in its database, and one database cannot hold up the
# purge of another:
#  - a purge policy table with a BEFORE DELETE trigger that sleeps 30 s:
#    the batch is cancelled at the deadline and the run records the error;
#  - a session holding SHARE UPDATE EXCLUSIVE on idempotency.claims: the
#    claims are still purged and the round's VACUUM skips the table instead
#    of waiting;
#  - a session holding ACCESS EXCLUSIVE on idempotency.claims: batches time
#    out on the lock, and the round still ends on time;
#  - a session holding SHARE UPDATE EXCLUSIVE on the claims while a
#    generation is due: the pass times out, rolls back, logs which wait
#    and that the next round tries again, and a later round opens it;
# while, all along, expired claims in another database are purged within a
# few rounds.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;
use Time::HiRes qw(time usleep);

my $max_runtime_ms = 2000;

my $node = PostgreSQL::Test::Cluster->new('bounded');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.purge_interval = '1s'
idempotency.purge_max_runtime = '${max_runtime_ms}ms'
log_statement = none
});
$node->start;

# 'slow' comes first in the launcher's round (databases in OID order)
$node->safe_psql('postgres', 'CREATE DATABASE slow');
$node->safe_psql('postgres', 'CREATE DATABASE fast');
$node->safe_psql('postgres', 'CREATE ROLE alice LOGIN');
create_extension_with_namespaces($node, ['slow', 'fast'], { short => '1 second' });

# alice, a plain role, owns a purged table whose deletes sleep
$node->safe_psql('slow', q{
	GRANT CREATE ON SCHEMA public TO alice;
	GRANT USAGE ON SCHEMA idempotency TO alice;
	GRANT DELETE ON idempotency.claims TO alice;
});
$node->safe_psql('slow', q{
	SET ROLE alice;
	CREATE TABLE events (id int, at timestamptz NOT NULL);
	INSERT INTO events SELECT g, now() - interval '1 hour' FROM generate_series(1, 100) g;
	CREATE FUNCTION events_slow() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN PERFORM pg_sleep(30); RETURN OLD; END $$;
	CREATE TRIGGER events_slow BEFORE DELETE ON events FOR EACH ROW EXECUTE FUNCTION events_slow();
	SELECT idem_purge_policy_add('events', 'at', '1 minute');
});

# $n claims $prefix1.. in namespace 'short', a minute old: expired
sub expired_claims { make_expired_claims($node, @_, 'short'); }

# seconds until $db has no claim left with $prefix, or undef after $secs
sub wait_purged
{
	my ($db, $prefix, $secs) = @_;
	my $start = time();
	while (time() - $start < $secs)
	{
		return time() - $start if $node->safe_psql($db, qq{
			SELECT count(*) FROM idem_claims WHERE event_id LIKE '$prefix%'}) eq '0';
		usleep(100_000);
	}
	return undef;
}

# the longest purge worker alive now, in seconds
sub oldest_worker_secs
{
	return $node->safe_psql('postgres', q{
		SELECT coalesce(max(extract(epoch FROM now() - backend_start)), 0)::int
		  FROM pg_stat_activity WHERE backend_type = 'idempotency purge worker'});
}

# --- a slow policy trigger in 'slow' ------------------------------------
expired_claims('fast', 1000, 'f1-');
my $took = wait_purged('fast', 'f1-', 15);
ok(defined $took, "beside a 30 s delete trigger in another database, claims are purged ("
	  . (defined $took ? sprintf('%.1f s', $took) : 'never') . ')');
$node->poll_query_until('slow', q{
	SELECT count(*) > 0 FROM idempotency.purge_runs WHERE target = 'public.events'})
  or die 'no run of the slow table was ever recorded';
my $run = $node->safe_psql('slow', q{
	SELECT error, extract(epoch FROM finished_at - started_at) < 6, rows_deleted
	  FROM idempotency.purge_runs WHERE target = 'public.events' ORDER BY run_id LIMIT 1});
my ($error, $short, $rows) = split /\|/, $run;
like($error, qr/statement timeout/, 'the slow batch is cancelled at the deadline, and the run says so');
is($short, 't', "the slow table's run lasts less than 6 s (max_runtime ${max_runtime_ms} ms, 30 s of sleep)");
is($rows, '0', 'the cancelled batch deleted nothing (it rolled back whole)');
cmp_ok(oldest_worker_secs(), '<', 8, 'no purge worker lives much past its round');
is($node->safe_psql('slow', 'SELECT count(*) FROM events'), '100', 'the slow table keeps its rows');

# --- SHARE UPDATE EXCLUSIVE held on the claims in 'slow' -------------------
my $log_offset = -s $node->logfile;
my $holder = $node->background_psql('slow');
$holder->query_safe(q{SET ROLE alice});
$holder->query_safe(q{BEGIN});
$holder->query_safe(q{LOCK TABLE idempotency.claims IN SHARE UPDATE EXCLUSIVE MODE});
expired_claims('slow', 500, 's1-');
expired_claims('fast', 1000, 'f2-');
ok(defined wait_purged('slow', 's1-', 15), 'with the claims locked SHARE UPDATE EXCLUSIVE, they are still purged');
ok(defined wait_purged('fast', 'f2-', 15), 'and the other database is purged too');
ok($node->wait_for_log(qr/skipping vacuum of "claims" --- lock not available/, $log_offset),
	"the round's VACUUM skips the locked table instead of waiting");
cmp_ok(oldest_worker_secs(), '<', 8, 'no purge worker waits on the lock');
$holder->query_safe(q{COMMIT});

# --- ACCESS EXCLUSIVE held on the claims in 'slow' -----------------------
$holder->query_safe(q{RESET ROLE});
$holder->query_safe(q{BEGIN});
$holder->query_safe(q{LOCK TABLE idempotency.claims IN ACCESS EXCLUSIVE MODE});
# made under the lock, so that only a round after it can purge them
$holder->query_safe(q{
	SELECT count(*) FROM (SELECT idem_claim('s2-' || g, 'short') FROM generate_series(1, 200) g) s});
$holder->query_safe(q{
	UPDATE idempotency.claims SET claimed_at = claimed_at - interval '1 minute'
	 WHERE idempotency.idem_key_text(key) LIKE 's2-%'});
my $start = time();
expired_claims('fast', 1000, 'f3-');
$took = wait_purged('fast', 'f3-', 15);
ok(defined $took, 'with the claims of one database locked ACCESS EXCLUSIVE, the other is purged');
cmp_ok(oldest_worker_secs(), '<', 8, 'no purge worker outlives its round on the lock');
is($node->safe_psql('fast', q{SELECT count(*) FROM pg_stat_activity
	 WHERE backend_type = 'idempotency purge worker' AND wait_event_type = 'Lock'
	   AND now() - state_change > interval '3 seconds'}),
	'0', 'no purge worker has waited on a lock for more than 3 s');
$holder->query_safe(q{COMMIT});
$holder->quit;
ok(defined wait_purged('slow', 's2-', 15), 'once the lock is gone, the locked database is purged');

# the slow table's runs never outlast the round
is($node->safe_psql('slow', qq{
	SELECT count(*) FROM idempotency.purge_runs
	 WHERE finished_at - started_at > interval '${max_runtime_ms} ms' + interval '4 seconds'}),
	'0', 'no recorded run outlasts purge_max_runtime by more than 4 s');

# --- a generation switch held off by a lock on the claims -----------------
# Opening a generation (a table inheriting from idempotency.claims) waits
# for a lock a REINDEX CONCURRENTLY holds: the pass times out, rolls back
# whole, logs which step waited and that the next round tries again, and
# the next round after the lock is gone opens the generation.
$log_offset = -s $node->logfile;
$holder = $node->background_psql('fast');
$holder->query_safe(q{BEGIN});
$holder->query_safe(q{LOCK TABLE idempotency.claims IN SHARE UPDATE EXCLUSIVE MODE});
$node->safe_psql('fast', q{SELECT idem_namespace_define('long', '1 day')});
ok( $node->wait_for_log(
		qr/idempotency could not maintain the claim generations: canceling statement due to lock timeout\n[^\n]*DETAIL:  The pass waited longer than lock_timeout \(100ms\) for a lock another session holds, while opening the first generation of TTL class 16, a table inheriting from idempotency.claims\. It was rolled back; the next round tries again\./,
		$log_offset),
	'a switch behind a lock on the claims logs which wait timed out, and that the next round tries again');
is($node->safe_psql('fast', q{SELECT count(*) FROM idem_generations}), '0',
	'the timed-out pass left no generation');
$holder->query_safe(q{COMMIT});
$holder->quit;
ok($node->poll_query_until('fast', q{SELECT count(*) = 1 FROM idem_generations WHERE state = 'open'}),
	'once the lock is gone, a later round opens the generation');

amcheck_claims($node, 'slow');
amcheck_claims($node, 'fast');

$node->stop;
done_testing();
