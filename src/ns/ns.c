/* ns.c - the tree's changes, applied to every member.
 *
 * Owns: the rules for changing the tree on N members (ns_member_diverged:
 * a member that fails a change the primary made), lookup, creation
 * (mknod, create), remove, rename, link, readlink, directories (opendir,
 * fsyncdir) and statfs.  The rest of the namespace (ns_i.h lists what the
 * files share): intent.c (the intent records around a change), identity.c
 * (file identities, "file gone"), ofile.c (open member files, the size
 * record, targets), attr.c (attributes, the truncate's part), xattr.c
 * (extended attributes); inode.c (the inode table), health.c (member
 * states), walk.c, replay.c, upgrade.c.
 *
 * Invariants:
 *  1. The primary (health.c: the first member in sync) is the reference:
 *     every change is applied to it first, then to the other members that
 *     take changes (tfs_members).  If the primary refuses (EEXIST,
 *     ENOTEMPTY, ...), nothing has changed and the error is returned.  A
 *     member that fails a change the primary made is failed (health.c).
 *  2. Objects are created as the daemon and then given the caller's
 *     fsuid/fsgid (the parent's gid when the parent is setgid), the way the
 *     kernel's own filesystems own new files.
 *  3. A change of names, and a lookup, update the inode table (aliases,
 *     binding by the primary's inode number, unhashing) before they let go
 *     of the directory fds, i.e. of ns_lock shared.  A failover re-keys the
 *     table under ns_lock exclusive by looking every alias's path up on
 *     the new primary: in between, a renamed directory's old path was not
 *     there any more, the directory kept the old primary's inode number,
 *     and every later open of it failed with ENOENT (a rename into it,
 *     in the concurrent fail/replace test).
 *  4. A lookup binds a name that is current when it binds, and reads a
 *     regular file's attributes through that name while it is still
 *     current: every lookup (the kernel's and a maintenance walk's, one
 *     function) holds the directory's name lock (fs.h) shared from its
 *     stat of the primary until it has bound the inode and read a regular
 *     file's attributes, and every change of a name (make, tfs_ns_remove,
 *     rename_moved, link_moved) holds the name lock of each directory it
 *     changes exclusive, from before it reads the primary until its
 *     aliases are done.  A walk once stat'ed a name, a rename moved it,
 *     and the walk bound the old name: a file's first alias was then a
 *     name that was gone, its every open by name failed, and a rebuild
 *     took it for removed and declared the new member in sync without its
 *     data; a directory kept its old name, and a create or a rename into
 *     it failed with ENOENT (test_raid.py::
 *     test_a_rebuild_walk_that_looks_up_a_file_being_renamed_copies_its_data,
 *     test_a_walk_that_looks_up_a_directory_being_renamed_keeps_its_new_name).
 *     A lookup then read the attributes through the file's first alias,
 *     after letting the directory go: that alias, a hard link in another
 *     directory, was being removed, the stat found nothing, and a
 *     rebuild's last walk took the file for removed and declared the new
 *     member in sync without its data (test_raid.py::
 *     test_a_rebuild_walk_that_looks_up_a_file_whose_first_name_goes_copies_its_data).
 *     Kernel lookups took no name lock, on the grounds that the kernel
 *     holds a directory for its lookups in it; it does on a dcache miss,
 *     but it revalidates a cached name whose entry timeout ran out with a
 *     lookup it sends without holding the directory: one stat'ed d/f, a
 *     rename of d/f to d/g landed, and it bound d/f, the same stale name
 *     (test_raid.py::
 *     test_a_kernel_revalidation_of_a_name_being_renamed_keeps_the_new_name).
 *     No deadlock: a name lock is held exclusive only by a FUSE request
 *     that changes names, which makes member calls only (no request to
 *     this mount, no lookup, no notification that waits for the kernel),
 *     and a lookup waiting for the lock holds nothing else (ns_lock and
 *     in->lock come after it, fs.h's order): it waits as a create or a
 *     remove in that directory always has.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>


#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/ns.h"
#include "tierfs/parse.h"
#include "tierfs/super.h"
#include "ns_i.h"

/* ------------------------------------------------------------------ */
/* Changes on every member                                             */
/* ------------------------------------------------------------------ */

/* A member other than the primary failed a change the primary made: it
 * now differs, so it is failed if the level allows. */
void ns_member_diverged(struct tfs_fs *fs, uint32_t m, const char *what,
			const struct tfs_loc *l, int rc)
{
	char *p = tfs_loc_path(fs, l);
	char msg[160];

	snprintf(msg, sizeof(msg), "%s of '%.100s'", what, p ? p : l->name);
	if (!tfs_member_diverged(fs, m, &rc, msg))
		tfs_err("member %u: %s failed: %s; the member now differs from the primary",
			m, msg, strerror(-rc));
	free(p);
}

/* ------------------------------------------------------------------ */
/* Directory fds                                                       */
/* ------------------------------------------------------------------ */

/* Member directory fds of loc's parent (cached, see inode.c). */
static int dirs_open(struct tfs_fs *fs, struct tfs_loc *loc, int *fd)
{
	return tfs_dir_fds(fs, loc->parent, fd);
}

static void dirs_close(struct tfs_fs *fs, struct tfs_loc *loc)
{
	tfs_dir_fds_put(fs, loc->parent);
}

/* Locate (parent, name) and get the parent's member directory fds. */
static int child_open(struct tfs_fs *fs, struct tfs_inode *parent, const char *name,
		      struct tfs_loc *loc, int *fd)
{
	int rc = tfs_inode_child_loc(fs, parent, name, loc);

	if (rc)
		return rc;
	rc = dirs_open(fs, loc, fd);
	if (rc)
		tfs_loc_put(fs, loc);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Name locks (invariant 4)                                            */
/* ------------------------------------------------------------------ */

static pthread_rwlock_t *name_lock(struct tfs_fs *fs, const struct tfs_inode *dir)
{
	uint64_t h = (uint64_t)(uintptr_t)dir * 0x9E3779B97F4A7C15ull;

	return &fs->name_lock[(h >> 32) & (TFS_NAME_LOCKS - 1)];
}

/* A change of names in a and b (b may be a, or NULL) starts: their name
 * locks exclusive, in address order, one lock taken once. */
static void names_lock(struct tfs_fs *fs, const struct tfs_inode *a, const struct tfs_inode *b)
{
	pthread_rwlock_t *la = name_lock(fs, a), *lb = b ? name_lock(fs, b) : la;

	if ((uintptr_t)lb < (uintptr_t)la) {
		pthread_rwlock_t *t = la;

		la = lb;
		lb = t;
	}
	pthread_rwlock_wrlock(la);
	if (lb != la)
		pthread_rwlock_wrlock(lb);
}

static void names_unlock(struct tfs_fs *fs, const struct tfs_inode *a, const struct tfs_inode *b)
{
	pthread_rwlock_t *la = name_lock(fs, a), *lb = b ? name_lock(fs, b) : la;

	if (lb != la)
		pthread_rwlock_unlock(lb);
	pthread_rwlock_unlock(la);
}

/* ------------------------------------------------------------------ */
/* Lookup                                                              */
/* ------------------------------------------------------------------ */

/* TIERFS_FAULT's knobs of lookups (fault.c lists them; tests only), read
 * once, process-wide: lookup_bind_delay=MS, every lookup sleeps MS ms
 * between its stat of the primary and binding the inode, to widen the
 * window a failover once raced into; lookup_attr_delay=MS, every lookup
 * sleeps MS ms after binding the inode (a directory's too), before it
 * reads a regular file's attributes, to widen the window in which another
 * name of the file goes away (invariant 4). */
static long bind_delay_ms, attr_delay_ms;
static pthread_once_t delays_once = PTHREAD_ONCE_INIT;

static void delays_read(void)
{
	bind_delay_ms = tfs_spec_ms(getenv("TIERFS_FAULT"), "lookup_bind_delay");
	attr_delay_ms = tfs_spec_ms(getenv("TIERFS_FAULT"), "lookup_attr_delay");
}

static void delay(const long *ms)
{
	pthread_once(&delays_once, delays_read);
	if (*ms > 0)
		usleep((useconds_t)*ms * 1000);
}

/* Holds parent's name lock shared (invariant 4), whoever asks: the
 * kernel does not hold parent for its revalidations.  A regular file's
 * attributes are read through the name just bound, before the directory
 * is let go: the name is current until then, so the outcome depends on
 * no other name of the file.  Read after, through the file's first alias
 * (which may be in another directory, whose changes hold that directory's
 * name lock alone), a remove of that alias in progress made the stat find
 * nothing and the lookup fail with ENOENT although the name looked up was
 * there, and a walk took the file for removed.  Retrying on ENOENT would
 * not do: a retry cannot tell that from the looked-up name going, and
 * another name can go again at every try.  The read takes in->lock under
 * the name lock and the directory fds (ns_lock): the order of fs.h. */
static int lookup_once(struct tfs_fs *fs, struct tfs_inode *parent, const char *name,
		       struct tfs_entry *e)
{
	struct tfs_loc loc;
	int dfd[TFS_MAX_MEMBERS], rc;
	bool bound = false;

	pthread_rwlock_rdlock(name_lock(fs, parent));
	rc = child_open(fs, parent, name, &loc, dfd);
	if (rc)
		goto out_unlock;
	rc = OPS(fs)->fstatat(BE(fs), tfs_primary(fs), dfd[tfs_primary(fs)], name, &e->st);
	delay(&bind_delay_ms);
	/* bound by the primary's inode number before the directory fds go
	 * (invariant 3): bound after, a failover's re-keying in between made
	 * it a second inode of the file, keyed by the old primary's number,
	 * and the two refused each other's identity (EUCLEAN) */
	if (rc == 0 && !(e->in = tfs_inode_bind(fs, parent, name, &e->st)))
		rc = -ENOMEM;
	bound = rc == 0;
	if (bound)
		delay(&attr_delay_ms);
	if (bound && S_ISREG(e->st.st_mode))
		rc = ns_getattr_at(fs, e->in, &loc, dfd, &e->st);
	dirs_close(fs, &loc);
	tfs_loc_put(fs, &loc);
out_unlock:
	pthread_rwlock_unlock(name_lock(fs, parent));
	if (rc) {
		if (bound)
			tfs_inode_forget(fs, e->in, 1);
		return rc;
	}
	/* a file the SSD tier holds dirty data of, not found since a restart:
	 * found now (before anyone can open or move it) */
	if (S_ISREG(e->st.st_mode) && fs->tier)
		fs->tier->found(fs, e->in);
	return 0;
}

/* A lookup whose inode a create took the number of before the lookup read
 * the file's identity (a walk that reached a file being created) finds
 * the create's inode when it starts again (inode.c invariant 1). */
int tfs_ns_lookup(struct tfs_fs *fs, struct tfs_inode *parent, const char *name,
		  struct tfs_entry *e)
{
	int rc, tries = 0;

	do
		rc = lookup_once(fs, parent, name, e);
	while (rc == -ESTALE && ++tries < 3);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Creation                                                            */
/* ------------------------------------------------------------------ */

/* Make the object on member m in directory dfd. Returns an fd for regular
 * files, 0 otherwise, or -errno. */
static int make_one(struct tfs_fs *fs, uint32_t m, int dfd, const char *name, mode_t mode,
		    dev_t rdev, const char *target, uint64_t fid, bool excl)
{
	int rc, fd;

	switch (mode & S_IFMT) {
	case S_IFREG:
		fd = OPS(fs)->openat(BE(fs), m, dfd, name,
				     O_RDWR | O_CREAT | (excl ? O_EXCL : O_TRUNC), mode & 07777);
		if (fd < 0)
			return fd;
		rc = ns_fid_set(fs, m, fd, fid);
		if (rc) {
			close(fd);
			return rc;
		}
		return fd;
	case S_IFDIR:
		rc = OPS(fs)->mkdirat(BE(fs), m, dfd, name, mode & 07777);
		if (rc)
			return rc;
		fd = OPS(fs)->openat(BE(fs), m, dfd, name, O_PATH | O_DIRECTORY, 0);
		if (fd < 0)
			return fd;
		rc = ns_fid_set(fs, m, fd, fid);
		close(fd);
		return rc;
	case S_IFLNK:
		return OPS(fs)->symlinkat(BE(fs), m, target, dfd, name);
	default:
		return OPS(fs)->mknodat(BE(fs), m, dfd, name, mode, rdev);
	}
}

/* Give the new object the caller's identity (kernel semantics). */
static int own_one(struct tfs_fs *fs, uint32_t m, int dfd, const char *name, mode_t mode,
		   const struct tfs_ctx *ctx, bool parent_sgid)
{
	int rc;

	if (!fs->chown_ok)
		return 0;
	/* the daemon (root) already owns it: nothing to change for root callers */
	if (ctx->uid == 0 && (parent_sgid || (ctx->gid == 0 && fs->root_group)))
		return 0;
	rc = OPS(fs)->fchownat(BE(fs), m, dfd, name, ctx->uid,
			       parent_sgid ? (gid_t)-1 : ctx->gid);
	/* chown clears set-id bits of non-directories: put them back */
	if (rc == 0 && !S_ISDIR(mode) && !S_ISLNK(mode) && (mode & (S_ISUID | S_ISGID)))
		rc = OPS(fs)->fchmodat(BE(fs), m, dfd, name, mode & 07777);
	return rc;
}

static int make(struct tfs_fs *fs, const struct tfs_ctx *ctx, struct tfs_inode *parent,
		const char *name, mode_t mode, dev_t rdev, const char *target,
		struct tfs_entry *e, int *fds)
{
	struct tfs_loc loc;
	struct stat pst;
	uint64_t fid = 0, seq = 0;
	uint32_t ord[TFS_MAX_MEMBERS], nm, p;
	int dfd[TFS_MAX_MEMBERS], rc;
	bool sgid;

	if ((S_ISREG(mode) || S_ISDIR(mode)) && (rc = ns_fid_alloc(fs, &fid)))
		return rc;
	names_lock(fs, parent, NULL);	/* until bound (invariant 4) */
	rc = child_open(fs, parent, name, &loc, dfd);
	if (rc) {
		names_unlock(fs, parent, NULL);
		return rc;
	}
	nm = tfs_members(fs, ord);
	p = ord[0];
	rc = OPS(fs)->fstatat(BE(fs), p, dfd[p], "", &pst);
	if (rc)
		goto out;
	sgid = (pst.st_mode & S_ISGID) != 0;
	/* the tier may name the file in the journal with the intent's commit */
	if (S_ISREG(mode) && fs->tier && ns_intent_kept(fs, TFS_I_CREATE))
		fs->tier->created(fs, fid);
	rc = ns_intent_begin(fs, (struct tfs_intent){ .op = TFS_I_CREATE }, &loc, NULL, NULL, &seq);
	if (rc)
		goto out;
	for (uint32_t i = 0; i < nm; i++) {
		uint32_t k = ord[i];
		int r = dfd[k] < 0 ? -ENODEV
				   : make_one(fs, k, dfd[k], name, mode, rdev, target, fid, i == 0);

		if (r >= 0 && fds)
			fds[k] = r;
		if (r >= 0)
			r = own_one(fs, k, dfd[k], name, mode, ctx, sgid);
		if (r < 0 && i == 0) {
			if (r != -EEXIST && fds && fds[p] >= 0) {
				/* made but could not be set up: take it back */
				close(fds[p]);
				fds[p] = -1;
				OPS(fs)->unlinkat(BE(fs), p, dfd[p], name, 0);
			} else if (r != -EEXIST && S_ISDIR(mode)) {
				OPS(fs)->unlinkat(BE(fs), p, dfd[p], name, AT_REMOVEDIR);
			}
			rc = r;
			break;
		}
		if (r < 0)
			ns_member_diverged(fs, k, "create", &loc, r);
	}
	ns_intent_end(fs, seq);
	if (rc)
		goto out;
	rc = OPS(fs)->fstatat(BE(fs), p, dfd[p], name, &e->st);
	if (rc)
		goto out;
	e->in = tfs_inode_bind_new(fs, parent, name, &e->st, fid);	/* a new object */
	if (!e->in) {
		rc = -ENOMEM;
		goto out;
	}
	if (S_ISREG(mode)) {
		pthread_mutex_lock(&e->in->lock);
		/* never -ESTALE: nothing takes a live object's number while
		 * the create holds ns_lock and the parent */
		ns_fid_take_locked(fs, e->in, fid, &loc);
		e->in->size = 0;
		e->in->size_valid = true;
		pthread_mutex_unlock(&e->in->lock);
	}
out:
	dirs_close(fs, &loc);
	tfs_loc_put(fs, &loc);
	names_unlock(fs, parent, NULL);
	return rc;
}

int tfs_ns_mknod(struct tfs_fs *fs, const struct tfs_ctx *ctx, struct tfs_inode *parent,
		 const char *name, mode_t mode, dev_t rdev, const char *target,
		 struct tfs_entry *e)
{
	int fds[TFS_MAX_MEMBERS], rc;

	for (uint32_t k = 0; k < TFS_MAX_MEMBERS; k++)
		fds[k] = -1;
	rc = make(fs, ctx, parent, name, mode, rdev, target, e, S_ISREG(mode) ? fds : NULL);
	for (uint32_t k = 0; k < fs->n; k++)
		if (fds[k] >= 0)
			close(fds[k]);
	return rc;
}

int tfs_ns_create(struct tfs_fs *fs, const struct tfs_ctx *ctx, struct tfs_inode *parent,
		  const char *name, mode_t mode, struct tfs_entry *e)
{
	struct tfs_ofile *of = ns_ofile_new(fs);
	int rc;

	if (!of)
		return -ENOMEM;
	rc = make(fs, ctx, parent, name, S_IFREG | (mode & 07777), 0, NULL, e, of->fd);
	if (rc) {
		ns_ofile_close(fs, of);
		return rc;
	}
	pthread_mutex_lock(&e->in->lock);
	if (e->in->of) {
		/* a walk that bound the new object first has it open
		 * (inode.c invariant 1): its member files are these */
		ns_ofile_close(fs, of);
		of = e->in->of;
	}
	e->in->of = of;
	of->users++;
	pthread_mutex_unlock(&e->in->lock);
	tfs_inode_ref(fs, e->in);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Removal, rename, link                                               */
/* ------------------------------------------------------------------ */

/* Pin the hashed inode of member-0 object number ino, if any. */
static struct tfs_inode *pin_ino(struct tfs_fs *fs, uint64_t ino)
{
	struct tfs_inode *in;

	pthread_mutex_lock(&fs->ilock);
	in = tfs_inode_find(fs, ino);
	if (in)
		in->refs++;
	pthread_mutex_unlock(&fs->ilock);
	return in;
}

/* A name of in's object is about to go away or move.  Hold its lock until
 * the change and the aliases are done, and first open every member file it
 * has open: an open file never needs an old name. */
static void hold(struct tfs_fs *fs, struct tfs_inode *in)
{
	int rc;

	if (!in)
		return;
	pthread_mutex_lock(&in->lock);
	if (in->of && (rc = ns_ofile_fill_locked(fs, in)))
		tfs_warn("inode %llu: cannot open its member files before a rename or "
			 "unlink: %s", (unsigned long long)in->ino, strerror(-rc));
}

static struct tfs_inode *hold_named(struct tfs_fs *fs, uint64_t ino)
{
	struct tfs_inode *in = pin_ino(fs, ino);

	hold(fs, in);
	return in;
}

static void release_named(struct tfs_fs *fs, struct tfs_inode *in)
{
	if (in)
		ns_let_go(fs, in, true);
}

int tfs_ns_remove(struct tfs_fs *fs, struct tfs_inode *parent, const char *name, bool dir)
{
	struct tfs_loc loc;
	struct tfs_inode *in;
	struct stat st;
	uint64_t seq = 0;
	uint32_t ord[TFS_MAX_MEMBERS], nm;
	int dfd[TFS_MAX_MEMBERS], rc;

	names_lock(fs, parent, NULL);	/* until the aliases are done (invariant 4) */
	rc = child_open(fs, parent, name, &loc, dfd);
	if (rc) {
		names_unlock(fs, parent, NULL);
		return rc;
	}
	nm = tfs_members(fs, ord);
	rc = OPS(fs)->fstatat(BE(fs), ord[0], dfd[ord[0]], name, &st);
	in = rc == 0 ? hold_named(fs, st.st_ino) : NULL;
	if (rc == 0)
		rc = ns_intent_begin(fs, (struct tfs_intent){ .op = TFS_I_REMOVE }, &loc, NULL, NULL, &seq);
	for (uint32_t i = 0; i < nm && rc == 0; i++) {
		uint32_t k = ord[i];
		int r = dfd[k] < 0 ? 0 : OPS(fs)->unlinkat(BE(fs), k, dfd[k], name,
							    dir ? AT_REMOVEDIR : 0);

		if (r && i == 0)
			rc = r;
		else if (r)
			ns_member_diverged(fs, k, "remove", &loc, r);
	}
	ns_intent_end(fs, seq);
	if (rc == 0 && in) {
		tfs_inode_alias_drop(fs, in, parent, name);
		if (dir || st.st_nlink <= 1)
			tfs_inode_unhash(fs, in);
	}
	dirs_close(fs, &loc);	/* after the aliases (invariant 3) */
	tfs_loc_put(fs, &loc);
	names_unlock(fs, parent, NULL);
	release_named(fs, in);	/* its extents go if it is gone (identity.c inv. 2) */
	return rc;
}

/* Directory fds for a change that names two entries (rename, link). */
static int pair_open(struct tfs_fs *fs, struct tfs_loc *a, struct tfs_loc *b, int *ad, int *bd)
{
	int rc = dirs_open(fs, a, ad);

	if (rc)
		return rc;
	rc = dirs_open(fs, b, bd);
	if (rc)
		dirs_close(fs, a);
	return rc;
}

static void pair_close(struct tfs_fs *fs, struct tfs_loc *a, struct tfs_loc *b, bool opened)
{
	if (opened) {
		dirs_close(fs, a);
		dirs_close(fs, b);
	}
	tfs_loc_put(fs, a);
	tfs_loc_put(fs, b);
}

static int rename_moved(struct tfs_fs *fs, struct tfs_inode *op, const char *oname,
			struct tfs_inode *np, const char *nname, unsigned flags);
static int link_moved(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_inode *np,
		      const char *nname, struct tfs_entry *e);

/* Renames and links move a file to a name a tree walk may have passed:
 * a rebuild's last walk holds move_lock exclusive so none can (rebuild.c). */
int tfs_ns_rename(struct tfs_fs *fs, struct tfs_inode *op, const char *oname,
		  struct tfs_inode *np, const char *nname, unsigned flags)
{
	int rc;

	pthread_rwlock_rdlock(&fs->move_lock);
	rc = rename_moved(fs, op, oname, np, nname, flags);
	pthread_rwlock_unlock(&fs->move_lock);
	return rc;
}

int tfs_ns_link(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_inode *np,
		const char *nname, struct tfs_entry *e)
{
	int rc;

	pthread_rwlock_rdlock(&fs->move_lock);
	rc = link_moved(fs, in, np, nname, e);
	pthread_rwlock_unlock(&fs->move_lock);
	return rc;
}

static int rename_moved(struct tfs_fs *fs, struct tfs_inode *op, const char *oname,
			struct tfs_inode *np, const char *nname, unsigned flags)
{
	struct tfs_loc ol, nl;
	struct stat so, sn;
	struct tfs_inode *oin = NULL, *nin = NULL;
	uint64_t seq = 0;
	uint32_t ord[TFS_MAX_MEMBERS], nm;
	int od[TFS_MAX_MEMBERS], nd[TFS_MAX_MEMBERS], rc, nrc;
	bool dirmove;

	ol.parent = nl.parent = NULL;
	names_lock(fs, op, np);	/* until the aliases are done (invariant 4) */
	if ((rc = tfs_inode_child_loc(fs, op, oname, &ol)) ||
	    (rc = tfs_inode_child_loc(fs, np, nname, &nl)) ||
	    (rc = pair_open(fs, &ol, &nl, od, nd))) {
		pair_close(fs, &ol, &nl, false);
		names_unlock(fs, op, np);
		return rc;
	}
	nm = tfs_members(fs, ord);
	rc = OPS(fs)->fstatat(BE(fs), ord[0], od[ord[0]], oname, &so);
	nrc = OPS(fs)->fstatat(BE(fs), ord[0], nd[ord[0]], nname, &sn);
	if (rc == 0) {
		/* both inodes held, in address order (once if they are one) */
		oin = pin_ino(fs, so.st_ino);
		nin = nrc == 0 && sn.st_ino != so.st_ino ? pin_ino(fs, sn.st_ino) : NULL;
		if (oin && nin && (uintptr_t)nin < (uintptr_t)oin) {
			hold(fs, nin);
			hold(fs, oin);
		} else {
			hold(fs, oin);
			hold(fs, nin);
		}
	}
	/* moving a directory changes the names below it on each member in
	 * turn: keep walks by name out until all members and aliases agree */
	dirmove = rc == 0 && (S_ISDIR(so.st_mode) || (nrc == 0 && S_ISDIR(sn.st_mode)));
	if (dirmove)
		pthread_rwlock_wrlock(&fs->rename_lock);
	if (rc == 0)
		rc = ns_intent_begin(fs, (struct tfs_intent){ .op = TFS_I_RENAME, .flags = flags }, &ol, &nl,
				     NULL, &seq);
	for (uint32_t i = 0; i < nm && rc == 0; i++) {
		uint32_t k = ord[i];
		int r = od[k] < 0 || nd[k] < 0
			? 0 : OPS(fs)->renameat2(BE(fs), k, od[k], oname, nd[k], nname, flags);

		if (r && i == 0)
			rc = r;
		else if (r)
			ns_member_diverged(fs, k, "rename", &ol, r);
	}
	ns_intent_end(fs, seq);
	if (rc == 0 && (flags & RENAME_EXCHANGE)) {
		if (oin)
			tfs_inode_alias_move(fs, oin, op, oname, np, "\x01tierfs-xchg");
		if (nin)
			tfs_inode_alias_move(fs, nin, np, nname, op, oname);
		if (oin)
			tfs_inode_alias_move(fs, oin, np, "\x01tierfs-xchg", np, nname);
	} else if (rc == 0 && !(nrc == 0 && sn.st_ino == so.st_ino)) {
		if (nin) {
			tfs_inode_alias_drop(fs, nin, np, nname);
			if (S_ISDIR(sn.st_mode) || sn.st_nlink <= 1)
				tfs_inode_unhash(fs, nin);
		}
		if (oin)
			tfs_inode_alias_move(fs, oin, op, oname, np, nname);
	}
	pair_close(fs, &ol, &nl, true);	/* after the aliases (invariant 3) */
	if (dirmove)
		pthread_rwlock_unlock(&fs->rename_lock);
	names_unlock(fs, op, np);
	release_named(fs, nin);
	release_named(fs, oin);
	return rc;
}

static int link_moved(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_inode *np,
		      const char *nname, struct tfs_entry *e)
{
	struct tfs_loc ol, nl;
	uint64_t seq = 0;
	uint32_t ord[TFS_MAX_MEMBERS], nm;
	int od[TFS_MAX_MEMBERS], nd[TFS_MAX_MEMBERS], rc;

	ol.parent = nl.parent = NULL;
	names_lock(fs, np, NULL);	/* until bound (invariant 4) */
	if ((rc = tfs_inode_loc(fs, in, &ol)) || (rc = tfs_inode_child_loc(fs, np, nname, &nl)) ||
	    (rc = pair_open(fs, &ol, &nl, od, nd))) {
		pair_close(fs, &ol, &nl, false);
		names_unlock(fs, np, NULL);
		return rc;
	}
	nm = tfs_members(fs, ord);
	rc = ns_intent_begin(fs, (struct tfs_intent){ .op = TFS_I_LINK }, &ol, &nl, NULL, &seq);
	for (uint32_t i = 0; i < nm && rc == 0; i++) {
		uint32_t k = ord[i];
		int r = od[k] < 0 || nd[k] < 0
			? 0 : OPS(fs)->linkat(BE(fs), k, od[k], ol.name, nd[k], nname);

		if (r && i == 0)
			rc = r;
		else if (r)
			ns_member_diverged(fs, k, "link", &nl, r);
	}
	ns_intent_end(fs, seq);
	if (rc == 0)
		rc = OPS(fs)->fstatat(BE(fs), ord[0], nd[ord[0]], nname, &e->st);
	/* bound by the primary's inode number before the directory fds go
	 * (invariant 3) */
	if (rc == 0 && !(e->in = tfs_inode_bind(fs, np, nname, &e->st)))
		rc = -ENOMEM;
	pair_close(fs, &ol, &nl, true);
	names_unlock(fs, np, NULL);
	if (rc)
		return rc;
	return tfs_ns_getattr(fs, e->in, &e->st);
}

int tfs_ns_readlink(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len)
{
	struct ns_target t;
	int rc = ns_target_open(fs, in, &t);

	if (rc)
		return rc;
	rc = OPS(fs)->readlinkat(BE(fs), tfs_primary(fs), t.fd[tfs_primary(fs)], t.name, buf, len);
	ns_target_close(fs, in, &t);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Directories, statfs                                                 */
/* ------------------------------------------------------------------ */

int tfs_ns_opendir(struct tfs_fs *fs, struct tfs_inode *in, int *fd)
{
	struct ns_target t;
	int rc = ns_target_open(fs, in, &t);

	if (rc)
		return rc;
	rc = OPS(fs)->openat(BE(fs), tfs_primary(fs), t.fd[tfs_primary(fs)], t.name,
			     O_RDONLY | O_DIRECTORY, 0);
	ns_target_close(fs, in, &t);
	if (rc < 0)
		return rc;
	*fd = rc;
	return 0;
}

int tfs_ns_fsyncdir(struct tfs_fs *fs, struct tfs_inode *in)
{
	struct tfs_mio v[TFS_MAX_MEMBERS];
	struct ns_target t;
	int rc = ns_target_open(fs, in, &t);
	uint32_t ord[TFS_MAX_MEMBERS], nm = tfs_members(fs, ord), k = 0;

	if (rc)
		return rc;
	for (uint32_t i = 0; i < nm && rc == 0; i++) {
		int fd = t.fd[ord[i]] < 0 ? -ENODEV
			 : OPS(fs)->openat(BE(fs), ord[i], t.fd[ord[i]], t.name,
					   O_RDONLY | O_DIRECTORY, 0);

		if (fd < 0) {
			if (i > 0 && tfs_member_diverged(fs, ord[i], &fd, "open directory"))
				continue;
			rc = fd;
			break;
		}
		v[k++] = (struct tfs_mio){ .member = ord[i], .op = TFS_MIO_FSYNC, .fd = fd };
	}
	ns_target_close(fs, in, &t);
	if (rc == 0)
		rc = OPS(fs)->submit(BE(fs), v, k);
	for (uint32_t j = 0; j < k; j++) {
		if (rc == 0 && v[j].res < 0)
			rc = (int)v[j].res;
		close(v[j].fd);
	}
	return rc;
}

int tfs_ns_statfs(struct tfs_fs *fs, struct statvfs *out)
{
	const struct tfs_level_ops *lo = tfs_level_ops(fs->layout.level);
	uint64_t minb = UINT64_MAX, minf = UINT64_MAX, mina = UINT64_MAX;
	uint64_t sumb = 0, sumf = 0, suma = 0, files = UINT64_MAX, ffree = UINT64_MAX;
	struct statvfs sv;

	for (uint32_t k = 0; k < fs->n; k++) {
		int rc;
		uint64_t unit, b, f, a;

		if (!tfs_m_writable(fs, k))
			continue;
		rc = OPS(fs)->statvfs(BE(fs), k, &sv);
		if (rc)
			return rc;
		unit = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
		b = sv.f_blocks * unit, f = sv.f_bfree * unit, a = sv.f_bavail * unit;
		if (k == tfs_primary(fs))
			*out = sv;
		sumb += b, sumf += f, suma += a;
		if (b < minb) minb = b;
		if (f < minf) minf = f;
		if (a < mina) mina = a;
		if (sv.f_files < files) files = sv.f_files;
		if (sv.f_ffree < ffree) ffree = sv.f_ffree;
	}
	out->f_bsize = 4096;
	out->f_frsize = 4096;
	if (fs->layout.level == TFS_JBOD) {
		out->f_blocks = sumb / 4096;
		out->f_bfree = sumf / 4096;
		out->f_bavail = suma / 4096;
	} else {
		out->f_blocks = lo->usable(&fs->layout, minb) / 4096;
		out->f_bfree = lo->usable(&fs->layout, minf) / 4096;
		out->f_bavail = lo->usable(&fs->layout, mina) / 4096;
	}
	out->f_files = files;
	out->f_ffree = ffree;
	out->f_favail = ffree;
	return 0;
}
