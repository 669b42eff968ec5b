/* The member seam: every byte and every name tierfs puts on a member goes
 * through one backend ops table.  Backends stack: the POSIX backend does the
 * work (data on io_uring); wrappers (fault injection now, the HDD service-time
 * model later) hold an inner backend and forward to it.
 *
 * All functions return >= 0 on success and -errno on failure.  Names are
 * single path components relative to a directory fd obtained from
 * open_dir(), which never leaves the member tree and never follows symlinks.
 */
#ifndef TIERFS_MEMBER_H
#define TIERFS_MEMBER_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

enum tfs_mio_op {
	TFS_MIO_READ,
	TFS_MIO_WRITE,
	TFS_MIO_FSYNC,
	TFS_MIO_FDATASYNC,
};

/* One member data request.  res: bytes transferred (a read that hits the
 * member file's EOF returns fewer bytes than asked; the rest is a hole), or
 * -errno. */
struct tfs_mio {
	uint32_t member;
	uint8_t op;
	int fd;
	void *buf;
	uint32_t len;
	uint64_t off;
	int64_t res;
};

struct tfs_backend;

struct tfs_member_ops {
	const char *name;
	/* Perform all n requests as one batch; returns 0 when every request
	 * ran (look at each res), -errno if the batch could not be issued. */
	int (*submit)(struct tfs_backend *be, struct tfs_mio *v, unsigned n);

	/* O_PATH fd of directory relpath under dirfd (-1: the member's tree
	 * root), resolved beneath it without following any symlink. */
	int (*open_dir)(struct tfs_backend *be, uint32_t m, int dirfd, const char *relpath);
	int (*openat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		      int flags, mode_t mode);
	int (*fstatat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		       struct stat *st);
	int (*fstat)(struct tfs_backend *be, uint32_t m, int fd, struct stat *st);
	int (*mkdirat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		       mode_t mode);
	int (*mknodat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		       mode_t mode, dev_t rdev);
	int (*symlinkat)(struct tfs_backend *be, uint32_t m, const char *target, int dirfd,
			 const char *name);
	int (*readlinkat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
			  char *buf, size_t len);
	int (*linkat)(struct tfs_backend *be, uint32_t m, int odirfd, const char *oname,
		      int ndirfd, const char *nname);
	int (*unlinkat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
			int flags);
	int (*renameat2)(struct tfs_backend *be, uint32_t m, int odirfd, const char *oname,
			 int ndirfd, const char *nname, unsigned flags);
	int (*fchownat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
			uid_t uid, gid_t gid);
	int (*fchmodat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
			mode_t mode);
	int (*utimensat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
			 const struct timespec ts[2]);
	int (*ftruncate)(struct tfs_backend *be, uint32_t m, int fd, uint64_t len);
	int (*fallocate)(struct tfs_backend *be, uint32_t m, int fd, int mode,
			 uint64_t off, uint64_t len);
	/* xattrs on any fd, O_PATH included */
	int (*getxattr)(struct tfs_backend *be, uint32_t m, int fd, const char *name,
			void *buf, size_t len);
	int (*setxattr)(struct tfs_backend *be, uint32_t m, int fd, const char *name,
			const void *buf, size_t len, int flags);
	int (*listxattr)(struct tfs_backend *be, uint32_t m, int fd, char *buf, size_t len);
	int (*removexattr)(struct tfs_backend *be, uint32_t m, int fd, const char *name);
	int (*statvfs)(struct tfs_backend *be, uint32_t m, struct statvfs *sv);
	int (*syncfs)(struct tfs_backend *be, uint32_t m);
};

struct tfs_backend {
	const struct tfs_member_ops *ops;
	struct tfs_backend *inner;	/* wrappers forward here */
	void *priv;
};

/* The real thing: tree roots are MEMBER/root, held as O_PATH fds. */
struct tfs_backend *tfs_posix_backend(const int *rootfd, uint32_t n);

/* Point member m of the POSIX backend under be at a new tree root (a
 * replacement member); the old fd is the caller's to close. */
int tfs_posix_set_root(struct tfs_backend *be, uint32_t m, int rootfd);

/* An ops table forwarding every call to be->inner, for wrappers to copy. */
extern const struct tfs_member_ops tfs_forward_ops;

/* HDD service-time model (hdd.c). */
struct tfs_hdd_params {
	double seek_ms;		/* average seek between random positions */
	unsigned rpm;		/* spindle speed: average rotation = 30000/rpm ms */
	double mbps;		/* media transfer rate, MB/s (10^6 bytes) */
	unsigned ncq;		/* queue window the actuator picks from: 1..256
				 * (1: arrival order; SATA NCQ: 32) */
};
#define TFS_HDD_NCQ_MAX	256	/* hdd_ncq: 1..256 */
#define TFS_HDD_T2T_MS	0.8	/* track-to-track seek: hdd_seek_ms is at least this */
#define TFS_HDD7200 ((struct tfs_hdd_params){ .seek_ms = 8.5, .rpm = 7200, .mbps = 180, \
					      .ncq = 1 })
struct tfs_backend *tfs_hdd_backend(struct tfs_backend *inner, const struct tfs_hdd_params *p);

/* Fault injection wrapper, configured by a spec string (see fault.c). */
struct tfs_backend *tfs_fault_backend(struct tfs_backend *inner, const char *spec);

/* Refusals of a write that are not the device failing (a full or
 * over-quota filesystem, a file too big): true for -ENOSPC, -EDQUOT,
 * -EFBIG.  The member (or the journal's store) stays in use. */
static inline bool tfs_space_error(int err)
{
	return err == -ENOSPC || err == -EDQUOT || err == -EFBIG;
}

#endif
