"""Claims for consumers: the dedup commits with the business write."""
from contextlib import contextmanager

from .errors import execute


@contextmanager
def claim(conn, event_id, namespace="default", fingerprint=None):
    """Claim ``event_id`` in a transaction of ``conn`` and yield whether it
    is the first delivery; the business write goes inside the block::

        with claim(conn, msg.id, "orders") as first:
            if first:
                conn.execute("UPDATE accounts ...")
        msg.ack()

    The claim and the write commit together when the block ends, or roll
    back together on an exception (a redelivery then finds no claim).
    """
    with conn.transaction():
        if fingerprint is None:
            cur = execute(conn, "SELECT idem_claim(%s, %s)", (str(event_id), namespace))
        else:
            cur = execute(conn, "SELECT idem_claim(%s, %s, %s)",
                          (str(event_id), namespace, fingerprint))
        yield bool(cur.fetchone()[0])
