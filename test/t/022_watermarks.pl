# Watermarks (1.1) replicate to a hot standby, where they can be read but
# not advanced, and survive pg_dump and pg_restore (plain and custom
# formats) with their marks and epochs, so that fencing holds after a
# restore.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;

my $primary = PostgreSQL::Test::Cluster->new('wm_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'\n$IdemCheck::WORKER_LIVE");
$primary->start;
$primary->safe_psql('postgres', q{
CREATE EXTENSION idempotency;
SELECT idem_advance('orders', p, 100 + p) FROM generate_series(0, 7) p;
});
$primary->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('wm_standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->start;

$primary->safe_psql('postgres', q{
SELECT idem_advance('orders', p, 200 + p) FROM generate_series(0, 7) p;
SELECT idem_advance('fenced', 0, 5, 3);
});
$primary->wait_for_catchup($standby);

my $marks = q{SELECT string_agg(stream || '/' || partition || '=' || mark || ':' || coalesce(epoch::text, '-'),
	',' ORDER BY stream, partition) FROM idem_streams};
my $want = $primary->safe_psql('postgres', $marks);
like($want, qr{orders/7=207}, 'the marks on the primary');
is($standby->safe_psql('postgres', $marks), $want, 'the marks replicate to the standby');
is($standby->safe_psql('postgres', "SELECT idem_watermark('orders', 3), idem_watermark('orders', 99)"),
	'203|', 'idem_watermark works on the standby');
my ($rc, $out, $err) = $standby->psql('postgres', "SELECT idem_advance('orders', 0, 999)",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/25006: cannot execute idem_advance\(\) during recovery/, 'idem_advance is refused on the standby');
($rc, $out, $err) = $standby->psql('postgres', "SELECT idem_stream_drop('orders')");
like($err, qr/read-only transaction|during recovery/, 'idem_stream_drop is refused on the standby');
is($standby->safe_psql('postgres', "SELECT idem_watermark('orders', 0)"), '200', 'and nothing moved');

# --- dump and restore -------------------------------------------------------
my $dir = PostgreSQL::Test::Utils::tempdir;
foreach my $format ('plain', 'custom')
{
	my $db = "restored_$format";
	dump_and_restore($primary, 'postgres', $primary, $db, $format, $dir);
	is($primary->safe_psql($db, $marks), $want, "$format: every mark and epoch is restored");
	is($primary->safe_psql($db, "SELECT idem_advance('orders', 0, 200), idem_advance('orders', 0, 201)"),
		'f|t', "$format: a redelivery is refused after the restore, and the next event advances");
	($rc, $out, $err) = $primary->psql($db, "SELECT idem_advance('fenced', 0, 6, 2)");
	like($err, qr/is fenced/, "$format: fencing holds after the restore");
}
done_testing();
