# More generations than a stripe has lanes, and than the direct path once
# kept layouts for (64), in a filter arena too small for two stripes of 64
# lanes.
#
# 100 generations of 100 claims each, written straight into the generation
# tables so that the claim cache knows none of them.  Checked:
#  - every sealed generation gets a stripe lane, although the arena has no
#    room for a second stripe of 64 lanes: the stripe made is narrower
#    (src/store/genstripe.c);
#  - old ids in all 100 generations are duplicates, and new ids are new;
#  - claims that go through all 100 generations build each generation's
#    layout once (src/store/claimrel.c): a second pass reads no operator class
#    from the catalogs, where a cache of 64 layouts rebuilt them all;
#  - after a restart, the worker's refinement (whose finer filters wait in
#    the arena for a lane) also ends with every generation in a stripe.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $GENS = 100;
my $PER = 100;

my $node = PostgreSQL::Test::Cluster->new('many_generations');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.purge_enabled = off
idempotency.filter_bits_per_claim = 2
idempotency.filter_memory_bits_per_claim = 20
idempotency.filter_memory = 40kB
idempotency.generation_max_claims = $PER
});
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION idempotency;
SELECT idem_namespace_define('mg', '2 hours');
SELECT idem_generation_switch('mg');
CREATE FUNCTION open_rel() RETURNS text LANGUAGE sql AS $$
    SELECT relation FROM idem_generations
     WHERE state = 'open'
       AND ttl_class = (SELECT floor(log(2, extract(epoch FROM ttl)))::int
                          FROM idem_namespaces WHERE name = 'mg')
$$;
CREATE FUNCTION write_gens(prefix text, a int, b int, per int)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    ns int := (SELECT id FROM idempotency.namespaces WHERE name = 'mg');
    i int := a;
BEGIN
    WHILE i <= b LOOP
        EXECUTE format('INSERT INTO %s (claimed_at, ns, key)
                        SELECT now(), $1, uuid_send(md5($2 || g)::uuid)
                          FROM generate_series($3, $4) g', open_rel())
          USING ns, prefix, i, least(i + per - 1, b);
        PERFORM idem_generation_switch('mg');
        i := i + per;
    END LOOP;
END $$;
});

# what shared memory holds of the sealed generations' filters
sub filters
{
	return $node->safe_psql('postgres', qq{
SELECT string_agg(f || ': ' || n, ', ' ORDER BY f)
  FROM (SELECT coalesce(filter_in_memory, 'none') AS f, count(*) AS n
          FROM idem_generations WHERE state = 'sealed' AND claims = $PER
         GROUP BY 1) s});
}

# generations of $PER claims whose filter is not a stripe lane
sub unstriped
{
	return $node->safe_psql('postgres', qq{
SELECT count(*) FROM idem_generations
 WHERE state = 'sealed' AND claims = $PER
   AND coalesce(filter_in_memory, '') NOT LIKE 'stripe%'});
}

$node->safe_psql('postgres', "SELECT write_gens('a', 1, $GENS * $PER, $PER)");
is($node->safe_psql('postgres',
		"SELECT count(*) FROM idem_generations WHERE state = 'sealed' AND claims = $PER"),
	$GENS, "$GENS sealed generations of $PER claims");
is(unstriped(), '0', 'every generation has a stripe lane: ' . filters());

# ids 1 .. 10000 are one per generation in turn within each pass: pass 1
# takes ids ending in 1..50 of each hundred, pass 2 those ending in 51..99
my $lookups = "SELECT idx_scan FROM pg_stat_sys_indexes WHERE indexrelname = 'pg_opclass_am_name_nsp_index'";
my $out = $node->safe_psql('postgres', qq{
$lookups;
SELECT count(*) FILTER (WHERE idem_claim(md5('a' || i)::uuid, 'mg'))
  FROM generate_series(1, $GENS * $PER) i WHERE i % $PER BETWEEN 1 AND 50;
SELECT pg_stat_force_next_flush();
$lookups;
SELECT count(*) FILTER (WHERE idem_claim(md5('a' || i)::uuid, 'mg'))
  FROM generate_series(1, $GENS * $PER) i WHERE i % $PER BETWEEN 51 AND 99;
SELECT pg_stat_force_next_flush();
});
my ($scans0, $new1, undef, $scans1, $new2) = split /\n/, $out;
is($new1, '0', "pass 1: no old claim in $GENS generations is new");
is($new2, '0', 'pass 2: no old claim is new');
my $scans2 = $node->safe_psql('postgres', $lookups);
# a layout reads the default operator classes of its index's two columns
cmp_ok($scans1 - $scans0, '>=', $GENS, "pass 1 built the layouts: "
	  . ($scans1 - $scans0) . ' operator class lookups');
cmp_ok($scans2 - $scans1, '<', $GENS / 4,
	"pass 2 through $GENS generations rebuilt none: "
	  . ($scans2 - $scans1) . ' operator class lookups');
is($node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE idem_claim(md5('new' || i)::uuid, 'mg'))
  FROM generate_series(1, 2000) i}), '2000', 'new ids are new');

# after a restart: the stored filters, then the worker's refinement
$node->restart;
is($node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE idem_claim(md5('n2-' || i)::uuid, 'mg'))
  FROM generate_series(1, 200) i}), '200', 'after a restart, new ids are new');
$node->safe_psql('postgres', q{
ALTER SYSTEM SET idempotency.purge_enabled = on;
ALTER SYSTEM SET idempotency.purge_interval = 1;
SELECT pg_reload_conf();
});
# the worker refines 8 generations a round
$node->poll_query_until('postgres', qq{
SELECT count(*) = 0 FROM idem_generations
 WHERE state = 'sealed' AND claims = $PER
   AND coalesce(filter_in_memory, '') NOT LIKE 'stripe%'})
  or diag('refinement left: ' . filters());
$node->safe_psql('postgres', q{
ALTER SYSTEM SET idempotency.purge_enabled = off;
SELECT pg_reload_conf();
});
is(unstriped(), '0', 'after the refinement every generation has a lane again: ' . filters());
is($node->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE idem_claim(md5('a' || i)::uuid, 'mg'))
  FROM generate_series(1, $GENS * $PER) i WHERE i % $PER = 0}), '0',
	'after the refinement, no old claim is new');

$node->stop;
done_testing();
