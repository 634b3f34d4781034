"""A consumer for test_crash.py: events 0..n-1 delivered again from the
start, each applied with its claim in one transaction."""
import sys

import psycopg

from idempotency import claim

dsn, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with psycopg.connect(dsn) as conn:
    for i in range(n):
        with claim(conn, f"{tag}-{i}", "payments") as first:
            if first:
                conn.execute(f"INSERT INTO {tag}_ledger VALUES (%s, %s)", (f"{tag}-{i}", i % 7 + 1))
