#!/usr/bin/python3
"""bench/stream_consumer.py: a consumer of 8 ordered partitions over the
wire, for bench/run streams.

    stream_consumer.py MODE EVENTS

It consumes EVENTS events (seq 0, 1, ... of partitions 0..7, round robin)
in batches of 100 per partition.  Each batch is one transaction: the
batch's business writes (one INSERT of 100 rows into stream_effects), and
   MODE=advance: one idem_advance('bench', partition, last seq);
   MODE=claim:   idem_claim_many of the batch's 100 event ids.
Prints "seconds events_per_second".
"""
import sys
import time

import psycopg

mode, events = sys.argv[1], int(sys.argv[2])
BATCH, PARTITIONS = 100, 8
conn = psycopg.connect("", application_name=f"stream-consumer-{mode}", prepare_threshold=0)
next_seq = [0] * PARTITIONS
done = 0
t0 = time.monotonic()
while done < events:
    for p in range(PARTITIONS):
        first = next_seq[p]
        n = min(BATCH, events - done)
        if n <= 0:
            break
        seqs = list(range(first, first + n))
        with conn.transaction():
            conn.execute("INSERT INTO stream_effects (partition, seq, amount)"
                         " SELECT %s, s, s %% 97 FROM unnest(%s::bigint[]) s", (p, seqs))
            if mode == "advance":
                conn.execute("SELECT idem_advance('bench', %s, %s)", (p, seqs[-1]))
            else:
                conn.execute("SELECT count(*) FROM idem_claim_many(%s::text[], 'bench_stream')",
                             ([f"{p}:{s}" for s in seqs],))
        next_seq[p] += n
        done += n
elapsed = time.monotonic() - t0
print(f"{elapsed:.2f} {events / elapsed:.0f}")
