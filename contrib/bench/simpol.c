/* simpol.c - reference cache policies for cache_sim (see simpol.h), each
 * written from its paper; nothing shared with src/cache/policy.c.
 *
 * Owns: per-key queue membership and links for keys 0..nkeys-1, the list
 * heads of every queue, and W-TinyLFU's frequency sketch and doorkeeper.
 * No I/O, no clock; allocation only in simpol_new.
 *
 * Invariants:
 *  1. A key is on at most one queue, named by nd[key].where & Q_MASK
 *     (Q_NONE: unknown); the queue's n counts it.  Listed queues are doubly
 *     linked through nd[].prev/next, head the newest (MRU), tail the
 *     oldest (LRU).
 *     Q_LIR is a bag (counted, not linked): LIRS orders LIR keys only by
 *     its stack S.
 *  2. LIRS alone also links keys on its stack S, through snd[].prev/next,
 *     and marks them with S_BIT in nd[].where; S's bottom (tail) is a LIR key
 *     after every access (stack pruning), and every LIR key is on S.
 *  3. simpol_used() = the sum of the resident queues' counts <= cap.
 *     Ghost queues (b1, b2, a1out, ghost, nonres) hold no data.
 *  4. Every miss admits (simpol.h); a hit never does.
 *
 * The policies' own invariants are under their sections.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "simpol.h"

#define NIL UINT32_MAX
#define Q_MASK 0x1f
#define S_BIT 0x80		/* LIRS: the key is on stack S */

/* what an access did */
#define SP_HIT 1u
#define SP_ADMIT 2u

enum {
	Q_NONE,
	Q_LRU,
	Q_T1, Q_T2, Q_B1, Q_B2,				/* ARC */
	Q_LIR, Q_HIR, Q_NONRES,				/* LIRS */
	Q_A1IN, Q_A1OUT, Q_AM,				/* 2Q */
	Q_SMALL, Q_MAIN, Q_GHOST,			/* S3-FIFO */
	Q_WINDOW, Q_PROBATION, Q_PROTECTED,		/* W-TinyLFU */
	Q_COUNT
};

static const struct {
	const char *name;
	bool resident;		/* its keys' data is cached */
	bool bag;		/* counted only, not linked */
} qinfo[Q_COUNT] = {
	[Q_NONE] = { NULL, false, true },
	[Q_LRU] = { "lru", true, false },
	[Q_T1] = { "t1", true, false },
	[Q_T2] = { "t2", true, false },
	[Q_B1] = { "b1", false, false },
	[Q_B2] = { "b2", false, false },
	[Q_LIR] = { "lir", true, true },
	[Q_HIR] = { "hir", true, false },
	[Q_NONRES] = { "nonres", false, false },
	[Q_A1IN] = { "a1in", true, false },
	[Q_A1OUT] = { "a1out", false, false },
	[Q_AM] = { "am", true, false },
	[Q_SMALL] = { "small", true, false },
	[Q_MAIN] = { "main", true, false },
	[Q_GHOST] = { "ghost", false, false },
	[Q_WINDOW] = { "window", true, false },
	[Q_PROBATION] = { "probation", true, false },
	[Q_PROTECTED] = { "protected", true, false },
};

struct dlist {
	uint32_t head, tail, n;
};

/* A key's links, and (in the queue's array only) its state: one cache
 * line touched per key, where separate arrays would cost one each. */
struct node {
	uint32_t prev, next;
	uint8_t where;		/* inv. 1, 2 */
	uint8_t freq;		/* S3-FIFO: hits, 0..3 */
};

struct simpol {
	enum simpol_kind kind;
	uint32_t cap, nkeys;
	struct node *nd;		/* the queue a key is on, and its state */
	struct dlist q[Q_COUNT];
	/* per policy */
	uint32_t p;			/* ARC: target size of T1 */
	uint32_t qcap[Q_COUNT];		/* a queue's target or limit, by policy */
	struct node *snd;		/* LIRS: links of stack S (only) */
	struct dlist s;
	/* W-TinyLFU: count-min sketch, 4 rows of width 4-bit counters,
	 * 16 a word; the doorkeeper, a blocked bloom filter, in front */
	uint64_t *cms, *door;
	uint32_t width_shift, door_shift;	/* 64 - log2(width, or door words) */
	uint64_t samples, sample_max;
	uint64_t hseed;			/* xored into every key the sketch hashes */
};

/* ------------------------------------------------------------------ */
/* Lists and queues                                                    */
/* ------------------------------------------------------------------ */

static void dl_push(struct dlist *l, struct node *nd, uint32_t k)
{
	nd[k].prev = NIL;
	nd[k].next = l->head;
	if (l->head != NIL)
		nd[l->head].prev = k;
	else
		l->tail = k;
	l->head = k;
	l->n++;
}

static void dl_unlink(struct dlist *l, struct node *nd, uint32_t k)
{
	uint32_t p = nd[k].prev, n = nd[k].next;

	if (p != NIL)
		nd[p].next = n;
	else
		l->head = n;
	if (n != NIL)
		nd[n].prev = p;
	else
		l->tail = p;
	l->n--;
}

static unsigned qof(const struct simpol *sp, uint32_t k)
{
	return sp->nd[k].where & Q_MASK;
}

/* k (on no queue) joins q as its newest; LIRS's S_BIT is kept. */
static void q_push(struct simpol *sp, unsigned q, uint32_t k)
{
	sp->nd[k].where = (uint8_t)((sp->nd[k].where & S_BIT) | q);
	if (qinfo[q].bag)
		sp->q[q].n++;
	else
		dl_push(&sp->q[q], sp->nd, k);
}

/* k leaves its queue (if any). */
static void q_unlink(struct simpol *sp, uint32_t k)
{
	unsigned q = qof(sp, k);

	if (q == Q_NONE)
		return;
	if (qinfo[q].bag)
		sp->q[q].n--;
	else
		dl_unlink(&sp->q[q], sp->nd, k);
	sp->nd[k].where &= S_BIT;
}

/* k goes to the head of q, from wherever it was. */
static void q_move(struct simpol *sp, unsigned q, uint32_t k)
{
	q_unlink(sp, k);
	q_push(sp, q, k);
}

/* q's oldest key leaves it; returns the key (q must not be empty). */
static uint32_t q_pop(struct simpol *sp, unsigned q)
{
	uint32_t k = sp->q[q].tail;

	q_unlink(sp, k);
	return k;
}

/* q's oldest key moves to the head of dst. */
static uint32_t q_shift(struct simpol *sp, unsigned q, unsigned dst)
{
	uint32_t k = q_pop(sp, q);

	q_push(sp, dst, k);
	return k;
}

static uint32_t n_of(const struct simpol *sp, unsigned q)
{
	return sp->q[q].n;
}

static uint32_t max1(uint32_t x)
{
	return x ? x : 1;
}

/* ------------------------------------------------------------------ */
/* LRU                                                                 */
/* ------------------------------------------------------------------ */

static unsigned lru_access(struct simpol *sp, uint32_t x)
{
	if (qof(sp, x) == Q_LRU) {
		q_move(sp, Q_LRU, x);
		return SP_HIT;
	}
	if (n_of(sp, Q_LRU) == sp->cap)
		(void)q_pop(sp, Q_LRU);
	q_push(sp, Q_LRU, x);
	return SP_ADMIT;
}

/* ------------------------------------------------------------------ */
/* ARC                                                                 */
/*                                                                     */
/* c = cap.  T1 holds keys seen once recently, T2 keys seen at least   */
/* twice; B1/B2 remember keys evicted from T1/T2.  |T1|+|T2| <= c,     */
/* |T1|+|B1| <= c, |T1|+|T2|+|B1|+|B2| <= 2c.  p (0..c) is T1's        */
/* target: a hit in B1 says T1 was too small (p grows by              */
/* max(1, |B2|/|B1|)), a hit in B2 the reverse.  The paper's deltas    */
/* are real; here they are integer quotients, so p stays an integer    */
/* and "|T1| == p" in REPLACE means what it says.                      */
/* ------------------------------------------------------------------ */

/* REPLACE: make room for one key, from T1 when it is over its target
 * (or at it, for a key coming back from B2), else from T2.  The evicted
 * key becomes a ghost.  Nothing to do while the cache is not full (only
 * before the first eviction: after it the cache stays full). */
static void arc_replace(struct simpol *sp, bool from_b2)
{
	uint32_t t1 = n_of(sp, Q_T1);

	if (t1 + n_of(sp, Q_T2) < sp->cap)
		return;
	if (t1 && (t1 > sp->p || (from_b2 && t1 == sp->p) || !n_of(sp, Q_T2)))
		(void)q_shift(sp, Q_T1, Q_B1);
	else
		(void)q_shift(sp, Q_T2, Q_B2);
}

static unsigned arc_access(struct simpol *sp, uint32_t x)
{
	uint32_t c = sp->cap, l1, all, d;

	switch (qof(sp, x)) {
	case Q_T1:
	case Q_T2:
		q_move(sp, Q_T2, x);
		return SP_HIT;
	case Q_B1:
		d = n_of(sp, Q_B2) / n_of(sp, Q_B1);
		sp->p += d > 1 ? d : 1;
		if (sp->p > c)
			sp->p = c;
		arc_replace(sp, false);
		q_move(sp, Q_T2, x);
		return SP_ADMIT;
	case Q_B2:
		d = n_of(sp, Q_B1) / n_of(sp, Q_B2);
		d = d > 1 ? d : 1;
		sp->p = sp->p > d ? sp->p - d : 0;
		arc_replace(sp, true);
		q_move(sp, Q_T2, x);
		return SP_ADMIT;
	default:
		break;
	}
	l1 = n_of(sp, Q_T1) + n_of(sp, Q_B1);
	all = l1 + n_of(sp, Q_T2) + n_of(sp, Q_B2);
	if (l1 >= c) {
		if (n_of(sp, Q_T1) < c) {
			(void)q_pop(sp, Q_B1);
			arc_replace(sp, false);
		} else {
			(void)q_pop(sp, Q_T1);	/* B1 empty: T1's LRU leaves no ghost */
		}
	} else if (all >= c) {
		if (all >= 2 * c)
			(void)q_pop(sp, Q_B2);
		arc_replace(sp, false);
	}
	q_push(sp, Q_T1, x);
	return SP_ADMIT;
}

/* ------------------------------------------------------------------ */
/* LIRS                                                                */
/*                                                                     */
/* A key is LIR (resident, on S), resident HIR (on queue Q = Q_HIR,    */
/* maybe on S) or non-resident HIR (on S only; queued on Q_NONRES to   */
/* bound their number).  S orders keys by recency; a key's IRR is      */
/* low while it is on S.  At most qcap[Q_LIR] = cap - max(1, cap/100)  */
/* keys are LIR; a HIR key seen again while on S becomes LIR and S's   */
/* bottom LIR key becomes resident HIR.  Misses evict Q's front.       */
/* Non-resident entries are bounded to qcap[Q_NONRES] = 2 cap: past    */
/* that the one that became non-resident longest ago leaves S (the     */
/* paper leaves the bound open; eviction order is close to recency     */
/* order, since Q is refreshed on every resident HIR hit).             */
/* ------------------------------------------------------------------ */

/* k becomes S's top. */
static void s_top(struct simpol *sp, uint32_t k)
{
	if (sp->nd[k].where & S_BIT)
		dl_unlink(&sp->s, sp->snd, k);
	dl_push(&sp->s, sp->snd, k);
	sp->nd[k].where |= S_BIT;
}

/* k leaves S; a non-resident key is then forgotten. */
static void s_drop(struct simpol *sp, uint32_t k)
{
	dl_unlink(&sp->s, sp->snd, k);
	sp->nd[k].where &= (uint8_t)~S_BIT;
	if (qof(sp, k) == Q_NONRES)
		q_unlink(sp, k);
}

/* Stack pruning: HIR keys at S's bottom leave it (inv. 2). */
static void lirs_prune(struct simpol *sp)
{
	while (sp->s.tail != NIL && qof(sp, sp->s.tail) != Q_LIR)
		s_drop(sp, sp->s.tail);
}

/* While there are too many LIR keys, S's bottom one becomes resident HIR
 * (at Q's end) and leaves S. */
static void lirs_demote(struct simpol *sp)
{
	lirs_prune(sp);
	while (n_of(sp, Q_LIR) > sp->qcap[Q_LIR]) {
		uint32_t y = sp->s.tail;

		s_drop(sp, y);
		q_move(sp, Q_HIR, y);
		lirs_prune(sp);
	}
}

static unsigned lirs_access(struct simpol *sp, uint32_t x)
{
	unsigned st = qof(sp, x);
	bool on_s = sp->nd[x].where & S_BIT;

	if (st == Q_LIR) {
		s_top(sp, x);
		lirs_prune(sp);
		return SP_HIT;
	}
	if (st == Q_HIR) {
		s_top(sp, x);
		q_move(sp, on_s ? Q_LIR : Q_HIR, x);	/* low IRR: LIR */
		lirs_demote(sp);
		return SP_HIT;
	}
	/* a miss; a non-resident x leaves Q_NONRES first, so the bound below
	 * cannot drop it from S in the middle of this access */
	if (st == Q_NONRES)
		q_unlink(sp, x);
	if (n_of(sp, Q_LIR) + n_of(sp, Q_HIR) == sp->cap) {
		uint32_t y = q_pop(sp, Q_HIR);	/* never empty: LIR < cap */

		if (sp->nd[y].where & S_BIT)
			q_push(sp, Q_NONRES, y);
	}
	s_top(sp, x);
	if (st == Q_NONRES) {
		q_push(sp, Q_LIR, x);
		lirs_demote(sp);
	} else {
		q_push(sp, n_of(sp, Q_LIR) < sp->qcap[Q_LIR] ? Q_LIR : Q_HIR, x);
	}
	while (n_of(sp, Q_NONRES) > sp->qcap[Q_NONRES])
		s_drop(sp, sp->q[Q_NONRES].tail);
	return SP_ADMIT;
}

/* ------------------------------------------------------------------ */
/* 2Q (full version)                                                   */
/*                                                                     */
/* A1in: FIFO of keys seen once, Kin = qcap[Q_A1IN] = cap/4; a hit     */
/* there does nothing (correlated references).  A1out: ghosts of keys  */
/* that left A1in, Kout = qcap[Q_A1OUT] = cap/2.  A key seen again     */
/* while in A1out goes to Am, an LRU.  Keys evicted from Am are        */
/* forgotten.                                                          */
/* ------------------------------------------------------------------ */

/* Frees a slot when the cache is full: A1in's oldest when A1in is over
 * Kin (or Am is empty), its key remembered in A1out; else Am's LRU. */
static void twoq_reclaim(struct simpol *sp)
{
	if (n_of(sp, Q_A1IN) + n_of(sp, Q_AM) < sp->cap)
		return;
	if (n_of(sp, Q_A1IN) > sp->qcap[Q_A1IN] || !n_of(sp, Q_AM)) {
		(void)q_shift(sp, Q_A1IN, Q_A1OUT);
		if (n_of(sp, Q_A1OUT) > sp->qcap[Q_A1OUT])
			(void)q_pop(sp, Q_A1OUT);
	} else {
		(void)q_pop(sp, Q_AM);
	}
}

static unsigned twoq_access(struct simpol *sp, uint32_t x)
{
	unsigned st = qof(sp, x);

	if (st == Q_AM) {
		q_move(sp, Q_AM, x);
		return SP_HIT;
	}
	if (st == Q_A1IN)
		return SP_HIT;
	q_unlink(sp, x);	/* out of A1out, before reclaim trims it */
	twoq_reclaim(sp);
	q_push(sp, st == Q_A1OUT ? Q_AM : Q_A1IN, x);
	return SP_ADMIT;
}

/* ------------------------------------------------------------------ */
/* S3-FIFO                                                             */
/*                                                                     */
/* Small FIFO S (target qcap[Q_SMALL] = cap/10), main FIFO M, ghost    */
/* FIFO G of at most cap keys.  Hits only raise freq (<= 3).  A missed */
/* key goes to M if G remembers it, else to S.  Eviction takes from S  */
/* while S is at its target (or M is empty): S's oldest moves to M if  */
/* it was hit while in S ("accessed at least once"; its bits cleared), */
/* else leaves for G.  From M: an entry with freq > 0 goes round again */
/* with freq - 1, else leaves.                                         */
/* ------------------------------------------------------------------ */

static void s3_evict(struct simpol *sp)
{
	for (;;) {
		uint32_t t;

		if (n_of(sp, Q_SMALL) >= sp->qcap[Q_SMALL] || !n_of(sp, Q_MAIN)) {
			t = q_pop(sp, Q_SMALL);
			if (sp->nd[t].freq) {
				sp->nd[t].freq = 0;
				q_push(sp, Q_MAIN, t);
				continue;
			}
			q_push(sp, Q_GHOST, t);
			if (n_of(sp, Q_GHOST) > sp->qcap[Q_GHOST])
				(void)q_pop(sp, Q_GHOST);
			return;
		}
		t = q_pop(sp, Q_MAIN);
		if (!sp->nd[t].freq)
			return;
		sp->nd[t].freq--;
		q_push(sp, Q_MAIN, t);
	}
}

static unsigned s3_access(struct simpol *sp, uint32_t x)
{
	unsigned st = qof(sp, x);

	if (st == Q_SMALL || st == Q_MAIN) {
		if (sp->nd[x].freq < 3)
			sp->nd[x].freq++;
		return SP_HIT;
	}
	q_unlink(sp, x);	/* out of G, before eviction trims it */
	if (n_of(sp, Q_SMALL) + n_of(sp, Q_MAIN) == sp->cap)
		s3_evict(sp);
	sp->nd[x].freq = 0;
	q_push(sp, st == Q_GHOST ? Q_MAIN : Q_SMALL, x);
	return SP_ADMIT;
}

/* ------------------------------------------------------------------ */
/* W-TinyLFU                                                           */
/*                                                                     */
/* Window LRU of qcap[Q_WINDOW] = max(1, cap/100) keys takes every     */
/* missed key (written to the SSD: inv. 4).  The window's LRU key is   */
/* then the candidate for main (an SLRU of the other keys: probation   */
/* takes newcomers, a hit there promotes to protected, at most         */
/* qcap[Q_PROTECTED] = 80% of main, whose overflow goes back to        */
/* probation's head).  While main has room the candidate enters; else  */
/* it enters iff its estimated frequency is above main's victim's      */
/* (probation's LRU, or protected's when probation is empty), and the  */
/* loser is evicted.                                                   */
/*                                                                     */
/* Frequency: every access is recorded.  The doorkeeper (a bloom       */
/* filter, 3 bits a key) absorbs a key's first occurrence in a sample; */
/* later ones go to the count-min sketch (4 rows, 4-bit saturating     */
/* counters, width the power of two >= cap).  estimate = the sketch's  */
/* minimum + 1 if the doorkeeper has the key.  After sample_max = 10   */
/* cap recorded accesses every counter halves, the doorkeeper is       */
/* cleared and the sample count halves (the paper's reset).            */
/* ------------------------------------------------------------------ */

#define CMS_ROWS 4

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* log2 of the power of two >= x (x >= 1) */
static uint32_t log2_ceil(uint64_t x)
{
	uint32_t b = 0;

	while ((1ull << b) < x)
		b++;
	return b;
}

/* Where a key's frequency lives, from two hashes of it: a counter in each
 * row of the sketch (row i: the top bits of h1 + i h2, Kirsch &
 * Mitzenmacher's double hashing), and 3 doorkeeper bits, all in one 64-bit
 * word (a blocked bloom filter: one cache line a look-up, for a slightly
 * higher false positive rate than 3 bits anywhere).  Computed as needed,
 * not into a struct: returning one costs more than the hashing.  The key
 * is xored with the hash seed's mix first (0 for seed 0). */
struct tlfu_hash {
	uint64_t h1, h2;
};

static struct tlfu_hash tlfu_hash(const struct simpol *sp, uint32_t k)
{
	uint64_t h1 = mix64((k ^ sp->hseed) + 0x9e3779b97f4a7c15ull);

	return (struct tlfu_hash){ h1, mix64(h1 ^ 0x5851f42d4c957f2dull) | 1 };
}

/* the number of row i's counter */
static uint64_t cms_cell(const struct simpol *sp, struct tlfu_hash h, uint32_t i)
{
	return ((uint64_t)i << (64 - sp->width_shift)) + ((h.h1 + i * h.h2) >> sp->width_shift);
}

static uint32_t cms_get(const struct simpol *sp, uint64_t cell)
{
	return (uint32_t)(sp->cms[cell >> 4] >> ((cell & 15) * 4)) & 15;
}

static uint64_t *door_word(const struct simpol *sp, struct tlfu_hash h)
{
	return &sp->door[h.h2 >> sp->door_shift];
}

static uint64_t door_bits(struct tlfu_hash h)
{
	return 1ull << (h.h1 & 63) | 1ull << (h.h1 >> 6 & 63) | 1ull << (h.h1 >> 12 & 63);
}

static uint32_t tlfu_estimate(const struct simpol *sp, uint32_t k)
{
	struct tlfu_hash h = tlfu_hash(sp, k);
	uint32_t m = 15;

	for (uint32_t i = 0; i < CMS_ROWS; i++) {
		uint32_t c = cms_get(sp, cms_cell(sp, h, i));

		m = c < m ? c : m;
	}
	return m + ((*door_word(sp, h) & door_bits(h)) == door_bits(h));
}

static void tlfu_reset(struct simpol *sp)
{
	size_t words = ((size_t)CMS_ROWS << (64 - sp->width_shift)) / 16;

	for (size_t i = 0; i < words; i++)
		sp->cms[i] = (sp->cms[i] >> 1) & 0x7777777777777777ull;
	memset(sp->door, 0, sizeof(*sp->door) << (64 - sp->door_shift));
	sp->samples /= 2;
}

static void tlfu_record(struct simpol *sp, uint32_t k)
{
	struct tlfu_hash h = tlfu_hash(sp, k);
	uint64_t *w = door_word(sp, h), bits = door_bits(h);

	if ((*w & bits) != bits) {
		*w |= bits;
	} else {
		for (uint32_t i = 0; i < CMS_ROWS; i++) {
			uint64_t cell = cms_cell(sp, h, i);

			if (cms_get(sp, cell) < 15)
				sp->cms[cell >> 4] += 1ull << ((cell & 15) * 4);
		}
	}
	if (++sp->samples >= sp->sample_max)
		tlfu_reset(sp);
}

/* The window overflowed: its LRU key enters main or is evicted. */
static void tlfu_admit(struct simpol *sp)
{
	uint32_t c = q_pop(sp, Q_WINDOW), main_cap = sp->cap - sp->qcap[Q_WINDOW], v;

	if (n_of(sp, Q_PROBATION) + n_of(sp, Q_PROTECTED) < main_cap) {
		q_push(sp, Q_PROBATION, c);
		return;
	}
	if (!main_cap)
		return;
	v = n_of(sp, Q_PROBATION) ? sp->q[Q_PROBATION].tail : sp->q[Q_PROTECTED].tail;
	if (tlfu_estimate(sp, c) > tlfu_estimate(sp, v)) {
		q_unlink(sp, v);
		q_push(sp, Q_PROBATION, c);
	}
}

static unsigned tlfu_access(struct simpol *sp, uint32_t x)
{
	tlfu_record(sp, x);
	switch (qof(sp, x)) {
	case Q_WINDOW:
		q_move(sp, Q_WINDOW, x);
		return SP_HIT;
	case Q_PROBATION:
	case Q_PROTECTED:
		q_move(sp, Q_PROTECTED, x);
		if (n_of(sp, Q_PROTECTED) > sp->qcap[Q_PROTECTED])
			(void)q_shift(sp, Q_PROTECTED, Q_PROBATION);
		return SP_HIT;
	default:
		break;
	}
	q_push(sp, Q_WINDOW, x);
	if (n_of(sp, Q_WINDOW) > sp->qcap[Q_WINDOW])
		tlfu_admit(sp);
	return SP_ADMIT;
}

static int tlfu_init(struct simpol *sp)
{
	uint32_t wbits = log2_ceil(sp->cap < 64 ? 64 : sp->cap), dbits;

	sp->qcap[Q_WINDOW] = max1(sp->cap / 100);
	sp->qcap[Q_PROTECTED] = (uint32_t)((uint64_t)(sp->cap - sp->qcap[Q_WINDOW]) * 8 / 10);
	sp->sample_max = 10ull * sp->cap;
	/* 8 doorkeeper bits a sampled access (words of 64): a few percent
	 * false positives even when every access of a sample is a new key */
	dbits = log2_ceil(sp->sample_max / 8 > 2 ? sp->sample_max / 8 : 2);	/* shift < 64 */
	sp->width_shift = 64 - wbits;
	sp->door_shift = 64 - dbits;
	sp->cms = calloc(((size_t)CMS_ROWS << wbits) / 16, sizeof(*sp->cms));
	sp->door = calloc((size_t)1 << dbits, sizeof(*sp->door));
	return sp->cms && sp->door ? 0 : -ENOMEM;
}

/* ------------------------------------------------------------------ */
/* The table and the interface                                         */
/* ------------------------------------------------------------------ */

static int lirs_init(struct simpol *sp)
{
	sp->qcap[Q_LIR] = sp->cap - max1(sp->cap / 100);
	sp->qcap[Q_NONRES] = 2 * sp->cap;
	sp->s = (struct dlist){ NIL, NIL, 0 };
	sp->snd = malloc(max1(sp->nkeys) * sizeof(*sp->snd));
	return sp->snd ? 0 : -ENOMEM;
}

static int twoq_init(struct simpol *sp)
{
	sp->qcap[Q_A1IN] = max1(sp->cap / 4);
	sp->qcap[Q_A1OUT] = max1(sp->cap / 2);
	return 0;
}

static int s3_init(struct simpol *sp)
{
	sp->qcap[Q_SMALL] = max1(sp->cap / 10);
	sp->qcap[Q_GHOST] = sp->cap;
	return 0;
}

static const struct simpol_ops {
	const char *name;
	int (*init)(struct simpol *sp);		/* NULL: nothing more */
	unsigned (*access)(struct simpol *sp, uint32_t key);	/* SP_* */
} ops[SIMPOL_COUNT] = {
	[SIMPOL_LRU] = { .name = "ref_lru", .access = lru_access },
	[SIMPOL_ARC] = { .name = "arc", .access = arc_access },
	[SIMPOL_LIRS] = { .name = "lirs", .init = lirs_init, .access = lirs_access },
	[SIMPOL_2Q] = { .name = "2q", .init = twoq_init, .access = twoq_access },
	[SIMPOL_S3FIFO] = { .name = "ref_s3fifo", .init = s3_init, .access = s3_access },
	[SIMPOL_WTINYLFU] = { .name = "wtinylfu", .init = tlfu_init, .access = tlfu_access },
};

const char *simpol_name(enum simpol_kind kind)
{
	return (unsigned)kind < SIMPOL_COUNT ? ops[kind].name : "?";
}

int simpol_parse(const char *name)
{
	for (int k = 0; k < SIMPOL_COUNT; k++)
		if (!strcmp(name, ops[k].name))
			return k;
	return -EINVAL;
}

void simpol_free(struct simpol *sp)
{
	if (!sp)
		return;
	free(sp->nd);
	free(sp->snd);
	free(sp->cms);
	free(sp->door);
	free(sp);
}

struct simpol *simpol_new(enum simpol_kind kind, uint32_t cap, uint32_t nkeys,
			  uint64_t hash_seed)
{
	struct simpol *sp;
	size_t nk = nkeys ? nkeys : 1;

	if ((unsigned)kind >= SIMPOL_COUNT)
		return NULL;
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return NULL;
	sp->kind = kind;
	sp->cap = cap;
	sp->nkeys = nkeys;
	sp->hseed = mix64(hash_seed);	/* 0 for 0 */
	for (int q = 0; q < Q_COUNT; q++)
		sp->q[q] = (struct dlist){ NIL, NIL, 0 };
	sp->nd = calloc(nk, sizeof(*sp->nd));
	if (!sp->nd ||
	    (cap && ops[kind].init && ops[kind].init(sp))) {
		simpol_free(sp);
		return NULL;
	}
	return sp;
}

bool simpol_access(struct simpol *sp, uint32_t key, bool *admitted)
{
	unsigned r = key < sp->nkeys && sp->cap ? ops[sp->kind].access(sp, key) : 0;

	if (admitted)
		*admitted = r & SP_ADMIT;
	return r & SP_HIT;
}

void simpol_drop(struct simpol *sp, uint32_t key)
{
	if (key >= sp->nkeys)
		return;
	if (sp->nd[key].where & S_BIT)
		s_drop(sp, key);	/* LIRS: off S, whose bottom stays LIR */
	q_unlink(sp, key);
	if (sp->kind == SIMPOL_LIRS)
		lirs_prune(sp);
}

bool simpol_holds(const struct simpol *sp, uint32_t key)
{
	return key < sp->nkeys && qinfo[qof(sp, key)].resident;
}

const char *simpol_where(const struct simpol *sp, uint32_t key)
{
	return key < sp->nkeys ? qinfo[qof(sp, key)].name : NULL;
}

uint32_t simpol_used(const struct simpol *sp)
{
	uint32_t n = 0;

	for (int q = 0; q < Q_COUNT; q++)
		if (qinfo[q].resident)
			n += sp->q[q].n;
	return n;
}
