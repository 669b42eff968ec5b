/* The namespace (src/ns/: ns.c, attr.c, xattr.c, ofile.c, identity.c,
 * intent.c): one tree presented over N member trees - lookups,
 * attributes, creates, renames, removes, xattrs, truncate - the open
 * member files of a regular file (tfs_ofile) and the intent records that
 * make its changes crash-safe.
 *
 * Every change goes to the primary first, then to the other members that
 * take changes (ns.c invariant 1).  So, unless said otherwise below, a
 * function returns 0 or -errno, where -errno is the primary's answer
 * (-ENOENT, -EEXIST, -ENOTEMPTY, ...: nothing has changed), the journal's
 * refusal of the intent record (-ENOSPC, -EIO: nothing has changed), or
 * -EUCLEAN: a name on a member is not the kind of object the array
 * expects there (health.c invariant 5), or two files claim one identity
 * (inode.c invariant 5).  Another member refusing what the primary did is
 * not returned: that member is failed (or, if the level cannot lose it,
 * logged and left differing). */
#ifndef TIERFS_NS_H
#define TIERFS_NS_H

#include "tierfs/fs.h"

/* ---- ns.c, attr.c, xattr.c, ofile.c: namespace operations over all members ---- */
struct tfs_entry {
	struct tfs_inode *in;
	struct stat st;
};

/* Look name up in parent: e->in bound with one kernel reference, e->st
 * its attributes (a regular file's as tfs_ns_getattr gives them, read
 * through this name; the tier's hook found() told of it).  The kernel's
 * lookups and a maintenance walk's (walk.c) alike hold parent's name lock
 * shared from the stat of the primary until the inode is bound and a
 * regular file's attributes are read (ns.c invariant 4): the kernel does
 * not hold parent for its revalidations, nor for a walk's lookups, so
 * without it a lookup bound a name a change had just moved or removed.
 * Returns 0 or -errno (-ENOENT: no such name, on the primary). */
int tfs_ns_lookup(struct tfs_fs *fs, struct tfs_inode *parent, const char *name,
		  struct tfs_entry *e);
/* Attributes from the primary; for a regular file the logical size (the
 * largest any readable member implies, at least the saved size record
 * when a member is not in sync, at least the tier's size), the newest
 * times and the blocks of every member (at least the tier's dirty bytes).
 * Loads fid and size on first use.  Returns 0 or -errno (-ENOENT: no name
 * left and not open; any readable member's stat error). */
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
/* setattr(2) of owner, mode and times (TFS_SET_* bits in to_set) on
 * every member; *out the attributes after.  A size is the data path's
 * (tfs_data_truncate).  Returns 0 or -errno. */
int tfs_ns_setattr(struct tfs_fs *fs, struct tfs_inode *in, const struct stat *attr,
		   int to_set, struct stat *out);
/* Make name in parent on every member that takes changes: mode's type
 * (a regular file, FIFO, socket, device, directory, or a symlink to
 * target), owned by ctx (ns.c invariant 2), with a new file identity for
 * a regular file or directory; *e as tfs_ns_lookup gives it.  Returns 0
 * or -errno (-EEXIST from the primary). */
int tfs_ns_mknod(struct tfs_fs *fs, const struct tfs_ctx *ctx, struct tfs_inode *parent,
		 const char *name, mode_t mode, dev_t rdev, const char *target,
		 struct tfs_entry *e);
/* tfs_ns_mknod of a regular file, opened: the new member files are the
 * inode's ofile and the caller holds a handle (tfs_ns_release ends it).
 * Returns 0 or -errno. */
int tfs_ns_create(struct tfs_fs *fs, const struct tfs_ctx *ctx, struct tfs_inode *parent,
		  const char *name, mode_t mode, struct tfs_entry *e);
/* unlink(2) (rmdir(2) if dir) of name in parent on every member.  The last
 * name of a regular file nobody has open takes its extents out of the
 * tier (hook gone()); an open one's go with its last release.  Returns 0
 * or -errno (the primary's: -ENOENT, -ENOTEMPTY, -EISDIR, -ENOTDIR). */
int tfs_ns_remove(struct tfs_fs *fs, struct tfs_inode *parent, const char *name, bool dir);
/* renameat2(2) of (op, oname) to (np, nname) with RENAME_* flags, on
 * every member, under move_lock shared.  A file replaced at nname loses
 * its name: if that was its last and nobody has it open, its extents
 * leave the tier, as with tfs_ns_remove (identity.c invariant 2).  Returns 0 or
 * -errno. */
int tfs_ns_rename(struct tfs_fs *fs, struct tfs_inode *op, const char *oname,
		  struct tfs_inode *np, const char *nname, unsigned flags);
/* link(2) of in as (np, nname) on every member, under move_lock shared;
 * *e as tfs_ns_lookup gives it.  Returns 0 or -errno. */
int tfs_ns_link(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_inode *np,
		const char *nname, struct tfs_entry *e);
/* readlink(2) of the symlink in, from the primary, into buf (len bytes, no
 * NUL added).  Returns the length of the target or -errno. */
int tfs_ns_readlink(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len);
/* statfs of the array: blocks the level makes usable of the smallest
 * member (JBOD: the sum), in 4 KiB units; inodes of the fullest member.
 * Returns 0 or -errno (a member's statvfs error, members in sync or being
 * rebuilt only). */
int tfs_ns_statfs(struct tfs_fs *fs, struct statvfs *sv);
/* Open the directory in on the primary (O_RDONLY | O_DIRECTORY) for
 * readdir; *fd is the caller's to close.  Returns 0 or -errno. */
int tfs_ns_opendir(struct tfs_fs *fs, struct tfs_inode *in, int *fd);
/* fsync the directory in on every member that takes changes.  Returns 0
 * or -errno: the first member's fsync error is returned, no member is
 * failed for it. */
int tfs_ns_fsyncdir(struct tfs_fs *fs, struct tfs_inode *in);
/* setxattr(2) on every member.  Returns 0 or -errno: -EPERM for
 * tierfs's own names (user.tierfs.*, trusted.tierfs.*) and on symlinks,
 * -EOPNOTSUPP for security.capability (not kept). */
int tfs_ns_setxattr(struct tfs_fs *fs, struct tfs_inode *in, const char *name,
		    const void *val, size_t len, int flags);
/* getxattr(2) from the primary.  Returns the value's length (len 0: the
 * size needed) or -errno: -ENODATA for tierfs's own names,
 * security.capability and anything on a symlink, -ERANGE. */
int tfs_ns_getxattr(struct tfs_fs *fs, struct tfs_inode *in, const char *name,
		    void *buf, size_t len);
/* listxattr(2) from the primary, without tierfs's own names; trusted: the
 * caller may see trusted.* names (root, as the kernel's own filesystems
 * list them only to CAP_SYS_ADMIN).  Returns the list's length (len 0:
 * the size needed; 0 for a symlink) or -errno (-ERANGE: buf too small). */
int tfs_ns_listxattr(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len,
		     bool trusted);
/* removexattr(2) on every member.  Returns 0 or -errno (-EPERM as for
 * tfs_ns_setxattr). */
int tfs_ns_removexattr(struct tfs_fs *fs, struct tfs_inode *in, const char *name);
/* Open the file for a handle (shares the inode's ofile; member files are
 * opened on first use) and take a reference on in.  Returns 0 or -errno:
 * -EUCLEAN when another file has its identity, -ENOENT when it has no
 * name left, -ENOMEM. */
int tfs_ns_open(struct tfs_fs *fs, struct tfs_inode *in);
/* fd of member k (O_DIRECT twin if direct) of an open file, opening it on
 * first use (again after k was replaced); the fd stays the ofile's: do
 * not close it.  The caller holds a handle.  Returns the fd, or -errno:
 * -ENODEV when member k has no names in use (failed, not the primary),
 * -EUCLEAN when the name on k is not a regular file, -ENOENT (a member
 * being rebuilt lacks files unlinked before it joined). */
int tfs_ns_member_fd(struct tfs_fs *fs, struct tfs_inode *in, uint32_t k, bool direct);
/* Open every member file of an open file (a rebuilding member's missing
 * file and a diverged non-primary member are passed over).  Returns 0 or
 * -errno (the primary's). */
int tfs_ns_fill(struct tfs_fs *fs, struct tfs_inode *in);
/* Drop a handle (the last one saves the size record, a failure only
 * logged) and its reference on in.  The last use of a file with no name
 * left tells the tier it is gone (identity.c invariant 2). */
void tfs_ns_release(struct tfs_fs *fs, struct tfs_inode *in);
/* tfs_ns_release for the tier's flusher, which holds the file and so
 * cannot be told: returns true if the file is gone (the caller drops its
 * extents), false otherwise. */
bool tfs_ns_release_gone(struct tfs_fs *fs, struct tfs_inode *in);
/* Load fid and logical size of a regular file if not known yet (by
 * tfs_ns_getattr).  Returns 0 or -errno. */
int tfs_ns_load_file(struct tfs_fs *fs, struct tfs_inode *in);
/* Parity levels: record the logical size on every member that takes
 * changes (TFS_XATTR_SIZE, ofile.c invariant 1) if it changed, or always when
 * force; the caller holds a handle.  Returns 0 (also on other levels, and
 * on a read-only mount) or the first member's -errno. */
int tfs_ns_save_size(struct tfs_fs *fs, struct tfs_inode *in, bool force);
/* tfs_ns_save_size where the caller cannot fail for it (the end of a
 * truncate): a failure is logged, naming when. */
void tfs_ns_save_size_logged(struct tfs_fs *fs, struct tfs_inode *in, const char *when);
/* The open file in's data changed through the SSD tier (attr.c invariant
 * 4): its modification time becomes now for every stat at once, and on
 * the members within a second, at the last close or at fsync.  Best
 * effort: a failure leaves the older time there. */
void tfs_ns_touch(struct tfs_fs *fs, struct tfs_inode *in);
/* Tell the members of the open file in the modification time due now
 * (an fsync makes it durable after this).  Best effort, as tfs_ns_touch. */
void tfs_ns_times_put(struct tfs_fs *fs, struct tfs_inode *in);
/* The modification time of the open file in, kept across writes that
 * stamp the members with the time they run (attr.c invariant 5). */
struct tfs_times_keep {
	uint64_t gen;
	struct timespec mtim;
	bool ok;		/* known: put back by tfs_ns_times_restore */
};
/* Read in's times into keep before such writes.  Best effort: keep->ok
 * false when they could not be read or an explicit change is running. */
void tfs_ns_times_keep(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_times_keep *keep);
/* Put back on every member the time keep holds (or a newer one a write
 * through the tier made since), unless the times were changed or the file
 * truncated since tfs_ns_times_keep.  Best effort. */
void tfs_ns_times_restore(struct tfs_fs *fs, struct tfs_inode *in,
			  const struct tfs_times_keep *keep);
/* The namespace's part of a truncate of a loaded regular file to len
 * (the data path's tfs_data_truncate does the rest): refuses a file whose
 * identity another file claims (-EUCLEAN), begins a TRUNCATE intent
 * (durable, as every intent: before the SSD tier drops anything, DESIGN
 * 10.5) and opens every member file, pinned until tfs_ns_cut_end.  *seq is the
 * intent (0: none, an unlinked file).  Returns 0, or -errno with nothing
 * begun. */
int tfs_ns_cut_begin(struct tfs_fs *fs, struct tfs_inode *in, uint64_t len, uint64_t *seq);
/* Retire the intent seq (after the members' cut is durable) and unpin
 * the member files. */
void tfs_ns_cut_end(struct tfs_fs *fs, struct tfs_inode *in, uint64_t seq);

/* Intent records (encoded by intent.c, replayed by replay.c). */
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

/* Encode it into buf (len bytes).  Returns the record's length, or
 * -ENAMETOOLONG if it does not fit or a path is over 65535 bytes. */
int tfs_intent_encode(const struct tfs_intent *it, void *buf, size_t len);
/* Decode a record of len bytes into *it, its paths copied NUL-terminated
 * into p1 and p2 (TFS_INTENT_PATH_MAX bytes each; it->path2 is "" when
 * there is none).  Returns 0, or -EINVAL for a malformed record. */
int tfs_intent_decode(const void *buf, size_t len, struct tfs_intent *it,
		      char *p1, char *p2);

#endif
