#!/usr/bin/python3
"""demo/broker/consumer.py: a Redis Streams consumer that applies payment
events to account balances exactly once.

    consumer.py NAME [--no-claim]

It reads the stream "payments" in the consumer group "ledger" with
XREADGROUP, in batches.  For each batch, in one PostgreSQL transaction, it
claims every event id with idem_claim and applies the new ones; it COMMITs,
and only then XACKs the batch.  A crash between COMMIT and XACK leaves the
batch pending in the group, and another consumer takes it over with
XAUTOCLAIM once it has been idle for IDLE_MS: the redelivery the claims make
harmless.  A database error rolls the batch back and leaves it unacked, to
be taken over the same way (Redis Streams have no nack).

With --no-claim it applies every delivery it gets: the naive consumer.
It exits when the group has nothing left to deliver or take over.
"""
import os
import sys
import time

import psycopg
import redis

STREAM, GROUP = "payments", "ledger"
BATCH = 20
IDLE_MS = 1500                      # a pending message idle this long is taken over
ACK_DELAY = float(os.environ.get("ACK_DELAY", "0.08"))  # the window between COMMIT and XACK

name = sys.argv[1]
claim = "--no-claim" not in sys.argv[2:]
r = redis.Redis(unix_socket_path=os.environ["REDIS_SOCKET"], decode_responses=True)
conn = psycopg.connect("", application_name=f"broker-{name}")


def apply(messages):
    """One transaction for the batch: claim, apply what is new, commit.
    Accounts are updated in id order, so that two batches rarely deadlock."""
    with conn.transaction():
        for _, fields in sorted(messages, key=lambda m: int(m[1]["account"])):
            if claim:
                first = conn.execute("SELECT idem_claim(%s, 'broker')", (fields["event_id"],)).fetchone()[0]
                if not first:
                    conn.execute("UPDATE broker_counts SET refused = refused + 1")
                    continue
            conn.execute("UPDATE broker_accounts SET balance = balance + %s WHERE id = %s",
                         (int(fields["amount"]), int(fields["account"])))
            conn.execute("INSERT INTO broker_applied (event_id) VALUES (%s)", (fields["event_id"],))


def finished():
    info = next(g for g in r.xinfo_groups(STREAM) if g["name"] == GROUP)
    return info["pending"] == 0 and info["lag"] == 0 and r.get("produced") == "done"


cursor = "0-0"
while True:
    # first the batches of consumers that died before acking them
    cursor, messages, _ = r.xautoclaim(STREAM, GROUP, name, IDLE_MS, cursor, count=BATCH)
    if messages:
        r.incrby("taken_over", len(messages))
    else:
        got = r.xreadgroup(GROUP, name, {STREAM: ">"}, count=BATCH, block=200)
        messages = got[0][1] if got else []
    if not messages:
        if finished():
            break
        time.sleep(0.1)
        continue
    try:
        apply(messages)
    except psycopg.Error as e:
        # rolled back: leave the batch unacked, another consumer takes it over
        print(f"{name}: {e.sqlstate}: {str(e).splitlines()[0]}; batch left pending", file=sys.stderr)
        time.sleep(0.5)
        continue
    time.sleep(ACK_DELAY)           # the network, the client library: a crash can land here
    r.xack(STREAM, GROUP, *[mid for mid, _ in messages])
conn.close()
