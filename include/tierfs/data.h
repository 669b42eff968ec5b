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

/* Bytes read (short only at the end of the file), or -errno. */
ssize_t tfs_data_read(struct tfs_fs *fs, struct tfs_inode *in, bool direct, void *buf,
		      size_t len, uint64_t off);
/* Bytes written (all of them), or -errno. */
ssize_t tfs_data_write(struct tfs_fs *fs, struct tfs_inode *in, bool direct, const void *buf,
		       size_t len, uint64_t off);
/* 0 once every acknowledged write of the file is on stable storage, or
 * -errno (dispatch.c invariant 2). */
int tfs_data_fsync(struct tfs_fs *fs, struct tfs_inode *in, bool datasync);
/* fallocate(2) modes 0, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE[|KEEP_SIZE]:
 * 0, -EOPNOTSUPP for any other mode, -EFBIG, or -errno. */
int tfs_data_fallocate(struct tfs_fs *fs, struct tfs_inode *in, int mode, uint64_t off,
		       uint64_t len);
/* Truncate (or extend) the file to len (dispatch.c invariant 3): 0, or
 * -EISDIR / -EINVAL for a directory / another non-regular file, -EUCLEAN
 * for a file whose identity another claims, or -errno. */
int tfs_data_truncate(struct tfs_fs *fs, struct tfs_inode *in, uint64_t len);

#endif
