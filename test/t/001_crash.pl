# Crash safety: a claim and its business write are one transaction, so
# after an immediate shutdown or a backend crash in the middle of a
# concurrent load, every committed claim has its business row and every
# business row its claim, nothing is applied twice, and the claims index
# agrees with the heap.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
max_connections = 40
restart_after_crash = on
});
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION idempotency;
CREATE EXTENSION amcheck;
SELECT idem_namespace_define('crash', '30 days');
CREATE TABLE applied (event_id text NOT NULL, applied_at timestamptz DEFAULT now());
CREATE TABLE balance (id int PRIMARY KEY, amount bigint NOT NULL);
INSERT INTO balance SELECT g, 0 FROM generate_series(1, 16) g;
-- the consumer: claim, then the business write, in one transaction
CREATE FUNCTION consume(ev text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF NOT idem_claim(ev, 'crash') THEN
        RETURN false;
    END IF;
    INSERT INTO applied (event_id) VALUES (ev);
    UPDATE balance SET amount = amount + 1 WHERE id = 1 + abs(hashtext(ev)) % 16;
    RETURN true;
END $$;
});

my $script = PostgreSQL::Test::Utils::tempdir() . '/consume.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{
\set ev random(1, 20000)
SELECT consume('ev-' || :ev);
\set ev2 random(1, 20000)
BEGIN;
SELECT * FROM idem_claim_many(ARRAY['batch-' || :ev, 'batch-' || :ev2], 'crash_batch');
SELECT consume('ev-' || :ev2);
COMMIT;
});

# Start a load, wait until it has committed some work, then crash it.
sub load_then_crash
{
	my ($how) = @_;
	my ($out, $err) = ('', '');
	my $before = $node->safe_psql('postgres', 'SELECT count(*) FROM applied');
	my $h = IPC::Run::start(
		[
			'pgbench', '-n', '-c', '8', '-j', '2', '-T', '120',
			'-f', $script, '-h', $node->host, '-p', $node->port, 'postgres'
		],
		'>', \$out, '2>', \$err);

	$node->poll_query_until('postgres',
		"SELECT count(*) >= $before + 2000 FROM applied")
	  or die "the load made no progress";

	if ($how eq 'immediate')
	{
		$node->stop('immediate');
		$h->finish;
		$node->start;
	}
	else
	{
		# kill -9 one backend of the load: the postmaster resets shared
		# memory and every backend starts over, as after a real crash
		my $pid = $node->safe_psql('postgres', q{
			SELECT pid FROM pg_stat_activity
			 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
			   AND datname = 'postgres' LIMIT 1});
		die "no backend of the load found" unless $pid =~ /^\d+$/;
		kill 'KILL', $pid;
		$h->finish;
		$node->poll_query_until('postgres', 'SELECT true')
		  or die "the server did not come back";
	}
}

sub check_consistency
{
	my ($label) = @_;
	my $missing_business = $node->safe_psql('postgres', q{
		SELECT count(*) FROM idem_claims c
		 WHERE c.namespace = 'crash'
		   AND NOT EXISTS (SELECT 1 FROM applied a WHERE a.event_id = c.event_id)});
	is($missing_business, '0', "$label: every committed claim has its business row");

	my $missing_claim = $node->safe_psql('postgres', q{
		SELECT count(*) FROM applied a
		 WHERE NOT EXISTS (SELECT 1 FROM idem_claims c
		                    WHERE c.namespace = 'crash' AND c.event_id = a.event_id)});
	is($missing_claim, '0', "$label: every business row has its claim");

	my $twice = $node->safe_psql('postgres',
		'SELECT count(*) - count(DISTINCT event_id) FROM applied');
	is($twice, '0', "$label: no event applied twice");

	my $balance = $node->safe_psql('postgres', q{
		SELECT (SELECT sum(amount) FROM balance) = (SELECT count(*) FROM applied)});
	is($balance, 't', "$label: balances equal the exactly-once expectation");

	my $amcheck = $node->safe_psql('postgres',
		"SELECT bt_index_check('idempotency.claims_pkey', true)");
	is($amcheck, '', "$label: the claims index matches the heap");

	# claims still work: every applied event is a duplicate now
	my $dups = $node->safe_psql('postgres', q{
		SELECT count(*) FILTER (WHERE idem_claim(event_id, 'crash')) FROM applied});
	is($dups, '0', "$label: redelivering every applied event claims nothing");
}

load_then_crash('immediate');
my $applied = $node->safe_psql('postgres', 'SELECT count(*) FROM applied');
cmp_ok($applied, '>=', 2000, 'immediate stop: work was committed before the crash');
check_consistency('immediate stop');

load_then_crash('kill9');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM applied'), '>', $applied,
	'backend kill -9: more work was committed');
check_consistency('backend kill -9');

# after the crash cycle the shared cache and statistics were rebuilt
is($node->safe_psql('postgres', q{
	SELECT idem_claim('after-crash', 'crash'), idem_claim('after-crash', 'crash')}),
	't|f', 'claims work after crash recovery');
like($node->safe_psql('postgres', "SELECT claims FROM idem_stats WHERE namespace = 'crash'"),
	qr/^\d+$/, 'statistics are collected again');

amcheck_claims($node, 'postgres', 'after the crashes');

# the check itself can fail: an index over a function declared immutable
# whose result then changes no longer matches the heap, which
# heapallindexed finds; an index left invalid is reported unchecked
$node->safe_psql('postgres', q{
	CREATE FUNCTION amcheck_probe(t timestamptz) RETURNS timestamptz
	    LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN t; END';
	CREATE INDEX amcheck_probe_idx ON idempotency.claims (amcheck_probe(claimed_at));
	CREATE INDEX amcheck_probe_invalid ON idempotency.claims (claimed_at);
	CREATE OR REPLACE FUNCTION amcheck_probe(t timestamptz) RETURNS timestamptz
	    LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN t + interval ''1 day''; END';
	UPDATE pg_index SET indisvalid = false
	 WHERE indexrelid = 'idempotency.amcheck_probe_invalid'::regclass;});
my ($check, @found) = amcheck_findings($node, 'postgres');
my %status = map { $_->[0] => "$_->[1]: $_->[2]" } @found;
like($status{'idempotency.amcheck_probe_idx'} // 'not checked', qr/^error: .*lacks matching index tuple/,
	"amcheck_claims's $check reports an index that no longer matches the heap");
like($status{'idempotency.amcheck_probe_invalid'} // 'not checked', qr/^invalid: /,
	'and an invalid index, unchecked');
like($status{'idempotency.claims_pkey'} // 'not checked', qr/^ok: /, 'and the sound primary key as sound');
$node->safe_psql('postgres', q{
	DROP INDEX idempotency.amcheck_probe_idx, idempotency.amcheck_probe_invalid;
	DROP FUNCTION amcheck_probe(timestamptz);});
$node->stop;
done_testing();
