-- bench/cas.sql: objects for the state-machine benchmark (bench/run cas).
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;

DROP TABLE IF EXISTS bench_orders, bench_cas_ids, bench_cas_results;
SELECT idem_machine_define('bench_order',
    '{"PENDING": ["PAID", "CANCELLED"], "PAID": ["SHIPPED", "CANCELLED"], "SHIPPED": ["DELIVERED"]}');
CREATE TABLE bench_orders (
    id       bigint PRIMARY KEY,
    status   text   NOT NULL,
    version  int    NOT NULL DEFAULT 0,
    amount   int    NOT NULL DEFAULT 100
);
INSERT INTO bench_orders (id, status) SELECT g, 'PENDING' FROM generate_series(1, :n) g;
SELECT idem_machine_bind('bench_orders', 'status', 'bench_order', 'version');
CREATE TABLE bench_cas_ids AS SELECT id FROM bench_orders ORDER BY random();
VACUUM ANALYZE bench_orders;
ANALYZE bench_cas_ids;

-- the hand-written baseline: an UPDATE guarded by the allowed predecessors
CREATE OR REPLACE FUNCTION bench_base_cas(p_id bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE bench_orders SET status = 'PAID', version = version + 1
     WHERE id = p_id AND status = ANY (ARRAY['PENDING']);
    RETURN FOUND;
END $$;

-- put every row back to PENDING, past the guard trigger
CREATE OR REPLACE PROCEDURE bench_cas_reset() LANGUAGE plpgsql AS $$
BEGIN
    SET LOCAL session_replication_role = replica;
    UPDATE bench_orders SET status = 'PENDING', version = 0;
END $$;

CREATE TABLE bench_cas_results (round int, what text, usec float8);
