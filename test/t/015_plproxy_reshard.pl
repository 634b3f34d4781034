# Exactly-once through PL/Proxy, and a resharding from 2 to 4 partitions
# that keeps every claim: docs/plproxy.md's "Sharding with PL/Proxy" SQL, run as
# written there (only the connection strings get this cluster's socket and
# port).  Events are delivered with repeats by 4 clients through the proxy;
# the claims that now route to the new partitions are imported there; then
# every event is redelivered through the 4-partition proxy.  Every event is
# applied exactly once across the partitions, and amcheck is clean.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;

my $sharedir = `pg_config --sharedir`;
chomp $sharedir;
if (!-f "$sharedir/extension/plproxy.control")
{
	diag('SKIPPED: plproxy is not installed; test/run tap installs postgresql-15-plproxy');
	plan skip_all => 'SKIPPED: plproxy is not installed (postgresql-15-plproxy)';
}

my $node = PostgreSQL::Test::Cluster->new('plproxy');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.purge_enabled = off
max_connections = 60
});
$node->start;
my $conn = sprintf('host=%s port=%d dbname=', $node->host, $node->port);

my $guide = slurp_file("$ENV{IDEMPOTENCY_ROOT}/docs/plproxy.md");
my ($section) = $guide =~ /\A# Sharding with PL\/Proxy\n(.*)\z/ms;
ok(defined $section, 'docs/plproxy.md is the "Sharding with PL/Proxy" guide');
my %block;
my $text = $section // '';
while ($text =~ /<!-- plproxy-test ([\w-]+) -->\n```sql\n(.*?)```/gs)
{
	my ($name, $sql) = ($1, $2);
	$sql =~ s/dbname=/$conn/g;
	$block{$name} = $sql;
}
is(join(',', sort keys %block), 'new-partition,partition,proxy,reshard',
	'with its four SQL blocks marked for this test');

sub run_block
{
	my ($db, $name, @vars) = @_;
	my ($rc, $out, $err) = $node->psql($db, $block{$name}, on_error_stop => 1,
		extra_params => [ map { ('-v', $_) } @vars ]);
	is($rc, 0, "docs/plproxy.md block '$name' runs in $db") or diag($err);
	return $out;
}

$node->safe_psql('postgres', "CREATE DATABASE $_") foreach qw(proxy part0 part1 part2 part3);
run_block($_, 'partition') foreach qw(part0 part1);
run_block('proxy', 'proxy');

# --- two partitions: 4 clients deliver with repeats ------------------------
my $events = 2000;
my $script = "$PostgreSQL::Test::Utils::tmp_check/plproxy_deliver.pgbench";
open(my $fh, '>', $script) or die $!;
print $fh "\\set e random(1, $events)\nSELECT handle_event('ev-' || :e, 1);\n";
close $fh;
$node->command_ok([ 'pgbench', '-n', '-c', '4', '-j', '2', '-t', '1000', '-f', $script, 'proxy' ],
	'4 clients deliver 4,000 events with repeats through the proxy (2 partitions)');
my $delivered = 0;
$delivered += $node->safe_psql($_, 'SELECT count(*) FROM applied') foreach qw(part0 part1);
cmp_ok($delivered, '>', $events / 2, "$delivered distinct events applied on two partitions");

# --- reshard to four, moving the claims that now route elsewhere ----------
foreach my $new (2, 3)
{
	run_block("part$new", 'partition');
	$node->safe_psql("part$new", 'CREATE EXTENSION dblink');
	my $imported = run_block("part$new", 'new-partition', "old=" . ($new - 2), "n=$new");
	cmp_ok($imported, '>', 0, "part$new imports the claims that now route to it ($imported)");
}
run_block('proxy', 'reshard');

# --- every event redelivered through four partitions ----------------------
$node->safe_psql('proxy', qq{
	SELECT count(*) FROM generate_series(1, $events) g, LATERAL handle_event('ev-' || g, 1) h});
my ($total, %seen, $twice) = (0);
foreach my $db (qw(part0 part1 part2 part3))
{
	foreach my $e (split /\n/, $node->safe_psql($db, 'SELECT event_id FROM applied'))
	{
		$total++;
		$twice++ if $seen{$e}++;
	}
}
is($twice // 0, 0, 'after resharding and redelivering everything: 0 applied twice');
is(scalar(keys %seen), $events, "and 0 lost: all $events events applied");
is($total, $events, 'one applied row per event across the four partitions');
is($node->safe_psql('part2', q{
	SELECT count(*) FROM applied a WHERE hashtext(a.event_id) & 3 <> 2}),
	'0', 'the new partition applied only events that route to it');

amcheck_claims($node, $_, $_) foreach qw(part0 part1 part2 part3);
$node->stop;
done_testing();
