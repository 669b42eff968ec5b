/* rebuild.c - replacing a member and rebuilding it.
 *
 * Owns: tierctl replace (checking the new directory, setting it up as
 * member k: superblock, tree root, journal copy), the copy of the
 * namespace to it, its states R and U, and the rebuild's walks (each file's
 * data through scrub.c's pass, TFS_STRIPE_REBUILD).  maint.c runs the
 * rebuild as its job and starts it once replace has set the member up.
 *
 * Invariants:
 *  1. A replacement member is made self-describing before it is written:
 *     superblock (the array's, naming the member still failed: a crash
 *     before state R leaves a member assembly ignores and replace takes
 *     again), tree root and journal copy first, then the whole
 *     namespace is copied under ns_lock exclusive, then the member takes
 *     every change (state R, recorded on all members) while its data is
 *     rebuilt file by file; each finished file is recorded in the journal
 *     (TFS_SET_REBUILT), so a rebuild interrupted by an unmount or crash
 *     resumes where it was.  A file is done once its data and its size
 *     record (ofile.c invariant 1) are on the member.  Only when every file
 *     is done does the member become in sync (U, recorded).
 *  2. No file's data is rebuilt before every write planned without the
 *     member is done (a barrier on io_gate after state R): a later one
 *     would not be copied again.
 *  3. No file escapes the walks: they are repeated while one finds files
 *     to do (at most four), then made once more with renames and links
 *     held off (move_lock); files created meanwhile are complete on the
 *     member, which takes every change.  A walk's lookups bind only names
 *     that are current and read a file's attributes through them (ns.c
 *     invariant 4), so every file the last walk meets is opened through a
 *     name it has, not taken for removed (DESIGN.md section 9 has the
 *     argument).
 *
 * Rebuild of member k:
 *   _ --replace: superblock R, journal copy--> (namespace copy, ns_lock)
 *     --> R (writes go to k) --data of every file--> U
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/ns.h"
#include "tierfs/raid.h"
#include "tierfs/replay.h"
#include "tierfs/super.h"
#include "raid_i.h"

/* ------------------------------------------------------------------ */
/* Copy of the namespace to a replacement                              */
/* ------------------------------------------------------------------ */

struct hl {
	dev_t dev;
	ino_t ino;
	char *path;
	struct hl *next;
};

struct ncopy {
	struct tfs_fs *fs;
	uint32_t from, to;
	struct hl *links;
	uint64_t objects;
};

static void copy_xattrs(struct tfs_fs *fs, uint32_t from, int sfd, uint32_t to, int dfd)
{
	char list[4096], val[65536];
	int n = OPS(fs)->listxattr(BE(fs), from, sfd, list, sizeof(list));

	for (int i = 0; n > 0 && i < n; i += (int)strlen(list + i) + 1) {
		int l = OPS(fs)->getxattr(BE(fs), from, sfd, list + i, val, sizeof(val));

		if (l >= 0)
			OPS(fs)->setxattr(BE(fs), to, dfd, list + i, val, (size_t)l, 0);
	}
}

/* Make name (in sdir on the source, ddir on the target) like the source's:
 * type, identity, owner, mode, xattrs; then times. */
static int copy_entry(struct ncopy *nc, int sdir, int ddir, const char *name, const char *path);

static int copy_dir(struct ncopy *nc, int sdir, int ddir, const char *path)
{
	struct tfs_fs *fs = nc->fs;
	int lfd = OPS(fs)->openat(BE(fs), nc->from, sdir, ".", O_RDONLY | O_DIRECTORY, 0);
	struct dirent *de;
	DIR *dp;
	int rc = 0;

	if (lfd < 0)
		return lfd;
	dp = fdopendir(lfd);
	if (!dp) {
		close(lfd);
		return -errno;
	}
	while (rc == 0 && (de = readdir(dp)) != NULL) {
		char *sub;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (asprintf(&sub, "%s/%s", path, de->d_name) < 0)
			rc = -ENOMEM;
		else
			rc = copy_entry(nc, sdir, ddir, de->d_name, sub);
		free(sub);
	}
	closedir(dp);
	return rc;
}

static int copy_entry(struct ncopy *nc, int sdir, int ddir, const char *name, const char *path)
{
	struct tfs_fs *fs = nc->fs;
	uint32_t f = nc->from, t = nc->to;
	struct timespec ts[2];
	struct stat st;
	int rc = OPS(fs)->fstatat(BE(fs), f, sdir, name, &st), sfd, dfd;

	if (rc)
		return rc == -ENOENT ? 0 : rc;
	nc->objects++;
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		for (struct hl *h = nc->links; h; h = h->next) {
			if (h->dev == st.st_dev && h->ino == st.st_ino) {
				char name2[NAME_MAX + 1];
				int od = tfs_member_at(fs, t, h->path, name2);

				rc = od < 0 ? od : OPS(fs)->linkat(BE(fs), t, od, name2, ddir, name);
				if (od >= 0)
					close(od);
				return rc == -EEXIST ? 0 : rc;
			}
		}
		struct hl *h = calloc(1, sizeof(*h));

		if (h && (h->path = strdup(path + 2)) != NULL) {	/* skip "./" */
			h->dev = st.st_dev;
			h->ino = st.st_ino;
			h->next = nc->links;
			nc->links = h;
		} else {
			free(h);
		}
	}
	switch (st.st_mode & S_IFMT) {
	case S_IFDIR:
		rc = OPS(fs)->mkdirat(BE(fs), t, ddir, name, st.st_mode & 07777);
		break;
	case S_IFREG:
		rc = OPS(fs)->openat(BE(fs), t, ddir, name, O_WRONLY | O_CREAT | O_EXCL,
				     st.st_mode & 07777);
		if (rc >= 0)
			close(rc), rc = 0;
		break;
	case S_IFLNK: {
		char target[PATH_MAX];
		int l = OPS(fs)->readlinkat(BE(fs), f, sdir, name, target, sizeof(target) - 1);

		if (l < 0)
			return l;
		target[l] = 0;
		rc = OPS(fs)->symlinkat(BE(fs), t, target, ddir, name);
		break;
	}
	default:
		rc = OPS(fs)->mknodat(BE(fs), t, ddir, name, st.st_mode, st.st_rdev);
	}
	if (rc && rc != -EEXIST)
		return rc;
	rc = OPS(fs)->fchownat(BE(fs), t, ddir, name, st.st_uid, st.st_gid);
	if (rc == 0 && !S_ISLNK(st.st_mode))
		rc = OPS(fs)->fchmodat(BE(fs), t, ddir, name, st.st_mode & 07777);
	if (rc == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
		sfd = OPS(fs)->openat(BE(fs), f, sdir, name, O_PATH, 0);
		dfd = OPS(fs)->openat(BE(fs), t, ddir, name, O_PATH, 0);
		if (sfd >= 0 && dfd >= 0)
			copy_xattrs(fs, f, sfd, t, dfd);
		if (sfd >= 0)
			close(sfd);
		if (dfd >= 0)
			close(dfd);
	}
	if (rc == 0 && S_ISDIR(st.st_mode)) {
		int sd = OPS(fs)->open_dir(BE(fs), f, sdir, name);
		int dd = OPS(fs)->open_dir(BE(fs), t, ddir, name);

		rc = sd < 0 ? sd : dd < 0 ? dd : copy_dir(nc, sd, dd, path);
		if (sd >= 0)
			close(sd);
		if (dd >= 0)
			close(dd);
	}
	ts[0] = st.st_atim;
	ts[1] = st.st_mtim;
	if (rc == 0)
		rc = OPS(fs)->utimensat(BE(fs), t, ddir, name, ts);
	return rc;
}

static int copy_namespace(struct tfs_fs *fs, uint32_t to)
{
	struct ncopy nc = { fs, tfs_primary(fs), to, NULL, 0 };
	int sd = OPS(fs)->open_dir(BE(fs), nc.from, -1, "");
	int dd = OPS(fs)->open_dir(BE(fs), to, -1, "");
	int rc = sd < 0 ? sd : dd < 0 ? dd : copy_dir(&nc, sd, dd, ".");

	if (sd >= 0) {
		int s2 = OPS(fs)->openat(BE(fs), nc.from, sd, ".", O_PATH, 0);
		int d2 = OPS(fs)->openat(BE(fs), to, dd, ".", O_PATH, 0);

		if (s2 >= 0 && d2 >= 0)
			copy_xattrs(fs, nc.from, s2, to, d2);
		if (s2 >= 0)
			close(s2);
		if (d2 >= 0)
			close(d2);
		close(sd);
	}
	if (dd >= 0)
		close(dd);
	while (nc.links) {
		struct hl *h = nc.links;

		nc.links = h->next;
		free(h->path);
		free(h);
	}
	if (rc == 0)
		tfs_info("rebuild of member %u: namespace copied (%" PRIu64 " objects)", to,
			 nc.objects);
	return rc;
}

/* ------------------------------------------------------------------ */
/* States and the rebuild                                              */
/* ------------------------------------------------------------------ */

/* Member k is now in state st, recorded on every member.  Safe under
 * ns_lock exclusive: it waits for no inode, row or io_gate lock (fs.h). */
static void set_state(struct tfs_fs *fs, uint32_t k, char st)
{
	pthread_mutex_lock(&fs->health_lock);
	__atomic_store_n(&fs->mstate[k], st, __ATOMIC_RELEASE);
	fs->array->sb.state[k] = st;
	tfs_array_record(fs->array);
	pthread_mutex_unlock(&fs->health_lock);
}

/* Wait for every data write planned before now (io_gate). */
static void write_barrier(struct tfs_fs *fs)
{
	pthread_rwlock_wrlock(&fs->io_gate);
	pthread_rwlock_unlock(&fs->io_gate);
}

int r_rebuild(struct tfs_fs *fs, uint32_t k)
{
	uint64_t redone;
	int rc = 0;

	if (tfs_mstate(fs, k) != TFS_M_REBUILD) {
		pthread_rwlock_wrlock(&fs->ns_lock);
		rc = copy_namespace(fs, k);
		if (rc == 0) {
			tfs_inode_member_reset(fs, k);
			set_state(fs, k, TFS_M_REBUILD);	/* takes changes from now */
		}
		pthread_rwlock_unlock(&fs->ns_lock);
		if (rc)
			return rc;
		/* writes planned without the member are done before any file's
		 * data is rebuilt (a later one would not be copied again) */
		write_barrier(fs);
	}
	/* A file renamed (or linked and unlinked) from a part of the tree not
	 * yet walked into one already walked is missed by a walk: walk again
	 * while walks find files to do, then once more with renames and links
	 * held off (move_lock), which no file can escape.  Files created
	 * meanwhile are complete on the member: it takes every change. */
	for (int pass = 0; pass < 4 && rc == 0; pass++) {
		rc = r_rebuild_pass(fs, &redone);
		if (redone == 0)
			break;
	}
	if (rc == 0) {
		pthread_rwlock_wrlock(&fs->move_lock);
		rc = r_rebuild_pass(fs, &redone);
		pthread_rwlock_unlock(&fs->move_lock);
	}
	if (rc == 0 && tfs_mstate(fs, k) == TFS_M_REBUILD) {
		set_state(fs, k, TFS_M_UP);
		tfs_meta_set_clear(fs->meta, TFS_SET_REBUILT);
		tfs_warn("rebuild of member %u (%s) finished: the member is in sync", k,
			 fs->array->path[k]);
	}
	return tfs_mstate(fs, k) == TFS_M_FAILED ? -EIO : rc;
}

/* ------------------------------------------------------------------ */
/* Replace                                                             */
/* ------------------------------------------------------------------ */

/* Does dir hold this array's member k (as a failed or stale member)? */
static bool stale_self(struct tfs_array *a, uint32_t k, const char *dir)
{
	struct tfs_super sb;
	const char *why;
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	bool yes;

	if (fd < 0)
		return false;
	yes = tfs_super_read(fd, &sb, &why) == 0 && strcmp(sb.uuid, a->sb.uuid) == 0 &&
	      sb.index == k;
	close(fd);
	return yes;
}

int r_replace(struct tfs_fs *fs, uint32_t k, const char *dir, char *err, size_t errlen)
{
	struct tfs_array *a = fs->array;
	struct tfs_super sb = a->sb;
	char real[PATH_MAX], jdir[PATH_MAX + 32];
	int rc, fd, lfd, root;

	if (k >= fs->n) {
		snprintf(err, errlen, "no member %u: the array has %u members", k, fs->n);
		return -EINVAL;
	}
	if (tfs_mstate(fs, k) == TFS_M_UP) {
		snprintf(err, errlen, "member %u is in sync: fail it first (tierctl fail)", k);
		return -EBUSY;
	}
	if (tfs_mstate(fs, k) == TFS_M_REBUILD || r_maint_running(fs)) {
		snprintf(err, errlen, "a rebuild or scrub is running; wait for it or cancel it");
		return -EBUSY;
	}
	if (!realpath(dir, real)) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -errno;
	}
	for (uint32_t i = 0; i < fs->n; i++) {
		if (a->path[i] && i != k && tfs_mstate(fs, i) != TFS_M_FAILED &&
		    strcmp(a->path[i], real) == 0) {
			snprintf(err, errlen, "%s is member %u of this array", real, i);
			return -EINVAL;
		}
	}
	rc = tfs_dir_empty(real);
	if (rc == 0 && stale_self(a, k, real)) {
		/* this array's own member k, failed or stale (a disk that came
		 * back, or a replacement interrupted before it took changes):
		 * its contents are out of date, so it starts from nothing */
		tfs_warn("%s was member %u of this array and is out of date: wiping it", real, k);
		rc = tfs_member_wipe(real);
		if (rc == 0)
			rc = tfs_dir_empty(real);
	}
	if (rc <= 0) {
		snprintf(err, errlen, "%s: %s", real, rc ? strerror(-rc)
			 : "not empty: a replacement must be an empty directory");
		return rc ? rc : -ENOTEMPTY;
	}
	fd = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || mkdirat(fd, TFS_TREE_DIR, 0755)) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", real, strerror(errno));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	/* still failed ('_') until the namespace is copied and the state R is
	 * recorded on every member: a crash before that leaves a member that
	 * assembly ignores and replace takes again */
	sb.index = k;
	rc = tfs_super_write(fd, &sb);
	lfd = rc ? -1 : openat(fd, TFS_SUPER_NAME, O_RDONLY | O_CLOEXEC);
	if (lfd >= 0)
		flock(lfd, LOCK_EX | LOCK_NB);
	root = openat(fd, TFS_TREE_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	snprintf(jdir, sizeof(jdir), "%s/%s", real, TFS_JOURNAL_DIR);
	if (rc == 0 && (lfd < 0 || root < 0))
		rc = -errno;
	if (rc == 0)
		rc = tfs_meta_add(fs->meta, jdir, k);
	if (rc) {
		snprintf(err, errlen, "%s: cannot set it up as member %u: %s", real, k,
			 strerror(-rc));
		if (lfd >= 0)
			close(lfd);
		if (root >= 0)
			close(root);
		close(fd);
		return rc;
	}
	pthread_mutex_lock(&fs->health_lock);
	if (a->dirfd[k] >= 0)
		close(a->dirfd[k]);
	if (a->lockfd[k] >= 0)
		close(a->lockfd[k]);
	free(a->path[k]);
	a->dirfd[k] = fd;
	a->lockfd[k] = lfd;
	a->path[k] = strdup(real);
	tfs_posix_set_root(fs->be, k, root);
	pthread_mutex_unlock(&fs->health_lock);
	tfs_warn("member %u replaced by %s: rebuilding", k, real);
	return 0;	/* the caller starts the rebuild (maint.c) */
}
