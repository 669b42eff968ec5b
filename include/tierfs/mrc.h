/* The tier's miss-ratio curve and its admission tuner, from miniature
 * models (model.h) on a spatial sample of the extents.
 *
 * A tier of N slots is watched by miniatures of it at 0.25, 0.5, 1, 2, 4
 * and 8 times its size, each a model of N x scale x R slots that sees only
 * the extents whose key falls in the sample R (Waldspurger et al., "Cache
 * Modeling and Optimization using Miniature Simulations", ATC 2017): the
 * read hit ratio each one reaches is the curve.  A size whose miniature
 * would hold fewer than TFS_MRC_MIN_SLOTS slots at R samples more, up to
 * every extent (its error is its sample's, which shrinks with the slots
 * it holds; samples nest: a key under a rate is under every larger one).  Six more miniatures at
 * 1x run the promotion thresholds 1, 2 and 4, each with the flusher
 * sparing every young dirty extent or only the hot ones
 * (tfs_flush_spares): over each window the tuner takes the choice whose
 * miniature hit best, or, among those with at most 1% more misses
 * (TFS_TUNE_EPS), the one that wrote least to the SSD and the RAID.
 *
 * Pure (no locks, no clock, no I/O): the daemon (src/cache/status.c and
 * the request paths) serialises calls under its own lock and passes the
 * time; cache_sim runs it on traces.
 */
#ifndef TIERFS_MRC_H
#define TIERFS_MRC_H

#include <stdbool.h>
#include <stdint.h>

#include "tierfs/model.h"

#define TFS_MRC_SIZES 6			/* 0.25x, 0.5x, 1x, 2x, 4x, 8x */
#define TFS_MRC_BUDGET 8192		/* slots of the largest miniature, at most */
#define TFS_MRC_RATE 0.25		/* the daemon's sample rate, but for small sizes */
#define TFS_MRC_MIN_SLOTS 1024		/* a size's miniature, at least (up to rate 1) */
#define TFS_TUNE_CHOICES 6		/* the settings the tuner tries (tfs_tune) */
#define TFS_TUNE_WINDOW 1024		/* sampled read pieces a tuning window */
#define TFS_TUNE_EPS 0.01		/* misses this close (relative) are a tie */
#define TFS_TUNE_START 2		/* the threshold before the tuner's first window */

/* The sizes of the curve, times the tier's. */
extern const double tfs_mrc_scale[TFS_MRC_SIZES];
/* A setting the tuner tries: the promotion threshold, and whether the
 * flusher spares only hot young extents (rules.h tfs_flush_spares). */
struct tfs_tune {
	unsigned promote;
	bool spare_hot;
};
/* The settings the tuner tries: thresholds 1, 2, 4, each both ways. */
extern const struct tfs_tune tfs_tune[TFS_TUNE_CHOICES];

struct tfs_mrc;

/* The curve of a tier set as tier (its nslots, extent, policy, mode,
 * threshold, halflife, watermarks), sampled at a rate R that gives the 8x
 * miniature at most budget slots, and at most max_rate (the daemon's
 * TFS_MRC_RATE: every sampled piece costs each miniature a model step,
 * and the pieces not sampled a hash and a compare); a size whose
 * miniature would hold fewer than TFS_MRC_MIN_SLOTS at R gets the rate
 * that gives it that many, at most 1 (the tuner's keep R); tune: run the
 * tuner's miniatures too.  NULL: no memory, or settings a model
 * refuses. */
struct tfs_mrc *tfs_mrc_new(const struct tfs_model_cfg *tier, uint32_t budget, double max_rate,
			    bool tune);
/* Frees r (NULL is nothing). */
void tfs_mrc_free(struct tfs_mrc *r);
/* Returns R, the share of the extents the miniatures of the larger sizes
 * and the tuner's watch (0 to 1; the smaller sizes may watch more). */
double tfs_mrc_rate(const struct tfs_mrc *r);
/* Returns true if an extent of [off, off+len) of fid is in a miniature's
 * sample (the 0.25x size's holds the others'); a request for which it is
 * false may be left out of tfs_mrc_request (it would change nothing). */
bool tfs_mrc_watches(const struct tfs_mrc *r, uint64_t fid, uint64_t off, uint64_t len);
/* The time of the requests that follow, for the miniatures' destages
 * (tfs_model_clock; the tier's destage_mbps, scaled by each one's rate). */
void tfs_mrc_clock(struct tfs_mrc *r, uint64_t ns);
/* The RAID's destage rate from now on, MB/s (0: instant), the
 * miniatures taking their share of it (tfs_model_set_destage). */
void tfs_mrc_set_destage(struct tfs_mrc *r, double mbps);
/* A promotion's time from now on, ns (0: at once): the promoters' pace,
 * whatever a miniature's sample (tfs_model_set_promote_time). */
void tfs_mrc_set_promote_time(struct tfs_mrc *r, uint64_t ns);
/* One request, as the tier saw it (seq: its verdicts of the sequential
 * detector, TFS_SEQ_*) at tick now. */
void tfs_mrc_request(struct tfs_mrc *r, uint64_t fid, uint64_t off, uint64_t len, bool write,
		     unsigned seq, uint32_t now);
/* [off, off+len) of fid is gone (len UINT64_MAX: to the end), to every
 * miniature (tfs_model_cut). */
void tfs_mrc_cut(struct tfs_mrc *r, uint64_t fid, uint64_t off, uint64_t len);
/* The read hit ratio (of pieces) each size reached since the start or
 * the last reset, in out[TFS_MRC_SIZES] (-1: no read yet); returns the
 * sampled read pieces behind the 8x size (the fewest: it samples least). */
uint64_t tfs_mrc_curve(const struct tfs_mrc *r, double *out);
/* The counts back to zero (the miniatures keep their contents). */
void tfs_mrc_reset(struct tfs_mrc *r);
/* Returns true with the tuner's choice of its last window in *t; false
 * before its first window ends, or with no tuner. */
bool tfs_mrc_tuned(const struct tfs_mrc *r, struct tfs_tune *t);
/* The tier's settings changed (the curve's miniatures follow them). */
void tfs_mrc_set(struct tfs_mrc *r, const struct tfs_tune *t);
/* Returns the bytes of memory r holds. */
uint64_t tfs_mrc_bytes(const struct tfs_mrc *r);

#endif
