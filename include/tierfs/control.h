/* The array's control and status interface (src/fuse/control.c): what
 * tierctl writes to user.tierfs.ctl and reads from user.tierfs.status on
 * the mount's root. */
#ifndef TIERFS_CONTROL_H
#define TIERFS_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

struct tfs_fs;

/* Run one command (len bytes, not NUL-terminated): 0, or -errno with a
 * one-line reason in err.  The reason is kept for the status. */
int tfs_control(struct tfs_fs *fs, const char *val, size_t len, char *err, size_t errlen);
/* The text of user.tierfs.status, malloc'ed (NULL without memory); paths
 * (members, the tier, files) only when paths (DESIGN §11). */
char *tfs_status(struct tfs_fs *fs, bool paths);

#endif
