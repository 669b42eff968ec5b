/* secure.c - directories only root may reach (secure.h).
 *
 * Owns: the rule for "a user cannot get at or swap this directory".
 *
 * Invariants:
 *  1. A private directory is owned by 0:0 with mode 0700: nobody but root
 *     opens, lists or traverses it, so nothing below it (member files and
 *     their xattrs, the tier's data file and LMDB store) is reachable by a
 *     user, whatever the modes below copy from the mounted tree.
 *  2. A parent is safe when no user can rename an entry in it: owned by
 *     root, and writable by group or others only with the sticky bit (or,
 *     for the group, when the group is root's).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fcntl.h>

#include "tierfs/log.h"
#include "tierfs/secure.h"

int tfs_dir_make_private(int fd, unsigned *old_uid, unsigned *old_mode)
{
	char p[64];
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	*old_uid = (unsigned)st.st_uid;
	*old_mode = (unsigned)(st.st_mode & 07777);
	if (st.st_uid == 0 && st.st_gid == 0 && (st.st_mode & 07777) == 0700)
		return 0;
	/* owner first: chown clears setuid/setgid, chmod then sets the mode */
	if (fchownat(fd, "", 0, 0, AT_EMPTY_PATH))
		return -errno;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);	/* works on O_PATH */
	if (chmod(p, 0700))
		return -errno;
	return 1;
}

/* Invariant 2, for one directory's owner and mode. */
static int unsafe_parent(unsigned uid, unsigned gid, unsigned mode)
{
	if (mode & S_ISVTX)
		return uid != 0;
	return uid != 0 || (mode & S_IWOTH) || ((mode & S_IWGRP) && gid != 0);
}

int tfs_path_check_ancestors(const char *real, char *err, size_t errlen)
{
	char p[PATH_MAX];
	size_t l = strlen(real);

	if (l >= sizeof(p) || real[0] != '/') {
		snprintf(err, errlen, "%s: not an absolute path", real);
		return -EINVAL;
	}
	memcpy(p, real, l + 1);
	for (char *s = strrchr(p, '/'); s; s = strrchr(p, '/')) {
		struct stat st;

		if (s == p)
			s[1] = 0;	/* "/" itself */
		else
			*s = 0;
		if (lstat(p, &st)) {
			snprintf(err, errlen, "%s: %s", p, strerror(errno));
			return -errno;
		}
		if (unsafe_parent((unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)st.st_mode)) {
			snprintf(err, errlen, "directory %s (owner uid %u, mode %04o) lets a user "
				 "rename %s away and put his own in its place; make it root's and "
				 "not writable by others (or sticky)", p, (unsigned)st.st_uid,
				 (unsigned)(st.st_mode & 07777), real);
			return -EPERM;
		}
		if (s == p)
			break;
	}
	return 0;
}

int tfs_dir_secure(int fd, const char *real, const char *what, char *err, size_t errlen)
{
	char why[PATH_MAX + 200];
	unsigned uid, mode;
	int rc = tfs_path_check_ancestors(real, why, sizeof(why));

	if (rc) {
		snprintf(err, errlen, "%s %s: %s", what, real, why);
		return rc;
	}
	rc = tfs_dir_make_private(fd, &uid, &mode);
	if (rc < 0) {
		snprintf(err, errlen, "%s %s: cannot make it root's (0700): %s", what, real,
			 strerror(-rc));
		return rc;
	}
	if (rc)
		tfs_warn("%s %s was open to other users (owner uid %u, mode %04o): made root's, "
			 "mode 0700", what, real, uid, mode);
	return 0;
}
