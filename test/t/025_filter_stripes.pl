# Stripes: the finer filters of a class's sealed generations, bit-sliced
# (src/store/genstripe.c), so that a new id asks one stripe for all of them.
#
# 40 generations of 100 claims each (generation_max_claims = 100), their
# claims written straight into the generation tables so that the claim
# cache knows none of them: every duplicate below is found through the
# stripes and the indexes.  The stored filters have 2 bits per claim (about
# 39% false positives), so a stripe that answered for nobody would show as
# hundreds of descents.  Checked:
#  - after the seals, one stripe of 64 lanes holds all 40 (it grew from 8
#    lanes to 32 to 64, the narrower ones moving into it);
#  - new ids descend into almost no sealed index; no old claim is new;
#  - after a restart the worker rebuilds the stripes, and the same holds;
#  - generations dropped free their lanes, which new generations take
#    (their bits rewritten): still no live claim is new, and the dropped
#    claims are new again.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $GENS = 40;
my $PER = 100;
my $N = 2000;

my $node = PostgreSQL::Test::Cluster->new('filter_stripes');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.purge_enabled = off
idempotency.filter_bits_per_claim = 2
idempotency.filter_memory_bits_per_claim = 20
idempotency.generation_max_claims = $PER
});
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION idempotency;
SELECT idem_namespace_define('st', '2 hours');
SELECT idem_generation_switch('st');
CREATE FUNCTION open_rel() RETURNS text LANGUAGE sql AS $$
    SELECT relation FROM idem_generations
     WHERE state = 'open'
       AND ttl_class = (SELECT floor(log(2, extract(epoch FROM ttl)))::int
                          FROM idem_namespaces WHERE name = 'st')
$$;
-- claims of ids prefix-a .. prefix-b, claimed at "at", into the open
-- generation, one generation switch every $PER
CREATE FUNCTION write_gens(prefix text, a int, b int, per int, at timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    ns int := (SELECT id FROM idempotency.namespaces WHERE name = 'st');
    i int := a;
BEGIN
    WHILE i <= b LOOP
        EXECUTE format('INSERT INTO %s (claimed_at, ns, key)
                        SELECT $1, $2, uuid_send(md5($3 || g)::uuid)
                          FROM generate_series($4, $5) g', open_rel())
          USING at, ns, prefix, i, least(i + per - 1, b);
        PERFORM idem_generation_switch('st');
        i := i + per;
    END LOOP;
END $$;
});

# the claims of ids prefix-a .. prefix-b that are new
sub new_of
{
	my ($prefix, $a, $b) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE idem_claim(md5('$prefix' || i)::uuid, 'st'))
  FROM generate_series($a, $b) i});
}

# what shared memory holds of the filters of the sealed generations of
# $PER claims (those of the new ids below hold more, and get a stripe of
# their own geometry)
sub filters
{
	return $node->safe_psql('postgres', qq{
SELECT f || ': ' || count(*)
  FROM (SELECT coalesce(filter_in_memory, 'none') AS f
          FROM idem_generations WHERE state = 'sealed' AND claims = $PER) s
 GROUP BY f ORDER BY f});
}

my $round = 0;

# descents into sealed generations' indexes for $N new ids
sub descents
{
	$round++;
	my $q = q{
SELECT coalesce(sum(s.idx_scan), 0)
  FROM idem_generations g
  JOIN pg_index i ON i.indrelid = g.relation::regclass
  JOIN pg_stat_all_indexes s ON s.indexrelid = i.indexrelid
 WHERE g.state = 'sealed'};
	my $before = $node->safe_psql('postgres', $q);
	my $new = $node->safe_psql('postgres', qq{
SELECT count(*) FROM generate_series(1, $N) i WHERE idem_claim('n$round-' || i, 'st');
SELECT pg_stat_force_next_flush();
});
	is((split /\n/, $new)[0], $N, "round $round: all $N new ids claimed");
	return $node->safe_psql('postgres', $q) - $before;
}

$node->safe_psql('postgres', "SELECT write_gens('a', 1, $GENS * $PER, $PER, now())");
is($node->safe_psql('postgres',
		"SELECT count(*) FROM idem_generations WHERE state = 'sealed' AND claims = $PER"),
	$GENS, "$GENS sealed generations of $PER claims");
is(filters(), "stripe of 64 lanes: $GENS", "one stripe of 64 lanes holds all $GENS");

# each check of old ids takes ids no check took before: a duplicate found
# goes into the claim cache, which would answer the next check of it
my $d = descents();
cmp_ok($d, '<=', $N / 20, "with the stripe: $d descents for $N new ids in $GENS generations");
is(new_of('a', 1, 1000), '0', 'no claim of the sealed generations is new');

# after a restart: the stored filters, then the worker's stripes
$node->restart;
$d = descents();
cmp_ok($d, '>=', $N, "after a restart, the stored 2-bit filters: $d descents for $N new ids");
is(filters(), "stored: $GENS", 'the new ids loaded every stored filter');
is(new_of('a', 1001, 2000), '0', 'after a restart, the stored filters: no claim is new');
my $offset = -s $node->logfile;
$node->safe_psql('postgres', q{
ALTER SYSTEM SET idempotency.purge_enabled = on;
ALTER SYSTEM SET idempotency.purge_interval = 1;
SELECT pg_reload_conf();
});
$node->poll_query_until('postgres', q{
SELECT count(*) = 0 FROM idem_generations
 WHERE state = 'sealed' AND claims > 0
   AND coalesce(filter_in_memory, '') NOT LIKE 'stripe%'}) or die 'no stripes rebuilt';
$node->safe_psql('postgres', q{
ALTER SYSTEM SET idempotency.purge_enabled = off;
SELECT pg_reload_conf();
});
is(filters(), "stripe of 64 lanes: $GENS",
	'the worker rebuilt them into one stripe of 64 lanes');
$d = descents();
cmp_ok($d, '<=', $N / 20, "after the rebuild: $d descents for $N new ids");
is(new_of('a', 2001, 3000), '0', 'after the rebuild: no claim is new');

# lanes freed and taken again: 24 generations of expired claims (claimed
# 3 hours ago) take the stripe's last 24 lanes and are dropped, freeing
# them; 24 new generations take them, with the old bits rewritten
my $X = 24;
$node->safe_psql('postgres',
	"SELECT write_gens('x', 1, $X * $PER, $PER, now() - interval '3 hours')");
$node->safe_psql('postgres', 'SELECT idem_purge()');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM idem_generations WHERE state = 'sealed' AND claims = $PER"),
	$GENS, 'the expired generations are dropped');
$node->safe_psql('postgres', "SELECT write_gens('b', 1, $X * $PER, $PER, now())");
is(filters(), 'stripe of 64 lanes: ' . ($GENS + $X), 'the new generations took lanes');
is(new_of('a', 3001, 4000), '0', 'lanes taken again: no claim of the 40 is new');
is(new_of('b', 1, $X * $PER), '0', "no claim of the $X new generations is new");
is(new_of('x', 1, $X * $PER), $X * $PER, 'the dropped claims are new again');
$d = descents();
cmp_ok($d, '<=', $N / 20, "with lanes taken again: $d descents for $N new ids");

$node->stop;
done_testing();
