/* The inode table (src/ns/inode.c): node ids, names, lifetimes, the fid
 * index and the directory fd cache.  It owns the inodes, their aliases,
 * nlookup and refs (under fs->ilock), and the cached member directory fds.
 * An inode is freed when both its kernel references (nlookup) and its
 * other references (refs: child aliases, open handles) are gone. */
#ifndef TIERFS_INODE_H
#define TIERFS_INODE_H

#include "tierfs/fs.h"

/* ---- inode.c: the inode table ---- */
/* Set up fs's locks, the inode table (empty) and the root inode.  Returns
 * 0 or -ENOMEM. */
int tfs_fs_init(struct tfs_fs *fs);
/* Free every inode, alias and cached directory fd of the table. */
void tfs_fs_destroy(struct tfs_fs *fs);
/* The root's node id (the kernel's FUSE_ROOT_ID; fs.c checks they agree). */
#define TFS_ROOT_ID 1
/* Returns the inode a FUSE node id names (the id is the pointer; no
 * lookup, no check). */
struct tfs_inode *tfs_inode_get(struct tfs_fs *fs, uint64_t nodeid);
/* Returns the FUSE node id of in (FUSE_ROOT_ID for the root). */
uint64_t tfs_inode_nodeid(struct tfs_fs *fs, struct tfs_inode *in);
/* Returns the inodes allocated now (known to the kernel, or held by an
 * alias or a handle), for the status (mem.inodes). */
uint64_t tfs_inode_count(struct tfs_fs *fs);
/* Find or make the inode for an object found at (parent, name); takes one
 * kernel reference.  An inode hashed under its number but of another type
 * belongs to a removed object (inode.c invariant 1).  Returns the inode,
 * or NULL without memory. */
struct tfs_inode *tfs_inode_bind(struct tfs_fs *fs, struct tfs_inode *parent,
				 const char *name, const struct stat *st);
/* tfs_inode_bind for an object just created with identity fid (0: none):
 * an inode hashed under its number belongs to a removed object unless it
 * has claimed fid already (a lookup that got there first: inode.c
 * invariant 1).  Returns the inode, or NULL without memory. */
struct tfs_inode *tfs_inode_bind_new(struct tfs_fs *fs, struct tfs_inode *parent,
				     const char *name, const struct stat *st, uint64_t fid);
/* Returns the hashed inode of the member inode number ino, or NULL.  The
 * caller holds fs->ilock (it takes no lock and no reference). */
struct tfs_inode *tfs_inode_find(struct tfs_fs *fs, uint64_t ino);
/* Drop n kernel references (FUSE forget); frees in when none of either
 * kind is left.  The root is never forgotten. */
void tfs_inode_forget(struct tfs_fs *fs, struct tfs_inode *in, uint64_t n);
/* Take and drop a non-kernel reference (an open handle); the last drop of
 * an inode the kernel forgot frees it. */
void tfs_inode_ref(struct tfs_fs *fs, struct tfs_inode *in);
void tfs_inode_unref(struct tfs_fs *fs, struct tfs_inode *in);	/* see tfs_inode_ref */
/* The name (parent, name) of in is gone (unlink, rename over it); absent,
 * nothing happens. */
void tfs_inode_alias_drop(struct tfs_fs *fs, struct tfs_inode *in,
			  struct tfs_inode *parent, const char *name);
/* The name (oparent, oname) of in is now (nparent, nname).  Without
 * memory for the longer name the alias silently keeps the old one. */
void tfs_inode_alias_move(struct tfs_fs *fs, struct tfs_inode *in,
			  struct tfs_inode *oparent, const char *oname,
			  struct tfs_inode *nparent, const char *nname);
/* in's object is gone (its last name, or a directory): out of the hash,
 * so no lookup finds it again; its identity is no longer contested. */
void tfs_inode_unhash(struct tfs_fs *fs, struct tfs_inode *in);
/* Enter in (a regular file, in->fid set, never changed after) into the
 * fid index (inode.c invariant 5): 0, or -EEXIST if another file in the
 * table has in->fid (its path, malloc'ed, in *other when other is not
 * NULL; that file is marked fid_dup too) or had it and is only out of the
 * table, or -ESTALE, nothing entered, if in was unhashed before it ever
 * claimed (another inode has its number: inode.c invariant 1).  Called
 * again, it only checks; fid 0 always succeeds. */
int tfs_inode_claim_fid(struct tfs_fs *fs, struct tfs_inode *in, char **other);
/* Location of an inode by its first alias, the parent pinned until
 * tfs_loc_put.  Returns 0, or -ENOENT when it has no name left. */
int tfs_inode_loc(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_loc *loc);
/* Location of the child name of parent, parent pinned until tfs_loc_put.
 * Returns 0, or -ENAMETOOLONG for a name over NAME_MAX. */
int tfs_inode_child_loc(struct tfs_fs *fs, struct tfs_inode *parent, const char *name,
			struct tfs_loc *loc);
/* Unpin loc's parent (a loc whose parent is NULL is nothing to put). */
void tfs_loc_put(struct tfs_fs *fs, struct tfs_loc *loc);
/* Member directory fds of dir for members [0, fs->n), from the directory
 * fd cache (opened one name at a time from the nearest cached ancestor);
 * valid until tfs_dir_fds_put, and ns_lock is held shared until then.
 * fds[k] is -1 for a member that has no names in use.  Returns 0 (then
 * call tfs_dir_fds_put) or -errno (-ENOENT: a directory on the way was
 * removed, or renamed meanwhile; -EUCLEAN: a member holds something else
 * under a name on the way; -ENOMEM; the primary's open error), with
 * nothing held. */
int tfs_dir_fds(struct tfs_fs *fs, struct tfs_inode *dir, int *fds);
/* Done with the fds of tfs_dir_fds (drops ns_lock shared). */
void tfs_dir_fds_put(struct tfs_fs *fs, struct tfs_inode *dir);
/* The primary changed: drop every cached directory fd and key every hashed
 * inode by ino_of(its path) (0: unhash it).  Caller holds ns_lock
 * exclusive. */
void tfs_inode_rekey(struct tfs_fs *fs, uint64_t (*ino_of)(struct tfs_fs *fs, const char *path));
/* Member k changed (a replacement): drop every cached directory fd and
 * make open files reopen their file on k (mgen), so both are opened again
 * on the new member.  Caller holds ns_lock exclusive. */
void tfs_inode_member_reset(struct tfs_fs *fs, uint32_t k);

/* A write or allocation reached end: the logical size grows to it. */
static inline void tfs_size_grow(struct tfs_inode *in, uint64_t end)
{
	pthread_mutex_lock(&in->lock);
	if (end > in->size)
		in->size = end;
	pthread_mutex_unlock(&in->lock);
}

/* in changed on the members, after the change was made: its data or size
 * (data), or only its attributes or times (raid/data.c invariant 7). */
static inline void tfs_inode_changed(struct tfs_inode *in, bool data)
{
	if (data)
		__atomic_add_fetch(&in->chg_data, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&in->chg_all, 1, __ATOMIC_RELEASE);
}

#endif
