# pg_dump and pg_restore keep every claim: a restored database that forgot
# its claims would process every event again.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemCheck;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'\n$IdemCheck::WORKER_LIVE");
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
CREATE EXTENSION idempotency;
SELECT idem_namespace_define('payments', '90 days');
SELECT idem_namespace_define('short', '1 hour');
-- every kind of id the encoding distinguishes, with and without fingerprints
SELECT idem_claim(gen_random_uuid()::text, 'payments') FROM generate_series(1, 500);
SELECT idem_claim('order-' || g, 'payments', 'sha256:' || md5(g::text)) FROM generate_series(1, 500) g;
SELECT idem_claim('exactly-16-bytes', 'payments');
SELECT idem_claim('6F1C2A9E-5B7D-4C3E-9A8B-1D2E3F4A5B6C', 'payments');
SELECT idem_claim('日本語のイベント', 'payments');
SELECT idem_claim(repeat('k', 1024), 'payments');
SELECT idem_claim('first-use', 'implicit');
-- an expired claim, taken over after the restore (the worker, live every
-- second, may purge it first on either side: the comparisons are of live claims)
SELECT idem_claim('stale', 'short');
UPDATE idempotency.claims SET claimed_at = claimed_at - interval '2 hours'
 WHERE idempotency.idem_key_text(key) = 'stale';
-- released claims are gone, and stay gone
SELECT idem_claim('released', 'payments');
SELECT idem_release('released', 'payments');
CREATE TABLE inbox (id text, body text);
CREATE TRIGGER inbox_dedup BEFORE INSERT ON inbox
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('id', 'inbox');
INSERT INTO inbox VALUES ('i-1', 'one'), ('i-2', 'two');
-- API requests: a stored result, a stored failure, a live lease; a token
SELECT idem_complete('req-done', owner, '{"charge": "ch_1"}', 'api')
  FROM idem_begin('req-done', 'api', 'fp-1');
SELECT idem_fail('req-failed', owner, '{"code": "declined"}', false, 'api')
  FROM idem_begin('req-failed', 'api');
CREATE TABLE lease_owner AS SELECT owner FROM idem_begin('req-live', 'api', lease => '1 hour');
CREATE TABLE live_token AS SELECT idem_token_issue('checkout', '1 hour') AS token;
});

my $claims_sql = q{
SELECT namespace, event_id, claimed_at, expires_at, expired, fingerprint_hash
  FROM idem_claims WHERE NOT expired ORDER BY namespace, event_id};
my $ns_sql = 'SELECT id, name, ttl, created_at FROM idempotency.namespaces ORDER BY id';
my $req_sql = q{
SELECT namespace, key, status, attempts, fingerprint, result, lease_expires_at, created_at
  FROM idem_requests ORDER BY namespace, key};
my $src_requests = $node->safe_psql('src', $req_sql);
my $src_claims = $node->safe_psql('src', $claims_sql);
my $src_ns = $node->safe_psql('src', $ns_sql);
is($node->safe_psql('src', 'SELECT count(*) FROM idem_claims WHERE NOT expired'), '1007',
	'source holds the claims');

my $tempdir = PostgreSQL::Test::Utils::tempdir();
foreach my $format ('custom', 'plain')
{
	my $db = "dst_$format";
	my $file = "$tempdir/src.$format";
	$node->command_ok(
		[ 'pg_dump', '-F', substr($format, 0, 1), '-f', $file, '-d', $node->connstr('src') ],
		"pg_dump --format=$format");
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	if ($format eq 'custom')
	{
		$node->command_ok(
			[ 'pg_restore', '--exit-on-error', '-d', $node->connstr($db), $file ],
			'pg_restore');
	}
	else
	{
		$node->command_ok(
			[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', $file, '-d', $node->connstr($db) ],
			'psql restores the plain dump');
	}

	is($node->safe_psql($db, $claims_sql), $src_claims,
		"$format: every claim is restored, with its time, expiry and fingerprint");
	is($node->safe_psql($db, $ns_sql), $src_ns,
		"$format: namespaces keep their ids and TTLs");

	# the restored claims are live: redeliveries are duplicates
	is($node->safe_psql($db, q{
		SELECT count(*) FILTER (WHERE idem_claim(event_id, namespace))
		  FROM idem_claims WHERE NOT expired}), '0',
		"$format: redelivering any restored event claims nothing");
	is($node->safe_psql($db, q{SELECT idem_claim('stale', 'short')}), 't',
		"$format: an expired claim can still be taken over");
	is($node->safe_psql($db, q{SELECT idem_claim('released', 'payments')}), 't',
		"$format: a released claim stays released");
	my ($rc, $out, $err) = $node->psql($db,
		q{SELECT idem_claim('order-7', 'payments', 'sha256:tampered')});
	like($err, qr/event id reused with a different fingerprint/,
		"$format: fingerprints survive the restore");
	is($node->safe_psql($db, q{
		INSERT INTO inbox VALUES ('i-1', 'again'), ('i-3', 'three');
		SELECT string_agg(id, ',' ORDER BY id) FROM inbox}), 'i-1,i-2,i-3',
		"$format: the restored inbox trigger still skips duplicates");
	# stored results are replayed, live leases still held, tokens still good
	is($node->safe_psql($db, $req_sql), $src_requests,
		"$format: every request record is restored");
	is($node->safe_psql($db, q{
		SELECT string_agg(status || ' ' || coalesce(result::text, '-'), ', ' ORDER BY k)
		  FROM unnest(ARRAY['req-done', 'req-failed', 'req-live']) k,
		       LATERAL idem_begin(k, 'api')}),
		'completed {"charge": "ch_1"}, failed {"code": "declined"}, in_progress -',
		"$format: results replay, failures replay, a live lease is still held");
	is($node->safe_psql($db, q{
		SELECT idem_complete('req-live', owner, '{"late": 1}', 'api') FROM lease_owner;
		SELECT status FROM idem_begin('req-live', 'api')}), "\ncompleted",
		"$format: the lease owner can finish after the restore");
	is($node->safe_psql($db, q{
		SELECT idem_token_consume(token, 'checkout'), idem_token_consume(token, 'checkout')
		  FROM live_token}), 't|f',
		"$format: an issued token is consumable once after the restore");
	# the namespace id sequence continues past the restored ids
	is($node->safe_psql($db, q{
		SELECT idem_claim('x', 'brand-new');
		SELECT (SELECT id FROM idempotency.namespaces WHERE name = 'brand-new')
		     > (SELECT max(id) FROM idempotency.namespaces WHERE name <> 'brand-new')}), "t\nt",
		"$format: new namespaces get fresh ids");
}

amcheck_claims($node, $_, "database $_ at the end") for ('src', 'dst_custom', 'dst_plain');
$node->stop;
done_testing();
