/* fault.c - fault injection at the member seam.
 *
 * Owns: a wrapper backend that forwards every call to its inner backend and
 * can, per its spec, fail calls, kill members, or kill the daemon at a
 * chosen point (optionally undoing what a power cut would have lost).
 * Tests use it to prove error handling and crash recovery; it is off unless
 * TIERFS_FAULT is set.  The same spec holds five knobs read where they
 * act (store_put_delay: cstore.c; lookup_bind_delay, lookup_attr_delay:
 * ns.c; uring_init_delay, uring_queue_fail: transport.c), so one variable
 * configures them all.
 *
 * Spec (comma separated; OP is a member call: openat, mkdirat, renameat2,
 * unlinkat, ftruncate, ... or a data request: read, write, fsync, fdatasync):
 *   crash_after=OP:N   after the N-th successful OP (any member) the daemon
 *                      SIGKILLs itself, as a crash of the process would.
 *   drop_unsynced      the power-cut model (powercut.c): every write the
 *                      daemon makes to a member file or to its own files
 *                      (SSD data file, stores, logs) is noted until a
 *                      sync covers it; crash_after is then a power cut.
 *   cut_after=N        with drop_unsynced: cut at the N-th noted write,
 *                      truncate, fallocate or sync, anywhere.
 *   cut_keep=P         each unsynced 4 KiB block survives a cut with
 *                      probability P (default 0: all are lost), drawn
 *                      from seed.
 *   cut_dump=PATH      write the unsynced changes to PATH instead of
 *                      undoing them (tests make crash states from it).
 *   cut_when=PATH      cut at the first noted operation after PATH exists
 *                      (a test's "now"); with cut_after=N, at the N-th.
 *   own_sync_delay=MS  with drop_unsynced: every sync of the daemon's own
 *                      files (the SSD data file, the stores) sleeps MS
 *                      milliseconds before it is performed: a slow SSD,
 *                      to widen a race in a test.
 *   store_put_delay=MS[:N]  every batch of the cache's store that puts
 *                      an extent record (the N-th only, with N) sleeps MS
 *                      milliseconds before it is logged
 *                      (cstore.c reads it): a slow store, to widen a
 *                      race between two records of one extent in a test.
 *   lookup_bind_delay=MS  every lookup sleeps MS milliseconds between its
 *                      stat of the primary and binding the inode (ns.c
 *                      reads it): widens the window a failover raced into.
 *   lookup_attr_delay=MS  every lookup (the kernel's, and a maintenance
 *                      walk's: rebuild, scrub, size walk, the flusher's)
 *                      sleeps MS milliseconds after binding the inode
 *                      (a directory's too), before it reads a regular
 *                      file's attributes (ns.c
 *                      reads it): widens the window in which another name
 *                      of the file goes away.
 *   uring_init_delay=MS  the INIT answer that asks the kernel for io_uring
 *                      sleeps MS milliseconds before it is written, after
 *                      the fuse module's enable_uring was read
 *                      (transport.c reads it): widens the window in which
 *                      the module stops allowing io_uring and the kernel
 *                      then refuses the queues.
 *   uring_queue_fail=STEP  a step of making the FUSE io_uring queues fails
 *                      with ENOMEM (STEP: ring, io_uring_queue_init;
 *                      eventfd; mmap, an entry's memory), or thread, a
 *                      queue's thread, with EAGAIN (transport.c reads it):
 *                      the daemon's own set-up fails, and the requests
 *                      stay on /dev/fuse.
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
 *   delay=OP[/OP2..]:MS  every call of OP (or of any of the ops named,
 *                      '/'-separated; a data request: once per batch that
 *                      has one) sleeps MS milliseconds before it is
 *                      performed, to widen a race in a test.
 *   enospc_write=M[:P] data writes on member M fail with ENOSPC, each with
 *                      probability P, after the first half of the write
 *                      was performed (a filesystem that filled up in the
 *                      middle of it).
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
 *  3. With drop_unsynced the member files are noted in the power-cut
 *     model (powercut.c, domain = member): a write, ftruncate or fallocate
 *     before it is forwarded and inside the model's gate, an fsync or
 *     fdatasync of the file or a syncfs of the member after it succeeded.
 *     Nothing that holds the gate can trigger the crash.
 *
 * Every injected fault is logged as a warning (EIO and ENOSPC injections:
 * the first ten, then at each power of two).
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

#include "tierfs/hash.h"
#include "tierfs/layout.h"
#include "tierfs/log.h"
#include "tierfs/member.h"
#include "tierfs/powercut.h"

_Static_assert(TFS_MAX_MEMBERS <= 64, "dead members are a 64-bit mask");

struct fault {
	char crash_op[32];
	long crash_n;
	atomic_long crash_seen;
	char fail_op[32];
	long fail_n, fail_member;
	atomic_long fail_seen;
	_Atomic uint64_t dead;		/* bit M: member M is dead */
	double eio_read[TFS_MAX_MEMBERS], eio_write[TFS_MAX_MEMBERS];
	double enospc_write[TFS_MAX_MEMBERS];
	_Atomic uint64_t rng;
	atomic_long injected;
	bool drop_unsynced;
	bool torn;			/* requests of a batch one at a time */
	struct tfs_pcut_conf cut;
	char eio_op[32], eio_name[256];	/* eio_at */
	long eio_k;			/* 0: every call */
	atomic_long eio_seen;
	char delay_op[32];
	long delay_ms;
};

static const char *const mio_name[] = {
	[TFS_MIO_READ] = "read",
	[TFS_MIO_WRITE] = "write",
	[TFS_MIO_FSYNC] = "fsync",
	[TFS_MIO_FDATASYNC] = "fdatasync",
};

/* ------------------------------------------------------------------ */
/* Deciding faults                                                      */
/* ------------------------------------------------------------------ */

static bool dead(struct fault *f, uint32_t m)
{
	return (atomic_load(&f->dead) >> m) & 1;
}

static void injected_err(struct fault *f, uint32_t m, const char *op, const char *why, int err)
{
	long k = atomic_fetch_add(&f->injected, 1) + 1;

	if (k <= 10 || (k & (k - 1)) == 0)
		tfs_warn("fault: %s on member %u %s (%s; injected fault #%ld)",
			 err == -ENOSPC ? "ENOSPC" : "EIO", m, op, why, k);
}

static void injected(struct fault *f, uint32_t m, const char *op, const char *why)
{
	injected_err(f, m, op, why, -EIO);
}

/* splitmix64 over a shared counter (invariant 2): a draw in [0, 1). */
static double draw(struct fault *f)
{
	return tfs_unit(tfs_splitmix64(atomic_fetch_add(&f->rng, TFS_GOLDEN64) + TFS_GOLDEN64));
}

static bool chance(struct fault *f, double p)
{
	return p > 0 && (p >= 1 || draw(f) < p);
}

/* Should data request mi fail (0: no)?  -EIO: before it is performed;
 * -ENOSPC: after its first half. */
static int fail_before(struct fault *f, const struct tfs_mio *mi)
{
	double p = mi->op == TFS_MIO_READ ? f->eio_read[mi->member]
		 : mi->op == TFS_MIO_WRITE ? f->eio_write[mi->member] : 0;

	if (dead(f, mi->member)) {
		injected(f, mi->member, mio_name[mi->op], "dead member");
		return -EIO;
	}
	if (chance(f, p)) {
		injected(f, mi->member, mio_name[mi->op], "eio_read/eio_write");
		return -EIO;
	}
	if (mi->op == TFS_MIO_WRITE && chance(f, f->enospc_write[mi->member])) {
		injected_err(f, mi->member, mio_name[mi->op], "enospc_write", -ENOSPC);
		return -ENOSPC;
	}
	return 0;
}

/* Whether delay= names op (one of its '/'-separated names). */
static bool delays(const struct fault *f, const char *op)
{
	size_t n = strlen(op);

	for (const char *p = f->delay_op; f->delay_ms > 0 && *p;) {
		size_t len = strcspn(p, "/");

		if (len == n && strncmp(p, op, n) == 0)
			return true;
		p += len + (p[len] == '/');
	}
	return false;
}

/* Sleeps delay='s time if it names op; returns whether it did. */
static bool delay(struct fault *f, const char *op)
{
	if (!delays(f, op))
		return false;
	usleep((useconds_t)f->delay_ms * 1000);
	return true;
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
		tfs_pcut_cut(op);
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
	int rc;

	for (unsigned i = 0; i < n; i++)
		if (v[i].op == TFS_MIO_WRITE)
			tfs_pcut_note(v[i].member, v[i].fd, v[i].off, v[i].len);
	rc = be->inner->ops->submit(be->inner, v, n);
	for (unsigned i = 0; i < n; i++)
		if ((v[i].op == TFS_MIO_FSYNC || v[i].op == TFS_MIO_FDATASYNC) && v[i].res == 0)
			tfs_pcut_synced_fd(v[i].fd);
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
	for (unsigned i = 0; i < n && !delay(f, mio_name[v[i].op]); i++)
		;	/* once per batch */
	tfs_pcut_enter();
	for (unsigned i = 0; i <= n; i++) {
		int err = i < n ? fail_before(f, &v[i]) : 0;

		if (i < n && !err)
			continue;
		if (i > start) {
			int r = submit_run(be, v + start, i - start);

			if (r && !rc)
				rc = r;
		}
		if (err == -ENOSPC && v[i].len / 2) {	/* the first half lands */
			struct tfs_mio half = v[i];

			half.len /= 2;
			submit_run(be, &half, 1);
		}
		if (i < n)
			v[i].res = err;
		start = i + 1;
	}
	tfs_pcut_leave();
	for (unsigned i = 0; i < n; i++) {
		v[i].res = after(f, mio_name[v[i].op], v[i].member, (long)v[i].res);
		if (v[i].op != TFS_MIO_READ)
			tfs_pcut_tick();
	}
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
	tfs_pcut_enter();
	tfs_pcut_note(m, fd, len, UINT64_MAX);	/* what a shrink cuts, and the size */
	rc = be->inner->ops->ftruncate(be->inner, m, fd, len);
	tfs_pcut_leave();
	rc = (int)after(f, "ftruncate", m, rc);
	tfs_pcut_tick();
	return rc;
}

static int ft_fallocate(struct tfs_backend *be, uint32_t m, int fd, int mode, uint64_t off,
			uint64_t len)
{
	struct fault *f = be->priv;
	bool zeroes = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE);
	int rc = before(f, m, "fallocate", NULL);

	if (rc)
		return rc;
	tfs_pcut_enter();
	tfs_pcut_note(m, fd, off, zeroes ? len : 0);
	rc = be->inner->ops->fallocate(be->inner, m, fd, mode, off, len);
	tfs_pcut_leave();
	rc = (int)after(f, "fallocate", m, rc);
	tfs_pcut_tick();
	return rc;
}

static int ft_syncfs(struct tfs_backend *be, uint32_t m)
{
	struct fault *f = be->priv;
	int rc = before(f, m, "syncfs", NULL);

	if (rc)
		return rc;
	tfs_pcut_enter();
	rc = be->inner->ops->syncfs(be->inner, m);
	if (rc == 0)
		tfs_pcut_synced_domain(m);
	tfs_pcut_leave();
	rc = (int)after(f, "syncfs", m, rc);
	tfs_pcut_tick();
	return rc;
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

/* eio_read=M[:P] (eio_write, enospc_write) into p[]; false if tok is not one. */
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
	if (sscanf(tok, "delay=%31[a-z0-9_/]:%ld", f->delay_op, &f->delay_ms) == 2)
		return f->delay_ms > 0;
	if (sscanf(tok, "seed=%llu", &seed) == 1) {
		atomic_store(&f->rng, seed);
		f->cut.seed = seed;
		return true;
	}
	if (strcmp(tok, "drop_unsynced") == 0)
		return f->drop_unsynced = true;
	if (sscanf(tok, "cut_after=%ld", &f->cut.cut_after) == 1)
		return f->cut.cut_after > 0;
	if (sscanf(tok, "cut_keep=%lf", &f->cut.keep) == 1)
		return f->cut.keep >= 0 && f->cut.keep <= 1;
	if (strncmp(tok, "cut_dump=", 9) == 0 && tok[9])
		return (f->cut.dump = strdup(tok + 9)) != NULL;
	if (strncmp(tok, "cut_when=", 9) == 0 && tok[9])
		return (f->cut.when = strdup(tok + 9)) != NULL;
	if (sscanf(tok, "own_sync_delay=%ld", &f->cut.own_sync_delay_ms) == 1)
		return f->cut.own_sync_delay_ms > 0;
	if (strncmp(tok, "store_put_delay=", 16) == 0 || strncmp(tok, "lookup_bind_delay=", 18) == 0 ||
	    strncmp(tok, "lookup_attr_delay=", 18) == 0 || strncmp(tok, "uring_init_delay=", 17) == 0 ||
	    strncmp(tok, "uring_queue_fail=", 17) == 0)
		return true;	/* read where they act: cstore.c, ns.c, transport.c */
	if (strcmp(tok, "torn") == 0)
		return f->torn = true;
	return parse_eio(tok, "eio_read", f->eio_read) || parse_eio(tok, "eio_write", f->eio_write) ||
	       parse_eio(tok, "enospc_write", f->enospc_write);
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
	for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (!parse_token(f, tok))
			tfs_warn("fault: ignoring bad spec '%s'", tok);
	free(s);
	if (f->drop_unsynced && f->crash_n <= 0 && f->cut.cut_after <= 0 && !f->cut.when)
		tfs_warn("fault: drop_unsynced without crash_after or cut_after does nothing");
	if (!f->drop_unsynced && f->cut.own_sync_delay_ms > 0)
		tfs_warn("fault: own_sync_delay without drop_unsynced does nothing");
	if (f->drop_unsynced)
		tfs_pcut_enable(&f->cut);
	be->ops = &fault_ops;
	be->inner = inner;
	be->priv = f;
	tfs_warn("fault injection active: %s", spec);
	return be;
}
