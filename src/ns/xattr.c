/* xattr.c - extended attributes of the objects of the tree.
 *
 * Owns: setxattr and removexattr on every member, getxattr and listxattr
 * from the primary, and which names pass through.
 *
 * Invariants:
 *  1. tierfs's own names never pass through (xattr_reserved): the records
 *     on the members (trusted.tierfs.*) and the names fs.c answers
 *     (user.tierfs.*) cannot be set or removed (EPERM), read (ENODATA) or
 *     listed; other trusted.* names are listed only when the caller may
 *     see them.
 *  2. security.capability is not kept: it cannot be set (EOPNOTSUPP) and
 *     reads ENODATA without a member being asked (the kernel asks before
 *     every write).
 *  3. Symlinks have no xattrs here: xattrs go through /proc/self/fd, which
 *     must never be asked to resolve a symlink (set and remove EPERM, get
 *     ENODATA, an empty list).
 *  4. A set or a remove is a change like any other: the primary first
 *     (ns.c invariant 1), inside an XATTR intent when the object has a
 *     name (intent.c invariant 1).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/ns.h"
#include "ns_i.h"

/* tierfs's own names never pass through: the records on the members
 * (trusted.tierfs.*) and the names fs.c answers (user.tierfs.*) */
static bool xattr_reserved(const char *name)
{
	return strncmp(name, "user.tierfs.", 12) == 0 || strncmp(name, "trusted.tierfs.", 15) == 0;
}

/* O_PATH fd of the object on member k (or the pinned open file). */
static int obj_fd(struct tfs_fs *fs, uint32_t k, struct ns_target *t, bool *owned)
{
	*owned = !t->pinned;
	if (t->pinned)
		return t->fd[k];
	return OPS(fs)->openat(BE(fs), k, t->fd[k], t->name, O_PATH, 0);
}

/* The object of in on the primary, for a read of its xattrs: t opened (the
 * caller closes it with ns_target_close) and a fd of the object (closed by
 * the caller when *owned).  Returns the fd, or -errno with t closed. */
static int primary_fd(struct tfs_fs *fs, struct tfs_inode *in, struct ns_target *t,
		      bool *owned)
{
	int rc = ns_target_open(fs, in, t), fd;

	if (rc)
		return rc;
	fd = obj_fd(fs, tfs_primary(fs), t, owned);
	if (fd < 0)
		ns_target_close(fs, in, t);
	return fd;
}

static int xattr_all(struct tfs_fs *fs, struct tfs_inode *in, const char *name,
		     const void *val, size_t len, int flags, bool remove)
{
	struct ns_target t;
	uint64_t seq = 0;
	int rc = ns_target_open(fs, in, &t);
	uint32_t ord[TFS_MAX_MEMBERS], nm = tfs_members(fs, ord);

	if (rc)
		return rc;
	if (t.has_loc)
		rc = ns_intent_begin(fs, (struct tfs_intent){ .op = TFS_I_XATTR }, &t.loc, NULL, name, &seq);
	for (uint32_t i = 0; i < nm && rc == 0; i++) {
		uint32_t k = ord[i];
		bool owned;
		int fd = t.fd[k] < 0 ? -ENODEV : obj_fd(fs, k, &t, &owned), r;

		if (fd < 0) {
			r = fd;
		} else {
			r = remove ? OPS(fs)->removexattr(BE(fs), k, fd, name)
				   : OPS(fs)->setxattr(BE(fs), k, fd, name, val, len, flags);
			if (owned)
				close(fd);
		}
		if (r && i == 0)
			rc = r;
		else if (r)
			ns_member_diverged(fs, k, "xattr", &t.loc, r);
	}
	ns_intent_end(fs, seq);
	ns_target_close(fs, in, &t);
	return rc;
}

/* Symlinks: xattrs go through /proc/self/fd, which must never be asked to
 * resolve a symlink; ext4 refuses user xattrs on symlinks anyway (EPERM). */
int tfs_ns_setxattr(struct tfs_fs *fs, struct tfs_inode *in, const char *name,
		    const void *val, size_t len, int flags)
{
	if (xattr_reserved(name) || S_ISLNK(in->type))
		return -EPERM;
	if (strcmp(name, "security.capability") == 0)
		return -EOPNOTSUPP;	/* see getxattr: capabilities are not kept */
	int rc = xattr_all(fs, in, name, val, len, flags, false);

	tfs_inode_changed(in, false);
	return rc;
}

int tfs_ns_removexattr(struct tfs_fs *fs, struct tfs_inode *in, const char *name)
{
	if (xattr_reserved(name) || S_ISLNK(in->type))
		return -EPERM;
	int rc = xattr_all(fs, in, name, NULL, 0, 0, true);

	tfs_inode_changed(in, false);
	return rc;
}

int tfs_ns_getxattr(struct tfs_fs *fs, struct tfs_inode *in, const char *name,
		    void *buf, size_t len)
{
	struct ns_target t;
	bool owned;
	int rc, fd;

	/* The kernel asks for security.capability before every write; answer
	 * without touching a member (tierfs does not store capabilities). */
	if (xattr_reserved(name) || strcmp(name, "security.capability") == 0 ||
	    S_ISLNK(in->type))
		return -ENODATA;
	fd = primary_fd(fs, in, &t, &owned);
	if (fd < 0)
		return fd;
	rc = OPS(fs)->getxattr(BE(fs), tfs_primary(fs), fd, name, buf, len);
	if (owned)
		close(fd);
	ns_target_close(fs, in, &t);
	return rc;
}

int tfs_ns_listxattr(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len,
		     bool trusted)
{
	struct ns_target t;
	char *all = NULL;
	bool owned;
	int rc, fd, n = 0;

	if (S_ISLNK(in->type))
		return 0;
	fd = primary_fd(fs, in, &t, &owned);
	if (fd < 0)
		return fd;
	rc = OPS(fs)->listxattr(BE(fs), tfs_primary(fs), fd, NULL, 0);
	if (rc > 0) {
		all = malloc((size_t)rc + 1);
		rc = all ? OPS(fs)->listxattr(BE(fs), tfs_primary(fs), fd, all, (size_t)rc)
			 : -ENOMEM;
	}
	if (owned)
		close(fd);
	for (int i = 0; rc > 0 && i < rc; i += (int)strlen(all + i) + 1) {
		size_t l = strlen(all + i) + 1;

		if (xattr_reserved(all + i) || (!trusted && strncmp(all + i, "trusted.", 8) == 0))
			continue;
		if (len) {
			if ((size_t)n + l > len) {
				n = -ERANGE;
				break;
			}
			memcpy(buf + n, all + i, l);
		}
		n += (int)l;
	}
	if (rc >= 0)
		rc = n;
	free(all);
	ns_target_close(fs, in, &t);
	return rc;
}
