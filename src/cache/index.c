/* index.c - the SSD tier's index: which extent each slot holds.
 *
 * Owns: the in-memory index of cached extents (slots of CACHE/data: the
 * hash of (fid, idx) -> slot, the free list, the eviction policy), their
 * records in the LMDB store (cstore.c), the per-file records (struct
 * cfile: a file's extent list, dirty counts, the size only the tier knows,
 * its flush lock), the queue of CDIRTY changes to the array journal, heat,
 * and the data file's I/O (c_ssd_io).  The request paths over it are
 * read.c, write.c and cut.c (cutting requests into pieces: request.c);
 * flush.c has the flusher and the promoter, bind.c the cache's life.
 *
 * Invariants:
 *  1. The store holds a record for every slot in use that has a valid
 *     sector, applied (logged) before the request that made it valid or
 *     dirty is acknowledged, and deleted before its slot is reused, that
 *     deletion durable: freel[0 .. free_synced) were freed before the last
 *     durability point, and a slot above them is handed out only after
 *     another one (c_alloc_slot).  After a crash the store alone rebuilds
 *     the index (tfs_cache_start).  A durability point (tfs_cstore_sync)
 *     syncs the data file first, so a record never names slot bytes that
 *     are not on stable storage (no file shows another's old bytes after
 *     a power cut).
 *  2. A slot's bytes change only under its extent's busy flag (a writer,
 *     a fill, an invalidation); readers pin the slot instead, and a slot is
 *     freed or reused only with no pins (dead: freed at the last unpin).
 *  3. The CDIRTY changes (a file has, or no longer has, writes only in the
 *     tier) are decided under c->lock and applied to the array journal
 *     outside it, in the order decided, by one drainer at a time (jlock),
 *     every change queued in one transaction; a drain that fails leaves
 *     them all queued, ahead of those queued since, and the next drain
 *     tries them again (c_journal_drain).  A put is made durable promptly
 *     (the flusher syncs while one drained is unsynced, c->jputgen, and
 *     retries a drain that failed, c->journal_err: a put is queued only
 *     by a write, which drains it before it is acknowledged); a removal only names a file that no longer needs it (a
 *     start drops such entries), so removals wait for the next drain, a
 *     flush's end or the flusher's 5-second durability point.
 *  4. In write-back a regular file being created is named in CDIRTY by
 *     its create's own intent transaction (tfs_cache_created, a rider:
 *     meta.c invariant 9) and noted in c->pre; its first dirtying write
 *     then takes the note instead of committing a put of its own, and
 *     makes the next journal sync cover the create's commit (c->jgen,
 *     c->jputgen).  A note older than half SYNC_TICKS at the flusher's
 *     durability point (a file created and not written: 2.5 to 7.5 s
 *     after its create), or of a file gone, queues the name's removal;
 *     so does the stop, for every note left (bind.c tfs_cache_stop).
 *     So a create with the tier commits once, as without it; a kill or a
 *     power cut within those seconds may leave a name of a file never
 *     written, which a start drops, and which only a lost cache would
 *     report (as possibly lost).
 *  5. (A pinned file's slots are never chosen for eviction: pin.c.)
 *  6. The heat of extents not cached lives in sets of TFS_HEAT_WAYS
 *     entries chosen by the extent's key: a key keeps its entry until three
 *     others of its set are hotter, or as hot and more recent (an entry a
 *     promotion waits for gives way last).  The table was direct-mapped:
 *     two extents of one slot reset each other's heat at every access, and
 *     read in a fixed order neither ever reached the promotion threshold
 *     (135 of a hot 1 GiB file's 4096 extents never reached the tier;
 *     issue 16, test_cache.py test_extents_sharing_a_heat_slot_are_promoted).
 *  7. With cache_reclaim=auto, until reclaim is on (DESIGN §10.10), the
 *     evidence (evidence.h) is kept under c->lock as the model keeps it
 *     (model.c invariant 7): evict_ok marks a dirty slot it refuses
 *     (contested) and the look (c->passed); evict_some reports every
 *     victim, displaced if its look passed one (tfs_evidence_victim); read.c
 *     reports an uncached piece's miss (c_evidence_miss) and a whole hit
 *     of a contested slot (c_read_hit: the read path's and the hit
 *     ring's, which once left it out).  The first time it pays reclaim
 *     goes on for the rest of the mount (c_reclaiming, derived from the
 *     evidence's verdict, which stands; logged) and the
 *     policy's protected segment goes to probation (tfs_policy_unprotect,
 *     policy.c invariant 12).
 *  8. The dirty list (c->dhead .. c->dtail, linked by dprev/dnext) holds
 *     exactly the slots with dirty sectors (dlisted), in the order of
 *     their last write-back write, oldest first, so wtime never decreases
 *     along it: a slot joins at the tail when it becomes dirty
 *     (c_file_dirtied; a start's load, c_dirty_join, in load order, every
 *     wtime 0), moves to the tail at every write-back write into it
 *     (c_dirty_touch, which sets wtime, never below the tail's: c->last_io
 *     is set by readers that read the clock before the lock, so it can
 *     step back a tick), and leaves when it becomes clean
 *     (c_file_cleaned).  The flusher's look for the files whose oldest
 *     destageable extent is oldest (flush.c next_dirty, invariant 19)
 *     walks it from the head and stops once no later extent can change
 *     its choice, so it looks at the dirty extents, and only the oldest of
 *     them, not every cached extent of every dirty file under c->lock as
 *     it did for every batch (contrib/bench/flusher_scan.sh).  Its worst
 *     case is a walk of every dirty extent, when none may go yet.
 *
 * Extent states (per slot):
 *   free --c_alloc_slot--> busy (filling/writing) --clear busy--> clean|dirty
 *   dirty --flush.c flush_file--> clean --evict_some/c_unlink_slot--> free
 *   any --zero/forget/invalidate while pinned--> dead --c_unpin--> free
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tierfs/cache.h"
#include "tierfs/hash.h"
#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/inode.h"
#include "tierfs/scratch.h"
#include "cache_i.h"

bool tfs_cache_detached(const struct tfs_cache *c)
{
	return __atomic_load_n(&c->detached, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

/* Per-thread 4K-aligned scratch for an extent's bytes (scratch.c bounds
 * it).  The same mechanism as data.c's tfs_iobuf (a slot of scratch.c),
 * kept a slot of its own: the cache holds this buffer across
 * tfs_raid_read (a partial write's fill, the promoter), while tfs_iobuf
 * is what the front end holds as a read request's bytes across the whole
 * data path (fs.c) and what tfs_raid_write stages an O_DIRECT payload in.
 * No path holds both at once today; one slot would make that a rule every
 * later change to the data path must keep (a buffer that grows loses its
 * contents), to save at most TFS_SCRATCH_KEEP per thread. */
void *c_buf(size_t len)
{
	return tfs_scratch(TFS_SCR_CACHE, len);
}

/* One transfer on the data file: O_DIRECT when asked and aligned. */
int c_ssd_io(struct tfs_cache *c, bool write, bool direct, void *buf, size_t len, uint64_t off)
{
	int fd = c_ssd_fd(c, direct, buf, len, off);
	size_t done = 0;

	while (done < len) {
		ssize_t r = write ? pwrite(fd, (char *)buf + done, len - done, (off_t)(off + done))
				  : pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;	/* ENOSPC stays ENOSPC */

			tfs_err("cache %s: %s of %zu bytes at %" PRIu64 ": %s", c->dir,
				write ? "write" : "read", len - done, off + done, strerror(e));
			return -e;
		}
		if (r == 0) {	/* short data file: cannot happen (preallocated) */
			memset((char *)buf + done, 0, len - done);
			break;
		}
		done += (size_t)r;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* The journal's queue of CDIRTY changes (invariant 3)                 */
/* ------------------------------------------------------------------ */

/* Note that fid now has (put) or no longer has writes only in the cache;
 * c_journal_drain writes it to the array journal.  Under c->lock. */
static void journal_queue(struct tfs_cache *c, uint64_t fid, bool put)
{
	if (c->njq == c->jcap) {
		unsigned cap = c->jcap ? 2 * c->jcap : 64;
		struct jop *q = realloc(c->jq, cap * sizeof(*q));

		if (!q) {
			tfs_err("cache %s: out of memory noting file %" PRIu64 " in the journal",
				c->dir, fid);
			return;
		}
		c->jq = q;
		c->jcap = cap;
	}
	c->jq[c->njq++] = (struct jop){ .fid = fid, .put = put };
}

/* Put q[0..n), the changes a drain could not apply, back at the head of
 * the queue, before those queued since.  Under c->lock; takes q. */
static void journal_requeue(struct tfs_cache *c, struct jop *q, unsigned n)
{
	struct jop *all = realloc(q, (n + c->njq) * sizeof(*all));

	if (!all) {
		tfs_err("cache %s: out of memory keeping %u journal changes: files with dirty data "
			"may not be named in the journal", c->dir, n);
		free(q);
		return;
	}
	if (c->njq)
		memcpy(all + n, c->jq, c->njq * sizeof(*all));
	free(c->jq);
	c->jq = all;
	c->njq = c->jcap = n + c->njq;
}

/* Apply q[0..n) to the journal in one transaction.  Returns 0 or -errno
 * (none applied). */
static int journal_apply(struct tfs_cache *c, const struct jop *q, unsigned n, bool *puts)
{
	uint64_t (*keys)[2] = malloc(n * sizeof(*keys));
	bool *put = malloc(n * sizeof(*put));
	int rc = keys && put ? 0 : -ENOMEM;

	*puts = false;
	for (unsigned i = 0; i < n && rc == 0; i++) {
		keys[i][0] = q[i].fid;
		keys[i][1] = 0;
		put[i] = q[i].put;
		*puts |= q[i].put;
	}
	if (rc == 0)
		rc = tfs_meta_set_apply(c->fs->meta, TFS_SET_CDIRTY, keys, put, n);
	free(keys);
	free(put);
	return rc;
}

int c_journal_drain(struct tfs_cache *c)
{
	struct jop *q;
	unsigned n;
	bool puts = false;
	int rc = 0;

	pthread_mutex_lock(&c->jlock);	/* one drainer at a time: order kept */
	pthread_mutex_lock(&c->lock);
	q = c->jq;
	n = c->njq;
	c->jq = NULL;
	c->njq = c->jcap = 0;
	pthread_mutex_unlock(&c->lock);
	if (n)
		rc = journal_apply(c, q, n, &puts);
	if (n) {	/* what the next journal sync must cover (a failed one too) */
		uint64_t gen = tfs_meta_gen(c->fs->meta);

		pthread_mutex_lock(&c->lock);
		if (gen > c->jgen)
			c->jgen = gen;
		if (puts && gen > c->jputgen)
			c->jputgen = gen;
		pthread_mutex_unlock(&c->lock);
	}
	/* the changes are tried again by the next drain (the flusher's at
	 * the latest), in order; meanwhile writes fail */
	if (rc && rc != c->journal_err)
		tfs_err("cache %s: journal: %u changes from file %" PRIu64 ": %s (retried; writes "
			"fail until it works)", c->dir, n, q[0].fid, strerror(-rc));
	else if (!rc && n && c->journal_err)
		tfs_info("cache %s: journal writes work again", c->dir);
	if (rc || n)
		__atomic_store_n(&c->journal_err, rc, __ATOMIC_RELAXED);
	if (rc) {
		pthread_mutex_lock(&c->lock);
		journal_requeue(c, q, n);
		pthread_mutex_unlock(&c->lock);
		q = NULL;
	}
	pthread_mutex_unlock(&c->jlock);
	free(q);
	return rc;
}

bool c_journal_due(struct tfs_cache *c)
{
	uint64_t gen;
	unsigned n;

	pthread_mutex_lock(&c->lock);
	gen = c->jgen;
	n = c->njq;
	pthread_mutex_unlock(&c->lock);
	return n || tfs_meta_sync_due(c->fs->meta, gen);
}

/* The CDIRTY changes drained so far made durable.  By generation, not by
 * a flag: an fsync that finds another one's journal sync in flight waits
 * for it (tfs_meta_sync_to takes the journal's lock) instead of returning
 * before its file's entry is durable. */
int c_journal_sync(struct tfs_cache *c)
{
	uint64_t gen;
	int rc = c_journal_drain(c), r;

	pthread_mutex_lock(&c->lock);
	gen = c->jgen;
	pthread_mutex_unlock(&c->lock);
	r = tfs_meta_sync_to(c->fs->meta, gen);
	pthread_mutex_lock(&c->lock);
	if (r) {
		if (r != c->jsync_err)
			tfs_err("cache %s: journal sync failed: %s (the files with dirty data may "
				"not be named after a power loss; fsync fails until it works)",
				c->dir, strerror(-r));
	}
	c->jsync_err = r;
	pthread_mutex_unlock(&c->lock);
	return rc ? rc : r;
}

/* ------------------------------------------------------------------ */
/* Files                                                               */
/* ------------------------------------------------------------------ */

struct cfile *c_file_find(struct tfs_cache *c, uint64_t fid)
{
	struct cfile *f = c->ftab[tfs_mix64(fid) & c->fmask];

	while (f && f->fid != fid)
		f = f->next;
	return f;
}

struct cfile *c_file_get(struct tfs_cache *c, uint64_t fid)
{
	struct cfile *f = c_file_find(c, fid);
	uint32_t h;

	if (f)
		return f;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->fid = fid;
	f->head = f->fcur = C_NONE;
	pthread_mutex_init(&f->flock, NULL);
	h = (uint32_t)(tfs_mix64(fid) & c->fmask);
	f->next = c->ftab[h];
	c->ftab[h] = f;
	c->nfiles++;
	return f;
}

/* Forget f if nothing refers to it any more. */
void c_file_maybe_free(struct tfs_cache *c, struct cfile *f)
{
	struct cfile **pp;

	if (f->ncached || f->refs || f->size || f->ndirty || f->pinned)
		return;
	if (f->in) {
		tfs_inode_unref(c->fs, f->in);
		f->in = NULL;
	}
	if (f->journaled)
		journal_queue(c, f->fid, false);
	for (pp = &c->ftab[tfs_mix64(f->fid) & c->fmask]; *pp != f; pp = &(*pp)->next)
		;
	*pp = f->next;
	c->nfiles--;
	pthread_mutex_destroy(&f->flock);
	free(f);
}

/* Slot s leaves the dirty list (invariant 8), if on it. */
static void dlist_unlink(struct tfs_cache *c, uint32_t s)
{
	struct cext *x = &c->e[s];

	if (!x->dlisted)
		return;
	if (x->dprev != C_NONE)
		c->e[x->dprev].dnext = x->dnext;
	else
		c->dhead = x->dnext;
	if (x->dnext != C_NONE)
		c->e[x->dnext].dprev = x->dprev;
	else
		c->dtail = x->dprev;
	x->dlisted = false;
}

void c_dirty_join(struct tfs_cache *c, uint32_t s)
{
	struct cext *x = &c->e[s];

	dlist_unlink(c, s);
	x->dprev = c->dtail;
	x->dnext = C_NONE;
	if (c->dtail != C_NONE)
		c->e[c->dtail].dnext = s;
	else
		c->dhead = s;
	c->dtail = s;
	x->dlisted = true;
}

void c_dirty_touch(struct tfs_cache *c, uint32_t s)
{
	uint32_t t = (uint32_t)c->last_io;

	if (c->dtail != C_NONE && c->dtail != s && (int32_t)(t - c->e[c->dtail].wtime) < 0)
		t = c->e[c->dtail].wtime;	/* a reader's tick, older */
	c->e[s].wtime = t;
	c_dirty_join(c, s);
}

/* The file got its first dirty extent: keep its inode for the flusher
 * and name it in the array journal (tfs_cache_setup reads that when the
 * cache is lost). */
void c_file_dirtied(struct tfs_cache *c, struct cfile *f, struct cext *x, struct tfs_inode *in)
{
	f->ndirty++;
	c->ndirty++;
	/* crossing the low watermark wakes the flusher from its long sleep,
	 * crossing the level where it runs flat out from a paced pause
	 * (writes wanting fresh slots go around the tier at dirty_high);
	 * a signal per write would wake it from every paced pause */
	if (tfs_dirty_crossed(c->ndirty, c->nslots, c->dirty_low) ||
	    tfs_dirty_crossed(c->ndirty, c->nslots, tfs_flush_flat(c->dirty_low, c->dirty_high)))
		pthread_cond_signal(&c->fcond);
	x->depoch = c->flush_req;
	c_dirty_touch(c, (uint32_t)(x - c->e));
	c_file_attach(c, f, in);
	if (!f->journaled) {
		struct prenamed *p = &c->pre[f->fid % C_PRENAMED];

		f->journaled = true;
		if (p->fid == f->fid) {	/* named by its create (invariant 4) */
			uint64_t gen = tfs_meta_gen(c->fs->meta);

			p->fid = 0;
			if (gen > c->jgen)
				c->jgen = gen;
			if (gen > c->jputgen)
				c->jputgen = gen;
		} else {
			journal_queue(c, f->fid, true);
		}
	}
}

void tfs_cache_created(struct tfs_fs *fs, uint64_t fid)
{
	struct tfs_cache *c = fs->cache;
	struct prenamed *p;
	bool mine = false;

	if (!c || fid == 0 || c->readonly || tfs_cache_detached(c))
		return;
	pthread_mutex_lock(&c->lock);
	p = &c->pre[fid % C_PRENAMED];
	if (c_mode(c) == TFS_CACHE_WRITEBACK && p->fid == 0) {
		*p = (struct prenamed){ .fid = fid, .t = c_now() };
		mine = true;
	}
	pthread_mutex_unlock(&c->lock);
	/* outside c->lock: the file has no name yet, so nothing can take
	 * the note before the rider is queued */
	if (mine && !tfs_meta_set_put_next(fs->meta, TFS_SET_CDIRTY, fid, 0)) {
		pthread_mutex_lock(&c->lock);
		p->fid = 0;	/* its first write names it itself */
		pthread_mutex_unlock(&c->lock);
	}
}

/* Drop the note in p, queueing the name's removal.  Under c->lock. */
static void prenamed_drop_locked(struct tfs_cache *c, struct prenamed *p)
{
	journal_queue(c, p->fid, false);
	p->fid = 0;
}

void c_prenamed_forget(struct tfs_cache *c, uint64_t fid)
{
	struct prenamed *p = &c->pre[fid % C_PRENAMED];

	pthread_mutex_lock(&c->lock);
	if (fid && p->fid == fid)
		prenamed_drop_locked(c, p);
	pthread_mutex_unlock(&c->lock);
}

void c_prenamed_expire(struct tfs_cache *c, uint32_t older)
{
	uint32_t now = c_now();

	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < C_PRENAMED; i++)
		if (c->pre[i].fid && now - c->pre[i].t >= older)
			prenamed_drop_locked(c, &c->pre[i]);
	pthread_mutex_unlock(&c->lock);
}

/* in is f's inode (a request on it): the flusher can use it. */
void c_file_attach(struct tfs_cache *c, struct cfile *f, struct tfs_inode *in)
{
	if (f->ndirty && !f->in) {
		f->in = in;
		tfs_inode_ref(c->fs, in);
		if (f->unresolved) {
			f->unresolved = false;
			c->unresolved--;
		}
	}
}

void c_flush_request(struct tfs_cache *c)
{
	c->flush_req++;
	c->ndirty_old = c->ndirty;	/* every extent dirty now predates it */
	pthread_cond_signal(&c->fcond);
}

/* An extent of f became clean (the flusher, or it was dropped). */
void c_file_cleaned(struct tfs_cache *c, struct cfile *f, const struct cext *x)
{
	dlist_unlink(c, (uint32_t)(x - c->e));
	if (x->depoch < c->flush_req && c->ndirty_old)
		c->ndirty_old--;
	c->ndirty--;
	if (--f->ndirty == 0) {
		if (f->journaled) {	/* nothing of it is only here any more */
			f->journaled = false;
			journal_queue(c, f->fid, false);
		}
		if (f->in) {
			tfs_inode_unref(c->fs, f->in);
			f->in = NULL;
		}
		if (f->unresolved) {
			f->unresolved = false;
			c->unresolved--;
		}
	}
	pthread_cond_broadcast(&c->cond);
}

/* The cached file of fid with a reference and its flush lock, or NULL
 * (no memory). */
struct cfile *c_file_hold(struct tfs_cache *c, uint64_t fid)
{
	struct cfile *f;

	pthread_mutex_lock(&c->lock);
	f = c_file_get(c, fid);	/* made if need be: the promoter stays off (cuts) */
	if (f) {
		f->refs++;
		f->cuts++;
	}
	pthread_mutex_unlock(&c->lock);
	if (f)
		pthread_mutex_lock(&f->flock);
	return f;
}

static void file_let_go(struct tfs_cache *c, struct cfile *f, unsigned cut)
{
	pthread_mutex_unlock(&f->flock);
	pthread_mutex_lock(&c->lock);
	f->refs--;
	f->cuts -= cut;
	c_file_maybe_free(c, f);
	pthread_mutex_unlock(&c->lock);
}

void c_file_unhold(struct tfs_cache *c, struct cfile *f)
{
	file_let_go(c, f, 1);
}

void c_file_unlock(struct tfs_cache *c, struct cfile *f)
{
	file_let_go(c, f, 0);
}

/* ------------------------------------------------------------------ */
/* The index                                                           */
/* ------------------------------------------------------------------ */

uint32_t c_lookup(struct tfs_cache *c, uint64_t fid, uint64_t idx)
{
	uint32_t s = c->htab[c_ekey(fid, idx) & c->hmask];

	while (s != C_NONE && (c->e[s].fid != fid || c->e[s].idx != idx))
		s = c->e[s].hnext;
	return s;
}

static void hash_remove(struct tfs_cache *c, uint32_t s)
{
	uint32_t *pp = &c->htab[c_ekey(c->e[s].fid, c->e[s].idx) & c->hmask];

	while (*pp != s)
		pp = &c->e[*pp].hnext;
	*pp = c->e[s].hnext;
}

/* Put slot s (free) in the index for (fid, idx); NULL file: no memory. */
struct cfile *c_link_slot(struct tfs_cache *c, uint32_t s, uint64_t fid, uint64_t idx)
{
	struct cfile *f = c_file_get(c, fid);
	struct cext *x = &c->e[s];
	uint32_t h = (uint32_t)(c_ekey(fid, idx) & c->hmask);

	if (!f)
		return NULL;
	memset(x, 0, sizeof(*x));
	x->fid = fid;
	x->idx = idx;
	x->used = true;
	x->keep = f->pinned;
	x->hnext = c->htab[h];
	c->htab[h] = s;
	x->fprev = C_NONE;
	x->fnext = f->head;
	if (f->head != C_NONE)
		c->e[f->head].fprev = s;
	f->head = s;
	f->ncached++;
	c->nused++;
	tfs_policy_insert(c->pol, s, c_ekey(fid, idx));
	return f;
}

/* Take s out of the index and its file's list; the slot is free once
 * nobody has it pinned. */
void c_unlink_slot(struct tfs_cache *c, uint32_t s)
{
	struct cext *x = &c->e[s];
	struct cfile *f = c_file_find(c, x->fid);

	if (tfs_policy_holds(c->pol, s))
		tfs_policy_remove(c->pol, s);
	x->reclaim = x->refused = false;
	if (x->copy)		/* gone unused (write.c invariant 11) */
		tfs_copy_resolved(&c->copy_ev, false);
	x->copy = false;
	hash_remove(c, s);
	if (x->fprev != C_NONE)
		c->e[x->fprev].fnext = x->fnext;
	else
		f->head = x->fnext;
	if (x->fnext != C_NONE)
		c->e[x->fnext].fprev = x->fprev;
	if (bm_any(x->dirty)) {
		c_dirty_add(c, f, -(int64_t)bm_count(x->dirty));
		c_file_cleaned(c, f, x);
	}
	x->used = false;
	c->nused--;
	f->ncached--;
	c_file_maybe_free(c, f);
	if (x->pins) {
		x->dead = true;
	} else {
		c->freel[c->nfree++] = s;
	}
}

void c_record(const struct tfs_cache *c, uint32_t s, struct tfs_cext_rec *r)
{
	const struct cext *x = &c->e[s];

	memset(r, 0, sizeof(*r));
	r->fid = x->fid;
	r->idx = x->idx;
	r->slot = s;
	r->heat = x->heat;
	memcpy(r->valid, x->valid, sizeof(r->valid));
	memcpy(r->dirty, x->dirty, sizeof(r->dirty));
}

int c_commit(struct tfs_cache *c, struct tfs_cstore_op *ops, unsigned n)
{
	int rc = n ? tfs_cstore_apply(c->cs, ops, n) : 0;

	if (rc)
		tfs_err("cache %s: extent map update failed: %s", c->dir, strerror(-rc));
	return rc;
}

static bool evictable(void *arg, uint32_t s)
{
	const struct cext *x = &((struct tfs_cache *)arg)->e[s];

	return x->used && !x->busy && !x->pins && !x->flushing && !x->keep && !bm_any(x->dirty);
}

bool c_reclaiming(const struct tfs_cache *c)
{
	return tfs_reclaim_on(c->reclaim_mode, c->ev && tfs_evidence_pays(c->ev));
}

/* Whether the evidence for reclaim is being kept (invariant 7). */
static bool judging(const struct tfs_cache *c)
{
	return c->ev && !tfs_evidence_pays(c->ev);
}

/* Slot s, dirty, is noted for the flusher (flush.c invariant 15), once,
 * while the queue has room; refused: eviction passed over it. */
static void note_reclaim(struct tfs_cache *c, uint32_t s, bool refused)
{
	struct cext *x = &c->e[s];

	if (!x->reclaim) {
		if (c->nrq == c->rqcap)
			return;		/* a full queue notes nothing */
		x->reclaim = true;
		c->rq[c->nrq++] = s;
	}
	x->refused |= refused;
}

/* The policy's ok() for evict_some: evictable; a dirty extent of a file
 * not pinned is marked for the evidence while it is kept (invariant 7),
 * and noted for the flusher, once, while reclaim is on (flush.c
 * invariant 15). */
static bool evict_ok(void *arg, uint32_t s)
{
	struct tfs_cache *c = arg;
	struct cext *x = &c->e[s];

	if (evictable(c, s))
		return true;
	if (!x->used || x->keep || !bm_any(x->dirty))
		return false;
	if (judging(c)) {
		x->contested = true;
		c->passed = true;
	}
	if (c_reclaiming(c))
		note_reclaim(c, s, true);
	return false;
}

/* After an event of the evidence: once it pays (reclaim on from now on,
 * c_reclaiming), what the turn does once. */
static void judged(struct tfs_cache *c)
{
	if (!tfs_evidence_pays(c->ev))
		return;
	tfs_policy_unprotect(c->pol);
	tfs_info("cache %s: reclaim on: eviction passed over dirty extents for clean ones "
		 "read again soon (cache_reclaim=auto)", c->dir);
}

void c_evidence_miss(struct tfs_cache *c, uint64_t key)
{
	if (judging(c) && tfs_evidence_miss(c->ev, key))
		judged(c);
}

void c_read_hit(struct tfs_cache *c, uint32_t s)
{
	struct cext *x = &c->e[s];

	x->streamed = false;	/* read again: kept as any (write.c invariant 10) */
	c_used(c, s);
	if (!x->contested || !judging(c))
		return;
	x->contested = false;
	tfs_evidence_kept(c->ev);
}

void c_used(struct tfs_cache *c, uint32_t s)
{
	tfs_policy_hit(c->pol, s);
	c->e[s].reclaim = c->e[s].refused = false;
	if (c->e[s].copy) {	/* write.c invariant 11 */
		c->e[s].copy = false;
		tfs_copy_resolved(&c->copy_ev, true);
	}
}

/* Clean-ahead (flush.c invariant 15): the dirty extents among eviction's
 * next 2 batches of victims, noted for the flusher, which cleans them
 * before eviction gets there; they keep their place. */
static void note_ahead(struct tfs_cache *c, unsigned batch)
{
	uint32_t next[2 * TFS_EVICT_BATCH];
	uint32_t n = tfs_policy_next(c->pol, next, 2 * batch);

	for (uint32_t i = 0; i < n; i++) {
		struct cext *x = &c->e[next[i]];

		if (x->used && !x->keep && bm_any(x->dirty))
			note_reclaim(c, next[i], false);
	}
}

/* Free up to 32 clean slots chosen by the policy; their records are gone
 * from the store before any of them can be reused (invariant 1). */
static void evict_some(struct tfs_cache *c)
{
	struct tfs_cstore_op ops[TFS_EVICT_BATCH];
	uint32_t vict[TFS_EVICT_BATCH];
	unsigned n = 0, batch = tfs_evict_batch(c->nslots), noted = c->nrq;

	/* a batch amortises the commit; an eighth of the cache at most, so a
	 * small cache does not lose its hot set to one allocation */
	while (n < batch && c->nused > c->ndirty) {
		/* S3-FIFO may pass over main a few times lowering frequencies:
		 * NONE from an unbounded look means nothing is evictable */
		uint32_t s;

		c->passed = false;
		s = tfs_policy_victim(c->pol, evict_ok, c, 4 * c->nslots + 64);
		if (s == TFS_POLICY_NONE)
			break;
		if (judging(c))		/* invariant 7 */
			tfs_evidence_victim(c->ev, c_ekey(c->e[s].fid, c->e[s].idx), c->passed);
		vict[n] = s;
		ops[n++] = (struct tfs_cstore_op){ .op = TFS_CS_DEL_EXT, .fid = c->e[s].fid,
						   .idx = c->e[s].idx };
	}
	if (c_reclaiming(c))
		note_ahead(c, batch);
	if (c->nrq > noted)
		pthread_cond_signal(&c->fcond);	/* the flusher's first work */
	if (n && c_commit(c, ops, n)) {
		/* the records may still name these slots: keep them cached */
		for (unsigned i = 0; i < n; i++)
			tfs_policy_insert(c->pol, vict[i], c_ekey(c->e[vict[i]].fid, c->e[vict[i]].idx));
		return;
	}
	for (unsigned i = 0; i < n; i++)
		c_unlink_slot(c, vict[i]);
	c->st.evictions += n;
}

void c_evict_file(struct tfs_cache *c, uint64_t fid)
{
	struct tfs_cstore_op ops[32];
	uint32_t vict[32];
	unsigned n;

	pthread_mutex_lock(&c->lock);
	do {
		struct cfile *f = c_file_find(c, fid);

		n = 0;
		for (uint32_t s = f ? f->head : C_NONE; s != C_NONE && n < 32; s = c->e[s].fnext) {
			if (!evictable(c, s))
				continue;
			vict[n] = s;
			ops[n++] = (struct tfs_cstore_op){ .op = TFS_CS_DEL_EXT, .fid = fid,
							   .idx = c->e[s].idx };
		}
		if (n && c_commit(c, ops, n))
			break;	/* logged; the records may still name the slots */
		for (unsigned i = 0; i < n; i++)
			c_unlink_slot(c, vict[i]);
		c->st.evictions += n;
	} while (n == 32);
	pthread_mutex_unlock(&c->lock);
}

/* A free slot for (fid, idx), linked and busy (the caller fills it), or
 * C_NONE when every slot is dirty or in use. */
uint32_t c_alloc_slot(struct tfs_cache *c, uint64_t fid, uint64_t idx)
{
	uint32_t s;

	if (c->nfree == 0)
		evict_some(c);
	if (c->nfree == 0)
		return C_NONE;
	if (c->nfree > c->free_synced) {
		/* the top of the free list was freed since the last durability
		 * point: after a power cut the store could still name it for
		 * its old extent, dirty (invariant 1) */
		if (tfs_cstore_sync(c->cs))
			return C_NONE;	/* logged; the write goes to the RAID */
		c->free_synced = c->nfree;
	}
	s = c->freel[--c->nfree];
	if (c->free_synced > c->nfree)
		c->free_synced = c->nfree;
	if (!c_link_slot(c, s, fid, idx)) {
		c->freel[c->nfree++] = s;
		return C_NONE;
	}
	c->e[s].busy = true;
	c->e[s].heat_t = c_now();
	return s;
}

/* Wait until nobody owns x (busy), then own it. */
void c_wait_idle(struct tfs_cache *c, struct cext *x)
{
	while (x->busy)
		pthread_cond_wait(&c->cond, &c->lock);
	x->busy = true;
}

void c_release_busy(struct tfs_cache *c, uint32_t s)
{
	c->e[s].busy = false;
	pthread_cond_broadcast(&c->cond);
}

/* ------------------------------------------------------------------ */
/* What the tier knows of a file (the namespace asks, fs.h hooks)      */
/* ------------------------------------------------------------------ */

bool tfs_cache_knows(struct tfs_fs *fs, struct tfs_inode *in)
{
	struct tfs_cache *c = fs->cache;
	struct cfile *f;
	bool any;

	if (!in->fid_valid)
		return false;
	pthread_mutex_lock(&c->lock);
	f = c_file_find(c, in->fid);
	any = f && (f->ncached || f->size);
	pthread_mutex_unlock(&c->lock);
	return any;
}

/* What the cache knows of fid: its recorded size, or its dirty bytes. */
static uint64_t file_known(struct tfs_fs *fs, uint64_t fid, bool dirty)
{
	struct tfs_cache *c = fs->cache;
	struct cfile *f;
	uint64_t v = 0;

	if (!c)
		return 0;
	pthread_mutex_lock(&c->lock);
	f = c_file_find(c, fid);
	if (f)
		v = dirty ? f->dsec * C_SECTOR : f->size;
	pthread_mutex_unlock(&c->lock);
	return v;
}

uint64_t tfs_cache_dirty_bytes(struct tfs_fs *fs, uint64_t fid)
{
	return file_known(fs, fid, true);
}

uint64_t tfs_cache_size(struct tfs_fs *fs, uint64_t fid)
{
	return file_known(fs, fid, false);
}
