/* maint.c - array maintenance: crash resync, scrub, replace and rebuild,
 * and the control interface tierctl talks to.
 *
 * Owns: the maintenance thread (one job at a time: scrub or rebuild), its
 * progress, the maintenance commands (fail, replace, scrub, repair,
 * cancel) and its part of the status; fuse/control.c routes the commands
 * and composes the status.
 *
 * Invariants:
 *  1. Maintenance reaches files through the inode table (walk.c) and takes
 *     the same row locks as writes (marks.c invariant 1), so it runs while
 *     applications do I/O.
 *  2. A replacement member is made self-describing before it is written:
 *     superblock (state R), tree root and journal copy first, then the whole
 *     namespace is copied under ns_lock exclusive, then the member takes
 *     every change (state R, recorded on all members) while its data is
 *     rebuilt file by file; each finished file is recorded in the journal
 *     (TFS_SET_REBUILT), so a rebuild interrupted by an unmount or crash
 *     resumes where it was.  A file is done once its data and its size
 *     record (ns.c invariant 5) are on the member.  Only when every file
 *     is done does the member become in sync (U, recorded).
 *  3. Resync after a crash (tfs_maint_resync) recomputes the parity of
 *     every row of every region marked in the journal before the array
 *     serves a request.
 *  4. Scrub goes on past damage and lists it: a name that is not what the
 *     array expects on a member (health.c invariant 5) and two files with
 *     one identity (inode.c invariant 5; it keeps a set of the identities
 *     seen).  A rebuild stops at such a file instead: it cannot place
 *     the file's data without its identity.
 *  5. Its part of the status names paths (files) to root only.
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
#include <time.h>
#include <unistd.h>

#include "tierfs/hash.h"
#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/maint.h"
#include "tierfs/ns.h"
#include "tierfs/raid.h"
#include "tierfs/replay.h"
#include "tierfs/walk.h"
#include "tierfs/scratch.h"
#include "tierfs/super.h"

#define ROWS_PER_STEP 16
#define MAX_REPORTED  100

enum job { JOB_NONE, JOB_SCRUB, JOB_REBUILD };

struct tfs_maint {
	pthread_mutex_t lock;
	pthread_t thread;
	bool running, cancel, joinable;
	enum job job;
	enum tfs_stripe_op op;		/* scrub: CHECK or REPAIR */
	uint32_t target;		/* rebuild: the member */
	uint64_t total, done;		/* bytes */
	uint64_t files, mismatches;
	struct timespec started;
	char last[256];			/* how the last job ended */
	char *found;			/* "path offset\n" per mismatch (first 100) */
	size_t found_len;
	char cur_path[256];
};

static struct tfs_maint *M(struct tfs_fs *fs)
{
	return fs->maint;
}

static double elapsed(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* ------------------------------------------------------------------ */
/* Per file                                                            */
/* ------------------------------------------------------------------ */

struct file_job {
	struct tfs_fs *fs;
	struct tfs_inode *in;
	char path[256];
};

/* One line of the scrub's findings (the status shows the first ones). */
static void found(struct tfs_maint *mt, const char *line, int l)
{
	pthread_mutex_lock(&mt->lock);
	mt->mismatches++;
	if (mt->mismatches <= MAX_REPORTED && l > 0) {
		char *f = realloc(mt->found, mt->found_len + (size_t)l + 1);

		if (f) {
			memcpy(f + mt->found_len, line, (size_t)l + 1);
			mt->found = f;
			mt->found_len += (size_t)l;
		}
	}
	pthread_mutex_unlock(&mt->lock);
}

static void report(void *arg, uint64_t fid, uint64_t off, int bad)
{
	struct file_job *fj = arg;
	char line[400];
	int l;

	l = snprintf(line, sizeof(line), "%s %" PRIu64 "%s%d\n", fj->path, off,
		     bad >= 0 ? " member " : " member ", bad);
	tfs_warn("scrub: file '%s' (fid %" PRIu64 ") offset %" PRIu64 ": copies or parity "
		 "disagree%s", fj->path, fid, off, bad >= 0 ? " (one member at fault)" : "");
	found(M(fj->fs), line, l);
}

/* A name scrub could not check: "PATH damaged: why". */
static void report_damaged(struct tfs_fs *fs, const char *path, const char *why)
{
	char line[400];
	int l = snprintf(line, sizeof(line), "%s damaged: %s\n", path, why);

	tfs_warn("scrub: '%s' is damaged: %s", path, why);
	found(M(fs), line, l);
}

/* Account len bytes done; sleep to keep under the rate cap. */
static void progress(struct tfs_fs *fs, uint64_t len)
{
	struct tfs_maint *mt = M(fs);
	double t, due;

	pthread_mutex_lock(&mt->lock);
	mt->done += len;
	due = fs->maint_mbps > 0 ? (double)mt->done / (fs->maint_mbps * 1e6) : 0;
	pthread_mutex_unlock(&mt->lock);
	t = elapsed(&mt->started);
	if (due > t && !mt->cancel)
		usleep((useconds_t)((due - t) * 1e6));
}

/* Run op over rows [r0, r1] of an open file (tfs_row_bytes each),
 * ROWS_PER_STEP at a time: parity rows through stripe.c, chunks on the
 * mirror levels through data.c.  count: add to the job's progress. */
static int rows_op(struct tfs_fs *fs, struct tfs_inode *in, uint64_t r0, uint64_t r1,
		   enum tfs_stripe_op op, struct file_job *fj, bool count)
{
	uint64_t rb = tfs_row_bytes(fs);
	int rc = 0;

	for (uint64_t r = r0; r <= r1 && rc == 0 && !M(fs)->cancel; r += ROWS_PER_STEP) {
		uint64_t e = r1 - r >= ROWS_PER_STEP ? r + ROWS_PER_STEP - 1 : r1;

		rc = tfs_layout_nparity(&fs->layout)
		     ? tfs_stripe_rows(fs, in, r, e, op, fj ? report : NULL, fj)
		     : tfs_data_maint(fs, in, r * rb, (e - r + 1) * rb, op, fj ? report : NULL, fj);
		if (count)
			progress(fs, (e - r + 1) * rb);
	}
	tfs_scratch_trim();	/* a file done: its rows' scratch goes back */
	/* a file cut short must not count as done */
	return rc == 0 && M(fs)->cancel ? -ECANCELED : rc;
}

/* Run op over the whole of an open file. */
static int file_op(struct tfs_fs *fs, struct tfs_inode *in, enum tfs_stripe_op op,
		   struct file_job *fj)
{
	uint64_t rb = tfs_row_bytes(fs), size;
	int rc = tfs_ns_load_file(fs, in);

	if (rc)
		return rc;
	pthread_mutex_lock(&in->lock);
	size = in->size;
	pthread_mutex_unlock(&in->lock);
	return size ? rows_op(fs, in, 0, (size - 1) / rb, op, fj, true) : 0;
}

struct walk_arg {
	struct tfs_fs *fs;
	enum tfs_stripe_op op;
	uint64_t redone;	/* rebuild: files done in this walk */
	int err;
	/* scrub: the identities seen (open addressing, 0 = empty), so that
	 * two files with one identity are found even when the inode table
	 * no longer holds the first (inode.c invariant 5): 16 bytes per file
	 * at most, for the length of a scrub */
	uint64_t *seen;
	size_t nseen, cap;
};

/* Add fid to the set: 1 if it was there already, 0 if added, -ENOMEM. */
static int seen_add(struct walk_arg *wa, uint64_t fid)
{
	size_t i;

	if (2 * (wa->nseen + 1) > wa->cap) {
		size_t cap = wa->cap ? wa->cap * 2 : 1024;
		uint64_t *t = calloc(cap, sizeof(*t)), *old = wa->seen;

		if (!t)
			return -ENOMEM;
		for (size_t j = 0; j < wa->cap; j++) {
			if (!old[j])
				continue;
			for (i = tfs_mix64(old[j]) & (cap - 1); t[i]; i = (i + 1) & (cap - 1))
				;
			t[i] = old[j];
		}
		free(old);
		wa->seen = t;
		wa->cap = cap;
	}
	for (i = tfs_mix64(fid) & (wa->cap - 1); wa->seen[i]; i = (i + 1) & (wa->cap - 1))
		if (wa->seen[i] == fid)
			return 1;
	wa->seen[i] = fid;
	wa->nseen++;
	return 0;
}

static void walk_damaged(void *arg, const char *path)
{
	struct walk_arg *wa = arg;

	report_damaged(wa->fs, path, "a name on a member is not what the array expects "
		       "(see the log)");
}

static void file_path(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len)
{
	struct tfs_loc loc;

	if (tfs_inode_loc(fs, in, &loc) == 0) {
		char *p = tfs_loc_path(fs, &loc);

		snprintf(buf, len, "%s", p ? p : loc.name);
		free(p);
		tfs_loc_put(fs, &loc);
	}
}

static int visit(void *arg, struct tfs_inode *in, const struct stat *st)
{
	struct walk_arg *wa = arg;
	struct tfs_fs *fs = wa->fs;
	struct file_job fj = { fs, in, "" };
	uint64_t fid;
	int rc;

	if (M(fs)->cancel)
		return -ECANCELED;
	rc = tfs_ns_open(fs, in);
	if (rc == -EUCLEAN && wa->op != TFS_STRIPE_REBUILD) {
		file_path(fs, in, fj.path, sizeof(fj.path));
		report_damaged(fs, fj.path, in->fid_dup ? "another file has its identity"
							: "a member's copy is not a file");
		return 0;
	}
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	rc = tfs_ns_load_file(fs, in);
	fid = in->fid;
	if (rc == 0 && wa->op != TFS_STRIPE_REBUILD && fid &&
	    (rc = seen_add(wa, fid)) == 1) {
		file_path(fs, in, fj.path, sizeof(fj.path));
		report_damaged(fs, fj.path, "another file has its identity");
		tfs_ns_release(fs, in);
		return 0;
	}
	if (rc == 0 && wa->op == TFS_STRIPE_REBUILD &&
	    tfs_meta_set_has(fs->meta, TFS_SET_REBUILT, fid, 0) == 1) {
		tfs_ns_release(fs, in);
		return 0;
	}
	file_path(fs, in, fj.path, sizeof(fj.path));
	pthread_mutex_lock(&M(fs)->lock);
	snprintf(M(fs)->cur_path, sizeof(M(fs)->cur_path), "%s", fj.path);
	M(fs)->files++;
	pthread_mutex_unlock(&M(fs)->lock);
	if (rc == 0)
		rc = file_op(fs, in, wa->op, &fj);
	/* the size record too (ns.c invariant 5): the namespace copy took the
	 * primary's, which a close between the copy and state R may have
	 * changed without reaching this member */
	if (rc == 0 && wa->op == TFS_STRIPE_REBUILD)
		rc = tfs_ns_save_size(fs, in, true);
	if (rc == 0 && wa->op == TFS_STRIPE_REBUILD) {
		rc = tfs_meta_set_put(fs->meta, TFS_SET_REBUILT, fid, 0);
		wa->redone++;
	}
	tfs_ns_release(fs, in);
	if (rc == -EUCLEAN && wa->op != TFS_STRIPE_REBUILD) {
		report_damaged(fs, fj.path, "a member's copy is not a file");
		return 0;
	}
	if (rc && rc != -ECANCELED)
		tfs_err("%s of file '%s': %s", wa->op == TFS_STRIPE_REBUILD ? "rebuild" : "scrub",
			fj.path, strerror(-rc));
	return rc;
}

static int sum_size(void *arg, struct tfs_inode *in, const struct stat *st)
{
	*(uint64_t *)arg += (uint64_t)st->st_size;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Resync after a crash                                                */
/* ------------------------------------------------------------------ */

struct resync {
	struct tfs_fs *fs;
	uint64_t (*mark)[2];
	size_t n, cap;
	uint64_t rows;
};

static int collect_mark(void *arg, uint64_t fid, uint64_t region)
{
	struct resync *rs = arg;

	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 64;
		void *p = realloc(rs->mark, cap * sizeof(*rs->mark));

		if (!p)
			return -ENOMEM;
		rs->mark = p;
		rs->cap = cap;
	}
	rs->mark[rs->n][0] = fid;
	rs->mark[rs->n++][1] = region;
	return 0;
}

static int resync_file(void *arg, struct tfs_inode *in, const struct stat *st)
{
	struct resync *rs = arg;
	struct tfs_fs *fs = rs->fs;
	uint64_t rb = tfs_row_bytes(fs), region = tfs_mark_rows(fs);
	int rc = tfs_ns_open(fs, in);

	if (rc)
		return 0;
	rc = tfs_ns_load_file(fs, in);
	for (size_t i = 0; i < rs->n && rc == 0 && in->size; i++) {
		uint64_t last = (in->size - 1) / rb, r0 = rs->mark[i][1] * region;
		uint64_t r1 = r0 + region - 1 < last ? r0 + region - 1 : last;

		if (rs->mark[i][0] != in->fid % TFS_MARK_BUCKETS || r0 > last)
			continue;
		/* parity recomputed; mirrors: the copies made equal to the first
		 * in sync */
		rc = rows_op(fs, in, r0, r1, tfs_layout_nparity(&fs->layout) ? TFS_STRIPE_RESYNC
									       : TFS_STRIPE_REPAIR,
			     NULL, false);
		rs->rows += r1 - r0 + 1;
	}
	tfs_ns_release(fs, in);
	return rc == -EBUSY ? 0 : rc;
}

int tfs_maint_resync(struct tfs_fs *fs)
{
	struct resync rs = { fs, NULL, 0, 0, 0 };
	int rc;

	if (!fs->stripes)
		return 0;
	rc = tfs_meta_set_foreach(fs->meta, TFS_SET_MARK, collect_mark, &rs);
	if (rc || rs.n == 0) {
		free(rs.mark);
		return rc;
	}
	tfs_warn("recovery: %zu region(s) had writes in flight; resynchronising them", rs.n);
	for (uint32_t k = 0; k < fs->n; k++)
		if (!tfs_m_readable(fs, k))
			tfs_err("recovery: member %u is not in sync, so rows written when the "
				"daemon stopped cannot be checked (the RAID write hole on a "
				"degraded array)", k);
	rc = tfs_walk_files(fs, resync_file, &rs);
	if (rc == 0) {
		rc = tfs_meta_set_clear(fs->meta, TFS_SET_MARK);
		if (rc == 0)
			rc = tfs_meta_sync(fs->meta);
		tfs_warn("recovery: %" PRIu64 " row(s) resynchronised", rs.rows);
	}
	free(rs.mark);
	return rc;
}

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
/* The maintenance thread                                              */
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

static int rebuild(struct tfs_fs *fs, uint32_t k)
{
	struct walk_arg wa = { fs, TFS_STRIPE_REBUILD, 0, 0, NULL, 0, 0 };
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
		wa.redone = 0;
		rc = tfs_walk_files(fs, visit, &wa);
		if (wa.redone == 0)
			break;
	}
	if (rc == 0) {
		pthread_rwlock_wrlock(&fs->move_lock);
		rc = tfs_walk_files(fs, visit, &wa);
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

static void *maint_thread(void *arg)
{
	struct tfs_fs *fs = arg;
	struct tfs_maint *mt = M(fs);
	uint64_t total = 0;
	int rc;

	tfs_walk_files(fs, sum_size, &total);
	pthread_mutex_lock(&mt->lock);
	mt->total = total;
	pthread_mutex_unlock(&mt->lock);
	if (mt->job == JOB_REBUILD) {
		rc = rebuild(fs, mt->target);
	} else {
		struct walk_arg wa = { fs, mt->op, 0, 0, NULL, 0, 0 };

		rc = tfs_walk_files_past_damage(fs, visit, walk_damaged, &wa);
		free(wa.seen);
	}
	pthread_mutex_lock(&mt->lock);
	snprintf(mt->last, sizeof(mt->last), "%s %s: %s, %" PRIu64 " files, %" PRIu64
		 " mismatches%s, %.1f s",
		 mt->job == JOB_REBUILD ? "rebuild" : mt->op == TFS_STRIPE_REPAIR ? "repair"
										 : "check",
		 rc == 0 ? "done" : rc == -ECANCELED ? "cancelled" : "failed",
		 rc == 0 || rc == -ECANCELED ? "ok" : strerror(-rc), mt->files, mt->mismatches,
		 mt->op == TFS_STRIPE_REPAIR && mt->mismatches ? " (repaired)" : "",
		 elapsed(&mt->started));
	mt->running = false;
	pthread_mutex_unlock(&mt->lock);
	tfs_info("maintenance: %s", mt->last);
	return NULL;
}

static int start_job(struct tfs_fs *fs, enum job job, enum tfs_stripe_op op, uint32_t target)
{
	struct tfs_maint *mt = M(fs);
	int rc = 0;

	pthread_mutex_lock(&mt->lock);
	if (mt->running) {
		rc = -EBUSY;
	} else {
		if (mt->joinable)
			pthread_join(mt->thread, NULL);
		mt->joinable = false;
		mt->job = job;
		mt->op = op;
		mt->target = target;
		mt->total = mt->done = mt->files = mt->mismatches = 0;
		mt->cancel = false;
		free(mt->found);
		mt->found = NULL;
		mt->found_len = 0;
		mt->cur_path[0] = 0;
		clock_gettime(CLOCK_MONOTONIC, &mt->started);
		mt->running = true;
		if (pthread_create(&mt->thread, NULL, maint_thread, fs)) {
			mt->running = false;
			rc = -EAGAIN;
		} else {
			mt->joinable = true;
		}
	}
	pthread_mutex_unlock(&mt->lock);
	return rc;
}

int tfs_maint_init(struct tfs_fs *fs)
{
	struct tfs_maint *mt = calloc(1, sizeof(*mt));

	if (!mt)
		return -ENOMEM;
	pthread_mutex_init(&mt->lock, NULL);
	fs->maint = mt;
	return 0;
}

int tfs_maint_start(struct tfs_fs *fs)
{
	/* a rebuild interrupted by an unmount or crash resumes */
	for (uint32_t k = 0; k < fs->n; k++) {
		if (tfs_mstate(fs, k) == TFS_M_REBUILD) {
			tfs_warn("rebuild of member %u (%s) resumes", k, fs->array->path[k]);
			return start_job(fs, JOB_REBUILD, TFS_STRIPE_REBUILD, k);
		}
	}
	return 0;
}

void tfs_maint_stop(struct tfs_fs *fs)
{
	struct tfs_maint *mt = M(fs);

	if (!mt)
		return;
	pthread_mutex_lock(&mt->lock);
	mt->cancel = true;
	pthread_mutex_unlock(&mt->lock);
	if (mt->joinable)
		pthread_join(mt->thread, NULL);
	mt->joinable = false;
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

static int replace(struct tfs_fs *fs, uint32_t k, const char *dir, char *err, size_t errlen)
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
	if (tfs_mstate(fs, k) == TFS_M_REBUILD || M(fs)->running) {
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
	return start_job(fs, JOB_REBUILD, TFS_STRIPE_REBUILD, k);
}

/* ------------------------------------------------------------------ */
/* Control and status                                                  */
/* ------------------------------------------------------------------ */

int tfs_maint_ctl(struct tfs_fs *fs, const char *cmd, char *err, size_t errlen)
{
	char arg[PATH_MAX + 1];
	unsigned k;
	int rc;

	if (sscanf(cmd, "fail %u", &k) == 1) {
		if (k >= fs->n) {
			snprintf(err, errlen, "no member %u: the array has %u members", k, fs->n);
			return -EINVAL;
		}
		if (tfs_mstate(fs, k) == TFS_M_FAILED)
			return 0;
		if (tfs_mstate(fs, k) == TFS_M_REBUILD) {
			tfs_maint_stop(fs);
			M(fs)->running = false;
		}
		if (!tfs_member_fail(fs, k, -EIO, "tierctl fail")) {
			snprintf(err, errlen, "member %u cannot be failed: %s would lose data", k,
				 tfs_level_name(fs->layout.level));
			return -EBUSY;
		}
		return 0;
	}
	if (sscanf(cmd, "replace %u %4096[^\n]", &k, arg) == 2)
		return replace(fs, k, arg, err, errlen);
	if (strcmp(cmd, "scrub") == 0 || strcmp(cmd, "repair") == 0) {
		if (tfs_level_ops(fs->layout.level)->tolerates(&fs->layout) == 0) {
			snprintf(err, errlen, "%s keeps no redundancy: there is nothing to check",
				 tfs_level_name(fs->layout.level));
			return -EINVAL;
		}
		for (uint32_t i = 0; i < fs->n; i++) {
			if (!tfs_m_readable(fs, i)) {
				snprintf(err, errlen, "member %u is not in sync: scrub needs every "
					 "member (replace it first)", i);
				return -EBUSY;
			}
		}
		rc = start_job(fs, JOB_SCRUB, cmd[0] == 's' ? TFS_STRIPE_CHECK : TFS_STRIPE_REPAIR,
			       0);
		if (rc == -EBUSY)
			snprintf(err, errlen, "a rebuild or scrub is already running");
		return rc;
	}
	if (strcmp(cmd, "cancel") == 0) {
		pthread_mutex_lock(&M(fs)->lock);
		M(fs)->cancel = true;
		pthread_mutex_unlock(&M(fs)->lock);
		return 0;
	}
	return -ENOSYS;		/* not a maintenance command */
}

char *tfs_maint_report(struct tfs_fs *fs, bool paths)
{
	struct tfs_maint *mt = M(fs);
	char *out;
	double t;
	size_t cap;
	int l;

	pthread_mutex_lock(&mt->lock);
	/* the fixed lines are bounded (paths 256, messages 256, 100 mismatch
	 * lines of at most found_len plus a prefix each): never truncated */
	cap = 4096 + 2 * mt->found_len;
	out = malloc(cap);
	if (out) {
		t = elapsed(&mt->started);
		l = 0;
		if (mt->running) {
			double pct = mt->total ? 100.0 * (double)mt->done / (double)mt->total : 0;
			double rate = t > 0 ? (double)mt->done / t : 0;

			if (pct > 100)
				pct = 100;
			l += snprintf(out + l, cap - (size_t)l,
				      "job=%s\nprogress=%.1f\ndone_bytes=%" PRIu64 "\ntotal_bytes=%"
				      PRIu64 "\nrate_mbps=%.1f\neta_s=%.0f\nfiles=%" PRIu64
				      "\nmismatches=%" PRIu64 "\ncurrent=%s\n",
				      mt->job == JOB_REBUILD ? "rebuild" : mt->op == TFS_STRIPE_REPAIR
				      ? "repair" : "check", pct, mt->done, mt->total, rate / 1e6,
				      rate > 0 && mt->total > mt->done
				      ? (double)(mt->total - mt->done) / rate : 0,
				      mt->files, mt->mismatches, paths ? mt->cur_path : "-");
		} else {
			l += snprintf(out + l, cap - (size_t)l, "job=none\n");
		}
		if (mt->job == JOB_REBUILD && mt->running)
			l += snprintf(out + l, cap - (size_t)l, "rebuild.member=%u\n", mt->target);
		if (mt->last[0])
			l += snprintf(out + l, cap - (size_t)l, "last=%s\n", mt->last);
		if (paths && mt->found_len && (size_t)l + mt->found_len + 16 < cap) {
			for (char *p = mt->found, *e; p && *p; p = e + 1) {
				e = strchr(p, '\n');
				if (!e)
					break;
				l += snprintf(out + l, cap - (size_t)l, "mismatch=%.*s\n",
					      (int)(e - p), p);
			}
		}
	}
	pthread_mutex_unlock(&mt->lock);
	return out;
}
