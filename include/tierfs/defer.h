/* Jobs run off the FUSE workers (src/fuse/defer.c): requests that wait for
 * the HDD tier while the SSD tier's hits keep the workers. */
#ifndef TIERFS_DEFER_H
#define TIERFS_DEFER_H

#include <stdbool.h>
#include <stddef.h>

struct tfs_defer;

/* A pool of at most max threads (0 is taken as 1), started as jobs need
 * them.  Returns the pool, or NULL if out of memory. */
struct tfs_defer *tfs_defer_start(unsigned max);
/* Run fn(arg) exactly once: on a pool thread, or here, before this
 * returns, if the pool cannot take it (no memory, stopping, no thread
 * could be started). */
void tfs_defer(struct tfs_defer *d, void (*fn)(void *), void *arg);
/* The status lines (pool.jobs=, pool.threads=); 0 if d is NULL. */
int tfs_defer_stats(struct tfs_defer *d, char *out, size_t cap);
/* Run what is queued, stop the threads and free d (d may be NULL). */
void tfs_defer_stop(struct tfs_defer *d);

#endif
