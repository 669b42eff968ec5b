/* The SSD tier's decisions, pure: what a request's piece does (hit, miss,
 * promote, fill; write back, through, around, allocate, bypass), heat and
 * its table, the sequential cutoff, the eviction batch and the flusher's
 * pace.  No I/O, no locks, no clock: the caller passes the state and the
 * time (1/16 s ticks), and serialises calls on one table.
 *
 * The daemon's request paths (src/cache: read.c, write.c, index.c,
 * request.c, flush.c) decide through these functions, and so does the
 * tier's model (model.h: cache_sim, the live miss-ratio curve and the
 * admission tuner), so a rule changed here changes both.
 */
#ifndef TIERFS_RULES_H
#define TIERFS_RULES_H

#include <stdbool.h>
#include <stdint.h>

#include "tierfs/hash.h"
#include "tierfs/sectors.h"

/* The tier's modes (mount option cache_mode=, tierctl cache_mode). */
enum tfs_cache_mode {
	TFS_CACHE_WRITEBACK,	/* writes land on the SSD; the flusher destages them */
	TFS_CACHE_WRITETHROUGH,	/* writes go to both tiers before they are acknowledged */
	TFS_CACHE_WRITEAROUND,	/* writes go to the RAID and invalidate the SSD copy */
	TFS_CACHE_OFF,		/* the SSD is not used (dirty data still drains) */
};

/* Returns the mode's name ("?" for a value that is not a mode). */
const char *tfs_cache_mode_name(enum tfs_cache_mode m);
/* Returns 0 with *m the mode named s, or -EINVAL (not a mode's name). */
int tfs_cache_mode_parse(const char *s, enum tfs_cache_mode *m);

/* Reclaim (cache_reclaim=, DESIGN §10.10): destage first the dirty
 * extents eviction wants, never, always, or once the evidence says it
 * pays (evidence.h). */
enum tfs_reclaim {
	TFS_RECLAIM_OFF,
	TFS_RECLAIM_ON,
	TFS_RECLAIM_AUTO,
};

#define TFS_RECLAIM_DEFAULT TFS_RECLAIM_AUTO	/* docs/CACHE_POLICY.md, "auto" */

/* Returns true if reclaim is on under setting r, paid: the evidence's
 * verdict (tfs_evidence_pays; auto only).  The daemon's and the model's
 * one rule. */
static inline bool tfs_reclaim_on(enum tfs_reclaim r, bool paid)
{
	return r == TFS_RECLAIM_ON || (r == TFS_RECLAIM_AUTO && paid);
}
/* Returns "0", "1" or "auto" ("?" for a value that is not one). */
const char *tfs_reclaim_name(enum tfs_reclaim r);
/* Returns 0 with *r the setting s names ("0" or "off", "1" or "on",
 * "auto"), or -EINVAL. */
int tfs_reclaim_parse(const char *s, enum tfs_reclaim *r);

/* Why a request went around the tier (a file's last_bypass). */
enum tfs_bypass {
	TFS_BYPASS_NONE,
	TFS_BYPASS_SEQ,		/* a sequential stream past cache_seq_cutoff */
	TFS_BYPASS_DIRTY_HIGH,	/* write-back at cache_dirty_high wanting a fresh slot */
	TFS_BYPASS_MODE,	/* the mode keeps no new writes (write-around, off, read-only) */
	TFS_BYPASS_NO_SLOT,	/* every slot dirty or in use */
};

#define TFS_HEAT_WAYS 4			/* entries of a set of the heat table */
#define TFS_FLUSH_IDLE_TICKS (5 * 16)	/* no requests for 5 s: flush everything */
#define TFS_FLUSH_WRITE_AGE (5 * 16)	/* paced: extents not written for 5 s */
#define TFS_EVICT_BATCH 32		/* clean slots freed by one eviction */
#define TFS_SEQ_HOT 2			/* heat at which a stream's extent is promoted
					 * as any other (tfs_rule_read) */
#define TFS_PROMOTERS 4			/* promotions (and fills) in flight at once */
#define TFS_PROMOTE_QUEUE 1024		/* promotions waiting, at most (a full queue
					 * drops one) */
#define TFS_FLUSH_FILES 16		/* files a flusher batch destages (= TFS_SYNC_MANY) */
#define TFS_FLUSH_BATCH 64		/* extents of a file a batch destages */

/* Returns the key of extent (fid, idx): the hash the index, the policy,
 * the guards, the heat table and the model's sampling use. */
static inline uint64_t tfs_ext_key(uint64_t fid, uint64_t idx)
{
	return tfs_mix64(fid * TFS_GOLDEN64 ^ tfs_mix64(idx + 1));
}

/* ---- heat: accesses, halved every halflife ticks ---- */

/* Returns heat h as of tick t, decayed to now. */
static inline unsigned tfs_heat_now(uint32_t halflife, uint16_t h, uint32_t t, uint32_t now)
{
	uint32_t halves = (now - t) / halflife;

	return halves >= 16 ? 0 : h >> halves;
}

/* One more access to heat (*h, *t) at now.  Returns the new heat
 * (saturating at UINT16_MAX). */
static inline unsigned tfs_heat_bump(uint32_t halflife, uint16_t *h, uint32_t *t, uint32_t now)
{
	unsigned v = tfs_heat_now(halflife, *h, *t, now);

	if (v < UINT16_MAX)
		v++;
	*h = (uint16_t)v;
	*t = now;
	return v;
}

/* The heat of extents not cached, in sets of TFS_HEAT_WAYS entries chosen
 * by key: a key keeps its entry until TFS_HEAT_WAYS - 1 others of its set
 * are hotter, or as hot and more recent; an entry a promotion waits for
 * (queued) gives way last. */
struct tfs_heat_ent {
	uint64_t key;
	uint32_t t;
	uint16_t heat;
	bool queued;
};

/* Whether a promotion waiting for extent g's heat is stale: under the
 * threshold promote, risen since it was queued (flush.c invariant 20; the
 * daemon and the model alike).  Returns true to drop it unread. */
static inline bool tfs_promote_stale(const struct tfs_heat_ent *g, uint32_t halflife,
				     uint32_t now, unsigned promote)
{
	return tfs_heat_now(halflife, g->heat, g->t, now) < promote;
}

/* Returns the entries of the heat table (a power of two, at least 65536)
 * for a tier of nslots slots. */
uint32_t tfs_heat_entries(uint32_t nslots);
/* Returns key's entry of tab (entries = mask + 1): its own, or the one of
 * its set it takes over (zeroed, t = now). */
struct tfs_heat_ent *tfs_heat_find(struct tfs_heat_ent *tab, uint32_t mask, uint32_t halflife,
				   uint64_t key, uint32_t now);

/* ---- the sequential cutoff (bcache's, per file) ---- */

/* The request [off, off+len) enters a file's stream detector (*next: where
 * the last request ended; *run: bytes of the run so far).  Returns true if
 * it continues a run that reached cutoff (0: never). */
static inline bool tfs_seq_note(uint64_t *next, uint64_t *run, uint64_t off, uint64_t len,
				uint64_t cutoff)
{
	*run = *next == off ? *run + len : len;
	*next = off + len;
	return cutoff && *run >= cutoff;
}

/* Returns the verdict of the cutoff for a write of len bytes in a stream
 * past it (seq): it goes around the tier only in pieces the RAID takes
 * whole (row: a full row's bytes on the parity levels); smaller ones are
 * gathered in the tier and destaged as full stripes. */
static inline bool tfs_seq_write(bool seq, uint64_t len, uint64_t row)
{
	return seq && len >= row;
}

/* A request's verdicts of the sequential detector, as the model takes them
 * (model.h): */
#define TFS_SEQ_AROUND 1u	/* around the tier: a read of a stream past the
				 * cutoff, a write of one that is a full row too */
#define TFS_SEQ_STREAM 2u	/* a write of a stream past the cutoff (cached when
				 * not a full row): streamed, destaged young and
				 * evicted first once clean (write.c invariant 10) */

/* ---- a read's piece ---- */

enum tfs_rd_act {
	TFS_RD_HIT,		/* served from the slot */
	TFS_RD_MISS,		/* from the RAID */
	TFS_RD_SEQ,		/* from the RAID: a sequential stream past the cutoff,
				 * over an extent it has not seen before */
	TFS_RD_PROMOTE,		/* from the RAID, and the extent is promoted */
	TFS_RD_FILL,		/* from the RAID, and the slot's missing sectors filled */
};

/* What the tier knows when a read reaches one extent. */
struct tfs_rd_in {
	enum tfs_cache_mode mode;
	bool readonly;		/* the mount */
	bool seq;		/* the request continues a stream past the cutoff */
	unsigned promote;	/* the promotion threshold (heat) */
	bool cached;		/* a slot holds the extent */
	bool full;		/* ... with every sector the piece reads valid */
	bool dirty;		/* ... with dirty sectors */
	bool blocked;		/* a promotion or fill of it is queued, its slot is owned
				 * (busy), or a RAID write of it is in flight */
	unsigned heat;		/* the extent's heat, this access counted */
};

/* Returns what the piece does. */
enum tfs_rd_act tfs_rule_read(const struct tfs_rd_in *r);

/* ---- a write's piece ---- */

enum tfs_wr_act {
	TFS_WR_CACHE,		/* write-back into its slot */
	TFS_WR_THROUGH,		/* the RAID, then the slot's whole sectors */
	TFS_WR_AROUND,		/* the slot's sectors invalidated, then the RAID */
	TFS_WR_ALLOC,		/* a fresh slot, written back (none free: TFS_WR_RAW,
				 * TFS_BYPASS_NO_SLOT) */
	TFS_WR_RAW,		/* the RAID only: the extent is not cached */
	TFS_WR_COPY,		/* a stream's full row (write-back, write-through):
				 * the RAID, and a clean copy of its whole sectors
				 * in a fresh slot, evicted first unless read
				 * (write.c invariant 11; none taken or free: as
				 * TFS_WR_RAW) */
	TFS_WR_FRESH,		/* write-through's: the RAID, and its sectors in a
				 * fresh slot, clean (write.c invariant 12; none
				 * free: as TFS_WR_RAW, TFS_BYPASS_NO_SLOT) */
};

struct tfs_wr_in {
	enum tfs_cache_mode mode;
	bool readonly;
	bool seq;
	bool over_high;		/* dirty extents at or above dirty_high */
	bool cached;
	bool dirty;		/* ... dirty, or being flushed */
};

/* Returns what the piece does, and in *why the reason it goes around the
 * tier (TFS_BYPASS_NONE if it does not, TFS_WR_FRESH included;
 * TFS_BYPASS_SEQ for TFS_WR_COPY, which goes around write-back). */
enum tfs_wr_act tfs_rule_write(const struct tfs_wr_in *w, enum tfs_bypass *why);

/* ---- a stream's clean copies (write.c invariant 11) ---- */

#define TFS_COPY_WINDOW 256	/* resolved copies the evidence weighs: past it
				 * both counts halve */
#define TFS_COPY_SAMPLE 16	/* while copies go unread, 1 stream row in 16 is
				 * still copied, and 16 resolved decide */

/* Whether a stream's clean copies are used before they leave the tier:
 * those used again (read or written) and those evicted or cut unused, of
 * the last TFS_COPY_WINDOW or so; tick counts the rows asked for while
 * copies go unused. */
struct tfs_copy_ev {
	uint32_t used, unused, tick;
};

/* A copy left the question: used again (a hit), or gone unused. */
static inline void tfs_copy_resolved(struct tfs_copy_ev *e, bool used)
{
	if (used)
		e->used++;
	else
		e->unused++;
	if (e->used + e->unused >= TFS_COPY_WINDOW) {
		e->used /= 2;
		e->unused /= 2;
	}
}

/* Returns true if a stream's full row is to leave a clean copy: every
 * row while fewer than TFS_COPY_SAMPLE copies were resolved or at least
 * 1 in TFS_COPY_SAMPLE of them was used again; else 1 row in
 * TFS_COPY_SAMPLE, whose copies bring the evidence back when the load
 * starts to read what it copies.  A stream never read again (a backup
 * written to the mount) stops paying the slot's write after its first
 * copies leave unused. */
static inline bool tfs_copy_take(struct tfs_copy_ev *e)
{
	if (e->used + e->unused < TFS_COPY_SAMPLE ||
	    (uint64_t)e->used * TFS_COPY_SAMPLE >= (uint64_t)e->used + e->unused)
		return true;
	return ++e->tick % TFS_COPY_SAMPLE == 0;
}

/* ---- eviction and the flusher ---- */

/* Returns true if ndirty of nslots extents is at or above pct percent. */
static inline bool tfs_dirty_over(uint32_t ndirty, uint32_t nslots, unsigned pct)
{
	return (uint64_t)ndirty * 100 >= (uint64_t)pct * nslots;
}

/* Returns true if ndirty, one more than before, just reached pct percent
 * of nslots. */
static inline bool tfs_dirty_crossed(uint32_t ndirty, uint32_t nslots, unsigned pct)
{
	return tfs_dirty_over(ndirty, nslots, pct) && !tfs_dirty_over(ndirty - 1, nslots, pct);
}

/* Returns the level, in percent, from which the flusher runs flat out: a
 * tenth of the band below dirty_high (at least a point, above dirty_low),
 * so it is at full speed before the writes reach dirty_high, where those
 * that need a fresh slot go around the tier (write.c invariant 9).  Run
 * flat out only at dirty_high, a flusher in real time let the level sit
 * there: the maildir recording sent 2,400-2,750 writes around a tier its
 * RAID had time for. */
static inline unsigned tfs_flush_flat(unsigned low, unsigned high)
{
	unsigned m;

	if (high <= low + 1)
		return high;
	m = (high - low) / 10;
	return high - (m ? m : 1);
}

/* Returns the clean slots one eviction frees: up to TFS_EVICT_BATCH, an
 * eighth of the tier at most (a small tier keeps its hot set). */
static inline unsigned tfs_evict_batch(uint32_t nslots)
{
	unsigned b = nslots / 8 ? nslots / 8 : 1;

	return b < TFS_EVICT_BATCH ? b : TFS_EVICT_BATCH;
}

/* The flusher's next step. */
struct tfs_flush_step {
	bool run;		/* destage a batch now */
	uint32_t min_age;	/* only extents not written for this many ticks */
};

/* Returns what the flusher does at a dirty level of ndirty of nslots extents:
 * below dirty_low it works only when the array is idle or asked to (all);
 * between the watermarks, paced, on extents older than
 * TFS_FLUSH_WRITE_AGE; from tfs_flush_flat up, flat out. */
struct tfs_flush_step tfs_flush_plan(uint32_t ndirty, uint32_t nslots, unsigned low,
				     unsigned high, bool idle, bool all);
/* Returns true if the flusher leaves a dirty extent alone in a batch
 * that takes only extents not written for min_age ticks: written since
 * (wtime), and -- hot_only -- hot (heat >= 2: used again since it came,
 * so likely to be written again); an extent written once and not touched
 * since is destaged then (the tuner's choice, mrc.h).  A streamed extent
 * (write.c invariant 10: a stream does not rewrite what it passed) is
 * never spared. */
static inline bool tfs_flush_spares(bool streamed, uint32_t now, uint32_t wtime,
				    uint32_t min_age, unsigned heat, bool hot_only)
{
	return !streamed && now - wtime < min_age && (!hot_only || heat >= 2);
}

/* The flusher's choice of files, oldest first (as the kernel writes back
 * the inodes dirtied longest ago first): each destageable dirty extent
 * (tfs_flush_spares false) offers its file with its age, now - wtime, in
 * any order; fid[0..n) and age[0..n) keep the max files whose oldest such
 * extent is oldest, by age (greatest first), then fid (least first), each
 * file once at its greatest age.  Returns the new n.  O(n). */
unsigned tfs_flush_keep(uint64_t *fid, uint32_t *age, unsigned n, unsigned max, uint64_t f,
			uint32_t a);

/* Returns the pause in ms after a batch that destaged nfiles files (0: none), at
 * the dirty level after it: between the watermarks, longer the lower the
 * level; none from tfs_flush_flat up or when idle or asked to. */
unsigned tfs_flush_pause_ms(uint32_t ndirty, uint32_t nslots, unsigned low, unsigned high,
			    bool idle, bool all, unsigned nfiles);

#endif
