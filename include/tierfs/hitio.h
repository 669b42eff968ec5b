/* Cache hits read on io_uring by one I/O thread and answered from the
 * completion (src/fuse/hitio.c), so no FUSE worker sleeps on the SSD. */
#ifndef TIERFS_HITIO_H
#define TIERFS_HITIO_H

#include <stddef.h>
#include <stdint.h>

struct tfs_hitio;

/* One read of len bytes at off of fd into buf; finish(job, 0 or -errno)
 * runs on the I/O thread once it is complete (short reads continued). */
struct tfs_hit_job {
	struct tfs_hit_job *next;
	int fd;
	void *buf;
	size_t len, done;
	uint64_t off;
	void (*finish)(struct tfs_hit_job *j, int err);
};

/* NULL if io_uring or memory is not available (the caller reads itself). */
struct tfs_hitio *tfs_hitio_start(void);
void tfs_hitio_queue(struct tfs_hitio *h, struct tfs_hit_job *j);
/* A read starts: true if others are under way (then the ring pays: the I/O
 * thread is awake or soon will be; alone, a read is cheaper done on the
 * worker, without the hand-off's wake-up).  Each enter has one leave, when
 * the read is answered. */
bool tfs_hitio_enter(struct tfs_hitio *h);
void tfs_hitio_leave(struct tfs_hitio *h);
/* Finish every queued job, then stop the thread (h may be NULL). */
void tfs_hitio_stop(struct tfs_hitio *h);

#endif
