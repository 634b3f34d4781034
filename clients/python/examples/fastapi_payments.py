"""POST /payments on FastAPI, idempotent as Stripe's: run with uvicorn.

    DATABASE_URL=postgresql:///app uvicorn fastapi_payments:app

The idempotency glue is the three lines marked "glue".
"""
import os
import uuid

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from idempotency import Idempotency                     # glue
from idempotency.asgi import IdempotencyMiddleware      # glue


def create_app(dsn, lease=30.0):
    app = FastAPI()
    app.add_middleware(IdempotencyMiddleware, idem=Idempotency(dsn, namespace="payments", lease=lease))  # glue

    @app.post("/payments")
    async def create_payment(request: Request):
        body = await request.json()
        ch = "ch_" + uuid.uuid4().hex[:12]              # the provider's charge
        return JSONResponse({"id": ch, "amount": body["amount"]}, status_code=201,
                            headers={"Location": f"/payments/{ch}"})

    return app


if "DATABASE_URL" in os.environ:
    app = create_app(os.environ["DATABASE_URL"])
