'use strict';
// Stripe-style idempotent HTTP endpoints, framework-free.
//
// A request carrying an Idempotency-Key header runs its handler once; every
// retry gets the first response back (status, stored headers, body) with
// Idempotent-Replayed: true.  A retry while the first is in flight gets 409
// with Retry-After; the same key with another payload gets 422.  A handler
// that throws, or answers 5xx, frees the key for a retry.  The Express
// middleware (./express) calls Idempotency#begin and Attempt#finish around
// the handler.
const crypto = require('node:crypto');
const { EventEmitter } = require('node:events');
const { FingerprintMismatch, LeaseNotHeld, query } = require('./errors');

// headers stored with a response unless told otherwise; never Set-Cookie
const DEFAULT_STORED_HEADERS = ['content-type', 'location', 'content-language'];
const DEFAULT_METHODS = ['POST', 'PATCH', 'PUT', 'DELETE'];
const MAX_KEY_BYTES = 255;

const utf8 = new TextDecoder('utf-8', { fatal: true });

function canonicalJSON(value) {
  if (Array.isArray(value)) return `[${value.map(canonicalJSON).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value).sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJSON(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** JSON with sorted keys and no whitespace when the body is JSON, else the
 *  bytes as they are. */
function canonicalBody(body) {
  const buf = toBuffer(body);
  let value;
  try {
    value = JSON.parse(utf8.decode(buf));
  } catch (_) {
    return buf;
  }
  return Buffer.from(canonicalJSON(value));
}

/** sha256 (hex) of the method, the path and the canonical body. */
function defaultFingerprint(req) {
  return crypto.createHash('sha256')
    .update(`${req.method.toUpperCase()} ${req.path}\n`)
    .update(canonicalBody(req.body))
    .digest('hex');
}

function toBuffer(body) {
  if (body == null) return Buffer.alloc(0);
  if (Buffer.isBuffer(body)) return body;
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  return Buffer.from(String(body));
}

/** [[name, value]] from an array of pairs, a Headers-like map or an object. */
function headerPairs(headers) {
  if (!headers) return [];
  if (Array.isArray(headers)) return headers;
  if (typeof headers.entries === 'function') {
    return [...headers.entries()];
  }
  return Object.entries(headers);
}

function json(status, payload, extra = []) {
  return {
    status,
    headers: [['content-type', 'application/json'], ...extra],
    body: Buffer.from(JSON.stringify(payload)),
  };
}

/** The work a request holds the key for: run the handler, then finish. */
class Attempt extends EventEmitter {
  constructor(idem, key, owner, attempts) {
    super();
    this.idem = idem;
    this.key = key;
    this.owner = owner;
    this.attempts = attempts;
    this.leaseLost = false; // set (and 'leaseLost' emitted) if the heartbeat learns it (ID004)
    this.done = false;
    this._timer = null;
    this._beat = null;
    if (idem.heartbeat) {
      this._timer = setInterval(() => {
        if (this._beat === null) this._beat = this._extend().finally(() => { this._beat = null; });
      }, (idem.lease * 1000) / 3);
      this._timer.unref();
    }
  }

  async _extend() {
    try {
      await query(this.idem.heartbeatPool,
        'SELECT idem_extend($1, $2, make_interval(secs => $3), $4)',
        [this.key, this.owner, this.idem.lease, this.idem.namespace]);
    } catch (err) {
      if (err instanceof LeaseNotHeld) {
        this.idem.logger.warn(`idempotency: lease on ${JSON.stringify(this.key)} lost: another attempt took it over`);
        this.leaseLost = true;
        this._stopTimer();
        this.emit('leaseLost', err);
        return;
      }
      // the database unreachable: try again next beat
      this.idem.logger.warn(`idempotency: heartbeat for ${JSON.stringify(this.key)} failed: ${err.message}`);
    }
  }

  _stopTimer() {
    if (this._timer !== null) clearInterval(this._timer);
    this._timer = null;
  }

  async _stopHeartbeat() {
    this._stopTimer();
    if (this._beat !== null) await this._beat;
  }

  /**
   * Store resp ({status, headers, body}) for replay, or free the key on a
   * 5xx, and resolve to what to send: resp, or a 409 if the lease was lost
   * meanwhile (nothing is stored then).
   */
  async finish(resp) {
    this.done = true;
    await this._stopHeartbeat();
    if (resp.status >= 500) {
      await this._release();
      return resp;
    }
    const stored = {};
    for (const [name, value] of headerPairs(resp.headers)) {
      const lower = name.toLowerCase();
      if (this.idem.storedHeaders.has(lower)) {
        stored[lower] = Array.isArray(value) ? value.join(', ') : String(value);
      }
    }
    try {
      await query(this.idem.pool, 'SELECT idem_complete($1, $2, NULL, $3, $4, $5, $6)',
        [this.key, this.owner, this.idem.namespace, resp.status,
          JSON.stringify(stored), toBuffer(resp.body)]);
    } catch (err) {
      if (!(err instanceof LeaseNotHeld)) throw err;
      this.idem.logger.error(`idempotency: ${JSON.stringify(this.key)} was taken over before this attempt finished; its response is not stored`);
      return json(409, { error: 'lease_lost', message: 'another attempt took this request over' });
    }
    return resp;
  }

  /** The handler threw: free the key so that a retry starts afresh. */
  async abort() {
    this.done = true;
    await this._stopHeartbeat();
    await this._release();
  }

  async _release() {
    try {
      await query(this.idem.pool, 'SELECT idem_fail($1, $2, retryable => true, namespace => $3)',
        [this.key, this.owner, this.idem.namespace]);
    } catch (err) {
      if (!(err instanceof LeaseNotHeld)) throw err; // else: already someone else's
    }
  }
}

/**
 * Configuration and the begin step.
 *
 * pool          a pg.Pool (or anything with query()), or
 * connectionString  a postgres URL: a pg.Pool is made for it (end() closes it)
 * namespace     the extension's namespace (its TTL is how long keys live)
 * scope         req -> string: the tenant (user, API key) the key belongs to
 * fingerprint   req -> string, or null to skip the payload check
 * lease         seconds an attempt holds the key before a retry may take over
 * heartbeat     extend the lease every lease/3 from another connection
 * heartbeatPool where the heartbeat gets its connections (default: pool)
 * wait          seconds to let the server wait for an in-flight attempt
 *               (holds a connection meanwhile: keep null behind a pooler)
 */
class Idempotency {
  constructor({
    pool, connectionString, namespace = 'default', header = 'Idempotency-Key',
    required = false, scope = null, fingerprint = defaultFingerprint, lease = 30,
    heartbeat = true, heartbeatPool = null, wait = null, methods = DEFAULT_METHODS,
    storedHeaders = DEFAULT_STORED_HEADERS, logger = console,
  } = {}) {
    if ((pool == null) === (connectionString == null)) {
      throw new TypeError('give pool or connectionString');
    }
    this._own = [];
    if (pool == null) {
      const pg = require('pg'); // eslint-disable-line global-require
      pool = new pg.Pool({ connectionString, allowExitOnIdle: true });
      pool.on('error', (err) => logger.warn(`idempotency: idle connection lost: ${err.message}`));
      this._own.push(pool);
    }
    this.pool = pool;
    this.heartbeatPool = heartbeatPool || pool;
    this.namespace = namespace;
    this.header = header.toLowerCase();
    this.required = required;
    this.scope = scope;
    this.fingerprint = fingerprint;
    this.lease = Number(lease);
    this.heartbeat = heartbeat;
    this.wait = wait;
    this.methods = new Set(methods.map((m) => m.toUpperCase()));
    this.storedHeaders = new Set(storedHeaders.map((h) => h.toLowerCase()));
    this.storedHeaders.delete('set-cookie');
    this.logger = logger;
  }

  /**
   * req is {method, path, headers (lower-case names), body (Buffer|string)}.
   * Resolves to null when the request is not idempotent (no key, another
   * method), {response} to send at once (replay, 409, 422, 400), or an
   * Attempt whose handler must run.
   */
  async begin(req) {
    if (!this.methods.has(req.method.toUpperCase())) return null;
    let key = req.headers[this.header];
    if (Array.isArray(key)) [key] = key;
    if (key === undefined || key === null) {
      if (this.required) {
        return {
          response: json(400, {
            error: 'idempotency_key_required', message: `send an ${this.header} header`,
          }),
        };
      }
      return null;
    }
    if (!key || Buffer.byteLength(key) > MAX_KEY_BYTES) {
      return {
        response: json(400, {
          error: 'idempotency_key_invalid', message: `the key must be 1 to ${MAX_KEY_BYTES} bytes`,
        }),
      };
    }
    if (this.scope) key = `${this.scope(req)}:${key}`;
    const fp = this.fingerprint ? this.fingerprint(req) : null;
    let row;
    try {
      ({ rows: [row] } = await query(this.pool,
        'SELECT status, owner, attempts, response_status, response_headers, response_body,'
        + '       extract(epoch FROM retry_after)::float8 AS retry_after'
        + '  FROM idem_begin($1, $2, $3, make_interval(secs => $4), make_interval(secs => $5))',
        [key, this.namespace, fp, this.lease, this.wait]));
    } catch (err) {
      if (!(err instanceof FingerprintMismatch)) throw err;
      return {
        response: json(422, {
          error: 'idempotency_key_reused', message: 'this key was used with another request',
        }),
      };
    }
    if (row.status === 'started') return new Attempt(this, key, row.owner, row.attempts);
    if (row.status === 'completed' || row.status === 'failed') {
      return {
        response: {
          status: row.response_status || 200,
          headers: [...Object.entries(row.response_headers || {}), ['idempotent-replayed', 'true']],
          body: row.response_body || Buffer.alloc(0),
        },
      };
    }
    const seconds = Math.max(1, Math.ceil(row.retry_after == null ? 1 : row.retry_after));
    return {
      response: json(409, {
        error: 'request_in_progress', message: 'a request with this key is in progress; retry later',
      }, [['retry-after', String(seconds)]]),
    };
  }

  /** Close the pools made from connectionString. */
  async end() {
    await Promise.all(this._own.splice(0).map((p) => p.end()));
  }
}

module.exports = {
  Idempotency,
  Attempt,
  defaultFingerprint,
  canonicalBody,
  DEFAULT_STORED_HEADERS,
  MAX_KEY_BYTES,
};
