'use strict';
// An owner that dies or stalls: kill -9 of the example's process mid
// provider call, a heartbeat that keeps a slow handler's key, and a stalled
// owner whose heartbeat fails.
const assert = require('node:assert/strict');
const { test, before, after } = require('node:test');
const { createProvider } = require('../examples/fake-provider');
const { Idempotency, Attempt } = require('..');
const {
  pg, requireEnv, dsn, adminDsn, newKey, sleep, silent, recorder, serveExample, post, startExample,
} = require('./helpers');

requireEnv(); // a clear failure, not a skip, outside test/clients/run-node.sh

let provider;
let admin;

before(async () => {
  provider = await createProvider().listen();
  admin = new pg.Pool({ connectionString: adminDsn(), max: 2 });
});

after(async () => {
  await provider.close();
  await admin.end();
});

const exited = (proc) => new Promise((resolve) => {
  if (proc.exitCode !== null || proc.signalCode !== null) resolve();
  else proc.once('exit', resolve);
});

test('kill -9 mid provider call: a retry gets 409, then takes over after the lease', async () => {
  const key = newKey();
  const body = { amount: 4200 };
  provider.slow.set(key, 60); // the provider call the handler dies in
  let charged;
  let leaseFrom;
  let { proc, url } = await startExample(dsn(), provider.url, 2);
  const doomed = post(url, key, body).catch(() => 'died'); // the server dies under it
  try {
    assert.ok(await provider.waitFor(key), 'the handler never called the provider');
    leaseFrom = Date.now(); // the lease began before the provider call
  } finally {
    proc.kill('SIGKILL');
    await exited(proc);
  }
  assert.equal(await doomed, 'died');
  // the dead owner's lease is still live: a retry is told to come back
  const idem = new Idempotency({
    connectionString: dsn(), namespace: 'payments', heartbeat: false, logger: silent,
  });
  try {
    const busy = await idem.begin({
      method: 'POST', path: '/payments', headers: { 'idempotency-key': key }, body: JSON.stringify(body),
    });
    assert.equal(busy.response.status, 409);
    assert.ok(Number(busy.response.headers.find(([n]) => n === 'retry-after')[1]) >= 1);
  } finally {
    await idem.end();
  }
  provider.slow.set(key, 0);
  ({ proc, url } = await startExample(dsn(), provider.url, 2));
  try {
    const deadline = Date.now() + 20000;
    let resp;
    let busy = 0;
    for (;;) {
      resp = await post(url, key, body);
      if (resp.status !== 409 || Date.now() > deadline) break;
      busy += 1;
      await sleep(200);
    }
    assert.equal(resp.status, 201, resp.text);
    assert.equal(resp.headers.get('idempotent-replayed'), null);
    // told to wait, or retried only once the 2-s lease had run out (a
    // loaded machine may take that long to start the second server)
    assert.ok(busy >= 1 || Date.now() - leaseFrom >= 2000,
      'the retry was never told to wait: the lease did not hold');
    charged = resp.body.id;
    const again = await post(url, key, body);
    assert.equal(again.status, 201);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(again.body, resp.body);
  } finally {
    proc.kill('SIGKILL');
    await exited(proc);
  }
  assert.equal(provider.calls.get(key), 2); // the dead attempt's call and the takeover's
  // one charge: the provider deduplicated the takeover's call on the key
  assert.equal(provider.charges.get(key).id, charged);
  const { rows } = await admin.query(
    "SELECT attempts, status FROM idem_requests WHERE key = $1 AND namespace = 'payments'", [key]);
  assert.deepEqual(rows, [{ attempts: 2, status: 'completed' }]);
});

test('the heartbeat keeps a slow handler\'s key past its lease', async () => {
  const key = newKey();
  const app = await serveExample({ databaseUrl: dsn(), providerUrl: provider.url, lease: 1 });
  try {
    provider.slow.set(key, 3.5); // three and a half leases
    const first = post(app.url, key, { amount: 1 });
    assert.ok(await provider.waitFor(key));
    await sleep(2200); // past two leases: only the heartbeat kept it
    const busy = await post(app.url, key, { amount: 1 });
    assert.equal(busy.status, 409, busy.text);
    assert.equal(busy.body.error, 'request_in_progress');
    const done = await first;
    assert.equal(done.status, 201);
    assert.equal(provider.calls.get(key), 1);
    const { rows } = await admin.query(
      "SELECT attempts FROM idem_requests WHERE key = $1 AND namespace = 'payments'", [key]);
    assert.equal(rows[0].attempts, 1);
  } finally {
    await app.close();
  }
});

test('a stalled owner whose heartbeat fails loses its key to a retry after the lease', async () => {
  const key = newKey();
  const dead = new pg.Pool({ host: '127.0.0.1', port: 1, connectionTimeoutMillis: 1000 });
  const log = recorder();
  const stalled = new Idempotency({
    connectionString: dsn(), namespace: 'payments', lease: 1, heartbeatPool: dead, logger: log,
  });
  const other = new Idempotency({
    connectionString: dsn(), namespace: 'payments', lease: 30, heartbeat: false, logger: silent,
  });
  try {
    const req = {
      method: 'POST', path: '/p', headers: { 'idempotency-key': key }, body: '{"amount": 1}',
    };
    const first = await stalled.begin(req);
    assert.ok(first instanceof Attempt);
    assert.equal(first.attempts, 1);
    await sleep(1500);
    assert.ok(log.lines.some((l) => /heartbeat .* failed/.test(l)), log.lines.join('\n'));
    const second = await other.begin(req);
    assert.ok(second instanceof Attempt, second && second.response && String(second.response.status));
    assert.equal(second.attempts, 2); // took over
    const late = await first.finish({ status: 201, headers: [], body: 'late' });
    assert.equal(late.status, 409);
    assert.equal(JSON.parse(late.body).error, 'lease_lost');
    const onTime = await second.finish({ status: 201, headers: [], body: 'on time' });
    assert.equal(onTime.body, 'on time');
    const replay = await other.begin(req);
    assert.equal(replay.response.body.toString(), 'on time');
  } finally {
    await stalled.end();
    await other.end();
    await dead.end();
  }
});

test('the heartbeat learns that the lease was lost: leaseLost and its event', async () => {
  const key = newKey();
  const idem = new Idempotency({
    connectionString: dsn(), namespace: 'payments', lease: 0.9, logger: silent,
  });
  try {
    const att = await idem.begin({
      method: 'POST', path: '/p', headers: { 'idempotency-key': key }, body: '',
    });
    const lost = new Promise((resolve) => att.once('leaseLost', resolve));
    const { rows } = await admin.query("SELECT idem_request_forget($1, 'payments') AS forgot", [key]);
    assert.equal(rows[0].forgot, true);
    const other = await idem.begin({
      method: 'POST', path: '/p', headers: { 'idempotency-key': key }, body: '',
    });
    assert.ok(other instanceof Attempt);
    const err = await Promise.race([lost, sleep(3000).then(() => null)]);
    assert.ok(err, 'no leaseLost event within 3 s');
    assert.equal(err.sqlstate, 'ID004');
    assert.equal(att.leaseLost, true);
    assert.equal(other.leaseLost, false);
    await other.abort();
    await att.abort(); // no longer its key: a no-op
  } finally {
    await idem.end();
  }
});
