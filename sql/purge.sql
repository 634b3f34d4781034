-- idem_purge and purge policies
SET client_min_messages = warning;
-- This file counts what idem_purge() and idem_purge_run() delete, so the
-- worker (on, as the README configures it) pauses in this database alone,
-- and any round under way here ends first.
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I SET idempotency.purge_enabled = off', current_database());
END $$;
-- (committed first: a round that starts later reads it)
DO $$
DECLARE quiet int := 0;
BEGIN
    WHILE quiet < 20 LOOP
        IF EXISTS (SELECT FROM pg_stat_activity WHERE datname = current_database()
                    AND backend_type = 'idempotency purge worker') THEN
            quiet := 0;
        ELSE
            quiet := quiet + 1;
        END IF;
        PERFORM pg_sleep(0.01);
    END LOOP;
END $$;
-- The deletion purge, which claims of TTLs below generation_min_ttl get;
-- generations.sql tests the generations that longer TTLs get instead.
SET idempotency.generation_min_ttl = 2147483647;

-- expired claims go, live ones stay
SELECT idem_namespace_define('purge_a', '1 hour');
SELECT idem_namespace_define('purge_b', '1 day');
SELECT count(*) FILTER (WHERE idem_claim('a-' || g, 'purge_a')) FROM generate_series(1, 300) g;
SELECT count(*) FILTER (WHERE idem_claim('b-' || g, 'purge_b')) FROM generate_series(1, 300) g;
UPDATE idempotency.claims SET claimed_at = claimed_at - interval '2 hours'
 WHERE ns = (SELECT id FROM idempotency.namespaces WHERE name IN ('purge_a'))
   AND idempotency.idem_key_text(key) LIKE 'a-1%';
UPDATE idempotency.claims SET claimed_at = claimed_at - interval '2 hours'
 WHERE ns = (SELECT id FROM idempotency.namespaces WHERE name IN ('purge_b'));
SELECT namespace, expired, count(*) FROM idem_claims
 WHERE namespace IN ('purge_a', 'purge_b') GROUP BY 1, 2 ORDER BY 1, 2;
SELECT idem_purge(50) AS limited_to_50;
SELECT idem_purge() AS the_rest;
SELECT idem_purge() AS nothing_left;
SELECT namespace, expired, count(*) FROM idem_claims
 WHERE namespace IN ('purge_a', 'purge_b') GROUP BY 1, 2 ORDER BY 1, 2;
SELECT namespace, purged FROM idem_stats WHERE namespace IN ('purge_a', 'purge_b') ORDER BY 1;
-- a purged claim can be made again
SELECT idem_claim('a-1', 'purge_a') AS reclaim_after_purge;
-- more than one batch (10000 expired claims each), expired and live claims
-- interleaved in the heap
SELECT idem_namespace_define('purge_c', '1 hour');
SELECT count(*) FILTER (WHERE idem_claim('c-' || g, 'purge_c')) FROM generate_series(1, 25000) g;
UPDATE idempotency.claims SET claimed_at = claimed_at - interval '2 hours'
 WHERE ns = (SELECT id FROM idempotency.namespaces WHERE name = 'purge_c')
   AND idempotency.idem_key_text(key) ~ '[02468]$';
SELECT idem_purge() AS two_batches;
SELECT count(*) AS left_, bool_and(event_id ~ '[13579]$') AS only_live, bool_or(expired) AS any_expired
  FROM idem_claims WHERE namespace = 'purge_c';
SELECT purged FROM idem_stats WHERE namespace = 'purge_c';
-- two purges in one statement: the second does not trip over the claims
-- the first deleted
UPDATE idempotency.claims SET claimed_at = claimed_at - interval '2 hours'
 WHERE ns = (SELECT id FROM idempotency.namespaces WHERE name = 'purge_c')
   AND idempotency.idem_key_text(key) IN ('c-1', 'c-3', 'c-5');
SELECT g, idem_purge() FROM generate_series(1, 2) g ORDER BY g;
SELECT count(*) AS left_after_two FROM idem_claims WHERE namespace = 'purge_c';

-- user tables: the hand-made processed-events table of the seed articles
CREATE ROLE regress_idem_purge_owner;
CREATE ROLE regress_idem_purge_other;
CREATE TABLE payment_event_processed (
    event_id    text PRIMARY KEY,
    order_id    text NOT NULL,
    create_time timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE payment_event_processed OWNER TO regress_idem_purge_owner;
INSERT INTO payment_event_processed
SELECT 'e-' || g, 'o-' || g, now() - g * interval '1 day' FROM generate_series(1, 100) g;
-- deletes run as the table's owner: a trigger records who deleted
CREATE TABLE purge_deleters (who text);
GRANT INSERT ON purge_deleters TO regress_idem_purge_owner;
CREATE FUNCTION record_deleter() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO purge_deleters VALUES (current_user);
    RETURN OLD;
END $$;
CREATE TRIGGER record_deleter AFTER DELETE ON payment_event_processed
    FOR EACH ROW EXECUTE FUNCTION record_deleter();

SET ROLE regress_idem_purge_other;
SELECT idem_purge_policy_add('payment_event_processed', 'create_time', '90 days');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_idem_purge_owner;
SELECT idem_purge_policy_add('payment_event_processed', 'create_time', '90 days');
RESET ROLE;
SELECT rel, time_column, ttl FROM idempotency.purge_policies;
SELECT idem_purge() AS purged;
SELECT count(*) AS kept, min(create_time) > now() - interval '91 days' AS only_recent
  FROM payment_event_processed;
SELECT who, count(*) FROM purge_deleters GROUP BY who;
SELECT "table", rows_deleted, last_error, trigger FROM idem_purge_runs
 WHERE "table" = 'public.payment_event_processed';

-- the owner's rights, not a superuser's: without DELETE the purge of that
-- table fails, with a warning and a recorded error, and the rest goes on
ALTER TABLE payment_event_processed DISABLE TRIGGER record_deleter;
INSERT INTO payment_event_processed VALUES ('old', 'o', now() - interval '1 year');
SELECT idem_claim('stale', 'purge_a');
UPDATE idempotency.claims SET claimed_at = claimed_at - interval '2 hours'
 WHERE idempotency.idem_key_text(key) = 'stale';
REVOKE DELETE ON payment_event_processed FROM regress_idem_purge_owner;
SELECT idem_purge() AS purged_claims_only;
-- the manual rounds only: the live worker's may have met claim_layout's
-- trigger or rule on idempotency.claims, and kept its rows
SELECT "table", rows_deleted, last_error FROM idem_purge_runs
 WHERE last_error IS NOT NULL AND trigger = 'manual';
GRANT DELETE ON payment_event_processed TO regress_idem_purge_owner;
SELECT idem_purge() AS purged_with_delete_back;

-- policy errors
SELECT idem_purge_policy_add('payment_event_processed', 'order_id', '1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_purge_policy_add('payment_event_processed', 'nope', '1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_purge_policy_add('payment_event_processed', 'create_time', '0 days');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_purge_policy_add('payment_event_processed', 'create_time', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_purge_policy_add(NULL, 'create_time', '1 day');
CREATE VIEW purge_view AS SELECT * FROM payment_event_processed;
SELECT idem_purge_policy_add('purge_view', 'create_time', '1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_purge(-1);
\echo :LAST_ERROR_SQLSTATE
BEGIN READ ONLY;
SELECT idem_purge();
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT idem_purge_policy_remove('payment_event_processed');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SET ROLE regress_idem_purge_other;
SELECT idem_purge();
\echo :LAST_ERROR_SQLSTATE
SELECT idem_purge_policy_remove('payment_event_processed');
RESET ROLE;

-- removing; dropping a table forgets its policy
SET ROLE regress_idem_purge_owner;
SELECT idem_purge_policy_remove('payment_event_processed') AS removed,
       idem_purge_policy_remove('payment_event_processed') AS again;
SELECT idem_purge_policy_add('payment_event_processed', 'create_time', '1 year');
RESET ROLE;
DROP VIEW purge_view;
DROP TABLE payment_event_processed;
SELECT count(*) AS policies_left FROM idempotency.purge_policies;
DROP TABLE purge_deleters;
DROP FUNCTION record_deleter();
DROP ROLE regress_idem_purge_owner, regress_idem_purge_other;

-- a cancel or a statement timeout stops the whole purge: it is an error,
-- not a warning about one table while the statement succeeds
CREATE TABLE purge_slow (at timestamptz NOT NULL);
INSERT INTO purge_slow VALUES (now() - interval '2 days');
CREATE FUNCTION purge_slow_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep(5); RETURN OLD; END $$;
CREATE TRIGGER purge_slow_t BEFORE DELETE ON purge_slow
    FOR EACH ROW EXECUTE FUNCTION purge_slow_trg();
SELECT idem_purge_policy_add('purge_slow', 'at', '1 day');
SET statement_timeout = '200ms';
\set VERBOSITY terse
SELECT idem_purge();
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
RESET statement_timeout;
SELECT count(*) AS still_there FROM purge_slow;
DROP TABLE purge_slow;
DROP FUNCTION purge_slow_trg();

-- a policy and a binding go with their table in every drop path
CREATE TYPE purge_row AS (at timestamptz, status text);
CREATE TABLE purge_typed OF purge_row;
SELECT idem_purge_policy_add('purge_typed', 'at', '1 day');
DROP TYPE purge_row CASCADE;
CREATE SCHEMA purge_schema;
CREATE TABLE purge_schema.t (at timestamptz);
SELECT idem_purge_policy_add('purge_schema.t', 'at', '1 day');
DROP SCHEMA purge_schema CASCADE;
CREATE ROLE regress_idem_purge_dropper;
GRANT CREATE ON SCHEMA public TO regress_idem_purge_dropper;
SET ROLE regress_idem_purge_dropper;
CREATE TABLE purge_owned (at timestamptz);
SELECT idem_purge_policy_add('purge_owned', 'at', '1 day');
RESET ROLE;
DROP OWNED BY regress_idem_purge_dropper;
DROP ROLE regress_idem_purge_dropper;
SELECT count(*) AS policies_left_after_drops FROM idempotency.purge_policies;

-- relation arguments that are no relation get 42P01, not an internal error
SELECT idem_purge_policy_add(0, 'at', '1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_purge_policy_remove(0);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_purge_policy_remove(4294967295::oid);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_machine_bind(0, 'status', 'm');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_machine_unbind(0);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_cas_row(0::regclass, 1, 'PAID');
\echo :LAST_ERROR_SQLSTATE
CREATE SEQUENCE purge_seq;
SELECT idem_purge_policy_add('purge_seq', 'at', '1 day');
\echo :LAST_ERROR_SQLSTATE
DROP SEQUENCE purge_seq;

-- CALL idem_purge_run(): the purge as the worker does it, a transaction per
-- batch (purge_batch_size 10000: 25000 expired claims take three)
SELECT idem_namespace_define('purge_run', '1 hour');
SELECT count(*) FILTER (WHERE idem_claim('r-' || g, 'purge_run')) FROM generate_series(1, 25000) g;
UPDATE idempotency.claims SET claimed_at = claimed_at - interval '2 hours'
 WHERE ns = (SELECT id FROM idem_namespaces WHERE name = 'purge_run');
SET application_name = 'purge_run_test';
CALL idem_purge_run();
RESET application_name;
SELECT count(*) AS left_after_run FROM idem_claims WHERE namespace = 'purge_run';
SELECT "table", rows_deleted, batches, trigger, application_name FROM idem_purge_runs
 WHERE trigger = 'procedure' ORDER BY started_at;
CALL idem_purge_run(5);
-- not inside a transaction block: it commits
BEGIN;
CALL idem_purge_run();
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
CALL idem_purge_run(-1);
\echo :LAST_ERROR_SQLSTATE
-- admin only
CREATE ROLE regress_idem_purge_runner;
SET ROLE regress_idem_purge_runner;
CALL idem_purge_run();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE regress_idem_purge_runner;

DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I RESET idempotency.purge_enabled', current_database());
END $$;
