/* model.c - the SSD tier as a model (include/tierfs/model.h): one
 * thread, instant I/O, built of the daemon's rules (rules.c) and policy
 * (policy.c).
 *
 * Owns: a model's slots (extent, valid and dirty sectors, heat, last
 * write), its index, free list, heat table, per-file stream detectors,
 * the flusher's clock, and its counts.
 *
 * Invariants:
 *  1. Every decision the daemon makes by a rule is made here by the same
 *     rule with the same inputs, in the same order within a request:
 *     heat is bumped, the piece decided, then counted; promotions and fills
 *     follow the request (the daemon queues them after its RAID read), in
 *     its order, and each one's slot is held (busy: not evictable) while
 *     the next TFS_PROMOTERS - 1 are done, as the daemon's promoters run
 *     them side by side (a job queue of MODEL_JOBS: a request with more
 *     pieces to promote runs a full queue's jobs first).
 *  2. Dirty sectors are valid, and only clean slots are evicted, in
 *     batches of tfs_evict_batch, victims chosen by the policy.
 *  3. The flusher runs before each request, in the request's time: it
 *     destages batches while tfs_flush_plan says so and its clock (the
 *     end of its last pause) is not past now, or the level is at
 *     tfs_flush_flat, or the request ends an idle gap (TFS_FLUSH_IDLE_TICKS
 *     without a request: tfs_flush_plan's idle, everything destaged).
 *     A batch takes the daemon's files (flush.c invariant 19: those whose
 *     oldest destageable extent is oldest, tfs_flush_keep), and of each
 *     up to flush_batch destageable extents in the file chain's order
 *     (newest first; the daemon's per-file cursor is left out).  Before,
 *     the model took files in slot order and the daemon in identity
 *     order, and on maildir the model hit 1,100-1,700 reads more than
 *     the daemon that recorded the trace.  With cfg.destage_mbps a destage takes time (tfs_model_clock's ns):
 *     its bytes go at that rate after those sent before it, and until
 *     then its slot is dirty (not evictable, counted against
 *     dirty_high), and on the way (no flusher or reclaim takes it again);
 *     it is clean then unless written meanwhile.  While a round is on
 *     its way the flusher starts nothing, as the daemon's waits for its
 *     batch; so a RAID slower than the writes fills the tier with dirty
 *     extents, and writes go around it (the daemon's full_bypass).
 *     Without a rate, a destage is done at once, as before.
 *  4. A piece of an extent outside the sample changes nothing and is not
 *     counted; the stream detector sees every request.
 *  5. Memory is allocated at tfs_model_new only.
 *  6. While reclaim is on (cfg.reclaim on, or auto once the evidence said
 *     so: invariant 7), a dirty slot the policy looks at for eviction is
 *     noted, refused, and after each eviction batch the dirty slots among
 *     the policy's next 2 batches of victims are noted (clean-ahead,
 *     tfs_policy_next), as index.c notes them (note_reclaim: the reclaim
 *     flag, and the reclaim queue; at most nslots entries, a full queue
 *     notes nothing); a use of the extent takes the flags back.  The
 *     flusher, before anything else, destages every noted slot still
 *     flagged, and a slot cleaned while flagged drops the flags and is
 *     demoted (tfs_policy_demote) if it was refused.  The daemon's
 *     flusher does this on its next round (flush.c invariant 15): in the
 *     model, before the next request.
 *  7. With cfg.reclaim auto the model keeps the daemon's evidence (index.c
 *     invariant 7, evidence.h) while reclaim is off: a dirty slot the
 *     policy looks at is marked contested, every victim is reported,
 *     displaced if its look marked one (tfs_evidence_victim), an uncached
 *     read piece is a miss for it, and a whole read hit of a contested
 *     slot is kept (the mark cleared).  When it pays (at TFS_EVIDENCE_ON times the sample's
 *     share: a miniature sees that share of the events), reclaim is on
 *     for good and W-TinyLFU's protected segment goes to probation
 *     (tfs_policy_unprotect).
 *  8. Every used slot is on two chains: its extent's (htab, by
 *     tfs_ext_key) and its file's (ftab, by the identity alone: a cut
 *     finds a file's slots without knowing its extents).  A cut
 *     (tfs_model_cut) happens between requests, as the daemon's: a slot
 *     on its way to the RAID gets there first (the daemon's cut waits for
 *     the flusher), then the sectors wholly cut leave it, and an empty
 *     slot leaves the policy and both chains.
 *  9. With cfg.promote_ns a promotion is not a job of its request: it
 *     waits for a promoter (pq: at most cfg.promote_queue wait, a full
 *     queue drops it, as the daemon's promote queue), then takes
 *     promote_ns, and meanwhile its heat entry is queued, so a read of the
 *     extent is a miss that queues nothing (rules.h blocked, as read.c's);
 *     once done, before the next request, it takes a slot unless the
 *     extent was cached meanwhile.  The promoters (cfg.promoters of them,
 *     a miniature's share of the daemon's) start one promotion every
 *     promote_ns / promoters, and after an idle spell as many at once as
 *     there are promoters (pfree): so a load that queues promotions
 *     faster than the promoters finish them (threshold 1 on an array of
 *     slow reads) waits and drops as on the mount, where a fixed delay
 *     alone let every promotion through in its time (stop 42's tuner
 *     window).  When the threshold rises, the promotions still waiting
 *     whose extent's heat is under it are dropped and those behind them
 *     take their starts (stale_promotions; flush.c invariant 20).  A cut
 *     voids those of the file.  Fills stay jobs.
 *     So sequential reads of uncached data (a kernel's readahead: the
 *     second half of an extent comes before the first half's promotion
 *     is done) miss as on the mount (copy-and-edit: the agreement with the
 *     daemon .9227 at once, .9343 at 0.5 ms).
 * 10. A slot a write of a stream past the cutoff dirtied (TFS_SEQ_STREAM,
 *     cached because not a full row) is streamed until read again or
 *     written otherwise: the flusher does not spare it young, and once
 *     clean it is demoted (evicted first), as write.c invariant 10.
 * 11. cfg.watch, if set, is told every piece counted (in the sample) once,
 *     when the rule decided it, in the order the pieces come: what a
 *     caller needs to set the tier's outcome of each access beside
 *     another policy's (cache_sim --diff).  It changes nothing.
 * 12. A write of a stream that is a full row, over an extent not cached
 *     (TFS_WR_COPY), reaches the RAID and leaves a clean copy of its whole
 *     sectors in a fresh slot, demoted at once (the next victim), as
 *     write.c invariant 11, when tfs_copy_take says so: counted in copies
 *     and in the SSD's bytes; without a clean slot, or a whole sector, it
 *     is the RAID's only.  A copy is resolved (copy_ev) once: used, at its
 *     first use (used()), or unused, when it leaves (unlink_slot).  In
 *     write-through a stream's full row does the same.
 * 13. In write-through any other write over an extent not cached
 *     (TFS_WR_FRESH) reaches the RAID and leaves its sectors in a fresh
 *     slot, clean, as write.c invariant 12 (counted in fresh and the
 *     SSD's bytes), demoted at once if the write is a stream's; without a
 *     clean slot (no_slot) nothing is cached.  Write-through's partial
 *     sectors are valid after it, in a fresh slot or a cached one, as
 *     write-back's: the daemon fills them (a read of the rest that fails
 *     leaves one invalid there, never here).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/evidence.h"
#include "tierfs/model.h"
#include "tierfs/rules.h"
#include "tierfs/sectors.h"

#define NONE UINT32_MAX
#define SEQ_FILES 4096		/* stream detectors, by fid (a collision resets one) */

struct mslot {
	uint64_t fid, idx;
	uint64_t valid[TFS_CEXT_WORDS], dirty[TFS_CEXT_WORDS];
	uint32_t hnext, fnext, wtime, heat_t;	/* chains: invariant 8 */
	uint16_t heat;
	bool used, reclaim, refused;	/* invariant 6 */
	bool busy;			/* invariant 1: a job of this request holds it */
	bool contested;			/* invariant 7 */
	bool destaging;			/* invariant 3: on its way to the RAID */
	bool streamed;			/* invariant 10 */
	bool copy;			/* invariant 12: a stream's copy, not used since */
	uint32_t wgen, dgen;		/* writes into it; wgen when its destage began */
};

/* A destage on its way (invariant 3): slot s is clean at done ns. */
struct mdest {
	uint64_t done;
	uint32_t s;
};

struct mseq {
	uint64_t fid, next, run;
};

#define MODEL_JOBS 256		/* a request's promotions and fills (invariant 1) */

/* A promotion on its way (cfg.promote_ns): a promoter takes it at
 * start, it is readable at ready; void: its file was cut meanwhile. */
struct mpend {
	uint64_t fid, idx, key, start, ready;
	bool void_;
};

struct mjob {
	uint64_t fid, idx, key;
	uint32_t s;		/* a fill's slot; a promotion's once it has one */
	bool fill;
};

struct tfs_model {
	struct tfs_model_cfg cfg;
	unsigned spe;			/* sectors per extent */
	struct mslot *e;
	uint32_t *htab, *ftab, hmask;	/* invariant 8 */
	uint32_t *freel, nfree;
	uint32_t nused, ndirty;
	struct tfs_copy_ev copy_ev;	/* invariant 12 */
	struct tfs_policy *pol;
	struct tfs_heat_ent *heat;
	uint32_t heat_mask;
	struct mseq *seq;
	uint32_t last_io, flush_at;	/* invariant 3 */
	uint64_t ns, busy_ns;		/* invariant 3: the clock; the round's end */
	struct mdest *dq;		/* destages on their way, by done (a ring) */
	uint32_t dq_head, dq_len;
	bool any_io;
	uint32_t *rq, nrq;		/* invariant 6 */
	struct tfs_evidence *ev;	/* invariant 7 */
	bool passed;			/* this look passed over a dirty slot */
	struct mjob *jobs;		/* invariant 1 */
	unsigned njobs;
	struct mpend *pq;		/* promotions on their way, by start (a ring) */
	uint32_t pq_head, pq_len, pq_cap;
	uint64_t pfree;			/* invariant 9: the promoters' next start */
	struct tfs_model_stats st;
};

/* ---- life ---- */

struct tfs_model *tfs_model_new(const struct tfs_model_cfg *cfg)
{
	struct tfs_model *m;
	uint32_t hn;

	if (!cfg->nslots || !cfg->extent || cfg->extent % TFS_SECTOR ||
	    cfg->extent / TFS_SECTOR > TFS_CEXT_WORDS * 64 || !cfg->promote || !cfg->halflife ||
	    cfg->dirty_low >= cfg->dirty_high || cfg->dirty_high > 100 ||
	    (cfg->heat_entries && (cfg->heat_entries & (cfg->heat_entries - 1) ||
				   cfg->heat_entries < TFS_HEAT_WAYS)))
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->cfg = *cfg;
	if (!m->cfg.evict_batch)
		m->cfg.evict_batch = tfs_evict_batch(cfg->nslots);
	if (!m->cfg.flush_batch)
		m->cfg.flush_batch = TFS_FLUSH_BATCH;
	m->spe = cfg->extent / TFS_SECTOR;
	hn = cfg->heat_entries ? cfg->heat_entries : tfs_heat_entries(cfg->nslots);
	m->heat_mask = hn - 1;
	m->hmask = tfs_pow2_at_least(cfg->nslots) - 1;
	m->e = calloc(cfg->nslots, sizeof(*m->e));
	m->htab = malloc(((size_t)m->hmask + 1) * sizeof(*m->htab));
	m->ftab = malloc(((size_t)m->hmask + 1) * sizeof(*m->ftab));
	m->freel = malloc((size_t)cfg->nslots * sizeof(*m->freel));
	m->heat = calloc(hn, sizeof(*m->heat));
	m->seq = calloc(SEQ_FILES, sizeof(*m->seq));
	m->dq = malloc((size_t)cfg->nslots * sizeof(*m->dq));
	m->rq = malloc((size_t)cfg->nslots * sizeof(*m->rq));
	m->jobs = malloc(MODEL_JOBS * sizeof(*m->jobs));
	if (!m->cfg.promote_queue)
		m->cfg.promote_queue = TFS_PROMOTE_QUEUE;
	if (!(m->cfg.promoters > 0))
		m->cfg.promoters = TFS_PROMOTERS;
	/* those waiting, and those the promoters have (invariant 9) */
	m->pq_cap = m->cfg.promote_queue + 2 * (uint32_t)ceil(m->cfg.promoters) + 2;
	m->pq = malloc(m->pq_cap * sizeof(*m->pq));	/* promote_ns may come later */
	m->pol = tfs_policy_new(cfg->policy, cfg->nslots, cfg->hash_seed);
	/* auto may be set later; a sample sees its share of the evidence
	 * (evidence.c invariant 3) */
	m->ev = tfs_evidence_new(cfg->nslots, (int)(TFS_EVIDENCE_ON * ((double)cfg->sample /
								       18446744073709551616.0) + 0.5));
	if (!m->e || !m->htab || !m->ftab || !m->freel || !m->heat || !m->seq || !m->rq || !m->jobs || !m->dq ||
	    !m->pol || !m->ev || !m->pq) {
		tfs_model_free(m);
		return NULL;
	}
	memset(m->htab, 0xff, ((size_t)m->hmask + 1) * sizeof(*m->htab));
	memset(m->ftab, 0xff, ((size_t)m->hmask + 1) * sizeof(*m->ftab));
	for (uint32_t s = 0; s < cfg->nslots; s++)	/* slot 0 handed out first */
		m->freel[s] = cfg->nslots - 1 - s;
	m->nfree = cfg->nslots;
	return m;
}

void tfs_model_free(struct tfs_model *m)
{
	if (!m)
		return;
	free(m->e);
	free(m->htab);
	free(m->ftab);
	free(m->freel);
	free(m->heat);
	free(m->seq);
	free(m->dq);
	free(m->rq);
	free(m->jobs);
	free(m->pq);
	tfs_policy_free(m->pol);
	tfs_evidence_free(m->ev);
	free(m);
}

uint64_t tfs_model_bytes(const struct tfs_model *m)
{
	return sizeof(*m) +
	       (uint64_t)m->cfg.nslots * (sizeof(*m->e) + sizeof(*m->freel) + sizeof(*m->rq) +
					 sizeof(*m->dq)) +
	       tfs_policy_bytes(m->pol) + tfs_evidence_bytes(m->ev) +
	       ((uint64_t)m->hmask + 1) * (sizeof(*m->htab) + sizeof(*m->ftab)) +
	       ((uint64_t)m->heat_mask + 1) * sizeof(*m->heat) + SEQ_FILES * sizeof(*m->seq) +
	       MODEL_JOBS * sizeof(*m->jobs) + (uint64_t)m->pq_cap * sizeof(*m->pq);
}

const struct tfs_model_stats *tfs_model_stats(const struct tfs_model *m)
{
	return &m->st;
}

void tfs_model_reset_stats(struct tfs_model *m)
{
	memset(&m->st, 0, sizeof(m->st));
}

/* The i-th promotion of pq from its head. */
static struct mpend *pq_at(struct tfs_model *m, uint32_t i)
{
	return &m->pq[(m->pq_head + i) % m->pq_cap];
}

/* Returns how many promotions of pq, from its head, a promoter has taken
 * by now (invariant 9): those under way, a few (the promoters' share). */
static uint32_t pq_taken(struct tfs_model *m)
{
	uint32_t n = 0;

	while (n < m->pq_len && pq_at(m, n)->start <= m->ns)
		n++;
	return n;
}

/* The threshold rose to m->cfg.promote at now: the promotions waiting
 * whose extent's heat is under it are dropped, and those behind them take
 * their starts, in order (invariant 9; the daemon's promoters take a stale
 * one off the queue without reading it, flush.c invariant 20). */
static void stale_promotions(struct tfs_model *m, uint32_t now)
{
	uint32_t k, i;

	for (k = i = pq_taken(m); i < m->pq_len; i++) {
		struct mpend q = *pq_at(m, i);
		struct tfs_heat_ent *g = tfs_heat_find(m->heat, m->heat_mask, m->cfg.halflife,
						       q.key, now);
		struct mpend *to;

		if (!q.void_ && tfs_promote_stale(g, m->cfg.halflife, now, m->cfg.promote)) {
			g->queued = false;
			m->st.promote_dropped++;
			continue;
		}
		/* the k-th start, unwritten yet (k <= i) */
		to = pq_at(m, k++);
		q.ready = to->start + (q.ready - q.start);
		q.start = to->start;
		*to = q;
	}
	if (k < m->pq_len)	/* the promoters' next start is the first freed */
		m->pfree = pq_at(m, k)->start;
	m->pq_len = k;
}

void tfs_model_set_promote(struct tfs_model *m, unsigned promote)
{
	unsigned was = m->cfg.promote;

	m->cfg.promote = promote ? promote : 1;
	if (m->cfg.promote > was && m->pq_len)
		stale_promotions(m, m->last_io);
}

void tfs_model_set_spare(struct tfs_model *m, bool hot_only)
{
	m->cfg.spare_hot_only = hot_only;
}

void tfs_model_set_destage(struct tfs_model *m, double mbps)
{
	m->cfg.destage_mbps = mbps > 0 ? mbps : 0;
}

void tfs_model_set_promote_time(struct tfs_model *m, uint64_t ns)
{
	m->cfg.promote_ns = ns;
}

void tfs_model_set_reclaim(struct tfs_model *m, enum tfs_reclaim r)
{
	m->cfg.reclaim = r;
}

bool tfs_model_reclaiming(const struct tfs_model *m)
{
	return tfs_reclaim_on(m->cfg.reclaim, tfs_evidence_pays(m->ev));
}

/* Whether the evidence is being kept: auto, and reclaim not on yet. */
static bool judging(const struct tfs_model *m)
{
	return m->cfg.reclaim == TFS_RECLAIM_AUTO && !tfs_evidence_pays(m->ev);
}

/* After an event of the evidence: once it pays (reclaim on from now on),
 * what the turn does once (invariant 7). */
static void judged(struct tfs_model *m)
{
	if (tfs_evidence_pays(m->ev))
		tfs_policy_unprotect(m->pol);
}

uint32_t tfs_model_slots(const struct tfs_model *m)
{
	return m->cfg.nslots;
}

uint32_t tfs_model_used(const struct tfs_model *m)
{
	return m->nused;
}

uint32_t tfs_model_dirty(const struct tfs_model *m)
{
	return m->ndirty;
}

/* ---- the index ---- */

static uint32_t lookup(const struct tfs_model *m, uint64_t key, uint64_t fid, uint64_t idx)
{
	for (uint32_t s = m->htab[key & m->hmask]; s != NONE; s = m->e[s].hnext)
		if (m->e[s].fid == fid && m->e[s].idx == idx)
			return s;
	return NONE;
}

/* The head of fid's chain (invariant 8). */
static uint32_t *file_chain(const struct tfs_model *m, uint64_t fid)
{
	return &m->ftab[tfs_mix64(fid) & m->hmask];
}

static void unlink_slot(struct tfs_model *m, uint32_t s)
{
	struct mslot *x = &m->e[s];
	uint32_t *pp = &m->htab[tfs_ext_key(x->fid, x->idx) & m->hmask];

	if (x->copy)	/* invariant 12: gone unused */
		tfs_copy_resolved(&m->copy_ev, false);

	while (*pp != s)
		pp = &m->e[*pp].hnext;
	*pp = x->hnext;
	for (pp = file_chain(m, x->fid); *pp != s;)
		pp = &m->e[*pp].fnext;
	*pp = x->fnext;
	x->used = false;
	m->nused--;
	m->freel[m->nfree++] = s;
}

/* Slot s, dirty, is noted for the flusher, once, while the queue has
 * room; refused: eviction passed over it (invariant 6, index.c
 * note_reclaim). */
static void note_reclaim(struct tfs_model *m, uint32_t s, bool refused)
{
	struct mslot *x = &m->e[s];

	if (!x->reclaim) {
		if (m->nrq == m->cfg.nslots)
			return;		/* a full queue notes nothing */
		x->reclaim = true;
		m->rq[m->nrq++] = s;
	}
	x->refused |= refused;
}

/* The policy's ok(): a clean slot goes, a dirty one is noted
 * (invariant 6). */
static bool evictable(void *arg, uint32_t s)
{
	struct tfs_model *m = arg;
	struct mslot *x = &m->e[s];

	if (!x->used)
		return false;
	if (!bm_any(x->dirty))
		return !x->busy;
	if (judging(m)) {
		x->contested = true;
		m->passed = true;
	}
	if (tfs_model_reclaiming(m))
		note_reclaim(m, s, true);
	return false;
}

/* Slot s was used: the policy's hit; eviction wants it no more. */
static void used(struct tfs_model *m, uint32_t s)
{
	tfs_policy_hit(m->pol, s);
	m->e[s].reclaim = m->e[s].refused = false;
	if (m->e[s].copy) {	/* invariant 12 */
		m->e[s].copy = false;
		tfs_copy_resolved(&m->copy_ev, true);
	}
}

/* A read piece hit slot s whole: used, and the evidence for reclaim (a
 * dirty extent eviction passed over was read: invariant 7; index.c
 * c_read_hit). */
static void read_hit(struct tfs_model *m, uint32_t s)
{
	struct mslot *x = &m->e[s];

	x->streamed = false;	/* read again: not a stream's passing data */
	used(m, s);
	if (!x->contested || !judging(m))
		return;
	x->contested = false;
	tfs_evidence_kept(m->ev);
}

/* x's dirty sectors reached the RAID: clean unless written since its
 * destage began; noted, it is let go, demoted if eviction refused it
 * (invariant 6). */
static void destaged(struct tfs_model *m, uint32_t s)
{
	struct mslot *x = &m->e[s];

	x->destaging = false;
	if (x->wgen != x->dgen)
		return;		/* written meanwhile: dirty still, for a later round */
	memset(x->dirty, 0, sizeof(x->dirty));
	m->ndirty--;
	if (x->refused || x->streamed)	/* invariants 6, 10 */
		tfs_policy_demote(m->pol, s);
	x->reclaim = x->refused = x->streamed = false;
}

/* x's dirty sectors go to the RAID: at once, or at destage_mbps after
 * what the round has sent before them (invariant 3). */
static void destage(struct tfs_model *m, uint32_t s)
{
	struct mslot *x = &m->e[s];
	uint64_t bytes = (uint64_t)bm_count(x->dirty) * TFS_SECTOR;

	m->st.raid_write_bytes += bytes;
	m->st.flushed_extents++;
	x->dgen = x->wgen;
	if (!m->cfg.destage_mbps) {
		destaged(m, s);
		return;
	}
	x->destaging = true;
	m->busy_ns = (m->busy_ns > m->ns ? m->busy_ns : m->ns) +
		     (uint64_t)((double)bytes * 1000.0 / m->cfg.destage_mbps);
	m->dq[(m->dq_head + m->dq_len++) % m->cfg.nslots] = (struct mdest){ m->busy_ns, s };
}

/* The destages done by now (invariant 3). */
static void destages_done(struct tfs_model *m)
{
	while (m->dq_len && m->dq[m->dq_head].done <= m->ns) {
		if (m->dq[m->dq_head].s != NONE)	/* NONE: arrived early, cut */
			destaged(m, m->dq[m->dq_head].s);
		m->dq_head = (m->dq_head + 1) % m->cfg.nslots;
		m->dq_len--;
	}
}

/* Clean-ahead: the dirty slots among eviction's next 2 batches of
 * victims, noted (invariant 6, index.c note_ahead). */
static void note_ahead(struct tfs_model *m)
{
	uint32_t next[2 * TFS_EVICT_BATCH], n = 2 * m->cfg.evict_batch;

	n = tfs_policy_next(m->pol, next, n < 2 * TFS_EVICT_BATCH ? n : 2 * TFS_EVICT_BATCH);
	for (uint32_t i = 0; i < n; i++)
		if (m->e[next[i]].used && bm_any(m->e[next[i]].dirty))
			note_reclaim(m, next[i], false);
}

/* A free slot for (fid, idx), linked, empty, heat 0 as of now (index.c
 * c_alloc_slot, evict_some); NONE: every slot dirty. */
static uint32_t alloc_slot(struct tfs_model *m, uint64_t key, uint64_t fid, uint64_t idx,
			   uint32_t now)
{
	struct mslot *x;
	uint32_t s;

	if (!m->nfree) {
		for (unsigned n = 0; n < m->cfg.evict_batch && m->nused > m->ndirty; n++) {
			uint32_t v;

			m->passed = false;
			v = tfs_policy_victim(m->pol, evictable, m, 4 * m->cfg.nslots + 64);
			if (v == TFS_POLICY_NONE)
				break;
			if (judging(m))
				tfs_evidence_victim(m->ev, tfs_ext_key(m->e[v].fid, m->e[v].idx),
						    m->passed);
			unlink_slot(m, v);
			m->st.evictions++;
		}
		if (tfs_model_reclaiming(m))
			note_ahead(m);
	}
	if (!m->nfree)
		return NONE;
	s = m->freel[--m->nfree];
	x = &m->e[s];
	memset(x, 0, sizeof(*x));
	x->fid = fid;
	x->idx = idx;
	x->used = true;
	x->heat_t = now;
	x->hnext = m->htab[key & m->hmask];
	m->htab[key & m->hmask] = s;
	x->fnext = *file_chain(m, fid);
	*file_chain(m, fid) = s;
	m->nused++;
	tfs_policy_insert(m->pol, s, key);
	return s;
}

/* Sectors [s0, s1) of x become dirty (and valid) at now. */
static void dirty_sectors(struct tfs_model *m, struct mslot *x, unsigned s0, unsigned s1,
			  uint32_t now)
{
	if (!bm_any(x->dirty))
		m->ndirty++;
	bm_set(x->valid, s0, s1);
	bm_set(x->dirty, s0, s1);
	x->wtime = now;
	x->wgen++;
}

/* ---- the flusher (invariant 3) ---- */

/* x may be destaged by a batch taking extents not written for min_age
 * ticks (flush.c flush_begin's test). */
static bool destageable(const struct tfs_model *m, const struct mslot *x, uint32_t min_age,
			uint32_t now)
{
	return x->used && bm_any(x->dirty) && !x->destaging &&
	       !tfs_flush_spares(x->streamed, now, x->wtime, min_age,	/* invariant 10 */
				 tfs_heat_now(m->cfg.halflife, x->heat, x->heat_t, now),
				 m->cfg.spare_hot_only);
}

/* Destages one batch, as the daemon's (flush.c next_dirty, flush_begin):
 * the TFS_FLUSH_FILES files whose oldest destageable extent is oldest
 * (tfs_flush_keep), and of each up to flush_batch destageable extents in
 * its chain's order.  Returns the files. */
static unsigned flush_batch(struct tfs_model *m, uint32_t min_age, uint32_t now)
{
	uint64_t fid[TFS_FLUSH_FILES];
	uint32_t age[TFS_FLUSH_FILES];
	unsigned nf = 0;

	for (uint32_t s = 0; s < m->cfg.nslots; s++)
		if (destageable(m, &m->e[s], min_age, now))
			nf = tfs_flush_keep(fid, age, nf, TFS_FLUSH_FILES, m->e[s].fid,
					    now - m->e[s].wtime);
	for (unsigned i = 0; i < nf; i++) {
		unsigned n = 0;

		for (uint32_t s = *file_chain(m, fid[i]); s != NONE && n < m->cfg.flush_batch;
		     s = m->e[s].fnext)	/* destage may demote, never unlink */
			if (m->e[s].fid == fid[i] && destageable(m, &m->e[s], min_age, now)) {
				destage(m, s);
				n++;
			}
	}
	return nf;
}

/* The noted slots still flagged, destaged and demoted (invariant 6). */
static void reclaim(struct tfs_model *m)
{
	for (uint32_t i = m->nrq; i-- > 0;) {	/* the first noted ends up the next victim */
		uint32_t s = m->rq[i];
		struct mslot *x = &m->e[s];

		if (!x->used || !x->reclaim || x->destaging)
			continue;	/* evicted, reused or used since; on its way */
		if (bm_any(x->dirty)) {
			m->st.reclaimed++;
			destage(m, s);
		} else {		/* cleaned, and let go, already */
			x->reclaim = x->refused = false;
		}
	}
	m->nrq = 0;
}

static void flusher(struct tfs_model *m, uint32_t now)
{
	/* a gap of TFS_FLUSH_IDLE_TICKS was long enough to destage everything */
	bool idle = m->any_io && m->ndirty && now - m->last_io > TFS_FLUSH_IDLE_TICKS;
	const struct tfs_model_cfg *c = &m->cfg;

	destages_done(m);
	if (m->busy_ns > m->ns)
		return;		/* a round on its way: the flusher waits for it */
	reclaim(m);
	/* reaching the flat-out level wakes it from a paced pause (index.c
	 * c_file_dirtied), and so does the end of an idle gap */
	while (m->busy_ns <= m->ns && ((int32_t)(now - m->flush_at) >= 0 || idle ||
					tfs_dirty_over(m->ndirty, c->nslots,
						       tfs_flush_flat(c->dirty_low, c->dirty_high)))) {
		struct tfs_flush_step st = tfs_flush_plan(m->ndirty, c->nslots, c->dirty_low,
							  c->dirty_high, idle, false);
		unsigned nf, pause;

		if (!st.run)
			break;
		nf = flush_batch(m, st.min_age, now);
		pause = tfs_flush_pause_ms(m->ndirty, c->nslots, c->dirty_low, c->dirty_high,
					   idle, false, nf);
		if (!pause && !nf)	/* flat out and nothing found (no dirty left): */
			pause = 1000;	/* no spinning, as the daemon's empty look waits */
		if (pause)
			m->flush_at = now + (pause * 16 + 999) / 1000;
		if (!nf)
			break;	/* nothing to start: all clean, or on its way */
	}
}

/* ---- requests ---- */

unsigned tfs_model_seq(struct tfs_model *m, uint64_t fid, uint64_t off, uint64_t len, bool write)
{
	struct mseq *q = &m->seq[tfs_mix64(fid) % SEQ_FILES];
	bool seq;

	if (q->fid != fid)
		*q = (struct mseq){ .fid = fid };
	seq = tfs_seq_note(&q->next, &q->run, off, len, m->cfg.seq_cutoff);
	if (!write)
		return seq ? TFS_SEQ_AROUND : 0;
	return (tfs_seq_write(seq, len, m->cfg.row_bytes) ? TFS_SEQ_AROUND : 0) |
	       (seq ? TFS_SEQ_STREAM : 0);
}

/* One piece of a request: extent idx's part [a, b) of it, its sectors
 * [s0, s1), and its slot (x NULL: not cached). */
struct mpiece {
	uint64_t idx, key, a, b;
	unsigned s0, s1;
	uint32_t s;
	struct mslot *x;
};

/* Piece idx of [off, off+len) of fid, counted in *n and *bytes; false if
 * its extent is outside the sample (invariant 4). */
static bool piece(struct tfs_model *m, uint64_t fid, uint64_t off, uint64_t len, uint64_t idx,
		  struct mpiece *p, uint64_t *n, uint64_t *bytes)
{
	p->key = tfs_ext_key(fid, idx);
	if (p->key >= m->cfg.sample)
		return false;
	p->idx = idx;
	tfs_piece_span(m->cfg.extent, idx, off, len, &p->a, &p->b);
	tfs_piece_sectors(m->cfg.extent, idx, p->a, p->b, &p->s0, &p->s1);
	p->s = lookup(m, p->key, fid, idx);
	p->x = p->s == NONE ? NULL : &m->e[p->s];
	(*n)++;
	*bytes += p->b - p->a;
	return true;
}

/* One more access to p's extent at now, in its slot or in the heat
 * table (as read.c and write.c).  Returns its heat. */
static unsigned heat_bump(struct tfs_model *m, const struct mpiece *p, uint32_t now,
			  struct tfs_heat_ent **gp)
{
	uint32_t hl = m->cfg.halflife;
	struct tfs_heat_ent *g;

	if (p->x)
		return tfs_heat_bump(hl, &p->x->heat, &p->x->heat_t, now);
	g = tfs_heat_find(m->heat, m->heat_mask, hl, p->key, now);
	tfs_policy_seen(m->pol, p->key);	/* as read.c and write.c */
	if (gp)
		*gp = g;
	return tfs_heat_bump(hl, &g->heat, &g->t, now);
}

/* Queues the promotion of (fid, idx) for the promoters (invariant 9).
 * Returns false if it is dropped: cfg.promote_queue wait already. */
static bool promote_later(struct tfs_model *m, uint64_t fid, uint64_t idx, uint64_t key)
{
	double gap = (double)m->cfg.promote_ns / m->cfg.promoters;
	uint64_t burst = m->cfg.promoters > 1 ? (uint64_t)((m->cfg.promoters - 1) * gap) : 0;
	uint64_t from, start;

	if (m->pq_len - pq_taken(m) >= m->cfg.promote_queue || m->pq_len == m->pq_cap)
		return false;
	/* idle promoters take as many at once as there are of them */
	from = m->ns > burst ? m->ns - burst : 0;
	if (m->pfree > from)
		from = m->pfree;
	start = from > m->ns ? from : m->ns;
	m->pfree = from + (uint64_t)(gap + 0.5);
	*pq_at(m, m->pq_len++) =
		(struct mpend){ fid, idx, key, start, start + m->cfg.promote_ns, false };
	return true;
}

/* The promoter reads the extent whole into a fresh slot (flush.c
 * promote_one); returns the slot, or NONE if every slot is dirty or busy. */
static uint32_t promote(struct tfs_model *m, uint64_t key, uint64_t fid, uint64_t idx,
			uint32_t now)
{
	uint32_t s = alloc_slot(m, key, fid, idx, now);

	if (s != NONE) {
		bm_set(m->e[s].valid, 0, m->spe);
		m->st.ssd_write_bytes += m->cfg.extent;
		m->st.raid_read_bytes += m->cfg.extent;
		m->st.promotions++;
	}
	return s;
}

/* The promoter fills x's missing sectors from the RAID (flush.c
 * invariant 14). */
static void fill(struct tfs_model *m, struct mslot *x)
{
	uint64_t bytes = (uint64_t)(m->spe - bm_count(x->valid)) * TFS_SECTOR;

	m->st.ssd_write_bytes += bytes;
	m->st.raid_read_bytes += bytes;
	bm_set(x->valid, 0, m->spe);
	m->st.fills++;
}

/* The request's promotions and fills, in its order, each one's slot busy
 * while the next TFS_PROMOTERS - 1 run (invariant 1). */
static void run_jobs(struct tfs_model *m, uint32_t now)
{
	for (unsigned i = 0; i < m->njobs; i++) {
		struct mjob *j = &m->jobs[i];
		struct mslot *x;

		if (i >= TFS_PROMOTERS && m->jobs[i - TFS_PROMOTERS].s != NONE)
			m->e[m->jobs[i - TFS_PROMOTERS].s].busy = false;
		if (j->fill) {
			x = &m->e[j->s];
			if (!x->used || x->fid != j->fid || x->idx != j->idx) {
				j->s = NONE;	/* evicted by a promotion before it */
				continue;
			}
			fill(m, x);
		} else {
			j->s = promote(m, j->key, j->fid, j->idx, now);
			if (j->s == NONE)
				continue;	/* every slot dirty or busy: given up */
			x = &m->e[j->s];
		}
		x->busy = true;
	}
	for (unsigned i = 0; i < m->njobs; i++)
		if (m->jobs[i].s != NONE)
			m->e[m->jobs[i].s].busy = false;
	m->njobs = 0;
}

static void watched(const struct tfs_model *m, enum tfs_model_act act)
{
	if (m->cfg.watch)
		m->cfg.watch(m->cfg.watch_arg, act);
}

/* What a read's piece did (invariant 11): the rule's act, a miss told
 * apart by whether the extent is held in part. */
static enum tfs_model_act read_act(enum tfs_rd_act act, bool cached)
{
	switch (act) {
	case TFS_RD_HIT:
		return TFS_MA_READ_HIT;
	case TFS_RD_SEQ:
		return TFS_MA_READ_SEQ;
	case TFS_RD_PROMOTE:
		return TFS_MA_READ_PROMOTE;
	case TFS_RD_FILL:
		return TFS_MA_READ_FILL;
	default:
		return cached ? TFS_MA_READ_PARTIAL : TFS_MA_READ_MISS;
	}
}

/* What a write's piece did: the act it ended with, and why it went
 * around the tier. */
static enum tfs_model_act write_act(enum tfs_wr_act act, enum tfs_bypass why)
{
	switch (act) {
	case TFS_WR_CACHE:
	case TFS_WR_THROUGH:
		return TFS_MA_WRITE_HIT;
	case TFS_WR_ALLOC:
	case TFS_WR_FRESH:
		return TFS_MA_WRITE_ALLOC;
	default:	/* around: write-around's invalidation, or the RAID only */
		return why == TFS_BYPASS_SEQ ? TFS_MA_WRITE_SEQ
		       : why == TFS_BYPASS_DIRTY_HIGH ? TFS_MA_WRITE_DIRTY_HIGH
		       : why == TFS_BYPASS_NO_SLOT ? TFS_MA_WRITE_NO_SLOT
		       : TFS_MA_WRITE_MODE;
	}
}

static bool do_read(struct tfs_model *m, uint64_t fid, uint64_t off, uint64_t len, unsigned seq,
		    uint32_t now)
{
	const struct tfs_model_cfg *c = &m->cfg;
	bool whole = true;

	for (uint64_t idx = off / c->extent; idx <= (off + len - 1) / c->extent; idx++) {
		struct tfs_rd_in r = { .mode = c->mode, .seq = seq & TFS_SEQ_AROUND,
				       .promote = c->promote };
		enum tfs_rd_act act;
		struct mpiece p;
		struct tfs_heat_ent *g = NULL;

		if (!piece(m, fid, off, len, idx, &p, &m->st.reads, &m->st.read_bytes))
			continue;
		r.heat = heat_bump(m, &p, now, &g);
		r.blocked = g && g->queued;	/* on its way (cfg.promote_ns) */
		if (p.x) {
			r.cached = true;
			r.full = bm_all(p.x->valid, p.s0, p.s1);
			r.dirty = bm_any(p.x->dirty);
			if (r.full)
				read_hit(m, p.s);
		} else if (judging(m) && tfs_evidence_miss(m->ev, p.key)) {
			judged(m);
		}
		act = tfs_rule_read(&r);
		watched(m, read_act(act, p.x != NULL));
		if (act == TFS_RD_HIT) {
			m->st.read_hits++;
			m->st.read_hit_bytes += p.b - p.a;
			continue;
		}
		whole = false;
		m->st.read_partial += p.x != NULL;
		m->st.raid_read_bytes += p.b - p.a;
		switch (act) {
		case TFS_RD_SEQ:
			m->st.bypass_seq++;
			break;
		case TFS_RD_PROMOTE:	/* the promoter reads the extent into a fresh slot */
			if (m->cfg.promote_ns) {	/* ... in its time */
				if (promote_later(m, fid, idx, p.key))
					g->queued = true;
				else
					m->st.promote_dropped++;
				break;
			}
			/* fall through */
		case TFS_RD_FILL:	/* ... or fills what is missing */
			if (m->njobs == MODEL_JOBS)
				run_jobs(m, now);
			m->jobs[m->njobs++] = (struct mjob){ .fid = fid, .idx = idx, .key = p.key,
							     .s = p.s, .fill = act == TFS_RD_FILL };
			break;
		default:
			break;
		}
	}
	run_jobs(m, now);
	return whole;
}

/* A fresh clean slot for piece p of extent (fid, idx), beside the RAID's
 * bytes: a stream's copy (invariant 12) of its whole sectors, when
 * tfs_copy_take says so, demoted; write-through's (invariant 13) of every
 * sector p touches, its partial ones filled, demoted if the write is a
 * stream's.  Returns the slot, or NONE (no whole sector, not taken, no
 * clean slot). */
static uint32_t clean_slot(struct tfs_model *m, const struct mpiece *p, uint64_t fid,
			   uint64_t idx, uint32_t now, bool copy, bool stream)
{
	unsigned lo = p->s0, hi = p->s1;
	uint32_t s;

	if (copy) {
		tfs_piece_whole(m->cfg.extent, idx, p->a, p->b, &lo, &hi);
		if (hi <= lo || !tfs_copy_take(&m->copy_ev))
			return NONE;
	}
	s = alloc_slot(m, p->key, fid, idx, now);
	if (s == NONE)
		return NONE;
	bm_set(m->e[s].valid, lo, hi);
	m->e[s].copy = copy;
	if (copy || stream)
		tfs_policy_demote(m->pol, s);
	if (copy)
		m->st.copies++;
	else
		m->st.fresh++;
	m->st.ssd_write_bytes += (uint64_t)(hi - lo) * TFS_SECTOR;
	return s;
}

static bool do_write(struct tfs_model *m, uint64_t fid, uint64_t off, uint64_t len, unsigned seq,
		     uint32_t now)
{
	const struct tfs_model_cfg *c = &m->cfg;
	struct tfs_wr_in w = { .mode = c->mode, .seq = seq & TFS_SEQ_AROUND,
			       .over_high = tfs_dirty_over(m->ndirty, c->nslots, c->dirty_high) };
	bool whole = true;

	for (uint64_t idx = off / c->extent; idx <= (off + len - 1) / c->extent; idx++) {
		enum tfs_bypass why;
		enum tfs_wr_act act;
		struct mpiece p;
		uint32_t s;

		if (!piece(m, fid, off, len, idx, &p, &m->st.writes, &m->st.write_bytes))
			continue;
		heat_bump(m, &p, now, NULL);
		if (p.x)
			used(m, p.s);
		w.cached = p.x != NULL;
		w.dirty = p.x && bm_any(p.x->dirty);
		act = tfs_rule_write(&w, &why);
		whole &= act == TFS_WR_CACHE || act == TFS_WR_THROUGH;
		switch (act) {
		case TFS_WR_CACHE:
			m->st.write_hits++;
			m->st.write_hit_bytes += p.b - p.a;
			dirty_sectors(m, p.x, p.s0, p.s1, now);
			p.x->streamed = seq & TFS_SEQ_STREAM;
			m->st.ssd_write_bytes += (uint64_t)(p.s1 - p.s0) * TFS_SECTOR;
			break;
		case TFS_WR_THROUGH:	/* its partial sectors filled (invariant 13) */
			m->st.write_hits++;
			m->st.write_hit_bytes += p.b - p.a;
			bm_set(p.x->valid, p.s0, p.s1);
			m->st.ssd_write_bytes += (uint64_t)(p.s1 - p.s0) * TFS_SECTOR;
			m->st.raid_write_bytes += p.b - p.a;
			break;
		case TFS_WR_AROUND:
			bm_clear(p.x->valid, p.s0, p.s1);
			m->st.raid_write_bytes += p.b - p.a;
			break;
		case TFS_WR_COPY:	/* invariant 12 */
		case TFS_WR_FRESH:	/* invariant 13 */
			s = clean_slot(m, &p, fid, idx, now, act == TFS_WR_COPY,
				       seq & TFS_SEQ_STREAM);
			m->st.raid_write_bytes += p.b - p.a;
			if (act == TFS_WR_COPY) {
				m->st.bypass_seq++;
			} else if (s == NONE) {
				act = TFS_WR_RAW;
				why = TFS_BYPASS_NO_SLOT;
				m->st.bypass_no_slot++;
			}
			break;
		case TFS_WR_ALLOC:
			s = alloc_slot(m, p.key, fid, idx, now);
			if (s != NONE) {
				m->st.allocations++;
				dirty_sectors(m, &m->e[s], p.s0, p.s1, now);
				m->e[s].streamed = seq & TFS_SEQ_STREAM;
				m->st.ssd_write_bytes += (uint64_t)(p.s1 - p.s0) * TFS_SECTOR;
				break;
			}
			act = TFS_WR_RAW;
			why = TFS_BYPASS_NO_SLOT;
			/* fall through */
		case TFS_WR_RAW:
			m->st.raid_write_bytes += p.b - p.a;
			m->st.bypass_seq += why == TFS_BYPASS_SEQ;
			m->st.bypass_dirty_high += why == TFS_BYPASS_DIRTY_HIGH;
			m->st.bypass_no_slot += why == TFS_BYPASS_NO_SLOT;
			break;
		}
		watched(m, write_act(act, why));
	}
	return whole;
}

/* The promotions on their way done by now (cfg.promote_ns): each extent
 * not cached meanwhile gets a slot, whole, as the promoter's. */
static void promotions_done(struct tfs_model *m, uint32_t now)
{
	while (m->pq_len && m->pq[m->pq_head].ready <= m->ns) {
		struct mpend *q = &m->pq[m->pq_head];

		/* as the daemon's promoter (flush.c promoter) */
		tfs_heat_find(m->heat, m->heat_mask, m->cfg.halflife, q->key, now)->queued = false;
		if (!q->void_ && lookup(m, q->key, q->fid, q->idx) == NONE)
			(void)promote(m, q->key, q->fid, q->idx, now);
		m->pq_head = (m->pq_head + 1) % m->pq_cap;
		m->pq_len--;
	}
}

bool tfs_model_apply(struct tfs_model *m, uint64_t fid, uint64_t off, uint64_t len, bool write,
		     unsigned seq, uint32_t now)
{
	if (!len)
		return true;
	promotions_done(m, now);
	flusher(m, now);
	m->last_io = now;
	m->any_io = true;
	return write ? do_write(m, fid, off, len, seq, now) : do_read(m, fid, off, len, seq, now);
}

/* ---- cuts (invariant 8) ---- */

/* Bytes [a, b) of slot s's extent are gone. */
static void cut_slot(struct tfs_model *m, uint32_t s, uint64_t a, uint64_t b)
{
	struct mslot *x = &m->e[s];
	unsigned fa = (unsigned)((a + TFS_SECTOR - 1) / TFS_SECTOR), fb = (unsigned)(b / TFS_SECTOR);
	bool was;

	if (x->destaging) {	/* the daemon's cut waits for the flusher's write */
		for (uint32_t i = 0; i < m->dq_len; i++)
			if (m->dq[(m->dq_head + i) % m->cfg.nslots].s == s)
				m->dq[(m->dq_head + i) % m->cfg.nslots].s = NONE;
		destaged(m, s);
	}
	was = bm_any(x->dirty);
	if (fb > fa) {
		bm_clear(x->valid, fa, fb);
		bm_clear(x->dirty, fa, fb);
	}
	if (was && !bm_any(x->dirty))
		m->ndirty--;	/* noted, reclaim lets it go (as the daemon's) */
	if (bm_any(x->valid))
		return;
	tfs_policy_remove(m->pol, s);
	unlink_slot(m, s);
	m->st.cut_extents++;
}

void tfs_model_cut(struct tfs_model *m, uint64_t fid, uint64_t off, uint64_t len)
{
	uint64_t end = len > UINT64_MAX - off ? UINT64_MAX : off + len, ext = m->cfg.extent;
	uint32_t next;

	for (uint32_t i = 0; i < m->pq_len; i++) {	/* a promotion of it finds nothing */
		struct mpend *q = pq_at(m, i);

		if (q->fid == fid && q->idx * ext + ext > off && q->idx * ext < end)
			q->void_ = true;
	}
	for (uint32_t s = *file_chain(m, fid); s != NONE; s = next) {
		const struct mslot *x = &m->e[s];
		uint64_t base = x->idx * ext;

		next = x->fnext;	/* before s leaves the chain */
		if (x->fid == fid && base < end && base + ext > off)
			cut_slot(m, s, off > base ? off - base : 0, end - base < ext ? end - base : ext);
	}
}

void tfs_model_clock(struct tfs_model *m, uint64_t ns)
{
	m->ns = ns;
}

bool tfs_model_samples(const struct tfs_model *m, uint64_t fid, uint64_t off, uint64_t len)
{
	for (uint64_t idx = off / m->cfg.extent; len && idx <= (off + len - 1) / m->cfg.extent;
	     idx++)
		if (tfs_ext_key(fid, idx) < m->cfg.sample)
			return true;
	return false;
}

bool tfs_model_request(struct tfs_model *m, uint64_t fid, uint64_t off, uint64_t len, bool write,
		       uint32_t now)
{
	if (!len)
		return true;
	return tfs_model_apply(m, fid, off, len, write, tfs_model_seq(m, fid, off, len, write), now);
}
