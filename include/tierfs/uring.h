/* Per-thread io_uring (src/io/uring.c): runs one batch of member requests
 * to completion on the calling thread's ring. */
#ifndef TIERFS_URING_H
#define TIERFS_URING_H

#include <stdint.h>

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

/* Run a batch of member requests on the calling thread's io_uring and wait
 * for all of them.  Short transfers are continued, -EAGAIN/-EINTR retried;
 * each v[i].res ends as bytes done or -errno.  Returns 0, or -errno when no
 * ring could be set up. */
int tfs_uring_run(struct tfs_mio *v, unsigned n);

#endif
