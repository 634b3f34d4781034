/*
 * base.h
 *	  Public interface of the base layer: constants, error codes and
 *	  argument checks shared by the whole extension, and (through the
 *	  headers included at the end) compatibility shims, invalidation,
 *	  catalog OIDs, owner SPI, the shared-state registry, row seek and
 *	  write, speculative tokens.
 */
#ifndef IDEM_BASE_H
#define IDEM_BASE_H

#include "postgres.h"

#include "fmgr.h"
#include "utils/elog.h"

/* Schema that holds the extension's internal tables */
#define IDEM_SCHEMA_NAME		"idempotency"

/* Bounds on user input, documented in docs/reference.md */
#define IDEM_MAX_ID_BYTES		1024
#define IDEM_MAX_NAMESPACE_BYTES 128

/* The longest TTL a namespace may have */
#define IDEM_MAX_TTL_YEARS		100

/*
 * SQLSTATEs of the extension's own errors.  Class "ID" is in the range the
 * SQL standard leaves to implementations; docs/reference.md lists them (Errors).
 */
#define ERRCODE_IDEM_FINGERPRINT_MISMATCH	MAKE_SQLSTATE('I','D','0','0','1')
#define ERRCODE_IDEM_ILLEGAL_TRANSITION		MAKE_SQLSTATE('I','D','0','0','2')
#define ERRCODE_IDEM_UNKNOWN_STATE			MAKE_SQLSTATE('I','D','0','0','3')
#define ERRCODE_IDEM_LEASE_NOT_HELD			MAKE_SQLSTATE('I','D','0','0','4')
#define ERRCODE_IDEM_FENCED					MAKE_SQLSTATE('I','D','0','0','5')

/* Argument checks shared by the SQL functions */
extern Datum IdemArgNotNull(FunctionCallInfo fcinfo, int argno, const char *what);
extern void IdemCheckLength(int len, int max, const char *what,
							const char *long_what, const char *subject,
							const char *value);
extern void IdemValidateName(const char *what, const char *name, int len, int max);
extern void IdemCheckWritable(const char *funcname);

#include "compat.h"
#include "catoids.h"
#include "inval.h"
#include "ownerspi.h"
#include "rowseek.h"
#include "rowwrite.h"
#include "shmem.h"
#include "spectoken.h"
#include "subxact.h"

#endif							/* IDEM_BASE_H */
