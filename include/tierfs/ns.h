/* The namespace (src/ns/ns.c): one tree presented over N member trees -
 * lookups, attributes, creates, renames, removes, xattrs, truncate - and
 * the intent records that make its changes crash-safe. */
#ifndef TIERFS_NS_H
#define TIERFS_NS_H

#include "tierfs/fs.h"

/* ---- ns.c: namespace operations over all members ---- */
struct tfs_entry {
	struct tfs_inode *in;
	struct stat st;
};

int tfs_ns_lookup(struct tfs_fs *fs, struct tfs_inode *parent, const char *name,
		  struct tfs_entry *e);
int tfs_ns_getattr(struct tfs_fs *fs, struct tfs_inode *in, struct stat *st);
/* What tfs_ns_setattr sets (fs.c maps the kernel's FUSE_SET_ATTR_*; a
 * size goes to the data path, tfs_data_truncate). */
enum tfs_set_attr {
	TFS_SET_MODE = 1 << 0,
	TFS_SET_UID = 1 << 1,
	TFS_SET_GID = 1 << 2,
	TFS_SET_ATIME = 1 << 3,
	TFS_SET_MTIME = 1 << 4,
	TFS_SET_ATIME_NOW = 1 << 5,	/* atime becomes now (st_atim ignored) */
	TFS_SET_MTIME_NOW = 1 << 6,
};
int tfs_ns_setattr(struct tfs_fs *fs, struct tfs_inode *in, const struct stat *attr,
		   int to_set, struct stat *out);
int tfs_ns_mknod(struct tfs_fs *fs, const struct tfs_ctx *ctx, struct tfs_inode *parent,
		 const char *name, mode_t mode, dev_t rdev, const char *target,
		 struct tfs_entry *e);
int tfs_ns_create(struct tfs_fs *fs, const struct tfs_ctx *ctx, struct tfs_inode *parent,
		  const char *name, mode_t mode, struct tfs_entry *e);
int tfs_ns_remove(struct tfs_fs *fs, struct tfs_inode *parent, const char *name, bool dir);
int tfs_ns_rename(struct tfs_fs *fs, struct tfs_inode *op, const char *oname,
		  struct tfs_inode *np, const char *nname, unsigned flags);
int tfs_ns_link(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_inode *np,
		const char *nname, struct tfs_entry *e);
int tfs_ns_readlink(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len);
int tfs_ns_statfs(struct tfs_fs *fs, struct statvfs *sv);
int tfs_ns_opendir(struct tfs_fs *fs, struct tfs_inode *in, int *fd);
int tfs_ns_fsyncdir(struct tfs_fs *fs, struct tfs_inode *in);
int tfs_ns_setxattr(struct tfs_fs *fs, struct tfs_inode *in, const char *name,
		    const void *val, size_t len, int flags);
int tfs_ns_getxattr(struct tfs_fs *fs, struct tfs_inode *in, const char *name,
		    void *buf, size_t len);
/* trusted: the caller may see trusted.* names (root, as the kernel's
 * own filesystems list them only to CAP_SYS_ADMIN) */
int tfs_ns_listxattr(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len,
		     bool trusted);
int tfs_ns_removexattr(struct tfs_fs *fs, struct tfs_inode *in, const char *name);
/* Open the file for a handle (shares the inode's ofile; member files are
 * opened on first use). */
int tfs_ns_open(struct tfs_fs *fs, struct tfs_inode *in);
/* fd of member k (O_DIRECT twin if direct) of an open file, opening it on
 * first use; -errno on failure.  The caller holds a handle. */
int tfs_ns_member_fd(struct tfs_fs *fs, struct tfs_inode *in, uint32_t k, bool direct);
/* Open every member file of an open file. */
int tfs_ns_fill(struct tfs_fs *fs, struct tfs_inode *in);
/* Drop a handle; true if that was the last use of a file with no name
 * left (its data is gone for good). */
bool tfs_ns_release(struct tfs_fs *fs, struct tfs_inode *in);
/* Load fid and logical size of a regular file if not known yet. */
int tfs_ns_load_file(struct tfs_fs *fs, struct tfs_inode *in);
/* Parity levels: record the logical size on every member that takes
 * changes (TFS_XATTR_SIZE) if it changed, or always when force; the caller
 * holds a handle. */
int tfs_ns_save_size(struct tfs_fs *fs, struct tfs_inode *in, bool force);
/* tfs_ns_save_size where the caller cannot fail for it (the end of a
 * truncate): a failure is logged, naming when. */
void tfs_ns_save_size_logged(struct tfs_fs *fs, struct tfs_inode *in, const char *when);
/* The open file in's data changed where the members do not show it (a
 * write the SSD tier holds): its modification time becomes now, as a
 * write to the members would have made it.  Best effort: a failure leaves
 * the older time. */
void tfs_ns_touch(struct tfs_fs *fs, struct tfs_inode *in);
/* The namespace's part of a truncate of a loaded regular file to len
 * (the data path's tfs_data_truncate does the rest): refuses a file whose
 * identity another file claims (-EUCLEAN), begins a TRUNCATE intent (durable
 * first when durable: the SSD tier holds some of the file, DESIGN 10.5)
 * and opens every member file, pinned until tfs_ns_cut_end.  *seq is the
 * intent (0: none, an unlinked file).  Returns 0, or -errno with nothing
 * begun. */
int tfs_ns_cut_begin(struct tfs_fs *fs, struct tfs_inode *in, uint64_t len, bool durable,
		     uint64_t *seq);
/* Retire the intent seq (after the members' cut is durable) and unpin
 * the member files. */
void tfs_ns_cut_end(struct tfs_fs *fs, struct tfs_inode *in, uint64_t seq);

/* Intent records (encoded by ns.c, replayed by replay.c). */
enum tfs_intent_op {
	TFS_I_CREATE = 1,	/* path */
	TFS_I_REMOVE,		/* path */
	TFS_I_RENAME,		/* path, path2, flags */
	TFS_I_LINK,		/* path (existing), path2 (new) */
	TFS_I_ATTR,		/* path: copy mode, owner, times from member 0 */
	TFS_I_TRUNCATE,		/* path, arg = logical size, fid */
	TFS_I_XATTR,		/* path, path2 = xattr name */
};

struct tfs_intent {
	uint32_t op;
	uint32_t flags;
	uint64_t arg;
	uint64_t fid;			/* TRUNCATE: the file's identity */
	const char *path;
	const char *path2;
};

#define TFS_INTENT_PATH_MAX 65536	/* u16 lengths in the record, plus NUL */

int tfs_intent_encode(const struct tfs_intent *it, void *buf, size_t len);
int tfs_intent_decode(const void *buf, size_t len, struct tfs_intent *it,
		      char *p1, char *p2);

#endif
