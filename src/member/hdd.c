/* hdd.c - HDD service-time model at the member seam.
 *
 * Owns: a wrapper backend that makes each member behave like one spinning
 * disk with a native command queue.  Every data request is given a service
 * time
 *     seek(distance from the head) + rotation(to the target's angle) + transfer
 * and one actuator per member serves the requests waiting for it one at a
 * time; different members work in parallel.  The real I/O is done by the
 * inner backend at once; the caller is then held until the modelled
 * completion time.  Namespace calls pass through unmodelled.
 *
 * Scheduling (-o hdd_ncq=N): whenever the actuator frees, it serves next,
 * among the N oldest requests waiting for it, the one with the shortest
 * positioning time from where the head is (SPTF, as NCQ firmware does).
 * N = 1 is arrival order.  A cache flush (fsync) is a barrier, as the
 * non-queued FLUSH CACHE command is: it waits for every older request and
 * no younger one passes it.
 *
 * Invariants:
 *  1. Time is model time: a member's clock (free_at) only moves forward; a
 *     decision is taken at D = max(free_at, oldest arrival) and considers
 *     only requests that had arrived by D, so the schedule does not depend
 *     on when a thread gets round to taking the decision.
 *  2. A request that starts where the previous one on the member ended
 *     (same file, next byte) pays no seek and no rotation: streaming runs
 *     at the media rate (the drive's read-ahead / write-back of a track).
 *  3. Seek time grows with the square root of the distance, from the
 *     track-to-track time to the full stroke; the full stroke is chosen so
 *     that random positions average the configured seek time.
 *  4. The platter turns with model time (angle = t / period); a byte's
 *     angle is its position modulo one track (the bytes that pass under the
 *     head in one turn at the media rate).  Random targets thus wait half a
 *     turn on average, and the scheduler can see which target comes first.
 *  5. A request passed over by a younger one more than 2*N times is served
 *     next (starvation guard), ahead of any shorter one.
 *  6. Requests of one batch wait together: the caller returns when the last
 *     of them completes.
 *
 * A request's life (struct hdd_req):
 *     queued    --schedule_locked()-->  scheduled (done time known)
 *     scheduled --hdd_submit() sleeps until done-->  returned to the caller
 * There is no scheduler thread.  One caller with a queued request, the
 * member's timer, sleeps until free_at and takes the decisions due then
 * (for its own request or another's); the others sleep until their request
 * is scheduled (each thread has its own condition variable), so a
 * completion wakes two threads, not every waiter: a real disk's queue
 * costs the host no CPU, and the model should not either.  A timer whose
 * request is scheduled hands the role to a waiter as it leaves.
 *
 * Model positions: each member file sits in its own region of a notional
 * disk (by inode number), a byte offset maps to position region + offset.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tierfs/layout.h"
#include "tierfs/log.h"
#include "tierfs/member.h"
#include "tierfs/scratch.h"

#define DISK_SPAN   (1ull << 40)	/* notional 1 TiB per member */
#define T2T_MS      TFS_HDD_T2T_MS	/* track-to-track seek */

struct hdd_req {
	struct hdd_req *next, *prev;	/* member queue, oldest first */
	uint64_t arrival;		/* ns, CLOCK_MONOTONIC */
	uint64_t pos, len;		/* len 0: a cache flush */
	uint64_t done;			/* modelled completion, once scheduled */
	unsigned passed;		/* times a younger request went first */
	bool scheduled;
	bool waiting;			/* its thread sleeps on cv for it */
	pthread_cond_t *cv;		/* its thread's (one request waited at a time) */
};

struct hdd_member {
	pthread_mutex_t lock;
	struct hdd_req *timer;		/* the waiter sleeping until free_at, or NULL */
	uint64_t free_at;		/* ns, CLOCK_MONOTONIC */
	uint64_t pos;			/* model position after the last request */
	struct hdd_req *head, *tail;	/* waiting requests, arrival order */
};

struct hdd {
	struct tfs_hdd_params p;
	double full_stroke_ms;
	double period_ns;		/* one turn */
	double track_bytes;		/* bytes under the head in one turn */
	struct hdd_member m[TFS_MAX_MEMBERS];
};


static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct timespec to_ts(uint64_t ns)
{
	return (struct timespec){ (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
}

/* Model position of (fd's file, offset). */
static uint64_t position(int fd, uint64_t off)
{
	struct stat st;
	uint64_t region = 0;

	if (fstat(fd, &st) == 0)
		region = ((uint64_t)st.st_ino * 0x9E3779B97F4A7C15ull) % (DISK_SPAN / 2);
	return region + off % (DISK_SPAN / 2);
}

/* ------------------------------------------------------------------ */
/* Service time                                                         */
/* ------------------------------------------------------------------ */

static double seek_ns(const struct hdd *h, uint64_t from, uint64_t to)
{
	double frac = (double)(to > from ? to - from : from - to) / (double)DISK_SPAN;

	return (T2T_MS + (h->full_stroke_ms - T2T_MS) * sqrt(frac > 1 ? 1 : frac)) * 1e6;
}

/* Fraction of a turn in [0, 1). */
static double turn_frac(double x)
{
	return x - floor(x);
}

/* Positioning time in ns of r if the actuator starts on it at time t. */
static double positioning_ns(const struct hdd *h, const struct hdd_member *hm,
			     const struct hdd_req *r, uint64_t t)
{
	double s, head, target;

	if (r->pos == hm->pos)
		return 0;	/* invariant 2 */
	s = seek_ns(h, hm->pos, r->pos);
	head = turn_frac(((double)t + s) / h->period_ns);
	target = turn_frac((double)r->pos / h->track_bytes);
	return s + turn_frac(target - head) * h->period_ns;
}

static double service_ns(const struct hdd *h, const struct hdd_member *hm,
			 const struct hdd_req *r, uint64_t t)
{
	if (!r->len)
		return h->period_ns / 2;	/* a flush: half a turn */
	return positioning_ns(h, hm, r, t) + (double)r->len / (h->p.mbps * 1e6) * 1e9;
}

/* ------------------------------------------------------------------ */
/* The queue and the scheduler                                          */
/* ------------------------------------------------------------------ */

static void enqueue_locked(struct hdd_member *hm, struct hdd_req *r)
{
	r->next = NULL;
	r->prev = hm->tail;
	if (hm->tail)
		hm->tail->next = r;
	else
		hm->head = r;
	hm->tail = r;
}

static void dequeue_locked(struct hdd_member *hm, struct hdd_req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		hm->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		hm->tail = r->prev;
}

/* The request to serve at time t (invariants 1, 5 and the flush barrier). */
static struct hdd_req *choose_locked(const struct hdd *h, struct hdd_member *hm, uint64_t t)
{
	struct hdd_req *best = hm->head, *r;
	double best_ns = INFINITY;
	unsigned k = 0;

	if (!best->len)
		return best;	/* a flush at the front goes now */
	for (r = hm->head; r && k < h->p.ncq && r->len && r->arrival <= t; r = r->next, k++) {
		double ns;

		if (r->passed > 2 * h->p.ncq)
			return r;	/* the oldest starving one */
		ns = positioning_ns(h, hm, r, t);
		if (ns < best_ns) {
			best = r;
			best_ns = ns;
		}
	}
	for (r = hm->head; r != best; r = r->next)
		r->passed++;
	return best;
}

/* Take every decision due by now: while the actuator is free and requests
 * wait, serve the one choose_locked() picks. */
static void schedule_locked(const struct hdd *h, struct hdd_member *hm, uint64_t now)
{
	while (hm->head && hm->free_at <= now) {
		uint64_t t = hm->free_at > hm->head->arrival ? hm->free_at : hm->head->arrival;
		struct hdd_req *r = choose_locked(h, hm, t);

		dequeue_locked(hm, r);
		r->done = t + (uint64_t)service_ns(h, hm, r, t);
		if (r->len)
			hm->pos = r->pos + r->len;
		hm->free_at = r->done;
		r->scheduled = true;
		if (r->waiting)
			pthread_cond_signal(r->cv);
	}
}

/* The calling thread's condition variable (CLOCK_MONOTONIC). */
static pthread_cond_t *thread_cond(void)
{
	static __thread pthread_cond_t cv;
	static __thread bool init;

	if (!init) {
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&cv, &ca);
		pthread_condattr_destroy(&ca);
		init = true;
	}
	return &cv;
}

/* Wait until r has been scheduled; returns its completion time. */
static uint64_t wait_scheduled(const struct hdd *h, struct hdd_member *hm, struct hdd_req *r)
{
	uint64_t done;

	pthread_mutex_lock(&hm->lock);
	r->cv = thread_cond();
	for (;;) {
		schedule_locked(h, hm, now_ns());
		if (r->scheduled)
			break;
		r->waiting = true;
		if (!hm->timer) {
			struct timespec ts = to_ts(hm->free_at);	/* > now: busy */

			hm->timer = r;
			pthread_cond_timedwait(r->cv, &hm->lock, &ts);
			hm->timer = NULL;
		} else {
			pthread_cond_wait(r->cv, &hm->lock);
		}
		r->waiting = false;
	}
	/* the next decision needs a timer: hand the role to a waiter */
	for (struct hdd_req *q = hm->head; q && !hm->timer; q = q->next)
		if (q->waiting) {
			pthread_cond_signal(q->cv);
			break;
		}
	done = r->done;
	pthread_mutex_unlock(&hm->lock);
	return done;
}

/* Per-thread request array for one batch (scratch.c): only used while the
 * thread is inside hdd_submit, so growing it never moves a queued request. */
static struct hdd_req *batch_reqs(unsigned n)
{
	return tfs_scratch_array(TFS_SCR_HDD, n, sizeof(struct hdd_req));
}

static int hdd_submit(struct tfs_backend *be, struct tfs_mio *v, unsigned n)
{
	struct hdd *h = be->priv;
	struct hdd_req *rq = batch_reqs(n);
	uint64_t done = 0;
	struct timespec ts;
	int rc;

	if (!rq)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		struct hdd_member *hm = &h->m[v[i].member];
		bool data = v[i].op == TFS_MIO_READ || v[i].op == TFS_MIO_WRITE;

		rq[i] = (struct hdd_req){ .len = data ? v[i].len : 0 };
		if (rq[i].len)
			rq[i].pos = position(v[i].fd, v[i].off);
		pthread_mutex_lock(&hm->lock);
		rq[i].arrival = now_ns();	/* under the lock: queue order = arrival order */
		enqueue_locked(hm, &rq[i]);
		pthread_mutex_unlock(&hm->lock);
	}
	rc = be->inner->ops->submit(be->inner, v, n);
	for (unsigned i = 0; i < n; i++) {
		uint64_t t = wait_scheduled(h, &h->m[v[i].member], &rq[i]);

		if (t > done)
			done = t;
	}
	ts = to_ts(done);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
	return rc;
}

struct tfs_backend *tfs_hdd_backend(struct tfs_backend *inner, const struct tfs_hdd_params *p)
{
	static struct tfs_member_ops ops;
	struct tfs_backend *be;
	struct hdd *h;

	if (p->ncq < 1 || p->ncq > TFS_HDD_NCQ_MAX || p->rpm == 0 || p->mbps <= 0 ||
	    p->seek_ms < T2T_MS) {
		tfs_err("member model: hdd_ncq must be 1..%d, hdd_rpm and hdd_mbps positive, "
			"hdd_seek_ms at least %.1f", TFS_HDD_NCQ_MAX, T2T_MS);
		return NULL;
	}
	be = calloc(1, sizeof(*be));
	h = calloc(1, sizeof(*h));
	if (!be || !h) {
		free(be);
		free(h);
		return NULL;
	}
	ops = tfs_forward_ops;
	ops.name = "hdd";
	ops.submit = hdd_submit;
	h->p = *p;
	/* random positions average 8/15 of the full stroke's sqrt term */
	h->full_stroke_ms = T2T_MS + (p->seek_ms - T2T_MS) * 15.0 / 8.0;
	h->period_ns = 60e9 / p->rpm;
	h->track_bytes = p->mbps * 1e6 * 60.0 / p->rpm;
	for (unsigned k = 0; k < TFS_MAX_MEMBERS; k++)
		pthread_mutex_init(&h->m[k].lock, NULL);
	be->ops = &ops;
	be->inner = inner;
	be->priv = h;
	tfs_info("member model: hdd, %.1f ms average seek, %u rpm, %.0f MB/s, NCQ depth %u",
		 p->seek_ms, p->rpm, p->mbps, p->ncq);
	return be;
}
