# On a hot standby claims and stored results replicate and can be checked,
# but not made; keyed locks work.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'\n$IdemCheck::WORKER_LIVE");
$primary->start;
$primary->safe_psql('postgres', q{
CREATE EXTENSION idempotency;
SELECT idem_claim('before-backup', 'replica');
});
$primary->backup('bk');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->start;

$primary->safe_psql('postgres', q{
SELECT idem_claim('after-backup-' || g, 'replica') FROM generate_series(1, 100) g;
SELECT idem_complete('r-1', owner, '{"charge": "ch_1"}', 'replica')
  FROM idem_begin('r-1', 'replica');
});
$primary->wait_for_catchup($standby);

is($standby->safe_psql('postgres', q{
	SELECT count(*) FROM idem_claims WHERE namespace = 'replica'}), '101',
	'claims replicate to the standby');
is($standby->safe_psql('postgres', q{
	SELECT idem_claimed('after-backup-7', 'replica'), idem_claimed('nope', 'replica')}),
	't|f', 'idem_claimed works on the standby');

foreach my $call (
	q{SELECT idem_claim('s-1', 'replica')},
	q{SELECT idem_try_claim('s-1', 'replica')},
	q{SELECT * FROM idem_claim_many(ARRAY['s-1'], 'replica')},
	q{SELECT idem_release('before-backup', 'replica')},
	q{SELECT * FROM idem_begin('s-1', 'replica')},
	q{SELECT idem_complete('r-1', gen_random_uuid(), '{}', 'replica')},
	q{SELECT idem_fail('r-1', gen_random_uuid(), '{}', true, 'replica')},
	q{SELECT idem_token_issue('replica')},
	q{SELECT idem_token_consume(gen_random_uuid(), 'replica')})
{
	my ($rc, $out, $err) = $standby->psql('postgres', $call,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	isnt($rc, 0, "refused on standby: $call");
	like($err, qr/25006: cannot execute idem_\w+\(\) (during recovery|in a read-only transaction)/,
		"clear read-only error on standby: $call");
}
my ($rc, $out, $err) = $standby->psql('postgres', q{SELECT idem_claim('s-1', 'replica')});
like($err, qr/cannot execute idem_claim\(\) during recovery/,
	'the error says the server is in recovery');

# stored results replicate and can be read; keyed locks work on a standby,
# as advisory locks do
is($standby->safe_psql('postgres', q{
	SELECT status || ' ' || result::text FROM idem_requests WHERE key = 'r-1'}),
	'completed {"charge": "ch_1"}', 'stored results replicate to the standby');
is($standby->safe_psql('postgres', q{
	BEGIN; SELECT idem_lock('k'), idem_try_lock('k'); COMMIT}),
	'|t', 'keyed locks work on the standby');

# a claim made on the primary after the standby refused still works
is($primary->safe_psql('postgres', q{SELECT idem_claim('s-1', 'replica')}), 't',
	'the primary claims as usual');

amcheck_claims($primary, 'postgres', 'primary at the end');
$standby->stop;
$primary->stop;
done_testing();
