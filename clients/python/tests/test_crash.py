"""An owner that dies or stalls: kill -9 of the handler's process mid-call,
a heartbeat that keeps a slow handler's key, a stalled owner whose heartbeat
fails, and a consumer killed mid-stream."""
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import psycopg

from idempotency import Idempotency, Request, Response

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_example(dsn, provider_url, lease):
    port = free_port()
    env = dict(os.environ, DATABASE_URL=dsn, PROVIDER_URL=provider_url, LEASE=str(lease),
               PORT=str(port), PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "examples", "flask_payments.py")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("the example did not start")


def post(url, key, body):
    req = urllib.request.Request(url + "/payments", data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json", "idempotency-key": key})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, e.headers, json.load(e)


def test_kill_9_mid_call_then_takeover(dsn, provider, admin, key):
    body = {"amount": 4200}
    provider.slow[key] = 60                     # the provider call the handler dies in
    proc, url = start_example(dsn, provider.url, lease=3)
    def doomed():
        try:
            post(url, key, body)
        except OSError:                         # the server died under it: expected
            pass
    threading.Thread(target=doomed, daemon=True).start()
    try:
        assert provider.wait_for(key)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    # the dead owner's lease is still live: a retry is told to come back
    idem = Idempotency(dsn, namespace="payments", heartbeat=False)
    busy = idem.begin(Request("POST", "/payments", {"idempotency-key": key},
                              json.dumps(body).encode()))
    assert isinstance(busy, Response) and busy.status == 409
    provider.slow[key] = 0
    proc, url = start_example(dsn, provider.url, lease=3)
    try:
        deadline = time.time() + 20
        while True:
            status, headers, out = post(url, key, body)
            if status != 409 or time.time() > deadline:
                break
            time.sleep(0.2)
        assert status == 201, (status, out)
        assert "Idempotent-Replayed" not in headers
        again = post(url, key, body)
        assert again[0] == 201 and again[1]["Idempotent-Replayed"] == "true" and again[2] == out
    finally:
        proc.kill()
        proc.wait()
    assert provider.calls[key] == 2             # the dead attempt's call and the takeover's
    assert len([k for k in provider.charges if k == key]) == 1   # one charge: the provider dedups
    attempts = admin.execute("SELECT attempts FROM idem_requests WHERE key = %s"
                             " AND namespace = 'payments'", (key,)).fetchone()[0]
    assert attempts == 2


def test_heartbeat_keeps_a_slow_handlers_key(dsn, provider, key):
    from flask_payments import create_app
    app = create_app(dsn, provider.url, lease=1.0)
    provider.slow[key] = 3.5                    # three and a half leases
    out = {}
    t = threading.Thread(target=lambda: out.setdefault(
        "first", app.test_client().post("/payments", json={"amount": 1},
                                        headers={"Idempotency-Key": key})))
    t.start()
    assert provider.wait_for(key)
    time.sleep(2.2)                             # past two leases: only the heartbeat kept it
    busy = app.test_client().post("/payments", json={"amount": 1}, headers={"Idempotency-Key": key})
    assert busy.status_code == 409
    t.join()
    assert out["first"].status_code == 201
    assert provider.calls[key] == 1


def test_a_stalled_owner_whose_heartbeat_fails_loses_its_key(dsn, key):
    dead = lambda: psycopg.connect("host=127.0.0.1 port=1 connect_timeout=1")
    stalled = Idempotency(dsn, namespace="payments", lease=1.0, heartbeat_connect=dead)
    req = Request("POST", "/p", {"idempotency-key": key}, b'{"amount": 1}')
    first = stalled.begin(req)
    assert first.attempts == 1
    time.sleep(1.5)
    other = Idempotency(dsn, namespace="payments", lease=30.0, heartbeat=False)
    second = other.begin(req)
    assert not isinstance(second, Response) and second.attempts == 2   # took over
    late = first.finish(Response(201, [], b"late"))
    assert late.status == 409 and json.loads(late.body)["error"] == "lease_lost"
    assert second.finish(Response(201, [], b"on time")).body == b"on time"
    assert other.begin(req).body == b"on time"


def test_a_consumer_killed_mid_stream(dsn, admin):
    """Each run of the consumer is delivered every event again (at least
    once); runs are killed with -9 at random; the ledger must hold each
    event once and the balance their sum."""
    tag = f"c{time.time_ns()}"
    admin.execute(f"CREATE TABLE {tag}_ledger (event text, amount int)")
    admin.execute(f"GRANT INSERT, SELECT ON {tag}_ledger TO idem_py_app")
    n = 3000
    worker = os.path.join(HERE, "consumer_worker.py")
    env = dict(os.environ, PYTHONPATH=ROOT)
    try:
        for run in range(5):
            proc = subprocess.Popen([sys.executable, worker, dsn, tag, str(n)], env=env)
            if run < 4:
                time.sleep(random.uniform(0.4, 1.2))
                os.kill(proc.pid, signal.SIGKILL)
            assert proc.wait(timeout=300) in (0, -signal.SIGKILL)
        assert proc.returncode == 0
        count, distinct, total = admin.execute(
            f"SELECT count(*), count(DISTINCT event), sum(amount) FROM {tag}_ledger").fetchone()
        assert (count, distinct) == (n, n), "an event applied twice or lost"
        assert total == sum(i % 7 + 1 for i in range(n))
    finally:
        admin.execute(f"DROP TABLE {tag}_ledger")
