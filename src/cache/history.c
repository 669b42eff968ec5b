/* history.c - the tier's counters beyond this mount: totals since the
 * cache was made (or last reset), kept in the store across remounts, and
 * the read hit ratio over the last 5 minutes, hour and day.
 *
 * Owns: c->hist.  The counts themselves are c->st's (since this mount,
 * counted by the request paths); history folds them in.
 *
 * Invariants:
 *  1. A total is the value the store held at mount (hist.base) plus this
 *     mount's count: it is saved (info "stats.total") by the flusher at
 *     most once a minute while it changed, and at a clean stop; a daemon
 *     killed or a power cut loses at most the last minute of counts, never
 *     the extents (these are statistics, outside the crash argument).
 *  2. A window W (300 s, 3600 s, 86400 s) holds exponentially decaying
 *     sums of read requests that hit and missed: at each fold the sums
 *     are scaled by exp(-dt/W) and the requests counted since the last
 *     fold are added, so a request weighs e^-1 after W.  They are saved
 *     with the wall-clock time of their fold (info "stats.window"), and a
 *     mount decays them by the time the array was down: a cache unused
 *     for a day shows its old day mostly gone.
 *  3. Under c->lock: every fold, load and reset; saving writes the store
 *     outside it.  A reset zeroes the counts, the totals and the windows
 *     in one c->lock section.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tierfs/log.h"
#include "cache_i.h"

static const double window_s[C_WINDOWS] = { 300, 3600, 86400 };

/* The counters kept across remounts, in the order they are saved. */
static uint64_t *field(struct cstats *st, unsigned i)
{
	uint64_t *const f[C_TOTALS] = {
		&st->read_req_hits, &st->read_req_misses, &st->write_req_hits,
		&st->write_req_misses, &st->read_hit_bytes, &st->read_miss_bytes,
		&st->seq_bypass, &st->full_bypass, &st->write_around,
		&st->promotions, &st->evictions, &st->flushed_bytes,
	};

	return f[i];
}

static double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Decays the windows to now; counts not folded yet are added.  Under
 * c->lock. */
static void fold(struct tfs_cache *c, double now)
{
	struct chist *h = &c->hist;
	double dt = now > h->wt ? now - h->wt : 0;
	uint64_t hits = c->st.read_req_hits - h->folded[0];
	uint64_t misses = c->st.read_req_misses - h->folded[1];

	for (unsigned w = 0; w < C_WINDOWS; w++) {
		double k = exp(-dt / window_s[w]);

		h->win[w][0] = h->win[w][0] * k + (double)hits;
		h->win[w][1] = h->win[w][1] * k + (double)misses;
	}
	h->folded[0] = c->st.read_req_hits;
	h->folded[1] = c->st.read_req_misses;
	h->wt = now;
}

void c_history_load(struct tfs_cache *c)
{
	struct chist *h = &c->hist;
	char v[256];
	double t = 0, w[C_WINDOWS][2] = { { 0 } };
	unsigned long long b[C_TOTALS] = { 0 };
	int n = 0;

	memset(h, 0, sizeof(*h));
	h->wt = wall_now();
	if (tfs_cstore_info_get(c->cs, "stats.total", v, sizeof(v)) == 0) {
		char *p = v;

		if (strncmp(p, "1 ", 2) == 0)
			for (p += 2; n < C_TOTALS && sscanf(p, "%llu", &b[n]) == 1; n++)
				p = strchr(p, ' ') ? strchr(p, ' ') + 1 : p + strlen(p);
		for (int i = 0; i < n; i++)
			h->base[i] = b[i];
	}
	if (tfs_cstore_info_get(c->cs, "stats.window", v, sizeof(v)) == 0 &&
	    sscanf(v, "1 %lf %lf %lf %lf %lf %lf %lf", &t, &w[0][0], &w[0][1], &w[1][0], &w[1][1],
		   &w[2][0], &w[2][1]) == 7 && t > 0) {
		memcpy(h->win, w, sizeof(w));
		h->wt = t;
		fold(c, wall_now());	/* the time it was down (invariant 2) */
	}
}

uint64_t c_history_total(struct tfs_cache *c, unsigned i)
{
	return c->hist.base[i] + *field(&c->st, i);
}

void c_history_save(struct tfs_cache *c, bool force)
{
	char tot[256], win[256];
	uint32_t now = c_now();
	size_t l;
	int rc;

	pthread_mutex_lock(&c->lock);
	if (!force && (now - c->hist.saved_t < 60 * 16 ||
		       memcmp(&c->hist.saved_st, &c->st, sizeof(c->st)) == 0)) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	fold(c, wall_now());
	l = (size_t)snprintf(tot, sizeof(tot), "1");
	for (unsigned i = 0; i < C_TOTALS && l < sizeof(tot); i++)
		l += (size_t)snprintf(tot + l, sizeof(tot) - l, " %" PRIu64, c_history_total(c, i));
	snprintf(win, sizeof(win), "1 %.3f %.6g %.6g %.6g %.6g %.6g %.6g", c->hist.wt,
		 c->hist.win[0][0], c->hist.win[0][1], c->hist.win[1][0], c->hist.win[1][1],
		 c->hist.win[2][0], c->hist.win[2][1]);
	c->hist.saved_t = now;
	c->hist.saved_st = c->st;
	pthread_mutex_unlock(&c->lock);
	if (l >= sizeof(tot))
		return;		/* cannot happen: 12 numbers of 20 digits */
	rc = tfs_cstore_info_set(c->cs, "stats.total", tot);
	if (rc == 0)
		rc = tfs_cstore_info_set(c->cs, "stats.window", win);
	if (rc)
		tfs_warn("cache %s: cannot save the counters: %s", c->dir, strerror(-rc));
}

int c_history_lines(struct tfs_cache *c, char *buf, size_t len)
{
	static const char *const wname[C_WINDOWS] = { "5m", "1h", "1d" };
	static const char *const tname[C_TOTALS] = {
		"read_req_hits", "read_req_misses", "write_req_hits", "write_req_misses",
		"read_hit_bytes", "read_miss_bytes", "seq_bypass", "full_bypass", "write_around",
		"promotions", "evictions", "flushed_bytes",
	};
	uint64_t th, tm;
	int l = 0;

	fold(c, wall_now());
	for (unsigned i = 0; i < C_TOTALS; i++)
		l += snprintf(buf + l, len - (size_t)l, "cache.total.%s=%" PRIu64 "\n", tname[i],
			      c_history_total(c, i));
	for (unsigned w = 0; w < C_WINDOWS; w++) {
		double s = c->hist.win[w][0] + c->hist.win[w][1];

		l += snprintf(buf + l, len - (size_t)l, "cache.read_hit_ratio_%s=%.4f\n", wname[w],
			      s > 0 ? c->hist.win[w][0] / s : 0.0);
	}
	th = c_history_total(c, 0);
	tm = c_history_total(c, 1);
	l += snprintf(buf + l, len - (size_t)l, "cache.read_hit_ratio_total=%.4f\n",
		      th + tm ? (double)th / (double)(th + tm) : 0.0);
	return l;
}

void c_history_reset(struct tfs_cache *c)
{
	memset(&c->st, 0, sizeof(c->st));
	memset(c->hist.base, 0, sizeof(c->hist.base));
	memset(c->hist.folded, 0, sizeof(c->hist.folded));
	memset(c->hist.win, 0, sizeof(c->hist.win));
	c->hist.wt = wall_now();
	c->hist.saved_t = c_now() - 60 * 16;	/* saved at the next look */
	memset(&c->hist.saved_st, 0xff, sizeof(c->hist.saved_st));
}
