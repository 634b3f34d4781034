-- idem_cas_status on rows of a bound table, and the guard trigger
SET client_min_messages = warning;

SELECT idem_machine_define('payment', '{"PENDING": ["PAID", "CANCELLED"],
                                        "PAID": ["SHIPPED", "REFUNDED"],
                                        "SHIPPED": ["DELIVERED"]}');
CREATE TABLE orders (
    id       bigint PRIMARY KEY,
    status   text   NOT NULL DEFAULT 'PENDING',
    version  int    NOT NULL DEFAULT 0,
    amount   int    NOT NULL DEFAULT 0,
    note     text
);
INSERT INTO orders (id) SELECT g FROM generate_series(1, 6) g;
SELECT idem_machine_bind('orders', 'status', 'payment', 'version');
SELECT rel, status_column, machine, version_column, check_inserts FROM idempotency.machine_bindings;
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'orders'::regclass ORDER BY 1;

-- every outcome
SELECT idem_cas_row('orders'::regclass, 1::bigint, 'PAID') AS applied;
SELECT idem_cas_row('orders'::regclass, 1::bigint, 'PAID') AS already;
SELECT idem_cas_row('orders'::regclass, 1::bigint, 'PENDING') AS rejected;
SELECT idem_cas_row('orders'::regclass, 1::bigint, 'SHIPPED', 0) AS stale;
SELECT idem_cas_row('orders'::regclass, 1::bigint, 'SHIPPED', 1) AS applied_with_version;
SELECT idem_cas_row('orders'::regclass, 404::bigint, 'PAID') AS missing;
-- a late PAID for a cancelled order does not resurrect it
SELECT idem_cas_row('orders'::regclass, 2::bigint, 'CANCELLED') AS cancel,
       idem_cas_row('orders'::regclass, 2::bigint, 'PAID') AS late_paid;
SELECT id, status, version FROM orders ORDER BY id;

-- 'already' and 'rejected' write nothing: same tuple, same version
SELECT ctid AS ctid_before FROM orders WHERE id = 1 \gset
SELECT idem_cas_row('orders'::regclass, 1::bigint, 'SHIPPED') AS already_again,
       idem_cas_row('orders'::regclass, 1::bigint, 'PAID') AS rejected_again;
SELECT ctid = :'ctid_before' AS same_tuple, version FROM orders WHERE id = 1;

-- keys of other types are converted to the key's type
SELECT idem_cas_row('orders'::regclass, 3, 'PAID') AS int4_key;
SELECT idem_cas_row('orders'::regclass, 3::smallint, 'SHIPPED') AS int2_key;
SELECT idem_cas_row('orders'::regclass, '3'::text, 'DELIVERED') AS text_key;
-- only as "WHERE id = $1" would: implicit casts, or input from a text value;
-- numeric would need an assignment cast, which rounds
SELECT idem_cas_row('orders'::regclass, 3.5, 'DELIVERED') AS numeric_key;
\echo :LAST_ERROR_SQLSTATE
SELECT idem_cas_row('orders'::regclass, now(), 'PAID');
\echo :LAST_ERROR_SQLSTATE
-- an untyped parameter cannot decide anyelement: drivers cast the key
PREPARE cas_untyped AS SELECT idem_cas_row('orders', $1, $2);
\echo :LAST_ERROR_SQLSTATE
PREPARE cas_text AS SELECT idem_cas_row('orders', $1::text, $2);
EXECUTE cas_text('3', 'DELIVERED');
EXECUTE cas_text('three', 'DELIVERED');
\echo :LAST_ERROR_SQLSTATE
DEALLOCATE cas_text;
-- an int8 key on an int4 key column compares through the cross-type
-- operator, as in a WHERE clause: no overflow, just missing
CREATE TABLE small_pk (id int PRIMARY KEY, status text NOT NULL DEFAULT 'PENDING');
INSERT INTO small_pk VALUES (1);
SELECT idem_machine_bind('small_pk', 'status', 'payment');
SELECT idem_cas_row('small_pk'::regclass, 1::bigint, 'PAID') AS int8_key,
       idem_cas_row('small_pk'::regclass, 4294967297::bigint, 'PAID') AS too_big_int8_key,
       idem_cas_row('small_pk'::regclass, 1::smallint, 'PAID') AS int2_key;
DROP TABLE small_pk;
-- a key longer than a varchar key column allows is simply missing
CREATE TABLE codes (code varchar(4) PRIMARY KEY, status text NOT NULL DEFAULT 'PENDING');
INSERT INTO codes VALUES ('AB');
SELECT idem_machine_bind('codes', 'status', 'payment');
SELECT idem_cas_row('codes'::regclass, 'AB'::text, 'PAID') AS short_key,
       idem_cas_row('codes'::regclass, 'ABCDEFG'::text, 'PAID') AS long_key,
       idem_cas_row('codes'::regclass, 'AB'::name, 'PAID') AS name_key;
DROP TABLE codes;

-- uuid keys, an enum status, no version column
CREATE TYPE ticket_state AS ENUM ('OPEN', 'CLOSED');
SELECT idem_machine_define('ticket', '{"OPEN": ["CLOSED"]}');
CREATE TABLE tickets (id uuid PRIMARY KEY, state ticket_state NOT NULL DEFAULT 'OPEN');
INSERT INTO tickets VALUES ('6f1c2a9e-5b7d-4c3e-9a8b-1d2e3f4a5b6c');
SELECT idem_machine_bind('tickets', 'state', 'ticket');
SELECT idem_cas_row('tickets'::regclass, '6f1c2a9e-5b7d-4c3e-9a8b-1d2e3f4a5b6c'::uuid, 'CLOSED') AS uuid_key,
       idem_cas_row('tickets'::regclass, '6f1c2a9e-5b7d-4c3e-9a8b-1d2e3f4a5b6c'::text, 'CLOSED') AS text_for_uuid;
SELECT state FROM tickets;
SELECT idem_cas_row('tickets'::regclass, '6f1c2a9e-5b7d-4c3e-9a8b-1d2e3f4a5b6c'::uuid, 'CLOSED', 3);
\echo :LAST_ERROR_SQLSTATE
-- the guard works on enums too
UPDATE tickets SET state = 'OPEN';
\echo :LAST_ERROR_SQLSTATE
-- a state the machine has but the enum lacks
SELECT idem_machine_define('ticket', '{"OPEN": ["CLOSED", "ARCHIVED"]}');
INSERT INTO tickets VALUES ('00000000-0000-0000-0000-000000000002');
SELECT idem_cas_row('tickets'::regclass, '00000000-0000-0000-0000-000000000002'::uuid, 'ARCHIVED');
\echo :LAST_ERROR_SQLSTATE

-- the guard trigger: plain UPDATEs must follow the machine too
UPDATE orders SET status = 'PAID' WHERE id = 4;
UPDATE orders SET status = 'PAID' WHERE id = 4;
UPDATE orders SET status = 'PENDING' WHERE id = 4;
\echo :LAST_ERROR_SQLSTATE
UPDATE orders SET status = 'DELIVERED' WHERE id = 5;
UPDATE orders SET status = 'LOST' WHERE id = 5;
\echo :LAST_ERROR_SQLSTATE
UPDATE orders SET note = 'no status change' WHERE id = 5;
DO $$
BEGIN
    UPDATE orders SET status = 'SHIPPED' WHERE id = 6;
EXCEPTION WHEN SQLSTATE 'ID002' THEN
    RAISE WARNING 'caught: %', SQLERRM;
END $$;
SELECT id, status, note FROM orders WHERE id IN (4, 5, 6) ORDER BY id;

-- row triggers fire on a CAS as on an UPDATE
CREATE TABLE orders_audit (id bigint, old_status text, new_status text);
CREATE FUNCTION orders_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO orders_audit VALUES (NEW.id, OLD.status, NEW.status);
    RETURN NEW;
END $$;
CREATE TRIGGER orders_audit AFTER UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION orders_audit();
SELECT idem_cas_row('orders'::regclass, 6::bigint, 'PAID');
SELECT idem_cas_row('orders'::regclass, 6::bigint, 'PAID');
SELECT * FROM orders_audit;
-- a BEFORE trigger that skips the row makes the CAS report 'rejected'
CREATE FUNCTION orders_freeze() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE WHEN OLD.note = 'frozen' THEN NULL ELSE NEW END;
END $$;
CREATE TRIGGER orders_freeze BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION orders_freeze();
UPDATE orders SET note = 'frozen' WHERE id = 6;
SELECT idem_cas_row('orders'::regclass, 6::bigint, 'SHIPPED') AS skipped;
SELECT status FROM orders WHERE id = 6;
DROP TRIGGER orders_freeze ON orders;
-- so does one that writes the old status back: the row stays where it was
CREATE FUNCTION orders_keep_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.status := OLD.status;
    RETURN NEW;
END $$;
CREATE TRIGGER orders_keep_status BEFORE UPDATE ON orders FOR EACH ROW
    WHEN (OLD.note = 'frozen') EXECUTE FUNCTION orders_keep_status();
SELECT status AS status_before FROM orders WHERE id = 6;
SELECT idem_cas_row('orders'::regclass, 6::bigint, 'SHIPPED') AS kept_back;
SELECT status AS status_after FROM orders WHERE id = 6;
DROP TRIGGER orders_keep_status ON orders;
DROP FUNCTION orders_keep_status();
-- per-column triggers see the CAS as an UPDATE of the status and version
CREATE TABLE orders_col_audit (trigger_name text, id bigint);
CREATE FUNCTION orders_col_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO orders_col_audit VALUES (TG_NAME, NEW.id);
    RETURN NEW;
END $$;
CREATE TRIGGER of_status AFTER UPDATE OF status ON orders FOR EACH ROW EXECUTE FUNCTION orders_col_audit();
CREATE TRIGGER of_version BEFORE UPDATE OF version ON orders FOR EACH ROW EXECUTE FUNCTION orders_col_audit();
CREATE TRIGGER of_note AFTER UPDATE OF note ON orders FOR EACH ROW EXECUTE FUNCTION orders_col_audit();
SELECT idem_cas_row('orders'::regclass, 6::bigint, 'SHIPPED') AS applied,
       idem_cas_row('orders'::regclass, 6::bigint, 'SHIPPED') AS already;
SELECT * FROM orders_col_audit ORDER BY trigger_name;
DROP TRIGGER of_status ON orders;
DROP TRIGGER of_version ON orders;
DROP TRIGGER of_note ON orders;
DROP TABLE orders_col_audit;
DROP FUNCTION orders_col_audit();
-- constraints are checked
ALTER TABLE orders ADD CONSTRAINT no_refund_of_big CHECK (NOT (status = 'REFUNDED' AND amount > 100));
UPDATE orders SET amount = 500 WHERE id = 4;
SELECT idem_cas_row('orders'::regclass, 4::bigint, 'REFUNDED');
\echo :LAST_ERROR_SQLSTATE
-- a statement that goes on to write a row its own CAS moved gets the error
-- an UPDATE run through SPI would give, not a silently lost write
UPDATE orders SET note = idem_cas_row('orders'::regclass, id, 'SHIPPED') WHERE id = 4;
\echo :LAST_ERROR_SQLSTATE
SELECT status, note FROM orders WHERE id = 4;

-- a CAS and the business write in one transaction, rolled back together
BEGIN;
SELECT idem_cas_row('orders'::regclass, 5::bigint, 'PAID');
ROLLBACK;
SELECT status, version FROM orders WHERE id = 5;
-- two moves of one row in one statement
SELECT idem_cas_row('orders'::regclass, 5::bigint, 'PAID') AS first,
       idem_cas_row('orders'::regclass, 5::bigint, 'SHIPPED') AS second;
SELECT status, version FROM orders WHERE id = 5;

-- NULL status: "no state yet", which may only move to an initial state
CREATE TABLE drafts (id int PRIMARY KEY, status text);
INSERT INTO drafts VALUES (1, NULL), (2, NULL);
SELECT idem_machine_bind('drafts', 'status', 'payment');
SELECT idem_cas_row('drafts'::regclass, 1, 'PAID') AS from_null_to_paid,
       idem_cas_row('drafts'::regclass, 1, 'PENDING') AS from_null_to_pending;
UPDATE drafts SET status = 'PENDING' WHERE id = 2;
UPDATE drafts SET status = NULL WHERE id = 2;
-- INSERTs checked on request
SELECT idem_machine_bind('drafts', 'status', 'payment', check_inserts => true);
INSERT INTO drafts VALUES (3, 'PENDING');
INSERT INTO drafts VALUES (4, 'SHIPPED');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO drafts VALUES (5, NULL);
SELECT id, status FROM drafts ORDER BY id;

-- binding errors
CREATE TABLE no_pk (id int, status text);
INSERT INTO no_pk VALUES (1, 'PENDING');
SELECT idem_machine_bind('no_pk', 'status', 'payment');
SELECT idem_cas_row('no_pk'::regclass, 1, 'PAID');
\echo :LAST_ERROR_SQLSTATE
UPDATE no_pk SET status = 'SHIPPED';
CREATE TABLE two_col_pk (a int, b int, status text, PRIMARY KEY (a, b));
SELECT idem_machine_bind('two_col_pk', 'status', 'payment');
SELECT idem_cas_row('two_col_pk'::regclass, 1, 'PAID');
CREATE TABLE unbound (id int PRIMARY KEY, status text);
SELECT idem_cas_row('unbound'::regclass, 1, 'PAID');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_machine_bind('unbound', 'nope', 'payment');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_machine_bind('unbound', 'status', 'payment', 'status');
SELECT idem_machine_bind('unbound', 'status', 'no_machine');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE wrong_version (id int PRIMARY KEY, status text, version text);
SELECT idem_machine_bind('wrong_version', 'status', 'payment', 'version');
\echo :LAST_ERROR_SQLSTATE
CREATE VIEW orders_view AS SELECT * FROM orders;
SELECT idem_machine_bind('orders_view', 'status', 'payment');
\echo :LAST_ERROR_SQLSTATE
-- the extension's own tables cannot be bound, not even by a superuser:
-- the claims (every claim would fail on the guard trigger) and catalogs
SELECT idem_machine_bind('idempotency.claims', 'key', 'payment');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_machine_bind('idempotency.machine_bindings', 'status_column', 'payment');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS no_trigger_on_claims FROM pg_trigger WHERE tgrelid = 'idempotency.claims'::regclass AND tgname LIKE 'idem_state_guard%';
SELECT idem_claim('bind-refused', 'cas_bind') AS claims_still_work;
SELECT idem_machine_bind(NULL, 'status', 'payment');
SELECT idem_machine_bind('unbound', NULL, 'payment');
SELECT idem_cas_row('orders'::regclass, NULL::bigint, 'PAID');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_cas_row('orders'::regclass, 1::bigint, NULL);
SELECT idem_cas_row('orders'::regclass, 1::bigint, 'LOST');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_cas_row('unbound'::regclass, 1, 'PAID', 1);
SELECT idem_machine_bind('unbound', 'status', 'payment');
SELECT idem_cas_row('unbound'::regclass, 1, 'PAID', 1);
\echo :LAST_ERROR_SQLSTATE
BEGIN READ ONLY;
SELECT idem_cas_row('orders'::regclass, 1::bigint, 'DELIVERED');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- the current status is not a state of the machine
INSERT INTO unbound VALUES (1, 'LEGACY');
SELECT idem_cas_row('unbound'::regclass, 1, 'PAID');
\echo :LAST_ERROR_SQLSTATE

-- privileges: only the owner binds; a CAS needs UPDATE, checked as the caller
CREATE ROLE regress_idem_cas_reader;
CREATE ROLE regress_idem_cas_writer;
GRANT SELECT ON orders TO regress_idem_cas_reader;
GRANT SELECT, UPDATE ON orders TO regress_idem_cas_writer;
GRANT INSERT ON orders_audit TO regress_idem_cas_writer;
SET ROLE regress_idem_cas_reader;
SELECT idem_cas_row('orders'::regclass, 5::bigint, 'DELIVERED');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_machine_bind('orders', 'status', 'payment', 'version');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_machine_unbind('orders');
SELECT idem_machine_define('payment', '{"A": []}');
SELECT idem_machine_drop('payment');
RESET ROLE;
SET ROLE regress_idem_cas_writer;
SELECT idem_cas_row('orders'::regclass, 5::bigint, 'DELIVERED') AS writer;
RESET ROLE;
-- row-level security is not bypassed
ALTER TABLE orders ENABLE ROW LEVEL SECURITY;
CREATE POLICY orders_low ON orders USING (id < 3);
SET ROLE regress_idem_cas_writer;
SELECT idem_cas_row('orders'::regclass, 4::bigint, 'PAID');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
ALTER TABLE orders DISABLE ROW LEVEL SECURITY;
DROP POLICY orders_low ON orders;

-- a machine cannot be dropped while bound; unbinding removes the guard
SELECT idem_machine_drop('payment');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_machine_unbind('drafts'), idem_machine_unbind('drafts');
UPDATE drafts SET status = 'ANYTHING' WHERE id = 1;
SELECT tgname FROM pg_trigger WHERE tgrelid = 'drafts'::regclass;
-- dropping a bound table forgets its binding
DROP TABLE no_pk, two_col_pk, unbound, wrong_version;
SELECT rel FROM idempotency.machine_bindings ORDER BY rel::text;
DROP VIEW orders_view;
DROP TABLE orders_audit, orders, tickets, drafts;
DROP FUNCTION orders_audit(), orders_freeze();
SELECT count(*) AS bindings_left FROM idempotency.machine_bindings;
-- no trigger can move a bound row against its machine: the guard judges
-- the stored row, after every BEFORE trigger, whatever the UPDATE names
CREATE TABLE go (id int PRIMARY KEY, status text NOT NULL, note text);
INSERT INTO go VALUES (1, 'PENDING');
SELECT idem_machine_bind('go', 'status', 'payment');
UPDATE go SET status = 'PAID';
UPDATE go SET status = 'SHIPPED';
CREATE FUNCTION go_reset() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.status := 'PENDING'; RETURN NEW; END $$;
CREATE TRIGGER zzz_reset BEFORE UPDATE ON go FOR EACH ROW EXECUTE FUNCTION go_reset();
UPDATE go SET note = 'reset';
\echo :LAST_ERROR_SQLSTATE
SELECT status, note FROM go;
DROP TABLE go;
DROP FUNCTION go_reset();

SELECT idem_machine_drop('payment');
SELECT idem_machine_drop('ticket');
DROP ROLE regress_idem_cas_reader, regress_idem_cas_writer;
DROP TYPE ticket_state;
