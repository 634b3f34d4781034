/*
 * purge.h
 *	  Deleting expired claims and expired rows of registered user tables.
 */
#ifndef IDEM_PURGE_H
#define IDEM_PURGE_H

#include "postgres.h"

/* GUCs of a purge round, defined in purge.c */
extern bool idem_purge_enabled;
extern int	idem_purge_max_runtime;

extern void IdemPurgeDatabaseRound(bool generations_only);

#endif							/* IDEM_PURGE_H */
