/* Visiting every regular file of the tree through the inode table
 * (src/ns/walk.c). */
#ifndef TIERFS_WALK_H
#define TIERFS_WALK_H

#include "tierfs/fs.h"

/* ---- walk.c: every regular file of the tree ---- */
/* fn gets each file's inode (looked up; open it to do I/O) and stat;
 * a non-zero return stops the walk and is returned. */
typedef int (*tfs_walk_fn)(void *arg, struct tfs_inode *in, const struct stat *st);
int tfs_walk_files(struct tfs_fs *fs, tfs_walk_fn fn, void *arg);
/* The same, but a name that cannot be looked up because it is damaged
 * (-EUCLEAN: health.c invariant 5) is handed to damaged(arg, path) and
 * the walk goes on past it. */
typedef void (*tfs_damaged_fn)(void *arg, const char *path);
int tfs_walk_files_past_damage(struct tfs_fs *fs, tfs_walk_fn fn, tfs_damaged_fn damaged,
			       void *arg);

#endif
