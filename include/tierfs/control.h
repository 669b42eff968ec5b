/* The array's control and status interface (src/fuse/control.c): what
 * tierctl writes to user.tierfs.ctl and reads from user.tierfs.status on
 * the mount's root. */
#ifndef TIERFS_CONTROL_H
#define TIERFS_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

struct tfs_fs;

/* Run one command (len bytes, not NUL-terminated), routed to maintenance
 * or the SSD tier (control.c invariant 1).  Returns 0, or -errno with a
 * one-line reason in err: -E2BIG for a command of PATH_MAX + 64 bytes or
 * more, -EROFS on a read-only mount, -EINVAL for an unknown command (or a
 * bad argument), else the owning subsystem's refusal.  Every call sets the
 * ctl_error= line of the status: the reason of a refusal, cleared by a
 * command that succeeds. */
int tfs_control(struct tfs_fs *fs, const char *val, size_t len, char *err, size_t errlen);
/* A refused setting of another user.tierfs.* name (fuse/attrs.c): why
 * becomes the ctl_error= line, as a refused command's reason does. */
void tfs_control_refused(const char *why);
/* The text of user.tierfs.status (control.c invariant 2); paths (members,
 * the tier, files) and the ctl_error= line only when paths (DESIGN §11).
 * Returns it malloc'ed (the caller frees), or NULL without memory. */
char *tfs_status(struct tfs_fs *fs, bool paths);

#endif
