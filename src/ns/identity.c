/* identity.c - file identities: made, recorded, claimed, refused, let go.
 *
 * Owns: the allocation of file identities (ns_fid_alloc: batches of the
 * meta store's "fid" counter), their record on the members (TFS_XATTR_FID:
 * ns_fid_set, ns_fid_get), a file's claim of its identity in the inode
 * table and the refusal of two files with one (ns_fid_take_locked,
 * ns_fid_check_locked, ns_fid_refused in ns_i.h), and the one place that
 * decides that a file is gone and tells the tier (ns_let_go).
 *
 * Invariants:
 *  1. Regular files and directories carry their file identity in the
 *     TFS_XATTR_FID xattr on every member; it never changes (rename keeps it).
 *     A regular file's identity is claimed in the inode table when it is
 *     first read (ns_fid_take_locked), by the file's one inode (an inode
 *     a create took the number of first claims nothing: inode.c
 *     invariant 1): when two files claim one identity,
 *     neither gets a data path (EUCLEAN) and the tier is not asked about
 *     either until one is gone; both can be listed, renamed and removed.
 *  2. "This file is gone" is decided in one place, ns_let_go(): whoever lets
 *     go of a file (a remove or a rename over it, under in->lock; the last
 *     release of a handle) asks file_gone_locked, and a regular file with
 *     no name left that nobody has open is told to the tier (its extents
 *     go, dirty ones too: nobody can reach them).  Not while another file
 *     has its identity (invariant 1): the one left takes the extents.
 *     The tier itself decides only for files that vanished behind the
 *     mount (a dirty file the flusher or the restart walk cannot find).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/inode.h"
#include "tierfs/super.h"
#include "ns_i.h"

#define FID_BATCH 4096

int ns_fid_alloc(struct tfs_fs *fs, uint64_t *fid)
{
	int rc = 0;

	pthread_mutex_lock(&fs->fid_lock);
	if (fs->fid_next == fs->fid_end) {
		uint64_t first;

		rc = tfs_meta_counter_reserve(fs->meta, "fid", FID_BATCH, &first);
		if (rc == 0) {
			fs->fid_next = first;
			fs->fid_end = first + FID_BATCH;
		}
	}
	if (rc == 0)
		*fid = fs->fid_next++;
	pthread_mutex_unlock(&fs->fid_lock);
	return rc;
}

int ns_fid_set(struct tfs_fs *fs, uint32_t m, int fd, uint64_t fid)
{
	char v[24];
	int l = snprintf(v, sizeof(v), "%" PRIu64, fid);

	return OPS(fs)->setxattr(BE(fs), m, fd, TFS_XATTR_FID, v, (size_t)l, 0);
}

int ns_fid_get(struct tfs_fs *fs, uint32_t m, int fd, uint64_t *fid)
{
	char v[24];
	int l = OPS(fs)->getxattr(BE(fs), m, fd, TFS_XATTR_FID, v, sizeof(v) - 1);

	if (l < 0)
		return l;
	v[l] = 0;
	*fid = strtoull(v, NULL, 10);
	return 0;
}

/* The file in (in->lock held) is fid; refused if another file in the
 * table has it (inode.c invariant 5): its data is never reached then,
 * and nothing keyed by fid (the SSD tier, row locks) is asked about it.
 * An inode a create took the number of first takes nothing (inode.c
 * invariant 1): -ESTALE. */
int ns_fid_take_locked(struct tfs_fs *fs, struct tfs_inode *in, uint64_t fid,
		       const struct tfs_loc *l)
{
	char *other = NULL;
	int rc;

	in->fid = fid;
	rc = tfs_inode_claim_fid(fs, in, &other);
	if (rc == -ESTALE)
		return rc;
	in->rot = tfs_layout_rot(&fs->layout, fid);
	in->fid_valid = true;
	if (rc == -EEXIST) {
		char *p = tfs_loc_path(fs, l);

		tfs_err("file '%s' has identity %" PRIu64 ", which file '%s' has too: the data of "
			"both is refused (%s) until one of them is removed", p ? p : l->name, fid,
			other ? other : "?", strerror(EUCLEAN));
		free(p);
		free(other);
		__atomic_store_n(&in->fid_dup, true, __ATOMIC_RELEASE);
	}
	return 0;
}

/* May in's data be reached?  A refused file claims its identity again:
 * the other file may be gone since (inode.c invariant 5). */
int ns_fid_check_locked(struct tfs_fs *fs, struct tfs_inode *in)
{
	if (!__atomic_load_n(&in->fid_dup, __ATOMIC_ACQUIRE))
		return 0;
	if (tfs_inode_claim_fid(fs, in, NULL))
		return -EUCLEAN;
	__atomic_store_n(&in->fid_dup, false, __ATOMIC_RELEASE);
	in->size_valid = false;	/* the tier's part of it may count now */
	tfs_warn("file with identity %" PRIu64 " (inode %llu): the other file with it is gone; "
		 "its data is reached again", in->fid, (unsigned long long)in->ino);
	return 0;
}

/* Invariant 2.  Caller holds in->lock. */
static bool file_gone_locked(const struct tfs_fs *fs, struct tfs_inode *in)
{
	return fs->tier && S_ISREG(in->type) && !in->hashed && !in->of && in->fid_valid &&
	       !ns_fid_refused(in);
}

/* Let go of in, whose in->lock the caller holds, and of the caller's
 * reference.  Returns true if the file is gone (invariant 2); told to the
 * tier when tell. */
bool ns_let_go(struct tfs_fs *fs, struct tfs_inode *in, bool tell)
{
	bool gone = file_gone_locked(fs, in);
	uint64_t fid = in->fid;

	pthread_mutex_unlock(&in->lock);
	tfs_inode_unref(fs, in);
	if (gone && tell)	/* without in->lock: a promotion may need it */
		fs->tier->gone(fs, fid);
	return gone;
}
