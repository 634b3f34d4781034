/*
 * claimrel.h
 *	  The claims table as the direct claim path sees it: its columns, its
 *	  indexes, and whatever the path must honour or refuse.
 */
#ifndef IDEM_CLAIMREL_H
#define IDEM_CLAIMREL_H

#include "postgres.h"

#include "nodes/execnodes.h"
#include "utils/relcache.h"

/* What an operation on the claims does to the table */
typedef enum IdemClaimOp
{
	IDEM_OP_CHECK,				/* reads (idem_claimed) */
	IDEM_OP_CLAIM,				/* inserts, and deletes expired claims */
	IDEM_OP_RELEASE,			/* deletes (idem_release) */
	IDEM_OP_PURGE				/* deletes expired claims (the purge) */
} IdemClaimOp;

/* Why the direct path cannot do an operation, built with the layout */
typedef struct IdemRefusal
{
	int			sqlerrcode;
	char	   *message;
	char	   *detail;
	char	   *hint;
} IdemRefusal;

/*
 * One backend's view of idempotency.claims, rebuilt whenever the relcache
 * says the table or one of its indexes changed.  Everything lives in the
 * layout's own memory context; a layout replaced during a transaction is
 * freed at its end.
 */
typedef struct IdemClaimRel
{
	Oid			relid;
	int			natts;			/* of the tuple descriptor, dropped included */
	AttrNumber	att_claimed_at;
	AttrNumber	att_ns;
	AttrNumber	att_key;
	AttrNumber	att_fingerprint;
	bool		row_security;	/* relrowsecurity: ask check_enable_rls */
	bool		foreign_policies;	/* a policy that is not the extension's */
	int			own_policies;	/* the extension's own (IDEM_POLICY_*) */
	bool		constraints;	/* CHECK or NOT NULL on the fingerprint:
								 * run ExecConstraints */

	/* refusals: [0] for every operation, [1] for writes, [2] for claims */
	IdemRefusal *refuse_all;
	IdemRefusal *refuse_writes;
	IdemRefusal *refuse_claims;

	/* indexes, in relcache order, and the one that probes find claims in */
	int			nindexes;
	Oid		   *index_oids;
	int			probe;			/* position of a valid unique (key, ns)
								 * btree, or -1 */
	AttrNumber	probe_key_col;	/* index column holding the key (1 or 2) */

	/* executor state for ExecInsertIndexTuples and ExecConstraints */
	MemoryContext cxt;			/* the memory the layout lives in */
	ResultRelInfo *rri;
	EState	   *estate;			/* from IdemClaimRelForInsert, or NULL */
	TupleTableSlot *slot;		/* virtual, with the table's descriptor;
								 * from IdemClaimRelForInsert, or NULL */
} IdemClaimRel;

extern void IdemClaimRelInit(void);
extern IdemClaimRel *IdemClaimRelGet(Relation heap, IdemClaimOp op);
extern void IdemClaimRelForInsert(IdemClaimRel *cr, Relation heap);

#endif							/* IDEM_CLAIMREL_H */
