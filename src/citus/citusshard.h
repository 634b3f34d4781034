/*
 * citusshard.h
 *	  Claims kept with a Citus shard, and moved with it.
 */
#ifndef IDEM_CITUSSHARD_H
#define IDEM_CITUSSHARD_H

#include "postgres.h"

#include "executor/execdesc.h"

#include "catalog/idem_catalog.h"

extern void IdemCitusShardInit(void);
extern void IdemCitusShardEnter(int64 shard);
extern void IdemCitusShardNamespace(const text *parent, int64 shard, IdemNamespace *out);
extern void IdemCitusShardSeeStatement(QueryDesc *queryDesc);

#endif							/* IDEM_CITUSSHARD_H */
