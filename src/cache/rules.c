/* rules.c - the SSD tier's decisions, pure (include/tierfs/rules.h).
 *
 * Owns: the rule that says what a read's or a write's piece does, the
 * heat table's replacement, the flusher's pace, and the modes' names
 * (mount option, tierctl cache_mode, the status, cache_sim --mode).  Linked into the
 * daemon (read.c, write.c, index.c, flush.c decide through it) and into
 * the tier's model (model.c: cache_sim, the miss-ratio curve, the
 * admission tuner), so that what the simulator measures is what the
 * daemon does.
 *
 * Invariants:
 *  1. No I/O, no lock, no clock, no allocation: every input is an
 *     argument, so the same call gives the same answer in the daemon and
 *     in the model.
 *  2. A read promotes only an extent not cached, outside a sequential
 *     stream (or in one, at a heat of TFS_SEQ_HOT at least), in a mode
 *     other than off, on a read-write mount, at the threshold, and not
 *     blocked (read.c invariant 4); it fills a cached
 *     extent the piece found in part under the same conditions (flush.c
 *     invariant 14).
 *  3. A dirty or flushing extent takes every write write-back, whatever
 *     the mode (write.c invariant 1); an uncached extent gets a fresh slot
 *     for dirty sectors only in write-back, outside a sequential stream,
 *     below dirty_high (write.c invariant 9), and one for clean sectors (a
 *     copy of what the RAID got) in a stream's full row in write-back or
 *     write-through (TFS_WR_COPY, write.c invariant 11) and for any other
 *     write in write-through (TFS_WR_FRESH, write.c invariant 12); never
 *     on a read-only mount, nor in write-around or off.
 */
#include <errno.h>
#include <string.h>

#include "tierfs/rules.h"

static const char *const mode_names[] = {
	[TFS_CACHE_WRITEBACK] = "writeback",
	[TFS_CACHE_WRITETHROUGH] = "writethrough",
	[TFS_CACHE_WRITEAROUND] = "writearound",
	[TFS_CACHE_OFF] = "off",
};

const char *tfs_cache_mode_name(enum tfs_cache_mode m)
{
	return m <= TFS_CACHE_OFF ? mode_names[m] : "?";
}

int tfs_cache_mode_parse(const char *s, enum tfs_cache_mode *m)
{
	for (unsigned i = 0; i <= TFS_CACHE_OFF; i++)
		if (strcmp(s, mode_names[i]) == 0) {
			*m = (enum tfs_cache_mode)i;
			return 0;
		}
	return -EINVAL;
}

/* cache_reclaim's names, and the other name each value also goes by */
static const char *const reclaim_names[][2] = {
	[TFS_RECLAIM_OFF] = { "0", "off" },
	[TFS_RECLAIM_ON] = { "1", "on" },
	[TFS_RECLAIM_AUTO] = { "auto", "auto" },
};

const char *tfs_reclaim_name(enum tfs_reclaim r)
{
	return r <= TFS_RECLAIM_AUTO ? reclaim_names[r][0] : "?";
}

int tfs_reclaim_parse(const char *s, enum tfs_reclaim *r)
{
	for (unsigned i = 0; i <= TFS_RECLAIM_AUTO; i++)
		if (strcmp(s, reclaim_names[i][0]) == 0 || strcmp(s, reclaim_names[i][1]) == 0) {
			*r = (enum tfs_reclaim)i;
			return 0;
		}
	return -EINVAL;
}

uint32_t tfs_heat_entries(uint32_t nslots)
{
	return tfs_pow2_at_least((uint64_t)nslots * 4 > 65536 ? (uint64_t)nslots * 4 : 65536);
}

struct tfs_heat_ent *tfs_heat_find(struct tfs_heat_ent *tab, uint32_t mask, uint32_t halflife,
				   uint64_t key, uint32_t now)
{
	struct tfs_heat_ent *set = &tab[key & mask & ~(uint64_t)(TFS_HEAT_WAYS - 1)], *v = NULL;
	unsigned vh = 0;

	/* the key's own entry, else the coolest of the set that no promotion
	 * waits for gives way (index.c invariant 6) */
	for (unsigned i = 0; i < TFS_HEAT_WAYS; i++) {
		struct tfs_heat_ent *g = &set[i];
		unsigned h = tfs_heat_now(halflife, g->heat, g->t, now);

		if (g->key == key)
			return g;
		if (!v || (v->queued && !g->queued) ||
		    (v->queued == g->queued && (h < vh || (h == vh && g->t < v->t)))) {
			v = g;
			vh = h;
		}
	}
	*v = (struct tfs_heat_ent){ .key = key, .t = now };
	return v;
}

enum tfs_rd_act tfs_rule_read(const struct tfs_rd_in *r)
{
	bool may;

	if (r->full && (r->mode != TFS_CACHE_OFF || r->dirty))
		return TFS_RD_HIT;
	/* a stream past the cutoff goes around the tier, so that a backup or
	 * a scan, which reads each extent once, does not push the hot set
	 * out; but an extent it reads that was read or written before, within
	 * the heat's half-life (heat of TFS_SEQ_HOT, and at the threshold), is
	 * not a one-time scan's: a large file read again from start to end,
	 * or a file a copy wrote around the tier read back (docs/CACHE_POLICY.md,
	 * "A stream's hot extents") */
	if (r->seq && (r->heat < TFS_SEQ_HOT || r->heat < r->promote))
		return TFS_RD_SEQ;
	may = r->mode != TFS_CACHE_OFF && !r->readonly && r->heat >= r->promote && !r->blocked;
	if (!may)
		return TFS_RD_MISS;
	return r->cached ? TFS_RD_FILL : TFS_RD_PROMOTE;
}

enum tfs_wr_act tfs_rule_write(const struct tfs_wr_in *w, enum tfs_bypass *why)
{
	bool admit = w->mode == TFS_CACHE_WRITEBACK && !w->seq && !w->readonly;

	*why = TFS_BYPASS_NONE;
	if (w->cached) {
		if (w->mode == TFS_CACHE_WRITEBACK || w->dirty)
			return TFS_WR_CACHE;
		if (w->mode == TFS_CACHE_WRITETHROUGH)
			return TFS_WR_THROUGH;
		*why = TFS_BYPASS_MODE;
		return TFS_WR_AROUND;
	}
	if (admit && !w->over_high)
		return TFS_WR_ALLOC;
	*why = w->seq ? TFS_BYPASS_SEQ : admit ? TFS_BYPASS_DIRTY_HIGH : TFS_BYPASS_MODE;
	if (w->readonly || (w->mode != TFS_CACHE_WRITEBACK && w->mode != TFS_CACHE_WRITETHROUGH))
		return TFS_WR_RAW;
	/* a copy read back soon after it was written (the copy-and-edit
	 * trace) missed what LRU, which keeps every write, hit: the stream
	 * keeps a clean copy, the next victim until read (docs/CACHE_POLICY.md,
	 * "A copy's stream kept clean") */
	if (w->seq)
		return TFS_WR_COPY;
	if (w->mode == TFS_CACHE_WRITEBACK)
		return TFS_WR_RAW;	/* dirty_high */
	/* write-through keeps what it writes, clean, as bcache's does: what is
	 * written is read back (a database's pages, a mail server's files),
	 * and without it the tier missed them all (docs/CACHE_POLICY.md,
	 * "Write-through keeps what it writes") */
	*why = TFS_BYPASS_NONE;
	return TFS_WR_FRESH;
}

struct tfs_flush_step tfs_flush_plan(uint32_t ndirty, uint32_t nslots, unsigned low,
				     unsigned high, bool idle, bool all)
{
	struct tfs_flush_step s = { .run = false, .min_age = 0 };

	if (ndirty == 0 || (!all && !idle && !tfs_dirty_over(ndirty, nslots, low)))
		return s;
	s.run = true;
	s.min_age = all || idle || tfs_dirty_over(ndirty, nslots, tfs_flush_flat(low, high)) ?
		    0 : TFS_FLUSH_WRITE_AGE;
	return s;
}

/* (a, f) comes before (b, g) */
static bool older(uint32_t a, uint64_t f, uint32_t b, uint64_t g)
{
	return a > b || (a == b && f < g);
}

unsigned tfs_flush_keep(uint64_t *fid, uint32_t *age, unsigned n, unsigned max, uint64_t f,
			uint32_t a)
{
	unsigned i;

	for (i = 0; i < n && fid[i] != f; i++)
		;
	if (i < n) {			/* kept: moves up if older now */
		if (a <= age[i])
			return n;
	} else if (n < max) {		/* a free place at the end */
		i = n++;
	} else if (n && older(a, f, age[n - 1], fid[n - 1])) {
		i = n - 1;		/* takes the youngest's place */
	} else {
		return n;
	}
	for (; i > 0 && older(a, f, age[i - 1], fid[i - 1]); i--) {
		fid[i] = fid[i - 1];
		age[i] = age[i - 1];
	}
	fid[i] = f;
	age[i] = a;
	return n;
}

unsigned tfs_flush_pause_ms(uint32_t ndirty, uint32_t nslots, unsigned low, unsigned high,
			    bool idle, bool all, unsigned nfiles)
{
	unsigned pct = (unsigned)((uint64_t)ndirty * 100 / nslots);

	if (all || idle || pct >= tfs_flush_flat(low, high) || pct < low)
		return 0;
	return (nfiles ? nfiles : 1) * (1 + 100 * (high - pct) / (high - low));
}
