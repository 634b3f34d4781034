-- Watermarks of ordered streams: idem_advance, idem_watermark,
-- idem_stream_drop and idem_streams
SET client_min_messages = warning;

-- the first advance of a pair sets its mark
SELECT idem_watermark('orders', 0);
SELECT idem_advance('orders', 0, 10);
SELECT idem_watermark('orders', 0);
-- at or below the mark: a redelivery, nothing moves
SELECT idem_advance('orders', 0, 10);
SELECT idem_advance('orders', 0, 3);
SELECT idem_advance('orders', 0, 0);
SELECT idem_watermark('orders', 0);
-- above it: the mark moves, gaps allowed
SELECT idem_advance('orders', 0, 11);
SELECT idem_advance('orders', 0, 500);
SELECT idem_watermark('orders', 0);
-- partitions and streams are independent; seq 0 is a first mark
SELECT idem_advance('orders', 1, 0);
SELECT idem_advance('orders', 1, 0);
SELECT idem_advance('payments', 0, 7);
SELECT idem_advance('Orders', 0, 1);      -- stream names are case-sensitive
SELECT idem_advance('orders', 2147483647, 9223372036854775807);
SELECT idem_advance('orders', 2147483647, 9223372036854775807);

-- the mark moves with the transaction: a rollback restores it
BEGIN;
SELECT idem_advance('orders', 0, 600);
SELECT idem_watermark('orders', 0);
ROLLBACK;
SELECT idem_watermark('orders', 0);
BEGIN;
SELECT idem_advance('fresh', 0, 1);
ROLLBACK;
SELECT idem_watermark('fresh', 0);
-- a savepoint rolled back restores it too
BEGIN;
SELECT idem_advance('orders', 0, 700);
SAVEPOINT s;
SELECT idem_advance('orders', 0, 800);
ROLLBACK TO s;
SELECT idem_watermark('orders', 0);
COMMIT;
SELECT idem_watermark('orders', 0);
-- several advances of one pair in a transaction (a batch per call)
BEGIN;
SELECT idem_advance('orders', 3, s) FROM generate_series(1, 5) s;
SELECT idem_advance('orders', 3, 2);
COMMIT;
SELECT idem_watermark('orders', 3);
-- many pairs in one transaction
SELECT count(*) FILTER (WHERE idem_advance('many', p, 1)) FROM generate_series(0, 4999) p;
SELECT count(*) FILTER (WHERE idem_advance('many', p, 1)) FROM generate_series(0, 4999) p;
SELECT count(*) FILTER (WHERE idem_advance('many', p, 2)) FROM generate_series(0, 4999) p;

-- fencing: epochs only go up
SELECT idem_advance('fenced', 0, 1, 1);
SELECT idem_advance('fenced', 0, 2, 1);
SELECT idem_advance('fenced', 0, 3, 0);          -- a zombie of epoch 0
\echo :LAST_ERROR_SQLSTATE
SELECT idem_advance('fenced', 0, 3);             -- no epoch on a fenced pair
\echo :LAST_ERROR_SQLSTATE
-- a new epoch is recorded even by a redelivery, and fences the old one
SELECT idem_advance('fenced', 0, 2, 5);
SELECT idem_advance('fenced', 0, 3, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_advance('fenced', 0, 3, 5);
SELECT stream, partition, mark, epoch, updated_at = now() AS updated_now
  FROM idem_streams WHERE stream = 'fenced';
-- a pair without an epoch takes one
SELECT idem_advance('orders', 1, 1, 3);
SELECT epoch FROM idem_streams WHERE stream = 'orders' AND partition = 1;
-- a fenced call changes nothing, and its transaction can go on
BEGIN;
SAVEPOINT s;
SELECT idem_advance('fenced', 0, 99, 4);
ROLLBACK TO s;
SELECT idem_advance('fenced', 0, 4, 5);
COMMIT;
SELECT mark, epoch FROM idem_streams WHERE stream = 'fenced';

-- the view
SELECT stream, partition, mark, epoch FROM idem_streams
 WHERE stream IN ('orders', 'payments', 'Orders') ORDER BY stream COLLATE "C", partition;

-- errors
SELECT idem_advance(NULL, 0, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_advance('s', NULL, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_advance('s', 0, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_advance('', 0, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_advance(repeat('x', 257), 0, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_advance('s', -1, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_advance('s', 0, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_advance('s', 0, 1, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_watermark(NULL, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_watermark('s', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_stream_drop(NULL);
\echo :LAST_ERROR_SQLSTATE
-- nothing of the failed calls was written
SELECT count(*) FROM idem_streams WHERE stream = 's';
-- a read-only transaction
BEGIN READ ONLY;
SELECT idem_advance('orders', 0, 1000);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT idem_watermark('orders', 0);

-- privileges: SELECT, INSERT and UPDATE on idempotency.watermarks to
-- advance, SELECT to read; dropping a stream is for administrators
CREATE ROLE regress_idem_wm_app;
CREATE ROLE regress_idem_wm_reader;
GRANT SELECT, INSERT, UPDATE ON idempotency.watermarks TO regress_idem_wm_app;
GRANT SELECT ON idempotency.watermarks TO regress_idem_wm_reader;
SET ROLE regress_idem_wm_app;
SELECT idem_advance('orders', 0, 1001);
SELECT idem_watermark('orders', 0);
SELECT count(*) > 0 FROM idem_streams;
SELECT idem_stream_drop('orders');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- a REVOKE takes effect at once in a session that advanced before it
REVOKE UPDATE ON idempotency.watermarks FROM regress_idem_wm_app;
SET ROLE regress_idem_wm_app;
SELECT idem_advance('orders', 0, 1001);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT UPDATE ON idempotency.watermarks TO regress_idem_wm_app;
SET ROLE regress_idem_wm_app;
SELECT idem_advance('orders', 0, 1001);
RESET ROLE;
SET ROLE regress_idem_wm_reader;
SELECT idem_watermark('orders', 0);
SELECT idem_advance('orders', 0, 1002);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
CREATE ROLE regress_idem_wm_nobody;
SET ROLE regress_idem_wm_nobody;
SELECT idem_advance('orders', 0, 1003);
\echo :LAST_ERROR_SQLSTATE
-- (no context: PL/pgSQL 18 names its expression differently)
\set SHOW_CONTEXT never
SELECT idem_watermark('orders', 0);
\echo :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
SELECT count(*) FROM idem_streams;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- row-level security on the table is refused, not bypassed
ALTER TABLE idempotency.watermarks ENABLE ROW LEVEL SECURITY;
SELECT idem_advance('orders', 0, 1004);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE idempotency.watermarks DISABLE ROW LEVEL SECURITY;
-- a trigger a DBA adds sees an UPDATE of the mark
CREATE TABLE wm_audit (stream text, partition int, old_mark bigint, new_mark bigint);
CREATE FUNCTION wm_audit_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO wm_audit VALUES (NEW.stream, NEW.partition, OLD.seq, NEW.seq);
    RETURN NEW;
END $$;
CREATE TRIGGER wm_audit AFTER UPDATE OF seq ON idempotency.watermarks
    FOR EACH ROW EXECUTE FUNCTION wm_audit_fn();
SELECT idem_advance('orders', 0, 2000);
SELECT idem_advance('orders', 0, 1999);
SELECT * FROM wm_audit;
DROP TRIGGER wm_audit ON idempotency.watermarks;
DROP TABLE wm_audit;
DROP FUNCTION wm_audit_fn();

-- dropping a stream forgets all its partitions
SELECT idem_stream_drop('orders');
SELECT idem_stream_drop('orders');
SELECT idem_watermark('orders', 0);
SELECT idem_advance('orders', 0, 1);
SELECT count(*) FROM idem_streams WHERE stream = 'orders';

-- each backend remembers where a pair's row is; after a drop, VACUUM,
-- VACUUM FULL or TRUNCATE that is stale, and never wrong
SELECT idem_advance('cache', p, 1) FROM generate_series(0, 2) p;
SELECT idem_advance('cache', 1, 2);
SELECT idem_stream_drop('cache');
SELECT idem_advance('cache', 1, 1);
SELECT idem_advance('cache', 1, 1);
VACUUM idempotency.watermarks;
SELECT idem_advance('cache', 1, 1);
SELECT idem_advance('cache', 1, 4);
VACUUM FULL idempotency.watermarks;
SELECT idem_advance('cache', 1, 4);
SELECT idem_advance('cache', 1, 5);
-- many HOT and non-HOT versions of one pair in one transaction
BEGIN;
SELECT count(*) FILTER (WHERE idem_advance('cache', 1, s)) FROM generate_series(1, 3000) s;
COMMIT;
SELECT idem_watermark('cache', 1);
TRUNCATE idempotency.watermarks;
SELECT idem_advance('cache', 1, 5);
SELECT idem_advance('cache', 1, 5);
SELECT stream, partition, mark FROM idem_streams;

-- a TRUNCATE in the transaction that last truncated the table shortens
-- it in place: the remembered place of a pair is gone, not an error
BEGIN;
TRUNCATE idempotency.watermarks;
SELECT idem_advance('trunc', 0, 1);
SELECT idem_advance('trunc', 0, 2);
TRUNCATE idempotency.watermarks;
SELECT idem_advance('trunc', 0, 3);
SELECT idem_advance('trunc', 0, 3);
COMMIT;
-- the same after a rolled-back savepoint
BEGIN;
SAVEPOINT s;
SELECT idem_advance('trunc', 1, 1);
ROLLBACK TO s;
SELECT idem_advance('trunc', 1, 1);
COMMIT;
-- a line pointer reused by another pair's row: the remembered place
-- holds someone else
SELECT idem_advance('lp_a', 0, 1);
SELECT idem_stream_drop('lp_a');
VACUUM idempotency.watermarks;
SELECT idem_advance('lp_b', 0, 7);
SELECT idem_advance('lp_a', 0, 1);
SELECT idem_advance('lp_a', 0, 1);
SELECT stream, mark FROM idem_streams WHERE stream LIKE 'lp%' ORDER BY stream COLLATE "C";

-- a table changed by hand is refused, not written with the wrong shape;
-- a column added and dropped again is fine
ALTER TABLE idempotency.watermarks ADD COLUMN note text;
SELECT idem_advance('shape', 0, 1);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE idempotency.watermarks DROP COLUMN note;
SELECT idem_advance('shape', 0, 1);
SELECT idem_advance('shape', 0, 2);
SELECT idem_advance('shape', 1, 1);
SELECT stream, partition, mark FROM idem_streams WHERE stream = 'shape' ORDER BY partition;

REVOKE ALL ON idempotency.watermarks FROM regress_idem_wm_app, regress_idem_wm_reader;
DROP ROLE regress_idem_wm_app;
DROP ROLE regress_idem_wm_reader;
DROP ROLE regress_idem_wm_nobody;
