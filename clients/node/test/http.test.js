'use strict';
// The Stripe semantics one by one, on the Express example and the core.
const assert = require('node:assert/strict');
const { test, before, after } = require('node:test');
const express = require('express');
const { createProvider } = require('../examples/fake-provider');
const { Idempotency, Attempt, idempotent } = require('..');
const {
  pg, requireEnv, dsn, adminDsn, newKey, sleep, silent, serve, serveExample, post, stats,
} = require('./helpers');

requireEnv(); // a clear failure, not a skip, outside test/clients/run-node.sh

let provider;
let example;
let admin;

before(async () => {
  provider = await createProvider().listen();
  example = await serveExample({ databaseUrl: dsn(), providerUrl: provider.url });
  admin = new pg.Pool({ connectionString: adminDsn(), max: 2 });
});

after(async () => {
  await example.close();
  await provider.close();
  await admin.end();
});

function core(options = {}) {
  return new Idempotency({
    connectionString: dsn(), namespace: 'payments', heartbeat: false, logger: silent, ...options,
  });
}

const request = (key, body = '{}', headers = {}) => ({
  method: 'POST', path: '/p', headers: { ...(key === undefined ? {} : { 'idempotency-key': key }), ...headers }, body,
});

test('a replay keeps the status, the body and the location', async () => {
  const key = newKey();
  const first = await post(example.url, key, { amount: 1999 });
  assert.equal(first.status, 201);
  assert.equal(first.headers.get('idempotent-replayed'), null);
  const again = await post(example.url, key, { amount: 1999 });
  assert.equal(again.status, 201);
  assert.equal(again.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(again.body, first.body);
  assert.equal(again.headers.get('location'), first.headers.get('location'));
  assert.match(again.headers.get('content-type'), /^application\/json/);
  assert.equal(provider.calls.get(key), 1);
});

test('the same key with another body is 422, with nothing of the stored request', async () => {
  const key = newKey();
  const first = await post(example.url, key, { amount: 1999 });
  assert.equal(first.status, 201);
  const other = await post(example.url, key, { amount: 5 });
  assert.equal(other.status, 422);
  assert.equal(other.body.error, 'idempotency_key_reused');
  assert.ok(!other.text.includes(first.body.id), other.text);
  assert.ok(!other.text.includes('1999'), other.text);
  assert.equal(provider.calls.get(key), 1);
});

test('JSON key order and spacing do not change the fingerprint', async () => {
  const key = newKey();
  const a = await post(example.url, key, '{"amount": 7, "currency": "eur"}');
  const b = await post(example.url, key, '{"currency":"eur","amount":7}');
  assert.equal(a.status, 201);
  assert.equal(b.status, 201);
  assert.equal(b.headers.get('idempotent-replayed'), 'true');
  assert.equal(provider.calls.get(key), 1);
});

test('without a key the handler runs every time', async () => {
  const a = await post(example.url, null, { amount: 1 });
  const b = await post(example.url, null, { amount: 1 });
  assert.equal(a.status, 201);
  assert.equal(b.status, 201);
  assert.notEqual(a.body.id, b.body.id);
  assert.equal(b.headers.get('idempotent-replayed'), null);
});

for (const [name, bad] of [['empty', ''], ['256 bytes', 'x'.repeat(256)], ['128 two-byte characters', 'é'.repeat(128)]]) {
  test(`a key that is ${name} is 400`, async () => {
    const before = [...provider.calls.values()].reduce((a, b) => a + b, 0);
    const resp = await post(example.url, bad, { amount: 1 });
    assert.equal(resp.status, 400);
    assert.equal(resp.body.error, 'idempotency_key_invalid');
    assert.equal([...provider.calls.values()].reduce((a, b) => a + b, 0), before);
  });
}

test('a key of 255 bytes is accepted', async () => {
  const key = `${newKey()}-`.padEnd(255, 'k');
  const resp = await post(example.url, key, { amount: 1 });
  assert.equal(resp.status, 201);
  assert.equal(provider.calls.get(key), 1);
});

test('required: a request without a key is 400', async () => {
  const idem = core({ required: true });
  try {
    const out = await idem.begin(request(undefined));
    assert.equal(out.response.status, 400);
    assert.equal(JSON.parse(out.response.body).error, 'idempotency_key_required');
  } finally {
    await idem.end();
  }
});

test('scopes keep tenants apart: two tenants, one key, two charges', async () => {
  const scoped = await serveExample({
    databaseUrl: dsn(), providerUrl: provider.url, scope: (req) => req.headers['x-tenant'],
  });
  const key = newKey();
  try {
    const acme = await post(scoped.url, key, { amount: 3 }, { 'x-tenant': 'acme' });
    const globex = await post(scoped.url, key, { amount: 3 }, { 'x-tenant': 'globex' });
    assert.equal(acme.status, 201);
    assert.equal(globex.status, 201);
    assert.equal(globex.headers.get('idempotent-replayed'), null);
    assert.notEqual(acme.body.id, globex.body.id);
    assert.equal(provider.calls.get(`acme:${key}`), 1);
    assert.equal(provider.calls.get(`globex:${key}`), 1);
    const replay = await post(scoped.url, key, { amount: 3 }, { 'x-tenant': 'globex' });
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(replay.body, globex.body);
  } finally {
    await scoped.close();
  }
});

test('GET passes through', async () => {
  const idem = core();
  try {
    assert.equal(await idem.begin({ ...request(newKey()), method: 'GET' }), null);
  } finally {
    await idem.end();
  }
});

test('a GET through the middleware runs its handler every time', async () => {
  const idem = core();
  let runs = 0;
  const app = express();
  app.get('/payments', idempotent(idem), (req, res) => { runs += 1; res.json({ runs }); });
  const s = await serve(app);
  try {
    const key = newKey();
    for (let i = 1; i <= 2; i += 1) {
      const r = await fetch(`${s.url}/payments`, { headers: { 'idempotency-key': key } });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('idempotent-replayed'), null);
      assert.deepEqual(await r.json(), { runs: i });
    }
  } finally {
    await s.close();
    await idem.end();
  }
});

function failingApp(mode) {
  const idem = core();
  const app = express();
  app.set('env', 'test'); // no stack traces on stderr
  const runs = [];
  app.use(express.json());
  app.post('/payments', idempotent(idem), (req, res, next) => {
    runs.push(1);
    if (runs.length === 1) {
      if (mode === 'throw') throw new Error('provider down');
      if (mode === 'next') return next(new Error('provider down'));
      if (mode === 'next 4xx') return next(Object.assign(new Error('card declined'), { status: 402 }));
      return res.status(503).json({ error: 'upstream' });
    }
    return res.status(201).json({ ok: true });
  });
  if (mode === 'next 4xx') {
    // an error handler that answers 4xx: the attempt was aborted all the same
    app.use((err, req, res, next) => res.status(err.status).json({ error: err.message })); // eslint-disable-line no-unused-vars
  }
  return { app, runs, idem };
}

for (const mode of ['throw', 'next', 'next 4xx', '5xx']) {
  test(`a failed attempt (${mode}) frees the key: the retry runs the handler`, async () => {
    const { app, runs, idem } = failingApp(mode);
    const s = await serve(app);
    const key = newKey();
    try {
      const first = await post(s.url, key, { amount: 1 });
      assert.equal(first.status, { '5xx': 503, 'next 4xx': 402 }[mode] || 500);
      const second = await post(s.url, key, { amount: 1 });
      assert.equal(second.status, 201);
      assert.equal(second.headers.get('idempotent-replayed'), null);
      assert.equal(runs.length, 2);
      const third = await post(s.url, key, { amount: 1 });
      assert.equal(third.headers.get('idempotent-replayed'), 'true');
      assert.equal(runs.length, 2);
    } finally {
      await s.close();
      await idem.end();
    }
  });
}

test('a 4xx is stored and replayed', async () => {
  const idem = core();
  try {
    const req = request(newKey(), '{"amount": 0}');
    const att = await idem.begin(req);
    assert.ok(att instanceof Attempt);
    await att.finish({ status: 402, headers: [['content-type', 'application/json']], body: '{"error":"card_declined"}' });
    const again = await idem.begin(req);
    assert.equal(again.response.status, 402);
    assert.equal(again.response.body.toString(), '{"error":"card_declined"}');
    assert.deepEqual(again.response.headers.find(([n]) => n === 'idempotent-replayed'), ['idempotent-replayed', 'true']);
  } finally {
    await idem.end();
  }
});

test('in flight: 409 with retry-after, then the replay', async () => {
  const key = newKey();
  provider.slow.set(key, 3);
  const first = post(example.url, key, { amount: 3 });
  assert.ok(await provider.waitFor(key));
  const busy = await post(example.url, key, { amount: 3 });
  assert.equal(busy.status, 409);
  assert.equal(busy.body.error, 'request_in_progress');
  const retryAfter = Number(busy.headers.get('retry-after'));
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 30, String(retryAfter));
  assert.equal((await first).status, 201);
  assert.equal((await post(example.url, key, { amount: 3 })).headers.get('idempotent-replayed'), 'true');
  assert.equal(provider.calls.get(key), 1);
});

test('set-cookie is never stored nor replayed', async () => {
  const idem = core({ storedHeaders: ['content-type', 'set-cookie', 'x-charge'] });
  try {
    const req = request(newKey());
    const att = await idem.begin(req);
    const sent = await att.finish({
      status: 201,
      headers: [['Set-Cookie', 'session=secret'], ['X-Charge', 'ch_1'], ['X-Other', 'no']],
      body: '{}',
    });
    assert.equal(sent.status, 201);
    const replay = await idem.begin(req);
    const names = replay.response.headers.map(([n]) => n);
    assert.ok(!names.includes('set-cookie') && !names.includes('x-other'), names.join());
    assert.ok(replay.response.headers.some(([n, v]) => n === 'x-charge' && v === 'ch_1'));
  } finally {
    await idem.end();
  }
});

test('set-cookie through the middleware: sent the first time, not replayed', async () => {
  const idem = core();
  const app = express();
  app.post('/payments', idempotent(idem), (req, res) => {
    res.cookie('session', 'secret').status(201).json({ ok: true });
  });
  const s = await serve(app);
  try {
    const key = newKey();
    const first = await post(s.url, key, {});
    assert.match(first.headers.get('set-cookie'), /session=secret/);
    const again = await post(s.url, key, {});
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal(again.headers.get('set-cookie'), null);
  } finally {
    await s.close();
    await idem.end();
  }
});

test('idem_stats counts the request traffic of the namespace', async () => {
  // a namespace of its own: the other test files run in parallel in 'payments'
  const namespace = `stats-${newKey()}`;
  const app = await serveExample({ databaseUrl: dsn(), providerUrl: provider.url, namespace });
  try {
    const before = await stats(admin, namespace);
    const key = newKey();
    assert.equal((await post(app.url, key, { amount: 1 })).status, 201); // begin
    assert.equal((await post(app.url, key, { amount: 1 })).status, 201); // replay
    assert.equal((await post(app.url, key, { amount: 2 })).status, 422); // mismatch
    const got = await stats(admin, namespace);
    assert.equal(got.begins - before.begins, 1);
    assert.equal(got.replays - before.replays, 1);
    assert.equal(got.mismatches - before.mismatches, 1);
    assert.equal(got.failures - before.failures, 0);
    assert.equal(got.takeovers - before.takeovers, 0);
  } finally {
    await app.close();
  }
});

test('a forgotten request loses its lease: 409 lease_lost, its response not stored', async () => {
  const key = newKey();
  provider.slow.set(key, 2);
  const first = post(example.url, key, { amount: 4 });
  assert.ok(await provider.waitFor(key));
  const { rows } = await admin.query("SELECT idem_request_forget($1, 'payments') AS forgot", [key]);
  assert.equal(rows[0].forgot, true);
  provider.slow.set(key, 0);
  const second = await post(example.url, key, { amount: 4 });
  assert.equal(second.status, 201);
  assert.equal(second.headers.get('idempotent-replayed'), null);
  const late = await first;
  assert.equal(late.status, 409);
  assert.equal(late.body.error, 'lease_lost');
  const third = await post(example.url, key, { amount: 4 });
  assert.equal(third.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(third.body, second.body);
  assert.equal(provider.calls.get(key), 2);
});

test('the attempt is res.locals.idempotency, and the heartbeat stops with the request', async () => {
  const idem = core({ heartbeat: true, lease: 0.6 });
  let seen;
  const app = express();
  app.post('/payments', idempotent(idem), async (req, res) => {
    seen = res.locals.idempotency;
    await sleep(700);
    res.status(201).json({ key: seen.key, attempts: seen.attempts });
  });
  const s = await serve(app);
  try {
    const key = newKey();
    const r = await post(s.url, key, {});
    assert.equal(r.status, 201);
    assert.deepEqual(r.body, { key, attempts: 1 });
    assert.ok(seen instanceof Attempt);
    assert.equal(seen.leaseLost, false);
    assert.equal(seen._timer, null);
  } finally {
    await s.close();
    await idem.end();
  }
});
