/* test_evidence: the evidence for reclaim (src/cache/evidence.c) against a
 * reference that keeps each ghost entry's whole key and the exact count of
 * evictions at its displacement (so only a fingerprint collision, about
 * 2^-23 a look, could part them), on random sequences of evictions,
 * displacements, read misses and kept hits over small and colliding key
 * sets; and hand-worked cases: a displaced key counts once, a newer key
 * of its entry takes it over, one read again after a tier's worth of
 * evictions does not count, the score's floor, the verdict at
 * TFS_EVIDENCE_ON and that it stands. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/evidence.h"
#include "tierfs/hash.h"
#include "unit.h"

enum { G_RANDOM, G_CASES, G_COUNT };

static struct unit_group groups[G_COUNT] = {
	[G_RANDOM] = { .name = "random sequences vs reference" },
	[G_CASES] = { .name = "hand-worked cases" },
};

#define MAXENT 4096

struct ref {
	uint64_t key[MAXENT], at[MAXENT];	/* evictions at the displacement */
	uint8_t full[MAXENT];
	uint32_t mask, unit;
	uint64_t evictions;
	int score, on;
	int paid;
};

/* evidence.c invariant 2: within 16 units of evictions, modulo 256 */
static int ref_recent(const struct ref *r, uint32_t i)
{
	return ((r->evictions / r->unit - r->at[i] / r->unit) & 0xff) < 16;
}

static void ref_add(struct ref *r, int d)
{
	if (r->paid)
		return;
	r->score += d;
	if (r->score < -r->on)
		r->score = -r->on;
	r->paid = r->score >= r->on;
}

static void random_runs(void)
{
	static const uint32_t sizes[] = { 1, 2, 3, 16, 100, 1000, 4096 };
	static struct ref r;
	uint64_t st = 42;

	for (unsigned si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
		for (unsigned run = 0; run < 40; run++) {
			uint32_t n = sizes[si];
			/* keys from a set a little larger than the table, or much */
			uint64_t universe = run % 2 ? (uint64_t)n + 3 : 8ull * n + 5;
			/* bias: early runs lean to misses, later to kept hits */
			unsigned kept_pct = run % 4 == 0 ? 5 : run % 4 == 1 ? 20 : run % 4 == 2 ? 35 : 50;
			/* the daemon's verdict, and a miniature's (a share of it) */
			int on = run % 3 == 0 ? TFS_EVIDENCE_ON : run % 3 == 1 ? 16 : 1;
			struct tfs_evidence *e = tfs_evidence_new(n, on);

			memset(&r, 0, sizeof(r));
			r.on = on;
			r.mask = tfs_pow2_at_least(n) - 1;
			r.unit = n / 16 ? n / 16 : 1;
			snprintf(ctx, sizeof(ctx), "slots %u run %u on %d", n, run, on);
			if (!e) {
				unit_fail(&groups[G_RANDOM], "tfs_evidence_new failed");
				continue;
			}
			for (unsigned op = 0; op < 20000; op++) {
				uint64_t k = unit_rnd(&st) % universe * 0x9E3779B97F4A7C15ull + 1;
				uint32_t i = (uint32_t)(tfs_mix64(k) & r.mask);
				unsigned what = (unsigned)(unit_rnd(&st) % 100);

				if (what < 25) {
					tfs_evidence_victim(e, k, false);
					r.evictions++;
				} else if (what < 50) {
					tfs_evidence_victim(e, k, true);
					r.evictions++;
					r.key[i] = k;
					r.at[i] = r.evictions;
					r.full[i] = 1;
				} else if (what < 100 - kept_pct) {
					bool want = r.full[i] && r.key[i] == k && ref_recent(&r, i), got;

					got = tfs_evidence_miss(e, k);
					if (want) {
						r.full[i] = 0;
						ref_add(&r, 1);
					}
					CHECK(G_RANDOM, got == want, "op %u: miss of %llx counted %d, want %d",
					      op, (unsigned long long)k, got, want);
				} else {
					tfs_evidence_kept(e);
					ref_add(&r, -1);
				}
				CHECK(G_RANDOM, tfs_evidence_score(e) == r.score &&
				      tfs_evidence_pays(e) == (bool)r.paid,
				      "op %u: score %d pays %d, want %d %d", op, tfs_evidence_score(e),
				      tfs_evidence_pays(e), r.score, r.paid);
			}
			CHECK(G_RANDOM, tfs_evidence_bytes(e) >= ((uint64_t)r.mask + 1) * 4,
			      "%llu bytes for %u entries", (unsigned long long)tfs_evidence_bytes(e),
			      r.mask + 1);
			tfs_evidence_free(e);
		}
}

/* Two keys whose entries are the same in a table of 16. */
static void colliding(uint64_t *a, uint64_t *b)
{
	*a = 1;
	for (*b = 2; (tfs_mix64(*b) & 15) != (tfs_mix64(*a) & 15); (*b)++)
		;
}

static void cases(void)
{
	struct tfs_evidence *e = tfs_evidence_new(16, TFS_EVIDENCE_ON);
	uint64_t a, b;

	snprintf(ctx, sizeof(ctx), "cases");
	if (!e) {
		unit_fail(&groups[G_CASES], "tfs_evidence_new failed");
		return;
	}
	colliding(&a, &b);
	CHECK(G_CASES, !tfs_evidence_miss(e, a), "a key never displaced counted");
	tfs_evidence_victim(e, a, true);
	CHECK(G_CASES, tfs_evidence_miss(e, a) && tfs_evidence_score(e) == 1,
	      "a displaced key's miss: score %d", tfs_evidence_score(e));
	CHECK(G_CASES, !tfs_evidence_miss(e, a) && tfs_evidence_score(e) == 1,
	      "its second miss counted: score %d", tfs_evidence_score(e));
	tfs_evidence_victim(e, a, true);
	tfs_evidence_victim(e, b, true);	/* takes a's entry over */
	CHECK(G_CASES, !tfs_evidence_miss(e, a) && tfs_evidence_miss(e, b),
	      "the newer of two keys of one entry is the one kept");
	/* 16 slots: a unit of 1 eviction, 16 units kept */
	tfs_evidence_victim(e, a, true);
	for (int i = 0; i < 15; i++)
		tfs_evidence_victim(e, 0, false);
	CHECK(G_CASES, tfs_evidence_miss(e, a) && tfs_evidence_score(e) == 3,
	      "read again 15 evictions later: score %d", tfs_evidence_score(e));
	tfs_evidence_victim(e, a, true);
	for (int i = 0; i < 16; i++)
		tfs_evidence_victim(e, 0, false);
	CHECK(G_CASES, !tfs_evidence_miss(e, a) && tfs_evidence_score(e) == 3,
	      "read again 16 evictions later counted: score %d", tfs_evidence_score(e));
	for (int i = 0; i < 3 * TFS_EVIDENCE_ON; i++)
		tfs_evidence_kept(e);
	CHECK(G_CASES, tfs_evidence_score(e) == -TFS_EVIDENCE_ON, "floor: score %d",
	      tfs_evidence_score(e));
	for (uint64_t k = 100; k < 100 + 2 * TFS_EVIDENCE_ON - 1; k++) {
		tfs_evidence_victim(e, k, true);
		tfs_evidence_miss(e, k);
	}
	CHECK(G_CASES, !tfs_evidence_pays(e) && tfs_evidence_score(e) == TFS_EVIDENCE_ON - 1,
	      "one short of the verdict: score %d pays %d", tfs_evidence_score(e),
	      tfs_evidence_pays(e));
	tfs_evidence_victim(e, 7, true);
	tfs_evidence_miss(e, 7);
	CHECK(G_CASES, tfs_evidence_pays(e), "at %d it pays", tfs_evidence_score(e));
	for (int i = 0; i < 3 * TFS_EVIDENCE_ON; i++)
		tfs_evidence_kept(e);
	CHECK(G_CASES, tfs_evidence_pays(e) && tfs_evidence_score(e) == TFS_EVIDENCE_ON,
	      "the verdict stands: score %d pays %d", tfs_evidence_score(e),
	      tfs_evidence_pays(e));
	tfs_evidence_free(e);
	tfs_evidence_free(NULL);
}

int main(void)
{
	random_runs();
	cases();
	if (unit_summary(groups, G_COUNT)) {
		puts("FAILED");
		return 1;
	}
	puts("OK");
	return 0;
}
