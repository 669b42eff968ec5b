/* The namespace: one tree presented over N member trees.
 *
 * tfs_fs is the mounted array; tfs_inode is what a FUSE node id names.
 * Node ids are inode pointers (root: FUSE_ROOT_ID).  An inode is found again
 * by the member-0 inode number of its object (so hard links share one inode
 * and one st_ino), and reached on the members by path: every inode keeps the
 * names (parent, name) it is known by.  No descriptor is held per known
 * inode, only per open file (N member fds, shared by all its handles).
 */
#ifndef TIERFS_NS_H
#define TIERFS_NS_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "tierfs/layout.h"
#include "tierfs/member.h"

struct tfs_meta;
struct tfs_array;

struct tfs_alias {
	struct tfs_inode *parent;
	struct tfs_alias *next;
	char name[];
};

/* Member fds of an open regular file, shared by all its handles. */
struct tfs_ofile {
	unsigned users;
	int fd[TFS_MAX_MEMBERS];	/* O_RDWR (O_RDONLY on ro mounts), or -1 until first use */
	int dfd[TFS_MAX_MEMBERS];	/* O_DIRECT twins, or -1 until first use */
};

struct tfs_inode {
	uint64_t ino;			/* member 0's st_ino: hash key and st_ino */
	mode_t type;			/* S_IFMT bits */
	bool hashed;
	uint64_t nlookup;		/* kernel references */
	uint32_t refs;			/* child aliases + open handles */
	struct tfs_alias *aliases;
	struct tfs_inode *hnext;

	/* directory fd cache (directories only), under fs->ilock */
	int *dfd;			/* O_PATH fd per member, or NULL */
	unsigned dusers;		/* threads using dfd right now */
	struct tfs_inode *lru_prev, *lru_next;

	pthread_mutex_t lock;		/* protects everything below */
	bool fid_valid, size_valid;
	uint64_t fid;			/* file identity (xattr on the members) */
	uint32_t rot;			/* tfs_layout_rot(fid) */
	uint64_t size;			/* logical size of a regular file */
	struct tfs_ofile *of;
};

struct tfs_fs {
	struct tfs_array *array;
	struct tfs_layout layout;
	uint32_t n;
	struct tfs_backend *be;
	struct tfs_meta *meta;
	bool readonly;
	bool chown_ok;			/* daemon may chown (runs as root) */
	bool root_group;		/* daemon creates with gid 0 */
	double timeout;			/* entry/attr timeout given to the kernel */

	pthread_mutex_t fid_lock;
	uint64_t fid_next, fid_end;

	pthread_mutex_t ilock;		/* inode table, aliases, nlookup, refs, dir fds */
	struct tfs_inode **htab;
	size_t hsize, icount;
	struct tfs_inode lru;		/* list head of directories with cached fds */
	/* Resolving a directory by name (fd cache miss) holds this shared; a
	 * directory rename holds it exclusive, so a walk never sees a rename
	 * applied to some members and not others. */
	pthread_rwlock_t rename_lock;
	unsigned dcount, dmax;
	struct tfs_inode root;
};

/* Caller identity for creations. */
struct tfs_ctx {
	uid_t uid;
	gid_t gid;
};

/* Location of an object on the members: its parent directory (pinned by a
 * reference until tfs_loc_put) and one name.  The root is (root, "."). */
struct tfs_loc {
	struct tfs_inode *parent;
	char name[NAME_MAX + 1];
};

/* Member-relative path of loc ("a/b/name"; the root is "."), malloc'ed;
 * only intents and messages need one. */
char *tfs_loc_path(struct tfs_fs *fs, const struct tfs_loc *loc);

/* ---- inode.c: the inode table ---- */
int tfs_fs_init(struct tfs_fs *fs);
void tfs_fs_destroy(struct tfs_fs *fs);
struct tfs_inode *tfs_inode_get(struct tfs_fs *fs, uint64_t nodeid);
uint64_t tfs_inode_nodeid(struct tfs_fs *fs, struct tfs_inode *in);
/* Find or make the inode for an object found at (parent, name); takes one
 * kernel reference. */
struct tfs_inode *tfs_inode_bind(struct tfs_fs *fs, struct tfs_inode *parent,
				 const char *name, const struct stat *st);
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

/* ---- ns.c: namespace operations over all members ---- */
struct tfs_entry {
	struct tfs_inode *in;
	struct stat st;
};

int tfs_ns_lookup(struct tfs_fs *fs, struct tfs_inode *parent, const char *name,
		  struct tfs_entry *e);
int tfs_ns_getattr(struct tfs_fs *fs, struct tfs_inode *in, struct stat *st);
int tfs_ns_setattr(struct tfs_fs *fs, struct tfs_inode *in, const struct stat *attr,
		   int to_set, struct stat *out);
int tfs_ns_mknod(struct tfs_fs *fs, const struct tfs_ctx *ctx, struct tfs_inode *parent,
		 const char *name, mode_t mode, dev_t rdev, const char *target,
		 struct tfs_entry *e);
int tfs_ns_create(struct tfs_fs *fs, const struct tfs_ctx *ctx, struct tfs_inode *parent,
		  const char *name, mode_t mode, struct tfs_entry *e);
int tfs_ns_remove(struct tfs_fs *fs, struct tfs_inode *parent, const char *name, bool dir);
int tfs_ns_rename(struct tfs_fs *fs, struct tfs_inode *op, const char *oname,
		  struct tfs_inode *np, const char *nname, unsigned flags);
int tfs_ns_link(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_inode *np,
		const char *nname, struct tfs_entry *e);
int tfs_ns_readlink(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len);
int tfs_ns_statfs(struct tfs_fs *fs, struct statvfs *sv);
int tfs_ns_opendir(struct tfs_fs *fs, struct tfs_inode *in, int *fd);
int tfs_ns_fsyncdir(struct tfs_fs *fs, struct tfs_inode *in);
int tfs_ns_setxattr(struct tfs_fs *fs, struct tfs_inode *in, const char *name,
		    const void *val, size_t len, int flags);
int tfs_ns_getxattr(struct tfs_fs *fs, struct tfs_inode *in, const char *name,
		    void *buf, size_t len);
int tfs_ns_listxattr(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len);
int tfs_ns_removexattr(struct tfs_fs *fs, struct tfs_inode *in, const char *name);
/* Open the file for a handle (shares the inode's ofile; member files are
 * opened on first use). */
int tfs_ns_open(struct tfs_fs *fs, struct tfs_inode *in);
/* fd of member k (O_DIRECT twin if direct) of an open file, opening it on
 * first use; -errno on failure.  The caller holds a handle. */
int tfs_ns_member_fd(struct tfs_fs *fs, struct tfs_inode *in, uint32_t k, bool direct);
/* Open every member file of an open file. */
int tfs_ns_fill(struct tfs_fs *fs, struct tfs_inode *in);
void tfs_ns_release(struct tfs_fs *fs, struct tfs_inode *in);
/* Load fid and logical size of a regular file if not known yet. */
int tfs_ns_load_file(struct tfs_fs *fs, struct tfs_inode *in);
/* Set every member of a regular file to its share of len. */
int tfs_ns_truncate(struct tfs_fs *fs, struct tfs_inode *in, uint64_t len);

/* ---- replay.c: crash recovery of the intent log ---- */
int tfs_replay(struct tfs_fs *fs);

/* ---- data.c: file data over the layout ---- */
/* Per-thread I/O buffer, 4K aligned, at least len bytes. */
void *tfs_iobuf(size_t len);
ssize_t tfs_data_read(struct tfs_fs *fs, struct tfs_inode *in, bool direct, void *buf,
		      size_t len, uint64_t off);
ssize_t tfs_data_write(struct tfs_fs *fs, struct tfs_inode *in, bool direct, const void *buf,
		       size_t len, uint64_t off);
int tfs_data_fsync(struct tfs_fs *fs, struct tfs_inode *in, bool datasync);
int tfs_data_fallocate(struct tfs_fs *fs, struct tfs_inode *in, int mode, uint64_t off,
		       uint64_t len);

/* Intent records (encoded by ns.c, replayed by replay.c). */
enum tfs_intent_op {
	TFS_I_CREATE = 1,	/* path */
	TFS_I_REMOVE,		/* path */
	TFS_I_RENAME,		/* path, path2, flags */
	TFS_I_LINK,		/* path (existing), path2 (new) */
	TFS_I_ATTR,		/* path: copy mode, owner, times from member 0 */
	TFS_I_TRUNCATE,		/* path, arg = logical size */
	TFS_I_XATTR,		/* path, path2 = xattr name */
};

struct tfs_intent {
	uint32_t op;
	uint32_t flags;
	uint64_t arg;
	const char *path;
	const char *path2;
};

#define TFS_INTENT_PATH_MAX 65536	/* u16 lengths in the record, plus NUL */

int tfs_intent_encode(const struct tfs_intent *it, void *buf, size_t len);
int tfs_intent_decode(const void *buf, size_t len, struct tfs_intent *it,
		      char *p1, char *p2);

#endif
