/* data.c - file data over the layout: read, write, sync, allocate.
 *
 * Owns: turning one logical request into member requests and running them
 * as one batch through the member seam.  Below the SSD tier: the data path
 * (src/data/dispatch.c) and the tier call it, it calls neither.
 *
 * Invariants:
 *  1. A request is split at placement boundaries (tfs_layout_extent); each
 *     piece becomes one member request per copy.  All pieces of a request go
 *     to the backend in one submit.
 *  2. Reads are clamped to the logical size; bytes past a member file's EOF
 *     but inside the logical size are holes and read as zeros.
 *  3. A write extends only the member files it lands on (layout.c,
 *     invariant 4); the logical size in the inode grows with it.
 *  4. O_DIRECT requests are staged through a per-thread 4K-aligned buffer,
 *     because libfuse hands write payloads at an unaligned address.  A
 *     member that refuses an O_DIRECT transfer (EINVAL: misaligned) gets the
 *     same request through its buffered fd.
 *  5. Failed members are never touched.  Reads go to a copy on an in-sync
 *     member; writes go to every copy on a member that takes changes.  A
 *     member error (EIO, ...) fails the member if the level survives it
 *     (health.c) and the request is redone without it; otherwise the error
 *     goes to the application.
 *  6. A full member filesystem (ENOSPC, EDQUOT) is not a member failure:
 *     the member stays and the application gets the error.  On a redundant
 *     level it must not leave copies (or data and parity) that differ, so
 *     while a member has less than SPACE_LOW free, every write first
 *     allocates the ranges it will write on it (fallocate, KEEP_SIZE: what
 *     reads see does not change) and a refusal fails the request before any
 *     member is written (tfs_space_reserve).  Free space is looked at at
 *     most once a second or every SPACE_LOW/8 bytes written to the member,
 *     and at once after a refusal.  A copy that refuses a write anyway (a
 *     filesystem without fallocate, another writer on it) gets the other
 *     copies made equal to what it holds (mirror_refused; stripe.c does
 *     the parity levels); if even that fails, the write-intent marks stay
 *     and the next mount resyncs the chunks.
 *  7. A file's member sync runs only for what changed on the members since
 *     the last one that succeeded (fs.h, chg_* and syn_*): every change is
 *     counted after it is made (a write whatever its outcome, an
 *     allocation, a cut, a grow, the size record, attributes and times),
 *     and a sync covers the count it read before it began.  An fdatasync
 *     of a file whose data and size went only to the SSD tier since then
 *     does not wait for the members at all; an fsync does once the times
 *     or attributes changed.
 *  8. Growing a file's members to a size (tfs_raid_grow: the SSD tier's
 *     flusher, a write-through size) never makes one shorter: a write that
 *     bypasses the tier may extend the same file on the members meanwhile,
 *     and nothing orders the two.  So a member found short is extended by
 *     an fallocate of its last byte, which cannot shrink it, not by
 *     ftruncate to the size seen, which cut off such a write that landed
 *     between the look and the ftruncate (test_cache.py
 *     test_the_flushers_grow_never_shrinks_a_member).  A member whose
 *     filesystem has no fallocate, or no room for that block, still gets
 *     the ftruncate, and that window.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tierfs/log.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/ns.h"
#include "tierfs/raid.h"
#include "tierfs/scratch.h"
#include "tierfs/super.h"

/* Per-thread scratch (scratch.c: kept between requests up to
 * TFS_SCRATCH_KEEP, freed at thread exit). */
void *tfs_iobuf(size_t len)
{
	return tfs_scratch(TFS_SCR_IO, len);
}

static struct tfs_mio *mio_array(unsigned n)
{
	return tfs_scratch_array(TFS_SCR_MIO, n, sizeof(struct tfs_mio));
}

/* ------------------------------------------------------------------ */
/* Free space (invariant 6)                                            */
/* ------------------------------------------------------------------ */

#define SPACE_LOW        (256ull << 20)	/* free bytes below which writes reserve */
#define SPACE_RECHECK_NS 1000000000ull

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Is member k short of space, len bytes about to be written to it?  One
 * caller at a time looks again (statvfs) when the last look is a second
 * old or SPACE_LOW/8 bytes were written since. */
static bool space_low(struct tfs_fs *fs, uint32_t k, uint64_t len)
{
	struct tfs_space *sp = &fs->space[k];
	uint64_t w = __atomic_add_fetch(&sp->written, len, __ATOMIC_RELAXED);
	uint64_t last = __atomic_load_n(&sp->checked_ns, __ATOMIC_RELAXED), now = now_ns();
	struct statvfs sv;

	if ((now - last >= SPACE_RECHECK_NS || w >= SPACE_LOW / 8) &&
	    __atomic_compare_exchange_n(&sp->checked_ns, &last, now, false, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED)) {
		__atomic_store_n(&sp->written, 0, __ATOMIC_RELAXED);
		if (OPS(fs)->statvfs(BE(fs), k, &sv) == 0)
			__atomic_store_n(&sp->low, (uint64_t)sv.f_bavail * sv.f_frsize < SPACE_LOW,
					 __ATOMIC_RELAXED);
	}
	return __atomic_load_n(&sp->low, __ATOMIC_RELAXED);
}

void tfs_space_refused(struct tfs_fs *fs, uint32_t k)
{
	__atomic_store_n(&fs->space[k].low, true, __ATOMIC_RELAXED);
	__atomic_store_n(&fs->space[k].checked_ns, now_ns(), __ATOMIC_RELAXED);
}

/* fallocate(2) of member k's fd; -EOPNOTSUPP at once once its filesystem
 * said it has none (noted, and said, the first time: invariants 6, 8). */
static int member_fallocate(struct tfs_fs *fs, uint32_t k, int fd, int mode, uint64_t off,
			    uint64_t len)
{
	int rc;

	if (__atomic_load_n(&fs->space[k].nofalloc, __ATOMIC_RELAXED))
		return -EOPNOTSUPP;
	rc = OPS(fs)->fallocate(BE(fs), k, fd, mode, off, len);
	if (rc == -EOPNOTSUPP && !__atomic_exchange_n(&fs->space[k].nofalloc, true,
						     __ATOMIC_RELAXED))
		tfs_warn("member %u (%s): its filesystem has no fallocate: a write it refuses "
			 "for want of space is undone on the other members afterwards, and a "
			 "file grown there is set to its size with ftruncate", k,
			 fs->array->path[k]);
	return rc;
}

int tfs_space_reserve(struct tfs_fs *fs, const struct tfs_mio *v, unsigned n)
{
	if (!fs->stripes)
		return 0;	/* no redundancy to keep in step */
	for (unsigned i = 0; i < n; i++) {
		uint32_t k = v[i].member;
		int rc;

		if (v[i].op != TFS_MIO_WRITE || !space_low(fs, k, v[i].len))
			continue;
		rc = member_fallocate(fs, k, v[i].fd, FALLOC_FL_KEEP_SIZE, v[i].off, v[i].len);
		if (rc == -EOPNOTSUPP)
			continue;
		/* a member error fails the member when the write meets it */
		if (rc && !tfs_member_error(rc))
			return rc;
	}
	return 0;
}

/* Snapshot what a data request needs from the inode: one lock round trip
 * once the identity and size are known (the caller holds a handle). */
static int file_state(struct tfs_fs *fs, struct tfs_inode *in, uint32_t *rot, uint64_t *size)
{
	for (int tries = 0;; tries++) {
		bool known;
		int rc;

		pthread_mutex_lock(&in->lock);
		known = in->fid_valid && in->size_valid;
		*rot = in->rot;
		*size = in->size;
		pthread_mutex_unlock(&in->lock);
		if (known)
			return 0;
		if (tries)
			return -EIO;	/* not a regular file on member 0 any more */
		rc = tfs_ns_load_file(fs, in);
		if (rc)
			return rc;
	}
}

static unsigned pieces(const struct tfs_layout *l, uint64_t off, uint64_t len)
{
	if (l->level == TFS_JBOD || l->level == TFS_RAID1)
		return 1;
	return (unsigned)((off % l->chunk + len + l->chunk - 1) / l->chunk);
}

/* Retry, through the buffered fd, each request O_DIRECT refused.  Rare
 * (misaligned I/O), so one at a time. */
static int redo_buffered(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_mio *v, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (v[i].res == -EINVAL) {
			int rc;

			v[i].fd = tfs_ns_member_fd(fs, in, v[i].member, false);
			if (v[i].fd < 0)
				return v[i].fd;
			rc = OPS(fs)->submit(BE(fs), &v[i], 1);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Submit a batch; returns the first error of the batch or of any request.
 * A member error that fails its member returns -EAGAIN: redo the request
 * (the member is out now). */
/* The result of v[0..n), submitted: the first error, or -EAGAIN if a
 * member error failed its member (redo the requests: the member is out
 * now). */
static int batch_result(struct tfs_fs *fs, const struct tfs_mio *v, unsigned n)
{
	bool redo = false;

	for (unsigned i = 0; i < n; i++) {
		if (v[i].res >= 0)
			continue;
		if (tfs_member_error((int)v[i].res) &&
		    tfs_member_fail(fs, v[i].member, (int)v[i].res,
				    v[i].op == TFS_MIO_READ ? "read" : "write"))
			redo = true;
		else
			return (int)v[i].res;
	}
	return redo ? -EAGAIN : 0;
}

static int run_batch(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_mio *v, unsigned n,
		     bool direct)
{
	int rc = OPS(fs)->submit(BE(fs), v, n);

	if (rc == 0 && direct)
		rc = redo_buffered(fs, in, v, n);
	return rc ? rc : batch_result(fs, v, n);
}

/* Copy of logical chunk chunk_no to read, on a member in sync: the one
 * with the fewest reads in flight (md's read balancing, by queue length),
 * on a tie the next in turn chunk by chunk; -1 if no copy is in sync.  The
 * chosen member's count is raised; read_done() lowers it. */
static int read_copy(struct tfs_fs *fs, uint32_t rot, uint64_t off, uint64_t chunk_no,
		     uint32_t copies, struct tfs_place *p)
{
	uint32_t best = UINT32_MAX, load = UINT32_MAX;

	for (uint32_t i = 0; i < copies; i++) {
		struct tfs_place q;
		uint32_t busy;

		tfs_layout_map(&fs->layout, rot, off, (uint32_t)((chunk_no + rot + i) % copies), &q);
		if (!tfs_m_readable(fs, q.member))
			continue;
		busy = __atomic_load_n(&fs->reading[q.member], __ATOMIC_RELAXED);
		if (busy < load) {
			best = i;
			load = busy;
			*p = q;
		}
	}
	if (best == UINT32_MAX)
		return -1;
	if (copies > 1)
		__atomic_add_fetch(&fs->reading[p->member], 1, __ATOMIC_RELAXED);
	return 0;
}

static void read_done(struct tfs_fs *fs, const struct tfs_mio *v, unsigned n, uint32_t copies)
{
	for (unsigned i = 0; copies > 1 && i < n; i++)
		__atomic_sub_fetch(&fs->reading[v[i].member], 1, __ATOMIC_RELAXED);
}

ssize_t tfs_raid_read(struct tfs_fs *fs, struct tfs_inode *in, bool direct, void *buf,
		      size_t len, uint64_t off)
{
	const struct tfs_layout *l = &fs->layout;
	struct tfs_mio *v;
	uint64_t size, pos, end;
	uint32_t rot, copies = tfs_layout_copies(l);
	unsigned n = 0;
	int rc = file_state(fs, in, &rot, &size);

	if (rc)
		return rc;
	if (tfs_layout_nparity(l))
		return tfs_stripe_read(fs, in, rot, size, direct, buf, len, off);
	if (off >= size || len == 0)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	end = off + len;
again:
	n = 0;
	v = mio_array(pieces(l, off, len));
	if (!v)
		return -ENOMEM;
	for (pos = off; pos < end; n++) {
		uint64_t ext = tfs_layout_extent(l, pos), chunk_no = pos / l->chunk;
		struct tfs_place p;

		if (ext > end - pos)
			ext = end - pos;
		if (read_copy(fs, rot, pos, chunk_no, copies, &p)) {
			read_done(fs, v, n, copies);
			return -EIO;	/* every copy is on a failed member */
		}
		v[n] = (struct tfs_mio){
			.member = p.member, .op = TFS_MIO_READ,
			.fd = tfs_ns_member_fd(fs, in, p.member, direct),
			.buf = (char *)buf + (pos - off), .len = (uint32_t)ext, .off = p.moff,
		};
		if (v[n].fd < 0) {
			read_done(fs, v, n + 1, copies);
			return v[n].fd;
		}
		pos += ext;
	}
	rc = run_batch(fs, in, v, n, direct);
	read_done(fs, v, n, copies);
	if (rc == -EAGAIN)
		goto again;
	if (rc)
		return rc;
	/* holes: zero what the members did not have */
	for (unsigned i = 0; i < n; i++) {
		if ((uint64_t)v[i].res < v[i].len)
			memset((char *)v[i].buf + v[i].res, 0, v[i].len - (size_t)v[i].res);
	}
	return (ssize_t)len;
}

static int mirror_write(struct tfs_fs *fs, struct tfs_inode *in, uint32_t rot, bool direct,
			const void *buf, size_t len, uint64_t off);

ssize_t tfs_raid_write(struct tfs_fs *fs, struct tfs_inode *in, bool direct, const void *buf,
		       size_t len, uint64_t off)
{
	const struct tfs_layout *l = &fs->layout;
	uint64_t size, end = off + len;
	uint32_t rot;
	int rc = file_state(fs, in, &rot, &size);

	if (rc)
		return rc;
	if (len == 0)
		return 0;
	if (end < off)
		return -EFBIG;
	if (direct) {
		/* libfuse hands the payload at an unaligned address: stage it,
		 * or O_DIRECT refuses it and every write is redone buffered */
		char *b = tfs_iobuf(len);

		if (!b)
			return -ENOMEM;
		memcpy(b, buf, len);
		buf = b;
	}
	pthread_rwlock_rdlock(&fs->io_gate);
	if (tfs_layout_nparity(l)) {
		ssize_t r = tfs_stripe_write(fs, in, rot, size, direct, buf, len, off);

		pthread_rwlock_unlock(&fs->io_gate);
		tfs_inode_changed(in, true);	/* invariant 7 */
		return r;
	}
	rc = mirror_write(fs, in, rot, direct, buf, len, off);
	tfs_inode_changed(in, true);
	/* the size grows inside the gate: a rebuild's write barrier must see
	 * it, or it copies a file planned without the member only up to the
	 * old end, and the member never gets the rest */
	if (rc == 0)
		tfs_size_grow(in, end);
	pthread_rwlock_unlock(&fs->io_gate);
	return rc ? rc : (ssize_t)len;
}

/* Pieces of a mirror write: the copies of one piece are next to each
 * other in v and share its source bytes. */
static unsigned piece_end(const struct tfs_mio *v, unsigned i, unsigned n)
{
	unsigned j = i + 1;

	while (j < n && v[j].buf == v[i].buf && v[j].len == v[i].len)
		j++;
	return j;
}

/* Make the copies v[i..j) of one piece equal to copy ref: read them all,
 * write ref's bytes over every other copy that differs. */
static int piece_equalize(struct tfs_fs *fs, struct tfs_inode *in, const struct tfs_mio *v,
			  unsigned i, unsigned j, unsigned ref)
{
	struct tfs_mio rd[TFS_MAX_MEMBERS], wr[TFS_MAX_MEMBERS];
	size_t len = v[i].len;
	unsigned nr = 0, nw = 0;
	char *mem, *want;
	int rc = 0;

	if (!tfs_m_writable(fs, v[ref].member))
		return -EIO;	/* failed meanwhile: nothing to copy */
	if (j - i > TFS_MAX_MEMBERS || posix_memalign((void **)&mem, 4096, len * (j - i)))
		return -ENOMEM;
	want = mem + (size_t)(ref - i) * len;
	for (unsigned c = i; c < j && rc == 0; c++) {
		if (!tfs_m_writable(fs, v[c].member))
			continue;	/* failed meanwhile */
		/* buffered fds: any alignment */
		rd[nr] = (struct tfs_mio){ .member = v[c].member, .op = TFS_MIO_READ,
					   .fd = tfs_ns_member_fd(fs, in, v[c].member, false),
					   .buf = mem + (size_t)(c - i) * len, .len = (uint32_t)len,
					   .off = v[c].off };
		rc = rd[nr++].fd < 0 ? rd[nr - 1].fd : 0;
	}
	if (rc == 0)
		rc = run_batch(fs, in, rd, nr, false);
	for (unsigned c = 0; c < nr && rc == 0; c++)	/* past the file's end: zeros */
		if ((size_t)rd[c].res < len)
			memset((char *)rd[c].buf + rd[c].res, 0, len - (size_t)rd[c].res);
	for (unsigned c = 0; c < nr && rc == 0; c++) {
		if (rd[c].buf != want && memcmp(rd[c].buf, want, len) != 0) {
			wr[nw] = rd[c];
			wr[nw].op = TFS_MIO_WRITE;
			wr[nw++].buf = want;
		}
	}
	if (rc == 0 && nw)
		rc = run_batch(fs, in, wr, nw, false);
	free(mem);
	return rc;
}

/* Some copies of a mirror write were refused (ENOSPC ...), others may
 * have taken it (invariant 6): per piece, make the copies equal to what a
 * refusing copy holds, which needs no new space on the others (they took
 * the write: its blocks are theirs).  Row locks and marks are held.
 * Returns 0, or -errno if some piece could not be made equal. */
static int mirror_refused(struct tfs_fs *fs, struct tfs_inode *in, const struct tfs_mio *v,
			  unsigned n)
{
	int rc = 0;

	for (unsigned i = 0, j; i < n; i = j) {
		unsigned ref = UINT_MAX;
		bool took = false;

		j = piece_end(v, i, n);
		for (unsigned c = i; c < j; c++) {
			if (v[c].res == v[c].len)
				took = true;
			else if (v[c].res < 0 && tfs_member_error((int)v[c].res))
				tfs_member_fail(fs, v[c].member, (int)v[c].res, "write");
			else if (ref == UINT_MAX)
				ref = c;
			if (v[c].res < 0 && tfs_space_error((int)v[c].res))
				tfs_space_refused(fs, v[c].member);
		}
		if (ref != UINT_MAX && (took || j - i > 1)) {
			int r = piece_equalize(fs, in, v, i, j, ref);

			if (r && !rc)
				rc = r;
		}
	}
	return rc;
}

/* Write every copy of [off, off+len) that a member takes. */
static int mirror_write(struct tfs_fs *fs, struct tfs_inode *in, uint32_t rot, bool direct,
			const void *buf, size_t len, uint64_t off)
{
	const struct tfs_layout *l = &fs->layout;
	struct tfs_mio *v;
	uint64_t pos, end = off + len;
	uint32_t copies = tfs_layout_copies(l);
	unsigned n = 0, held[TFS_ROW_LOCKS], nheld = 0;
	const char *src = buf;
	int rc;

	v = mio_array(pieces(l, off, len) * copies);
	if (!v)
		return -ENOMEM;
	/* rebuild and scrub must not copy a chunk while it is being written;
	 * a crash between the copies leaves them different: mark it first */
	if (fs->stripes) {
		nheld = tfs_rows_lock(fs, in->fid, off / l->chunk, (end - 1) / l->chunk, held);
		rc = tfs_marks_get(fs, in->fid, off / l->chunk, (end - 1) / l->chunk);
		if (rc) {
			tfs_rows_unlock(fs, held, nheld);
			return rc;
		}
	}
again:
	n = 0;
	for (pos = off; pos < end;) {
		uint64_t ext = tfs_layout_extent(l, pos);
		unsigned first = n;

		if (ext > end - pos)
			ext = end - pos;
		for (uint32_t c = 0; c < copies; c++) {
			struct tfs_place p;

			tfs_layout_map(l, rot, pos, c, &p);
			if (!tfs_m_writable(fs, p.member))
				continue;
			v[n++] = (struct tfs_mio){
				.member = p.member, .op = TFS_MIO_WRITE,
				.fd = tfs_ns_member_fd(fs, in, p.member, direct),
				.buf = (void *)(src + (pos - off)), .len = (uint32_t)ext,
				.off = p.moff,
			};
			if (v[n - 1].fd == -ENOENT && tfs_mstate(fs, p.member) == TFS_M_REBUILD)
				n--;	/* unlinked before the member joined: not on it */
			else if (v[n - 1].fd < 0) {
				rc = v[n - 1].fd;
				goto out;
			}
		}
		if (n == first) {
			rc = -EIO;	/* every copy is on a failed member */
			goto out;
		}
		pos += ext;
	}
	rc = tfs_space_reserve(fs, v, n);
	if (rc == 0)
		rc = run_batch(fs, in, v, n, direct);
	if (rc == -EAGAIN)
		goto again;
	if (rc && nheld && mirror_refused(fs, in, v, n)) {
		tfs_err("file %" PRIu64 ": a write refused by a member (%s) left copies of "
			"[%" PRIu64 ", %" PRIu64 ") that differ and cannot be made equal: "
			"the next mount resyncs them", in->fid, strerror(-rc), off, end);
		tfs_marks_keep(fs, in->fid, off / l->chunk, (end - 1) / l->chunk);
	}
out:
	if (nheld) {
		tfs_marks_put(fs, in->fid, off / l->chunk, (end - 1) / l->chunk);
		tfs_rows_unlock(fs, held, nheld);
	}
	return rc;
}

/* *at = max(*at, v): what a sync covered (invariant 7). */
static void covered(uint64_t *at, uint64_t v)
{
	uint64_t cur = __atomic_load_n(at, __ATOMIC_RELAXED);

	while (cur < v && !__atomic_compare_exchange_n(at, &cur, v, false, __ATOMIC_RELEASE,
						       __ATOMIC_RELAXED))
		;
}

int tfs_raid_syncs(struct tfs_fs *fs, char *buf, size_t len)
{
	return snprintf(buf, len, "raid.file_syncs=%" PRIu64 "\nraid.file_syncs_skipped=%" PRIu64
			"\n", __atomic_load_n(&fs->file_syncs, __ATOMIC_RELAXED),
			__atomic_load_n(&fs->file_syncs_skipped, __ATOMIC_RELAXED));
}

bool tfs_raid_fsync_due(struct tfs_inode *in, bool datasync)
{
	return __atomic_load_n(&in->chg_data, __ATOMIC_ACQUIRE) !=
	       __atomic_load_n(&in->syn_data, __ATOMIC_ACQUIRE) ||
	       (!datasync && __atomic_load_n(&in->chg_all, __ATOMIC_ACQUIRE) !=
			     __atomic_load_n(&in->syn_all, __ATOMIC_ACQUIRE));
}

/* What a sync of in covers (invariant 7), read before it begins, in *d and
 * *a; its size record saved.  1: the members must sync, 0: nothing they
 * hold changed since the last one, or -errno. */
static int fsync_prep(struct tfs_fs *fs, struct tfs_inode *in, bool datasync, uint64_t *d,
		      uint64_t *a)
{
	uint64_t size;
	uint32_t rot;
	int rc = file_state(fs, in, &rot, &size);

	if (rc)
		return rc;
	/* a size only the tier's writes grew is the tier's to make durable
	 * (its size record), and the flusher's to carry to the members */
	if (!tfs_raid_fsync_due(in, datasync)) {
		__atomic_add_fetch(&fs->file_syncs_skipped, 1, __ATOMIC_RELAXED);
		return 0;
	}
	__atomic_add_fetch(&fs->file_syncs, 1, __ATOMIC_RELAXED);
	rc = tfs_ns_fill(fs, in);	/* every member may hold dirty data */
	if (rc == 0)
		rc = tfs_ns_save_size(fs, in, false);
	if (rc)
		return rc;
	/* the size record, when it changed, counts: it is synced here too */
	*d = __atomic_load_n(&in->chg_data, __ATOMIC_ACQUIRE);
	*a = __atomic_load_n(&in->chg_all, __ATOMIC_ACQUIRE);
	return 1;
}

void tfs_raid_fsync_many(struct tfs_fs *fs, struct tfs_inode *const *ins, unsigned n,
			 bool datasync, int *rcs)
{
	struct tfs_mio v[TFS_SYNC_MANY * TFS_MAX_MEMBERS];
	uint64_t d[TFS_SYNC_MANY], a[TFS_SYNC_MANY];
	unsigned first[TFS_SYNC_MANY + 1], left = 0;

	for (unsigned i = 0; i < n; i++)
		left += (rcs[i] = fsync_prep(fs, ins[i], datasync, &d[i], &a[i])) == 1;
	/* the members' syncs of every file in one batch; a file whose member
	 * failed in it is synced again without that member */
	while (left) {
		unsigned m = 0;
		int rc;

		for (unsigned i = 0; i < n; i++) {
			first[i] = m;
			if (rcs[i] != 1)
				continue;
			for (uint32_t k = 0; k < fs->n; k++)	/* in->of: pinned by the handle */
				if (tfs_m_writable(fs, k) && ins[i]->of->fd[k] >= 0)
					v[m++] = (struct tfs_mio){
						.member = k, .fd = ins[i]->of->fd[k],
						.op = datasync ? TFS_MIO_FDATASYNC : TFS_MIO_FSYNC };
		}
		first[n] = m;
		rc = OPS(fs)->submit(BE(fs), v, m);
		for (unsigned i = 0; i < n; i++) {
			int r;

			if (rcs[i] != 1)
				continue;
			r = rc ? rc : batch_result(fs, v + first[i], first[i + 1] - first[i]);
			if (r == -EAGAIN)
				continue;
			left--;
			rcs[i] = r;
			if (r == 0) {
				covered(&ins[i]->syn_data, d[i]);
				if (!datasync)
					covered(&ins[i]->syn_all, a[i]);
			}
		}
	}
}

int tfs_raid_fsync(struct tfs_fs *fs, struct tfs_inode *in, bool datasync)
{
	int rc;

	tfs_raid_fsync_many(fs, &in, 1, datasync, &rc);
	return rc;
}

/* Member k's file (fd) at least share bytes long, never shorter
 * (invariant 8): fallocate of its last byte, which only extends; where the
 * member's filesystem has no fallocate or no room for that block,
 * ftruncate.  Returns 0 or -errno. */
static int grow_share(struct tfs_fs *fs, uint32_t k, int fd, uint64_t share)
{
	int rc = member_fallocate(fs, k, fd, 0, share - 1, 1);

	if (rc == -EOPNOTSUPP || rc == -ENOSPC || rc == -EDQUOT)
		rc = OPS(fs)->ftruncate(BE(fs), k, fd, share);
	return rc;
}

/* Set every member file of an open file (in->of pinned by the caller) that
 * takes changes to its share of logical size size; grow: only those
 * shorter, and only longer (invariant 8).  A member other than the primary
 * whose object is damaged is skipped (health.c invariant 5).  Returns how
 * many changed, or -errno. */
static int set_shares(struct tfs_fs *fs, struct tfs_inode *in, uint64_t size, bool grow)
{
	int rc = 0, changed = 0;

	for (uint32_t k = 0; k < fs->n && rc == 0; k++) {
		uint64_t share = tfs_layout_share(&fs->layout, in->rot, k, size);
		int fd = in->of->fd[k];
		struct stat st;

		if (!tfs_m_writable(fs, k) || fd < 0)
			continue;
		rc = grow ? OPS(fs)->fstat(BE(fs), k, fd, &st) : 0;
		if (rc == 0 && (!grow || (uint64_t)st.st_size < share)) {
			rc = grow ? grow_share(fs, k, fd, share) : OPS(fs)->ftruncate(BE(fs), k, fd, share);
			changed++;
		}
		if (rc && k != tfs_primary(fs) &&
		    tfs_member_diverged(fs, k, &rc, grow ? "grow" : "truncate"))
			rc = 0;
	}
	return rc ? rc : changed;
}

int tfs_raid_grow(struct tfs_fs *fs, struct tfs_inode *in, uint64_t size)
{
	int rc = tfs_ns_fill(fs, in), grown = rc ? rc : set_shares(fs, in, size, true);

	if (grown)
		tfs_inode_changed(in, true);	/* invariant 7 */
	if (grown > 0 && (rc = tfs_ns_save_size(fs, in, false)))
		return rc;
	return grown;
}

int tfs_raid_truncate(struct tfs_fs *fs, struct tfs_inode *in, uint64_t len, bool durable)
{
	unsigned held[TFS_ROW_LOCKS], nheld = 0;
	int rc = 0;

	if (fs->stripes) {
		/* the rows between the old and the new end: a rebuild or scrub
		 * must not copy them while they change (row locks come before
		 * in->lock; the kernel keeps writes out during a truncate) */
		uint64_t rb = tfs_row_bytes(fs), old;

		pthread_mutex_lock(&in->lock);
		old = in->size;
		pthread_mutex_unlock(&in->lock);
		nheld = tfs_rows_lock(fs, in->fid, (len < old ? len : old) / rb,
				      (len < old ? old : len) / rb, held);
	}
	pthread_mutex_lock(&in->lock);
	/* parity levels: the bytes cut from the new last row are zeroed
	 * first, so its parity stays right (what is cut is then a hole) */
	if (tfs_layout_nparity(&fs->layout) && len < in->size) {
		uint64_t rowbytes = tfs_row_bytes(fs);
		uint64_t end = (len / rowbytes + 1) * rowbytes;

		if (len % rowbytes)
			rc = tfs_stripe_zero(fs, in, true, len,
					     (end < in->size ? end : in->size) - len);
	}
	if (rc == 0 && (rc = set_shares(fs, in, len, false)) > 0)
		rc = 0;
	if (rc == 0)
		in->size = len;
	pthread_mutex_unlock(&in->lock);
	tfs_inode_changed(in, true);	/* invariant 7 */
	if (rc == 0)
		tfs_ns_save_size_logged(fs, in, "truncate");
	/* the members' cut is durable before the caller retires its intent:
	 * with the intent gone, a power cut could keep the cut on some members
	 * and lose it on others (a size nobody wrote: the exploration on RAID5
	 * x3), and the tier's drop may already be durable (any durability
	 * point commits it) */
	if (rc == 0 && durable)
		rc = tfs_raid_fsync(fs, in, true);
	if (nheld)
		tfs_rows_unlock(fs, held, nheld);
	return rc;
}

/* The RAID part of fallocate (mode checked by tfs_data_fallocate). */
static int raid_fallocate_gated(struct tfs_fs *fs, struct tfs_inode *in, int mode, uint64_t off,
				uint64_t len)
{
	uint64_t size, end = off + len;
	uint32_t rot;
	int rc;

	rc = file_state(fs, in, &rot, &size);
	if (rc)
		return rc;
	if (tfs_layout_nparity(&fs->layout) && (mode & (FALLOC_FL_PUNCH_HOLE |
							 FALLOC_FL_ZERO_RANGE))) {
		/* parity levels: zeros written, so the parity follows */
		if (mode & FALLOC_FL_KEEP_SIZE)
			end = end < size ? end : size;
		rc = end > off ? tfs_stripe_zero(fs, in, false, off, end - off) : 0;
		if (rc == 0 && !(mode & FALLOC_FL_KEEP_SIZE)) {
			tfs_size_grow(in, end);
		}
		return rc;
	}
	/* layout.c invariant 3: member k's part of [off, end) is one range */
	for (uint32_t k = 0; k < fs->n && rc == 0; k++) {
		uint64_t a = tfs_layout_share(&fs->layout, rot, k, off);
		uint64_t b = tfs_layout_share(&fs->layout, rot, k, end);

		if (b > a && tfs_m_writable(fs, k)) {
			int fd = tfs_ns_member_fd(fs, in, k, false);

			rc = fd < 0 ? fd : OPS(fs)->fallocate(BE(fs), k, fd, mode, a, b - a);
		}
	}
	if (rc == 0 && !(mode & FALLOC_FL_KEEP_SIZE)) {
		tfs_size_grow(in, end);
	}
	return rc;
}

/* raid_fallocate_gated under io_gate, as a write: the size it grows must
 * be seen by a rebuild's write barrier (fs.h), or the joining member's
 * file may end short. */
int tfs_raid_fallocate(struct tfs_fs *fs, struct tfs_inode *in, int mode, uint64_t off,
		       uint64_t len)
{
	int rc;

	pthread_rwlock_rdlock(&fs->io_gate);
	rc = raid_fallocate_gated(fs, in, mode, off, len);
	pthread_rwlock_unlock(&fs->io_gate);
	tfs_inode_changed(in, true);	/* invariant 7 */
	return rc;
}


/* ------------------------------------------------------------------ */
/* Maintenance on the mirror levels                                    */
/* ------------------------------------------------------------------ */

/* The copy most readable copies agree with (the first on a tie); *split:
 * the copies disagree and no copy has a strict majority. */
static uint32_t majority(char **buf, const uint32_t *have, uint32_t nh, size_t len, bool *split)
{
	uint32_t best = 0, bestv = 0;

	for (uint32_t i = 0; i < nh; i++) {
		uint32_t votes = 0;

		for (uint32_t j = 0; j < nh; j++)
			votes += memcmp(buf[have[i]], buf[have[j]], len) == 0;
		if (votes > bestv) {
			best = i;
			bestv = votes;
		}
	}
	*split = bestv < nh && 2 * bestv <= nh;
	return have[best];
}

int tfs_data_maint(struct tfs_fs *fs, struct tfs_inode *in, uint64_t off, uint64_t len,
		   enum tfs_stripe_op op, tfs_stripe_report_fn report, void *arg)
{
	const struct tfs_layout *l = &fs->layout;
	uint32_t copies = tfs_layout_copies(l), rot = in->rot, nsplit = 0;
	uint64_t end = off + len, split_at = 0;
	int rc = 0;

	for (uint64_t pos = off; pos < end && rc == 0;) {
		uint64_t ext = l->chunk - pos % l->chunk;
		struct tfs_place p[TFS_MAX_MEMBERS];
		struct tfs_mio v[TFS_MAX_MEMBERS];
		char *buf[TFS_MAX_MEMBERS];
		uint32_t have[TFS_MAX_MEMBERS], nh = 0, good;
		unsigned held[TFS_ROW_LOCKS], nheld, n = 0;
		char *mem;

		if (ext > end - pos)
			ext = end - pos;
		nheld = tfs_rows_lock(fs, in->fid, pos / l->chunk, pos / l->chunk, held);
		/* the size now: a truncate may have run since the caller looked */
		pthread_mutex_lock(&in->lock);
		if (in->size <= pos)
			ext = 0;
		else if (ext > in->size - pos)
			ext = in->size - pos;
		pthread_mutex_unlock(&in->lock);
		mem = ext ? tfs_iobuf(ext * copies) : NULL;
		if (!mem) {
			tfs_rows_unlock(fs, held, nheld);
			if (ext)
				return -ENOMEM;
			break;
		}
		for (uint32_t c = 0; c < copies && rc == 0; c++) {
			tfs_layout_map(l, rot, pos, c, &p[c]);
			buf[c] = mem + c * ext;
			memset(buf[c], 0, ext);
			if (!tfs_m_readable(fs, p[c].member))
				continue;
			have[nh++] = c;
			v[n] = (struct tfs_mio){ .member = p[c].member, .op = TFS_MIO_READ,
						 .fd = tfs_ns_member_fd(fs, in, p[c].member, false),
						 .buf = buf[c], .len = (uint32_t)ext, .off = p[c].moff };
			rc = v[n].fd < 0 ? v[n].fd : 0;
			n++;
		}
		if (rc == 0 && nh == 0)
			rc = -EIO;
		if (rc == 0)
			rc = run_batch(fs, in, v, n, false);
		for (unsigned i = 0; i < n && rc == 0; i++)	/* holes read as zeros */
			if ((uint64_t)v[i].res < v[i].len)
				memset((char *)v[i].buf + v[i].res, 0, v[i].len - (size_t)v[i].res);
		if (rc == 0) {
			bool split;

			good = majority(buf, have, nh, ext, &split);
			if (split && (op == TFS_STRIPE_REBUILD || op == TFS_STRIPE_REPAIR) &&
			    nsplit++ == 0)
				split_at = pos;
		} else {
			good = 0;
		}
		n = 0;
		for (uint32_t c = 0; c < copies && rc == 0; c++) {
			bool readable = tfs_m_readable(fs, p[c].member), write;

			if (op == TFS_STRIPE_REBUILD) {
				/* holes stay holes, but the file's end is written */
				write = !readable && tfs_m_writable(fs, p[c].member) &&
					(pos + ext == in->size || !tfs_all_zero(buf[good], ext));
			} else {
				write = readable && memcmp(buf[c], buf[good], ext) != 0;
				if (write && report)
					report(arg, in->fid, pos, nh > 2 ? (int)p[c].member : -1);
				write = write && op == TFS_STRIPE_REPAIR;
			}
			if (!write)
				continue;
			v[n] = (struct tfs_mio){ .member = p[c].member, .op = TFS_MIO_WRITE,
						 .fd = tfs_ns_member_fd(fs, in, p[c].member, false),
						 .buf = buf[good], .len = (uint32_t)ext,
						 .off = p[c].moff };
			rc = v[n].fd < 0 ? v[n].fd : 0;
			n++;
		}
		if (rc == 0 && n)
			rc = run_batch(fs, in, v, n, false);
		tfs_rows_unlock(fs, held, nheld);
		pos += ext;
	}
	if (nsplit)	/* nothing says which copy is right: say so */
		tfs_warn("%s: file %" PRIu64 ": the readable copies disagree with no majority "
			 "in %u chunk(s) from offset %" PRIu64 "; the first copy was taken",
			 op == TFS_STRIPE_REBUILD ? "rebuild" : "repair", in->fid, nsplit,
			 split_at);
	return rc == -EAGAIN ? -EIO : rc;
}
