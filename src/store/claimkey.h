/*
 * claimkey.h
 *	  The compact, exact encoding of event ids stored in the claims index.
 */
#ifndef IDEM_CLAIMKEY_H
#define IDEM_CLAIMKEY_H

#include "postgres.h"

#include "utils/uuid.h"

#include "base/base.h"

/* Bytes a UUID occupies once encoded */
#define IDEM_UUID_BYTES		16

/*
 * An encoded key: a bytea whose payload is at most IDEM_MAX_ID_BYTES + 1
 * bytes.  Lives on the stack; the union keeps the varlena header aligned.
 */
typedef union IdemKey
{
	struct varlena hdr;
	int32		align;
	char		buf[VARHDRSZ + IDEM_MAX_ID_BYTES + 1];
} IdemKey;

#define IdemKeyDatum(k)		PointerGetDatum(&(k)->hdr)

extern void IdemEncodeKey(const text *id, IdemKey *key);
extern void IdemEncodeNamedKey(const text *id, const char *what, IdemKey *key);
extern void IdemEncodeUuidKey(const pg_uuid_t *id, IdemKey *key);
extern text *IdemDecodeKey(const bytea *key);
extern int64 IdemFingerprintHash(const text *fingerprint);

#endif							/* IDEM_CLAIMKEY_H */
