"""Concurrent duplicates: 1,000 requests over 200 keys from 8 threads, each
retrying its 409s, straight to the server and through pgbouncer in
transaction mode.  The fake provider must see every key exactly once."""
import json
import threading
import time
import urllib.error
import urllib.request
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import pytest
from werkzeug.serving import make_server


def serve(app):
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


def send(url, key, amount):
    """POST until the answer is final (not a 409): the status, the body and
    whether it was a replay."""
    data = json.dumps({"amount": amount}).encode()
    for _ in range(600):
        req = urllib.request.Request(url + "/payments", data=data, method="POST",
                                     headers={"content-type": "application/json",
                                              "idempotency-key": key})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.load(r), r.headers.get("idempotent-replayed")
        except urllib.error.HTTPError as e:
            if e.code != 409:
                return e.code, json.load(e), None
            time.sleep(0.02)
    raise AssertionError(f"{key}: still in progress after 600 tries")


@pytest.mark.parametrize("via", ["direct", "pgbouncer"])
def test_no_key_is_charged_twice(request, provider, via, admin):
    from flask_payments import create_app
    dsn = request.getfixturevalue("dsn" if via == "direct" else "bouncer_dsn")
    server, url = serve(create_app(dsn, provider.url))
    tag = f"{via}-{time.time_ns()}"
    keys = [f"{tag}-{i}" for i in range(200)]
    jobs = [keys[i % 200] for i in range(1000)]
    try:
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda k: (k, send(url, k, 100)), jobs))
    finally:
        server.shutdown()
    charges = defaultdict(set)
    replays = 0
    for k, (status, body, replayed) in results:
        assert status == 201, (k, status, body)
        charges[k].add(body["id"])
        replays += replayed == "true"
    assert len(charges) == 200
    assert all(len(ids) == 1 for ids in charges.values()), "a key answered with two charges"
    assert all(provider.calls[k] == 1 for k in keys), \
        {k: provider.calls[k] for k in keys if provider.calls[k] != 1}
    assert replays == 800
    done = admin.execute("SELECT count(*) FROM idem_requests WHERE namespace = 'payments'"
                         " AND key LIKE %s AND status = 'completed'", (tag + "-%",)).fetchone()[0]
    assert done == 200
