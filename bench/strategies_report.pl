#!/usr/bin/perl
# bench/strategies_report.pl TSV PNG SETTINGS: the strategies benchmark's
# tables (markdown, to stdout), its ratios and bars, and the throughput plot.
use strict;
use warnings;

my ($tsv, $png, $settings) = @ARGV;
my @order = qw(naive unique redis redis_unique idem cas_sql cas
	unique_batch idem_many redis_pipe unique_batch_only idem_many_only redis_pipe_only);
my %label = (
	naive        => 'a. naive SELECT-then-INSERT',
	unique       => 'b. unique table, ON CONFLICT DO NOTHING',
	redis        => 'c. Redis SET NX EX',
	redis_unique => 'd. Redis SET NX EX + unique table',
	idem         => 'e. idem_claim',
	unique_batch => 'b, batches of 100: INSERT ... SELECT ... ON CONFLICT',
	idem_many    => 'f. idem_claim_many, batches of 100',
	redis_pipe   => 'Redis SET NX EX, pipelines of 100',
	cas_sql      => 'g. UPDATE ... WHERE status (hand-written)',
	cas          => 'g. idem_cas_row',
	unique_batch_only => 'dedup only: batched unique table',
	idem_many_only    => 'dedup only: idem_claim_many',
	redis_pipe_only   => 'dedup only: Redis SET NX pipelines',
);

# runs{strategy}{consumers}{fault} = [ {fields}, ... ]; a paired run is two
# consecutive lines with fault 'paired': pairs{a}{b}{consumers} = [a/b, ...]
my (%runs, %consumers, %pairs, $prev);
open(my $fh, '<', $tsv) or die "$tsv: $!";
while (<$fh>)
{
	chomp;
	my @f = split /\t/;
	next unless @f == 13;
	my %r;
	@r{qw(strategy consumers fault deliveries events secs evps p50 p99 twice lost retries consistent)} = @f;
	push @{ $runs{ $r{strategy} }{ $r{consumers} }{ $r{fault} } }, \%r;
	$consumers{ $r{consumers} } = 1 if $r{fault} eq 'none';
	if ($r{fault} eq 'paired' && $prev && $prev->{fault} eq 'paired' && $prev->{secs} eq $r{secs}
		&& $prev->{consumers} eq $r{consumers})
	{
		push @{ $pairs{ $r{strategy} }{ $prev->{strategy} }{ $r{consumers} } }, $r{evps} / $prev->{evps};
		push @{ $pairs{ $prev->{strategy} }{ $r{strategy} }{ $r{consumers} } }, $prev->{evps} / $r{evps};
		undef $prev;
		next;
	}
	$prev = \%r;
}
close $fh;
my @cons = sort { $a <=> $b } keys %consumers;

sub median
{
	my @v = sort { $a <=> $b } @_;
	return undef unless @v;
	return @v % 2 ? $v[$#v / 2] : ($v[@v / 2 - 1] + $v[@v / 2]) / 2;
}

sub metric
{
	my ($s, $c, $fault, $m) = @_;
	my $list = $runs{$s}{$c}{$fault} or return undef;
	return median(map { $_->{$m} } @$list);
}

# correctness over a set of runs: total applied twice, total lost, all consistent
sub errors
{
	my ($s, $fault) = @_;
	my ($twice, $lost, $bad, $n) = (0, 0, 0, 0);
	foreach my $c (keys %{ $runs{$s} })
	{
		foreach my $r (@{ $runs{$s}{$c}{$fault} || [] })
		{
			return () if $r->{twice} eq '-';
			$twice += $r->{twice};
			$lost += $r->{lost};
			$bad++ if $r->{consistent} ne 't';
			$n++;
		}
	}
	return $n ? ($twice, $lost, $bad) : ();
}

sub fmt_int { my $v = shift; return defined $v ? sprintf('%.0f', $v) : '-'; }
sub fmt_ms { my $v = shift; return defined $v ? sprintf('%.2f', $v) : '-'; }

my %deliveries = map { $_ => ((map { $_->{deliveries} } map { @$_ } map { values %$_ } values %{ $runs{$_} || {} })[0] // 0) } @order;
my $single = $deliveries{idem} || '?';
my $batched = $deliveries{idem_many} || '?';
my $mid = (grep { $_ == 8 } @cons) ? 8 : $cons[-1];

print "Settings: $settings.  Single-event runs: $single deliveries each; batched runs: $batched.  ",
	"Throughput counts deliveries per second.  Latency is per delivery (per batch for the batched rows), ",
	"from first try to commit, retries included.  Applied twice / lost: summed over the runs, ",
	"against exactly once, from the ledger (n/a: the dedup-only rows write no ledger).\n\n";

print "| strategy | " . join(' | ', map { "ev/s, $_ consumer" . ($_ > 1 ? 's' : '') } @cons)
	. " | p50 ms ($mid) | p99 ms ($mid) | twice / lost, no fault | twice / lost, Redis restart | twice / lost, PG crash |\n";
print '|---' x (@cons + 6) . "|\n";
foreach my $s (@order)
{
	next unless $runs{$s};
	my @cells = ($label{$s});
	push @cells, fmt_int(metric($s, $_, 'none', 'evps')) foreach @cons;
	push @cells, fmt_ms(metric($s, $mid, 'none', 'p50')), fmt_ms(metric($s, $mid, 'none', 'p99'));
	foreach my $fault (qw(none redis pg))
	{
		my ($t, $l, $bad) = errors($s, $fault);
		push @cells, defined $t ? "$t / $l" . ($bad ? " (balances off in $bad)" : '')
			: $s =~ /_only$/ ? 'n/a' : '-';
	}
	print '| ' . join(' | ', @cells) . " |\n";
}

# ratios of idem_claim (and idem_claim_many) against every other strategy
sub ratio_table
{
	my ($ours, @others) = @_;
	print "\nThroughput of $label{$ours} divided by each strategy's, runs of one strategy at a time:\n\n";
	print "| against | " . join(' | ', map { "$_ consumer" . ($_ > 1 ? 's' : '') } @cons) . " |\n";
	print '|---' x (@cons + 1) . "|\n";
	foreach my $s (@others)
	{
		next unless $runs{$s};
		my @cells = ($label{$s});
		foreach my $c (@cons)
		{
			my ($a, $b) = (metric($ours, $c, 'none', 'evps'), metric($s, $c, 'none', 'evps'));
			push @cells, $a && $b ? sprintf('%.2fx', $a / $b) : '-';
		}
		print '| ' . join(' | ', @cells) . " |\n";
	}
}
ratio_table('idem', qw(naive unique redis redis_unique));
ratio_table('idem_many', qw(unique_batch redis_pipe idem));
ratio_table('idem_many_only', qw(unique_batch_only redis_pipe_only));
ratio_table('cas', qw(cas_sql));

# the bars, from the paired runs
print "\nBars.  Each pair ran at the same time, with as many consumers each, and the ratio is of ",
	"their throughputs while both were running (median over the paired runs):\n\n";
sub ratio_line
{
	my ($what, $x, $y, $bar) = @_;
	my @r;
	my $ok = 1;
	foreach my $c (@cons)
	{
		my $list = $pairs{$x}{$y}{$c} or next;
		my $m = median(@$list);
		push @r, sprintf('%.2f', $m) . (@$list > 1 ? sprintf(' (%s)', join(', ', map { sprintf('%.2f', $_) } sort { $a <=> $b } @$list)) : '');
		$ok = 0 if defined $bar && $m < $bar;
	}
	printf "- %s: %s at %s consumers%s\n", $what, join('; ', @r), join('/', @cons),
		defined $bar ? sprintf(' (bar >= %.1f: %s)', $bar, $ok ? 'met' : 'MISSED') : '';
}
ratio_line('idem_claim / unique table, single-event transactions', 'idem', 'unique', 1.0);
ratio_line('idem_claim_many / batched unique table, batches of 100', 'idem_many', 'unique_batch', 1.5);
ratio_line('idem_claim_many / batched unique table, dedup only (no business write)', 'idem_many_only', 'unique_batch_only', 1.5);
ratio_line('idem_claim_many / Redis SET NX pipelines of 100, each followed by the same batched write', 'idem_many', 'redis_pipe', undef);
ratio_line('idem_claim_many / Redis SET NX pipelines of 100, dedup only', 'idem_many_only', 'redis_pipe_only', undef);
ratio_line('idem_cas_row / hand-written UPDATE ... WHERE status', 'cas', 'cas_sql', undef);
foreach my $s (qw(idem idem_many))
{
	my @all = map { [ errors($s, $_) ] } qw(none paired redis pg);
	my ($t, $l, $b) = (0, 0, 0);
	foreach (@all) { $t += $_->[0] // 0; $l += $_->[1] // 0; $b += $_->[2] // 0; }
	printf "- %s: %d applied twice, %d lost, %d inconsistent balances over every run, paired and fault runs included (bar: 0: %s)\n",
		$label{$s}, $t, $l, $b, ($t || $l || $b) ? 'MISSED' : 'met';
}

# the plot: throughput against consumers
my $dat = "$tsv.dat";
open(my $out, '>', $dat) or die "$dat: $!";
my @plotted = grep { $runs{$_} } @order;
print $out join("\t", 'consumers', @plotted) . "\n";
foreach my $c (@cons)
{
	print $out join("\t", $c, map { fmt_int(metric($_, $c, 'none', 'evps')) } @plotted) . "\n";
}
close $out;
open(my $gp, '|-', 'gnuplot') or die "gnuplot: $!";
print $gp qq{set terminal png size 1280,640 font ",10" noenhanced
set output "$png"
set title "Deliveries per second against consumers (30% duplicates)"
set xlabel "concurrent consumers"
set ylabel "deliveries per second (log scale)"
set logscale y
set logscale x 2
set xrange [0.8:20]
set xtics (} . join(', ', map { "\"$_\" $_" } @cons) . qq{)
set key outside right
set grid
plot } . join(",\\\n     ", map {
		my $i = $_ + 2;
		qq{"$dat" using 1:$i with linespoints lw 2 title "$label{$plotted[$_]}"}
	} 0 .. $#plotted) . "\n";
close $gp or die "gnuplot failed";
