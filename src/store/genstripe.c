/*
 * genstripe.c
 *	  Stripes: the finer filters of a TTL class's sealed generations,
 *	  bit-sliced, so that one test answers for all of them.
 *
 * A claim of a new id asks every sealed generation of its class whether it
 * may hold the id.  With a filter per generation that is one cache miss
 * per generation, and a store of 30M claims in generations of 250k has
 * 120 of them.  A stripe holds the filters of up to 64 generations of one
 * class in one database, all of the same geometry (blocks and hashes),
 * bit-sliced: for each bit position of a filter, one word whose lane j is
 * that bit of the filter of the stripe's j-th generation.  A test reads
 * the nhashes words of its positions, all in one block of the stripe, and
 * ANDs them: the lanes left are the generations that may hold the claim.
 * Each backend keeps the last test of each stripe, so that asking the
 * stripe's generations one after another costs one test.
 *
 * A lane is filled from a finer filter (genfilter.c) of the stripe's
 * geometry, which the seal or a refinement builds in that geometry when
 * the class has a stripe with room (IdemGenStripeGeometry), and which is
 * loaded as an ordinary filter when no lane can take it.  The width of a
 * new stripe (8, 16, 32 or 64 lanes, words of that many bits) follows how
 * many lanes the class already uses in that geometry, so that a class of
 * a few generations does not pay memory for 64, and the narrower stripes
 * move into the new one.
 *
 * Concurrency: stripes change under the shared lock only (a lane filled or
 * freed, a stripe made or freed); a lane's bits are written while it is
 * not ready, under that lock, so no two writers touch a word at once.
 * Readers take no lock: a stripe's changes counter is odd while its lanes
 * change and grows at every change, and a reader that saw it change, or a
 * lane not ready or not its generation's, answers "unknown" (-1), which
 * sends the caller to the generation's own filter or index.  A freed
 * stripe's memory may be reused at once: its counter moved first.  Lanes
 * are referenced only from the slots of their generations, and freed with
 * them.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "port/pg_bitutils.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "generation.h"
#include "genfilter.h"
#include "genstripe.h"
#include "base/base.h"

/* One stripe; free while dbid is InvalidOid */
typedef struct IdemGenStripe
{
	pg_atomic_uint64 changes;	/* odd while its lanes change */
	pg_atomic_uint64 ready;		/* lanes whose bits are complete */
	Oid			dbid;
	int32		ttl_class;
	uint64		offset;			/* of its words in the arena, in bytes */
	uint32		nblocks;		/* blocks of 512 positions */
	int			nhashes;		/* with IDEM_FILTER_MIXED */
	int			width;			/* lanes: 8, 16, 32 or 64 */
	int32		lane_gen[IDEM_STRIPE_MAX_LANES];	/* 0: free */
} IdemGenStripe;

/* Positions of one block */
#define IDEM_STRIPE_BLOCK_BITS		(IDEM_FILTER_BLOCK_BYTES * 8)

/* How much fuller than its stripe's geometry was made for a lane may be */
#define IDEM_STRIPE_OVERFILL		1.5

/* The stripes, after a counter of stripes made and freed */
typedef struct IdemGenStripes
{
	pg_atomic_uint64 epoch;
	IdemGenStripe stripes[IDEM_GEN_STRIPES];
} IdemGenStripes;

static IdemGenStripes *idem_stripes_hdr = NULL;
static IdemGenStripe *idem_stripes = NULL;

/* This backend's list of the stripes of one class, as of an epoch */
static uint64 idem_class_epoch = PG_UINT64_MAX;
static Oid	idem_class_db = InvalidOid;
static int32 idem_class_class = -1;
static int	idem_class_nstripes = 0;
static int	idem_class_stripes[IDEM_GEN_STRIPES];

/* The last test of each stripe in this backend */
typedef struct IdemStripeMemo
{
	uint64		changes;
	uint64		hash;
	uint64		ready;
	uint64		lanes;			/* lanes that may hold the hash */
} IdemStripeMemo;

static IdemStripeMemo idem_stripe_memo[IDEM_GEN_STRIPES];

/*
 * The positions of the last hash this backend computed, for a geometry: a
 * claim's prefetch and test of every stripe of its class (all, usually, of
 * one geometry) compute them once
 */
typedef struct IdemStripePos
{
	uint64		hash;
	uint32		nblocks;		/* 0: none yet */
	int			nhashes;
	uint64		pos[IDEM_STRIPE_MAX_HASHES];
} IdemStripePos;

static IdemStripePos idem_stripe_pos;

/* Bytes of shared memory (the words are in genfilter.c's arena) */
Size
IdemGenStripeShmemSize(void)
{
	return MAXALIGN(sizeof(IdemGenStripes));
}

/* Create or attach; the caller holds AddinShmemInitLock */
void
IdemGenStripeShmemInit(void)
{
	bool		found;
	int			i;

	idem_stripes_hdr = ShmemInitStruct("idempotency stripes", IdemGenStripeShmemSize(), &found);
	idem_stripes = idem_stripes_hdr->stripes;
	if (found)
		return;
	pg_atomic_init_u64(&idem_stripes_hdr->epoch, 0);
	for (i = 0; i < IDEM_GEN_STRIPES; i++)
	{
		IdemGenStripe *st = &idem_stripes[i];

		pg_atomic_init_u64(&st->changes, 0);
		pg_atomic_init_u64(&st->ready, 0);
		st->dbid = InvalidOid;
		st->nblocks = 0;
		memset(st->lane_gen, 0, sizeof(st->lane_gen));
	}
}

/* Bytes of a stripe's words */
static inline uint64
IdemStripeBytes(uint32 nblocks, int width)
{
	return (uint64) nblocks * IDEM_FILTER_BLOCK_BYTES * width;
}

/* The stripe's words */
static inline uint64 *
IdemStripeWords(const IdemGenStripe *st)
{
	return (uint64 *) (IdemGenArena() + st->offset);
}

/* The lanes of a stripe of width lanes whose word bits start at bit at */
static inline uint64
IdemStripeLanes(const uint64 *words, int width, uint64 at)
{
	uint64		w = ((volatile const uint64 *) words)[at >> 6];

	if (width == 64)
		return w;
	return (w >> (at & 63)) & ((UINT64CONST(1) << width) - 1);
}

/*
 * Where in stripe st's words the lanes a test of hash reads start, one bit
 * offset per hash: returns how many, or 0 if st's geometry is none to read
 * (a stripe freed or changing under a reader that takes no lock)
 */
static int
IdemStripePositions(const IdemGenStripe *st, uint64 hash, uint64 *at)
{
	IdemStripePos *memo = &idem_stripe_pos;
	uint32		nblocks = st->nblocks;
	int			width = st->width;
	int			nhashes = st->nhashes;
	int			k = Min(nhashes & IDEM_FILTER_HASHES_MASK, IDEM_STRIPE_MAX_HASHES);

	if (nblocks == 0 || width == 0 ||
		st->offset + IdemStripeBytes(nblocks, width) > (uint64) idem_filter_memory_kb * 1024)
		return 0;
	if (memo->nblocks != nblocks || memo->nhashes != nhashes || memo->hash != hash)
	{
		uint64		w = IdemFilterMix(hash);
		uint64		block = IdemFilterBlock(hash, nblocks);

		for (int i = 0; i < k; i++)
			memo->pos[i] = block * IDEM_STRIPE_BLOCK_BITS + IdemFilterBit(hash, &w, i, true);
		memo->hash = hash;
		memo->nblocks = nblocks;
		memo->nhashes = nhashes;
	}
	for (int i = 0; i < k; i++)
		at[i] = memo->pos[i] * width;
	return k;
}

/*
 * The lanes of stripe st that may hold a hash, from its positions: loads
 * that do not wait for each other
 */
static uint64
IdemStripeAnd(const IdemGenStripe *st, const uint64 *at, int k)
{
	const uint64 *words = IdemStripeWords(st);
	int			width = st->width;
	uint64		lanes = (width == 64) ? PG_UINT64_MAX : ((UINT64CONST(1) << width) - 1);

	for (int i = 0; i < k; i++)
		lanes &= IdemStripeLanes(words, width, at[i]);
	return lanes;
}

/* A free lane of stripe st, or -1 */
static int
IdemStripeFreeLane(const IdemGenStripe *st)
{
	for (int l = 0; l < st->width; l++)
		if (st->lane_gen[l] == 0)
			return l;
	return -1;
}

/* Is stripe st this database's, of class ttl_class? */
static inline bool
IdemStripeIsOurs(const IdemGenStripe *st, int32 ttl_class)
{
	return st->dbid == MyDatabaseId && st->ttl_class == ttl_class;
}

/*
 * Size the finer filter a seal or a refinement builds for a generation of
 * class ttl_class with nclaims claims: in the geometry of a stripe of the
 * class with a free lane, if one was made for about as many claims, so
 * that it can go into that lane; otherwise as IdemFilterInit sizes it (and
 * it may start a new stripe).  Read without the lock: only a hint, which
 * IdemGenStripePlace checks.
 */
void
IdemGenStripeGeometry(int32 ttl_class, uint64 nclaims, IdemFilter *filter)
{
	int			i;
	bool		bound_sized = false;

	IdemFilterInit(filter, nclaims, idem_filter_memory_bits_per_claim);
	if (idem_stripes == NULL || (filter->nhashes & IDEM_FILTER_MIXED) == 0)
		return;
	/* a stripe test reads a word per hash: fewer, for a few more false positives */
	if ((filter->nhashes & IDEM_FILTER_HASHES_MASK) > IDEM_STRIPE_HASHES)
		filter->nhashes = IDEM_STRIPE_HASHES | IDEM_FILTER_MIXED;
	/*
	 * Generations switched at the size bound are all sized for the bound,
	 * so that they share a stripe whatever each one held: a worker switches
	 * a generation some claims after it reached the bound.
	 */
	if (idem_generation_max_claims > 0 &&
		nclaims >= (uint64) idem_generation_max_claims / 2 &&
		(double) nclaims <= idem_generation_max_claims * IDEM_STRIPE_OVERFILL)
	{
		IdemFilter	bound;

		IdemFilterInit(&bound, (uint64) idem_generation_max_claims,
					   idem_filter_memory_bits_per_claim);
		pfree(filter->bits);
		filter->nblocks = bound.nblocks;
		filter->bits = bound.bits;
		bound_sized = true;
	}
	/* a stripe of exactly this geometry first, then one about as large */
	for (int pass = 0; pass < (bound_sized ? 1 : 2); pass++)
	{
		for (i = 0; i < IDEM_GEN_STRIPES; i++)
		{
			IdemGenStripe *st = &idem_stripes[i];

			if (!IdemStripeIsOurs(st, ttl_class) || st->nhashes != filter->nhashes ||
				IdemStripeFreeLane(st) < 0)
				continue;
			if (st->nblocks == filter->nblocks)
				return;
			/* made for at least nclaims / IDEM_STRIPE_OVERFILL claims, and not 4 times more */
			if (pass == 1 &&
				(double) st->nblocks * IDEM_STRIPE_OVERFILL >= (double) filter->nblocks &&
				st->nblocks <= (uint64) filter->nblocks * 4)
			{
				pfree(filter->bits);
				filter->nblocks = st->nblocks;
				filter->bits = palloc_extended((Size) filter->nblocks * IDEM_FILTER_BLOCK_BYTES,
											   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
				return;
			}
		}
	}
}

/* Lanes in use in this database's stripes of class ttl_class and filter's geometry */
static int
IdemStripeLanesUsed(int32 ttl_class, const IdemFilter *filter)
{
	int			n = 0;

	for (int i = 0; i < IDEM_GEN_STRIPES; i++)
	{
		IdemGenStripe *st = &idem_stripes[i];

		if (!IdemStripeIsOurs(st, ttl_class) || st->nblocks != filter->nblocks ||
			st->nhashes != filter->nhashes)
			continue;
		for (int l = 0; l < st->width; l++)
			n += (st->lane_gen[l] != 0);
	}
	return n;
}

/*
 * Move the lanes of stripe oi into stripe ni from lane base on, as they
 * are, and free stripe oi; the caller holds the lock, and ni has the same
 * geometry, at least base + oi's width lanes, and lanes from base on free
 * with their bits zero (a free lane of oi moves with whatever bits it had:
 * the fill that takes it rewrites them whole).  The slots follow their
 * lanes.
 */
static void
IdemStripeMigrate(int oi, int ni, int base)
{
	IdemGenStripe *o = &idem_stripes[oi];
	IdemGenStripe *n = &idem_stripes[ni];
	const uint64 *from = IdemStripeWords(o);
	uint64	   *to = IdemStripeWords(n);
	uint64		ready = pg_atomic_read_u64(&o->ready);
	uint64		npos = (uint64) n->nblocks * IDEM_STRIPE_BLOCK_BITS;

	for (uint64 pos = 0; pos < npos; pos++)
	{
		uint64		v = IdemStripeLanes(from, o->width, pos * o->width);
		uint64		at = pos * n->width + base;

		to[at >> 6] |= v << (at & 63);
	}
	pg_write_barrier();
	for (int l = 0; l < o->width; l++)
	{
		if (o->lane_gen[l] == 0)
			continue;
		n->lane_gen[base + l] = o->lane_gen[l];
	}
	pg_write_barrier();
	pg_atomic_fetch_or_u64(&n->ready, ready << base);
	/* both lanes answer now: the slots can follow */
	for (int l = 0; l < o->width; l++)
		if (o->lane_gen[l] != 0)
			IdemGenSlotMoveLane(o->lane_gen[l], IDEM_STRIPE_REF(oi, l),
								IDEM_STRIPE_REF(ni, base + l));

	/* readers of the old stripe see its count move, and ask the slot again */
	pg_atomic_fetch_add_u64(&o->changes, 1);
	pg_write_barrier();
	pg_atomic_write_u64(&o->ready, 0);
	memset(o->lane_gen, 0, sizeof(o->lane_gen));
	o->dbid = InvalidOid;
	pg_write_barrier();
	pg_atomic_fetch_add_u64(&o->changes, 1);
}

/*
 * Make a stripe for filters of filter's geometry in class ttl_class; the
 * caller holds the lock.  Its width: twice the lanes the class uses in
 * that geometry, 8 at least (a generation of an odd size gets 8).  The
 * narrower stripes of the same geometry move into it while they fit, so
 * that a class keeps few stripes to test as it grows: 8 lanes, then 32,
 * then 64, then stripes of 64.  Narrower where the arena has no room for
 * that width: after a restart, the finer filters that refinement loads
 * wait in the arena for a lane, and take the room a wide stripe needs
 * until they have one.  -1 if no stripe or no room is left.
 */
static int
IdemStripeCreate(int32 ttl_class, const IdemFilter *filter)
{
	int			used = IdemStripeLanesUsed(ttl_class, filter);
	int			width = 8;
	uint64		offset;
	int			i;
	int			base = 0;
	IdemGenStripe *st;

	while (width < IDEM_STRIPE_MAX_LANES && width < 2 * (used + 1))
		width *= 2;
	for (i = 0; i < IDEM_GEN_STRIPES; i++)
		if (idem_stripes[i].dbid == InvalidOid)
			break;
	if (i == IDEM_GEN_STRIPES)
		return -1;
	/* narrower if there is no room: the finer filters waiting for a lane take some */
	while (!IdemGenArenaPlace(IdemStripeBytes(filter->nblocks, width), &offset))
	{
		if (width == 8)
			return -1;
		width /= 2;
	}
	st = &idem_stripes[i];
	memset(IdemGenArena() + offset, 0, IdemStripeBytes(filter->nblocks, width));
	pg_atomic_fetch_add_u64(&st->changes, 1);
	pg_write_barrier();
	pg_atomic_write_u64(&st->ready, 0);
	st->ttl_class = ttl_class;
	st->offset = offset;
	st->nblocks = filter->nblocks;
	st->nhashes = filter->nhashes;
	st->width = width;
	memset(st->lane_gen, 0, sizeof(st->lane_gen));
	st->dbid = MyDatabaseId;
	pg_write_barrier();
	pg_atomic_fetch_add_u64(&st->changes, 1);

	for (int o = 0; o < IDEM_GEN_STRIPES; o++)
	{
		IdemGenStripe *os = &idem_stripes[o];

		if (o == i || !IdemStripeIsOurs(os, ttl_class) || os->nblocks != st->nblocks ||
			os->nhashes != st->nhashes || base + os->width >= width)
			continue;
		IdemStripeMigrate(o, i, base);
		base += os->width;
	}
	pg_atomic_fetch_add_u64(&idem_stripes_hdr->epoch, 1);
	return i;
}

/*
 * Put generation gen_id's finer filter into a lane of a stripe of its
 * class, making a stripe if none of the filter's geometry has a free lane;
 * the caller holds the lock, and records the lane in the generation's
 * slot.  Returns the lane's reference, or IDEM_STRIPE_NO_LANE if no stripe
 * can take the filter (the caller loads it as it is).
 */
int
IdemGenStripePlace(int32 gen_id, int32 ttl_class, const IdemFilter *filter)
{
	IdemGenStripe *st = NULL;
	uint64	   *words;
	int			si;
	int			lane = -1;

	if (idem_stripes == NULL || (filter->nhashes & IDEM_FILTER_MIXED) == 0 ||
		(filter->nhashes & IDEM_FILTER_HASHES_MASK) > IDEM_STRIPE_MAX_HASHES ||
		filter->nblocks == 0)
		return IDEM_STRIPE_NO_LANE;
	for (si = 0; si < IDEM_GEN_STRIPES; si++)
	{
		st = &idem_stripes[si];
		if (IdemStripeIsOurs(st, ttl_class) && st->nblocks == filter->nblocks &&
			st->nhashes == filter->nhashes && (lane = IdemStripeFreeLane(st)) >= 0)
			break;
	}
	if (lane < 0)
	{
		si = IdemStripeCreate(ttl_class, filter);
		if (si < 0)
			return IDEM_STRIPE_NO_LANE;
		st = &idem_stripes[si];
		lane = IdemStripeFreeLane(st);
	}

	/* the lane is taken, not ready: readers ignore its bits while they change */
	pg_atomic_fetch_add_u64(&st->changes, 1);
	pg_write_barrier();
	st->lane_gen[lane] = gen_id;
	pg_write_barrier();
	pg_atomic_fetch_add_u64(&st->changes, 1);

	words = IdemStripeWords(st);
	for (uint32 b = 0; b < st->nblocks; b++)
	{
		const uint64 *fb = filter->bits + (Size) b * 8;

		for (uint32 p = 0; p < IDEM_STRIPE_BLOCK_BITS; p++)
		{
			uint64		at = ((uint64) b * IDEM_STRIPE_BLOCK_BITS + p) * st->width + lane;
			uint64		bit = UINT64CONST(1) << (at & 63);
			bool		set = (fb[p >> 6] >> (p & 63)) & 1;

			if (set != ((words[at >> 6] & bit) != 0))
				words[at >> 6] ^= bit;
		}
	}
	pg_write_barrier();
	pg_atomic_fetch_or_u64(&st->ready, UINT64CONST(1) << lane);
	return IDEM_STRIPE_REF(si, lane);
}

/*
 * Free the lane ref of generation gen_id, and its stripe if that was its
 * last lane; the caller holds the lock
 */
void
IdemGenStripeFreeLane(int ref, int32 gen_id)
{
	IdemGenStripe *st;
	int			lane = IDEM_STRIPE_REF_LANE(ref);
	bool		empty = true;

	if (idem_stripes == NULL || !IDEM_STRIPE_REF_VALID(ref))
		return;
	st = &idem_stripes[IDEM_STRIPE_REF_STRIPE(ref)];
	if (st->dbid != MyDatabaseId || lane >= st->width || st->lane_gen[lane] != gen_id)
		return;
	pg_atomic_fetch_add_u64(&st->changes, 1);
	pg_write_barrier();
	pg_atomic_fetch_and_u64(&st->ready, ~(UINT64CONST(1) << lane));
	st->lane_gen[lane] = 0;
	for (int l = 0; l < st->width; l++)
		if (st->lane_gen[l] != 0)
			empty = false;
	if (empty)
		st->dbid = InvalidOid;
	pg_write_barrier();
	pg_atomic_fetch_add_u64(&st->changes, 1);
	if (empty)
		pg_atomic_fetch_add_u64(&idem_stripes_hdr->epoch, 1);
}

/*
 * Test hash against generation gen_id's lane ref: 0 if the generation
 * definitely holds no such claim, 1 if it may, -1 if the lane is not
 * gen_id's, not ready, or changed during the test.
 */
int
IdemGenStripeTest(int ref, int32 gen_id, uint64 hash)
{
	IdemGenStripe *st;
	IdemStripeMemo *memo;
	int			si;
	int			lane;
	uint64		bit;
	int			tries;

	if (idem_stripes == NULL || !IDEM_STRIPE_REF_VALID(ref))
		return -1;
	si = IDEM_STRIPE_REF_STRIPE(ref);
	lane = IDEM_STRIPE_REF_LANE(ref);
	bit = UINT64CONST(1) << lane;
	st = &idem_stripes[si];
	memo = &idem_stripe_memo[si];
	for (tries = 0; tries < 3; tries++)
	{
		uint64		c1 = pg_atomic_read_u64(&st->changes);
		uint64		ready;
		uint64		lanes;
		uint64		at[IDEM_STRIPE_MAX_HASHES];
		int			k;

		if (c1 & 1)
			continue;
		pg_read_barrier();
		if (st->dbid != MyDatabaseId || lane >= st->width || st->lane_gen[lane] != gen_id)
			return -1;
		ready = pg_atomic_read_u64(&st->ready);
		if ((ready & bit) == 0)
			return -1;
		if (memo->changes == c1 && memo->hash == hash && (memo->ready & bit) != 0)
		{
			lanes = memo->lanes;
			pg_read_barrier();
			if (pg_atomic_read_u64(&st->changes) == c1)
				return (lanes & bit) != 0;
			continue;
		}
		pg_read_barrier();
		k = IdemStripePositions(st, hash, at);
		if (k == 0)
			return -1;
		lanes = IdemStripeAnd(st, at, k);
		pg_read_barrier();
		if (pg_atomic_read_u64(&st->changes) != c1)
			continue;
		memo->changes = c1;
		memo->hash = hash;
		memo->ready = ready;
		memo->lanes = lanes;
		return (lanes & bit) != 0;
	}
	return -1;
}

/*
 * The stripes of class ttl_class in this database, as this backend last
 * listed them; listed again whenever a stripe was made or freed.  Only a
 * hint, for prefetching: tests check the stripe itself.
 */
static int
IdemStripesOfClass(int32 ttl_class, const int **stripes)
{
	uint64		epoch = pg_atomic_read_u64(&idem_stripes_hdr->epoch);

	if (epoch != idem_class_epoch || ttl_class != idem_class_class ||
		idem_class_db != MyDatabaseId)
	{
		pg_read_barrier();
		idem_class_nstripes = 0;
		for (int i = 0; i < IDEM_GEN_STRIPES; i++)
			if (IdemStripeIsOurs(&idem_stripes[i], ttl_class))
				idem_class_stripes[idem_class_nstripes++] = i;
		idem_class_epoch = epoch;
		idem_class_class = ttl_class;
		idem_class_db = MyDatabaseId;
	}
	*stripes = idem_class_stripes;
	return idem_class_nstripes;
}

/*
 * Start loading the words a test of hash reads in every stripe of class
 * ttl_class, so that their cache misses overlap the claim's other work
 */
void
IdemGenStripePrefetch(int32 ttl_class, uint64 hash)
{
#ifdef __GNUC__
	const int  *stripes;
	int			n;

	if (idem_stripes == NULL)
		return;
	n = IdemStripesOfClass(ttl_class, &stripes);
	for (int s = 0; s < n; s++)
	{
		IdemGenStripe *st = &idem_stripes[stripes[s]];
		const char *words = (const char *) IdemStripeWords(st);
		uint64		at[IDEM_STRIPE_MAX_HASHES];
		int			k = IdemStripePositions(st, hash, at);

		for (int i = 0; i < k; i++)
			__builtin_prefetch(words + (at[i] >> 6) * sizeof(uint64));
	}
#endif
}

/*
 * Test hash against every stripe of class ttl_class at once: for each, the
 * lanes that definitely do not hold it, as of the stripe's changes counter
 * (none if the stripe changed during the test).  A caller that knows which
 * lane a generation had as of the same count (IdemGenStripeOwner) skips
 * the generation on that alone.  Returns the number of stripes.
 */
int
IdemGenStripeView(int32 ttl_class, uint64 hash, IdemStripeView *view)
{
	const int  *stripes;
	int			n;

	if (idem_stripes == NULL)
		return 0;
	n = IdemStripesOfClass(ttl_class, &stripes);
	for (int s = 0; s < n; s++)
	{
		IdemGenStripe *st = &idem_stripes[stripes[s]];
		uint64		c1 = pg_atomic_read_u64(&st->changes);
		uint64		ready;
		uint64		lanes;
		uint64		at[IDEM_STRIPE_MAX_HASHES];
		int			k;

		view[s].stripe = stripes[s];
		view[s].changes = c1;
		view[s].absent = 0;
		if (c1 & 1)
			continue;
		pg_read_barrier();
		ready = pg_atomic_read_u64(&st->ready);
		pg_read_barrier();
		if (st->dbid != MyDatabaseId || (k = IdemStripePositions(st, hash, at)) == 0)
			continue;
		lanes = IdemStripeAnd(st, at, k);
		pg_read_barrier();
		if (pg_atomic_read_u64(&st->changes) == c1)
			view[s].absent = ready & ~lanes;
	}
	return n;
}

/*
 * Is lane ref generation gen_id's?  Sets *changes to the stripe's count
 * it was so at.  false if not, or if the stripe kept changing.
 */
bool
IdemGenStripeOwner(int ref, int32 gen_id, uint64 *changes)
{
	IdemGenStripe *st;
	int			lane = IDEM_STRIPE_REF_LANE(ref);

	if (idem_stripes == NULL || !IDEM_STRIPE_REF_VALID(ref))
		return false;
	st = &idem_stripes[IDEM_STRIPE_REF_STRIPE(ref)];
	for (int tries = 0; tries < 3; tries++)
	{
		uint64		c1 = pg_atomic_read_u64(&st->changes);
		bool		ours;

		if (c1 & 1)
			continue;
		pg_read_barrier();
		ours = st->dbid == MyDatabaseId && lane < st->width && st->lane_gen[lane] == gen_id;
		pg_read_barrier();
		if (pg_atomic_read_u64(&st->changes) != c1)
			continue;
		*changes = c1;
		return ours;
	}
	return false;
}

/* Lanes of the stripe of lane ref, if it is gen_id's; 0 otherwise */
int
IdemGenStripeWidth(int ref, int32 gen_id)
{
	uint64		changes;

	if (!IdemGenStripeOwner(ref, gen_id, &changes))
		return 0;
	return idem_stripes[IDEM_STRIPE_REF_STRIPE(ref)].width;
}

/* Does [start, start + len) overlap a stripe's words?  Under the lock */
bool
IdemGenStripeOverlaps(uint64 start, uint64 len)
{
	if (idem_stripes == NULL)
		return false;
	for (int i = 0; i < IDEM_GEN_STRIPES; i++)
	{
		IdemGenStripe *st = &idem_stripes[i];
		uint64		end = st->offset + IdemStripeBytes(st->nblocks, st->width);

		if (st->dbid != InvalidOid && start < end && st->offset < start + len)
			return true;
	}
	return false;
}

/* Where stripe i's words end, if it is in use; under the lock */
bool
IdemGenStripeEnd(int i, uint64 *end)
{
	IdemGenStripe *st;

	if (idem_stripes == NULL || i < 0 || i >= IDEM_GEN_STRIPES)
		return false;
	st = &idem_stripes[i];
	if (st->dbid == InvalidOid)
		return false;
	*end = st->offset + IdemStripeBytes(st->nblocks, st->width);
	return true;
}
