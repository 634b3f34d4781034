# monitoring/prometheus-queries.yaml with Debian's prometheus-postgres-exporter:
# the exporter, started on loopback as a monitoring role given the grants
# the file names, is scraped once, and the idempotency metrics are there
# with the values idem_stats, idem_purge_runs and idem_generations hold.
use strict;
use warnings;

use HTTP::Tiny;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $exporter = '/usr/bin/prometheus-postgres-exporter';
if (!-x $exporter)
{
	diag('SKIPPED: prometheus-postgres-exporter is not installed; test/run tap installs it');
	plan skip_all => 'SKIPPED: prometheus-postgres-exporter is not installed';
}
my $queries = "$ENV{IDEMPOTENCY_ROOT}/monitoring/prometheus-queries.yaml";
my ($grants) = slurp_file($queries) =~ /^#\s+(GRANT SELECT ON .*?);/m;
ok(defined $grants, 'the queries file names the grants its role needs');

my $node = PostgreSQL::Test::Cluster->new('metrics');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.purge_enabled = off
});
$node->start;
(my $grant = $grants // '') =~ s/<exporter role>/prometheus/;
$node->safe_psql('postgres', qq{
CREATE EXTENSION idempotency;
CREATE ROLE prometheus LOGIN;
GRANT pg_monitor TO prometheus;
$grant;
SELECT idem_namespace_define('short', '1 second');
SELECT count(*) FILTER (WHERE idem_claim('m-' || g, 'metrics')) FROM generate_series(1, 30) g;
SELECT count(*) FILTER (WHERE idem_claim('m-' || g, 'metrics')) FROM generate_series(1, 12) g;
SELECT count(*) FROM (SELECT idem_claim('old-' || g, 'short') FROM generate_series(1, 7) g) s;
UPDATE idempotency.claims SET claimed_at = claimed_at - interval '1 minute'
 WHERE ns = (SELECT id FROM idem_namespaces WHERE name = 'short');
SELECT idem_generation_switch();
SELECT idem_purge();
});

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $dir = PostgreSQL::Test::Utils::tempdir;
my $log = "$dir/exporter.log";
my $dsn = sprintf('host=%s port=%d user=prometheus dbname=postgres sslmode=disable', $node->host, $node->port);
my $h = IPC::Run::start(
	[ $exporter, "--web.listen-address=127.0.0.1:$port", "--extend.query-path=$queries",
	  '--disable-default-metrics', '--disable-settings-metrics' ],
	'>', $log, '2>&1', init => sub { $ENV{DATA_SOURCE_NAME} = $dsn });

my $body = '';
foreach (1 .. 100)
{
	my $res = HTTP::Tiny->new(timeout => 5)->get("http://127.0.0.1:$port/metrics");
	if ($res->{success} && $res->{content} =~ /idempotency_/)
	{
		$body = $res->{content};
		last;
	}
	select(undef, undef, undef, 0.2);
}
$h->kill_kill;
ok($body ne '', 'the exporter answered a scrape with idempotency metrics')
  or diag(slurp_file($log));

like($body, qr/^idempotency_claims_claims\{[^}]*namespace="metrics"[^}]*\} 30$/m, 'claims per namespace');
like($body, qr/^idempotency_claims_duplicates\{[^}]*namespace="metrics"[^}]*\} 12$/m, 'duplicates per namespace');
like($body, qr/^idempotency_claims_purged\{[^}]*namespace="short"[^}]*\} 7$/m, 'purged per namespace');
like($body, qr/^idempotency_purge_last_rows_deleted\{[^}]*target="idempotency\.claims"[^}]*\} 7$/m,
	'the latest purge run of the claims');
like($body, qr/^idempotency_purge_last_by_worker\{[^}]*target="idempotency\.claims"[^}]*\} 0$/m,
	'which was not a worker round (idem_purge)');
like($body, qr/^idempotency_purge_last_failed\{[^}]*target="idempotency\.claims"[^}]*\} 0$/m, 'which did not fail');
like($body, qr/^idempotency_purge_history_runs(\{[^}]*\})? [1-9]/m, 'the kept history');
like($body, qr/^idempotency_generations_generations\{[^}]*state="open"[^}]*\} [1-9]/m, 'the open generations');
unlike($body, qr/pg_exporter_user_queries_load_error\{[^}]*\} 1/, 'every query of the file loaded');
unlike(slurp_file($log), qr/level=error/, 'the exporter logged no error');
done_testing();
