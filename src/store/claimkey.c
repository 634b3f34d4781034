/*
 * claimkey.c
 *	  The compact, exact encoding of event ids stored in the claims index.
 *
 * Most brokers and APIs use UUIDs as event ids.  Stored as text such an id
 * costs 37 bytes in the heap and again in the index; stored as its 16 raw
 * bytes it costs 17.  The encoding is exact, not a hash, so two different ids
 * can never collide:
 *
 *	 - an id that is a UUID in canonical lowercase text form
 *	   (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) is stored as its 16 bytes, as
 *	   is an id passed as a uuid (whose text form is canonical);
 *	 - any other id is stored as its own bytes, with a zero byte appended
 *	   when it is exactly 16 bytes long.
 *
 * Text never contains a zero byte, so a 16-byte key is always a UUID, a key
 * ending in a zero byte is a 16-byte text id, and anything else is text.
 * Uppercase or braced UUIDs are kept as text, since they are different ids.
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

#include "claimkey.h"
#include "base/base.h"

PG_FUNCTION_INFO_V1(idem_key_text);

static const char hexdigits[] = "0123456789abcdef";

/* Value of each byte as a lowercase hex digit, or -1 */
static const int8 hexvalue[256] = {
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, 10, 11, 12, 13, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1
};

/* Offsets of the 16 digit pairs in canonical UUID text */
static const uint8 uuidpairs[IDEM_UUID_BYTES] = {
	0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34
};

/* Parse a canonical lowercase UUID; returns false if s is not one */
static bool
IdemParseUuid(const char *s, int len, unsigned char *out)
{
	const unsigned char *u = (const unsigned char *) s;
	int			bad = 0;
	int			i;

	if (len != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-')
		return false;
	for (i = 0; i < IDEM_UUID_BYTES; i++)
	{
		int			hi = hexvalue[u[uuidpairs[i]]];
		int			lo = hexvalue[u[uuidpairs[i] + 1]];

		bad |= hi | lo;			/* -1 sets the sign bit */
		out[i] = (unsigned char) ((hi << 4) | (lo & 0x0f));
	}
	return bad >= 0;
}

/*
 * Check an id: present, not empty and within the documented bound.  what
 * names it in errors ("event id", "key").
 */
static void
IdemValidateId(const text *id, const char *what)
{
	IdemCheckLength(VARSIZE_ANY_EXHDR(id), IDEM_MAX_ID_BYTES, what, what, what, NULL);
}

/* Encode a validated id of len bytes into key */
static void
IdemEncodeKeyCString(const char *id, int len, IdemKey *key)
{
	char	   *payload = key->buf + VARHDRSZ;
	int			keylen;

	Assert(len > 0 && len <= IDEM_MAX_ID_BYTES);
	if (len == 36 && IdemParseUuid(id, len, (unsigned char *) payload))
		keylen = IDEM_UUID_BYTES;
	else
	{
		memcpy(payload, id, len);
		keylen = len;
		if (len == IDEM_UUID_BYTES)
			payload[keylen++] = '\0';
	}
	SET_VARSIZE(&key->hdr, VARHDRSZ + keylen);
}

/* Validate and encode a text event id */
void
IdemEncodeKey(const text *id, IdemKey *key)
{
	IdemEncodeNamedKey(id, "event id", key);
}

/* Validate and encode a text id, named what in errors */
void
IdemEncodeNamedKey(const text *id, const char *what, IdemKey *key)
{
	IdemValidateId(id, what);
	IdemEncodeKeyCString(VARDATA_ANY(id), VARSIZE_ANY_EXHDR(id), key);
}

/*
 * Encode a uuid event id: its 16 bytes, exactly as its canonical text form
 * is encoded, so that the two name the same claim
 */
void
IdemEncodeUuidKey(const pg_uuid_t *id, IdemKey *key)
{
	memcpy(key->buf + VARHDRSZ, id->data, IDEM_UUID_BYTES);
	SET_VARSIZE(&key->hdr, VARHDRSZ + IDEM_UUID_BYTES);
}

/* Turn a stored key back into the event id it encodes */
text *
IdemDecodeKey(const bytea *key)
{
	const unsigned char *p = (const unsigned char *) VARDATA_ANY(key);
	int			len = VARSIZE_ANY_EXHDR(key);

	if (len == IDEM_UUID_BYTES)
	{
		char		buf[37];
		int			i;
		int			o = 0;

		for (i = 0; i < IDEM_UUID_BYTES; i++)
		{
			if (i == 4 || i == 6 || i == 8 || i == 10)
				buf[o++] = '-';
			buf[o++] = hexdigits[p[i] >> 4];
			buf[o++] = hexdigits[p[i] & 0x0f];
		}
		return cstring_to_text_with_len(buf, 36);
	}
	if (len > 0 && p[len - 1] == '\0')
		len--;
	return cstring_to_text_with_len((const char *) p, len);
}

/*
 * 64-bit hash under which a claim's fingerprint is stored.  Fingerprints are
 * only compared for equality, so a hash keeps claims small; two different
 * fingerprints collide with probability 2^-64.
 */
int64
IdemFingerprintHash(const text *fingerprint)
{
	return (int64) hash_bytes_extended((const unsigned char *) VARDATA_ANY(fingerprint),
									   VARSIZE_ANY_EXHDR(fingerprint),
									   UINT64CONST(0x6964656d706f7465));
}

/*
 * idem_key_text(bytea) returns text
 *
 * Decodes a stored key for the idem_claims view.
 */
Datum
idem_key_text(PG_FUNCTION_ARGS)
{
	bytea	   *key = PG_GETARG_BYTEA_PP(0);
	text	   *id = IdemDecodeKey(key);
	const char *p = VARDATA_ANY(id);
	int			len = VARSIZE_ANY_EXHDR(id);

	/*
	 * A key written by a claim always decodes to valid text, but anyone may
	 * call this on any bytea: refuse what would not be text.
	 */
	if (len == 0 || memchr(p, '\0', len) != NULL ||
		!pg_verifymbstr(p, len, true))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid claim key"),
				 errdetail("The bytes do not encode an event id in the database encoding.")));
	PG_RETURN_TEXT_P(id);
}
