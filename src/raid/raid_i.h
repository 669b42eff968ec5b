/* Private to src/raid: what its files call of each other.  The files,
 * each opening with what it owns and its invariants: data.c (logical
 * requests to member requests, the mirror levels' maintenance), stripe.c
 * (the parity levels' planner, write and read paths and whole-row
 * passes), marks.c (fs->stripes: the row locks and the write-intent
 * marks, the mark cleaner).  The public interface is include/tierfs/
 * raid.h (data.c, stripe.c, marks.c) and maint.h; layout.c and parity.c
 * are pure code (layout.h, parity.h).
 *
 * Locking (the order is fs.h's: io_gate, row locks, in->lock,
 * health_lock): the marks' mutex (mlock) is a leaf, taken under row locks
 * and in->lock (a truncate's zeroing) and released across every journal
 * commit and sync (marks.c mark_durable, marks_clear).
 */
#ifndef TIERFS_RAID_I_H
#define TIERFS_RAID_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "tierfs/fs.h"
#include "tierfs/raid.h"

#define ROW_LOCKS    TFS_ROW_LOCKS
#define MARK_SLOTS   1024		/* hash chains of the marks */

struct mark;				/* marks.c */

/* fs->stripes: set up by marks.c (tfs_stripe_init) on the redundant
 * levels. */
struct tfs_stripes {
	pthread_mutex_t row_lock[ROW_LOCKS];
	pthread_mutex_t mlock;		/* marks */
	struct mark *marks[MARK_SLOTS];	/* hash chains by (bucket, region) */
	pthread_t cleaner;
	pthread_cond_t cond;
	pthread_cond_t synced;		/* a new mark became durable */
	bool stop, cleaner_running;
	int journal_err;		/* the journal's last refusal, logged once */
	uint64_t region_rows;
	/* statistics (user.tierfs.status, stripe.c): rows written per mode,
	 * and the member requests writes of parity rows cost */
	_Atomic uint64_t rows[4], reads, writes;
};

/* ---- marks.c: row locks and write-intent marks ---- */

/* Lock rows [r0, r1] of fid in ascending lock order (every lock for a
 * span of ROW_LOCKS rows or more).  Returns how many distinct locks are
 * held, their numbers in held[0..n) (ROW_LOCKS entries). */
unsigned r_rows_lock(struct tfs_stripes *s, uint64_t fid, uint64_t r0, uint64_t r1,
		     unsigned *held);

/* Unlocks the n locks r_rows_lock returned in held, in reverse order. */
static inline void r_rows_unlock(struct tfs_stripes *s, const unsigned *held, unsigned n)
{
	while (n-- > 0)
		pthread_mutex_unlock(&s->row_lock[held[n]]);
}

/* Drops one use of the marks of regions [g0, g1] of bucket fid (the
 * last use starts the mark's idle time).  Under s->mlock. */
void r_marks_release(struct tfs_stripes *s, uint64_t fid, uint64_t g0, uint64_t g1);

/* tfs_marks_put: releases the marks tfs_marks_get took of rows r0..r1
 * of fid (the write path's, kept inline as it was in one file). */
static inline void r_marks_put(struct tfs_stripes *s, uint64_t fid, uint64_t r0, uint64_t r1)
{
	fid %= TFS_MARK_BUCKETS;
	pthread_mutex_lock(&s->mlock);
	r_marks_release(s, fid, r0 / s->region_rows, r1 / s->region_rows);
	pthread_mutex_unlock(&s->mlock);
}

#endif
