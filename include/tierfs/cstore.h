/* The SSD tier's metadata store: the cache's LMDB environment.
 *
 * Lives in CACHE_DIR/meta (meta/ owns LMDB: this is its second client
 * after the array journal).  Holds the extent map (which extent of which
 * file is in which slot of the data file, which of its 4K sectors are
 * valid and which are dirty), the logical size of files the cache has
 * grown past what the members hold, the files pinned in the tier, and a
 * few named info strings (the binding to an array, the geometry).  Every
 * function that can fail returns 0 or -errno.
 *
 * Durability: an applied batch is appended to a log (no sync), so it
 * survives the daemon's death at once; tfs_cstore_sync() is a durability
 * point: it runs the caller's barrier (the cache syncs its data file),
 * then commits everything applied before it to LMDB, synced.  After a
 * power cut only what a durability point covered is there.
 */
#ifndef TIERFS_CSTORE_H
#define TIERFS_CSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tierfs/sectors.h"	/* TFS_CEXT_WORDS */

struct tfs_cext_rec {
	uint64_t fid, idx;		/* key: file identity, extent index */
	uint32_t slot;			/* slot of the data file */
	uint16_t heat;			/* heat when last written */
	uint16_t flags;			/* reserved, 0 */
	uint64_t valid[TFS_CEXT_WORDS];	/* sectors holding the file's bytes */
	uint64_t dirty[TFS_CEXT_WORDS];	/* ... not yet on the members (subset of valid) */
};

enum tfs_cstore_opcode {
	TFS_CS_PUT_EXT,		/* rec */
	TFS_CS_DEL_EXT,		/* fid, idx */
	TFS_CS_PUT_SIZE,	/* fid, size */
	TFS_CS_DEL_SIZE,	/* fid */
	TFS_CS_PUT_PIN,		/* fid, size: the file is pinned, size extents reserved */
	TFS_CS_DEL_PIN,		/* fid */
};

struct tfs_cstore_op {
	enum tfs_cstore_opcode op;
	const struct tfs_cext_rec *rec;
	uint64_t fid, idx, size;
};

struct tfs_cstore;

/* Open the store in dir, creating dir and an empty store if needed, and
 * read back what its log holds.  Returns 0 with *out set, or -errno:
 * -EUCLEAN if what is there is not a readable store, -ENAMETOOLONG,
 * -ENOMEM, LMDB's error. */
int tfs_cstore_open(const char *dir, struct tfs_cstore **out);
/* Open the store in dir, as tfs_cstore_open, to read and set its info
 * strings alone: its log is neither read nor touched (what it holds waits
 * for the next tfs_cstore_open, which says so).  Only tfs_cstore_info_get,
 * tfs_cstore_info_set and tfs_cstore_close may be called on it.  Returns
 * as tfs_cstore_open. */
int tfs_cstore_open_info(const char *dir, struct tfs_cstore **out);
/* Close; what is applied and not synced stays in the log, and the next
 * open reads it back (as after the daemon's death). */
void tfs_cstore_close(struct tfs_cstore *cs);
/* A durability point: barrier (if set), then every batch applied before
 * the call is committed and on stable storage.  Returns 0, or -errno (the
 * barrier's, LMDB's); on failure they stay pending for the next one.
 * Concurrent callers share points: one that began after the call serves
 * it, whoever made it. */
int tfs_cstore_sync(struct tfs_cstore *cs);
/* fn runs at each durability point before the commit; non-zero fails it. */
void tfs_cstore_set_barrier(struct tfs_cstore *cs, int (*fn)(void *arg), void *arg);
/* Returns true if batches are applied and not yet synced. */
bool tfs_cstore_pending(struct tfs_cstore *cs);
/* After a power cut: drop what the log holds beyond the last durability
 * point (no barrier covered it); *dropped is how many batches.  Returns 0
 * or -errno. */
int tfs_cstore_drop_unsynced(struct tfs_cstore *cs, uint64_t *dropped);

/* Named info strings (NUL-terminated values of up to 255 bytes).  Get
 * copies key's value, its NUL included, into buf.  Returns 0, or -errno:
 * -ENOENT no such key, -ERANGE buf too small, -EUCLEAN a stored value that
 * is not a string. */
int tfs_cstore_info_get(struct tfs_cstore *cs, const char *key, char *buf, size_t len);
/* Set key to val, committed at once in a transaction of its own (not
 * through the log).
 * Returns 0, or -errno (-EINVAL: val NULL or over 255 bytes). */
int tfs_cstore_info_set(struct tfs_cstore *cs, const char *key, const char *val);

/* Apply ops in order, as one batch (all or nothing): logged before it
 * returns, committed at the next durability point.  DEL of a missing key
 * is not an error.  Returns 0 or -errno (nothing applied). */
int tfs_cstore_apply(struct tfs_cstore *cs, const struct tfs_cstore_op *ops, unsigned n);
/* Every extent record in (fid, idx) order, after a durability point; a
 * non-zero return of cb stops the walk and is returned.  cb must not
 * write to the store.  Returns 0, cb's non-zero return, or -errno. */
int tfs_cstore_ext_foreach(struct tfs_cstore *cs,
			   int (*cb)(void *arg, const struct tfs_cext_rec *rec), void *arg);
/* Every size record (fid, size) in fid order, as tfs_cstore_ext_foreach.
 * Returns 0, cb's non-zero return, or -errno. */
int tfs_cstore_size_foreach(struct tfs_cstore *cs,
			    int (*cb)(void *arg, uint64_t fid, uint64_t size), void *arg);
/* Every pin record (fid, extents reserved) in fid order, as
 * tfs_cstore_ext_foreach.  Returns 0, cb's non-zero return, or -errno. */
int tfs_cstore_pin_foreach(struct tfs_cstore *cs,
			   int (*cb)(void *arg, uint64_t fid, uint64_t need), void *arg);
/* Drop every extent, size and pin record (info stays), pending batches
 * included.  Returns 0 or -errno. */
int tfs_cstore_clear(struct tfs_cstore *cs);

#endif
