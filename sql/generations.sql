-- Generations: claims of long TTLs live in tables that are dropped whole
SET client_min_messages = warning;
-- This file follows the generations through its own switches, step by
-- step: the worker (on, as the README configures it) pauses in this
-- database, any round under way here ends first, and the file starts from
-- no generation at all (what the worker opened for the other files'
-- namespaces goes, tables and rows)
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
CREATE FUNCTION pg_temp.drop_generations() RETURNS void LANGUAGE plpgsql AS $$
DECLARE t regclass;
BEGIN
    FOR t IN SELECT i.inhrelid::regclass FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
              WHERE i.inhparent = 'idempotency.claims'::regclass AND c.relname ~ '^claims_g[0-9]+$' LOOP
        EXECUTE format('DROP TABLE %s', t);
    END LOOP;
    DELETE FROM idempotency.generations;
END $$;
SELECT pg_temp.drop_generations();
-- a floor of an hour (the default is 10 s) keeps the short namespace in
-- idempotency.claims with a TTL no run of this file outlasts, valgrind's
SET idempotency.generation_min_ttl = '1h';
SELECT idem_namespace_define('gen_week', '7 days');
SELECT idem_namespace_define('gen_days', '2 days');
SELECT idem_namespace_define('gen_short', '10 minutes');

-- before the first switch, claims go to idempotency.claims itself
SELECT idem_claim('before', 'gen_week') AS before_generations;
SELECT idem_generation_switch() > 0 AS switched;
-- (the other tests' namespaces have classes of their own: show two)
SELECT ttl_class, ttl_class_from, state, claims FROM idem_generations
 WHERE ttl_class IN (17, 19) ORDER BY id;

-- now a claim of a week goes to the open generation of its class, a claim
-- of ten minutes (below generation_min_ttl) still to idempotency.claims
SELECT idem_claim('w1', 'gen_week'), idem_claim('d1', 'gen_days'), idem_claim('s1', 'gen_short');
SELECT n.name, c.tableoid = 'idempotency.claims'::regclass AS in_claims_table
  FROM idempotency.claims c JOIN idem_namespaces n ON n.id = c.ns
 WHERE n.name LIKE 'gen_%' ORDER BY 1, 2;

-- a duplicate anywhere is a duplicate: in the claims table, in the open
-- generation, and in a sealed one after a switch
SELECT idem_claim('before', 'gen_week') AS dup_claims_table, idem_claim('w1', 'gen_week') AS dup_open;
SELECT idem_claim('fp', 'gen_week', 'payload-1') AS with_fingerprint;
SELECT idem_generation_switch() > 0 AS switched;
SELECT ttl_class, state, claims, filter_bytes > 0 AS has_filter FROM idem_generations
 WHERE ttl_class IN (17, 19) ORDER BY id;
SELECT idem_claim('w1', 'gen_week') AS dup_sealed, idem_claim('d1', 'gen_days') AS dup_sealed_days;
SELECT idem_claimed('w1', 'gen_week') AS claimed_sealed, idem_claimed('nope', 'gen_week') AS claimed_absent;
SELECT idem_claim('fp', 'gen_week', 'payload-1') AS same_fingerprint;
SELECT idem_claim('fp', 'gen_week', 'payload-2');  -- error: another fingerprint, found in a sealed generation
SELECT idem_claim_many(ARRAY['w1', 'w2', 'w3', 'w2'], 'gen_week') AS new_of_four;
SELECT count(*) AS claims_of_week FROM idem_claims WHERE namespace = 'gen_week';

-- once VACUUM has marked a sealed generation all-visible, a duplicate is
-- found from its index alone; a fingerprint to check is still read
-- (not echoed: the generations' ids depend on what ran before)
\set ECHO none
SELECT format('VACUUM %s', relation) FROM idem_generations
 WHERE state = 'sealed' AND ttl_class = 19 \gexec
\set ECHO all
SELECT idem_claim('fp', 'gen_week') AS dup_all_visible;
SELECT idem_claim('fp', 'gen_week', 'payload-2');  -- error: another fingerprint
SELECT idem_claim('fp', 'gen_week', 'payload-1') AS dup_with_fingerprint;

-- a rollback releases, in a generation as in the claims table
BEGIN;
SELECT idem_claim('rb', 'gen_week') AS in_rolled_back;
ROLLBACK;
SELECT idem_claim('rb', 'gen_week') AS after_rollback;

-- release finds the claim in whichever generation holds it
SELECT idem_release('w1', 'gen_week') AS released_sealed, idem_claimed('w1', 'gen_week') AS still;
SELECT idem_claim('w1', 'gen_week') AS claimed_again;
-- (the open generation of its class: another class's may be newer)
SELECT g.state AS generation_of_w1
  FROM idempotency.claims c JOIN idem_namespaces n ON n.id = c.ns
  JOIN idem_generations g ON to_regclass(g.relation) = c.tableoid
 WHERE n.name = 'gen_week' AND c.key = 'w1';

-- an expired claim in a sealed generation counts as absent: a new claim
-- goes to the open generation, and the old row goes with its generation
SELECT idem_generation_switch() > 0 AS switched;
UPDATE idempotency.claims SET claimed_at = claimed_at - interval '8 days'
 WHERE ns = (SELECT id FROM idem_namespaces WHERE name = 'gen_week') AND key = 'w2';
SELECT idem_claimed('w2', 'gen_week') AS expired_is_absent, idem_claim('w2', 'gen_week') AS taken_over;
SELECT count(*) AS rows_of_w2, count(*) FILTER (WHERE expired) AS expired_rows
  FROM idem_claims WHERE namespace = 'gen_week' AND event_id = 'w2';

-- a generation whose claims have all expired is dropped, table and all
-- (claims imported with an old claimed_at, in a class of their own)
SELECT idem_namespace_define('gen_hour', '1 hour 30 minutes');
SELECT idem_generation_switch() > 0 AS switched;
SELECT idem_claims_import('h' || i, 'gen_hour', now() - interval '1 hour 29 minutes 59 seconds')
  FROM generate_series(1, 3) i;
SELECT idem_generation_switch() > 0 AS switched;   -- seals it
SELECT ttl_class, state, claims FROM idem_generations WHERE ttl_class = 12 ORDER BY id;
SELECT pg_sleep(1.2);
SELECT idem_claimed('h1', 'gen_hour') AS expired_is_absent;
SELECT idem_purge() >= 3 AS purged_with_drop;   -- the claims table may have some too
SELECT ttl_class, state, claims FROM idem_generations WHERE ttl_class = 12 ORDER BY id;
SELECT count(*) = (SELECT count(*) FROM idem_generations) AS one_table_each
  FROM pg_inherits WHERE inhparent = 'idempotency.claims'::regclass;

-- a longer TTL keeps a generation alive: expiry uses today's TTLs, with
-- the newest claim of each namespace that the seal found
SELECT idem_namespace_define('gen_days', '4 days');   -- another class
SELECT idem_generation_switch() > 0 AS switched;
SELECT idem_claims_import('long', 'gen_days', now() - interval '3 days') AS imported;
SELECT idem_generation_switch() > 0 AS switched;
SELECT idem_purge() AS purged_nothing;
SELECT idem_claim('long', 'gen_days') AS still_duplicate;
SELECT idem_namespace_define('gen_days', '2 days');
SELECT idem_claimed('d1', 'gen_days') AS d1_still_live, idem_claimed('long', 'gen_days') AS long_expired;
SELECT idem_purge() AS purged_long;
SELECT ttl_class, state, claims FROM idem_generations WHERE ttl_class = 18 ORDER BY id;
SELECT idem_claim('long', 'gen_days') AS claimed_anew;

-- a size bound: once the open generation holds generation_max_claims
-- claims, the next maintenance pass switches it whatever its age; its
-- claims stay duplicates from the sealed generation
SELECT idem_generation_switch('gen_week') AS opened;
SET idempotency.generation_max_claims = 100;
SELECT count(*) FILTER (WHERE idem_claim('size-' || g, 'gen_week')) AS claimed
  FROM generate_series(1, 150) g;
SELECT idem_purge() >= 0 AS purged;
SELECT state, claims FROM idem_generations WHERE ttl_class = 19 ORDER BY id DESC LIMIT 2;
SELECT idem_claim('size-1', 'gen_week') AS dup_in_sealed, idem_claim('size-151', 'gen_week') AS new_in_open;
-- under the bound, and with 0 (no bound), the open generation stays
SELECT count(*) FILTER (WHERE idem_claim('size-b' || g, 'gen_week')) AS claimed
  FROM generate_series(1, 50) g;
SELECT idem_purge() >= 0 AS purged;
SET idempotency.generation_max_claims = 0;
SELECT count(*) FILTER (WHERE idem_claim('size-c' || g, 'gen_week')) AS claimed
  FROM generate_series(1, 150) g;
SELECT idem_purge() >= 0 AS purged;
SELECT state, claims FROM idem_generations WHERE ttl_class = 19 ORDER BY id DESC LIMIT 2;
SET idempotency.generation_max_claims = -1;   -- error: out of range
SET idempotency.generation_max_claims = 50;   -- error: a bound below 100
RESET idempotency.generation_max_claims;
-- only a superuser sets it
CREATE ROLE gen_sizer;
SET ROLE gen_sizer;
SET idempotency.generation_max_claims = 1;   -- error: permission denied
RESET ROLE;
DROP ROLE gen_sizer;

-- DDL on idempotency.claims reaches every generation: an added column is
-- refused for claims wherever they go, and a generation opened after the
-- column is dropped (so without the dropped column) works beside older ones
SELECT idem_generation_switch('gen_week') AS opened;
ALTER TABLE idempotency.claims ADD COLUMN extra text;
SELECT idem_claim('ddl-1', 'gen_week');   -- error: the added column
ALTER TABLE idempotency.claims DROP COLUMN extra;
SELECT idem_claim('ddl-1', 'gen_week') AS after_drop_column;
SELECT idem_generation_switch('gen_week') AS opened;
SELECT idem_claim('ddl-1', 'gen_week') AS dup_across_layouts, idem_claim('ddl-2', 'gen_week') AS new_in_new_layout;
SELECT count(*) AS ddl_claims FROM idem_claims WHERE namespace = 'gen_week' AND event_id LIKE 'ddl-%';
-- DDL on a generation itself is refused naming that generation, and the
-- fix the hint gives works: an added column, a trigger, a dropped primary key
-- (the generation's id shown as N, so that the output does not depend on it)
SELECT format('idempotency.%I', 'claims_g' || id) AS gen, 'claims_g' || id || '_pkey' AS gen_pkey,
       'claims_g' || id AS gen_name
  FROM idem_generations WHERE ttl_class = 19 AND state = 'open' \gset
CREATE FUNCTION gen_claim_refused(event_id text, gen text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE m text; h text;
BEGIN
    PERFORM idem_claim(event_id, 'gen_week');
    RAISE WARNING 'claimed';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, h = PG_EXCEPTION_HINT;
    RAISE WARNING '%: %', SQLSTATE, replace(m, gen, 'claims_gN')
        USING HINT = replace(h, gen, 'claims_gN');
END $$;
ALTER TABLE :gen ADD COLUMN extra text;
SELECT gen_claim_refused('ddl-3', :'gen_name');   -- error: the generation's column
ALTER TABLE :gen DROP COLUMN extra;
SELECT idem_claim('ddl-3', 'gen_week') AS after_drop_gen_column;
CREATE FUNCTION gen_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RETURN NEW; END $$;
CREATE TRIGGER gen_t BEFORE INSERT ON :gen FOR EACH ROW EXECUTE FUNCTION gen_trg();
SELECT gen_claim_refused('ddl-4', :'gen_name');   -- error: the generation's trigger
DROP TRIGGER gen_t ON :gen;
SELECT idem_claim('ddl-4', 'gen_week') AS after_drop_gen_trigger;
DROP FUNCTION gen_trg();
ALTER TABLE :gen DROP CONSTRAINT :"gen_pkey";
SELECT gen_claim_refused('ddl-5', :'gen_name');   -- error: the generation's key is gone
ALTER TABLE :gen ADD CONSTRAINT :"gen_pkey" PRIMARY KEY (key, ns);
SELECT idem_claim('ddl-5', 'gen_week') AS after_pkey_again, idem_claim('ddl-4', 'gen_week') AS dup_after_pkey_again;
DROP FUNCTION gen_claim_refused(text, text);
-- nor can a generation be bound to a state machine (the message names it)
SELECT idem_machine_define('gen_machine', '{"A": []}');
\set VERBOSITY sqlstate
SELECT idem_machine_bind(:'gen', 'ns', 'gen_machine');
\set VERBOSITY default
SELECT :'LAST_ERROR_MESSAGE' = format('cannot bind %s to a state machine', :'gen') AS names_the_generation;
SELECT idem_machine_drop('gen_machine');
-- row-level security on idempotency.claims is refused for claims in
-- generations too, for the roles it applies to
CREATE ROLE gen_tenant;
GRANT SELECT, INSERT, DELETE ON idempotency.claims TO gen_tenant;
CREATE POLICY gen_tenant_all ON idempotency.claims TO gen_tenant USING (true);
SET ROLE gen_tenant;
SELECT idem_claim('rls-1', 'gen_week');   -- error: row-level security
RESET ROLE;
DROP POLICY gen_tenant_all ON idempotency.claims;
REVOKE ALL ON idempotency.claims FROM gen_tenant;
DROP ROLE gen_tenant;

-- generations are the extension's: a plain role cannot switch them
CREATE ROLE gen_plain;
SET ROLE gen_plain;
SELECT idem_generation_switch();
RESET ROLE;
DROP ROLE gen_plain;

-- DROP TABLE of a generation by hand: its claims are gone, nothing else
SELECT idem_claim('hand', 'gen_week') AS claim_hand;
SELECT idem_generation_switch() > 0 AS switched;
DO $$
BEGIN
    EXECUTE format('DROP TABLE idempotency.%I',
                   (SELECT 'claims_g' || max(id) FROM idem_generations WHERE ttl_class = 19 AND state = 'sealed'));
END $$;
SELECT idem_claimed('hand', 'gen_week') AS dropped_by_hand, idem_claimed('fp', 'gen_week') AS others_kept;
SELECT idem_claim('hand', 'gen_week') AS claimed_anew;

-- the finer filter a seal builds for shared memory
-- (filter_memory_bits_per_claim) is loaded only when the sealing
-- transaction commits: a seal rolled back, whole or to a savepoint, leaves
-- none behind, so claims written into the generation afterwards (by hand
-- here) are found once it is sealed for good
SELECT idem_namespace_define('gen_fine', '5 days');
SELECT idem_generation_switch('gen_fine') > 0 AS switched;
SELECT idem_claim('00000000-0000-4000-8000-000000000001'::uuid, 'gen_fine') AS fine_1;
SELECT g.relation AS fine_rel, n.id AS fine_ns
  FROM idem_generations g, idempotency.namespaces n
 WHERE n.name = 'gen_fine' AND g.state = 'open'
   AND g.ttl_class = floor(log(2, extract(epoch FROM interval '5 days')))::int \gset
BEGIN;
SELECT idem_generation_switch('gen_fine') > 0 AS switched_then_rolled_back;
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT idem_generation_switch('gen_fine') > 0 AS switched_then_rolled_back_to_savepoint;
ROLLBACK TO s;
INSERT INTO :fine_rel (claimed_at, ns, key)
SELECT now(), :fine_ns, uuid_send(u::uuid)
  FROM unnest(ARRAY['00000000-0000-4000-8000-000000000002',
                    '00000000-0000-4000-8000-000000000003']) u;
COMMIT;
SELECT idem_generation_switch('gen_fine') > 0 AS switched;
SELECT state, claims FROM idem_generations WHERE relation = :'fine_rel';
SELECT idem_claim('00000000-0000-4000-8000-000000000001'::uuid, 'gen_fine') AS dup_1,
       idem_claim('00000000-0000-4000-8000-000000000002'::uuid, 'gen_fine') AS dup_by_hand_2,
       idem_claim('00000000-0000-4000-8000-000000000003'::uuid, 'gen_fine') AS dup_by_hand_3,
       idem_claim('00000000-0000-4000-8000-000000000004'::uuid, 'gen_fine') AS new_4;
SELECT name, setting FROM pg_settings WHERE name LIKE 'idempotency.filter%bits%' ORDER BY 1;

-- a filter keeps the layout it was sealed with: one sealed by 1.0 (double
-- hashing, no finer filter; idempotency.debug_legacy_filters seals as 1.0
-- did) is read as such beside filters of the mixed layout, and loses no
-- claim of its generation
SELECT idem_namespace_define('gen_legacy', '3 days');
SELECT idem_generation_switch('gen_legacy') > 0 AS switched;
-- written by hand, so that the claim cache knows none of them
SELECT g.relation AS legacy_rel, n.id AS legacy_ns
  FROM idem_generations g, idempotency.namespaces n
 WHERE n.name = 'gen_legacy' AND g.state = 'open'
   AND g.ttl_class = floor(log(2, extract(epoch FROM interval '3 days')))::int \gset
INSERT INTO :legacy_rel (claimed_at, ns, key)
SELECT now(), :legacy_ns, uuid_send(md5('legacy-' || i)::uuid) FROM generate_series(1, 2000) i;
SET idempotency.debug_legacy_filters = on;
SELECT idem_generation_switch('gen_legacy') > 0 AS switched;
RESET idempotency.debug_legacy_filters;
SELECT g.claims, g.filter_hashes < 0 AS mixed_layout, g.filter_hashes & 255 AS hashes
  FROM idempotency.generations g
 WHERE g.state = 'sealed'
   AND g.namespaces @> ARRAY[(SELECT id FROM idempotency.namespaces WHERE name = 'gen_legacy')];
SELECT filter_hashes < 0 AS mixed_layout FROM idempotency.generations
 WHERE id = (SELECT max(id) FROM idempotency.generations
              WHERE state = 'sealed' AND ttl_class = floor(log(2, extract(epoch FROM interval '5 days')))::int);
SELECT count(*) FILTER (WHERE idem_claim(md5('legacy-' || i)::uuid, 'gen_legacy')) AS claimed_again
  FROM generate_series(1, 2000) i;
SELECT count(*) FILTER (WHERE idem_claim(md5('legacy-new-' || i)::uuid, 'gen_legacy')) AS new_claimed
  FROM generate_series(1, 200) i;
-- only a superuser seals as 1.0 did
CREATE ROLE gen_legacy_plain;
SET ROLE gen_legacy_plain;
SET idempotency.debug_legacy_filters = on;
RESET ROLE;
DROP ROLE gen_legacy_plain;

-- leave no generation behind for the other tests
SET idempotency.generation_min_ttl = 2147483647;
SELECT pg_temp.drop_generations();
SELECT count(*) AS generations_left FROM idem_generations;
SELECT idem_claim('w1', 'gen_week') AS back_in_claims_table;
-- the worker resumes here, and the classes in use get their generations
-- back at once, as the worker would give them
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I RESET idempotency.purge_enabled', current_database());
END $$;
RESET idempotency.generation_min_ttl;
SELECT idem_generation_switch() > 0 AS generations_back;
