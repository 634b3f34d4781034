# docs/drivers.md's "Using it from drivers" snippets run as written there: the
# psycopg 3 one with Debian's python3-psycopg, the node-postgres one with
# npm's pg (test/run tap installs it and passes its node_modules in
# IDEM_NODE_PATH).  Each snippet asserts what it shows (a redelivery is a
# duplicate, a uuid batch comes back in order, idem_begin replays, ID001 is
# caught by SQLSTATE); afterwards each applied its payment exactly once.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;

my $python = '/usr/bin/python3';    # Debian's, where python3-psycopg lives
my $node_path = $ENV{IDEM_NODE_PATH} // '';
my @missing;
push @missing, 'python3-psycopg'
  if system($python, '-c', 'import psycopg') != 0;
push @missing, 'node' if system('sh', '-c', 'command -v node >/dev/null') != 0;
push @missing, 'the npm module pg (IDEM_NODE_PATH)'
  unless $node_path ne '' && -d "$node_path/pg";
if (@missing)
{
	diag("SKIPPED: missing @missing; test/run tap installs them");
	plan skip_all => "SKIPPED: missing @missing";
}

my $guide = slurp_file("$ENV{IDEMPOTENCY_ROOT}/docs/drivers.md");
my ($section) = $guide =~ /\A# Using it from drivers\n(.*)\z/ms;
ok(defined $section, 'docs/drivers.md is the "Using it from drivers" guide');
my %block;
while (($section // '') =~ /<!-- drivers-test: ([\w-]+) -->\n```\w+\n(.*?)```/gs)
{
	$block{$1} = $2;
}
ok(defined $block{$_}, "docs/drivers.md has the $_ block") for qw(schema psycopg node-postgres);

my $node = PostgreSQL::Test::Cluster->new('drivers');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.purge_enabled = off
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');
$node->safe_psql('postgres', $block{schema} // '');

my %env = (PGHOST => $node->host, PGPORT => $node->port, PGDATABASE => 'postgres',
	PGUSER => scalar getpwuid($<));
my $dir = PostgreSQL::Test::Utils::tempdir;
foreach my $snippet ([ 'psycopg', 'py', [$python] ], [ 'node-postgres', 'js', ['node'] ])
{
	my ($name, $ext, $cmd) = @$snippet;
	my $file = "$dir/snippet.$ext";
	open(my $fh, '>', $file) or die "cannot write $file: $!";
	print $fh $block{$name} // '';
	close $fh;
	my ($out, $err) = ('', '');
	local %ENV = (%ENV, %env, NODE_PATH => $node_path);
	my $ok = IPC::Run::run([ @$cmd, $file ], '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	ok($ok, "the $name snippet runs and its assertions hold") or diag("$out\n$err");
}

# each snippet claimed one payment event twice and applied it once, and
# claimed its batch: the psycopg one 3 of 4 ids, the node one 2 of 3
is( $node->safe_psql('postgres',
		"SELECT count(*) || ' ' || count(DISTINCT event_id) FROM payments_applied"),
	'2 2', 'two payments applied, one per snippet');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM idem_claims WHERE namespace = 'payments'"),
	'7', 'the payments namespace holds 2 events and 5 batch ids');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM payments_applied p WHERE NOT idem_claimed(p.event_id, 'payments')"),
	'0', 'every applied payment is claimed (uuid form)');
is( $node->safe_psql('postgres',
		"SELECT string_agg(status, ',' ORDER BY status) FROM idem_requests WHERE namespace = 'api'"),
	'completed,completed', 'each snippet completed its request');
amcheck_claims($node, 'postgres', 'after the drivers');
done_testing();
