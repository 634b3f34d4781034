-- the inbox trigger's id is the column's canonical text: one value, one id,
-- whatever the session's settings or the way the value was written
CREATE TABLE inbox_ts (at timestamptz NOT NULL, body text);
CREATE TRIGGER inbox_ts_dedup BEFORE INSERT ON inbox_ts
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('at', 'trigger_ids_ts');
SET TimeZone = 'UTC';
INSERT INTO inbox_ts VALUES ('2026-12-01 09:00:00+00', 'utc');
SET TimeZone = 'Europe/Paris';
SET DateStyle = 'SQL, DMY';
INSERT INTO inbox_ts VALUES ('2026-12-01 10:00:00+01', 'paris');
RESET TimeZone;
RESET DateStyle;
SELECT count(*) AS ts_rows FROM inbox_ts;
SELECT event_id FROM idem_claims WHERE namespace = 'trigger_ids_ts';

CREATE TABLE inbox_num (n numeric NOT NULL, f float8, d date, b bytea);
CREATE TRIGGER inbox_num_dedup BEFORE INSERT ON inbox_num
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('n', 'trigger_ids_num');
INSERT INTO inbox_num (n) VALUES (1.0), (1.00), (1), (2.50);
SELECT count(*) AS num_rows FROM inbox_num;
SELECT event_id FROM idem_claims WHERE namespace = 'trigger_ids_num' ORDER BY 1;

CREATE TRIGGER inbox_f_dedup BEFORE INSERT ON inbox_num
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('f', 'trigger_ids_f');
SET extra_float_digits = 0;
INSERT INTO inbox_num VALUES (10, 0.1, NULL, NULL);
SET extra_float_digits = 3;
INSERT INTO inbox_num VALUES (11, 0.1, NULL, NULL);
RESET extra_float_digits;
SELECT event_id FROM idem_claims WHERE namespace = 'trigger_ids_f';
DROP TRIGGER inbox_f_dedup ON inbox_num;

CREATE TRIGGER inbox_b_dedup BEFORE INSERT ON inbox_num
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('b', 'trigger_ids_b');
SET bytea_output = 'escape';
INSERT INTO inbox_num VALUES (20, NULL, NULL, '\x0102');
SET bytea_output = 'hex';
INSERT INTO inbox_num VALUES (21, NULL, NULL, '\x0102');
SELECT event_id FROM idem_claims WHERE namespace = 'trigger_ids_b';
DROP TRIGGER inbox_b_dedup ON inbox_num;

-- a type whose text can vary is refused as an id
CREATE TABLE inbox_iv (iv interval NOT NULL);
CREATE TRIGGER inbox_iv_dedup BEFORE INSERT ON inbox_iv
    FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('iv', 'trigger_ids_iv');
INSERT INTO inbox_iv VALUES ('1 day');
\echo :LAST_ERROR_SQLSTATE
DROP TABLE inbox_ts, inbox_num, inbox_iv;
