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

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
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
	uint32_t gen[TFS_MAX_MEMBERS];	/* fs->mgen[k] when fd[k] was opened */
	/* fds of members since replaced: another thread may still be using
	 * one, so they are closed only with the ofile */
	int stale[2 * TFS_MAX_MEMBERS];
	unsigned nstale;
};

struct tfs_inode {
	uint64_t ino;			/* member 0's st_ino: hash key and st_ino */
	mode_t type;			/* S_IFMT bits */
	bool hashed;
	uint64_t nlookup;		/* kernel references */
	uint32_t refs;			/* child aliases + open handles */
	struct tfs_alias *aliases;
	struct tfs_inode *hnext;
	struct tfs_inode *fnext;	/* fid index chain, under fs->ilock */
	bool fid_claimed;		/* in the fid index */

	/* directory fd cache (directories only), under fs->ilock */
	int *dfd;			/* O_PATH fd per member, or NULL */
	unsigned dusers;		/* threads using dfd right now */
	struct tfs_inode *lru_prev, *lru_next;

	pthread_mutex_t lock;		/* protects everything below */
	bool fid_valid, size_valid;
	/* Two files in the table have this file's identity (inode.c
	 * invariant 5): neither opens until one is gone.  The one that came
	 * second has fid 0 (nothing keyed by fid sees it) and its identity
	 * in fid_disk.  Atomic: the other file sets it on the first. */
	bool fid_dup;
	uint64_t fid;			/* file identity (xattr on the members) */
	uint64_t fid_disk;		/* the identity its member files carry */
	uint32_t rot;			/* tfs_layout_rot(fid) */
	uint64_t size;			/* logical size of a regular file */
	uint64_t size_saved;		/* parity levels: TFS_XATTR_SIZE as last written */
	uint64_t seq_next, seq_len;	/* the SSD tier's sequential-stream detector */
	struct tfs_ofile *of;
	/* journal generation that retired this file's last truncate intent
	 * (atomic): an fsync makes it durable first, because a mount that
	 * replays a finished truncate cuts whatever the file grew since */
	uint64_t trunc_gen;
};

struct tfs_fs;

/* The member seam of an array (member.h): every member call is
 * OPS(fs)->call(BE(fs), k, ...). */
#define OPS(fs) ((fs)->be->ops)
#define BE(fs)  ((fs)->be)

/* What the namespace asks and tells the SSD tier about a file: set by the
 * tier when it binds (cache/bind.c), NULL without one.  The namespace is a
 * service beside the data path and never calls the tier by name (DESIGN
 * §1); these are the only things it needs from it. */
struct tfs_tier_hooks {
	/* Does the tier hold anything of the file (an extent, or a size the
	 * members do not have yet)? */
	bool (*holds)(struct tfs_fs *fs, struct tfs_inode *in);
	/* A truncate to off (len UINT64_MAX) begins and ends: the tier drops
	 * what is cut and keeps its flusher off the file in between
	 * (tfs_cache_zero_begin/end). */
	void (*cut_begin)(struct tfs_fs *fs, struct tfs_inode *in, uint64_t off, uint64_t len);
	void (*cut_end)(struct tfs_fs *fs, struct tfs_inode *in, uint64_t off, uint64_t len);
	/* The file's last name is gone and nobody has it open. */
	void (*gone)(struct tfs_fs *fs, uint64_t fid);
	/* A lookup met the file (a regular file, loaded). */
	void (*found)(struct tfs_fs *fs, struct tfs_inode *in);
	/* The logical size the tier knows for fid, or 0; bytes only it holds. */
	uint64_t (*size)(struct tfs_fs *fs, uint64_t fid);
	uint64_t (*dirty_bytes)(struct tfs_fs *fs, uint64_t fid);
};

struct tfs_fs {
	struct tfs_array *array;
	struct tfs_layout layout;
	uint32_t n;
	/* Member health (health.c).  mstate[k] is a TFS_M_* character, read
	 * without a lock (atomic loads); the primary is the in-sync member
	 * every namespace change is applied to first and every name is read
	 * from.  Changes of either hold health_lock. */
	char mstate[TFS_MAX_MEMBERS];
	uint32_t primary;
	uint32_t fail_refused;		/* members whose failure was refused (logged once) */
	uint32_t mgen[TFS_MAX_MEMBERS];	/* bumped when index k gets a new member */
	uint32_t reading[TFS_MAX_MEMBERS];	/* mirror reads in flight per member */
	pthread_mutex_t health_lock;
	/* Held shared by every thread using directory fds (tfs_dir_fds to
	 * tfs_dir_fds_put); held exclusive to change the primary or to copy
	 * the namespace to a replacement member. */
	pthread_rwlock_t ns_lock;
	/* Held shared by rename and link (the first lock they take); a
	 * rebuild's final tree walk holds it exclusive, so no file can move
	 * behind the walk (maint.c). */
	pthread_rwlock_t move_lock;
	struct tfs_backend *be;
	struct tfs_meta *meta;
	bool readonly;
	bool chown_ok;			/* daemon may chown (runs as root) */
	bool root_group;		/* daemon creates with gid 0 */
	double timeout;			/* entry/attr timeout given to the kernel */
	unsigned max_read;		/* -o max_read (0: not given): init() must agree */

	pthread_mutex_t fid_lock;
	uint64_t fid_next, fid_end;

	pthread_mutex_t ilock;		/* inode table, aliases, nlookup, refs, dir fds */
	struct tfs_inode **htab;
	struct tfs_inode **ftab;	/* fid index, hsize slots (inode.c inv. 5) */
	uint64_t *contested;		/* identities two files were seen with */
	size_t ncontested;
	size_t hsize, icount;
	size_t ilive;			/* inodes allocated, hashed or not (memory) */
	struct tfs_inode lru;		/* list head of directories with cached fds */
	/* Resolving a directory by name (fd cache miss) holds this shared; a
	 * directory rename holds it exclusive, so a walk never sees a rename
	 * applied to some members and not others. */
	pthread_rwlock_t rename_lock;
	unsigned dcount, dmax;
	struct tfs_inode root;
	struct tfs_stripes *stripes;	/* redundant levels: row locks, marks */
	struct tfs_maint *maint;	/* scrub, rebuild */
	struct tfs_cache *cache;	/* the SSD tier (cache.h), or NULL */
	const struct tfs_tier_hooks *tier;	/* its hooks for ns/, or NULL */
	struct tfs_defer *defer;	/* with a cache: reads that miss it (defer.h) */
	struct tfs_hitio *hitio;	/* with a cache: its hits on io_uring (hitio.h) */
	double maint_mbps;		/* rate cap of scrub and rebuild (0: none) */
	/* Data writes hold this shared from planning to completion (the size
	 * they grow included: a rebuild copies a file up to its size); a member
	 * joining (state R) takes it exclusive once, as a barrier, before its
	 * data is rebuilt, so no write planned without it is still running.
	 * Lock order: io_gate, row locks, in->lock, health_lock.  ns_lock is
	 * taken shared anywhere (readers never wait for readers); its
	 * exclusive holders (failover, a rebuild's namespace copy) take no
	 * inode or row lock and never wait for io_gate. */
	pthread_rwlock_t io_gate;
	/* Free space of each member's filesystem, as data.c last saw it
	 * (data.c invariant 6); atomics. */
	struct tfs_space {
		uint64_t checked_ns;	/* CLOCK_MONOTONIC of the last statvfs */
		uint64_t written;	/* bytes written to it since */
		bool low;		/* short of space: writes reserve first */
		bool nofalloc;		/* its filesystem has no fallocate */
	} space[TFS_MAX_MEMBERS];
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

/* ---- health.c: member states, failure, failover ---- */
static inline char tfs_mstate(const struct tfs_fs *fs, uint32_t k)
{
	return __atomic_load_n(&fs->mstate[k], __ATOMIC_ACQUIRE);
}
/* In sync: may be read. */
static inline bool tfs_m_readable(const struct tfs_fs *fs, uint32_t k)
{
	return tfs_mstate(fs, k) == 'U';
}
/* Takes changes (in sync or being rebuilt). */
static inline bool tfs_m_writable(const struct tfs_fs *fs, uint32_t k)
{
	return tfs_mstate(fs, k) != '_';
}
static inline uint32_t tfs_primary(const struct tfs_fs *fs)
{
	return __atomic_load_n(&fs->primary, __ATOMIC_ACQUIRE);
}
/* Has its names used: takes changes, or is still the primary (a failed
 * primary stays one until failover has re-keyed the inode table). */
static inline bool tfs_m_named(const struct tfs_fs *fs, uint32_t k)
{
	return tfs_m_writable(fs, k) || k == tfs_primary(fs);
}
/* Set up states and primary from the assembled array. */
void tfs_health_init(struct tfs_fs *fs);
/* Members that take a change, the primary first; returns how many. */
uint32_t tfs_members(struct tfs_fs *fs, uint32_t *order);
/* Member k failed doing what (err = -errno): mark it failed, record that on
 * the other members and carry on degraded -- unless the level cannot lose
 * it, in which case it stays and the error is only logged.  Returns true if
 * the member is now failed. */
bool tfs_member_fail(struct tfs_fs *fs, uint32_t k, int err, const char *what);
/* Does err say that a name on a member is not the kind of object the
 * array expects there (something else was put in its place)? */
static inline bool tfs_member_misnamed(int err)
{
	return err == -ELOOP || err == -ENOTDIR || err == -EISDIR;
}
/* A namespace call on member k (not the primary) answered *err.  A
 * misnamed object is logged and the member stays in use: *err becomes
 * -EUCLEAN for the request, and false is returned.  Anything else fails the
 * member as tfs_member_fail does (true: go on without it). */
bool tfs_member_diverged(struct tfs_fs *fs, uint32_t k, int *err, const char *what);
/* Is err a member failure (as opposed to an answer like ENOENT)? */
static inline bool tfs_member_error(int err)
{
	return err == -EIO || err == -ENODEV || err == -ENXIO || err == -EROFS ||
	       err == -EUCLEAN;
}
/* A text report of the array (tierctl status), malloc'ed. */
char *tfs_health_report(struct tfs_fs *fs, bool paths);

/* Is [p, p+n) all zero bytes? */
static inline bool tfs_all_zero(const void *p, size_t n)
{
	const unsigned char *c = p;

	return n == 0 || (c[0] == 0 && memcmp(c, c + 1, n - 1) == 0);
}

/* Logical bytes a row lock (and the maintenance of one row) covers: a
 * parity row, or one chunk on the mirror levels. */
static inline uint64_t tfs_row_bytes(const struct tfs_fs *fs)
{
	return tfs_layout_nparity(&fs->layout)
	       ? (uint64_t)tfs_layout_ndata(&fs->layout) * fs->layout.chunk : fs->layout.chunk;
}

/* A write or allocation reached end: the logical size grows to it. */
static inline void tfs_size_grow(struct tfs_inode *in, uint64_t end)
{
	pthread_mutex_lock(&in->lock);
	if (end > in->size)
		in->size = end;
	pthread_mutex_unlock(&in->lock);
}

/* ---- inode.c: the inode table ---- */
int tfs_fs_init(struct tfs_fs *fs);
void tfs_fs_destroy(struct tfs_fs *fs);
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
/* Enter in (a regular file) into the fid index under fid (inode.c
 * invariant 5): 0, or -EEXIST if another file in the table has it (its
 * path, malloc'ed, in *other when other is not NULL; that file is
 * marked fid_dup too). */
int tfs_inode_claim_fid(struct tfs_fs *fs, struct tfs_inode *in, uint64_t fid, char **other);
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
/* trusted: the caller may see trusted.* names (root, as the kernel's
 * own filesystems list them only to CAP_SYS_ADMIN) */
int tfs_ns_listxattr(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len,
		     bool trusted);
int tfs_ns_removexattr(struct tfs_fs *fs, struct tfs_inode *in, const char *name);
/* Open the file for a handle (shares the inode's ofile; member files are
 * opened on first use). */
int tfs_ns_open(struct tfs_fs *fs, struct tfs_inode *in);
/* fd of member k (O_DIRECT twin if direct) of an open file, opening it on
 * first use; -errno on failure.  The caller holds a handle. */
int tfs_ns_member_fd(struct tfs_fs *fs, struct tfs_inode *in, uint32_t k, bool direct);
/* Open every member file of an open file. */
int tfs_ns_fill(struct tfs_fs *fs, struct tfs_inode *in);
/* Drop a handle; true if that was the last use of a file with no name
 * left (its data is gone for good). */
bool tfs_ns_release(struct tfs_fs *fs, struct tfs_inode *in);
/* Load fid and logical size of a regular file if not known yet. */
int tfs_ns_load_file(struct tfs_fs *fs, struct tfs_inode *in);
/* Parity levels: record the logical size on every member that takes
 * changes (TFS_XATTR_SIZE) if it changed, or always when force; the caller
 * holds a handle. */
int tfs_ns_save_size(struct tfs_fs *fs, struct tfs_inode *in, bool force);
/* Set every member of a regular file to its share of len. */
int tfs_ns_truncate(struct tfs_fs *fs, struct tfs_inode *in, uint64_t len);

/* ---- replay.c: crash recovery of the intent log ---- */
int tfs_replay(struct tfs_fs *fs);
/* Parent directory fd (O_PATH) of path on member m, walked one name at a
 * time (no length limit, no symlink followed), and the last name of path
 * in name; -errno on failure. */
int tfs_member_at(struct tfs_fs *fs, uint32_t m, const char *path, char name[NAME_MAX + 1]);

/* ---- data.c: file data over the layout ---- */
/* Per-thread I/O buffer, 4K aligned, at least len bytes. */
void *tfs_iobuf(size_t len);
/* File data on the RAID alone (below the SSD tier; the data path above
 * both is data.h). */
ssize_t tfs_raid_read(struct tfs_fs *fs, struct tfs_inode *in, bool direct, void *buf,
		      size_t len, uint64_t off);
ssize_t tfs_raid_write(struct tfs_fs *fs, struct tfs_inode *in, bool direct, const void *buf,
		       size_t len, uint64_t off);
int tfs_raid_fsync(struct tfs_fs *fs, struct tfs_inode *in, bool datasync);
/* Grow the member files of an open file to hold logical size size (never
 * shrinks; the bytes added are holes).  Returns how many grew, or -errno. */
int tfs_raid_grow(struct tfs_fs *fs, struct tfs_inode *in, uint64_t size);
/* The RAID part of fallocate, the mode checked by tfs_data_fallocate: 0 or
 * -errno. */
int tfs_raid_fallocate(struct tfs_fs *fs, struct tfs_inode *in, int mode, uint64_t off,
		       uint64_t len);
/* Before the writes v[0..n) of one request on a redundant level: on members
 * short of space, allocate every range written, so that a full filesystem
 * refuses the request before any member changed (data.c invariant 6).
 * Returns 0 or the refusal (-ENOSPC, -EDQUOT, ...). */
int tfs_space_reserve(struct tfs_fs *fs, const struct tfs_mio *v, unsigned n);
/* A write on member k was refused for want of space: reserve from now on. */
void tfs_space_refused(struct tfs_fs *fs, uint32_t k);
/* Refusals of a write that are not a member failing: the member stays. */
static inline bool tfs_space_error(int err)
{
	return err == -ENOSPC || err == -EDQUOT || err == -EFBIG;
}

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

/* ---- stripe.c: file data on the parity levels ---- */
struct tfs_stripes;
/* Write-intent marks are kept per (fid % TFS_MARK_BUCKETS, region). */
#define TFS_MARK_BUCKETS 256
int tfs_stripe_init(struct tfs_fs *fs);		/* row locks, marks */
int tfs_stripe_start(struct tfs_fs *fs);	/* the mark cleaner thread */
void tfs_stripe_stop(struct tfs_fs *fs);	/* clean unmount: clear marks */
uint64_t tfs_stripe_marks(struct tfs_fs *fs);	/* marks in the journal */
/* Write-intent marks around a write of rows (chunks on mirrors) r0..r1. */
int tfs_marks_get(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1);
void tfs_marks_put(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1);
/* Rows r0..r1 (marked by the caller) may disagree with their redundancy and
 * could not be fixed: their marks stay until the next mount resyncs them. */
void tfs_marks_keep(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1);
/* stripe.* lines of user.tierfs.status into buf; returns their length. */
int tfs_stripe_stats(struct tfs_fs *fs, char *buf, size_t len);
ssize_t tfs_stripe_read(struct tfs_fs *fs, struct tfs_inode *in, uint32_t rot, uint64_t size,
			bool direct, void *buf, size_t len, uint64_t off);
ssize_t tfs_stripe_write(struct tfs_fs *fs, struct tfs_inode *in, uint32_t rot, uint64_t size,
			 bool direct, const void *buf, size_t len, uint64_t off);
/* Write zeros over [off, off+len) of an open file, keeping the parity
 * right (truncate, hole punch); in_locked: the caller holds the row locks
 * and in->lock and opened every member file. */
int tfs_stripe_zero(struct tfs_fs *fs, struct tfs_inode *in, bool in_locked, uint64_t off,
		    uint64_t len);
enum tfs_stripe_op {
	TFS_STRIPE_CHECK,	/* compare parity with data, report */
	TFS_STRIPE_REPAIR,	/* ... and make them agree */
	TFS_STRIPE_RESYNC,	/* recompute parity (after a crash) */
	TFS_STRIPE_REBUILD,	/* write what a member being rebuilt lacks */
};
/* A mismatch at logical offset off (the row or chunk start): bad is the
 * member found at fault (RAID6, 3-way mirrors), or -1. */
typedef void (*tfs_stripe_report_fn)(void *arg, uint64_t fid, uint64_t off, int bad);
/* Row locks (stripe.c invariant 1), for every redundant level: rows are
 * parity rows, or chunks on the mirror levels.  held[] needs
 * TFS_ROW_LOCKS entries. */
#define TFS_ROW_LOCKS 1024
unsigned tfs_rows_lock(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1, unsigned *held);
void tfs_rows_unlock(struct tfs_fs *fs, const unsigned *held, unsigned n);
/* Whole rows r0..r1 of an open file (fid, logical size size).  -EBUSY:
 * check/resync need every member in sync. */
int tfs_stripe_rows(struct tfs_fs *fs, struct tfs_inode *in, uint64_t r0, uint64_t r1,
		    enum tfs_stripe_op op, tfs_stripe_report_fn report, void *arg);
/* Rows one write-intent mark covers (mark region g is rows g*n..g*n+n-1). */
uint64_t tfs_mark_rows(struct tfs_fs *fs);

/* Mirror levels: check, repair or rebuild [off, off+len) of an open file
 * (stripe.c does the parity levels). */
int tfs_data_maint(struct tfs_fs *fs, struct tfs_inode *in, uint64_t off, uint64_t len,
		   enum tfs_stripe_op op, tfs_stripe_report_fn report, void *arg);

/* ---- maint.c: resync, scrub, replace/rebuild ---- */
struct tfs_maint;
int tfs_maint_init(struct tfs_fs *fs);
/* Resync the rows of every marked region (after a crash), before serving. */
int tfs_maint_resync(struct tfs_fs *fs);
/* Resume an interrupted rebuild. */
int tfs_maint_start(struct tfs_fs *fs);
void tfs_maint_stop(struct tfs_fs *fs);
/* A maintenance command (NUL-terminated: fail N, replace N DIR, scrub,
 * repair, cancel): 0, -errno with a reason in err, or -ENOSYS if cmd is
 * none of them. */
int tfs_maint_ctl(struct tfs_fs *fs, const char *cmd, char *err, size_t errlen);
/* Maintenance's lines of the status (job, progress, last, mismatch=),
 * malloc'ed; paths of files only when paths. */
char *tfs_maint_report(struct tfs_fs *fs, bool paths);

/* Intent records (encoded by ns.c, replayed by replay.c). */
enum tfs_intent_op {
	TFS_I_CREATE = 1,	/* path */
	TFS_I_REMOVE,		/* path */
	TFS_I_RENAME,		/* path, path2, flags */
	TFS_I_LINK,		/* path (existing), path2 (new) */
	TFS_I_ATTR,		/* path: copy mode, owner, times from member 0 */
	TFS_I_TRUNCATE,		/* path, arg = logical size, fid */
	TFS_I_XATTR,		/* path, path2 = xattr name */
};

struct tfs_intent {
	uint32_t op;
	uint32_t flags;
	uint64_t arg;
	uint64_t fid;			/* TRUNCATE: the file's identity */
	const char *path;
	const char *path2;
};

#define TFS_INTENT_PATH_MAX 65536	/* u16 lengths in the record, plus NUL */

int tfs_intent_encode(const struct tfs_intent *it, void *buf, size_t len);
int tfs_intent_decode(const void *buf, size_t len, struct tfs_intent *it,
		      char *p1, char *p2);

#endif
