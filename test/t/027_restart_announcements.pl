# After a restart, an open generation's announcement bitmap cannot know
# which namespaces its claims belong to: it is made full, and every claim
# of every other class probes that generation.  The first maintenance pass
# (a worker round, idem_purge()) switches such generations, so that the
# probes stop; nothing is lost on the way.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;

my $node = PostgreSQL::Test::Cluster->new('restart_announcements');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.purge_enabled = off
});
$node->start;

create_extension_with_namespaces($node, ['postgres'], { week => '7 days', day => '1 day' });
$node->safe_psql('postgres', q{
SELECT idem_generation_switch();
SELECT count(*) FROM generate_series(1, 1000) i WHERE idem_claim('w-' || i, 'week');
SELECT count(*) FROM generate_series(1, 1000) i WHERE idem_claim('d-' || i, 'day');
});

# scans of the day class's generations' indexes while 1000 new ids of the
# week class are claimed
my $round = 0;
sub day_probes
{
	my $q = q{
SELECT coalesce(sum(s.idx_scan), 0) FROM pg_stat_all_indexes s
  JOIN idem_generations g ON g.relation::regclass = s.relid
 WHERE g.ttl_class = 16};
	$round++;
	my $before = $node->safe_psql('postgres', $q);
	my $new = $node->safe_psql('postgres', qq{
SELECT count(*) FROM generate_series(1, 1000) i WHERE idem_claim('n$round-' || i, 'week');
SELECT pg_stat_force_next_flush();
});
	is((split /\n/, $new)[0], 1000, "round $round: 1000 new ids claimed");
	return $node->safe_psql('postgres', $q) - $before;
}

is(day_probes(), 0, 'before a restart, claims of a week never probe the open generation of a day');

$node->restart;
cmp_ok(day_probes(), '>=', 1000, 'after a restart, each of them probes it');

# open generations made by a maintenance pass (idem_purge())
sub opened_by_purge
{
	my $max = $node->safe_psql('postgres', 'SELECT max(id) FROM idem_generations');
	$node->safe_psql('postgres', 'SELECT idem_purge()');
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM idem_generations WHERE state = 'open' AND id > $max");
}

is(opened_by_purge(), 2, 'the first maintenance pass switches both open generations');
is(day_probes(), 0, 'then none of them probes a generation of a day');

is($node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE idem_claim('w-' || i, 'week')) + count(*) FILTER (WHERE idem_claim('d-' || i, 'day'))
  FROM generate_series(1, 1000) i}), '0', 'every claim made before the restart is still a duplicate');
is(opened_by_purge(), 0, 'the next pass switches nothing');

done_testing();
