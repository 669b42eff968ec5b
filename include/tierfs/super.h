/* The superblock every member carries, and assembly of members into an array.
 *
 * Member directory layout (see docs/DESIGN.md):
 *     MEMBER/.tierfs/superblock   this file, text, versioned
 *     MEMBER/.tierfs/journal/     LMDB environment (intent log; member 0)
 *     MEMBER/root/                the array's tree; regular files hold this
 *                                 member's share of the data
 */
#ifndef TIERFS_SUPER_H
#define TIERFS_SUPER_H

#include <stdint.h>
#include <time.h>

#include "tierfs/layout.h"

#define TFS_META_DIR     ".tierfs"
#define TFS_SUPER_NAME   ".tierfs/superblock"
#define TFS_JOURNAL_DIR  ".tierfs/journal"
#define TFS_TREE_DIR     "root"
#define TFS_SUPER_MAGIC  "tierfs-superblock"
#define TFS_SUPER_VERSION 1
#define TFS_XATTR_FID    "user.tierfs.fid"	/* on member files and dirs */

struct tfs_super {
	unsigned version;
	char uuid[37];
	struct tfs_layout layout;
	uint32_t index;		/* this member's position in the array */
	int64_t created;	/* seconds since the epoch */
};

/* Text form; returns bytes written (< len) or -ENOSPC. */
int tfs_super_format(const struct tfs_super *sb, char *buf, unsigned len);
/* Returns 0, or -EINVAL with a reason. */
int tfs_super_parse(const char *buf, struct tfs_super *sb, const char **why);

/* Read MEMBER/.tierfs/superblock: 0, -ENOENT (not a member) or -errno/-EINVAL. */
int tfs_super_read(int memberfd, struct tfs_super *sb, const char **why);
/* Write it atomically (temp file, fsync, rename, fsync dir). */
int tfs_super_write(int memberfd, const struct tfs_super *sb);

void tfs_uuid_generate(char out[37]);

/* An assembled array: members in index order. */
struct tfs_array {
	struct tfs_super sb;		/* common fields; index is meaningless */
	uint32_t n;
	char *path[TFS_MAX_MEMBERS];	/* member directory, absolute */
	int dirfd[TFS_MAX_MEMBERS];	/* MEMBER, O_PATH, held for the mount */
	int lockfd[TFS_MAX_MEMBERS];	/* superblock, flock()ed: one mount at a time */
};

/* Open, check and order the members.  On failure returns -errno and writes a
 * one-line reason naming the member into err. */
int tfs_array_assemble(char **paths, unsigned npaths, struct tfs_array *a,
		       char *err, unsigned errlen);
void tfs_array_release(struct tfs_array *a);

#endif
