/* test_policy: the SSD tier's eviction policies (src/cache/policy.c) against naive array models of LRU, S3-FIFO and W-TinyLFU on random operation sequences, plus properties (LRU keeps the most recent entry, S3-FIFO and W-TinyLFU resist scans, S3-FIFO keeps its ghost, W-TinyLFU's sketch counts as exact counts would and admits what was seen). */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/policy.h"
#include "unit.h"

/* ------------------------------------------------------------------ */
/* Reporting                                                           */
/* ------------------------------------------------------------------ */

enum { G_API, G_EDGE, G_VICTIM, G_LOOKED, G_COUNT_HOLDS, G_LRU_MRU, G_SCAN, G_GHOST,
       G_SCALE, G_WAITS, G_SKETCH, G_SEEN, G_BATCH, G_BAR, G_DEMOTE, G_NEXT, G_COUNT };

static struct unit_group groups[G_COUNT] = {
	[G_API] = { .name = "parse/name/new" },
	[G_EDGE] = { .name = "empty, max 0, nothing evictable" },
	[G_VICTIM] = { .name = "victim vs reference" },
	[G_LOOKED] = { .name = "entries looked at vs reference" },
	[G_COUNT_HOLDS] = { .name = "count/holds vs reference" },
	[G_LRU_MRU] = { .name = "lru: most recent kept while others evictable" },
	[G_SCAN] = { .name = "scan: s3fifo and wtinylfu keep hit entries, lru does not" },
	[G_GHOST] = { .name = "s3fifo ghost: small evictions only" },
	[G_SCALE] = { .name = "large cap" },
	[G_WAITS] = { .name = "s3fifo: an unused refused entry waits in small" },
	[G_SKETCH] = { .name = "wtinylfu sketch vs exact counts" },
	[G_SEEN] = { .name = "wtinylfu: a key seen on misses wins its duel" },
	[G_BATCH] = { .name = "wtinylfu: every entry of a batch duels" },
	[G_BAR] = { .name = "wtinylfu: the bar keeps main's hotter entries" },
	[G_DEMOTE] = { .name = "a demoted entry is the next victim of its queue" },
	[G_NEXT] = { .name = "next: eviction's order as the reference's queues stand" },
};

static uint64_t rng_state;

static uint64_t rnd(void)
{
	return unit_rnd(&rng_state);
}

static uint32_t rnd_below(uint32_t n)
{
	return (uint32_t)(rnd() % n);
}

/* ------------------------------------------------------------------ */
/* Reference models                                                    */
/*                                                                     */
/* LRU: a last-use time per slot; the victim scan takes the held slot  */
/* with the oldest time, and a refused one gets a new time.            */
/* S3-FIFO: small and main as arrays, oldest first, shifted by hand;   */
/* the ghost as the list of the last cap keys evicted from small, each */
/* with a flag cleared when an insert finds the key.  Victim scan:     */
/* small's oldest when small holds >= cap/10 (at least 1) or main is   */
/* empty, or when main's whole length was refused in a row, else      */
/* main's oldest.  Small: refused with freq 0 -> back to small's      */
/* newest end (after small's whole length refused so, main is taken    */
/* as if small were empty); freq > 0 -> to main; else evicted, key to  */
/* ghost.  Main: refused ->                                            */
/* back to main's newest end; freq > 0 -> freq-1 and back; else        */
/* evicted.  Stops after max looks, or when small is empty and main is */
/* empty or all refused in a row.                                      */
/* W-TinyLFU: window, probation and protected as arrays, oldest first  */
/* (wcap = max(1, cap/100), main cap - wcap, protected 80% of main),   */
/* and the count of victims not yet followed by inserts (pending).     */
/* The duels' estimates are asked of the policy under test (its        */
/* sketch; test_sketch checks it against exact counts): the queues are */
/* the model's own.                                                    */
/* ------------------------------------------------------------------ */

#define MAXCAP 1000

struct ref {
	enum tfs_policy_kind kind;
	uint32_t cap, small_cap;
	uint8_t held[MAXCAP];
	uint64_t t[MAXCAP], clock, low;	/* lru: demoted below low */
	uint64_t key[MAXCAP];
	uint8_t freq[MAXCAP];
	uint32_t sq[MAXCAP], ns, mq[MAXCAP], nm;	/* s3fifo, oldest first */
	uint64_t gk[MAXCAP];
	uint8_t galive[MAXCAP];
	uint32_t ng;
	uint32_t wq[MAXCAP], nw, bq[MAXCAP], nb, tq[MAXCAP], nt;	/* wtinylfu */
	uint32_t wcap, mcap, pcap, pending, bar;
	const struct tfs_policy *pol;	/* its estimates */
};

static void ref_init(struct ref *r, enum tfs_policy_kind kind, uint32_t cap)
{
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->cap = cap;
	r->small_cap = cap / 10 > 0 ? cap / 10 : 1;
	r->clock = r->low = 1ull << 40;
	r->wcap = cap / 100 > 0 ? cap / 100 : 1;
	r->mcap = cap > r->wcap ? cap - r->wcap : 0;
	r->pcap = r->mcap * 8 / 10;
}

static uint32_t ref_count(const struct ref *r)
{
	uint32_t n = 0;

	for (uint32_t s = 0; s < r->cap; s++)
		n += r->held[s];
	return n;
}

static void arr_del(uint32_t *a, uint32_t *n, uint32_t i)
{
	for (; i + 1 < *n; i++)
		a[i] = a[i + 1];
	(*n)--;
}

static void arr_remove_value(uint32_t *a, uint32_t *n, uint32_t v)
{
	for (uint32_t i = 0; i < *n; i++)
		if (a[i] == v) {
			arr_del(a, n, i);
			return;
		}
}

static int arr_has(const uint32_t *a, uint32_t n, uint32_t v)
{
	for (uint32_t i = 0; i < n; i++)
		if (a[i] == v)
			return 1;
	return 0;
}

/* wtinylfu: s (in probation or protected) becomes protected's newest;
 * protected's oldest goes to probation over pcap */
static void ref_protect(struct ref *r, uint32_t s)
{
	arr_remove_value(r->bq, &r->nb, s);
	arr_remove_value(r->tq, &r->nt, s);
	r->tq[r->nt++] = s;
	if (r->nt > r->pcap) {
		r->bq[r->nb++] = r->tq[0];
		arr_del(r->tq, &r->nt, 0);
	}
}

static uint32_t ref_est(const struct ref *r, uint32_t s)
{
	return tfs_policy_estimate(r->pol, r->key[s]);
}

static void ghost_push(struct ref *r, uint64_t key)
{
	if (r->ng == r->cap) {
		memmove(r->gk, r->gk + 1, (r->cap - 1) * sizeof(r->gk[0]));
		memmove(r->galive, r->galive + 1, r->cap - 1);
		r->ng--;
	}
	r->gk[r->ng] = key;
	r->galive[r->ng++] = 1;
}

static int ghost_take(struct ref *r, uint64_t key)
{
	int found = 0;

	for (uint32_t i = 0; i < r->ng; i++)
		if (r->gk[i] == key && r->galive[i]) {
			r->galive[i] = 0;
			found = 1;
		}
	return found;
}

static void ref_insert(struct ref *r, uint32_t s, uint64_t key)
{
	r->held[s] = 1;
	r->t[s] = ++r->clock;
	r->key[s] = key;
	r->freq[s] = 0;
	if (r->kind == TFS_POLICY_S3FIFO) {
		if (ghost_take(r, key))
			r->mq[r->nm++] = s;
		else
			r->sq[r->ns++] = s;
	}
	if (r->kind == TFS_POLICY_WTINYLFU) {
		r->wq[r->nw++] = s;
		r->bar = 0;
		if (r->pending) {
			r->pending--;
			return;
		}
		while (r->nw > r->wcap && r->nb + r->nt < r->mcap) {
			r->bq[r->nb++] = r->wq[0];
			arr_del(r->wq, &r->nw, 0);
		}
	}
}

static void ref_hit(struct ref *r, uint32_t s)
{
	r->t[s] = ++r->clock;
	if (r->freq[s] < 3)
		r->freq[s]++;
	if (r->kind != TFS_POLICY_WTINYLFU)
		return;
	if (arr_has(r->wq, r->nw, s)) {
		arr_remove_value(r->wq, &r->nw, s);
		r->wq[r->nw++] = s;
	} else {
		ref_protect(r, s);
	}
}

/* policy.c invariant 11 */
static void ref_demote(struct ref *r, uint32_t s)
{
	r->t[s] = --r->low;
	r->freq[s] = 0;
	if (arr_has(r->sq, r->ns, s)) {
		arr_remove_value(r->sq, &r->ns, s);
		memmove(r->sq + 1, r->sq, r->ns++ * sizeof(r->sq[0]));
		r->sq[0] = s;
	} else if (arr_has(r->mq, r->nm, s)) {
		arr_remove_value(r->mq, &r->nm, s);
		memmove(r->mq + 1, r->mq, r->nm++ * sizeof(r->mq[0]));
		r->mq[0] = s;
	} else if (arr_has(r->wq, r->nw, s)) {
		arr_remove_value(r->wq, &r->nw, s);
		memmove(r->wq + 1, r->wq, r->nw++ * sizeof(r->wq[0]));
		r->wq[0] = s;
	} else if (arr_has(r->bq, r->nb, s) || arr_has(r->tq, r->nt, s)) {
		arr_remove_value(r->bq, &r->nb, s);
		arr_remove_value(r->tq, &r->nt, s);
		memmove(r->bq + 1, r->bq, r->nb++ * sizeof(r->bq[0]));
		r->bq[0] = s;
	}
}

/* policy.c invariant 12: protected, oldest first, onto probation's
 * newest end, then the window's entries over wcap, oldest first */
static void ref_unprotect(struct ref *r)
{
	uint32_t over;

	if (r->kind != TFS_POLICY_WTINYLFU)
		return;
	memcpy(r->bq + r->nb, r->tq, r->nt * sizeof(r->tq[0]));
	r->nb += r->nt;
	r->nt = 0;
	over = r->nw > r->wcap ? r->nw - r->wcap : 0;
	memcpy(r->bq + r->nb, r->wq, over * sizeof(r->wq[0]));
	r->nb += over;
	memmove(r->wq, r->wq + over, (r->nw - over) * sizeof(r->wq[0]));
	r->nw -= over;
}

static void ref_remove(struct ref *r, uint32_t s)
{
	r->held[s] = 0;
	arr_remove_value(r->sq, &r->ns, s);
	arr_remove_value(r->mq, &r->nm, s);
	arr_remove_value(r->wq, &r->nw, s);
	arr_remove_value(r->bq, &r->nb, s);
	arr_remove_value(r->tq, &r->nt, s);
}

static uint32_t ref_victim_lru(struct ref *r, const uint8_t *pin, uint32_t max,
			       uint32_t *looked, uint32_t *nlooked)
{
	uint32_t n = ref_count(r);

	for (uint32_t i = 0; i < n && i < max; i++) {
		uint32_t best = UINT32_MAX;

		for (uint32_t s = 0; s < r->cap; s++)
			if (r->held[s] && (best == UINT32_MAX || r->t[s] < r->t[best]))
				best = s;
		looked[(*nlooked)++] = best;
		if (!pin[best]) {
			r->held[best] = 0;
			return best;
		}
		r->t[best] = ++r->clock;
	}
	return TFS_POLICY_NONE;
}

static uint32_t ref_victim_s3(struct ref *r, const uint8_t *pin, uint32_t max,
			      uint32_t *looked, uint32_t *nlooked)
{
	uint32_t stuck = 0, held = 0;

	for (uint32_t i = 0; i < max; i++) {
		int small_left = r->ns > 0 && held < r->ns;
		uint32_t s;

		if (!small_left && (r->nm == 0 || stuck >= r->nm))
			break;
		if (small_left && (r->ns >= r->small_cap || r->nm == 0 || stuck >= r->nm)) {
			s = r->sq[0];
			looked[(*nlooked)++] = s;
			arr_del(r->sq, &r->ns, 0);
			if (pin[s] && r->freq[s] == 0) {
				r->sq[r->ns++] = s;	/* waits in small */
				held++;
				continue;
			}
			if (r->freq[s] > 0) {
				r->mq[r->nm++] = s;
				continue;
			}
			r->held[s] = 0;
			ghost_push(r, r->key[s]);
			return s;
		}
		s = r->mq[0];
		looked[(*nlooked)++] = s;
		arr_del(r->mq, &r->nm, 0);
		if (pin[s]) {
			stuck++;
		} else if (r->freq[s] == 0) {
			r->held[s] = 0;
			return s;
		} else {
			r->freq[s]--;
			stuck = 0;
		}
		r->mq[r->nm++] = s;
	}
	return TFS_POLICY_NONE;
}

/* W-TinyLFU.  The candidate is the window's oldest while the window
 * holds, with the inserts still to come (pending), at least wcap and has
 * an entry not sent back in this call.  It enters probation without a
 * duel when main is under its cap and a slot is free that no victim was
 * chosen for; else it duels main's oldest (probation's, else
 * protected's), losing ties, and the loser is looked at; with main all
 * refused in this call it is looked at itself.  Without a candidate,
 * main's oldest is looked at, or the window's with main all refused.
 * Refused: a window entry goes back to the window's newest end, a main
 * entry to protected's newest end.  A candidate that lost (evicted or
 * refused) raises the bar to its estimate + 1: without a candidate, a
 * main oldest rating at the bar or above is passed over (a look without
 * ok(), to protected's newest end); when main is all passed over or
 * refused with the bar up, the bar drops and main is gone round again.
 * The bar holds from call to call until an insert (a batch's victims). */
static uint32_t ref_victim_tlfu(struct ref *r, const uint8_t *pin, uint32_t max,
				uint32_t *looked, uint32_t *nlooked)
{
	uint32_t stuck = 0, held = 0;

	for (uint32_t i = 0; i < max;) {
		uint32_t nmain = r->nb + r->nt, c = UINT32_MAX, s;
		int win = r->nw > held, main_left = nmain > stuck;

		if (!main_left && r->bar) {
			r->bar = 0;
			stuck = 0;
			main_left = nmain > 0;
		}
		if (!win && !main_left)
			break;
		if (win && r->nw + r->pending >= r->wcap) {
			c = r->wq[0];
			if (nmain < r->mcap && ref_count(r) + r->pending < r->cap) {
				arr_del(r->wq, &r->nw, 0);
				r->bq[r->nb++] = c;
				continue;
			}
		}
		if (!main_left)
			s = r->wq[0];
		else if (c != UINT32_MAX && ref_est(r, c) <= ref_est(r, r->nb ? r->bq[0] : r->tq[0]))
			s = c;
		else
			s = r->nb ? r->bq[0] : r->tq[0];
		if (s == c && main_left && ref_est(r, c) + 1 > r->bar)
			r->bar = ref_est(r, c) + 1;
		if (c == UINT32_MAX && main_left && r->bar && ref_est(r, s) >= r->bar) {
			i++;
			ref_protect(r, s);
			stuck++;
			continue;
		}
		i++;
		looked[(*nlooked)++] = s;
		if (!pin[s]) {
			ref_remove(r, s);
			if (c != UINT32_MAX && c != s) {
				arr_remove_value(r->wq, &r->nw, c);
				r->bq[r->nb++] = c;
			}
			r->pending++;
			return s;
		}
		if (arr_has(r->wq, r->nw, s)) {
			arr_remove_value(r->wq, &r->nw, s);
			r->wq[r->nw++] = s;
			held++;
		} else {
			ref_protect(r, s);
			stuck++;
		}
	}
	return TFS_POLICY_NONE;
}

static uint32_t ref_victim(struct ref *r, const uint8_t *pin, uint32_t max,
			   uint32_t *looked, uint32_t *nlooked)
{
	*nlooked = 0;
	if (r->kind == TFS_POLICY_LRU)
		return ref_victim_lru(r, pin, max, looked, nlooked);
	if (r->kind == TFS_POLICY_WTINYLFU)
		return ref_victim_tlfu(r, pin, max, looked, nlooked);
	return ref_victim_s3(r, pin, max, looked, nlooked);
}

/* ok() for the policy: refuses pinned slots, logs the slots asked about. */
struct okarg {
	const uint8_t *pin;
	uint32_t *log, n, lim;
	int bad;		/* asked about a slot not held, or too often */
	const struct tfs_policy *p;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* policy.c invariant 13: up to n slots in the order eviction looks at
 * them, from the reference's queues (oldest first) */
static uint32_t ref_next(const struct ref *r, uint32_t *out, uint32_t n)
{
	uint32_t have = 0, over;

	if (r->kind == TFS_POLICY_LRU) {	/* the held, oldest (lowest t) first */
		static uint64_t ts[MAXCAP];	/* t << 16 | slot: t unique, slot < 2^16 */
		uint32_t nh = 0;

		for (uint32_t s = 0; s < r->cap; s++)
			if (r->held[s])
				ts[nh++] = r->t[s] << 16 | s;
		qsort(ts, nh, sizeof(ts[0]), cmp_u64);
		for (; have < n && have < nh; have++)
			out[have] = (uint32_t)(ts[have] & 0xffff);
		return have;
	}
	if (r->kind == TFS_POLICY_S3FIFO) {
		for (uint32_t i = 0; i < r->ns && have < n / 2; i++)
			out[have++] = r->sq[i];
		for (uint32_t i = 0; i < r->nm && have < n; i++)
			out[have++] = r->mq[i];
		return have;
	}
	over = r->nw + r->pending + 1 > r->wcap ? r->nw + r->pending + 1 - r->wcap : 0;
	for (uint32_t i = 0; i < r->nw && i < over && have < n / 2; i++)
		out[have++] = r->wq[i];
	for (uint32_t i = 0; i < r->nb && have < n; i++)
		out[have++] = r->bq[i];
	for (uint32_t i = 0; i < r->nt && have < n; i++)
		out[have++] = r->tq[i];
	return have;
}

static bool ok_pin(void *arg, uint32_t slot)
{
	struct okarg *a = arg;

	if (!tfs_policy_holds(a->p, slot) || a->n >= a->lim) {
		a->bad = 1;
		return false;
	}
	a->log[a->n++] = slot;
	return !a->pin || !a->pin[slot];
}

static bool ok_all(void *arg, uint32_t slot)
{
	(void)arg;
	(void)slot;
	return true;
}

static bool ok_none(void *arg, uint32_t slot)
{
	(*(uint32_t *)arg)++;
	(void)slot;
	return false;
}

/* ------------------------------------------------------------------ */
/* Random sequences against the reference                              */
/* ------------------------------------------------------------------ */

#define LOGMAX (8 * MAXCAP + 64)

static struct ref R;
static uint32_t log_ref[LOGMAX], log_pol[LOGMAX];
static uint32_t next_ref[MAXCAP + 3], next_pol[MAXCAP + 3];

/* Keys are drawn from 3*cap+3 values, half the time from a tenth of
 * them, so that evicted keys come back while the ghost remembers them
 * and after it forgot them. */
static uint64_t pick_key(uint32_t cap, const struct ref *r)
{
	uint32_t range = 3 * cap + 3;

	for (;;) {
		uint64_t k = rnd() & 1 ? rnd_below(range / 10 + 1) : rnd_below(range);
		uint32_t s;

		for (s = 0; s < cap; s++)
			if (r->held[s] && r->key[s] == k)
				break;
		if (s == cap)
			return k * 0x100000001b3ull + 7;	/* any u64 */
	}
}

/* A slot the reference holds (at least one must be), drawn at random. */
static uint32_t pick_held(uint32_t cap)
{
	uint32_t s;

	do
		s = rnd_below(cap);
	while (!R.held[s]);
	return s;
}

static void test_random(enum tfs_policy_kind kind, uint32_t cap, uint64_t seed, uint32_t ops)
{
	static const double pin_p[] = { 0, 0, 0.1, 0.5, 0.9, 1.0 };
	struct tfs_policy *p = tfs_policy_new(kind, cap, 0);
	uint8_t pin[MAXCAP];
	uint32_t mru = UINT32_MAX;
	uint32_t nfail_before = groups[G_VICTIM].fail + groups[G_LOOKED].fail +
				groups[G_COUNT_HOLDS].fail;

	rng_state = seed;
	ref_init(&R, kind, cap);
	R.pol = p;
	snprintf(ctx, sizeof(ctx), "%s cap=%u seed=%" PRIu64, tfs_policy_name(kind), cap, seed);
	if (!p) {
		unit_fail(&groups[G_API], "tfs_policy_new failed");
		return;
	}
	for (uint32_t op = 0; op < ops; op++) {
		uint32_t n = ref_count(&R), r = rnd_below(100), s;

		snprintf(ctx, sizeof(ctx), "%s cap=%u seed=%" PRIu64 " op=%u",
			 tfs_policy_name(kind), cap, seed, op);
		if (n < cap && (r < 45 || n == 0)) {	/* insert into a free slot */
			uint64_t key = pick_key(cap, &R);

			do
				s = rnd_below(cap);
			while (R.held[s]);
			tfs_policy_insert(p, s, key);
			ref_insert(&R, s, key);
			mru = s;
		} else if (r < 60 && kind == TFS_POLICY_WTINYLFU) {	/* a miss seen */
			uint32_t range = 3 * cap + 3;
			uint64_t k = rnd() & 1 ? rnd_below(range / 10 + 1) : rnd_below(range);

			tfs_policy_seen(p, k * 0x100000001b3ull + 7);
		} else if (r < 75) {			/* hit a held slot */
			s = pick_held(cap);
			tfs_policy_hit(p, s);
			ref_hit(&R, s);
			mru = s;
		} else if (r < 77) {			/* demote a held slot */
			s = pick_held(cap);
			tfs_policy_demote(p, s);
			ref_demote(&R, s);
			if (s == mru)
				mru = UINT32_MAX;
		} else if (r < 78) {			/* reclaim turned on */
			tfs_policy_unprotect(p);
			ref_unprotect(&R);
		} else if (r < 80) {			/* invalidate */
			s = pick_held(cap);
			tfs_policy_remove(p, s);
			ref_remove(&R, s);
			if (s == mru)
				mru = UINT32_MAX;
		} else {				/* victim */
			const uint32_t maxes[] = { 1, 2, 5, cap, 2 * cap + 1, UINT32_MAX };
			uint32_t max = maxes[rnd_below(6)], nref = 0, v, vr;
			double pp = pin_p[rnd_below(6)];
			struct okarg a = { pin, log_pol, 0, LOGMAX, 0, p };
			int other_ok = 0;

			for (s = 0; s < cap; s++) {
				pin[s] = (double)(rnd() >> 11) / 9007199254740992.0 < pp;
				other_ok |= R.held[s] && !pin[s] && s != mru;
			}
			/* what eviction looks at next, asked first: the victim
			 * that follows shows the asking moved nothing */
			uint32_t want = rnd_below(cap + 3), got = tfs_policy_next(p, next_pol, want);
			uint32_t gotr = ref_next(&R, next_ref, want);

			CHECK(G_NEXT, got == gotr && memcmp(next_pol, next_ref, got * sizeof(next_ref[0])) == 0,
			      "next(%u): %u slots, reference %u (first %u, reference %u)", want, got, gotr,
			      got ? next_pol[0] : UINT32_MAX, gotr ? next_ref[0] : UINT32_MAX);
			v = tfs_policy_victim(p, ok_pin, &a, max);
			vr = ref_victim(&R, pin, max, log_ref, &nref);
			if (kind == TFS_POLICY_LRU && pp == 0 && got)
				CHECK(G_NEXT, v == next_pol[0], "lru: victim %u, next said %u", v, next_pol[0]);
			CHECK(G_VICTIM, v == vr, "victim %u, reference %u (max %u, pin %.1f)",
			      v, vr, max, pp);
			CHECK(G_LOOKED, !a.bad && a.n == nref &&
			      memcmp(log_pol, log_ref, nref * sizeof(log_ref[0])) == 0,
			      "looked at %u entries%s, reference %u (max %u)", a.n,
			      a.bad ? " (or an empty slot)" : "", nref, max);
			CHECK(G_LOOKED, a.n <= max, "looked at %u > max %u", a.n, max);
			if (v != TFS_POLICY_NONE)
				CHECK(G_VICTIM, v < cap && !pin[v] && !tfs_policy_holds(p, v),
				      "victim %u pinned or still held", v);
			if (kind == TFS_POLICY_LRU && mru != UINT32_MAX && max >= n)
				CHECK(G_LRU_MRU, other_ok ? v != mru && v != TFS_POLICY_NONE : 1,
				      "victim %u is the most recent entry", v);
			if (v == mru)
				mru = UINT32_MAX;
			/* a refused entry counts as used (moved to the head) */
			for (uint32_t i = 0; i < a.n && !a.bad; i++)
				if (pin[log_pol[i]])
					mru = log_pol[i];
		}
		CHECK(G_COUNT_HOLDS, tfs_policy_count(p) == ref_count(&R),
		      "count %u, reference %u", tfs_policy_count(p), ref_count(&R));
		if (cap <= 100 || op % 64 == 0)
			for (s = 0; s < cap + 2; s++)
				CHECK(G_COUNT_HOLDS, tfs_policy_holds(p, s) == (s < cap && R.held[s]),
				      "holds(%u) %d", s, tfs_policy_holds(p, s));
		/* one divergence makes every later check fail: stop here */
		if (groups[G_VICTIM].fail + groups[G_LOOKED].fail +
		    groups[G_COUNT_HOLDS].fail != nfail_before)
			break;
	}
	tfs_policy_free(p);
}

/* ------------------------------------------------------------------ */
/* Properties                                                          */
/* ------------------------------------------------------------------ */

/* Fill the cache with cap keys (all in small), hit h of them, then scan
 * 3*cap new keys (each seen as a miss, then victim, insert the next one
 * into the freed slot).
 * S3-FIFO: while main holds no more than cap - small_cap entries, small
 * never drops below small_cap, so every eviction comes from small: the h
 * hit entries move to main and all survive, every other old entry goes.
 * W-TinyLFU: the fill leaves the first cap - wcap keys in main; h = half
 * of them are hit 3 times (estimate 3).  A scan key, seen once
 * (estimate 1), beats an entry never hit (0) and loses to a hit one (and
 * ties with an earlier scan key): the hit entries all stay, the others
 * all go.
 * LRU keeps only the last cap keys of the scan. */
static void test_scan(enum tfs_policy_kind kind, uint32_t cap)
{
	struct tfs_policy *p = tfs_policy_new(kind, cap, 0);
	uint32_t small_cap = cap / 10 ? cap / 10 : 1, h = cap - small_cap, among = cap;
	uint8_t hit[MAXCAP] = { 0 }, orig[MAXCAP];
	uint32_t kept_hit = 0, kept_other = 0;
	uint64_t next_key = 1ull << 40;

	if (kind == TFS_POLICY_WTINYLFU) {
		among = cap - (cap / 100 ? cap / 100 : 1);
		h = among / 2;
	}

	snprintf(ctx, sizeof(ctx), "scan %s cap=%u hit=%u", tfs_policy_name(kind), cap, h);
	rng_state = cap;
	for (uint32_t s = 0; s < cap; s++) {
		tfs_policy_insert(p, s, s);
		orig[s] = 1;
	}
	for (uint32_t i = 0; i < h;) {
		uint32_t s = rnd_below(among);

		if (!hit[s]) {
			hit[s] = 1;
			i++;
		}
	}
	for (uint32_t round = 0; round < 3; round++)
		for (uint32_t s = 0; s < cap; s++)
			if (hit[s] && (kind == TFS_POLICY_WTINYLFU || rnd_below(3) >= round))
				tfs_policy_hit(p, s);
	for (uint32_t i = 0; i < 3 * cap; i++) {
		uint32_t v;

		tfs_policy_seen(p, next_key);	/* the miss */
		v = tfs_policy_victim(p, ok_all, NULL, UINT32_MAX);

		if (v >= cap) {
			unit_fail(&groups[G_SCAN], "no victim at scan step %u", i);
			break;
		}
		orig[v] = 0;
		tfs_policy_insert(p, v, next_key++);
	}
	for (uint32_t s = 0; s < cap; s++) {
		kept_hit += hit[s] && orig[s];
		kept_other += !hit[s] && orig[s];
	}
	if (kind != TFS_POLICY_LRU)
		CHECK(G_SCAN, kept_hit == h && kept_other == 0,
		      "kept %u of %u hit entries, %u others", kept_hit, h, kept_other);
	else
		CHECK(G_SCAN, kept_hit == 0 && kept_other == 0,
		      "kept %u hit entries, %u others", kept_hit, kept_other);
	CHECK(G_SCAN, tfs_policy_count(p) == cap, "count %u", tfs_policy_count(p));
	tfs_policy_free(p);
}

/* cap 10 (small_cap 1).  Key 0 is evicted from small (goes to the ghost)
 * or from main (does not): re-inserted, it lands in main or in small.
 * Then 9 new keys fill small behind it: if key 0 is in small it is the
 * next victim, else the oldest of the 9 is. */
static void test_ghost(int from_main)
{
	struct tfs_policy *p = tfs_policy_new(TFS_POLICY_S3FIFO, 10, 0);
	uint32_t v;

	snprintf(ctx, sizeof(ctx), "ghost, key evicted from %s", from_main ? "main" : "small");
	for (uint32_t s = 0; s < 10; s++)
		tfs_policy_insert(p, s, 100 + s);
	v = tfs_policy_victim(p, ok_all, NULL, UINT32_MAX);
	CHECK(G_GHOST, v == 0, "first victim %u, expected slot 0", v);
	tfs_policy_insert(p, 0, 100);		/* found in the ghost: to main */
	if (from_main) {
		for (uint32_t s = 1; s < 10; s++)
			tfs_policy_remove(p, s);
		v = tfs_policy_victim(p, ok_all, NULL, UINT32_MAX);
		CHECK(G_GHOST, v == 0 && tfs_policy_count(p) == 0, "main victim %u", v);
		tfs_policy_insert(p, 0, 100);	/* not in the ghost: to small */
		for (uint32_t s = 1; s < 10; s++)
			tfs_policy_insert(p, s, 200 + s);
	}
	v = tfs_policy_victim(p, ok_all, NULL, UINT32_MAX);
	CHECK(G_GHOST, from_main ? v == 0 : v == 1, "victim %u, expected %u", v,
	      from_main ? 0 : 1);
	tfs_policy_free(p);
}

/* Ghost capacity: key 1000 is evicted from small, then n other keys; it
 * comes back into main while the ghost remembers it (n < cap), into small
 * once n >= cap.  Then cap rounds of evicting and inserting new keys: from
 * main it is never the victim (small keeps >= small_cap entries); in
 * small it is the newest, so the cap-th victim. */
static void test_ghost_cap(uint32_t cap, uint32_t n)
{
	struct tfs_policy *p = tfs_policy_new(TFS_POLICY_S3FIFO, cap, 0);
	uint64_t key = 1000;
	uint32_t v, s0, when = 0;

	snprintf(ctx, sizeof(ctx), "ghost cap=%u, %u evictions after", cap, n);
	for (uint32_t s = 0; s < cap; s++)
		tfs_policy_insert(p, s, key++);
	s0 = tfs_policy_victim(p, ok_all, NULL, UINT32_MAX);	/* key 1000 */
	for (uint32_t i = 0; i < n; i++) {
		v = tfs_policy_victim(p, ok_all, NULL, UINT32_MAX);
		tfs_policy_insert(p, v, key++);
	}
	tfs_policy_insert(p, s0, 1000);
	for (uint32_t i = 1; i <= cap; i++) {
		v = tfs_policy_victim(p, ok_all, NULL, UINT32_MAX);
		if (v == s0 && !when)
			when = i;
		tfs_policy_insert(p, v, key++);
	}
	CHECK(G_GHOST, when == (n < cap ? 0 : cap), "key 1000 evicted in round %u of %u",
	      when, cap);
	tfs_policy_free(p);
}

static void test_api(void)
{
	enum tfs_policy_kind k;
	struct tfs_policy *p;
	uint32_t calls = 0;

	snprintf(ctx, sizeof(ctx), "api");
	CHECK(G_API, tfs_policy_parse("lru", &k) == 0 && k == TFS_POLICY_LRU, "parse lru");
	CHECK(G_API, tfs_policy_parse("S3FIFO", &k) == 0 && k == TFS_POLICY_S3FIFO, "parse S3FIFO");
	CHECK(G_API, tfs_policy_parse("s3-fifo", &k) == -EINVAL, "parse s3-fifo");
	CHECK(G_API, tfs_policy_parse("", &k) == -EINVAL, "parse empty");
	CHECK(G_API, strcmp(tfs_policy_name(TFS_POLICY_LRU), "lru") == 0, "name lru");
	CHECK(G_API, strcmp(tfs_policy_name(TFS_POLICY_S3FIFO), "s3fifo") == 0, "name s3fifo");
	CHECK(G_API, tfs_policy_parse("WTinyLFU", &k) == 0 && k == TFS_POLICY_WTINYLFU,
	      "parse WTinyLFU");
	CHECK(G_API, strcmp(tfs_policy_name(TFS_POLICY_WTINYLFU), "wtinylfu") == 0,
	      "name wtinylfu");
	CHECK(G_API, strcmp(tfs_policy_name((enum tfs_policy_kind)7), "?") == 0, "name 7");
	tfs_policy_free(NULL);
	/* bytes: 18 a slot for the lists, plus S3-FIFO's ghost (a key a slot,
	 * a table of at least 2 x cap entries of 16) or W-TinyLFU's sketch
	 * (2 bytes a slot of counters; a doorkeeper of 8 bits for each of the
	 * 10 x cap accesses of a sample, in a power of two of words) */
	for (int kind = 0; kind < TFS_POLICY_COUNT; kind++) {
		uint64_t lo = 18ull * 4096, hi = lo + 4096;

		p = tfs_policy_new((enum tfs_policy_kind)kind, 4096, 0);
		if (kind == TFS_POLICY_S3FIFO)
			lo += 4096 * (8 + 32), hi += 4096 * (8 + 64);
		if (kind == TFS_POLICY_WTINYLFU)
			lo += 4096 * (2 + 10), hi += 4096 * (2 + 20);
		CHECK(G_API, p && tfs_policy_bytes(p) >= lo && tfs_policy_bytes(p) <= hi,
		      "%s bytes %" PRIu64 ", want %" PRIu64 "-%" PRIu64,
		      tfs_policy_name((enum tfs_policy_kind)kind), p ? tfs_policy_bytes(p) : 0, lo, hi);
		tfs_policy_free(p);
	}

	for (int kind = 0; kind < TFS_POLICY_COUNT; kind++) {
		snprintf(ctx, sizeof(ctx), "edge %s", tfs_policy_name((enum tfs_policy_kind)kind));
		calls = 0;
		p = tfs_policy_new((enum tfs_policy_kind)kind, 0, 0);
		CHECK(G_EDGE, p && tfs_policy_count(p) == 0, "cap 0");
		if (p) {
			tfs_policy_insert(p, 0, 1);
			CHECK(G_EDGE, tfs_policy_count(p) == 0 && !tfs_policy_holds(p, 0),
			      "cap 0 insert");
			CHECK(G_EDGE, tfs_policy_victim(p, ok_all, NULL, 10) == TFS_POLICY_NONE,
			      "cap 0 victim");
			tfs_policy_free(p);
		}
		p = tfs_policy_new((enum tfs_policy_kind)kind, 5, 0);
		CHECK(G_EDGE, tfs_policy_victim(p, ok_all, NULL, UINT32_MAX) == TFS_POLICY_NONE,
		      "victim of empty");
		for (uint32_t s = 0; s < 5; s++)
			tfs_policy_insert(p, s, s);
		tfs_policy_insert(p, 2, 99);	/* held: ignored */
		tfs_policy_insert(p, 5, 99);	/* out of range: ignored */
		tfs_policy_hit(p, 7);
		tfs_policy_remove(p, 7);
		CHECK(G_EDGE, tfs_policy_count(p) == 5 && !tfs_policy_holds(p, 5), "contract breaches");
		CHECK(G_EDGE, tfs_policy_victim(p, ok_none, &calls, 0) == TFS_POLICY_NONE &&
		      calls == 0, "max 0: %u calls", calls);
		CHECK(G_EDGE, tfs_policy_victim(p, ok_none, &calls, UINT32_MAX) == TFS_POLICY_NONE &&
		      calls >= 5 && calls <= 10 && tfs_policy_count(p) == 5,
		      "nothing evictable: %u calls, count %u", calls, tfs_policy_count(p));
		calls = 0;
		CHECK(G_EDGE, tfs_policy_victim(p, ok_none, &calls, 3) == TFS_POLICY_NONE &&
		      calls == 3, "max 3: %u calls", calls);
		for (uint32_t i = 0; i < 5; i++)
			CHECK(G_EDGE, tfs_policy_victim(p, ok_all, NULL, UINT32_MAX) != TFS_POLICY_NONE,
			      "drain %u", i);
		CHECK(G_EDGE, tfs_policy_count(p) == 0, "drained: count %u", tfs_policy_count(p));
		tfs_policy_free(p);
	}
}

/* A million slots, three million evictions: O(1) or this takes minutes. */
static void test_scale(enum tfs_policy_kind kind)
{
	const uint32_t cap = 1u << 20;
	struct tfs_policy *p = tfs_policy_new(kind, cap, 0);
	uint64_t key = 0;

	snprintf(ctx, sizeof(ctx), "scale %s", tfs_policy_name(kind));
	rng_state = 42;
	for (uint32_t s = 0; s < cap; s++)
		tfs_policy_insert(p, s, key++);
	for (uint32_t i = 0; i < 3 * cap; i++) {
		uint32_t v;

		tfs_policy_hit(p, rnd_below(cap));
		v = tfs_policy_victim(p, ok_all, NULL, UINT32_MAX);
		if (v >= cap) {
			unit_fail(&groups[G_SCALE], "no victim at %u", i);
			break;
		}
		/* keys come back, so the ghost sends some to main */
		tfs_policy_insert(p, v, rnd() & 1 ? key++ : rnd_below((uint32_t)key));
	}
	CHECK(G_SCALE, tfs_policy_count(p) == cap, "count %u", tfs_policy_count(p));
	tfs_policy_free(p);
}

/* ok() refusing one slot (a dirty extent) */
static bool ok_but(void *arg, uint32_t slot)
{
	return slot != *(uint32_t *)arg;
}

/* S3-FIFO, cap 10 (small holds 1): slot 0 never used and not evictable
 * (dirty), slots 1-9 used once.  The first eviction takes a main entry and
 * leaves 0 in small; once 0 may go, it is the next victim -- it never
 * earned a place in main.  (It used to be moved to main as if used, and
 * outlived the used entries.) */
static void test_waits(void)
{
	struct tfs_policy *p = tfs_policy_new(TFS_POLICY_S3FIFO, 10, 0);
	uint32_t dirty = 0, v;

	snprintf(ctx, sizeof(ctx), "cap 10");
	for (uint32_t s = 0; s < 10; s++)
		tfs_policy_insert(p, s, 100 + s);
	for (uint32_t s = 1; s < 10; s++)
		tfs_policy_hit(p, s);
	v = tfs_policy_victim(p, ok_but, &dirty, 100);
	CHECK(G_WAITS, v != TFS_POLICY_NONE && v != 0, "first victim %u", v);
	tfs_policy_insert(p, v, 200);
	tfs_policy_hit(p, v);
	dirty = UINT32_MAX;		/* 0 is clean now */
	v = tfs_policy_victim(p, ok_but, &dirty, 100);
	CHECK(G_WAITS, v == 0, "second victim %u, not the unused slot 0", v);
	tfs_policy_free(p);
}

/* ------------------------------------------------------------------ */
/* W-TinyLFU                                                           */
/* ------------------------------------------------------------------ */

#define SK_KEYS 2000

/* The sketch against exact counts kept per key (a doorkeeper flag and a
 * 4-bit counter, the same halving after 10 x cap samples): a count-min
 * sketch never estimates below them, and with a few keys in a wide
 * sketch (no collisions) it equals them -- halving included. */
static void test_sketch(uint32_t cap, uint32_t nkeys, int exact)
{
	struct tfs_policy *p = tfs_policy_new(TFS_POLICY_WTINYLFU, cap, 0);
	static uint8_t door[SK_KEYS], cnt[SK_KEYS];
	uint64_t samples = 0, smax = 10ull * cap;
	uint32_t steps = 30 * cap + 300, every = nkeys > 100 ? 97 : 1, bad = 0, checked = 0;

	snprintf(ctx, sizeof(ctx), "sketch cap=%u keys=%u", cap, nkeys);
	memset(door, 0, sizeof(door));
	memset(cnt, 0, sizeof(cnt));
	rng_state = cap * 7 + nkeys;
	for (uint32_t i = 0; i < steps; i++) {
		uint32_t k = rnd() & 1 ? rnd_below(nkeys / 10 + 1) : rnd_below(nkeys);

		if (rnd() & 1) {
			tfs_policy_seen(p, k * 0x9e3779b1ull);
		} else {	/* a hit counts the same */
			uint32_t s = rnd_below(cap);

			tfs_policy_remove(p, s);
			tfs_policy_insert(p, s, k * 0x9e3779b1ull);
			tfs_policy_hit(p, s);
		}
		if (!door[k])
			door[k] = 1;
		else if (cnt[k] < 15)
			cnt[k]++;
		if (++samples >= smax) {
			for (uint32_t j = 0; j < nkeys; j++) {
				cnt[j] >>= 1;
				door[j] = 0;
			}
			samples /= 2;
		}
		if (i % every)
			continue;
		for (uint32_t j = 0; j < nkeys; j++) {
			uint32_t e = tfs_policy_estimate(p, j * 0x9e3779b1ull), want = cnt[j] + door[j];

			checked++;
			if (exact ? e != want : e < want) {
				CHECK(G_SKETCH, 0, "step %u key %u: estimate %u, exact %u", i, j, e, want);
				bad = 1;
				break;
			}
		}
		if (bad)
			break;
	}
	CHECK(G_SKETCH, !bad && checked >= steps / every, "%u estimates checked", checked);
	tfs_policy_free(p);
}

/* cap 100 (window 1): every main entry hit once (estimate 1); the
 * window's entry loses its duel (estimate 0) and key K takes its slot,
 * to duel probation's oldest next.  K seen on fewer than 2 misses before
 * loses (a tie, or below), seen twice it wins: main's oldest goes and K
 * stays. */
static void test_seen(unsigned times)
{
	struct tfs_policy *p = tfs_policy_new(TFS_POLICY_WTINYLFU, 100, 0);
	const uint64_t K = 777777;
	uint32_t v;

	snprintf(ctx, sizeof(ctx), "K seen %u times", times);
	for (uint32_t s = 0; s < 100; s++)
		tfs_policy_insert(p, s, 1000 + s);
	for (uint32_t s = 0; s < 99; s++)
		tfs_policy_hit(p, s);
	v = tfs_policy_victim(p, ok_all, NULL, UINT32_MAX);
	CHECK(G_SEEN, v == 99, "first victim %u, not the window's slot 99", v);
	for (unsigned i = 0; i < times; i++)
		tfs_policy_seen(p, K);
	tfs_policy_seen(p, 1000 + 99);	/* a key not held: no effect on K */
	tfs_policy_insert(p, 99, K);
	CHECK(G_SEEN, tfs_policy_estimate(p, K) == times, "estimate %u", tfs_policy_estimate(p, K));
	v = tfs_policy_victim(p, ok_all, NULL, UINT32_MAX);
	if (times >= 2)
		CHECK(G_SEEN, v != 99 && v < 99 && tfs_policy_holds(p, 99),
		      "victim %u: K (slot 99) did not win its duel", v);
	else
		CHECK(G_SEEN, v == 99, "victim %u: K (slot 99) won its duel", v);
	tfs_policy_free(p);
}

/* The tier evicts a batch, then inserts into the freed slots
 * (index.c evict_some).  cap 100 (window 1), batches of 12, main's 99
 * entries each hit twice (estimate 2), the new keys never seen.  The
 * first batch has one candidate (the window's entry) and takes 11 of
 * main's; from then on the 12 new entries of the window duel, lose and
 * go: 88 hot entries stay through 20 batches.  (With the window judged
 * without the inserts to come, main's room left by the first batch
 * would take the next batch's new keys without a duel.) */
static void test_batch(void)
{
	struct tfs_policy *p = tfs_policy_new(TFS_POLICY_WTINYLFU, 100, 0);
	uint8_t orig[100];
	uint32_t vict[12], kept = 0;
	uint64_t key = 5000;

	snprintf(ctx, sizeof(ctx), "cap 100, batches of 12");
	for (uint32_t s = 0; s < 100; s++) {
		tfs_policy_insert(p, s, 1000 + s);
		orig[s] = s < 99;
	}
	for (uint32_t round = 0; round < 2; round++)
		for (uint32_t s = 0; s < 99; s++)
			tfs_policy_hit(p, s);
	for (uint32_t b = 0; b < 20; b++) {
		for (uint32_t i = 0; i < 12; i++) {
			vict[i] = tfs_policy_victim(p, ok_all, NULL, UINT32_MAX);
			if (vict[i] >= 100) {
				unit_fail(&groups[G_BATCH], "no victim in batch %u", b);
				tfs_policy_free(p);
				return;
			}
			orig[vict[i]] = 0;
		}
		for (uint32_t i = 0; i < 12; i++)
			tfs_policy_insert(p, vict[i], key++);
	}
	for (uint32_t s = 0; s < 100; s++)
		kept += orig[s];
	CHECK(G_BATCH, kept == 88 && tfs_policy_count(p) == 100, "kept %u hot entries, count %u",
	      kept, tfs_policy_count(p));
	tfs_policy_free(p);
}

/* cap n (window 1, the last slot; main's oldest is slot 0): the window's
 * entry rates 0 and is dirty (refused); main's entries rate 2 (seen
 * twice) from slot 0 up to slot hot-1, 0 after.  The victim is the first
 * cold main entry, not slot 0 -- or, with all of main hot, main's oldest
 * anyway (the bar drops after a round): never NONE.  batch: the window's
 * entry is clean, so it is the first victim, and the second one (no
 * insert between: a batch) is taken as above. */
static void test_bar(uint32_t n, uint32_t hot, int batch)
{
	struct tfs_policy *p = tfs_policy_new(TFS_POLICY_WTINYLFU, n, 0);
	uint32_t dirty = n - 1, v;

	snprintf(ctx, sizeof(ctx), "cap %u, %u hot%s", n, hot, batch ? ", a batch" : "");
	for (uint32_t s = 0; s < n; s++)
		tfs_policy_insert(p, s, 100 + s);
	for (uint32_t s = 0; s < hot; s++) {
		tfs_policy_seen(p, 100 + s);
		tfs_policy_seen(p, 100 + s);
	}
	if (batch) {
		dirty = UINT32_MAX;
		v = tfs_policy_victim(p, ok_but, &dirty, UINT32_MAX);
		CHECK(G_BAR, v == n - 1, "first victim %u, not the window's", v);
	}
	v = tfs_policy_victim(p, ok_but, &dirty, UINT32_MAX);
	if (hot < n - 1)
		CHECK(G_BAR, v == hot, "victim %u, not the first cold main entry %u", v, hot);
	else
		CHECK(G_BAR, v != TFS_POLICY_NONE && v != dirty, "victim %u", v);
	CHECK(G_BAR, batch || tfs_policy_holds(p, dirty), "the dirty slot was evicted");
	tfs_policy_free(p);
}

/* A full cache of cap entries, half of them hit twice; each in turn is
 * demoted and must be the next victim: LRU's, S3-FIFO's (from small or
 * main, its frequency gone), W-TinyLFU's from probation or protected
 * (its window emptied first: with a candidate there, main's victim
 * duels it, and may win). */
static void test_demote(enum tfs_policy_kind kind, uint32_t cap)
{
	struct tfs_policy *p = tfs_policy_new(kind, cap, 0);
	uint32_t v = 0, wcap = cap / 100 ? cap / 100 : 1, n = cap;

	snprintf(ctx, sizeof(ctx), "demote %s cap=%u", tfs_policy_name(kind), cap);
	for (uint32_t s = 0; s < cap; s++)
		tfs_policy_insert(p, s, 1000 + s);
	for (uint32_t s = 0; s < cap; s += 2) {
		tfs_policy_hit(p, s);
		tfs_policy_hit(p, s);
	}
	if (kind == TFS_POLICY_WTINYLFU)	/* the fill left the last wcap there */
		for (uint32_t s = cap - wcap; s < cap; s++, n--)
			tfs_policy_remove(p, s);
	for (uint32_t i = 0; i < cap; i++) {
		uint32_t s = (i * 7 + 3) % cap, got;

		if (!tfs_policy_holds(p, s))
			continue;
		tfs_policy_demote(p, s);
		CHECK(G_DEMOTE, tfs_policy_holds(p, s) && tfs_policy_count(p) == n - v,
		      "slot %u after its demotion: held %d, count %u", s, tfs_policy_holds(p, s),
		      tfs_policy_count(p));
		got = tfs_policy_victim(p, ok_all, NULL, UINT32_MAX);
		CHECK(G_DEMOTE, got == s, "demoted %u, victim %u (%u evicted before)", s, got, v);
		if (got == TFS_POLICY_NONE)
			break;
		v++;
	}
	CHECK(G_DEMOTE, v >= n / 2, "%u of %u demoted and evicted", v, n);
	tfs_policy_free(p);
}

int main(void)
{
	static const uint32_t caps[] = { 1, 2, 3, 10, 100, 1000 };
	uint64_t total_fail = 0;

	test_api();
	for (int kind = 0; kind < TFS_POLICY_COUNT; kind++)
		for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++)
			for (uint64_t seed = 1; seed <= 4; seed++)
				test_random((enum tfs_policy_kind)kind, caps[c], seed * 1000 + caps[c],
					    caps[c] >= 1000 ? 60000 : 20000);
	for (int kind = 0; kind < TFS_POLICY_COUNT; kind++)
		for (uint32_t cap = 10; cap <= 1000; cap *= 10)
			test_scan((enum tfs_policy_kind)kind, cap);
	test_ghost(0);
	test_ghost(1);
	for (uint32_t cap = 2; cap <= 1000; cap = cap < 10 ? cap + 1 : cap * 10)
		for (uint32_t n = cap - 1; n <= cap + 1; n++)
			test_ghost_cap(cap, n);
	test_scale(TFS_POLICY_LRU);
	test_scale(TFS_POLICY_S3FIFO);
	test_scale(TFS_POLICY_WTINYLFU);
	test_waits();
	test_sketch(1000, 20, 1);
	test_sketch(1, 20, 0);
	test_sketch(100, SK_KEYS, 0);
	test_sketch(1000, SK_KEYS, 0);
	for (unsigned t = 0; t <= 3; t++)
		test_seen(t);
	test_batch();
	for (int batch = 0; batch < 2; batch++) {
		test_bar(100, 1, batch);
		test_bar(100, 50, batch);
		test_bar(10, 9, batch);
	}

	for (int kind = 0; kind < TFS_POLICY_COUNT; kind++) {
		test_demote((enum tfs_policy_kind)kind, 10);
		test_demote((enum tfs_policy_kind)kind, 300);
	}

	total_fail += unit_summary(groups, G_COUNT);
	printf("%s\n", total_fail ? "FAILED" : "OK");
	return total_fail ? 1 : 0;
}
