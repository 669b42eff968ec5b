/* test_layout: exhaustive check of the placement math (src/raid/layout.c) against a naive dealing reference (slots, or md rows for raid5/6). */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/layout.h"
#include "unit.h"

/* ------------------------------------------------------------------ */
/* Reporting                                                           */
/* ------------------------------------------------------------------ */

enum {
	G_CHECK, G_NAMES, G_REF, G_MAP, G_COPIES, G_JBOD, G_EXTENT, G_WINDOW,
	G_SHARE, G_SIZE, G_WRITE, G_SFM, G_LEVEL, G_ROW, G_MD, G_COUNT
};

static struct unit_group groups[G_COUNT] = {
	[G_CHECK] = { .name = "layout_check" },
	[G_NAMES] = { .name = "names/parse/rot" },
	[G_REF] = { .name = "reference self-check" },
	[G_MAP] = { .name = "map/unmap vs reference, round trip" },
	[G_COPIES] = { .name = "copies on distinct members" },
	[G_JBOD] = { .name = "jbod: only member rot" },
	[G_EXTENT] = { .name = "extent" },
	[G_WINDOW] = { .name = "window: injective, prefix, byte-exact share" },
	[G_SHARE] = { .name = "share vs reference, monotone, prefix" },
	[G_SIZE] = { .name = "size_from_member after truncate" },
	[G_WRITE] = { .name = "size_from_member after a write" },
	[G_SFM] = { .name = "size_from_member = least L, share(L) >= size" },
	[G_LEVEL] = { .name = "copies/tolerates/usable/min_members" },
	[G_ROW] = { .name = "parity rows: row_member/row_pos, rotation" },
	[G_MD] = { .name = "parity rows: md left-symmetric pictures" },
};

static const char *const lvname[] = { "jbod", "raid0", "raid1", "raid10", "raid5", "raid6" };
static const uint32_t lvmin[] = { 1, 2, 2, 2, 3, 4 };	/* min members */
static const uint32_t lvpar[] = { 0, 0, 0, 0, 1, 2 };	/* parity chunks per row */

/* ------------------------------------------------------------------ */
/* Reference                                                           */
/*                                                                     */
/* Whole-file levels: JBOD keeps the file on member rot, RAID1 keeps   */
/* copy k on member k, both at the logical offset.                     */
/* Striped levels deal chunk copies out like cards: chunk 0 copy 0,    */
/* chunk 0 copy 1, chunk 1 copy 0, ... each to the next member in turn */
/* (starting with member rot), into the first free chunk-sized row of  */
/* that member.  The dealing is simulated until it is back at member   */
/* rot with every member holding the same number of rows; from there   */
/* on it repeats, so one period table answers any offset.              */
/* Parity levels are dealt row by row as md draws its left-symmetric    */
/* layout: P starts on the last member and moves one member left each   */
/* row, Q (raid6) sits on the member after P, and the row's data chunks */
/* go to the members after that in turn, wrapping around; the whole    */
/* picture is then turned by rot.  After n rows it repeats.             */
/* ------------------------------------------------------------------ */

#define REF_MAXP 64

struct ref {
	enum tfs_level level;
	uint32_t n, chunk, rot, cp;
	uint32_t np, nd;		/* parity levels: parity, data chunks per row */
	int striped;			/* period tables in use (striped or parity) */
	uint32_t P, R;			/* P chunks fill R rows of every member */
	uint8_t par[TFS_MAX_MEMBERS][REF_MAXP];	/* member, row -> 0 data, 1 P, 2 Q */
	uint8_t pm[REF_MAXP][2];	/* row in period -> member of P, Q */
	uint8_t tm[REF_MAXP][2];	/* chunk in period, copy -> member */
	uint32_t tr[REF_MAXP][2];	/* chunk in period, copy -> row in period */
	uint32_t rc[TFS_MAX_MEMBERS][REF_MAXP];	/* member, row -> chunk */
	uint8_t rk[TFS_MAX_MEMBERS][REF_MAXP];	/* member, row -> copy */
};

static uint32_t ref_copies(enum tfs_level lv, uint32_t n)
{
	switch (lv) {
	case TFS_RAID1: return n;
	case TFS_RAID10: return 2;
	default: return 1;
	}
}

/* Deal n rows of a parity level (see above). */
static void ref_build_parity(struct ref *r)
{
	uint32_t pmem = r->n - 1, c = 0;

	r->P = r->n * r->nd;
	r->R = r->n;
	for (uint32_t row = 0; row < r->n; row++) {
		uint32_t at = pmem;

		for (uint32_t k = 0; k < r->np; k++) {
			uint32_t m = (at + r->rot) % r->n;

			r->par[m][row] = (uint8_t)(k + 1);
			r->pm[row][k] = (uint8_t)m;
			at = (at + 1) % r->n;
		}
		for (uint32_t i = 0; i < r->nd; i++, c++) {
			uint32_t m = (at + r->rot) % r->n;

			r->tm[c][0] = (uint8_t)m;
			r->tr[c][0] = row;
			r->rc[m][row] = c;
			at = (at + 1) % r->n;
		}
		pmem = pmem == 0 ? r->n - 1 : pmem - 1;
	}
}

static void ref_build(struct ref *r, enum tfs_level lv, uint32_t n,
		      uint32_t chunk, uint32_t rot)
{
	uint32_t next_row[TFS_MAX_MEMBERS] = { 0 }, turn = rot;

	memset(r, 0, sizeof(*r));
	r->level = lv;
	r->n = n;
	r->chunk = chunk;
	r->rot = rot;
	r->cp = ref_copies(lv, n);
	r->np = lvpar[lv];
	r->nd = n - r->np;
	r->striped = lv == TFS_RAID0 || lv == TFS_RAID10 || r->np;
	if (r->np) {
		ref_build_parity(r);
		return;
	}
	if (!r->striped)
		return;
	for (uint32_t c = 0; c < REF_MAXP && !r->P; c++) {
		int even = 1;

		for (uint32_t k = 0; k < r->cp; k++) {
			r->tm[c][k] = (uint8_t)turn;
			r->tr[c][k] = next_row[turn]++;
			turn = turn + 1 == n ? 0 : turn + 1;
		}
		for (uint32_t m = 1; m < n; m++)
			even &= next_row[m] == next_row[0];
		if (turn == rot && even) {
			r->P = c + 1;
			r->R = next_row[0];
		}
	}
	if (!r->P) {
		fprintf(stderr, "reference: no period for %s n=%u\n", lvname[lv], n);
		exit(1);
	}
	for (uint32_t c = 0; c < r->P; c++)
		for (uint32_t k = 0; k < r->cp; k++) {
			r->rc[r->tm[c][k]][r->tr[c][k]] = c;
			r->rk[r->tm[c][k]][r->tr[c][k]] = (uint8_t)k;
		}
}

static void ref_map(const struct ref *r, uint64_t off, uint32_t k,
		    uint32_t *m, uint64_t *moff)
{
	uint64_t c, q;
	uint32_t i;

	if (!r->striped) {
		*m = r->level == TFS_RAID1 ? k : r->rot;
		*moff = off;
		return;
	}
	c = off / r->chunk;
	q = c / r->P;
	i = (uint32_t)(c % r->P);
	*m = r->tm[i][k];
	*moff = (q * r->R + r->tr[i][k]) * r->chunk + off % r->chunk;
}

static int ref_unmap(const struct ref *r, uint32_t m, uint64_t moff,
		     uint64_t *off, uint32_t *k)
{
	uint64_t row, q;
	uint32_t i;

	if (!r->striped) {
		if (r->level == TFS_JBOD && m != r->rot)
			return -1;
		*off = moff;
		*k = r->level == TFS_RAID1 ? m : 0;
		return 0;
	}
	row = moff / r->chunk;
	q = row / r->R;
	i = (uint32_t)(row % r->R);
	if (r->par[m][i])
		return -1;
	*off = (q * r->P + r->rc[m][i]) * r->chunk + moff % r->chunk;
	*k = r->rk[m][i];
	return 0;
}

/* Member bytes used by logical [0, L): one past the member offset of the
 * last logical byte below L that the member holds (the byte-walking window
 * test checks that this really is a count of bytes for small L). */
/* Parity bytes: a parity member's byte at in-chunk offset x of row q is
 * used once logical byte x of the row's first data chunk is below L. */
static uint64_t ref_share_parity(const struct ref *r, uint32_t m, uint64_t L)
{
	uint64_t rowbytes = (uint64_t)r->nd * r->chunk, q = (L - 1) / rowbytes;

	for (uint64_t back = 0; back < r->R && back <= q; back++) {
		uint64_t qq = q - back, x = L - qq * rowbytes;

		if (r->par[m][qq % r->R])
			return qq * r->chunk + (x < r->chunk ? x : r->chunk);
	}
	return 0;
}

static uint64_t ref_share(const struct ref *r, uint32_t m, uint64_t L)
{
	uint64_t c, ps = 0;

	if (L == 0)
		return 0;
	if (!r->striped)
		return r->level == TFS_JBOD && m != r->rot ? 0 : L;
	if (r->np)
		ps = ref_share_parity(r, m, L);
	c = (L - 1) / r->chunk;
	for (uint64_t back = 0; back < r->P && back <= c; back++) {
		uint64_t cc = c - back;

		for (uint32_t k = 0; k < r->cp; k++) {
			uint32_t mm;
			uint64_t x = back ? cc * r->chunk + r->chunk - 1 : L - 1, mo;

			if (r->tm[cc % r->P][k] != m)
				continue;
			ref_map(r, x, k, &mm, &mo);
			return mo + 1 > ps ? mo + 1 : ps;
		}
	}
	return ps;
}

/* Period extension check: deal slots for several periods without using the
 * period and compare with ref_map / ref_unmap. */
static void ref_selfcheck_parity(const struct ref *r)
{
	uint32_t pmem = r->n - 1;

	for (uint64_t row = 0; row < 6ull * r->n + 3; row++) {
		uint32_t at = (pmem + r->np) % r->n;

		for (uint32_t i = 0; i < r->nd; i++, at = (at + 1) % r->n) {
			uint64_t c = row * r->nd + i;
			uint64_t off = c * r->chunk + (c * 977) % r->chunk, moff, o2;
			uint32_t m, k2;

			ref_map(r, off, 0, &m, &moff);
			CHECK(G_REF, m == (at + r->rot) % r->n &&
			      moff == row * r->chunk + off % r->chunk,
			      "row %" PRIu64 " data %u", row, i);
			CHECK(G_REF, ref_unmap(r, m, moff, &o2, &k2) == 0 &&
			      o2 == off && k2 == 0, "unmap row %" PRIu64 " data %u", row, i);
		}
		for (uint32_t k = 0; k < r->np; k++) {
			uint64_t o2;
			uint32_t k2;

			CHECK(G_REF, ref_unmap(r, (pmem + k + r->rot) % r->n, row * r->chunk + 5,
					       &o2, &k2) == -1, "unmap row %" PRIu64 " parity %u",
			      row, k);
		}
		pmem = pmem == 0 ? r->n - 1 : pmem - 1;
	}
}

static void ref_selfcheck(const struct ref *r)
{
	uint32_t next_row[TFS_MAX_MEMBERS] = { 0 }, turn = r->rot;

	if (r->np) {
		ref_selfcheck_parity(r);
		return;
	}
	if (!r->striped)
		return;
	for (uint64_t c = 0; c < 6 * (uint64_t)r->P + 3; c++) {
		for (uint32_t k = 0; k < r->cp; k++) {
			uint64_t off = c * r->chunk + (c * 977) % r->chunk;
			uint64_t moff, o2;
			uint32_t m, k2;

			ref_map(r, off, k, &m, &moff);
			CHECK(G_REF, m == turn &&
			      moff == (uint64_t)next_row[turn] * r->chunk + off % r->chunk,
			      "chunk %" PRIu64 " copy %u", c, k);
			CHECK(G_REF, ref_unmap(r, m, moff, &o2, &k2) == 0 &&
			      o2 == off && k2 == k, "unmap chunk %" PRIu64, c);
			next_row[turn]++;
			turn = turn + 1 == r->n ? 0 : turn + 1;
		}
	}
}

/* ------------------------------------------------------------------ */
/* Geometry validation, names                                          */
/* ------------------------------------------------------------------ */

static int ref_valid(uint32_t lv, uint32_t n, uint32_t chunk)
{
	if (lv >= TFS_LEVEL_COUNT)
		return 0;
	if (chunk < 4096 || chunk > (16u << 20) || (chunk & (chunk - 1)))
		return 0;
	return n >= lvmin[lv] && n <= 32;
}

static void test_check(void)
{
	static const uint32_t chunks[] = {
		0, 1, 3, 512, 1024, 2048, 4095, 4097, 6144, 12288, 65535, 65537,
		3u << 19, (16u << 20) - 1, (16u << 20) + 1, 24u << 20,
		0x80000001u, UINT32_MAX,
	};
	uint32_t ns[50], nn = 0;

	for (uint32_t n = 0; n <= 40; n++)
		ns[nn++] = n;
	ns[nn++] = 64;
	ns[nn++] = UINT32_MAX;
	for (uint32_t lv = 0; lv < TFS_LEVEL_COUNT + 2; lv++) {
		uint32_t level = lv < TFS_LEVEL_COUNT + 1 ? lv : 99;

		for (uint32_t ci = 0; ci < 32 + sizeof(chunks) / sizeof(chunks[0]); ci++) {
			uint32_t chunk = ci < 32 ? 1u << ci : chunks[ci - 32];

			for (uint32_t i = 0; i < nn; i++) {
				struct tfs_layout l = { (enum tfs_level)level, ns[i], chunk };
				const char *why = NULL;
				int rc = tfs_layout_check(&l, &why);

				snprintf(ctx, sizeof(ctx), "level=%u n=%u chunk=%u",
					 level, ns[i], chunk);
				if (ref_valid(level, ns[i], chunk))
					CHECK(G_CHECK, rc == 0, "rejected (%s)", why ? why : "?");
				else
					CHECK(G_CHECK, rc == -EINVAL && why && *why,
					      "accepted (rc=%d)", rc);
				if (level < TFS_LEVEL_COUNT && ns[i] < lvmin[level] &&
				    ref_valid(level, lvmin[level], chunk)) {
					char want[64];

					snprintf(want, sizeof(want), "%s needs at least %u member%s",
						 lvname[level], lvmin[level],
						 lvmin[level] == 1 ? "" : "s");
					if (level >= TFS_RAID0 && level <= TFS_RAID10)
						snprintf(want, sizeof(want),
							 "this level needs at least 2 members");
					CHECK(G_CHECK, why && strcmp(why, want) == 0,
					      "reason '%s', expected '%s'", why ? why : "", want);
				}
			}
		}
	}
}

static void test_names(void)
{
	enum tfs_level lv;

	snprintf(ctx, sizeof(ctx), "names");
	for (uint32_t i = 0; i < TFS_LEVEL_COUNT; i++) {
		char up[16];

		CHECK(G_NAMES, strcmp(tfs_level_name((enum tfs_level)i), lvname[i]) == 0,
		      "name of %u is %s", i, tfs_level_name((enum tfs_level)i));
		CHECK(G_NAMES, tfs_level_parse(lvname[i], &lv) == 0 && lv == (enum tfs_level)i,
		      "parse %s", lvname[i]);
		for (size_t j = 0; j <= strlen(lvname[i]); j++)
			up[j] = (char)(lvname[i][j] >= 'a' && lvname[i][j] <= 'z'
				       ? lvname[i][j] - 32 : lvname[i][j]);
		CHECK(G_NAMES, tfs_level_parse(up, &lv) == 0 && lv == (enum tfs_level)i,
		      "parse %s", up);
		CHECK(G_NAMES, strcmp(tfs_level_ops((enum tfs_level)i)->name, lvname[i]) == 0,
		      "ops name %u", i);
	}
	CHECK(G_NAMES, strcmp(tfs_level_name(TFS_LEVEL_COUNT), "?") == 0, "name of COUNT");
	CHECK(G_NAMES, strcmp(tfs_level_name((enum tfs_level)1000), "?") == 0, "name of 1000");
	CHECK(G_NAMES, tfs_level_parse("raid7", &lv) == -EINVAL, "parse raid7");
	CHECK(G_NAMES, tfs_level_parse("raid50", &lv) == -EINVAL, "parse raid50");
	CHECK(G_NAMES, tfs_level_parse("", &lv) == -EINVAL, "parse empty");
	CHECK(G_NAMES, tfs_level_parse("raid", &lv) == -EINVAL, "parse raid");
	CHECK(G_NAMES, tfs_level_parse("raid10x", &lv) == -EINVAL, "parse raid10x");
	for (uint32_t n = 1; n <= TFS_MAX_MEMBERS; n++) {
		struct tfs_layout l = { TFS_JBOD, n, 4096 };
		static const uint64_t fids[] = { 0, 1, 2, 7, 31, 32, 33, 1000003,
						 1ull << 32, UINT64_MAX - 1, UINT64_MAX };

		for (size_t i = 0; i < sizeof(fids) / sizeof(fids[0]); i++)
			CHECK(G_NAMES, tfs_layout_rot(&l, fids[i]) == fids[i] % n,
			      "rot n=%u fid=%" PRIu64, n, fids[i]);
	}
}

/* ------------------------------------------------------------------ */
/* Per-level properties: copies, tolerates, usable, min_members         */
/* ------------------------------------------------------------------ */

static void test_level_props(enum tfs_level lv, uint32_t n)
{
	const uint32_t chunk = 4096;
	struct tfs_layout l = { lv, n, chunk };
	const struct tfs_level_ops *ops = tfs_level_ops(lv);
	uint32_t min_lose = n + 1;
	uint64_t m = 6ull * n * chunk, expect;
	struct ref r;

	snprintf(ctx, sizeof(ctx), "%s n=%u", lvname[lv], n);
	CHECK(G_LEVEL, ops->min_members == lvmin[lv], "min_members %u", ops->min_members);
	CHECK(G_LEVEL, tfs_layout_copies(&l) == ref_copies(lv, n),
	      "copies %u", tfs_layout_copies(&l));
	CHECK(G_LEVEL, ops->nparity == lvpar[lv] && tfs_layout_nparity(&l) == lvpar[lv] &&
	      tfs_layout_ndata(&l) == n - lvpar[lv], "nparity %u, ndata %u",
	      tfs_layout_nparity(&l), tfs_layout_ndata(&l));

	/* Smallest set of failed members that loses some byte of some file:
	 * all copies of a chunk, or on parity levels a data chunk in a row
	 * that lost more members than it has parity chunks. */
	for (uint32_t rot = 0; rot < n; rot++) {
		ref_build(&r, lv, n, chunk, rot);
		for (uint32_t F = 1; F < (1u << n); F++) {
			int lose = 0;

			for (uint32_t row = 0; row < r.R && r.np && !lose; row++) {
				uint32_t failed = 0, data_failed = 0;

				for (uint32_t mm = 0; mm < n; mm++) {
					failed += (F >> mm) & 1;
					data_failed += ((F >> mm) & 1) && !r.par[mm][row];
				}
				lose = failed > r.np && data_failed;
			}

			for (uint32_t c = 0; c < (r.striped ? r.P : 1) && !r.np && !lose; c++) {
				int all = 1;

				for (uint32_t k = 0; k < r.cp; k++) {
					uint32_t mm;
					uint64_t mo;

					ref_map(&r, (uint64_t)c * chunk, k, &mm, &mo);
					all &= (F >> mm) & 1;
				}
				lose = all;
			}
			if (lose && (uint32_t)__builtin_popcount(F) < min_lose)
				min_lose = (uint32_t)__builtin_popcount(F);
		}
	}
	CHECK(G_LEVEL, ops->tolerates(&l) == min_lose - 1,
	      "tolerates %u, brute force %u", ops->tolerates(&l), min_lose - 1);

	/* Usable: largest single file that fits when every member holds m
	 * bytes (m a multiple of whole periods); JBOD adds the members up. */
	if (lv == TFS_JBOD) {
		expect = m * n;
	} else {
		uint64_t lo = 0, hi = m * n + 1;	/* fits(lo), !fits(hi) */

		while (hi - lo > 1) {
			uint64_t mid = lo + (hi - lo) / 2;
			int fits = 1;

			for (uint32_t rot = 0; rot < n && fits; rot++) {
				ref_build(&r, lv, n, chunk, rot);
				for (uint32_t mm = 0; mm < n; mm++)
					fits &= ref_share(&r, mm, mid) <= m;
			}
			if (fits)
				lo = mid;
			else
				hi = mid;
		}
		expect = lo;
	}
	CHECK(G_LEVEL, ops->usable(&l, m) == expect,
	      "usable(%" PRIu64 ") = %" PRIu64 ", expected %" PRIu64,
	      m, ops->usable(&l, m), expect);
}

/* ------------------------------------------------------------------ */
/* Offsets: map/unmap, copies, jbod, extent                            */
/* ------------------------------------------------------------------ */

static const uint64_t bases[] = {
	0, 1ull << 32, (1ull << 32) + 3 * 4096 + 17, 1ull << 40, 1ull << 50, 1ull << 62,
};

#define MAX_OFFS 8192
static uint64_t offs[MAX_OFFS];
static size_t noffs;

/* Offsets near every chunk (so also every stripe) boundary of the first few
 * stripes after each base (parity levels: of two periods of n rows). */
static void gen_offsets(const struct ref *r)
{
	uint64_t nchunks = r->np ? 2ull * r->n * r->nd + 2
				 : 3ull * r->n * (r->striped ? r->cp : 1) + 2;
	int64_t deltas[] = { -2, -1, 0, 1, 2, (int64_t)r->chunk / 2 };

	noffs = 0;
	for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++)
		for (uint64_t c = 0; c <= nchunks; c++)
			for (size_t d = 0; d < sizeof(deltas) / sizeof(deltas[0]); d++) {
				uint64_t x = bases[b] + c * r->chunk;

				if (deltas[d] < 0 && x < (uint64_t)-deltas[d])
					continue;
				if (noffs < MAX_OFFS)
					offs[noffs++] = x + (uint64_t)deltas[d];
			}
}

static void test_offset(const struct tfs_layout *l, const struct ref *r, uint64_t off)
{
	struct tfs_place p[TFS_MAX_MEMBERS];
	uint32_t ncp = tfs_layout_copies(l);
	uint64_t e;

	for (uint32_t k = 0; k < ncp; k++) {
		uint32_t rm, k2 = 99;
		uint64_t rmoff, o2 = 0;
		int rc;

		tfs_layout_map(l, r->rot, off, k, &p[k]);
		ref_map(r, off, k, &rm, &rmoff);
		CHECK(G_MAP, p[k].member == rm && p[k].moff == rmoff,
		      "map(%" PRIu64 ", copy %u) = (%u, %" PRIu64 "), expected (%u, %" PRIu64 ")",
		      off, k, p[k].member, p[k].moff, rm, rmoff);
		rc = tfs_layout_unmap(l, r->rot, p[k].member, p[k].moff, &o2, &k2);
		CHECK(G_MAP, rc == 0 && o2 == off && k2 == k,
		      "unmap(map(%" PRIu64 ", %u)) = rc %d (%" PRIu64 ", %u)",
		      off, k, rc, o2, k2);
		rc = ref_unmap(r, rm, rmoff, &o2, &k2);
		CHECK(G_REF, rc == 0 && o2 == off && k2 == k, "ref unmap %" PRIu64, off);
		for (uint32_t j = 0; j < k; j++)
			CHECK(G_COPIES, p[j].member != p[k].member,
			      "off %" PRIu64 " copies %u and %u both on member %u",
			      off, j, k, p[k].member);
	}
	/* parity levels: the row's parity bytes at the same in-chunk offset
	 * hold no byte of the file */
	for (uint32_t k = 0; k < r->np; k++) {
		uint64_t row = off / r->chunk / r->nd, o2;
		uint32_t pm = r->pm[row % r->R][k], k2;

		CHECK(G_MAP, tfs_layout_unmap(l, r->rot, pm, row * r->chunk + off % r->chunk,
					      &o2, &k2) == -1,
		      "unmap of parity %u of row %" PRIu64 " (member %u) is not -1", k, row, pm);
	}
	if (l->level == TFS_JBOD) {
		for (uint32_t m = 0; m < l->nmembers; m++) {
			uint64_t o2;
			uint32_t k2;
			int rc = tfs_layout_unmap(l, r->rot, m, off, &o2, &k2);

			CHECK(G_JBOD, m == r->rot ? rc == 0 : rc == -1,
			      "unmap(member %u, %" PRIu64 ") rc %d", m, off, rc);
			CHECK(G_JBOD, (m == r->rot) == (p[0].member == m), "map on %u", m);
		}
	}

	/* extent: contiguous on every copy up to off+e-1, and (striped)
	 * no longer contiguous at off+e. */
	e = tfs_layout_extent(l, off);
	CHECK(G_EXTENT, e >= 1 && off + e > off,
	      "extent(%" PRIu64 ") = %" PRIu64, off, e);
	if (!r->striped)
		CHECK(G_EXTENT, e >= (1ull << 62),
		      "whole-file extent(%" PRIu64 ") = %" PRIu64 " is not unbounded", off, e);
	else
		CHECK(G_EXTENT, e <= r->chunk, "extent(%" PRIu64 ") = %" PRIu64 " > chunk", off, e);
	if (e < 1 || off + e <= off)
		return;
	for (uint32_t k = 0; k < ncp; k++) {
		uint64_t probes[3] = { off + e - 1, off + (e - 1) / 2, off + (e > 4096 ? 4095 : e - 1) };
		struct tfs_place q;

		for (int i = 0; i < 3; i++) {
			uint32_t rm;
			uint64_t rmoff;

			tfs_layout_map(l, r->rot, probes[i], k, &q);
			ref_map(r, probes[i], k, &rm, &rmoff);
			CHECK(G_EXTENT, q.member == p[k].member &&
			      q.moff == p[k].moff + (probes[i] - off) &&
			      rm == q.member && rmoff == q.moff,
			      "extent(%" PRIu64 ") = %" PRIu64 " but copy %u of %" PRIu64
			      " is at (%u, %" PRIu64 "), start at (%u, %" PRIu64 ")",
			      off, e, k, probes[i], q.member, q.moff, p[k].member, p[k].moff);
		}
		if (r->striped) {
			uint32_t rm;
			uint64_t rmoff;

			tfs_layout_map(l, r->rot, off + e, k, &q);
			ref_map(r, off + e, k, &rm, &rmoff);
			/* raid10 on 2 members mirrors whole member files, so
			 * nothing changes at a chunk boundary; there the
			 * extent must just end on one. */
			if (l->level == TFS_RAID10 && l->nmembers == 2)
				CHECK(G_EXTENT, (off + e) % r->chunk == 0,
				      "extent(%" PRIu64 ") = %" PRIu64 " does not end on a chunk",
				      off, e);
			else
				CHECK(G_EXTENT, !(q.member == p[k].member &&
						  q.moff == p[k].moff + e),
				      "extent(%" PRIu64 ") = %" PRIu64
				      " but copy %u stays contiguous after it", off, e, k);
			CHECK(G_EXTENT, rm == q.member && rmoff == q.moff,
			      "map(%" PRIu64 ", %u) vs reference", off + e, k);
		}
	}
}

/* Parity levels: the members holding the row's parity bytes that byte L
 * brings into use (those of data chunk 0), at member offset *mo. */
static uint32_t parity_of(const struct ref *r, uint64_t L, uint32_t *pm, uint64_t *mo)
{
	uint64_t c = L / r->chunk, row = c / (r->np ? r->nd : 1);

	if (!r->np || c % r->nd)
		return 0;
	for (uint32_t k = 0; k < r->np; k++)
		pm[k] = r->pm[row % r->R][k];
	*mo = row * r->chunk + L % r->chunk;
	return r->np;
}

/* share at L vs reference; monotone; member m holds a copy of byte L (or
 * parity that L brings into use) iff share(L+1) == share(L) + 1, and that
 * copy sits at moff share(L). */
static void test_share_at(const struct tfs_layout *l, const struct ref *r, uint64_t L)
{
	uint32_t hold[TFS_MAX_MEMBERS] = { 0 }, pm[2], npm;
	uint64_t at[TFS_MAX_MEMBERS] = { 0 }, pmo;

	for (uint32_t k = 0; k < r->cp; k++) {
		uint32_t m;
		uint64_t mo;

		ref_map(r, L, k, &m, &mo);
		hold[m] = 1;
		at[m] = mo;
	}
	npm = parity_of(r, L, pm, &pmo);
	for (uint32_t k = 0; k < npm; k++) {
		hold[pm[k]] = 1;
		at[pm[k]] = pmo;
	}
	for (uint32_t m = 0; m < l->nmembers; m++) {
		uint64_t s0 = tfs_layout_share(l, r->rot, m, L);
		uint64_t s1 = tfs_layout_share(l, r->rot, m, L + 1);

		CHECK(G_SHARE, s0 == ref_share(r, m, L),
		      "share(m%u, %" PRIu64 ") = %" PRIu64 ", expected %" PRIu64,
		      m, L, s0, ref_share(r, m, L));
		CHECK(G_SHARE, s1 == s0 + hold[m] && (!hold[m] || at[m] == s0),
		      "m%u: share(%" PRIu64 ") = %" PRIu64 ", share(+1) = %" PRIu64
		      ", holds byte: %u at %" PRIu64, m, L, s0, s1, hold[m], at[m]);
	}
}

/* Truncate to L: every member at its share; the max of size_from_member
 * gives L back and no member claims more. */
static void test_size_at(const struct tfs_layout *l, const struct ref *r, uint64_t L)
{
	uint64_t mx = 0;
	int over = 0;

	for (uint32_t m = 0; m < l->nmembers; m++) {
		uint64_t s = tfs_layout_size_from_member(l, r->rot, m, ref_share(r, m, L));

		over |= s > L;
		if (s > mx)
			mx = s;
	}
	CHECK(G_SIZE, mx == L && !over,
	      "truncate to %" PRIu64 ": max size_from_member = %" PRIu64, L, mx);
}

/* Apply a write of logical [a, b) to member sizes msize[]. */
static void apply_write(const struct ref *r, uint64_t *msize, uint64_t a, uint64_t b)
{
	for (uint64_t x = a; x < b;) {
		uint64_t y = (x / r->chunk + 1) * r->chunk;

		if (y > b)
			y = b;
		for (uint32_t k = 0; k < r->cp; k++) {
			uint32_t m;
			uint64_t mo;

			ref_map(r, x, k, &m, &mo);
			if (mo + (y - x) > msize[m])
				msize[m] = mo + (y - x);
		}
		/* the row's parity over the same in-chunk bytes */
		for (uint32_t k = 0; k < r->np; k++) {
			uint64_t row = x / r->chunk / r->nd;
			uint64_t end = row * r->chunk + (x % r->chunk) + (y - x);
			uint32_t m = r->pm[row % r->R][k];

			if (end > msize[m])
				msize[m] = end;
		}
		x = y;
	}
}

static void check_sizes(const struct tfs_layout *l, const struct ref *r,
			const uint64_t *msize, uint64_t expect, uint64_t S,
			uint64_t a, uint64_t b)
{
	uint64_t mx = 0;
	int over = 0;

	for (uint32_t m = 0; m < l->nmembers; m++) {
		uint64_t s = tfs_layout_size_from_member(l, r->rot, m, msize[m]);

		over |= s > expect;
		if (s > mx)
			mx = s;
	}
	CHECK(G_WRITE, mx == expect && !over,
	      "size %" PRIu64 ", write [%" PRIu64 ", %" PRIu64 "): max size_from_member %"
	      PRIu64 ", expected %" PRIu64, S, a, b, mx, expect);
}

/* ------------------------------------------------------------------ */
/* Byte-exact window (4K chunks)                                       */
/* ------------------------------------------------------------------ */

#define WIN_MAX (8u * 8 * 4096)
static uint8_t seen[TFS_MAX_MEMBERS][WIN_MAX];	/* 1 data, 2 parity */

/* Logical bytes in the window: four stripes, or a whole period of n rows
 * for parity levels. */
static uint64_t window_bytes(const struct tfs_layout *l, const struct ref *r)
{
	return (r->np ? (uint64_t)r->nd : 4ull) * l->nmembers * l->chunk;
}

static void test_window(const struct tfs_layout *l, const struct ref *r)
{
	const uint64_t W = window_bytes(l, r);
	uint64_t cnt[TFS_MAX_MEMBERS] = { 0 }, maxend[TFS_MAX_MEMBERS] = { 0 };
	uint64_t prev[TFS_MAX_MEMBERS] = { 0 }, pmo;
	uint32_t ncp = tfs_layout_copies(l);

	for (uint32_t m = 0; m < l->nmembers; m++) {
		memset(seen[m], 0, W);
		CHECK(G_WINDOW, tfs_layout_share(l, r->rot, m, 0) == 0, "share(m%u, 0)", m);
	}
	for (uint64_t x = 0; x < W; x++) {
		uint32_t mem[TFS_MAX_MEMBERS];

		for (uint32_t k = 0; k < ncp; k++) {
			struct tfs_place p;
			uint32_t rm, k2 = 99;
			uint64_t rmoff, o2 = 0;

			tfs_layout_map(l, r->rot, x, k, &p);
			ref_map(r, x, k, &rm, &rmoff);
			mem[k] = p.member;
			if (p.member != rm || p.moff != rmoff) {
				unit_fail(&groups[G_WINDOW], "map(%" PRIu64 ", %u) = (%u, %" PRIu64
					"), expected (%u, %" PRIu64 ")", x, k, p.member,
					p.moff, rm, rmoff);
				continue;
			}
			if (p.member >= l->nmembers || p.moff >= W) {
				unit_fail(&groups[G_WINDOW], "map(%" PRIu64 ", %u) = (%u, %" PRIu64
					") out of window", x, k, p.member, p.moff);
				continue;
			}
			CHECK(G_WINDOW, !seen[p.member][p.moff],
			      "(%" PRIu64 ", copy %u) -> (%u, %" PRIu64 ") already used",
			      x, k, p.member, p.moff);
			seen[p.member][p.moff] = 1;
			cnt[p.member]++;
			if (p.moff + 1 > maxend[p.member])
				maxend[p.member] = p.moff + 1;
			if (tfs_layout_unmap(l, r->rot, p.member, p.moff, &o2, &k2) != 0 ||
			    o2 != x || k2 != k)
				unit_fail(&groups[G_WINDOW], "unmap(map(%" PRIu64 ", %u))", x, k);
			for (uint32_t j = 0; j < k; j++)
				CHECK(G_COPIES, mem[j] != mem[k], "byte %" PRIu64
				      " copies %u,%u on member %u", x, j, k, mem[k]);
		}
		/* parity bytes that x brings into use: not a data byte, and
		 * unmap() says so */
		{
			uint32_t pm[2], npm = parity_of(r, x, pm, &pmo);

			for (uint32_t k = 0; k < npm; k++) {
				uint64_t o2;
				uint32_t k2;

				CHECK(G_WINDOW, seen[pm[k]][pmo] == 0 && pm[k] != mem[0],
				      "parity %u of byte %" PRIu64 " at (%u, %" PRIu64
				      ") already used", k, x, pm[k], pmo);
				seen[pm[k]][pmo] = 2;
				cnt[pm[k]]++;
				if (pmo + 1 > maxend[pm[k]])
					maxend[pm[k]] = pmo + 1;
				CHECK(G_WINDOW, tfs_layout_unmap(l, r->rot, pm[k], pmo, &o2, &k2) == -1,
				      "unmap of parity (%u, %" PRIu64 ")", pm[k], pmo);
			}
		}
		/* share at every length 1..W: the member's bytes of [0, x+1)
		 * are exactly [0, share) (count == highest end, no reuse) */
		for (uint32_t m = 0; m < l->nmembers; m++) {
			uint64_t s = tfs_layout_share(l, r->rot, m, x + 1);

			CHECK(G_WINDOW, s == cnt[m] && s == maxend[m] && s >= prev[m],
			      "share(m%u, %" PRIu64 ") = %" PRIu64 ": member holds %" PRIu64
			      " bytes, highest end %" PRIu64 ", previous share %" PRIu64,
			      m, x + 1, s, cnt[m], maxend[m], prev[m]);
			prev[m] = s;
		}
	}
	/* every member byte below its share holds a byte of the window */
	for (uint32_t m = 0; m < l->nmembers; m++) {
		uint64_t s = tfs_layout_share(l, r->rot, m, W);

		for (uint64_t mo = 0; mo < s; mo++)
			if (!seen[m][mo]) {
				unit_fail(&groups[G_WINDOW], "member %u byte %" PRIu64 " below share %"
					PRIu64 " holds nothing", m, mo, s);
				break;
			}
	}
}

/* Writes into a file of size S (every member truncated to its share),
 * for a, b near chunk boundaries in a window of a few stripes. */
static void test_writes_window(const struct tfs_layout *l, const struct ref *r)
{
	const uint64_t W = window_bytes(l, r);
	const uint64_t sizes[] = { 0, 1, l->chunk + 7, W / 2 + 3, W };
	static uint64_t pts[1024];
	size_t np = 0;

	for (uint64_t c = 0; c * l->chunk <= W; c++) {
		uint64_t x = c * l->chunk;
		uint64_t cand[] = { x ? x - 1 : 0, x, x + 1, x + l->chunk / 2 };

		for (int i = 0; i < 4; i++)
			if (cand[i] <= W && (np == 0 || cand[i] > pts[np - 1]))
				pts[np++] = cand[i];
	}
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		uint64_t S = sizes[si];

		for (size_t ai = 0; ai < np; ai++) {
			uint64_t msize[TFS_MAX_MEMBERS], pos = pts[ai];

			for (uint32_t m = 0; m < l->nmembers; m++)
				msize[m] = ref_share(r, m, S);
			for (size_t bi = ai + 1; bi < np; bi++) {
				uint64_t b = pts[bi];

				apply_write(r, msize, pos, b);
				pos = b;
				check_sizes(l, r, msize, b > S ? b : S, S, pts[ai], b);
			}
		}
	}
}

/* size_from_member(m, s) is the least L with share(m, L) >= s, for member
 * sizes s at and next to the member's share of each test offset. */
static void test_sfm_at(const struct tfs_layout *l, const struct ref *r, uint64_t L)
{
	for (uint32_t m = 0; m < l->nmembers; m++) {
		uint64_t s0 = tfs_layout_share(l, r->rot, m, L);

		if (l->level == TFS_JBOD && m != r->rot)
			continue;
		for (uint64_t s = s0 ? s0 - 1 : 0; s <= s0 + 1; s++) {
			uint64_t x = tfs_layout_size_from_member(l, r->rot, m, s);

			CHECK(G_SFM, tfs_layout_share(l, r->rot, m, x) >= s &&
			      (x == 0 || tfs_layout_share(l, r->rot, m, x - 1) < s),
			      "m%u size %" PRIu64 ": size_from_member %" PRIu64
			      ", share there %" PRIu64, m, s, x,
			      tfs_layout_share(l, r->rot, m, x));
		}
	}
}

/* ------------------------------------------------------------------ */
/* Parity rows                                                         */
/* ------------------------------------------------------------------ */

/* row_member/row_pos: inverse permutations of 0..n-1 that agree with the
 * dealt rows; over any n consecutive rows each member holds P once and Q
 * once. */
static void test_row(const struct tfs_layout *l, const struct ref *r, uint64_t row)
{
	uint32_t used = 0, pcount[TFS_MAX_MEMBERS] = { 0 }, qcount[TFS_MAX_MEMBERS] = { 0 };

	for (uint32_t pos = 0; pos < r->n; pos++) {
		uint32_t m = tfs_layout_row_member(l, r->rot, row, pos);
		uint32_t want = pos < r->nd ? r->tm[(row % r->R) * r->nd + pos][0]
					    : r->pm[row % r->R][pos - r->nd];

		CHECK(G_ROW, m == want && tfs_layout_row_pos(l, r->rot, row, m) == pos,
		      "row %" PRIu64 " pos %u: member %u (dealt %u), back to pos %u",
		      row, pos, m, want, tfs_layout_row_pos(l, r->rot, row, m));
		if (m < 32)
			used |= 1u << m;
	}
	CHECK(G_ROW, used == (r->n == 32 ? ~0u : (1u << r->n) - 1),
	      "row %" PRIu64 ": members used %#x", row, used);
	for (uint32_t m = 0; m < r->n; m++) {
		uint32_t pos = tfs_layout_row_pos(l, r->rot, row, m);

		CHECK(G_ROW, pos < r->n && tfs_layout_row_member(l, r->rot, row, pos) == m,
		      "row %" PRIu64 " member %u: pos %u", row, m, pos);
	}
	for (uint64_t k = 0; k < r->n; k++) {
		pcount[tfs_layout_row_member(l, r->rot, row + k, r->nd) % r->n]++;
		if (r->np == 2)
			qcount[tfs_layout_row_member(l, r->rot, row + k, r->nd + 1) % r->n]++;
	}
	for (uint32_t m = 0; m < r->n; m++)
		CHECK(G_ROW, pcount[m] == 1 && qcount[m] == (r->np == 2),
		      "rows %" PRIu64 "+%u: member %u holds P %u times, Q %u times",
		      row, r->n, m, pcount[m], qcount[m]);
}

static void test_rows(const struct tfs_layout *l, const struct ref *r)
{
	for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++)
		for (uint64_t k = 0; k < 3ull * r->n; k++)
			test_row(l, r, bases[b] / l->chunk + k);
	test_row(l, r, UINT64_MAX - r->n);
}

/* md's left-symmetric pictures (rot 0), one row a line, one token a
 * member: the data chunk number, P or Q. */
static const char *const md_raid5_4[] = {
	"0 1 2 P", "4 5 P 3", "8 P 6 7", "P 9 10 11", "12 13 14 P",
};
static const char *const md_raid6_5[] = {
	"Q 0 1 2 P", "3 4 5 P Q", "7 8 P Q 6", "11 P Q 9 10", "P Q 12 13 14",
	"Q 15 16 17 P",
};

static void test_md_picture(enum tfs_level lv, uint32_t n, const char *const *rows,
			    size_t nrows)
{
	for (uint32_t rot = 0; rot < n; rot++) {
		struct tfs_layout l = { lv, n, 4096 };

		snprintf(ctx, sizeof(ctx), "%s n=%u rot=%u picture", lvname[lv], n, rot);
		for (size_t row = 0; row < nrows; row++) {
			char buf[64], *save = NULL, *tok;
			uint32_t col = 0;

			snprintf(buf, sizeof(buf), "%s", rows[row]);
			for (tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save), col++) {
				uint32_t m = (col + rot) % n, pos = tfs_layout_row_pos(&l, rot, row, m);
				uint64_t moff = row * 4096 + 100, off;
				uint32_t cp;
				struct tfs_place p;

				if (*tok == 'P' || *tok == 'Q') {
					CHECK(G_MD, pos == l.nmembers - lvpar[lv] + (*tok == 'Q') &&
					      tfs_layout_unmap(&l, rot, m, moff, &off, &cp) == -1,
					      "row %zu member %u: %s, got pos %u", row, m, tok, pos);
					continue;
				}
				tfs_layout_map(&l, rot, strtoull(tok, NULL, 10) * 4096 + 100, 0, &p);
				CHECK(G_MD, p.member == m && p.moff == moff &&
				      tfs_layout_unmap(&l, rot, m, moff, &off, &cp) == 0 &&
				      off == strtoull(tok, NULL, 10) * 4096 + 100,
				      "row %zu member %u: chunk %s is on (%u, %" PRIu64 ")",
				      row, m, tok, p.member, p.moff);
			}
		}
	}
}

/* ------------------------------------------------------------------ */
/* One geometry                                                        */
/* ------------------------------------------------------------------ */

static void test_geometry(enum tfs_level lv, uint32_t n, uint32_t chunk, uint32_t rot)
{
	struct tfs_layout l = { lv, n, chunk };
	struct ref r;

	snprintf(ctx, sizeof(ctx), "%s n=%u chunk=%u rot=%u", lvname[lv], n, chunk, rot);
	ref_build(&r, lv, n, chunk, rot);
	ref_selfcheck(&r);
	CHECK(G_MAP, tfs_layout_copies(&l) == r.cp, "copies %u", tfs_layout_copies(&l));
	if (tfs_layout_copies(&l) != r.cp || tfs_layout_copies(&l) > n)
		return;

	gen_offsets(&r);
	test_size_at(&l, &r, 0);
	for (size_t i = 0; i < noffs; i++) {
		test_offset(&l, &r, offs[i]);
		test_share_at(&l, &r, offs[i]);
		test_size_at(&l, &r, offs[i]);
		test_sfm_at(&l, &r, offs[i]);
		if (lv == TFS_JBOD)
			for (uint32_t m = 0; m < n; m++)
				if (m != rot)
					CHECK(G_JBOD, tfs_layout_share(&l, rot, m, offs[i]) == 0 &&
					      tfs_layout_size_from_member(&l, rot, m, offs[i] + 1) == 0,
					      "member %u not rot: share/size_from_member at %" PRIu64,
					      m, offs[i]);
	}

	/* single writes far out into an empty file */
	for (size_t b = 1; b < sizeof(bases) / sizeof(bases[0]); b++) {
		const uint64_t starts[] = { 0, 1, chunk - 1, chunk, 5ull * chunk / 2 };
		const uint64_t lens[] = { 1, 2, chunk - 1, chunk, chunk + 1,
					  3ull * chunk + 5, 2ull * n * chunk + 1 };

		for (size_t si = 0; si < sizeof(starts) / sizeof(starts[0]); si++)
			for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
				uint64_t msize[TFS_MAX_MEMBERS] = { 0 };
				uint64_t a = bases[b] + starts[si], e = a + lens[li];

				apply_write(&r, msize, a, e);
				check_sizes(&l, &r, msize, e, 0, a, e);
			}
	}

	if (r.np)
		test_rows(&l, &r);
	if (chunk == 4096) {
		test_window(&l, &r);
		test_writes_window(&l, &r);
	}
}

int main(void)
{
	uint64_t total_fail = 0, geometries = 0;

	test_check();
	test_names();
	test_md_picture(TFS_RAID5, 4, md_raid5_4, sizeof(md_raid5_4) / sizeof(md_raid5_4[0]));
	test_md_picture(TFS_RAID6, 5, md_raid6_5, sizeof(md_raid6_5) / sizeof(md_raid6_5[0]));
	for (uint32_t lv = 0; lv < TFS_LEVEL_COUNT; lv++) {
		for (uint32_t n = 1; n <= 8; n++) {
			struct tfs_layout l0 = { (enum tfs_level)lv, n, 4096 };
			const char *why;

			if (tfs_layout_check(&l0, &why) != 0)
				continue;
			test_level_props((enum tfs_level)lv, n);
			for (uint32_t chunk = 4096; chunk <= (1u << 20); chunk <<= 1) {
				struct tfs_layout l = { (enum tfs_level)lv, n, chunk };

				if (tfs_layout_check(&l, &why) != 0)
					continue;
				for (uint32_t rot = 0; rot < n; rot++) {
					test_geometry((enum tfs_level)lv, n, chunk, rot);
					geometries++;
				}
			}
		}
	}

	printf("%" PRIu64 " geometries (level x members x chunk x rotation)\n", geometries);
	total_fail += unit_summary(groups, G_COUNT);
	/* 9 chunk sizes; n = 1..8 for jbod (36 rotations), 2..8 for raid0,
	 * raid1, raid10 (35), 3..8 for raid5 (33), 4..8 for raid6 (30) */
	if (geometries != 9 * (36 + 3 * 35 + 33 + 30)) {
		printf("FAIL: expected %d geometries\n", 9 * (36 + 3 * 35 + 33 + 30));
		total_fail++;
	}
	printf("%s\n", total_fail ? "FAILED" : "OK");
	return total_fail ? 1 : 0;
}
