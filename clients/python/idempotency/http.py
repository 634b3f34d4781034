"""Stripe-style idempotent HTTP endpoints, framework-free.

A request carrying an ``Idempotency-Key`` header runs its handler once;
every retry gets the first response back (status, stored headers, body)
with ``Idempotent-Replayed: true``.  A retry while the first is in flight
gets 409 with ``Retry-After``; the same key with another payload gets 422.
A handler that raises, or answers 5xx, frees the key for a retry.  The
adapters (``idempotency.flask``, ``idempotency.asgi``) call
:meth:`Idempotency.begin` and :meth:`Attempt.finish` around the handler.
"""
import hashlib
import json
import logging
import math
import threading
from dataclasses import dataclass, field

import psycopg

from .errors import FingerprintMismatch, LeaseNotHeld, execute

log = logging.getLogger("idempotency")

# headers stored with a response unless told otherwise; never Set-Cookie
DEFAULT_STORED_HEADERS = ("content-type", "location", "content-language")
MAX_KEY_BYTES = 255


@dataclass
class Request:
    method: str
    path: str
    headers: dict          # lower-case names
    body: bytes = b""


@dataclass
class Response:
    status: int
    headers: list = field(default_factory=list)   # [(name, value)]
    body: bytes = b""


def canonical_body(body):
    """JSON with sorted keys and no whitespace when the body is JSON, else
    the bytes as they are."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


def default_fingerprint(req):
    """sha256 of the method, the path and the canonical body."""
    h = hashlib.sha256()
    h.update(f"{req.method.upper()} {req.path}\n".encode())
    h.update(canonical_body(req.body))
    return h.hexdigest()


def _json(status, payload, extra=()):
    return Response(status, [("content-type", "application/json"), *extra],
                    json.dumps(payload).encode())


class Attempt:
    """The work a request holds the key for: run the handler, then finish."""

    def __init__(self, idem, key, owner, attempts):
        self.idem = idem
        self.key = key
        self.owner = owner
        self.attempts = attempts
        self.lease_lost = threading.Event()   # set if the heartbeat learns it (ID004)
        self._stop = threading.Event()
        self._beat = None
        if idem.heartbeat:
            self._beat = threading.Thread(target=self._heartbeat, daemon=True)
            self._beat.start()

    def _heartbeat(self):
        every = self.idem.lease / 3
        while not self._stop.wait(every):
            try:
                with self.idem.heartbeat_connect() as conn:
                    execute(conn, "SELECT idem_extend(%s, %s, make_interval(secs => %s), %s)",
                            (self.key, self.owner, self.idem.lease, self.idem.namespace))
            except LeaseNotHeld:
                log.warning("idempotency: lease on %r lost: another attempt took it over", self.key)
                self.lease_lost.set()
                return
            except Exception as e:          # the database unreachable: try again next beat
                log.warning("idempotency: heartbeat for %r failed: %s", self.key, e)

    def _stop_heartbeat(self):
        self._stop.set()
        if self._beat is not None:
            self._beat.join()

    def finish(self, resp):
        """Store resp for replay (or free the key on a 5xx) and return what
        to send: resp, or a 409 if the lease was lost meanwhile."""
        self._stop_heartbeat()
        if resp.status >= 500:
            self._release()
            return resp
        stored = {}
        for name, value in resp.headers:
            if name.lower() in self.idem.stored_headers:
                stored[name.lower()] = value
        try:
            with self.idem.connect() as conn:
                execute(conn, "SELECT idem_complete(%s, %s, NULL, %s, %s, %s, %s)",
                        (self.key, self.owner, self.idem.namespace, resp.status,
                         psycopg.types.json.Jsonb(stored), resp.body))
        except LeaseNotHeld:
            log.error("idempotency: %r was taken over before this attempt finished; "
                      "its response is not stored", self.key)
            return _json(409, {"error": "lease_lost",
                               "message": "another attempt took this request over"})
        return resp

    def abort(self):
        """The handler raised: free the key so that a retry starts afresh."""
        self._stop_heartbeat()
        self._release()

    def _release(self):
        try:
            with self.idem.connect() as conn:
                execute(conn, "SELECT idem_fail(%s, %s, retryable => true, namespace => %s)",
                        (self.key, self.owner, self.idem.namespace))
        except LeaseNotHeld:
            pass                            # already someone else's


class Idempotency:
    """Configuration and the begin step.

    conninfo   a libpq connection string (a connection per call, autocommit,
               no prepared statements: safe behind pgbouncer), or
    pool       a psycopg_pool.ConnectionPool whose connections are autocommit
    namespace  the extension's namespace (its TTL is how long keys live)
    scope      request -> str: the tenant (user, API key) the key belongs to
    fingerprint  request -> str, or None to skip the payload check
    lease      seconds an attempt holds the key before a retry may take over
    heartbeat  extend the lease every lease/3 from another connection
    wait       seconds to let the server wait for an in-flight attempt
               (holds a connection meanwhile: keep None behind a pooler)
    """

    def __init__(self, conninfo=None, *, pool=None, namespace="default",
                 header="Idempotency-Key", required=False, scope=None,
                 fingerprint=default_fingerprint, lease=30.0, heartbeat=True,
                 wait=None, methods=("POST", "PATCH", "PUT", "DELETE"),
                 stored_headers=DEFAULT_STORED_HEADERS, heartbeat_connect=None):
        if (conninfo is None) == (pool is None):
            raise ValueError("give conninfo or pool")
        self.conninfo = conninfo
        self.pool = pool
        self.namespace = namespace
        self.header = header.lower()
        self.required = required
        self.scope = scope
        self.fingerprint = fingerprint
        self.lease = float(lease)
        self.heartbeat = heartbeat
        self.wait = wait
        self.methods = {m.upper() for m in methods}
        self.stored_headers = {h.lower() for h in stored_headers} - {"set-cookie"}
        # the heartbeat's connections: never the handler's own
        self.heartbeat_connect = heartbeat_connect or self.connect

    def connect(self):
        """A connection for one call, as a context manager."""
        if self.pool is not None:
            return self.pool.connection()
        return psycopg.connect(self.conninfo, autocommit=True, prepare_threshold=None)

    def begin(self, req):
        """A Response to send at once (replay, 409, 422, 400), an Attempt
        whose handler must run, or None when the request is not idempotent
        (no key, another method)."""
        if req.method.upper() not in self.methods:
            return None
        key = req.headers.get(self.header)
        if key is None:
            if self.required:
                return _json(400, {"error": "idempotency_key_required",
                                   "message": f"send an {self.header} header"})
            return None
        if not key or len(key.encode()) > MAX_KEY_BYTES:
            return _json(400, {"error": "idempotency_key_invalid",
                               "message": f"the key must be 1 to {MAX_KEY_BYTES} bytes"})
        if self.scope is not None:
            key = f"{self.scope(req)}:{key}"
        fp = self.fingerprint(req) if self.fingerprint else None
        try:
            with self.connect() as conn:
                row = execute(conn,
                              "SELECT status, owner, attempts, response_status, response_headers,"
                              "       response_body, extract(epoch FROM retry_after)"
                              "  FROM idem_begin(%s, %s, %s, make_interval(secs => %s),"
                              "                  make_interval(secs => %s))",
                              (key, self.namespace, fp, self.lease, self.wait)).fetchone()
        except FingerprintMismatch:
            return _json(422, {"error": "idempotency_key_reused",
                               "message": "this key was used with another request"})
        status, owner, attempts, rstatus, rheaders, rbody, retry = row
        if status == "started":
            return Attempt(self, key, owner, attempts)
        if status in ("completed", "failed"):
            headers = list((rheaders or {}).items()) + [("idempotent-replayed", "true")]
            return Response(rstatus or 200, headers, bytes(rbody or b""))
        seconds = max(1, math.ceil(float(retry or 1)))
        return _json(409, {"error": "request_in_progress",
                           "message": "a request with this key is in progress; retry later"},
                     [("retry-after", str(seconds))])
