-- bench/scale.sql: objects for the scale benchmark (bench/run scale).
--
-- The store grows in steps on both sides with the same ids: claims written
-- straight into idempotency.claims (their key is the UUID's 16 bytes, as
-- idem_claim stores a UUID id), and the baseline's processed-events table
-- (bench_base, in bench/common.sql), through one INSERT ... SELECT each.
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
SELECT idem_namespace_define('scale_short', '1 minute');

-- the i-th live id, the same on both sides
CREATE OR REPLACE FUNCTION scale_live_id(i bigint) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT md5('live-' || i)::uuid $$;

-- grow the live store from live ids a+1 .. b on both sides
CREATE OR REPLACE FUNCTION scale_grow(a bigint, b bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    ns int := (SELECT id FROM idempotency.namespaces WHERE name = 'scale_live' LIMIT 1);
BEGIN
    INSERT INTO idempotency.claims (claimed_at, ns, key)
        SELECT now(), ns, uuid_send(scale_live_id(g)) FROM generate_series(a + 1, b) g;
    INSERT INTO bench_base (namespace, event_id)
        SELECT 'scale', scale_live_id(g)::text FROM generate_series(a + 1, b) g;
END $$;

-- n expired claims, claimed a day ago in a one-minute namespace
CREATE OR REPLACE FUNCTION scale_expired(n bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    ns int := (SELECT id FROM idempotency.namespaces WHERE name = 'scale_short' LIMIT 1);
BEGIN
    INSERT INTO idempotency.claims (claimed_at, ns, key)
        SELECT now() - interval '1 day', ns, uuid_send(gen_random_uuid())
          FROM generate_series(1, n);
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
