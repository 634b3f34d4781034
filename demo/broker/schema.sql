-- demo/broker/schema.sql: the tables of one round of the broker demo
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
DROP TABLE IF EXISTS broker_published, broker_accounts, broker_applied, broker_counts;
-- every distinct event the producer published, for the check
CREATE TABLE broker_published (event_id uuid PRIMARY KEY, account int NOT NULL, amount int NOT NULL);
-- the business state
CREATE TABLE broker_accounts (id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0);
INSERT INTO broker_accounts (id) SELECT g FROM generate_series(1, :accounts) g;
-- one row per effect applied: no unique key, so a double shows
CREATE TABLE broker_applied (event_id uuid NOT NULL);
-- deliveries the claims refused
CREATE TABLE broker_counts (refused bigint NOT NULL);
INSERT INTO broker_counts VALUES (0);
DELETE FROM idempotency.claims
 WHERE ns IN (SELECT id FROM idempotency.namespaces WHERE name = 'broker');
