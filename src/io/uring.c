/* uring.c - the io engine: member data requests on io_uring.
 *
 * Owns: one io_uring per thread that does member I/O (the libfuse worker
 * threads, later the flusher).  A ring is created on a thread's first
 * request and destroyed when the thread exits, so no locks are needed.
 *
 * Invariants:
 *  1. tfs_uring_run() returns only when every request of the batch has a
 *     final result: nothing of the batch is left in flight on the ring.
 *  2. A short read or write is continued from where it stopped; a read that
 *     returns 0 has reached the member file's EOF and is final.
 *  3. cqe->res is a per-request result; the submit result only tells how
 *     many SQEs the kernel took.
 */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/log.h"
#include "tierfs/uring.h"

#define RING_DEPTH 128

struct ring {
	struct io_uring ring;
	bool ready;
	unsigned cap;		/* scratch arrays below, grown on demand */
	uint64_t *done;
	unsigned *requeue;
};

static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;

static void ring_free(void *p)
{
	struct ring *r = p;

	if (r->ready)
		io_uring_queue_exit(&r->ring);
	free(r->done);
	free(r->requeue);
	free(r);
}

static void ring_key_init(void)
{
	pthread_key_create(&ring_key, ring_free);
}

static struct ring *ring_get(void)
{
	struct ring *r;
	int rc;

	pthread_once(&ring_once, ring_key_init);
	r = pthread_getspecific(ring_key);
	if (r)
		return r;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	/* One thread owns the ring: completions are reaped only when it waits,
	 * with no task-work interrupts (kernel 6.1+; older ones take flags 0) */
	rc = io_uring_queue_init(RING_DEPTH, &r->ring,
				 IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
	if (rc == -EINVAL)
		rc = io_uring_queue_init(RING_DEPTH, &r->ring, 0);
	if (rc < 0) {
		tfs_err("io_uring_queue_init: %s", strerror(-rc));
		free(r);
		return NULL;
	}
	r->ready = true;
	pthread_setspecific(ring_key, r);
	return r;
}

/* Put request i (with done bytes already transferred) on the ring. */
static void prep(struct io_uring_sqe *sqe, struct tfs_mio *m, uint64_t done, unsigned i)
{
	char *buf = (char *)m->buf + done;
	unsigned len = m->len - (unsigned)done;

	switch (m->op) {
	case TFS_MIO_READ:
		io_uring_prep_read(sqe, m->fd, buf, len, m->off + done);
		break;
	case TFS_MIO_WRITE:
		io_uring_prep_write(sqe, m->fd, buf, len, m->off + done);
		break;
	case TFS_MIO_FSYNC:
		io_uring_prep_fsync(sqe, m->fd, 0);
		break;
	case TFS_MIO_FDATASYNC:
		io_uring_prep_fsync(sqe, m->fd, IORING_FSYNC_DATASYNC);
		break;
	}
	io_uring_sqe_set_data64(sqe, i);
}

int tfs_uring_run(struct tfs_mio *v, unsigned n)
{
	struct ring *r = ring_get();
	unsigned next = 0, inflight = 0, requeue_n = 0;
	unsigned *requeue;
	uint64_t *done;
	int rc = 0;

	if (!r)
		return -ENOMEM;
	if (n > r->cap) {
		uint64_t *d = realloc(r->done, n * sizeof(*d));
		unsigned *q = d ? realloc(r->requeue, n * sizeof(*q)) : NULL;

		if (d)
			r->done = d;
		if (!q)
			return -ENOMEM;
		r->requeue = q;
		r->cap = n;
	}
	done = r->done;
	requeue = r->requeue;
	for (unsigned i = 0; i < n; i++) {
		v[i].res = 0;
		done[i] = 0;
	}

	while (next < n || requeue_n || inflight) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		int ret;

		/* fill the submission queue: continuations first */
		for (;;) {
			struct io_uring_sqe *sqe;
			unsigned i;

			if (requeue_n)
				i = requeue[requeue_n - 1];
			else if (next < n)
				i = next;
			else
				break;
			sqe = io_uring_get_sqe(&r->ring);
			if (!sqe)
				break;
			if (requeue_n)
				requeue_n--;
			else
				next++;
			prep(sqe, &v[i], done[i], i);
			inflight++;
		}
		do {
			ret = io_uring_submit_and_wait(&r->ring, 1);
		} while (ret == -EINTR);
		if (ret < 0) {
			/* The ring is unusable; nothing new was queued. Reap what
			 * is in flight and fail the rest. */
			tfs_err("io_uring_submit: %s", strerror(-ret));
			rc = ret;
			if (!inflight)
				break;
		}
		io_uring_for_each_cqe(&r->ring, head, cqe) {
			unsigned i = (unsigned)io_uring_cqe_get_data64(cqe);
			struct tfs_mio *m = &v[i];
			int res = cqe->res;

			seen++;
			inflight--;
			if (res == -EAGAIN || res == -EINTR) {
				requeue[requeue_n++] = i;
			} else if (res < 0) {
				m->res = res;
			} else if (m->op == TFS_MIO_FSYNC || m->op == TFS_MIO_FDATASYNC) {
				m->res = 0;
			} else {
				done[i] += (unsigned)res;
				m->res = (int64_t)done[i];
				if (done[i] < m->len) {
					if (res > 0)
						requeue[requeue_n++] = i;	/* short: go on */
					else if (m->op == TFS_MIO_WRITE)
						m->res = -EIO;		/* a write that makes no progress */
					/* a read of 0 is EOF: final */
				}
			}
		}
		io_uring_cq_advance(&r->ring, seen);
		if (rc && !inflight) {
			for (unsigned i = 0; i < requeue_n; i++)
				v[requeue[i]].res = rc;
			for (; next < n; next++)
				v[next].res = rc;
			break;
		}
	}
	return 0;
}
