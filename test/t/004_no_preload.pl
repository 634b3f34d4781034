# Without shared_preload_libraries everything but the shared statistics
# works, and idem_stats says why it is empty.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('nopreload');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');

is($node->safe_psql('postgres', q{
	SELECT idem_claim('a', 'np'), idem_claim('a', 'np'), idem_try_claim('b', 'np')}),
	't|f|t', 'claims work without preloading');
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idem_claim('bulk-' || g, 'np')) FROM generate_series(1, 3000) g;
	SELECT count(*) FILTER (WHERE idem_claim('bulk-' || g, 'np')) FROM generate_series(1, 3000) g}),
	"3000\n0", 'duplicates are found through the private claim cache');
is($node->safe_psql('postgres', q{SELECT string_agg(x, ',') FROM idem_claim_many(ARRAY['c', 'a', 'd'], 'np') x}),
	'c,d', 'batches work');

my ($rc, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM idem_stats');
is($out, '0', 'idem_stats is empty');
like($err, qr/idem_stats is empty because idempotency is not loaded through shared_preload_libraries/,
	'and says why');
like($err, qr/HINT:\s+Add idempotency to shared_preload_libraries/, 'and how to fix it');

($rc, $out, $err) = $node->psql('postgres', 'SELECT idem_stats_reset()');
like($err, qr/idempotency statistics are not available/, 'idem_stats_reset explains too');

# the GUCs of the library are there once it is loaded
is($node->safe_psql('postgres', q{
	LOAD 'idempotency'; SHOW idempotency.default_ttl}), '7d', 'GUCs are defined on load');

$node->stop;
done_testing();
