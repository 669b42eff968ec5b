/* attr.c - attributes of the objects of the tree, and the namespace's
 * part of a truncate.
 *
 * Owns: getattr (target_stat: the members folded into one stat; the
 * first one loads a regular file's identity and logical size),
 * tfs_ns_load_file, setattr of owner, mode and times on every member,
 * tfs_ns_touch (the tier's writes' modification time), and the
 * truncate's intent and pinned member files (tfs_ns_cut_begin,
 * tfs_ns_cut_end; the data path, tfs_data_truncate, does the cut).
 *
 * Invariants:
 *  1. Attributes are the primary's (ns.c invariant 1); a regular file's
 *     times are the newest of any readable member's, its blocks those of
 *     the members read scaled to the whole array, at least the writes
 *     only the tier holds yet.
 *  2. A regular file's logical size is loaded once, by its first stat,
 *     into in->size (in->size_valid): the largest any readable member
 *     implies, at least the size record when a member is not in sync, at
 *     least the tier's size unless its identity is refused (identity.c
 *     invariant 1).  The identity is read with it: one that cannot be
 *     read (an error but ENODATA) is not taken and the next lookup tries
 *     again; one that is absent is 0 (logged).
 *  3. A truncate is refused before the tier is told anything when
 *     another file claims the identity (its cut would drop the other
 *     file's extents); its intent is durable before the tier drops
 *     anything when the tier holds some of the file (DESIGN 10.5), and
 *     every member file is open before anything is cut.
 *  4. A write the members do not see (the tier's) moves the file's
 *     modification time at once for every stat (mtime_due, folded in by
 *     target_stat) and on the primary at most once a second per file
 *     (tfs_ns_touch), at every close and at fsync (tfs_ns_times_put):
 *     a daemon killed leaves it at most a second behind the last write
 *     (test_writes_through_the_tier_tell_the_members_their_time_at_most_a_
 *     second_late).  After a power cut it is what the primary's
 *     filesystem made durable, as with ext4's own times: a full fsync puts
 *     the time and syncs the members (data.c invariant 7); nothing else
 *     promises it.  The time put is always under
 *     in->lock, so it never lands over an explicit change made after it;
 *     an explicit change of the modification time drops what is due.
 *  5. A writer that changes the members' times as a side effect (the
 *     flusher's writes, which the kernel stamps with the time of the
 *     flush) keeps them (tfs_ns_times_keep) and puts them back after
 *     (tfs_ns_times_restore), unless an explicit change or a truncate ran
 *     meanwhile (times_gen, times_busy): a file written, then given its
 *     times (cp -p, tar, rsync -t) keeps them once flushed.  A daemon
 *     killed between the two leaves the time of the flush.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/ns.h"
#include "tierfs/super.h"
#include "ns_i.h"

/* ------------------------------------------------------------------ */
/* Attributes                                                          */
/* ------------------------------------------------------------------ */

static void ts_max(struct timespec *a, const struct timespec *b)
{
	if (b->tv_sec > a->tv_sec || (b->tv_sec == a->tv_sec && b->tv_nsec > a->tv_nsec))
		*a = *b;
}

/* Stat the object through t; for regular files fold in every member:
 * logical size, blocks, newest times.  Loads fid and size on first use. */
static int target_stat(struct tfs_fs *fs, struct tfs_inode *in, struct ns_target *t,
		       struct stat *st)
{
	uint64_t size = 0, blocks = 0, nblk = 0;
	uint32_t p = tfs_primary(fs);
	int rc = OPS(fs)->fstatat(BE(fs), p, t->fd[p], t->name, st);

	if (rc || !S_ISREG(st->st_mode))
		return rc;
	pthread_mutex_lock(&in->lock);
	if (!in->fid_valid) {
		/* a real fd (not O_PATH): fgetxattr works on it directly */
		int fd = t->pinned ? t->fd[p]
				   : OPS(fs)->openat(BE(fs), p, t->fd[p], t->name,
						     O_RDONLY | O_NONBLOCK, 0);
		uint64_t fid = 0;

		rc = fd < 0 ? fd : ns_fid_get(fs, p, fd, &fid);
		if (fd >= 0 && tfs_layout_nparity(&fs->layout)) {
			char v[24];
			int l = OPS(fs)->getxattr(BE(fs), p, fd, TFS_XATTR_SIZE, v, sizeof(v) - 1);

			if (l > 0) {
				v[l] = 0;
				in->size_saved = strtoull(v, NULL, 10);
			}
		}
		if (fd >= 0 && !t->pinned)
			close(fd);
		if (rc && rc != -ENODATA) {
			/* not read (EIO, EMFILE, ...): no identity is taken, or
			 * the file's data would be placed by another's rotation;
			 * the next lookup tries again */
			pthread_mutex_unlock(&in->lock);
			tfs_warn("file '%s': its identity on member %u cannot be read: %s",
				 t->loc.name, p, strerror(-rc));
			return rc;
		}
		if (rc)
			tfs_warn("file '%s' (inode %llu) has no identity on member %u (%s); using 0",
				 t->loc.name, (unsigned long long)in->ino, p, strerror(-rc));
		rc = ns_fid_take_locked(fs, in, fid, &t->loc);
		if (rc) {	/* superseded: the lookup starts again */
			pthread_mutex_unlock(&in->lock);
			return rc;
		}
	}
	for (uint32_t k = 0; k < fs->n; k++) {
		struct stat sk;

		if (!tfs_m_readable(fs, k) || t->fd[k] < 0)
			continue;	/* failed or still being rebuilt */
		nblk++;
		if (k == p) {
			sk = *st;
		} else {
			rc = OPS(fs)->fstatat(BE(fs), k, t->fd[k], t->name, &sk);
			if (rc)
				break;
			ts_max(&st->st_atim, &sk.st_atim);
			ts_max(&st->st_mtim, &sk.st_mtim);
			ts_max(&st->st_ctim, &sk.st_ctim);
		}
		blocks += (uint64_t)sk.st_blocks;
		uint64_t l = tfs_layout_size_from_member(&fs->layout, in->rot, k,
							 (uint64_t)sk.st_size);
		if (l > size)
			size = l;
	}
	if (rc == 0) {
		/* a member not in sync may have held the end of the file: the
		 * size recorded at the last close is the floor then */
		if (nblk < fs->n && in->size_saved > size)
			size = in->size_saved;
		if (!in->size_valid && fs->tier && !ns_fid_refused(in)) {
			/* writes the SSD tier holds may end past the members */
			uint64_t cs = fs->tier->size(fs, in->fid);

			if (cs > size)
				size = cs;
		}
		if (!in->size_valid) {
			in->size = size;
			in->size_valid = true;
		}
		st->st_size = (off_t)in->size;
		if (in->mtime_pending) {	/* invariant 4 */
			ts_max(&st->st_mtim, &in->mtime_due);
			ts_max(&st->st_ctim, &in->mtime_due);
		}
		/* blocks of the members read, scaled to the whole array; at
		 * least the writes only the SSD tier holds yet (as ext4
		 * counts delayed allocations), so du sees write-back data */
		blocks = blocks * fs->n / (nblk ? nblk : 1) / tfs_layout_copies(&fs->layout);
		if (fs->tier && S_ISREG(st->st_mode) && !ns_fid_refused(in)) {
			uint64_t d = fs->tier->dirty_bytes(fs, in->fid) / 512;

			if (d > blocks)
				blocks = d;
		}
		st->st_blocks = (blkcnt_t)blocks;
	}
	pthread_mutex_unlock(&in->lock);
	return rc;
}

int tfs_ns_getattr(struct tfs_fs *fs, struct tfs_inode *in, struct stat *st)
{
	struct ns_target t;
	int rc = ns_target_open(fs, in, &t);

	if (rc)
		return rc;
	rc = target_stat(fs, in, &t, st);
	ns_target_close(fs, in, &t);
	return rc;
}

int ns_getattr_at(struct tfs_fs *fs, struct tfs_inode *in, const struct tfs_loc *loc,
		  const int *dfd, struct stat *st)
{
	struct ns_target t = { .name = loc->name, .loc = *loc };

	memcpy(t.fd, dfd, fs->n * sizeof(*dfd));
	return target_stat(fs, in, &t, st);
}

int tfs_ns_load_file(struct tfs_fs *fs, struct tfs_inode *in)
{
	struct stat st;
	bool known;

	pthread_mutex_lock(&in->lock);
	known = in->fid_valid && in->size_valid;
	pthread_mutex_unlock(&in->lock);
	return known ? 0 : tfs_ns_getattr(fs, in, &st);
}

/* Tell the primary (fd) the time due (invariant 4).  Caller holds in->lock. */
void ns_times_put_locked(struct tfs_fs *fs, struct tfs_inode *in, int fd)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, in->mtime_due };

	if (!in->mtime_pending || fd < 0)
		return;
	/* the primary is where attributes are read from (ns.c invariant 1) */
	if (OPS(fs)->utimensat(BE(fs), tfs_primary(fs), fd, "", ts) == 0) {
		in->mtime_pending = false;
		tfs_inode_changed(in, false);
	}
}

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

void tfs_ns_touch(struct tfs_fs *fs, struct tfs_inode *in)
{
	struct timespec now;
	bool put;

	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&in->lock);
	if (!in->mtime_pending || ts_ns(&now) > ts_ns(&in->mtime_due))
		in->mtime_due = now;
	in->mtime_pending = true;
	put = ts_ns(&now) - ts_ns(&in->mtime_put) >= 1000000000;
	if (put)
		in->mtime_put = now;
	pthread_mutex_unlock(&in->lock);
	if (put)
		tfs_ns_times_put(fs, in);
}

void tfs_ns_times_put(struct tfs_fs *fs, struct tfs_inode *in)
{
	int fd;

	if (!__atomic_load_n(&in->mtime_pending, __ATOMIC_RELAXED))
		return;	/* nothing due: no member file opened for it */
	fd = tfs_ns_member_fd(fs, in, tfs_primary(fs), false);
	pthread_mutex_lock(&in->lock);
	ns_times_put_locked(fs, in, fd);
	pthread_mutex_unlock(&in->lock);
}

void tfs_ns_times_keep(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_times_keep *keep)
{
	keep->ok = false;
	keep->mtim = (struct timespec){ 0 };
	pthread_mutex_lock(&in->lock);
	keep->gen = in->times_gen;
	if (in->times_busy) {
		pthread_mutex_unlock(&in->lock);
		return;
	}
	pthread_mutex_unlock(&in->lock);
	for (uint32_t k = 0; k < fs->n; k++) {
		int fd = tfs_m_readable(fs, k) ? tfs_ns_member_fd(fs, in, k, false) : -1;
		struct stat st;

		if (fd >= 0 && OPS(fs)->fstat(BE(fs), k, fd, &st) != 0)
			return;	/* not known: nothing put back */
		if (fd >= 0)
			ts_max(&keep->mtim, &st.st_mtim);
	}
	keep->ok = keep->mtim.tv_sec != 0;
}

void tfs_ns_times_restore(struct tfs_fs *fs, struct tfs_inode *in,
			  const struct tfs_times_keep *keep)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, keep->mtim };

	if (!keep->ok)
		return;
	pthread_mutex_lock(&in->lock);
	if (in->times_gen == keep->gen && in->times_busy == 0) {
		/* writes the members were not told of are newer (invariant 4) */
		if (in->mtime_pending)
			ts_max(&ts[1], &in->mtime_due);
		for (uint32_t k = 0; k < fs->n; k++)
			if (tfs_m_writable(fs, k) && in->of->fd[k] >= 0)
				OPS(fs)->utimensat(BE(fs), k, in->of->fd[k], "", ts);
		in->mtime_pending = false;
		tfs_inode_changed(in, false);
	}
	pthread_mutex_unlock(&in->lock);
}

/* An explicit change of in's times (or a truncate) begins (invariant 5);
 * one of the modification time (mtime) drops the time due. */
static void times_change_begin(struct tfs_inode *in, bool mtime)
{
	pthread_mutex_lock(&in->lock);
	in->times_gen++;
	in->times_busy++;
	if (mtime) {	/* the next write's time goes at once */
		in->mtime_pending = false;
		in->mtime_put = (struct timespec){ 0 };
	}
	pthread_mutex_unlock(&in->lock);
}

/* The change begun by times_change_begin is made. */
static void times_change_end(struct tfs_inode *in)
{
	pthread_mutex_lock(&in->lock);
	in->times_gen++;
	in->times_busy--;
	pthread_mutex_unlock(&in->lock);
}

static int set_times(struct tfs_fs *fs, struct ns_target *t, const struct stat *attr, int to_set)
{
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } };
	int rc = 0;

	if (to_set & TFS_SET_ATIME_NOW)
		ts[0].tv_nsec = UTIME_NOW;
	else if (to_set & TFS_SET_ATIME)
		ts[0] = attr->st_atim;
	if (to_set & TFS_SET_MTIME_NOW)
		ts[1].tv_nsec = UTIME_NOW;
	else if (to_set & TFS_SET_MTIME)
		ts[1] = attr->st_mtim;
	uint32_t ord[TFS_MAX_MEMBERS], nm = tfs_members(fs, ord);

	for (uint32_t i = 0; i < nm; i++) {
		uint32_t k = ord[i];
		int r = t->fd[k] < 0 ? 0 : OPS(fs)->utimensat(BE(fs), k, t->fd[k], t->name, ts);

		if (i == 0 && r)
			return r;
		if (r)
			ns_member_diverged(fs, k, "utimens", &t->loc, r);
	}
	return rc;
}

/* Apply fn to the object t names on every member that takes changes, the
 * primary first: the primary's error is returned, another member's fails it. */
typedef int (*member_fn)(struct tfs_fs *fs, uint32_t k, int fd, const char *name, void *arg);

static int each_member(struct tfs_fs *fs, struct ns_target *t, const char *what, member_fn fn,
		       void *arg)
{
	uint32_t ord[TFS_MAX_MEMBERS], nm = tfs_members(fs, ord);

	for (uint32_t i = 0; i < nm; i++) {
		uint32_t k = ord[i];
		int r = t->fd[k] < 0 ? 0 : fn(fs, k, t->fd[k], t->name, arg);

		if (r && i == 0)
			return r;
		if (r)
			ns_member_diverged(fs, k, what, &t->loc, r);
	}
	return 0;
}

struct chown_arg {
	uid_t u;
	gid_t g;
};

static int chown_one(struct tfs_fs *fs, uint32_t k, int fd, const char *name, void *arg)
{
	struct chown_arg *a = arg;

	return OPS(fs)->fchownat(BE(fs), k, fd, name, a->u, a->g);
}

static int chmod_one(struct tfs_fs *fs, uint32_t k, int fd, const char *name, void *arg)
{
	return OPS(fs)->fchmodat(BE(fs), k, fd, name, *(mode_t *)arg & 07777);
}

int tfs_ns_setattr(struct tfs_fs *fs, struct tfs_inode *in, const struct stat *attr,
		   int to_set, struct stat *out)
{
	struct ns_target t;
	uint64_t seq = 0;
	int rc;

	rc = ns_target_open(fs, in, &t);
	if (rc)
		return rc;
	if (to_set & (TFS_SET_MODE | TFS_SET_UID | TFS_SET_GID |
		      TFS_SET_ATIME | TFS_SET_MTIME)) {
		if (t.has_loc)	/* an unlinked file has no path to repair */
			rc = ns_intent_begin(fs, (struct tfs_intent){ .op = TFS_I_ATTR }, &t.loc, NULL, NULL, &seq);
	}
	if (rc == 0 && (to_set & (TFS_SET_UID | TFS_SET_GID))) {
		uid_t u = (to_set & TFS_SET_UID) ? attr->st_uid : (uid_t)-1;
		gid_t g = (to_set & TFS_SET_GID) ? attr->st_gid : (gid_t)-1;

		rc = each_member(fs, &t, "chown", chown_one, &(struct chown_arg){ u, g });
	}
	if (rc == 0 && (to_set & TFS_SET_MODE) && !S_ISLNK(in->type)) {
		rc = each_member(fs, &t, "chmod", chmod_one, (void *)&attr->st_mode);
	}
	if (rc == 0 && (to_set & (TFS_SET_ATIME | TFS_SET_MTIME |
				  TFS_SET_ATIME_NOW | TFS_SET_MTIME_NOW))) {
		bool m = to_set & (TFS_SET_MTIME | TFS_SET_MTIME_NOW);

		times_change_begin(in, m);
		rc = set_times(fs, &t, attr, to_set);
		times_change_end(in);
	}
	if (to_set & (TFS_SET_MODE | TFS_SET_UID | TFS_SET_GID | TFS_SET_ATIME |
		      TFS_SET_MTIME | TFS_SET_ATIME_NOW | TFS_SET_MTIME_NOW))
		tfs_inode_changed(in, false);
	ns_intent_end(fs, seq);
	if (rc == 0)
		rc = target_stat(fs, in, &t, out);
	ns_target_close(fs, in, &t);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Truncate: the namespace's part                                      */
/* ------------------------------------------------------------------ */

int tfs_ns_cut_begin(struct tfs_fs *fs, struct tfs_inode *in, uint64_t len, uint64_t *seq)
{
	struct tfs_loc loc;
	int rc;

	*seq = 0;
	/* refused before the tier is told anything (identity.c invariant
	 * 1): its cut would drop the other file's extents */
	pthread_mutex_lock(&in->lock);
	rc = ns_fid_check_locked(fs, in);
	pthread_mutex_unlock(&in->lock);
	if (rc)
		return rc;
	/* the intent first, durable (as every intent's add, meta.c invariant
	 * 2) before the SSD tier drops anything: a crash (or power cut) after
	 * the drop then finds it and cuts the members too, so the members'
	 * older bytes never come back where the tier had newer ones (DESIGN
	 * 10.5) */
	if (tfs_inode_loc(fs, in, &loc) == 0) {
		rc = ns_intent_begin(fs, (struct tfs_intent){ .op = TFS_I_TRUNCATE, .arg = len, .fid = in->fid },
				     &loc, NULL, NULL, seq);
		tfs_loc_put(fs, &loc);
		if (rc)
			return rc;
	}
	/* every member file open, before the tier drops anything: a member
	 * that cannot open it fails the truncate with nothing cut */
	pthread_mutex_lock(&in->lock);
	if (rc == 0 && (rc = ns_ofile_get_locked(fs, in)) == 0 && (rc = ns_ofile_fill_locked(fs, in)))
		ns_ofile_put_locked(fs, in);
	pthread_mutex_unlock(&in->lock);
	if (rc) {
		ns_truncate_intent_end(fs, *seq);
		*seq = 0;
	} else {
		times_change_begin(in, false);	/* the cut stamps the members */
	}
	return rc;
}

void tfs_ns_cut_end(struct tfs_fs *fs, struct tfs_inode *in, uint64_t seq)
{
	ns_truncate_intent_end(fs, seq);
	if (seq)	/* the retirement is durable before the file's next fsync */
		__atomic_store_n(&in->trunc_gen, tfs_meta_gen(fs->meta), __ATOMIC_RELAXED);
	times_change_end(in);
	pthread_mutex_lock(&in->lock);
	ns_ofile_put_locked(fs, in);
	pthread_mutex_unlock(&in->lock);
}
