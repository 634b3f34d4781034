"""A Flask decorator: ``@idempotent(Idempotency(...))`` on a view."""
import functools

from flask import Response as FlaskResponse, g, make_response, request

from .http import Request, Response


def _request():
    headers = {k.lower(): v for k, v in request.headers.items()}
    return Request(request.method, request.path, headers, request.get_data(cache=True))


def _send(resp):
    return FlaskResponse(resp.body, status=resp.status, headers=resp.headers)


def idempotent(idem):
    """Run the view once per key; replay its response to every retry.
    The running attempt is ``flask.g.idempotency`` (its ``lease_lost``
    event says when another attempt took over)."""
    def decorate(view):
        @functools.wraps(view)
        def wrapper(*args, **kwargs):
            decision = idem.begin(_request())
            if decision is None:
                return view(*args, **kwargs)
            if isinstance(decision, Response):
                return _send(decision)
            g.idempotency = decision
            try:
                out = make_response(view(*args, **kwargs))
            except BaseException:
                decision.abort()
                raise
            out.direct_passthrough = False
            resp = Response(out.status_code, list(out.headers.items()), out.get_data())
            sent = decision.finish(resp)
            return out if sent is resp else _send(sent)
        return wrapper
    return decorate
