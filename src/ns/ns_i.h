/* Private to src/ns: what the namespace's files call of each other.  The
 * files, each opening with what it owns and its invariants: ns.c (the
 * tree's changes on every member: lookup, create, remove, rename, link,
 * directories, statfs), intent.c (intent records), identity.c (file
 * identities, "file gone"), ofile.c (open member files, the size record,
 * targets), attr.c (attributes, the truncate's part), xattr.c (extended
 * attributes).  include/tierfs/ns.h is their public interface.
 *
 * Locking: a function named _locked is called with in->lock held; in->lock
 * guards the inode's ofile, identity and size.  Directory fds hold
 * ns_lock shared (tfs_dir_fds to tfs_dir_fds_put); fs->ilock (the inode
 * table) is taken under in->lock, never the other way round.  A
 * directory's name lock (ns.c invariant 4) is taken after move_lock and
 * before ns_lock or any inode lock.
 */
#ifndef TIERFS_NS_I_H
#define TIERFS_NS_I_H

#include <stdbool.h>
#include <stdint.h>

#include "tierfs/fs.h"
#include "tierfs/meta.h"
#include "tierfs/ns.h"

/* ns.c */

/* A member other than the primary failed a change the primary made
 * (what, of the object at l, with rc): it now differs, so it is failed
 * if the level allows, else the difference is logged (ns.c invariant 1). */
void ns_member_diverged(struct tfs_fs *fs, uint32_t m, const char *what,
			const struct tfs_loc *l, int rc);

/* intent.c */

/* Records the change it (op, flags, arg, fid) at a (and b, or the extra
 * string as the second path) before member 0 is touched (intent.c
 * invariant 1); *seq is the record, 0 for none (one member, but a
 * truncate with an SSD tier).  Returns 0 or -errno (nothing has
 * changed): -ENOMEM, -ENAMETOOLONG (a path over 65535 bytes), or the
 * journal's refusal. */
int ns_intent_begin(struct tfs_fs *fs, struct tfs_intent it, const struct tfs_loc *a,
		    const struct tfs_loc *b, const char *extra, uint64_t *seq);
/* Returns true if ns_intent_begin records (commits) an intent for op on
 * this array: not on one member, but a truncate with an SSD tier. */
bool ns_intent_kept(const struct tfs_fs *fs, enum tfs_intent_op op);
/* Deletes a truncate's intent seq (0: none) at once (intent.c invariant
 * 2); a deletion the journal refuses is logged and goes with its next
 * transaction that works. */
void ns_truncate_intent_end(struct tfs_fs *fs, uint64_t seq);

/* Retire the intent of a change every member has now: the journal's next
 * write deletes it (meta.c invariant 7).  Replayed after a crash before
 * that, it is a no-op: the members agree already.  Inline: every change
 * ends with it (it was inlined inside ns.c). */
static inline void ns_intent_end(struct tfs_fs *fs, uint64_t seq)
{
	if (seq)
		tfs_meta_intent_retire(fs->meta, seq);
}

/* identity.c */

/* A new file identity in *fid (from a batch of the store's "fid"
 * counter).  Returns 0 or -errno (the store's, reserving a batch). */
int ns_fid_alloc(struct tfs_fs *fs, uint64_t *fid);
/* Records fid as the identity (TFS_XATTR_FID) of the object fd is on
 * member m.  Returns 0 or -errno (the member's setxattr). */
int ns_fid_set(struct tfs_fs *fs, uint32_t m, int fd, uint64_t fid);
/* The identity recorded on the object fd is on member m, in *fid.
 * Returns 0 or -errno (-ENODATA: none recorded; the member's getxattr). */
int ns_fid_get(struct tfs_fs *fs, uint32_t m, int fd, uint64_t *fid);
/* The file in (in->lock held), at l, is fid: its rotation is set and it
 * claims fid in the inode table; if another file has it, both are refused
 * (logged; identity.c invariant 1).  Returns 0, or -ESTALE with nothing
 * taken when a create took in's number before in claimed (inode.c
 * invariant 1: look the name up again). */
int ns_fid_take_locked(struct tfs_fs *fs, struct tfs_inode *in, uint64_t fid,
		       const struct tfs_loc *l);
/* May in's data be reached?  A refused file claims its identity again
 * (the other file may be gone since).  Returns 0, or -EUCLEAN while
 * another file has it.  Under in->lock. */
int ns_fid_check_locked(struct tfs_fs *fs, struct tfs_inode *in);
/* Lets go of in, whose in->lock the caller holds (it is unlocked), and
 * of the caller's reference; the tier is told when the file is gone and
 * tell.  Returns true if the file is gone (identity.c invariant 2). */
bool ns_let_go(struct tfs_fs *fs, struct tfs_inode *in, bool tell);

/* Is in one of two files with one identity (nothing keyed by fid is
 * asked about it)?  Returns true if so.  Inline: getattr asks it (it was
 * inlined inside ns.c). */
static inline bool ns_fid_refused(struct tfs_inode *in)
{
	return __atomic_load_n(&in->fid_dup, __ATOMIC_ACQUIRE);
}

/* attr.c */

/* Put the modification time due (attr.c invariant 4) on the primary
 * through its open member file fd (nothing when fd < 0 or none is due).
 * Best effort.  Under in->lock. */
void ns_times_put_locked(struct tfs_fs *fs, struct tfs_inode *in, int fd);

/* ofile.c */

/* A new ofile with no member file open, each member's generation as of
 * now.  Returns it, or NULL (no memory). */
struct tfs_ofile *ns_ofile_new(struct tfs_fs *fs);
/* Closes every fd of of (the stale ones too) and frees it. */
void ns_ofile_close(struct tfs_fs *fs, struct tfs_ofile *of);
/* Opens every member file of in's ofile not open yet (a rebuilding
 * member's missing file and a diverged non-primary member are passed
 * over).  Returns 0 or -errno (the primary's).  Under in->lock. */
int ns_ofile_fill_locked(struct tfs_fs *fs, struct tfs_inode *in);
/* Pins in's ofile (made if it has none; member files open lazily, ofile.c
 * invariant 2); the file must still have a name.  Returns 0 or -errno:
 * -EUCLEAN (another file has its identity), -ENOENT (no name left),
 * -ENOMEM.  Under in->lock. */
int ns_ofile_get_locked(struct tfs_fs *fs, struct tfs_inode *in);
/* Drops a pin of in's ofile; the last closes it.  Under in->lock. */
void ns_ofile_put_locked(struct tfs_fs *fs, struct tfs_inode *in);

/* Either the open member files of the inode (name ""), or the cached
 * member directory fds of its parent plus a name. */
struct ns_target {
	int fd[TFS_MAX_MEMBERS];
	const char *name;
	bool pinned;		/* fds belong to in->of */
	bool has_loc;		/* loc names the object (it may be unlinked) */
	bool dirs;		/* fds are the parent's cached directory fds */
	struct tfs_loc loc;
};

/* How to reach in on every member, in *t: its open member files (all of
 * them opened, pinned) if it has an ofile, else its parent's directory
 * fds and its name.  Returns 0 or -errno (-ENOENT: no name and not open;
 * the opens' and tfs_dir_fds' errors); ns_target_close ends a 0. */
int ns_target_open(struct tfs_fs *fs, struct tfs_inode *in, struct ns_target *t);
/* Lets go of what ns_target_open took. */
void ns_target_close(struct tfs_fs *fs, struct tfs_inode *in, struct ns_target *t);
/* tfs_ns_getattr of in through the name loc gives, in the directory whose
 * member fds are dfd (a lookup's, which holds that name current: ns.c
 * invariant 4), not through in's first alias.  Returns 0 or -errno. */
int ns_getattr_at(struct tfs_fs *fs, struct tfs_inode *in, const struct tfs_loc *loc,
		  const int *dfd, struct stat *st);

#endif
