/* walk.c - visit every file of the tree through the inode table.
 *
 * Owns: the tree walk that resync and scrub (scrub.c) and rebuild (rebuild.c) use.  Every
 * directory and file is reached by lookup, like an application would, so
 * the walk shares the inode table, its locks and the open-file state with
 * the requests the kernel sends meanwhile.
 *
 * Invariants:
 *  1. A directory's names are read completely before any of them is
 *     visited, so at most one directory stream per level is open.
 *  2. Every lookup the walk makes is forgotten before it returns.
 *  3. A walk stops at the first error, except a walk past damage, which
 *     reports a damaged name (EUCLEAN, health.c invariant 5) and goes on.
 *  4. A member walk (tfs_member_walk) goes below the inode table, through
 *     the member seam, on one member; invariant 1 holds for it too.  Only
 *     mount-time work that runs before anything is served uses it.
 *  5. Every lookup a walk makes holds the directory's name lock from its
 *     stat of the primary until it has bound the inode and read a regular
 *     file's attributes through the name (tfs_ns_lookup, ns.c invariant
 *     4), as the kernel's own do: the kernel holds a directory against
 *     renames only for its own lookups on a dcache miss, and a walk's
 *     bound a name just moved away, or took a file for removed when
 *     another of its names went.
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
#include "tierfs/inode.h"
#include "tierfs/ns.h"
#include "tierfs/walk.h"

struct names {
	char *buf;
	size_t len, cap;
};

static int names_add(struct names *nm, const char *name)
{
	size_t l = strlen(name) + 1;

	if (nm->len + l > nm->cap) {
		size_t cap = nm->cap ? nm->cap * 2 : 4096;
		char *b;

		while (cap < nm->len + l)
			cap *= 2;
		b = realloc(nm->buf, cap);
		if (!b)
			return -ENOMEM;
		nm->buf = b;
		nm->cap = cap;
	}
	memcpy(nm->buf + nm->len, name, l);
	nm->len += l;
	return 0;
}

/* Every name of the directory open as fd (which this closes), but "."
 * and "..", into nm (invariant 1). */
static int fd_names(int fd, struct names *nm)
{
	struct dirent *de;
	DIR *dp = fdopendir(fd);
	int rc = 0;

	if (!dp) {
		close(fd);
		return -errno;
	}
	while (rc == 0 && (de = readdir(dp)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			rc = names_add(nm, de->d_name);
	closedir(dp);
	return rc;
}

static int read_names(struct tfs_fs *fs, struct tfs_inode *dir, struct names *nm)
{
	int fd, rc = tfs_ns_opendir(fs, dir, &fd);

	return rc ? rc : fd_names(fd, nm);
}

struct walk {
	tfs_walk_fn fn;
	tfs_damaged_fn damaged;
	void *arg;
};

static void damaged(struct tfs_fs *fs, const struct walk *w, struct tfs_inode *dir,
		    const char *name)
{
	struct tfs_loc loc;
	char *p = NULL;

	if (tfs_inode_child_loc(fs, dir, name, &loc) == 0) {
		p = tfs_loc_path(fs, &loc);
		tfs_loc_put(fs, &loc);
	}
	w->damaged(w->arg, p ? p : name);
	free(p);
}

static int walk_dir(struct tfs_fs *fs, struct tfs_inode *dir, const struct walk *w)
{
	struct names nm = { 0 };
	int rc = read_names(fs, dir, &nm);

	/* moved or removed since it was looked up (a rebuild's last walk holds
	 * moves off, so it misses nothing) */
	if (rc == -ENOENT && dir != &fs->root)
		rc = 0;

	for (size_t pos = 0; rc == 0 && pos < nm.len; pos += strlen(nm.buf + pos) + 1) {
		struct tfs_entry e;
		int r = tfs_ns_lookup(fs, dir, nm.buf + pos, &e);

		if (r == -ENOENT)
			continue;	/* gone meanwhile */
		if (r == -EUCLEAN && w->damaged) {
			damaged(fs, w, dir, nm.buf + pos);
			continue;
		}
		if (r) {
			rc = r;
			break;
		}
		if (S_ISDIR(e.st.st_mode))
			rc = walk_dir(fs, e.in, w);
		else if (S_ISREG(e.st.st_mode))
			rc = w->fn(w->arg, e.in, &e.st);
		if (rc == -EUCLEAN && w->damaged && S_ISDIR(e.st.st_mode)) {
			damaged(fs, w, dir, nm.buf + pos);	/* cannot be listed */
			rc = 0;
		}
		tfs_inode_forget(fs, e.in, 1);
	}
	free(nm.buf);
	return rc;
}

int tfs_walk_files(struct tfs_fs *fs, tfs_walk_fn fn, void *arg)
{
	struct walk w = { fn, NULL, arg };

	return walk_dir(fs, &fs->root, &w);
}

/* Directory dfd (O_PATH) of member k and everything below it.  An error
 * is logged where it happened, once. */
static int member_dir(struct tfs_fs *fs, uint32_t k, int dfd, const char *path,
		      tfs_member_walk_fn fn, void *arg)
{
	struct names nm = { 0 };
	int fd = OPS(fs)->openat(BE(fs), k, dfd, ".", O_RDONLY | O_DIRECTORY, 0);
	int rc = fd < 0 ? fd : fd_names(fd, &nm);
	bool below = false;	/* rc came from a subdirectory: logged there */

	for (size_t pos = 0; rc == 0 && pos < nm.len; pos += strlen(nm.buf + pos) + 1) {
		const char *name = nm.buf + pos;
		struct stat st;
		char *sub;
		int ofd;

		rc = OPS(fs)->fstatat(BE(fs), k, dfd, name, &st);
		if (rc)
			break;
		if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
			continue;
		ofd = S_ISDIR(st.st_mode) ? OPS(fs)->open_dir(BE(fs), k, dfd, name)
					  : OPS(fs)->openat(BE(fs), k, dfd, name, O_PATH, 0);
		if (ofd < 0) {
			rc = ofd;
			break;
		}
		if (asprintf(&sub, "%s/%s", path, name) < 0) {
			rc = -ENOMEM;
		} else {
			rc = fn(arg, ofd, sub);
			if (rc == 0 && S_ISDIR(st.st_mode)) {
				rc = member_dir(fs, k, ofd, sub, fn, arg);
				below = rc != 0;
			}
			free(sub);
		}
		close(ofd);
	}
	if (rc && !below)
		tfs_err("member %u: walking '%s': %s", k, path, strerror(-rc));
	free(nm.buf);
	return rc;
}

int tfs_member_walk(struct tfs_fs *fs, uint32_t k, tfs_member_walk_fn fn, void *arg)
{
	int root = OPS(fs)->open_dir(BE(fs), k, -1, ""), rc;

	if (root < 0) {
		tfs_err("member %u: its tree: %s", k, strerror(-root));
		return root;
	}
	rc = fn(arg, root, ".");
	if (rc == 0)
		rc = member_dir(fs, k, root, ".", fn, arg);
	close(root);
	return rc;
}

int tfs_walk_files_past_damage(struct tfs_fs *fs, tfs_walk_fn fn, tfs_damaged_fn dmg,
			       void *arg)
{
	struct walk w = { fn, dmg, arg };

	return walk_dir(fs, &fs->root, &w);
}
