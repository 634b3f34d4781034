# Many backends claiming, batch-claiming and releasing the same few ids at
# once: every speculative-insertion race (super-deletes, token waits,
# transaction waits, takeovers) must still give each id to exactly one
# claimer at a time, with no deadlock between batches.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;

my $node = PostgreSQL::Test::Cluster->new('contention');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
max_connections = 40
log_statement = none
});
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION idempotency;
SELECT idem_namespace_define('hot', '1 day');
SELECT idem_namespace_define('hot_batch', '1 day');
CREATE TABLE applied (k text NOT NULL);
CREATE TABLE released (k text NOT NULL);
CREATE TABLE batch_applied (k text NOT NULL);
CREATE TABLE batch_released (k text NOT NULL);
CREATE FUNCTION consume_hot(p text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF idem_claim(p, 'hot') THEN
        INSERT INTO applied VALUES (p);
    END IF;
END $$;
CREATE FUNCTION release_hot(p text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF idem_release(p, 'hot') THEN
        INSERT INTO released VALUES (p);
    END IF;
END $$;
CREATE FUNCTION consume_batch(ps text[]) RETURNS void LANGUAGE sql AS $$
    INSERT INTO batch_applied SELECT * FROM idem_claim_many(ps, 'hot_batch');
$$;
CREATE FUNCTION release_batch(p text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF idem_release(p, 'hot_batch') THEN
        INSERT INTO batch_released VALUES (p);
    END IF;
END $$;
});

my $script = PostgreSQL::Test::Utils::tempdir() . '/hot.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{
\set k random(1, 30)
SELECT consume_hot('hot-' || :k);
\set r random(1, 3)
\if :r = 1
SELECT release_hot('hot-' || :k);
\endif
\set a random(1, 30)
\set b random(1, 30)
\set c random(1, 30)
SELECT consume_batch(ARRAY['b-' || :a, 'b-' || :b, 'b-' || :c, 'b-' || :a]);
\if :r = 2
SELECT release_batch('b-' || :b);
\endif
});

$node->command_ok(
	[
		'pgbench', '-n', '-c', '12', '-j', '2', '-T', '8',
		'-f', $script, '-h', $node->host, '-p', $node->port, 'postgres'
	],
	'the contention load runs without errors or deadlocks');

my $claims = $node->safe_psql('postgres', 'SELECT count(*) FROM applied');
cmp_ok($claims, '>', 100, "ids were claimed many times over ($claims claims)");

# Each id was applied once per time it was free: once at first, once more
# after every release that removed it.
foreach my $set (['hot', 'applied', 'released'], ['hot_batch', 'batch_applied', 'batch_released'])
{
	my ($ns, $applied, $released) = @$set;
	my $bad = $node->safe_psql('postgres', qq{
		SELECT count(*) FROM (
			SELECT k, count(*) AS n FROM $applied GROUP BY k) a
		  LEFT JOIN (SELECT k, count(*) AS n FROM $released GROUP BY k) r USING (k)
		 WHERE a.n <> coalesce(r.n, 0) + CASE WHEN idem_claimed(k, '$ns') THEN 1 ELSE 0 END});
	is($bad, '0', "$ns: no id was held by two claimers at once");
	is($node->safe_psql('postgres', qq{
		SELECT count(*) FROM idem_claims c
		 WHERE namespace = '$ns' AND NOT EXISTS (SELECT 1 FROM $applied a WHERE a.k = c.event_id)}),
		'0', "$ns: every live claim was applied");
}

my $waits = $node->safe_psql('postgres', "SELECT sum(waits) FROM idem_stats");
cmp_ok($waits, '>', 0, "claimers had to wait for each other ($waits waits)");

$node->safe_psql('postgres', 'CREATE EXTENSION amcheck');
is($node->safe_psql('postgres', "SELECT bt_index_check('idempotency.claims_pkey', true)"), '',
	'the index agrees with the heap');

amcheck_claims($node, 'postgres', 'after the contention');
$node->stop;
done_testing();
