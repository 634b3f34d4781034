# Statistics per namespace: a re-created extension starts at zero (namespace
# ids start again, the shared counters must not carry over), and
# idempotency.stats_max_namespaces is a hard limit, with a warning.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;

my $node = PostgreSQL::Test::Cluster->new('stats');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.purge_enabled = off
idempotency.stats_max_namespaces = 16
});
$node->start;

$node->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	SELECT idem_claim('e-' || i, 'stats_a') FROM generate_series(1, 1000) i;
});
is($node->safe_psql('postgres', q{SELECT claims FROM idem_stats WHERE namespace = 'stats_a'}),
	'1000', 'a thousand claims are counted');

$node->safe_psql('postgres', q{
	DROP EXTENSION idempotency;
	CREATE EXTENSION idempotency;
	SELECT idem_claim('e-1', 'stats_b');
});
is($node->safe_psql('postgres', q{SELECT id FROM idem_namespaces WHERE name = 'stats_b'}),
	'1', 'the re-created extension gives the first namespace id 1 again');
is($node->safe_psql('postgres', q{SELECT claims FROM idem_stats WHERE namespace = 'stats_b'}),
	'1', 'its counters start at zero, not at the old namespace 1\'s');

# 16 entries at most, over all namespaces: the 17th is not counted, and
# the backend that meets the limit says so once
my ($stdout, $stderr);
$node->psql('postgres', q{
	SELECT count(*) FROM (SELECT idem_claim('x', 'limit_' || i) FROM generate_series(1, 20) i) s;
}, stdout => \$stdout, stderr => \$stderr);
is($stdout, '20', 'claims in namespaces past the limit still work');
like($stderr, qr/WARNING:  idempotency statistics are full/, 'a warning says the statistics are full');
is(scalar(() = $stderr =~ /statistics are full/g), 1, 'once per backend');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idem_stats}), '16',
	'no more than stats_max_namespaces namespaces are counted');

amcheck_claims($node, 'postgres', 'at the end');
$node->stop;
done_testing();
