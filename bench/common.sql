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
