# The finer filters of sealed generations (filter_memory_bits_per_claim):
# a seal loads one when it commits; after a restart the stored filter
# serves, until a purge worker round rebuilds the finer one from the
# generation's table.  Measured as descents into the sealed generation's
# index for new ids: a stored filter of 2 bits per claim lets about 39%
# through, the finer one of 24 bits almost none.  Every claim stays a
# duplicate throughout (no filter may lose one).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $N = 3000;

my $node = PostgreSQL::Test::Cluster->new('filter_refine');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.purge_enabled = off
idempotency.filter_bits_per_claim = 2
idempotency.filter_memory_bits_per_claim = 24
});
$node->start;

$node->safe_psql('postgres', qq{
CREATE EXTENSION idempotency;
SELECT idem_namespace_define('ref', '2 hours');
SELECT idem_generation_switch();
SELECT count(*) FROM generate_series(1, $N) i WHERE idem_claim('r-' || i, 'ref');
SELECT idem_generation_switch();
});
my $index = $node->safe_psql('postgres', q{
SELECT i.indexrelid::regclass
  FROM idem_generations g JOIN pg_index i ON i.indrelid = g.relation::regclass
 WHERE g.state = 'sealed' AND g.claims > 0
});
like($index, qr/^idempotency\.claims_g\d+_pkey$|^idempotency\.\S+$/, "one sealed generation: $index");

my $round = 0;

# descents into the sealed generation's index for $N new ids
sub descents
{
	$round++;
	my $before = $node->safe_psql('postgres',
		"SELECT idx_scan FROM pg_stat_all_indexes WHERE indexrelid = '$index'::regclass");
	my $new = $node->safe_psql('postgres', qq{
SELECT count(*) FROM generate_series(1, $N) i WHERE idem_claim('n$round-' || i, 'ref');
SELECT pg_stat_force_next_flush();
});
	is((split /\n/, $new)[0], $N, "round $round: all $N new ids claimed");
	my $after = $node->safe_psql('postgres',
		"SELECT idx_scan FROM pg_stat_all_indexes WHERE indexrelid = '$index'::regclass");
	return $after - $before;
}

# every claim of the sealed generation is still a duplicate
sub all_duplicates
{
	my ($what) = @_;
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM generate_series(1, $N) i WHERE idem_claim('r-' || i, 'ref')"),
		'0', "$what: 0 of the sealed generation's $N claims claimed again");
}

my $d = descents();
cmp_ok($d, '<=', $N / 100, "after the seal, the finer filter: $d descents for $N new ids");
all_duplicates('after the seal');

$node->restart;
$d = descents();
cmp_ok($d, '>=', $N / 5, "after a restart, the stored 2-bit filter: $d descents for $N new ids");
all_duplicates('after the restart');

# a worker round rebuilds the finer filter (and says so with log_purge)
my $offset = -s $node->logfile;
$node->safe_psql('postgres', q{
ALTER SYSTEM SET idempotency.purge_enabled = on;
ALTER SYSTEM SET idempotency.purge_interval = 1;
ALTER SYSTEM SET idempotency.log_purge = on;
SELECT pg_reload_conf();
});
$node->wait_for_log(qr/idempotency generations: 1 filters refined/, $offset);
pass('a purge worker round refined the filter');
$d = descents();
cmp_ok($d, '<=', $N / 100, "after a worker round, the finer filter again: $d descents for $N new ids");
all_duplicates('after the refinement');

$node->stop;
done_testing();
