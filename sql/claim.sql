-- idem_claim: first claim wins, duplicates lose, the transaction decides
SET client_min_messages = warning;

-- a first claim is true, a duplicate false, in the same transaction too
BEGIN;
SELECT idem_claim('evt-1', 'claim_basic') AS first;
SELECT idem_claim('evt-1', 'claim_basic') AS same_xact_repeat;
COMMIT;
SELECT idem_claim('evt-1', 'claim_basic') AS after_commit;

-- the default namespace is 'default'
SELECT idem_claim('evt-1') AS default_ns_first, idem_claim('evt-1') AS default_ns_again;

-- namespaces scope ids: each consumer processes the same event once
SELECT ns, idem_claim('order-42-paid', ns) AS claimed
  FROM unnest(ARRAY['claim_inventory', 'claim_points', 'claim_notify']) ns
 ORDER BY ns;
SELECT ns, idem_claim('order-42-paid', ns) AS claimed
  FROM unnest(ARRAY['claim_inventory', 'claim_points', 'claim_notify']) ns
 ORDER BY ns;

-- a rollback releases the claim
BEGIN;
SELECT idem_claim('evt-rb', 'claim_basic') AS in_rolled_back_xact;
ROLLBACK;
SELECT idem_claim('evt-rb', 'claim_basic') AS after_rollback;

-- so does ROLLBACK TO SAVEPOINT, and the outer claim survives
BEGIN;
SELECT idem_claim('evt-sp-outer', 'claim_basic') AS outer_claim;
SAVEPOINT s1;
SELECT idem_claim('evt-sp-inner', 'claim_basic') AS inner_claim;
ROLLBACK TO SAVEPOINT s1;
SELECT idem_claim('evt-sp-inner', 'claim_basic') AS inner_after_rollback_to;
SELECT idem_claim('evt-sp-outer', 'claim_basic') AS outer_still_held;
COMMIT;

-- the claim and the business write commit or roll back together
CREATE TABLE claim_balance (account text PRIMARY KEY, amount int NOT NULL);
INSERT INTO claim_balance VALUES ('alice', 0);
CREATE FUNCTION claim_apply(p_event text, p_amount int) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT idem_claim(p_event, 'claim_payments') THEN
        RETURN false;
    END IF;
    UPDATE claim_balance SET amount = amount + p_amount WHERE account = 'alice';
    RETURN true;
END $$;
SELECT claim_apply('pay-1', 100), claim_apply('pay-1', 100), claim_apply('pay-2', 5);
BEGIN;
SELECT claim_apply('pay-3', 1000);
ROLLBACK;
SELECT claim_apply('pay-3', 7);
SELECT amount FROM claim_balance;

-- ids are stored exactly; canonical UUIDs take 16 bytes, other forms do not
-- collide with them
SELECT idem_claim(id, 'claim_forms') AS claimed, left(id, 40) AS id
  FROM (VALUES ('6f1c2a9e-5b7d-4c3e-9a8b-1d2e3f4a5b6c'),
               ('6F1C2A9E-5B7D-4C3E-9A8B-1D2E3F4A5B6C'),
               ('{6f1c2a9e-5b7d-4c3e-9a8b-1d2e3f4a5b6c}'),
               ('6f1c2a9e5b7d4c3e9a8b1d2e3f4a5b6c'),
               ('exactly-16-bytes'),
               ('exactly-16-byte'),
               ('exactly-16-bytes!'),
               ('6f1c2a9e-5b7d-4c3e-9a8b-1d2e3f4a5b6g'),
               ('6f1c2a9e-5b7d-4c3e-9a8b+1d2e3f4a5b6c'),
               ('日本語のイベント'),
               (repeat('x', 1024))) v(id);
SELECT idem_claim(id, 'claim_forms') AS again, length(id)
  FROM (VALUES ('6f1c2a9e-5b7d-4c3e-9a8b-1d2e3f4a5b6c'),
               ('6F1C2A9E-5B7D-4C3E-9A8B-1D2E3F4A5B6C'),
               ('exactly-16-bytes'),
               ('exactly-16-byte'),
               ('日本語のイベント'),
               (repeat('x', 1024))) v(id);
SELECT event_id, octet_length(c.key) AS stored_bytes
  FROM idem_claims v
  JOIN idempotency.claims c ON idempotency.idem_key_text(c.key) = v.event_id
 WHERE v.namespace = 'claim_forms' AND length(event_id) < 100
 ORDER BY event_id COLLATE "C";

-- a uuid column's text form is canonical, so it meets the same claim
SELECT idem_claim('6f1c2a9e-5b7d-4c3e-9a8b-1d2e3f4a5b6c'::uuid::text, 'claim_forms') AS uuid_typed;

-- many claims in one statement, then all of them again
SELECT count(*) FILTER (WHERE idem_claim('bulk-' || g, 'claim_bulk')) AS new_claims
  FROM generate_series(1, 5000) g;
SELECT count(*) FILTER (WHERE idem_claim('bulk-' || g, 'claim_bulk')) AS repeated
  FROM generate_series(1, 5000) g;
SELECT count(*) AS stored FROM idem_claims WHERE namespace = 'claim_bulk';

-- idem_try_claim never waits; without contention it answers like idem_claim
SELECT idem_try_claim('try-1', 'claim_try') AS first,
       idem_try_claim('try-1', 'claim_try') AS again;

-- a claim in a function called in a WHERE clause, in a trigger-free INSERT
CREATE TABLE claim_inbox (event_id text, body text);
INSERT INTO claim_inbox
SELECT id, 'body ' || id FROM (VALUES ('a'), ('b'), ('a'), ('c'), ('b')) v(id)
 WHERE idem_claim(id, 'claim_where');
SELECT * FROM claim_inbox ORDER BY event_id;
