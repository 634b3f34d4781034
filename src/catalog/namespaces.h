/*
 * namespaces.h
 *	  Claim namespaces: their TTLs and the per-backend cache of them.
 */
#ifndef IDEM_NAMESPACE_H
#define IDEM_NAMESPACE_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "base/base.h"

struct IdemStatsEntry;

/* A namespace as cached by a backend */
typedef struct IdemNamespace
{
	char		name[IDEM_MAX_NAMESPACE_BYTES + 1]; /* hash key */
	int32		id;				/* idempotency.namespaces.id */
	Interval	ttl;			/* lifetime of a claim */
	bool		ttl_is_exact;	/* ttl has no month part */
	int64		ttl_usecs;		/* if so, its length in microseconds */
	int32		ttl_class;		/* floor(log2(TTL in seconds)): generation.c */
	bool		tentative;		/* loaded in the current transaction */
	struct IdemStatsEntry *stats;	/* shared counters, or NULL */
} IdemNamespace;

/* Advisory lock field4 of the per-name namespace lock (keyed locks use 478) */
#define IDEM_NAMESPACE_LOCK_FIELD4	479

/*
 * The byte between a namespace's name and a Citus shard id in the name of
 * the namespace that holds idem_citus_claim's claims of that shard
 * (citusshard.c): reserved, it never occurs in a name users type
 */
#define IDEM_SHARD_SEP	'\x1f'

/* GUC: TTL in seconds of a namespace created on first use */
extern int	idem_default_ttl;

extern void IdemValidateNamespace(const text *name);
extern bool IdemNamespaceGet(const text *name, bool create,
							 IdemNamespace *out);
extern bool IdemNamespaceGetWithTtl(const text *name, bool create,
									const Interval *create_ttl, IdemNamespace *out);
extern void IdemNamespaceDefineInternal(const char *name, const Interval *ttl);
extern TimestampTz IdemNamespaceExpiry(const IdemNamespace *ns,
									   TimestampTz claimed_at);
extern void IdemValidateTtl(const Interval *ttl);
extern int32 IdemTtlClass(const Interval *ttl);
extern double IdemTtlSeconds(const Interval *ttl);
extern IdemNamespace *IdemNamespaceLoadAll(int *count);
extern int	IdemInt32Compare(const void *a, const void *b);
extern const IdemNamespace *IdemNamespaceFindById(const IdemNamespace *nss, int nns,
												 int32 nsid);
extern uint64 IdemNamespaceCompact(void);

extern void IdemNamespaceInit(void);

#endif							/* IDEM_NAMESPACE_H */
