'use strict';
// An Express middleware: app.post('/payments', idempotent(idem), handler).
const { Attempt } = require('./http');

const JSON_TYPE = /^[^;]*(\/|\+)json\s*(;|$)/i;
const hooked = new WeakSet();

function readStream(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

// The body as the client sent it, or as near as a body parser that ran
// before left it (the fingerprint canonicalises JSON anyway).
async function rawBody(req) {
  if (Buffer.isBuffer(req.rawBody) || typeof req.rawBody === 'string') return req.rawBody;
  if (req._body) { // a body-parser (express.json(), ...) consumed the stream
    if (Buffer.isBuffer(req.body) || typeof req.body === 'string') return req.body;
    return Buffer.from(JSON.stringify(req.body === undefined ? null : req.body));
  }
  // nobody read it yet: read it, keep it as req.rawBody, and parse JSON into
  // req.body so that the handler needs no express.json()
  const buf = await readStream(req);
  req.rawBody = buf;
  if (JSON_TYPE.test(req.headers['content-type'] || '') && buf.length > 0) {
    try {
      req.body = JSON.parse(buf.toString('utf8'));
    } catch (_) {
      req.body = buf;
    }
  } else {
    req.body = buf;
  }
  req._body = true;
  return buf;
}

function send(res, resp) {
  for (const name of res.getHeaderNames()) res.removeHeader(name);
  res.statusCode = resp.status;
  const headers = Array.isArray(resp.headers) ? resp.headers : Object.entries(resp.headers || {});
  for (const [name, value] of headers) res.setHeader(name, value);
  res.end(resp.body);
}

// Once per route: an error handler after the route's handlers, so that a
// handler that throws or calls next(err) aborts its attempt (the key is
// freed) before the error goes on to the app's error handlers.
function hookRouteErrors(route) {
  if (!route || hooked.has(route) || typeof route.all !== 'function') return;
  hooked.add(route);
  // eslint-disable-next-line no-unused-vars
  route.all((err, req, res, next) => {
    const attempt = res.locals && res.locals.idempotency;
    if (!(attempt instanceof Attempt) || attempt.done) return next(err);
    return attempt.abort().then(() => next(err), (e) => {
      attempt.idem.logger.error(`idempotency: releasing ${JSON.stringify(attempt.key)} failed: ${e.message}`);
      next(err);
    });
  });
}

/**
 * Run the route's handler once per key and replay its response to every
 * retry.  The running attempt is res.locals.idempotency (its leaseLost says
 * when another attempt took over).
 */
function idempotent(idem) {
  return function idempotencyMiddleware(req, res, next) {
    const method = req.method.toUpperCase();
    if (!idem.methods.has(method) || (req.headers[idem.header] === undefined && !idem.required)) {
      return next();
    }
    (async () => {
      const decision = await idem.begin({
        method,
        path: (req.baseUrl || '') + req.path,
        headers: req.headers,
        body: await rawBody(req),
        req,
      });
      if (decision === null) return next();
      if (!(decision instanceof Attempt)) return send(res, decision.response);
      const attempt = decision;
      res.locals.idempotency = attempt;
      hookRouteErrors(req.route);
      capture(res, attempt);
      return next();
    })().catch(next);
    return undefined;
  };
}

// Hold the handler's response (res.status/set/send/json all end in
// writeHead, write and end) until finish says what to send.
function capture(res, attempt) {
  const original = { writeHead: res.writeHead, write: res.write, end: res.end };
  const chunks = [];
  const restore = () => Object.assign(res, original);
  const add = (chunk, encoding) => {
    if (chunk == null || typeof chunk === 'function') return;
    chunks.push(Buffer.isBuffer(chunk) ? chunk
      : Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8'));
  };
  res.writeHead = function writeHead(status, reason, headers) {
    res.statusCode = status;
    const h = typeof reason === 'string' ? headers : reason;
    if (typeof reason === 'string') res.statusMessage = reason;
    if (Array.isArray(h)) {
      for (let i = 0; i + 1 < h.length; i += 2) res.setHeader(h[i], h[i + 1]);
    } else if (h) {
      for (const [name, value] of Object.entries(h)) res.setHeader(name, value);
    }
    return res;
  };
  res.write = function write(chunk, encoding, cb) {
    add(chunk, encoding);
    const done = typeof encoding === 'function' ? encoding : cb;
    if (done) process.nextTick(done);
    return true;
  };
  res.end = function end(chunk, encoding, cb) {
    add(chunk, encoding);
    restore();
    const body = Buffer.concat(chunks);
    if (attempt.done) { // aborted: the error's response goes out as it is
      res.end(body);
      return res;
    }
    const resp = { status: res.statusCode, headers: res.getHeaders(), body };
    attempt.finish(resp).then((sent) => {
      if (sent === resp) res.end(body);
      else send(res, sent);
    }, (err) => {
      attempt.idem.logger.error(`idempotency: storing the response of ${JSON.stringify(attempt.key)} failed: ${err.message}`);
      send(res, {
        status: 500,
        headers: [['content-type', 'application/json']],
        body: JSON.stringify({ error: 'idempotency_unavailable', message: 'the response could not be stored' }),
      });
    });
    return res;
  };
}

module.exports = { idempotent };
