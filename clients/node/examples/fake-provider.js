'use strict';
// A payment provider's HTTP API, for the tests and the example: POST
// /charges with an Idempotency-Key header.  Like Stripe it deduplicates on
// the key (the same charge comes back).  calls counts every call per key,
// charges holds every charge made; slow makes a key's calls take that many
// seconds.  Run alone: PORT=4000 node fake-provider.js (GET /calls shows the
// counters).
const crypto = require('node:crypto');
const http = require('node:http');

function createProvider() {
  const calls = new Map(); // key -> calls received
  const charges = new Map(); // key -> {id, amount}
  const slow = new Map(); // key -> seconds to take
  const waiters = new Map(); // key -> [resolve]

  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'GET' && req.url === '/calls') {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(Object.fromEntries(calls)));
        return;
      }
      if (req.method !== 'POST' || req.url !== '/charges') {
        res.statusCode = 404;
        res.end();
        return;
      }
      const { amount } = JSON.parse(Buffer.concat(chunks).toString() || '{}');
      const key = req.headers['idempotency-key'];
      const id = () => `ch_${crypto.randomBytes(6).toString('hex')}`;
      const answer = () => {
        let ch = { id: id(), amount };
        if (key !== undefined) {
          if (!charges.has(key)) charges.set(key, ch);
          ch = charges.get(key);
        }
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(ch));
      };
      if (key !== undefined) {
        calls.set(key, (calls.get(key) || 0) + 1);
        for (const resolve of waiters.get(key) || []) resolve(true);
        waiters.delete(key);
      }
      const delay = key === undefined ? 0 : slow.get(key) || 0;
      if (delay) setTimeout(answer, delay * 1000).unref();
      else answer();
    });
  });

  return {
    server,
    calls,
    charges,
    slow,
    url: null,
    /** Listen on 127.0.0.1 (port 0: any); resolves to the provider. */
    async listen(port = 0) {
      await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
      this.url = `http://127.0.0.1:${server.address().port}`;
      return this;
    },
    /** Resolves to true once a call with key arrived (false after timeout ms). */
    waitFor(key, timeout = 10000) {
      if (calls.get(key)) return Promise.resolve(true);
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), timeout);
        const list = waiters.get(key) || [];
        list.push((v) => { clearTimeout(timer); resolve(v); });
        waiters.set(key, list);
      });
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

module.exports = { createProvider };

if (require.main === module) {
  createProvider().listen(Number(process.env.PORT || 4000))
    .then((p) => console.log(`fake provider on ${p.url}`));
}
