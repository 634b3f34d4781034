# Per-namespace privileges (1.1) on whole clusters:
#  - the grants replicate to a hot standby, where idem_claimed and the
#    idem_claims rows honour them, and a revoke on the primary reaches a
#    standby session inside its open transaction at its next statement;
#  - pg_dump and pg_restore (plain and custom) carry them into another
#    cluster whose roles have other OIDs: grantees are restored by name,
#    and a restored restricted namespace stays restricted.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;

my $roles = q{
CREATE ROLE tenant_a LOGIN;
CREATE ROLE tenant_b LOGIN;
CREATE ROLE tenant_c LOGIN;
};

my $primary = PostgreSQL::Test::Cluster->new('nsg_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'\n$IdemCheck::WORKER_LIVE");
$primary->start;
$primary->safe_psql('postgres', $roles . q{
CREATE EXTENSION idempotency;
GRANT INSERT, SELECT, DELETE ON idempotency.claims TO tenant_a, tenant_b, tenant_c;
SELECT idem_namespace_define('pay', '7 days');
SELECT idem_namespace_grant('pay', 'tenant_a', 'claim');
SELECT idem_namespace_grant('pay', 'tenant_a', 'check');
SELECT idem_namespace_grant('pay', 'tenant_b', 'check');
SELECT idem_namespace_grant('pay', 'tenant_b', 'release');
});
$primary->safe_psql('postgres',
	q{SET ROLE tenant_a; SELECT count(*) FROM generate_series(1, 100) i WHERE idem_claim('a-' || i, 'pay')});
$primary->safe_psql('postgres',
	q{SET ROLE tenant_c; SELECT idem_claim('c-1', 'open')});

# What each role may do in 'pay', as one line: claim, check, rows of idem_claims
sub abilities
{
	my ($node, $db, $role, $id) = @_;
	my @out;
	my ($rc, $stdout, $stderr) = $node->psql($db, "SET ROLE $role; SELECT idem_claim('$id', 'pay')");
	push @out, $stderr =~ /permission denied for namespace "pay"/ ? 'claim:denied' : "claim:$stdout";
	($rc, $stdout, $stderr) = $node->psql($db, "SET ROLE $role; SELECT idem_claimed('a-1', 'pay')");
	push @out, $stderr =~ /permission denied for namespace "pay"/ ? 'check:denied' : "check:$stdout";
	push @out, 'rows:' . $node->safe_psql($db,
		"SET ROLE $role; SELECT count(*) FROM idem_claims WHERE namespace = 'pay'");
	return join(' ', @out);
}

is(abilities($primary, 'postgres', 'tenant_a', 'a-new'), 'claim:t check:t rows:101',
	'primary: the grantee of claim and check');
is(abilities($primary, 'postgres', 'tenant_b', 'b-new'), 'claim:denied check:t rows:101',
	'primary: a grantee of check only');
is(abilities($primary, 'postgres', 'tenant_c', 'c-new'), 'claim:denied check:denied rows:0',
	'primary: a role with table privileges but no grant');

# one simple-query message of several statements: a revoke committed during
# its second statement reaches its third
my $multi = $primary->background_psql('postgres', on_error_stop => 0);
$multi->query_safe(q{SET ROLE tenant_a});
$multi->query_until(qr/sent/, q{\echo sent
SELECT idem_claim('m-1', 'pay') \; SELECT pg_sleep(5) \; SELECT idem_claim('m-2', 'pay');
});
ok($primary->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE query LIKE 'SELECT idem_claim(''m-1''%' AND wait_event = 'PgSleep'}),
	'the three-statement message is in its pg_sleep');
$primary->safe_psql('postgres', q{SELECT idem_namespace_revoke('pay', 'tenant_a', 'claim')});
$multi->query(q{SELECT 'done'});
like($multi->{stderr}, qr/permission denied for namespace "pay"/,
	'the revoke reaches the next statement of the same message');
$multi->quit;
is($primary->safe_psql('postgres', q{SELECT idem_claimed('m-1', 'pay')::text || idem_claimed('m-2', 'pay')::text}),
	'falsefalse', 'and the message, one implicit transaction, claimed nothing');
$primary->safe_psql('postgres', q{SELECT idem_namespace_grant('pay', 'tenant_a', 'claim')});

# --- standby ----------------------------------------------------------------
$primary->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('nsg_standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);

my $check = "SELECT idem_claimed('a-1', 'pay')";
is($standby->safe_psql('postgres', "SET ROLE tenant_b; $check"), 't',
	'standby: a grantee of check checks');
my ($rc, $out, $err) = $standby->psql('postgres', "SET ROLE tenant_c; $check");
like($err, qr/permission denied for namespace "pay"/, 'standby: a non-grantee is refused');
is($standby->safe_psql('postgres', "SET ROLE tenant_c; SELECT count(*) FROM idem_claims WHERE namespace = 'pay'"),
	'0', 'standby: idem_claims hides the restricted rows');
is($standby->safe_psql('postgres', q{SELECT string_agg(grantee::text || ':' || privilege, ',' ORDER BY grantee::text COLLATE "C", privilege)
	FROM idem_namespace_privileges WHERE namespace = 'pay'}),
	'tenant_a:check,tenant_a:claim,tenant_b:check,tenant_b:release', 'standby: the grants replicated');

# a standby session in an open transaction sees the revoke at its next statement
my $bg = $standby->background_psql('postgres', on_error_stop => 0);
$bg->query_safe(q{BEGIN ISOLATION LEVEL REPEATABLE READ});
$bg->query_safe(q{SET LOCAL ROLE tenant_b});
is($bg->query_safe($check), 't', 'standby: checked inside an open transaction');
$primary->safe_psql('postgres', q{SELECT idem_namespace_revoke('pay', 'tenant_b', 'check')});
$primary->wait_for_catchup($standby);
$bg->query($check);
like($bg->{stderr}, qr/permission denied for namespace "pay"/,
	'standby: the revoke replayed reaches the open transaction at its next statement');
$bg->quit;
$primary->safe_psql('postgres', q{SELECT idem_namespace_grant('pay', 'tenant_b', 'check')});

# --- dump and restore into another cluster ----------------------------------
my $other = PostgreSQL::Test::Cluster->new('nsg_other');
$other->init;
$other->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'\n$IdemCheck::WORKER_LIVE");
$other->start;
# other OIDs for the same names: roles created in another order, after others
$other->safe_psql('postgres', q{
CREATE ROLE filler_1; CREATE ROLE filler_2; CREATE ROLE filler_3;
CREATE ROLE tenant_c LOGIN;
CREATE ROLE tenant_b LOGIN;
CREATE ROLE tenant_a LOGIN;
});
isnt($other->safe_psql('postgres', q{SELECT 'tenant_a'::regrole::oid}),
	$primary->safe_psql('postgres', q{SELECT 'tenant_a'::regrole::oid}),
	'the other cluster gives the roles other OIDs');

my $grants = q{SELECT string_agg(g.namespace || ':' || g.grantee::text || ':' || g.privilege, ','
	ORDER BY g.namespace, g.grantee::text COLLATE "C", g.privilege)
	FROM idempotency.namespace_grants g};
my $want = $primary->safe_psql('postgres', $grants);
my $dir = PostgreSQL::Test::Utils::tempdir;
foreach my $format ('plain', 'custom')
{
	my $db = "restored_$format";
	dump_and_restore($primary, 'postgres', $other, $db, $format, $dir);
	is($other->safe_psql($db, $grants), $want, "$format: every grant is restored, by role name");
	is(abilities($other, $db, 'tenant_a', 'a-1'), 'claim:f check:t rows:101',
		"$format: the grantee's claims are restored, a redelivery is a duplicate");
	is(abilities($other, $db, 'tenant_b', 'b-new'), 'claim:denied check:t rows:101',
		"$format: a grantee of check only");
	is(abilities($other, $db, 'tenant_c', 'c-new'), 'claim:denied check:denied rows:0',
		"$format: the namespace stays restricted for the others");
	is($other->safe_psql($db, q{SET ROLE tenant_c; SELECT idem_claim('c-1', 'open')}), 'f',
		"$format: an unrestricted namespace is as before");
}
done_testing();
