/*
 * args.c
 *	  The argument checks and the writability check the SQL functions
 *	  share.
 */
#include "postgres.h"

#include "access/xlog.h"
#include "fmgr.h"
#include "miscadmin.h"

#include "base.h"

/*
 * The argno'th argument of a function declared non-strict (so that a NULL
 * gets an error rather than a NULL result), or an error naming it what.
 */
Datum
IdemArgNotNull(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	return PG_GETARG_DATUM(argno);
}

/*
 * The one length check of a name or an id: not empty, within max bytes.
 * what names it when empty, long_what when too long; the detail quotes
 * the start of value, or, when value is NULL, names it subject.
 */
void
IdemCheckLength(int len, int max, const char *what, const char *long_what,
				const char *subject, const char *value)
{
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	if (len > max)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("%s is too long", long_what),
				 value != NULL ?
				 errdetail("\"%.*s...\" is %d bytes long; the limit is %d bytes.",
						   20, value, len, max) :
				 errdetail("The %s is %d bytes long; the limit is %d bytes.",
						   subject, len, max)));
}

/* Check a name (a machine, a state, a token scope): not empty, within max */
void
IdemValidateName(const char *what, const char *name, int len, int max)
{
	IdemCheckLength(len, max, what, what, NULL, name);
}

/*
 * Refuse to write where writes are impossible: a read-only transaction or a
 * hot standby.  Errors name the SQL function.
 */
void
IdemCheckWritable(const char *funcname)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot execute %s during recovery", funcname),
				 errhint("Writes can only be made on the primary server.")));
	PreventCommandIfReadOnly(funcname);
}
