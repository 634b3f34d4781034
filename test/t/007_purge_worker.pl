# The purge background worker on a real preloaded cluster: it purges within
# two intervals in every database with the extension, spares unexpired and
# in-flight claims, follows SIGHUP, pauses, survives SIGTERM and kill -9,
# never delays a shutdown, does nothing on a standby, purges finished
# requests and expired tokens but never a live lease, and purges user
# tables as their owner.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('purge');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.purge_interval = '1s'
log_statement = none
restart_after_crash = on
});
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE db2');
$node->safe_psql('postgres', 'CREATE DATABASE no_ext');
create_extension_with_namespaces($node, ['postgres', 'db2'],
	{ short => '1 second', long => '1 day' });

# concurrent first uses leave redundant namespace rows (same id, older
# definitions); a round keeps the row defined last of each name
$node->safe_psql('db2', q{
	INSERT INTO idempotency.namespaces (id, name, ttl, created_at, defined_at)
	SELECT id, name, '1 year', created_at, defined_at - interval '1 hour'
	  FROM idempotency.namespaces WHERE name = 'long';
});
$node->poll_query_until('db2', q{
	SELECT count(*) = 1 FROM idempotency.namespaces WHERE name = 'long'})
  or die 'redundant namespace rows were never removed';
is($node->safe_psql('db2', q{SELECT ttl FROM idempotency.namespaces WHERE name = 'long'}),
	'1 day', 'a round removes redundant namespace rows and keeps the one defined last');

sub launcher_pid
{
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'idempotency purge launcher'");
}

# $n claims $prefix1.. in namespace 'short', a minute old: expired
sub expired_claims { make_expired_claims($node, @_, 'short'); }

sub count_claims
{
	my ($db, $ns) = @_;
	return $node->safe_psql($db, "SELECT count(*) FROM idem_claims WHERE namespace = '$ns'");
}

# wait up to $secs for $db's namespace to hold $want claims; returns seconds taken
sub wait_claims
{
	my ($db, $ns, $want, $secs) = @_;
	my $start = time();
	while (time() - $start < $secs)
	{
		return time() - $start if count_claims($db, $ns) eq $want;
		usleep(100_000);
	}
	return undef;
}

like(launcher_pid(), qr/^\d+$/, 'the launcher runs');

# --- purges within two intervals, in every database with the extension
$node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT idem_claim('keep' || g, 'long') FROM generate_series(1, 100) g) s});
expired_claims('postgres', 5000, 'x');
expired_claims('db2', 500, 'y');
my $took = wait_claims('postgres', 'short', '0', 10);
ok(defined $took && $took <= 2.5, 'expired claims are purged within two intervals (' . ($took // 'never') . ' s)');
ok(defined wait_claims('db2', 'short', '0', 5), 'another database is purged too');
is(count_claims('postgres', 'long'), '100', 'unexpired claims survive');
like($node->safe_psql('postgres', q{
	SELECT rows_deleted FROM idem_purge_runs WHERE trigger = 'worker' ORDER BY started_at DESC LIMIT 1}),
	qr/^\d+$/, 'the run is recorded');
cmp_ok($node->safe_psql('postgres', q{
	SELECT vacuum_count FROM pg_stat_all_tables WHERE relid = 'idempotency.claims'::regclass}),
	'>', 0, 'the claims table is vacuumed after a purge');
is($node->safe_psql('postgres', q{SELECT purged >= 5000 FROM idem_stats WHERE namespace = 'short'}),
	't', 'idem_stats counts purged claims');

# --- an in-flight claim is invisible to the purge
my $inflight = $node->background_psql('postgres');
$inflight->query_safe(q{BEGIN});
$inflight->query_safe(q{SELECT idem_claim('inflight', 'short')});
$inflight->query_safe(q{
	UPDATE idempotency.claims SET claimed_at = claimed_at - interval '1 minute'
	 WHERE idempotency.idem_key_text(key) = 'inflight'});
sleep(3);
is($inflight->query_safe(q{
	SELECT count(*) FROM idempotency.claims WHERE idempotency.idem_key_text(key) = 'inflight'}),
	'1', 'a claim in flight survives three rounds');
$inflight->query_safe(q{COMMIT});
$inflight->quit;
ok(defined wait_claims('postgres', 'short', '0', 5), 'once committed and expired, it is purged');

# --- SIGHUP: a longer interval, then a shorter one, take effect at once
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.purge_interval = '1h'; SELECT pg_reload_conf()});
sleep(2);	# let the current round end and the launcher start its long sleep
expired_claims('postgres', 100, 'h');
ok(!defined wait_claims('postgres', 'short', '0', 3), 'with a one-hour interval nothing is purged');
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.purge_interval = '1s'; SELECT pg_reload_conf()});
ok(defined wait_claims('postgres', 'short', '0', 5), 'a SIGHUP back to one second purges at once');

# --- purge_enabled = off pauses, on resumes
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.purge_enabled = off; SELECT pg_reload_conf()});
sleep(2);
expired_claims('postgres', 100, 'p');
ok(!defined wait_claims('postgres', 'short', '0', 3), 'paused: nothing is purged');
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.purge_enabled = on; SELECT pg_reload_conf()});
ok(defined wait_claims('postgres', 'short', '0', 5), 'resumed: purged');

# --- requests and tokens: finished records and tokens past their time go,
#     a live lease stays even past its record's TTL
$node->safe_psql('postgres', q{
	SELECT idem_complete('req-' || g, owner, '{}', 'short') FROM generate_series(1, 20) g,
	       LATERAL idem_begin('req-' || g, 'short');
	SELECT owner FROM idem_begin('req-live', 'short', lease => '1 hour');
	SELECT idem_token_issue('t', '1 second') FROM generate_series(1, 10);
	SELECT idem_token_issue('t', '1 hour');
});
$node->poll_query_until('postgres', q{
	SELECT (SELECT count(*) FROM idempotency.requests) = 1
	   AND (SELECT count(*) FROM idempotency.tokens) = 1})
  or die 'requests and tokens were not purged';
is($node->safe_psql('postgres', q{
	SELECT key || ' ' || status FROM idem_requests UNION ALL
	SELECT (expires_at > now() + interval '50 minutes')::text FROM idempotency.tokens}),
	"req-live in_progress
true", 'the worker purges finished requests and expired tokens, not a live lease');

# --- user tables, as their owner, only expired rows
$node->safe_psql('postgres', q{
	CREATE ROLE alice;
	CREATE TABLE payment_event_processed (event_id text PRIMARY KEY, create_time timestamptz NOT NULL);
	ALTER TABLE payment_event_processed OWNER TO alice;
	CREATE TABLE deleters (who text);
	GRANT INSERT ON deleters TO alice;
	CREATE FUNCTION record_deleter() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN INSERT INTO public.deleters VALUES (current_user); RETURN OLD; END $$;
	CREATE TRIGGER record_deleter AFTER DELETE ON payment_event_processed
	    FOR EACH ROW EXECUTE FUNCTION record_deleter();
	INSERT INTO payment_event_processed
	SELECT 'e' || g, now() - g * interval '1 day' FROM generate_series(1, 120) g;
	SET ROLE alice;
	SELECT idem_purge_policy_add('payment_event_processed', 'create_time', '90 days');
	RESET ROLE;
});
$node->poll_query_until('postgres', q{SELECT count(*) = 89 FROM payment_event_processed})
  or die 'the policy was not applied';
is($node->safe_psql('postgres', q{SELECT min(create_time) > now() - interval '91 days' FROM payment_event_processed}),
	't', 'a policy removes only expired rows');
is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT who, ',') FROM deleters}),
	'alice', 'the worker deletes as the table owner');
$node->safe_psql('postgres', q{
	REVOKE DELETE ON payment_event_processed FROM alice;
	INSERT INTO payment_event_processed VALUES ('old', now() - interval '1 year');
});
$node->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM idem_purge_runs
	 WHERE "table" = 'public.payment_event_processed' AND last_error LIKE 'permission denied%'})
  or die 'no error recorded';
pass('without DELETE the owner cannot purge, and neither can the worker; the error is recorded');
is($node->safe_psql('postgres', q{SELECT count(*) FROM payment_event_processed WHERE event_id = 'old'}),
	'1', 'the row stays');

# --- one LOG line per round, unless idempotency.log_purge
my $log = slurp_file($node->logfile);
ok($log =~ /idempotency purged \d+ expired rows in database "postgres"/, 'a round logs one summary line');
ok($log !~ /idempotency purge of /, 'no per-table lines by default');
my $offset = -s $node->logfile;
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.log_purge = on; SELECT pg_reload_conf()});
expired_claims('postgres', 10, 'l');
ok(defined wait_claims('postgres', 'short', '0', 5), 'purged with log_purge');
sleep(1);
like(slurp_file($node->logfile, $offset), qr/idempotency purge of idempotency.claims in database "postgres"/,
	'log_purge logs every table');
$node->safe_psql('postgres', q{ALTER SYSTEM RESET idempotency.log_purge; SELECT pg_reload_conf()});
unlike(slurp_file($node->logfile), qr/"idempotency purge worker" \(PID \d+\) exited with exit code 1/,
	'no worker failed: a database without the extension is skipped quietly');

# --- SIGTERM and kill -9: the launcher comes back
my $pid = launcher_pid();
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
$node->poll_query_until('postgres', qq{
	SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE backend_type = 'idempotency purge launcher' AND pid <> $pid})
  or die 'the launcher did not come back after SIGTERM';
pass('after SIGTERM the launcher is restarted');
$pid = launcher_pid();
kill 'KILL', $pid;
$node->poll_query_until('postgres', qq{
	SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE backend_type = 'idempotency purge launcher' AND pid <> $pid})
  or die 'the launcher did not come back after kill -9';
pass('after kill -9 the launcher is restarted');
expired_claims('postgres', 100, 'k');
ok(defined wait_claims('postgres', 'short', '0', 10), 'and purges again');

# --- SIGTERM stops a worker in the middle of a round, between batches
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET idempotency.purge_enabled = off;
	ALTER SYSTEM SET idempotency.purge_batch_size = 100;
	SELECT pg_reload_conf()});
sleep(2);
expired_claims('postgres', 200000, 'big');
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.purge_enabled = on; SELECT pg_reload_conf()});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency purge worker'
	   AND datname = 'postgres'})
  or die 'no worker seen';
my $wpid = $node->safe_psql('postgres', q{
	SELECT pid FROM pg_stat_activity WHERE backend_type = 'idempotency purge worker' AND datname = 'postgres'});
$node->safe_psql('postgres', "SELECT pg_terminate_backend($wpid)");
$node->poll_query_until('postgres', qq{SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $wpid})
  or die 'the worker did not stop';
pass('SIGTERM stops a worker mid-round');
$node->safe_psql('postgres', 'CREATE EXTENSION amcheck');
is($node->safe_psql('postgres', q{SELECT bt_index_check('idempotency.claims_pkey', true)}), '',
	'the claims are consistent after the interrupted round');

# --- the purge never delays a shutdown
expired_claims('postgres', 100000, 'sd');
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency purge worker'})
  or die 'no worker seen';
my $t0 = time();
$node->stop('fast');
cmp_ok(time() - $t0, '<', 10, 'a fast shutdown in the middle of a purge is prompt');
$node->start;

# --- a standby does nothing
$node->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'bk', has_streaming => 1);
$standby->start;
sleep(3);
is($standby->safe_psql('postgres', q{
	SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idempotency%'}),
	'0', 'a standby runs no purge launcher or worker');
$standby->promote;
$standby->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency purge launcher'})
  or die 'no launcher after promotion';
pass('once promoted, it starts purging');

amcheck_claims($node, 'postgres', 'after the purges');
$standby->stop;
$node->stop;
done_testing();
