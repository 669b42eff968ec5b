/* Visiting every regular file of the tree through the inode table, or
 * every object of one member's tree through the member seam
 * (src/ns/walk.c, which owns no state: maintenance, resync and the tier's
 * restart use it). */
#ifndef TIERFS_WALK_H
#define TIERFS_WALK_H

#include "tierfs/fs.h"

/* ---- walk.c: every regular file of the tree ---- */
/* fn gets each file's inode (looked up; open it to do I/O) and stat;
 * a non-zero return stops the walk and is returned. */
typedef int (*tfs_walk_fn)(void *arg, struct tfs_inode *in, const struct stat *st);
/* Walk the tree from the root, looking every name up.  Returns 0, fn's
 * non-zero return, or -errno of a lookup or directory read (-EUCLEAN
 * included: use tfs_walk_files_past_damage to go on). */
int tfs_walk_files(struct tfs_fs *fs, tfs_walk_fn fn, void *arg);
/* The same, but a name that cannot be looked up because it is damaged
 * (-EUCLEAN: health.c invariant 5) is handed to damaged(arg, path) and
 * the walk goes on past it. */
typedef void (*tfs_damaged_fn)(void *arg, const char *path);
/* Returns 0, fn's non-zero return, or -errno. */
int tfs_walk_files_past_damage(struct tfs_fs *fs, tfs_walk_fn fn, tfs_damaged_fn damaged,
			       void *arg);

/* Every directory and regular file of member k's tree, its root first,
 * through the member seam: fn(arg, fd, path) gets an O_PATH fd of the
 * object and its path from the root ("." for the root); a non-zero return
 * stops the walk and is returned (logged with the directory). */
typedef int (*tfs_member_walk_fn)(void *arg, int fd, const char *path);
/* Returns 0, fn's non-zero return, or -errno (logged). */
int tfs_member_walk(struct tfs_fs *fs, uint32_t k, tfs_member_walk_fn fn, void *arg);

#endif
