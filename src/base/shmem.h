/*
 * shmem.h
 *	  The extension's shared state, available with shared_preload_libraries.
 */
#ifndef IDEM_SHMEM_H
#define IDEM_SHMEM_H

#include "postgres.h"

#include "storage/latch.h"
#include "storage/lwlock.h"

/* State shared by all backends */
typedef struct IdemSharedState
{
	LWLock	   *lock;			/* guards the structure of shared hashes */
	Latch	   *volatile launcher_latch;	/* the purge launcher's, or NULL */
} IdemSharedState;

extern IdemSharedState *idem_shared;

extern Size IdemSharedStateSize(void);
extern void IdemSharedStateRequest(void);
extern void IdemSharedStateInit(void);
extern bool IdemShmemReady(void);

#endif							/* IDEM_SHMEM_H */
