'use strict';
// Concurrent duplicates: 1,000 requests over 200 keys, 8 at a time, each
// retrying its 409s, against the example app, straight to the server and
// through pgbouncer in transaction mode.  The fake provider must see every
// key exactly once.
const assert = require('node:assert/strict');
const { test, before, after } = require('node:test');
const { createProvider } = require('../examples/fake-provider');
const {
  pg, requireEnv, dsn, bouncerDsn, adminDsn, sleep, serveExample, post,
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

let busy = 0;

/** POST until the answer is final (not a 409). */
async function send(url, key, amount) {
  for (let i = 0; i < 600; i += 1) {
    const r = await post(url, key, { amount });
    if (r.status !== 409) return r;
    assert.equal(r.body.error, 'request_in_progress');
    busy += 1;
    await sleep(20);
  }
  throw new Error(`${key}: still in progress after 600 tries`);
}

for (const via of ['direct', 'pgbouncer']) {
  test(`no key is charged twice: 1,000 requests over 200 keys, 8 at a time (${via})`, async () => {
    const app = await serveExample({
      databaseUrl: via === 'direct' ? dsn() : bouncerDsn(), providerUrl: provider.url,
    });
    const tag = `${via}-${process.hrtime.bigint()}`;
    const keys = Array.from({ length: 200 }, (_, i) => `${tag}-${i}`);
    // each key five times in a row: the eight workers race on the same key
    const jobs = Array.from({ length: 1000 }, (_, i) => keys[Math.floor(i / 5)]);
    const results = [];
    busy = 0;
    try {
      let next = 0;
      await Promise.all(Array.from({ length: 8 }, async () => {
        while (next < jobs.length) {
          const key = jobs[next];
          next += 1;
          results.push([key, await send(app.url, key, 100)]);
        }
      }));
    } finally {
      await app.close();
    }
    assert.equal(results.length, 1000);
    const charges = new Map();
    let replays = 0;
    for (const [key, r] of results) {
      assert.equal(r.status, 201, `${key}: ${r.status} ${r.text}`);
      if (!charges.has(key)) charges.set(key, new Set());
      charges.get(key).add(r.body.id);
      if (r.headers.get('idempotent-replayed') === 'true') replays += 1;
    }
    assert.equal(charges.size, 200);
    for (const [key, ids] of charges) assert.equal(ids.size, 1, `${key} answered with two charges`);
    const twice = keys.filter((k) => provider.calls.get(k) !== 1);
    assert.deepEqual(twice.map((k) => [k, provider.calls.get(k)]), [], 'provider calls per key != 1');
    assert.equal(replays, 800);
    assert.ok(busy > 0, 'no request ever met another in flight: the test raced nothing');
    const { rows } = await admin.query(
      "SELECT count(*)::int AS n FROM idem_requests WHERE namespace = 'payments' AND key LIKE $1 AND status = 'completed'",
      [`${tag}-%`]);
    assert.equal(rows[0].n, 200);
  });
}
