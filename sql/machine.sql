-- state machines: definitions, validation and the pure checker
SET client_min_messages = warning;

SELECT idem_machine_define('order', '{"PENDING": ["PAID", "CANCELLED"],
                                      "PAID": ["SHIPPED", "CANCELLED"],
                                      "SHIPPED": ["DELIVERED"]}');
SELECT name, transitions FROM idempotency.machines WHERE name = 'order';

-- the pure checker: an edge, the same state, or no edge
SELECT c.cur, c.tgt, idem_cas_status('order', c.cur, c.tgt)
  FROM (VALUES ('PENDING', 'PAID'), ('PAID', 'PAID'), ('CANCELLED', 'PAID'),
               ('PAID', 'PENDING'), ('SHIPPED', 'DELIVERED'), ('DELIVERED', 'DELIVERED'),
               ('PENDING', 'DELIVERED'), ('CANCELLED', 'CANCELLED')) c(cur, tgt)
 ORDER BY 1, 2;

-- redefining replaces the machine, and the cache follows at once
SELECT idem_cas_status('order', 'SHIPPED', 'CANCELLED') AS before_redefine;
SELECT idem_machine_define('order', '{"PENDING": ["PAID", "CANCELLED"],
                                      "PAID": ["SHIPPED", "CANCELLED"],
                                      "SHIPPED": ["DELIVERED", "CANCELLED"]}');
SELECT idem_cas_status('order', 'SHIPPED', 'CANCELLED') AS after_redefine;
-- ... also when redefined by hand
UPDATE idempotency.machines
   SET transitions = '{"PENDING": ["PAID", "CANCELLED"], "PAID": ["SHIPPED", "CANCELLED"], "SHIPPED": ["DELIVERED"]}'
 WHERE name = 'order';
SELECT idem_cas_status('order', 'SHIPPED', 'CANCELLED') AS after_hand_edit;
-- ... and a redefinition rolled back leaves the old one
BEGIN;
SELECT idem_machine_define('order', '{"PENDING": ["DELIVERED"]}');
SELECT idem_cas_status('order', 'PENDING', 'DELIVERED') AS inside;
ROLLBACK;
SELECT idem_cas_status('order', 'PENDING', 'DELIVERED') AS after_rollback;

-- self-loops, and states that only appear as targets
SELECT idem_machine_define('loop', '{"A": ["A", "B"], "B": []}');
SELECT idem_cas_status('loop', 'A', 'A') AS self, idem_cas_status('loop', 'B', 'A') AS back;

-- many states
SELECT idem_machine_define('chain',
    (SELECT jsonb_object_agg('s' || g, jsonb_build_array('s' || (g + 1))) FROM generate_series(1, 255) g));
SELECT idem_cas_status('chain', 's100', 's101') AS step, idem_cas_status('chain', 's100', 's102') AS skip;

-- bad input
SELECT idem_cas_status('no_such_machine', 'A', 'B');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_cas_status('order', 'PENDING', 'LOST');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_cas_status('order', 'pending', 'PAID');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_cas_status('order', NULL, 'PAID');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_cas_status(NULL::text, 'PENDING', 'PAID');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_machine_define('bad', '["PENDING", "PAID"]');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_machine_define('bad', '"PENDING"');
SELECT idem_machine_define('bad', '{}');
SELECT idem_machine_define('bad', '{"PENDING": "PAID"}');
SELECT idem_machine_define('bad', '{"PENDING": ["PAID", 7]}');
SELECT idem_machine_define('bad', '{"PENDING": [["PAID"]]}');
SELECT idem_machine_define('bad', '{"PENDING": [{"to": "PAID"}]}');
SELECT idem_machine_define('bad', '{"PENDING": [""]}');
SELECT idem_machine_define('bad', '{"": ["PAID"]}');
SELECT idem_machine_define('bad', jsonb_build_object('PENDING', jsonb_build_array(repeat('x', 129))));
\echo :LAST_ERROR_SQLSTATE
SELECT idem_machine_define('bad',
    (SELECT jsonb_object_agg('s' || g, jsonb_build_array('s' || (g + 1))) FROM generate_series(1, 256) g));
\echo :LAST_ERROR_SQLSTATE
SELECT idem_machine_define('', '{"A": []}');
SELECT idem_machine_define(repeat('m', 129), '{"A": []}');
SELECT idem_machine_define(NULL, '{"A": []}');
SELECT idem_machine_define('bad', NULL);
SELECT count(*) AS bad_machines FROM idempotency.machines WHERE name = 'bad';
BEGIN READ ONLY;
SELECT idem_machine_define('ro', '{"A": []}');
ROLLBACK;

-- dropping
SELECT idem_machine_drop('loop');
SELECT idem_cas_status('loop', 'A', 'B');
SELECT idem_machine_drop('loop');
\echo :LAST_ERROR_SQLSTATE
SELECT name FROM idempotency.machines ORDER BY name;

-- one name per meaning: with untyped parameters, as drivers send them, the
-- checker cannot be confused with a row CAS (which is idem_cas_row)
PREPARE cas_untyped AS SELECT idem_cas_status($1, $2, $3);
EXECUTE cas_untyped('order', 'PENDING', 'PAID');
DEALLOCATE cas_untyped;
SELECT count(*) AS cas_status_overloads FROM pg_proc WHERE proname = 'idem_cas_status';
