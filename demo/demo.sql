-- demo/demo.sql: the at-least-once delivery simulation behind demo/run.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
SELECT idem_namespace_define('payments', '90 days');

-- The stream: :events payment callbacks for :accounts accounts.  About 30%
-- are delivered twice: half of the redeliveries arrive right behind the
-- original, as when a broker redelivers after a timed-out ack, the other
-- half a few hundred deliveries later, as a provider's retry.
CREATE TABLE demo_events AS
    SELECT gen_random_uuid() AS event_id,
           1 + (random() * (:accounts - 1))::int AS account,
           (100 + random() * 99900)::bigint AS amount_cents,
           random() < 0.3 AS redelivered,
           g AS position,
           g + CASE WHEN random() < 0.5 THEN 0.5 ELSE 1 + random() * 500 END AS redelivery_at
      FROM generate_series(1, :events) g;
CREATE TABLE demo_deliveries (seq bigint PRIMARY KEY, event_id uuid, account int, amount_cents bigint);
INSERT INTO demo_deliveries
SELECT row_number() OVER (ORDER BY position), event_id, account, amount_cents
  FROM (SELECT event_id, account, amount_cents, position::numeric AS position FROM demo_events
        UNION ALL
        SELECT event_id, account, amount_cents, redelivery_at FROM demo_events WHERE redelivered) d;

-- One cursor per consumer group; nextval hands each delivery to one consumer.
CREATE SEQUENCE demo_cursor_idem;
CREATE SEQUENCE demo_cursor_naive;
CREATE TABLE demo_balances (account int PRIMARY KEY, cents bigint NOT NULL DEFAULT 0);
CREATE TABLE demo_naive_balances (account int PRIMARY KEY, cents bigint NOT NULL DEFAULT 0);
INSERT INTO demo_balances (account) SELECT g FROM generate_series(1, :accounts) g;
INSERT INTO demo_naive_balances (account) SELECT g FROM generate_series(1, :accounts) g;
-- the hand-rolled processed-events table, without a unique key
CREATE TABLE demo_naive_processed (event_id uuid, processed_at timestamptz DEFAULT clock_timestamp());

-- The idempotent consumer: claim and business write in one transaction.
CREATE PROCEDURE demo_consume_idem(processing_ms int) LANGUAGE plpgsql AS $$
DECLARE
    d demo_deliveries;
    pos bigint;
BEGIN
    LOOP
        pos := nextval('demo_cursor_idem');
        SELECT * INTO d FROM demo_deliveries WHERE seq = pos;
        EXIT WHEN NOT FOUND;
        IF idem_claim(d.event_id::text, 'payments') THEN
            PERFORM pg_sleep(processing_ms / 1000.0);      -- the business work
            UPDATE demo_balances SET cents = cents + d.amount_cents WHERE account = d.account;
        END IF;
        COMMIT;
    END LOOP;
END $$;

-- The naive consumer of the seed articles' incident: check, then mark.
CREATE PROCEDURE demo_consume_naive(processing_ms int) LANGUAGE plpgsql AS $$
DECLARE
    d demo_deliveries;
    pos bigint;
BEGIN
    LOOP
        pos := nextval('demo_cursor_naive');
        SELECT * INTO d FROM demo_deliveries WHERE seq = pos;
        EXIT WHEN NOT FOUND;
        IF NOT EXISTS (SELECT 1 FROM demo_naive_processed WHERE event_id = d.event_id) THEN
            PERFORM pg_sleep(processing_ms / 1000.0);      -- the business work
            INSERT INTO demo_naive_processed (event_id) VALUES (d.event_id);
            UPDATE demo_naive_balances SET cents = cents + d.amount_cents WHERE account = d.account;
        END IF;
        COMMIT;
    END LOOP;
END $$;

-- Progress, one line
CREATE VIEW demo_progress AS
SELECT (SELECT count(*) FROM demo_deliveries) AS total,
       coalesce((SELECT claims + duplicates FROM idem_stats WHERE namespace = 'payments'), 0) AS idem_delivered,
       coalesce((SELECT claims FROM idem_stats WHERE namespace = 'payments'), 0) AS idem_applied,
       coalesce((SELECT duplicates FROM idem_stats WHERE namespace = 'payments'), 0) AS idem_suppressed,
       (SELECT least(last_value, (SELECT count(*) FROM demo_deliveries)) FROM demo_cursor_naive) AS naive_delivered,
       (SELECT count(*) FROM demo_naive_processed) AS naive_applied,
       (SELECT count(*) - count(DISTINCT event_id) FROM demo_naive_processed) AS naive_double;
