/* cache.c - the SSD tier: extent index and request paths.
 *
 * Owns: the in-memory index of cached extents (slots of CACHE/data, with
 * their records in the LMDB store, cstore.c), and the read and write
 * paths of every cache mode.  flush.c owns the flusher and the promoter.
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
 *  3. Dirty sectors are valid; a dirty or flushing extent takes every write
 *     write-back, whatever the mode, so the RAID is written by the flusher
 *     alone for it and never behind the flusher's back.
 *  4. A RAID write of an extent that is not cached raises guard[hash] for
 *     its duration; the promoter allocates only with the guard at zero, so
 *     a promotion never fills a slot with bytes a write is replacing.
 *  5. Sectors are 4K; slot bytes past the logical size are zeros, so a
 *     file that grows again reads zeros there.
 *  6. A clean valid sector's slot bytes equal the members' (the flusher
 *     writes them as part of whole rows): a write-back write over one
 *     marks it dirty, committed, before it changes the slot.
 *  7. A write that goes to the RAID over cached sectors (write-through,
 *     write-around) clears the valid sectors it overlaps, committed, before
 *     the RAID is written; write-through makes its whole sectors valid
 *     again only after both tiers have them.  A crash in between leaves
 *     those sectors to the members.
 *  8. Nothing drops a dirty sector whose members' bytes are older while
 *     the members could still show them after a crash: a punch or zero
 *     range drops it only once the members are punched and synced
 *     (tfs_data_fallocate), a truncate only behind a durable intent that
 *     cuts the members (tfs_ns_truncate), an unlinked file's go with it.
 *  9. Detach never leaves a write in an unbound cache: tfs_cache_write
 *     reads the mode and counts itself in c->writers in one c->lock
 *     section, after waiting while the detach's gate is closed, and goes
 *     to the RAID once the cache is detached.  The detach closes the gate,
 *     waits for the writers inside, and flushes what they wrote before it
 *     unbinds (bind.c cache_detach).
 *
 * Extent states (per slot):
 *   free --c_alloc_slot--> busy (filling/writing) --clear busy--> clean|dirty
 *   dirty --flush.c flush_file--> clean --evict_some/c_free_slot--> free
 *   any --zero/forget/invalidate while pinned--> dead --c_unpin--> free
 *
 * bind.c has the binding to the array, start, stop, status and control.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tierfs/cache.h"
#include "tierfs/hash.h"
#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/ns.h"
#include "tierfs/raid.h"
#include "tierfs/parse.h"
#include "tierfs/scratch.h"
#include "tierfs/super.h"
#include "cache_i.h"

bool tfs_cache_detached(const struct tfs_cache *c)
{
	return __atomic_load_n(&c->detached, __ATOMIC_ACQUIRE);
}

enum tfs_cache_mode c_mode(const struct tfs_cache *c)
{
	return __atomic_load_n(&c->mode, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

uint32_t c_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint32_t)(ts.tv_sec * 16 + ts.tv_nsec / (1000000000 / 16));
}

uint64_t c_ekey(uint64_t fid, uint64_t idx)
{
	return tfs_mix64(fid * TFS_GOLDEN64 ^ tfs_mix64(idx + 1));
}

/* Per-thread 4K-aligned scratch, separate from data.c's tfs_iobuf (the
 * RAID calls made from here use that one); scratch.c bounds it. */
void *c_buf(size_t len)
{
	return tfs_scratch(TFS_SCR_CACHE, len);
}

/* The data file's fd for a transfer: the O_DIRECT one when asked and
 * aligned (buf NULL: the caller's buffer is page-aligned). */
static int ssd_fd(const struct tfs_cache *c, bool direct, const void *buf, size_t len,
		  uint64_t off)
{
	return direct && c->dfd >= 0 && !((uintptr_t)buf % C_SECTOR) && !(len % C_SECTOR) &&
	       !(off % C_SECTOR) ? c->dfd : c->fd;
}

/* One transfer on the data file: O_DIRECT when asked and aligned. */
int c_ssd_io(struct tfs_cache *c, bool write, bool direct, void *buf, size_t len, uint64_t off)
{
	int fd = ssd_fd(c, direct, buf, len, off);
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

uint64_t c_slot_off(const struct tfs_cache *c, uint32_t s)
{
	return (uint64_t)s * c->extent;
}

/* ------------------------------------------------------------------ */
/* Files                                                               */
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

int c_journal_drain(struct tfs_cache *c)
{
	struct jop *q;
	unsigned n, i;
	int rc = 0;

	pthread_mutex_lock(&c->jlock);	/* one drainer at a time: order kept */
	pthread_mutex_lock(&c->lock);
	q = c->jq;
	n = c->njq;
	c->jq = NULL;
	c->njq = c->jcap = 0;
	pthread_mutex_unlock(&c->lock);
	for (i = 0; i < n && rc == 0; i++)
		rc = q[i].put ? tfs_meta_set_put(c->fs->meta, TFS_SET_CDIRTY, q[i].fid, 0)
			      : tfs_meta_set_del(c->fs->meta, TFS_SET_CDIRTY, q[i].fid, 0);
	if (n) {	/* what the next journal sync must cover (a failed one too) */
		uint64_t gen = tfs_meta_gen(c->fs->meta);

		pthread_mutex_lock(&c->lock);
		if (gen > c->jgen)
			c->jgen = gen;
		pthread_mutex_unlock(&c->lock);
	}
	/* a change that failed is tried again by the next drain (the
	 * flusher's at the latest), in order; meanwhile writes fail */
	if (rc && rc != c->journal_err)
		tfs_err("cache %s: journal: file %" PRIu64 ": %s (retried; writes fail until it "
			"works)", c->dir, q[i - 1].fid, strerror(-rc));
	else if (!rc && n && c->journal_err)
		tfs_info("cache %s: journal writes work again", c->dir);
	if (rc || n)
		c->journal_err = rc;
	if (rc) {
		memmove(q, q + i - 1, (n - i + 1) * sizeof(*q));
		pthread_mutex_lock(&c->lock);
		journal_requeue(c, q, n - i + 1);
		pthread_mutex_unlock(&c->lock);
		q = NULL;
	}
	pthread_mutex_unlock(&c->jlock);
	free(q);
	return rc;
}

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

	if (f->ncached || f->refs || f->size || f->ndirty)
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

/* The file got its first dirty extent: keep its inode for the flusher
 * and name it in the array journal (tfs_cache_setup reads that when the
 * cache is lost). */
static void file_attach(struct tfs_cache *c, struct cfile *f, struct tfs_inode *in);

static void file_dirtied(struct tfs_cache *c, struct cfile *f, struct cext *x,
			 struct tfs_inode *in)
{
	f->ndirty++;
	c->ndirty++;
	/* crossing the low watermark wakes the flusher from its long sleep;
	 * a signal per write would wake it from its paced pauses too */
	if ((uint64_t)c->ndirty * 100 >= (uint64_t)c->dirty_low * c->nslots &&
	    (uint64_t)(c->ndirty - 1) * 100 < (uint64_t)c->dirty_low * c->nslots)
		pthread_cond_signal(&c->fcond);
	x->depoch = c->flush_req;
	file_attach(c, f, in);
	if (!f->journaled) {
		f->journaled = true;
		journal_queue(c, f->fid, true);
	}
}

/* in is f's inode (a request on it): the flusher can use it. */
static void file_attach(struct tfs_cache *c, struct cfile *f, struct tfs_inode *in)
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

void c_unpin(struct tfs_cache *c, uint32_t s)
{
	struct cext *x = &c->e[s];

	if (--x->pins == 0 && x->dead) {
		x->dead = false;
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

	return x->used && !x->busy && !x->pins && !x->flushing && !bm_any(x->dirty);
}

/* Free up to 32 clean slots chosen by the policy; their records are gone
 * from the store before any of them can be reused (invariant 1). */
static void evict_some(struct tfs_cache *c)
{
	struct tfs_cstore_op ops[32];
	uint32_t vict[32];
	unsigned n = 0, batch = c->nslots / 8 ? c->nslots / 8 : 1;

	/* a batch amortises the commit; an eighth of the cache at most, so a
	 * small cache does not lose its hot set to one allocation */
	while (n < 32 && n < batch && c->nused > c->ndirty) {
		/* S3-FIFO may pass over main a few times lowering frequencies:
		 * NONE from an unbounded look means nothing is evictable */
		uint32_t s = tfs_policy_victim(c->pol, evictable, c, 4 * c->nslots + 64);

		if (s == TFS_POLICY_NONE)
			break;
		vict[n] = s;
		ops[n++] = (struct tfs_cstore_op){ .op = TFS_CS_DEL_EXT, .fid = c->e[s].fid,
						   .idx = c->e[s].idx };
	}
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
/* Heat                                                                */
/* ------------------------------------------------------------------ */

unsigned c_heat_now(const struct tfs_cache *c, uint16_t h, uint32_t t, uint32_t now)
{
	uint32_t halves = (now - t) / c->halflife;

	return halves >= 16 ? 0 : h >> halves;
}

static unsigned heat_bump(struct tfs_cache *c, uint16_t *h, uint32_t *t, uint32_t now)
{
	unsigned v = c_heat_now(c, *h, *t, now);

	if (v < UINT16_MAX)
		v++;
	*h = (uint16_t)v;
	*t = now;
	return v;
}

struct uheat *c_uheat(struct tfs_cache *c, uint64_t key, uint32_t now)
{
	struct uheat *g = &c->uheat[key & c->umask];

	if (g->key != key)
		*g = (struct uheat){ .key = key, .t = now };
	return g;
}

/* ------------------------------------------------------------------ */
/* Request plumbing                                                    */
/* ------------------------------------------------------------------ */

/* A request is cut at extent boundaries; one piece per extent. */
struct piece {
	struct tfs_cext_rec rec;	/* its record, when one is committed */
	uint64_t idx, a, b;		/* logical [a, b) */
	uint32_t slot;			/* pinned or owned slot, or C_NONE */
	uint64_t valid[TFS_CEXT_WORDS];	/* snapshot when pinned */
	uint8_t act;
	bool full;			/* read: every sector valid */
	bool promote;
	bool fresh;			/* write: slot allocated for it (no record yet) */
};

/* The pieces of [off, off+len), and room for one store op per piece plus
 * one (ops may be NULL): per-thread arrays, so a request allocates nothing. */
static struct piece *pieces_of(struct tfs_cache *c, uint64_t off, uint64_t len, unsigned *np,
			       struct tfs_cstore_op **ops)
{
	uint64_t first = off / c->extent, last = (off + len - 1) / c->extent;
	unsigned n = (unsigned)(last - first + 1);
	struct piece *p = tfs_scratch_array(TFS_SCR_PIECES, n, sizeof(*p));
	struct tfs_cstore_op *o = tfs_scratch_array(TFS_SCR_COPS, n + 1, sizeof(*o));

	if (!p || !o)
		return NULL;
	if (ops)
		*ops = o;
	for (unsigned i = 0; i < n; i++) {
		uint64_t idx = first + i, s = idx * c->extent, e = s + c->extent;

		p[i] = (struct piece){ .idx = idx, .a = off > s ? off : s,
				       .b = off + len < e ? off + len : e, .slot = C_NONE };
	}
	*np = n;
	return p;
}

/* Sector range [s0, s1) of piece p inside its extent. */
static void piece_sectors(const struct tfs_cache *c, const struct piece *p, unsigned *s0,
			  unsigned *s1)
{
	uint64_t base = p->idx * c->extent;

	*s0 = (unsigned)((p->a - base) / C_SECTOR);
	*s1 = (unsigned)((p->b - base + C_SECTOR - 1) / C_SECTOR);
}

/* The request [off, off+len) enters the file's sequential-stream
 * detector; true if it continues a run that reached the cutoff.  Under
 * in->lock. */
static bool seq_note(const struct tfs_cache *c, struct tfs_inode *in, uint64_t off,
		     uint64_t len)
{
	in->seq_len = in->seq_next == off ? in->seq_len + len : len;
	in->seq_next = off + len;
	return c->seq_cutoff && in->seq_len >= c->seq_cutoff;
}

/* fid and logical size of an open file if it is loaded (nothing else
 * changes); false if not. */
static bool file_peek(struct tfs_inode *in, uint64_t *fid, uint64_t *size)
{
	bool known;

	pthread_mutex_lock(&in->lock);
	*fid = in->fid;
	*size = in->size;
	known = in->fid_valid && in->size_valid;
	pthread_mutex_unlock(&in->lock);
	return known;
}

/* Whether extent x serves sectors [s0, s1) to a reader: all valid, and
 * the mode reads the cache (off still serves dirty extents). */
static bool serves(const struct cext *x, enum tfs_cache_mode mode, unsigned s0, unsigned s1)
{
	return bm_all(x->valid, s0, s1) && (mode != TFS_CACHE_OFF || bm_any(x->dirty));
}

/* fid and logical size of an open file, and whether the request [off,
 * off+len) continues a sequential run that reached the cutoff (bcache's
 * sequential cutoff, per file): one lock round trip once the file is
 * known. */
static int file_snap(struct tfs_cache *c, struct tfs_inode *in, uint64_t off, uint64_t len,
		     uint64_t *fid, uint64_t *size, bool *seq)
{
	for (int tries = 0;; tries++) {
		int rc;

		pthread_mutex_lock(&in->lock);
		if (in->fid_valid && in->size_valid) {
			*fid = in->fid;
			*size = in->size;
			*seq = seq_note(c, in, off, len);
			pthread_mutex_unlock(&in->lock);
			return 0;
		}
		pthread_mutex_unlock(&in->lock);
		if (tries)
			return -EIO;	/* not a regular file on the primary any more */
		rc = tfs_ns_load_file(c->fs, in);
		if (rc)
			return rc;
	}
}

/* ------------------------------------------------------------------ */
/* Read                                                                */
/* ------------------------------------------------------------------ */

/* Copy the valid sector runs of p from its slot over buf (which holds
 * p's bytes at buf + (p->a - off)). */
static int overlay(struct tfs_cache *c, const struct piece *p, bool direct, char *buf,
		   uint64_t off)
{
	uint64_t base = p->idx * c->extent;
	unsigned s0, s1, s = 0;

	piece_sectors(c, p, &s0, &s1);
	for (s = s0; s < s1;) {
		uint64_t a, b;
		unsigned t = s;
		int rc;

		if (!bm_test(p->valid, s)) {
			s++;
			continue;
		}
		while (t < s1 && bm_test(p->valid, t))
			t++;
		a = base + (uint64_t)s * C_SECTOR;
		b = base + (uint64_t)t * C_SECTOR;
		if (a < p->a)
			a = p->a;
		if (b > p->b)
			b = p->b;
		rc = c_ssd_io(c, false, direct, buf + (a - off), b - a,
			      c_slot_off(c, p->slot) + (a - base));
		if (rc)
			return rc;
		s = t;
	}
	return 0;
}

bool tfs_cache_holds(struct tfs_fs *fs, struct tfs_inode *in, size_t len, uint64_t off)
{
	struct tfs_cache *c = fs->cache;
	uint64_t fid, size;
	struct piece *p;
	unsigned np;
	bool all;

	if (tfs_cache_detached(c))
		return false;
	all = file_peek(in, &fid, &size);
	if (!all || off >= size || len == 0)
		return all;
	if (len > size - off)
		len = (size_t)(size - off);
	p = pieces_of(c, off, len, &np, NULL);
	if (!p)
		return false;
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < np && all; i++) {
		uint32_t s = c_lookup(c, fid, p[i].idx);
		unsigned s0, s1;

		piece_sectors(c, &p[i], &s0, &s1);
		all = s != C_NONE && serves(&c->e[s], c_mode(c), s0, s1);
	}
	pthread_mutex_unlock(&c->lock);
	return all;
}

enum tfs_hit tfs_cache_hit_begin(struct tfs_fs *fs, struct tfs_inode *in, bool direct,
				 struct tfs_cache_hit *hit, size_t len, uint64_t off)
{
	struct tfs_cache *c = fs->cache;
	uint64_t fid, size, idx = off / c->extent, base = idx * c->extent;
	uint32_t now = c_now(), s;
	struct cext *x;
	unsigned s0, s1;

	if (tfs_cache_detached(c))
		return TFS_HIT_NO;
	if (!file_peek(in, &fid, &size) || off >= size || len == 0)
		return TFS_HIT_UNSURE;
	if (len > size - off)
		len = (size_t)(size - off);
	if ((off + len - 1) / c->extent != idx)
		return TFS_HIT_UNSURE;	/* more than one extent */
	s0 = (unsigned)((off - base) / C_SECTOR);
	s1 = (unsigned)((off + len - base + C_SECTOR - 1) / C_SECTOR);
	pthread_mutex_lock(&c->lock);
	s = c_lookup(c, fid, idx);
	x = s == C_NONE ? NULL : &c->e[s];
	if (!x || !serves(x, c_mode(c), s0, s1)) {
		pthread_mutex_unlock(&c->lock);
		return TFS_HIT_NO;
	}
	/* what tfs_cache_read does for a hit */
	c->last_io = now;
	x->pins++;
	heat_bump(c, &x->heat, &x->heat_t, now);
	tfs_policy_hit(c->pol, s);
	c->st.read_hits++;
	c->st.read_hit_bytes += len;
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_lock(&in->lock);
	seq_note(c, in, off, len);
	pthread_mutex_unlock(&in->lock);
	*hit = (struct tfs_cache_hit){ .slot = s, .len = len, .direct = direct,
				       .off = c_slot_off(c, s) + (off - base) };
	hit->fd = ssd_fd(c, direct, NULL, hit->len, hit->off);
	return TFS_HIT;
}

int tfs_cache_hit_read(struct tfs_fs *fs, const struct tfs_cache_hit *hit, void *buf)
{
	return c_ssd_io(fs->cache, false, hit->direct, buf, hit->len, hit->off);
}

void tfs_cache_hit_end(struct tfs_fs *fs, const struct tfs_cache_hit *hit, int res, bool ring)
{
	struct tfs_cache *c = fs->cache;

	if (res < 0 && ring)	/* c_ssd_io logged its own */
		tfs_err("cache %s: read of %zu bytes at %" PRIu64 ": %s", c->dir, hit->len,
			hit->off, strerror(-res));
	pthread_mutex_lock(&c->lock);
	c->st.ring_hits += ring;
	c_unpin(c, hit->slot);
	pthread_mutex_unlock(&c->lock);
}

ssize_t tfs_cache_read(struct tfs_fs *fs, struct tfs_inode *in, bool direct, void *buf,
		       size_t len, uint64_t off)
{
	struct tfs_cache *c = fs->cache;
	enum tfs_cache_mode mode = c_mode(c);
	uint64_t fid, size, miss_a = UINT64_MAX, miss_b = 0;
	uint32_t now = c_now();
	struct piece *p;
	unsigned np, npromote = 0;
	bool seq;
	int rc = file_snap(c, in, off, len, &fid, &size, &seq);

	if (rc)
		return rc;
	if (off >= size || len == 0)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	p = pieces_of(c, off, len, &np, NULL);
	if (!p)
		return -ENOMEM;

	pthread_mutex_lock(&c->lock);
	c->last_io = now;
	for (unsigned i = 0; i < np; i++) {
		uint32_t s = c_lookup(c, fid, p[i].idx);
		struct cext *x = s == C_NONE ? NULL : &c->e[s];
		struct uheat *g = NULL;
		unsigned s0, s1, heat;

		piece_sectors(c, &p[i], &s0, &s1);
		if (x) {
			x->pins++;
			p[i].slot = s;
			memcpy(p[i].valid, x->valid, sizeof(p[i].valid));
			p[i].full = bm_all(x->valid, s0, s1);
			heat = heat_bump(c, &x->heat, &x->heat_t, now);
			if (p[i].full)
				tfs_policy_hit(c->pol, s);
		} else {
			g = c_uheat(c, c_ekey(fid, p[i].idx), now);
			heat = heat_bump(c, &g->heat, &g->t, now);
		}
		if (p[i].full && (mode != TFS_CACHE_OFF || bm_any(x->dirty))) {
			c->st.read_hits++;
			c->st.read_hit_bytes += p[i].b - p[i].a;
			continue;
		}
		p[i].full = false;
		c->st.read_misses++;
		c->st.read_miss_bytes += p[i].b - p[i].a;
		if (miss_a == UINT64_MAX)
			miss_a = p[i].a;
		miss_b = p[i].b;
		if (seq)
			c->st.seq_bypass++;
		else if (!x && mode != TFS_CACHE_OFF && !c->readonly && heat >= c->promote &&
			 !g->queued && c->guard[c_ekey(fid, p[i].idx) % C_GUARDS] == 0) {
			p[i].promote = true;
			npromote++;
		}
	}
	pthread_mutex_unlock(&c->lock);

	/* the RAID for everything not wholly in the cache, in one request;
	 * then the cache's sectors over it (the pinned slots stay put) */
	if (miss_a != UINT64_MAX) {
		ssize_t r = tfs_raid_read(fs, in, direct, (char *)buf + (miss_a - off),
					  miss_b - miss_a, miss_a);

		if (r < 0)
			rc = (int)r;
		else if ((uint64_t)r < miss_b - miss_a)
			memset((char *)buf + (miss_a - off) + r, 0, miss_b - miss_a - (size_t)r);
	}
	for (unsigned i = 0; i < np && rc == 0; i++) {
		if (p[i].slot == C_NONE)
			continue;
		if (p[i].full)
			rc = c_ssd_io(c, false, direct, (char *)buf + (p[i].a - off),
				      p[i].b - p[i].a, c_slot_off(c, p[i].slot) + p[i].a -
				      p[i].idx * c->extent);
		else if (p[i].b > miss_a && p[i].a < miss_b)
			rc = overlay(c, &p[i], direct, buf, off);
	}
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < np; i++)
		if (p[i].slot != C_NONE)
			c_unpin(c, p[i].slot);
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = 0; i < np && npromote && rc == 0; i++)
		if (p[i].promote)
			c_promote_queue(c, in, p[i].idx);
	return rc ? rc : (ssize_t)len;
}

/* ------------------------------------------------------------------ */
/* Write                                                               */
/* ------------------------------------------------------------------ */

enum {
	A_CACHE,	/* write-back into the slot */
	A_THROUGH,	/* RAID, then the slot's whole sectors */
	A_AROUND,	/* invalidate the slot's sectors, then RAID */
	A_RAW,		/* RAID only: not cached (guarded, invariant 4) */
};

/* Bytes of the sector at logical offset pos that are not being written:
 * from the slot if valid there, else from the RAID. */
static int sector_fill(struct tfs_cache *c, struct tfs_inode *in, const struct piece *p,
		       unsigned sec, char *dst)
{
	uint64_t pos = p->idx * c->extent + (uint64_t)sec * C_SECTOR;
	ssize_t r;

	if (bm_test(p->valid, sec))
		return c_ssd_io(c, false, false, dst, C_SECTOR,
				c_slot_off(c, p->slot) + (uint64_t)sec * C_SECTOR);
	r = tfs_raid_read(c->fs, in, false, dst, C_SECTOR, pos);
	if (r < 0)
		return (int)r;
	memset(dst + r, 0, C_SECTOR - (size_t)r);
	c->st.fills++;
	return 0;
}

/* Write piece p into its slot as whole sectors (partial ones filled). */
static int slot_write(struct tfs_cache *c, struct tfs_inode *in, const struct piece *p,
		      bool direct, const char *src)
{
	uint64_t base = p->idx * c->extent;
	unsigned s0, s1;
	size_t span;
	char *b;
	int rc = 0;

	piece_sectors(c, p, &s0, &s1);
	span = (size_t)(s1 - s0) * C_SECTOR;
	b = c_buf(span);
	if (!b)
		return -ENOMEM;
	if ((p->a - base) % C_SECTOR)
		rc = sector_fill(c, in, p, s0, b);
	if (rc == 0 && (p->b - base) % C_SECTOR && (s1 - 1 != s0 || !((p->a - base) % C_SECTOR)))
		rc = sector_fill(c, in, p, s1 - 1, b + span - C_SECTOR);
	if (rc)
		return rc;
	memcpy(b + (p->a - base - (uint64_t)s0 * C_SECTOR), src, p->b - p->a);
	return c_ssd_io(c, true, direct, b, span, c_slot_off(c, p->slot) + (uint64_t)s0 * C_SECTOR);
}

/* Decide what each piece does and take what it needs (busy slots,
 * guards), under c->lock.  Pieces are taken in extent order, so two
 * writers never wait for each other's slots in a cycle. */
static void plan_write(struct tfs_cache *c, struct tfs_inode *in, enum tfs_cache_mode mode,
		       bool seq, uint64_t fid, struct piece *p, unsigned np)
{
	uint32_t now = c_now();

	for (unsigned i = 0; i < np; i++) {
		uint32_t s = c_lookup(c, fid, p[i].idx);
		struct cext *x;

		if (s != C_NONE) {
			x = &c->e[s];
			c_wait_idle(c, x);
			/* the wait let go of c->lock: the slot may have gone */
			if (!x->used || x->fid != fid || x->idx != p[i].idx) {
				x->busy = false;
				pthread_cond_broadcast(&c->cond);
				i--;
				continue;
			}
			heat_bump(c, &x->heat, &x->heat_t, now);
			tfs_policy_hit(c->pol, s);
			p[i].slot = s;
			memcpy(p[i].valid, x->valid, sizeof(p[i].valid));
			if (mode == TFS_CACHE_WRITEBACK || bm_any(x->dirty) || x->flushing)
				p[i].act = A_CACHE;
			else
				p[i].act = mode == TFS_CACHE_WRITETHROUGH ? A_THROUGH : A_AROUND;
			if (p[i].act == A_CACHE)
				c->st.write_hits++;
			else if (p[i].act == A_AROUND)
				c->st.write_around++;
			continue;
		}
		{
			struct uheat *g = c_uheat(c, c_ekey(fid, p[i].idx), now);

			heat_bump(c, &g->heat, &g->t, now);
		}
		p[i].act = A_RAW;
		if (mode == TFS_CACHE_WRITEBACK && !seq && !c->readonly) {
			s = c_alloc_slot(c, fid, p[i].idx);
			if (s != C_NONE) {
				p[i].slot = s;
				memset(p[i].valid, 0, sizeof(p[i].valid));
				p[i].act = A_CACHE;
				p[i].fresh = true;
				c->st.write_misses++;
				continue;
			}
		}
		if (seq)
			c->st.seq_bypass++;
		else
			c->st.write_around++;
		c->guard[c_ekey(fid, p[i].idx) % C_GUARDS]++;
	}
}

/* Above the high watermark write-back writers wait for the flusher (up to
 * a second); they are slowed, never failed. */
static void throttle(struct tfs_cache *c)
{
	struct timespec until;
	bool waited = false;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	while ((uint64_t)c->ndirty * 100 >= (uint64_t)c->dirty_high * c->nslots && !c->stop) {
		pthread_cond_signal(&c->fcond);
		waited = true;	/* counted also when held the whole second */
		if (pthread_cond_timedwait(&c->cond, &c->lock, &until))
			break;
	}
	if (waited)
		c->st.throttled++;
}

/* A write-back piece over sectors that are valid and clean: they become
 * dirty (committed) before the slot is written, so a crash in between
 * leaves them dirty with their old bytes -- which the members hold too --
 * rather than clean with bytes the members never got (a later flush or
 * eviction would make the file change under its reader).  Returns true if
 * the record must be committed first.  Under c->lock. */
static bool dirty_first(struct tfs_cache *c, struct tfs_inode *in, const struct piece *p)
{
	struct cext *x = &c->e[p->slot];
	struct cfile *f = c_file_find(c, x->fid);
	unsigned s0, s1, before = bm_count(x->dirty), n = 0;

	piece_sectors(c, p, &s0, &s1);
	for (unsigned s = s0; s < s1; s++)
		if (bm_test(x->valid, s) && !bm_test(x->dirty, s)) {
			bm_set(x->dirty, s, s + 1);
			n++;
		}
	if (!n)
		return false;
	if (before == 0)
		file_dirtied(c, f, x, in);
	c_dirty_add(c, f, n);
	return true;
}

/* Clear the valid sectors p overlaps (write-around, write-through):
 * committed before the RAID is written, so a crash never leaves the old
 * bytes valid over new ones on the members.  False if none was valid
 * (nothing to commit).  Under c->lock. */
static bool invalidate_piece(struct tfs_cache *c, struct piece *p, struct tfs_cstore_op *op)
{
	struct tfs_cext_rec *rec = &p->rec;
	struct cext *x = &c->e[p->slot];
	unsigned s0, s1;

	piece_sectors(c, p, &s0, &s1);
	if (!bm_any_in(x->valid, s0, s1))
		return false;
	bm_clear(x->valid, s0, s1);
	if (bm_any(x->valid)) {
		c_record(c, p->slot, rec);
		*op = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT, .rec = rec };
	} else {
		*op = (struct tfs_cstore_op){ .op = TFS_CS_DEL_EXT, .fid = x->fid, .idx = x->idx };
	}
	return true;
}

/* Write-through: the whole sectors p covers become valid in the slot;
 * partial ones are invalidated (never read-filled on this path). */
static int through_piece(struct tfs_cache *c, struct piece *p, bool direct, const char *src)
{
	uint64_t base = p->idx * c->extent;
	uint64_t a = (p->a - base + C_SECTOR - 1) / C_SECTOR, b = (p->b - base) / C_SECTOR;
	unsigned s0, s1;
	int rc = 0;

	piece_sectors(c, p, &s0, &s1);
	if (b > a)
		rc = c_ssd_io(c, true, direct, (char *)src + (base + a * C_SECTOR - p->a),
			      (size_t)(b - a) * C_SECTOR, c_slot_off(c, p->slot) + a * C_SECTOR);
	pthread_mutex_lock(&c->lock);
	bm_clear(c->e[p->slot].valid, s0, s1);
	if (rc == 0 && b > a)
		bm_set(c->e[p->slot].valid, (unsigned)a, (unsigned)b);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Whether the sector holding pos must be read from the RAID to fill a
 * partial write: it is not valid in the cache and not past the size. */
static bool fill_from_raid(struct tfs_cache *c, uint64_t fid, uint64_t size, uint64_t pos)
{
	uint64_t idx = pos / c->extent;
	uint32_t s = c_lookup(c, fid, idx);

	if (pos / C_SECTOR * C_SECTOR >= size)
		return false;
	return s == C_NONE || !bm_test(c->e[s].valid, (unsigned)(pos % c->extent / C_SECTOR));
}

bool tfs_cache_write_waits(struct tfs_fs *fs, struct tfs_inode *in, size_t len, uint64_t off)
{
	struct tfs_cache *c = fs->cache;
	uint64_t fid, size, run, end = off + len;
	bool waits;

	if (tfs_cache_detached(c) || c_mode(c) != TFS_CACHE_WRITEBACK)
		return true;
	pthread_mutex_lock(&in->lock);
	fid = in->fid;
	size = in->size;
	run = in->seq_next == off ? in->seq_len + len : len;
	waits = !in->fid_valid || !in->size_valid ||
		(c->seq_cutoff && run >= c->seq_cutoff && len >= tfs_row_bytes(fs));
	pthread_mutex_unlock(&in->lock);
	if (waits || len == 0)
		return waits;
	pthread_mutex_lock(&c->lock);
	waits = (uint64_t)c->ndirty * 100 >= (uint64_t)c->dirty_high * c->nslots ||
		(off % C_SECTOR && fill_from_raid(c, fid, size, off)) ||
		(end % C_SECTOR && fill_from_raid(c, fid, size, end));
	pthread_mutex_unlock(&c->lock);
	return waits;
}

ssize_t tfs_cache_write(struct tfs_fs *fs, struct tfs_inode *in, bool direct,
			const void *buf, size_t len, uint64_t off)
{
	struct tfs_cache *c = fs->cache;
	enum tfs_cache_mode mode;
	struct tfs_cstore_op *ops;
	uint64_t fid, size, end = off + len;
	struct piece *p;
	unsigned np, nops = 0;
	bool seq, cached = false, stored = true;
	int rc, err;

	if (len == 0)
		return 0;
	if (end < off)
		return -EFBIG;
	rc = file_snap(c, in, off, len, &fid, &size, &seq);
	if (rc)
		return rc;
	/* a stream bypasses only in pieces the RAID takes whole (full rows
	 * on the parity levels); smaller ones are gathered here and destaged
	 * as full stripes */
	seq = seq && len >= tfs_row_bytes(fs);
	p = pieces_of(c, off, len, &np, &ops);
	if (!p)
		return -ENOMEM;

	pthread_mutex_lock(&c->lock);
	while (c->gate)		/* a detach is deciding (invariant 8) */
		pthread_cond_wait(&c->cond, &c->lock);
	if (tfs_cache_detached(c)) {
		pthread_mutex_unlock(&c->lock);
		return tfs_raid_write(fs, in, direct, buf, len, off);
	}
	c->writers++;
	mode = c_mode(c);
	c->last_io = c_now();
	if (mode == TFS_CACHE_WRITEBACK && !seq)
		throttle(c);
	plan_write(c, in, mode, seq, fid, p, np);
	/* write-around and write-through: invalidate first (invariant 7; 3
	 * keeps the flusher off); write-back over clean valid sectors: dirty
	 * first (invariant 6) */
	for (unsigned i = 0; i < np; i++) {
		if (p[i].act == A_AROUND || p[i].act == A_THROUGH) {
			if (invalidate_piece(c, &p[i], &ops[nops]))
				nops++;
			c->st.invalidations += p[i].act == A_AROUND;
		} else if (p[i].act == A_CACHE && dirty_first(c, in, &p[i])) {
			c_record(c, p[i].slot, &p[i].rec);
			ops[nops++] = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT, .rec = &p[i].rec };
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (nops) {
		rc = c_journal_drain(c);
		err = c_commit(c, ops, nops);
		stored = err == 0;	/* else the records may still name the slots */
		if (rc == 0)
			rc = err;
	}
	nops = 0;

	/* the RAID: runs of consecutive pieces that go there, one call each */
	for (unsigned i = 0; i < np && rc == 0;) {
		unsigned j = i;
		ssize_t r;

		if (p[i].act == A_CACHE) {
			i++;
			continue;
		}
		while (j + 1 < np && p[j + 1].act != A_CACHE)
			j++;
		r = tfs_raid_write(fs, in, direct, (const char *)buf + (p[i].a - off),
				   p[j].b - p[i].a, p[i].a);
		if (r < 0)
			rc = (int)r;
		for (unsigned k = i; k <= j && rc == 0; k++)
			if (p[k].act == A_THROUGH)
				rc = through_piece(c, &p[k], direct, (const char *)buf + (p[k].a - off));
		i = j + 1;
	}
	/* the SSD: write-back pieces */
	for (unsigned i = 0; i < np && rc == 0; i++)
		if (p[i].act == A_CACHE) {
			rc = slot_write(c, in, &p[i], direct, (const char *)buf + (p[i].a - off));
			cached = true;
		}
	/* the size grows before the sectors are marked dirty and let go: the
	 * flusher cuts what it writes at the size */
	if (rc == 0 && cached)
		tfs_size_grow(in, end);

	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < np; i++) {
		struct cext *x = p[i].slot == C_NONE ? NULL : &c->e[p[i].slot];
		struct cfile *f;
		unsigned s0, s1, before;

		if (p[i].act == A_RAW) {
			c->guard[c_ekey(fid, p[i].idx) % C_GUARDS]--;
			continue;
		}
		if (p[i].act == A_AROUND) {
			if (stored && !bm_any(x->valid))
				c_unlink_slot(c, p[i].slot);
			c_release_busy(c, p[i].slot);
			continue;
		}
		if (p[i].act == A_THROUGH) {
			/* re-validated by through_piece; a slot left with nothing
			 * valid goes after its record (below) */
			if (bm_any(x->valid)) {
				c_record(c, p[i].slot, &p[i].rec);
				ops[nops++] = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT,
								      .rec = &p[i].rec };
			} else {
				ops[nops++] = (struct tfs_cstore_op){ .op = TFS_CS_DEL_EXT,
								      .fid = fid, .idx = p[i].idx };
			}
			continue;
		}
		/* A_CACHE */
		f = c_file_find(c, fid);
		if (rc) {
			/* the slot may hold part of the bytes: nothing new is
			 * valid; a slot allocated for this write goes back */
			if (p[i].fresh && !bm_any(x->valid)) {
				c_unlink_slot(c, p[i].slot);
				c_release_busy(c, p[i].slot);
				p[i].slot = C_NONE;
			}
			continue;
		}
		piece_sectors(c, &p[i], &s0, &s1);
		before = bm_count(x->dirty);
		bm_set(x->valid, s0, s1);
		bm_set(x->dirty, s0, s1);
		x->wseq++;
		x->wtime = c->last_io;
		if (bm_count(x->dirty) != before || !bm_all(p[i].valid, s0, s1)) {
			if (before == 0)
				file_dirtied(c, f, x, in);
			file_attach(c, f, in);	/* a file found dirty at start */
			c_dirty_add(c, f, (int64_t)bm_count(x->dirty) - before);
			c_record(c, p[i].slot, &p[i].rec);
			ops[nops++] = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT, .rec = &p[i].rec };
		}
		if (end > size && end > f->size) {
			f->size = end;
			ops[nops++] = (struct tfs_cstore_op){ .op = TFS_CS_PUT_SIZE, .fid = fid,
							      .size = end };
		}
	}
	pthread_mutex_unlock(&c->lock);
	/* the journal names the file before the write is acknowledged; the
	 * records commit while the slots are still busy: two commits of one
	 * extent cannot pass each other */
	err = c_journal_drain(c);
	if (err && !rc)
		rc = err;	/* the file may not be named: not acknowledged */
	stored = true;
	if (nops) {
		err = c_commit(c, ops, nops);
		stored = err == 0;
		if (err && !rc)
			rc = err;
	}
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < np; i++) {
		if ((p[i].act != A_CACHE && p[i].act != A_THROUGH) || p[i].slot == C_NONE)
			continue;
		if (p[i].act == A_THROUGH && stored && !bm_any(c->e[p[i].slot].valid))
			c_unlink_slot(c, p[i].slot);
		c_release_busy(c, p[i].slot);
	}
	if (--c->writers == 0 && c->gate)
		pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	if (rc)
		return rc;
	if (cached)	/* the members were not written: the change time from here */
		tfs_ns_touch(fs, in);
	return (ssize_t)len;
}

/* ------------------------------------------------------------------ */
/* fsync, truncate, unlink                                             */
/* ------------------------------------------------------------------ */

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

int tfs_cache_fsync(struct tfs_fs *fs, struct tfs_inode *in, bool datasync)
{
	struct tfs_cache *c = fs->cache;
	int rc = 0, r;

	/* the SSD: data file, then the records naming it (both in the
	 * store's durability point), then the journal naming the file
	 * (DESIGN §10.5) */
	rc = tfs_cstore_sync(c->cs);	/* a failure is logged there */
	r = c_journal_sync(c);	/* logged there */
	if (rc == 0)
		rc = r;
	if (rc == 0)
		rc = tfs_raid_fsync(fs, in, datasync);
	return rc;
}

/* Zero or drop [off, off+len) of x's extent; returns true if the slot is
 * now empty.  Partial sectors keep their state; their cut bytes become
 * zeros in the slot (invariant 5). */
static bool zero_extent(struct tfs_cache *c, uint32_t s, uint64_t off, uint64_t len)
{
	struct cext *x = &c->e[s];
	struct cfile *f = c_file_find(c, x->fid);
	uint64_t base = x->idx * c->extent, a = off > base ? off - base : 0;
	uint64_t b = off + len - base < c->extent ? off + len - base : c->extent;
	unsigned before = bm_count(x->dirty);
	unsigned fa = (unsigned)((a + C_SECTOR - 1) / C_SECTOR), fb = (unsigned)(b / C_SECTOR);
	static const char zeros[C_SECTOR];

	if (fb > fa) {
		bm_clear(x->valid, fa, fb);
		bm_clear(x->dirty, fa, fb);
	}
	/* cut parts of the edge sectors (in the slot only if valid there) */
	for (unsigned sec = (unsigned)(a / C_SECTOR); sec < (b + C_SECTOR - 1) / C_SECTOR; sec++) {
		uint64_t sa = (uint64_t)sec * C_SECTOR, sb = sa + C_SECTOR;
		uint64_t za = a > sa ? a : sa, zb = b < sb ? b : sb;

		if ((za == sa && zb == sb) || !bm_test(x->valid, sec))
			continue;
		if (c_ssd_io(c, true, false, (void *)zeros, zb - za, c_slot_off(c, s) + za)) {
			bm_clear(x->valid, sec, sec + 1);	/* cannot zero: forget */
			bm_clear(x->dirty, sec, sec + 1);
		}
	}
	c_dirty_add(c, f, (int64_t)bm_count(x->dirty) - before);
	if (before && !bm_count(x->dirty))
		c_file_cleaned(c, f, x);
	c->st.invalidations++;
	return !bm_any(x->valid);
}

struct zslot {
	uint64_t idx;
	uint32_t slot;
	bool drop;
};

static int zslot_cmp(const void *a, const void *b)
{
	const struct zslot *x = a, *y = b;

	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Zero or drop [off, off+len) of every cached extent of f; trunc: the
 * members take the size now, so the size record goes.  The caller holds
 * f->flock (the flusher is off the file) and a reference on f. */
int c_zero_file(struct tfs_cache *c, struct cfile *f, uint64_t off, uint64_t len, bool trunc)
{
	struct tfs_cstore_op *ops;
	struct tfs_cext_rec *recs;
	struct zslot *z;
	unsigned n = 0, m = 0;
	int rc = -ENOMEM;

	pthread_mutex_lock(&c->lock);
	ops = calloc(f->ncached + 1, sizeof(*ops));
	recs = calloc(f->ncached + 1, sizeof(*recs));
	z = calloc(f->ncached + 1, sizeof(*z));
	if (!ops || !recs || !z) {
		pthread_mutex_unlock(&c->lock);
		tfs_err("cache %s: out of memory dropping extents of file %" PRIu64, c->dir, f->fid);
		goto out;
	}
	for (uint32_t s = f->head; s != C_NONE; s = c->e[s].fnext) {
		uint64_t base = c->e[s].idx * c->extent;

		if (base + c->extent > off && base < off + len)
			z[n++] = (struct zslot){ .idx = c->e[s].idx, .slot = s };
	}
	/* owned in extent order, as writers and the flusher do: no cycles */
	qsort(z, n, sizeof(*z), zslot_cmp);
	for (unsigned i = 0; i < n; i++) {
		uint32_t s = z[i].slot;
		struct cext *x = &c->e[s];

		c_wait_idle(c, x);
		if (!x->used || x->fid != f->fid || x->idx != z[i].idx) {
			z[i].slot = C_NONE;	/* gone while we waited */
			c_release_busy(c, s);
			continue;
		}
		z[i].drop = zero_extent(c, s, off, len);
		if (z[i].drop) {
			ops[m++] = (struct tfs_cstore_op){ .op = TFS_CS_DEL_EXT, .fid = f->fid,
							   .idx = x->idx };
		} else {
			c_record(c, s, &recs[m]);
			ops[m] = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT, .rec = &recs[m] };
			m++;
		}
	}
	if (trunc && f->size) {
		f->size = 0;
		ops[m++] = (struct tfs_cstore_op){ .op = TFS_CS_DEL_SIZE, .fid = f->fid };
	}
	pthread_mutex_unlock(&c->lock);
	(void)c_journal_drain(c);	/* a failed change is retried (logged) */
	/* committed while the extents are still busy, before a dropped slot
	 * can be reused (invariant 1); if the commit failed the records may
	 * still name the dropped slots: they stay, empty, until an eviction
	 * deletes the records */
	rc = c_commit(c, ops, m);
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < n; i++) {
		if (z[i].slot == C_NONE)
			continue;
		c_release_busy(c, z[i].slot);
		if (z[i].drop && rc == 0)
			c_unlink_slot(c, z[i].slot);
	}
	pthread_mutex_unlock(&c->lock);
out:
	free(ops);
	free(recs);
	free(z);
	return rc;
}

/* The cached file of fid with a reference and its flush lock, or NULL
 * (no memory). */
struct cfile *c_file_hold(struct tfs_cache *c, uint64_t fid)
{
	struct cfile *f;

	pthread_mutex_lock(&c->lock);
	f = c_file_get(c, fid);	/* made if need be: the promoter stays off (refs) */
	if (f)
		f->refs++;
	pthread_mutex_unlock(&c->lock);
	if (f)
		pthread_mutex_lock(&f->flock);
	return f;
}

void c_file_unhold(struct tfs_cache *c, struct cfile *f)
{
	pthread_mutex_unlock(&f->flock);
	pthread_mutex_lock(&c->lock);
	f->refs--;
	c_file_maybe_free(c, f);
	pthread_mutex_unlock(&c->lock);
}

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

void tfs_cache_zero_begin(struct tfs_fs *fs, struct tfs_inode *in, uint64_t off, uint64_t len)
{
	struct tfs_cache *c = fs->cache;
	struct cfile *f;
	bool trunc = len == UINT64_MAX;

	if (!in->fid_valid || !(f = c_file_hold(c, in->fid)))
		return;
	/* a store error is logged and keeps the dropped slots owned (the
	 * truncate's own order is DESIGN §10.3's) */
	if (len)
		(void)c_zero_file(c, f, off, trunc ? UINT64_MAX - off : len, trunc);
	/* f stays held (flusher off) until tfs_cache_zero_end */
}

void tfs_cache_zero_end(struct tfs_fs *fs, struct tfs_inode *in, uint64_t off, uint64_t len)
{
	struct tfs_cache *c = fs->cache;
	struct cfile *f;

	if (!in->fid_valid)
		return;
	pthread_mutex_lock(&c->lock);
	f = c_file_find(c, in->fid);
	pthread_mutex_unlock(&c->lock);
	if (!f)
		return;
	/* still there: zero_begin's reference keeps it */
	if (len)
		c_zero_file(c, f, off, len, false);
	c_file_unhold(c, f);
}

void tfs_cache_forget(struct tfs_fs *fs, uint64_t fid)
{
	struct tfs_cache *c = fs->cache;
	struct cfile *f;

	if (!c || !(f = c_file_hold(c, fid)))
		return;
	(void)c_zero_file(c, f, 0, UINT64_MAX, true);	/* logged; slots kept owned */
	c_file_unhold(c, f);
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

