/* The SSD tier as a model: one thread, instant I/O, no data, built of the
 * daemon's own rules (rules.h) and eviction policy (policy.h).
 *
 * It keeps what the daemon keeps of each slot (the extent it holds, its
 * valid and dirty sectors, its heat, its last write) and of each file
 * (the sequential-stream detector), and runs each request as the daemon's
 * read and write paths do: cut at extent boundaries, each piece decided
 * by tfs_rule_read / tfs_rule_write, heat in the daemon's heat table,
 * promotions and fills done at once (the daemon queues them to the
 * promoter), slots evicted in the daemon's batches, and the flusher
 * destaging by tfs_flush_plan and tfs_flush_pause_ms in the requests'
 * own time.  What it does not have: files' sizes (a promotion takes the
 * whole extent), the promoter's queue (never full, never late), pins,
 * busy slots and RAID writes in flight (nothing is ever blocked), and
 * truncates and punches (not in a trace).
 *
 * Sampling: with cfg.sample below UINT64_MAX, only the extents whose key
 * (tfs_ext_key) is below it are modelled, the others passed over (the
 * sequential detector still sees every request): a tier of nslots slots
 * on a sample of rate sample / 2^64 is a miniature of a tier of
 * nslots * 2^64 / sample slots (Waldspurger et al., "Cache Modeling and
 * Optimization using Miniature Simulations", ATC 2017).  The live
 * miss-ratio curve and the admission tuner run such miniatures.
 *
 * Used by contrib/bench/cache_sim.c and by the daemon (src/cache/mrc.c).
 * Not thread-safe: the caller serialises every call on one model.
 */
#ifndef TIERFS_MODEL_H
#define TIERFS_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "tierfs/policy.h"
#include "tierfs/rules.h"

/* What the model did with one piece, told to cfg.watch piece by piece in
 * the order the pieces come (cache_sim --diff sets it beside another
 * policy's hits). */
enum tfs_model_act {
	TFS_MA_READ_HIT,		/* served whole from the slot */
	TFS_MA_READ_SEQ,		/* around the tier: a stream past the cutoff */
	TFS_MA_READ_PROMOTE,		/* a miss that promotes the extent */
	TFS_MA_READ_FILL,		/* a miss in an extent held in part, filled */
	TFS_MA_READ_PARTIAL,		/* ... not filled (under the threshold, blocked) */
	TFS_MA_READ_MISS,		/* a miss not promoted (under the threshold, blocked) */
	TFS_MA_WRITE_HIT,		/* into the extent's slot */
	TFS_MA_WRITE_ALLOC,		/* a fresh slot */
	TFS_MA_WRITE_SEQ,		/* around the tier: a stream's full rows */
	TFS_MA_WRITE_DIRTY_HIGH,	/* around: write-back at dirty_high */
	TFS_MA_WRITE_NO_SLOT,		/* around: every slot dirty or busy */
	TFS_MA_WRITE_MODE,		/* around: the mode keeps no new writes */
	TFS_MA_COUNT
};

struct tfs_model_cfg {
	uint32_t extent;		/* bytes: sectors of 4 KiB, at most 256 of them */
	uint32_t nslots;		/* at least 1 */
	enum tfs_policy_kind policy;
	enum tfs_cache_mode mode;
	unsigned promote;		/* heat that promotes, at least 1 */
	bool spare_hot_only;		/* tfs_flush_spares: young extents spared only if hot */
	enum tfs_reclaim reclaim;	/* cache_reclaim: a dirty extent eviction wanted
					 * is destaged first, then demoted (auto: once
					 * the evidence says so, invariant 7) */
	uint32_t halflife;		/* ticks (1/16 s) in which heat halves, at least 1 */
	uint64_t seq_cutoff;		/* bytes; 0: no cutoff */
	uint64_t row_bytes;		/* the RAID's full row (tfs_seq_write); 0: any */
	unsigned dirty_low, dirty_high;	/* percent, low < high */
	uint64_t sample;		/* extents whose key is below it; UINT64_MAX: all */
	uint32_t heat_entries;		/* heat table (a power of two, at least
					 * TFS_HEAT_WAYS); 0: as the daemon sizes it */
	/* a miniature's share of the daemon's batches: slots one eviction
	 * frees, and extents of a file one flusher batch destages; 0: the
	 * daemon's for nslots (tfs_evict_batch, TFS_FLUSH_BATCH) */
	uint32_t evict_batch, flush_batch;
	/* the RAID's rate for the flusher's destages, MB/s: a destage's
	 * slot stays dirty until its bytes went at it, after what the
	 * round sent before (tfs_model_clock's time); 0: at once */
	double destage_mbps;
	/* a promotion's own time, ns: a promoter reads the extent from the
	 * RAID, and it becomes readable that long after the promoter took
	 * it (tfs_model_clock's time); a read of it meanwhile is a miss that
	 * queues nothing, and at most promote_queue wait for a promoter (a
	 * full queue drops the promotion, as the daemon's); 0: at once */
	uint64_t promote_ns;
	uint32_t promote_queue;		/* promotions that may wait; 0: the
					 * daemon's TFS_PROMOTE_QUEUE */
	/* promotions under way at once (promote_ns each): the daemon's
	 * promoters, a miniature's share of them (a fraction: one every
	 * promote_ns / promoters); 0: TFS_PROMOTERS */
	double promoters;
	/* the seed of the policy's sketch hash (tfs_policy_new; a
	 * miniature takes its tier's); 0: the daemon's */
	uint64_t hash_seed;
	/* told what each piece did (NULL: nobody) */
	void (*watch)(void *arg, enum tfs_model_act act);
	void *watch_arg;
};

/* The model's defaults: the daemon's (cache.h TFS_CACHE_OPTS_DEFAULT). */
#define TFS_MODEL_CFG_DEFAULT(slots)                                                       \
	((struct tfs_model_cfg){ .extent = 256 * 1024, .nslots = (slots),                  \
				 .policy = TFS_POLICY_DEFAULT, .mode = TFS_CACHE_WRITEBACK, \
				 .promote = 2, .halflife = 60 * 16, .seq_cutoff = 4 << 20, \
				 .dirty_low = 20, .dirty_high = 70, .sample = UINT64_MAX,  \
				 .reclaim = TFS_RECLAIM_DEFAULT })

/* Counts of the modelled pieces (one per extent a request touches). */
struct tfs_model_stats {
	uint64_t reads, read_hits;		/* pieces; served whole by the tier */
	uint64_t read_partial;			/* misses in an extent the tier holds in part */
	uint64_t read_bytes, read_hit_bytes;
	uint64_t writes, write_hits;		/* pieces; into an extent the tier holds */
	uint64_t write_bytes, write_hit_bytes;
	uint64_t ssd_write_bytes;		/* promotions, fills, writes into slots */
	uint64_t raid_write_bytes;		/* destaged, and writes that went to the RAID */
	uint64_t raid_read_bytes;		/* read misses, promotions, fills */
	uint64_t promotions, fills, allocations, evictions, flushed_extents;
	uint64_t copies;			/* clean copies a stream's full rows left */
	uint64_t fresh;				/* write-through's fresh slots (clean) */
	uint64_t reclaimed;			/* of flushed_extents: for eviction */
	uint64_t promote_dropped;		/* promotions a full queue dropped */
	uint64_t cut_extents;			/* slots a cut emptied (tfs_model_cut) */
	uint64_t bypass_seq, bypass_dirty_high, bypass_no_slot;
};

struct tfs_model;

/* A model of an empty tier; NULL if cfg is out of range or no memory. */
struct tfs_model *tfs_model_new(const struct tfs_model_cfg *cfg);
/* Frees m (NULL is nothing). */
void tfs_model_free(struct tfs_model *m);
/* One read (write false) or write of [off, off+len) of file fid at tick
 * now (ticks never go back; a request of length 0 is nothing).  Returns
 * true if the tier served it whole, as the daemon's trace flags a request
 * TFS_TR_HIT: a read from valid sectors only, a write into extents the
 * tier holds (write-back or write-through); pieces outside the sample
 * count as served. */
bool tfs_model_request(struct tfs_model *m, uint64_t fid, uint64_t off, uint64_t len, bool write,
		       uint32_t now);
/* tfs_model_request with the sequential detector's verdicts given (seq:
 * TFS_SEQ_* of rules.h), not the model's own detector's: a miniature (see
 * Sampling) that sees only the requests touching its sample takes the
 * tier's.  Returns what tfs_model_request returns. */
bool tfs_model_apply(struct tfs_model *m, uint64_t fid, uint64_t off, uint64_t len, bool write,
		     unsigned seq, uint32_t now);
/* [off, off+len) of fid is gone (len UINT64_MAX: to the file's end): as
 * the daemon's cut (cut.c), the sectors wholly inside it leave every slot
 * of the file, a slot on its way to the RAID first arriving there, and a
 * slot left with no valid sector is freed.  Partial sectors keep their
 * state.  Heat stays. */
void tfs_model_cut(struct tfs_model *m, uint64_t fid, uint64_t off, uint64_t len);
/* The time of the requests that follow, ns on the caller's clock (a
 * trace's, CLOCK_MONOTONIC's; never back): what a destage's duration
 * (cfg.destage_mbps) is counted on.  Without it, time stands at 0. */
void tfs_model_clock(struct tfs_model *m, uint64_t ns);
/* Returns true if an extent of [off, off+len) of fid is in m's sample:
 * the requests a miniature is given (tfs_model_apply). */
bool tfs_model_samples(const struct tfs_model *m, uint64_t fid, uint64_t off, uint64_t len);
/* The model's own detector, which tfs_model_request asks: returns the
 * read's or write's (write) verdicts (TFS_SEQ_*) for [off, off+len) of
 * fid, the request noted: part of a stream past the cutoff, and so around
 * the tier (a write, only of row_bytes or more: tfs_seq_write). */
unsigned tfs_model_seq(struct tfs_model *m, uint64_t fid, uint64_t off, uint64_t len, bool write);
/* Returns the counts so far. */
const struct tfs_model_stats *tfs_model_stats(const struct tfs_model *m);
/* The counts back to zero (the tier's contents stay). */
void tfs_model_reset_stats(struct tfs_model *m);
/* The promotion threshold from now on (at least 1). */
void tfs_model_set_promote(struct tfs_model *m, unsigned promote);
/* Which young extents the flusher spares from now on (tfs_flush_spares). */
void tfs_model_set_spare(struct tfs_model *m, bool hot_only);
/* The RAID's destage rate from now on (cfg.destage_mbps, at least 0;
 * destages on their way keep the times they had). */
void tfs_model_set_destage(struct tfs_model *m, double mbps);
/* A promotion's time from now on, ns (cfg.promote_ns; 0: at once; those
 * on their way keep the times they had). */
void tfs_model_set_promote_time(struct tfs_model *m, uint64_t ns);
/* Reclaim's setting from now on (what was noted is still destaged; auto
 * starts off and turns on, for good, when the evidence says so). */
void tfs_model_set_reclaim(struct tfs_model *m, enum tfs_reclaim r);
/* Returns true if reclaim is on now (set on, or turned on by auto). */
bool tfs_model_reclaiming(const struct tfs_model *m);
/* Returns the model's slots. */
uint32_t tfs_model_slots(const struct tfs_model *m);
/* Returns the slots in use. */
uint32_t tfs_model_used(const struct tfs_model *m);
/* Returns the slots with dirty sectors. */
uint32_t tfs_model_dirty(const struct tfs_model *m);
/* Returns the bytes of memory the model holds. */
uint64_t tfs_model_bytes(const struct tfs_model *m);

#endif
