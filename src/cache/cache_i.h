/* Private to src/cache: the SSD tier's in-memory state.
 *
 * Locking: one mutex (c->lock) guards the index, the per-file lists, the
 * free list, the policy, the heat table and the counters; it is held for
 * bookkeeping, and across I/O in two places only: the store commit of an
 * eviction batch (cache.c evict_some) and the SSD write that zeroes
 * part of a cached extent in a cut (zero_extent).  Other I/O on a slot is
 * fenced by flags on its extent instead (cache.c invariants 2-4).  Lock order: a file's flush
 * lock (cfile.flock), then c->lock; the namespace's locks (in->lock, row
 * locks, io_gate) are only taken by the RAID calls, made without c->lock.
 */
#ifndef TIERFS_CACHE_I_H
#define TIERFS_CACHE_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "tierfs/cache.h"
#include "tierfs/cstore.h"
#include "tierfs/policy.h"

#define C_SECTOR 4096u
#define C_NONE UINT32_MAX
#define C_GUARDS 4096		/* hashed in-flight counters of RAID writes */
#define C_PROMOTE_QUEUE 1024
#define C_PROMOTERS 4		/* promotions in flight (each one RAID read) */

/* One slot of the data file and the extent it holds. */
struct cext {
	uint64_t fid, idx;
	uint64_t valid[TFS_CEXT_WORDS];
	uint64_t dirty[TFS_CEXT_WORDS];
	uint32_t hnext;			/* index hash chain */
	uint32_t fprev, fnext;		/* the file's extent list */
	uint32_t wseq;			/* bumped by every write into the slot */
	uint32_t wtime;			/* last write-back write (1/16 s) */
	uint64_t depoch;		/* flush_req when it last became dirty */
	uint32_t heat_t;		/* heat as of this time (1/16 s) */
	uint16_t heat;
	uint16_t pins;			/* readers and the flusher using the slot */
	bool used;
	bool busy;			/* a writer, a fill or an invalidation owns it */
	bool flushing;			/* the flusher is writing it to the RAID */
	bool dead;			/* dropped while pinned: freed at unpin */
};

/* A file with cached extents (or a size the cache knows). */
struct cfile {
	uint64_t fid;
	struct cfile *next;		/* hash chain */
	struct tfs_inode *in;		/* referenced while it has dirty extents */
	uint32_t head;			/* first extent (slot) or C_NONE */
	uint32_t fcur;			/* where the flusher's next scan starts */
	uint32_t ncached;		/* cached extents */
	uint32_t ndirty;		/* extents with dirty sectors */
	uint64_t dsec;			/* dirty sectors (st_blocks counts them) */
	uint32_t refs;			/* flush locks held or waited for */
	uint64_t size;			/* logical size recorded in the store, or 0 */
	bool journaled;			/* fid in the array journal's CDIRTY set */
	bool unresolved;		/* dirty, inode not found yet (restart) */
	pthread_mutex_t flock;		/* flusher against truncate and punch */
};

struct promote_job {
	uint64_t fid, idx;
	struct tfs_inode *in;		/* opened (tfs_ns_open) by the reader */
};

struct cstats {
	uint64_t read_hits, read_misses, read_hit_bytes, read_miss_bytes;
	uint64_t ring_hits;		/* read hits done by the I/O thread (hitio.c) */
	uint64_t write_hits, write_misses, write_around, seq_bypass;
	uint64_t promotions, promote_dropped, evictions, invalidations;
	uint64_t flushed_bytes, flush_writes, full_stripe_flushes, throttled;
	uint64_t fills;
};

struct tfs_cache {
	struct tfs_fs *fs;
	char *dir;
	struct tfs_cstore *cs;
	int fd, dfd;			/* data file, buffered and O_DIRECT (or -1) */
	char uuid[37];

	/* geometry and tunables */
	uint32_t extent, spe;		/* bytes, sectors per extent */
	uint32_t nslots;
	uint64_t seq_cutoff;
	unsigned promote;
	uint32_t halflife;		/* 1/16 s */
	unsigned dirty_low, dirty_high;	/* percent of slots */
	enum tfs_policy_kind policy_kind;
	enum tfs_cache_mode mode;	/* atomic loads */
	bool readonly;
	bool detached;			/* tierctl detach: the array runs uncached */
	/* made by this mount's set-up: a refused mount removes them (bind.c
	 * invariant 4) */
	bool made_dir, made_files;

	pthread_mutex_t lock;
	pthread_cond_t cond;		/* busy/flushing cleared, dirty dropped */
	struct cext *e;			/* [nslots] */
	uint32_t *htab, hmask;
	uint32_t *freel, nfree;
	uint32_t free_synced;		/* cache.c invariant 1 */
	struct tfs_policy *pol;
	struct cfile **ftab;
	uint32_t fmask, nfiles;
	uint32_t nused, ndirty;		/* extents cached, extents dirty */
	uint64_t dirty_sectors;
	uint32_t guard[C_GUARDS];	/* RAID writes in flight, by extent hash */
	/* heat of extents not cached: direct-mapped by key (a collision only
	 * forgets some heat); queued: a promotion of it is waiting */
	struct uheat { uint64_t key; uint32_t t; uint16_t heat; bool queued; } *uheat;
	uint32_t umask;
	struct cstats st;

	/* flusher and promoter */
	pthread_t flusher, promoter[C_PROMOTERS];
	bool threads, stop;
	pthread_cond_t fcond;		/* wakes the flusher */
	uint64_t flush_req, flush_done;	/* "flush everything" requests */
	int flush_err;			/* why the last flush stopped (-errno), or 0 */
	bool flush_unresolved;		/* ... or that dirty files were not found yet */
	uint32_t ndirty_old;		/* dirty extents older than the last flush request */
	uint32_t unresolved;		/* dirty files not found yet (after a restart) */
	/* the restart walk (flush.c resolve): when to walk next, the pause
	 * (doubled while files stay unfound), the last walk's error (logged
	 * once), the flush request it last walked for */
	uint32_t resolve_at, resolve_wait;
	int resolve_err;
	uint64_t resolve_req;
	/* detach (bind.c): writes inside tfs_cache_write; gate closed: new
	 * ones wait until the detach is decided (cache.c invariant 8) */
	unsigned writers;
	bool gate;
	uint64_t jgen;			/* journal generation after the last CDIRTY change */
	int journal_err;		/* last drain's error (jlock), logged once */
	int jsync_err;			/* last journal sync's error, logged once */
	/* CDIRTY changes decided under c->lock, applied in order outside it
	 * (a journal write can wait behind a journal sync) under jlock */
	struct jop { uint64_t fid; bool put; } *jq;
	unsigned njq, jcap;
	pthread_mutex_t jlock;
	uint64_t last_io;		/* time of the last foreground request (1/16 s) */
	struct promote_job q[C_PROMOTE_QUEUE];
	unsigned qhead, qlen;
	pthread_cond_t pcond;
};

/* cache.c */
uint32_t c_now(void);
enum tfs_cache_mode c_mode(const struct tfs_cache *c);
unsigned c_heat_now(const struct tfs_cache *c, uint16_t h, uint32_t t, uint32_t now);
struct cfile *c_file_get(struct tfs_cache *c, uint64_t fid);
/* Put free slot s in the index for (fid, idx); NULL: no memory. */
struct cfile *c_link_slot(struct tfs_cache *c, uint32_t s, uint64_t fid, uint64_t idx);
struct cfile *c_file_find(struct tfs_cache *c, uint64_t fid);
void c_wait_idle(struct tfs_cache *c, struct cext *x);
void c_unpin(struct tfs_cache *c, uint32_t s);
void c_record(const struct tfs_cache *c, uint32_t s, struct tfs_cext_rec *r);
int c_commit(struct tfs_cache *c, struct tfs_cstore_op *ops, unsigned n);
uint64_t c_ekey(uint64_t fid, uint64_t idx);
uint64_t c_slot_off(const struct tfs_cache *c, uint32_t s);
uint32_t c_lookup(struct tfs_cache *c, uint64_t fid, uint64_t idx);
void c_release_busy(struct tfs_cache *c, uint32_t s);
void c_unlink_slot(struct tfs_cache *c, uint32_t s);
/* Extent x of f became clean (flushed, zeroed or dropped). */
void c_file_cleaned(struct tfs_cache *c, struct cfile *f, const struct cext *x);
/* A "flush everything" request: it is done when every extent dirty now is
 * clean (writes after it do not hold it up).  Under c->lock. */
void c_flush_request(struct tfs_cache *c);
void c_file_maybe_free(struct tfs_cache *c, struct cfile *f);
/* f with a reference and its flush lock held (made if need be), or NULL */
struct cfile *c_file_hold(struct tfs_cache *c, uint64_t fid);
void c_file_unhold(struct tfs_cache *c, struct cfile *f);
/* Zero or drop [off, off+len) of f's extents; caller holds f (c_file_hold).
 * 0, or the store's error (logged; the dropped slots stay, empty). */
int c_zero_file(struct tfs_cache *c, struct cfile *f, uint64_t off, uint64_t len, bool trunc);
int c_ssd_io(struct tfs_cache *c, bool write, bool direct, void *buf, size_t len, uint64_t off);
void *c_buf(size_t len);
/* Apply the queued CDIRTY changes and sync the journal: 0 or -errno. */
int c_journal_sync(struct tfs_cache *c);
/* Apply the queued CDIRTY changes (not under c->lock): 0, or the error of
 * the first that failed (it and those after it stay queued). */
int c_journal_drain(struct tfs_cache *c);
uint32_t c_alloc_slot(struct tfs_cache *c, uint64_t fid, uint64_t idx);

/* flush.c */
int c_threads_start(struct tfs_cache *c);
void c_threads_stop(struct tfs_cache *c);
void c_promote_queue(struct tfs_cache *c, struct tfs_inode *in, uint64_t idx);
/* The heat entry of key (taken over if another key held it); c->lock. */
struct uheat *c_uheat(struct tfs_cache *c, uint64_t key, uint32_t now);
/* Flush everything dirty now; waits.  Returns 0 or -errno. */
int c_flush_all(struct tfs_cache *c);

/* One of f's extents gained (d > 0) or lost dirty sectors.  Under c->lock. */
static inline void c_dirty_add(struct tfs_cache *c, struct cfile *f, int64_t d)
{
	c->dirty_sectors += (uint64_t)d;
	f->dsec += (uint64_t)d;
}

/* Sector bitmaps */
static inline void bm_set(uint64_t *m, unsigned a, unsigned b)	/* [a, b) */
{
	for (unsigned i = a; i < b; i++)
		m[i / 64] |= 1ull << (i % 64);
}
static inline void bm_clear(uint64_t *m, unsigned a, unsigned b)
{
	for (unsigned i = a; i < b; i++)
		m[i / 64] &= ~(1ull << (i % 64));
}
static inline bool bm_test(const uint64_t *m, unsigned i)
{
	return m[i / 64] >> (i % 64) & 1;
}
static inline bool bm_all(const uint64_t *m, unsigned a, unsigned b)
{
	for (unsigned i = a; i < b; i++)
		if (!bm_test(m, i))
			return false;
	return true;
}
static inline bool bm_any_in(const uint64_t *m, unsigned a, unsigned b)
{
	for (unsigned i = a; i < b; i++)
		if (bm_test(m, i))
			return true;
	return false;
}
static inline bool bm_any(const uint64_t *m)
{
	for (unsigned w = 0; w < TFS_CEXT_WORDS; w++)
		if (m[w])
			return true;
	return false;
}
static inline unsigned bm_count(const uint64_t *m)
{
	unsigned n = 0;

	for (unsigned w = 0; w < TFS_CEXT_WORDS; w++)
		n += (unsigned)__builtin_popcountll(m[w]);
	return n;
}

#endif
