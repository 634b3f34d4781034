# Beside Citus, pg_cron and pg_stat_statements, all preloaded: creating the
# extensions in either order and then claiming, batch-claiming and moving a
# state machine must work in the same session, and in a fresh one.
# PostgreSQL gives each backend 10 relcache invalidation callback slots
# (MAX_RELCACHE_CALLBACKS); Citus takes 5 of them, so an extension that
# takes too many kills the session with "FATAL: out of
# relcache_callback_list slots".  The claims table's btree indexes are
# checked with amcheck at the end.
#
# test/run's tap suite builds Citus from ../shared/vendor when it is missing
# (scripts/citus.sh); without it this test is skipped, loudly.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('coexistence');
my $libdir = $node->config_data('--pkglibdir');
my @missing = grep { !-f "$libdir/$_.so" } qw(citus pg_cron pg_stat_statements amcheck);
if (grep { $_ eq 'citus' } @missing)
{
	diag("SKIPPED: citus is not installed in $libdir; "
		  . "test/run tap builds it with scripts/citus.sh");
	plan skip_all => "SKIPPED: citus is not installed ($libdir/citus.so is missing); "
	  . 'run test/run tap, which builds it from ../shared/vendor';
}
if (@missing)
{
	diag("SKIPPED: not installed in $libdir: @missing");
	plan skip_all => "SKIPPED: not installed in $libdir: @missing "
	  . '(postgresql-15-cron, postgresql-contrib)';
}

$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'citus,pg_cron,pg_stat_statements,idempotency'
cron.database_name = 'postgres'
max_connections = 40
max_worker_processes = 16
}
. $IdemCheck::WORKER_LIVE);
$node->start;

my $slots_msg = qr/out of relcache_callback_list slots/;

# run a script in one psql session; return rc, the "label|value" rows as a
# hash, and stderr
sub session
{
	my ($db, $sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql($db, $sql, stdout => \$out, stderr => \$err,
		on_error_stop => 1);
	my %row;
	for my $line (split /\n/, $out)
	{
		my ($k, $v) = split /\|/, $line, 2;
		$row{$k} = $v // '' if defined $k && $k ne '';
	}
	return ($rc, \%row, $err);
}

# the checks shared by both orders, run after the extensions are created
my $claims_sql = q{
SELECT 'claim_first', idem_claim('e-1', 'coexist');
SELECT 'claim_again', idem_claim('e-1', 'coexist');
SELECT 'claimed', idem_claimed('e-1', 'coexist');
SELECT 'release', idem_release('e-1', 'coexist');
SELECT 'claimed_after_release', idem_claimed('e-1', 'coexist');
SELECT 'many_first', coalesce(string_agg(x, ',' ORDER BY x), '')
  FROM idem_claim_many(ARRAY['e-1', 'e-2', 'e-3', 'e-2'], 'coexist') x;
SELECT 'many_again', coalesce(string_agg(x, ',' ORDER BY x), '')
  FROM idem_claim_many(ARRAY['e-1', 'e-2', 'e-3', 'e-4'], 'coexist') x;
SELECT 'define', idem_machine_define('m', '{"A":["B"],"B":[]}');
SELECT 'cas', idem_cas_status('m', 'A', 'B');
SELECT 'cas_rejected', idem_cas_status('m', 'B', 'A');
};

sub check_session
{
	my ($what, $rc, $row, $err) = @_;
	is($row->{claim_first}, 't', "$what: the first idem_claim is true");
	is($row->{claim_again}, 'f', "$what: the second idem_claim is false");
	is($row->{claimed}, 't', "$what: idem_claimed is true");
	is($row->{release}, 't', "$what: idem_release releases it");
	is($row->{claimed_after_release}, 'f', "$what: and idem_claimed is false after it");
	is($row->{many_first}, 'e-1,e-2,e-3', "$what: idem_claim_many claims the new ids");
	is($row->{many_again}, 'e-4', "$what: and only the new ids the second time");
	is($row->{define}, '', "$what: idem_machine_define");
	is($row->{cas}, 'applied', "$what: idem_cas_status('m', 'A', 'B') is applied");
	is($row->{cas_rejected}, 'rejected', "$what: idem_cas_status('m', 'B', 'A') is rejected");
	is($row->{pid_end}, $row->{pid_start},
		"$what: the session is still alive at the end, in the same backend")
	  if defined $row->{pid_start};
	is($rc, 0, "$what: psql exits 0");
	unlike($err, qr/FATAL|server closed the connection/, "$what: the session did not die");
	unlike($err, $slots_msg, "$what: no 'out of relcache_callback_list slots'");
	diag("$what: psql stderr:\n$err") if $rc != 0 || $err =~ /FATAL|ERROR/;
}

# --- citus first, then pg_cron, pg_stat_statements, idempotency ----------
my ($rc, $row, $err) = session('postgres', qq{
SELECT 'pid_start', pg_backend_pid();
CREATE EXTENSION citus;
CREATE EXTENSION pg_cron;
CREATE EXTENSION pg_stat_statements;
CREATE EXTENSION idempotency;
SELECT 'created', string_agg(extname, ',' ORDER BY extname) FROM pg_extension
 WHERE extname IN ('citus', 'pg_cron', 'pg_stat_statements', 'idempotency');
$claims_sql
SELECT 'pid_end', pg_backend_pid();
});
is($row->{created}, 'citus,idempotency,pg_cron,pg_stat_statements',
	'citus first: all four extensions are created in one session');
check_session('citus first', $rc, $row, $err);

# --- idempotency first, then citus, in a second database ------------------
$node->safe_psql('postgres', 'CREATE DATABASE reversed');
($rc, $row, $err) = session('reversed', qq{
SELECT 'pid_start', pg_backend_pid();
CREATE EXTENSION idempotency;
CREATE EXTENSION citus;
CREATE EXTENSION pg_stat_statements;
SELECT 'created', string_agg(extname, ',' ORDER BY extname) FROM pg_extension
 WHERE extname IN ('citus', 'pg_stat_statements', 'idempotency');
$claims_sql
SELECT 'pid_end', pg_backend_pid();
});
is($row->{created}, 'citus,idempotency,pg_stat_statements',
	'idempotency first: the extensions are created in one session');
check_session('idempotency first', $rc, $row, $err);

# --- fresh backends, after both databases have every extension -----------
for my $db (qw(postgres reversed))
{
	($rc, $row, $err) = session($db, q{
SELECT 'claim_first', idem_claim('fresh-1', 'coexist');
SELECT 'claim_again', idem_claim('fresh-1', 'coexist');
SELECT 'citus', citus_version() IS NOT NULL;
SELECT 'statements', count(*) > 0 FROM pg_stat_statements;
SELECT 'alive', 1;
});
	is($row->{claim_first}, 't', "fresh backend in $db: the first idem_claim is true");
	is($row->{claim_again}, 'f', "fresh backend in $db: the second idem_claim is false");
	is($row->{citus}, 't', "fresh backend in $db: citus answers");
	is($row->{statements}, 't', "fresh backend in $db: pg_stat_statements answers");
	is($row->{alive}, '1', "fresh backend in $db: the session is alive at the end");
	is($rc, 0, "fresh backend in $db: psql exits 0");
	unlike($err, $slots_msg, "fresh backend in $db: no 'out of relcache_callback_list slots'");
	diag("fresh backend in $db: psql stderr:\n$err") if $rc != 0 || $err =~ /FATAL|ERROR/;
}

# --- a columnar table: the row CAS refuses what it cannot update ---------
($rc, $row, $err) = session('postgres', q{
CREATE EXTENSION IF NOT EXISTS citus_columnar;
SELECT idem_machine_define('coexist_order', '{"NEW": ["PAID"]}');
CREATE TABLE columnar_orders (id int PRIMARY KEY, status text NOT NULL);
INSERT INTO columnar_orders VALUES (1, 'NEW');
SELECT idem_machine_bind('columnar_orders', 'status', 'coexist_order');
SELECT 'bound', count(*) FROM idempotency.machine_bindings WHERE rel = 'columnar_orders'::regclass;
ALTER TABLE columnar_orders SET ACCESS METHOD columnar;
SELECT 'am', amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.oid = 'columnar_orders'::regclass;
SELECT 'cas', idem_cas_row('columnar_orders'::regclass, 1, 'PAID');
});
is($row->{bound}, '1', 'columnar: a heap table is bound');
is($row->{am}, 'columnar', 'columnar: the bound table is converted to columnar')
  or diag("columnar: psql stderr:\n$err");
isnt($rc, 0, 'columnar: the CAS fails');
like($err, qr/ERROR:  idem_cas_row\(\) supports only heap tables\nDETAIL:  Table "columnar_orders" uses access method "columnar"/,
	'columnar: idem_cas_row() on a columnar table is a clear error naming the access method');
unlike($err, qr/XX000|internal error|server closed/i, 'columnar: no internal error, no crash');
($rc, $row, $err) = session('postgres', q{
SELECT 'checker', idem_cas_status('coexist_order', 'NEW', 'PAID');
SELECT 'status', status FROM columnar_orders;
});
is($row->{checker}, 'applied', 'columnar: the checker still answers for its machine');
is($row->{status}, 'NEW', 'columnar: the row is unchanged');

# --- amcheck: every btree index of the claims table, heapallindexed -------
for my $db (qw(postgres reversed))
{
	($rc, $row, $err) = session($db, q{
CREATE EXTENSION IF NOT EXISTS amcheck;
SELECT 'claims', count(*) FROM idempotency.claims;
SELECT 'indexes', count(*), string_agg(relname, ',' ORDER BY relname) FROM (
  SELECT c.relname, bt_index_parent_check(c.oid, true)
    FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid
    JOIN pg_am a ON a.oid = c.relam
   WHERE i.indrelid = 'idempotency.claims'::regclass AND a.amname = 'btree'
   ORDER BY c.relname) checked;
});
	is($rc, 0, "amcheck in $db: bt_index_parent_check(heapallindexed) reports no error")
	  or diag("amcheck in $db: psql stderr:\n$err");
	cmp_ok(($row->{claims} // 0), '>', 0, "amcheck in $db: the claims table has rows to check");
	my ($n, $names) = split /\|/, ($row->{indexes} // '0|'), 2;
	cmp_ok($n, '>=', 1, "amcheck in $db: checked $n btree index(es) of idempotency.claims: "
		  . ($names // ''));
}

my @slots_lines = grep { $_ =~ $slots_msg } split /\n/, slurp_file($node->logfile);
is(scalar(@slots_lines), 0, "the server log has no 'out of relcache_callback_list slots'")
  or diag("server log:\n" . join("\n", @slots_lines));

$node->stop;
done_testing();
