/* evidence.c - whether reclaim would pay (tierfs/evidence.h).
 *
 * Owns: the ghost table of displaced clean extents, the count of
 * evictions it dates them by, and the score.
 *
 * Invariants:
 *  1. An entry is 0 (empty) or, for the key last displaced into it (its
 *     index: the low bits of tfs_mix64(key)), the high 24 bits of
 *     tfs_mix64(key) over the 8-bit epoch of its displacement; bit 0 of
 *     the fingerprint is forced to 1, so no entry in use is 0.  A newer
 *     displaced key takes the entry over; a miss counts only on an equal
 *     fingerprint (a false match: about one in 2^23 per look).
 *  2. The epoch is the evictions counted (tfs_evidence_victim) over a
 *     unit of max(1, slots / 16), modulo 256; a miss counts only if its
 *     entry's epoch is less than 16 units old: read again within about a
 *     tier's worth of evictions.  Kept, the extent would have been a
 *     victim by then anyway, so a later read is no evidence (without the
 *     bound a load of cold reads over a set five times the tier, by chance
 *     re-reading long-gone extents, scored for reclaim).  An entry 256
 *     units old reads as new again: only if nothing was displaced into it
 *     meanwhile and its key is read then.
 *  3. The score moves by one per counted event and stays within [-on,
 *     on]: a long run of evidence against reclaim cannot keep a change of
 *     load from turning it on for long.  A miniature of the tier sees a
 *     sample of the extents, so a share of the events: its on is the
 *     daemon's TFS_EVIDENCE_ON times that share (model.c), else it would
 *     turn reclaim on later than the tier it stands for (the live curve
 *     of pgbench off by 0.068 at 2x, 0.026 with the same verdict).
 *  4. Once the score reached on, tfs_evidence_pays (score == on) is true
 *     for good: nothing changes the score again (the caller's latch,
 *     DESIGN §10.10: measured with reclaim on, the count means something
 *     else).
 */
#include <stdlib.h>

#include "tierfs/evidence.h"
#include "tierfs/hash.h"

#define EPOCHS_KEPT 16		/* units a displaced entry counts for (invariant 2) */

struct tfs_evidence {
	uint32_t *ghost;
	uint32_t mask;
	uint32_t unit;		/* evictions an epoch lasts */
	uint64_t evictions;
	int score, on;		/* invariants 3 and 4 */
};

struct tfs_evidence *tfs_evidence_new(uint32_t nslots, int on)
{
	struct tfs_evidence *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->on = on > 0 ? on : 1;
	e->mask = tfs_pow2_at_least(nslots ? nslots : 1) - 1;
	e->unit = nslots / EPOCHS_KEPT ? nslots / EPOCHS_KEPT : 1;
	e->ghost = calloc((size_t)e->mask + 1, sizeof(*e->ghost));
	if (!e->ghost) {
		free(e);
		return NULL;
	}
	return e;
}

void tfs_evidence_free(struct tfs_evidence *e)
{
	if (!e)
		return;
	free(e->ghost);
	free(e);
}

uint64_t tfs_evidence_bytes(const struct tfs_evidence *e)
{
	return sizeof(*e) + ((uint64_t)e->mask + 1) * sizeof(*e->ghost);
}

static uint32_t epoch(const struct tfs_evidence *e)
{
	return (uint32_t)(e->evictions / e->unit) & 0xff;
}

/* key's entry, and its fingerprint (shifted into place, invariant 1) */
static uint32_t *entry(const struct tfs_evidence *e, uint64_t key, uint32_t *fp)
{
	uint64_t h = tfs_mix64(key);

	*fp = ((uint32_t)(h >> 40) | 1) << 8;
	return &e->ghost[h & e->mask];
}

static void score_add(struct tfs_evidence *e, int d)
{
	if (tfs_evidence_pays(e))
		return;
	e->score += d;
	if (e->score < -e->on)
		e->score = -e->on;
}

void tfs_evidence_victim(struct tfs_evidence *e, uint64_t key, bool displaced)
{
	uint32_t fp, *g;

	e->evictions++;
	if (!displaced)
		return;
	g = entry(e, key, &fp);
	*g = fp | epoch(e);
}

bool tfs_evidence_miss(struct tfs_evidence *e, uint64_t key)
{
	uint32_t fp, *g = entry(e, key, &fp);

	if ((*g & ~0xffu) != fp || ((epoch(e) - *g) & 0xff) >= EPOCHS_KEPT)
		return false;
	*g = 0;
	score_add(e, 1);
	return true;
}

void tfs_evidence_kept(struct tfs_evidence *e)
{
	score_add(e, -1);
}

int tfs_evidence_score(const struct tfs_evidence *e)
{
	return e->score;
}

bool tfs_evidence_pays(const struct tfs_evidence *e)
{
	return e->score >= e->on;
}
