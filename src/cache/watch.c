/* watch.c - the tier watching itself: the live miss-ratio curve and the
 * admission tuner (mrc.c's miniatures, fed by the request paths).
 *
 * Owns: c->mrc, c->mrc_kbps and c->mrc_pns (under c->mlock), the tuner's settings
 * (c->promote_auto, c->spare_hot, and c->promote while auto), the status
 * lines of the curve (cache.mrc_*) and of the tuner.
 *
 * Invariants:
 *  1. A request reaches the miniatures as the tier decided it: the file's
 *     identity, the range, read or write, the cutoff's verdict (read.c
 *     and write.c call c_watch once per request, after their decision and
 *     outside c->lock, so the miniatures' work never lengthens a c->lock
 *     section; two concurrent requests may reach them in either order);
 *     a request with no extent in the sample costs a hash and a compare a
 *     piece, and no lock.
 *  2. c->mlock is a leaf: taken under c->lock (a tunable's set) or alone,
 *     and nothing is taken under it.  So the tuner's choice reaches
 *     c->promote and c->spare_hot by atomic stores (c_promote, c_spare_hot
 *     load them), not under c->lock.
 *  3. With promote_auto the tier's threshold and the flusher's sparing of
 *     young extents (spare_hot) are the tuner's last choice (from its
 *     first window on; until then 2 and every young extent); a threshold
 *     set by hand (cache_promote=N, tierctl set) ends auto and sets the
 *     flusher back to sparing every young extent.
 *  4. Memory: the miniatures hold 6.9-10.2 MB whatever the tier's size
 *     (the budget, the rate cap and the small sizes' floor, mrc.h;
 *     cache.mrc_bytes), made at start, never grown.
 *  5. The miniatures destage at the flusher's measured rate (flush.c
 *     invariant 16; c->mrc_kbps, the one they were given, under mlock),
 *     on the monotonic clock: until the flusher's first second of
 *     rounds, at once.  A request gives it to them when it changed.
 *  6. A cut (truncate, punch, unlink: cut.c invariant 4) reaches every
 *     miniature (tfs_mrc_cut), which finds the file's slots by its
 *     identity alone (model.c invariant 8), so an unlink costs a hash
 *     lookup a miniature when none holds the file.
 *  7. The miniatures' promotions take the promoters' measured time
 *     (flush.c invariant 18; c->mrc_pns, the one they were given, under
 *     mlock), on the same clock, and wait for their share of the
 *     promoters (model.c invariant 9): until the first promotion, at
 *     once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/mrc.h"
#include "cache_i.h"

int c_watch_start(struct tfs_cache *c)
{
	struct tfs_model_cfg cfg = TFS_MODEL_CFG_DEFAULT(c->nslots);

	pthread_mutex_init(&c->mlock, NULL);
	cfg.extent = c->extent;
	cfg.policy = c->policy_kind;
	cfg.mode = c_mode(c);
	cfg.promote = c_promote(c);
	cfg.halflife = c->halflife;
	cfg.seq_cutoff = c->seq_cutoff;
	cfg.row_bytes = tfs_row_bytes(c->fs);
	cfg.dirty_low = c->dirty_low;
	cfg.dirty_high = c->dirty_high;
	cfg.reclaim = c->reclaim_mode;	/* auto: each miniature weighs its own */
	c->mrc = tfs_mrc_new(&cfg, TFS_MRC_BUDGET, TFS_MRC_RATE, true);
	return c->mrc ? 0 : -ENOMEM;
}

void c_watch(struct tfs_cache *c, uint64_t fid, uint64_t off, uint64_t len, bool write,
	     unsigned seq)
{
	struct tfs_tune t;
	uint32_t kbps;
	uint64_t pns;
	bool rose = false;

	if (!c->mrc || !tfs_mrc_watches(c->mrc, fid, off, len))
		return;
	kbps = __atomic_load_n(&c->destage_kbps, __ATOMIC_RELAXED);
	pns = __atomic_load_n(&c->promote_ns, __ATOMIC_RELAXED);
	pthread_mutex_lock(&c->mlock);
	if (kbps != c->mrc_kbps) {	/* the flusher's rate (flush.c invariant 16) */
		tfs_mrc_set_destage(c->mrc, kbps / 1000.0);
		c->mrc_kbps = kbps;
	}
	if (pns != c->mrc_pns) {	/* the promoters' time (invariant 7) */
		tfs_mrc_set_promote_time(c->mrc, pns);
		c->mrc_pns = pns;
	}
	if (kbps || pns)	/* without either, time is not used */
		tfs_mrc_clock(c->mrc, c_mono_ns());
	tfs_mrc_request(c->mrc, fid, off, len, write, seq, c_now());
	if (tfs_mrc_tuned(c->mrc, &t) && c_tuned(c) &&
	    (t.promote != c_promote(c) || t.spare_hot != c_spare_hot(c))) {
		rose = t.promote > c_promote(c);
		__atomic_store_n(&c->promote, t.promote, __ATOMIC_RELAXED);
		__atomic_store_n(&c->spare_hot, t.spare_hot, __ATOMIC_RELAXED);
		tfs_mrc_set(c->mrc, &t);
		c->promote_changes++;
	}
	pthread_mutex_unlock(&c->mlock);
	if (rose) {	/* flush.c invariant 20 (c->lock is not taken under mlock) */
		pthread_mutex_lock(&c->lock);
		c_promote_stale(c, c_promote(c));
		pthread_mutex_unlock(&c->lock);
	}
}

void c_watch_cut(struct tfs_cache *c, uint64_t fid, uint64_t off, uint64_t len)
{
	if (!c->mrc)
		return;
	pthread_mutex_lock(&c->mlock);
	tfs_mrc_cut(c->mrc, fid, off, len);
	pthread_mutex_unlock(&c->mlock);
}

void c_watch_promote(struct tfs_cache *c, unsigned promote, bool autot)
{
	struct tfs_tune t;

	__atomic_store_n(&c->promote_auto, autot, __ATOMIC_RELAXED);
	if (!autot) {	/* by hand: the flusher back to sparing every young extent */
		__atomic_store_n(&c->promote, promote, __ATOMIC_RELAXED);
		__atomic_store_n(&c->spare_hot, false, __ATOMIC_RELAXED);
		c_promote_stale(c, promote);	/* flush.c invariant 20 */
	}
	if (!c->mrc)
		return;
	t = (struct tfs_tune){ .promote = c_promote(c), .spare_hot = c_spare_hot(c) };
	pthread_mutex_lock(&c->mlock);
	tfs_mrc_set(c->mrc, &t);
	pthread_mutex_unlock(&c->mlock);
}

void c_watch_reset(struct tfs_cache *c)
{
	if (!c->mrc)
		return;
	pthread_mutex_lock(&c->mlock);
	tfs_mrc_reset(c->mrc);
	pthread_mutex_unlock(&c->mlock);
}

int c_watch_lines(struct tfs_cache *c, char *buf, size_t len)
{
	double curve[TFS_MRC_SIZES];
	uint64_t reads, bytes, changes, pns;
	struct tfs_tune t = { 0, false };
	uint32_t kbps;
	int l = 0;

	if (!c->mrc)
		return 0;
	pthread_mutex_lock(&c->mlock);
	reads = tfs_mrc_curve(c->mrc, curve);
	tfs_mrc_tuned(c->mrc, &t);
	bytes = tfs_mrc_bytes(c->mrc);
	changes = c->promote_changes;
	kbps = c->mrc_kbps;
	pns = c->mrc_pns;
	pthread_mutex_unlock(&c->mlock);
	l = snprintf(buf, len, "cache.promote_auto=%d\ncache.promote_tuned=%u\n"
		     "cache.flush_spares=%s\ncache.promote_changes=%" PRIu64 "\n"
		     "cache.mrc_sample=%.6f\ncache.mrc_destage_mbps=%.1f\n"
		     "cache.mrc_promote_us=%.1f\n"
		     "cache.mrc_reads=%" PRIu64 "\ncache.mrc_bytes=%" PRIu64 "\n",
		     c_tuned(c), t.promote, c_spare_hot(c) ? "hot" : "all", changes,
		     tfs_mrc_rate(c->mrc), kbps / 1000.0, pns / 1000.0, reads, bytes);
	/* cache.mrc_xS, S the size in the tier's (0.25 -> 0_25) */
	for (unsigned i = 0; i < TFS_MRC_SIZES && l >= 0 && (size_t)l < len; i++) {
		char name[16], *dot;

		snprintf(name, sizeof(name), "x%g", tfs_mrc_scale[i]);
		if ((dot = strchr(name, '.')))
			*dot = '_';
		l += curve[i] < 0 ? snprintf(buf + l, len - (size_t)l, "cache.mrc_%s=-\n", name)
				  : snprintf(buf + l, len - (size_t)l, "cache.mrc_%s=%.4f\n", name,
					     curve[i]);
	}
	return l < 0 ? 0 : (size_t)l >= len ? (int)len - 1 : l;
}
