/* ofile.c - the member files of an inode: the open ones and how to reach
 * the object on every member.
 *
 * Owns: the inode's open member files (struct tfs_ofile: one fd per
 * member, an O_DIRECT twin, opened lazily and again after a member is
 * replaced), the data path's way to them (tfs_ns_member_fd, tfs_ns_fill),
 * a handle's open and release (tfs_ns_open, tfs_ns_release,
 * tfs_ns_release_gone), the size record on parity levels
 * (tfs_ns_save_size, size_save_locked), and targets (ns_target_open: the
 * pinned open files, or the parent's directory fds and a name) that
 * attr.c, xattr.c and ns.c reach an object through.
 *
 * Invariants:
 *  1. Parity levels: the size record (TFS_XATTR_SIZE) is saved (close of
 *     the last handle, truncate, grow, an fsync that finds the members
 *     changed since their last sync: raid/data.c invariant 7; a size only
 *     the tier's writes grew is in the tier's size record until the
 *     flusher grows the members) on every member that takes
 *     changes, not only on the member files the file's I/O opened so far
 *     (size_save_locked opens the others, and reopens those of a member
 *     replaced since): a degraded mount reads the record from the primary
 *     alone, and a write that reached one data chunk and the parity left
 *     the primary's record behind the size.  A rebuild writes it on the new
 *     member for every file (rebuild.c), since the namespace copy may copy a
 *     record that a close is about to change.  A file with no name left
 *     writes it only where it is open: nobody reads that record again.
 *  2. Member files are opened on first use, by name: whoever changes a
 *     name of an open file (remove, rename: ns.c hold) first opens every
 *     member (ns_ofile_fill_locked) under in->lock, so a name is only used
 *     while it is current.  The fds of a member replaced since they were
 *     opened are set aside (ofile_retire_locked), closed with the ofile
 *     since a request on another thread may still hold them, and the file
 *     is opened again.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tierfs/log.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/ns.h"
#include "tierfs/super.h"
#include "ns_i.h"

/* ------------------------------------------------------------------ */
/* Open member files                                                   */
/* ------------------------------------------------------------------ */

void ns_ofile_close(struct tfs_fs *fs, struct tfs_ofile *of)
{
	for (uint32_t k = 0; k < fs->n; k++) {
		if (of->fd[k] >= 0)
			close(of->fd[k]);
		if (of->dfd[k] >= 0)
			close(of->dfd[k]);
	}
	for (unsigned i = 0; i < of->nstale; i++)
		close(of->stale[i]);
	free(of);
}

/* Member k was replaced since fd[k] was opened: set its fds aside (closed
 * with the ofile; a request on another thread may still hold them). */
static void ofile_retire_locked(struct tfs_fs *fs, struct tfs_ofile *of, uint32_t k)
{
	int *fds[2] = { &of->fd[k], &of->dfd[k] };

	for (unsigned i = 0; i < 2; i++) {
		if (*fds[i] < 0)
			continue;
		if (of->nstale < sizeof(of->stale) / sizeof(of->stale[0]))
			of->stale[of->nstale++] = *fds[i];
		else
			close(*fds[i]);	/* replaced over and over: cannot happen twice in flight */
		__atomic_store_n(fds[i], -1, __ATOMIC_RELEASE);
	}
}

static bool ofile_current(struct tfs_fs *fs, struct tfs_ofile *of, uint32_t k)
{
	return __atomic_load_n(&of->gen[k], __ATOMIC_ACQUIRE) ==
	       __atomic_load_n(&fs->mgen[k], __ATOMIC_ACQUIRE);
}

struct tfs_ofile *ns_ofile_new(struct tfs_fs *fs)
{
	struct tfs_ofile *of = calloc(1, sizeof(*of));

	if (of)
		for (uint32_t k = 0; k < TFS_MAX_MEMBERS; k++) {
			of->fd[k] = of->dfd[k] = -1;
			of->gen[k] = __atomic_load_n(&fs->mgen[k], __ATOMIC_ACQUIRE);
		}
	return of;
}

/* Open member k's file of an open inode (and its O_DIRECT twin when asked).
 * Caller holds in->lock.  Member files are opened on first use, by name:
 * whoever changes a name of an open file (remove, rename) first opens
 * every member (ns_ofile_fill_locked) under in->lock, so a name is only used
 * while it is current.  O_DIRECT twins are reopened through /proc, which
 * works for unlinked files too. */
static int ofile_open_locked(struct tfs_fs *fs, struct tfs_inode *in, uint32_t k, bool direct)
{
	struct tfs_ofile *of = in->of;
	int rc = 0, fd;

	if (!tfs_m_named(fs, k))
		return -ENODEV;
	if (!ofile_current(fs, of, k))
		ofile_retire_locked(fs, of, k);
	if (of->fd[k] < 0) {
		struct tfs_loc loc;
		int dfd[TFS_MAX_MEMBERS];

		rc = tfs_inode_loc(fs, in, &loc);
		if (rc)
			return rc;
		rc = tfs_dir_fds(fs, loc.parent, dfd);
		if (rc == 0) {
			fd = OPS(fs)->openat(BE(fs), k, dfd[k], loc.name,
					     fs->readonly ? O_RDONLY : O_RDWR, 0);
			tfs_dir_fds_put(fs, loc.parent);
			if (fd < 0) {
				rc = fd;
			} else {
				__atomic_store_n(&of->gen[k], __atomic_load_n(&fs->mgen[k],
						 __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
				__atomic_store_n(&of->fd[k], fd, __ATOMIC_RELEASE);
			}
		}
		tfs_loc_put(fs, &loc);
		if (rc)
			return rc;
	}
	if (direct && of->dfd[k] < 0) {
		char p[64];

		snprintf(p, sizeof(p), "/proc/self/fd/%d", of->fd[k]);
		fd = open(p, (fs->readonly ? O_RDONLY : O_RDWR) | O_DIRECT | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		__atomic_store_n(&of->dfd[k], fd, __ATOMIC_RELEASE);
	}
	return 0;
}

int ns_ofile_fill_locked(struct tfs_fs *fs, struct tfs_inode *in)
{
	int rc = 0;

	for (uint32_t k = 0; k < fs->n && rc == 0; k++) {
		if (!tfs_m_named(fs, k))
			continue;
		rc = ofile_open_locked(fs, in, k, false);
		/* a member being rebuilt lacks files unlinked before it joined */
		if (rc == -ENOENT && tfs_mstate(fs, k) == TFS_M_REBUILD)
			rc = 0;
		if (rc && k != tfs_primary(fs) && tfs_member_diverged(fs, k, &rc, "open file"))
			rc = 0;
	}
	return rc;
}

int tfs_ns_member_fd(struct tfs_fs *fs, struct tfs_inode *in, uint32_t k, bool direct)
{
	struct tfs_ofile *of = in->of;	/* pinned by the caller's handle */
	int fd = __atomic_load_n(direct ? &of->dfd[k] : &of->fd[k], __ATOMIC_ACQUIRE);
	int rc;

	if (fd >= 0 && ofile_current(fs, of, k))
		return fd;
	pthread_mutex_lock(&in->lock);
	rc = ofile_open_locked(fs, in, k, direct);
	if (rc && k != tfs_primary(fs) && tfs_member_misnamed(rc))
		tfs_member_diverged(fs, k, &rc, "open file");
	fd = rc ? rc : (direct ? of->dfd[k] : of->fd[k]);
	pthread_mutex_unlock(&in->lock);
	return fd;
}

int tfs_ns_fill(struct tfs_fs *fs, struct tfs_inode *in)
{
	int rc;

	pthread_mutex_lock(&in->lock);
	rc = ns_ofile_fill_locked(fs, in);
	pthread_mutex_unlock(&in->lock);
	return rc;
}

/* Pin the inode's open member files (opened lazily, see above).  The file
 * must still have a name.  Caller holds in->lock. */
int ns_ofile_get_locked(struct tfs_fs *fs, struct tfs_inode *in)
{
	int rc = ns_fid_check_locked(fs, in);

	if (rc)
		return rc;
	if (!in->of) {
		struct tfs_loc loc;

		rc = tfs_inode_loc(fs, in, &loc);
		if (rc)
			return rc;
		tfs_loc_put(fs, &loc);
		in->of = ns_ofile_new(fs);
		if (!in->of)
			return -ENOMEM;
	}
	in->of->users++;
	return 0;
}

void ns_ofile_put_locked(struct tfs_fs *fs, struct tfs_inode *in)
{
	if (in->of && --in->of->users == 0) {
		ns_ofile_close(fs, in->of);
		in->of = NULL;
	}
}

int tfs_ns_open(struct tfs_fs *fs, struct tfs_inode *in)
{
	int rc;

	pthread_mutex_lock(&in->lock);
	rc = ns_ofile_get_locked(fs, in);
	pthread_mutex_unlock(&in->lock);
	if (rc == 0)
		tfs_inode_ref(fs, in);
	return rc;
}

/* ------------------------------------------------------------------ */
/* The size record (parity levels)                                     */
/* ------------------------------------------------------------------ */

/* Does the inode still have a name?  Under in->lock a name does not go
 * away (whoever removes one holds in->lock, see ns.c hold()). */
static bool has_name(struct tfs_fs *fs, struct tfs_inode *in)
{
	bool named;

	pthread_mutex_lock(&fs->ilock);
	named = in->aliases != NULL;
	pthread_mutex_unlock(&fs->ilock);
	return named;
}

/* Parity levels: write the logical size to every member that takes
 * changes (invariant 1), if it changed since it was last written or when
 * forced.  Caller holds in->lock. */
static int size_save_locked(struct tfs_fs *fs, struct tfs_inode *in, bool force)
{
	char v[24];
	int l, rc = 0;

	if (!tfs_layout_nparity(&fs->layout) || !in->size_valid || !in->of ||
	    (in->size == in->size_saved && !force) || fs->readonly)
		return 0;
	/* the member files this file's I/O never opened (or opened on a
	 * member since replaced) get the record too */
	if (has_name(fs, in) && (rc = ns_ofile_fill_locked(fs, in)))
		return rc;
	l = snprintf(v, sizeof(v), "%" PRIu64, in->size);
	for (uint32_t k = 0; k < fs->n; k++) {
		int r;

		if (!tfs_m_writable(fs, k) || in->of->fd[k] < 0 || !ofile_current(fs, in->of, k))
			continue;
		r = OPS(fs)->setxattr(BE(fs), k, in->of->fd[k], TFS_XATTR_SIZE, v, (size_t)l, 0);
		if (r && !rc)
			rc = r;
	}
	tfs_inode_changed(in, true);	/* a degraded mount's size: data */
	if (rc == 0)
		in->size_saved = in->size;
	return rc;
}

/* size_save_locked where the caller cannot fail for it (close, the end of
 * a truncate): the failure is logged. */
static void size_save_or_warn(struct tfs_fs *fs, struct tfs_inode *in, const char *when)
{
	int rc = size_save_locked(fs, in, false);

	if (rc)
		tfs_warn("file %" PRIu64 ": recording its size (%" PRIu64 ") on the members "
			 "at %s: %s; a degraded mount may see it shorter", in->fid, in->size,
			 when, strerror(-rc));
}

void tfs_ns_save_size_logged(struct tfs_fs *fs, struct tfs_inode *in, const char *when)
{
	pthread_mutex_lock(&in->lock);
	size_save_or_warn(fs, in, when);
	pthread_mutex_unlock(&in->lock);
}

int tfs_ns_save_size(struct tfs_fs *fs, struct tfs_inode *in, bool force)
{
	int rc;

	pthread_mutex_lock(&in->lock);
	rc = size_save_locked(fs, in, force);
	pthread_mutex_unlock(&in->lock);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Release                                                             */
/* ------------------------------------------------------------------ */

static bool release(struct tfs_fs *fs, struct tfs_inode *in, bool tell)
{
	pthread_mutex_lock(&in->lock);
	if (in->of && in->of->users == 1) {
		uint32_t pm = tfs_primary(fs);

		if (in->mtime_pending && ofile_open_locked(fs, in, pm, false) == 0)
			ns_times_put_locked(fs, in, in->of->fd[pm]);	/* attr.c inv. 4 */
		size_save_or_warn(fs, in, "close");
	}
	ns_ofile_put_locked(fs, in);
	return ns_let_go(fs, in, tell);
}

void tfs_ns_release(struct tfs_fs *fs, struct tfs_inode *in)
{
	release(fs, in, true);
}

bool tfs_ns_release_gone(struct tfs_fs *fs, struct tfs_inode *in)
{
	return release(fs, in, false);
}

/* ------------------------------------------------------------------ */
/* Targets: how to reach an inode on every member                      */
/* ------------------------------------------------------------------ */

void ns_target_close(struct tfs_fs *fs, struct tfs_inode *in, struct ns_target *t)
{
	if (t->pinned) {
		pthread_mutex_lock(&in->lock);
		ns_ofile_put_locked(fs, in);
		pthread_mutex_unlock(&in->lock);
	}
	if (t->dirs)
		tfs_dir_fds_put(fs, t->loc.parent);
	if (t->has_loc)
		tfs_loc_put(fs, &t->loc);
}

int ns_target_open(struct tfs_fs *fs, struct tfs_inode *in, struct ns_target *t)
{
	int rc;

	t->pinned = t->dirs = false;
	t->has_loc = tfs_inode_loc(fs, in, &t->loc) == 0;
	pthread_mutex_lock(&in->lock);
	if (in->of) {
		rc = ns_ofile_get_locked(fs, in);
		if (rc == 0 && (rc = ns_ofile_fill_locked(fs, in)))
			ns_ofile_put_locked(fs, in);
		if (rc == 0) {
			memcpy(t->fd, in->of->fd, sizeof(t->fd));
			t->pinned = true;
			t->name = "";
		}
		pthread_mutex_unlock(&in->lock);
		if (rc && t->has_loc)
			tfs_loc_put(fs, &t->loc);
		return rc;
	}
	pthread_mutex_unlock(&in->lock);
	if (!t->has_loc)
		return -ENOENT;
	t->name = t->loc.name;
	rc = tfs_dir_fds(fs, t->loc.parent, t->fd);
	if (rc) {
		tfs_loc_put(fs, &t->loc);
		return rc;
	}
	t->dirs = true;
	return 0;
}
