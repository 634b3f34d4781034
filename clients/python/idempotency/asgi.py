"""An ASGI middleware (Starlette, FastAPI):
``app.add_middleware(IdempotencyMiddleware, idem=Idempotency(...))``.

The database calls run in a worker thread (anyio), so the event loop never
blocks on them; the response is buffered, stored, then sent.
"""
import anyio

from .http import Request, Response


class IdempotencyMiddleware:
    def __init__(self, app, idem):
        self.app = app
        self.idem = idem

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"].upper() not in self.idem.methods:
            await self.app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        decision = await anyio.to_thread.run_sync(
            self.idem.begin, Request(scope["method"], scope["path"], headers, body))

        replayed = False

        async def receive_again():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        if decision is None:
            await self.app(scope, receive_again, send)
            return
        if isinstance(decision, Response):
            await _send(send, decision)
            return
        scope.setdefault("state", {})["idempotency"] = decision
        start = {}
        chunks = []

        async def capture(message):
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        try:
            await self.app(scope, receive_again, capture)
        except BaseException:
            await anyio.to_thread.run_sync(decision.abort)
            raise
        resp = Response(start.get("status", 500),
                        [(k.decode("latin-1"), v.decode("latin-1")) for k, v in start.get("headers", [])],
                        b"".join(chunks))
        sent = await anyio.to_thread.run_sync(decision.finish, resp)
        await _send(send, sent)


async def _send(send, resp):
    await send({"type": "http.response.start", "status": resp.status,
                "headers": [(k.lower().encode("latin-1"), str(v).encode("latin-1"))
                            for k, v in resp.headers if k.lower() != "content-length"]
                + [(b"content-length", str(len(resp.body)).encode())]})
    await send({"type": "http.response.body", "body": resp.body})
