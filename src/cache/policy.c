/* policy.c - eviction policies of the SSD tier (see tierfs/policy.h).
 *
 * Owns: the order of the cache's slots (queues as doubly linked lists of
 * slot numbers in prev/next arrays), S3-FIFO's per-slot frequencies and
 * its ghost history, W-TinyLFU's frequency sketch and doorkeeper.  No
 * I/O, no locks, no clock; allocations made by tfs_policy_new only.
 *
 * Invariants:
 *  1. A slot is held iff q[slot] != Q_NONE, and then it is on exactly the
 *     list q[slot] names; count = sum of the lists' counts.  LRU uses only
 *     Q_SMALL as its one list; W-TinyLFU has Q_SMALL as its window,
 *     Q_MAIN as probation and Q_PROT as protected.  Lists run from head
 *     (newest) to tail.
 *  2. freq[slot] <= 3 (two bits); only S3-FIFO reads it.
 *  3. The ghost ring holds the keys of the last gcap evictions from the
 *     small queue (gcap = cap), oldest at ring[gnext] once the ring has
 *     wrapped.  The ghost table maps a key to the ring position of its
 *     newest eviction, and only while that key is remembered: a key found
 *     on insert is dropped from the table, and a ring position being
 *     overwritten drops its key only if the table still points there.
 *     The table is open-addressed, linear probing, deletion by backward
 *     shift (no tombstones), at most half full.
 *  4. tfs_policy_victim looks at no more than max entries; only the
 *     returned slot leaves the policy.  Every entry looked at and not
 *     returned is moved (LRU: to the head; S3-FIFO: to main's head), so a
 *     non-evictable entry is treated as hit once more -- except an S3-FIFO
 *     small-queue entry never used since it came in, which goes back to
 *     small's head: a write-back write's dirty extent waits there for the
 *     flusher instead of taking a place in main it never earned (the
 *     tier's model showed written-once extents crowding main: 4 points of
 *     hits at 5% of a trace with 20% writes, docs/CACHE_POLICY.md).
 *  5. S3-FIFO picks the small queue when it holds at least small_cap
 *     entries or main is empty, else main; except that once the call has
 *     looked at main.count main entries in a row that ok() refused, it
 *     takes the small queue (if not empty) rather than going round main
 *     again, and gives up if small is empty; and once it has sent
 *     small.count entries back to small, small counts as empty.  LRU looks at no more than
 *     count entries: after that the list is back in its first order.
 *  6. W-TinyLFU: window cap wcap = max(1, cap/100) (small_cap), main cap
 *     main_cap = cap - wcap, protected holds at most prot_cap = 80% of
 *     main_cap (a hit or a refusal that moves an entry there moves
 *     protected's oldest to probation's head when it overflows), and
 *     probation + protected <= main_cap: entries enter main only into
 *     room (invariant 7) or in place of the victim they beat.
 *  7. W-TinyLFU's pending counts victims returned since, not yet matched
 *     by inserts (an insert takes one off while > 0): the slots the
 *     caller freed for entries it is about to insert, so count + pending
 *     <= cap.  The tier evicts in batches (tfs_evict_batch) before it
 *     inserts, so the window's level is judged as window + pending (what
 *     it holds once the batch is inserted), and main has room only if
 *     probation + protected < main_cap and count + pending < cap (a slot
 *     free that no victim was chosen for).  Entries move from the window
 *     to probation without a duel only into such room: on insert (the
 *     window over wcap, pending 0: the cache filling up) and in
 *     tfs_policy_victim.  Taken literally (room = main below main_cap)
 *     the rules would let every entry but a batch's first skip the duel:
 *     main's victims taken while the window is below its cap make room
 *     the next batch fills for free.
 *  8. W-TinyLFU's victim, one look at a time (a look = one ok() call):
 *     with the window at its level (window + pending >= wcap, and an
 *     entry of it not yet sent back in this call) its oldest entry c is
 *     the candidate: into room in main it moves to probation's head (no
 *     look); else it duels main's victim v (probation's oldest, or
 *     protected's if probation is empty): the one the sketch rates lower
 *     is looked at (c on a tie); evicted if ok(), v's loss sending c to
 *     probation's head.  Main counting as empty, c itself is looked at.
 *     With the window below its level main's victim is looked at, or the
 *     window's oldest if main counts as empty.  A refused window entry
 *     goes back to the window's head (a hit would put it there); after
 *     window.count such the window counts as empty.  A refused main entry
 *     goes to protected's head as if hit; after main.count such in the
 *     call main counts as empty.  Both empty: TFS_POLICY_NONE.
 *  9. The sketch counts every access recorded through tfs_policy_hit and
 *     tfs_policy_seen, never an insert: 4 rows of 4-bit saturating
 *     counters, width the power of two >= max(cap, 64); a key's first
 *     access in a sample sets its 3 doorkeeper bits (one 64-bit word of
 *     a blocked bloom filter) instead of counting; estimate = the rows'
 *     minimum + 1 if the doorkeeper has the key.  After 10 x cap recorded
 *     accesses every counter halves, the doorkeeper clears and the count
 *     of samples halves (contrib/bench/simpol.c's tlfu_*, the reference).
 *     A key's counters and doorkeeper bits are placed by hashes of the key
 *     xored with tfs_splitmix64(hash seed), 0 for seed 0 (the daemon's):
 *     another seed, other collisions, the same rules (docs/CACHE_POLICY.md,
 *     "The hash's spread").
 * 10. W-TinyLFU's bar = 1 + the highest estimate of a candidate that
 *     lost its duel (evicted, or refused: busy, dirty) since the last
 *     insert, 0 if none.  Without a candidate -- the window emptied by a
 *     batch's victims, the inserts still to come, or all of it refused --
 *     main's victim rating at the bar or above is not evicted in place of
 *     entries that rated lower: it is looked at without ok() and goes to
 *     protected's head like a refused one.  Once main counts as empty
 *     with the bar up, the bar drops to 0 and main gets one more round
 *     without it (its entries may be evictable: NONE would drop a
 *     promotion for nothing).  Without the bar a batch taking main's
 *     oldest once the window ran dry let the hottest go (test_cache.py's
 *     scan: 2 of 16 hot extents lost, at probation's tail as the cache
 *     filled up).
 * 11. tfs_policy_demote puts a held slot where the next victim of its part
 *     of the policy is looked for, and records no access: LRU's tail;
 *     S3-FIFO's tail of the queue it is on, its frequency 0; W-TinyLFU's
 *     window tail if in the window (the next candidate), else
 *     probation's tail (main's next victim; from protected, invariant 6
 *     still holds, protected holding one less).  The tier demotes an
 *     extent its eviction wanted while it was dirty, once destaged
 *     (cache_reclaim, DESIGN §10.10): the refusal moved it as if used
 *     (invariant 4), which would otherwise keep a cold extent a whole
 *     queue longer for having been written.
 * 12. tfs_policy_unprotect (W-TinyLFU) moves protected, oldest first, to
 *     probation's head (protected's order kept, ahead of probation's
 *     entries), then the window's entries over wcap, oldest first, after
 *     them (the window's newest ends at probation's head); nothing else
 *     moves.  The tier does it once, when the evidence turns reclaim on
 *     (cache_reclaim=auto, DESIGN §10.10).  Until then eviction refused
 *     dirty entries, and a refused window entry goes back to the window's
 *     head: the window grew past wcap with written extents and left main
 *     no room, so protected, below its cap, had stopped aging and kept
 *     what was hot long before (pgbench at 10%: 25,337 read hits without
 *     the protected move, 29,420 with it).  Nothing shrinks such a window
 *     later: each eviction takes one entry out of it (evicted, or into
 *     probation) and each insert puts one in.  Left so, the window held
 *     60-65 of 92 slots to the end of the SQLite trace at 10% (miss ratio
 *     .2670, against .2277 with the window's move).
 * 13. tfs_policy_next lists, without moving an entry or counting an
 *     access, up to n held slots in the order eviction will look at them
 *     as the queues stand: LRU's from the tail; S3-FIFO's small queue from
 *     its tail (half of n at most), then main's; W-TinyLFU's window
 *     entries that will be candidates (window + pending - wcap + 1 of
 *     them: the window is at its level while window + pending >= wcap,
 *     invariant 8) from its tail, half of n at most, then probation's,
 *     then protected's from their tails.  Exact for LRU with every entry
 *     evictable; for the others the next victims are among the first (a
 *     duel picks between the window's and main's oldest, S3-FIFO passes
 *     over used entries).  The tier cleans the dirty extents among its
 *     next victims before eviction reaches them (flush.c invariant 15).
 *
 * Everything is O(1) (the ghost's, the window's moves on insert and the
 * sketch's halving amortised) except tfs_policy_victim's scan,
 * tfs_policy_unprotect and tfs_policy_next (O(n)).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tierfs/hash.h"
#include "tierfs/policy.h"

#define NIL UINT32_MAX
#define FREQ_MAX 3
#define CMS_ROWS 4
#define CMS_MAX 15

enum { Q_NONE, Q_SMALL, Q_MAIN, Q_PROT };

struct queue {
	uint32_t head, tail, count;
};

struct ghost_ent {
	uint64_t key;
	uint32_t pos;		/* ring position; NIL: empty */
};

struct tfs_policy {
	enum tfs_policy_kind kind;
	uint32_t cap, small_cap;
	uint32_t *prev, *next;
	uint64_t *key;
	uint8_t *q, *freq;
	struct queue small, main;	/* LRU: small is the recency list */
	/* W-TinyLFU: small is the window, main probation (invariants 6-9) */
	struct queue prot;
	uint32_t main_cap, prot_cap, pending, bar;
	uint64_t *cms, *door;		/* 16 counters a word; bloom words */
	uint32_t width_shift, door_shift;	/* 64 - log2(width, door words) */
	uint64_t samples, sample_max;
	uint64_t hseed;			/* mixed into every key the sketch hashes */
	/* ghost (S3-FIFO) */
	uint64_t *ring;
	uint32_t gcap, gnext, gused;	/* ring size, next write, positions written */
	struct ghost_ent *gtab;
	uint32_t gmask;			/* table size - 1 */
};

/* ------------------------------------------------------------------ */
/* Lists                                                               */
/* ------------------------------------------------------------------ */

static struct queue *queue_of(struct tfs_policy *p, uint8_t q)
{
	return q == Q_MAIN ? &p->main : q == Q_PROT ? &p->prot : &p->small;
}

static void list_unlink(struct tfs_policy *p, uint32_t s)
{
	struct queue *l = queue_of(p, p->q[s]);

	if (p->prev[s] != NIL)
		p->next[p->prev[s]] = p->next[s];
	else
		l->head = p->next[s];
	if (p->next[s] != NIL)
		p->prev[p->next[s]] = p->prev[s];
	else
		l->tail = p->prev[s];
	l->count--;
	p->q[s] = Q_NONE;
}

static void list_push_head(struct tfs_policy *p, uint8_t q, uint32_t s)
{
	struct queue *l = queue_of(p, q);

	p->prev[s] = NIL;
	p->next[s] = l->head;
	if (l->head != NIL)
		p->prev[l->head] = s;
	else
		l->tail = s;
	l->head = s;
	l->count++;
	p->q[s] = q;
}

static void list_push_tail(struct tfs_policy *p, uint8_t q, uint32_t s)
{
	struct queue *l = queue_of(p, q);

	p->next[s] = NIL;
	p->prev[s] = l->tail;
	if (l->tail != NIL)
		p->next[l->tail] = s;
	else
		l->head = s;
	l->tail = s;
	l->count++;
	p->q[s] = q;
}

static void list_move_head(struct tfs_policy *p, uint8_t q, uint32_t s)
{
	list_unlink(p, s);
	list_push_head(p, q, s);
}

/* ------------------------------------------------------------------ */
/* Ghost                                                               */
/* ------------------------------------------------------------------ */

static uint32_t ghost_hash(const struct tfs_policy *p, uint64_t key)
{
	return (uint32_t)tfs_mix64(key) & p->gmask;
}

/* Table index of key, or NIL. */
static uint32_t ghost_find(const struct tfs_policy *p, uint64_t key)
{
	for (uint32_t i = ghost_hash(p, key);; i = (i + 1) & p->gmask) {
		if (p->gtab[i].pos == NIL)
			return NIL;
		if (p->gtab[i].key == key)
			return i;
	}
}

/* Empty table index i, shifting later entries of its run back. */
static void ghost_del_at(struct tfs_policy *p, uint32_t i)
{
	uint32_t j = i, home;

	for (;;) {
		j = (j + 1) & p->gmask;
		if (p->gtab[j].pos == NIL)
			break;
		/* the entry at j may move to i if its home is not in (i, j] */
		home = ghost_hash(p, p->gtab[j].key);
		if (((j - home) & p->gmask) >= ((j - i) & p->gmask)) {
			p->gtab[i] = p->gtab[j];
			i = j;
		}
	}
	p->gtab[i].pos = NIL;
}

static void ghost_add(struct tfs_policy *p, uint64_t key)
{
	uint32_t pos = p->gnext, i;

	if (!p->gcap)
		return;
	if (p->gused == p->gcap) {	/* forget the oldest */
		i = ghost_find(p, p->ring[pos]);
		if (i != NIL && p->gtab[i].pos == pos)
			ghost_del_at(p, i);
	} else {
		p->gused++;
	}
	p->ring[pos] = key;
	p->gnext = pos + 1 == p->gcap ? 0 : pos + 1;
	i = ghost_find(p, key);
	if (i == NIL)
		for (i = ghost_hash(p, key); p->gtab[i].pos != NIL; i = (i + 1) & p->gmask)
			;
	p->gtab[i].key = key;
	p->gtab[i].pos = pos;
}

/* Was key remembered?  Forgets it either way. */
static bool ghost_take(struct tfs_policy *p, uint64_t key)
{
	uint32_t i;

	if (!p->gcap || (i = ghost_find(p, key)) == NIL)
		return false;
	ghost_del_at(p, i);
	return true;
}

/* ------------------------------------------------------------------ */
/* W-TinyLFU's sketch (invariant 9)                                    */
/* ------------------------------------------------------------------ */

/* Two hashes of a key: row i's counter is at the top bits of h1 + i h2
 * (double hashing), the doorkeeper's word at h2's top bits and its 3 bits
 * from h1's low 18.  The key is xored with the hash seed's mix first (0
 * for seed 0: the hashes of before the seed). */
struct fhash {
	uint64_t h1, h2;
};

static struct fhash fhash(const struct tfs_policy *p, uint64_t key)
{
	uint64_t h1 = tfs_mix64((key ^ p->hseed) + TFS_GOLDEN64);

	return (struct fhash){ h1, tfs_mix64(h1 ^ 0x5851f42d4c957f2dull) | 1 };
}

static uint64_t cms_cell(const struct tfs_policy *p, struct fhash h, uint32_t i)
{
	return ((uint64_t)i << (64 - p->width_shift)) + ((h.h1 + i * h.h2) >> p->width_shift);
}

static uint32_t cms_get(const struct tfs_policy *p, uint64_t cell)
{
	return (uint32_t)(p->cms[cell >> 4] >> ((cell & 15) * 4)) & CMS_MAX;
}

static uint64_t door_bits(struct fhash h)
{
	return 1ull << (h.h1 & 63) | 1ull << (h.h1 >> 6 & 63) | 1ull << (h.h1 >> 12 & 63);
}

static uint64_t *door_word(const struct tfs_policy *p, struct fhash h)
{
	return &p->door[h.h2 >> p->door_shift];
}

static uint32_t sketch_estimate(const struct tfs_policy *p, uint64_t key)
{
	struct fhash h = fhash(p, key);
	uint64_t bits = door_bits(h);
	uint32_t m = CMS_MAX;

	for (uint32_t i = 0; i < CMS_ROWS; i++) {
		uint32_t c = cms_get(p, cms_cell(p, h, i));

		m = c < m ? c : m;
	}
	return m + ((*door_word(p, h) & bits) == bits);
}

/* Halve every counter, clear the doorkeeper, halve the sample count. */
static void sketch_reset(struct tfs_policy *p)
{
	size_t words = ((size_t)CMS_ROWS << (64 - p->width_shift)) / 16;

	for (size_t i = 0; i < words; i++)
		p->cms[i] = (p->cms[i] >> 1) & 0x7777777777777777ull;
	memset(p->door, 0, sizeof(*p->door) << (64 - p->door_shift));
	p->samples /= 2;
}

static void sketch_record(struct tfs_policy *p, uint64_t key)
{
	struct fhash h = fhash(p, key);
	uint64_t *w = door_word(p, h), bits = door_bits(h);

	if ((*w & bits) != bits) {
		*w |= bits;
	} else {
		for (uint32_t i = 0; i < CMS_ROWS; i++) {
			uint64_t cell = cms_cell(p, h, i);

			if (cms_get(p, cell) < CMS_MAX)
				p->cms[cell >> 4] += 1ull << ((cell & 15) * 4);
		}
	}
	if (++p->samples >= p->sample_max)
		sketch_reset(p);
}

/* log2 of the power of two >= x (x >= 1; at most 30) */
static uint32_t log2_ceil(uint64_t x)
{
	return (uint32_t)__builtin_ctz(tfs_pow2_at_least(x));
}

/* The sketch of a W-TinyLFU policy of cap >= 1 slots; -ENOMEM. */
static int sketch_new(struct tfs_policy *p)
{
	uint32_t wbits = log2_ceil(p->cap < 64 ? 64 : p->cap), dbits;

	p->sample_max = 10ull * p->cap;
	/* 8 doorkeeper bits a sampled access (words of 64): a few percent
	 * false positives even when every access of a sample is a new key */
	dbits = log2_ceil(p->sample_max / 8 > 2 ? p->sample_max / 8 : 2);
	p->width_shift = 64 - wbits;
	p->door_shift = 64 - dbits;
	p->cms = calloc(((size_t)CMS_ROWS << wbits) / 16, sizeof(*p->cms));
	p->door = calloc((size_t)1 << dbits, sizeof(*p->door));
	return p->cms && p->door ? 0 : -ENOMEM;
}

/* ------------------------------------------------------------------ */
/* Public                                                              */
/* ------------------------------------------------------------------ */

struct tfs_policy *tfs_policy_new(enum tfs_policy_kind kind, uint32_t cap, uint64_t hash_seed)
{
	struct tfs_policy *p = calloc(1, sizeof(*p));
	size_t n = cap ? cap : 1, tab = 2;

	if (!p)
		return NULL;
	p->kind = kind;
	p->cap = cap;
	p->hseed = tfs_splitmix64(hash_seed);	/* 0 for 0 */
	p->small_cap = cap / 10 ? cap / 10 : 1;
	p->small = p->main = p->prot = (struct queue){ NIL, NIL, 0 };
	if (kind == TFS_POLICY_WTINYLFU && cap) {
		p->small_cap = cap / 100 ? cap / 100 : 1;
		p->main_cap = cap - p->small_cap;
		p->prot_cap = (uint32_t)((uint64_t)p->main_cap * 8 / 10);
		if (sketch_new(p)) {
			tfs_policy_free(p);
			return NULL;
		}
	}
	p->prev = malloc(n * sizeof(*p->prev));
	p->next = malloc(n * sizeof(*p->next));
	p->key = malloc(n * sizeof(*p->key));
	p->q = calloc(n, 1);
	p->freq = calloc(n, 1);
	if (kind == TFS_POLICY_S3FIFO && cap) {
		while (tab < 2 * (size_t)cap)
			tab <<= 1;
		p->gcap = cap;
		p->gmask = (uint32_t)(tab - 1);
		p->ring = malloc(n * sizeof(*p->ring));
		p->gtab = malloc(tab * sizeof(*p->gtab));
		if (p->gtab)
			for (size_t i = 0; i < tab; i++)
				p->gtab[i].pos = NIL;
	}
	if (!p->prev || !p->next || !p->key || !p->q || !p->freq ||
	    (p->gcap && (!p->ring || !p->gtab))) {
		tfs_policy_free(p);
		return NULL;
	}
	return p;
}

void tfs_policy_free(struct tfs_policy *p)
{
	if (!p)
		return;
	free(p->prev);
	free(p->next);
	free(p->key);
	free(p->q);
	free(p->freq);
	free(p->ring);
	free(p->gtab);
	free(p->cms);
	free(p->door);
	free(p);
}

int tfs_policy_parse(const char *name, enum tfs_policy_kind *kind)
{
	if (strcasecmp(name, "lru") == 0)
		*kind = TFS_POLICY_LRU;
	else if (strcasecmp(name, "s3fifo") == 0)
		*kind = TFS_POLICY_S3FIFO;
	else if (strcasecmp(name, "wtinylfu") == 0)
		*kind = TFS_POLICY_WTINYLFU;
	else
		return -EINVAL;
	return 0;
}

const char *tfs_policy_name(enum tfs_policy_kind kind)
{
	switch (kind) {
	case TFS_POLICY_LRU: return "lru";
	case TFS_POLICY_S3FIFO: return "s3fifo";
	case TFS_POLICY_WTINYLFU: return "wtinylfu";
	case TFS_POLICY_COUNT: break;
	}
	return "?";
}

/* Calls breaking the caller's contract (slot out of range, inserting a
 * held slot, hitting or removing an empty one) do nothing. */
void tfs_policy_insert(struct tfs_policy *p, uint32_t slot, uint64_t key)
{
	if (slot >= p->cap || p->q[slot] != Q_NONE)
		return;
	p->key[slot] = key;
	p->freq[slot] = 0;
	if (p->kind == TFS_POLICY_S3FIFO && ghost_take(p, key))
		list_push_head(p, Q_MAIN, slot);
	else
		list_push_head(p, Q_SMALL, slot);
	if (p->kind != TFS_POLICY_WTINYLFU)
		return;
	p->bar = 0;
	if (p->pending) {	/* into a slot a victim freed (invariant 7) */
		p->pending--;
		return;
	}
	/* filling up: the window's overflow enters main while it has room */
	while (p->small.count > p->small_cap && p->main.count + p->prot.count < p->main_cap)
		list_move_head(p, Q_MAIN, p->small.tail);
}

/* W-TinyLFU: s (in main) goes to protected's head, protected's overflow
 * to probation's head. */
static void tlfu_protect(struct tfs_policy *p, uint32_t s)
{
	list_move_head(p, Q_PROT, s);
	if (p->prot.count > p->prot_cap)
		list_move_head(p, Q_MAIN, p->prot.tail);
}

void tfs_policy_hit(struct tfs_policy *p, uint32_t slot)
{
	if (slot >= p->cap || p->q[slot] == Q_NONE)
		return;
	if (p->kind == TFS_POLICY_LRU) {
		list_move_head(p, Q_SMALL, slot);
	} else if (p->kind == TFS_POLICY_WTINYLFU) {
		sketch_record(p, p->key[slot]);
		if (p->q[slot] == Q_SMALL)
			list_move_head(p, Q_SMALL, slot);
		else
			tlfu_protect(p, slot);
	} else if (p->freq[slot] < FREQ_MAX) {
		p->freq[slot]++;
	}
}

void tfs_policy_seen(struct tfs_policy *p, uint64_t key)
{
	if (p->kind == TFS_POLICY_WTINYLFU && p->cap)
		sketch_record(p, key);
}

uint32_t tfs_policy_estimate(const struct tfs_policy *p, uint64_t key)
{
	return p->kind == TFS_POLICY_WTINYLFU && p->cap ? sketch_estimate(p, key) : 0;
}

void tfs_policy_remove(struct tfs_policy *p, uint32_t slot)
{
	if (slot < p->cap && p->q[slot] != Q_NONE)
		list_unlink(p, slot);
}

void tfs_policy_demote(struct tfs_policy *p, uint32_t slot)
{
	uint8_t q;

	if (slot >= p->cap || (q = p->q[slot]) == Q_NONE)
		return;
	list_unlink(p, slot);
	if (q == Q_PROT)
		q = Q_MAIN;
	p->freq[slot] = 0;
	list_push_tail(p, q, slot);
}

void tfs_policy_unprotect(struct tfs_policy *p)
{
	if (p->kind != TFS_POLICY_WTINYLFU)
		return;
	while (p->prot.count)
		list_move_head(p, Q_MAIN, p->prot.tail);
	while (p->small.count > p->small_cap)
		list_move_head(p, Q_MAIN, p->small.tail);
}

static uint32_t victim_lru(struct tfs_policy *p, bool (*ok)(void *, uint32_t),
			   void *arg, uint32_t max)
{
	uint32_t n = max < p->small.count ? max : p->small.count;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = p->small.tail;

		if (ok(arg, s)) {
			list_unlink(p, s);
			return s;
		}
		list_move_head(p, Q_SMALL, s);
	}
	return TFS_POLICY_NONE;
}

static uint32_t victim_s3fifo(struct tfs_policy *p, bool (*ok)(void *, uint32_t),
			      void *arg, uint32_t max)
{
	uint32_t stuck = 0;	/* main entries refused in a row */
	uint32_t held = 0;	/* small entries refused and kept in small */

	for (uint32_t looked = 0; looked < max; looked++) {
		bool small_left = p->small.count && held < p->small.count, from_small;
		uint32_t s;

		if (!small_left && (!p->main.count || stuck >= p->main.count))
			break;
		from_small = small_left &&
			(p->small.count >= p->small_cap || !p->main.count ||
			 stuck >= p->main.count);
		if (from_small) {
			s = p->small.tail;
			if (!ok(arg, s) && !p->freq[s]) {
				/* not used since it came in, only not evictable yet
				 * (a write's dirty extent): it waits in small for
				 * the flusher, not in main (invariant 4) */
				list_move_head(p, Q_SMALL, s);
				held++;
				continue;
			}
			if (!p->freq[s]) {
				list_unlink(p, s);
				ghost_add(p, p->key[s]);
				return s;
			}
			list_move_head(p, Q_MAIN, s);
			continue;
		}
		s = p->main.tail;
		if (!ok(arg, s)) {
			stuck++;
		} else if (!p->freq[s]) {
			list_unlink(p, s);
			return s;
		} else {
			p->freq[s]--;
			stuck = 0;
		}
		list_move_head(p, Q_MAIN, s);
	}
	return TFS_POLICY_NONE;
}

/* Invariants 7 and 8. */
static uint32_t victim_tlfu(struct tfs_policy *p, bool (*ok)(void *, uint32_t),
			    void *arg, uint32_t max)
{
	uint32_t stuck = 0;	/* main entries refused (or kept by the bar) */
	uint32_t held = 0;	/* window entries refused and sent back */

	for (uint32_t looked = 0; looked < max;) {
		uint32_t nmain = p->main.count + p->prot.count, c = NIL, s;
		bool win = p->small.count > held, main_left = nmain > stuck;

		if (!main_left && p->bar) {	/* a round of main kept by the bar */
			p->bar = 0;
			stuck = 0;
			main_left = nmain > 0;
		}
		if (!win && !main_left)
			break;
		if (win && p->small.count + p->pending >= p->small_cap) {
			c = p->small.tail;
			if (nmain < p->main_cap && tfs_policy_count(p) + p->pending < p->cap) {
				list_move_head(p, Q_MAIN, c);	/* room in main */
				continue;
			}
		}
		if (main_left) {
			uint32_t es;

			s = p->main.count ? p->main.tail : p->prot.tail;
			es = sketch_estimate(p, p->key[s]);
			if (c != NIL) {
				uint32_t ec = sketch_estimate(p, p->key[c]);

				if (ec <= es) {		/* the candidate loses ties */
					s = c;
					if (ec + 1 > p->bar)	/* invariant 10 */
						p->bar = ec + 1;
				}
			} else if (p->bar && es >= p->bar) {
				/* rates above a loser we could not evict */
				looked++;
				tlfu_protect(p, s);
				stuck++;
				continue;
			}
		} else {
			s = p->small.tail;	/* main counts as empty */
		}
		looked++;
		if (ok(arg, s)) {
			list_unlink(p, s);
			if (c != NIL && c != s)
				list_move_head(p, Q_MAIN, c);	/* it won its place */
			p->pending++;
			return s;
		}
		if (p->q[s] == Q_SMALL) {
			list_move_head(p, Q_SMALL, s);
			held++;
		} else {
			tlfu_protect(p, s);
			stuck++;
		}
	}
	return TFS_POLICY_NONE;
}

uint32_t tfs_policy_victim(struct tfs_policy *p, bool (*ok)(void *arg, uint32_t slot),
			   void *arg, uint32_t max)
{
	if (p->kind == TFS_POLICY_LRU)
		return victim_lru(p, ok, arg, max);
	if (p->kind == TFS_POLICY_WTINYLFU)
		return victim_tlfu(p, ok, arg, max);
	return victim_s3fifo(p, ok, arg, max);
}

/* Appends q's entries from its tail to out[have..lim); returns the new
 * count. */
static uint32_t list_from_tail(const struct tfs_policy *p, const struct queue *q,
			       uint32_t *out, uint32_t have, uint32_t lim)
{
	for (uint32_t s = q->tail; s != NIL && have < lim; s = p->prev[s])
		out[have++] = s;
	return have;
}

/* Invariant 13. */
uint32_t tfs_policy_next(const struct tfs_policy *p, uint32_t *out, uint32_t n)
{
	uint32_t have = 0, over;

	if (p->kind == TFS_POLICY_LRU)
		return list_from_tail(p, &p->small, out, 0, n);
	if (p->kind == TFS_POLICY_S3FIFO)
		return list_from_tail(p, &p->main, out, list_from_tail(p, &p->small, out, 0, n / 2),
				      n);
	/* the window's oldest is a candidate while it is at its level
	 * (invariant 8: window + pending >= wcap) */
	over = p->small.count + p->pending + 1 > p->small_cap ?
	       p->small.count + p->pending + 1 - p->small_cap : 0;
	if (over > p->small.count)
		over = p->small.count;
	have = list_from_tail(p, &p->small, out, 0, over < n / 2 ? over : n / 2);
	have = list_from_tail(p, &p->main, out, have, n);
	return list_from_tail(p, &p->prot, out, have, n);
}

uint64_t tfs_policy_bytes(const struct tfs_policy *p)
{
	uint64_t n = p->cap ? p->cap : 1, b = sizeof(*p);

	b += n * (sizeof(*p->prev) + sizeof(*p->next) + sizeof(*p->key) + 2);	/* q, freq */
	if (p->gcap)
		b += n * sizeof(*p->ring) + ((uint64_t)p->gmask + 1) * sizeof(*p->gtab);
	if (p->cms)
		b += (((uint64_t)CMS_ROWS << (64 - p->width_shift)) / 16) * sizeof(*p->cms) +
		     (sizeof(*p->door) << (64 - p->door_shift));
	return b;
}

uint32_t tfs_policy_count(const struct tfs_policy *p)
{
	return p->small.count + p->main.count + p->prot.count;
}

bool tfs_policy_holds(const struct tfs_policy *p, uint32_t slot)
{
	return slot < p->cap && p->q[slot] != Q_NONE;
}
