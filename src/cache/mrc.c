/* mrc.c - the tier's miss-ratio curve and admission tuner from miniature
 * models (include/tierfs/mrc.h).
 *
 * Owns: the miniatures (model.c) of the curve and of the tuner, the
 * sample bound, the tuner's windows and its choice.
 *
 * Invariants:
 *  1. Every miniature sees the requests touching its sample, with the
 *     tier's sequential verdict and time, and keeps only the extents of
 *     that sample, at its rate Rs: R, or for a curve size s with
 *     N x s x R under TFS_MRC_MIN_SLOTS, min(1, TFS_MRC_MIN_SLOTS /
 *     (N x s)) (so Rs never grows with s; the samples nest, and the
 *     requests watched are those of the largest, the 0.25x size's).  The
 *     tuner's miniatures keep R.  A miniature of scale s has
 *     round(N x s x Rs) slots (at least 1), a heat table Rs times the
 *     daemon's (at least 64 entries), and Rs times the batches of a tier
 *     of N x s slots (an eviction's slots, a file's extents a flusher
 *     batch destages; at least 1), of its RAID rate (destage_mbps) and
 *     of its promoters and their queue (model.c invariant 9), so what
 *     fits in it, how heat collides, how much goes at once and how fast
 *     are the full tier's, scaled.
 *  2. The curve's miniatures run the tier's settings (tfs_mrc_set follows
 *     the tier's changes); the tuner's run theirs, fixed.
 *  3. The tuner decides at the end of a window of TFS_TUNE_WINDOW read
 *     pieces sampled, on that window's counts alone (a change of load
 *     shows within a window), and its choice is the setting whose
 *     miniature hit most, or among those with at most TFS_TUNE_EPS more
 *     misses than it (relative) the one that wrote least to the SSD and
 *     the RAID together (flash wear and disk work; the first listed on a
 *     tie).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/mrc.h"
#include "tierfs/rules.h"

const double tfs_mrc_scale[TFS_MRC_SIZES] = { 0.25, 0.5, 1, 2, 4, 8 };
const struct tfs_tune tfs_tune[TFS_TUNE_CHOICES] = {
	{ 1, false }, { 2, false }, { 4, false }, { 1, true }, { 2, true }, { 4, true },
};

#define NMINI (TFS_MRC_SIZES + TFS_TUNE_CHOICES)

struct tfs_mrc {
	double rate;
	/* the curve's miniatures (CURVE), then the tuner's (TUNE), n made,
	 * each at its own sample rate (invariant 1) */
	struct tfs_model *m[NMINI];
	double mrate[NMINI];
	unsigned n;
	/* the tuner's counts when its window began */
	uint64_t w_reads, w_hits[TFS_TUNE_CHOICES], w_cost[TFS_TUNE_CHOICES];
	int chosen;			/* index in tfs_tune, or -1 */
};

#define CURVE(r, i) ((r)->m[i])
#define TUNE(r, i) ((r)->m[TFS_MRC_SIZES + (i)])

/* The sample of a rate: the keys under it (invariant 1). */
static uint64_t sample_of(double rate)
{
	return rate >= 1 ? UINT64_MAX : (uint64_t)(rate * 18446744073709551616.0);
}

/* The rate of curve size scale (invariant 1). */
static double size_rate(const struct tfs_model_cfg *tier, double rate, double scale)
{
	double slots = (double)tier->nslots * scale;

	if (slots * rate >= TFS_MRC_MIN_SLOTS)
		return rate;
	return TFS_MRC_MIN_SLOTS / slots < 1 ? TFS_MRC_MIN_SLOTS / slots : 1;
}

static struct tfs_model *mini(const struct tfs_model_cfg *tier, double rate, double scale,
			      unsigned promote, bool spare_hot)
{
	struct tfs_model_cfg cfg = *tier;
	double slots = floor((double)tier->nslots * scale * rate + 0.5);

	cfg.nslots = slots < 1 ? 1 : (uint32_t)slots;
	cfg.watch = NULL;	/* a watcher of the tier's pieces is not told a miniature's */
	cfg.sample = sample_of(rate);
	cfg.promote = promote;
	cfg.spare_hot_only = spare_hot;
	cfg.heat_entries = tfs_pow2_at_least((uint64_t)ceil(tfs_heat_entries(tier->nslots) * rate));
	if (cfg.heat_entries < 64)
		cfg.heat_entries = 64;
	/* the batches of a tier of its full size, scaled as its slots */
	cfg.evict_batch = (uint32_t)floor(tfs_evict_batch((uint32_t)(tier->nslots * scale)) *
					  rate + 0.5);
	cfg.flush_batch = (uint32_t)floor(TFS_FLUSH_BATCH * rate + 0.5);
	cfg.destage_mbps = tier->destage_mbps * rate;	/* its share of the RAID */
	cfg.promote_queue = (uint32_t)floor(TFS_PROMOTE_QUEUE * rate + 0.5);	/* and of the queue */
	if (!cfg.promote_queue)
		cfg.promote_queue = 1;
	cfg.promoters = TFS_PROMOTERS * rate;	/* and of the promoters */
	if (!cfg.evict_batch)
		cfg.evict_batch = 1;
	if (!cfg.flush_batch)
		cfg.flush_batch = 1;
	return tfs_model_new(&cfg);
}

struct tfs_mrc *tfs_mrc_new(const struct tfs_model_cfg *tier, uint32_t budget, double max_rate,
			    bool tune)
{
	struct tfs_mrc *r = calloc(1, sizeof(*r));
	bool ok = r != NULL;

	if (!r)
		return NULL;
	r->rate = (double)budget / (8.0 * (double)tier->nslots);
	if (r->rate > max_rate)
		r->rate = max_rate;
	r->chosen = -1;
	for (unsigned i = 0; i < TFS_MRC_SIZES && ok; i++, r->n++) {
		r->mrate[i] = size_rate(tier, r->rate, tfs_mrc_scale[i]);
		ok = (CURVE(r, i) = mini(tier, r->mrate[i], tfs_mrc_scale[i], tier->promote,
					 tier->spare_hot_only)) != NULL;
	}
	for (unsigned i = 0; i < TFS_TUNE_CHOICES && ok && tune; i++, r->n++) {
		r->mrate[TFS_MRC_SIZES + i] = r->rate;
		ok = (TUNE(r, i) = mini(tier, r->rate, 1, tfs_tune[i].promote,
					tfs_tune[i].spare_hot)) != NULL;
	}
	if (!ok) {
		tfs_mrc_free(r);
		return NULL;
	}
	return r;
}

void tfs_mrc_free(struct tfs_mrc *r)
{
	if (!r)
		return;
	for (unsigned i = 0; i < r->n; i++)
		tfs_model_free(r->m[i]);
	free(r);
}

double tfs_mrc_rate(const struct tfs_mrc *r)
{
	return r->rate;
}

bool tfs_mrc_watches(const struct tfs_mrc *r, uint64_t fid, uint64_t off, uint64_t len)
{
	/* the 0.25x size's sample holds every other (invariant 1) */
	return tfs_model_samples(CURVE(r, 0), fid, off, len);
}

/* One request to miniature m, if it touches m's sample (invariant 1). */
static void mini_request(struct tfs_model *m, uint64_t fid, uint64_t off, uint64_t len,
			 bool write, unsigned seq, uint32_t now)
{
	if (tfs_model_samples(m, fid, off, len))
		tfs_model_apply(m, fid, off, len, write, seq, now);
}

/* The end of a window: choose (invariant 3), and start the next. */
static void tune_window(struct tfs_mrc *r)
{
	uint64_t hits[TFS_TUNE_CHOICES], cost[TFS_TUNE_CHOICES], reads;
	unsigned best = 0, pick;

	reads = tfs_model_stats(TUNE(r, 0))->reads - r->w_reads;
	for (unsigned i = 0; i < TFS_TUNE_CHOICES; i++) {
		const struct tfs_model_stats *st = tfs_model_stats(TUNE(r, i));
		uint64_t c = st->ssd_write_bytes + st->raid_write_bytes;

		hits[i] = st->read_hits - r->w_hits[i];
		cost[i] = c - r->w_cost[i];
		if (hits[i] > hits[best])
			best = i;
		r->w_hits[i] = st->read_hits;
		r->w_cost[i] = c;
	}
	r->w_reads += reads;
	pick = best;
	/* a near-tie is one with at most TFS_TUNE_EPS more misses: relative,
	 * since a miss costs the HDDs the same whatever the hit ratio (99%
	 * against 98.9% is 10% more misses, not a tie) */
	for (unsigned i = 0; i < TFS_TUNE_CHOICES; i++)
		if ((double)(reads - hits[i]) <= (double)(reads - hits[best]) * (1 + TFS_TUNE_EPS) &&
		    cost[i] < cost[pick])
			pick = i;
	r->chosen = (int)pick;
}

void tfs_mrc_clock(struct tfs_mrc *r, uint64_t ns)
{
	for (unsigned i = 0; i < r->n; i++)
		tfs_model_clock(r->m[i], ns);
}

void tfs_mrc_set_destage(struct tfs_mrc *r, double mbps)
{
	for (unsigned i = 0; i < r->n; i++)
		tfs_model_set_destage(r->m[i], mbps * r->mrate[i]);
}

void tfs_mrc_set_promote_time(struct tfs_mrc *r, uint64_t ns)
{
	for (unsigned i = 0; i < r->n; i++)
		tfs_model_set_promote_time(r->m[i], ns);
}

void tfs_mrc_request(struct tfs_mrc *r, uint64_t fid, uint64_t off, uint64_t len, bool write,
		     unsigned seq, uint32_t now)
{
	for (unsigned i = 0; i < r->n; i++)
		mini_request(r->m[i], fid, off, len, write, seq, now);
	if (r->n > TFS_MRC_SIZES &&
	    tfs_model_stats(TUNE(r, 0))->reads - r->w_reads >= TFS_TUNE_WINDOW)
		tune_window(r);
}

void tfs_mrc_cut(struct tfs_mrc *r, uint64_t fid, uint64_t off, uint64_t len)
{
	for (unsigned i = 0; i < r->n; i++)
		tfs_model_cut(r->m[i], fid, off, len);
}

uint64_t tfs_mrc_curve(const struct tfs_mrc *r, double *out)
{
	for (unsigned i = 0; i < TFS_MRC_SIZES; i++) {
		const struct tfs_model_stats *st = tfs_model_stats(CURVE(r, i));

		out[i] = st->reads ? (double)st->read_hits / (double)st->reads : -1;
	}
	return tfs_model_stats(CURVE(r, TFS_MRC_SIZES - 1))->reads;
}

void tfs_mrc_reset(struct tfs_mrc *r)
{
	for (unsigned i = 0; i < TFS_MRC_SIZES; i++)
		tfs_model_reset_stats(CURVE(r, i));
}

bool tfs_mrc_tuned(const struct tfs_mrc *r, struct tfs_tune *t)
{
	if (r->chosen < 0)
		return false;
	*t = tfs_tune[r->chosen];
	return true;
}

void tfs_mrc_set(struct tfs_mrc *r, const struct tfs_tune *t)
{
	for (unsigned i = 0; i < TFS_MRC_SIZES; i++) {
		tfs_model_set_promote(CURVE(r, i), t->promote);
		tfs_model_set_spare(CURVE(r, i), t->spare_hot);
	}
}

uint64_t tfs_mrc_bytes(const struct tfs_mrc *r)
{
	uint64_t n = sizeof(*r);

	for (unsigned i = 0; i < r->n; i++)
		n += tfs_model_bytes(r->m[i]);
	return n;
}
