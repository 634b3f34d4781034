-- bench/claims.sql: objects for the claim benchmark (bench/run claims).
--
-- The baseline is what teams write by hand: a processed-events table keyed
-- by (namespace, event_id) and a PL/pgSQL function doing INSERT ... ON
-- CONFLICT DO NOTHING.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;

DROP TABLE IF EXISTS bench_base, bench_ids, bench_results;
CREATE TABLE bench_base (
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

CREATE TABLE bench_results (round int, what text, usec float8);

-- 36-character UUID text ids
CREATE TABLE bench_ids AS
    SELECT gen_random_uuid()::text AS id FROM generate_series(1, :n);
ANALYZE bench_ids;
SELECT idem_namespace_define('bench', '7 days');
