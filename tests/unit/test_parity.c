/* test_parity: GF(2^8) parity (src/raid/parity.c) against a naive per-byte reference, for every kernel set this CPU has. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/parity.h"
#include "unit.h"

/* ------------------------------------------------------------------ */
/* Reporting                                                           */
/* ------------------------------------------------------------------ */

enum { G_API, G_POW, G_MUL, G_GEN, G_REC, G_LOC, G_GUARD, G_COUNT };

static struct unit_group groups[G_COUNT] = {
	[G_API] = { .name = "kernel sets, argument checks" },
	[G_POW] = { .name = "gf_pow2" },
	[G_MUL] = { .name = "xor, mul_xor: every coefficient" },
	[G_GEN] = { .name = "gen P, P+Q vs reference" },
	[G_REC] = { .name = "recover every 1 and 2 missing" },
	[G_LOC] = { .name = "locate planted corruption" },
	[G_GUARD] = { .name = "no byte outside [0, len) touched" },
};

/* ------------------------------------------------------------------ */
/* Reference: carry-less multiply, then reduce by 0x11d                */
/* ------------------------------------------------------------------ */

static uint8_t ref_tab[256][256];	/* a * b */
static uint8_t ref_g[512];		/* g^i */

static uint8_t ref_mul_slow(uint8_t a, uint8_t b)
{
	unsigned r = 0;

	for (int i = 0; i < 8; i++)
		if ((b >> i) & 1)
			r ^= (unsigned)a << i;
	for (int i = 15; i >= 8; i--)
		if ((r >> i) & 1)
			r ^= 0x11du << (i - 8);
	return (uint8_t)r;
}

static void ref_init(void)
{
	for (unsigned a = 0; a < 256; a++)
		for (unsigned b = 0; b < 256; b++)
			ref_tab[a][b] = ref_mul_slow((uint8_t)a, (uint8_t)b);
	ref_g[0] = 1;
	for (unsigned i = 1; i < 512; i++)
		ref_g[i] = ref_tab[ref_g[i - 1]][2];
}

/* P and Q of column k */
static void ref_pq(uint8_t *const *d, unsigned ndata, size_t k, uint8_t *p, uint8_t *q)
{
	*p = *q = 0;
	for (unsigned i = 0; i < ndata; i++) {
		*p ^= d[i][k];
		*q ^= ref_tab[ref_g[i]][d[i][k]];
	}
}

/* ------------------------------------------------------------------ */
/* Blocks with guard bytes, at random alignments                       */
/* ------------------------------------------------------------------ */

#define NBLK 32
#define GUARD 64
#define BIG (65536 + 3)
#define CANARY 0xa5

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

static void fill(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(rnd() >> 32);
}

struct stripe {
	unsigned nblk;
	size_t len;
	uint8_t *mem[NBLK];
	uint8_t *b[NBLK];	/* b[i] = mem[i] + GUARD + alignment */
	uint8_t *keep[NBLK];	/* a copy, for comparisons */
};

static struct stripe S;

static void stripe_alloc(void)
{
	for (unsigned i = 0; i < NBLK; i++) {
		S.mem[i] = malloc(BIG + 2 * GUARD + 64);
		S.keep[i] = malloc(BIG);
		if (!S.mem[i] || !S.keep[i]) {
			perror("malloc");
			exit(1);
		}
	}
}

/* nblk blocks of len random bytes at random alignments, guards set */
static void stripe_new(unsigned nblk, size_t len)
{
	S.nblk = nblk;
	S.len = len;
	for (unsigned i = 0; i < nblk; i++) {
		S.b[i] = S.mem[i] + GUARD + rnd() % 64;
		memset(S.b[i] - GUARD, CANARY, GUARD);
		memset(S.b[i] + len, CANARY, GUARD);
		fill(S.b[i], len);
	}
}

static void stripe_keep(void)
{
	for (unsigned i = 0; i < S.nblk; i++)
		memcpy(S.keep[i], S.b[i], S.len);
}

static void check_guards(void)
{
	for (unsigned i = 0; i < S.nblk; i++) {
		int ok = 1;

		for (size_t k = 0; k < GUARD; k++)
			ok &= S.b[i][-1 - (ptrdiff_t)k] == CANARY && S.b[i][S.len + k] == CANARY;
		CHECK(G_GUARD, ok, "block %u len %zu: guard bytes changed", i, S.len);
	}
}

/* ------------------------------------------------------------------ */
/* Tests                                                               */
/* ------------------------------------------------------------------ */

static void test_pow(void)
{
	snprintf(ctx, sizeof(ctx), "pow2");
	for (unsigned i = 0; i < 1000; i++)
		CHECK(G_POW, tfs_gf_pow2(i) == ref_g[i % 255], "g^%u = %u, expected %u",
		      i, tfs_gf_pow2(i), ref_g[i % 255]);
	CHECK(G_POW, tfs_gf_pow2(UINT32_MAX) == ref_g[UINT32_MAX % 255], "g^UINT_MAX");
}

static void test_mul_len(size_t len)
{
	uint8_t *dst, *src;

	stripe_new(2, len);
	dst = S.b[0];
	src = S.b[1];
	for (unsigned c = 0; c < 256; c++) {
		int ok = 1;

		stripe_keep();
		tfs_parity_mul_xor(dst, src, (uint8_t)c, len);
		for (size_t k = 0; k < len; k++)
			ok &= dst[k] == (S.keep[0][k] ^ ref_tab[c][src[k]]) && src[k] == S.keep[1][k];
		CHECK(G_MUL, ok, "mul_xor coef %u len %zu", c, len);
		/* in place: d ^= c * d */
		stripe_keep();
		tfs_parity_mul_xor(dst, dst, (uint8_t)c, len);
		ok = 1;
		for (size_t k = 0; k < len; k++)
			ok &= dst[k] == (S.keep[0][k] ^ ref_tab[c][S.keep[0][k]]);
		CHECK(G_MUL, ok, "mul_xor in place coef %u len %zu", c, len);
	}
	stripe_keep();
	tfs_parity_xor(dst, src, len);
	{
		int ok = 1;

		for (size_t k = 0; k < len; k++)
			ok &= dst[k] == (S.keep[0][k] ^ src[k]);
		CHECK(G_MUL, ok, "xor len %zu", len);
	}
	check_guards();
}

static void test_mul(void)
{
	static const size_t lens[] = { 1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 95, 127,
				       128, 129, 300, 4096, 4099 };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (int rep = 0; rep < 2; rep++)
			test_mul_len(lens[i]);
}

static void test_gen_one(unsigned ndata, unsigned npar, size_t len)
{
	int okp = 1, okq = 1, okd = 1;

	stripe_new(ndata + npar, len);
	stripe_keep();
	tfs_parity_gen((void **)S.b, ndata, npar, len);
	for (size_t k = 0; k < len; k++) {
		uint8_t p, q;

		ref_pq(S.b, ndata, k, &p, &q);
		okp &= S.b[ndata][k] == p;
		if (npar == 2)
			okq &= S.b[ndata + 1][k] == q;
	}
	for (unsigned i = 0; i < ndata; i++)
		okd &= memcmp(S.b[i], S.keep[i], len) == 0;
	CHECK(G_GEN, okp && okq && okd, "ndata %u nparity %u len %zu: P %s, Q %s, data %s",
	      ndata, npar, len, okp ? "ok" : "wrong", okq ? "ok" : "wrong",
	      okd ? "kept" : "changed");
	check_guards();
}

static void test_gen(void)
{
	static const unsigned big_nd[] = { 1, 2, 3, 4, 5, 8, 13, 30 };

	for (unsigned npar = 1; npar <= 2; npar++)
		for (unsigned nd = 1; nd <= 30; nd++)
			for (size_t len = 1; len <= 300; len++)
				test_gen_one(nd, npar, len);
	for (unsigned npar = 1; npar <= 2; npar++)
		for (size_t i = 0; i < sizeof(big_nd) / sizeof(big_nd[0]); i++) {
			test_gen_one(big_nd[i], npar, 4096);
			test_gen_one(big_nd[i], npar, BIG);
		}
}

/* Lose the blocks in miss[], overwrite them with junk, recover. */
static void recover_one(unsigned ndata, unsigned npar, const unsigned *miss, unsigned nmiss)
{
	int rc, ok = 1;

	for (unsigned i = 0; i < nmiss; i++)
		fill(S.b[miss[i]], S.len);
	rc = tfs_parity_recover((void **)S.b, ndata, npar, miss, nmiss, S.len);
	for (unsigned i = 0; i < S.nblk; i++)
		ok &= memcmp(S.b[i], S.keep[i], S.len) == 0;
	CHECK(G_REC, rc == 0 && ok, "ndata %u nparity %u len %zu lost %u,%u: rc %d, %s",
	      ndata, npar, S.len, miss[0], nmiss > 1 ? miss[1] : miss[0], rc,
	      ok ? "blocks right" : "blocks wrong");
	if (!ok)	/* put the stripe back for the next case */
		for (unsigned i = 0; i < S.nblk; i++)
			memcpy(S.b[i], S.keep[i], S.len);
}

static void test_recover_geom(unsigned ndata, unsigned npar, size_t len)
{
	unsigned nb = ndata + npar, miss[2];

	stripe_new(nb, len);
	tfs_parity_gen((void **)S.b, ndata, npar, len);
	stripe_keep();
	for (miss[0] = 0; miss[0] < nb; miss[0]++) {
		recover_one(ndata, npar, miss, 1);
		for (miss[1] = 0; miss[1] < nb && npar == 2; miss[1]++)
			if (miss[1] != miss[0])
				recover_one(ndata, npar, miss, 2);
	}
	check_guards();
}

static void test_recover_args(void)
{
	unsigned miss[2];
	int rc;

	stripe_new(6, 100);
	tfs_parity_gen((void **)S.b, 4, 2, 100);
	stripe_keep();
	miss[0] = 0;
	miss[1] = 1;
	rc = tfs_parity_recover((void **)S.b, 5, 1, miss, 2, 100);
	CHECK(G_API, rc == -EINVAL, "2 missing with nparity 1: rc %d", rc);
	miss[0] = 6;
	rc = tfs_parity_recover((void **)S.b, 4, 2, miss, 1, 100);
	CHECK(G_API, rc == -EINVAL, "position 6 of 4+2: rc %d", rc);
	miss[0] = 6;
	rc = tfs_parity_recover((void **)S.b, 5, 1, miss, 1, 100);
	CHECK(G_API, rc == -EINVAL, "position 6 of 5+1: rc %d", rc);
	miss[0] = miss[1] = 2;
	rc = tfs_parity_recover((void **)S.b, 4, 2, miss, 2, 100);
	CHECK(G_API, rc == -EINVAL, "the same block twice: rc %d", rc);
	rc = tfs_parity_recover((void **)S.b, 4, 2, miss, 3, 100);
	CHECK(G_API, rc == -EINVAL, "3 missing: rc %d", rc);
	rc = tfs_parity_recover((void **)S.b, 4, 3, miss, 1, 100);
	CHECK(G_API, rc == -EINVAL, "nparity 3: rc %d", rc);
	rc = tfs_parity_recover((void **)S.b, 0, 2, miss, 1, 100);
	CHECK(G_API, rc == -EINVAL, "ndata 0: rc %d", rc);
	rc = tfs_parity_recover((void **)S.b, 4, 2, miss, 0, 100);
	CHECK(G_API, rc == 0, "nothing missing: rc %d", rc);
	for (unsigned i = 0; i < 6; i++)
		CHECK(G_API, memcmp(S.b[i], S.keep[i], 100) == 0, "refused call changed block %u", i);
	CHECK(G_API, tfs_parity_locate((void **)S.b, 0, 100) == -EINVAL, "locate ndata 0");
	CHECK(G_API, tfs_parity_locate((void **)S.b, TFS_PARITY_MAX_DATA + 1, 100) == -EINVAL,
	      "locate ndata 256");
}

static void test_recover(void)
{
	static const size_t lens[] = { 1, 63, 65, 300 };
	static const unsigned big_nd[] = { 1, 3, 8 };

	for (unsigned npar = 1; npar <= 2; npar++) {
		for (unsigned nd = 1; nd <= 30; nd++)
			for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
				test_recover_geom(nd, npar, lens[i]);
		for (size_t i = 0; i < sizeof(big_nd) / sizeof(big_nd[0]); i++)
			test_recover_geom(big_nd[i], npar, BIG);
	}
	test_recover_args();
}

/* Corrupt nbytes random bytes of block `who`, expect locate() to name it,
 * then rebuild it and get the stripe back. */
static void locate_one(unsigned ndata, unsigned who, unsigned nbytes)
{
	int got, ok = 1;

	for (unsigned k = 0; k < nbytes; k++)
		S.b[who][rnd() % S.len] ^= (uint8_t)(1 + rnd() % 255);
	got = tfs_parity_locate((void **)S.b, ndata, S.len);
	if (memcmp(S.b[who], S.keep[who], S.len) == 0)
		got = (int)who;		/* the flips cancelled out */
	CHECK(G_LOC, got == (int)who, "ndata %u len %zu: %u bytes of block %u bad, locate %d",
	      ndata, S.len, nbytes, who, got);
	tfs_parity_recover((void **)S.b, ndata, 2, &who, 1, S.len);
	for (unsigned i = 0; i < S.nblk; i++)
		ok &= memcmp(S.b[i], S.keep[i], S.len) == 0;
	CHECK(G_LOC, ok, "ndata %u: rebuild of located block %u", ndata, who);
	if (!ok)
		for (unsigned i = 0; i < S.nblk; i++)
			memcpy(S.b[i], S.keep[i], S.len);
}

static void test_locate_geom(unsigned ndata, size_t len)
{
	int got;

	stripe_new(ndata + 2, len);
	tfs_parity_gen((void **)S.b, ndata, 2, len);
	stripe_keep();
	got = tfs_parity_locate((void **)S.b, ndata, len);
	CHECK(G_LOC, got == -1, "ndata %u len %zu: clean stripe, locate %d", ndata, len, got);
	for (unsigned who = 0; who < ndata + 2; who++) {
		locate_one(ndata, who, 1);
		locate_one(ndata, who, len > 2 ? 3 : 1);
	}
	if (len >= 2 && ndata >= 2) {
		/* two data blocks bad in different columns */
		S.b[0][0] ^= 1;
		S.b[1][len - 1] ^= 0x80;
		got = tfs_parity_locate((void **)S.b, ndata, len);
		CHECK(G_LOC, got == -2, "ndata %u len %zu: blocks 0 and 1 bad, locate %d",
		      ndata, len, got);
		memcpy(S.b[0], S.keep[0], len);
		memcpy(S.b[1], S.keep[1], len);
	}
	/* P and Q bad in one column as if a data block beyond ndata were */
	S.b[ndata][len / 2] ^= 0x35;
	S.b[ndata + 1][len / 2] ^= ref_tab[ref_g[ndata]][0x35];
	got = tfs_parity_locate((void **)S.b, ndata, len);
	CHECK(G_LOC, got == -2, "ndata %u len %zu: syndromes point at block %u, locate %d",
	      ndata, len, ndata, got);
	check_guards();
}

static void test_locate(void)
{
	static const size_t lens[] = { 1, 2, 100, 4096, 5000, 3 * 4096 + 1 };

	for (unsigned nd = 1; nd <= 30; nd++)
		for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
			test_locate_geom(nd, lens[i]);
}

int main(void)
{
	static const char *const sets[] = { "generic", "ssse3", "avx2", "gfni" };
	const char *best;
	uint64_t total_fail = 0;
	unsigned ran = 0;

	ref_init();
	stripe_alloc();
	best = tfs_parity_impl();
	snprintf(ctx, sizeof(ctx), "api");
	CHECK(G_API, tfs_parity_use("no-such") == -EINVAL, "unknown kernel set accepted");
	CHECK(G_API, tfs_parity_use("generic") == 0, "generic refused");
	for (size_t s = 0; s < sizeof(sets) / sizeof(sets[0]); s++) {
		int rc = tfs_parity_use(sets[s]);

		if (rc == -ENOTSUP) {
			printf("kernel set %s: not on this CPU, skipped\n", sets[s]);
			continue;
		}
		snprintf(ctx, sizeof(ctx), "%s", sets[s]);
		CHECK(G_API, rc == 0 && strcmp(tfs_parity_impl(), sets[s]) == 0,
		      "use(%s) = %d, in use %s", sets[s], rc, tfs_parity_impl());
		if (rc)
			continue;
		printf("kernel set %s\n", sets[s]);
		ran++;
		test_pow();
		test_mul();
		test_gen();
		test_recover();
		test_locate();
	}
	printf("%u kernel sets tested, default %s\n", ran, best);
	total_fail += unit_summary(groups, G_COUNT);
	printf("%s\n", total_fail ? "FAILED" : "OK");
	return total_fail ? 1 : 0;
}
