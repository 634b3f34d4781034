# docs/pg_cron.md's "Scheduling with pg_cron" recipe, with Debian's
# postgresql-15-cron: the worker off, CALL idem_purge_run() scheduled in
# the cron database and, with cron.schedule_in_database, in another one
# (the guide's schedule made every minute, pg_cron 1.4's shortest).  Both
# jobs succeed, purge every expired claim and keep every live one, and show
# in idem_purge_runs as procedure runs by pg_cron.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;

my $libdir = `pg_config --pkglibdir`;
chomp $libdir;
if (!-f "$libdir/pg_cron.so")
{
	diag('SKIPPED: pg_cron is not installed; test/run tap installs postgresql-15-cron');
	plan skip_all => 'SKIPPED: pg_cron is not installed (postgresql-15-cron)';
}

my $guide = slurp_file("$ENV{IDEMPOTENCY_ROOT}/docs/pg_cron.md");
my ($section) = $guide =~ /\A# Scheduling with pg_cron\n(.*)\z/ms;
my ($recipe) = ($section // '') =~ /<!-- cron-test -->\n```sql\n(.*?)```/s;
ok(defined $recipe, 'docs/pg_cron.md has the pg_cron recipe');
$recipe //= '';
like($recipe, qr/CALL idem_purge_run\(\)/, 'the recipe calls idem_purge_run');
(my $every_minute = $recipe) =~ s{'\*/5 \* \* \* \*'}{'* * * * *'}g;

my $node = PostgreSQL::Test::Cluster->new('cron');
$node->init;
$node->append_conf('postgresql.conf', sprintf(q{
shared_preload_libraries = 'pg_cron,idempotency'
cron.database_name = 'postgres'
cron.host = '%s'
idempotency.purge_enabled = off
}, $node->host));
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE app');
create_extension_with_namespaces($node, [ 'postgres', 'app' ],
	{ short => '1 second', long => '1 day' });
$node->safe_psql('postgres', 'CREATE EXTENSION pg_cron');
foreach my $db ('postgres', 'app')
{
	make_expired_claims($node, $db, 3000, 'old-', 'short');
	$node->safe_psql($db, q{
		SELECT count(*) FROM (SELECT idem_claim('live-' || g, 'long') FROM generate_series(1, 500) g) s});
}

$node->safe_psql('postgres', $every_minute);
is($node->safe_psql('postgres', 'SELECT count(*) FROM cron.job WHERE command = $$CALL idem_purge_run()$$'),
	'2', 'two jobs scheduled');

# the jobs start at the next minute boundary
my $done = $node->poll_query_until('postgres', q{
	SELECT count(DISTINCT j.jobid) = 2
	  FROM cron.job j JOIN cron.job_run_details d USING (jobid)
	 WHERE d.status = 'succeeded'}, 't');
ok($done, 'both jobs ran and succeeded')
  or diag($node->safe_psql('postgres', 'SELECT jobid, status, return_message FROM cron.job_run_details'));

foreach my $db ('postgres', 'app')
{
	is( $node->safe_psql($db,
			"SELECT count(*) FROM idempotency.claims WHERE idempotency.idem_key_text(key) LIKE 'old-%'"),
		'0', "$db: every expired claim purged");
	is($node->safe_psql($db, "SELECT count(*) FROM idem_claims WHERE namespace = 'long'"),
		'500', "$db: every live claim kept");
	is( $node->safe_psql($db, q{
			SELECT trigger || ' ' || application_name || ' ' || rows_deleted
			  FROM idem_purge_runs WHERE "table" = 'idempotency.claims'}),
		'procedure pg_cron 3000', "$db: idem_purge_runs shows pg_cron's procedure run");
	amcheck_claims($node, $db, "$db after the cron purge");
}
done_testing();
