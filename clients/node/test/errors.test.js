'use strict';
// Typed errors from the SQLSTATEs, and claims for consumers.
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { test, before, after } = require('node:test');
const {
  query, translate, claim, IdempotencyError, LeaseNotHeld, FingerprintMismatch,
  IdempotencyTimeout, KeyHeldByThisTransaction,
} = require('..');
const { pg, requireEnv, dsn, newKey } = require('./helpers');

requireEnv(); // a clear failure, not a skip, outside test/clients/run-node.sh

let client;

before(async () => {
  client = new pg.Client({ connectionString: dsn() });
  await client.connect();
});

after(async () => {
  await client.end();
});

test('LeaseNotHeld from idem_complete with an owner that does not hold the key', async () => {
  const key = newKey();
  await query(client, "SELECT idem_begin($1, 'payments')", [key]);
  const err = await query(client, "SELECT idem_complete($1, $2, '{}', 'payments')", [key, crypto.randomUUID()])
    .then(() => null, (e) => e);
  assert.ok(err instanceof LeaseNotHeld, String(err));
  assert.ok(err instanceof IdempotencyError);
  assert.equal(err.sqlstate, 'ID004');
  assert.equal(err.name, 'LeaseNotHeld');
  assert.ok(err.cause instanceof pg.DatabaseError);
  assert.equal(err.cause.code, 'ID004');
});

test('FingerprintMismatch from idem_claim with another fingerprint', async () => {
  const key = newKey();
  const { rows } = await query(client, "SELECT idem_claim($1::text, 'payments', 'fp-a') AS first", [key]);
  assert.equal(rows[0].first, true);
  await assert.rejects(query(client, "SELECT idem_claim($1::text, 'payments', 'fp-b')", [key]), (e) => {
    assert.ok(e instanceof FingerprintMismatch, String(e));
    assert.equal(e.sqlstate, 'ID001');
    assert.ok(e.cause instanceof pg.DatabaseError);
    return true;
  });
});

test('KeyHeldByThisTransaction: idem_begin twice in one transaction', async () => {
  const key = newKey();
  await client.query('BEGIN');
  try {
    await query(client, "SELECT idem_begin($1, 'payments')", [key]);
    await assert.rejects(query(client, "SELECT idem_begin($1, 'payments')", [key]),
      (e) => e instanceof KeyHeldByThisTransaction && e.sqlstate === '55006');
  } finally {
    await client.query('ROLLBACK');
  }
});

test('translate: timeouts are IdempotencyTimeout, other errors are not ours', async () => {
  const t = translate(Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }));
  assert.ok(t instanceof IdempotencyTimeout);
  assert.equal(t.sqlstate, '57014');
  assert.ok(translate(Object.assign(new Error('lock'), { code: '55P03' })) instanceof IdempotencyTimeout);
  assert.equal(translate(Object.assign(new Error('x'), { code: '42601' })), null);
  assert.equal(translate(new Error('no code')), null);
  // query() rethrows errors that are not the extension's as they are
  await assert.rejects(query(client, 'SELEKT 1'), (e) => e instanceof pg.DatabaseError && e.code === '42601');
});

test('claim commits with the business write, and rolls back with it', async () => {
  const key = newKey();
  await client.query('CREATE TEMP TABLE IF NOT EXISTS ledger (event text)');
  await assert.rejects(claim(client, key, 'payments', async (first, tx) => {
    assert.equal(first, true);
    await tx.query('INSERT INTO ledger VALUES ($1)', [key]);
    throw new Error('crash before the commit');
  }), /crash before the commit/);
  // the claim rolled back too: the redelivery is the first again
  const out = await claim(client, key, 'payments', async (first, tx) => {
    assert.equal(first, true);
    await tx.query('INSERT INTO ledger VALUES ($1)', [key]);
    return 'applied';
  });
  assert.equal(out, 'applied');
  const again = await claim(client, key, 'payments', async (first) => first);
  assert.equal(again, false);
  const { rows } = await client.query('SELECT count(*)::int AS n FROM ledger WHERE event = $1', [key]);
  assert.equal(rows[0].n, 1);
  const { rows: tx } = await client.query('SELECT now() = statement_timestamp() AS autocommit');
  assert.equal(tx[0].autocommit, true, 'claim left a transaction open');
});

test('claim with a fingerprint: another payload for the same event is FingerprintMismatch', async () => {
  const key = newKey();
  assert.equal(await claim(client, key, 'payments', async (first) => first, { fingerprint: 'a' }), true);
  assert.equal(await claim(client, key, 'payments', async (first) => first, { fingerprint: 'a' }), false);
  await assert.rejects(claim(client, key, 'payments', async () => 'never', { fingerprint: 'b' }), FingerprintMismatch);
  const { rows } = await client.query('SELECT now() = statement_timestamp() AS autocommit');
  assert.equal(rows[0].autocommit, true, 'the failed claim left a transaction open');
});
