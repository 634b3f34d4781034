/*
 * citus.h
 *	  A guard rail beside Citus: on a coordinator, a claim and a write to a
 *	  distributed table never commit in one transaction.  (Claims kept with
 *	  a shard, and moved with it, are citusshard.c's.)
 */
#ifndef IDEM_CITUS_H
#define IDEM_CITUS_H

#include "postgres.h"

#include "executor/execdesc.h"
#include "nodes/plannodes.h"


extern void IdemCitusInit(void);
extern void IdemCitusExecutorStart(QueryDesc *queryDesc, int eflags);
extern void IdemCitusProcessUtility(PlannedStmt *pstmt);
extern void IdemCitusCheckClaim(void);
extern void IdemCitusCheckPlainClaim(const text *nsname);
extern bool IdemCitusAsk(const char *sql, int nargs, Oid *argtypes, Datum *args);

#include "citusshard.h"

#endif							/* IDEM_CITUS_H */
