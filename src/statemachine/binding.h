/*
 * binding.h
 *	  Tables bound to state machines, and the per-backend cache of bindings.
 */
#ifndef IDEM_BINDING_H
#define IDEM_BINDING_H

#include "postgres.h"

#include "access/attnum.h"
#include "fmgr.h"

#include "machine.h"

/* What a backend knows of one bound table */
typedef struct IdemBinding
{
	Oid			relid;			/* hash key */
	char		machine[IDEM_MAX_MACHINE_NAME_BYTES + 1];
	bool		check_inserts;
	/* the status column and how to read and write it as text */
	AttrNumber	status_attno;
	Oid			status_type;
	int32		status_typmod;
	FmgrInfo	status_out;
	FmgrInfo	status_in;
	Oid			status_ioparam;
	char		status_column[NAMEDATALEN];
	/* the version column, or InvalidAttrNumber */
	AttrNumber	version_attno;
	Oid			version_type;
	/* the single-column primary key, or InvalidOid */
	Oid			pk_index;
	AttrNumber	pk_attno;
	Oid			pk_type;
	Oid			pk_collation;
	Oid			pk_opfamily;	/* the key index's operator family */
	Oid			pk_opcintype;	/* and its opclass's input type */
	RegProcedure pk_eqproc;		/* equality function of the key's opclass */
	/* privileges already checked for one user */
	Oid			acl_user;
	bool		acl_ok;
} IdemBinding;

extern IdemBinding *IdemBindingGet(Oid relid, bool missing_ok);
extern char *IdemBindingStatusText(IdemBinding *b, Datum value);
extern Datum IdemBindingStatusDatum(IdemBinding *b, const char *state);

extern void IdemBindingInit(void);

#endif							/* IDEM_BINDING_H */
