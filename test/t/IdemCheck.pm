# IdemCheck: checks shared by the Perl TAP tests.
#
#   use IdemCheck;
#   amcheck_claims($node, 'postgres', 'after the load');
#   create_extension_with_namespaces($node, ['db1', 'db2'], { short => '1 second' });
#   make_expired_claims($node, 'db1', 1000, 'x-', 'short');
#   dump_and_restore($from, 'postgres', $to, 'restored_plain', 'plain', $dir);
#
# amcheck_claims verifies, with amcheck and heapallindexed, every btree
# index of idempotency.claims and of its generations, and of idempotency.requests and
# idempotency.tokens where they exist: the extension writes these heaps and
# their indexes directly, so an index entry it forgot (or one for a tuple
# that is not there) shows up here.  The index list is read afresh on every
# call, since REINDEX CONCURRENTLY and the like give indexes new OIDs.
#
# It reports one Test::More assertion per index, named after $label and the
# index, whose failure shows amcheck's error; an invalid or not-ready index
# (say, left behind by a failed concurrent build) fails without being
# checked.  On a primary it uses bt_index_parent_check(index, true); on a
# standby, where that cannot run, bt_index_check(index, true).  It creates
# the amcheck extension if the database lacks it (not possible on a
# standby: create it on the primary first).  Returns true if every index
# passed.  amcheck_findings($node, $db) returns the check's name and its
# findings, [index, 'ok' | 'invalid' | 'gone' | 'error', message] each,
# asserting nothing (for a test of the check itself).
package IdemCheck;

use strict;
use warnings;

use Exporter 'import';
use Test::More;

our @EXPORT = qw(amcheck_claims amcheck_findings create_extension_with_namespaces make_expired_claims
  dump_and_restore pause_worker resume_worker);

my @TABLES = qw(idempotency.claims idempotency.requests idempotency.tokens);

# The purge worker live, every second, for the tests that restore,
# replicate, upgrade or change catalogs: its round must meet every
# intermediate state those operations produce.
our $WORKER_LIVE = "idempotency.purge_interval = '1s'\n";

# Pause the purge worker in database $db of $node alone, for a step that
# measures what a manual purge does (ALTER DATABASE ... SET
# idempotency.purge_enabled = off), and wait until no round is under way
# there; resume_worker undoes it
sub pause_worker
{
	my ($node, $db) = @_;
	$node->safe_psql($db, qq{ALTER DATABASE "$db" SET idempotency.purge_enabled = off});
	$node->poll_query_until($db, q{
		SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE datname = current_database()
		                    AND backend_type = 'idempotency purge worker')
		  AND pg_sleep(0.2) IS NOT NULL
		  AND NOT EXISTS (SELECT FROM pg_stat_activity WHERE datname = current_database()
		                    AND backend_type = 'idempotency purge worker')})
	  or die "the purge worker did not leave database $db";
}

sub resume_worker
{
	my ($node, $db) = @_;
	$node->safe_psql($db, qq{ALTER DATABASE "$db" RESET idempotency.purge_enabled});
}

# CREATE EXTENSION idempotency in each of @$dbs of $node, and define the
# namespaces of %$namespaces (name => TTL) in each
sub create_extension_with_namespaces
{
	my ($node, $dbs, $namespaces) = @_;
	my $defs = join('', map { "SELECT idem_namespace_define('$_', '$namespaces->{$_}');\n" }
		  sort keys %$namespaces);
	$node->safe_psql($_, "CREATE EXTENSION idempotency;\n$defs") foreach @$dbs;
}

# $n claims of ids $prefix1 .. $prefix$n in namespace $ns of $db, then
# backdated by a minute: expired, in a namespace with a shorter TTL
sub make_expired_claims
{
	my ($node, $db, $n, $prefix, $ns) = @_;
	$node->safe_psql($db, qq{
		SELECT count(*) FROM (SELECT idem_claim('$prefix' || g, '$ns') FROM generate_series(1, $n) g) s;
		UPDATE idempotency.claims SET claimed_at = claimed_at - interval '1 minute'
		 WHERE idempotency.idem_key_text(key) LIKE '$prefix%';
	});
}

sub amcheck_findings
{
	my ($node, $dbname) = @_;
	my ($out, $err);

	my $state = $node->safe_psql($dbname, q{
		SELECT (SELECT count(*) FROM pg_extension WHERE extname = 'amcheck')
		       || ' ' || pg_is_in_recovery()});
	my ($have_amcheck, $in_recovery) = split ' ', $state;
	if (!$have_amcheck)
	{
		my $rc = $node->psql($dbname, 'CREATE EXTENSION amcheck',
			stdout => \$out, stderr => \$err);
		if ($rc != 0)
		{
			return ('amcheck', [ 'amcheck', 'error', "the amcheck extension cannot be created: $err" ]);
		}
	}
	my $check = $in_recovery =~ /^t/ ? 'bt_index_check' : 'bt_index_parent_check';  # 't' or 'true'

	# Every index in one session, in one DO block (a standby runs one too):
	# a store in generations has thousands of them, and a psql per index
	# took minutes.  Each index is listed (with those of the generations,
	# src/store/generation.c), then checked by OID in a transaction of its
	# own; one NOTICE line per index says how it went.  A generation
	# the live worker dropped meanwhile is gone, not corrupt: noted, not
	# asserted.
	my $tables = join(', ', map { "'$_'" } @TABLES);
	my $rc = $node->psql($dbname, qq{
SET client_min_messages = notice;
DO \$amcheck\$
DECLARE
    ix record;
BEGIN
    FOR ix IN
        SELECT i.indexrelid AS oid, i.indexrelid::regclass::text AS name,
               i.indisvalid AND i.indisready AND i.indislive AS usable
          FROM pg_index i
          JOIN pg_class c ON c.oid = i.indexrelid
          JOIN pg_am am ON am.oid = c.relam
         WHERE am.amname = 'btree'
           AND (i.indrelid IN (SELECT to_regclass(t) FROM unnest(ARRAY[$tables]::text[]) t)
                OR i.indrelid IN (SELECT h.inhrelid FROM pg_inherits h
                                   WHERE h.inhparent = to_regclass('idempotency.claims')))
         ORDER BY i.indrelid, c.relname
    LOOP
        IF NOT ix.usable THEN
            RAISE NOTICE 'amcheck|%|invalid|', ix.name;
            CONTINUE;
        END IF;
        BEGIN
            PERFORM $check(ix.oid::regclass, true);
            RAISE NOTICE 'amcheck|%|ok|', ix.name;
        EXCEPTION WHEN OTHERS THEN
            IF NOT EXISTS (SELECT FROM pg_class WHERE oid = ix.oid) THEN
                RAISE NOTICE 'amcheck|%|gone|', ix.name;
            ELSE
                RAISE NOTICE 'amcheck|%|error|% (%)', ix.name, SQLERRM, SQLSTATE;
            END IF;
        END;
        -- the check's locks go (a worker's drop waiting for them would
        -- otherwise deadlock with the next index's check)
        COMMIT;
    END LOOP;
END
\$amcheck\$;
},
		stdout => \$out, stderr => \$err, on_error_stop => 1);
	return ($check, [ 'amcheck', 'error', "the check did not run: $err" ]) if $rc != 0;
	my @found;
	foreach my $line (split /\n/, $err)
	{
		push @found, [ $1, $2, $3 ]
		  if $line =~ /NOTICE:\s+amcheck\|(.*?)\|(ok|invalid|gone|error)\|(.*)$/;
	}
	return ($check, @found);
}

sub amcheck_claims
{
	my ($node, $dbname, $label) = @_;
	$label = defined $label ? "$label: " : '';
	my ($check, @found) = amcheck_findings($node, $dbname);

	my ($all_ok, $checked, $gone) = (1, 0, 0);
	foreach my $f (@found)
	{
		my ($name, $status, $msg) = @$f;
		my $what = "${label}$check($name, heapallindexed)";
		$checked++;
		if ($status eq 'gone')
		{
			$gone++;
			next;
		}
		if ($status eq 'invalid')
		{
			fail("$what: the index is not valid and ready (a failed concurrent build?)");
			$all_ok = 0;
			next;
		}
		$all_ok = 0 unless is($status eq 'ok' ? '' : $msg, '', "$what finds no corruption");
	}
	# at least the claims' primary key: a check that read no index is no check
	$all_ok = 0 unless cmp_ok($checked - $gone, '>', 0, "${label}amcheck read the claims' indexes");
	note("${label}$gone indexes of generations dropped during the check") if $gone;
	return $all_ok;
}

# pg_dump database $from_db of node $from in $format ('plain' or 'custom')
# into a file under $dir, create database $to_db on node $to (which may be
# $from) and restore it there, with psql -v ON_ERROR_STOP=1 or pg_restore
# --exit-on-error: two assertions
sub dump_and_restore
{
	my ($from, $from_db, $to, $to_db, $format, $dir) = @_;
	my $file = "$dir/$to_db.$format";

	$from->command_ok([ 'pg_dump', '-F', substr($format, 0, 1), '-f', $file, '-d', $from->connstr($from_db) ],
		"pg_dump --format=$format");
	$to->safe_psql('postgres', "CREATE DATABASE $to_db");
	if ($format eq 'plain')
	{
		$to->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', $file, '-d', $to->connstr($to_db) ],
			'restore the plain dump');
	}
	else
	{
		$to->command_ok([ 'pg_restore', '--exit-on-error', '-d', $to->connstr($to_db), $file ],
			'pg_restore');
	}
}

1;
