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
like($index, qr/^idempotency\.claims_g\d+_pkey$/, "one sealed generation: $index");

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

# A filter sealed by 1.0: built by the 1.0 binary (commit 6b7cad7) when it
# sealed these 1000 claims, written by hand in namespace 1 of a fresh
# database (the filter hashes the namespace id), 12 bits per claim, 8
# hashes, 1.0's double hashing.  This binary must read it as sealed: with
# the mixed layout nearly every claim would read as absent.
my $filter_1_0 = join('', qw(
28499bb4803dcb664e2415ea80dfc050e8e0ff68a1546a293aa03517bdb6b17cdc531407
4962d51d3bb7d373af173c6e66123d29f4e5e898df53ea8dfcc79daea0b4626a8dff63c8
639eb2690447ac0a78552908ec3c75821aa31557ba020bcf70095387c6a15bb285f235cc
16e7b58add8df8f17f58c64036681610433327180d65028c30e9022ad14af03028a188c0
b1786409041d61a9821f14544482088602c1da1f91008c83225ef96080368d526c9a4f64
314802264c340400401016c974e194c1269501cd83a01210cf06886adf7f3621a874489b
838805858b7c36a848a25d583adf1e0806f51405d0a90fa353b612eb44588e63556620e5
44023bc2e69b827e2d229ff2620809768ab7cd629d8b735d1ef20b8a88d57deaf5db0694
441a77ac8487b052a8977fa5584108ed3d45473d6446ff42f908bbc9944adc9b5ffdfd66
0cca83162946807ac62d33a1be6c4a3361e429f50d0ff40b9bc00c493671513c02625585
d766acdad3ba2a354b16b1b868bd88f50ba9380ce560b77312e744b123901a9b9c8287d0
0e1761cf294869640d702e6ec6837793ceac69f07fe81ab97eb80b11818532e558718190
b451ba2e942e712cc742880d63e9c31b1bb9e485c70ae4b89b3af959715135455a4ff04f
c2f6284609fbaa06b02c755b96e52a0d83873fab1480c05fd04697461e1505139f38a129
9c786cf22c77a26ca3eb274df6e88f2688117b4df354c149154ec1aa9c7fb6f64dfb12ae
d8d86b88a7dd950c54d802d6376cb58ec1cb5fd327392087953605a3f808e641f8269330
56772a0908ce2aa2ccbb80725a70c90e57a1d839f00ac9dee41dfaef4fd4b6a1f2970967
df921774ff94dec2012c9c2622c22213cc714e05a8f6950c3e24296a37f2c1c72a14f261
082fefebdab52505faa099e9f76edf51a9978ed8b44226d70f563207689eb57f9ecd6b9e
652e4ea60834fac336fd08388267c51d2de1f50aa6e5df703ba088544124bb98c36a3031
800c4b0c6f107e37eaf44666a461c30abe14c2b9015049f36483a497bfd76d1111d38548
5cea28c911c41a7912188286f416be13a817e9f66b7d3d73719c884892d0ead9830bafa5
edf43c887efeb8e674c305764df620bdcbd2ed7b5783561cfd7338a0d27c53a72fca3ce5
4b4f3b2f73660693425d007280838049fe15a41133862bac616c1bcfcd09b8493736d199
2468a8128340f0316dfca08a326545547891af793ec98e3c45d458ce8e2652c2a071b911
462812437f82b89381967247a73e4a58be3a34c3e917dcaf88575e6bf7536dd1394bb8e4
72b00c64699e7f8d4489950561e01b04e0050fa20a17e5d3156841c5bd03e383550f70b8
8ad04310b8636f938e98121ac7ca31b4bd86730626503959aedcfd67f7e32bd2128c24a6
5b1045e4c0d7eecf7ccc2ef522889d31786ac5143a02c94a88fd052432726ede2fb942a6
a15fb26d6bdb2c3fd134480a25a6bd8cec41d3a09cd8e19665ef67d0b2b6f6450b463c35
423dd492ce401311c9159b3ddf9f0ec398d8bfbf726a8cc8256f263ec1563a54d7b3ee60
36cde39e4247c2bfae778fea3baf68f165be70d4fabbd6cd6f756f39b10b535472208e70
ce89daa2774cfb14deaeafa2a37cfd92bcb86c96aa1d550dc48549f6ea5843983d7c626a
8652a3356731bdeb3846fff98ef0b74cb173b8ffafd6c9413d9a1dc517b9d8e97b6077ed
d5edabe92fd972e1823d5f48d71c53238a7d646d5bb8f40d071ea61c7f2afd64a4bd075a
1babaaa09ed292535516e4a5305a375caea738cb946865820b6165bea445ea0f3f6838da
d268613e514bdf529113d086a0859e6f1937251a8963b02228d6cd016a0c98491aae70fd
a130cc058a163051d483d41189121c294e941c01fa0303420090e233e1d43a32c02418f9
6682d20d6f927dfd87b77a904b4ca2155d5d4163242f0f1870f0620c1e869a911dacb954
34aee6d0e9f1c7136f4b273fb84c906bbb392b58cb08467621c276b59815ee7de727e9fa
0c3a9151c4b3b84e94a5914d54228915069256fabd980fbe3032fc7430ce60d78c6acca0
8396c971256d320431058a84f8f95fd5d38e692858f8198dc4116620a32854a2498f910d
1231822bcb15ca90485088143151e6a5f2f20c025b94463a
));
$node->safe_psql('postgres', q{
ALTER SYSTEM SET idempotency.purge_enabled = off;
SELECT pg_reload_conf();
CREATE DATABASE legacy;
});
$node->safe_psql('legacy', q{
CREATE EXTENSION idempotency;
SELECT idem_namespace_define('legacy', '2 hours');
SELECT idem_generation_switch();
});
is($node->safe_psql('legacy', "SELECT id FROM idempotency.namespaces WHERE name = 'legacy'"),
	'1', 'the namespace the 1.0 filter was built for');
my $legacy_rel = $node->safe_psql('legacy', "SELECT relation FROM idem_generations WHERE state = 'open'");
$node->safe_psql('legacy', qq{
INSERT INTO $legacy_rel (claimed_at, ns, key)
SELECT now(), 1, uuid_send(md5('legacy-' || i)::uuid) FROM generate_series(1, 1000) i;
SET idempotency.debug_legacy_filters = on;
SELECT idem_generation_switch();
UPDATE idempotency.generations SET filter = decode('$filter_1_0', 'hex'), filter_hashes = 8
 WHERE id = substring('$legacy_rel' from 'claims_g([0-9]+)')::int AND state = 'sealed';
});
is($node->safe_psql('legacy', qq{
SELECT claims, filter_hashes, octet_length(filter) FROM idempotency.generations
 WHERE state = 'sealed'}), '1000|8|1536', 'the generation holds the filter 1.0 sealed');
$node->restart;
is($node->safe_psql('legacy', q{
SELECT count(*) FILTER (WHERE idem_claim(md5('legacy-' || i)::uuid, 'legacy'))
  FROM generate_series(1, 1000) i}), '0', "1.0's filter read as sealed: 0 of its 1000 claims claimed again");
is($node->safe_psql('legacy', q{
SELECT count(*) FILTER (WHERE idem_claim(md5('legacy-new-' || i)::uuid, 'legacy'))
  FROM generate_series(1, 100) i}), '100', 'new ids still claimed beside it');

$node->stop;
done_testing();
