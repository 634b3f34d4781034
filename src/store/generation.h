/*
 * generation.h
 *	  Claim generations: time slices of the claims, one chain per TTL class,
 *	  dropped whole once every claim in them has expired.
 */
#ifndef IDEM_GENERATION_H
#define IDEM_GENERATION_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "executor/execdesc.h"
#include "nodes/plannodes.h"
#include "utils/guc.h"

#include "genstripe.h"
#include "catalog/idem_catalog.h"

/* Where a generation is in its life */
typedef enum IdemGenState
{
	IDEM_GEN_OPEN,				/* takes the new claims of its TTL class */
	IDEM_GEN_CLOSED,			/* replaced, claimers may still be in flight */
	IDEM_GEN_SEALED				/* takes no claims; has its filter */
} IdemGenState;

/* A live generation as a backend sees it */
typedef struct IdemGeneration
{
	int32		id;
	int32		ttl_class;
	IdemGenState state;
	Oid			relid;			/* idempotency.claims_g<id>, or InvalidOid */
	TimestampTz opened_at;
	int			slot;			/* its shared slot, or -1 */
	int			stripe_ref;		/* its stripe lane as last seen, or -1 */
	uint64		stripe_changes; /* the stripe's count it was ours at */
	bool		has_filter;		/* sealed with a stored filter */
	bool		filter_failed;	/* could not be loaded: probe instead */
	int			nns;			/* sealed: namespaces it holds */
	int32	   *nsids;
	TimestampTz *last_claimed;	/* newest claimed_at of each */
	TimestampTz *first_claimed; /* oldest claimed_at of each */
	int64		claims;			/* sealed: what the seal counted, or -1 */
	bool		inconsistent;	/* sealed: its namespaces and newest claims
								 * do not match: never proven expired */
	struct IdemBtreeFences *fences; /* sealed: of its index (btprobe.c), once read */
} IdemGeneration;

/* Every live generation, newest first */
typedef struct IdemGenMap
{
	uint64		version;		/* changes whenever the map is rebuilt */
	uint64		opens;			/* IdemGenOpensSeen() before it was read */
	int			ngens;
	IdemGeneration *gens;
} IdemGenMap;

/* What a maintenance pass did */
typedef struct IdemGenMaintenance
{
	int			opened;
	int			sealed;
	int			dropped;
	int64		claims_dropped;
	int			skipped;		/* steps left for later: locks in use */
	int			seal_skipped;	/* of which seals: claimers still inserting */
	int			held;			/* generations left alone: not proven */
	bool		incomplete;		/* nothing done: the store is incomplete */
	char	   *why;			/* what held it back, or NULL */
} IdemGenMaintenance;

/* Smallest idempotency.generation_max_claims but 0 */
#define IDEM_GEN_MIN_CLAIMS		100

/* Sealed generations whose finer filter a worker round rebuilds, at most */
#define IDEM_GEN_REFINE_PER_ROUND	8

/* force_class of IdemGenMaintain: switch every class */
#define IDEM_GEN_ALL_CLASSES	(-2)

/* GUCs */
extern int	idem_generation_min_ttl;
extern int	idem_generations_per_ttl;
extern int	idem_generation_max_claims;
extern void IdemGenExecutorStart(QueryDesc *queryDesc, int eflags);
extern void IdemGenProcessUtility(PlannedStmt *pstmt);
extern bool IdemGenMaxClaimsCheck(int *newval, void **extra, GucSource source);

extern void IdemGenerationInit(void);
extern IdemGenMap *IdemGenMapGet(void);
extern IdemGenMap *IdemGenMapFresh(void);
extern uint64 IdemGenOpensSeen(void);
extern int32 IdemGenClassOf(const IdemNamespace *ns);
extern IdemGeneration *IdemGenTarget(IdemGenMap *map, const IdemNamespace *ns);
extern bool IdemGenSealedMayHold(IdemGeneration *gen, const IdemNamespace *ns,
								 TimestampTz now, uint64 fhash);
extern int	IdemGenLaneView(IdemGeneration *gen, const IdemStripeView *view,
							int nview);
extern bool IdemGenSealedHolds(const IdemGeneration *gen, const IdemNamespace *ns);
extern bool IdemGenSealedExpired(IdemGeneration *gen, const IdemNamespace *ns,
								 TimestampTz now);
extern bool IdemGenSealedAllLive(IdemGeneration *gen, const IdemNamespace *ns,
								 TimestampTz now);
extern void IdemGenMaintenanceWait(void);
extern void IdemGenMaintain(int32 force_class, bool wait, IdemGenMaintenance *done);
extern const char *IdemGenMaintainStep(void);
extern bool IdemGenRefineWanted(void);
extern bool IdemGenRefineFilter(void);

#endif							/* IDEM_GENERATION_H */
