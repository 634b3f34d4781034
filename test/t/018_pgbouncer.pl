# Exactly-once behind pgbouncer (Debian's pgbouncer), as docs/poolers.md's
# "Behind a connection pooler" section describes:
#  - transaction pooling, 12 clients on a pool of 3 server connections, a
#    redelivery load (every event delivered about 3 times) of claim and
#    business write in one transaction, with the extended protocol;
#  - statement pooling, where only single statements are allowed, with the
#    single-statement form (a CTE that claims and writes);
#  - a multi-statement transaction refused in statement mode, which is why
#    that form exists.
# Each ends with the ledger: 0 applied twice, 0 claimed and not applied;
# then amcheck, and the server connections pgbouncer used.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;

my $pgbouncer = -x '/usr/sbin/pgbouncer' ? '/usr/sbin/pgbouncer' : undef;
if (!defined $pgbouncer)
{
	diag('SKIPPED: pgbouncer is not installed; test/run tap installs it');
	plan skip_all => 'SKIPPED: pgbouncer is not installed (Debian pgbouncer)';
}

my $node = PostgreSQL::Test::Cluster->new('pooled');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.purge_enabled = off
max_connections = 40
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION idempotency;
CREATE EXTENSION amcheck;
CREATE TABLE pooled_effects (event_id int NOT NULL);        -- no unique key: a double shows
CREATE TABLE pooled_effects_stmt (event_id int NOT NULL);
});

# pgbouncer on a socket of its own, in front of the node
my $user = scalar getpwuid($<);
my $dir = PostgreSQL::Test::Utils::tempdir;
my $bport = PostgreSQL::Test::Cluster::get_free_port();
my $nhost = $node->host;
my $nport = $node->port;
open(my $fh, '>', "$dir/pgbouncer.ini") or die $!;
print $fh <<"INI";
[databases]
txn = host=$nhost port=$nport dbname=postgres user=$user pool_size=3 pool_mode=transaction
stmt = host=$nhost port=$nport dbname=postgres user=$user pool_size=3 pool_mode=statement

[pgbouncer]
listen_addr =
listen_port = $bport
unix_socket_dir = $dir
auth_type = any
admin_users = $user
max_client_conn = 100
default_pool_size = 3
server_reset_query =
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
close $fh;
system($pgbouncer, '-d', "$dir/pgbouncer.ini") == 0 or BAIL_OUT('pgbouncer did not start');
END
{
	local $?;    # the test's exit status is not kill's
	if (defined $dir && open(my $pf, '<', "$dir/pgbouncer.pid"))
	{
		my $pid = <$pf>;
		kill 'TERM', $1 if defined $pid && $pid =~ /(\d+)/;
	}
}
my $up = 0;
foreach (1 .. 50)
{
	last if ($up = -S "$dir/.s.PGSQL.$bport");
	select(undef, undef, undef, 0.1);
}
ok($up, 'pgbouncer listens');

# psql through pgbouncer: one -c, a query message, per statement
sub through
{
	my ($db, @sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'psql', '-X', '-A', '-t', '-h', $dir, '-p', $bport, '-d', $db, map { ('-c', $_) } @sql ],
		'>', \$out, '2>', \$err, IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	chomp $out;
	return wantarray ? ($out, $err) : $out;
}

sub pgbench
{
	my ($db, $script, $mode, $clients) = @_;
	open(my $sf, '>', "$dir/$db.pgbench") or die $!;
	print $sf $script;
	close $sf;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[ 'pgbench', '-n', '-h', $dir, '-p', $bport, '-c', $clients, '-j', 2,
		  '-t', 750, '-M', $mode, '-f', "$dir/$db.pgbench", $db ],
		'>', \$out, '2>', \$err, IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	ok($ok, "pgbench through pgbouncer ($db, -M $mode) succeeds") or diag("$out\n$err");
	my ($n) = $out =~ /number of transactions actually processed: (\d+)/;
	return $n // 0;
}

sub ledger
{
	my ($table, $ns, $label) = @_;
	my $row = $node->safe_psql('postgres', qq{
		SELECT count(*) - count(DISTINCT event_id),
		       (SELECT count(*) FROM idem_claims WHERE namespace = '$ns') - count(DISTINCT event_id),
		       count(*)
		  FROM $table});
	my ($twice, $lost, $applied) = split /\|/, $row;
	is($twice, 0, "$label: 0 applied twice");
	is($lost, 0, "$label: 0 claimed and not applied");
	cmp_ok($applied, '>', 500, "$label: the load applied events ($applied)");
	return $applied;
}

# --- transaction pooling: 12 clients, 3 server connections ----------------
my $n = pgbench('txn', <<'SQL', 'extended', 12);
\set e random(1, 3000)
BEGIN;
SELECT idem_claim('tx-' || :e, 'pooled') AS first \gset
\if :first
INSERT INTO pooled_effects (event_id) VALUES (:e);
\endif
COMMIT;
SQL
is($n, 9000, 'transaction pooling: every transaction ran');
my $applied = ledger('pooled_effects', 'pooled', 'transaction pooling');
cmp_ok($applied, '<', $n, 'transaction pooling: redeliveries were refused');
my $servers = through('pgbouncer', 'SHOW SERVERS');
my $nservers = () = $servers =~ /\|txn\|/g;
cmp_ok($nservers, '>=', 1, "transaction pooling: pgbouncer lists its server connections ($nservers)");
cmp_ok($nservers, '<=', 3, "transaction pooling: at most 3 server connections for 12 clients");

# --- statement pooling: the single-statement form ---------------------------
$n = pgbench('stmt', <<'SQL', 'extended', 12);
\set e random(1, 3000)
WITH c AS (SELECT idem_claim('st-' || :e, 'pooled_stmt') AS first)
INSERT INTO pooled_effects_stmt (event_id) SELECT :e FROM c WHERE c.first;
SQL
is($n, 9000, 'statement pooling: every statement ran');
ledger('pooled_effects_stmt', 'pooled_stmt', 'statement pooling');

# --- and why: statement mode refuses a transaction block --------------------
my ($out, $err) = through('stmt', 'BEGIN', "SELECT idem_claim('st-block', 'pooled_stmt')", 'COMMIT');
like($err, qr/transaction blocks not allowed in statement pooling mode/,
	'statement pooling refuses BEGIN ... COMMIT');
is($node->safe_psql('postgres', "SELECT idem_claimed('st-block', 'pooled_stmt')"), 'f',
	'and the refused block claimed nothing');

amcheck_claims($node, 'postgres', 'behind pgbouncer');
done_testing();
