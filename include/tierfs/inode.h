/* The inode table (src/ns/inode.c): node ids, names, lifetimes, the fid
 * index and the directory fd cache. */
#ifndef TIERFS_INODE_H
#define TIERFS_INODE_H

#include "tierfs/fs.h"

/* ---- inode.c: the inode table ---- */
int tfs_fs_init(struct tfs_fs *fs);
void tfs_fs_destroy(struct tfs_fs *fs);
/* The root's node id (the kernel's FUSE_ROOT_ID; fs.c checks they agree). */
#define TFS_ROOT_ID 1
struct tfs_inode *tfs_inode_get(struct tfs_fs *fs, uint64_t nodeid);
uint64_t tfs_inode_nodeid(struct tfs_fs *fs, struct tfs_inode *in);
/* Inodes allocated now (known to the kernel, or held by an alias or a
 * handle), for the status (mem.inodes). */
uint64_t tfs_inode_count(struct tfs_fs *fs);
/* Find or make the inode for an object found at (parent, name); takes one
 * kernel reference.  fresh: the object was just created, so an inode
 * hashed under its number belongs to a removed one (inode.c invariant 1). */
struct tfs_inode *tfs_inode_bind(struct tfs_fs *fs, struct tfs_inode *parent,
				 const char *name, const struct stat *st, bool fresh);
struct tfs_inode *tfs_inode_find(struct tfs_fs *fs, uint64_t ino);
void tfs_inode_forget(struct tfs_fs *fs, struct tfs_inode *in, uint64_t n);
void tfs_inode_ref(struct tfs_fs *fs, struct tfs_inode *in);
void tfs_inode_unref(struct tfs_fs *fs, struct tfs_inode *in);
void tfs_inode_alias_drop(struct tfs_fs *fs, struct tfs_inode *in,
			  struct tfs_inode *parent, const char *name);
void tfs_inode_alias_move(struct tfs_fs *fs, struct tfs_inode *in,
			  struct tfs_inode *oparent, const char *oname,
			  struct tfs_inode *nparent, const char *nname);
void tfs_inode_unhash(struct tfs_fs *fs, struct tfs_inode *in);
/* Enter in (a regular file, in->fid set, never changed after) into the
 * fid index (inode.c invariant 5): 0, or -EEXIST if another file in the
 * table has in->fid (its path, malloc'ed, in *other when other is not
 * NULL; that file is marked fid_dup too) or had it and is only out of the
 * table.  Called again, it only checks. */
int tfs_inode_claim_fid(struct tfs_fs *fs, struct tfs_inode *in, char **other);
/* Location of an inode (-ENOENT when it has no name left) or of a child. */
int tfs_inode_loc(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_loc *loc);
int tfs_inode_child_loc(struct tfs_fs *fs, struct tfs_inode *parent, const char *name,
			struct tfs_loc *loc);
void tfs_loc_put(struct tfs_fs *fs, struct tfs_loc *loc);
/* Member directory fds of dir for members [0, fs->n), from the directory
 * fd cache (opened one name at a time from the nearest cached ancestor);
 * valid until tfs_dir_fds_put. */
int tfs_dir_fds(struct tfs_fs *fs, struct tfs_inode *dir, int *fds);
void tfs_dir_fds_put(struct tfs_fs *fs, struct tfs_inode *dir);
/* The primary changed: drop every cached directory fd and key every hashed
 * inode by ino_of(its path) (0: unhash it).  Caller holds ns_lock
 * exclusive. */
void tfs_inode_rekey(struct tfs_fs *fs, uint64_t (*ino_of)(struct tfs_fs *fs, const char *path));
/* Member k changed (a replacement): drop every cached directory fd and
 * make open files reopen their file on k (mgen), so both are opened again
 * on the new member.  Caller holds ns_lock exclusive. */
void tfs_inode_member_reset(struct tfs_fs *fs, uint32_t k);

#endif
