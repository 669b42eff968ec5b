/* Directories only root may reach: the members, the SSD tier's directory.
 *
 * The daemon reaches its members and its tier by file descriptor, and the
 * kernel's permission checks through the mount are the only way users get
 * at the data (docs/DESIGN.md, "Who can reach what").  So the directories
 * under the array are root's: owner root, mode 0700, and no directory on
 * the way to them lets a user rename them away and put his own in place.
 */
#ifndef TIERFS_SECURE_H
#define TIERFS_SECURE_H

#include <stddef.h>

/* Make the directory fd (O_PATH is enough) root's: owner 0:0, mode 0700.
 * Returns 1 if it changed something (the old owner and mode in *old_uid,
 * *old_mode), 0 if it was already so, or -errno. */
int tfs_dir_make_private(int fd, unsigned *old_uid, unsigned *old_mode);

/* Every directory above the absolute path real must keep users from
 * swapping it: owned by root and writable by nobody else, unless sticky
 * (a user cannot rename a root-owned name in a sticky directory).
 * Returns 0, or -EPERM with a one-line reason in err. */
int tfs_path_check_ancestors(const char *real, char *err, size_t errlen);

/* Both, for the directory real (fd: O_PATH of it) that tierfs keeps as
 * what ("member", "cache"): refused (-EPERM, reason in err) if a user
 * could swap it, else made root's with a warning if it was not.  Returns 0
 * or -errno with a reason in err. */
int tfs_dir_secure(int fd, const char *real, const char *what, char *err, size_t errlen);

#endif
