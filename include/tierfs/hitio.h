/* Cache hits read on io_uring by one I/O thread and answered from the
 * completion (src/fuse/hitio.c), so no FUSE worker sleeps on the SSD; the
 * job type and its read/write step are also the FUSE io_uring queues'
 * (transport.c: hits and write-back writes on their own rings). */
#ifndef TIERFS_HITIO_H
#define TIERFS_HITIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tfs_hitio;
struct io_uring_sqe;

/* One read (or, write: one write) of len bytes at off of fd into (from)
 * buf; finish(job, 0 or -errno) runs on the I/O thread once it is
 * complete (short transfers continued). */
struct tfs_hit_job {
	struct tfs_hit_job *next;
	bool write;
	int fd;
	void *buf;
	size_t len, done;
	uint64_t off;
	/* Runs on the I/O thread once: err 0 with len bytes in buf (a read
	 * that meets the end of the file early zero-fills the rest), or the
	 * read's -errno; the job is the caller's again. */
	void (*finish)(struct tfs_hit_job *j, int err);
};

/* Start the I/O thread and its ring.  Returns it, or NULL (logged) if
 * io_uring, a thread or memory is not available: the caller reads itself. */
struct tfs_hitio *tfs_hitio_start(void);
/* Hand j to the I/O thread (j->next and j->done are set here); it is
 * finished there, even if tfs_hitio_stop comes first. */
void tfs_hitio_queue(struct tfs_hitio *h, struct tfs_hit_job *j);
/* A read starts.  Returns true if others are under way (then the ring
 * pays: the I/O thread is awake or soon will be), false if it is alone (a
 * read is cheaper done on the worker, without the hand-off's wake-up).
 * Each enter has one leave, when the read is answered, wherever it ran. */
bool tfs_hitio_enter(struct tfs_hitio *h);
/* The read counted by tfs_hitio_enter is answered. */
void tfs_hitio_leave(struct tfs_hitio *h);
/* For a ring that carries jobs itself (a FUSE transport queue,
 * transport.c): prepare j's next read or write on sqe (j->done 0 at
 * first). */
void tfs_hit_job_prep(struct io_uring_sqe *sqe, struct tfs_hit_job *j);
/* Take the completion (res) of j's read or write: returns true if j needs
 * its next one prepared (a short transfer), false once j->finish has run. */
bool tfs_hit_job_done(struct tfs_hit_job *j, int res);
/* Finish every queued job, then stop the thread (h may be NULL). */
void tfs_hitio_stop(struct tfs_hitio *h);

#endif
