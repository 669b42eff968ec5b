/* Private to src/cache: the SSD tier's in-memory state, and what its
 * files call of each other.  The files, each opening with what it owns
 * and its invariants: index.c (slots and their records, per-file
 * records, the journal's CDIRTY queue, heat), request.c (a request's
 * pieces, the file's snapshot), read.c (reads, the I/O thread's hits),
 * write.c (writes of every mode, fsync), cut.c (truncate, punch, zero
 * range, unlink), flush.c (flusher, promoter), bind.c (binding, set-up,
 * start, stop, detach), store.c (the cache directory), opts.c (options),
 * status.c (status and control), history.c (counters across remounts),
 * pin.c (pinned files), trace.c (the trace recorder), watch.c (the live
 * miss-ratio curve and the admission tuner), policy.c (eviction
 * policies, pure), rules.c (the decisions, pure), model.c and mrc.c (the
 * tier as a model, and its miniatures, pure).
 *
 * Locking: one mutex (c->lock) guards the index, the per-file lists, the
 * free list, the policy, the heat table and the counters; it is held for
 * bookkeeping, and across I/O in three places only: the store commit of
 * an eviction batch (index.c evict_some), the store's durability point
 * before a slot freed since the last one is handed out (index.c
 * c_alloc_slot), and the SSD write that zeroes part of a cached extent in
 * a cut (cut.c zero_extent).  Other I/O on a slot is fenced by flags on
 * its extent instead (index.c invariant 2, write.c invariants 1-2).  Lock
 * order: a file's flush lock (cfile.flock), then c->lock.  The flusher
 * holds the flush locks of a batch's files while it takes their inode
 * locks (flush.c invariant 12); the others who take a flush lock hold no
 * inode lock (truncate, punch), or take it for a file that is gone, which
 * a file the flusher has open is not (a rename's replaced file, told to
 * the tier while the rename still holds the moved file's lock).  c->lock comes
 * after in->lock (the namespace asks the tier for a file's size and dirty
 * bytes under in->lock; the tier never takes in->lock under c->lock) and
 * before fs->ilock (tfs_inode_ref/unref under c->lock); the row locks and
 * io_gate are only taken by the RAID calls, made without c->lock.
 */
#ifndef TIERFS_CACHE_I_H
#define TIERFS_CACHE_I_H

#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "tierfs/cache.h"
#include "tierfs/cstore.h"
#include "tierfs/evidence.h"
#include "tierfs/hash.h"
#include "tierfs/policy.h"
#include "tierfs/rules.h"
#include "tierfs/trace.h"

#define C_SECTOR TFS_SECTOR
#define C_PRENAMED 1024	/* index.c invariant 4 */
#define C_NONE UINT32_MAX
#define C_GUARDS 4096		/* hashed in-flight counters of RAID writes */

/* One slot of the data file and the extent it holds. */
struct cext {
	uint64_t fid, idx;
	uint64_t valid[TFS_CEXT_WORDS];
	uint64_t dirty[TFS_CEXT_WORDS];
	uint32_t hnext;			/* index hash chain */
	uint32_t fprev, fnext;		/* the file's extent list */
	uint32_t dprev, dnext;		/* the dirty list (index.c invariant 8) */
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
	bool keep;			/* its file is pinned: never evicted (pin.c) */
	bool fillq;			/* a fill of its missing sectors is queued (flush.c) */
	bool contested;			/* eviction passed over it dirty (index.c inv. 7) */
	bool reclaim;			/* noted for the flusher: destage it first
					 * (flush.c invariant 15) */
	bool refused;			/* eviction passed over it dirty (moved as if
					 * used): demoted once clean */
	bool streamed;			/* dirtied by a stream past the cutoff: not
					 * spared young, demoted once clean (write.c
					 * invariant 10) */
	bool dlisted;			/* on the dirty list */
	bool copy;			/* a stream's clean copy, not used since
					 * (write.c invariant 11) */
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
	uint32_t cuts;			/* of refs, cuts' (c_file_hold): no promotions */
	uint64_t size;			/* logical size recorded in the store, or 0 */
	bool journaled;			/* fid in the array journal's CDIRTY set */
	bool unresolved;		/* dirty, inode not found yet (restart) */
	bool pinned;			/* user.tierfs.pinned (pin.c) */
	uint32_t pin_need;		/* extents reserved for it under the cap */
	pthread_mutex_t flock;		/* flusher against truncate and punch */
};

struct promote_job {
	uint64_t fid, idx;
	uint64_t t_ns;			/* taken by a promoter at (c_mono_ns); 0:
					 * not queued (c_promote_now) */
	struct tfs_inode *in;		/* opened (tfs_ns_open) by the reader */
	bool fill;			/* the extent is cached: fill its missing sectors */
	bool stale;			/* under a threshold risen since (flush.c inv. 20) */
};

struct cstats {
	uint64_t read_hits, read_misses, read_hit_bytes, read_miss_bytes;
	uint64_t ring_hits;		/* read hits done by the I/O thread (hitio.c) */
	uint64_t ring_writes;		/* write-back writes it did (write.c inv. 7) */
	uint64_t write_hits, write_misses, write_around, seq_bypass;
	uint64_t stream_copies;		/* of seq_bypass: clean copies kept (write.c inv. 11) */
	uint64_t full_bypass;		/* write.c invariant 9 */
	uint64_t promotions, promote_dropped, evictions, invalidations;
	uint64_t promote_full;		/* of promote_dropped, and fills: the queue full */
	uint64_t flushed_bytes, flush_writes, flush_syncs, full_stripe_flushes, throttled;
	uint64_t fills;
	uint64_t fill_promotions;	/* partly valid extents filled (flush.c invariant 14) */
	uint64_t reclaimed;		/* extents destaged because eviction wanted them */
	uint64_t fill_dropped;		/* fills given up (the slot busy or being flushed...) */
	/* whole requests: a hit when the tier served all of it from extents
	 * it held (the counters above count a request's pieces, one per
	 * extent) */
	uint64_t read_req_hits, read_req_misses, write_req_hits, write_req_misses;
};

#define C_WINDOWS 3	/* 5 minutes, an hour, a day (history.c) */
#define C_TOTALS 12	/* counters kept across remounts (history.c) */

/* The counters beyond this mount (history.c owns it, under c->lock). */
struct chist {
	uint64_t base[C_TOTALS];	/* totals the store held at mount */
	uint64_t folded[2];		/* read_req_hits, _misses folded in */
	double win[C_WINDOWS][2];	/* decaying read hits, misses */
	double wt;			/* wall-clock time of the last fold */
	uint32_t saved_t;		/* c_now() of the last save */
	struct cstats saved_st;		/* the counts then */
};

/* One request on in was (hit) or was not served whole by the tier;
 * why: the reason it went around the tier, if it did.  Relaxed atomics
 * (fs.h, tfs_tier_counts); not under any lock. */
void c_count_file(struct tfs_inode *in, bool write, bool hit, enum tfs_bypass why);

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
	unsigned promote;		/* in force: atomic loads (c_promote), watch.c inv. 2 */
	bool promote_auto;		/* the tuner sets promote and spare_hot (watch.c; atomic) */
	bool spare_hot;			/* the flusher spares only hot young extents
					 * (rules.h tfs_flush_spares; atomic) */
	uint32_t halflife;		/* 1/16 s */
	unsigned dirty_low, dirty_high;	/* percent of slots */
	enum tfs_reclaim reclaim_mode;	/* cache_reclaim */
	struct tfs_evidence *ev;	/* cache_reclaim=auto (index.c invariant 7) */
	struct tfs_copy_ev copy_ev;	/* a stream's copies used (write.c inv. 11) */
	bool passed;			/* this eviction's look passed over a dirty slot */
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
	uint32_t free_synced;		/* index.c invariant 1 */
	struct tfs_policy *pol;
	struct cfile **ftab;
	uint32_t fmask, nfiles;
	uint32_t nused, ndirty;		/* extents cached, extents dirty */
	uint32_t dhead, dtail;		/* the dirty list, oldest write first (index.c
					 * invariant 8); C_NONE: empty */
	uint64_t dirty_sectors;
	uint32_t guard[C_GUARDS];	/* RAID writes in flight, by extent hash */
	/* heat of extents not cached: sets of TFS_HEAT_WAYS entries by key
	 * (rules.h, index.c invariant 6); queued: a promotion of it is waiting */
	struct tfs_heat_ent *uheat;
	uint32_t umask;
	struct cstats st;
	struct chist hist;
	uint32_t pin_files, pin_reserved;	/* pinned files, extents reserved (pin.c) */

	/* flusher and promoter */
	pthread_t flusher, promoter[TFS_PROMOTERS];
	bool threads, stop;
	pthread_cond_t fcond;		/* wakes the flusher */
	/* dirty slots eviction wanted, for the flusher (flush.c invariant
	 * 15): at most rqcap; rbusy of them taken by its running round */
	uint32_t *rq;
	unsigned nrq, rqcap, rbusy;
	uint64_t flush_req, flush_done;	/* "flush everything" requests */
	/* a one-file flush (c_flush_file): its fid (0: none), requests made
	 * and served, the last one's result */
	uint64_t ffid, ffreq, ffdone;
	int ffrc;
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
	 * ones wait until the detach is decided (write.c invariant 5) */
	unsigned writers;
	bool gate;
	uint64_t jgen;			/* journal generation after the last CDIRTY change */
	int journal_err;		/* last drain's error (jlock; atomic), logged once */
	int jsync_err;			/* last journal sync's error, logged once */
	/* CDIRTY changes decided under c->lock, applied in order outside it
	 * (a journal write can wait behind a journal sync) under jlock */
	struct jop { uint64_t fid; bool put; } *jq;
	unsigned njq, jcap;
	/* files named in CDIRTY at their create, not written since (index.c
	 * invariant 4): fid (0: empty) and when, by fid % C_PRENAMED */
	struct prenamed { uint64_t fid; uint32_t t; } pre[C_PRENAMED];
	uint64_t jputgen;		/* journal generation after the last put drained */
	pthread_mutex_t jlock;
	uint64_t last_io;		/* time of the last foreground request (1/16 s) */
	/* the live miss-ratio curve and the tuner (watch.c): under mlock */
	struct tfs_mrc *mrc;
	uint64_t promote_changes;	/* the tuner's changes of promote */
	uint32_t mrc_kbps;		/* the destage rate the miniatures model */
	uint64_t mrc_pns;		/* the promotion time they model */
	pthread_mutex_t mlock;
	/* the flusher's destage rate, kB/s (flush.c invariant 16): written by
	 * the flusher thread alone, read atomically; 0 before its first */
	uint32_t destage_kbps;
	uint64_t dst_bytes, dst_ns;	/* the flusher's: rounds since the last rate */
	/* a queued promotion's time to readable, ns (flush.c invariant 18):
	 * a running mean the promoters keep under c->lock, read atomically;
	 * 0 before the first */
	uint64_t promote_ns;
	struct promote_job q[TFS_PROMOTE_QUEUE];
	unsigned qhead, qlen;
	unsigned qbusy;			/* jobs the promoters are doing */
	pthread_cond_t pcond;
};

/* A request is cut at extent boundaries; one piece per extent (request.c). */
struct piece {
	struct tfs_cext_rec rec;	/* its record, when one is committed */
	uint64_t idx, a, b;		/* logical [a, b) */
	uint32_t slot;			/* pinned or owned slot, or C_NONE */
	uint64_t valid[TFS_CEXT_WORDS];	/* snapshot when pinned */
	uint8_t act;
	bool full;			/* read: every sector valid */
	bool promote;
	bool fill;			/* read: cached in part; promote fills the rest */
	bool fresh;			/* write: slot allocated for it (no record yet) */
	bool copy;			/* ... for a stream's clean copy (write.c inv. 11) */
	const char *head, *tail;	/* write-through: its first / last sector, the
					 * bytes around the write's (write.c inv. 12) */
};

/* index.c: the slots, the files, the journal queue, heat */

/* The calling thread's 4K-aligned buffer of at least len bytes for an
 * extent's bytes (not tfs_iobuf's: index.c says why); its contents are
 * not kept when it grows.  NULL: no memory. */
void *c_buf(size_t len);
/* One transfer of len bytes at off in the data file, on the O_DIRECT fd
 * when direct and aligned; EINTR and short transfers are continued, and a
 * read past the file's end gives zeros.  Returns 0 or -errno (logged;
 * -ENOSPC stays -ENOSPC). */
int c_ssd_io(struct tfs_cache *c, bool write, bool direct, void *buf, size_t len, uint64_t off);
/* Apply the queued CDIRTY changes, in order (not under c->lock).  Returns
 * 0 or the -errno of the first that failed (logged once while it lasts;
 * it and those after it stay queued, index.c invariant 3). */
int c_journal_drain(struct tfs_cache *c);
/* Apply the queued CDIRTY changes and sync the journal up to them (not
 * under c->lock).  Returns 0 or -errno: the drain's, else the sync's
 * (logged once while it lasts). */
int c_journal_sync(struct tfs_cache *c);
/* Returns true if c_journal_sync has anything to do (changes queued, or
 * drained and not yet synced), as far as can be seen now.  Not under
 * c->lock. */
bool c_journal_due(struct tfs_cache *c);
/* fid's file record, or NULL.  Under c->lock. */
struct cfile *c_file_find(struct tfs_cache *c, uint64_t fid);
/* fid's file record, made (empty) if there is none.  NULL: no memory.
 * Under c->lock. */
struct cfile *c_file_get(struct tfs_cache *c, uint64_t fid);
/* Frees f if nothing refers to it any more (no extent, reference, size or
 * dirty extent), letting go of its inode and queueing the removal of its
 * journal entry.  Under c->lock. */
void c_file_maybe_free(struct tfs_cache *c, struct cfile *f);
/* Extent x of f got its first dirty sector (a request on in): counts it,
 * puts it at the dirty list's tail (c_dirty_touch), wakes the flusher at
 * the low watermark, keeps in for the flusher and queues f's journal
 * entry if f has none.  Under c->lock. */
void c_file_dirtied(struct tfs_cache *c, struct cfile *f, struct cext *x, struct tfs_inode *in);
/* A write-back write into slot s (dirty): its wtime is now, and it moves
 * to the dirty list's tail (index.c invariant 8).  Under c->lock. */
void c_dirty_touch(struct tfs_cache *c, uint32_t s);
/* Slot s, dirty as loaded at a start, joins the dirty list's tail, its
 * wtime kept.  Under c->lock. */
void c_dirty_join(struct tfs_cache *c, uint32_t s);
/* in is f's inode (a request on it): if f is dirty with no inode yet, the
 * flusher gets in (referenced), and a file unresolved since a restart is
 * resolved.  Under c->lock. */
void c_file_attach(struct tfs_cache *c, struct cfile *f, struct tfs_inode *in);
/* A "flush everything" request: it is done when every extent dirty now is
 * clean (writes after it do not hold it up).  Wakes the flusher.  Under
 * c->lock. */
void c_flush_request(struct tfs_cache *c);
/* Extent x of f became clean (flushed, zeroed or dropped): uncounts it;
 * at f's last, queues the removal of f's journal entry and lets go of its
 * inode.  Wakes those waiting on c->cond.  Under c->lock. */
void c_file_cleaned(struct tfs_cache *c, struct cfile *f, const struct cext *x);
/* The note of fid named at its create (index.c invariant 4), if any, is
 * dropped and the name's removal queued (the file is gone).  Not under
 * c->lock. */
void c_prenamed_forget(struct tfs_cache *c, uint64_t fid);
/* Every such note older than older ticks is dropped, the names' removals
 * queued (files created and not written).  Not under c->lock. */
void c_prenamed_expire(struct tfs_cache *c, uint32_t older);
/* For a cut: fid's file record (made if need be) with a reference and
 * its flush lock held: the flusher and the promoter stay off the file
 * until c_file_unhold.  NULL: no memory.  Not under c->lock. */
struct cfile *c_file_hold(struct tfs_cache *c, uint64_t fid);
/* Lets go of c_file_hold's flush lock and reference (f may be freed). */
void c_file_unhold(struct tfs_cache *c, struct cfile *f);
/* Lets go of the flusher's flush lock and reference on f (flush.c
 * next_dirty's; f may be freed).  Promotions go on meanwhile. */
void c_file_unlock(struct tfs_cache *c, struct cfile *f);
/* Returns the slot holding extent (fid, idx), or C_NONE.  Under c->lock. */
uint32_t c_lookup(struct tfs_cache *c, uint64_t fid, uint64_t idx);
/* Puts free slot s in the index for (fid, idx), in the policy and at the
 * head of its file's list.  Returns the file's record; NULL: no memory
 * (s untouched).  Under c->lock. */
struct cfile *c_link_slot(struct tfs_cache *c, uint32_t s, uint64_t fid, uint64_t idx);
/* Takes s out of the index, the policy and its file's list (its dirty
 * sectors uncounted); s is free now, or at its last unpin (dead).  Under
 * c->lock. */
void c_unlink_slot(struct tfs_cache *c, uint32_t s);
/* Slot s's extent was used (a read hit, a write into it): the policy's
 * hit, and eviction no longer wants it (flush.c invariant 15).  Under
 * c->lock. */
void c_used(struct tfs_cache *c, uint32_t s);
/* Returns true if reclaim is on now (flush.c invariant 15): set on, or
 * auto once the evidence said so (index.c invariant 7).  Under c->lock. */
bool c_reclaiming(const struct tfs_cache *c);
/* The evidence for reclaim (index.c invariant 7): a read piece of
 * extent key missed, not cached.  Under c->lock. */
void c_evidence_miss(struct tfs_cache *c, uint64_t key);
/* A read piece hit slot s whole: c_used, and the evidence for reclaim
 * (a dirty extent eviction passed over was read).  Under c->lock. */
void c_read_hit(struct tfs_cache *c, uint32_t s);
/* Fills r with slot s's record for the store.  Under c->lock. */
void c_record(const struct tfs_cache *c, uint32_t s, struct tfs_cext_rec *r);
/* Applies n changes to the store (none: nothing).  Returns 0 or -errno
 * (logged). */
int c_commit(struct tfs_cache *c, struct tfs_cstore_op *ops, unsigned n);
/* A free slot for (fid, idx), linked and busy (the caller fills it):
 * evicts clean slots when none is free, and makes a durability point
 * first when the slot was freed since the last (index.c invariant 1).
 * Returns the slot, or C_NONE: every slot dirty or in use, no memory, or
 * the durability point failed (logged).  Under c->lock. */
uint32_t c_alloc_slot(struct tfs_cache *c, uint64_t fid, uint64_t idx);
/* Drops every extent of fid that is clean and idle (not busy, pinned or
 * being flushed), as an eviction does: their records leave the store
 * first (a failure is logged and keeps them).  Not under c->lock. */
void c_evict_file(struct tfs_cache *c, uint64_t fid);
/* Waits until nobody owns x (busy), then owns it.  c->lock is let go while
 * it waits: the slot may hold another extent after.  Under c->lock. */
void c_wait_idle(struct tfs_cache *c, struct cext *x);
/* Gives up owning s (busy) and wakes those waiting.  Under c->lock. */
void c_release_busy(struct tfs_cache *c, uint32_t s);
/* Returns the heat entry of key: its own, or one of its set taken over
 * (index.c invariant 6).  Under c->lock. */
static inline struct tfs_heat_ent *c_uheat(struct tfs_cache *c, uint64_t key, uint32_t now)
{
	return tfs_heat_find(c->uheat, c->umask, c->halflife, key, now);
}

/* request.c: a request's pieces and the file's snapshot */

/* The pieces of [off, off+len) (len > 0), *np of them, and in *ops
 * (unless ops is NULL) room for one store op per piece plus one: the
 * calling thread's arrays (request.c invariant 1).  NULL: no memory. */
struct piece *c_pieces_of(struct tfs_cache *c, uint64_t off, uint64_t len, unsigned *np,
			  struct tfs_cstore_op **ops);
/* Notes [off, off+len) in the file's sequential-stream detector.  Returns
 * true if it continues a run that reached the cutoff.  Under in->lock. */
bool c_seq_note(const struct tfs_cache *c, struct tfs_inode *in, uint64_t off, uint64_t len);
/* The file's fid and logical size, and in *seq whether [off, off+len)
 * continues a sequential run past the cutoff (noted), in one in->lock
 * section, the file loaded first if need be.  Returns 0 or -errno: the
 * load's, or -EIO (not a regular file on the primary any more). */
int c_file_snap(struct tfs_cache *c, struct tfs_inode *in, uint64_t off, uint64_t len,
		uint64_t *fid, uint64_t *size, bool *seq);

/* cut.c */

/* Zeroes or drops [off, off+len) of f's cached extents; trunc: the size
 * record goes too.  The caller holds f (c_file_hold).  Returns 0 or
 * -errno: -ENOMEM, or the store's (logged; the dropped slots stay,
 * empty). */
int c_zero_file(struct tfs_cache *c, struct cfile *f, uint64_t off, uint64_t len, bool trunc);

/* flush.c */

/* Starts the flusher and the promoters.  Returns 0 or -EAGAIN (a thread
 * could not be made; those made are stopped again). */
int c_threads_start(struct tfs_cache *c);
/* Stops and joins the flusher and the promoters, if running. */
void c_threads_stop(struct tfs_cache *c);
/* Queues a promotion of extent idx of in (opened for it, released if the
 * queue is full: counted as dropped); fill: the extent is cached and its
 * missing sectors are to be filled (flush.c invariant 14).  Not under
 * c->lock. */
void c_promote_queue(struct tfs_cache *c, struct tfs_inode *in, uint64_t idx, bool fill);
/* Marks stale the waiting promotions whose extent's heat is under promote
 * (flush.c invariant 20).  Under c->lock. */
void c_promote_stale(struct tfs_cache *c, unsigned promote);
/* Has the flusher destage in's dirty extents now (one file at a time;
 * other callers wait their turn) and waits.  Returns 0, or -errno: the
 * RAID's, -EBUSY (writes kept dirtying the file: extents stayed dirty
 * after as many rounds as it had dirty extents to destage, twice over),
 * -EIO (the threads stopped).  Not under c->lock. */
int c_flush_file(struct tfs_cache *c, struct tfs_inode *in);
/* Flushes everything dirty now and waits.  Returns 0 or -errno: the
 * flusher's last error, or -EIO if dirty extents remain (the threads
 * stopped, or files not found since a restart). */
int c_flush_all(struct tfs_cache *c);

/* bind.c */

/* Detach (tierctl detach): flushes everything, empties the cache and
 * unbinds it; the array runs uncached from then on (write.c invariant 5).
 * Returns 0, or -errno with one line in err: -EAGAIN (dirty files not
 * found since a restart) or the flush's error, the cache staying attached
 * in mode off; or the unbinding's, the cache emptied. */
int c_detach(struct tfs_cache *c, char *err, size_t errlen);

/* store.c: the cache directory */

enum c_probe { C_PROBE_EMPTY, C_PROBE_CORRUPT, C_PROBE_OK };
/* Refuses dir if a user could swap it, else makes it root's (with a
 * warning) if it was not (store.c invariant 1).  Returns 0 or -errno
 * (-EPERM: a user could swap it) with one line in err. */
int c_dir_private(const char *dir, char *err, size_t errlen);
/* Removes what tierfs keeps in dir, and only that (store.c invariant 2);
 * what is not there is no error.  Returns 0 or -errno. */
int c_dir_wipe(const char *dir);
/* Makes a new, empty cache in c->dir with c's geometry, bound to this
 * array (a new uuid in c->uuid; store.c invariant 3).  Returns 0 or
 * -errno with one line in err; a data file it made but could not
 * allocate is removed. */
int c_create(struct tfs_cache *c, char *err, size_t errlen);
/* Returns what is in c->dir: nothing (C_PROBE_EMPTY), something that is not a
 * whole cache (C_PROBE_CORRUPT, why in why), or a cache (C_PROBE_OK:
 * its uuid and geometry in c, the array it names in array, "" if
 * detached). */
enum c_probe c_probe(struct tfs_cache *c, char *array, size_t alen, char *why, size_t wlen);
/* At start: opens the data file (c->fd; c->dfd with O_DIRECT, or -1) and
 * the store (c->cs).  Returns 0 or -errno (logged). */
int c_dir_open(struct tfs_cache *c);

/* history.c: the counters across remounts and over windows */

/* Reads the saved totals and windows from the store (none: zeros) and
 * decays the windows by the time since they were saved.  At start, before
 * the threads (or under c->lock). */
void c_history_load(struct tfs_cache *c);
/* Saves the totals and the windows in the store if the counts changed and
 * the last save is a minute old, or always (force: the stop).  A failure
 * is logged.  Not under c->lock. */
void c_history_save(struct tfs_cache *c, bool force);
/* Returns total i (since the cache was made or reset) of C_TOTALS.  Under
 * c->lock. */
uint64_t c_history_total(struct tfs_cache *c, unsigned i);
/* The cache.total.* and cache.read_hit_ratio_* status lines into buf.
 * Returns their length.  Under c->lock. */
int c_history_lines(struct tfs_cache *c, char *buf, size_t len);
/* Every count, total and window back to zero.  Under c->lock. */
void c_history_reset(struct tfs_cache *c);

/* pin.c: files kept in the tier */

#define C_PIN_CAP_PCT 50	/* pinned files reserve at most half the slots */

/* Reads the pin records (after the extents: their slots are marked).
 * Returns 0 or -errno (-ENOMEM, the store's).  At start, before the
 * threads. */
int c_pin_load(struct tfs_cache *c);
/* Pins (on) or unpins in (loaded), durably; pinning also loads every
 * extent of it not in the tier yet.  Returns 0 or -errno with one line in
 * err: -ENOSPC (over the cap: nothing changed; or pinned, but the tier
 * had no clean slot for some extents), the store's, the RAID's. */
int c_pin_set(struct tfs_cache *c, struct tfs_inode *in, bool on, char *err, size_t errlen);
/* fid is gone: its pin goes (the record with the next durability point).
 * Under c->lock; the record's removal is queued in *op when it returns
 * true. */
bool c_pin_forget(struct tfs_cache *c, uint64_t fid, struct tfs_cstore_op *op);

/* flush.c: one promotion, run by the caller (pin.c) */

/* Reads extent idx of in from the RAID into a fresh slot, as the
 * promoter does.  Returns true if it is in the tier now (or was). */
bool c_promote_now(struct tfs_cache *c, struct tfs_inode *in, uint64_t idx);

/* trace.c: the trace recorder (one per daemon) */

/* Records a request (op: enum tfs_trace_op; flags: TFS_TR_*) if a trace
 * runs; one relaxed load if not.  Not under c->lock. */
void c_trace(uint64_t fid, uint64_t off, uint64_t len, uint8_t op, uint8_t flags);
/* "start PATH" or "stop".  Returns 0 or -errno with one line in err:
 * -EBUSY (running already), -EINVAL, the file's open error (-EEXIST: it
 * exists: never overwritten). */
int c_trace_ctl(const char *cmd, char *err, size_t errlen);
/* "off", "on PATH RECORDS" or "off PATH RECORDS [ERROR]" (the last trace)
 * into buf.  Returns its length. */
int c_trace_state(char *buf, size_t len);
/* Stops a running trace (the tier's stop). */
void c_trace_stop(void);

/* watch.c: the live miss-ratio curve and the admission tuner */

/* Makes the miniatures for c's geometry and settings.  Returns 0 or
 * -ENOMEM.  At start, before the threads. */
int c_watch_start(struct tfs_cache *c);
/* One request as the tier decided it (seq: the cutoff's verdict), to the
 * miniatures if it touches their sample; the tuner's choice becomes the
 * threshold in auto.  Under c->lock or not. */
void c_watch(struct tfs_cache *c, uint64_t fid, uint64_t off, uint64_t len, bool write,
	     unsigned seq);
/* [off, off+len) of fid is gone (len UINT64_MAX: to the end), to the
 * miniatures (cut.c invariant 4).  Not under c->lock. */
void c_watch_cut(struct tfs_cache *c, uint64_t fid, uint64_t off, uint64_t len);
/* The threshold set by hand (promote), or auto (the tuner's from its next
 * window); a rise makes waiting promotions stale (flush.c invariant 20).
 * Under c->lock. */
void c_watch_promote(struct tfs_cache *c, unsigned promote, bool autot);
/* The curve's counts back to zero (tierctl reset). */
void c_watch_reset(struct tfs_cache *c);
/* The cache.promote_* and cache.mrc_* status lines into buf.  Returns
 * their length.  Not under c->lock. */
int c_watch_lines(struct tfs_cache *c, char *buf, size_t len);

/* Returns the promotion threshold in force (the tuner may change it any
 * time: watch.c invariant 2). */
static inline unsigned c_promote(const struct tfs_cache *c)
{
	return __atomic_load_n(&c->promote, __ATOMIC_RELAXED);
}

/* Returns true if the tuner sets the threshold and spare_hot. */
static inline bool c_tuned(const struct tfs_cache *c)
{
	return __atomic_load_n(&c->promote_auto, __ATOMIC_RELAXED);
}

/* Returns true if the flusher spares only hot young extents (rules.h
 * tfs_flush_spares; the tuner's). */
static inline bool c_spare_hot(const struct tfs_cache *c)
{
	return __atomic_load_n(&c->spare_hot, __ATOMIC_RELAXED);
}

/* opts.c */

/* The options into c's geometry, mode, policy and tunables (the ranges of
 * the numbers were checked by tierfs.c; opts.c invariant 2).  Returns 0,
 * or -EINVAL with one line in err. */
int c_config(struct tfs_cache *c, const struct tfs_cache_opts *o, char *err, size_t errlen);

/* One of f's extents gained (d > 0) or lost dirty sectors: counts them
 * in f and the cache.  Under c->lock. */
static inline void c_dirty_add(struct tfs_cache *c, struct cfile *f, int64_t d)
{
	c->dirty_sectors += (uint64_t)d;
	f->dsec += (uint64_t)d;
}

/* Small helpers of index.c, inline: the request paths call them under
 * c->lock on every request (they were static in one file once). */

/* Returns the mode now: an atomic load (tierctl cache_mode and detach
 * change it). */
static inline enum tfs_cache_mode c_mode(const struct tfs_cache *c)
{
	return __atomic_load_n(&c->mode, __ATOMIC_ACQUIRE);
}

/* Returns the monotonic clock (coarse) in 1/16 s: the unit of heat and
 * write times. */
static inline uint32_t c_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint32_t)(ts.tv_sec * 16 + ts.tv_nsec / (1000000000 / 16));
}

/* Returns the monotonic clock in ns: trace times, the flusher's rounds,
 * the miniatures' destages. */
static inline uint64_t c_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Returns the hash of extent (fid, idx): the key of the index, the policy,
 * the guards and the heat of extents not cached. */
static inline uint64_t c_ekey(uint64_t fid, uint64_t idx)
{
	return tfs_ext_key(fid, idx);
}

/* Returns where slot s starts in the data file. */
static inline uint64_t c_slot_off(const struct tfs_cache *c, uint32_t s)
{
	return (uint64_t)s * c->extent;
}

/* Drops a pin of s; the last pin of a dead slot frees it.  Under c->lock. */
static inline void c_unpin(struct tfs_cache *c, uint32_t s)
{
	struct cext *x = &c->e[s];

	if (--x->pins == 0 && x->dead) {
		x->dead = false;
		c->freel[c->nfree++] = s;
	}
}

/* Returns heat h as of time t, decayed to now (halved every halflife). */
static inline unsigned c_heat_now(const struct tfs_cache *c, uint16_t h, uint32_t t, uint32_t now)
{
	return tfs_heat_now(c->halflife, h, t, now);
}

/* The data file's fd for a transfer: the O_DIRECT one when asked and
 * aligned (buf NULL: the caller's buffer is page-aligned). */
static inline int c_ssd_fd(const struct tfs_cache *c, bool direct, const void *buf, size_t len,
			   uint64_t off)
{
	return direct && c->dfd >= 0 && !((uintptr_t)buf % C_SECTOR) && !(len % C_SECTOR) &&
	       !(off % C_SECTOR) ? c->dfd : c->fd;
}

/* Sector range [s0, s1) of piece p inside its extent. */
static inline void c_piece_sectors(const struct tfs_cache *c, const struct piece *p,
				   unsigned *s0, unsigned *s1)
{
	tfs_piece_sectors(c->extent, p->idx, p->a, p->b, s0, s1);
}

/* Returns true if piece p covers a whole sector (a stream's copy keeps
 * only those, write.c invariant 11). */
static inline bool c_piece_whole(const struct tfs_cache *c, const struct piece *p)
{
	unsigned a, b;

	tfs_piece_whole(c->extent, p->idx, p->a, p->b, &a, &b);
	return b > a;
}

/* One more access to heat (h, t) at now.  Returns the new heat
 * (saturating at UINT16_MAX). */
static inline unsigned c_heat_bump(struct tfs_cache *c, uint16_t *h, uint32_t *t, uint32_t now)
{
	return tfs_heat_bump(c->halflife, h, t, now);
}

#endif
