/* meta_i.h - what the LMDB clients of src/meta share (private to src/meta):
 * the mapping of MDB_* codes to -errno, big-endian keys (so cursor order
 * is numeric order) and one write transaction that grows a full map.
 * The functions are defined in meta.c.
 */
#ifndef TIERFS_META_I_H
#define TIERFS_META_I_H

#include <lmdb.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Returns 0 or -errno for an MDB_* code, an errno code of LMDB (positive)
 * or a -errno (passed through): MDB_NOTFOUND -ENOENT, MDB_MAP_FULL
 * -ENOSPC, MDB_READERS_FULL -EAGAIN (not the RAID's "member failed,
 * redo"), MDB_INVALID/CORRUPTED/PAGE_NOTFOUND -EUCLEAN,
 * MDB_VERSION_MISMATCH -EPROTO, any other MDB_* code -EIO. */
int tfs_mdb_errno(int rc);

/* Run fn in one write transaction of env, committed if fn returns 0 and
 * aborted otherwise.  On MDB_MAP_FULL the map is doubled (*mapsize) and fn
 * run again in a fresh transaction, so fn must be repeatable.  The map
 * must not move under a reader: if readers can run while this writes,
 * they hold maplock for reading and the growth takes it for writing (NULL:
 * no reader runs during a write).  what names the store in the log.
 * Callers serialise writers.  Returns fn's return, an MDB_* code or an
 * errno code of LMDB (ENOSPC for a commit that did not fit, which LMDB
 * itself calls EIO when a write came up short): pass it to
 * tfs_mdb_errno(). */
int tfs_mdb_write(MDB_env *env, size_t *mapsize, pthread_rwlock_t *maplock,
		  int (*fn)(MDB_txn *txn, void *arg), void *arg, const char *what);

/* v as 8 big-endian bytes into out (keys: cursor order is numeric order). */
static inline void tfs_be64(uint64_t v, unsigned char out[8])
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		out[i] = (unsigned char)v;
}

/* Returns the value of the 8 big-endian bytes at p. */
static inline uint64_t tfs_from_be64(const void *p)
{
	const unsigned char *b = p;
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return v;
}

#endif
