/* simpol.h - reference cache policies for cache_sim, written from their
 * papers and kept apart from the daemon's own (src/cache/policy.c), so the
 * simulator can say how the tier's rules compare with the literature.
 *
 * A policy caches at most cap of the keys 0..nkeys-1 (dense ids: cache_sim
 * numbers extents in first-access order).  Each access is one call; it
 * says whether the key was cached (a hit) and whether the key was written
 * into the cache by this access (an admission: one extent written to the
 * SSD).  Moving a cached key between a policy's queues is not an admission
 * (the data is already on the SSD).
 *
 * Policies (names as cache_sim prints them):
 *   ref_lru     one recency list.
 *   arc         ARC (Megiddo & Modha, FAST 2003): T1/T2 resident, ghosts
 *               B1/B2, adaptive target p for T1.
 *   lirs        LIRS (Jiang & Zhang, SIGMETRICS 2002): LIR set 99% of cap,
 *               resident HIR 1%; non-resident HIR entries kept in the stack
 *               bounded to 2x cap.
 *   2q          full 2Q (Johnson & Shasha, VLDB 1994): A1in FIFO 25% of cap,
 *               A1out ghost 50% of cap, Am LRU.
 *   ref_s3fifo  S3-FIFO (Yang et al., SOSP 2023): small FIFO 10%, main
 *               FIFO, ghost of cap keys, 2-bit frequency.
 *   wtinylfu    W-TinyLFU (Einziger et al., ACM ToS 2017): window LRU 1%,
 *               main SLRU (protected 80% of main), count-min sketch of
 *               4-bit counters with a doorkeeper, aged every 10x cap.
 *
 * Admissions: every miss of these six admits.  In W-TinyLFU a missed key
 * enters the window, so it is written to the SSD before the frequency
 * filter decides whether it may stay (the filter rejecting it is an
 * eviction, not a declined admission).  The interface still reports
 * admissions per access so a policy that can decline (bypass) fits it.
 *
 * Memory O(nkeys + cap); each access O(1) (amortised for the sketch's
 * aging).
 */
#ifndef TIERFS_SIMPOL_H
#define TIERFS_SIMPOL_H

#include <stdbool.h>
#include <stdint.h>

enum simpol_kind {
	SIMPOL_LRU,
	SIMPOL_ARC,
	SIMPOL_LIRS,
	SIMPOL_2Q,
	SIMPOL_S3FIFO,
	SIMPOL_WTINYLFU,
	SIMPOL_COUNT
};

struct simpol;

/* A policy caching at most cap of the keys 0..nkeys-1, empty; NULL on an
 * allocation failure or an unknown kind.  cap 0 caches nothing.
 * hash_seed picks W-TinyLFU's sketch hash (0: the one of before seeds;
 * the others ignore it). */
struct simpol *simpol_new(enum simpol_kind kind, uint32_t cap, uint32_t nkeys,
			  uint64_t hash_seed);
/* Free sp (NULL is nothing). */
void simpol_free(struct simpol *sp);
/* An access to key (< nkeys; others miss and are not admitted).  Returns
 * true on a hit; *admitted (if not NULL) says the key was written into the
 * cache by this access. */
bool simpol_access(struct simpol *sp, uint32_t key, bool *admitted);

/* key (< nkeys) is gone for good (its file cut: cache_sim): it leaves
 * whatever queue it is on, resident or ghost, and never comes back. */
void simpol_drop(struct simpol *sp, uint32_t key);
/* The kind's name (above), or "?". */
const char *simpol_name(enum simpol_kind kind);
/* A name -> its kind, or -EINVAL. */
int simpol_parse(const char *name);

/* For tests: whether key is cached, the name of the queue it is on
 * ("t1", "b2", "lir", "hir", "nonres", "a1in", "a1out", "am", "small",
 * "main", "ghost", "window", "probation", "protected", "lru"; NULL when
 * the policy does not know it), and how many keys are cached. */
bool simpol_holds(const struct simpol *sp, uint32_t key);
const char *simpol_where(const struct simpol *sp, uint32_t key);
uint32_t simpol_used(const struct simpol *sp);

#endif
