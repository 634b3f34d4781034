# A generation damaged by hand never makes a claim hang: the open
# generation's table dropped under claimers that hold its map, then in a
# fresh session, and its primary key dropped.  Each claimer gets a clear
# error within a second (SQLSTATE, message naming the generation, a hint
# that repairs it), never a loop that ignores cancels, nor a claim put
# into another table; a claimer waiting behind an uncommitted DROP TABLE is
# cancelled within a second; the maintenance pass (idem_purge(), the
# worker's round) replaces the dropped open generation without being
# forced, and claims dedupe again in its successor.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('generation_dropped');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.purge_enabled = off
});
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION idempotency;
SELECT idem_namespace_define('day', '1 day');
SELECT idem_generation_switch();
-- a claim's outcome, or its error as SQLSTATE: message / hint
CREATE FUNCTION try_claim(k text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text; msg text; hint text;
BEGIN
    RETURN CASE WHEN idem_claim(k, 'day') THEN 'new' ELSE 'duplicate' END;
EXCEPTION WHEN OTHERS OR query_canceled THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    RETURN st || ': ' || msg || ' / ' || hint;
END $$;
});

# The open generation of the day namespace's class
sub open_generation
{
	return $node->safe_psql('postgres', q{
		SELECT 'claims_g' || g.id FROM idempotency.generations g
		 WHERE g.state = 'open'
		   AND g.ttl_class = (SELECT ttl_class FROM idempotency.generations ORDER BY id DESC LIMIT 1)});
}

# Start $sql in background session $s, not waiting for it to end
my %pending;
sub start
{
	my ($s, $sql) = @_;
	$pending{$s} = $s->query_until(qr/started/, "\\echo started\n$sql;\n\\echo finished\n");
}

# The output of what start() sent, once it ends, or undef if it has not
# ended within $secs
sub finish
{
	my ($s, $secs) = @_;
	my $out = $pending{$s};
	if ($out !~ /finished/)
	{
		my $deadline = time + $secs;

		# pump_nb: pump() would block until psql writes something
		while ($s->{stdout} !~ /finished/)
		{
			return undef if time > $deadline;
			$s->{run}->pump_nb;
			usleep(20_000);
		}
		$out .= $s->{stdout};
		$s->{stdout} = '';
	}
	delete $pending{$s};
	$out =~ s/^.*started\s*//s;
	$out =~ s/\s*finished\s*$//s;
	return $out;
}

my $gen = open_generation();
like($gen, qr/^claims_g\d+$/, 'the day class has an open generation');

# --- three claimers with the map in hand; the open generation dropped
my @claimers;
for my $i (1 .. 3)
{
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	$s->query_safe("SET application_name = 'claimer$i'");
	is($s->query_safe("SELECT try_claim('before-$i')"), 'new', "claimer $i claims before the drop");
	push @claimers, $s;
}
$node->safe_psql('postgres', "DROP TABLE idempotency.$gen");

for my $i (1 .. 3)
{
	my $s = $claimers[ $i - 1 ];
	my $t0 = time;
	start($s, "SELECT try_claim('after-$i')");
	my $out = finish($s, 5);
	if (!defined $out)
	{
		# the old busy loop, deaf to cancels too
		fail("claimer $i ends its claim after the drop");
		$node->safe_psql('postgres', qq{
			SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'claimer$i'});
		ok(defined finish($s, 1), "claimer $i is at least cancelled");
		BAIL_OUT("claimer $i spins after the drop of its open generation");
	}
	like($out, qr/^42P01: table of open generation \d+ does not exist \/ SELECT idem_generation_switch\(\)/,
		"claimer $i gets the clear error: $out");
	cmp_ok(time - $t0, '<', 1, sprintf('claimer %d gets it within a second (%.2fs)', $i, time - $t0));
}

# --- a fresh session gets the same error, and its claim goes nowhere else
my ($rc, $out, $err) = $node->psql('postgres', q{SELECT idem_claim('fresh', 'day')});
like($err, qr/table of open generation \d+ does not exist/, 'a fresh session gets the error too');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM idem_claims WHERE namespace = 'day' AND event_id = 'fresh'}),
	'0', 'and its claim is stored nowhere');

# --- a claimer behind an uncommitted DROP TABLE is cancelled within a second
$node->safe_psql('postgres', q{SELECT idem_generation_switch('day')});
$gen = open_generation();
is($claimers[0]->query_safe("SELECT try_claim('again-1')"), 'new', 'claims go to the new generation');
my $dropper = $node->background_psql('postgres', on_error_stop => 0);
$dropper->query_safe("BEGIN; DROP TABLE idempotency.$gen");
start($claimers[0], "SELECT try_claim('behind-drop')");
ok($node->poll_query_until('postgres', q{
	SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE application_name = 'claimer1'}),
	'the claimer waits for the dropper\'s lock');
my $t0 = time;
$node->safe_psql('postgres', q{
	SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'claimer1'});
$out = finish($claimers[0], 1);
ok(defined $out, sprintf('pg_cancel_backend ends its wait (%.2fs)', time - $t0));
like($out // '', qr/^57014: canceling statement due to user request/, 'with the cancel\'s error');
$dropper->query_safe('COMMIT');
like($claimers[1]->query_safe("SELECT try_claim('after-commit')"), qr/^42P01: /,
	'once the drop commits, the error');

# --- the maintenance pass, not forced, replaces the open generation
$node->safe_psql('postgres', q{SELECT idem_purge()});
my $new = open_generation();
isnt($new, $gen, "idem_purge() opened $new in place of $gen");
is($node->safe_psql('postgres', "SELECT to_regclass('idempotency.$new') IS NOT NULL"), 't',
	'and its table is there');
for my $i (1 .. 3)
{
	is($claimers[ $i - 1 ]->query_safe("SELECT try_claim('after-$i')"), 'new',
		"claimer $i claims again");
	is($claimers[ $i - 1 ]->query_safe("SELECT try_claim('after-$i')"), 'duplicate',
		"and dedupes");
}
is($node->safe_psql('postgres', q{
	SELECT string_agg(DISTINCT c.tableoid::regclass::text, ',')
	  FROM idempotency.claims c JOIN idem_namespaces n ON n.id = c.ns
	 WHERE n.name = 'day' AND idempotency.idem_key_text(c.key) LIKE 'after-%'}),
	"idempotency.$new", 'the claims are in the new open generation');

# --- the open generation's primary key dropped: a clear error, whose hint repairs it
$node->safe_psql('postgres', "ALTER TABLE idempotency.$new DROP CONSTRAINT ${new}_pkey");
$out = $claimers[2]->query_safe("SELECT try_claim('nokey')");
like($out, qr/^55000: idempotency\.$new has no valid unique index on \(key, ns\) \/ Re-create it with ALTER TABLE idempotency\.$new ADD CONSTRAINT ${new}_pkey PRIMARY KEY \(key, ns\)/,
	"without its primary key: $out");
$node->safe_psql('postgres', "ALTER TABLE idempotency.$new ADD PRIMARY KEY (key, ns)");
is($claimers[2]->query_safe("SELECT try_claim('nokey')"), 'new', 'the hint repairs it');
is($claimers[2]->query_safe("SELECT try_claim('after-3')"), 'duplicate', 'and dedup holds');

$_->quit for @claimers;
$dropper->quit;
$node->stop;
done_testing();
