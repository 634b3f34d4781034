/*
 * spectoken.h
 *	  Speculative insertion tokens that cost no lock-manager round trip.
 */
#ifndef IDEM_SPECTOKEN_H
#define IDEM_SPECTOKEN_H

#include "postgres.h"

extern void IdemSpecTokenInit(void);
extern Size IdemSpecTokenShmemSize(void);
extern void IdemSpecTokenShmemInit(void);
extern uint32 IdemSpecTokenAcquire(TransactionId xid);
extern void IdemSpecTokenRelease(TransactionId xid, uint32 token);
extern void IdemSpecTokenWait(TransactionId xid, uint32 token);

#endif							/* IDEM_SPECTOKEN_H */
