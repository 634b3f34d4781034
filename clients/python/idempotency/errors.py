"""Typed exceptions, raised from the extension's SQLSTATEs."""
import psycopg


class IdempotencyError(Exception):
    """Base class; ``sqlstate`` is the server's code, ``__cause__`` its error."""

    sqlstate = None

    def __init__(self, message, sqlstate=None):
        super().__init__(message)
        if sqlstate is not None:
            self.sqlstate = sqlstate


class FingerprintMismatch(IdempotencyError):
    """ID001: a key or event id reused with another payload (HTTP 422)."""
    sqlstate = "ID001"


class IllegalTransition(IdempotencyError):
    """ID002: a state machine refused a transition."""
    sqlstate = "ID002"


class UnknownState(IdempotencyError):
    """ID003: a state the machine does not declare."""
    sqlstate = "ID003"


class LeaseNotHeld(IdempotencyError):
    """ID004: this attempt no longer holds the request's key."""
    sqlstate = "ID004"


class Fenced(IdempotencyError):
    """ID005: a watermark's epoch is below the partition's highest."""
    sqlstate = "ID005"


class KeyHeldByThisTransaction(IdempotencyError):
    """55006: idem_begin of a key this transaction started and did not finish."""
    sqlstate = "55006"


class IdempotencyTimeout(IdempotencyError):
    """57014 or 55P03: statement_timeout or lock_timeout while waiting."""


_BY_SQLSTATE = {
    "ID001": FingerprintMismatch,
    "ID002": IllegalTransition,
    "ID003": UnknownState,
    "ID004": LeaseNotHeld,
    "ID005": Fenced,
    "55006": KeyHeldByThisTransaction,
    "57014": IdempotencyTimeout,
    "55P03": IdempotencyTimeout,
}


def translate(error):
    """The typed exception for a psycopg error, or None if it is not ours."""
    cls = _BY_SQLSTATE.get(getattr(error, "sqlstate", None))
    if cls is None:
        return None
    exc = cls(str(error).strip(), error.sqlstate)
    exc.__cause__ = error
    return exc


def execute(conn, query, params=()):
    """Run one statement unprepared (safe behind a transaction pooler),
    raising the typed exception for the extension's errors."""
    try:
        return conn.execute(query, params, prepare=False)
    except psycopg.Error as e:
        typed = translate(e)
        if typed is None:
            raise
        raise typed from e
