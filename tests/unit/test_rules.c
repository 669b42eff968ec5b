/* test_rules: the SSD tier's rules (src/cache/rules.c) over every combination of their inputs against the invariants the request paths state (read.c 4, write.c 1 and 9, flush.c 4, index.c 6), and the tier's model (src/cache/model.c) on random requests against its own invariants and a few hand-worked cases (a write-back write then its read hits, write-around invalidates, the cutoff bypasses, an idle gap destages, a sample of half the extents counts about half). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/evidence.h"
#include "tierfs/model.h"
#include "tierfs/mrc.h"
#include "tierfs/rules.h"
#include "unit.h"

enum { G_READ, G_WRITE, G_HEAT, G_FLUSH, G_MODEL_INV, G_MODEL_CASES, G_SAMPLE, G_COUNT };

static struct unit_group groups[G_COUNT] = {
	[G_READ] = { .name = "read rule: every input combination" },
	[G_WRITE] = { .name = "write rule: every input combination" },
	[G_HEAT] = { .name = "heat table: sets, decay, a hot key kept" },
	[G_FLUSH] = { .name = "flusher plan and pause" },
	[G_MODEL_INV] = { .name = "model: counts add up on random requests" },
	[G_MODEL_CASES] = { .name = "model: hand-worked cases" },
	[G_SAMPLE] = { .name = "model: a half sample counts half; miniatures' destages" },
};

static const enum tfs_cache_mode modes[] = { TFS_CACHE_WRITEBACK, TFS_CACHE_WRITETHROUGH,
					     TFS_CACHE_WRITEAROUND, TFS_CACHE_OFF };

static void read_rule(void)
{
	for (unsigned bits = 0; bits < 1u << 6; bits++)
		for (unsigned mi = 0; mi < 4; mi++)
			for (unsigned heat = 0; heat < 5; heat++)
			for (unsigned pr = 1; pr < 4; pr++) {
				struct tfs_rd_in r = {
					.mode = modes[mi], .readonly = bits & 1, .seq = bits & 2,
					.promote = pr, .cached = bits & 4,
					.full = (bits & 4) && (bits & 8),
					.dirty = (bits & 4) && (bits & 16), .blocked = bits & 32,
					.heat = heat,
				};
				enum tfs_rd_act a = tfs_rule_read(&r), want;
				bool may = r.mode != TFS_CACHE_OFF && !r.readonly && heat >= pr &&
					   !r.blocked;

				snprintf(ctx, sizeof(ctx), "bits %#x mode %u heat %u promote %u", bits, mi,
					 heat, pr);
				if (r.full && (r.mode != TFS_CACHE_OFF || r.dirty))
					want = TFS_RD_HIT;
				else if (r.seq && (heat < 2 || heat < pr))	/* a stream, new to it */
					want = TFS_RD_SEQ;
				else if (!may)
					want = TFS_RD_MISS;
				else
					want = r.cached ? TFS_RD_FILL : TFS_RD_PROMOTE;
				CHECK(G_READ, a == want, "got %d want %d", a, want);
				/* never promotes what it holds, never fills what it does not */
				CHECK(G_READ, !(a == TFS_RD_PROMOTE && r.cached) &&
					      !(a == TFS_RD_FILL && !r.cached), "act %d", a);
			}
}

static void write_rule(void)
{
	for (unsigned bits = 0; bits < 1u << 5; bits++)
		for (unsigned mi = 0; mi < 4; mi++) {
			struct tfs_wr_in w = { .mode = modes[mi], .readonly = bits & 1,
					       .seq = bits & 2, .over_high = bits & 4,
					       .cached = bits & 8, .dirty = (bits & 8) && (bits & 16) };
			enum tfs_bypass why;
			enum tfs_wr_act a = tfs_rule_write(&w, &why);

			snprintf(ctx, sizeof(ctx), "bits %#x mode %u", bits, mi);
			if (w.dirty)	/* write.c invariant 1 */
				CHECK(G_WRITE, a == TFS_WR_CACHE, "dirty extent: act %d", a);
			if (a == TFS_WR_ALLOC)	/* invariant 9 */
				CHECK(G_WRITE, !w.cached && w.mode == TFS_CACHE_WRITEBACK && !w.seq &&
					       !w.over_high && !w.readonly, "alloc");
			if (!w.cached)
				CHECK(G_WRITE, a == TFS_WR_ALLOC || a == TFS_WR_RAW || a == TFS_WR_COPY ||
					       a == TFS_WR_FRESH, "uncached: %d", a);
			/* write.c invariant 11: a stream keeps a clean copy in
			 * write-back and write-through */
			CHECK(G_WRITE, (a == TFS_WR_COPY) == (!w.cached && w.seq && !w.readonly &&
							      (w.mode == TFS_CACHE_WRITEBACK ||
							       w.mode == TFS_CACHE_WRITETHROUGH)),
			      "copy %d", a);
			/* write.c invariant 12: write-through keeps what it writes */
			CHECK(G_WRITE, (a == TFS_WR_FRESH) == (!w.cached && !w.seq && !w.readonly &&
							       w.mode == TFS_CACHE_WRITETHROUGH),
			      "fresh %d", a);
			if (w.cached && !w.dirty)
				CHECK(G_WRITE, a == (w.mode == TFS_CACHE_WRITEBACK ? TFS_WR_CACHE :
						     w.mode == TFS_CACHE_WRITETHROUGH ? TFS_WR_THROUGH :
						     TFS_WR_AROUND), "cached clean: %d", a);
			CHECK(G_WRITE, (why == TFS_BYPASS_NONE) ==
				       (a == TFS_WR_CACHE || a == TFS_WR_THROUGH || a == TFS_WR_ALLOC ||
					a == TFS_WR_FRESH), "why %d act %d", why, a);
			if (a == TFS_WR_RAW || a == TFS_WR_COPY)
				CHECK(G_WRITE, why == (w.seq ? TFS_BYPASS_SEQ :
						       w.mode == TFS_CACHE_WRITEBACK && !w.readonly ?
						       TFS_BYPASS_DIRTY_HIGH : TFS_BYPASS_MODE),
				      "raw why %d", why);
		}
}

static void heat(void)
{
	uint32_t n = 64, hl = 16;
	struct tfs_heat_ent *tab = calloc(n, sizeof(*tab));
	uint64_t key = 12345, now = 1000;
	struct tfs_heat_ent *g = tfs_heat_find(tab, n - 1, hl, key, (uint32_t)now);

	snprintf(ctx, sizeof(ctx), "heat table of %u", n);
	for (int i = 0; i < 5; i++)
		tfs_heat_bump(hl, &g->heat, &g->t, (uint32_t)now);
	CHECK(G_HEAT, g->heat == 5, "5 bumps: %u", g->heat);
	CHECK(G_HEAT, tfs_heat_now(hl, g->heat, g->t, (uint32_t)now + hl) == 2, "halved");
	CHECK(G_HEAT, tfs_heat_now(hl, g->heat, g->t, (uint32_t)now + 16 * hl) == 0, "gone");
	/* three other keys of its set, cooler, do not take its entry */
	for (uint64_t k = key + n, i = 0; i < 3 * n; k += n, i++) {
		struct tfs_heat_ent *o = tfs_heat_find(tab, n - 1, hl, k, (uint32_t)now);

		tfs_heat_bump(hl, &o->heat, &o->t, (uint32_t)now);
	}
	g = tfs_heat_find(tab, n - 1, hl, key, (uint32_t)now);
	CHECK(G_HEAT, g->key == key && g->heat == 5, "hot key kept: key %llu heat %u",
	      (unsigned long long)g->key, g->heat);
	CHECK(G_HEAT, tfs_heat_entries(1) == 65536 && tfs_heat_entries(100000) == 524288,
	      "sizing");
	free(tab);
}

static void flush(void)
{
	snprintf(ctx, sizeof(ctx), "flush plan");
	/* flat out a tenth of the band below dirty_high, at least a point
	 * above dirty_low, never above dirty_high */
	for (unsigned low = 0; low <= 100; low++)
		for (unsigned high = low; high <= 100; high++) {
			unsigned f = tfs_flush_flat(low, high);

			CHECK(G_FLUSH, f <= high && (high <= low + 1 ? f == high : f > low &&
						     f == high - ((high - low) / 10 ? (high - low) / 10 : 1)),
			      "flat %u at %u:%u", f, low, high);
		}
	for (uint32_t nd = 0; nd <= 100; nd++)
		for (int idle = 0; idle < 2; idle++)
			for (int all = 0; all < 2; all++) {
				struct tfs_flush_step s = tfs_flush_plan(nd, 100, 20, 70, idle, all);
				unsigned p = tfs_flush_pause_ms(nd, 100, 20, 70, idle, all, 2);

				CHECK(G_FLUSH, s.run == (nd && (idle || all || nd >= 20)),
				      "nd %u idle %d all %d run %d", nd, idle, all, s.run);
				CHECK(G_FLUSH, !s.run || s.min_age == (idle || all || nd >= 65 ? 0 :
								       TFS_FLUSH_WRITE_AGE),
				      "nd %u min_age %u", nd, s.min_age);
				CHECK(G_FLUSH, (p > 0) == (!idle && !all && nd >= 20 && nd < 65),
				      "nd %u pause %u", nd, p);
				if (nd >= 20 && nd < 64 && !idle && !all)
					CHECK(G_FLUSH, p >= tfs_flush_pause_ms(nd + 1, 100, 20, 70,
									       false, false, 2),
					      "pause shrinks as dirt grows at %u", nd);
			}
}

/* tfs_flush_keep against sorting: random offers of 1-40 files (ages
 * 0-9, many ties) into 1-17 places; the files kept are those a sort of
 * every file at its greatest age, by age then identity, puts first. */
static void flush_keep(void)
{
	uint64_t rs = 11;

	snprintf(ctx, sizeof(ctx), "tfs_flush_keep");
	for (int run = 0; run < 20000; run++) {
		unsigned max = 1 + (unsigned)(unit_rnd(&rs) % 17), nfiles = 1 + (unsigned)(unit_rnd(&rs) % 40);
		unsigned offers = (unsigned)(unit_rnd(&rs) % 80), n = 0, m = 0;
		uint64_t fid[17], rf[40];
		uint32_t age[17], best[40], ra[40];
		bool seen[40] = { false };
		bool ok = true;

		for (unsigned k = 0; k < offers; k++) {
			unsigned f = (unsigned)(unit_rnd(&rs) % nfiles);
			uint32_t a = (uint32_t)(unit_rnd(&rs) % 10);

			n = tfs_flush_keep(fid, age, n, max, 1000 + f, a);
			if (!seen[f] || a > best[f])
				best[f] = a;
			seen[f] = true;
		}
		for (unsigned f = 0; f < nfiles; f++)	/* insertion sort: age, then fid */
			if (seen[f]) {
				unsigned i = m++;

				for (; i > 0 && (ra[i - 1] < best[f] ||
						 (ra[i - 1] == best[f] && rf[i - 1] > 1000 + f)); i--) {
					ra[i] = ra[i - 1];
					rf[i] = rf[i - 1];
				}
				ra[i] = best[f];
				rf[i] = 1000 + f;
			}
		ok = n == (m < max ? m : max);
		for (unsigned i = 0; ok && i < n; i++)
			ok = fid[i] == rf[i] && age[i] == ra[i];
		CHECK(G_FLUSH, ok, "run %d: kept %u of %u files in %u places", run, n, m, max);
	}
}

/* Young extents: every one spared, or only the hot ones; old ones never.
 * In a model between the watermarks, an extent written once is destaged
 * 5 s on either way, but at once (the next paced batch) when only hot ones
 * are spared, while one written again stays dirty. */
static void spares(void)
{
	struct tfs_model_cfg cfg = TFS_MODEL_CFG_DEFAULT(10);
	struct tfs_model *m[2];

	snprintf(ctx, sizeof(ctx), "tfs_flush_spares");
	for (unsigned heat = 0; heat < 4; heat++)
		for (uint32_t age = 0; age < 200; age += 7)
			for (int hot = 0; hot < 2; hot++)
				for (int st = 0; st < 2; st++)
					CHECK(G_FLUSH, tfs_flush_spares(st, 1000, 1000 - age, 80, heat,
									hot) ==
						       (!st && age < 80 && (!hot || heat >= 2)),
					      "age %u heat %u hot %d streamed %d", age, heat, hot, st);
	cfg.extent = 65536;
	for (int hot = 0; hot < 2; hot++) {
		cfg.spare_hot_only = hot;
		m[hot] = tfs_model_new(&cfg);
		/* 3 of 10 slots dirty (over dirty_low 20%): extent 0 written
		 * twice, 1 and 2 once */
		tfs_model_request(m[hot], 1, 0, 4096, true, 0);
		tfs_model_request(m[hot], 1, 0, 4096, true, 1);
		tfs_model_request(m[hot], 1, 65536, 4096, true, 2);
		tfs_model_request(m[hot], 1, 131072, 4096, true, 3);
		tfs_model_request(m[hot], 2, 0, 4096, false, 4);	/* the flusher runs */
	}
	snprintf(ctx, sizeof(ctx), "model, flusher between the watermarks");
	CHECK(G_FLUSH, tfs_model_dirty(m[0]) == 3, "spare all: %u dirty", tfs_model_dirty(m[0]));
	CHECK(G_FLUSH, tfs_model_dirty(m[1]) == 1, "spare hot: %u dirty", tfs_model_dirty(m[1]));
	tfs_model_free(m[0]);
	tfs_model_free(m[1]);
}

static struct tfs_model *model_in(uint32_t slots, uint32_t extent, enum tfs_cache_mode mode,
				  unsigned promote, double destage_mbps, uint64_t promote_ns)
{
	struct tfs_model_cfg cfg = TFS_MODEL_CFG_DEFAULT(slots);

	cfg.extent = extent;
	cfg.mode = mode;
	cfg.promote = promote;
	cfg.destage_mbps = destage_mbps;
	cfg.promote_ns = promote_ns;
	return tfs_model_new(&cfg);
}

static struct tfs_model *model_at(uint32_t slots, uint32_t extent, enum tfs_cache_mode mode,
				  unsigned promote, double destage_mbps)
{
	return model_in(slots, extent, mode, promote, destage_mbps, 0);
}

static struct tfs_model *model(uint32_t slots, uint32_t extent, enum tfs_cache_mode mode,
			       unsigned promote)
{
	return model_at(slots, extent, mode, promote, 0);
}

static void model_random(void)
{
	uint64_t rs = 7;

	for (int run = 0; run < 40; run++) {
		uint32_t slots = 4 + (uint32_t)(unit_rnd(&rs) % 200), extent = 65536, now = 0;
		enum tfs_cache_mode mode = modes[run % 4];
		/* every third run: destages at 20 MB/s, in the requests' time;
		 * every fifth: promotions take 30 ms */
		struct tfs_model *m = model_in(slots, extent, mode, 1 + run % 3, run % 3 ? 0 : 20,
					       run % 5 ? 0 : 30000000);

		tfs_model_set_reclaim(m, (enum tfs_reclaim)(run / 4 % 3));
		const struct tfs_model_stats *st;
		uint64_t reads = 0, writes = 0;

		snprintf(ctx, sizeof(ctx), "run %d slots %u mode %u", run, slots, mode);
		for (int i = 0; i < 20000; i++) {
			uint64_t fid = 1 + unit_rnd(&rs) % 5, off = unit_rnd(&rs) % (40u << 20);
			uint64_t len = 1 + unit_rnd(&rs) % 200000;
			bool wr = unit_rnd(&rs) % 3 == 0;

			now += (uint32_t)(unit_rnd(&rs) % 3);
			if (unit_rnd(&rs) % 5000 == 0)
				now += 200;	/* an idle gap */
			tfs_model_clock(m, (uint64_t)now * 62500000 + (uint64_t)i * 1000);
			if (unit_rnd(&rs) % 300 == 0) {	/* a cut: an unlink, or a punch */
				bool all = unit_rnd(&rs) % 2;

				tfs_model_cut(m, fid, all ? 0 : off, all ? UINT64_MAX : len);
				CHECK(G_MODEL_INV, !all || !tfs_model_request(m, fid, off, 4096, false,
									       now),
				      "a read of a file just cut away was a hit");
				reads += all ? (off + 4095) / extent - off / extent + 1 : 0;
				continue;
			}
			tfs_model_request(m, fid, off, len, wr, now);
			*(wr ? &writes : &reads) += (off + len - 1) / extent - off / extent + 1;
			CHECK(G_MODEL_INV, tfs_model_used(m) <= slots &&
					   tfs_model_dirty(m) <= tfs_model_used(m),
			      "used %u dirty %u", tfs_model_used(m), tfs_model_dirty(m));
		}
		st = tfs_model_stats(m);
		CHECK(G_MODEL_INV, st->reads == reads && st->writes == writes,
		      "pieces %llu/%llu, want %llu/%llu", (unsigned long long)st->reads,
		      (unsigned long long)st->writes, (unsigned long long)reads,
		      (unsigned long long)writes);
		CHECK(G_MODEL_INV, st->read_hits <= st->reads && st->write_hits <= st->writes &&
				   st->read_hit_bytes <= st->read_bytes,
		      "hits over accesses");
		CHECK(G_MODEL_INV, st->reclaimed <= st->flushed_extents &&
				   (tfs_model_reclaiming(m) || !st->reclaimed),
		      "reclaimed %llu of %llu destaged", (unsigned long long)st->reclaimed,
		      (unsigned long long)st->flushed_extents);
		if (mode != TFS_CACHE_WRITEBACK)
			CHECK(G_MODEL_INV, st->allocations == 0 && st->flushed_extents == 0 &&
					   tfs_model_dirty(m) == 0,
			      "not write-back: nothing dirty");
		if (mode != TFS_CACHE_WRITETHROUGH)	/* model.c invariant 13 */
			CHECK(G_MODEL_INV, st->fresh == 0, "fresh %llu not in write-through",
			      (unsigned long long)st->fresh);
		if (mode == TFS_CACHE_OFF)
			CHECK(G_MODEL_INV, st->read_hits == 0 && st->promotions == 0 &&
					   st->ssd_write_bytes == 0, "off: tier unused");
		CHECK(G_MODEL_INV, tfs_model_used(m) + st->evictions + st->cut_extents ==
				   st->promotions + st->allocations + st->copies + st->fresh,
		      "slots: used %u + evicted %llu + cut %llu != promoted %llu + allocated %llu + "
		      "copies %llu + fresh %llu",
		      tfs_model_used(m), (unsigned long long)st->evictions,
		      (unsigned long long)st->cut_extents, (unsigned long long)st->promotions,
		      (unsigned long long)st->allocations, (unsigned long long)st->copies,
		      (unsigned long long)st->fresh);
		CHECK(G_MODEL_INV, mode != TFS_CACHE_WRITEBACK || st->cut_extents,
		      "write-back: no cut emptied a slot");
		tfs_model_free(m);
	}
}

static void model_cases(void)
{
	struct tfs_model *m = model(16, 65536, TFS_CACHE_WRITEBACK, 2);
	const struct tfs_model_stats *st = tfs_model_stats(m);
	struct tfs_model_cfg bad = TFS_MODEL_CFG_DEFAULT(16);

	snprintf(ctx, sizeof(ctx), "write-back");
	tfs_model_request(m, 1, 0, 8192, true, 0);	/* allocates, 2 sectors valid */
	tfs_model_request(m, 1, 0, 8192, false, 0);
	CHECK(G_MODEL_CASES, st->allocations == 1 && st->read_hits == 1, "write then read hits");
	tfs_model_request(m, 1, 8192, 4096, false, 0);	/* not valid: a miss, heat 3 */
	CHECK(G_MODEL_CASES, st->read_hits == 1 && st->fills == 1,
	      "a miss in a partly valid extent at the threshold fills it: fills %llu",
	      (unsigned long long)st->fills);
	tfs_model_request(m, 1, 60000, 4000, false, 0);
	CHECK(G_MODEL_CASES, st->read_hits == 2, "filled: hits");
	tfs_model_request(m, 1, 65536, 4096, false, 0);	/* heat 1 < 2: no promotion */
	tfs_model_request(m, 1, 65536, 4096, false, 0);	/* heat 2: promoted */
	tfs_model_request(m, 1, 65536, 4096, false, 0);
	CHECK(G_MODEL_CASES, st->promotions == 1 && st->read_hits == 3, "promoted at 2");
	CHECK(G_MODEL_CASES, tfs_model_dirty(m) == 1, "one dirty extent: %u", tfs_model_dirty(m));
	tfs_model_request(m, 2, 0, 4096, false, 200);	/* 12 s idle: destaged */
	CHECK(G_MODEL_CASES, tfs_model_dirty(m) == 0 && st->flushed_extents == 1,
	      "an idle gap destages: dirty %u", tfs_model_dirty(m));
	tfs_model_free(m);

	snprintf(ctx, sizeof(ctx), "write-around");
	m = model(16, 65536, TFS_CACHE_WRITEAROUND, 1);
	st = tfs_model_stats(m);
	tfs_model_request(m, 1, 0, 4096, false, 0);	/* promoted at 1 */
	tfs_model_request(m, 1, 0, 4096, true, 0);	/* invalidates */
	tfs_model_request(m, 1, 0, 4096, false, 0);
	CHECK(G_MODEL_CASES, st->promotions == 1 && st->read_hits == 0 && st->fills == 1,
	      "write-around invalidated, the next read misses and fills");
	tfs_model_free(m);

	snprintf(ctx, sizeof(ctx), "sequential cutoff");
	bad.seq_cutoff = 1 << 20;
	bad.extent = 65536;
	m = tfs_model_new(&bad);
	st = tfs_model_stats(m);
	for (uint64_t off = 0; off < (8u << 20); off += 65536)
		tfs_model_request(m, 9, off, 65536, true, 0);
	/* the 16th write makes the run 1M: it and those after go around */
	CHECK(G_MODEL_CASES, st->bypass_seq == 128 - 15 && st->allocations == 15,
	      "the first 1M less a write cached, the rest bypassed: %llu bypassed, %llu allocated",
	      (unsigned long long)st->bypass_seq, (unsigned long long)st->allocations);
	tfs_model_free(m);

	snprintf(ctx, sizeof(ctx), "settings refused");
	bad = TFS_MODEL_CFG_DEFAULT(0);
	CHECK(G_MODEL_CASES, !tfs_model_new(&bad), "0 slots");
	bad = TFS_MODEL_CFG_DEFAULT(4);
	bad.extent = 3000;
	CHECK(G_MODEL_CASES, !tfs_model_new(&bad), "extent not of sectors");
	bad = TFS_MODEL_CFG_DEFAULT(4);
	bad.dirty_low = 70;
	CHECK(G_MODEL_CASES, !tfs_model_new(&bad), "low >= high");
}

static void sample(void)
{
	struct tfs_model_cfg cfg = TFS_MODEL_CFG_DEFAULT(64);
	struct tfs_model *all, *half;
	uint64_t rs = 3;

	cfg.extent = 65536;
	all = tfs_model_new(&cfg);
	cfg.sample = UINT64_MAX / 2;
	cfg.nslots = 32;
	half = tfs_model_new(&cfg);
	for (int i = 0; i < 200000; i++) {
		uint64_t off = (unit_rnd(&rs) % 2048) * 65536;

		tfs_model_request(all, 1, off, 4096, false, (uint32_t)(i / 100));
		tfs_model_request(half, 1, off, 4096, false, (uint32_t)(i / 100));
	}
	snprintf(ctx, sizeof(ctx), "uniform over 2048 extents");
	{
		const struct tfs_model_stats *a = tfs_model_stats(all), *h = tfs_model_stats(half);
		double ra = (double)a->read_hits / (double)a->reads;
		double rh = (double)h->read_hits / (double)h->reads;

		CHECK(G_SAMPLE, h->reads > 90000 && h->reads < 110000, "sampled %llu of 200000",
		      (unsigned long long)h->reads);
		CHECK(G_SAMPLE, rh > ra - 0.01 && rh < ra + 0.01, "hit ratio %.4f vs %.4f", rh, ra);
	}
	tfs_model_free(all);
	tfs_model_free(half);
}

/* Reclaim (model.c invariant 6), four slots under LRU, threshold 1,
 * watermarks too high for the flusher: extent 0 written (dirty), 1-3
 * read into the tier, 4 read: eviction meets 0 first, dirty, and takes
 * 1; with reclaim 0 is noted.  Extent 5 read: with reclaim 0 was
 * destaged before it and is its victim; without, 2 is (0 moved to the
 * head as if used).  Then 0 is gone and 2 cached with reclaim, the other
 * way round without. */
/* Four slots of 64K under kind, threshold 1, one victim an eviction: the
 * hand-worked cases' tier. */
static struct tfs_model_cfg cfg4(enum tfs_policy_kind kind)
{
	struct tfs_model_cfg cfg = TFS_MODEL_CFG_DEFAULT(4);

	cfg.extent = 65536;
	cfg.policy = kind;
	cfg.promote = 1;
	cfg.evict_batch = 1;
	return cfg;
}

/* cfg4 under LRU, the flusher held off by its watermarks: the reclaim
 * cases' tier. */
static struct tfs_model *lru4(enum tfs_reclaim r)
{
	struct tfs_model_cfg cfg = cfg4(TFS_POLICY_LRU);

	cfg.dirty_low = 98;
	cfg.dirty_high = 99;
	cfg.reclaim = r;
	return tfs_model_new(&cfg);
}

/* lru4 with reclaim on or off, after requests: "w<e>" writes 4K at the
 * start of extent e, "r<e>" reads extent e whole.  One extent was
 * written, so: reclaimed once with reclaim on (none dirty), never off. */
static struct tfs_model *lru4_after(int on, const char *what, const char *reqs)
{
	struct tfs_model *m = lru4(on ? TFS_RECLAIM_ON : TFS_RECLAIM_OFF);
	const struct tfs_model_stats *st;
	char op;
	int e, used;

	snprintf(ctx, sizeof(ctx), "%s, reclaim %s", what, on ? "on" : "off");
	for (; sscanf(reqs, " %c%d%n", &op, &e, &used) == 2; reqs += used)
		tfs_model_request(m, 1, (uint64_t)e * 65536, op == 'w' ? 4096 : 65536, op == 'w', 0);
	st = tfs_model_stats(m);
	CHECK(G_MODEL_CASES, st->reclaimed == (uint64_t)on && tfs_model_dirty(m) == 1u - on,
	      "reclaimed %llu, %u dirty", (unsigned long long)st->reclaimed, tfs_model_dirty(m));
	return m;
}

static void model_reclaim(void)
{
	for (int on = 0; on < 2; on++) {
		struct tfs_model *m = lru4_after(on, "reclaim", "w0 r1 r2 r3 r4 r5");

		CHECK(G_MODEL_CASES, tfs_model_request(m, 1, 2 * 65536, 65536, false, 0) == on,
		      "extent 2 %s", on ? "missed" : "hit");
		CHECK(G_MODEL_CASES, tfs_model_request(m, 1, 0, 4096, false, 0) == !on,
		      "extent 0 %s", on ? "hit" : "missed");
		tfs_model_free(m);
	}
}

/* Clean-ahead (model.c invariant 6): extent 10 read (clean, the
 * oldest), 0 written (dirty), 11 and 12 read: full.  Reading 13 evicts
 * 10, and with reclaim on notes 0, the next victim but one, which the
 * flusher cleans before the next request: reading 14 evicts 0, and 11
 * and 12 stay.  Without reclaim (or without clean-ahead) eviction passes
 * over 0 and takes 11. */
static void model_clean_ahead(void)
{
	for (int on = 0; on < 2; on++) {
		struct tfs_model *m = lru4_after(on, "clean-ahead", "r10 w0 r11 r12 r13 r14");

		CHECK(G_MODEL_CASES, tfs_model_request(m, 1, 12 * 65536, 65536, false, 0),
		      "extent 12 missed");
		CHECK(G_MODEL_CASES, tfs_model_request(m, 1, 11 * 65536, 65536, false, 0) == on,
		      "extent 11 %s", on ? "missed" : "hit");
		tfs_model_free(m);
	}
}

/* A destage takes time (model.c invariant 3): at 4.096 MB/s a 4 KiB
 * destage takes 1 ms.  Ten slots, 7 extents written 4 KiB each at 0 ms,
 * then a read: the flusher (70%: flat out) sends all 7 in a round,
 * newest first as the daemon's file chain has them (extent 6 first), and
 * they stay dirty (not evictable, counted) until 1, 2, ... 7 ms.  At
 * 3.5 ms three are clean, and extent 1, on its way, is written again: it
 * stays dirty when its destage ends.  At 9 ms that one is dirty (10%,
 * under dirty_low: no round).  Without a rate the round is done at once. */
static void model_destage_time(void)
{
	for (int timed = 0; timed < 2; timed++) {
		struct tfs_model *m = model_at(10, 65536, TFS_CACHE_WRITEBACK, 1, timed ? 4.096 : 0);
		const uint32_t want[2][4] = { { 0, 0, 1, 1 }, { 7, 4, 4, 1 } };
		const uint64_t at[4] = { 0, 3500000, 3500000, 9000000 };

		snprintf(ctx, sizeof(ctx), "destage time, %s", timed ? "4.096 MB/s" : "at once");
		for (uint64_t e = 0; e < 7; e++)
			tfs_model_request(m, 1, e * 65536, 4096, true, 0);
		for (int k = 0; k < 4; k++) {
			tfs_model_clock(m, at[k]);
			if (k == 2)
				tfs_model_request(m, 1, 1 * 65536, 4096, true, 0);
			else
				tfs_model_request(m, 2, (uint64_t)k * 65536, 4096, false, 0);
			CHECK(G_MODEL_CASES, tfs_model_dirty(m) == want[timed][k], "step %d: %u dirty",
			      k, tfs_model_dirty(m));
		}
		CHECK(G_MODEL_CASES, tfs_model_stats(m)->flushed_extents == 7,
		      "%llu destaged", (unsigned long long)tfs_model_stats(m)->flushed_extents);
		tfs_model_free(m);
	}
}

/* The flusher's files, oldest first (model.c invariant 3, rules.h
 * tfs_flush_keep, as flush.c next_dirty): 30 slots, 19 files (identities
 * 100-118, one 4K extent each, written at tick 0 in that order) written
 * again at ticks 1-19 in a shuffled order (113 and 107 first), 63%: too
 * young for the paced flusher; a 20th file at tick 20 makes 67%, over
 * tfs_flush_flat's 65%: flat out, a round of the 16 oldest at 4.096 MB/s, 1
 * ms each.  At 2.5 ms 113 and 107 are clean, and written again are dirty
 * again: 20.  In the identities' order (the daemon's before) or the
 * slots' (the model's before) 100 and 101 went first, and both writes
 * found their extents on the way: 18. */
static void model_flush_order(void)
{
	const uint64_t order[19] = { 113, 107, 116, 100, 104, 101, 110, 118, 102, 105,
				     111, 103, 117, 106, 112, 109, 114, 108, 115 };
	struct tfs_model *m = model_at(30, 65536, TFS_CACHE_WRITEBACK, 1, 4.096);

	snprintf(ctx, sizeof(ctx), "flush order");
	for (uint64_t f = 100; f < 119; f++)
		tfs_model_request(m, f, 0, 4096, true, 0);
	for (uint32_t i = 0; i < 19; i++)
		tfs_model_request(m, order[i], 0, 4096, true, 1 + i);
	tfs_model_request(m, 119, 0, 4096, true, 20);
	tfs_model_request(m, 1, 0, 4096, false, 20);	/* the round starts */
	tfs_model_clock(m, 2500000);
	tfs_model_request(m, 113, 0, 4096, true, 20);
	tfs_model_request(m, 107, 0, 4096, true, 20);
	CHECK(G_MODEL_CASES, tfs_model_dirty(m) == 20, "%u dirty at 2.5 ms", tfs_model_dirty(m));
	tfs_model_free(m);
}

/* A cut (model.c invariant 8): four slots, threshold 1.  File 1 has 8K
 * written at extent 0 and 1, file 2 extents 2 and 3 read.  Cutting file
 * 1's [0, 68K) empties extent 0's slot and leaves extent 1 its second
 * sector, dirty: 3 used, 1 dirty, that sector a hit and the first a miss.
 * An unlink (a cut to the end) empties it too.  Then at 4.096 MB/s
 * (model_destage_time's rate), ten slots: 7 extents of file 1 written,
 * on their way to the RAID after a read (of file 2, promoted), and
 * unlinked: none of them is left, and 3 extents written into their slots
 * stay dirty when those destages would have ended. */
static void model_cut(void)
{
	struct tfs_model *m = model(4, 65536, TFS_CACHE_WRITEBACK, 1);
	const struct tfs_model_stats *st = tfs_model_stats(m);

	snprintf(ctx, sizeof(ctx), "cut");
	tfs_model_request(m, 1, 0, 8192, true, 0);
	tfs_model_request(m, 1, 65536, 8192, true, 0);
	tfs_model_request(m, 2, 2 * 65536, 2 * 65536, false, 0);
	tfs_model_cut(m, 1, 0, 65536 + 4096);
	CHECK(G_MODEL_CASES, tfs_model_used(m) == 3 && tfs_model_dirty(m) == 1 &&
			     st->cut_extents == 1,
	      "used %u dirty %u cut %llu", tfs_model_used(m), tfs_model_dirty(m),
	      (unsigned long long)st->cut_extents);
	CHECK(G_MODEL_CASES, tfs_model_request(m, 1, 65536 + 4096, 4096, false, 0) &&
			     !tfs_model_request(m, 1, 65536, 4096, false, 0),
	      "the sector left is not the one that hits");
	tfs_model_cut(m, 1, 0, UINT64_MAX);
	CHECK(G_MODEL_CASES, tfs_model_used(m) == 2 && tfs_model_dirty(m) == 0,
	      "after the unlink: used %u dirty %u", tfs_model_used(m), tfs_model_dirty(m));
	tfs_model_free(m);

	snprintf(ctx, sizeof(ctx), "cut on the way");
	m = model_at(10, 65536, TFS_CACHE_WRITEBACK, 1, 4.096);
	for (uint64_t e = 0; e < 7; e++)
		tfs_model_request(m, 1, e * 65536, 4096, true, 0);
	tfs_model_request(m, 2, 0, 4096, false, 0);	/* the round starts */
	tfs_model_clock(m, 2500000);
	tfs_model_cut(m, 1, 0, UINT64_MAX);
	CHECK(G_MODEL_CASES, tfs_model_used(m) == 1 && tfs_model_dirty(m) == 0,
	      "unlinked on the way: used %u dirty %u", tfs_model_used(m), tfs_model_dirty(m));
	for (uint64_t e = 0; e < 3; e++)	/* reuses the slots on their way */
		tfs_model_request(m, 3, e * 65536, 4096, true, 0);
	tfs_model_clock(m, 9000000);
	tfs_model_request(m, 2, 65536, 4096, false, 0);
	CHECK(G_MODEL_CASES, tfs_model_dirty(m) == 3 && tfs_model_used(m) == 5,
	      "later: used %u dirty %u", tfs_model_used(m), tfs_model_dirty(m));
	tfs_model_free(m);
}

/* A stream's writes (model.c invariant 10): LRU, 4 slots of 64K,
 * threshold 1, a cutoff of 128K and a row of 1 MiB (so a 64K write of a
 * stream takes the tier).  Extents 10 and 12 read (cached), then a file
 * written from 0 in 64K writes: its second write on is a stream's, so
 * the flusher destages those extents young and demotes them, and each
 * next write of the stream (1/4 s apart, past the flusher's pauses) takes
 * the last one's slot: 10 and 12 stay.
 * A tier that spared them young, or kept them where a write puts an
 * extent, evicted 10 and 12 for them. */
static void model_streamed(void)
{
	struct tfs_model_cfg cfg = cfg4(TFS_POLICY_LRU);
	struct tfs_model *m;

	cfg.seq_cutoff = 131072;
	cfg.row_bytes = 1 << 20;
	m = tfs_model_new(&cfg);
	snprintf(ctx, sizeof(ctx), "streamed");
	tfs_model_request(m, 1, 10 * 65536, 65536, false, 0);
	tfs_model_request(m, 1, 12 * 65536, 65536, false, 0);
	for (uint32_t e = 0; e < 6; e++)	/* 1/4 s apart: past the flusher's pauses */
		tfs_model_request(m, 2, e * 65536ull, 65536, true, 4 * e);
	CHECK(G_MODEL_CASES, tfs_model_request(m, 1, 10 * 65536, 4096, false, 24) &&
			     tfs_model_request(m, 1, 12 * 65536, 4096, false, 24),
	      "a stream's writes evicted the read extents");
	CHECK(G_MODEL_CASES, tfs_model_stats(m)->flushed_extents >= 4, "%llu destaged",
	      (unsigned long long)tfs_model_stats(m)->flushed_extents);
	tfs_model_free(m);
}

/* A stream's clean copies (rules.h tfs_copy_take, write.c invariant 11):
 * every row while fewer than TFS_COPY_SAMPLE were resolved; resolved
 * unused, 1 row in TFS_COPY_SAMPLE; 1 used in TFS_COPY_SAMPLE resolved
 * brings every row back; the counts stay under the window. */
static void copy_evidence(void)
{
	struct tfs_copy_ev e = { 0 };
	unsigned took = 0;

	snprintf(ctx, sizeof(ctx), "copy evidence");
	for (unsigned i = 0; i < TFS_COPY_SAMPLE; i++) {
		CHECK(G_WRITE, tfs_copy_take(&e), "row %u, %u resolved", i, i);
		tfs_copy_resolved(&e, false);
	}
	for (unsigned i = 0; i < 10 * TFS_COPY_SAMPLE; i++)
		took += tfs_copy_take(&e);
	CHECK(G_WRITE, took == 10, "%u of %u rows copied, all unused", took, 10 * TFS_COPY_SAMPLE);
	tfs_copy_resolved(&e, true);	/* 1 of 17 used */
	CHECK(G_WRITE, !tfs_copy_take(&e) || e.tick % TFS_COPY_SAMPLE == 0, "1 of 17 used");
	tfs_copy_resolved(&e, true);	/* 2 of 18 */
	for (unsigned i = 0; i < 4; i++)
		CHECK(G_WRITE, tfs_copy_take(&e), "2 of 18 used, row %u", i);
	for (unsigned i = 0; i < 10 * TFS_COPY_WINDOW; i++) {
		tfs_copy_resolved(&e, i % 20 == 0);
		CHECK(G_WRITE, e.used + e.unused < TFS_COPY_WINDOW, "%u + %u past the window",
		      e.used, e.unused);
	}
	CHECK(G_WRITE, e.used * 20 >= e.used + e.unused - 20 && e.used * 20 <= e.used + e.unused + 20,
	      "1 in 20 used: %u of %u", e.used, e.used + e.unused);
	CHECK(G_WRITE, !tfs_copy_take(&e) || e.tick % TFS_COPY_SAMPLE == 0, "1 in 20 used");
}

/* The model's copies (model.c invariant 12): 8 slots, a stream of 64K
 * rows written and never read takes a copy of each row until 16 copies
 * left unused, then of 1 in 16; a stream whose rows are read back right
 * after they are written gets every row copied again once a few of the
 * sampled copies were used. */
static void model_copies(void)
{
	struct tfs_model_cfg cfg = cfg4(TFS_POLICY_LRU);
	const struct tfs_model_stats *st;
	struct tfs_model *m;
	uint64_t copies, hits = 0;
	uint32_t t = 0;

	cfg.nslots = 8;
	cfg.seq_cutoff = 65536;
	cfg.row_bytes = 65536;
	m = tfs_model_new(&cfg);
	st = tfs_model_stats(m);
	snprintf(ctx, sizeof(ctx), "copies");
	for (uint64_t r = 0; r < 408; r++)
		tfs_model_request(m, 2, r * 65536, 65536, true, t++);
	CHECK(G_MODEL_CASES, st->copies == 8 + 16 + 24, "%llu copies of 408 rows never read",
	      (unsigned long long)st->copies);
	copies = st->copies;
	for (uint64_t r = 0; r < 400; r++) {
		tfs_model_request(m, 3, r * 65536, 65536, true, t++);
		if (tfs_model_request(m, 3, r * 65536, 65536, false, t++) && r >= 300)
			hits++;
	}
	CHECK(G_MODEL_CASES, hits == 100, "%llu of the last 100 rows read back hit (%llu copies)",
	      (unsigned long long)hits, (unsigned long long)(st->copies - copies));
	tfs_model_free(m);
}

/* A promotion takes time (cfg.promote_ns, model.c invariant 9): 1 ms,
 * on each of the 4 promoters.  Extent 0 read at 0 (a miss: queued), again
 * at 0.5 ms (a miss that queues nothing: on its way), at 1.5 ms (a hit).
 * Then 1,100 extents read at one instant: the 4 idle promoters take 4,
 * 1,024 wait, the rest are dropped, and a read of one on its way queues
 * nothing.  The promoters finish one every 0.25 ms from then on: 6 by
 * 3 ms (a fixed delay had all 1,024 done by 2.5 ms), all by 259 ms. */
/* The config of the promoters' cases: 2,048 slots of 64K, threshold 1,
 * 1 ms a promotion on promoters of them (0: the daemon's). */
static struct tfs_model_cfg promoters_cfg(double promoters)
{
	struct tfs_model_cfg cfg = TFS_MODEL_CFG_DEFAULT(2048);

	cfg.extent = 65536;
	cfg.promote = 1;
	cfg.promote_ns = 1000000;
	cfg.promoters = promoters;
	return cfg;
}

static void model_promote_time(void)
{
	struct tfs_model_cfg cfg = promoters_cfg(0);
	struct tfs_model *m = tfs_model_new(&cfg);
	const struct tfs_model_stats *st = tfs_model_stats(m);

	snprintf(ctx, sizeof(ctx), "promote time");
	CHECK(G_MODEL_CASES, !tfs_model_request(m, 1, 0, 4096, false, 0), "first read hit");
	tfs_model_clock(m, 500000);
	CHECK(G_MODEL_CASES, !tfs_model_request(m, 1, 0, 4096, false, 0) && st->promotions == 0,
	      "a read on the way hit, or %llu promoted", (unsigned long long)st->promotions);
	tfs_model_clock(m, 1500000);
	CHECK(G_MODEL_CASES, tfs_model_request(m, 1, 0, 4096, false, 0) && st->promotions == 1,
	      "not readable after its time: %llu promoted", (unsigned long long)st->promotions);
	for (uint64_t x = 0; x < 1100; x++)	/* apart: no stream */
		tfs_model_request(m, 2, x * 65536, 4096, false, 0);
	CHECK(G_MODEL_CASES, st->promote_dropped == 1100 - TFS_PROMOTERS - TFS_PROMOTE_QUEUE,
	      "%llu dropped", (unsigned long long)st->promote_dropped);
	tfs_model_request(m, 2, 5 * 65536, 4096, false, 0);	/* on its way: not queued again */
	CHECK(G_MODEL_CASES, st->promote_dropped == 1100 - TFS_PROMOTERS - TFS_PROMOTE_QUEUE,
	      "a read on the way queued again: %llu dropped",
	      (unsigned long long)st->promote_dropped);
	tfs_model_clock(m, 3000000);	/* started at 1.5 (4), 1.75 and 2 ms */
	tfs_model_request(m, 3, 0, 4096, false, 0);
	CHECK(G_MODEL_CASES, st->promotions == 1 + 4 + 2, "%llu promoted by 3 ms",
	      (unsigned long long)st->promotions);
	tfs_model_clock(m, 259000000);	/* extent 3's, queued last, done at 258.75 ms */
	tfs_model_request(m, 4, 0, 4096, false, 0);
	CHECK(G_MODEL_CASES, st->promotions == 1 + TFS_PROMOTERS + TFS_PROMOTE_QUEUE + 1,
	      "%llu promoted in the promoters' time", (unsigned long long)st->promotions);
	tfs_model_free(m);

	/* a miniature's: at once until given a time (the promoters'
	 * measured one, watch.c invariant 7), then its own share of the
	 * queue and of the promoters (one, 1 ms a promotion), and at once
	 * again when the time is 0 */
	cfg.promote_ns = 0;
	cfg.promote_queue = 8;
	cfg.promoters = 1;
	m = tfs_model_new(&cfg);
	st = tfs_model_stats(m);
	snprintf(ctx, sizeof(ctx), "promote time set");
	tfs_model_request(m, 1, 0, 4096, false, 0);
	CHECK(G_MODEL_CASES, tfs_model_request(m, 1, 0, 4096, false, 0), "not at once");
	tfs_model_set_promote_time(m, 1000000);
	for (uint64_t x = 0; x < 10; x++)	/* 1 taken, 8 wait */
		tfs_model_request(m, 2, x * 65536, 4096, false, 0);
	CHECK(G_MODEL_CASES, st->promote_dropped == 1 && st->promotions == 1,
	      "%llu dropped, %llu promoted", (unsigned long long)st->promote_dropped,
	      (unsigned long long)st->promotions);
	CHECK(G_MODEL_CASES, !tfs_model_request(m, 2, 0, 4096, false, 0), "a read on the way hit");
	tfs_model_set_promote_time(m, 0);
	tfs_model_request(m, 3, 0, 4096, false, 0);	/* at once */
	CHECK(G_MODEL_CASES, tfs_model_request(m, 3, 0, 4096, false, 0), "not at once after 0");
	tfs_model_clock(m, 2000000);	/* the queued ones keep their time: 2 done */
	tfs_model_request(m, 4, 0, 4096, false, 0);
	CHECK(G_MODEL_CASES, st->promotions == 1 + 1 + 2 + 1, "%llu promoted by 2 ms",
	      (unsigned long long)st->promotions);
	tfs_model_clock(m, 9000000);	/* the last started at 8 ms */
	tfs_model_request(m, 5, 0, 4096, false, 0);
	CHECK(G_MODEL_CASES, st->promotions == 1 + 1 + 9 + 2, "%llu promoted by 9 ms",
	      (unsigned long long)st->promotions);
	tfs_model_free(m);
}

/* A rise of the threshold drops the promotions waiting under it (model.c
 * invariant 9, flush.c invariant 20): one promoter, 1 ms a promotion,
 * threshold 1.  Extents 0-5 read once at 0: 0 is taken, 1-5 wait (starts
 * 1-5 ms); 3 is read again (heat 2).  The threshold rises to 2: 1, 2, 4
 * and 5 are dropped, and 3 takes the start of 1, so by 2 ms it is read
 * from the tier.  Before, 1 came in at 2 ms and 3 at 4 ms. */
static void model_promote_stale(void)
{
	struct tfs_model_cfg cfg = promoters_cfg(1);
	struct tfs_model *m = tfs_model_new(&cfg);
	const struct tfs_model_stats *st = tfs_model_stats(m);

	snprintf(ctx, sizeof(ctx), "promote stale");
	for (uint64_t x = 0; x < 6; x++)	/* apart: no stream */
		tfs_model_request(m, 2, x * 65536, 4096, false, 0);
	tfs_model_request(m, 2, 3 * 65536, 4096, false, 0);	/* heat 2, on its way */
	tfs_model_set_promote(m, 2);
	CHECK(G_MODEL_CASES, st->promote_dropped == 4, "%llu dropped",
	      (unsigned long long)st->promote_dropped);
	tfs_model_clock(m, 2000000);
	CHECK(G_MODEL_CASES, tfs_model_request(m, 2, 3 * 65536, 4096, false, 0) &&
			     st->promotions == 2,
	      "extent 3 not in by 2 ms (%llu promoted)", (unsigned long long)st->promotions);
	tfs_model_clock(m, 10000000);	/* the dropped ones stay out */
	CHECK(G_MODEL_CASES, !tfs_model_request(m, 2, 1 * 65536, 4096, false, 0) &&
			     st->promotions == 2,
	      "a dropped promotion came in (%llu promoted)", (unsigned long long)st->promotions);
	tfs_model_free(m);
}

/* A request's promotions run side by side (model.c invariant 1): under
 * W-TinyLFU, four slots (a window of one), threshold 1, extents 1-4 read
 * (promoted: full), then one read across extents 5 and 6.  Promoting 6
 * evicts; the window's oldest, 5, is the candidate and loses its duel (a
 * tie), but it is still being promoted (busy), so it stays and main's
 * oldest goes.  Promoted one after the other, 5 went at once.  Then one
 * read of extents 7-10, four promotions: the fourth's eviction finds the
 * first three busy (TFS_PROMOTERS in flight), and all four stay. */
static void model_siblings(void)
{
	struct tfs_model_cfg cfg = cfg4(TFS_POLICY_WTINYLFU);
	struct tfs_model *m;

	m = tfs_model_new(&cfg);
	snprintf(ctx, sizeof(ctx), "siblings");
	for (uint64_t e = 1; e <= 4; e++)
		tfs_model_request(m, 1, e * 65536, 65536, false, 0);
	tfs_model_request(m, 1, 5 * 65536 + 32768, 65536, false, 0);
	CHECK(G_MODEL_CASES, tfs_model_stats(m)->promotions == 6, "%llu promotions",
	      (unsigned long long)tfs_model_stats(m)->promotions);
	CHECK(G_MODEL_CASES, tfs_model_request(m, 1, 6 * 65536, 65536, false, 0), "extent 6 missed");
	CHECK(G_MODEL_CASES, tfs_model_request(m, 1, 5 * 65536, 65536, false, 0), "extent 5 missed");
	tfs_model_request(m, 1, 7 * 65536, 4 * 65536, false, 0);
	for (uint64_t e = 7; e <= 10; e++)
		CHECK(G_MODEL_CASES, tfs_model_request(m, 1, e * 65536, 65536, false, 0),
		      "extent %llu missed after a read of 7-10", (unsigned long long)e);
	tfs_model_free(m);
}

/* Reclaim's evidence (model.c invariant 7), four slots under LRU,
 * threshold 1, no flusher: extent 0 written (dirty), then reads cycle
 * over extents 1-4, three slots for four: each time 0 reaches the LRU
 * tail eviction passes over it and takes a clean extent, which the cycle
 * reads again (a miss: +1).  After TFS_EVIDENCE_ON of those reclaim is
 * on, and 0 is destaged and evicted.  With 0 read after each of its
 * contests (a hit of a kept extent: -1) the score never gets there. */
static void model_evidence(void)
{
	for (int reread = 0; reread < 2; reread++) {
		const struct tfs_model_stats *st;
		struct tfs_model *m;
		unsigned reads = 0, at = 0;

		snprintf(ctx, sizeof(ctx), "evidence, extent 0 %s", reread ? "re-read" : "not read");
		m = lru4(TFS_RECLAIM_AUTO);
		tfs_model_request(m, 1, 0, 4096, true, 0);
		while (reads < 4000 && !at) {
			for (uint64_t e = 1; e <= 4; e++, reads++)
				tfs_model_request(m, 1, e * 65536, 65536, false, 0);
			if (reread)
				tfs_model_request(m, 1, 0, 4096, false, 0);
			if (tfs_model_reclaiming(m))
				at = reads;
		}
		if (!reread) {
			/* a read counts once at most: TFS_EVIDENCE_ON of them at least */
			CHECK(G_MODEL_CASES, at >= TFS_EVIDENCE_ON && at <= 8 * TFS_EVIDENCE_ON,
			      "reclaim on after %u reads", at);
			for (uint64_t e = 1; e <= 4; e++)
				tfs_model_request(m, 1, e * 65536, 65536, false, 0);
			st = tfs_model_stats(m);
			CHECK(G_MODEL_CASES, st->reclaimed == 1 && tfs_model_dirty(m) == 0,
			      "reclaimed %llu, %u dirty", (unsigned long long)st->reclaimed,
			      tfs_model_dirty(m));
		} else {
			CHECK(G_MODEL_CASES, !at && tfs_model_dirty(m) == 1,
			      "reclaim on after %u reads; %u dirty", at, tfs_model_dirty(m));
		}
		tfs_model_free(m);
	}
}

/* A miniature (model.h: a quarter of the extents in a quarter of the
 * slots) turns reclaim on at about the request the tier it stands for
 * does (evidence.c invariant 3): 400 slots against 100 at rate 1/4, 8K
 * written into 200 extents (dirty: the flusher held off), random reads
 * over 600 others.  Returns the request at which m turned it on, or 0. */
static unsigned evidence_turn(struct tfs_model *m)
{
	uint64_t rs = 99;

	for (unsigned i = 1; i <= 200000; i++) {
		uint64_t r = unit_rnd(&rs);

		if (r % 4 == 0)
			tfs_model_request(m, 1, (r >> 8) % 200 * 65536, 8192, true, i / 64);
		else
			tfs_model_request(m, 2, (r >> 8) % 600 * 65536, 8192, false, i / 64);
		if (tfs_model_reclaiming(m))
			return i;
	}
	return 0;
}

static void model_evidence_sampled(void)
{
	struct tfs_model_cfg cfg = TFS_MODEL_CFG_DEFAULT(400);
	struct tfs_model *full, *mini;
	unsigned a, b;

	snprintf(ctx, sizeof(ctx), "evidence in a miniature");
	cfg.extent = 65536;
	cfg.promote = 1;
	cfg.dirty_low = 90;
	cfg.dirty_high = 95;
	cfg.reclaim = TFS_RECLAIM_AUTO;
	full = tfs_model_new(&cfg);
	cfg.nslots = 100;
	cfg.sample = UINT64_MAX / 4;
	mini = tfs_model_new(&cfg);
	a = evidence_turn(full);
	b = evidence_turn(mini);
	CHECK(G_MODEL_CASES, a && b && b < 2 * a && a < 2 * b,
	      "reclaim on at request %u in the tier, %u in its miniature", a, b);
	tfs_model_free(full);
	tfs_model_free(mini);
}

/* The live curve's miniatures destage at the rate the tier gives them
 * (tfs_mrc_set_destage, watch.c invariant 5): a tier of 64 slots, whose
 * sizes all sample every extent (mrc.c invariant 1), so its 1x curve is a
 * full model's read hit ratio, on a stream of 32K requests 1 ms apart,
 * writes over 400 extents, reads of 32 hot ones: at 2 MB/s the curve is
 * what a model destaging at 2 MB/s hits, far from what one destaging at
 * once hits: here more, since at dirty_high the writes go around the
 * tier and stop displacing the hot extents (.978 against .817). */
static void mrc_destage(void)
{
	struct tfs_model_cfg cfg = TFS_MODEL_CFG_DEFAULT(64);
	struct tfs_mrc *r;
	struct tfs_model *m[2];
	double curve[TFS_MRC_SIZES], want[2];
	uint64_t rs = 3;

	cfg.extent = 65536;
	r = tfs_mrc_new(&cfg, TFS_MRC_BUDGET, TFS_MRC_RATE, false);
	m[0] = tfs_model_new(&cfg);
	cfg.destage_mbps = 2;
	m[1] = tfs_model_new(&cfg);
	tfs_mrc_set_destage(r, 2);
	snprintf(ctx, sizeof(ctx), "mrc destage");
	for (int i = 0; i < 40000; i++) {
		bool wr = unit_rnd(&rs) % 3 != 0;
		uint64_t ns = (uint64_t)i * 1000000, off = (unit_rnd(&rs) % (wr ? 400 : 32)) * 65536;
		uint32_t now = (uint32_t)(ns / 62500000);

		for (int k = 0; k < 2; k++) {
			tfs_model_clock(m[k], ns);
			tfs_model_apply(m[k], 1, off, 32768, wr, false, now);
		}
		tfs_mrc_clock(r, ns);
		tfs_mrc_request(r, 1, off, 32768, wr, false, now);
	}
	tfs_mrc_curve(r, curve);
	for (int k = 0; k < 2; k++)
		want[k] = (double)tfs_model_stats(m[k])->read_hits / (double)tfs_model_stats(m[k])->reads;
	CHECK(G_SAMPLE, curve[2] == want[1], "1x %.4f, a model at 2 MB/s %.4f", curve[2], want[1]);
	CHECK(G_SAMPLE, want[1] > want[0] + 0.1, "at once %.4f, at 2 MB/s %.4f", want[0], want[1]);
	tfs_mrc_free(r);
	tfs_model_free(m[0]);
	tfs_model_free(m[1]);
}

static void count_act(void *arg, enum tfs_model_act act)
{
	uint64_t *n = arg;

	n[act]++;
}

/* model.c invariant 11: a watched model tells every piece once (hits as
 * hits); a curve made from the watched settings tells its watcher
 * nothing of its miniatures' pieces. */
static void model_watch(void)
{
	uint64_t told[TFS_MA_COUNT] = { 0 }, all = 0, mini = 0, rs = 9;
	struct tfs_model_cfg cfg = TFS_MODEL_CFG_DEFAULT(16);
	const struct tfs_model_stats *st;
	struct tfs_model *m;
	struct tfs_mrc *r;

	cfg.extent = 65536;
	cfg.watch = count_act;
	cfg.watch_arg = told;
	m = tfs_model_new(&cfg);
	r = tfs_mrc_new(&cfg, TFS_MRC_BUDGET, TFS_MRC_RATE, true);
	snprintf(ctx, sizeof(ctx), "model watch");
	CHECK(G_MODEL_CASES, m && r, "made");
	if (!m || !r)
		goto out;
	for (int i = 0; i < 5000; i++) {
		bool wr = unit_rnd(&rs) % 3 == 0;
		uint64_t off = (unit_rnd(&rs) % 64) * 65536 + 30000;	/* two pieces */

		tfs_model_apply(m, 1, off, 65536, wr, false, (uint32_t)i);
	}
	for (int a = 0; a < TFS_MA_COUNT; a++)
		all += told[a];
	st = tfs_model_stats(m);
	CHECK(G_MODEL_CASES, all == st->reads + st->writes, "told %llu, pieces %llu",
	      (unsigned long long)all, (unsigned long long)(st->reads + st->writes));
	CHECK(G_MODEL_CASES, told[TFS_MA_READ_HIT] == st->read_hits &&
			     told[TFS_MA_WRITE_HIT] == st->write_hits &&
			     told[TFS_MA_WRITE_ALLOC] == st->allocations, "hits and allocations");
	for (int i = 0; i < 5000; i++)
		tfs_mrc_request(r, 1, (unit_rnd(&rs) % 64) * 65536, 4096, false, 0, (uint32_t)i);
	for (int a = 0; a < TFS_MA_COUNT; a++)
		mini += told[a];
	CHECK(G_MODEL_CASES, mini == all, "the miniatures told the tier's watcher %llu pieces",
	      (unsigned long long)(mini - all));
out:
	tfs_mrc_free(r);
	tfs_model_free(m);
}

int main(void)
{
	read_rule();
	write_rule();
	copy_evidence();
	heat();
	flush();
	flush_keep();
	spares();
	model_random();
	model_cases();
	model_watch();
	model_reclaim();
	model_clean_ahead();
	model_siblings();
	model_destage_time();
	model_cut();
	model_promote_time();
	model_promote_stale();
	model_flush_order();
	model_streamed();
	model_copies();
	model_evidence();
	model_evidence_sampled();
	sample();
	mrc_destage();
	return unit_summary(groups, G_COUNT) ? 1 : 0;
}
