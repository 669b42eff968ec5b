/* The mounted array: struct tfs_fs (every subsystem's pointers and the
 * array-wide locks) and the objects the layers share - tfs_inode, what a
 * FUSE node id names, its names (tfs_alias, tfs_loc) and its open member
 * files (tfs_ofile) - plus the member seam's macros and the tier's hooks.
 *
 * tfs_fs is the mounted array; tfs_inode is what a FUSE node id names.
 * Node ids are inode pointers (root: FUSE_ROOT_ID).  An inode is found again
 * by the member-0 inode number of its object (so hard links share one inode
 * and one st_ino), and reached on the members by path: every inode keeps the
 * names (parent, name) it is known by.  No descriptor is held per known
 * inode, only per open file (N member fds, shared by all its handles).
 */
#ifndef TIERFS_FS_H
#define TIERFS_FS_H

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
	/* Another file in the table has this file's identity (inode.c
	 * invariant 5): its data is not reached and nothing keyed by fid
	 * (the tier) is asked about it until one of them is gone.  Atomic:
	 * the second file sets it on the first. */
	bool fid_dup;
	uint64_t fid;			/* file identity (xattr on the members) */
	uint32_t rot;			/* tfs_layout_rot(fid) */
	uint64_t size;			/* logical size of a regular file */
	uint64_t size_saved;		/* parity levels: TFS_XATTR_SIZE as last written */
	uint64_t seq_next, seq_len;	/* the SSD tier's sequential-stream detector */
	struct tfs_ofile *of;
	/* journal generation that retired this file's last truncate intent
	 * (atomic): an fsync makes it durable first, because a mount that
	 * replays a finished truncate cuts whatever the file grew since */
	uint64_t trunc_gen;
	/* Changes to the file on the members not yet synced (raid/data.c
	 * invariant 7): chg_data is bumped after every change of its data or
	 * size there, chg_all after that and after every change of its
	 * attributes or times; syn_data and syn_all are the values the last
	 * successful member sync covered (an fdatasync covers data only).
	 * Atomics; a new inode starts at chg 1, syn 0: its first sync runs. */
	uint64_t chg_data, chg_all, syn_data, syn_all;
	/* The modification time of the writes the members have not been told
	 * of yet (attr.c invariant 4): mtime_due, set by tfs_ns_touch when
	 * mtime_pending; mtime_put, when it last told the primary.
	 * times_gen and times_busy: an explicit change of the times counts
	 * itself there, so a flusher that keeps the times across its writes
	 * never puts back older ones over it.  Under lock. */
	bool mtime_pending;
	struct timespec mtime_due, mtime_put;
	uint64_t times_gen;
	unsigned times_busy;

	/* The SSD tier's requests on this file since its inode was made (not
	 * kept across a restart or a forget): written by cache/read.c and
	 * cache/write.c with relaxed atomics, read for the file's
	 * user.tierfs.* attributes (fuse/attrs.c).  A request is a hit when
	 * the tier served all of it from extents it held; bypass is the
	 * reason of the last request that went around the tier (enum
	 * tfs_bypass, cache.h), bypass_time when (CLOCK_REALTIME seconds). */
	struct tfs_tier_counts {
		uint64_t read_hits, read_misses, write_hits, write_misses;
		uint64_t bypass_time;
		uint32_t bypass;
	} tier;
};

struct tfs_fs;

/* The member seam of an array (member.h): every member call is
 * OPS(fs)->call(BE(fs), k, ...). */
#define OPS(fs) ((fs)->be->ops)
#define TFS_NAME_LOCKS 64		/* name locks (struct tfs_fs), a power of 2 */
#define BE(fs)  ((fs)->be)

/* What the namespace asks and tells the SSD tier about a file: set by the
 * tier when it binds (cache/bind.c), NULL without one.  The namespace is a
 * service beside the data path and never calls the tier by name (DESIGN
 * §1); these are the only things it needs from it. */
struct tfs_tier_hooks {
	/* The file's last name is gone and nobody has it open. */
	void (*gone)(struct tfs_fs *fs, uint64_t fid);
	/* A lookup met the file (a regular file, loaded). */
	void (*found)(struct tfs_fs *fs, struct tfs_inode *in);
	/* A regular file with identity fid is being created: called before
	 * the create's intent is committed. */
	void (*created)(struct tfs_fs *fs, uint64_t fid);
	/* Returns the logical size the tier knows for fid (grown by writes it
	 * holds), or 0 if it knows none. */
	uint64_t (*size)(struct tfs_fs *fs, uint64_t fid);
	/* Returns the bytes of fid's writes only the tier holds (dirty
	 * sectors), or 0. */
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
	 * behind the walk (rebuild.c). */
	pthread_rwlock_t move_lock;
	/* Name locks (ns.c invariant 4): a directory's is the one its inode
	 * hashes to.  Every change of a name in it (create, remove, rename,
	 * link) holds it exclusive, every lookup in it (the kernel's, whose
	 * revalidations the kernel does not serialize with renames, and a
	 * maintenance walk's) holds it shared from its stat of the primary
	 * until it has bound the inode and read a regular file's attributes.
	 * Taken after move_lock, before anything else. */
	pthread_rwlock_t name_lock[TFS_NAME_LOCKS];
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
	/* with a cache or io_uring queues: requests that wait for the members
	 * (defer.h) */
	struct tfs_defer *defer;
	struct tfs_hitio *hitio;	/* with a cache: its hits on io_uring (hitio.h) */
	struct tfs_transport *transport;	/* the FUSE requests' (transport.h) */
	double maint_mbps;		/* rate cap of scrub and rebuild (0: none) */
	/* File syncs that ran on the members, and that found nothing to sync
	 * there (raid/data.c invariant 7); atomics. */
	uint64_t file_syncs, file_syncs_skipped;
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

/* Member-relative path of loc ("a/b/name"; the root is "."); only intents
 * and messages need one (inode.c).  Returns it malloc'ed, or NULL without
 * memory or when a directory above it has no name left. */
char *tfs_loc_path(struct tfs_fs *fs, const struct tfs_loc *loc);

#endif
