/* iostat.c - per-member I/O counters: the outermost wrapper of the member
 * seam, like `zpool iostat -v` or /sys/block/X/stat for each member.
 *
 * Owns: the counters of each member's data requests (struct tfs_mio
 * through submit): reads, writes and syncs, their bytes, errors, and the
 * time they took.  Every other call is forwarded untouched.
 *
 * Invariants:
 *  1. It sits above every other wrapper (the HDD model, faults), so it
 *     sees what the RAID asked and what the member (or its model) did.
 *  2. Counters are relaxed atomics, written by whichever thread submits;
 *     a report reads each on its own (not one snapshot).
 *  3. A request's time is its batch's: from the submit to its return,
 *     which waits for the slowest request of the batch, so the mean is an
 *     upper bound of the member's own service time.
 *  4. An error is a request that ended in -errno other than a full or
 *     over-quota filesystem (those are counted apart, tfs_space_error).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tierfs/member.h"

struct mstat {
	uint64_t reads, writes, syncs, read_bytes, write_bytes, errors, space_errors;
	uint64_t time_ns, max_ns;
};

struct iostat {
	uint32_t n;
	struct mstat m[];	/* [n] */
};

static struct tfs_member_ops iostat_ops;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void add(uint64_t *p, uint64_t v)
{
	__atomic_add_fetch(p, v, __ATOMIC_RELAXED);
}

static int iostat_submit(struct tfs_backend *be, struct tfs_mio *v, unsigned n)
{
	struct iostat *st = be->priv;
	uint64_t t0 = now_ns(), dt;
	int rc = be->inner->ops->submit(be->inner, v, n);

	dt = now_ns() - t0;
	for (unsigned i = 0; i < n; i++) {
		struct mstat *m;
		uint64_t max;

		if (v[i].member >= st->n)
			continue;
		m = &st->m[v[i].member];
		if (v[i].op == TFS_MIO_READ) {
			add(&m->reads, 1);
			add(&m->read_bytes, v[i].res > 0 ? (uint64_t)v[i].res : 0);
		} else if (v[i].op == TFS_MIO_WRITE) {
			add(&m->writes, 1);
			add(&m->write_bytes, v[i].res > 0 ? (uint64_t)v[i].res : 0);
		} else {
			add(&m->syncs, 1);
		}
		if (v[i].res < 0 || rc)
			add(tfs_space_error((int)(v[i].res < 0 ? v[i].res : rc)) ? &m->space_errors
										: &m->errors, 1);
		add(&m->time_ns, dt);
		max = __atomic_load_n(&m->max_ns, __ATOMIC_RELAXED);
		while (dt > max && !__atomic_compare_exchange_n(&m->max_ns, &max, dt, true,
								__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
	}
	return rc;
}

struct tfs_backend *tfs_iostat_backend(struct tfs_backend *inner, uint32_t n)
{
	struct tfs_backend *be = calloc(1, sizeof(*be));
	struct iostat *st = calloc(1, sizeof(*st) + n * sizeof(st->m[0]));

	if (!be || !st) {
		free(be);
		free(st);
		return NULL;
	}
	iostat_ops = tfs_forward_ops;
	iostat_ops.name = "iostat";
	iostat_ops.submit = iostat_submit;
	st->n = n;
	*be = (struct tfs_backend){ .ops = &iostat_ops, .inner = inner, .priv = st };
	return be;
}

static uint64_t get(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

int tfs_iostat_report(struct tfs_backend *be, char *buf, size_t len)
{
	const struct iostat *st;
	size_t l = 0;

	while (be && be->ops != &iostat_ops)
		be = be->inner;
	if (!be || len == 0)
		return 0;
	st = be->priv;
	for (uint32_t k = 0; k < st->n && l < len; k++) {
		const struct mstat *m = &st->m[k];
		uint64_t nreq = get(&m->reads) + get(&m->writes) + get(&m->syncs);

		l += (size_t)snprintf(buf + l, len - l,
			"member.%u.reads=%llu\nmember.%u.writes=%llu\nmember.%u.syncs=%llu\n"
			"member.%u.read_bytes=%llu\nmember.%u.write_bytes=%llu\n"
			"member.%u.errors=%llu\nmember.%u.space_errors=%llu\n"
			"member.%u.latency_us=%.1f\nmember.%u.latency_max_us=%.1f\n",
			k, (unsigned long long)get(&m->reads), k, (unsigned long long)get(&m->writes),
			k, (unsigned long long)get(&m->syncs), k,
			(unsigned long long)get(&m->read_bytes), k,
			(unsigned long long)get(&m->write_bytes), k,
			(unsigned long long)get(&m->errors), k,
			(unsigned long long)get(&m->space_errors), k,
			nreq ? (double)get(&m->time_ns) / (double)nreq / 1e3 : 0.0, k,
			(double)get(&m->max_ns) / 1e3);
	}
	return l >= len ? (int)len - 1 : (int)l;
}
