-- bench/scale.sql: objects for the scale benchmark (bench/run scale).
--
-- The store grows in steps on both sides with the same ids: claims written
-- straight into the generations of idempotency.claims (their key is the
-- UUID's 16 bytes, as idem_claim stores a UUID id), and the baseline's
-- processed-events table (bench_base, in bench/common.sql).
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;

DROP TABLE IF EXISTS scale_results, scale_ids;
TRUNCATE bench_base;

-- size: live claims in the store; what: the measure; v: its value
CREATE TABLE scale_results (size bigint, round int, what text, v float8);
-- the ids of one measured loop
CREATE UNLOGGED TABLE scale_ids (id text);

SELECT idem_namespace_define('scale_live', '7 days');
-- expired claims, in a TTL class of their own (1h30: generations, like any
-- TTL of at least idempotency.generation_min_ttl)
SELECT idem_namespace_define('scale_exp', '1 hour 30 minutes');
SELECT idem_generation_switch();

-- the i-th live id, the same on both sides
CREATE OR REPLACE FUNCTION scale_live_id(i bigint) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT md5('live-' || i)::uuid $$;

-- rows of the open generation of a namespace's class
CREATE OR REPLACE FUNCTION scale_open_rel(p_ns text) RETURNS text
LANGUAGE sql AS $$
    SELECT g.relation FROM idem_generations g
     WHERE g.state = 'open'
       AND g.ttl_class = (SELECT floor(log(2, extract(epoch FROM ttl)))::int
                            FROM idem_namespaces WHERE name = p_ns)
$$;

-- grow the live store from live ids a+1 .. b on both sides: the claims
-- written straight into the open generation, which is switched whenever
-- it holds chunk claims, as idempotency.generation_max_claims has the
-- worker do (SCALE_CHUNK, by default its default of 250k); then switched
-- once more, so that the loops at every size, the empty store's included,
-- start on an empty open generation and grow it alike (the worker is off
-- during the loops), and the sizes differ in their sealed generations only.
CREATE OR REPLACE FUNCTION scale_grow(a bigint, b bigint, chunk bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    ns int := (SELECT id FROM idempotency.namespaces WHERE name = 'scale_live' LIMIT 1);
    rel text;
    have bigint;
    take bigint;
    i bigint := a;
BEGIN
    rel := scale_open_rel('scale_live');
    EXECUTE format('SELECT count(*) FROM %s', rel) INTO have;
    WHILE i < b LOOP
        IF have >= chunk THEN
            PERFORM idem_generation_switch('scale_live');
            rel := scale_open_rel('scale_live');
            have := 0;
        END IF;
        take := least(b - i, chunk - have);
        EXECUTE format('INSERT INTO %s (claimed_at, ns, key)
                        SELECT now(), $1, uuid_send(scale_live_id(g)) FROM generate_series($2 + 1, $3) g', rel)
          USING ns, i, i + take;
        i := i + take;
        have := have + take;
    END LOOP;
    IF have > 0 THEN
        PERFORM idem_generation_switch('scale_live');
    END IF;
    INSERT INTO bench_base (namespace, event_id)
        SELECT 'scale', scale_live_id(g)::text FROM generate_series(a + 1, b) g;
END $$;

-- n claims claimed a day ago, in the open generation of scale_exp
CREATE OR REPLACE FUNCTION scale_expired(n bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    ns int := (SELECT id FROM idempotency.namespaces WHERE name = 'scale_exp' LIMIT 1);
BEGIN
    EXECUTE format('INSERT INTO %s (claimed_at, ns, key)
                    SELECT now() - interval ''1 day'', $1, uuid_send(gen_random_uuid())
                      FROM generate_series(1, $2)', scale_open_rel('scale_exp'))
      USING ns, n;
END $$;

-- the plan node of an EXPLAIN (ANALYZE, BUFFERS, WAL) of q
CREATE OR REPLACE FUNCTION scale_explain(q text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    j json;
BEGIN
    EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, WAL, FORMAT JSON) ' || q INTO j;
    RETURN (j -> 0 -> 'Plan')::jsonb;
END $$;

-- rows of namespace p_ns, and those claimed in the last ttl seconds, in
-- the relations its claims can be in: idempotency.claims itself and its
-- class's generations.  A count over idempotency.claims as a whole would
-- read every generation of the 30M store for seconds, and its locks would
-- keep the worker from dropping the class's expired generations meanwhile.
CREATE OR REPLACE FUNCTION scale_class_rows(p_ns text, ttl int, OUT total bigint, OUT live bigint)
LANGUAGE plpgsql AS $$
DECLARE
    nsid int := (SELECT id FROM idempotency.namespaces WHERE name = p_ns);
    klass int := (SELECT floor(log(2, extract(epoch FROM n.ttl)))::int
                    FROM idem_namespaces n WHERE n.name = p_ns);
    rel text;
    t bigint;
    l bigint;
BEGIN
    SELECT count(*), count(*) FILTER (WHERE c.claimed_at > now() - make_interval(secs => ttl))
      INTO total, live
      FROM ONLY idempotency.claims c WHERE c.ns = nsid;
    FOR rel IN SELECT g.relation FROM idem_generations g WHERE g.ttl_class = klass LOOP
        BEGIN
            EXECUTE format('SELECT count(*), count(*) FILTER (WHERE claimed_at > now() - make_interval(secs => $2))
                              FROM %s WHERE ns = $1', rel)
              INTO t, l USING nsid, ttl;
            total := total + t;
            live := live + l;
        EXCEPTION WHEN undefined_table THEN
            NULL;   -- dropped since it was listed
        END;
    END LOOP;
END $$;
