/* The RAID (src/raid/data.c, stripe.c, marks.c): file data over the
 * layout, below the SSD tier - reads, writes, syncs and allocations split
 * into member requests (data.c), the parity levels' rows (stripe.c), the
 * row locks and write-intent marks (marks.c), and the mirror levels'
 * maintenance (data.c). */
#ifndef TIERFS_RAID_H
#define TIERFS_RAID_H

#include "tierfs/fs.h"
#include <sys/types.h>

/* ---- data.c: file data over the layout ---- */
/* The calling thread's I/O buffer (scratch slot TFS_SCR_IO), 4K aligned,
 * at least len bytes; valid until the thread's next call (the contents
 * are not kept when it grows).  Returns it, or NULL without memory. */
void *tfs_iobuf(size_t len);
/* File data on the RAID alone (below the SSD tier; the data path above
 * both is data.h).  The caller holds a handle of in.
 *
 * Member requests that fail with a member error (tfs_member_error) fail
 * the member if the level survives it, and the request is planned again
 * without it (internally -EAGAIN: a member failed, redo); the caller never
 * sees that, except from the parity levels after more than fs->n such
 * redos in a row (tfs_stripe_read/write).
 *
 * Read len bytes at off, clamped to the logical size (data.c invariant
 * 2).  Returns bytes read (0 at or past the end; holes read as zeros), or
 * -errno: -EIO when every copy of a byte is on a failed member, -ENOMEM. */
ssize_t tfs_raid_read(struct tfs_fs *fs, struct tfs_inode *in, bool direct, void *buf,
		      size_t len, uint64_t off);
/* Write len bytes at off to every copy on a member that takes changes,
 * under io_gate; the logical size grows to off + len.  Returns len, or
 * -errno: -EFBIG when off + len overflows, -ENOSPC/-EDQUOT (a refusal for
 * space: the member stays, and no copies are left that differ, data.c
 * invariant 6), the journal's refusal of a write-intent mark, -EIO when
 * every copy is on a failed member or a member the level cannot lose
 * failed. */
ssize_t tfs_raid_write(struct tfs_fs *fs, struct tfs_inode *in, bool direct, const void *buf,
		       size_t len, uint64_t off);
/* fsync (fdatasync if datasync) every member file of the file, after
 * saving its size record (parity levels); nothing when nothing it covers
 * changed there since the last one (data.c invariant 7).  Returns 0 or
 * -errno. */
int tfs_raid_fsync(struct tfs_fs *fs, struct tfs_inode *in, bool datasync);
/* Returns true if tfs_raid_fsync would sync the members, as far as can be
 * seen now: something it covers changed there since the last one. */
bool tfs_raid_fsync_due(struct tfs_inode *in, bool datasync);
#define TFS_SYNC_MANY 16	/* files per tfs_raid_fsync_many */
/* tfs_raid_fsync of n files (at most TFS_SYNC_MANY), the members' syncs of
 * all of them in one io_uring batch (their filesystems share journal
 * commits among them); rcs[i]: ins[i]'s result, 0 or -errno. */
void tfs_raid_fsync_many(struct tfs_fs *fs, struct tfs_inode *const *ins, unsigned n,
			 bool datasync, int *rcs);
/* Format the counts of file syncs run and skipped (invariant 7) as
 * "raid.file_syncs=N\nraid.file_syncs_skipped=N\n" into buf.  Returns the
 * length snprintf gives. */
int tfs_raid_syncs(struct tfs_fs *fs, char *buf, size_t len);
/* Grow the member files of an open file to hold logical size size (never
 * shrinks; the bytes added are holes), then save its size record.  Returns
 * how many member files grew (0: none was short), or -errno (-EUCLEAN: a
 * member holds something else under the file's name). */
int tfs_raid_grow(struct tfs_fs *fs, struct tfs_inode *in, uint64_t size);
/* Cut or extend the member files of a file to their shares of logical
 * size len, under the row locks of the rows between the old and the new
 * end; on the parity levels the cut part of the new last row is zeroed
 * first.  The caller pinned every member file (tfs_ns_cut_begin); durable:
 * the members' change is synced before return.  Returns 0 or -errno (the
 * primary's error; another member failing it is failed, health.c). */
int tfs_raid_truncate(struct tfs_fs *fs, struct tfs_inode *in, uint64_t len, bool durable);
/* The RAID part of fallocate, the mode checked by tfs_data_fallocate, under
 * io_gate; on the parity levels a punch or zero range writes zeros (the
 * parity follows).  Returns 0 or -errno: the first member's refusal is
 * returned as is (no member is failed by an fallocate). */
int tfs_raid_fallocate(struct tfs_fs *fs, struct tfs_inode *in, int mode, uint64_t off,
		       uint64_t len);
/* Before the writes v[0..n) of one request on a redundant level: on members
 * short of space, allocate every range written, so that a full filesystem
 * refuses the request before any member changed (data.c invariant 6).
 * Returns 0 (always, without redundancy; a member error or a filesystem
 * without fallocate is passed over: the write meets it) or the refusal
 * (-ENOSPC, -EDQUOT, ...). */
int tfs_space_reserve(struct tfs_fs *fs, const struct tfs_mio *v, unsigned n);
/* A write on member k was refused for want of space: reserve from now on. */
void tfs_space_refused(struct tfs_fs *fs, uint32_t k);

/* ---- marks.c: row locks and write-intent marks (every redundant level) ---- */
struct tfs_stripes;
/* Write-intent marks are kept per (fid % TFS_MARK_BUCKETS, region). */
#define TFS_MARK_BUCKETS 256
/* Set up fs->stripes (row locks, marks) on the redundant levels.  Returns
 * 0 or -ENOMEM. */
int tfs_stripe_init(struct tfs_fs *fs);
/* Start the mark cleaner thread (nothing without fs->stripes).  Returns 0,
 * or -EAGAIN if the thread could not be started (not a member failure). */
int tfs_stripe_start(struct tfs_fs *fs);
/* Stop the cleaner and, clean unmount, delete every mark from the
 * journal (nothing may be in flight). */
void tfs_stripe_stop(struct tfs_fs *fs);
/* Returns the number of marks in the journal: 0 without a journal or
 * stripes, and 0 too if the journal cannot be read. */
uint64_t tfs_stripe_marks(struct tfs_fs *fs);
/* Write-intent marks around a write of rows (chunks on mirrors) r0..r1
 * (marks.c invariants 2 and 3): each region's mark is durable in the
 * journal before this returns.  Returns 0, or -errno (-ENOMEM, the
 * journal's -ENOSPC or -EIO) with no mark taken. */
int tfs_marks_get(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1);
/* Release the marks tfs_marks_get took; the cleaner deletes them once the
 * regions are idle. */
void tfs_marks_put(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1);
/* Rows r0..r1 (marked by the caller) may disagree with their redundancy and
 * could not be fixed: their marks stay until the next mount resyncs them. */
void tfs_marks_keep(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1);
/* Row locks (marks.c invariant 1), for every redundant level: rows are
 * parity rows, or chunks on the mirror levels.  held[] needs
 * TFS_ROW_LOCKS entries. */
#define TFS_ROW_LOCKS 1024
/* Lock rows r0..r1 of fid, in ascending lock order (all TFS_ROW_LOCKS of
 * them for a span that long).  Returns how many distinct locks are held,
 * their numbers in held[0..n). */
unsigned tfs_rows_lock(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1, unsigned *held);
/* Unlock what tfs_rows_lock returned. */
void tfs_rows_unlock(struct tfs_fs *fs, const unsigned *held, unsigned n);
/* replay.c's tfs_replay_cut_fn: a replayed truncate that cut into a row
 * of a parity level leaves a mark on it.  Returns 0 or -errno. */
int tfs_stripe_cut_replayed(struct tfs_fs *fs, uint64_t fid, uint64_t len);
/* Returns the rows one write-intent mark covers (mark region g is rows
 * g*n..g*n+n-1); fs->stripes must be set up. */
uint64_t tfs_mark_rows(struct tfs_fs *fs);

/* ---- stripe.c: file data on the parity levels ---- */
/* stripe.* lines of user.tierfs.status into buf (nothing without parity).
 * Returns their length as snprintf does (>= len: truncated). */
int tfs_stripe_stats(struct tfs_fs *fs, char *buf, size_t len);
/* Parity levels: tfs_raid_read's read, with the rotation and logical size
 * the caller read from in; rows on members not in sync are rebuilt from
 * parity, under the row locks.  Returns bytes read (clamped to size), or
 * -errno; -EAGAIN only if members kept failing through fs->n + 1 plans. */
ssize_t tfs_stripe_read(struct tfs_fs *fs, struct tfs_inode *in, uint32_t rot, uint64_t size,
			bool direct, void *buf, size_t len, uint64_t off);
/* Parity levels: tfs_raid_write's write (the caller holds io_gate), under
 * row locks and marks; the size grows to off + len.  Returns len, or
 * -errno as tfs_raid_write (a member failing during the writes does not
 * fail the request: the parity covers it, stripe.c invariant 2); -EAGAIN
 * only if members kept failing through fs->n + 1 plans of the reads. */
ssize_t tfs_stripe_write(struct tfs_fs *fs, struct tfs_inode *in, uint32_t rot, uint64_t size,
			 bool direct, const void *buf, size_t len, uint64_t off);
/* Write zeros over [off, off+len) of an open file, keeping the parity
 * right (truncate, hole punch), 1 MiB at a time; in_locked: the caller
 * holds the row locks and in->lock and opened every member file.  Does not
 * change in->size.  Returns 0 or -errno as tfs_stripe_write. */
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
/* Parity levels: op on whole rows r0..r1 of an open file, locked and (but
 * for a check) marked here, at the file's size now; mismatches go to
 * report(arg, ...).  Returns 0, or -EBUSY (check, repair and resync need
 * every member in sync; nothing done), or -errno. */
int tfs_stripe_rows(struct tfs_fs *fs, struct tfs_inode *in, uint64_t r0, uint64_t r1,
		    enum tfs_stripe_op op, tfs_stripe_report_fn report, void *arg);

/* ---- data.c: the mirror levels' maintenance ---- */
/* Mirror levels: check, repair or rebuild [off, off+len) of an open file
 * chunk by chunk under row locks, up to its size now; copies that differ
 * go to report (repair and rebuild take the majority, the first copy on a
 * split, logged).  Returns 0 or -errno; a member failing meanwhile gives
 * -EIO (the pass is not redone). */
int tfs_data_maint(struct tfs_fs *fs, struct tfs_inode *in, uint64_t off, uint64_t len,
		   enum tfs_stripe_op op, tfs_stripe_report_fn report, void *arg);

#endif
