/* The member seam: every byte and every name tierfs puts on a member goes
 * through one backend ops table.  Backends stack: the POSIX backend does the
 * work (data on io_uring, uring.h); wrappers (fault injection, fault.c; the
 * HDD service-time model, hdd.c) hold an inner backend and forward to it.
 *
 * Every call returns >= 0 on success and -errno on failure (the system
 * call's errno; a wrapper may inject -EIO and others).  m is the member
 * index.  Names are single path components relative to a directory fd
 * obtained from open_dir(), which never leaves the member tree and never
 * follows symlinks; the POSIX backend follows no symlink in a name either,
 * except fchmodat (callers never chmod a symlink).  An empty name means
 * dirfd itself (fstatat, fchownat, fchmodat, utimensat).
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

#include "tierfs/uring.h"	/* struct tfs_mio: one data request */

struct tfs_backend;

struct tfs_member_ops {
	const char *name;
	/* Perform all n requests as one batch; returns 0 when every request
	 * ran (look at each res), -errno if the batch could not be issued. */
	int (*submit)(struct tfs_backend *be, struct tfs_mio *v, unsigned n);

	/* O_PATH fd of directory relpath ("": dirfd itself) under dirfd (-1:
	 * the member's tree root), resolved beneath it without following any
	 * symlink or crossing a mount.  Returns the fd (the caller's to close)
	 * or -errno (-ENOENT, -ENOTDIR, -ELOOP for a symlink, -EXDEV). */
	int (*open_dir)(struct tfs_backend *be, uint32_t m, int dirfd, const char *relpath);
	/* openat(2) of name under dirfd (O_NOFOLLOW, O_CLOEXEC added).
	 * Returns the fd (the caller's to close) or -errno. */
	int (*openat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		      int flags, mode_t mode);
	/* lstat of name under dirfd (name "": dirfd itself).  Returns 0 or
	 * -errno. */
	int (*fstatat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		       struct stat *st);
	/* fstat(2) of fd.  Returns 0 or -errno. */
	int (*fstat)(struct tfs_backend *be, uint32_t m, int fd, struct stat *st);
	/* mkdirat(2).  Returns 0 or -errno (-EEXIST). */
	int (*mkdirat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		       mode_t mode);
	/* mknodat(2): a regular file, FIFO, socket or device.  Returns 0 or
	 * -errno (-EEXIST). */
	int (*mknodat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
		       mode_t mode, dev_t rdev);
	/* symlinkat(2): name under dirfd pointing at target.  Returns 0 or
	 * -errno (-EEXIST). */
	int (*symlinkat)(struct tfs_backend *be, uint32_t m, const char *target, int dirfd,
			 const char *name);
	/* readlinkat(2) into buf (no NUL added).  Returns the target's
	 * length or -errno. */
	int (*readlinkat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
			  char *buf, size_t len);
	/* linkat(2) of (odirfd, oname) as (ndirfd, nname), no symlink
	 * followed.  Returns 0 or -errno. */
	int (*linkat)(struct tfs_backend *be, uint32_t m, int odirfd, const char *oname,
		      int ndirfd, const char *nname);
	/* unlinkat(2) (flags AT_REMOVEDIR for a directory).  Returns 0 or
	 * -errno. */
	int (*unlinkat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
			int flags);
	/* renameat2(2) with RENAME_* flags.  Returns 0 or -errno. */
	int (*renameat2)(struct tfs_backend *be, uint32_t m, int odirfd, const char *oname,
			 int ndirfd, const char *nname, unsigned flags);
	/* Change the owner of name (no symlink followed; "": dirfd itself);
	 * -1 keeps one.  Returns 0 or -errno. */
	int (*fchownat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
			uid_t uid, gid_t gid);
	/* Change the mode of name ("": dirfd itself, which must not be
	 * O_PATH).  Returns 0 or -errno. */
	int (*fchmodat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
			mode_t mode);
	/* Set the times of name ("": dirfd itself, not O_PATH), UTIME_NOW
	 * and UTIME_OMIT as utimensat(2).  Returns 0 or -errno. */
	int (*utimensat)(struct tfs_backend *be, uint32_t m, int dirfd, const char *name,
			 const struct timespec ts[2]);
	/* ftruncate(2) of fd to len.  Returns 0 or -errno. */
	int (*ftruncate)(struct tfs_backend *be, uint32_t m, int fd, uint64_t len);
	/* fallocate(2) of fd.  Returns 0 or -errno (-EOPNOTSUPP: the
	 * member's filesystem lacks the mode; -ENOSPC/-EDQUOT). */
	int (*fallocate)(struct tfs_backend *be, uint32_t m, int fd, int mode,
			 uint64_t off, uint64_t len);
	/* xattrs on any fd, O_PATH included.  getxattr of fd into buf (len 0: the size needed).  Returns the
	 * value's length or -errno (-ENODATA: no such name, -ERANGE). */
	int (*getxattr)(struct tfs_backend *be, uint32_t m, int fd, const char *name,
			void *buf, size_t len);
	/* setxattr of fd (flags XATTR_CREATE/REPLACE).  Returns 0 or -errno. */
	int (*setxattr)(struct tfs_backend *be, uint32_t m, int fd, const char *name,
			const void *buf, size_t len, int flags);
	/* listxattr of fd into buf (len 0: the size needed).  Returns the
	 * list's length or -errno (-ERANGE). */
	int (*listxattr)(struct tfs_backend *be, uint32_t m, int fd, char *buf, size_t len);
	/* removexattr of fd.  Returns 0 or -errno (-ENODATA). */
	int (*removexattr)(struct tfs_backend *be, uint32_t m, int fd, const char *name);
	/* statvfs of member m's filesystem.  Returns 0 or -errno. */
	int (*statvfs)(struct tfs_backend *be, uint32_t m, struct statvfs *sv);
	/* syncfs(2) of member m's filesystem.  Returns 0 or -errno. */
	int (*syncfs)(struct tfs_backend *be, uint32_t m);
};

struct tfs_backend {
	const struct tfs_member_ops *ops;
	struct tfs_backend *inner;	/* wrappers forward here */
	void *priv;
};

/* The real thing: tree roots are MEMBER/root, held as O_PATH fds (the
 * caller's; n of them, copied).  Returns the backend, or NULL without
 * memory. */
struct tfs_backend *tfs_posix_backend(const int *rootfd, uint32_t n);

/* Point member m of the POSIX backend under be at a new tree root (a
 * replacement member); the old fd is the caller's to close.  Finds the
 * POSIX backend below any wrappers.  Returns 0, or -EINVAL if there is
 * none under be. */
int tfs_posix_set_root(struct tfs_backend *be, uint32_t m, int rootfd);

/* An ops table forwarding every call to be->inner, for wrappers to copy
 * (its functions return what the inner backend returns). */
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
/* inner behind the HDD service-time model of p.  Returns the wrapper, or
 * NULL (logged) for parameters out of range or without memory. */
struct tfs_backend *tfs_hdd_backend(struct tfs_backend *inner, const struct tfs_hdd_params *p);

/* Fault injection wrapper, configured by a spec string (see fault.c; bad
 * terms are logged and ignored).  Returns the wrapper, or NULL without
 * memory. */
struct tfs_backend *tfs_fault_backend(struct tfs_backend *inner, const char *spec);

/* Per-member I/O counters (iostat.c): inner behind a wrapper that counts
 * each of the n members' data requests (reads, writes, syncs, bytes,
 * errors, time).  Returns the wrapper, or NULL without memory. */
struct tfs_backend *tfs_iostat_backend(struct tfs_backend *inner, uint32_t n);
/* The "member.N.*" status lines of the iostat wrapper in be's stack (none
 * there: nothing) into buf.  Returns their length, cut at len - 1. */
int tfs_iostat_report(struct tfs_backend *be, char *buf, size_t len);

/* Returns true if err is a refusal of a write that is not the device
 * failing (a full or over-quota filesystem, a file too big: -ENOSPC,
 * -EDQUOT, -EFBIG); the member (or the journal's store) stays in use. */
static inline bool tfs_space_error(int err)
{
	return err == -ENOSPC || err == -EDQUOT || err == -EFBIG;
}

#endif
