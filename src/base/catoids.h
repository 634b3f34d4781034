/*
 * catoids.h
 *	  Finding the extension's internal relations.
 */
#ifndef IDEM_CATALOG_H
#define IDEM_CATALOG_H

#include "postgres.h"

#include "nodes/execnodes.h"
#include "nodes/parsenodes.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"

/* OIDs of the internal relations */
typedef struct IdemCatalog
{
	Oid			schema;			/* the "idempotency" schema */
	Oid			claims;			/* idempotency.claims */
	Oid			namespaces;		/* idempotency.namespaces */
	Oid			namespaces_name;	/* its index on name */
	Oid			namespace_seq;	/* the sequence of namespace ids */
	Oid			machines;		/* idempotency.machines */
	Oid			bindings;		/* idempotency.machine_bindings */
	Oid			requests;		/* idempotency.requests */
	Oid			tokens;			/* idempotency.tokens */
	Oid			watermarks;		/* idempotency.watermarks (1.1; else invalid) */
	Oid			namespace_grants;	/* idempotency.namespace_grants (1.1) */
} IdemCatalog;

extern IdemCatalog IdemGetCatalog(void);
extern bool IdemCatalogHolds(Oid relid);
extern bool IdemExtensionPresent(void);
extern Oid	IdemRelationOwner(Oid relid);
extern Relation IdemOpenRelationArg(Oid relid, LOCKMODE lockmode);
extern Relation IdemOpenOwnedTable(Oid relid, LOCKMODE lockmode,
								   const char *detail);
extern void IdemCheckClaimsPrivilege(AclMode mode);
extern void IdemCheckWatermarksPrivilege(Oid relid);
extern Oid	IdemWatermarksRelation(void);
extern Oid	IdemNamespaceGrantsRelation(void);
extern void IdemCheckTablePrivilege(Oid relid, const char *table, AclMode mode,
									const char *action);

extern void IdemCatalogInit(void);

#endif							/* IDEM_CATALOG_H */
