#!/usr/bin/python3
"""demo/broker/producer.py: publish N payment events to the stream
"payments", a tenth of them twice (a producer that retried after a lost
reply), and record each distinct event in broker_published for the check.

    producer.py N ACCOUNTS
"""
import os
import random
import sys
import uuid

import psycopg
import redis

n, accounts = int(sys.argv[1]), int(sys.argv[2])
r = redis.Redis(unix_socket_path=os.environ["REDIS_SOCKET"], decode_responses=True)
rng = random.Random(7)
events = [(str(uuid.UUID(int=rng.getrandbits(128), version=4)), rng.randrange(1, accounts + 1),
           rng.randrange(1, 100)) for _ in range(n)]
with psycopg.connect("") as conn:
    with conn.cursor().copy("COPY broker_published (event_id, account, amount) FROM STDIN") as copy:
        for e in events:
            copy.write_row(e)
pipe = r.pipeline(transaction=False)
for i, (event_id, account, amount) in enumerate(events):
    fields = {"event_id": event_id, "account": account, "amount": amount}
    pipe.xadd("payments", fields)
    if i % 10 == 3:
        pipe.xadd("payments", fields)           # published twice
    if i % 500 == 499:
        pipe.execute()
pipe.set("produced", "done")
pipe.execute()
