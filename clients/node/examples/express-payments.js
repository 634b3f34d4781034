'use strict';
// POST /payments, idempotent as Stripe's: run with DATABASE_URL set.
//
//   DATABASE_URL=postgres:///app node express-payments.js
//   curl -X POST localhost:3000/payments -H 'Idempotency-Key: k-1' \
//        -H 'content-type: application/json' -d '{"amount": 1999}'
//
// The idempotency glue is the lines marked "glue".  PROVIDER_URL points the
// charges at a payment provider's HTTP API (fake-provider.js beside this
// file); without it they are made up here.  LEASE is the lease in seconds,
// PORT the port to listen on.
const crypto = require('node:crypto');
const express = require('express');
const { Idempotency, idempotent } = require('idempotency'); // glue

// The side effect outside the database: one call to the provider, with the
// key, so that the provider can deduplicate too.
async function charge(providerUrl, key, amount) {
  if (!providerUrl) return { id: `ch_${crypto.randomBytes(6).toString('hex')}`, amount };
  const r = await fetch(`${providerUrl}/charges`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
    body: JSON.stringify({ amount }),
  });
  if (!r.ok) throw new Error(`provider answered ${r.status}`);
  return r.json();
}

function createApp({ databaseUrl, providerUrl, lease = 30, ...options }) {
  const idem = new Idempotency({ connectionString: databaseUrl, namespace: 'payments', lease, ...options }); // glue
  const app = express();
  app.use(express.json());
  app.post('/payments', idempotent(idem), async (req, res, next) => { // glue
    try {
      const key = res.locals.idempotency ? res.locals.idempotency.key : undefined; // glue: scoped key
      const ch = await charge(providerUrl, key, req.body.amount);
      res.status(201).location(`/payments/${ch.id}`).json({ id: ch.id, amount: req.body.amount });
    } catch (err) {
      next(err);
    }
  });
  app.locals.idem = idem;
  return app;
}

module.exports = { createApp, charge };

if (require.main === module) {
  const app = createApp({
    databaseUrl: process.env.DATABASE_URL,
    providerUrl: process.env.PROVIDER_URL,
    lease: Number(process.env.LEASE || 30),
  });
  const server = app.listen(Number(process.env.PORT || 3000), '127.0.0.1', () => {
    console.log(`listening on http://127.0.0.1:${server.address().port}`);
  });
}
