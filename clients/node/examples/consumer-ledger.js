'use strict';
// A consumer, as test/consumer-crash.test.js runs it (killed with -9 four
// times): events <tag>-0 .. <tag>-(n-1) delivered again from the start, each
// applied to table <tag>_ledger with its claim, in one transaction.
//
//   node consumer-ledger.js postgres:///app tag 3000
const pg = require('pg');
const { claim } = require('idempotency');

(async () => {
  const [dsn, tag, n] = process.argv.slice(2);
  const client = new pg.Client({ connectionString: dsn });
  await client.connect();
  for (let i = 0; i < Number(n); i++) {
    await claim(client, `${tag}-${i}`, 'payments', async (first, tx) => {
      if (first) await tx.query(`INSERT INTO ${tag}_ledger VALUES ($1, $2)`, [`${tag}-${i}`, (i % 7) + 1]);
    });
  }
  await client.end();
})().catch((err) => { console.error(err); process.exit(1); });
