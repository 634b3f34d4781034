/*
 * catalog.h
 *	  Finding the extension's internal relations.
 */
#ifndef IDEM_CATALOG_H
#define IDEM_CATALOG_H

#include "postgres.h"

#include "nodes/execnodes.h"
#include "nodes/parsenodes.h"

/* OIDs of the internal relations */
typedef struct IdemCatalog
{
	Oid			schema;			/* the "idempotency" schema */
	Oid			claims;			/* idempotency.claims */
	Oid			claims_pkey;	/* its unique index on (key, ns) */
	Oid			namespaces;		/* idempotency.namespaces */
} IdemCatalog;

/* Column numbers of idempotency.claims */
#define Anum_claims_claimed_at	1
#define Anum_claims_ns			2
#define Anum_claims_key			3
#define Anum_claims_fingerprint 4
#define Natts_claims			4

extern IdemCatalog IdemGetCatalog(void);
extern bool IdemExtensionPresent(void);
extern IndexInfo *IdemClaimsIndexInfo(void);
extern void IdemCheckClaimsPrivilege(AclMode mode);

#endif							/* IDEM_CATALOG_H */
