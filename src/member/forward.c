/* forward.c - an ops table that forwards every call to the inner backend.
 * Wrappers that model or intercept only some calls (hdd.c) start from a
 * copy of it and replace what they need. */
#include "tierfs/member.h"

#define FWD(op, params, ...)                                                  \
	static int fw_##op params                                             \
	{                                                                     \
		return be->inner->ops->op(be->inner, __VA_ARGS__);            \
	}

FWD(submit, (struct tfs_backend *be, struct tfs_mio *v, unsigned n), v, n)
FWD(open_dir, (struct tfs_backend *be, uint32_t m, int d, const char *p), m, d, p)
FWD(openat, (struct tfs_backend *be, uint32_t m, int d, const char *n, int fl, mode_t mo),
    m, d, n, fl, mo)
FWD(fstatat, (struct tfs_backend *be, uint32_t m, int d, const char *n, struct stat *st),
    m, d, n, st)
FWD(fstat, (struct tfs_backend *be, uint32_t m, int fd, struct stat *st), m, fd, st)
FWD(mkdirat, (struct tfs_backend *be, uint32_t m, int d, const char *n, mode_t mo), m, d, n, mo)
FWD(mknodat, (struct tfs_backend *be, uint32_t m, int d, const char *n, mode_t mo, dev_t r),
    m, d, n, mo, r)
FWD(symlinkat, (struct tfs_backend *be, uint32_t m, const char *t, int d, const char *n),
    m, t, d, n)
FWD(readlinkat, (struct tfs_backend *be, uint32_t m, int d, const char *n, char *b, size_t l),
    m, d, n, b, l)
FWD(linkat, (struct tfs_backend *be, uint32_t m, int od, const char *on, int nd,
	     const char *nn), m, od, on, nd, nn)
FWD(unlinkat, (struct tfs_backend *be, uint32_t m, int d, const char *n, int fl), m, d, n, fl)
FWD(renameat2, (struct tfs_backend *be, uint32_t m, int od, const char *on, int nd,
		const char *nn, unsigned fl), m, od, on, nd, nn, fl)
FWD(fchownat, (struct tfs_backend *be, uint32_t m, int d, const char *n, uid_t u, gid_t g),
    m, d, n, u, g)
FWD(fchmodat, (struct tfs_backend *be, uint32_t m, int d, const char *n, mode_t mo), m, d, n, mo)
FWD(utimensat, (struct tfs_backend *be, uint32_t m, int d, const char *n,
		const struct timespec ts[2]), m, d, n, ts)
FWD(ftruncate, (struct tfs_backend *be, uint32_t m, int fd, uint64_t l), m, fd, l)
FWD(fallocate, (struct tfs_backend *be, uint32_t m, int fd, int mo, uint64_t o, uint64_t l),
    m, fd, mo, o, l)
FWD(getxattr, (struct tfs_backend *be, uint32_t m, int fd, const char *n, void *b, size_t l),
    m, fd, n, b, l)
FWD(setxattr, (struct tfs_backend *be, uint32_t m, int fd, const char *n, const void *b,
	       size_t l, int fl), m, fd, n, b, l, fl)
FWD(listxattr, (struct tfs_backend *be, uint32_t m, int fd, char *b, size_t l), m, fd, b, l)
FWD(removexattr, (struct tfs_backend *be, uint32_t m, int fd, const char *n), m, fd, n)
FWD(statvfs, (struct tfs_backend *be, uint32_t m, struct statvfs *sv), m, sv)
FWD(syncfs, (struct tfs_backend *be, uint32_t m), m)

const struct tfs_member_ops tfs_forward_ops = {
	.name = "forward",
	.submit = fw_submit,
	.open_dir = fw_open_dir,
	.openat = fw_openat,
	.fstatat = fw_fstatat,
	.fstat = fw_fstat,
	.mkdirat = fw_mkdirat,
	.mknodat = fw_mknodat,
	.symlinkat = fw_symlinkat,
	.readlinkat = fw_readlinkat,
	.linkat = fw_linkat,
	.unlinkat = fw_unlinkat,
	.renameat2 = fw_renameat2,
	.fchownat = fw_fchownat,
	.fchmodat = fw_fchmodat,
	.utimensat = fw_utimensat,
	.ftruncate = fw_ftruncate,
	.fallocate = fw_fallocate,
	.getxattr = fw_getxattr,
	.setxattr = fw_setxattr,
	.listxattr = fw_listxattr,
	.removexattr = fw_removexattr,
	.statvfs = fw_statvfs,
	.syncfs = fw_syncfs,
};
