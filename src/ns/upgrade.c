/* upgrade.c - move an array made by an older tierfs to this version, at
 * mount, in place.
 *
 * Owns: the steps from one superblock version to the next (super.h).
 *
 * Version 2 to 3: the identity and size records (ns.c invariants 4, 5)
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
#include <dirent.h>
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
	const char *where;	/* for messages: the directory being walked */
};

/* One object (O_PATH fd): its records in this pass. */
static int up_object(struct up *u, int fd, const char *name)
{
	struct tfs_fs *fs = u->fs;
	char v[64], cur[64];

	for (unsigned i = 0; i < sizeof(rename_v2) / sizeof(rename_v2[0]); i++) {
		const char *old = rename_v2[i][0], *new = rename_v2[i][1];
		int l = OPS(fs)->getxattr(BE(fs), u->k, fd, old, v, sizeof(v)), c, rc;

		if (l == -ENODATA)
			continue;
		if (l < 0)
			goto fail_l;
		if (u->pass == REMOVE) {
			rc = OPS(fs)->removexattr(BE(fs), u->k, fd, old);
			if (rc && rc != -ENODATA) {
				l = rc;
				goto fail_l;
			}
			continue;
		}
		u->objects += i == 0;
		c = OPS(fs)->getxattr(BE(fs), u->k, fd, new, cur, sizeof(cur));
		if (c >= 0) {
			if (c != l || memcmp(cur, v, (size_t)l))
				tfs_warn("upgrade: member %u: '%s/%s' has %s and a different %s: "
					 "keeping %s", u->k, u->where, name, new, old, new);
			continue;	/* invariant 2: copied earlier */
		}
		if (c != -ENODATA) {
			l = c;
			goto fail_l;
		}
		rc = OPS(fs)->setxattr(BE(fs), u->k, fd, new, v, (size_t)l, 0);
		if (rc) {
			l = rc;
			goto fail_l;
		}
		continue;
fail_l:
		tfs_err("upgrade: member %u: '%s/%s': %s: %s", u->k, u->where, name, old,
			strerror(-l));
		return l;
	}
	return 0;
}

static int read_names(struct up *u, int dfd, char **buf, size_t *len)
{
	struct tfs_fs *fs = u->fs;
	int fd = OPS(fs)->openat(BE(fs), u->k, dfd, ".", O_RDONLY | O_DIRECTORY, 0);
	size_t cap = 0;
	struct dirent *de;
	DIR *d;

	*buf = NULL;
	*len = 0;
	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name) + 1;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (*len + l > cap) {
			char *b = realloc(*buf, cap = (cap + l) * 2);

			if (!b) {
				closedir(d);
				return -ENOMEM;
			}
			*buf = b;
		}
		memcpy(*buf + *len, de->d_name, l);
		*len += l;
	}
	closedir(d);
	return 0;
}

/* Directory dfd (O_PATH) and everything below it.  Names are read before
 * any is visited: one fd per level stays open. */
static int up_dir(struct up *u, int dfd, const char *path)
{
	struct tfs_fs *fs = u->fs;
	char *names, *sub;
	size_t len;
	int rc = read_names(u, dfd, &names, &len);

	if (rc) {
		tfs_err("upgrade: member %u: directory '%s': %s", u->k, path, strerror(-rc));
		return rc;
	}
	for (size_t pos = 0; rc == 0 && pos < len; pos += strlen(names + pos) + 1) {
		const char *name = names + pos;
		struct stat st;
		int fd;

		rc = OPS(fs)->fstatat(BE(fs), u->k, dfd, name, &st);
		if (rc)
			break;
		if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
			continue;	/* no records on other objects */
		fd = S_ISDIR(st.st_mode) ? OPS(fs)->open_dir(BE(fs), u->k, dfd, name)
					 : OPS(fs)->openat(BE(fs), u->k, dfd, name, O_PATH, 0);
		if (fd < 0) {
			rc = fd;
			break;
		}
		u->where = path;
		rc = up_object(u, fd, name);
		if (rc == 0 && S_ISDIR(st.st_mode)) {
			if (asprintf(&sub, "%s/%s", path, name) < 0) {
				rc = -ENOMEM;
			} else {
				rc = up_dir(u, fd, sub);
				free(sub);
			}
		}
		close(fd);
	}
	if (rc && rc != -ENOMEM)
		tfs_err("upgrade: member %u: in '%s': %s", u->k, path, strerror(-rc));
	free(names);
	return rc;
}

static int up_pass(struct tfs_fs *fs, enum pass pass, uint64_t *objects)
{
	int rc = 0;

	for (uint32_t k = 0; k < fs->n && rc == 0; k++) {
		struct up u = { fs, k, pass, 0, "" };
		int root;

		if (!tfs_m_named(fs, k))
			continue;	/* failed: rebuilt from scratch if replaced */
		root = OPS(fs)->open_dir(BE(fs), k, -1, "");
		if (root < 0)
			return root;
		rc = up_object(&u, root, ".");
		if (rc == 0)
			rc = up_dir(&u, root, ".");
		close(root);
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
