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
/* Smallest batch the purge shrinks to after lock timeouts */
#define IDEM_PURGE_MIN_BATCH	100

extern int	idem_purge_batch_size;
extern int	idem_purge_history;
extern bool idem_log_purge;
extern int	idem_purge_interval;

extern void IdemPurgeDatabaseRound(bool generations_only);

/* The launcher (worker.c): registered from _PG_init, woken for a switch */
extern void IdemWorkerInit(void);
extern void IdemLauncherWake(void);

/* The waits of the launcher and of a round (worker.c) */
extern void IdemPurgeReloadConfig(void);
extern void IdemPurgeWait(long ms);

#endif							/* IDEM_PURGE_H */
