"""Fixtures: the server (test/clients/run-python.sh starts it and sets the
DSNs), a fake payment provider, and the example apps."""
import json
import os
import sys
import threading
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))


def env(name):
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run the tests with test/clients/run-python.sh")
    return value


@pytest.fixture(scope="session")
def dsn():
    """The application role, straight to the server."""
    return env("IDEM_TEST_DSN")


@pytest.fixture(scope="session")
def bouncer_dsn():
    """The application role through pgbouncer in transaction mode."""
    return env("IDEM_TEST_BOUNCER_DSN")


@pytest.fixture()
def admin():
    with psycopg.connect(env("IDEM_TEST_ADMIN_DSN"), autocommit=True) as conn:
        yield conn


@pytest.fixture()
def key():
    return "k-" + uuid.uuid4().hex


class FakeProvider:
    """A payment provider's HTTP API: POST /charges with an Idempotency-Key
    header.  Like Stripe it deduplicates on the key (the same charge comes
    back); calls counts every call it received, charges every charge made."""

    def __init__(self):
        self.calls = Counter()
        self.charges = {}
        self.slow = {}                  # key -> seconds to take
        self.arrived = {}               # key -> threading.Event
        self.lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                k = self.headers["idempotency-key"]
                with provider.lock:
                    provider.calls[k] += 1
                    provider.arrived.setdefault(k, threading.Event()).set()
                    delay = provider.slow.get(k, 0)
                if delay:
                    threading.Event().wait(delay)
                with provider.lock:
                    ch = provider.charges.setdefault(k, ("ch_" + uuid.uuid4().hex[:12], body["amount"]))
                out = json.dumps({"id": ch[0], "amount": ch[1]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, key, timeout=10):
        with self.lock:
            ev = self.arrived.setdefault(key, threading.Event())
        return ev.wait(timeout)


@pytest.fixture()
def provider():
    p = FakeProvider()
    yield p
    p.server.shutdown()


@pytest.fixture()
def flask_app(dsn, provider):
    from flask_payments import create_app
    return create_app(dsn, provider.url)
