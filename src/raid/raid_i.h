/* Private to src/raid: what its files call of each other.  The files,
 * each opening with what it owns and its invariants: data.c (logical
 * requests to member requests, the mirror levels' maintenance), stripe.c
 * (the parity levels' planner, write and read paths and whole-row
 * passes), marks.c (fs->stripes: the row locks and the write-intent
 * marks, the mark cleaner), maint.c (the maintenance job, its pace,
 * status and control), scrub.c (the per-file passes of scrub, repair and
 * rebuild; the crash resync), rebuild.c (replace and rebuild of a
 * member).  The public interface is include/tierfs/raid.h (data.c,
 * stripe.c, marks.c) and maint.h (maint.c, scrub.c); layout.c and
 * parity.c are pure code (layout.h, parity.h).
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

/* ---- maint.c: the job (its state is maint.c's alone) ---- */

/* Returns true if the running job was cancelled (read without the job's
 * lock, as a hint: the job stops at its next step). */
bool r_maint_cancelled(struct tfs_fs *fs);
/* Returns true if a job runs (read without the job's lock). */
bool r_maint_running(struct tfs_fs *fs);
/* One finding of the job, line (l bytes, "\n"-ended): counted as a
 * mismatch, and kept for the status among the first 100. */
void r_maint_found(struct tfs_fs *fs, const char *line, int l);
/* The job is at the file path now (the status's current=): counted. */
void r_maint_file(struct tfs_fs *fs, const char *path);
/* len more bytes of the job done; sleeps to keep the job under the rate
 * cap (maint.c invariant 2). */
void r_maint_progress(struct tfs_fs *fs, uint64_t len);

/* ---- scrub.c: the per-file passes ---- */

/* Scrub (op TFS_STRIPE_CHECK) or repair (TFS_STRIPE_REPAIR) every file,
 * past damage (scrub.c invariant 3).  Returns 0, -ECANCELED, or the
 * -errno that stopped the walk (a file's is logged). */
int r_scrub_pass(struct tfs_fs *fs, enum tfs_stripe_op op);
/* One walk of a rebuild over every file not yet recorded rebuilt: each
 * one's data and size record written to the member being rebuilt, and
 * recorded (TFS_SET_REBUILT); *redone is how many files it did.  Returns
 * 0, -ECANCELED, or the -errno that stopped the walk (a file's is
 * logged). */
int r_rebuild_pass(struct tfs_fs *fs, uint64_t *redone);

/* ---- rebuild.c: replace and rebuild of a member ---- */

/* tierctl replace k dir: checks dir (empty, or this array's own stale
 * member k, wiped) and sets it up as member k (superblock, tree root,
 * journal copy; state still failed).  Returns 0 (the caller starts the
 * rebuild job), or -errno with one line in err: -EINVAL (no member k, or
 * dir is another member), -EBUSY (k in sync, or a job runs), -ENOTEMPTY,
 * or the failing call's. */
int r_replace(struct tfs_fs *fs, uint32_t k, const char *dir, char *err, size_t errlen);
/* Rebuild member k (rebuild.c invariants 1-3): the namespace copy and
 * state R unless k is in state R already, then the data of every file,
 * then state U.  Returns 0, -EIO (k failed meanwhile), -ECANCELED, or
 * -errno. */
int r_rebuild(struct tfs_fs *fs, uint32_t k);

#endif
