/* evidence.h - whether reclaim would pay on this load (cache_reclaim=auto,
 * DESIGN §10.10): what destaging the dirty extents eviction wants would
 * trade, counted while it is off.
 *
 * Eviction that passes over a dirty extent takes a clean one instead:
 * reclaim would have destaged and evicted the dirty one and kept the
 * clean one.  So a later read of the clean one, missed, scores for
 * reclaim (+1) if it comes within about a tier's worth of evictions (kept,
 * the extent would have gone by then anyway), and a later read of the
 * dirty one, hit, against it (-1).  The displaced clean extents are
 * remembered in a ghost table of one 32-bit entry a slot (direct-mapped
 * by key: a fingerprint and when, or 0); the dirty ones passed over are
 * marked by the caller (the slot's contested bit), which reports their
 * first whole hit.  The score stays within
 * [-on, on]; at on (TFS_EVIDENCE_ON in the daemon, that scaled by the
 * sample in a miniature) reclaim pays, and the verdict stands.
 * Pure: no locks (the caller serialises calls on one instance), memory
 * allocated at tfs_evidence_new only.
 */
#ifndef TIERFS_EVIDENCE_H
#define TIERFS_EVIDENCE_H

#include <stdbool.h>
#include <stdint.h>

#define TFS_EVIDENCE_ON 64	/* net re-reads of displaced extents that turn it on */

struct tfs_evidence;

/* A table for a tier of nslots slots (at least 1), score 0, paying at
 * on (at least 1); NULL if out of memory. */
struct tfs_evidence *tfs_evidence_new(uint32_t nslots, int on);
void tfs_evidence_free(struct tfs_evidence *e);	/* NULL is fine */
/* Returns the bytes e holds. */
uint64_t tfs_evidence_bytes(const struct tfs_evidence *e);
/* The policy evicted extent key (every victim counts: the clock of the
 * displaced ones); displaced: its look passed over a dirty extent. */
void tfs_evidence_victim(struct tfs_evidence *e, uint64_t key, bool displaced);
/* A read missed extent key (not cached): +1 if it was displaced within
 * the last tier's worth of evictions or so (its entry is cleared).
 * Returns true if it counted. */
bool tfs_evidence_miss(struct tfs_evidence *e, uint64_t key);
/* A read hit, whole, an extent eviction passed over dirty: -1. */
void tfs_evidence_kept(struct tfs_evidence *e);
/* Returns the score. */
int tfs_evidence_score(const struct tfs_evidence *e);
/* Returns true once the score reached on, and for good: from then on
 * nothing changes the score. */
bool tfs_evidence_pays(const struct tfs_evidence *e);

#endif
