/* Eviction policy of the SSD tier: which cached extent to drop next.
 *
 * Pure: no I/O, no locks (the caller serialises every call), no clock.
 * Entries are slot numbers 0..cap-1 of the cache data file; a slot is held
 * by at most one extent, so the slot names the extent.  key is a hash of
 * the extent's (fid, index), used only for the ghost history of policies
 * that keep one and W-TinyLFU's frequency sketch.
 *
 * Policies:
 *   lru     one recency list; a hit moves the entry to the head, victims
 *           come from the tail.
 *   s3fifo  S3-FIFO (Yang et al., SOSP 2023): a small FIFO (10% of cap)
 *           takes new entries, a main FIFO (90%) those seen again, and a
 *           ghost FIFO remembers keys recently evicted from the small one;
 *           a key found in the ghost goes straight to main.  Hits only
 *           raise a 2-bit frequency; eviction moves small-queue entries
 *           with frequency > 0 to main and gives main entries with
 *           frequency > 0 another round (frequency - 1).
 *   wtinylfu  W-TinyLFU (Einziger et al., ACM ToS 2017): a window LRU (1%
 *           of cap) takes new entries; the main cache is a segmented LRU
 *           (probation, and protected for entries hit there, 80% of
 *           main).  The window's oldest entry enters a full main only if
 *           a frequency sketch (count-min, 4-bit counters, halved every
 *           10 x cap accesses) rates it above main's victim.  The sketch
 *           counts every access: hits through tfs_policy_hit, misses
 *           through tfs_policy_seen.
 *
 * Entries the caller cannot evict right now (dirty, pinned by I/O) are
 * skipped by tfs_policy_victim through the ok() callback: they stay
 * cached and are treated as if they had been hit once more.
 */
#ifndef TIERFS_POLICY_H
#define TIERFS_POLICY_H

#include <stdbool.h>
#include <stdint.h>

enum tfs_policy_kind {
	TFS_POLICY_LRU,
	TFS_POLICY_S3FIFO,
	TFS_POLICY_WTINYLFU,
	TFS_POLICY_COUNT	/* the number of kinds */
};

#define TFS_POLICY_NONE UINT32_MAX
/* The tier's policy unless cache_policy says (docs/CACHE_POLICY.md); the
 * model's default too (model.h), so the two cannot part. */
#define TFS_POLICY_DEFAULT TFS_POLICY_WTINYLFU

struct tfs_policy;

/* Returns a policy for slots 0..cap-1, all empty, or NULL on allocation
 * failure.  hash_seed picks the hash of W-TinyLFU's sketch (policy.c
 * invariant 9): 0, the daemon's; another seed only moves the sketch's
 * collisions (cache_sim --hash-seed measures what they are worth). */
struct tfs_policy *tfs_policy_new(enum tfs_policy_kind kind, uint32_t cap, uint64_t hash_seed);
/* Free p (NULL is nothing). */
void tfs_policy_free(struct tfs_policy *p);
/* "lru" / "s3fifo" / "wtinylfu" -> kind.  Returns 0, or -EINVAL for anything else. */
int tfs_policy_parse(const char *name, enum tfs_policy_kind *kind);
/* Returns the kind's name ("lru", "s3fifo", "wtinylfu"), or "?". */
const char *tfs_policy_name(enum tfs_policy_kind kind);

/* slot (empty) now holds the extent whose key hash is key. */
void tfs_policy_insert(struct tfs_policy *p, uint32_t slot, uint64_t key);
/* The extent in slot was used. */
void tfs_policy_hit(struct tfs_policy *p, uint32_t slot);
/* The extent whose key hash is key, not held, was used (a miss): the
 * frequency sketch counts it (wtinylfu; the others ignore it).  Not for
 * an insert, which the miss before it already counted. */
void tfs_policy_seen(struct tfs_policy *p, uint64_t key);
/* Returns the sketch's estimate of key's recent accesses (wtinylfu; 0 for
 * the others): what a duel for admission compares. */
uint32_t tfs_policy_estimate(const struct tfs_policy *p, uint64_t key);
/* slot was emptied by the caller (invalidated), not chosen as a victim:
 * forget it, without remembering its key in the ghost. */
void tfs_policy_remove(struct tfs_policy *p, uint32_t slot);
/* slot (held) goes where the next victim of its part of the policy is
 * looked for, as if not used since it came (policy.c invariant 11). */
void tfs_policy_demote(struct tfs_policy *p, uint32_t slot);
/* W-TinyLFU: every protected entry goes to probation, ahead of what
 * probation holds and in its order, then the window's entries over its
 * cap, ahead of those (policy.c invariant 12); other kinds: nothing.
 * O(protected + window). */
void tfs_policy_unprotect(struct tfs_policy *p);
/* Choose a victim among held slots with ok(arg, slot) true, looking at no
 * more than max entries; the victim is forgotten (its key goes to the
 * ghost, if the policy keeps one) and returned, or TFS_POLICY_NONE if none
 * of the entries looked at could be evicted. */
uint32_t tfs_policy_victim(struct tfs_policy *p, bool (*ok)(void *arg, uint32_t slot),
			   void *arg, uint32_t max);
/* Writes to out up to n held slots, in the order eviction will look at
 * them as the queues stand (exact for lru; the next victims among the
 * first for the others: policy.c invariant 13), moving nothing and
 * counting no access.  Returns how many.  O(n). */
uint32_t tfs_policy_next(const struct tfs_policy *p, uint32_t *out, uint32_t n);
/* Returns the bytes p allocated (its arrays, ghost and sketch). */
uint64_t tfs_policy_bytes(const struct tfs_policy *p);
/* Returns the number of slots held. */
uint32_t tfs_policy_count(const struct tfs_policy *p);
/* Returns true if slot is held. */
bool tfs_policy_holds(const struct tfs_policy *p, uint32_t slot);

#endif
