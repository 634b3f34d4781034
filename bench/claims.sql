-- bench/claims.sql: objects for the claim benchmark (bench/run claims).
--
-- The baseline, bench_base and bench_base_claim, is in bench/common.sql.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;

DROP TABLE IF EXISTS bench_ids, bench_results;
TRUNCATE bench_base;

CREATE TABLE bench_results (round int, what text, usec float8);

-- 36-character UUID text ids
CREATE TABLE bench_ids AS
    SELECT gen_random_uuid()::text AS id FROM generate_series(1, :n);
ANALYZE bench_ids;
SELECT idem_namespace_define('bench', '7 days');
-- a week's TTL: its claims live in generations (src/store/generation.c), as by
-- default once the purge has run; measure that path
SELECT idem_generation_switch();
