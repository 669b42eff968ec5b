/* hitio.c - cache hits read on io_uring and answered from the completion.
 *
 * Owns: one I/O thread and its ring.  A FUSE worker that finds a read the
 * SSD tier holds whole (tfs_cache_hit_begin pins the slot) queues it here
 * and goes back to /dev/fuse instead of sleeping in the data file's read;
 * the I/O thread submits the read, and on its completion replies, unpins
 * and frees.  Without it the hits in flight are bounded by the workers,
 * each asleep for the SSD's latency (docs/CACHE_BENCH.md §a3).  The job's
 * read (or write) step is shared with the FUSE io_uring queues, which
 * carry hits and write-back writes on their own rings (transport.c).
 *
 * Invariants:
 *  1. Only the I/O thread touches the ring after tfs_hitio_start, so the
 *     completions (task work of the submitter) run in its context.
 *  2. While the I/O thread may sleep in the ring, a read of its eventfd is
 *     armed on the ring; a worker that queues a job while `sleeping` is set
 *     clears it and writes the eventfd, so a job never waits for another
 *     completion to be noticed.
 *  3. Every queued job is completed (replied, unpinned, freed) before
 *     tfs_hitio_stop returns.
 */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "tierfs/hitio.h"
#include "tierfs/log.h"

#define DEPTH 256
#define EVENT_TAG 1	/* user_data of the eventfd read; jobs are pointers */

struct tfs_hitio {
	struct io_uring ring;
	int efd;
	uint64_t ebuf;
	pthread_t tid;
	pthread_mutex_t lock;
	struct tfs_hit_job *head, **tail;
	bool sleeping, stopping;
	unsigned inflight;
	unsigned outstanding;	/* reads between tfs_hitio_enter and _leave */
};

bool tfs_hitio_enter(struct tfs_hitio *h)
{
	return __atomic_fetch_add(&h->outstanding, 1, __ATOMIC_RELAXED) > 0;
}

void tfs_hitio_leave(struct tfs_hitio *h)
{
	__atomic_fetch_sub(&h->outstanding, 1, __ATOMIC_RELAXED);
}

void tfs_hit_job_prep(struct io_uring_sqe *sqe, struct tfs_hit_job *j)
{
	if (j->write)
		io_uring_prep_write(sqe, j->fd, (char *)j->buf + j->done,
				    (unsigned)(j->len - j->done), j->off + j->done);
	else
		io_uring_prep_read(sqe, j->fd, (char *)j->buf + j->done,
				   (unsigned)(j->len - j->done), j->off + j->done);
}

bool tfs_hit_job_done(struct tfs_hit_job *j, int res)
{
	if (res == -EINTR || res == -EAGAIN)
		return true;
	if (res > 0) {
		j->done += (size_t)res;
		if (j->done < j->len)
			return true;
	}
	if (res == 0 && j->done < j->len && j->write)
		res = -EIO;	/* a write that makes no progress */
	else if (res == 0 && j->done < j->len)	/* preallocated data file: not expected */
		memset((char *)j->buf + j->done, 0, j->len - j->done);
	j->finish(j, res < 0 ? res : 0);
	return false;
}

static void submit_job(struct tfs_hitio *h, struct tfs_hit_job *j)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&h->ring)))
		io_uring_submit(&h->ring);
	tfs_hit_job_prep(sqe, j);
	io_uring_sqe_set_data(sqe, j);
	h->inflight++;
}

static void arm_event(struct tfs_hitio *h)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&h->ring)))
		io_uring_submit(&h->ring);
	io_uring_prep_read(sqe, h->efd, &h->ebuf, sizeof(h->ebuf), 0);
	io_uring_sqe_set_data64(sqe, EVENT_TAG);
}

/* A completion: continue a short read, else finish the job. */
static void complete(struct tfs_hitio *h, struct tfs_hit_job *j, int res)
{
	h->inflight--;
	if (tfs_hit_job_done(j, res))
		submit_job(h, j);
}

static void *io_thread(void *arg)
{
	struct tfs_hitio *h = arg;
	bool armed = false;

	for (;;) {
		struct tfs_hit_job *jobs;
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;

		pthread_mutex_lock(&h->lock);
		jobs = h->head;
		h->head = NULL;
		h->tail = &h->head;
		if (!jobs && h->stopping && h->inflight == 0) {
			pthread_mutex_unlock(&h->lock);
			break;
		}
		/* nothing new: the next wait may sleep, so workers must wake it */
		if (!jobs)
			h->sleeping = true;
		pthread_mutex_unlock(&h->lock);
		for (struct tfs_hit_job *j = jobs, *next; j; j = next) {
			next = j->next;
			submit_job(h, j);
		}
		if (!armed) {
			arm_event(h);
			armed = true;
		}
		io_uring_submit_and_wait(&h->ring, jobs ? 0 : 1);
		io_uring_for_each_cqe(&h->ring, head, cqe) {
			seen++;
			if (cqe->user_data == EVENT_TAG)
				armed = false;
			else
				complete(h, io_uring_cqe_get_data(cqe), cqe->res);
		}
		io_uring_cq_advance(&h->ring, seen);
	}
	return NULL;
}

struct tfs_hitio *tfs_hitio_start(void)
{
	struct tfs_hitio *h = calloc(1, sizeof(*h));
	int rc;

	if (!h)
		return NULL;
	h->efd = eventfd(0, EFD_CLOEXEC);
	if (h->efd < 0) {
		free(h);
		return NULL;
	}
	pthread_mutex_init(&h->lock, NULL);
	h->tail = &h->head;
	/* only the I/O thread submits, so completions (task work of the
	 * submitter) run there; COOP: no interrupt while it is in user space */
	rc = io_uring_queue_init(DEPTH, &h->ring, IORING_SETUP_COOP_TASKRUN);
	if (rc == -EINVAL)
		rc = io_uring_queue_init(DEPTH, &h->ring, 0);
	if (rc == 0 && (rc = pthread_create(&h->tid, NULL, io_thread, h)) != 0) {
		io_uring_queue_exit(&h->ring);
		rc = -rc;
	}
	if (rc) {
		tfs_warn("cache hits stay on the FUSE workers: io_uring: %s", strerror(-rc));
		close(h->efd);
		free(h);
		return NULL;
	}
	return h;
}

void tfs_hitio_queue(struct tfs_hitio *h, struct tfs_hit_job *j)
{
	bool wake;

	j->next = NULL;
	j->done = 0;
	pthread_mutex_lock(&h->lock);
	*h->tail = j;
	h->tail = &j->next;
	wake = h->sleeping;
	h->sleeping = false;
	pthread_mutex_unlock(&h->lock);
	if (wake) {
		uint64_t one = 1;

		if (write(h->efd, &one, sizeof(one)) < 0)
			tfs_err("cache hits: eventfd: %s", strerror(errno));
	}
}

void tfs_hitio_stop(struct tfs_hitio *h)
{
	uint64_t one = 1;

	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	h->stopping = true;
	pthread_mutex_unlock(&h->lock);
	if (write(h->efd, &one, sizeof(one)) < 0)
		tfs_err("cache hits: eventfd: %s", strerror(errno));
	pthread_join(h->tid, NULL);
	io_uring_queue_exit(&h->ring);
	close(h->efd);
	pthread_mutex_destroy(&h->lock);
	free(h);
}
