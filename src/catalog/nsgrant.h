/*
 * nsgrant.h
 *	  Per-namespace privileges: restricted namespaces and their grantees.
 */
#ifndef IDEM_NSGRANT_H
#define IDEM_NSGRANT_H

#include "postgres.h"

#include "access/attnum.h"
#include "catalog/objectaccess.h"
#include "nodes/nodes.h"
#include "rewrite/rowsecurity.h"

/* The privileges idem_namespace_grant gives, as bits */
#define IDEM_NSPRIV_CLAIM	0x01	/* claim: the claim, try, batch, trigger forms */
#define IDEM_NSPRIV_CHECK	0x02	/* check: idem_claimed, rows of idem_claims */
#define IDEM_NSPRIV_RELEASE	0x04	/* release: idem_release */

/* The extension's own row-level security policies on the claims, as bits */
#define IDEM_POLICY_SELECT	0x01	/* claims_namespace_check */
#define IDEM_POLICY_INSERT	0x02	/* claims_namespace_claim */
#define IDEM_POLICY_DELETE	0x04	/* claims_namespace_release */
#define IDEM_POLICY_UPDATE	0x08	/* claims_namespace_update */

extern void IdemNsGrantInit(void);
extern void IdemCheckNamespacePrivilege(const text *name, int priv);
extern bool IdemNamespacePrivilegeHeld(const char *name, int len, int priv);
extern int	IdemNsGrantPolicyKind(RowSecurityPolicy *p, AttrNumber att_ns);
extern void IdemNsGrantAfterUtility(Node *parsetree);
extern void IdemNsGrantExecutorStart(void);
extern void IdemNsGrantObjectAccess(ObjectAccessType access, Oid classId, Oid objectId);

#endif							/* IDEM_NSGRANT_H */
