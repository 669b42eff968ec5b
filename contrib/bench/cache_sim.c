/* cache_sim: hit ratios of the SSD tier's eviction policies (src/cache/policy.c)
 * on synthetic extent traces, behind the admission filter the cache uses.
 *
 * A file of Z extents; each access names one.  A hit is an access to a
 * cached extent.  On a miss the extent is admitted only if its heat has
 * reached the threshold T: heat counts the extent's accesses (this one
 * included) and halves every H accesses of global time (H defaults to 4x
 * the cache size), so T=1 admits on every miss.  Admitting into a full
 * cache evicts the policy's victim (every entry evictable).
 *
 * Workloads (the hot/warm/cold zones of the Iometer test in an LSI Nytro
 * review; zones are contiguous, accesses uniform inside a zone):
 *   hwc       hot 5% of the extents get 60% of the accesses, warm 15% get
 *             30%, cold 80% get 10% (--zones)
 *   hwc+scan  the same, but every Nth access (--scan-every) is the next
 *             extent of a sequential pass over the whole file, wrapping
 *   uniform   every extent equally likely
 *   zipf      Zipf(--zipf-s, default 0.9) over the extents, ranks shuffled
 * Cache sizes 5, 10, 20, 40% of Z (--sizes).  The first --warmup accesses
 * (a fraction of all) are not counted.  Same seed, same numbers.
 * --hash-seed S seeds the hash of both W-TinyLFU sketches, the tier's
 * (policy.c invariant 9: its model's and miniatures') and the reference's
 * (simpol.c), with the same S; 0, the default, is the hash of before
 * seeds.  Other seeds move only the sketches' collisions: the spread of a
 * W-TinyLFU's misses over seeds is what its hash alone makes of a trace.
 *
 * usage: cache_sim [-z EXTENTS] [-n ACCESSES] [--threshold 1,2,3]
 *                  [--sizes 5,10,20,40] [--zones 5:60,15:30,80:10]
 *                  [--scan-every N] [--zipf-s S] [--halve H] [--warmup F]
 *                  [--seed S] [--hash-seed S] [--workloads hwc,hwc+scan,uniform,zipf]
 *                  [--admissions] [--trace FILE [--extent BYTES]
 *                  [--mode MODE] [--seq-cutoff BYTES] [--row BYTES]
 *                  [--dirty LOW:HIGH] [--halflife SECONDS] [--reclaim on|off|auto]
 *                  [--destage-mbps R] [--agree SLOTS | --mrc SLOTS [--mrc-rate R] |
 *                  --diff POLICY]
 *                  [--promote-us L] [--format auto|tierfs|csv|vscsi] [--cuts on|off]
 *                  [--sectors valid|whole]]
 * --trace replays a trace the tier's recorder wrote (tierctl trace;
 * include/tierfs/trace.h), or a text trace (CSV TIME,OBJECT,SIZE[,OP]: an
 * object read or written whole, TIME in seconds; or SNIA/MSR-style
 * TIME,HOST,DISK,TYPE,OFFSET,SIZE,... with TIME in 100 ns), or a
 * VMware/CloudPhysics vscsi block trace (read_vscsi; --format says which,
 * else it is told by the tierfs magic, vscsi's version bytes, or a first
 * line of text) instead: each read or write becomes accesses to the
 * extents of --extent bytes (default 256K) it touches, in time order;
 * cache sizes are percent of the extents the trace touches.  A cut the
 * trace records (truncate, punch, unlink: TFS_TR_CUT) ends its extents'
 * lives in every policy: the model drops their sectors as the daemon does
 * (tfs_model_cut), the others free the extents wholly cut (simpol_drop,
 * tfs_policy_remove) and see a later access to one as a new extent;
 * --cuts off leaves the cuts out (as a block cache, which is not told).
 * Every policy's cache holds only the sectors written to it or read into
 * it, as the tier's (struct held): a read of the rest of an extent a write
 * admitted misses, and fills it; --sectors whole lets an extent hold all
 * of it once admitted, however (the replay before stop 40).  The rows
 * "lru" and "s3fifo" run the policy alone behind the admission filter
 * above (a write takes a slot whatever the heat); the rows "tierfs_lru",
 * "tierfs_s3fifo" and "tierfs_wtinylfu" run the trace through the tier's model (include/tierfs/model.h: the daemon's
 * own rules, policy, sectors, flusher and heat in the trace's time; its
 * mode, cutoff, RAID row, watermarks, halflife and reclaim from --mode,
 * --seq-cutoff, --row, --dirty, --halflife, --reclaim, the daemon's defaults
 * otherwise; with --destage-mbps R its destages take the time the RAID
 * takes to write them at R MB/s, one flusher round at a time (model.c
 * invariant 3; 0, the default: at once); with --promote-us L a
 * promotion waits for one of the daemon's four promoters, which takes L
 * us to make its extent readable (model.c invariant 9: a full queue
 * drops it; 0, the default: at once); the threshold from
 * --threshold, 0 for the tuner's choice: mrc.h).  It also
 * prints Belady's MIN ("belady", threshold 0: every miss admitted, the
 * farthest-needed evicted) and MIN with bypass ("belady_bypass": an
 * extent needed later than every cached one is not admitted), the
 * bounds any policy can reach; and before them the reference policies of
 * the literature (simpol.h: ref_lru, arc, lirs, 2q, ref_s3fifo, wtinylfu;
 * threshold 0: every miss admitted, read or write).
 * --agree SLOTS prints instead, for the model of a tier of SLOTS slots,
 * how many of the trace's requests it serves whole beside the trace's own
 * hit flags, and the share of requests on which they agree (a trace the
 * daemon recorded, replayed with the mount's settings).  CACHE_SIM_DEBUG
 * set: each model's counts on stderr too.
 * --diff POLICY (a reference's name: ref_lru, arc, lirs, 2q, ref_s3fifo,
 * wtinylfu) prints instead, at each --threshold and --sizes, the tier's
 * model (its default policy) and that policy access by access: how many
 * accesses both hit and both missed, and for those one alone hit, what
 * the tier did with the access and with the same extent's access before
 * (model.h enum tfs_model_act; "none": its first), most first.  So
 * "reference_only,read_seq,write_seq" counts reads the tier sent around
 * it, as a stream's, of extents a stream had written around it.
 * --mrc SLOTS prints instead the miss-ratio curve a tier of SLOTS slots
 * would show (its miniatures, mrc.h, sampled at most at --mrc-rate, the
 * daemon's 0.25 by default) beside the model at each size.
 * Prints CSV: workload,policy,threshold,cache_pct,hits,accesses,hit_ratio
 * and with --admissions one more column: extents admitted (written to the
 * SSD) in the counted accesses; for a trace, three more: the hit ratio of
 * reads alone, of bytes, and the bytes written to the SSD (an admission
 * on a read writes the extent, a write the TFS_SECTOR sectors it
 * touches; the model counts its promotions, fills and writes into slots
 * in the same sectors: flash is written in pages, so a 100-byte write
 * costs every policy a 4 KiB page, not 100 bytes).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/model.h"
#include "tierfs/parse.h"
#include "tierfs/mrc.h"
#include "tierfs/policy.h"
#include "tierfs/sectors.h"
#include "tierfs/trace.h"
#include "simpol.h"

#define MAXLIST 16
#define MAXZONES 8

enum { W_HWC, W_HWC_SCAN, W_UNIFORM, W_ZIPF, W_TRACE, W_COUNT };
static const char *const wname[W_COUNT] = { "hwc", "hwc+scan", "uniform", "zipf", "trace" };

#define WRITE_BIT 0x80000000u	/* an access of a recorded trace that writes */

enum { F_AUTO, F_TIERFS, F_CSV, F_VSCSI, F_COUNT };	/* --format */
static const char *const fname[F_COUNT] = { "auto", "tierfs", "csv", "vscsi" };

struct opts {
	uint32_t z;
	uint64_t n;
	uint32_t thr[MAXLIST], nthr;
	uint32_t sizes[MAXLIST], nsizes;
	double zpct[MAXZONES], zacc[MAXZONES];
	uint32_t nzones;
	uint32_t scan_every;
	double zipf_s, warmup;
	uint64_t halve, seed;
	bool work[W_COUNT];
	bool admissions;
	/* --trace: a trace the tier's recorder wrote (include/tierfs/trace.h),
	 * as accesses to extents of --extent bytes: ids numbered densely in
	 * first-access order, WRITE_BIT set for writes */
	const char *trace_path;
	int format;		/* F_* */
	uint64_t extent;
	uint32_t *ids;
	uint32_t *lens;			/* bytes of each access (a trace's) */
	uint32_t *slens;		/* and of the TFS_SECTOR sectors it touches */
	uint32_t *soffs;		/* the first of those, in its extent */
	struct tfs_trace_rec *recs;	/* the trace's reads, writes and cuts, in time order */
	size_t nrecs;
	uint32_t ws;			/* extents (fid, index) touched: the working set */
	bool *dead;			/* by id: cut (load_trace) */
	/* cuts (TFS_TR_CUT): at access dpos[i] (before it) id did[i] is gone;
	 * a later access to its extent gets a new id */
	uint64_t *dpos;
	uint32_t *did;
	size_t ndrops;
	bool no_cuts;			/* --no-cuts: the trace's cuts left out */
	bool whole_extents;		/* --sectors whole: see struct held */
	/* the tier's model (tfs_model) on a trace: its other settings */
	struct tfs_model_cfg mcfg;
	uint32_t agree_slots;		/* --agree SLOTS: model vs the trace's hit flags */
	uint32_t mrc_slots;		/* --mrc SLOTS: the curve's estimate vs the model */
	int diff_ref;			/* --diff POLICY: a simpol_kind; -1: none */
	double mrc_rate;		/* --mrc-rate R: the largest sample rate (the daemon's) */
};

/* ------------------------------------------------------------------ */
/* Trace                                                               */
/* ------------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double unif(uint64_t *s)
{
	return (double)(splitmix(s) >> 11) * (1.0 / 9007199254740992.0);
}

struct trace {
	int w;
	uint64_t rng, t;
	uint32_t z, scan_pos, scan_every;
	/* hwc: zone i covers extents [zlo[i], zlo[i+1]), chosen with cum. prob zcum[i] */
	uint32_t nz, zlo[MAXZONES + 1];
	double zcum[MAXZONES];
	/* zipf: cumulative probabilities by rank, rank -> extent */
	double *cdf;
	uint32_t *perm;
	const uint32_t *ids;	/* W_TRACE: the accesses, o->n of them */
};

static void trace_init(struct trace *tr, const struct opts *o, int w)
{
	double sp = 0, sa = 0, cp = 0, ca = 0;

	memset(tr, 0, sizeof(*tr));
	tr->w = w;
	tr->z = o->z;
	tr->rng = o->seed * 0x100000001b3ull + (uint64_t)w;
	tr->scan_every = o->scan_every;
	for (uint32_t i = 0; i < o->nzones; i++) {
		sp += o->zpct[i];
		sa += o->zacc[i];
	}
	tr->nz = o->nzones;
	for (uint32_t i = 0; i < o->nzones; i++) {
		tr->zlo[i] = (uint32_t)llround(cp / sp * o->z);
		cp += o->zpct[i];
		ca += o->zacc[i];
		tr->zcum[i] = ca / sa;
	}
	tr->zlo[o->nzones] = o->z;
	tr->ids = o->ids;
	if (w == W_ZIPF) {
		double sum = 0;

		tr->cdf = malloc(o->z * sizeof(*tr->cdf));
		tr->perm = malloc(o->z * sizeof(*tr->perm));
		if (!tr->cdf || !tr->perm) {
			fprintf(stderr, "cache_sim: out of memory\n");
			exit(1);
		}
		for (uint32_t r = 0; r < o->z; r++) {
			sum += pow(r + 1.0, -o->zipf_s);
			tr->cdf[r] = sum;
			tr->perm[r] = r;
		}
		for (uint32_t r = 0; r < o->z; r++)
			tr->cdf[r] /= sum;
		for (uint32_t r = o->z - 1; r > 0; r--) {	/* Fisher-Yates */
			uint32_t j = (uint32_t)(splitmix(&tr->rng) % (r + 1)), x = tr->perm[r];

			tr->perm[r] = tr->perm[j];
			tr->perm[j] = x;
		}
	}
}

static void trace_free(struct trace *tr)
{
	free(tr->cdf);
	free(tr->perm);
}

static uint32_t trace_next(struct trace *tr)
{
	uint32_t lo, hi;
	double u;

	tr->t++;
	switch (tr->w) {
	case W_TRACE:
		return tr->ids[tr->t - 1];
	case W_HWC_SCAN:
		if (tr->t % tr->scan_every == 0) {
			uint32_t e = tr->scan_pos;

			tr->scan_pos = e + 1 == tr->z ? 0 : e + 1;
			return e;
		}
		/* fall through */
	case W_HWC:
		u = unif(&tr->rng);
		for (uint32_t i = 0; i < tr->nz; i++)
			if (u < tr->zcum[i] || i + 1 == tr->nz) {
				lo = tr->zlo[i];
				hi = tr->zlo[i + 1];
				if (hi <= lo)
					return lo < tr->z ? lo : tr->z - 1;
				return lo + (uint32_t)(splitmix(&tr->rng) % (hi - lo));
			}
		return 0;
	case W_UNIFORM:
		return (uint32_t)(splitmix(&tr->rng) % tr->z);
	default:	/* zipf: first rank whose cdf exceeds u */
		u = unif(&tr->rng);
		lo = 0;
		hi = tr->z - 1;
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (tr->cdf[mid] > u)
				hi = mid;
			else
				lo = mid + 1;
		}
		return tr->perm[lo];
	}
}

/* ------------------------------------------------------------------ */
/* Cache                                                               */
/* ------------------------------------------------------------------ */

static bool ok_all(void *arg, uint32_t slot)
{
	(void)arg;
	(void)slot;
	return true;
}

struct result {
	uint64_t hits, counted, admitted;
	/* on a trace: bytes accessed and hit, reads and read hits, bytes
	 * written to the SSD (struct held says how many each access writes) */
	uint64_t bytes, hit_bytes, reads, read_hits, ssd_bytes;
};

/* Access t, a (an extent, WRITE_BIT set for a write), was counted: a
 * hit or not, admitted or not, and ssd bytes written to the SSD for it. */
static void tally(struct result *r, const struct opts *o, uint64_t t, uint32_t a, bool hit,
		  bool admitted, uint64_t ssd)
{
	bool wr = a & WRITE_BIT;
	uint64_t len = o->lens ? o->lens[t] : 0;

	r->counted++;
	r->hits += hit;
	r->admitted += admitted;
	r->bytes += len;
	r->hit_bytes += hit ? len : 0;
	r->reads += !wr;
	r->read_hits += !wr && hit;
	r->ssd_bytes += ssd;
}

/* ------------------------------------------------------------------ */
/* What every policy's cache holds of its extents                      */
/* ------------------------------------------------------------------ */

/* A cache holds only the sectors written to it or read into it, as the
 * tier does (sectors.h), whatever its policy: an extent admitted by a
 * read holds all of it, one admitted by a write what the write wrote;
 * a read of sectors a cached extent does not hold misses, and (when the
 * policy fills) reads the extent's missing sectors into it, as the
 * tier's promoter does (flush.c invariant 14).  The SSD bytes each
 * access costs follow: a read's admission the extent, a write its
 * sectors, a fill the sectors it adds.  --sectors whole instead lets an
 * extent hold all of it once admitted, whatever admitted it (the replay
 * before stop 40: a write's 8K bought the reads of the other 56K). */
struct held {
	uint64_t *bits;		/* by id: TFS_CEXT_WORDS words, the sectors held */
	unsigned spe;		/* sectors per extent */
};

static void held_init(struct held *h, const struct opts *o)
{
	h->bits = NULL;
	h->spe = (unsigned)(o->extent / TFS_SECTOR);
	if (!o->soffs || o->whole_extents)
		return;
	h->bits = calloc((size_t)o->z * TFS_CEXT_WORDS, sizeof(*h->bits));
	if (!h->bits) {
		fprintf(stderr, "cache_sim: out of memory\n");
		exit(1);
	}
}

/* Sets in b the sectors access t touches. */
static void held_set(uint64_t *b, const struct opts *o, uint64_t t)
{
	bm_set(b, o->soffs[t], o->soffs[t] + o->slens[t] / TFS_SECTOR);
}

/* Access t, a, admits its extent into the cache; returns the bytes
 * written to the SSD. */
static uint64_t held_admit(struct held *h, const struct opts *o, uint64_t t, uint32_t a)
{
	uint32_t e = a & ~WRITE_BIT;
	bool wr = a & WRITE_BIT;

	if (h->bits) {
		uint64_t *b = h->bits + (size_t)e * TFS_CEXT_WORDS;

		memset(b, 0, TFS_CEXT_WORDS * sizeof(*b));
		if (wr)
			held_set(b, o, t);
		else
			bm_set(b, 0, h->spe);
	}
	return wr ? (o->slens ? o->slens[t] : 0) : o->extent;
}

/* Access t, a, finds its extent cached: is it served from the cache?  A
 * read of sectors not held is not, and with fill reads the missing ones
 * in.  *ssd: the bytes written to the SSD. */
static bool held_hit(struct held *h, const struct opts *o, uint64_t t, uint32_t a, bool fill,
		     uint64_t *ssd)
{
	uint32_t e = a & ~WRITE_BIT;
	uint64_t *b = h->bits ? h->bits + (size_t)e * TFS_CEXT_WORDS : NULL;

	*ssd = 0;
	if (a & WRITE_BIT) {
		*ssd = o->slens ? o->slens[t] : 0;
		if (b)
			held_set(b, o, t);
		return true;
	}
	if (!b || bm_all(b, o->soffs[t], o->soffs[t] + o->slens[t] / TFS_SECTOR))
		return true;
	if (fill) {
		*ssd = (uint64_t)(h->spe - bm_count(b)) * TFS_SECTOR;
		bm_set(b, 0, h->spe);
	}
	return false;
}

static struct result simulate(const struct opts *o, int w, enum tfs_policy_kind kind,
			      uint32_t thr, uint32_t cap)
{
	struct tfs_policy *p = tfs_policy_new(kind, cap, o->mcfg.hash_seed);
	uint32_t *slot_of = malloc(o->z * sizeof(*slot_of));
	uint32_t *ext_of = malloc((cap ? cap : 1) * sizeof(*ext_of));
	uint16_t *heat = calloc(o->z, sizeof(*heat));
	uint32_t *epoch = calloc(o->z, sizeof(*epoch));
	uint64_t H = o->halve ? o->halve : 4ull * cap, warm = (uint64_t)(o->warmup * o->n);
	uint32_t used = 0, *freed = malloc((cap ? cap : 1) * sizeof(*freed)), nfreed = 0;
	size_t d = 0;
	struct result r = { 0 };
	struct trace tr;
	struct held held;

	if (!p || !slot_of || !ext_of || !heat || !epoch || !freed) {
		fprintf(stderr, "cache_sim: out of memory\n");
		exit(1);
	}
	if (!H)
		H = 1;
	memset(slot_of, 0xff, o->z * sizeof(*slot_of));
	held_init(&held, o);
	trace_init(&tr, o, w);
	for (uint64_t t = 0; t < o->n; t++) {
		uint32_t a = trace_next(&tr), e = a & ~WRITE_BIT, s, now = (uint32_t)(t / H), age;
		bool counted = t >= warm, wr = a & WRITE_BIT, hit;
		uint64_t ssd;

		for (; w == W_TRACE && d < o->ndrops && o->dpos[d] <= t; d++)
			if ((s = slot_of[o->did[d]]) != UINT32_MAX) {	/* cut: its slot is free */
				tfs_policy_remove(p, s);
				slot_of[o->did[d]] = UINT32_MAX;
				freed[nfreed++] = s;
			}
		s = slot_of[e];
		age = now - epoch[e];
		heat[e] = age >= 16 ? 0 : (uint16_t)(heat[e] >> age);
		epoch[e] = now;
		if (heat[e] < UINT16_MAX)
			heat[e]++;
		if (s != UINT32_MAX) {	/* a fill at the threshold, as a promotion */
			hit = held_hit(&held, o, t, a, heat[e] >= thr, &ssd);
			if (counted)
				tally(&r, o, t, a, hit, false, ssd);
			tfs_policy_hit(p, s);
			continue;
		}
		/* a write takes a slot whatever the heat, as write-back does */
		if ((!wr && heat[e] < thr) || !cap) {
			if (counted)
				tally(&r, o, t, a, false, false, 0);
			continue;
		}
		if (nfreed) {
			s = freed[--nfreed];
		} else if (used < cap) {
			s = used++;
		} else {
			s = tfs_policy_victim(p, ok_all, NULL, UINT32_MAX);
			if (s == TFS_POLICY_NONE) {
				fprintf(stderr, "cache_sim: no victim\n");
				exit(1);
			}
			slot_of[ext_of[s]] = UINT32_MAX;
		}
		ssd = held_admit(&held, o, t, a);
		if (counted)
			tally(&r, o, t, a, false, true, ssd);
		ext_of[s] = e;
		slot_of[e] = s;
		tfs_policy_insert(p, s, splitmix(&(uint64_t){ e }));
	}
	trace_free(&tr);
	tfs_policy_free(p);
	free(held.bits);
	free(slot_of);
	free(ext_of);
	free(freed);
	free(heat);
	free(epoch);
	return r;
}

/* ------------------------------------------------------------------ */
/* Belady's MIN on a recorded trace (the future is known)              */
/* ------------------------------------------------------------------ */

struct hent {
	uint64_t next;		/* the access the extent is needed at next */
	uint32_t e;
};

static void heap_push(struct hent *h, size_t *n, struct hent x)
{
	size_t i = (*n)++;

	while (i && h[(i - 1) / 2].next < x.next) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = x;
}

static struct hent heap_pop(struct hent *h, size_t *n)
{
	struct hent top = h[0], x = h[--*n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= *n)
			break;
		if (c + 1 < *n && h[c + 1].next > h[c].next)
			c++;
		if (h[c].next <= x.next)
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = x;
	return top;
}

/* The farthest-needed cached extent's entry, stale entries dropped (an
 * extent evicted, or needed earlier since).  Returns false when empty. */
static bool heap_top(struct hent *h, size_t *n, const uint64_t *cur, const bool *in,
		     struct hent *top)
{
	while (*n && (!in[h[0].e] || cur[h[0].e] != h[0].next))
		(void)heap_pop(h, n);
	if (*n)
		*top = h[0];
	return *n != 0;
}

/* MIN over o->ids with cap slots: on a miss the extent is admitted and the
 * one needed farthest ahead evicted; with bypass, it is not admitted when it
 * is needed later than every cached one (the upper bound of any policy
 * that may refuse to cache).  Warm-up as simulate's. */
static struct result belady(const struct opts *o, uint32_t cap, bool bypass)
{
	uint64_t *nextu = malloc(o->n * sizeof(*nextu)), *last = malloc(o->z * sizeof(*last));
	uint64_t *cur = calloc(o->z, sizeof(*cur)), warm = (uint64_t)(o->warmup * o->n);
	bool *in = calloc(o->z, sizeof(*in));
	struct hent *h = malloc((o->n + 1) * sizeof(*h)), top;
	size_t nh = 0;
	uint32_t used = 0;
	struct result r = { 0 };
	struct held held;
	uint64_t ssd;

	if (!nextu || !last || !cur || !in || !h) {
		fprintf(stderr, "cache_sim: out of memory\n");
		exit(1);
	}
	held_init(&held, o);
	for (uint32_t e = 0; e < o->z; e++)
		last[e] = UINT64_MAX;
	for (uint64_t t = o->n; t-- > 0;) {
		uint32_t e = o->ids[t] & ~WRITE_BIT;

		nextu[t] = last[e];
		last[e] = t;
	}
	for (uint64_t t = 0; t < o->n; t++) {
		uint32_t a = o->ids[t], e = a & ~WRITE_BIT;
		bool counted = t >= warm, hit;

		if (in[e]) {
			hit = held_hit(&held, o, t, a, true, &ssd);
			if (counted)
				tally(&r, o, t, a, hit, false, ssd);
			cur[e] = nextu[t];
			heap_push(h, &nh, (struct hent){ nextu[t], e });
			continue;
		}
		if (!cap || (used == cap && !heap_top(h, &nh, cur, in, &top)) ||
		    (used == cap && bypass && nextu[t] >= top.next)) {
			/* (bypass: needed later than all, not cached) */
			if (counted)
				tally(&r, o, t, a, false, false, 0);
			continue;
		}
		if (used == cap) {
			in[heap_pop(h, &nh).e] = false;
			used--;
		}
		in[e] = true;
		used++;
		ssd = held_admit(&held, o, t, a);
		if (counted)
			tally(&r, o, t, a, false, true, ssd);
		cur[e] = nextu[t];
		heap_push(h, &nh, (struct hent){ nextu[t], e });
	}
	free(nextu);
	free(last);
	free(cur);
	free(in);
	free(h);
	free(held.bits);
	return r;
}

/* ------------------------------------------------------------------ */
/* The reference policies on a recorded trace (simpol.c)               */
/* ------------------------------------------------------------------ */

/* kind over o->ids with cap slots, reads and writes alike; warm-up as
 * simulate's; hits, if not NULL, gets each access's outcome (--diff). */
static struct result reference(const struct opts *o, enum simpol_kind kind, uint32_t cap,
			       bool *hits)
{
	struct simpol *sp = simpol_new(kind, cap, o->z, o->mcfg.hash_seed);
	uint64_t warm = (uint64_t)(o->warmup * o->n);
	struct result r = { 0 };
	struct held held;
	size_t d = 0;

	if (!sp) {
		fprintf(stderr, "cache_sim: out of memory\n");
		exit(1);
	}
	held_init(&held, o);
	for (uint64_t t = 0; t < o->n; t++) {
		uint32_t a = o->ids[t];
		uint64_t ssd = 0;
		bool admitted, hit;

		for (; d < o->ndrops && o->dpos[d] <= t; d++)
			simpol_drop(sp, o->did[d]);	/* cut: its extent is gone */
		hit = simpol_access(sp, a & ~WRITE_BIT, &admitted);
		if (hit)	/* every miss admitted: every partial read fills */
			hit = held_hit(&held, o, t, a, true, &ssd);
		else if (admitted)
			ssd = held_admit(&held, o, t, a);
		if (hits)
			hits[t] = hit;
		if (t >= warm)
			tally(&r, o, t, a, hit, admitted, ssd);
	}
	simpol_free(sp);
	free(held.bits);
	return r;
}

/* ------------------------------------------------------------------ */
/* A recorded trace                                                    */
/* ------------------------------------------------------------------ */

static int rec_cmp(const void *a, const void *b)
{
	const struct tfs_trace_rec *x = a, *y = b;

	return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

static void *grow(void *p, size_t *cap, size_t elem)
{
	*cap = *cap ? 2 * *cap : 65536;
	p = realloc(p, *cap * elem);
	if (!p) {
		fprintf(stderr, "cache_sim: out of memory\n");
		exit(1);
	}
	return p;
}

/* The records of a tierfs trace file; *n of them. */
static struct tfs_trace_rec *read_tierfs(FILE *f, const char *path, size_t *n)
{
	struct tfs_trace_rec *r = NULL;
	struct tfs_trace_hdr h;
	size_t cap = 0;

	if (fread(&h, sizeof(h), 1, f) != 1 || h.magic != TFS_TRACE_MAGIC || h.version != 1 ||
	    h.rec_size != sizeof(*r)) {
		fprintf(stderr, "cache_sim: %s: not a tierfs trace\n", path);
		exit(1);
	}
	for (*n = 0;; (*n)++) {
		if (*n == cap)
			r = grow(r, &cap, sizeof(*r));
		if (fread(&r[*n], sizeof(*r), 1, f) != 1)
			break;
	}
	return r;
}

/* A text trace, one request a line, as records (objects and disks become
 * fids by a hash of their names):
 *   TIME,OBJECT,SIZE[,OP]        an object read whole (OP w/write: written)
 *   TIME,HOST,DISK,TYPE,OFFSET,SIZE[,...]   SNIA/MSR-style (TYPE Read/Write)
 * Lines that do not parse (a header) are skipped; *bad counts them. */
static struct tfs_trace_rec *read_csv(FILE *f, size_t *n, size_t *bad)
{
	struct tfs_trace_rec *r = NULL;
	char line[4096];
	size_t cap = 0;

	*n = *bad = 0;
	while (fgets(line, sizeof(line), f)) {
		char *fld[8], *save = NULL, *end;
		int nf = 0;
		double secs;
		uint64_t fid = 1469598103934665603ull;	/* FNV-1a of the name */

		line[strcspn(line, "\r\n")] = 0;
		for (char *t = strtok_r(line, ",", &save); t && nf < 8; t = strtok_r(NULL, ",", &save))
			fld[nf++] = t;
		if (nf < 3) {
			(*bad)++;
			continue;
		}
		if (*n == cap)
			r = grow(r, &cap, sizeof(*r));
		memset(&r[*n], 0, sizeof(r[*n]));
		secs = strtod(fld[0], &end);
		/* SNIA/MSR: Windows file time (100 ns); else seconds */
		r[*n].t_ns = (uint64_t)(secs * (nf >= 6 ? 100.0 : 1e9));
		if (end == fld[0]) {
			(*bad)++;
			continue;
		}
		if (nf >= 6) {		/* SNIA/MSR: host and disk name the volume */
			for (const char *c = fld[1]; *c; c++)
				fid = (fid ^ (uint8_t)*c) * 1099511628211ull;
			for (const char *c = fld[2]; *c; c++)
				fid = (fid ^ (uint8_t)*c) * 1099511628211ull;
			r[*n].op = (fld[3][0] == 'W' || fld[3][0] == 'w') ? TFS_TR_WRITE : TFS_TR_READ;
			r[*n].off = strtoull(fld[4], NULL, 10);
			r[*n].len = (uint32_t)strtoul(fld[5], NULL, 10);
		} else {
			for (const char *c = fld[1]; *c; c++)
				fid = (fid ^ (uint8_t)*c) * 1099511628211ull;
			r[*n].len = (uint32_t)strtoul(fld[2], NULL, 10);
			r[*n].op = nf > 3 && (fld[3][0] == 'w' || fld[3][0] == 'W') ? TFS_TR_WRITE
										  : TFS_TR_READ;
		}
		r[*n].fid = fid;
		(*n)++;
	}
	return r;
}

/* The VMware/CloudPhysics block traces ("vscsi", as PyMimircache and
 * libCacheSim distribute them): headerless records, little endian, of one
 * of two layouts, each with a 16-bit version field whose high byte is the
 * layout's number:
 *   vscsi1, 32 bytes: u32 sn, u32 len, u32 nSG, u16 cmd, u16 ver, u64 lbn,
 *                     u64 ts
 *   vscsi2, 40 bytes: u16 cmd, u16 ver, u32 sn, u32 len, u32 nSG, u64 lbn,
 *                     u64 ts, u64 rt
 * lbn counts 512-byte sectors, len bytes, ts microseconds; cmd is the SCSI
 * opcode.  One trace is one disk (fid 1). */
struct vscsi_layout {
	int version;
	size_t size, cmd_at, ver_at, len_at, lbn_at, ts_at;
};

static const struct vscsi_layout vscsi_layouts[] = {
	/* vscsi1 first: a vscsi2 file cannot pass its test (its byte 15 is
	 * the top byte of nSG, 0), while a vscsi1 file would pass vscsi2's
	 * if its serial numbers' top byte were 2 */
	{ .version = 1, .size = 32, .cmd_at = 12, .ver_at = 14, .len_at = 4, .lbn_at = 16,
	  .ts_at = 24 },
	{ .version = 2, .size = 40, .cmd_at = 0, .ver_at = 2, .len_at = 8, .lbn_at = 16,
	  .ts_at = 24 },
};

#define VSCSI_PROBE 64		/* records whose version must agree */
#define PROBE_BYTES (VSCSI_PROBE * 40)

static uint64_t le_get(const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	while (bytes--)
		v = v << 8 | p[bytes];
	return v;
}

/* The layout every one of the first records (up to VSCSI_PROBE, at least
 * 2) of b[0..len) agrees on, or NULL. */
static const struct vscsi_layout *vscsi_detect(const uint8_t *b, size_t len)
{
	for (size_t l = 0; l < sizeof(vscsi_layouts) / sizeof(vscsi_layouts[0]); l++) {
		const struct vscsi_layout *v = &vscsi_layouts[l];
		size_t n = len / v->size, i;

		n = n < VSCSI_PROBE ? n : VSCSI_PROBE;
		for (i = 0; i < n && b[i * v->size + v->ver_at + 1] == v->version; i++)
			;
		if (n >= 2 && i == n)
			return v;
	}
	return NULL;
}

/* SCSI READ(6/10/12/16) and WRITE(6/10/12/16); 0 for anything else */
static uint8_t scsi_op(uint64_t cmd)
{
	switch (cmd) {
	case 0x08: case 0x28: case 0xa8: case 0x88:
		return TFS_TR_READ;
	case 0x0a: case 0x2a: case 0xaa: case 0x8a:
		return TFS_TR_WRITE;
	default:
		return 0;
	}
}

/* The records of a vscsi trace; *n of them.  Records of one microsecond
 * keep their file order, up to 1000 of them (t_ns counts them within it:
 * qsort is not stable). */
static struct tfs_trace_rec *read_vscsi(FILE *f, const char *path, size_t *n)
{
	uint8_t b[PROBE_BYTES];
	const struct vscsi_layout *v = vscsi_detect(b, fread(b, 1, sizeof(b), f));
	struct tfs_trace_rec *r = NULL;
	uint64_t last_ts = UINT64_MAX, sub = 0;
	size_t cap = 0;

	if (!v) {
		fprintf(stderr, "cache_sim: %s: not a vscsi trace\n", path);
		exit(1);
	}
	rewind(f);
	for (*n = 0; fread(b, v->size, 1, f) == 1; (*n)++) {
		uint64_t ts = le_get(b + v->ts_at, 8);

		if (*n == cap)
			r = grow(r, &cap, sizeof(*r));
		sub = ts != last_ts ? 0 : sub < 999 ? sub + 1 : 999;
		last_ts = ts;
		r[*n] = (struct tfs_trace_rec){
			.t_ns = ts * 1000 + sub,
			.fid = 1,
			.off = le_get(b + v->lbn_at, 8) * 512,
			.len = (uint32_t)le_get(b + v->len_at, 4),
			.op = scsi_op(le_get(b + v->cmd_at, 2)),
		};
	}
	return r;
}

/* --format auto: a tierfs trace by its magic, a vscsi trace by its
 * version bytes, a text trace by a first line of text (no control
 * characters but tab and CR); else nothing this reads. */
static int detect_format(FILE *f, const char *path)
{
	uint8_t b[PROBE_BYTES];
	size_t len = fread(b, 1, sizeof(b), f), i;
	uint64_t magic = 0;

	rewind(f);
	if (len >= sizeof(magic))
		memcpy(&magic, b, sizeof(magic));
	if (magic == TFS_TRACE_MAGIC)
		return F_TIERFS;
	if (vscsi_detect(b, len))
		return F_VSCSI;
	for (i = 0; i < len && b[i] != '\n' && (b[i] >= 0x20 || b[i] == '\t' || b[i] == '\r'); i++)
		;
	if (i == len || b[i] == '\n')
		return F_CSV;
	fprintf(stderr, "cache_sim: %s: not a trace I can tell (--format tierfs|csv|vscsi)\n", path);
	exit(1);
}

/* load_trace's map: (fid, extent) -> dense id + 1 (0: none yet), and
 * (fid, CUT_MAX) -> the file's largest extent seen + 1; open addressing. */
#define CUT_MAX UINT64_MAX

struct emap {
	uint64_t *key;		/* pairs */
	uint32_t *val;
	uint8_t *used;
	uint64_t mask;
	size_t n;
};

/* The value of (fid, x), 0 if it was not in m (it is now). */
static uint32_t *map_at(struct emap *m, uint64_t fid, uint64_t x)
{
	uint64_t j = splitmix(&(uint64_t){ fid * 0x9E3779B97F4A7C15ull ^ x }) & m->mask;

	while (m->used[j] && (m->key[2 * j] != fid || m->key[2 * j + 1] != x))
		j = (j + 1) & m->mask;
	if (!m->used[j]) {
		if (++m->n > (m->mask + 1) / 2) {
			fprintf(stderr, "cache_sim: more than %llu extents\n",
				(unsigned long long)(m->mask + 1) / 2);
			exit(1);
		}
		m->used[j] = 1;
		m->key[2 * j] = fid;
		m->key[2 * j + 1] = x;
	}
	return &m->val[j];
}

/* Cut q: each extent wholly inside it that has an id not cut already is
 * gone before access na (o->dpos, o->did); its next access gets a new id
 * (load_trace).  An extent partly cut stays, as the tier keeps its other
 * sectors. */
static void cut_ids(struct opts *o, struct emap *m, const struct tfs_trace_rec *q, size_t na,
		    size_t *dcap)
{
	uint64_t end = q->flags & TFS_TR_TO_END ? UINT64_MAX : q->off + q->len;
	uint64_t x0 = (q->off + o->extent - 1) / o->extent, x1 = end / o->extent;
	uint32_t mx = *map_at(m, q->fid, CUT_MAX);

	for (uint64_t x = x0; x < (x1 < mx ? x1 : mx); x++) {	/* extents [x0, x1) */
		uint32_t *v = map_at(m, q->fid, x);

		if (!*v || o->dead[*v - 1])
			continue;
		o->dead[*v - 1] = true;
		if (o->ndrops == *dcap) {
			size_t c = *dcap;

			o->dpos = grow(o->dpos, &c, sizeof(*o->dpos));
			o->did = grow(o->did, dcap, sizeof(*o->did));
		}
		o->dpos[o->ndrops] = na;
		o->did[o->ndrops++] = *v - 1;
	}
}

/* Reads o->trace_path (a tierfs, text or vscsi trace) into o->ids (o->n
 * accesses, o->z ids: o->ws extents, and those cut and accessed again),
 * its cuts into o->dpos and o->did. */
static void load_trace(struct opts *o)
{
	FILE *f = fopen(o->trace_path, "rb");
	struct tfs_trace_rec *r;
	size_t n = 0, na = 0, acap = 0, bad = 0, dcap = 0;
	struct emap map = { .mask = (1u << 23) - 1 };
	uint32_t zcap = 0;

	if (!f) {
		fprintf(stderr, "cache_sim: %s: %s\n", o->trace_path, strerror(errno));
		exit(1);
	}
	switch (o->format ? o->format : detect_format(f, o->trace_path)) {
	case F_TIERFS:
		r = read_tierfs(f, o->trace_path, &n);
		break;
	case F_VSCSI:
		r = read_vscsi(f, o->trace_path, &n);
		break;
	default:
		r = read_csv(f, &n, &bad);
	}
	fclose(f);
	if (bad > 1)
		fprintf(stderr, "cache_sim: %s: %zu lines skipped\n", o->trace_path, bad);
	qsort(r, n, sizeof(*r), rec_cmp);	/* buffers interleave (trace.c inv. 3) */
	for (size_t i = n; i-- > 0;)		/* time from the first request */
		r[i].t_ns -= r[0].t_ns;
	map.key = calloc(map.mask + 1, sizeof(*map.key) * 2);
	map.val = calloc(map.mask + 1, sizeof(*map.val));
	map.used = calloc(map.mask + 1, sizeof(*map.used));
	if (!map.key || !map.val || !map.used) {
		fprintf(stderr, "cache_sim: out of memory\n");
		exit(1);
	}
	o->z = 0;
	for (size_t i = 0; i < n; i++) {
		if (r[i].op == TFS_TR_CUT && !o->no_cuts) {
			cut_ids(o, &map, &r[i], na, &dcap);
			r[o->nrecs++] = r[i];	/* the model's cut */
			continue;
		}
		if ((r[i].op != TFS_TR_READ && r[i].op != TFS_TR_WRITE) || !r[i].len)
			continue;
		for (uint64_t x = r[i].off / o->extent; x <= (r[i].off + r[i].len - 1) / o->extent;
		     x++) {
			uint32_t *v = map_at(&map, r[i].fid, x);

			if (!*v) {	/* a new extent: the file's largest yet? */
				uint32_t *mx = map_at(&map, r[i].fid, CUT_MAX);

				o->ws++;
				if (x + 1 > *mx)
					*mx = (uint32_t)(x + 1);
			}
			if (!*v || o->dead[*v - 1]) {	/* new, or cut since: a new id */
				if (o->z == zcap) {
					size_t c = zcap;

					o->dead = grow(o->dead, &c, sizeof(*o->dead));
					zcap = (uint32_t)c;
				}
				o->dead[o->z] = false;
				*v = ++o->z;
			}
			if (na == acap) {
				size_t lcap = acap, scap = acap, fcap = acap;

				o->ids = grow(o->ids, &acap, sizeof(*o->ids));
				o->lens = grow(o->lens, &lcap, sizeof(*o->lens));
				o->slens = grow(o->slens, &scap, sizeof(*o->slens));
				o->soffs = grow(o->soffs, &fcap, sizeof(*o->soffs));
			}
			{	/* the part of the request in extent x */
				uint64_t a = r[i].off > x * o->extent ? r[i].off : x * o->extent;
				uint64_t b = r[i].off + r[i].len < (x + 1) * o->extent ?
						     r[i].off + r[i].len : (x + 1) * o->extent;

				o->lens[na] = (uint32_t)(b - a);
				o->slens[na] = (uint32_t)(((b + TFS_SECTOR - 1) / TFS_SECTOR -
							   a / TFS_SECTOR) * TFS_SECTOR);
				o->soffs[na] = (uint32_t)((a - x * o->extent) / TFS_SECTOR);
			}
			o->ids[na++] = (*v - 1) | (r[i].op == TFS_TR_WRITE ? WRITE_BIT : 0);
		}
		r[o->nrecs++] = r[i];	/* kept for the model, in time order */
	}
	o->recs = r;
	free(map.key);
	free(map.val);
	free(map.used);
	o->n = na;
	if (o->ws < 2) {
		fprintf(stderr, "cache_sim: %s: fewer than 2 extents\n", o->trace_path);
		exit(1);
	}
}

/* ------------------------------------------------------------------ */
/* The tier's own rules on a trace (tfs_model: rules.c, policy.c)      */
/* ------------------------------------------------------------------ */

/* --diff: what the model did with each access, in order. */
struct acts {
	uint8_t *act;		/* enum tfs_model_act, by access */
	uint64_t n, cap;	/* told; room */
};

static void act_note(void *arg, enum tfs_model_act act)
{
	struct acts *a = arg;

	if (a->n < a->cap)
		a->act[a->n] = (uint8_t)act;
	a->n++;		/* more than cap: the caller refuses the run */
}

/* The settings of a tier of cap slots (at least 1) with o's settings,
 * kind and threshold (0: the tuner's, which starts at TFS_TUNE_START). */
static struct tfs_model_cfg model_cfg(const struct opts *o, enum tfs_policy_kind kind,
				      uint32_t thr, uint32_t cap)
{
	struct tfs_model_cfg cfg = o->mcfg;

	cfg.nslots = cap ? cap : 1;
	cfg.extent = (uint32_t)o->extent;
	cfg.policy = kind;
	cfg.promote = thr ? thr : TFS_TUNE_START;
	return cfg;
}

/* A model of that tier; acts, if not NULL, is told each piece's outcome
 * (--diff). */
static struct tfs_model *new_model(const struct opts *o, enum tfs_policy_kind kind, uint32_t thr,
				   uint32_t cap, struct acts *acts)
{
	struct tfs_model_cfg cfg = model_cfg(o, kind, thr, cap);
	struct tfs_model *m;

	if (acts) {
		cfg.watch = act_note;
		cfg.watch_arg = acts;
	}
	m = tfs_model_new(&cfg);

	if (!m) {
		fprintf(stderr, "cache_sim: the model refused its settings (or no memory)\n");
		exit(1);
	}
	return m;
}

/* That tier's miniatures (mrc.c): the curve, and the tuner too. */
static struct tfs_mrc *new_mrc(const struct opts *o, enum tfs_policy_kind kind, uint32_t thr,
			       uint32_t cap, bool tune)
{
	struct tfs_model_cfg cfg = model_cfg(o, kind, thr, cap);
	struct tfs_mrc *r = tfs_mrc_new(&cfg, TFS_MRC_BUDGET, o->mrc_rate, tune);

	if (!r) {
		fprintf(stderr, "cache_sim: no memory for the miniatures\n");
		exit(1);
	}
	return r;
}

/* CACHE_SIM_DEBUG: model m's counts on stderr (to set beside the
 * daemon's, record_traces.py's WORKLOAD.status). */
static void debug_stats(const struct tfs_model *m, enum tfs_policy_kind kind, uint32_t thr,
			uint32_t cap)
{
	const struct tfs_model_stats *st = tfs_model_stats(m);

	fprintf(stderr,
		"model %s T=%u cap=%u: reads %llu hits %llu partial %llu writes %llu hits %llu promotions "
		"%llu fills %llu allocations %llu copies %llu fresh %llu evictions %llu flushed %llu (reclaimed %llu) bypass seq %llu "
		"dirty_high %llu no_slot %llu, dirty at end %u, RAID reads %llu bytes, cut %llu\n",
		tfs_policy_name(kind), thr, cap, (unsigned long long)st->reads,
		(unsigned long long)st->read_hits, (unsigned long long)st->read_partial,
		(unsigned long long)st->writes,
		(unsigned long long)st->write_hits, (unsigned long long)st->promotions,
		(unsigned long long)st->fills, (unsigned long long)st->allocations,
		(unsigned long long)st->copies, (unsigned long long)st->fresh, (unsigned long long)st->evictions, (unsigned long long)st->flushed_extents,
		(unsigned long long)st->reclaimed, (unsigned long long)st->bypass_seq, (unsigned long long)st->bypass_dirty_high,
		(unsigned long long)st->bypass_no_slot, tfs_model_dirty(m),
		(unsigned long long)st->raid_read_bytes, (unsigned long long)st->cut_extents);
}

/* Record q through m (none: nothing), and through r (if any) when it
 * touches r's sample; autot: the tuner's choice becomes m's settings (and
 * the curve's).  Returns true if m served it whole. */
static bool feed(const struct opts *o, struct tfs_model *m, struct tfs_mrc *r, bool autot,
		 const struct tfs_trace_rec *q)
{
	uint32_t now = (uint32_t)(q->t_ns / (1000000000 / 16));	/* ticks of 1/16 s */
	bool wr = q->op == TFS_TR_WRITE, hit;
	unsigned seq;

	if (q->op == TFS_TR_CUT) {	/* as the daemon's cut.c tells both */
		uint64_t len = q->flags & TFS_TR_TO_END ? UINT64_MAX : q->len;

		tfs_model_cut(m, q->fid, q->off, len);
		if (r)
			tfs_mrc_cut(r, q->fid, q->off, len);
		return true;
	}
	seq = tfs_model_seq(m, q->fid, q->off, q->len, wr);

	tfs_model_clock(m, q->t_ns);
	hit = tfs_model_apply(m, q->fid, q->off, q->len, wr, seq, now);
	if (r && tfs_mrc_watches(r, q->fid, q->off, q->len)) {
		struct tfs_tune t;

		tfs_mrc_clock(r, q->t_ns);
		tfs_mrc_request(r, q->fid, q->off, q->len, wr, seq, now);
		if (autot && tfs_mrc_tuned(r, &t)) {
			tfs_model_set_promote(m, t.promote);
			tfs_model_set_spare(m, t.spare_hot);
			tfs_mrc_set(r, &t);
		}
	}
	return hit;
}

/* Pieces (extents touched) of record q (a cut: none). */
static uint64_t pieces(const struct opts *o, const struct tfs_trace_rec *q)
{
	if (q->op == TFS_TR_CUT)
		return 0;
	return (q->off + q->len - 1) / o->extent - q->off / o->extent + 1;
}

/* The trace through a model of a tier of cap slots; accesses are the
 * model's pieces (one per extent a request touches, as o->ids), the
 * first o->warmup of them not counted. */
static struct result model_run(const struct opts *o, enum tfs_policy_kind kind, uint32_t thr,
			       uint32_t cap, struct acts *acts)
{
	uint64_t warm = (uint64_t)(o->warmup * o->n), seen = 0;
	struct tfs_model *m = new_model(o, kind, thr, cap, acts);
	/* threshold 0: the tier's tuner, as the daemon runs it */
	struct tfs_mrc *tuner = thr ? NULL : new_mrc(o, kind, thr, cap, true);
	const struct tfs_model_stats *st;
	struct result r = { 0 };

	for (size_t i = 0; i < o->nrecs; i++) {
		const struct tfs_trace_rec *q = &o->recs[i];

		if (seen <= warm && seen + pieces(o, q) > warm)
			tfs_model_reset_stats(m);	/* counting starts with this request */
		seen += pieces(o, q);
		feed(o, m, tuner, true, q);
	}
	tfs_mrc_free(tuner);
	st = tfs_model_stats(m);
	if (getenv("CACHE_SIM_DEBUG"))
		debug_stats(m, kind, thr, cap);
	r.counted = st->reads + st->writes;
	r.hits = st->read_hits + st->write_hits;
	r.admitted = st->promotions + st->allocations;
	r.bytes = st->read_bytes + st->write_bytes;
	r.hit_bytes = st->read_hit_bytes + st->write_hit_bytes;
	r.reads = st->reads;
	r.read_hits = st->read_hits;
	r.ssd_bytes = st->ssd_write_bytes;
	tfs_model_free(m);
	return r;
}

/* Pieces the model wrote around it so far (past the cutoff, at
 * dirty_high, for want of a slot). */
static uint64_t model_around(const struct tfs_model *m)
{
	const struct tfs_model_stats *st = tfs_model_stats(m);

	return st->bypass_seq + st->bypass_dirty_high + st->bypass_no_slot;
}

/* The trace through models of cap slots, every request, beside the
 * trace's own hit flags (TFS_TR_HIT: the daemon served it whole): how
 * often the model and the daemon that recorded it agree.  CACHE_SIM_DEBUG
 * adds the writes each sent around the tier (TFS_TR_AROUND: traces made
 * before it have none). */
static void agree(const struct opts *o, uint32_t cap)
{
	printf("policy,threshold,slots,requests,trace_hits,model_hits,agree\n");
	for (int k = 0; k < TFS_POLICY_COUNT; k++)
		for (uint32_t ti = 0; ti < o->nthr; ti++) {
			struct tfs_model *m = new_model(o, (enum tfs_policy_kind)k, o->thr[ti], cap,
							NULL);
			uint64_t th = 0, mh = 0, same = 0, nreq = 0, ta = 0, ma = 0, both = 0;

			for (size_t i = 0; i < o->nrecs; i++) {
				const struct tfs_trace_rec *q = &o->recs[i];
				uint64_t before = model_around(m);
				bool hit = feed(o, m, NULL, false, q), was = q->flags & TFS_TR_HIT;
				bool around = model_around(m) != before, tr = q->flags & TFS_TR_AROUND;

				if (q->op == TFS_TR_CUT)
					continue;	/* not a request */
				nreq++;
				th += was;
				mh += hit;
				same += hit == was;
				ta += tr;
				ma += around;
				both += tr && around;
			}
			if (getenv("CACHE_SIM_DEBUG")) {
				debug_stats(m, (enum tfs_policy_kind)k, o->thr[ti], cap);
				fprintf(stderr, "  writes around the tier: the trace's %llu, the model's "
					"%llu, both %llu\n", (unsigned long long)ta,
					(unsigned long long)ma, (unsigned long long)both);
			}
			printf("tierfs_%s,%u,%u,%zu,%llu,%llu,%.4f\n",
			       tfs_policy_name((enum tfs_policy_kind)k), o->thr[ti], cap, (size_t)nreq,
			       (unsigned long long)th, (unsigned long long)mh,
			       nreq ? (double)same / (double)nreq : 0);
			tfs_model_free(m);
		}
}

static const char *const act_name[TFS_MA_COUNT + 1] = {
	[TFS_MA_READ_HIT] = "read_hit", [TFS_MA_READ_SEQ] = "read_seq",
	[TFS_MA_READ_PROMOTE] = "read_promote", [TFS_MA_READ_FILL] = "read_fill",
	[TFS_MA_READ_PARTIAL] = "read_partial", [TFS_MA_READ_MISS] = "read_miss",
	[TFS_MA_WRITE_HIT] = "write_hit", [TFS_MA_WRITE_ALLOC] = "write_alloc",
	[TFS_MA_WRITE_SEQ] = "write_seq", [TFS_MA_WRITE_DIRTY_HIGH] = "write_dirty_high",
	[TFS_MA_WRITE_NO_SLOT] = "write_no_slot", [TFS_MA_WRITE_MODE] = "write_mode",
	[TFS_MA_COUNT] = "none",	/* the extent's first access */
};

struct diff_row {
	uint64_t n;
	uint8_t act, before;
};

static int diff_row_cmp(const void *a, const void *b)
{
	const struct diff_row *x = a, *y = b;

	if (x->n != y->n)
		return x->n < y->n ? 1 : -1;
	return x->act != y->act ? x->act - y->act : x->before - y->before;
}

/* --diff: the tier's model (the default policy at threshold thr, 0: the
 * tuner) and reference policy o->diff_ref at cap slots, access by access
 * after the warm-up: how many both hit, both missed, and of those one
 * alone hit, what the tier did with the access and with the extent's
 * access before (which says why: a read around the tier after a stream's
 * write around it, a promotion after an eviction, ...), most first. */
static void diff(const struct opts *o, uint32_t thr, uint32_t pct, uint32_t cap)
{
	enum { NA = TFS_MA_COUNT + 1 };
	uint64_t warm = (uint64_t)(o->warmup * o->n), both = 0, neither = 0;
	struct acts a = { .act = malloc(o->n), .cap = o->n };
	bool *hit = malloc(o->n * sizeof(*hit));
	uint8_t *before = malloc(o->z);
	uint64_t (*cnt)[TFS_MA_COUNT][NA] = calloc(2, sizeof(*cnt));
	const char *ref = simpol_name((enum simpol_kind)o->diff_ref);

	if (!a.act || !hit || !before || !cnt) {
		fprintf(stderr, "cache_sim: out of memory\n");
		exit(1);
	}
	(void)model_run(o, TFS_POLICY_DEFAULT, thr, cap, &a);
	(void)reference(o, (enum simpol_kind)o->diff_ref, cap, hit);
	if (a.n != o->n) {	/* a piece each, as o->ids (model.c invariant 11) */
		fprintf(stderr, "cache_sim: --diff: the model saw %llu accesses, the references %llu\n",
			(unsigned long long)a.n, (unsigned long long)o->n);
		exit(1);
	}
	memset(before, TFS_MA_COUNT, o->z);
	for (uint64_t t = 0; t < o->n; t++) {
		uint32_t id = o->ids[t] & ~WRITE_BIT;
		uint8_t act = a.act[t];
		bool mine = act == TFS_MA_READ_HIT || act == TFS_MA_WRITE_HIT;

		if (t >= warm) {
			if (mine == hit[t])
				*(mine ? &both : &neither) += 1;
			else
				cnt[mine][act][before[id]]++;
		}
		before[id] = act;
	}
	printf("diff,%s,%u,%u,both_hit,-,-,%llu\n", ref, thr, pct, (unsigned long long)both);
	printf("diff,%s,%u,%u,both_missed,-,-,%llu\n", ref, thr, pct, (unsigned long long)neither);
	for (int mine = 0; mine < 2; mine++) {
		struct diff_row rows[TFS_MA_COUNT * NA];
		size_t n = 0;

		for (int x = 0; x < TFS_MA_COUNT; x++)
			for (int y = 0; y < NA; y++)
				if (cnt[mine][x][y])
					rows[n++] = (struct diff_row){ cnt[mine][x][y], (uint8_t)x,
								       (uint8_t)y };
		qsort(rows, n, sizeof(*rows), diff_row_cmp);
		for (size_t i = 0; i < n; i++)
			printf("diff,%s,%u,%u,%s,%s,%s,%llu\n", ref, thr, pct,
			       mine ? "tier_only" : "reference_only", act_name[rows[i].act],
			       act_name[rows[i].before], (unsigned long long)rows[i].n);
	}
	free(a.act);
	free(hit);
	free(before);
	free(cnt);
}

/* The miss-ratio curve a tier of cap slots would show (its miniatures,
 * mrc.c) beside the model run at each of the curve's sizes. */
static void mrc_check(const struct opts *o, uint32_t cap)
{
	printf("policy,threshold,scale,slots,model_read_hit_ratio,estimate,difference\n");
	for (int k = 0; k < TFS_POLICY_COUNT; k++)
		for (uint32_t ti = 0; ti < o->nthr; ti++) {
			enum tfs_policy_kind kind = (enum tfs_policy_kind)k;
			struct tfs_mrc *r = new_mrc(o, kind, o->thr[ti], cap, false);
			struct tfs_model_cfg cfg = model_cfg(o, kind, o->thr[ti], cap);
			struct tfs_model *full[TFS_MRC_SIZES];
			double est[TFS_MRC_SIZES];
			unsigned thr = cfg.promote;

			for (unsigned i = 0; i < TFS_MRC_SIZES; i++)
				full[i] = new_model(o, kind, thr,
						    (uint32_t)(cap * tfs_mrc_scale[i] + 0.5), NULL);
			/* the miniatures see the 1x model's verdicts of the cutoff */
			for (size_t j = 0; j < o->nrecs; j++)
				for (unsigned i = 0; i < TFS_MRC_SIZES; i++)
					feed(o, full[i], tfs_mrc_scale[i] == 1 ? r : NULL, false,
					     &o->recs[j]);
			tfs_mrc_curve(r, est);
			for (unsigned i = 0; i < TFS_MRC_SIZES; i++) {
				const struct tfs_model_stats *st = tfs_model_stats(full[i]);
				double got = st->reads ? (double)st->read_hits / (double)st->reads : 0;

				printf("tierfs_%s,%u,%g,%u,%.4f,%.4f,%+.4f\n", tfs_policy_name(kind),
				       thr, tfs_mrc_scale[i], tfs_model_slots(full[i]), got, est[i],
				       est[i] - got);
				tfs_model_free(full[i]);
			}
			tfs_mrc_free(r);
		}
}

static void print_row(const struct opts *o, int w, const char *policy, uint32_t thr, uint32_t pct,
		      const struct result *r)
{
	printf("%s,%s,%u,%u,%llu,%llu,%.4f", wname[w], policy, thr, pct,
	       (unsigned long long)r->hits, (unsigned long long)r->counted,
	       r->counted ? (double)r->hits / (double)r->counted : 0.0);
	if (o->admissions)
		printf(",%llu", (unsigned long long)r->admitted);
	if (w == W_TRACE)
		printf(",%.4f,%.4f,%llu", r->reads ? (double)r->read_hits / (double)r->reads : 0.0,
		       r->bytes ? (double)r->hit_bytes / (double)r->bytes : 0.0,
		       (unsigned long long)r->ssd_bytes);
	putchar('\n');
	fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

static int parse_list(const char *s, uint32_t *out, uint32_t *n, uint32_t lo, uint32_t hi)
{
	char *end;

	*n = 0;
	do {
		unsigned long v = strtoul(s, &end, 10);

		if (end == s || v < lo || v > hi || *n == MAXLIST)
			return -EINVAL;
		out[(*n)++] = (uint32_t)v;
		s = end + 1;
	} while (*end == ',');
	return *end ? -EINVAL : 0;
}

static int parse_zones(const char *s, struct opts *o)
{
	char *end;

	o->nzones = 0;
	do {
		if (o->nzones == MAXZONES)
			return -EINVAL;
		o->zpct[o->nzones] = strtod(s, &end);
		if (end == s || *end != ':' || o->zpct[o->nzones] < 0)
			return -EINVAL;
		s = end + 1;
		o->zacc[o->nzones] = strtod(s, &end);
		if (end == s || o->zacc[o->nzones] < 0)
			return -EINVAL;
		o->nzones++;
		s = end + 1;
	} while (*end == ',');
	return *end ? -EINVAL : 0;
}

static int parse_workloads(const char *s, struct opts *o)
{
	char buf[128], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	memset(o->work, 0, sizeof(o->work));
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int w;

		for (w = 0; w < W_COUNT && strcmp(tok, wname[w]); w++)
			;
		if (w == W_COUNT)
			return -EINVAL;
		o->work[w] = true;
	}
	return 0;
}

static int parse_format(const char *s, int *format)
{
	for (*format = 0; *format < F_COUNT; (*format)++)
		if (!strcmp(s, fname[*format]))
			return 0;
	return -EINVAL;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: cache_sim [-z EXTENTS] [-n ACCESSES] [--threshold LIST] [--sizes PCTS]\n"
		"                 [--zones PCT:ACC,...] [--scan-every N] [--zipf-s S]\n"
		"                 [--halve H] [--warmup FRACTION] [--seed S] [--hash-seed S]\n"
		"                 [--workloads LIST]\n"
		"                 [--admissions] [--trace FILE [--extent BYTES] [--mode MODE]\n"
		"                 [--seq-cutoff BYTES] [--row BYTES] [--dirty LOW:HIGH]\n"
		"                 [--halflife SECONDS] [--reclaim on|off|auto] [--destage-mbps R]\n"
		"                 [--agree SLOTS | --mrc SLOTS [--mrc-rate R] | --diff POLICY]\n"
		"                 [--promote-us L] [--format auto|tierfs|csv|vscsi] [--cuts on|off]\n"
		"                 [--sectors valid|whole]]\n");
	exit(2);
}

/* v, option a's value, as a number of kind k in [lo, hi] into out
 * (tfs_parse_num: "16x" is not 16, "1G" is 2^30 where a size is meant;
 * strtoull read "1G" as 1).  Exits 2 after one line on stderr naming the
 * option, the value and the range if v is not such a number. */
static void num(const char *a, const char *v, enum tfs_num_kind k, double lo, double hi,
		void *out)
{
	struct tfs_num_spec sp = { .name = a, .kind = k, .min = lo, .max = hi };
	char err[192];

	if (tfs_parse_num(&sp, v, out, err, sizeof(err))) {
		fprintf(stderr, "cache_sim: %s\n", err);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	uint32_t size;
	struct opts o = {
		.z = 100000, .n = 0, .thr = { 1, 2, 3 }, .nthr = 3,
		.sizes = { 5, 10, 20, 40 }, .nsizes = 4,
		.zpct = { 5, 15, 80 }, .zacc = { 60, 30, 10 }, .nzones = 3,
		.scan_every = 4, .zipf_s = 0.9, .warmup = 0.2, .halve = 0, .seed = 1,
		.work = { true, true, true, true },
		.mcfg = TFS_MODEL_CFG_DEFAULT(1), .mrc_rate = TFS_MRC_RATE, .diff_ref = -1,
	};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		double d;
		int rc = 0, nc = 0;

		if (!strcmp(a, "--admissions")) {
			o.admissions = true;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "-z"))
			num(a, v, TFS_NUM_UINT, 1, UINT32_MAX, &o.z);
		else if (!strcmp(a, "-n"))
			num(a, v, TFS_NUM_SIZE, 0, 1e15, &o.n);
		else if (!strcmp(a, "--threshold"))
			rc = parse_list(v, o.thr, &o.nthr, 0, 65535);
		else if (!strcmp(a, "--sizes"))
			rc = parse_list(v, o.sizes, &o.nsizes, 1, 100);
		else if (!strcmp(a, "--zones"))
			rc = parse_zones(v, &o);
		else if (!strcmp(a, "--scan-every"))
			num(a, v, TFS_NUM_UINT, 0, UINT32_MAX, &o.scan_every);
		else if (!strcmp(a, "--zipf-s"))
			num(a, v, TFS_NUM_REAL, 0, 100, &o.zipf_s);
		else if (!strcmp(a, "--halve"))
			num(a, v, TFS_NUM_SIZE, 0, 1e15, &o.halve);
		else if (!strcmp(a, "--warmup"))
			num(a, v, TFS_NUM_REAL, 0, 1, &o.warmup);
		else if (!strcmp(a, "--seed"))
			num(a, v, TFS_NUM_SIZE, 0, 1e15, &o.seed);
		else if (!strcmp(a, "--hash-seed"))
			num(a, v, TFS_NUM_SIZE, 0, 1e15, &o.mcfg.hash_seed);
		else if (!strcmp(a, "--workloads"))
			rc = parse_workloads(v, &o);
		else if (!strcmp(a, "--trace"))
			o.trace_path = v;
		else if (!strcmp(a, "--extent"))
			num(a, v, TFS_NUM_SIZE, 1, 1e15, &o.extent);
		else if (!strcmp(a, "--mrc-rate"))
			num(a, v, TFS_NUM_REAL, 1e-9, 1, &o.mrc_rate);
		else if (!strcmp(a, "--mrc"))
			num(a, v, TFS_NUM_UINT, 1, UINT32_MAX, &o.mrc_slots);
		else if (!strcmp(a, "--diff"))
			rc = (o.diff_ref = simpol_parse(v)) < 0 ? -EINVAL : 0;
		else if (!strcmp(a, "--agree"))
			num(a, v, TFS_NUM_UINT, 1, UINT32_MAX, &o.agree_slots);
		else if (!strcmp(a, "--mode"))
			rc = tfs_cache_mode_parse(v, &o.mcfg.mode);
		else if (!strcmp(a, "--seq-cutoff"))
			num(a, v, TFS_NUM_SIZE, 0, 1e15, &o.mcfg.seq_cutoff);
		else if (!strcmp(a, "--dirty"))
			rc = sscanf(v, "%u:%u%n", &o.mcfg.dirty_low, &o.mcfg.dirty_high, &nc) == 2 &&
			     !v[nc] && o.mcfg.dirty_low < o.mcfg.dirty_high && o.mcfg.dirty_high <= 100
			     ? 0 : -EINVAL;
		else if (!strcmp(a, "--row"))
			num(a, v, TFS_NUM_SIZE, 0, 1e15, &o.mcfg.row_bytes);
		else if (!strcmp(a, "--halflife")) {
			num(a, v, TFS_NUM_REAL, 1.0 / 16, 1e8, &d);
			o.mcfg.halflife = (uint32_t)(d * 16);
		}
		else if (!strcmp(a, "--reclaim"))
			rc = tfs_reclaim_parse(v, &o.mcfg.reclaim);
		else if (!strcmp(a, "--destage-mbps"))
			num(a, v, TFS_NUM_REAL, 0, 1e9, &o.mcfg.destage_mbps);
		else if (!strcmp(a, "--promote-us")) {
			num(a, v, TFS_NUM_REAL, 0, 1e9, &d);
			o.mcfg.promote_ns = (uint64_t)(d * 1000);
		}
		else if (!strcmp(a, "--cuts"))
			rc = strcmp(v, "on") == 0 ? 0 : strcmp(v, "off") == 0 ? (o.no_cuts = true, 0)
								   : -EINVAL;
		else if (!strcmp(a, "--sectors"))
			rc = strcmp(v, "valid") == 0 ? 0 : strcmp(v, "whole") == 0
			     ? (o.whole_extents = true, 0) : -EINVAL;
		else if (!strcmp(a, "--format"))
			rc = parse_format(v, &o.format);
		else
			usage();
		if (rc)
			usage();
	}
	if (o.trace_path) {	/* the recorded trace alone */
		if (!o.extent)
			o.extent = 256 * 1024;
		if (o.extent % TFS_SECTOR || o.extent / TFS_SECTOR > TFS_CEXT_WORDS * 64) {
			/* the tier's sector bitmaps (sectors.h), every policy's */
			fprintf(stderr, "cache_sim: --extent %llu: a multiple of %u up to %u bytes\n",
				(unsigned long long)o.extent, TFS_SECTOR,
				TFS_CEXT_WORDS * 64 * TFS_SECTOR);
			return 2;
		}
		load_trace(&o);
		memset(o.work, 0, sizeof(o.work));
		o.work[W_TRACE] = true;
	}
	if (o.mrc_slots) {
		if (!o.trace_path)
			usage();
		mrc_check(&o, o.mrc_slots);
		return 0;
	}
	if (o.agree_slots) {
		if (!o.trace_path)
			usage();
		agree(&o, o.agree_slots);
		return 0;
	}
	if (o.diff_ref >= 0) {
		if (!o.trace_path)
			usage();
		printf("diff,reference,threshold,cache_pct,who,tier_act,tier_before,accesses\n");
		for (uint32_t ti = 0; ti < o.nthr; ti++)
			for (uint32_t si = 0; si < o.nsizes; si++)
				diff(&o, o.thr[ti], o.sizes[si],
				     (uint32_t)((uint64_t)o.ws * o.sizes[si] / 100));
		return 0;
	}
	if (o.z < 2 || o.scan_every < 1 || o.warmup < 0 || o.warmup >= 1 || !o.nzones)
		usage();
	if (!o.n)
		o.n = 20ull * o.z;
	size = o.trace_path ? o.ws : o.z;	/* a trace's: extents, not ids (cuts) */

	printf("workload,policy,threshold,cache_pct,hits,accesses,hit_ratio%s%s\n",
	       o.admissions ? ",admissions" : "",
	       o.trace_path ? ",read_hit_ratio,byte_hit_ratio,ssd_write_bytes" : "");
	for (int w = 0; w < W_COUNT; w++) {
		if (!o.work[w])
			continue;
		/* the policy alone: lru and s3fifo (a wtinylfu row would take
		 * the name of the reference W-TinyLFU's, below) */
		for (int k = 0; k <= TFS_POLICY_S3FIFO; k++)
			for (uint32_t ti = 0; ti < o.nthr; ti++)
				for (uint32_t si = 0; si < o.nsizes; si++) {
					uint32_t cap = (uint32_t)((uint64_t)size * o.sizes[si] / 100);
					struct result r = simulate(&o, w, (enum tfs_policy_kind)k,
								   o.thr[ti], cap);

					print_row(&o, w, tfs_policy_name((enum tfs_policy_kind)k),
						  o.thr[ti], o.sizes[si], &r);
				}
		if (w != W_TRACE)
			continue;
		/* the tier's own rules (tfs_model), as it runs */
		for (int k = 0; k < TFS_POLICY_COUNT; k++)
			for (uint32_t ti = 0; ti < o.nthr; ti++)
				for (uint32_t si = 0; si < o.nsizes; si++) {
					uint32_t cap = (uint32_t)((uint64_t)size * o.sizes[si] / 100);
					struct result r = model_run(&o, (enum tfs_policy_kind)k,
								    o.thr[ti], cap, NULL);
					char name[32];

					snprintf(name, sizeof(name), "tierfs_%s",
						 tfs_policy_name((enum tfs_policy_kind)k));
					print_row(&o, w, name, o.thr[ti], o.sizes[si], &r);
				}
		/* the reference policies, then the optimum, without and with
		 * bypass (b - SIMPOL_COUNT) */
		for (int b = 0; b < SIMPOL_COUNT + 2; b++)
			for (uint32_t si = 0; si < o.nsizes; si++) {
				uint32_t cap = (uint32_t)((uint64_t)size * o.sizes[si] / 100);
				struct result r = b < SIMPOL_COUNT
					? reference(&o, (enum simpol_kind)b, cap, NULL)
					: belady(&o, cap, b > SIMPOL_COUNT);

				print_row(&o, w, b < SIMPOL_COUNT ? simpol_name((enum simpol_kind)b)
					  : b > SIMPOL_COUNT ? "belady_bypass" : "belady",
					  0, o.sizes[si], &r);
			}
	}
	return 0;
}
