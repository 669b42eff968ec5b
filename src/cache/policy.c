/* policy.c - eviction policies of the SSD tier (see tierfs/policy.h).
 *
 * Owns: the order of the cache's slots (queues as doubly linked lists of
 * slot numbers in prev/next arrays), S3-FIFO's per-slot frequencies and
 * its ghost history.  No I/O, no locks, no clock; one allocation per
 * policy, made by tfs_policy_new.
 *
 * Invariants:
 *  1. A slot is held iff q[slot] != Q_NONE, and then it is on exactly the
 *     list q[slot] names; count = sum of the lists' counts.  LRU uses only
 *     Q_SMALL as its one list.  Lists run from head (newest) to tail.
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
 *
 * Everything is O(1) (the ghost's amortised, through the table) except
 * tfs_policy_victim's scan.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tierfs/hash.h"
#include "tierfs/policy.h"

#define NIL UINT32_MAX
#define FREQ_MAX 3

enum { Q_NONE, Q_SMALL, Q_MAIN };

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
	return q == Q_MAIN ? &p->main : &p->small;
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
/* Public                                                              */
/* ------------------------------------------------------------------ */

struct tfs_policy *tfs_policy_new(enum tfs_policy_kind kind, uint32_t cap)
{
	struct tfs_policy *p = calloc(1, sizeof(*p));
	size_t n = cap ? cap : 1, tab = 2;

	if (!p)
		return NULL;
	p->kind = kind;
	p->cap = cap;
	p->small_cap = cap / 10 ? cap / 10 : 1;
	p->small = p->main = (struct queue){ NIL, NIL, 0 };
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
	free(p);
}

int tfs_policy_parse(const char *name, enum tfs_policy_kind *kind)
{
	if (strcasecmp(name, "lru") == 0)
		*kind = TFS_POLICY_LRU;
	else if (strcasecmp(name, "s3fifo") == 0)
		*kind = TFS_POLICY_S3FIFO;
	else
		return -EINVAL;
	return 0;
}

const char *tfs_policy_name(enum tfs_policy_kind kind)
{
	switch (kind) {
	case TFS_POLICY_LRU: return "lru";
	case TFS_POLICY_S3FIFO: return "s3fifo";
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
}

void tfs_policy_hit(struct tfs_policy *p, uint32_t slot)
{
	if (slot >= p->cap || p->q[slot] == Q_NONE)
		return;
	if (p->kind == TFS_POLICY_LRU)
		list_move_head(p, Q_SMALL, slot);
	else if (p->freq[slot] < FREQ_MAX)
		p->freq[slot]++;
}

void tfs_policy_remove(struct tfs_policy *p, uint32_t slot)
{
	if (slot < p->cap && p->q[slot] != Q_NONE)
		list_unlink(p, slot);
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

uint32_t tfs_policy_victim(struct tfs_policy *p, bool (*ok)(void *arg, uint32_t slot),
			   void *arg, uint32_t max)
{
	if (p->kind == TFS_POLICY_LRU)
		return victim_lru(p, ok, arg, max);
	return victim_s3fifo(p, ok, arg, max);
}

uint32_t tfs_policy_count(const struct tfs_policy *p)
{
	return p->small.count + p->main.count;
}

bool tfs_policy_holds(const struct tfs_policy *p, uint32_t slot)
{
	return slot < p->cap && p->q[slot] != Q_NONE;
}
