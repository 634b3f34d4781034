# The README's examples run as written.  SQL blocks preceded by
# "<!-- readme-test -->" are executed in order on a fresh database, and
# each "<!-- readme-check: QUERY => RESULT -->" compares a query's result.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = $ENV{IDEMPOTENCY_ROOT} or die "IDEMPOTENCY_ROOT is not set";
my @steps;
{
	open(my $fh, '<', "$root/README.md") or die "cannot read README.md: $!";
	my ($want, $in, $block) = (0, 0, '');
	while (my $line = <$fh>)
	{
		if ($in)
		{
			if ($line =~ /^```\s*$/)
			{
				push @steps, [ 'sql', $block ];
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
			push @steps, [ 'check', $1, $2 ];
		}
	}
}
cmp_ok(scalar(grep { $_->[0] eq 'sql' } @steps), '>=', 4, 'found the README examples');

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
		is($rc, 0, "README example $n runs") or diag($err);
	}
	else
	{
		is($node->safe_psql('postgres', $step->[1]), $step->[2],
			"README check $n: $step->[1]");
	}
}

$node->stop;
done_testing();
