/* replay.c - finish namespace changes a crash left half done.
 *
 * Owns: mount-time recovery from the intent log (intent.c encodes it; the
 * namespace's changes write it).
 *
 * Invariants:
 *  1. Runs before the filesystem serves any request, single threaded.
 *  2. Every intent names a change that was applied to the primary and maybe
 *     some other members (ns.c invariant 1); failed members are left alone.  Replay rolls it forward: it makes
 *     the other members agree with the primary at the recorded paths, using file
 *     identities (fid xattr), symlink targets and device numbers to tell
 *     which member already has the change.
 *  3. Every step is idempotent, so a crash during replay is followed by the
 *     same replay; intents are deleted only after all of them are done.
 *  4. A truncate is replayed only on the file it was made on (the intent
 *     holds its fid): another file at the path now is left alone.  That a
 *     finished truncate is not replayed over what the file got since is
 *     intent.c's part (invariant 2): an fsync of the file makes the
 *     intent's retirement durable first (tfs_data_fsync, trunc_gen).
 *  5. Every replayed truncate is told to the RAID (tfs_replay's cut, which
 *     is marks.c's tfs_stripe_cut_replayed): on a parity level it leaves
 *     a write-intent mark on the new last row (the bytes cut from it were
 *     under its parity), which the resync that follows replay recomputes.
 *     The marks are committed before the intents are deleted (journal
 *     commits are durable in order): a crash between leaves the intents
 *     too, replayed again at the next mount (a mark put twice is one).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/ns.h"
#include "tierfs/replay.h"
#include "tierfs/super.h"

struct obj {
	int rc;			/* 0, or -errno of the stat (-ENOENT: absent) */
	struct stat st;
	uint64_t fid;
	char target[PATH_MAX];
};

/* Members replay brings in line with the primary. */
static bool other(struct tfs_fs *fs, uint32_t m)
{
	return m != tfs_primary(fs) && tfs_m_writable(fs, m);
}

int tfs_member_at(struct tfs_fs *fs, uint32_t m, const char *path, char name[NAME_MAX + 1])
{
	const char *p = path, *slash;
	int fd = OPS(fs)->open_dir(BE(fs), m, -1, "");

	while (fd >= 0 && (slash = strchr(p, '/')) != NULL) {
		char comp[NAME_MAX + 1];
		size_t l = (size_t)(slash - p);
		int next;

		if (l > NAME_MAX) {
			close(fd);
			return -ENAMETOOLONG;
		}
		memcpy(comp, p, l);
		comp[l] = 0;
		next = OPS(fs)->open_dir(BE(fs), m, fd, comp);
		close(fd);
		fd = next;
		p = slash + 1;
	}
	if (fd >= 0 && strlen(p) > NAME_MAX) {
		close(fd);
		return -ENAMETOOLONG;
	}
	if (fd >= 0)
		strcpy(name, p);
	return fd;
}

static int xattr_fd(struct tfs_fs *fs, uint32_t m, int dfd, const char *name)
{
	return OPS(fs)->openat(BE(fs), m, dfd, name, O_PATH, 0);
}

static void obj_read(struct tfs_fs *fs, uint32_t m, const char *path, struct obj *o)
{
	char name[NAME_MAX + 1];
	int dfd;

	memset(o, 0, sizeof(*o));
	dfd = tfs_member_at(fs, m, path, name);
	if (dfd < 0) {
		o->rc = dfd;
		return;
	}
	o->rc = OPS(fs)->fstatat(BE(fs), m, dfd, name, &o->st);
	if (o->rc == 0 && (S_ISREG(o->st.st_mode) || S_ISDIR(o->st.st_mode))) {
		int fd = xattr_fd(fs, m, dfd, name);
		char v[24];
		int n = fd < 0 ? fd : OPS(fs)->getxattr(BE(fs), m, fd, TFS_XATTR_FID, v, sizeof(v) - 1);

		if (n > 0) {
			v[n] = 0;
			o->fid = strtoull(v, NULL, 10);
		}
		if (fd >= 0)
			close(fd);
	} else if (o->rc == 0 && S_ISLNK(o->st.st_mode)) {
		int n = OPS(fs)->readlinkat(BE(fs), m, dfd, name, o->target,
					    sizeof(o->target) - 1);
		if (n >= 0)
			o->target[n] = 0;
	}
	close(dfd);
}

static bool same(const struct obj *a, const struct obj *b)
{
	if (a->rc || b->rc)
		return a->rc == b->rc;
	if ((a->st.st_mode & S_IFMT) != (b->st.st_mode & S_IFMT))
		return false;
	if (S_ISREG(a->st.st_mode) || S_ISDIR(a->st.st_mode))
		return a->fid == b->fid;
	if (S_ISLNK(a->st.st_mode))
		return strcmp(a->target, b->target) == 0;
	return a->st.st_rdev == b->st.st_rdev;
}

/* Member m's object at path is made to look like the primary's (o0). */
static int reconcile(struct tfs_fs *fs, const char *path, uint32_t m, const struct obj *o0)
{
	struct obj om;
	char name[NAME_MAX + 1];
	int dfd, rc = 0;

	obj_read(fs, m, path, &om);
	dfd = tfs_member_at(fs, m, path, name);
	if (dfd < 0)
		return dfd;
	if (om.rc == 0 && (o0->rc || !same(o0, &om))) {
		/* member m has something member 0 does not: remove it */
		rc = OPS(fs)->unlinkat(BE(fs), m, dfd, name,
				       S_ISDIR(om.st.st_mode) ? AT_REMOVEDIR : 0);
		om.rc = -ENOENT;
	}
	if (rc == 0 && o0->rc == 0 && om.rc == -ENOENT) {
		mode_t mode = o0->st.st_mode;
		char v[24];
		int n = snprintf(v, sizeof(v), "%" PRIu64, o0->fid), fd;

		if (S_ISREG(mode)) {
			fd = OPS(fs)->openat(BE(fs), m, dfd, name, O_RDWR | O_CREAT | O_EXCL,
					     mode & 07777);
			rc = fd < 0 ? fd : OPS(fs)->setxattr(BE(fs), m, fd, TFS_XATTR_FID, v, (size_t)n, 0);
			if (fd >= 0)
				close(fd);
		} else if (S_ISDIR(mode)) {
			rc = OPS(fs)->mkdirat(BE(fs), m, dfd, name, mode & 07777);
			fd = rc ? rc : xattr_fd(fs, m, dfd, name);
			rc = fd < 0 ? fd : OPS(fs)->setxattr(BE(fs), m, fd, TFS_XATTR_FID, v, (size_t)n, 0);
			if (fd >= 0)
				close(fd);
		} else if (S_ISLNK(mode)) {
			rc = OPS(fs)->symlinkat(BE(fs), m, o0->target, dfd, name);
		} else {
			rc = OPS(fs)->mknodat(BE(fs), m, dfd, name, mode, o0->st.st_rdev);
		}
	}
	if (rc == 0 && o0->rc == 0) {
		struct timespec ts[2] = { o0->st.st_atim, o0->st.st_mtim };

		rc = OPS(fs)->fchownat(BE(fs), m, dfd, name, o0->st.st_uid, o0->st.st_gid);
		if (rc == 0 && !S_ISLNK(o0->st.st_mode))
			rc = OPS(fs)->fchmodat(BE(fs), m, dfd, name, o0->st.st_mode & 07777);
		if (rc == 0 && !S_ISREG(o0->st.st_mode))
			rc = OPS(fs)->utimensat(BE(fs), m, dfd, name, ts);
	}
	close(dfd);
	return rc;
}

static int reconcile_all(struct tfs_fs *fs, const char *path)
{
	struct obj o0;
	int rc = 0;

	obj_read(fs, tfs_primary(fs), path, &o0);
	if (o0.rc && o0.rc != -ENOENT)
		return o0.rc;
	for (uint32_t m = 0; m < fs->n && rc == 0; m++)
		if (other(fs, m))
			rc = reconcile(fs, path, m, &o0);
	return rc;
}

static int replay_rename(struct tfs_fs *fs, const struct tfs_intent *it)
{
	char oname[NAME_MAX + 1], nname[NAME_MAX + 1];
	struct obj o0, n0;
	int rc = 0;

	obj_read(fs, tfs_primary(fs), it->path, &o0);
	obj_read(fs, tfs_primary(fs), it->path2, &n0);
	for (uint32_t m = 0; m < fs->n && rc == 0; m++) {
		if (!other(fs, m))
			continue;
		struct obj om, nm;
		bool todo;

		obj_read(fs, m, it->path, &om);
		obj_read(fs, m, it->path2, &nm);
		if (it->flags & RENAME_EXCHANGE)
			todo = om.rc == 0 && nm.rc == 0 && same(&n0, &om) && !same(&n0, &nm);
		else	/* done on the primary: the name is gone there (or was a no-op) */
			todo = om.rc == 0 && o0.rc == -ENOENT && same(&n0, &om);
		if (todo) {
			int od = tfs_member_at(fs, m, it->path, oname);
			int nd = od < 0 ? od : tfs_member_at(fs, m, it->path2, nname);

			rc = nd < 0 ? nd
				    : OPS(fs)->renameat2(BE(fs), m, od, oname, nd, nname,
							 it->flags & RENAME_EXCHANGE);
			if (od >= 0)
				close(od);
			if (nd >= 0)
				close(nd);
		}
	}
	if (rc == 0)
		rc = reconcile_all(fs, it->path);
	if (rc == 0)
		rc = reconcile_all(fs, it->path2);
	return rc;
}

static int replay_link(struct tfs_fs *fs, const struct tfs_intent *it)
{
	char oname[NAME_MAX + 1], nname[NAME_MAX + 1];
	struct obj n0;
	int rc = 0;

	obj_read(fs, tfs_primary(fs), it->path2, &n0);
	for (uint32_t m = 0; m < fs->n && rc == 0 && n0.rc == 0; m++) {
		if (!other(fs, m))
			continue;
		struct obj om, nm;

		obj_read(fs, m, it->path, &om);
		obj_read(fs, m, it->path2, &nm);
		if (nm.rc == -ENOENT && om.rc == 0 && same(&n0, &om)) {
			int od = tfs_member_at(fs, m, it->path, oname);
			int nd = od < 0 ? od : tfs_member_at(fs, m, it->path2, nname);

			rc = nd < 0 ? nd : OPS(fs)->linkat(BE(fs), m, od, oname, nd, nname);
			if (od >= 0)
				close(od);
			if (nd >= 0)
				close(nd);
		}
	}
	return rc ? rc : reconcile_all(fs, it->path2);
}

/* The pass over the intents (tfs_replay), and the truncates it replayed,
 * told to the RAID once it is over (a visitor must not write to the
 * journal). */
struct replay {
	struct tfs_fs *fs;
	unsigned ncut, cap;
	uint64_t (*cut)[2];	/* fid, length */
};

static int replay_truncate(struct replay *rp, const struct tfs_intent *it)
{
	struct tfs_fs *fs = rp->fs;
	char name[NAME_MAX + 1];
	struct obj o0;
	int rc = 0;

	obj_read(fs, tfs_primary(fs), it->path, &o0);
	if (o0.rc || !S_ISREG(o0.st.st_mode))
		return reconcile_all(fs, it->path);
	if (o0.fid != it->fid) {	/* invariant 4 */
		tfs_info("recovery: '%s' is another file now; its truncate is not replayed",
			 it->path);
		return reconcile_all(fs, it->path);
	}
	/* the RAID may have to redo redundancy the cut left (invariant 5) */
	if (rp->ncut == rp->cap) {
		unsigned cap = rp->cap ? 2 * rp->cap : 16;
		void *p = realloc(rp->cut, cap * sizeof(*rp->cut));

		if (!p)
			return -ENOMEM;
		rp->cut = p;
		rp->cap = cap;
	}
	rp->cut[rp->ncut][0] = o0.fid;
	rp->cut[rp->ncut++][1] = it->arg;
	for (uint32_t m = 0; m < fs->n && rc == 0; m++) {
		if (!tfs_m_writable(fs, m))
			continue;
		int dfd = tfs_member_at(fs, m, it->path, name);
		int fd = dfd < 0 ? dfd : OPS(fs)->openat(BE(fs), m, dfd, name, O_WRONLY, 0);
		uint32_t rot = tfs_layout_rot(&fs->layout, o0.fid);

		rc = fd < 0 ? fd
			    : OPS(fs)->ftruncate(BE(fs), m, fd,
						 tfs_layout_share(&fs->layout, rot, m, it->arg));
		if (fd >= 0)
			close(fd);
		if (dfd >= 0)
			close(dfd);
	}
	return rc;
}

static int replay_xattr(struct tfs_fs *fs, const struct tfs_intent *it)
{
	char name[NAME_MAX + 1];
	char *val = malloc(65536);
	int len, rc = 0, fd0, d0;

	if (!val)
		return -ENOMEM;
	d0 = tfs_member_at(fs, tfs_primary(fs), it->path, name);
	fd0 = d0 < 0 ? d0 : xattr_fd(fs, tfs_primary(fs), d0, name);
	if (d0 >= 0)
		close(d0);
	if (fd0 < 0) {
		free(val);
		return fd0 == -ENOENT ? reconcile_all(fs, it->path) : fd0;
	}
	len = OPS(fs)->getxattr(BE(fs), tfs_primary(fs), fd0, it->path2, val, 65536);
	close(fd0);
	for (uint32_t m = 0; m < fs->n && rc == 0; m++) {
		if (!other(fs, m))
			continue;
		int d = tfs_member_at(fs, m, it->path, name);
		int fd = d < 0 ? d : xattr_fd(fs, m, d, name);

		if (d >= 0)
			close(d);
		if (fd < 0) {
			rc = fd;
			break;
		}
		if (len >= 0)
			rc = OPS(fs)->setxattr(BE(fs), m, fd, it->path2, val, (size_t)len, 0);
		else if ((rc = OPS(fs)->removexattr(BE(fs), m, fd, it->path2)) == -ENODATA)
			rc = 0;
		close(fd);
	}
	free(val);
	return rc;
}

static int replay_one(void *arg, uint64_t seq, const void *rec, size_t len)
{
	struct replay *rp = arg;
	struct tfs_fs *fs = rp->fs;
	char *p1 = malloc(TFS_INTENT_PATH_MAX), *p2 = malloc(TFS_INTENT_PATH_MAX);
	struct tfs_intent it;
	int rc = p1 && p2 ? tfs_intent_decode(rec, len, &it, p1, p2) : -ENOMEM;

	if (rc) {
		free(p1);
		free(p2);
		tfs_err("intent %" PRIu64 ": unreadable record, skipped", seq);
		return 0;
	}
	switch (it.op) {
	case TFS_I_RENAME:   rc = replay_rename(fs, &it); break;
	case TFS_I_LINK:     rc = replay_link(fs, &it); break;
	case TFS_I_TRUNCATE: rc = replay_truncate(rp, &it); break;
	case TFS_I_XATTR:    rc = replay_xattr(fs, &it); break;
	default:             rc = reconcile_all(fs, it.path); break;
	}
	tfs_info("recovery: intent %" PRIu64 " (op %u, '%s'%s%s): %s", seq, it.op, it.path,
		 it.path2[0] ? " -> " : "", it.path2, rc ? strerror(-rc) : "repaired");
	free(p1);
	free(p2);
	return 0;	/* keep going: one bad record must not stop the others */
}

static int delete_one(void *arg, uint64_t seq, const void *rec, size_t len)
{
	uint64_t *seqs = arg;

	seqs[++seqs[0]] = seq;
	return seqs[0] == 4096 ? 1 : 0;
}

int tfs_replay(struct tfs_fs *fs, tfs_replay_cut_fn cut)
{
	struct replay rp = { fs, 0, 0, NULL };
	uint64_t count = 0;
	int rc = tfs_meta_intent_count(fs->meta, &count);

	if (rc || count == 0)
		return rc;
	tfs_warn("recovery: %" PRIu64 " namespace change(s) may be unfinished; finishing them",
		 count);
	rc = tfs_meta_intent_foreach(fs->meta, replay_one, &rp);
	for (unsigned i = 0; i < rp.ncut && rc == 0; i++)
		rc = cut(fs, rp.cut[i][0], rp.cut[i][1]);
	free(rp.cut);
	if (rc)
		return rc;
	for (;;) {
		uint64_t seqs[4097] = { 0 };

		rc = tfs_meta_intent_foreach(fs->meta, delete_one, seqs);
		if (rc < 0)
			return rc;
		if (seqs[0] == 0)
			break;
		for (uint64_t i = 1; i <= seqs[0]; i++)
			if ((rc = tfs_meta_intent_del(fs->meta, seqs[i])))
				return rc;
	}
	return tfs_meta_sync(fs->meta);
}
