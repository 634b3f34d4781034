#!/usr/bin/perl
# bench/merge_results.pl OLD NEW: print NEW's header, then OLD's "## "
# sections with every section NEW also has replaced by NEW's, then NEW's
# other sections.  So a run of some suites updates their sections of
# bench/results.md and keeps the others' figures (from earlier runs, which
# their own lines date).
use strict;
use warnings;

sub sections
{
	my ($file) = @_;
	my ($head, @order, %body) = ('');
	my $cur;
	open(my $fh, '<', $file) or return ('', [], {});
	while (my $line = <$fh>)
	{
		if ($line =~ /^## (.*)$/)
		{
			$cur = $1;
			push @order, $cur unless exists $body{$cur};
			$body{$cur} = '';
		}
		if (defined $cur) { $body{$cur} .= $line; } else { $head .= $line; }
	}
	return ($head, \@order, \%body);
}

my ($old_head, $old_order, $old_body) = sections($ARGV[0]);
my ($new_head, $new_order, $new_body) = sections($ARGV[1]);
my %done;
print $new_head;
for my $s (@$old_order)
{
	print exists $new_body->{$s} ? $new_body->{$s} : $old_body->{$s};
	$done{$s} = 1;
}
print $new_body->{$_} for grep { !$done{$_} } @$new_order;
