'use strict';
// A consumer killed with -9 mid-stream, four times: each run is delivered
// every event again (at least once); the ledger must hold each event once.
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { test } = require('node:test');
const { pg, requireEnv, dsn, adminDsn, sleep } = require('./helpers');

requireEnv();

test('a consumer killed mid-stream: 0 applied twice, 0 lost', async () => {
  const admin = new pg.Client({ connectionString: adminDsn() });
  await admin.connect();
  const tag = `nc${Date.now()}`;
  const n = 3000;
  await admin.query(`CREATE TABLE ${tag}_ledger (event text, amount int)`);
  await admin.query(`GRANT INSERT, SELECT ON ${tag}_ledger TO idem_node_app`);
  try {
    let code;
    for (let run = 0; run < 5; run++) {
      const proc = spawn(process.execPath, [path.join(__dirname, '..', 'examples', 'consumer-ledger.js'), dsn(), tag, String(n)],
        { stdio: ['ignore', 'ignore', 'inherit'] });
      const done = new Promise((resolve) => proc.once('exit', (c, sig) => resolve(sig || c)));
      if (run < 4) {
        await sleep(300 + Math.random() * 700);
        proc.kill('SIGKILL');
      }
      code = await done;
      assert.ok(code === 0 || code === 'SIGKILL', `run ${run} ended with ${code}`);
    }
    assert.equal(code, 0, 'the last run reads the stream to its end');
    const { rows } = await admin.query(
      `SELECT count(*)::int AS c, count(DISTINCT event)::int AS d, sum(amount)::int AS s FROM ${tag}_ledger`);
    assert.deepEqual([rows[0].c, rows[0].d], [n, n], 'an event applied twice or lost');
    let sum = 0;
    for (let i = 0; i < n; i++) sum += (i % 7) + 1;
    assert.equal(rows[0].s, sum);
  } finally {
    await admin.query(`DROP TABLE ${tag}_ledger`);
    await admin.end();
  }
});
