-- bench/common.sql: helpers every benchmark suite uses.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;

-- microseconds a query takes, run as its own statement
CREATE OR REPLACE FUNCTION bench_time(q text) RETURNS float8
LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
    n  bigint;
BEGIN
    EXECUTE q INTO n;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6;
END $$;

-- The claim baseline is what teams write by hand: a processed-events table
-- keyed by (namespace, event_id) and a PL/pgSQL function doing INSERT ...
-- ON CONFLICT DO NOTHING.  The claims and scale suites empty it first.
CREATE TABLE IF NOT EXISTS bench_base (
    namespace  text        NOT NULL,
    event_id   text        NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, event_id)
);
CREATE OR REPLACE FUNCTION bench_base_claim(p_id text, p_ns text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO bench_base (namespace, event_id) VALUES (p_ns, p_id)
    ON CONFLICT DO NOTHING;
    RETURN FOUND;
END $$;

-- Bytes of the claims store: idempotency.claims and its generations
-- (src/store/generation.c); what is 'total', 'heap' or 'index'
CREATE OR REPLACE FUNCTION bench_store_bytes(what text) RETURNS float8
LANGUAGE sql AS $$
    SELECT sum(CASE what WHEN 'total' THEN pg_total_relation_size(r)
                         WHEN 'heap' THEN pg_relation_size(r)
                         ELSE pg_indexes_size(r) END)::float8
      FROM (SELECT 'idempotency.claims'::regclass AS r
            UNION ALL
            SELECT inhrelid::regclass FROM pg_inherits
             WHERE inhparent = 'idempotency.claims'::regclass) s
$$;
