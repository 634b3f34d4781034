"""The Stripe semantics one by one, on the Flask example and the core."""
import json
import threading
import uuid

import psycopg
import pytest

from idempotency import (FingerprintMismatch, Idempotency, LeaseNotHeld, Request, Response,
                         claim)
from idempotency.errors import execute


def post(client, key, body, **headers):
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post("/payments", data=json.dumps(body), headers=headers,
                       content_type="application/json")


def stats(admin, ns="payments"):
    row = admin.execute("SELECT request_begins, request_replays, request_in_flight,"
                        " request_mismatches, request_takeovers, request_failures, request_forgets"
                        " FROM idem_stats WHERE namespace = %s", (ns,)).fetchone()
    names = ("begins", "replays", "in_flight", "mismatches", "takeovers", "failures", "forgets")
    return dict(zip(names, row or (0,) * len(names)))


def test_replay_keeps_status_body_and_location(flask_app, provider, key):
    client = flask_app.test_client()
    first = post(client, key, {"amount": 1999})
    assert first.status_code == 201
    assert "idempotent-replayed" not in first.headers
    again = post(client, key, {"amount": 1999})
    assert again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json() == first.get_json()
    assert again.headers["Location"] == first.headers["Location"]
    assert again.headers["Content-Type"] == "application/json"
    assert provider.calls[key] == 1


def test_same_key_other_body_is_422_with_a_safe_body(flask_app, provider, key):
    client = flask_app.test_client()
    first = post(client, key, {"amount": 1999})
    other = post(client, key, {"amount": 5})
    assert other.status_code == 422
    assert other.get_json()["error"] == "idempotency_key_reused"
    # nothing of the stored request: neither its charge nor its amount
    assert first.get_json()["id"] not in other.get_data(as_text=True)
    assert "1999" not in other.get_data(as_text=True)
    assert provider.calls[key] == 1


def test_json_key_order_and_spacing_do_not_change_the_fingerprint(flask_app, provider, key):
    client = flask_app.test_client()
    a = client.post("/payments", data='{"amount": 7, "currency": "eur"}',
                    headers={"Idempotency-Key": key}, content_type="application/json")
    b = client.post("/payments", data='{"currency":"eur","amount":7}',
                    headers={"Idempotency-Key": key}, content_type="application/json")
    assert a.status_code == 201 and b.status_code == 201
    assert b.headers["Idempotent-Replayed"] == "true"
    assert provider.calls[key] == 1


def test_without_a_key_the_handler_runs_every_time(flask_app, provider):
    client = flask_app.test_client()
    a = post(client, None, {"amount": 1})
    b = post(client, None, {"amount": 1})
    assert a.status_code == b.status_code == 201
    assert a.get_json()["id"] != b.get_json()["id"]
    assert "Idempotent-Replayed" not in b.headers


@pytest.mark.parametrize("bad", ["", "x" * 256, "é" * 128])
def test_an_empty_or_too_long_key_is_400(flask_app, provider, bad):
    resp = post(flask_app.test_client(), bad, {"amount": 1})
    assert resp.status_code == 400
    assert resp.get_json()["error"] == "idempotency_key_invalid"
    assert sum(provider.calls.values()) == 0


def test_a_key_of_255_bytes_is_accepted(flask_app, provider):
    key = "k" * 255
    resp = post(flask_app.test_client(), key, {"amount": 1})
    assert resp.status_code == 201


def test_required_key(dsn):
    idem = Idempotency(dsn, namespace="payments", required=True)
    out = idem.begin(Request("POST", "/p", {}, b"{}"))
    assert isinstance(out, Response) and out.status == 400
    assert json.loads(out.body)["error"] == "idempotency_key_required"


def test_scopes_keep_tenants_apart(dsn, key):
    idem = Idempotency(dsn, namespace="payments", scope=lambda r: r.headers["x-tenant"],
                       heartbeat=False)
    done = []
    for tenant in ("acme", "globex"):
        att = idem.begin(Request("POST", "/p", {"idempotency-key": key, "x-tenant": tenant}, b"{}"))
        assert not isinstance(att, Response) and att is not None, tenant
        assert att.key == f"{tenant}:{key}"
        done.append(att.finish(Response(201, [], tenant.encode())))
    replay = idem.begin(Request("POST", "/p", {"idempotency-key": key, "x-tenant": "globex"}, b"{}"))
    assert replay.body == b"globex"


def test_get_passes_through(dsn, key):
    idem = Idempotency(dsn, namespace="payments")
    assert idem.begin(Request("GET", "/p", {"idempotency-key": key})) is None


def failing_app(dsn, mode):
    from flask import Flask
    from idempotency.flask import idempotent
    app = Flask(__name__)
    runs = []
    idem = Idempotency(dsn, namespace="payments", heartbeat=False)

    @app.post("/payments")
    @idempotent(idem)
    def handler():
        runs.append(1)
        if len(runs) == 1:
            if mode == "raise":
                raise RuntimeError("provider down")
            return {"error": "upstream"}, 503
        return {"ok": True}, 201

    app.config["PROPAGATE_EXCEPTIONS"] = False
    return app, runs


@pytest.mark.parametrize("mode", ["raise", "5xx"])
def test_a_failed_attempt_frees_the_key(dsn, key, mode):
    app, runs = failing_app(dsn, mode)
    client = app.test_client()
    first = post(client, key, {"amount": 1})
    assert first.status_code in (500, 503)
    second = post(client, key, {"amount": 1})
    assert second.status_code == 201 and "Idempotent-Replayed" not in second.headers
    assert len(runs) == 2
    third = post(client, key, {"amount": 1})
    assert third.headers["Idempotent-Replayed"] == "true" and len(runs) == 2


def test_a_4xx_is_stored_and_replayed(dsn, key):
    idem = Idempotency(dsn, namespace="payments", heartbeat=False)
    req = Request("POST", "/p", {"idempotency-key": key}, b'{"amount": 0}')
    att = idem.begin(req)
    att.finish(Response(402, [("content-type", "application/json")], b'{"error":"card_declined"}'))
    again = idem.begin(req)
    assert again.status == 402 and again.body == b'{"error":"card_declined"}'
    assert ("idempotent-replayed", "true") in again.headers


def test_in_flight_is_409_with_retry_after(flask_app, provider, key):
    provider.slow[key] = 3
    client = flask_app.test_client()
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("first", post(flask_app.test_client(), key,
                                                                     {"amount": 3})))
    t.start()
    assert provider.wait_for(key)
    busy = post(client, key, {"amount": 3})
    assert busy.status_code == 409
    assert busy.get_json()["error"] == "request_in_progress"
    assert 1 <= int(busy.headers["Retry-After"]) <= 30
    t.join()
    assert out["first"].status_code == 201
    assert post(client, key, {"amount": 3}).headers["Idempotent-Replayed"] == "true"
    assert provider.calls[key] == 1


def test_set_cookie_is_not_stored(dsn, key):
    idem = Idempotency(dsn, namespace="payments", heartbeat=False,
                       stored_headers=("content-type", "set-cookie", "x-charge"))
    req = Request("POST", "/p", {"idempotency-key": key}, b"{}")
    att = idem.begin(req)
    sent = att.finish(Response(201, [("Set-Cookie", "session=secret"), ("X-Charge", "ch_1"),
                                     ("X-Other", "no")], b"{}"))
    assert sent.status == 201
    replay = idem.begin(req)
    names = {n for n, _ in replay.headers}
    assert "set-cookie" not in names and "x-other" not in names
    assert ("x-charge", "ch_1") in replay.headers


def test_idem_stats_count_the_request_traffic(flask_app, provider, admin, key):
    before = stats(admin)
    client = flask_app.test_client()
    post(client, key, {"amount": 1})          # begin
    post(client, key, {"amount": 1})          # replay
    post(client, key, {"amount": 2})          # mismatch
    after = stats(admin)
    assert after["begins"] - before["begins"] == 1
    assert after["replays"] - before["replays"] == 1
    assert after["mismatches"] - before["mismatches"] == 1


def test_typed_errors(dsn, key):
    with psycopg.connect(dsn, autocommit=True) as conn:
        execute(conn, "SELECT idem_begin(%s, 'payments')", (key,))
        with pytest.raises(LeaseNotHeld) as e:
            execute(conn, "SELECT idem_complete(%s, %s, '{}', 'payments')", (key, uuid.uuid4()))
        assert e.value.sqlstate == "ID004"
        execute(conn, "SELECT idem_claim(%s, 'payments', 'fp-a')", (key,))
        with pytest.raises(FingerprintMismatch) as e:
            execute(conn, "SELECT idem_claim(%s, 'payments', 'fp-b')", (key,))
        assert e.value.sqlstate == "ID001"
        assert isinstance(e.value.__cause__, psycopg.Error)


def test_consumer_claim_commits_and_rolls_back_with_the_business_write(dsn, key):
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TEMP TABLE ledger (event text)")
        conn.commit()
        with pytest.raises(RuntimeError):
            with claim(conn, key, "payments") as first:
                assert first
                conn.execute("INSERT INTO ledger VALUES (%s)", (key,))
                raise RuntimeError("crash before the commit")
        with claim(conn, key, "payments") as first:      # the claim rolled back too
            assert first
            conn.execute("INSERT INTO ledger VALUES (%s)", (key,))
        with claim(conn, key, "payments") as first:
            assert not first
        assert conn.execute("SELECT count(*) FROM ledger").fetchone()[0] == 1


def test_fastapi_example_through_the_asgi_middleware(dsn, key):
    from fastapi.testclient import TestClient
    from fastapi_payments import create_app
    client = TestClient(create_app(dsn))
    a = client.post("/payments", json={"amount": 10}, headers={"Idempotency-Key": key})
    b = client.post("/payments", json={"amount": 10}, headers={"Idempotency-Key": key})
    c = client.post("/payments", json={"amount": 11}, headers={"Idempotency-Key": key})
    assert a.status_code == b.status_code == 201
    assert b.headers["idempotent-replayed"] == "true" and b.json() == a.json()
    assert b.headers["location"] == a.headers["location"]
    assert c.status_code == 422
    d = client.post("/payments", json={"amount": 10})
    assert d.status_code == 201 and d.json()["id"] != a.json()["id"]


def test_a_forgotten_request_loses_its_lease(flask_app, provider, admin, key):
    """idem_request_forget while the handler runs: a retry starts afresh and
    the first attempt's finish stores nothing (409 lease_lost)."""
    provider.slow[key] = 2
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("first", post(flask_app.test_client(), key,
                                                                     {"amount": 4})))
    t.start()
    assert provider.wait_for(key)
    assert admin.execute("SELECT idem_request_forget(%s, 'payments')", (key,)).fetchone()[0]
    provider.slow[key] = 0
    second = post(flask_app.test_client(), key, {"amount": 4})
    assert second.status_code == 201
    t.join()
    assert out["first"].status_code == 409
    assert out["first"].get_json()["error"] == "lease_lost"
    third = post(flask_app.test_client(), key, {"amount": 4})
    assert third.headers["Idempotent-Replayed"] == "true"
    assert third.get_json() == second.get_json()
