/* request.c - what the SSD tier's read and write paths share: a request
 * cut into one piece per extent, and the file's state it runs on.
 *
 * Owns: cutting [off, off+len) at extent boundaries (struct piece,
 * cache_i.h), and the snapshot of the file a request needs from its inode
 * (identity, logical size) together with the file's sequential-stream
 * detector (bcache's sequential cutoff, per file).
 *
 * Invariants:
 *  1. A request's pieces are in extent order, one per extent, and cover
 *     [off, off+len) exactly; they live in the calling thread's scratch
 *     (scratch.c), so a request allocates nothing, and nothing that runs
 *     inside a request may cut another on the same thread.
 *  2. The identity and size a request runs on and its note in the
 *     sequential detector come from one in->lock section (c_file_snap); a
 *     file not loaded yet is loaded once (tfs_ns_load_file), and one still
 *     not loaded then fails the request (-EIO).
 *
 * raid/data.c's file_state is the same load-once loop for the RAID's
 * fields (rot, size).  They are kept apart: this one also notes the
 * request in the sequential detector inside the same lock section, which
 * the RAID's must not (the tier's misses reach tfs_raid_read/write for the
 * same request, and would note it twice).
 */
#include <errno.h>
#include <pthread.h>

#include "tierfs/cache.h"
#include "tierfs/fs.h"
#include "tierfs/ns.h"
#include "tierfs/scratch.h"
#include "cache_i.h"

/* The pieces of [off, off+len), and room for one store op per piece plus
 * one (ops may be NULL): per-thread arrays, so a request allocates nothing. */
struct piece *c_pieces_of(struct tfs_cache *c, uint64_t off, uint64_t len, unsigned *np,
			  struct tfs_cstore_op **ops)
{
	uint64_t first = off / c->extent, last = (off + len - 1) / c->extent;
	unsigned n = (unsigned)(last - first + 1);
	struct piece *p = tfs_scratch_array(TFS_SCR_PIECES, n, sizeof(*p));
	struct tfs_cstore_op *o = tfs_scratch_array(TFS_SCR_COPS, n + 1, sizeof(*o));

	if (!p || !o)
		return NULL;
	if (ops)
		*ops = o;
	for (unsigned i = 0; i < n; i++) {
		p[i] = (struct piece){ .idx = first + i, .slot = C_NONE };
		tfs_piece_span(c->extent, first + i, off, len, &p[i].a, &p[i].b);
	}
	*np = n;
	return p;
}

/* The request [off, off+len) enters the file's sequential-stream
 * detector; true if it continues a run that reached the cutoff.  Under
 * in->lock. */
bool c_seq_note(const struct tfs_cache *c, struct tfs_inode *in, uint64_t off, uint64_t len)
{
	uint64_t cutoff = __atomic_load_n(&c->seq_cutoff, __ATOMIC_RELAXED);	/* status.c inv. 3 */

	return tfs_seq_note(&in->seq_next, &in->seq_len, off, len, cutoff);
}

/* fid and logical size of an open file, and whether the request [off,
 * off+len) continues a sequential run that reached the cutoff (bcache's
 * sequential cutoff, per file): one lock round trip once the file is
 * known. */
int c_file_snap(struct tfs_cache *c, struct tfs_inode *in, uint64_t off, uint64_t len,
		uint64_t *fid, uint64_t *size, bool *seq)
{
	for (int tries = 0;; tries++) {
		int rc;

		pthread_mutex_lock(&in->lock);
		if (in->fid_valid && in->size_valid) {
			*fid = in->fid;
			*size = in->size;
			*seq = c_seq_note(c, in, off, len);
			pthread_mutex_unlock(&in->lock);
			return 0;
		}
		pthread_mutex_unlock(&in->lock);
		if (tries)
			return -EIO;	/* not a regular file on the primary any more */
		rc = tfs_ns_load_file(c->fs, in);
		if (rc)
			return rc;
	}
}
