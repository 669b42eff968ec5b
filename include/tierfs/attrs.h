/* tierfs's own extended attributes (src/fuse/attrs.c): the user.tierfs.*
 * names of regular files and of the mount's root, which tierctl and
 * getfattr/setfattr read and write.  docs/DESIGN.md §10.6 lists them. */
#ifndef TIERFS_ATTRS_H
#define TIERFS_ATTRS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct tfs_fs;
struct tfs_inode;

#define TFS_ATTR_PREFIX "user.tierfs."

/* Who asks: the request's caller. */
struct tfs_attr_caller {
	uid_t uid;
	bool root_node;		/* the object is the mount's root */
};

/* Returns true if name is in tierfs's namespace (TFS_ATTR_PREFIX). */
bool tfs_attr_ours(const char *name);
/* Reads name of in into buf (len 0: only the length).  Returns the
 * length, or -errno: -ENODATA (no such name here, or write-only),
 * -ERANGE (len too small), -ENOMEM, or the owner's error (the file's
 * load, -ENODEV: no tier for a tunable). */
int tfs_attr_get(struct tfs_fs *fs, struct tfs_inode *in, const struct tfs_attr_caller *who,
		 const char *name, char *buf, size_t len);
/* Sets name of in to val (len bytes, not NUL-terminated).  Returns 0 or
 * -errno: -EPERM (a name that only reads, or a caller who is neither the
 * file's owner nor root, or not root on the root), -EINVAL (an unknown
 * name, a bad value), or the owner's refusal (-ENODEV, -EROFS, -EBUSY,
 * the flush's error).  A refusal's reason is logged and becomes the
 * status's ctl_error line (control.c). */
int tfs_attr_set(struct tfs_fs *fs, struct tfs_inode *in, const struct tfs_attr_caller *who,
		 const char *name, const char *val, size_t len);
/* Appends the readable names of in (NUL-terminated each) to buf at off
 * (len 0: only counts).  Returns the new length, or -ERANGE. */
int tfs_attr_list(struct tfs_fs *fs, struct tfs_inode *in, const struct tfs_attr_caller *who,
		  char *buf, size_t len, size_t off);

#endif
