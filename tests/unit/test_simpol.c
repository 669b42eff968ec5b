/* test_simpol: cache_sim's reference policies (contrib/bench/simpol.c) on hand-checked sequences (LRU, ARC, LIRS, 2Q, S3-FIFO, W-TinyLFU), and on random traces against Belady's MIN computed here (hits <= MIN, a hit iff the key was held, every miss admitted and held, used <= cap, only cold misses when everything fits). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simpol.h"
#include "unit.h"

enum { G_API, G_LRU, G_ARC, G_LIRS, G_2Q, G_S3, G_TLFU, G_HIT_HELD, G_ADMIT, G_USED, G_BELADY,
       G_COLD, G_COUNT };

static struct unit_group groups[G_COUNT] = {
	[G_API] = { .name = "parse/name/new, cap 0" },
	[G_LRU] = { .name = "ref_lru by hand" },
	[G_ARC] = { .name = "arc: a scan keeps the frequent set" },
	[G_LIRS] = { .name = "lirs: by hand, and a loop of cap+1" },
	[G_2Q] = { .name = "2q: by hand, one-shot keys never in am" },
	[G_S3] = { .name = "ref_s3fifo: by hand (small, main, ghost)" },
	[G_TLFU] = { .name = "wtinylfu: one-hit wonders keep out" },
	[G_HIT_HELD] = { .name = "random: hit iff held before" },
	[G_ADMIT] = { .name = "random: miss admits and holds" },
	[G_USED] = { .name = "random: used <= cap, = keys held" },
	[G_BELADY] = { .name = "random: hits <= Belady MIN" },
	[G_COLD] = { .name = "random: cap >= keys: cold misses only" },
};

static struct simpol *mk(enum simpol_kind k, uint32_t cap, uint32_t nkeys)
{
	struct simpol *sp = simpol_new(k, cap, nkeys, 0);

	if (!sp) {
		printf("simpol_new(%s, %u, %u) failed\n", simpol_name(k), cap, nkeys);
		exit(1);
	}
	return sp;
}

/* Replays keys[0..n); returns the hits. */
static uint32_t run(struct simpol *sp, const uint32_t *keys, uint32_t n)
{
	uint32_t hits = 0;

	for (uint32_t i = 0; i < n; i++)
		hits += simpol_access(sp, keys[i], NULL);
	return hits;
}

/* keys lo..hi-1 in order, rounds times over */
static uint32_t run_loop(struct simpol *sp, uint32_t lo, uint32_t hi, uint32_t rounds)
{
	uint32_t hits = 0;

	for (uint32_t r = 0; r < rounds; r++)
		for (uint32_t k = lo; k < hi; k++)
			hits += simpol_access(sp, k, NULL);
	return hits;
}

static bool where_is(const struct simpol *sp, uint32_t key, const char *q)
{
	const char *w = simpol_where(sp, key);

	return q ? w && !strcmp(w, q) : !w;
}

/* ------------------------------------------------------------------ */
/* By hand                                                             */
/* ------------------------------------------------------------------ */

static void test_api(void)
{
	snprintf(ctx, sizeof(ctx), "api");
	for (int k = 0; k < SIMPOL_COUNT; k++) {
		struct simpol *sp = mk((enum simpol_kind)k, 0, 10);
		bool adm = true;

		CHECK(G_API, simpol_parse(simpol_name((enum simpol_kind)k)) == k, "%d", k);
		CHECK(G_API, !simpol_access(sp, 3, &adm) && !adm && !simpol_access(sp, 3, &adm),
		      "%s cap 0 hit or admitted", simpol_name((enum simpol_kind)k));
		CHECK(G_API, !simpol_used(sp), "%s cap 0 used", simpol_name((enum simpol_kind)k));
		simpol_free(sp);
		sp = mk((enum simpol_kind)k, 4, 10);
		CHECK(G_API, !simpol_access(sp, 10, &adm) && !adm && !simpol_access(sp, 10, &adm),
		      "%s key out of range cached", simpol_name((enum simpol_kind)k));
		simpol_free(sp);
	}
	CHECK(G_API, simpol_parse("lru") == -EINVAL, "lru is the daemon's name");
	CHECK(G_API, !strcmp(simpol_name(SIMPOL_COUNT), "?"), "bad kind name");
	CHECK(G_API, simpol_new(SIMPOL_COUNT, 4, 4, 0) == NULL, "bad kind made");
}

static void test_lru(void)
{
	/* A B A C B with 2 slots: A hits; C evicts B (least recent); B misses */
	static const uint32_t seq[] = { 0, 1, 0, 2, 1 };
	struct simpol *sp = mk(SIMPOL_LRU, 2, 3);

	snprintf(ctx, sizeof(ctx), "lru ABACB");
	CHECK(G_LRU, run(sp, seq, 5) == 1, "hits");
	CHECK(G_LRU, simpol_holds(sp, 1) && simpol_holds(sp, 2) && !simpol_holds(sp, 0),
	      "holds B C, not A");
	simpol_free(sp);
}

/* 5 keys used 3 times each (into T2), a scan of 100 new keys, the 5
 * again: the scan only cycles through T1 (p stays 0: no ghost hits), so
 * the 5 all hit; LRU loses them. */
static void test_arc(void)
{
	for (int k = SIMPOL_LRU; k <= SIMPOL_ARC; k++) {
		struct simpol *sp = mk((enum simpol_kind)k, 10, 200);
		uint32_t hits;

		snprintf(ctx, sizeof(ctx), "%s hot 5, scan 100", simpol_name((enum simpol_kind)k));
		(void)run_loop(sp, 0, 5, 3);
		(void)run_loop(sp, 100, 200, 1);
		hits = run_loop(sp, 0, 5, 1);
		CHECK(G_ARC, k == SIMPOL_ARC ? hits == 5 : hits == 0, "hits %u", hits);
		if (k == SIMPOL_ARC)
			CHECK(G_ARC, where_is(sp, 0, "t2") && where_is(sp, 199, "t1") &&
				     where_is(sp, 190, "b1"), "queues");
		simpol_free(sp);
	}
}

static void test_lirs(void)
{
	/* cap 3: 2 LIR, 1 resident HIR.  A B (LIR) C (HIR) D (evicts C, which
	 * stays on S non-resident) C (a miss; C's IRR is low: LIR, S's bottom
	 * LIR A becomes HIR, D non-resident) A (a HIR hit, not on S: stays
	 * HIR) B (a LIR hit at the bottom: pruning forgets D). */
	static const uint32_t seq[] = { 0, 1, 2, 3, 2, 0, 1 };
	struct simpol *sp = mk(SIMPOL_LIRS, 3, 4), *lru;
	uint32_t hits;

	snprintf(ctx, sizeof(ctx), "lirs ABCDCAB");
	hits = run(sp, seq, 5);
	CHECK(G_LIRS, hits == 0 && where_is(sp, 2, "lir") && where_is(sp, 0, "hir") &&
		      where_is(sp, 3, "nonres") && where_is(sp, 1, "lir"), "after ABCDC");
	hits += run(sp, seq + 5, 2);
	CHECK(G_LIRS, hits == 2 && where_is(sp, 0, "hir") && where_is(sp, 1, "lir") &&
		      where_is(sp, 2, "lir") && where_is(sp, 3, NULL), "after A B: hits %u", hits);
	simpol_free(sp);

	/* a loop over cap+1 keys: LRU never hits; LIRS keeps its LIR set
	 * (cap - cap/100 keys) and hits on all of them every round after the
	 * first two */
	sp = mk(SIMPOL_LIRS, 100, 101);
	lru = mk(SIMPOL_LRU, 100, 101);
	snprintf(ctx, sizeof(ctx), "loop of 101, cap 100, 20 rounds");
	hits = run_loop(sp, 0, 101, 20);
	CHECK(G_LIRS, hits >= 18 * 98, "lirs hits %u", hits);
	CHECK(G_LIRS, run_loop(lru, 0, 101, 20) == 0, "lru hits");
	CHECK(G_LIRS, simpol_used(sp) == 100, "used %u", simpol_used(sp));
	simpol_free(sp);
	simpol_free(lru);
}

static void test_2q(void)
{
	/* cap 4: Kin 1, Kout 2.  A B C D fill A1in; E pushes A out to A1out;
	 * A again: a miss, B to A1out, A to Am; C in A1in hits. */
	static const uint32_t seq[] = { 0, 1, 2, 3, 4, 0, 2 };
	struct simpol *sp = mk(SIMPOL_2Q, 4, 5);
	uint32_t seen[400] = { 0 };
	uint64_t rng = 7;

	snprintf(ctx, sizeof(ctx), "2q ABCDEAC");
	CHECK(G_2Q, run(sp, seq, 7) == 1, "hits");
	CHECK(G_2Q, where_is(sp, 0, "am") && where_is(sp, 1, "a1out") && where_is(sp, 2, "a1in"),
	      "queues");
	simpol_free(sp);

	/* a hot set of 10 keys among one-shot keys: whatever is in Am was
	 * seen at least twice */
	sp = mk(SIMPOL_2Q, 20, 400);
	snprintf(ctx, sizeof(ctx), "2q hot 10 + one-shots");
	for (uint32_t i = 0, next = 10; i < 700 && next < 400; i++) {
		uint32_t k = unit_rnd(&rng) % 2 ? (uint32_t)(unit_rnd(&rng) % 10) : next++;

		(void)simpol_access(sp, k, NULL);
		seen[k]++;
	}
	for (uint32_t k = 0; k < 400; k++)
		CHECK(G_2Q, !where_is(sp, k, "am") || seen[k] >= 2, "key %u in am, seen %u", k,
		      seen[k]);
	for (uint32_t k = 0; k < 10; k++)
		CHECK(G_2Q, where_is(sp, k, "am"), "hot key %u in %s", k, simpol_where(sp, k));
	simpol_free(sp);
}

static void test_s3fifo(void)
{
	struct simpol *sp = mk(SIMPOL_S3FIFO, 10, 20);

	/* cap 10, small target 1: 0..9 all enter small; 10 evicts 0 (never
	 * hit) to the ghost; 0 again goes to main, 1 to the ghost */
	snprintf(ctx, sizeof(ctx), "s3fifo cap 10");
	(void)run_loop(sp, 0, 11, 1);
	CHECK(G_S3, where_is(sp, 0, "ghost") && where_is(sp, 10, "small"), "0 ghost, 10 small");
	CHECK(G_S3, !simpol_access(sp, 0, NULL) && where_is(sp, 0, "main") &&
		    where_is(sp, 1, "ghost"), "ghost hit to main");
	/* 2 hit while in small moves to main when its turn comes; 3 does not */
	CHECK(G_S3, simpol_access(sp, 2, NULL), "2 hit");
	(void)simpol_access(sp, 11, NULL);
	CHECK(G_S3, where_is(sp, 2, "main") && where_is(sp, 3, "ghost") && simpol_used(sp) == 10,
	      "2 main, 3 ghost");
	simpol_free(sp);
}

/* 50 hot keys 10 times each, 5000 one-shot keys, the hot keys again, 1000
 * slots: W-TinyLFU keeps all 50, LRU none.  The scan fills main's room
 * first; then each one-shot candidate (estimate 1: the doorkeeper) meets
 * probation's LRU, a hot key that was only hit in the window (estimate 9,
 * no aging before 10000 accesses), or another one-shot key (a tie: the
 * candidate loses).  The sketch is 1024 wide: a one-shot key colliding
 * with hot keys in all 4 rows is unlikely (and the seed is fixed). */
static void test_tinylfu(void)
{
	for (int k = 0; k < 2; k++) {
		enum simpol_kind kind = k ? SIMPOL_WTINYLFU : SIMPOL_LRU;
		struct simpol *sp = mk(kind, 1000, 5100);
		uint32_t hits;

		snprintf(ctx, sizeof(ctx), "%s hot 50 + 5000 one-shots", simpol_name(kind));
		(void)run_loop(sp, 0, 50, 10);
		(void)run_loop(sp, 100, 5100, 1);
		hits = run_loop(sp, 0, 50, 1);
		CHECK(G_TLFU, hits == (k ? 50 : 0), "hits %u", hits);
		simpol_free(sp);
	}
}

/* ------------------------------------------------------------------ */
/* Random traces against Belady's MIN                                  */
/* ------------------------------------------------------------------ */

/* MIN with cap slots, every miss admitted: on a miss into a full cache
 * the cached key used next farthest ahead leaves.  O(n cap). */
static uint32_t belady_hits(const uint32_t *keys, uint32_t n, uint32_t nkeys, uint32_t cap)
{
	uint32_t *next = malloc(n * sizeof(*next)), *last = malloc(nkeys * sizeof(*last));
	uint32_t *slot = malloc((cap + 1) * sizeof(*slot)), *nu = malloc(nkeys * sizeof(*nu));
	uint32_t used = 0, hits = 0;

	if (!next || !last || !slot || !nu)
		exit(1);
	for (uint32_t k = 0; k < nkeys; k++)
		last[k] = UINT32_MAX;
	for (uint32_t i = n; i-- > 0;) {
		next[i] = last[keys[i]];
		last[keys[i]] = i;
	}
	for (uint32_t i = 0; i < n && cap; i++) {
		uint32_t j, far = 0;

		for (j = 0; j < used && slot[j] != keys[i]; j++)
			;
		nu[keys[i]] = next[i];
		if (j < used) {
			hits++;
			continue;
		}
		if (used < cap) {
			slot[used++] = keys[i];
			continue;
		}
		for (j = 1; j < used; j++)
			if (nu[slot[j]] > nu[slot[far]])
				far = j;
		slot[far] = keys[i];
	}
	free(next);
	free(last);
	free(slot);
	free(nu);
	return hits;
}

/* A trace of n accesses over nkeys keys: Zipf(s) over a shuffled ranking,
 * with a sequential scan every scan_every accesses (0: none). */
static void make_trace(uint32_t *keys, uint32_t n, uint32_t nkeys, double s, uint32_t scan_every,
		       uint64_t *rng)
{
	double *cdf = malloc(nkeys * sizeof(*cdf)), sum = 0;
	uint32_t *perm = malloc(nkeys * sizeof(*perm)), scan = 0;

	if (!cdf || !perm)
		exit(1);
	for (uint32_t r = 0; r < nkeys; r++) {
		sum += pow(r + 1.0, -s);
		cdf[r] = sum;
		perm[r] = r;
	}
	for (uint32_t r = nkeys - 1; r > 0; r--) {
		uint32_t j = (uint32_t)(unit_rnd(rng) % (r + 1)), x = perm[r];

		perm[r] = perm[j];
		perm[j] = x;
	}
	for (uint32_t i = 0; i < n; i++) {
		double u = (double)(unit_rnd(rng) >> 11) / 9007199254740992.0 * sum;
		uint32_t r = 0;

		if (scan_every && i % scan_every == 0) {
			keys[i] = scan++ % nkeys;
			continue;
		}
		while (r + 1 < nkeys && cdf[r] <= u)
			r++;
		keys[i] = perm[r];
	}
	free(cdf);
	free(perm);
}

static void check_trace(enum simpol_kind kind, const uint32_t *keys, uint32_t n, uint32_t nkeys,
			uint32_t cap, uint32_t distinct, uint32_t min_hits)
{
	struct simpol *sp = mk(kind, cap, nkeys);
	uint32_t hits = 0, bad_hit = 0, bad_adm = 0, bad_used = 0, held = 0;

	for (uint32_t i = 0; i < n; i++) {
		bool before = simpol_holds(sp, keys[i]), adm, hit = simpol_access(sp, keys[i], &adm);

		hits += hit;
		bad_hit += hit != before;
		bad_adm += cap ? adm == hit || !simpol_holds(sp, keys[i]) : adm || hit;
		bad_used += simpol_used(sp) > cap;
	}
	for (uint32_t k = 0; k < nkeys; k++)
		held += simpol_holds(sp, k);
	CHECK(G_HIT_HELD, !bad_hit, "%u hits of keys not held (or misses of held)", bad_hit);
	CHECK(G_ADMIT, !bad_adm, "%u accesses: admitted != miss, or key not held after", bad_adm);
	CHECK(G_USED, !bad_used && held == simpol_used(sp), "%u over cap; %u held, used %u",
	      bad_used, held, simpol_used(sp));
	CHECK(G_BELADY, hits <= min_hits, "hits %u > MIN %u", hits, min_hits);
	if (cap >= distinct)
		CHECK(G_COLD, n - hits == distinct, "misses %u, distinct %u", n - hits, distinct);
	simpol_free(sp);
}

static void test_random(void)
{
	uint64_t rng = 16;

	for (int t = 0; t < 300; t++) {
		uint32_t nkeys = 2 + (uint32_t)(unit_rnd(&rng) % 300), n = 3000, distinct = 0;
		uint32_t cap = (uint32_t)(unit_rnd(&rng) % (nkeys + 8)) + (t % 10 == 0), min_hits;
		double s = (double)(unit_rnd(&rng) % 150) / 100.0;
		uint32_t scan_every = unit_rnd(&rng) % 3 ? 0 : 2 + (uint32_t)(unit_rnd(&rng) % 20);
		uint32_t *keys = malloc(n * sizeof(*keys));
		bool *seen = calloc(nkeys, sizeof(*seen));

		if (!keys || !seen)
			exit(1);
		make_trace(keys, n, nkeys, s, scan_every, &rng);
		for (uint32_t i = 0; i < n; i++) {
			distinct += !seen[keys[i]];
			seen[keys[i]] = true;
		}
		min_hits = belady_hits(keys, n, nkeys, cap);
		for (int k = 0; k < SIMPOL_COUNT; k++) {
			snprintf(ctx, sizeof(ctx), "trace %d: %s nkeys %u cap %u zipf %.2f scan %u", t,
				 simpol_name((enum simpol_kind)k), nkeys, cap, s, scan_every);
			check_trace((enum simpol_kind)k, keys, n, nkeys, cap, distinct, min_hits);
		}
		free(keys);
		free(seen);
	}
}

int main(void)
{
	test_api();
	test_lru();
	test_arc();
	test_lirs();
	test_2q();
	test_s3fifo();
	test_tinylfu();
	test_random();
	return unit_summary(groups, G_COUNT) ? 1 : 0;
}
