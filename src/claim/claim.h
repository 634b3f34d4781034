/*
 * claim.h
 *	  The SQL claim functions; what other parts call of them.
 */
#ifndef IDEM_CLAIM_H
#define IDEM_CLAIM_H

#include "postgres.h"

#include "store/store.h"
#include "catalog/idem_catalog.h"

/*
 * What a claim asks of a Citus cluster, from citus/: a higher folder, so
 * its functions are registered at init (IdemClaimSetCluster).
 */
typedef struct IdemClaimCluster
{
	void		(*check_plain_claim) (const text *nsname);
	void		(*shard_enter) (int64 shard);
	void		(*shard_namespace) (const text *parent, int64 shard,
									IdemNamespace *out);
} IdemClaimCluster;

extern void IdemClaimSetCluster(const IdemClaimCluster *cluster);
extern void IdemClaimCheckCluster(const text *nsname);

extern bool IdemClaimImport(const bytea *key, IdemNamespace *ns,
							const IdemClaimRow *row);

#endif							/* IDEM_CLAIM_H */
