/* fault.c - fault injection at the member seam.
 *
 * Owns: a wrapper backend that forwards every call to its inner backend and
 * can, per its spec, fail calls or kill the daemon at a chosen point.  Tests
 * use it to prove crash recovery; it is off unless TIERFS_FAULT is set.
 *
 * Spec (comma separated):
 *   crash_after=OP:N   after the N-th successful call of OP (e.g. renameat2,
 *                      mkdirat, unlinkat, ftruncate, write) the daemon
 *                      SIGKILLs itself, as a power cut of the process would.
 *   eio_member=M       every call on member M fails with EIO.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tierfs/log.h"
#include "tierfs/member.h"

struct fault {
	char crash_op[32];
	long crash_n;
	atomic_long crash_seen;
	long eio_member;
};

static int before(struct tfs_backend *be, uint32_t m)
{
	struct fault *f = be->priv;

	return f->eio_member >= 0 && (uint32_t)f->eio_member == m ? -EIO : 0;
}

static void after(struct tfs_backend *be, const char *op, long rc)
{
	struct fault *f = be->priv;

	if (rc < 0 || f->crash_n <= 0 || strcmp(op, f->crash_op))
		return;
	if (atomic_fetch_add(&f->crash_seen, 1) + 1 == f->crash_n) {
		tfs_warn("fault: crash after %s #%ld", op, f->crash_n);
		kill(getpid(), SIGKILL);
	}
}

static int ft_submit(struct tfs_backend *be, struct tfs_mio *v, unsigned n)
{
	struct fault *f = be->priv;
	int rc = be->inner->ops->submit(be->inner, v, n);

	for (unsigned i = 0; i < n; i++) {
		if (f->eio_member >= 0 && v[i].member == (uint32_t)f->eio_member)
			v[i].res = -EIO;
		if (v[i].op == TFS_MIO_WRITE)
			after(be, "write", v[i].res);
	}
	return rc;
}

#define FWD(op, params, ...)                                              \
	static int ft_##op params                                         \
	{                                                                 \
		int rc = before(be, m);                                   \
		if (rc)                                                   \
			return rc;                                        \
		rc = be->inner->ops->op(be->inner, m, __VA_ARGS__);       \
		after(be, #op, rc);                                       \
		return rc;                                                \
	}

FWD(open_dir, (struct tfs_backend *be, uint32_t m, int d, const char *p), d, p)
FWD(openat, (struct tfs_backend *be, uint32_t m, int d, const char *n, int fl, mode_t mo),
    d, n, fl, mo)
FWD(fstatat, (struct tfs_backend *be, uint32_t m, int d, const char *n, struct stat *st),
    d, n, st)
FWD(fstat, (struct tfs_backend *be, uint32_t m, int fd, struct stat *st), fd, st)
FWD(mkdirat, (struct tfs_backend *be, uint32_t m, int d, const char *n, mode_t mo), d, n, mo)
FWD(mknodat, (struct tfs_backend *be, uint32_t m, int d, const char *n, mode_t mo, dev_t r),
    d, n, mo, r)
FWD(symlinkat, (struct tfs_backend *be, uint32_t m, const char *t, int d, const char *n),
    t, d, n)
FWD(readlinkat, (struct tfs_backend *be, uint32_t m, int d, const char *n, char *b, size_t l),
    d, n, b, l)
FWD(linkat, (struct tfs_backend *be, uint32_t m, int od, const char *on, int nd,
	     const char *nn), od, on, nd, nn)
FWD(unlinkat, (struct tfs_backend *be, uint32_t m, int d, const char *n, int fl), d, n, fl)
FWD(renameat2, (struct tfs_backend *be, uint32_t m, int od, const char *on, int nd,
		const char *nn, unsigned fl), od, on, nd, nn, fl)
FWD(fchownat, (struct tfs_backend *be, uint32_t m, int d, const char *n, uid_t u, gid_t g),
    d, n, u, g)
FWD(fchmodat, (struct tfs_backend *be, uint32_t m, int d, const char *n, mode_t mo), d, n, mo)
FWD(utimensat, (struct tfs_backend *be, uint32_t m, int d, const char *n,
		const struct timespec ts[2]), d, n, ts)
FWD(ftruncate, (struct tfs_backend *be, uint32_t m, int fd, uint64_t l), fd, l)
FWD(fallocate, (struct tfs_backend *be, uint32_t m, int fd, int mo, uint64_t o, uint64_t l),
    fd, mo, o, l)
FWD(getxattr, (struct tfs_backend *be, uint32_t m, int fd, const char *n, void *b, size_t l),
    fd, n, b, l)
FWD(setxattr, (struct tfs_backend *be, uint32_t m, int fd, const char *n, const void *b,
	       size_t l, int fl), fd, n, b, l, fl)
FWD(listxattr, (struct tfs_backend *be, uint32_t m, int fd, char *b, size_t l), fd, b, l)
FWD(removexattr, (struct tfs_backend *be, uint32_t m, int fd, const char *n), fd, n)
FWD(statvfs, (struct tfs_backend *be, uint32_t m, struct statvfs *sv), sv)

static int ft_syncfs(struct tfs_backend *be, uint32_t m)
{
	int rc = before(be, m);

	return rc ? rc : be->inner->ops->syncfs(be->inner, m);
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
	f->eio_member = -1;
	for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (sscanf(tok, "crash_after=%31[a-z0-9_]:%ld", f->crash_op, &f->crash_n) == 2)
			continue;
		if (sscanf(tok, "eio_member=%ld", &f->eio_member) == 1)
			continue;
		tfs_warn("fault: ignoring unknown spec '%s'", tok);
	}
	free(s);
	be->ops = &fault_ops;
	be->inner = inner;
	be->priv = f;
	tfs_warn("fault injection active: %s", spec);
	return be;
}
