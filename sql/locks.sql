-- keyed locks: idem_lock and idem_try_lock
SET client_min_messages = warning;

-- a lock is held until the end of the transaction, and shows in pg_locks as
-- an advisory lock apart from pg_advisory_lock's (objsubid 1 and 2)
BEGIN;
SELECT idem_lock('order-1');
SELECT locktype, mode, granted, objsubid FROM pg_locks
 WHERE locktype = 'advisory' AND pid = pg_backend_pid() ORDER BY objsubid;
-- re-entrant within the transaction
SELECT idem_lock('order-1');
SELECT idem_try_lock('order-1') AS reentrant_try;
SELECT idem_try_lock('order-2') AS other_key;
SELECT count(*) AS locks_held FROM pg_locks
 WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objsubid = 478;
COMMIT;
SELECT count(*) AS after_commit FROM pg_locks
 WHERE locktype = 'advisory' AND pid = pg_backend_pid();

-- released at rollback too, and not by pg_advisory_unlock_all
BEGIN;
SELECT idem_try_lock('order-1') AS taken;
SELECT pg_advisory_unlock_all();
SELECT count(*) AS still_held FROM pg_locks
 WHERE locktype = 'advisory' AND pid = pg_backend_pid();
ROLLBACK;
SELECT count(*) AS after_rollback FROM pg_locks
 WHERE locktype = 'advisory' AND pid = pg_backend_pid();

-- distinct keys take distinct locks
BEGIN;
SELECT count(*) FILTER (WHERE idem_try_lock('k' || i)) AS taken FROM generate_series(1, 1000) i;
SELECT count(*) AS distinct_locks FROM pg_locks
 WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objsubid = 478;
ROLLBACK;

-- an empty key is a key like any other; NULL is an error
BEGIN;
SELECT idem_try_lock('') AS empty_key;
ROLLBACK;
SELECT idem_lock(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_try_lock(NULL);
\echo :LAST_ERROR_SQLSTATE
