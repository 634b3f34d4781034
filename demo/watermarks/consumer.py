#!/usr/bin/python3
"""demo/watermarks/consumer.py: a consumer of an ordered, partitioned
stream that applies every event once with a watermark per partition.

    consumer.py EPOCH

The stream is the table wm_events (partition, seq, amount), read by seq
within each partition, as a consumer reads a Kafka topic partition by
offset.  On start-up the consumer seeks each partition to
idem_watermark('events', p) + 1.  Then, batch by batch, in one
transaction: it applies the batch's events (wm_applied, wm_totals) and
calls idem_advance('events', p, last seq, EPOCH), and commits.  On
start-up it records its epoch on the partitions it takes over.  A consumer
of an older epoch (a zombie that lost its partitions) is fenced: its
idem_advance raises ID005, its transaction rolls back, and it stops.
"""
import sys
import time

import psycopg

BATCH = 100
PARTITIONS = 8
epoch = int(sys.argv[1])
conn = psycopg.connect("", application_name=f"wm-consumer-{epoch}")

# seek every partition to its committed mark + 1, and take over the
# partitions that have one with this epoch: an advance to the mark itself
# moves nothing but records the epoch, which fences the older consumers
pos = {}
try:
    with conn.transaction():
        for p in range(PARTITIONS):
            mark = conn.execute("SELECT idem_watermark('events', %s)", (p,)).fetchone()[0]
            pos[p] = -1 if mark is None else mark
            if mark is not None:
                conn.execute("SELECT idem_advance('events', %s, %s, %s)", (p, mark, epoch))
except psycopg.DatabaseError as e:
    if e.sqlstate == "ID005":
        print(f"epoch {epoch}: fenced on start-up, stopping", file=sys.stderr)
        sys.exit(3)
    raise

while True:
    progressed = False
    for p in range(PARTITIONS):
        rows = conn.execute(
            "SELECT seq, amount FROM wm_events WHERE partition = %s AND seq > %s ORDER BY seq LIMIT %s",
            (p, pos[p], BATCH)).fetchall()
        if not rows:
            continue
        try:
            with conn.transaction():
                for seq, amount in rows:
                    conn.execute("INSERT INTO wm_applied (partition, seq) VALUES (%s, %s)", (p, seq))
                    conn.execute("UPDATE wm_totals SET total = total + %s WHERE partition = %s", (amount, p))
                time.sleep(0.005)          # the work: a kill -9 can land here
                if not conn.execute("SELECT idem_advance('events', %s, %s, %s)",
                                    (p, rows[-1][0], epoch)).fetchone()[0]:
                    raise RuntimeError("the batch was applied already")    # rolls it back
        except psycopg.DatabaseError as e:
            if e.sqlstate == "ID005":       # fenced: a newer consumer owns the stream
                print(f"epoch {epoch}: fenced, stopping", file=sys.stderr)
                sys.exit(3)
            raise
        conn.commit()
        pos[p] = rows[-1][0]
        progressed = True
    if not progressed:
        break
conn.close()
