/* Per-thread io_uring (src/io/uring.c): runs one batch of member requests
 * to completion on the calling thread's ring. */
#ifndef TIERFS_URING_H
#define TIERFS_URING_H
#include "tierfs/member.h"

/* Run a batch of member requests on the calling thread's io_uring and wait
 * for all of them.  Short transfers are continued, -EAGAIN/-EINTR retried;
 * each v[i].res ends as bytes done or -errno.  Returns 0, or -errno when no
 * ring could be set up. */
int tfs_uring_run(struct tfs_mio *v, unsigned n);

#endif
