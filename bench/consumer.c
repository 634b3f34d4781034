/*
 * consumer.c
 *	  The strategies benchmark's client: concurrent consumers of one
 *	  at-least-once event stream, each deduplicating with one strategy and
 *	  applying a business write (a ledger row and a balance update).
 *
 * The stream is deterministic for a seed: `events` deliveries of
 * `events * (1 - dup_ratio)` distinct events, the rest redeliveries of
 * earlier events, half of them within the last 64 deliveries (so that
 * concurrent consumers race on them) and half from anywhere earlier (a
 * redelivery after a rebalance).  Consumers pull deliveries from a shared
 * counter, one at a time or `batch` at a time, and process each in its own
 * transaction where the strategy allows.  Any failure (a lost connection, a
 * deadlock, Redis gone) makes the consumer retry the delivery, as a broker
 * would redeliver an unacknowledged one.  A fault command, if given, runs
 * once half of the stream has been handed out.
 *
 * With --pair, a second strategy consumes its own copy of the stream at
 * the same time, with as many consumers, its events numbered from 10^9 in
 * the shared ledger: both see the same machine, disk and noise, and their
 * throughputs are counted over the window in which both are running.  This
 * is how the bars compare two strategies on a noisy machine.
 *
 * At the end it reads the ledger: events applied twice and events lost,
 * against exactly once, and prints one tab-separated line per strategy:
 *
 *	 strategy consumers fault deliveries events seconds events_per_s
 *	 p50_ms p99_ms applied_twice lost retries balances_consistent
 *
 * Strategies (see bench/strategies.sql for the tables):
 *	 naive         SELECT, then INSERT into a table without a unique key
 *	 unique        INSERT ... ON CONFLICT DO NOTHING on a unique table
 *	 redis         Redis SET NX EX, then the business write
 *	 redis_unique  Redis SET NX EX in front of the unique table
 *	 idem          idem_claim
 *	 unique_batch  batches: INSERT ... SELECT ... ON CONFLICT DO NOTHING
 *	 idem_many     batches: idem_claim_many
 *	 redis_pipe    batches: pipelined Redis SET NX EX, then one write
 *	 cas_sql       UPDATE orders SET status = 'PAID' WHERE ... AND status = 'PENDING'
 *	 cas           idem_cas_row on a bound orders table
 *
 * and, to measure the deduplication layer alone, the batched ones without
 * the business write: unique_batch_only, idem_many_only, redis_pipe_only.
 *
 * The Redis strategies delete their keys when the database write fails, so
 * that the retry can apply the event: the seed articles' "temporary
 * failure, delete the mark".  If the write did commit (its COMMIT's reply
 * was lost in a crash), that retry applies it twice.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <libpq-fe.h>

#define NEAR_WINDOW		64
#define RECONNECT_SECS	120
#define MAX_RETRIES		10000

typedef enum
{
	S_NAIVE,
	S_UNIQUE,
	S_REDIS,
	S_REDIS_UNIQUE,
	S_IDEM,
	S_UNIQUE_BATCH,
	S_IDEM_MANY,
	S_REDIS_PIPE,
	S_CAS_SQL,
	S_CAS,
	S_UNIQUE_BATCH_ONLY,
	S_IDEM_MANY_ONLY,
	S_REDIS_PIPE_ONLY
} Strategy;

static const struct
{
	const char *name;
	bool		batch;
	bool		redis;
	bool		claims_only;
} strategies[] = {
	[S_NAIVE] = {"naive", false, false},
	[S_UNIQUE] = {"unique", false, false},
	[S_REDIS] = {"redis", false, true},
	[S_REDIS_UNIQUE] = {"redis_unique", false, true},
	[S_IDEM] = {"idem", false, false},
	[S_UNIQUE_BATCH] = {"unique_batch", true, false},
	[S_IDEM_MANY] = {"idem_many", true, false},
	[S_REDIS_PIPE] = {"redis_pipe", true, true},
	[S_CAS_SQL] = {"cas_sql", false, false},
	[S_CAS] = {"cas", false, false},
	[S_UNIQUE_BATCH_ONLY] = {"unique_batch_only", true, false, true},
	[S_IDEM_MANY_ONLY] = {"idem_many_only", true, false, true},
	[S_REDIS_PIPE_ONLY] = {"redis_pipe_only", true, true, true},
};

/* A strategy consuming its copy of the stream, with its own consumers */
typedef struct Group
{
	Strategy	strategy;
	long		offset;			/* added to event numbers in the ledger */
	atomic_long next;			/* next delivery to hand out */
	atomic_long done;			/* deliveries finished */
	atomic_int	running;		/* consumers still running */
	long		window_done;	/* deliveries finished when the window closed */
} Group;

/* Run-wide settings and state */
static Group groups[2];
static int	ngroups = 1;
static atomic_int window_closed;
static double window_end_ms;
static int	nconsumers = 1;
static long ndeliveries = 20000;
static double dup_ratio = 0.3;
static int	batch = 100;
static int	naccounts = 100000;
static uint64_t seed = 1;
static const char *conninfo = "";
static const char *redis_host = "127.0.0.1";
static int	redis_port = 6379;
static const char *fault_cmd = NULL;
static const char *fault_label = "none";
static const char *ns = "bench";

static long nevents;			/* distinct events */
static long *stream;			/* delivery i -> event number */
static atomic_long total_retries;
static atomic_int fault_done;

/* A consumer: its connections and latencies */
typedef struct Consumer
{
	Group	   *g;
	PGconn	   *pg;
	redisContext *redis;
	double	   *lat;			/* milliseconds, one per delivery or batch */
	long		nlat;
	long		maxlat;
} Consumer;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static void
fatal(const char *fmt, const char *arg)
{
	fprintf(stderr, "consumer: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	exit(2);
}

static uint64_t
splitmix64(uint64_t x)
{
	x += UINT64_C(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

/* The id of event n: a random-looking version 4 UUID, lowercase */
static void
event_id(long n, char *buf)
{
	uint64_t	hi = splitmix64(seed * 1000003 + (uint64_t) n);
	uint64_t	lo = splitmix64(hi ^ (uint64_t) n);

	snprintf(buf, 37, "%08" PRIx64 "-%04" PRIx64 "-4%03" PRIx64 "-%04" PRIx64 "-%012" PRIx64,
			 hi >> 32, (hi >> 16) & 0xffff, hi & 0xfff,
			 ((lo >> 48) & 0x3fff) | 0x8000, lo & UINT64_C(0xffffffffffff));
}

static int
event_account(long n)
{
	return (int) (splitmix64((uint64_t) n * 7919 + seed) % (uint64_t) naccounts) + 1;
}

static int
event_amount(long n)
{
	return (int) (n % 97) + 1;
}

/* Build the delivery stream: nevents distinct events and their redeliveries */
static void
make_stream(void)
{
	uint64_t	r = seed;
	long		issued = 0;

	nevents = ndeliveries - (long) (ndeliveries * dup_ratio + 0.5);
	if (nevents < 1)
		nevents = 1;
	stream = malloc(sizeof(long) * ndeliveries);
	for (long i = 0; i < ndeliveries; i++)
	{
		long		left = ndeliveries - i;
		long		new_left = nevents - issued;
		bool		dup;

		r = splitmix64(r);
		dup = issued > 0 && (uint64_t) (r % (uint64_t) left) >= (uint64_t) new_left;
		if (!dup)
			stream[i] = issued++;
		else
		{
			r = splitmix64(r);
			if (r & 1)
			{
				long		w = issued < NEAR_WINDOW ? issued : NEAR_WINDOW;

				stream[i] = issued - 1 - (long) ((r >> 1) % (uint64_t) w);
			}
			else
				stream[i] = (long) ((r >> 1) % (uint64_t) issued);
		}
	}
}

/* ---- PostgreSQL ---- */

/*
 * The batched writes update accounts in account order, so that two batches
 * touching the same accounts wait for each other instead of deadlocking.
 */
static const char *const prepared[][2] = {
	{"biz",
	 "WITH l AS (INSERT INTO ledger (event_no, account, amount) VALUES ($1, $2, $3))"
	 " UPDATE accounts SET balance = balance + $3 WHERE id = $2"},
	{"naive_check", "SELECT 1 FROM processed_naive WHERE event_id = $1"},
	{"naive_mark", "INSERT INTO processed_naive (event_id) VALUES ($1)"},
	{"unique_claim", "INSERT INTO processed (event_id) VALUES ($1) ON CONFLICT DO NOTHING"},
	{"idem_claim", "SELECT idem_claim($1, $2)"},
	{"cas_sql", "UPDATE orders_sql SET status = 'PAID' WHERE id = $1 AND status = 'PENDING'"},
	{"cas", "SELECT idem_cas_row('orders_cas'::regclass, $1::bigint, 'PAID')"},
	{"unique_batch",
	 "WITH new AS (INSERT INTO processed (event_id)"
	 "              SELECT DISTINCT x FROM unnest($1::text[]) x ORDER BY 1"
	 "              ON CONFLICT DO NOTHING RETURNING event_id),"
	 " ev AS (SELECT DISTINCT ON (e.id) e.no, e.acct, e.amt"
	 "          FROM unnest($1::text[], $2::bigint[], $3::int[], $4::int[]) e(id, no, acct, amt)"
	 "          JOIN new ON new.event_id = e.id),"
	 " l AS (INSERT INTO ledger (event_no, account, amount) SELECT no, acct, amt FROM ev)"
	 " UPDATE accounts a SET balance = a.balance + s.amt"
	 "   FROM (SELECT acct, sum(amt) AS amt FROM ev GROUP BY acct ORDER BY acct) s WHERE a.id = s.acct"},
	{"idem_many",
	 "WITH new AS (SELECT x AS event_id FROM idem_claim_many($1::text[], $5) x),"
	 " ev AS (SELECT DISTINCT ON (e.id) e.no, e.acct, e.amt"
	 "          FROM unnest($1::text[], $2::bigint[], $3::int[], $4::int[]) e(id, no, acct, amt)"
	 "          JOIN new ON new.event_id = e.id),"
	 " l AS (INSERT INTO ledger (event_no, account, amount) SELECT no, acct, amt FROM ev)"
	 " UPDATE accounts a SET balance = a.balance + s.amt"
	 "   FROM (SELECT acct, sum(amt) AS amt FROM ev GROUP BY acct ORDER BY acct) s WHERE a.id = s.acct"},
	{"unique_batch_only",
	 "INSERT INTO processed (event_id) SELECT DISTINCT x FROM unnest($1::text[]) x ORDER BY 1"
	 " ON CONFLICT DO NOTHING"},
	{"idem_many_only", "SELECT count(*) FROM idem_claim_many($1::text[], $2)"},
	{"biz_batch",
	 "WITH ev AS (SELECT no, acct, amt FROM unnest($1::bigint[], $2::int[], $3::int[]) e(no, acct, amt)),"
	 " l AS (INSERT INTO ledger (event_no, account, amount) SELECT no, acct, amt FROM ev)"
	 " UPDATE accounts a SET balance = a.balance + s.amt"
	 "   FROM (SELECT acct, sum(amt) AS amt FROM ev GROUP BY acct ORDER BY acct) s WHERE a.id = s.acct"},
};

/* Connect (again), waiting up to RECONNECT_SECS for the server to come back */
static void
pg_connect(Consumer *c)
{
	double		deadline = now_ms() + RECONNECT_SECS * 1000.0;

	if (c->pg)
		PQfinish(c->pg);
	for (;;)
	{
		c->pg = PQconnectdb(conninfo);
		if (PQstatus(c->pg) == CONNECTION_OK)
			break;
		if (now_ms() > deadline)
			fatal("cannot connect: %s", PQerrorMessage(c->pg));
		PQfinish(c->pg);
		usleep(50000);
	}
	for (size_t i = 0; i < sizeof(prepared) / sizeof(prepared[0]); i++)
	{
		PGresult   *res = PQprepare(c->pg, prepared[i][0], prepared[i][1], 0, NULL);

		if (PQresultStatus(res) != PGRES_COMMAND_OK)
		{
			/* the server went away again: the next statement reconnects */
			if (PQstatus(c->pg) == CONNECTION_BAD)
			{
				PQclear(res);
				return;
			}
			fatal("prepare failed: %s", PQresultErrorMessage(res));
		}
		PQclear(res);
	}
}

/*
 * Whether a failed statement is one a broker redelivery retries: a lost
 * connection, a server shutting down or starting, a deadlock or a
 * serialization failure.  Anything else is a bug in the benchmark.
 */
static bool
pg_retryable(Consumer *c, PGresult *res)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	if (PQstatus(c->pg) == CONNECTION_BAD || state == NULL)
		return true;
	return strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0 ||
		strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0;
}

/*
 * Run a prepared statement or a plain command; NULL on a retryable failure
 * (after rolling back what is left of the transaction).
 */
static PGresult *
pg_run(Consumer *c, const char *stmt, int nparams, const char *const *params)
{
	PGresult   *res;
	ExecStatusType st;

	if (PQstatus(c->pg) == CONNECTION_BAD)
		pg_connect(c);
	if (nparams < 0)
		res = PQexec(c->pg, stmt);
	else
		res = PQexecPrepared(c->pg, stmt, nparams, params, NULL, NULL, 0);
	st = PQresultStatus(res);
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return res;
	if (!pg_retryable(c, res))
		fatal("statement failed: %s", PQresultErrorMessage(res));
	PQclear(res);
	if (PQstatus(c->pg) == CONNECTION_OK && PQtransactionStatus(c->pg) != PQTRANS_IDLE)
		PQclear(PQexec(c->pg, "ROLLBACK"));
	return NULL;
}

/* pg_run for statements whose result is not needed; false on failure */
static bool
pg_do(Consumer *c, const char *stmt, int nparams, const char *const *params)
{
	PGresult   *res = pg_run(c, stmt, nparams, params);

	PQclear(res);
	return res != NULL;
}

/* ---- Redis ---- */

static void
redis_connect(Consumer *c)
{
	double		deadline = now_ms() + RECONNECT_SECS * 1000.0;

	if (c->redis)
		redisFree(c->redis);
	for (;;)
	{
		struct timeval tv = {2, 0};

		c->redis = redisConnectWithTimeout(redis_host, redis_port, tv);
		if (c->redis && !c->redis->err)
			break;
		if (now_ms() > deadline)
			fatal("cannot connect to redis: %s", c->redis ? c->redis->errstr : "?");
		if (c->redis)
			redisFree(c->redis);
		usleep(50000);
	}
}

/* SET key NX EX: 1 if set, 0 if present, -1 on a failure */
static int
redis_set_nx(Consumer *c, const char *key)
{
	redisReply *r;
	int			ret;

	if (c->redis == NULL || c->redis->err)
		redis_connect(c);
	r = redisCommand(c->redis, "SET %s 1 NX EX 86400", key);
	if (r == NULL)
	{
		redisFree(c->redis);
		c->redis = NULL;
		return -1;
	}
	ret = r->type == REDIS_REPLY_STATUS ? 1 : r->type == REDIS_REPLY_NIL ? 0 : -1;
	freeReplyObject(r);
	return ret;
}

/* DEL the keys, pipelined; false if Redis could not be reached */
static bool
redis_del(Consumer *c, char **keys, int n)
{
	bool		ok = true;

	if (c->redis == NULL || c->redis->err)
		redis_connect(c);
	for (int i = 0; i < n; i++)
		redisAppendCommand(c->redis, "DEL %s", keys[i]);
	for (int i = 0; i < n; i++)
	{
		void	   *r;

		if (redisGetReply(c->redis, &r) != REDIS_OK)
		{
			ok = false;
			break;
		}
		freeReplyObject(r);
	}
	if (!ok)
	{
		redisFree(c->redis);
		c->redis = NULL;
	}
	return ok;
}

/* ---- single-event strategies ---- */

/* The business write of event n; false on failure */
static bool
business(Consumer *c, long n)
{
	char		no[24],
				acct[16],
				amt[16];
	const char *p[3] = {no, acct, amt};

	snprintf(no, sizeof(no), "%ld", n + c->g->offset);
	snprintf(acct, sizeof(acct), "%d", event_account(n));
	snprintf(amt, sizeof(amt), "%d", event_amount(n));
	return pg_do(c, "biz", 3, p);
}

/* In a transaction: run the claim statement, and the business write if it wins */
static bool
claim_and_apply(Consumer *c, long n, const char *stmt, int nparams, const char *const *params,
				bool (*won) (PGresult *))
{
	PGresult   *res;
	bool		first;

	if (!pg_do(c, "BEGIN", -1, NULL))
		return false;
	if ((res = pg_run(c, stmt, nparams, params)) == NULL)
		return false;
	first = won(res);
	PQclear(res);
	if (first && !business(c, n))
		return false;
	return pg_do(c, "COMMIT", -1, NULL);
}

static bool
won_rows(PGresult *res)
{
	return strcmp(PQcmdTuples(res), "1") == 0;
}

static bool
won_true(PGresult *res)
{
	return PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
}

static bool
won_applied(PGresult *res)
{
	return PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "applied") == 0;
}

/* Process event n once; false means "retry this delivery" */
static bool
process_one(Consumer *c, long n)
{
	char		id[40],
				no[24];
	const char *p[2] = {id, ns};
	const char *pno[1] = {no};

	event_id(n, id);
	snprintf(no, sizeof(no), "%ld", n + 1);
	switch (c->g->strategy)
	{
		case S_NAIVE:
			{
				PGresult   *res;
				bool		seen;

				if (!pg_do(c, "BEGIN", -1, NULL) ||
					(res = pg_run(c, "naive_check", 1, p)) == NULL)
					return false;
				seen = PQntuples(res) > 0;
				PQclear(res);
				if (!seen && (!pg_do(c, "naive_mark", 1, p) || !business(c, n)))
					return false;
				return pg_do(c, "COMMIT", -1, NULL);
			}
		case S_UNIQUE:
			return claim_and_apply(c, n, "unique_claim", 1, p, won_rows);
		case S_IDEM:
			return claim_and_apply(c, n, "idem_claim", 2, p, won_true);
		case S_CAS_SQL:
			return claim_and_apply(c, n, "cas_sql", 1, pno, won_rows);
		case S_CAS:
			return claim_and_apply(c, n, "cas", 1, pno, won_applied);
		case S_REDIS:
		case S_REDIS_UNIQUE:
			{
				int			set = redis_set_nx(c, id);
				char	   *key = id;

				if (set < 0)
					return false;
				if (set == 0)
					return true;	/* a duplicate, as far as Redis knows */
				if (c->g->strategy == S_REDIS ? business(c, n)
					: claim_and_apply(c, n, "unique_claim", 1, p, won_rows))
					return true;
				/* the write failed: delete the mark so the retry can apply it */
				(void) redis_del(c, &key, 1);
				return false;
			}
		default:
			break;
	}
	return false;
}

/* ---- batch strategies ---- */

/* Append to a growing buffer */
typedef struct Buf
{
	char	   *s;
	size_t		len,
				cap;
} Buf;

static void
buf_add(Buf *b, const char *s)
{
	size_t		n = strlen(s);

	if (b->len + n + 1 > b->cap)
	{
		b->cap = (b->len + n + 1) * 2;
		b->s = realloc(b->s, b->cap);
	}
	memcpy(b->s + b->len, s, n + 1);
	b->len += n;
}

/* Array literals of the events ev[0..n): ids, numbers (plus offset), accounts, amounts */
static void
batch_arrays(const long *ev, int n, long offset, Buf *a)
{
	char		tmp[48];

	for (int k = 0; k < 4; k++)
	{
		a[k].len = 0;
		buf_add(&a[k], "{");
	}
	for (int i = 0; i < n; i++)
	{
		const char *sep = i ? "," : "";

		buf_add(&a[0], sep);
		event_id(ev[i], tmp);
		buf_add(&a[0], tmp);
		snprintf(tmp, sizeof(tmp), "%s%ld", sep, ev[i] + offset);
		buf_add(&a[1], tmp);
		snprintf(tmp, sizeof(tmp), "%s%d", sep, event_account(ev[i]));
		buf_add(&a[2], tmp);
		snprintf(tmp, sizeof(tmp), "%s%d", sep, event_amount(ev[i]));
		buf_add(&a[3], tmp);
	}
	for (int k = 0; k < 4; k++)
		buf_add(&a[k], "}");
}

/* Process the events ev[0..n) as one batch; false means retry the batch */
static bool
process_batch(Consumer *c, const long *ev, int n)
{
	static __thread Buf a[4];
	Strategy	strategy = c->g->strategy;

	if (!strategies[strategy].redis)
	{
		const char *p[5];
		bool		only = strategies[strategy].claims_only;
		bool		idem = strategy == S_IDEM_MANY || strategy == S_IDEM_MANY_ONLY;

		batch_arrays(ev, n, c->g->offset, a);
		for (int k = 0; k < 4; k++)
			p[k] = a[k].s;
		p[4] = ns;
		if (only)
		{
			p[1] = ns;
			return pg_do(c, strategies[strategy].name, idem ? 2 : 1, p);
		}
		return pg_do(c, strategies[strategy].name, idem ? 5 : 4, p);
	}
	else
	{
		/* redis_pipe: SET NX for the whole batch in one pipeline */
		char		ids[n][40];
		char	   *newkeys[n];
		long		newev[n];
		int			nnew = 0;
		bool		ok = true;
		const char *p[3];

		if (c->redis == NULL || c->redis->err)
			redis_connect(c);
		for (int i = 0; i < n; i++)
		{
			event_id(ev[i], ids[i]);
			redisAppendCommand(c->redis, "SET %s 1 NX EX 86400", ids[i]);
		}
		for (int i = 0; i < n; i++)
		{
			redisReply *r;

			if (redisGetReply(c->redis, (void **) &r) != REDIS_OK)
			{
				ok = false;
				break;
			}
			if (r->type == REDIS_REPLY_STATUS)
			{
				newkeys[nnew] = ids[i];
				newev[nnew++] = ev[i];
			}
			freeReplyObject(r);
		}
		if (!ok)
		{
			/* Redis went away mid-pipeline: forget what was set, retry */
			redisFree(c->redis);
			c->redis = NULL;
			return false;
		}
		if (nnew == 0 || strategies[strategy].claims_only)
			return true;
		batch_arrays(newev, nnew, c->g->offset, a);
		p[0] = a[1].s;
		p[1] = a[2].s;
		p[2] = a[3].s;
		if (pg_do(c, "biz_batch", 3, p))
			return true;
		(void) redis_del(c, newkeys, nnew);
		return false;
	}
}

/* ---- the run ---- */

static void
record_latency(Consumer *c, double ms)
{
	if (c->nlat == c->maxlat)
	{
		c->maxlat = c->maxlat ? c->maxlat * 2 : 4096;
		c->lat = realloc(c->lat, sizeof(double) * c->maxlat);
	}
	c->lat[c->nlat++] = ms;
}

static void *
consumer_main(void *arg)
{
	Consumer   *c = arg;
	Group	   *g = c->g;
	int			step = strategies[g->strategy].batch ? batch : 1;
	long		ev[batch > 0 ? batch : 1];

	pg_connect(c);
	if (strategies[g->strategy].redis)
		redis_connect(c);
	for (;;)
	{
		long		first = atomic_fetch_add(&g->next, step);
		int			n;
		double		t0;
		long		tries = 0;

		if (first >= ndeliveries)
			break;
		n = (int) (ndeliveries - first < step ? ndeliveries - first : step);
		for (int i = 0; i < n; i++)
			ev[i] = stream[first + i];
		t0 = now_ms();
		while (!(step == 1 ? process_one(c, ev[0]) : process_batch(c, ev, n)))
		{
			atomic_fetch_add(&total_retries, 1);
			if (++tries > MAX_RETRIES)
				fatal("%s: a delivery failed too often", strategies[g->strategy].name);
			usleep(tries < 10 ? 1000 : 20000);
		}
		record_latency(c, now_ms() - t0);
		atomic_fetch_add(&g->done, n);
	}
	/* the first group to finish closes the window in which all were running */
	if (atomic_fetch_sub(&g->running, 1) == 1 && atomic_exchange(&window_closed, 1) == 0)
	{
		window_end_ms = now_ms();
		for (int i = 0; i < ngroups; i++)
			groups[i].window_done = atomic_load(&groups[i].done);
	}
	PQfinish(c->pg);
	if (c->redis)
		redisFree(c->redis);
	return NULL;
}

/* Runs the fault command once half of the stream has been handed out */
static void *
fault_main(void *arg)
{
	(void) arg;
	while (atomic_load(&groups[0].next) < ndeliveries / 2)
		usleep(2000);
	if (system(fault_cmd) != 0)
		fprintf(stderr, "consumer: fault command failed: %s\n", fault_cmd);
	atomic_store(&fault_done, 1);
	return NULL;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: consumer --strategy S [--consumers N] [--events N] [--dup-ratio R]\n"
			"                [--batch N] [--accounts N] [--seed N] [--pg CONNINFO]\n"
			"                [--redis-port P] [--namespace NS] [--fault-cmd CMD --fault LABEL]\n"
			"                [--pair S2]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"strategy", required_argument, NULL, 's'},
		{"consumers", required_argument, NULL, 'c'},
		{"events", required_argument, NULL, 'e'},
		{"dup-ratio", required_argument, NULL, 'd'},
		{"batch", required_argument, NULL, 'b'},
		{"accounts", required_argument, NULL, 'a'},
		{"seed", required_argument, NULL, 'r'},
		{"pg", required_argument, NULL, 'p'},
		{"redis-port", required_argument, NULL, 'R'},
		{"namespace", required_argument, NULL, 'n'},
		{"fault-cmd", required_argument, NULL, 'F'},
		{"fault", required_argument, NULL, 'f'},
		{"pair", required_argument, NULL, 'P'},
		{NULL, 0, NULL, 0}
	};
	int			opt;
	bool		have_strategy = false;
	pthread_t  *threads;
	pthread_t	fault_thread;
	Consumer   *cons;
	double		t0,
				secs;
	double	   *all;
	PGconn	   *check;
	PGresult   *res;
	char		sql[512];
	bool		only;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1)
	{
		switch (opt)
		{
			case 's':
			case 'P':
				{
					Group	   *g = &groups[opt == 's' ? 0 : 1];
					bool		found = false;

					for (size_t i = 0; i < sizeof(strategies) / sizeof(strategies[0]); i++)
						if (strcmp(optarg, strategies[i].name) == 0)
						{
							g->strategy = (Strategy) i;
							found = true;
						}
					if (!found)
						fatal("unknown strategy %s", optarg);
					if (opt == 's')
						have_strategy = true;
					else
					{
						ngroups = 2;
						g->offset = 1000000000L;
					}
				}
				break;
			case 'c':
				nconsumers = atoi(optarg);
				break;
			case 'e':
				ndeliveries = atol(optarg);
				break;
			case 'd':
				dup_ratio = atof(optarg);
				break;
			case 'b':
				batch = atoi(optarg);
				break;
			case 'a':
				naccounts = atoi(optarg);
				break;
			case 'r':
				seed = strtoull(optarg, NULL, 10);
				break;
			case 'p':
				conninfo = optarg;
				break;
			case 'R':
				redis_port = atoi(optarg);
				break;
			case 'n':
				ns = optarg;
				break;
			case 'F':
				fault_cmd = optarg;
				break;
			case 'f':
				fault_label = optarg;
				break;
			default:
				usage();
		}
	}
	if (!have_strategy || nconsumers < 1 || ndeliveries < 1 || batch < 1 || batch > 10000 ||
		dup_ratio < 0 || dup_ratio >= 1 || naccounts < 1)
		usage();

	if (ngroups == 2 && strategies[groups[0].strategy].batch != strategies[groups[1].strategy].batch)
		fatal("%s", "a pair must be two single-event or two batched strategies");

	make_stream();
	cons = calloc(nconsumers * ngroups, sizeof(Consumer));
	threads = calloc(nconsumers * ngroups, sizeof(pthread_t));
	for (int k = 0; k < ngroups; k++)
		atomic_store(&groups[k].running, nconsumers);
	t0 = now_ms();
	if (fault_cmd)
		pthread_create(&fault_thread, NULL, fault_main, NULL);
	for (int i = 0; i < nconsumers * ngroups; i++)
	{
		cons[i].g = &groups[i % ngroups];
		pthread_create(&threads[i], NULL, consumer_main, &cons[i]);
	}
	for (int i = 0; i < nconsumers * ngroups; i++)
		pthread_join(threads[i], NULL);
	if (fault_cmd)
		pthread_join(fault_thread, NULL);

	check = PQconnectdb(conninfo);
	if (PQstatus(check) != CONNECTION_OK)
		fatal("cannot connect: %s", PQerrorMessage(check));
	for (int k = 0; k < ngroups; k++)
	{
		Group	   *g = &groups[k];
		long		nall = 0;

		/* alone, the whole run; paired, the window in which both ran */
		secs = ((ngroups == 1 ? now_ms() : window_end_ms) - t0) / 1000.0;
		if (ngroups == 1)
			g->window_done = ndeliveries;
		for (int i = k; i < nconsumers * ngroups; i += ngroups)
			nall += cons[i].nlat;
		all = malloc(sizeof(double) * (nall ? nall : 1));
		nall = 0;
		for (int i = k; i < nconsumers * ngroups; i += ngroups)
			for (long j = 0; j < cons[i].nlat; j++)
				all[nall++] = cons[i].lat[j];
		qsort(all, nall, sizeof(double), cmp_double);

		/* exactly once, per event, from the ledger */
		snprintf(sql, sizeof(sql),
				 "SELECT count(*) FILTER (WHERE c > 1), %ld - count(*),"
				 "       (SELECT sum(balance) FROM accounts) IS NOT DISTINCT FROM"
				 "       (SELECT sum(amount) FROM ledger)"
				 "  FROM (SELECT event_no, count(*) AS c FROM ledger"
				 "         WHERE event_no >= %ld AND event_no < %ld GROUP BY 1) s",
				 nevents, g->offset, g->offset + nevents);
		res = PQexec(check, sql);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			fatal("check failed: %s", PQresultErrorMessage(res));

		/* the claims-only runs write no ledger: nothing to count */
		only = strategies[g->strategy].claims_only;
		printf("%s\t%d\t%s\t%ld\t%ld\t%.3f\t%.0f\t%.3f\t%.3f\t%s\t%s\t%ld\t%s\n",
			   strategies[g->strategy].name, nconsumers, fault_label, ndeliveries, nevents, secs,
			   g->window_done / secs, all[nall / 2], all[(long) (nall * 0.99)],
			   only ? "-" : PQgetvalue(res, 0, 0), only ? "-" : PQgetvalue(res, 0, 1),
			   atomic_load(&total_retries), only ? "-" : PQgetvalue(res, 0, 2));
		PQclear(res);
		free(all);
	}
	PQfinish(check);
	return 0;
}
