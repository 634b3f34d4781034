-- bench/streams.sql: objects for the watermark benchmark (bench/run streams)
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
DROP TABLE IF EXISTS streams_results, bench_wm, stream_effects;
DELETE FROM idempotency.watermarks;

CREATE TABLE streams_results (round int, what text, v float8);

-- The baseline is what a team writes by hand: a marks table keyed by
-- (stream, partition) and a PL/pgSQL function doing INSERT ... ON CONFLICT
-- DO UPDATE ... WHERE stored.seq < excluded.seq, with the same fillfactor
-- and collation as idempotency.watermarks.
CREATE TABLE bench_wm (
    stream text COLLATE "C" NOT NULL,
    partition integer NOT NULL,
    seq bigint NOT NULL,
    PRIMARY KEY (stream, partition)
) WITH (fillfactor = 70);

CREATE OR REPLACE FUNCTION bench_base_advance(p_stream text, p_partition int, p_seq bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    n int;
BEGIN
    INSERT INTO bench_wm AS stored (stream, partition, seq) VALUES (p_stream, p_partition, p_seq)
    ON CONFLICT (stream, partition) DO UPDATE SET seq = excluded.seq WHERE stored.seq < excluded.seq;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n > 0;
END $$;

-- the business writes of the consumer runs
CREATE TABLE stream_effects (partition int NOT NULL, seq bigint NOT NULL, amount int NOT NULL);
