/* fault.c - fault injection at the member seam.
 *
 * Owns: a wrapper backend that forwards every call to its inner backend and
 * can, per its spec, fail calls, kill members, or kill the daemon at a
 * chosen point (optionally undoing what a power cut would have lost).
 * Tests use it to prove error handling and crash recovery; it is off unless
 * TIERFS_FAULT is set.
 *
 * Spec (comma separated; OP is a member call: openat, mkdirat, renameat2,
 * unlinkat, ftruncate, ... or a data request: read, write, fsync, fdatasync):
 *   crash_after=OP:N   after the N-th successful OP (any member) the daemon
 *                      SIGKILLs itself, as a crash of the process would.
 *   drop_unsynced      with crash_after: a power cut.  Before the kill, every
 *                      data write, ftruncate and fallocate that no fsync or
 *                      fdatasync of the same member file (or syncfs of its
 *                      member) followed is undone.
 *   eio_member=M       member M is dead from the start: every call fails.
 *   fail_after=OP:N:M  after the N-th successful OP (any member), member M
 *                      dies: every later call on it fails with EIO, and so
 *                      does every call on it that completes later (queued
 *                      or in flight when it died).
 *   eio_read=M[:P]     data reads on member M fail with EIO, each with
 *   eio_write=M[:P]    probability P (0 < P <= 1, default 1); failed
 *                      requests are not performed.
 *   eio_at=OP:NAME[:K] member calls OP naming NAME (its last component; on
 *                      any member) fail with EIO without being performed:
 *                      the first K of them, then they work again (a
 *                      transient error); without K, every one.
 *   delay=OP:MS        every OP call (a data request: once per batch that
 *                      has one) sleeps MS milliseconds before it is
 *                      performed, to widen a race in a test.
 *   seed=N             seed of the PRNG behind P (default fixed).
 *   torn               the requests of a batch go to the member one at a
 *                      time, each counted as it completes, so crash_after
 *                      can land between the data and parity writes of one
 *                      stripe (the RAID write hole).
 *
 * Invariants:
 *  1. Only successful calls count towards N; the N-th call itself succeeds.
 *  2. The PRNG is one counter-based sequence (splitmix64): the same seed and
 *     the same order of requests give the same failures.
 *  3. Undo log (drop_unsynced): a file (st_dev, st_ino: one file may have
 *     several fds, e.g. an O_DIRECT twin) keeps its records newest first;
 *     each record holds what one operation changed (the old bytes of the
 *     range, data extents only, and the old size), read under the log lock
 *     before the operation is forwarded.  Applied newest first, the records
 *     restore each byte to its value before the oldest unsynced change.
 *  4. No write, ftruncate or fallocate runs while the log is applied: each
 *     holds the gate (undo_enter/undo_leave) from its pre-image to its
 *     completion; the crash closes the gate, waits for those inside, undoes
 *     and kills.  Nothing that holds the gate can trigger the crash.
 *  5. The log is bounded (UNDO_CAP_BYTES of old data, UNDO_CAP_FILES open
 *     files); past the cap it logs an error and records nothing more, so the
 *     crash keeps what it could not undo.
 *
 * Every injected fault is logged as a warning (EIO injections: the first
 * ten, then at each power of two).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tierfs/layout.h"
#include "tierfs/log.h"
#include "tierfs/member.h"

#define UNDO_CAP_BYTES	(256ull << 20)
#define UNDO_CAP_FILES	1024

_Static_assert(TFS_MAX_MEMBERS <= 64, "dead members are a 64-bit mask");

struct undo_seg {
	uint64_t off, len;
	unsigned char *data;
};

struct undo_rec {
	struct undo_rec *older;
	uint64_t off, end;		/* the changed range, clipped to old_size */
	uint64_t old_size;
	unsigned nseg;			/* the range's data extents, saved */
	struct undo_seg seg[];
};

struct undo_file {
	struct undo_file *next;
	dev_t dev;
	ino_t ino;
	uint32_t member;
	int fd;				/* our own buffered fd of the file */
	struct undo_rec *newest;
};

struct undo_log {
	pthread_mutex_t lock;
	pthread_cond_t idle;		/* inflight dropped to 0, or never again */
	unsigned inflight;
	bool crashing, overflow;
	uint64_t bytes;
	unsigned nfiles;
	struct undo_file *files;
};

struct fault {
	char crash_op[32];
	long crash_n;
	atomic_long crash_seen;
	char fail_op[32];
	long fail_n, fail_member;
	atomic_long fail_seen;
	_Atomic uint64_t dead;		/* bit M: member M is dead */
	double eio_read[TFS_MAX_MEMBERS], eio_write[TFS_MAX_MEMBERS];
	_Atomic uint64_t rng;
	atomic_long injected;
	bool drop_unsynced;
	bool torn;			/* requests of a batch one at a time */
	char eio_op[32], eio_name[256];	/* eio_at */
	long eio_k;			/* 0: every call */
	atomic_long eio_seen;
	char delay_op[32];
	long delay_ms;
	struct undo_log undo;
};

static const char *const mio_name[] = {
	[TFS_MIO_READ] = "read",
	[TFS_MIO_WRITE] = "write",
	[TFS_MIO_FSYNC] = "fsync",
	[TFS_MIO_FDATASYNC] = "fdatasync",
};

/* ------------------------------------------------------------------ */
/* Undo log (drop_unsynced)                                             */
/* ------------------------------------------------------------------ */

static void undo_enter(struct fault *f)
{
	struct undo_log *u = &f->undo;

	if (!f->drop_unsynced)
		return;
	pthread_mutex_lock(&u->lock);
	while (u->crashing)	/* the process is about to die */
		pthread_cond_wait(&u->idle, &u->lock);
	u->inflight++;
	pthread_mutex_unlock(&u->lock);
}

static void undo_leave(struct fault *f)
{
	struct undo_log *u = &f->undo;

	if (!f->drop_unsynced)
		return;
	pthread_mutex_lock(&u->lock);
	if (--u->inflight == 0)
		pthread_cond_broadcast(&u->idle);
	pthread_mutex_unlock(&u->lock);
}

static void undo_overflow_locked(struct undo_log *u, const char *why)
{
	if (!u->overflow)
		tfs_err("fault: drop_unsynced: undo log full (%s; cap %llu MiB, %d files): "
			"unsynced changes from now on survive the crash", why,
			UNDO_CAP_BYTES >> 20, UNDO_CAP_FILES);
	u->overflow = true;
}

static struct undo_file *undo_file_locked(struct undo_log *u, uint32_t m, int fd,
					  const struct stat *st)
{
	struct undo_file *uf;
	char p[64];

	for (uf = u->files; uf; uf = uf->next)
		if (uf->dev == st->st_dev && uf->ino == st->st_ino)
			return uf;
	if (u->nfiles >= UNDO_CAP_FILES) {
		undo_overflow_locked(u, "too many files");
		return NULL;
	}
	uf = calloc(1, sizeof(*uf));
	if (!uf)
		return NULL;
	/* our own buffered fd: fd may be O_DIRECT, and its owner may close it */
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	uf->fd = open(p, O_RDWR | O_CLOEXEC);
	if (uf->fd < 0) {
		tfs_warn("fault: drop_unsynced: cannot reopen member %u file: %s", m,
			 strerror(errno));
		free(uf);
		return NULL;
	}
	uf->dev = st->st_dev;
	uf->ino = st->st_ino;
	uf->member = m;
	uf->next = u->files;
	u->files = uf;
	u->nfiles++;
	return uf;
}

/* The data extents of [off, end) in fd, as a growing array. */
static struct undo_seg *data_extents(int fd, uint64_t off, uint64_t end, unsigned *n,
				     uint64_t *bytes)
{
	struct undo_seg *seg = NULL;
	unsigned cap = 0;

	*n = 0;
	*bytes = 0;
	while (off < end) {
		off_t d = lseek(fd, (off_t)off, SEEK_DATA), hole;

		if (d < 0 || (uint64_t)d >= end)
			break;	/* ENXIO: no data past off */
		hole = lseek(fd, d, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > end)
			hole = (off_t)end;
		if (*n == cap) {
			struct undo_seg *s = realloc(seg, (cap = cap ? 2 * cap : 4) * sizeof(*s));

			if (!s) {
				free(seg);
				return NULL;
			}
			seg = s;
		}
		seg[(*n)++] = (struct undo_seg){ .off = (uint64_t)d, .len = (uint64_t)(hole - d) };
		*bytes += (uint64_t)(hole - d);
		off = (uint64_t)hole;
	}
	return seg ? seg : calloc(1, sizeof(*seg));
}

/* Record what an operation on [off, off + len) of fd's file (and its size)
 * is about to change.  Caller holds the gate. */
static void undo_note(struct fault *f, uint32_t m, int fd, uint64_t off, uint64_t len)
{
	struct undo_log *u = &f->undo;
	struct undo_file *uf;
	struct undo_rec *r = NULL;
	struct undo_seg *seg = NULL;
	unsigned char *data;
	uint64_t end, bytes;
	struct stat st;
	unsigned nseg;

	if (!f->drop_unsynced || fstat(fd, &st))
		return;
	pthread_mutex_lock(&u->lock);
	if (u->overflow || !(uf = undo_file_locked(u, m, fd, &st)) || fstat(uf->fd, &st))
		goto out;
	end = len > UINT64_MAX - off ? UINT64_MAX : off + len;
	if (end > (uint64_t)st.st_size)
		end = (uint64_t)st.st_size;
	if (off > end)
		off = end;
	seg = data_extents(uf->fd, off, end, &nseg, &bytes);
	if (!seg)
		goto out;
	if (u->bytes + bytes + sizeof(*r) > UNDO_CAP_BYTES) {
		undo_overflow_locked(u, "too much unsynced data");
		goto out;
	}
	r = malloc(sizeof(*r) + nseg * sizeof(r->seg[0]) + bytes);
	if (!r)
		goto out;
	*r = (struct undo_rec){ .off = off, .end = end, .old_size = (uint64_t)st.st_size,
				.nseg = nseg };
	data = (unsigned char *)&r->seg[nseg];
	for (unsigned i = 0; i < nseg; i++) {
		ssize_t got = pread(uf->fd, data, seg[i].len, (off_t)seg[i].off);

		if (got < 0)
			got = 0;
		memset(data + got, 0, seg[i].len - (uint64_t)got);	/* shrunk meanwhile */
		r->seg[i] = (struct undo_seg){ .off = seg[i].off, .len = seg[i].len, .data = data };
		data += seg[i].len;
	}
	r->older = uf->newest;
	uf->newest = r;
	u->bytes += bytes + sizeof(*r);
out:
	pthread_mutex_unlock(&u->lock);
	free(seg);
}

static void undo_free_file(struct undo_log *u, struct undo_file *uf)
{
	while (uf->newest) {
		struct undo_rec *r = uf->newest;

		uf->newest = r->older;
		for (unsigned i = 0; i < r->nseg; i++)
			u->bytes -= r->seg[i].len;
		u->bytes -= sizeof(*r);
		free(r);
	}
	close(uf->fd);
	u->nfiles--;
	free(uf);
}

/* A sync made these files' changes durable: forget them.  Files of member
 * m (all_of_member: a syncfs), or the file of fd. */
static void undo_forget(struct fault *f, uint32_t m, int fd, bool all_of_member)
{
	struct undo_log *u = &f->undo;
	struct stat st;

	if (!f->drop_unsynced || (!all_of_member && fstat(fd, &st)))
		return;
	pthread_mutex_lock(&u->lock);
	for (struct undo_file **pp = &u->files; *pp;) {
		struct undo_file *uf = *pp;

		if (all_of_member ? uf->member == m
				  : uf->dev == st.st_dev && uf->ino == st.st_ino) {
			*pp = uf->next;
			undo_free_file(u, uf);
		} else {
			pp = &uf->next;
		}
	}
	pthread_mutex_unlock(&u->lock);
}

/* Zero [off, end) of fd: a hole where the filesystem can. */
static int zero_range(int fd, uint64_t off, uint64_t end)
{
	static const unsigned char zeros[65536];

	if (end <= off ||
	    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
		      (off_t)(end - off)) == 0)
		return 0;
	for (; off < end;) {
		size_t l = end - off < sizeof(zeros) ? (size_t)(end - off) : sizeof(zeros);
		ssize_t w = pwrite(fd, zeros, l, (off_t)off);

		if (w <= 0)
			return -1;
		off += (uint64_t)w;
	}
	return 0;
}

static int undo_rec_apply(int fd, const struct undo_rec *r)
{
	int rc = zero_range(fd, r->off, r->end);

	for (unsigned i = 0; i < r->nseg && rc == 0; i++)
		if (pwrite(fd, r->seg[i].data, r->seg[i].len, (off_t)r->seg[i].off) !=
		    (ssize_t)r->seg[i].len)
			rc = -1;
	if (rc == 0)
		rc = ftruncate(fd, (off_t)r->old_size);
	return rc;
}

/* The power cut: close the gate, let what is inside finish, undo every
 * unsynced change newest first.  Returns with the gate closed for good. */
static void undo_all(struct fault *f)
{
	struct undo_log *u = &f->undo;
	unsigned nrec = 0, nfail = 0;

	pthread_mutex_lock(&u->lock);
	u->crashing = true;
	while (u->inflight)
		pthread_cond_wait(&u->idle, &u->lock);
	for (struct undo_file *uf = u->files; uf; uf = uf->next)
		for (struct undo_rec *r = uf->newest; r; r = r->older, nrec++)
			if (undo_rec_apply(uf->fd, r))
				nfail++;
	tfs_warn("fault: power cut: undid %u unsynced changes in %u member files "
		 "(undo log: %llu bytes)%s", nrec, u->nfiles, (unsigned long long)u->bytes,
		 u->overflow ? "; the log had overflowed, some changes survive" : "");
	if (nfail)
		tfs_warn("fault: power cut: %u undo records could not be applied: %s", nfail,
			 strerror(errno));
	pthread_mutex_unlock(&u->lock);
}

/* ------------------------------------------------------------------ */
/* Deciding faults                                                      */
/* ------------------------------------------------------------------ */

static bool dead(struct fault *f, uint32_t m)
{
	return (atomic_load(&f->dead) >> m) & 1;
}

static void injected(struct fault *f, uint32_t m, const char *op, const char *why)
{
	long k = atomic_fetch_add(&f->injected, 1) + 1;

	if (k <= 10 || (k & (k - 1)) == 0)
		tfs_warn("fault: EIO on member %u %s (%s; injected fault #%ld)", m, op, why, k);
}

/* splitmix64 over a shared counter (invariant 2): a draw in [0, 1). */
static double draw(struct fault *f)
{
	uint64_t z = atomic_fetch_add(&f->rng, 0x9E3779B97F4A7C15ull) + 0x9E3779B97F4A7C15ull;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1.0p-53;
}

/* Should data request mi fail before it is performed? */
static bool fail_before(struct fault *f, const struct tfs_mio *mi)
{
	double p = mi->op == TFS_MIO_READ ? f->eio_read[mi->member]
		 : mi->op == TFS_MIO_WRITE ? f->eio_write[mi->member] : 0;

	if (dead(f, mi->member)) {
		injected(f, mi->member, mio_name[mi->op], "dead member");
		return true;
	}
	if (p > 0 && (p >= 1 || draw(f) < p)) {
		injected(f, mi->member, mio_name[mi->op], "eio_read/eio_write");
		return true;
	}
	return false;
}

static void delay(struct fault *f, const char *op)
{
	if (f->delay_ms > 0 && strcmp(op, f->delay_op) == 0)
		usleep((useconds_t)f->delay_ms * 1000);
}

/* Before call op on member m (naming name, or NULL): 0, or the error the
 * caller gets instead of the call. */
static int before(struct fault *f, uint32_t m, const char *op, const char *name)
{
	const char *leaf = name ? strrchr(name, '/') : NULL;

	delay(f, op);
	if (dead(f, m)) {
		injected(f, m, op, "dead member");
		return -EIO;
	}
	leaf = leaf ? leaf + 1 : name;
	if (leaf && f->eio_name[0] && strcmp(op, f->eio_op) == 0 &&
	    strcmp(leaf, f->eio_name) == 0 &&
	    (f->eio_k == 0 || atomic_fetch_add(&f->eio_seen, 1) < f->eio_k)) {
		injected(f, m, op, "eio_at");
		return -EIO;
	}
	return 0;
}

static void crash(struct fault *f, const char *op)
{
	tfs_warn("fault: crash after %s #%ld%s", op, f->crash_n,
		 f->drop_unsynced ? ", dropping unsynced changes" : "");
	if (f->drop_unsynced)
		undo_all(f);
	kill(getpid(), SIGKILL);
}

/* A call of op on member m returned rc: count it (invariant 1), kill a
 * member or the daemon when due.  Returns what the caller gets. */
static long after(struct fault *f, const char *op, uint32_t m, long rc)
{
	if (rc < 0)
		return rc;
	if (dead(f, m)) {
		injected(f, m, op, "member died while the call was queued");
		return -EIO;
	}
	if (f->fail_n > 0 && strcmp(op, f->fail_op) == 0 &&
	    atomic_fetch_add(&f->fail_seen, 1) + 1 == f->fail_n) {
		atomic_fetch_or(&f->dead, 1ull << f->fail_member);
		tfs_warn("fault: member %ld dies after %s #%ld", f->fail_member, op, f->fail_n);
	}
	if (f->crash_n > 0 && strcmp(op, f->crash_op) == 0 &&
	    atomic_fetch_add(&f->crash_seen, 1) + 1 == f->crash_n)
		crash(f, op);
	return rc;
}

/* ------------------------------------------------------------------ */
/* The ops table                                                        */
/* ------------------------------------------------------------------ */

/* Forward a run of requests none of which is to fail; note pre-images
 * first and forget synced files after. */
static int submit_run(struct tfs_backend *be, struct tfs_mio *v, unsigned n)
{
	struct fault *f = be->priv;
	int rc;

	for (unsigned i = 0; i < n; i++)
		if (v[i].op == TFS_MIO_WRITE)
			undo_note(f, v[i].member, v[i].fd, v[i].off, v[i].len);
	rc = be->inner->ops->submit(be->inner, v, n);
	for (unsigned i = 0; i < n; i++)
		if ((v[i].op == TFS_MIO_FSYNC || v[i].op == TFS_MIO_FDATASYNC) && v[i].res == 0)
			undo_forget(f, v[i].member, v[i].fd, false);
	return rc;
}

static int ft_submit(struct tfs_backend *be, struct tfs_mio *v, unsigned n)
{
	struct fault *f = be->priv;
	unsigned start = 0;
	int rc = 0;

	if (f->torn && n > 1) {
		/* each request alone, counted as it completes: a crash lands
		 * between the writes of one batch (a torn stripe) */
		for (unsigned i = 0; i < n; i++) {
			int r = ft_submit(be, &v[i], 1);

			if (r && !rc)
				rc = r;
		}
		return rc;
	}
	for (unsigned i = 0; i < n; i++)
		if (f->delay_ms > 0 && strcmp(mio_name[v[i].op], f->delay_op) == 0) {
			delay(f, f->delay_op);
			break;
		}
	undo_enter(f);
	for (unsigned i = 0; i <= n; i++) {
		if (i < n && !fail_before(f, &v[i]))
			continue;
		if (i > start) {
			int r = submit_run(be, v + start, i - start);

			if (r && !rc)
				rc = r;
		}
		if (i < n)
			v[i].res = -EIO;
		start = i + 1;
	}
	undo_leave(f);
	for (unsigned i = 0; i < n; i++)
		v[i].res = after(f, mio_name[v[i].op], v[i].member, (long)v[i].res);
	return rc;
}

/* FWD: plain calls.  FWD_FD: calls that return a new fd, closed again when
 * the member died while the call ran. */
#define FWD_CALL(op, fd_result, name, params, ...)                             \
	static int ft_##op params                                              \
	{                                                                      \
		struct fault *f = be->priv;                                    \
		int rc = before(f, m, #op, name);                              \
		long out;                                                      \
		if (rc)                                                        \
			return rc;                                             \
		rc = be->inner->ops->op(be->inner, m, __VA_ARGS__);            \
		out = after(f, #op, m, rc);                                    \
		if ((fd_result) && rc >= 0 && out < 0)                         \
			close(rc);                                             \
		return (int)out;                                               \
	}
/* NAME: the name the call is about (eio_at), or NULL */
#define FWD(op, name, params, ...)    FWD_CALL(op, 0, name, params, __VA_ARGS__)
#define FWD_FD(op, name, params, ...) FWD_CALL(op, 1, name, params, __VA_ARGS__)

FWD_FD(open_dir, p, (struct tfs_backend *be, uint32_t m, int d, const char *p), d, p)
FWD_FD(openat, n, (struct tfs_backend *be, uint32_t m, int d, const char *n, int fl, mode_t mo),
       d, n, fl, mo)
FWD(fstatat, n, (struct tfs_backend *be, uint32_t m, int d, const char *n, struct stat *st),
    d, n, st)
FWD(fstat, NULL, (struct tfs_backend *be, uint32_t m, int fd, struct stat *st), fd, st)
FWD(mkdirat, n, (struct tfs_backend *be, uint32_t m, int d, const char *n, mode_t mo), d, n, mo)
FWD(mknodat, n, (struct tfs_backend *be, uint32_t m, int d, const char *n, mode_t mo, dev_t r),
    d, n, mo, r)
FWD(symlinkat, n, (struct tfs_backend *be, uint32_t m, const char *t, int d, const char *n),
    t, d, n)
FWD(readlinkat, n, (struct tfs_backend *be, uint32_t m, int d, const char *n, char *b, size_t l),
    d, n, b, l)
FWD(linkat, on, (struct tfs_backend *be, uint32_t m, int od, const char *on, int nd,
	     const char *nn), od, on, nd, nn)
FWD(unlinkat, n, (struct tfs_backend *be, uint32_t m, int d, const char *n, int fl), d, n, fl)
FWD(renameat2, on, (struct tfs_backend *be, uint32_t m, int od, const char *on, int nd,
		const char *nn, unsigned fl), od, on, nd, nn, fl)
FWD(fchownat, n, (struct tfs_backend *be, uint32_t m, int d, const char *n, uid_t u, gid_t g),
    d, n, u, g)
FWD(fchmodat, n, (struct tfs_backend *be, uint32_t m, int d, const char *n, mode_t mo), d, n, mo)
FWD(utimensat, n, (struct tfs_backend *be, uint32_t m, int d, const char *n,
		const struct timespec ts[2]), d, n, ts)
FWD(getxattr, NULL, (struct tfs_backend *be, uint32_t m, int fd, const char *n, void *b, size_t l),
    fd, n, b, l)
FWD(setxattr, NULL, (struct tfs_backend *be, uint32_t m, int fd, const char *n, const void *b,
	       size_t l, int fl), fd, n, b, l, fl)
FWD(listxattr, NULL, (struct tfs_backend *be, uint32_t m, int fd, char *b, size_t l), fd, b, l)
FWD(removexattr, NULL, (struct tfs_backend *be, uint32_t m, int fd, const char *n), fd, n)
FWD(statvfs, NULL, (struct tfs_backend *be, uint32_t m, struct statvfs *sv), sv)

/* Size and data changes outside submit: noted for drop_unsynced. */
static int ft_ftruncate(struct tfs_backend *be, uint32_t m, int fd, uint64_t len)
{
	struct fault *f = be->priv;
	int rc = before(f, m, "ftruncate", NULL);

	if (rc)
		return rc;
	undo_enter(f);
	undo_note(f, m, fd, len, UINT64_MAX);	/* what a shrink cuts, and the size */
	rc = be->inner->ops->ftruncate(be->inner, m, fd, len);
	undo_leave(f);
	return (int)after(f, "ftruncate", m, rc);
}

static int ft_fallocate(struct tfs_backend *be, uint32_t m, int fd, int mode, uint64_t off,
			uint64_t len)
{
	struct fault *f = be->priv;
	bool zeroes = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE);
	int rc = before(f, m, "fallocate", NULL);

	if (rc)
		return rc;
	undo_enter(f);
	undo_note(f, m, fd, off, zeroes ? len : 0);
	rc = be->inner->ops->fallocate(be->inner, m, fd, mode, off, len);
	undo_leave(f);
	return (int)after(f, "fallocate", m, rc);
}

static int ft_syncfs(struct tfs_backend *be, uint32_t m)
{
	struct fault *f = be->priv;
	int rc = before(f, m, "syncfs", NULL);

	if (rc)
		return rc;
	undo_enter(f);
	rc = be->inner->ops->syncfs(be->inner, m);
	if (rc == 0)
		undo_forget(f, m, -1, true);
	undo_leave(f);
	return (int)after(f, "syncfs", m, rc);
}

static const struct tfs_member_ops fault_ops = {
	.name = "fault",
	.submit = ft_submit,
	.open_dir = ft_open_dir,
	.openat = ft_openat,
	.fstatat = ft_fstatat,
	.fstat = ft_fstat,
	.mkdirat = ft_mkdirat,
	.mknodat = ft_mknodat,
	.symlinkat = ft_symlinkat,
	.readlinkat = ft_readlinkat,
	.linkat = ft_linkat,
	.unlinkat = ft_unlinkat,
	.renameat2 = ft_renameat2,
	.fchownat = ft_fchownat,
	.fchmodat = ft_fchmodat,
	.utimensat = ft_utimensat,
	.ftruncate = ft_ftruncate,
	.fallocate = ft_fallocate,
	.getxattr = ft_getxattr,
	.setxattr = ft_setxattr,
	.listxattr = ft_listxattr,
	.removexattr = ft_removexattr,
	.statvfs = ft_statvfs,
	.syncfs = ft_syncfs,
};

/* ------------------------------------------------------------------ */
/* Spec                                                                 */
/* ------------------------------------------------------------------ */

static bool member_ok(long m)
{
	return m >= 0 && m < TFS_MAX_MEMBERS;
}

/* eio_read=M[:P] / eio_write=M[:P] into p[]; false if tok is not one. */
static bool parse_eio(const char *tok, const char *key, double *p)
{
	char fmt[32];
	long m;
	double prob = 1;
	int got;

	snprintf(fmt, sizeof(fmt), "%s=%%ld:%%lf", key);
	got = sscanf(tok, fmt, &m, &prob);
	if (got < 1 || !member_ok(m) || !(prob > 0 && prob <= 1))
		return false;
	p[m] = prob;
	return true;
}

static bool parse_token(struct fault *f, const char *tok)
{
	unsigned long long seed;
	long m;

	if (sscanf(tok, "crash_after=%31[a-z0-9_]:%ld", f->crash_op, &f->crash_n) == 2)
		return f->crash_n > 0;
	if (sscanf(tok, "fail_after=%31[a-z0-9_]:%ld:%ld", f->fail_op, &f->fail_n,
		   &f->fail_member) == 3)
		return f->fail_n > 0 && member_ok(f->fail_member);
	if (sscanf(tok, "eio_member=%ld", &m) == 1 && member_ok(m)) {
		atomic_fetch_or(&f->dead, 1ull << m);
		return true;
	}
	if (sscanf(tok, "eio_at=%31[a-z0-9_]:%255[^:]:%ld", f->eio_op, f->eio_name,
		   &f->eio_k) >= 2)
		return f->eio_k >= 0;
	if (sscanf(tok, "delay=%31[a-z0-9_]:%ld", f->delay_op, &f->delay_ms) == 2)
		return f->delay_ms > 0;
	if (sscanf(tok, "seed=%llu", &seed) == 1) {
		atomic_store(&f->rng, seed);
		return true;
	}
	if (strcmp(tok, "drop_unsynced") == 0)
		return f->drop_unsynced = true;
	if (strcmp(tok, "torn") == 0)
		return f->torn = true;
	return parse_eio(tok, "eio_read", f->eio_read) || parse_eio(tok, "eio_write", f->eio_write);
}

struct tfs_backend *tfs_fault_backend(struct tfs_backend *inner, const char *spec)
{
	struct tfs_backend *be = calloc(1, sizeof(*be));
	struct fault *f = calloc(1, sizeof(*f));
	char *s, *tok, *save = NULL;

	if (!be || !f || !(s = strdup(spec))) {
		free(be);
		free(f);
		return NULL;
	}
	atomic_store(&f->rng, 0x5DEECE66Dull);
	pthread_mutex_init(&f->undo.lock, NULL);
	pthread_cond_init(&f->undo.idle, NULL);
	for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (!parse_token(f, tok))
			tfs_warn("fault: ignoring bad spec '%s'", tok);
	free(s);
	if (f->drop_unsynced && f->crash_n <= 0)
		tfs_warn("fault: drop_unsynced without crash_after does nothing");
	be->ops = &fault_ops;
	be->inner = inner;
	be->priv = f;
	tfs_warn("fault injection active: %s", spec);
	return be;
}
