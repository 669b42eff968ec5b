/* hdd.c - HDD service-time model at the member seam.
 *
 * Owns: a wrapper backend that makes each member behave like one spinning
 * disk.  Every data request is given a service time
 *     seek(distance from the head's position) + rotational latency + transfer
 * and one actuator per member serves its requests one at a time, in the
 * order they reach it; different members work in parallel.  The real I/O is
 * done by the inner backend; the caller is then held until the modelled
 * completion time.  Namespace calls pass through unmodelled.
 *
 * Invariants:
 *  1. A member's clock (free_at) only moves forward; a request starts at
 *     max(now, free_at) and the member is busy until its completion.
 *  2. A request that starts where the previous one on the member ended
 *     (same file, next byte) pays no seek and no rotational latency:
 *     streaming runs at the media rate.
 *  3. Seek time grows with the square root of the distance, from the
 *     track-to-track time to the full stroke; the full stroke is chosen so
 *     that random positions average the configured seek time.
 *
 * Model positions: each member file sits in its own region of a notional
 * disk (by inode number), a byte offset maps to position region + offset.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tierfs/layout.h"
#include "tierfs/log.h"
#include "tierfs/member.h"

#define DISK_SPAN   (1ull << 40)	/* notional 1 TiB per member */
#define T2T_MS      0.8			/* track-to-track seek */

struct hdd_member {
	pthread_mutex_t lock;
	uint64_t free_at;		/* ns, CLOCK_MONOTONIC */
	uint64_t pos;			/* model position after the last request */
	uint64_t rng;
};

struct hdd {
	struct tfs_hdd_params p;
	double full_stroke_ms;
	struct hdd_member m[TFS_MAX_MEMBERS];
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
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

/* Service time in ns of one request on member state hm (caller holds lock). */
static uint64_t service_ns(struct hdd *h, struct hdd_member *hm, uint64_t pos, uint64_t len)
{
	double ms = 0;

	if (pos != hm->pos) {
		uint64_t d = pos > hm->pos ? pos - hm->pos : hm->pos - pos;
		double frac = (double)d / (double)DISK_SPAN;

		ms += T2T_MS + (h->full_stroke_ms - T2T_MS) * sqrt(frac > 1 ? 1 : frac);
		ms += (double)(xorshift(&hm->rng) % 1000000) / 1e6 * 60000.0 / h->p.rpm;
	}
	ms += (double)len / (h->p.mbps * 1e6) * 1000.0;
	hm->pos = pos + len;
	return (uint64_t)(ms * 1e6);
}

static int hdd_submit(struct tfs_backend *be, struct tfs_mio *v, unsigned n)
{
	struct hdd *h = be->priv;
	uint64_t start = now_ns(), done = start;
	int rc;

	for (unsigned i = 0; i < n; i++) {
		struct hdd_member *hm = &h->m[v[i].member];
		uint64_t len = v[i].op == TFS_MIO_READ || v[i].op == TFS_MIO_WRITE ? v[i].len : 0;
		uint64_t pos = len ? position(v[i].fd, v[i].off) : hm->pos;
		uint64_t t;

		pthread_mutex_lock(&hm->lock);
		t = hm->free_at > start ? hm->free_at : start;
		t += len ? service_ns(h, hm, pos, len)
			 : (uint64_t)(30000.0 / h->p.rpm * 1e6);	/* a flush: half a turn */
		hm->free_at = t;
		pthread_mutex_unlock(&hm->lock);
		if (t > done)
			done = t;
	}
	rc = be->inner->ops->submit(be->inner, v, n);
	if (done > now_ns()) {
		struct timespec ts = { (time_t)(done / 1000000000ull), (long)(done % 1000000000ull) };

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	return rc;
}

struct tfs_backend *tfs_hdd_backend(struct tfs_backend *inner, const struct tfs_hdd_params *p)
{
	static struct tfs_member_ops ops;
	struct tfs_backend *be = calloc(1, sizeof(*be));
	struct hdd *h = calloc(1, sizeof(*h));

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
	for (unsigned k = 0; k < TFS_MAX_MEMBERS; k++) {
		pthread_mutex_init(&h->m[k].lock, NULL);
		h->m[k].rng = 0x2545F4914F6CDD1Dull * (k + 1);
	}
	be->ops = &ops;
	be->inner = inner;
	be->priv = h;
	tfs_info("member model: hdd, %.1f ms average seek, %u rpm, %.0f MB/s", p->seek_ms, p->rpm,
		 p->mbps);
	return be;
}
