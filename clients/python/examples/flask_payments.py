"""POST /payments, idempotent as Stripe's: run with DATABASE_URL set.

    DATABASE_URL=postgresql:///app python3 flask_payments.py
    curl -X POST localhost:5000/payments -H 'Idempotency-Key: k-1' -d '{"amount": 1999}' \
         -H 'content-type: application/json'

The idempotency glue is the four lines marked "glue".  PROVIDER_URL points
the charges at a payment provider's HTTP API (the tests' fake one); without
it they are made up here.
"""
import json
import os
import urllib.request
import uuid

from flask import Flask, jsonify, request

from idempotency import Idempotency                     # glue
from idempotency.flask import idempotent                # glue


def charge(provider_url, key, amount):
    """The side effect outside the database: one call to the provider,
    with the key, so that the provider can deduplicate too."""
    if not provider_url:
        return "ch_" + uuid.uuid4().hex[:12]
    req = urllib.request.Request(provider_url + "/charges", data=json.dumps({"amount": amount}).encode(),
                                 headers={"content-type": "application/json", "idempotency-key": key})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)["id"]


def create_app(dsn, provider_url=None, lease=30.0):
    app = Flask(__name__)
    idem = Idempotency(dsn, namespace="payments", lease=lease)   # glue

    @app.post("/payments")
    @idempotent(idem)                                   # glue
    def create_payment():
        body = request.get_json()
        key = request.headers.get("Idempotency-Key") or uuid.uuid4().hex
        ch = charge(provider_url, key, body["amount"])
        return jsonify(id=ch, amount=body["amount"]), 201, {"Location": f"/payments/{ch}"}

    return app


if __name__ == "__main__":
    app = create_app(os.environ["DATABASE_URL"], os.environ.get("PROVIDER_URL"),
                     float(os.environ.get("LEASE", "30")))
    app.run(host="127.0.0.1", port=int(os.environ.get("PORT", "5000")), threaded=True)
