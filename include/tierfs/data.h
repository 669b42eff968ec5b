/* The data path (src/data/dispatch.c): a file's reads, writes, syncs and
 * allocations, each sent to the SSD tier when one is attached, else to
 * the RAID.  The FUSE front end's only way to file data. */
#ifndef TIERFS_DATA_H
#define TIERFS_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct tfs_fs;
struct tfs_inode;

/* Read len bytes at off into buf, from the tier or the RAID (direct: the
 * handle is O_DIRECT).  Returns bytes read (fewer than len only at the end
 * of the file, 0 at or past it; holes read as zeros), or -errno.  A member
 * that fails during the read is failed and the read redone without it
 * (tfs_raid_read); -EIO when no copy of a byte is left. */
ssize_t tfs_data_read(struct tfs_fs *fs, struct tfs_inode *in, bool direct, void *buf,
		      size_t len, uint64_t off);
/* Write len bytes of buf at off; the logical size grows to off + len.
 * Returns len (never fewer), or -errno: -ENOSPC/-EDQUOT when a member or
 * the tier refused it for want of space (no member is failed for it),
 * -EFBIG when off + len overflows, -EIO when no copy can be written. */
ssize_t tfs_data_write(struct tfs_fs *fs, struct tfs_inode *in, bool direct, const void *buf,
		       size_t len, uint64_t off);
/* Make every acknowledged write of the file durable, the retirement of
 * its last truncate intent first (dispatch.c invariant 2).  Returns 0 once
 * it is on stable storage, or -errno (the journal's, the tier's or a
 * member's that the level cannot lose). */
int tfs_data_fsync(struct tfs_fs *fs, struct tfs_inode *in, bool datasync);
/* Returns true if tfs_data_fsync may wait for the members (an HDD's
 * service time), as far as can be seen now; false when only the SSD tier
 * has anything to make durable.  It changes nothing. */
bool tfs_data_fsync_waits(struct tfs_fs *fs, struct tfs_inode *in, bool datasync);
/* fallocate(2) of [off, off+len), modes 0, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE,
 * ZERO_RANGE[|KEEP_SIZE]; with a tier, zeros go to the members first, then
 * the tier drops the range (dispatch.c invariant 1).  Returns 0, or
 * -EOPNOTSUPP for any other mode, -EFBIG when off + len overflows, or
 * -errno (a member's fallocate refusal, -ENOSPC included, is returned as
 * is: no member is failed for it). */
int tfs_data_fallocate(struct tfs_fs *fs, struct tfs_inode *in, int mode, uint64_t off,
		       uint64_t len);
/* Truncate (or extend) the file to len (dispatch.c invariant 3): 0, or
 * -EISDIR / -EINVAL for a directory / another non-regular file, -EUCLEAN
 * for a file whose identity another claims, or -errno. */
int tfs_data_truncate(struct tfs_fs *fs, struct tfs_inode *in, uint64_t len);

#endif
