/* posix.c - the real member backend: system calls on member directories,
 * data on io_uring.
 *
 * Owns: the O_PATH fds of the member tree roots (MEMBER/root).
 *
 * Invariants:
 *  1. open_dir() resolves with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: no path
 *     handed to a member ever escapes its tree or passes a symlink.
 *  2. Every other call takes one name component and does not follow a
 *     symlink in it (O_NOFOLLOW / AT_SYMLINK_NOFOLLOW).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "tierfs/layout.h"
#include "tierfs/member.h"
#include "tierfs/uring.h"

struct posix_priv {
	uint32_t n;
	int rootfd[TFS_MAX_MEMBERS];
};

#define RET(x) return (x) < 0 ? -errno : (x)

static int px_rootfd(struct tfs_backend *be, uint32_t m)
{
	return ((struct posix_priv *)be->priv)->rootfd[m];
}

static int px_submit(struct tfs_backend *be, struct tfs_mio *v, unsigned n)
{
	return tfs_uring_run(v, n);
}

static int px_open_dir(struct tfs_backend *be, uint32_t m, int dirfd, const char *relpath)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	long fd = syscall(SYS_openat2, dirfd < 0 ? px_rootfd(be, m) : dirfd,
			  *relpath ? relpath : ".",
			  &how, sizeof(how));
	RET((int)fd);
}

static int px_openat(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		     int flags, mode_t mode)
{
	int fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	RET(fd);
}

static int px_fstatat(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		      struct stat *st)
{
	int rc = fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH);
	RET(rc);
}

static int px_fstat(struct tfs_backend *be, uint32_t m, int fd, struct stat *st)
{
	int rc = fstat(fd, st);
	RET(rc);
}

static int px_mkdirat(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		      mode_t mode)
{
	int rc = mkdirat(dirfd, name, mode);
	RET(rc);
}

static int px_mknodat(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		      mode_t mode, dev_t rdev)
{
	int rc = mknodat(dirfd, name, mode, rdev);
	RET(rc);
}

static int px_symlinkat(struct tfs_backend *be, uint32_t m, const char *target, int dirfd,
			const char *name)
{
	int rc = symlinkat(target, dirfd, name);
	RET(rc);
}

static int px_readlinkat(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
			 char *buf, size_t len)
{
	ssize_t rc = readlinkat(dirfd, name, buf, len);
	RET((int)rc);
}

static int px_linkat(struct tfs_backend *be, uint32_t m, int odirfd, const char *oname,
		     int ndirfd, const char *nname)
{
	int rc = linkat(odirfd, oname, ndirfd, nname, 0);
	RET(rc);
}

static int px_unlinkat(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		       int flags)
{
	int rc = unlinkat(dirfd, name, flags);
	RET(rc);
}

static int px_renameat2(struct tfs_backend *be, uint32_t m, int odirfd, const char *oname,
			int ndirfd, const char *nname, unsigned flags)
{
	int rc = renameat2(odirfd, oname, ndirfd, nname, flags);
	RET(rc);
}

static int px_fchownat(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		       uid_t uid, gid_t gid)
{
	int rc = fchownat(dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH);
	RET(rc);
}

static int px_fchmodat(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		       mode_t mode)
{
	/* fchmodat() cannot refuse to follow a symlink; callers never chmod
	 * one (Linux symlinks have no mode of their own).  An empty name means
	 * the (open, non-O_PATH) fd itself. */
	int rc = *name ? fchmodat(dirfd, name, mode, 0) : fchmod(dirfd, mode);
	RET(rc);
}

static int px_utimensat(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
			const struct timespec ts[2])
{
	int rc = *name ? utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW) : futimens(dirfd, ts);
	RET(rc);
}

static int px_ftruncate(struct tfs_backend *be, uint32_t m, int fd, uint64_t len)
{
	int rc = ftruncate(fd, (off_t)len);
	RET(rc);
}

static int px_fallocate(struct tfs_backend *be, uint32_t m, int fd, int mode, uint64_t off,
			uint64_t len)
{
	int rc = fallocate(fd, mode, (off_t)off, (off_t)len);
	RET(rc);
}

/* xattr calls on the fd itself; an O_PATH fd (EBADF) goes through
 * /proc/self/fd, which works for those too */
#define PROCFD(buf, fd) snprintf(buf, sizeof(buf), "/proc/self/fd/%d", fd)

static int px_getxattr(struct tfs_backend *be, uint32_t m, int fd, const char *name,
		       void *buf, size_t len)
{
	char p[64];
	ssize_t rc = fgetxattr(fd, name, buf, len);

	if (rc < 0 && errno == EBADF) {
		PROCFD(p, fd);
		rc = getxattr(p, name, buf, len);
	}
	RET((int)rc);
}

static int px_setxattr(struct tfs_backend *be, uint32_t m, int fd, const char *name,
		       const void *buf, size_t len, int flags)
{
	char p[64];
	int rc = fsetxattr(fd, name, buf, len, flags);

	if (rc < 0 && errno == EBADF) {
		PROCFD(p, fd);
		rc = setxattr(p, name, buf, len, flags);
	}
	RET(rc);
}

static int px_listxattr(struct tfs_backend *be, uint32_t m, int fd, char *buf, size_t len)
{
	char p[64];
	ssize_t rc = flistxattr(fd, buf, len);

	if (rc < 0 && errno == EBADF) {
		PROCFD(p, fd);
		rc = listxattr(p, buf, len);
	}
	RET((int)rc);
}

static int px_removexattr(struct tfs_backend *be, uint32_t m, int fd, const char *name)
{
	char p[64];
	int rc = fremovexattr(fd, name);

	if (rc < 0 && errno == EBADF) {
		PROCFD(p, fd);
		rc = removexattr(p, name);
	}
	RET(rc);
}

static int px_statvfs(struct tfs_backend *be, uint32_t m, struct statvfs *sv)
{
	int rc = fstatvfs(px_rootfd(be, m), sv);
	RET(rc);
}

static int px_syncfs(struct tfs_backend *be, uint32_t m)
{
	int fd = openat(px_rootfd(be, m), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	rc = syncfs(fd) ? -errno : 0;
	close(fd);
	return rc;
}

static const struct tfs_member_ops posix_ops = {
	.name = "posix",
	.submit = px_submit,
	.open_dir = px_open_dir,
	.openat = px_openat,
	.fstatat = px_fstatat,
	.fstat = px_fstat,
	.mkdirat = px_mkdirat,
	.mknodat = px_mknodat,
	.symlinkat = px_symlinkat,
	.readlinkat = px_readlinkat,
	.linkat = px_linkat,
	.unlinkat = px_unlinkat,
	.renameat2 = px_renameat2,
	.fchownat = px_fchownat,
	.fchmodat = px_fchmodat,
	.utimensat = px_utimensat,
	.ftruncate = px_ftruncate,
	.fallocate = px_fallocate,
	.getxattr = px_getxattr,
	.setxattr = px_setxattr,
	.listxattr = px_listxattr,
	.removexattr = px_removexattr,
	.statvfs = px_statvfs,
	.syncfs = px_syncfs,
};

struct tfs_backend *tfs_posix_backend(const int *rootfd, uint32_t n)
{
	struct tfs_backend *be = calloc(1, sizeof(*be));
	struct posix_priv *p = calloc(1, sizeof(*p));

	if (!be || !p) {
		free(be);
		free(p);
		return NULL;
	}
	p->n = n;
	memcpy(p->rootfd, rootfd, n * sizeof(int));
	be->ops = &posix_ops;
	be->priv = p;
	return be;
}

/* A replacement member takes index m: its tree root is rootfd from now
 * on.  Finds the POSIX backend below any wrappers. */
int tfs_posix_set_root(struct tfs_backend *be, uint32_t m, int rootfd)
{
	while (be && be->ops != &posix_ops)
		be = be->inner;
	if (!be)
		return -EINVAL;
	((struct posix_priv *)be->priv)->rootfd[m] = rootfd;
	return 0;
}
