-- idem_claim_trigger: an idempotent inbox table
SET client_min_messages = warning;

CREATE TABLE inbox (
    event_id   uuid PRIMARY KEY,
    payload    jsonb NOT NULL,
    received   timestamptz NOT NULL DEFAULT now()
);
CREATE TRIGGER inbox_dedup BEFORE INSERT ON inbox
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('event_id', 'trigger_inbox');

INSERT INTO inbox (event_id, payload)
VALUES ('0d6f0c36-3c7e-4c8a-9a8e-35c2a1a4e001', '{"amount": 1}'),
       ('0d6f0c36-3c7e-4c8a-9a8e-35c2a1a4e002', '{"amount": 2}');
-- redelivery: the duplicate row is skipped, the new one stored
INSERT INTO inbox (event_id, payload)
VALUES ('0d6f0c36-3c7e-4c8a-9a8e-35c2a1a4e001', '{"amount": 1}'),
       ('0d6f0c36-3c7e-4c8a-9a8e-35c2a1a4e003', '{"amount": 3}');
-- a repeat inside one statement is skipped too
INSERT INTO inbox (event_id, payload)
VALUES ('0d6f0c36-3c7e-4c8a-9a8e-35c2a1a4e004', '{"amount": 4}'),
       ('0d6f0c36-3c7e-4c8a-9a8e-35c2a1a4e004', '{"amount": 4}');
SELECT event_id, payload FROM inbox ORDER BY event_id;
SELECT event_id FROM idem_claims WHERE namespace = 'trigger_inbox' ORDER BY event_id;

-- a rolled-back insert releases its claims
BEGIN;
INSERT INTO inbox (event_id, payload) VALUES ('0d6f0c36-3c7e-4c8a-9a8e-35c2a1a4e005', '{}');
ROLLBACK;
INSERT INTO inbox (event_id, payload) VALUES ('0d6f0c36-3c7e-4c8a-9a8e-35c2a1a4e005', '{"amount": 5}');
SELECT count(*) FROM inbox;

-- COPY goes through the trigger as well
COPY inbox (event_id, payload) FROM stdin;
0d6f0c36-3c7e-4c8a-9a8e-35c2a1a4e005	{"amount": 5}
0d6f0c36-3c7e-4c8a-9a8e-35c2a1a4e006	{"amount": 6}
\.
SELECT count(*) FROM inbox;

-- defaults: one argument means the 'default' namespace; any column type
CREATE TABLE inbox_int (id bigint, note text);
CREATE TRIGGER inbox_int_dedup BEFORE INSERT ON inbox_int
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('id');
INSERT INTO inbox_int VALUES (1, 'a'), (2, 'b'), (1, 'again');
SELECT * FROM inbox_int ORDER BY id;
SELECT idem_claimed('1') AS int_id_in_default_ns;

-- a fingerprint column: a redelivery with another payload is an error
CREATE TABLE inbox_fp (id text, body text);
CREATE TRIGGER inbox_fp_dedup BEFORE INSERT ON inbox_fp
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('id', 'trigger_fp', 'body');
INSERT INTO inbox_fp VALUES ('k1', 'hello');
INSERT INTO inbox_fp VALUES ('k1', 'hello');
INSERT INTO inbox_fp VALUES ('k1', 'tampered');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM inbox_fp;

-- misuse
INSERT INTO inbox (event_id, payload) VALUES (NULL, '{}');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE inbox_bad (id text);
CREATE TRIGGER bad_after AFTER INSERT ON inbox_bad
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('id');
INSERT INTO inbox_bad VALUES ('x');
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER bad_after ON inbox_bad;
CREATE TRIGGER bad_stmt BEFORE INSERT ON inbox_bad
    FOR EACH STATEMENT EXECUTE FUNCTION idem_claim_trigger('id');
INSERT INTO inbox_bad VALUES ('x');
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER bad_stmt ON inbox_bad;
CREATE TRIGGER bad_update BEFORE UPDATE ON inbox_bad
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('id');
INSERT INTO inbox_bad VALUES ('x');
UPDATE inbox_bad SET id = 'y';
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER bad_update ON inbox_bad;
CREATE TRIGGER bad_noargs BEFORE INSERT ON inbox_bad
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger();
INSERT INTO inbox_bad VALUES ('z');
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER bad_noargs ON inbox_bad;
CREATE TRIGGER bad_manyargs BEFORE INSERT ON inbox_bad
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('id', 'ns', 'id', 'extra');
INSERT INTO inbox_bad VALUES ('z');
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER bad_manyargs ON inbox_bad;
CREATE TRIGGER bad_column BEFORE INSERT ON inbox_bad
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('no_such_column');
INSERT INTO inbox_bad VALUES ('z');
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER bad_column ON inbox_bad;
CREATE TRIGGER bad_ns BEFORE INSERT ON inbox_bad
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('id', '');
INSERT INTO inbox_bad VALUES ('z');
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER bad_ns ON inbox_bad;
SELECT * FROM inbox_bad ORDER BY id;
