/* The RAID (src/raid/data.c, src/raid/stripe.c): file data over the
 * layout, below the SSD tier - reads, writes, syncs and allocations split
 * into member requests, the parity levels' rows, locks and write-intent
 * marks, and the mirror levels' maintenance. */
#ifndef TIERFS_RAID_H
#define TIERFS_RAID_H

#include "tierfs/fs.h"
#include <sys/types.h>

/* ---- data.c: file data over the layout ---- */
/* Per-thread I/O buffer, 4K aligned, at least len bytes. */
void *tfs_iobuf(size_t len);
/* File data on the RAID alone (below the SSD tier; the data path above
 * both is data.h). */
ssize_t tfs_raid_read(struct tfs_fs *fs, struct tfs_inode *in, bool direct, void *buf,
		      size_t len, uint64_t off);
ssize_t tfs_raid_write(struct tfs_fs *fs, struct tfs_inode *in, bool direct, const void *buf,
		       size_t len, uint64_t off);
int tfs_raid_fsync(struct tfs_fs *fs, struct tfs_inode *in, bool datasync);
/* Grow the member files of an open file to hold logical size size (never
 * shrinks; the bytes added are holes).  Returns how many grew, or -errno. */
int tfs_raid_grow(struct tfs_fs *fs, struct tfs_inode *in, uint64_t size);
/* Cut or extend the member files of a file to their shares of logical
 * size len, under the row locks of the rows between the old and the new
 * end; on the parity levels the cut part of the new last row is zeroed
 * first.  The caller pinned every member file (tfs_ns_cut_begin); durable:
 * the members' change is synced before return.  Returns 0 or -errno (the
 * primary's error; another member failing it is failed, health.c). */
int tfs_raid_truncate(struct tfs_fs *fs, struct tfs_inode *in, uint64_t len, bool durable);
/* The RAID part of fallocate, the mode checked by tfs_data_fallocate: 0 or
 * -errno. */
int tfs_raid_fallocate(struct tfs_fs *fs, struct tfs_inode *in, int mode, uint64_t off,
		       uint64_t len);
/* Before the writes v[0..n) of one request on a redundant level: on members
 * short of space, allocate every range written, so that a full filesystem
 * refuses the request before any member changed (data.c invariant 6).
 * Returns 0 or the refusal (-ENOSPC, -EDQUOT, ...). */
int tfs_space_reserve(struct tfs_fs *fs, const struct tfs_mio *v, unsigned n);
/* A write on member k was refused for want of space: reserve from now on. */
void tfs_space_refused(struct tfs_fs *fs, uint32_t k);

/* ---- stripe.c: file data on the parity levels ---- */
struct tfs_stripes;
/* Write-intent marks are kept per (fid % TFS_MARK_BUCKETS, region). */
#define TFS_MARK_BUCKETS 256
int tfs_stripe_init(struct tfs_fs *fs);		/* row locks, marks */
int tfs_stripe_start(struct tfs_fs *fs);	/* the mark cleaner thread */
void tfs_stripe_stop(struct tfs_fs *fs);	/* clean unmount: clear marks */
uint64_t tfs_stripe_marks(struct tfs_fs *fs);	/* marks in the journal */
/* Write-intent marks around a write of rows (chunks on mirrors) r0..r1. */
int tfs_marks_get(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1);
void tfs_marks_put(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1);
/* Rows r0..r1 (marked by the caller) may disagree with their redundancy and
 * could not be fixed: their marks stay until the next mount resyncs them. */
void tfs_marks_keep(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1);
/* stripe.* lines of user.tierfs.status into buf; returns their length. */
int tfs_stripe_stats(struct tfs_fs *fs, char *buf, size_t len);
ssize_t tfs_stripe_read(struct tfs_fs *fs, struct tfs_inode *in, uint32_t rot, uint64_t size,
			bool direct, void *buf, size_t len, uint64_t off);
ssize_t tfs_stripe_write(struct tfs_fs *fs, struct tfs_inode *in, uint32_t rot, uint64_t size,
			 bool direct, const void *buf, size_t len, uint64_t off);
/* Write zeros over [off, off+len) of an open file, keeping the parity
 * right (truncate, hole punch); in_locked: the caller holds the row locks
 * and in->lock and opened every member file. */
int tfs_stripe_zero(struct tfs_fs *fs, struct tfs_inode *in, bool in_locked, uint64_t off,
		    uint64_t len);
enum tfs_stripe_op {
	TFS_STRIPE_CHECK,	/* compare parity with data, report */
	TFS_STRIPE_REPAIR,	/* ... and make them agree */
	TFS_STRIPE_RESYNC,	/* recompute parity (after a crash) */
	TFS_STRIPE_REBUILD,	/* write what a member being rebuilt lacks */
};
/* A mismatch at logical offset off (the row or chunk start): bad is the
 * member found at fault (RAID6, 3-way mirrors), or -1. */
typedef void (*tfs_stripe_report_fn)(void *arg, uint64_t fid, uint64_t off, int bad);
/* Row locks (stripe.c invariant 1), for every redundant level: rows are
 * parity rows, or chunks on the mirror levels.  held[] needs
 * TFS_ROW_LOCKS entries. */
#define TFS_ROW_LOCKS 1024
unsigned tfs_rows_lock(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1, unsigned *held);
void tfs_rows_unlock(struct tfs_fs *fs, const unsigned *held, unsigned n);
/* Whole rows r0..r1 of an open file (fid, logical size size).  -EBUSY:
 * check/resync need every member in sync. */
int tfs_stripe_rows(struct tfs_fs *fs, struct tfs_inode *in, uint64_t r0, uint64_t r1,
		    enum tfs_stripe_op op, tfs_stripe_report_fn report, void *arg);
/* replay.c's tfs_replay_cut_fn: a replayed truncate that cut into a row
 * of a parity level leaves a mark on it.  Returns 0 or -errno. */
int tfs_stripe_cut_replayed(struct tfs_fs *fs, uint64_t fid, uint64_t len);
/* Rows one write-intent mark covers (mark region g is rows g*n..g*n+n-1). */
uint64_t tfs_mark_rows(struct tfs_fs *fs);

/* Mirror levels: check, repair or rebuild [off, off+len) of an open file
 * (stripe.c does the parity levels). */
int tfs_data_maint(struct tfs_fs *fs, struct tfs_inode *in, uint64_t off, uint64_t len,
		   enum tfs_stripe_op op, tfs_stripe_report_fn report, void *arg);

#endif
