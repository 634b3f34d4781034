# The leaf search of a sealed generation (src/store/btprobe.c): an old
# duplicate's leaf is searched with nbtree's _bt_compare, which must
# order (key, ns) as the btree does for every shape of key (a key
# compressed in the index too).  With no filter memory every claim searches the sealed
# generation's leaf, absent ids too.  The ids: prefixes of one another
# ('k1', 'k10', 'k100', ...; 'p', 'pp', ...), ids one byte longer, ids over
# 127 bytes (4-byte headers in the index) and over 512 (compressed there),
# each written in one namespace of the class, in the other, in both, or in
# neither.  Every claim must be new exactly when its (id, namespace) was
# not written, and be answered by the leaf search alone (the heap
# all-visible), never by an index scan.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use IdemCheck;

my $node = PostgreSQL::Test::Cluster->new('sealed_leaf_search');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.purge_enabled = off
idempotency.filter_memory = 0
autovacuum = off
});
$node->start;

create_extension_with_namespaces($node, ['postgres'], { la => '12 hours', lb => '13 hours' });
$node->safe_psql('postgres', q{
SELECT idem_generation_switch('la');
CREATE TABLE ids AS
WITH s(id, w) AS (
    SELECT 'k' || i, i % 3 FROM generate_series(1, 3000) i
    UNION ALL SELECT 'k' || i || 'x', -1 FROM generate_series(1, 300) i
    UNION ALL SELECT 'k', -1
    UNION ALL SELECT repeat('p', n), n % 3 FROM generate_series(1, 700) n WHERE n <> 16
    UNION ALL SELECT repeat('p', n) || 'q', -1 FROM generate_series(1, 700, 7) n WHERE n <> 15
    UNION ALL SELECT md5(i::text) || repeat('r', i), i % 3 FROM generate_series(100, 900, 50) i
)
SELECT s.id, n.ns,
       (n.ns = 'la' AND s.w IN (1, 2)) OR (n.ns = 'lb' AND s.w IN (0, 2)) AS written
  FROM s, (VALUES ('la'), ('lb')) n(ns);
});

# the written claims, by hand into the open generation (the claim cache
# knows none of them), which is then sealed and made all-visible
my $rel = $node->safe_psql('postgres', q{
SELECT relation FROM idem_generations
 WHERE state = 'open'
   AND ttl_class = (SELECT floor(log(2, extract(epoch FROM ttl)))::int
                      FROM idem_namespaces WHERE name = 'la')});
like($rel, qr/^idempotency\.claims_g\d+$/, "the open generation: $rel");
is($node->safe_psql('postgres', q{
SELECT count(DISTINCT g.relation) FROM idem_generations g, idem_namespaces n
 WHERE g.state = 'open' AND n.name IN ('la', 'lb')
   AND g.ttl_class = floor(log(2, extract(epoch FROM n.ttl)))::int}),
	'1', 'both namespaces are of its class');
$node->safe_psql('postgres', qq{
INSERT INTO $rel (claimed_at, ns, key)
SELECT now(), n.id, convert_to(i.id, 'UTF8')
  FROM ids i JOIN idempotency.namespaces n ON n.name = i.ns
 WHERE i.written;
SELECT idem_generation_switch('la');
VACUUM $rel;
});
is($node->safe_psql('postgres',
		"SELECT state FROM idem_generations WHERE relation = '$rel'"),
	'sealed', 'the generation is sealed');
is($node->safe_psql('postgres',
		"SELECT relallvisible = relpages FROM pg_class WHERE oid = '$rel'::regclass"),
	't', 'its pages are all-visible');
my $index = $node->safe_psql('postgres',
	"SELECT indexrelid::regclass FROM pg_index WHERE indrelid = '$rel'::regclass");
cmp_ok($node->safe_psql('postgres', "SELECT pg_relation_size('$index') / 8192"),
	'>', 10, 'its index has many leaves');
is($node->safe_psql('postgres', qq{
SELECT count(*) FROM $rel WHERE length(key) > 127}),
	$node->safe_psql('postgres', q{
SELECT count(*) FROM ids WHERE written AND octet_length(id) > 127}),
	'ids over 127 bytes are in it');

my %ids = map { split /\|/ } split /\n/, $node->safe_psql('postgres', q{
SELECT 'all|' || count(*) FROM ids
UNION ALL SELECT 'new|' || count(*) FILTER (WHERE NOT written) FROM ids});
my $stat = qq{
SELECT pg_stat_force_next_flush();
SELECT idx_scan || '|' || idx_tup_read FROM pg_stat_all_indexes
 WHERE indexrelid = '$index'::regclass};
# the written ones first, then the others, in random order
my ($wrong, $new, $scans, $read) = (0, 0, 0, 0);
for my $written ('true', 'false')
{
	my ($scans0, $read0) = split /\|/, (split /\n/, $node->safe_psql('postgres', $stat))[-1];
	my $res = $node->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE new = written) || '|' || count(*) FILTER (WHERE new)
  FROM (SELECT idem_claim(id, ns) AS new, written FROM ids
         WHERE written = $written ORDER BY random()) s});
	my ($scans1, $read1) = split /\|/, (split /\n/, $node->safe_psql('postgres', $stat))[-1];
	my ($w, $n) = split /\|/, $res;
	note("written = $written: $w wrong, $n new, "
		  . ($scans1 - $scans0) . ' index searches, ' . ($read1 - $read0) . ' entries read by scans');
	$wrong += $w;
	$new += $n;
	$scans += $scans1 - $scans0;
	$read += $read1 - $read0;
}
is($wrong, 0, "every claim of the $ids{all} is new exactly when it was not written");
is($new, $ids{new}, "the $ids{new} not written are new");
cmp_ok($scans, '>=', $ids{all}, 'each claim searched the sealed index');
is($read, 0, 'each answered by the leaf search, none by an index scan');

# once more: every (id, namespace) is a duplicate now
is($node->safe_psql('postgres',
		'SELECT count(*) FILTER (WHERE idem_claim(id, ns)) FROM ids'),
	'0', 'all are duplicates the second time');

$node->stop;
done_testing();
