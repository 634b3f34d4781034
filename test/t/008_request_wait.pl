# idem_begin's bounded wait: a caller that finds another owner's live lease
# sleeps (interruptibly) until the key is completed, failed, released or
# its lease expires, or until the wait runs out.  The isolation tester
# cannot see a sleeping backend as blocked, so these run here: each waiter
# is observed asleep on the extension's wait event before it is woken.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('request_wait');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.purge_enabled = off
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION idempotency;
SELECT idem_namespace_define('w', '1 day');
});

# Start a waiting idem_begin on key in a background psql; return it once
# its backend is seen sleeping in the wait.
sub start_waiter
{
	my ($key, $wait) = @_;
	my $bg = $node->background_psql('postgres', on_error_stop => 0);
	$bg->query_until(qr/waiting/, qq{\\echo waiting
SELECT status || ' ' || attempts || ' ' || coalesce(result::text, '-')
  FROM idem_begin('$key', 'w', wait => '$wait');
\\echo done
});
	ok( $node->poll_query_until('postgres', qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE query LIKE '%idem_begin(''$key''%' AND pid <> pg_backend_pid()
		   AND wait_event_type = 'Extension'}),
		"the waiter on $key sleeps in the extension's wait");
	return $bg;
}

# The waiter's answer, and how long it took after $t0
sub finish_waiter
{
	my ($bg, $t0) = @_;
	my $out = $bg->query_until(qr/done/, '');
	my $elapsed = time - $t0;
	$out =~ s/\s*done\s*$//s;
	return ($out, $elapsed);
}

sub begin_owner
{
	my ($key) = @_;
	return $node->safe_psql('postgres', qq{SELECT owner FROM idem_begin('$key', 'w')});
}

# 1. the owner completes: the waiter wakes with the stored result
my $owner = begin_owner('k1');
my $bg = start_waiter('k1', '60 seconds');
sleep 1;
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%idem_begin(''k1''%'
	   AND pid <> pg_backend_pid()}), '1', 'the waiter is still waiting a second later');
my $t0 = time;
$node->safe_psql('postgres', qq{SELECT idem_complete('k1', '$owner', '{"charge": "ch_1"}', 'w')});
my ($out, $elapsed) = finish_waiter($bg, $t0);
is($out, 'completed 1 {"charge": "ch_1"}', 'the waiter replays the stored result');
cmp_ok($elapsed, '<', 5, sprintf('and wakes promptly (%.2fs)', $elapsed));
$bg->quit;

# 2. a permanent failure: the waiter gets the stored error
$owner = begin_owner('k2');
$bg = start_waiter('k2', '60 seconds');
$t0 = time;
$node->safe_psql('postgres', qq{SELECT idem_fail('k2', '$owner', '{"code": "declined"}', false, 'w')});
($out, $elapsed) = finish_waiter($bg, $t0);
is($out, 'failed 1 {"code": "declined"}', 'the waiter replays the stored failure');
$bg->quit;

# 3. a retryable failure releases the key: the waiter starts afresh
$owner = begin_owner('k3');
$bg = start_waiter('k3', '60 seconds');
$t0 = time;
$node->safe_psql('postgres', qq{SELECT idem_fail('k3', '$owner', '{"code": "timeout"}', true, 'w')});
($out, $elapsed) = finish_waiter($bg, $t0);
is($out, 'started 1 -', 'after a retryable failure the waiter starts the work itself');
$bg->quit;

# 4. the owner's lease runs out while the caller waits: it takes over
$node->safe_psql('postgres', q{SELECT owner FROM idem_begin('k4', 'w', lease => '2 seconds')});
$bg = start_waiter('k4', '60 seconds');
$t0 = time;
($out, $elapsed) = finish_waiter($bg, $t0);
is($out, 'started 2 -', 'a waiter takes over when the lease expires');
$bg->quit;

# 5. the wait runs out: in_progress, after about the wait
begin_owner('k5');
$bg = start_waiter('k5', '2 seconds');
$t0 = time;
($out, $elapsed) = finish_waiter($bg, $t0);
is($out, 'in_progress 1 -', 'a wait that runs out ends in_progress');
cmp_ok($elapsed, '<', 5, sprintf('close to the wait asked for (%.2fs)', $elapsed));
$bg->quit;

# 6. a waiter can be cancelled, and statement_timeout applies
begin_owner('k6');
$bg = start_waiter('k6', '60 seconds');
$node->safe_psql('postgres', q{
	SELECT pg_cancel_backend(pid) FROM pg_stat_activity
	 WHERE query LIKE '%idem_begin(''k6''%' AND pid <> pg_backend_pid()});
$bg->query_until(qr/done/, '');
like($bg->{stderr}, qr/canceling statement due to user request/, 'a waiter can be cancelled');
$bg->quit;
my ($rc, $stdout, $stderr) = $node->psql('postgres', q{
	SET statement_timeout = '300ms';
	SELECT * FROM idem_begin('k6', 'w', wait => '60 seconds')});
like($stderr, qr/canceling statement due to statement timeout/,
	'statement_timeout ends a wait');

# nothing was written by the waits that ended in_progress
is($node->safe_psql('postgres', q{
	SELECT string_agg(key || ':' || status || ':' || attempts, ',' ORDER BY key)
	  FROM idem_requests}),
	'k1:completed:1,k2:failed:1,k3:in_progress:1,k4:in_progress:2,k5:in_progress:1,k6:in_progress:1',
	'the records are as expected');

amcheck_claims($node, 'postgres', 'after the waits');
$node->stop;
done_testing();
