'use strict';
// What the tests share: the server's DSNs (test/clients/run-node.sh sets
// them), the example app served on a free port, and an HTTP client.  Run
// as a test file itself (node --test finds it), it checks the environment.
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const net = require('node:net');
const path = require('node:path');
const { spawn } = require('node:child_process');
const pg = require('pg');

const ROOT = path.join(__dirname, '..');
const EXAMPLES = path.join(ROOT, 'examples');

function env(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run the tests with test/clients/run-node.sh `
      + '(it creates the database and sets IDEM_TEST_DSN, IDEM_TEST_BOUNCER_DSN and IDEM_TEST_ADMIN_DSN)');
  }
  return value;
}

/** The application role, straight to the server. */
const dsn = () => env('IDEM_TEST_DSN');
/** The application role through pgbouncer in transaction mode. */
const bouncerDsn = () => env('IDEM_TEST_BOUNCER_DSN');
/** A superuser, straight to the server. */
const adminDsn = () => env('IDEM_TEST_ADMIN_DSN');

/** Throw at once (failing the test file, never skipping it) unless every DSN is set. */
function requireEnv() {
  dsn();
  bouncerDsn();
  adminDsn();
}

const newKey = () => `k-${crypto.randomUUID()}`;
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });
const silent = { warn() {}, error() {}, info() {} };

/** A logger that keeps what it is told. */
function recorder() {
  const lines = [];
  return { lines, warn: (m) => lines.push(m), error: (m) => lines.push(m), info: (m) => lines.push(m) };
}

/** Listen on a free port; resolves to {url, close}. */
async function serve(app) {
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The example app on a free port, with its Idempotency closed by close(). */
async function serveExample(options) {
  const { createApp } = require(path.join(EXAMPLES, 'express-payments.js')); // eslint-disable-line
  const app = createApp({ logger: silent, ...options });
  const s = await serve(app);
  return { ...s, app, async close() { await s.close(); await app.locals.idem.end(); } };
}

/** POST a JSON body; resolves to {status, headers, body (parsed), text}. */
async function post(url, key, body, headers = {}) {
  const h = { 'content-type': 'application/json', ...headers };
  if (key !== null && key !== undefined) h['idempotency-key'] = key;
  const r = await fetch(`${url}/payments`, {
    method: 'POST', headers: h, body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let parsed;
  try { parsed = JSON.parse(text); } catch (_) { parsed = undefined; }
  return { status: r.status, headers: r.headers, body: parsed, text };
}

async function freePort() {
  const srv = net.createServer();
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address();
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

/** Spawn examples/express-payments.js; resolves to {proc, url} once it listens. */
async function startExample(databaseUrl, providerUrl, lease) {
  const port = await freePort();
  const proc = spawn(process.execPath, [path.join(EXAMPLES, 'express-payments.js')], {
    env: {
      ...process.env, DATABASE_URL: databaseUrl, PROVIDER_URL: providerUrl, LEASE: String(lease), PORT: String(port),
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (let i = 0; i < 200; i += 1) {
    if (proc.exitCode !== null) break;
    try {
      await new Promise((resolve, reject) => {
        const sock = net.connect(port, '127.0.0.1', () => { sock.end(); resolve(); });
        sock.on('error', reject);
      });
      return { proc, url: `http://127.0.0.1:${port}` };
    } catch (_) {
      await sleep(50);
    }
  }
  proc.kill('SIGKILL');
  throw new Error('the example did not start');
}

/** The namespace's request counters in idem_stats. */
async function stats(admin, namespace) {
  const { rows } = await admin.query(
    `SELECT request_begins AS begins, request_replays AS replays, request_in_flight AS in_flight,
            request_mismatches AS mismatches, request_takeovers AS takeovers,
            request_failures AS failures, request_forgets AS forgets
       FROM idem_stats WHERE namespace = $1`, [namespace]);
  const zero = {
    begins: 0, replays: 0, in_flight: 0, mismatches: 0, takeovers: 0, failures: 0, forgets: 0,
  };
  return Object.fromEntries(Object.entries(rows[0] || zero).map(([k, v]) => [k, Number(v)]));
}

module.exports = {
  pg, requireEnv, dsn, bouncerDsn, adminDsn, newKey, sleep, silent, recorder, serve, serveExample, post,
  startExample, stats, ROOT, EXAMPLES,
};

if (require.main === module) {
  const { test } = require('node:test'); // eslint-disable-line global-require
  test('the test environment: every DSN is set and answers', async () => {
    for (const [name, get] of [['IDEM_TEST_DSN', dsn], ['IDEM_TEST_BOUNCER_DSN', bouncerDsn],
      ['IDEM_TEST_ADMIN_DSN', adminDsn]]) {
      const client = new pg.Client({ connectionString: get() });
      await client.connect();
      try {
        const { rows } = await client.query("SELECT extversion FROM pg_extension WHERE extname = 'idempotency'");
        assert.equal(rows.length, 1, `${name}: the extension is not in this database`);
      } finally {
        await client.end();
      }
    }
  });
}
