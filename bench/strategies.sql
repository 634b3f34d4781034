-- bench/strategies.sql: the tables of the strategies benchmark.
--
-- Every strategy applies the same business write per event: a ledger row
-- (the event number, an account, an amount) and a balance update.  The
-- ledger is what the correctness check counts: an event with two rows was
-- applied twice, one with none was lost.
SET client_min_messages = warning;
DROP TABLE IF EXISTS accounts, ledger, processed_naive, processed, orders_sql, orders_cas;
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0);
CREATE TABLE ledger (event_no bigint NOT NULL, account int NOT NULL, amount int NOT NULL);

-- a: the seed articles' incident, a processed-events table with an index
-- for the lookup but no unique key
CREATE TABLE processed_naive (event_id text NOT NULL, processed_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX processed_naive_event_id ON processed_naive (event_id);

-- b, d and the batched baseline: the recommended unique backstop
CREATE TABLE processed (event_id text PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now());

-- g: a "payment succeeded" event moves order n from PENDING to PAID;
-- hand-written on orders_sql, idem_cas_row on orders_cas
CREATE TABLE orders_sql (id bigint PRIMARY KEY, status text NOT NULL);
CREATE TABLE orders_cas (id bigint PRIMARY KEY, status text NOT NULL);
SELECT idem_machine_define('bench_order', '{"PENDING": ["PAID", "CANCELLED"], "PAID": ["SHIPPED", "REFUNDED"]}');
SELECT idem_machine_bind('orders_cas', 'status', 'bench_order');

-- between runs: empty everything, fresh accounts and orders
CREATE PROCEDURE bench_strategies_reset(accounts int, orders int) LANGUAGE sql AS $$
    TRUNCATE ledger, processed_naive, processed, orders_sql, orders_cas, accounts;
    DELETE FROM idempotency.claims;
    INSERT INTO accounts SELECT g, 0 FROM generate_series(1, accounts) g;
    INSERT INTO orders_sql SELECT g, 'PENDING' FROM generate_series(1, orders) g;
    INSERT INTO orders_cas SELECT g, 'PENDING' FROM generate_series(1, orders) g;
$$;
