/*
 * btprobe.c
 *	  The first live entry of one (key, ns) in a claims btree, by a direct
 *	  descent, or straight to its leaf through the index's fences.
 *
 * An old duplicate in a sealed generation is answered by its index entry
 * alone, once the visibility map says the heap page is all-visible
 * (claimstore.c).  Going through index_beginscan for that one entry costs
 * a scan descriptor of some 27 kB (two arrays of a leaf page's items),
 * scan-key preprocessing and a copy of the matching items, for each call.
 * Here the same answer comes from _bt_search and a binary search of the
 * leaf with _bt_compare, the functions nbtree's own insertions use, under
 * the same read lock.
 *
 * Fences: a sealed generation takes no insertion, so its leaves never
 * split, and the descent through the root and the level-1 pages (two of
 * the three pages a probe reads in a generation of 250k claims, and most
 * of its key comparisons) always ends where it ended before.  So a backend
 * reads an index's level-1 pages once, and keeps for each leaf the first 8
 * bytes of the key that starts it (fences, in the memory of the generation
 * map, which goes at the next switch); a probe then finds its leaf by a
 * binary search of integers and reads that one page.  The fences are only
 * a guess, checked on the leaf itself under its lock: a live leaf whose
 * first item is below the key and whose high key is at least the key is
 * the one leaf that can hold it, whatever happened to the index since (a
 * page deleted by VACUUM, REINDEX: a new relfilenode, new fences).  When
 * the guess fails, or two fences share the key's 8 bytes, the probe
 * descends as usual (so does a key equal to a leaf's first item: that
 * leaf's low bound may be a pivot between two versions of it).  Only an
 * index whose first column is the key, ascending, has fences.
 *
 * The answer is the one an index scan's first index_getnext_tid would
 * give: the first entry equal to the key that is not marked dead (killed
 * entries point to tuples dead to every transaction; a standby does not
 * trust the marks, and is never asked).  When the lookup cannot tell that
 * cheaply (a posting list, or equal entries that may go on to the right
 * sibling) it says so, and the caller scans.
 */
#include "postgres.h"

#include "access/itup.h"
#include "access/nbtree.h"
#include "access/xlog.h"
#include "catalog/pg_index.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "btprobe.h"
#include "base/base.h"

/* The fences of one index; n == 0 when it has none (see IdemFencesBuild) */
struct IdemBtreeFences
{
	Oid			indexoid;
	Oid			relfile;		/* the fences are of this file */
	BlockNumber nblocks;		/* its length then: btree files never shrink */
	int			n;
	uint64	   *prefix;			/* first 8 bytes of each leaf's low bound,
								 * big-endian; [0] is minus infinity */
	BlockNumber *block;			/* each leaf */
};

/* IdemBtSearch, IdemBtEndpoint, IdemBtLevel, BTPageGetOpaque: see compat.h */

/* The first 8 bytes of a key, zero-padded, as an integer in byte order */
static inline uint64
IdemKeyPrefix(const bytea *key)
{
	const unsigned char *p = (const unsigned char *) VARDATA_ANY(key);
	int			len = VARSIZE_ANY_EXHDR(key);
	uint64		v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | (i < len ? p[i] : 0);
	return v;
}

/*
 * Build the fences of index in cxt from its level-1 pages: for each leaf,
 * the prefix of its low bound (the pivot that points to it, or for the
 * first child of a page the high key of the page before).  Without a
 * level 1 (a single leaf), or with the key in the second column or in
 * descending order, none.
 * Zero-padded prefixes keep byte order: two keys whose prefixes differ
 * compare as their prefixes do; equal prefixes tell nothing.
 */
static IdemBtreeFences *
IdemFencesBuild(Relation index, AttrNumber keycol, MemoryContext cxt)
{
	IdemBtreeFences *f = MemoryContextAllocZero(cxt, sizeof(IdemBtreeFences));
	TupleDesc	desc = RelationGetDescr(index);
	uint64		low = 0;		/* the page's low bound; minus infinity first */
	int			max = 0;
	Buffer		buf;

	f->indexoid = RelationGetRelid(index);
	f->relfile = IdemRelFileNumber(index);
	f->nblocks = RelationGetNumberOfBlocks(index);
	if (keycol != 1 || (index->rd_indoption[0] & INDOPTION_DESC) != 0 ||
		_bt_getrootheight(index) < 1)
		return f;
	buf = IdemBtEndpoint(index, 1);
	while (BufferIsValid(buf))
	{
		Page		page = BufferGetPage(buf);
		BTPageOpaque opaque = BTPageGetOpaque(page);
		BlockNumber next = opaque->btpo_next;

		if (!P_IGNORE(opaque) && IdemBtLevel(opaque) == 1)
		{
			OffsetNumber maxoff = PageGetMaxOffsetNumber(page);

			for (OffsetNumber off = P_FIRSTDATAKEY(opaque); off <= maxoff; off++)
			{
				IndexTuple	itup = (IndexTuple) PageGetItem(page, PageGetItemId(page, off));
				uint64		prefix = low;

				if (off > P_FIRSTDATAKEY(opaque) && BTreeTupleGetNAtts(itup, index) >= 1)
				{
					bool		isnull;
					Datum		d = index_getattr(itup, 1, desc, &isnull);

					if (!isnull)
						prefix = IdemKeyPrefix(DatumGetByteaPP(d));
				}
				if (f->n == max)
				{
					max = Max(256, max * 2);
					f->prefix = f->prefix == NULL ?
						MemoryContextAlloc(cxt, sizeof(uint64) * max) :
						repalloc(f->prefix, sizeof(uint64) * max);
					f->block = f->block == NULL ?
						MemoryContextAlloc(cxt, sizeof(BlockNumber) * max) :
						repalloc(f->block, sizeof(BlockNumber) * max);
				}
				f->prefix[f->n] = prefix;
				f->block[f->n] = BTreeTupleGetDownLink(itup);
				f->n++;
			}
			if (!P_RIGHTMOST(opaque))
			{
				IndexTuple	hikey = (IndexTuple) PageGetItem(page, PageGetItemId(page, P_HIKEY));
				bool		isnull;

				if (BTreeTupleGetNAtts(hikey, index) >= 1)
				{
					Datum		d = index_getattr(hikey, 1, desc, &isnull);

					if (!isnull)
						low = IdemKeyPrefix(DatumGetByteaPP(d));
				}
			}
		}
		_bt_relbuf(index, buf);
		buf = InvalidBuffer;
		if (next != P_NONE)
		{
			buf = ReadBuffer(index, next);
			LockBuffer(buf, BT_READ);
			_bt_checkpage(index, buf);
		}
	}
	return f;
}

/*
 * The leaf the fences say may hold a key of prefix p, or InvalidBlockNumber
 * if they cannot tell: the last leaf whose low bound's prefix is below p,
 * unless the next one's is p itself.  A binary search; the first fence is
 * minus infinity, so the search is over the others.
 */
static BlockNumber
IdemFencesLeaf(const IdemBtreeFences *f, uint64 p)
{
	int			lo = 1;
	int			hi = f->n;

	if (f->n == 0)
		return InvalidBlockNumber;
	/* the first of the fences after [0] that is >= p, or f->n */
	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (f->prefix[mid] < p)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < f->n && f->prefix[lo] == p)
		return InvalidBlockNumber;
	if (f->block[lo - 1] >= f->nblocks)
		return InvalidBlockNumber;
	return f->block[lo - 1];
}

/*
 * Read and lock the leaf the fences guess for skey, if it is a live leaf
 * that can hold the key: its first item below the key (or it is the
 * leftmost), its high key at least the key (or it is the rightmost).
 * InvalidBuffer otherwise.  A first item equal to the key does not do:
 * the leaf's low bound may then be a pivot with a heap TID, between two
 * versions of the key, and the earlier ones are on the left.
 */
static Buffer
IdemFencesRead(Relation index, BTScanInsert skey, BlockNumber blkno)
{
	Buffer		buf = ReadBuffer(index, blkno);
	Page		page;
	BTPageOpaque opaque;

	LockBuffer(buf, BT_READ);
	_bt_checkpage(index, buf);
	page = BufferGetPage(buf);
	opaque = BTPageGetOpaque(page);
	if (P_ISLEAF(opaque) && !P_IGNORE(opaque) &&
		(P_RIGHTMOST(opaque) || _bt_compare(index, skey, page, P_HIKEY) <= 0) &&
		(P_LEFTMOST(opaque) ||
		 (P_FIRSTDATAKEY(opaque) <= PageGetMaxOffsetNumber(page) &&
		  _bt_compare(index, skey, page, P_FIRSTDATAKEY(opaque)) > 0)))
		return buf;
	_bt_relbuf(index, buf);
	return InvalidBuffer;
}

/*
 * Find the first live entry of (key, ns) in index, a btree whose key
 * columns are the claims' key (column keycol) and namespace id (the
 * other), with their default operator classes.  Returns 1 and sets *tid
 * to its heap TID, 0 if there is none, -1 if only a scan can tell.  With
 * fences (the index takes no insertions), *fences holds the index's,
 * built in cxt on first use.
 */
int
IdemBtreeFirst(Relation index, IdemBtreeFences **fences, MemoryContext cxt,
			   AttrNumber keycol, int32 nsid, const bytea *key, ItemPointer tid)
{
	TupleDesc	desc = RelationGetDescr(index);
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	IndexTuple	itup;
	BTScanInsert skey;
	Buffer		buf = InvalidBuffer;
	Page		page;
	BTPageOpaque opaque;
	OffsetNumber low;
	OffsetNumber high;
	OffsetNumber maxoff;
	OffsetNumber off;
	int			result = 0;
	int			i;

	Assert(index->rd_rel->relam == BTREE_AM_OID && !RecoveryInProgress());
	/* the key columns set, any INCLUDE column null */
	for (i = 0; i < desc->natts; i++)
	{
		values[i] = (Datum) 0;
		isnull[i] = true;
	}
	values[keycol - 1] = PointerGetDatum(key);
	isnull[keycol - 1] = false;
	values[2 - keycol] = Int32GetDatum(nsid);
	isnull[2 - keycol] = false;
	itup = index_form_tuple(desc, values, isnull);
	skey = _bt_mkscankey(index, itup);
	/* every version of the key, whatever its heap TID (as a unique check) */
	skey->scantid = NULL;

	/* a descent, as pg_stat_all_indexes.idx_scan counts those of scans */
	pgstat_count_index_scan(index);
	if (fences != NULL)
	{
		IdemBtreeFences *f = *fences;
		BlockNumber blkno;

		if (f == NULL || f->indexoid != RelationGetRelid(index) ||
			f->relfile != IdemRelFileNumber(index))
			*fences = f = IdemFencesBuild(index, keycol, cxt);
		blkno = IdemFencesLeaf(f, IdemKeyPrefix(key));
		if (BlockNumberIsValid(blkno))
			buf = IdemFencesRead(index, skey, blkno);
	}
	if (!BufferIsValid(buf))
	{
		IdemBtDescend(index, skey, &buf);
		if (!BufferIsValid(buf))
			goto done;			/* no root: an empty index */
	}

	page = BufferGetPage(buf);
	opaque = BTPageGetOpaque(page);
	maxoff = PageGetMaxOffsetNumber(page);

	/* the first item not less than the key, as _bt_binsrch finds it */
	low = P_FIRSTDATAKEY(opaque);
	high = maxoff + 1;
	while (low < high)
	{
		OffsetNumber mid = low + (high - low) / 2;

		if (_bt_compare(index, skey, page, mid) > 0)
			low = mid + 1;
		else
			high = mid;
	}
	for (off = low; off <= maxoff; off++)
	{
		ItemId		iid = PageGetItemId(page, off);
		IndexTuple	entry;

		if (_bt_compare(index, skey, page, off) != 0)
			break;				/* past the key: none live */
		if (ItemIdIsDead(iid))
			continue;			/* killed, as a scan skips it */
		entry = (IndexTuple) PageGetItem(page, iid);
		if (BTreeTupleIsPosting(entry))
			result = -1;		/* several versions in one entry */
		else
		{
			*tid = entry->t_tid;
			result = 1;
		}
		break;
	}
	/*
	 * Past the last item with none live: equal entries go on to the right
	 * sibling only if the high key equals the key (a pivot that suffix
	 * truncation could not shorten, between two versions of it)
	 */
	if (off > maxoff && result == 0 && !P_RIGHTMOST(opaque) &&
		_bt_compare(index, skey, page, P_HIKEY) >= 0)
		result = -1;
	_bt_relbuf(index, buf);

done:
	pfree(skey);
	pfree(itup);
	return result;
}
