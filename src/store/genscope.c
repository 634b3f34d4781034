/*
 * genscope.c
 *	  The generations a claim of one namespace must look at, narrowed for
 *	  each claim by its class's stripes.
 *
 * A claim checks every relation other than its target for a live claim of
 * its key (claimstore.c, IdemCheckElsewhere).  Asking each of a store's
 * generations in turn costs a few nanoseconds apiece, which a store of
 * 30M claims in generations of 250k (120 of them) turns into the largest
 * part of what a claim pays for the store's size.  So a backend keeps, per
 * generation map and namespace, a scope:
 *
 *	 - plain: the generations asked one by one, as before: open and closed
 *	   ones (their announcements answer), and sealed ones of another TTL
 *	   class that hold claims of the namespace (its TTL changed);
 *	 - striped: the sealed generations of the namespace's class that hold
 *	   claims of it; a sealed generation without any is skipped, as its
 *	   namespaces already said;
 *	 - for each stripe of the class, a table from lane to generation, as of
 *	   the stripe's changes count it was checked at (IdemGenLaneView).
 *
 * For one claim, the stripes' test of its hash (IdemGenStripeView) gives
 * the lanes that definitely do not hold it; the generations of the other
 * lanes, those the tables do not cover, and the plain ones are what the
 * claim asks.  A table is rebuilt whenever its stripe's count moved (a
 * lane filled, freed or moved), so a lane is only ever read as the
 * generation it was verified to be at that very count (IdemGenLaneView),
 * which the uncovered generations go through one by one.  The scope is
 * used by claims, checks and releases alike: a stripe's "absent" is as
 * exact as a filter's.
 *
 * Scopes live in the map's memory context and are found again by the map's
 * version, so they go with the map.
 */
#include "postgres.h"

#include "port/pg_bitutils.h"
#include "utils/memutils.h"

#include "generation.h"
#include "genfilter.h"
#include "genscope.h"
#include "genstripe.h"

/* A stripe's lanes, as of one changes count */
typedef struct IdemScopeTable
{
	int			stripe;
	uint64		changes;
	uint64		mapped;			/* lanes of generations of the scope */
	int16		gen[IDEM_STRIPE_MAX_LANES]; /* map index of each mapped lane */
} IdemScopeTable;

/* What a claim of one namespace must look at, for one map */
typedef struct IdemGenScope
{
	int32		nsid;
	int32		klass;
	uint64		used;			/* when last used, for replacement */
	int			nplain;
	int		   *plain;			/* map indexes asked one by one */
	int			nstriped;
	int		   *striped;		/* sealed, of the class, holding ns */
	int			nuncovered;
	int		   *uncovered;		/* of those, the ones no table covers */
	int			ntables;
	IdemScopeTable tables[IDEM_GEN_STRIPES];	/* parallel to the last view */
	bool		stale;			/* rebuild the tables at the next claim */
} IdemGenScope;

/* This backend's scopes, for the map of version idem_scope_version */
static uint64 idem_scope_version = 0;
static int	idem_nscopes = 0;
static uint64 idem_scope_clock = 0;
static IdemGenScope *idem_scopes[IDEM_SCOPE_CACHE];

/* Build the scope of ns in map, in the map's memory context */
static IdemGenScope *
IdemGenScopeBuild(IdemGenMap *map, const IdemNamespace *ns)
{
	MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(map));
	IdemGenScope *s = palloc0(sizeof(IdemGenScope));
	int			n = Max(map->ngens, 1);
	int			i;

	s->nsid = ns->id;
	s->klass = ns->ttl_class;
	s->plain = palloc(sizeof(int) * n);
	s->striped = palloc(sizeof(int) * n);
	s->uncovered = palloc(sizeof(int) * n);
	for (i = 0; i < map->ngens; i++)
	{
		IdemGeneration *g = &map->gens[i];

		if (g->state != IDEM_GEN_SEALED)
			s->plain[s->nplain++] = i;
		else if (!IdemGenSealedHolds(g, ns))
			continue;
		else if (g->ttl_class == s->klass)
			s->striped[s->nstriped++] = i;
		else
			s->plain[s->nplain++] = i;
	}
	s->stale = true;
	MemoryContextSwitchTo(old);
	return s;
}

/* The scope of ns in map, built on first use */
static IdemGenScope *
IdemGenScopeOf(IdemGenMap *map, const IdemNamespace *ns)
{
	IdemGenScope *s;
	int			victim = 0;
	int			i;

	if (idem_scope_version != map->version)
	{
		/* another map: the scopes went (or will go) with the old one's memory */
		idem_scope_version = map->version;
		idem_nscopes = 0;
	}
	for (i = 0; i < idem_nscopes; i++)
	{
		s = idem_scopes[i];
		if (s->nsid == ns->id && s->klass == ns->ttl_class)
		{
			s->used = ++idem_scope_clock;
			return s;
		}
		if (s->used < idem_scopes[victim]->used)
			victim = i;
	}
	s = IdemGenScopeBuild(map, ns);
	s->used = ++idem_scope_clock;
	if (idem_nscopes < IDEM_SCOPE_CACHE)
		idem_scopes[idem_nscopes++] = s;
	else
	{
		IdemGenScope *out = idem_scopes[victim];

		pfree(out->plain);
		pfree(out->striped);
		pfree(out->uncovered);
		pfree(out);
		idem_scopes[victim] = s;
	}
	return s;
}

/*
 * Rebuild the scope's lane tables for view: every striped generation whose
 * lane is verified at the count view was taken at goes in its stripe's
 * table; the others are uncovered
 */
static void
IdemGenScopeRebuild(IdemGenScope *s, IdemGenMap *map,
					const IdemStripeView *view, int nview)
{
	int			i;

	s->ntables = nview;
	for (i = 0; i < nview; i++)
	{
		s->tables[i].stripe = view[i].stripe;
		s->tables[i].changes = view[i].changes;
		s->tables[i].mapped = 0;
	}
	s->nuncovered = 0;
	for (i = 0; i < s->nstriped; i++)
	{
		IdemGeneration *g = &map->gens[s->striped[i]];
		int			v = IdemGenLaneView(g, view, nview);

		if (v >= 0)
		{
			int			lane = IDEM_STRIPE_REF_LANE(g->stripe_ref);

			s->tables[v].gen[lane] = (int16) s->striped[i];
			s->tables[v].mapped |= UINT64CONST(1) << lane;
		}
		else
			s->uncovered[s->nuncovered++] = s->striped[i];
	}
	s->stale = false;
}

/* Do the scope's tables answer for view? */
static inline bool
IdemGenScopeCurrent(const IdemGenScope *s, const IdemStripeView *view, int nview)
{
	int			i;

	if (s->stale || s->ntables != nview)
		return false;
	for (i = 0; i < nview; i++)
		if (s->tables[i].stripe != view[i].stripe ||
			s->tables[i].changes != view[i].changes)
			return false;
	return true;
}

/* The sealed generations of sel asked without a lane test their own filters */
static void
IdemGenScopePrefetchPlain(IdemGenMap *map, const int *sel, int n, uint64 fhash)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		IdemGeneration *g = &map->gens[sel[i]];

		if (g->state == IDEM_GEN_SEALED && g->has_filter && g->slot >= 0 &&
			g->stripe_ref == IDEM_STRIPE_NO_LANE)
			IdemGenFilterPrefetch(g->slot, g->id, fhash);
	}
}

/*
 * The generations of map that may hold a claim of ns whose filter hash is
 * fhash: every generation but those that hold no claim of ns and the
 * sealed ones of ns's class that its stripes rule out.  Their map indexes
 * go to sel, which has room for all of map's; returns how many.  Starts
 * loading the filter blocks the sealed ones among them will test.
 */
int
IdemGenScopeSelect(IdemGenMap *map, const IdemNamespace *ns, uint64 fhash,
				   int *sel)
{
	IdemGenScope *s = IdemGenScopeOf(map, ns);
	IdemStripeView view[IDEM_GEN_STRIPES];
	int			nview;
	int			n;
	int			i;

	/*
	 * No sealed generation of the class holds claims of ns (a class whose
	 * generations are all open, closed or empty of ns): the stripes could
	 * rule out nothing, so the plain generations are the whole selection.
	 * Among those, only sealed ones of another class test their filters.
	 */
	if (s->nstriped == 0)
	{
		memcpy(sel, s->plain, sizeof(int) * s->nplain);
		IdemGenScopePrefetchPlain(map, sel, s->nplain, fhash);
		return s->nplain;
	}
	nview = IdemGenStripeView(s->klass, fhash, view);
	if (!IdemGenScopeCurrent(s, view, nview))
		IdemGenScopeRebuild(s, map, view, nview);
	memcpy(sel, s->plain, sizeof(int) * s->nplain);
	n = s->nplain;
	for (i = 0; i < s->nuncovered; i++)
	{
		IdemGeneration *g = &map->gens[s->uncovered[i]];
		int			v = IdemGenLaneView(g, view, nview);

		if (v < 0)
			sel[n++] = s->uncovered[i];
		else
		{
			/* its lane is known now: a table covers it from the next claim on */
			s->stale = true;
			if (!((view[v].absent >> IDEM_STRIPE_REF_LANE(g->stripe_ref)) & 1))
				sel[n++] = s->uncovered[i];
		}
	}
	for (i = 0; i < nview; i++)
	{
		uint64		m = s->tables[i].mapped & ~view[i].absent;

		while (m != 0)
		{
			int			lane = pg_rightmost_one_pos64(m);

			sel[n++] = s->tables[i].gen[lane];
			m &= m - 1;
		}
	}
	IdemGenScopePrefetchPlain(map, sel, n, fhash);
	return n;
}

/*
 * Start loading what a selection of ns for fhash will test in the stripes
 * of ns's class, so that their cache misses overlap the claim's other
 * work; nothing where no sealed generation of the class holds claims of
 * ns, since the selection then reads no stripe (IdemGenScopeSelect).
 */
void
IdemGenScopePrefetch(IdemGenMap *map, const IdemNamespace *ns, uint64 fhash)
{
	if (map != NULL && IdemGenScopeOf(map, ns)->nstriped > 0)
		IdemGenStripePrefetch(ns->ttl_class, fhash);
}
