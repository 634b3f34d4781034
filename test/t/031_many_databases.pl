# No cost cliff past the shared per-database entries, nor without
# preloading: claims of new ids read the generation map
# (idempotency.generations, through SPI) once per change of it, not once
# per claim.  Counted by pg_stat_user_tables (seq_scan + idx_scan of
# idempotency.generations) over 2,000 claims of new ids, each in its own
# transaction, in
#   (a) the 70th of 70 databases of a preloaded server whose shared state
#       has fewer per-database entries than that (max_connections and the
#       worker counts below make MaxBackends 18, and the entries are
#       MaxBackends + 16), so that entries of databases no backend uses
#       are reused; then again in the first database, whose entry was
#       taken by another meanwhile;
#   (b) a server without shared_preload_libraries, with a switch of the
#       generations in the middle (one change of the map: one more read).
# Each phase then runs a redelivery load with switches under it and checks
# that no event was applied twice and none was lost: the catch-up with a
# switch a claimer's map missed works through the shared count of opens in
# (a) and through the invalidation of the map in (b).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $IDS = 2000;
my $DBS = 70;
my $MAX_READS = 20;    # per 2,000 claims; the cliff read the map twice a claim

my $SETUP = q{
CREATE EXTENSION idempotency;
SELECT idem_namespace_define('long', '2 hours');
CREATE TABLE applied (k text NOT NULL);
CREATE FUNCTION consume(p text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF idem_claim(p, 'long') THEN
        INSERT INTO applied VALUES (p);
    END IF;
END $$;
-- n claims of new ids, one transaction each; a switch after the first half
CREATE PROCEDURE claim_new(prefix text, n int, switch_halfway bool) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. n LOOP
        PERFORM idem_claim(prefix || i, 'long');
        COMMIT;
        IF switch_halfway AND i = n / 2 THEN
            PERFORM idem_generation_switch();
            COMMIT;
        END IF;
    END LOOP;
END $$;
};

# Reads of idempotency.generations by one session's $IDS claims of new ids
sub map_reads
{
	my ($node, $db, $prefix, $switch) = @_;
	my $reads = q{SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables
	               WHERE relid = 'idempotency.generations'::regclass};
	my $out = $node->safe_psql($db, qq{
SET stats_fetch_consistency = none;
SELECT pg_stat_force_next_flush();
CREATE TEMP TABLE reads_before AS $reads;
CALL claim_new('$prefix', $IDS, $switch);
SELECT pg_stat_force_next_flush();
SELECT ($reads) - (SELECT * FROM reads_before);
});
	my @lines = split /\n/, $out;
	diag("$db: $IDS claims of new ids read idempotency.generations $lines[-1] times");
	return $lines[-1];
}

# Claims of these new ids went into generations, not idempotency.claims
sub in_generations
{
	my ($node, $db, $prefix) = @_;
	return $node->safe_psql($db, qq{
		SELECT count(*) FROM idempotency.claims
		 WHERE tableoid <> 'idempotency.claims'::regclass
		   AND idempotency.idem_key_text(key) LIKE '$prefix%'});
}

# A redelivery load while generations switch; then 0 applied twice, 0 lost
sub load_ok
{
	my ($node, $db, $label) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir();
	PostgreSQL::Test::Utils::append_to_file("$dir/consume.sql", q{
\set k random(1, 3000)
SELECT consume('g-' || :k);
});
	PostgreSQL::Test::Utils::append_to_file("$dir/switch.sql", q{
SELECT idem_generation_switch();
});
	$node->command_ok(
		[
			'pgbench', '-n', '-c', '6', '-j', '2', '-T', '6',
			'-f', "$dir/consume.sql\@40", '-f', "$dir/switch.sql\@1",
			'-h', $node->host, '-p', $node->port, $db
		],
		"$label: claims while generations switch");
	is($node->safe_psql($db, 'SELECT count(*) FROM (SELECT k FROM applied GROUP BY k HAVING count(*) > 1) d'),
		'0', "$label: no event applied twice");
	is($node->safe_psql($db, q{
		SELECT count(*) FROM idem_claims c
		 WHERE namespace = 'long' AND event_id LIKE 'g-%'
		   AND NOT EXISTS (SELECT 1 FROM applied a WHERE a.k = c.event_id)}),
		'0', "$label: every claim was applied (none lost)");
	is($node->safe_psql($db, q{
		SELECT count(*) FILTER (WHERE idem_claim('g-' || i, 'long')) FROM generate_series(1, 3000) i
		 WHERE 'g-' || i IN (SELECT k FROM applied)}),
		'0', "$label: every applied event is a duplicate");
}

# --- (a) 70 databases, preloaded ----------------------------------------------
my $node = PostgreSQL::Test::Cluster->new('many_databases');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
max_connections = 12
autovacuum_max_workers = 1
max_worker_processes = 4
max_wal_senders = 0
idempotency.purge_enabled = off
fsync = off
log_statement = none
});
$node->start;
$node->safe_psql('template1', $SETUP);
foreach my $i (1 .. $DBS)
{
	$node->safe_psql('postgres', "CREATE DATABASE d$i");
	# every database takes a shared entry: an open generation and a claim
	$node->safe_psql("d$i", q{SELECT idem_generation_switch(); SELECT idem_claim('warm', 'long')});
}

my $reads = map_reads($node, "d$DBS", 'new-', 'false');
cmp_ok($reads, '<=', $MAX_READS, "the ${DBS}th database: $IDS new ids read the map $reads times");
is(in_generations($node, "d$DBS", 'new-'), $IDS, "the ${DBS}th database: the claims are in a generation");
load_ok($node, "d$DBS", "the ${DBS}th database");

# the first database's entry was reused by another: it gets one again
$reads = map_reads($node, 'd1', 'new-', 'false');
cmp_ok($reads, '<=', $MAX_READS, "the first database again: $IDS new ids read the map $reads times");
load_ok($node, 'd1', 'the first database again');
$node->stop;

# --- (b) without shared_preload_libraries ---------------------------------------
my $plain = PostgreSQL::Test::Cluster->new('no_preload_map');
$plain->init;
$plain->append_conf('postgresql.conf', qq{
fsync = off
log_statement = none
});
$plain->start;
$plain->safe_psql('postgres', $SETUP);
$plain->safe_psql('postgres', q{SELECT idem_generation_switch(); SELECT idem_claim('warm', 'long')});
$reads = map_reads($plain, 'postgres', 'new-', 'true');
cmp_ok($reads, '<=', $MAX_READS,
	"without preloading: $IDS new ids and a switch read the map $reads times");
is(in_generations($plain, 'postgres', 'new-'), $IDS, 'without preloading: the claims are in generations');
is($plain->safe_psql('postgres', q{
	SELECT count(DISTINCT tableoid) FROM idempotency.claims WHERE idempotency.idem_key_text(key) LIKE 'new-%'}),
	'2', 'without preloading: the claims after the switch went to the new generation');
load_ok($plain, 'postgres', 'without preloading');
$plain->stop;

done_testing();
