/* upgrade.c - move an array made by an older tierfs to this version, at
 * mount, in place.
 *
 * Owns: the steps from one superblock version to the next (super.h).
 *
 * Version 2 to 3: the identity and size records (identity.c invariant 1, ofile.c invariant 1)
 * move from user.tierfs.* to trusted.* on every file and directory of
 * every member in use, because the owner of a member file may set its
 * user.* xattrs and root alone may set trusted.* ones (DESIGN §11).
 *
 * Invariants:
 *  1. Every step runs before anything reads a record: after assembly and
 *     the building of the member stack, before replay, resync and the
 *     tier (tierfs.c fs_setup).
 *  2. The steps are: copy each old record to its new name on every object
 *     of every member; syncfs every member; remove the old names; syncfs;
 *     then write the new version to every superblock (events unchanged).
 *     So whenever a superblock says 3, every new record is on disk; and
 *     while any says 2 (super.c takes the oldest), the next mount redoes
 *     the steps, which skip what is done: an object whose new record is
 *     there keeps it (a copy written earlier, of the same value) and only
 *     loses its old one.  Neither a kill nor a power cut in between loses
 *     a record, whatever order the member filesystem makes writes durable
 *     in between two syncfs calls.
 *  3. A read-only mount of an old array is refused: it could not upgrade,
 *     and this tierfs reads only the new names.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tierfs/log.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/super.h"
#include "tierfs/upgrade.h"
#include "tierfs/walk.h"

static const char *const rename_v2[][2] = {
	{ TFS_XATTR_FID_V2, TFS_XATTR_FID },
	{ TFS_XATTR_SIZE_V2, TFS_XATTR_SIZE },
};

enum pass { COPY, REMOVE };

struct up {
	struct tfs_fs *fs;
	uint32_t k;
	enum pass pass;
	uint64_t objects;
};

/* One object (O_PATH fd) of member k: its records in this pass
 * (tfs_member_walk_fn). */
static int up_object(void *arg, int fd, const char *path)
{
	struct up *u = arg;
	struct tfs_fs *fs = u->fs;
	char v[64], cur[64];

	for (unsigned i = 0; i < sizeof(rename_v2) / sizeof(rename_v2[0]); i++) {
		const char *old = rename_v2[i][0], *new = rename_v2[i][1];
		int l, c;

		if (u->pass == REMOVE) {
			l = OPS(fs)->removexattr(BE(fs), u->k, fd, old);
			if (l && l != -ENODATA)
				goto fail_l;
			continue;
		}
		l = OPS(fs)->getxattr(BE(fs), u->k, fd, old, v, sizeof(v));
		if (l == -ENODATA)
			continue;
		if (l < 0)
			goto fail_l;
		u->objects += i == 0;
		c = OPS(fs)->getxattr(BE(fs), u->k, fd, new, cur, sizeof(cur));
		if (c >= 0) {	/* invariant 2: copied earlier */
			if (c != l || memcmp(cur, v, (size_t)l))
				tfs_warn("upgrade: member %u: '%s' has %s and a different %s: "
					 "keeping %s", u->k, path, new, old, new);
			continue;
		}
		l = c == -ENODATA ? OPS(fs)->setxattr(BE(fs), u->k, fd, new, v, (size_t)l, 0) : c;
		if (l == 0)
			continue;
fail_l:
		tfs_err("upgrade: member %u: '%s': %s: %s", u->k, path, old, strerror(-l));
		return l;
	}
	return 0;
}

/* One pass over every member in use, each synced after it (invariant 2). */
static int up_pass(struct tfs_fs *fs, enum pass pass, uint64_t *objects)
{
	int rc = 0;

	for (uint32_t k = 0; k < fs->n && rc == 0; k++) {
		struct up u = { fs, k, pass, 0 };

		if (!tfs_m_named(fs, k))
			continue;	/* failed: rebuilt from scratch if replaced */
		rc = tfs_member_walk(fs, k, up_object, &u);
		if (rc == 0)
			rc = OPS(fs)->syncfs(BE(fs), k);
		*objects += u.objects;
	}
	return rc;
}

int tfs_upgrade(struct tfs_fs *fs)
{
	struct tfs_array *a = fs->array;
	uint64_t objects = 0, ignored = 0;
	int rc;

	if (a->sb.version >= TFS_SUPER_VERSION)
		return 0;
	if (fs->readonly) {
		tfs_err("array %s was made by an older tierfs (superblock version %u): mount it "
			"read-write once to upgrade it to version %u", a->sb.uuid, a->sb.version,
			TFS_SUPER_VERSION);
		return -EROFS;
	}
	tfs_warn("array %s: upgrading from superblock version %u to %u (identity and size "
		 "records move to trusted.*)", a->sb.uuid, a->sb.version, TFS_SUPER_VERSION);
	rc = up_pass(fs, COPY, &objects);
	if (rc == 0)
		rc = up_pass(fs, REMOVE, &ignored);
	if (rc == 0)
		rc = tfs_array_set_version(a, TFS_SUPER_VERSION);
	if (rc) {
		tfs_err("array %s: the upgrade to version %u stopped: %s; nothing is lost, the "
			"next mount goes on with it", a->sb.uuid, TFS_SUPER_VERSION, strerror(-rc));
		return rc;
	}
	tfs_warn("array %s: upgraded to superblock version %u (%llu files and directories)",
		 a->sb.uuid, TFS_SUPER_VERSION, (unsigned long long)objects);
	return 0;
}
