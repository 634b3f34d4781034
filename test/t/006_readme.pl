# The README's examples run as written, and then those of the guides that
# continue its quick start (docs/requests.md, the HTTP handler).  SQL blocks
# preceded by "<!-- readme-test -->" are executed in order on a fresh
# database, and each "<!-- readme-check: QUERY => RESULT -->" compares a
# query's result.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = $ENV{IDEMPOTENCY_ROOT} or die "IDEMPOTENCY_ROOT is not set";
my @steps;
my @files = ('README.md', 'docs/requests.md');
my %sql_in;
foreach my $file (@files)
{
	open(my $fh, '<', "$root/$file") or die "cannot read $file: $!";
	my ($want, $in, $block) = (0, 0, '');
	while (my $line = <$fh>)
	{
		if ($in)
		{
			if ($line =~ /^```\s*$/)
			{
				push @steps, [ 'sql', $block, $file ];
				$sql_in{$file}++;
				($in, $block) = (0, '');
			}
			else
			{
				$block .= $line;
			}
		}
		elsif ($line =~ /^<!-- readme-test -->/)
		{
			$want = 1;
		}
		elsif ($want && $line =~ /^```sql/)
		{
			($in, $want) = (1, 0);
		}
		elsif ($line =~ /^<!-- readme-check: (.*) => (.*) -->/)
		{
			push @steps, [ 'check', $1, $2, $file ];
		}
	}
	close($fh);
}
cmp_ok($sql_in{'README.md'} // 0, '>=', 4, 'found the README examples');
cmp_ok($sql_in{'docs/requests.md'} // 0, '>=', 1, 'found the example of docs/requests.md');

my $node = PostgreSQL::Test::Cluster->new('readme');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');

my $n = 0;
foreach my $step (@steps)
{
	$n++;
	if ($step->[0] eq 'sql')
	{
		my ($rc, $out, $err) = $node->psql('postgres', $step->[1],
			extra_params => [ '-v', 'ON_ERROR_STOP=1' ]);
		is($rc, 0, "example $n ($step->[2]) runs") or diag($err);
	}
	else
	{
		is($node->safe_psql('postgres', $step->[1]), $step->[2],
			"check $n ($step->[3]): $step->[1]");
	}
}

$node->stop;
done_testing();
