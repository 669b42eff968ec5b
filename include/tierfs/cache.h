/* The SSD tier: hot extents of files kept in a cache directory.
 *
 * Sits between the data path and the RAID: data/dispatch.c sends every
 * read, write, fsync and zeroing fallocate here when a cache is attached,
 * and the cache sends what it does not hold (or must also write) to the
 * RAID (tfs_raid_read/write/fsync).
 * Extents are keyed by (file identity, extent index), so a cached extent
 * follows its file through renames and remounts.  docs/DESIGN.md §10 has
 * the layout of the cache directory, the LMDB schema, the request paths
 * and the crash-consistency argument; src/cache/cache_i.h the files of
 * the module and what each owns.
 */
#ifndef TIERFS_CACHE_H
#define TIERFS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tierfs/rules.h"

struct tfs_fs;
struct tfs_inode;
struct tfs_cache;


/* Mount options (-o cache=DIR,...), their values already checked against
 * their ranges (tierfs.c); start from TFS_CACHE_OPTS_DEFAULT. */
struct tfs_cache_opts {
	char *dir;		/* cache=DIR: NULL runs uncached */
	uint64_t size;		/* cache_size=SIZE (creation); 0: not given (1G) */
	uint64_t extent;	/* cache_extent=SIZE (creation); 0: not given (256K) */
	char *mode;		/* cache_mode= */
	char *policy;		/* cache_policy=lru|s3fifo */
	uint64_t seq_cutoff;	/* cache_seq_cutoff=SIZE (0: off) */
	unsigned promote;	/* cache_promote=N: heat that promotes (0: the tuner) */
	double halflife;	/* cache_halflife=SECONDS: heat halves */
	unsigned dirty_low;	/* cache_dirty_low=PCT: the flusher starts */
	unsigned dirty_high;	/* cache_dirty_high=PCT: writers are throttled */
	char *reclaim;		/* cache_reclaim=0|1|auto: dirty extents eviction wants
				 * go first (NULL: auto) */
	int discard;		/* cache_discard: give up dirty data of a lost cache */
};
#define TFS_CACHE_OPTS_DEFAULT ((struct tfs_cache_opts){ .seq_cutoff = 4ull << 20, \
	.promote = 0, .halflife = 60.0, .dirty_low = 20, .dirty_high = 70 })

/* The checks of the options that need no cache directory (geometry, mode,
 * policy, dirty levels).  Run before anything is touched; tfs_cache_setup
 * runs them again.  Returns 0 or -errno: -EINVAL with one line in err,
 * -ENOMEM. */
int tfs_cache_opts_check(const struct tfs_cache_opts *o, char *err, size_t errlen);

/* Returns true once tierctl detach has unbound the cache: the array runs
 * uncached. */
bool tfs_cache_detached(const struct tfs_cache *c);

/* Before the mount (the journal is open): check the cache directory and
 * its binding to this array, create or recreate it, or refuse with a
 * reason in err.  Also run when no cache is given (an array whose dirty
 * data lives in a cache cannot mount without it).  Returns 0 (fs->cache
 * set if the cache is used; NULL without one, or on a read-only mount
 * that cannot use it), or -errno with one line in err: -EBUSY (files
 * have writes only in another cache, or in one not given: cache_discard
 * gives them up), -EEXIST (the cache belongs to another array), -EROFS
 * (cache_discard on a read-only mount), -EINVAL (an option), -EPERM (a
 * user could swap the directory), -ENOMEM, or the journal's or the
 * cache directory's error. */
int tfs_cache_setup(struct tfs_fs *fs, const struct tfs_cache_opts *o, char *err,
		    size_t errlen);
/* The mount was refused after tfs_cache_setup (before tfs_cache_start):
 * removes what the set-up made and forgets the cache (bind.c invariant 4). */
void tfs_cache_abandon(struct tfs_fs *fs);
/* In the daemon: open the store, load the extent map, start the flusher
 * and the promoter.  Returns 0 (also with no cache) or -errno: the data
 * file's, the store's or the journal's, -ENOMEM, -EUCLEAN (the extent map
 * names a slot twice or out of range), or -EAGAIN (a thread). */
int tfs_cache_start(struct tfs_fs *fs);
/* Clean unmount: stops the threads, saves heat, marks the cache clean
 * (failures logged). */
void tfs_cache_stop(struct tfs_fs *fs);

/* Returns true if the cache holds every byte of [off, off+len) (up to
 * the file's size) at this moment, so tfs_cache_read would not touch the
 * RAID; it changes nothing (no heat, no statistics). */
bool tfs_cache_holds(struct tfs_fs *fs, struct tfs_inode *in, size_t len, uint64_t off);
/* A read the cache holds whole, inside one extent: its slot stays pinned
 * from tfs_cache_hit_begin to tfs_cache_hit_end, and it is read by
 * tfs_cache_hit_read or by the caller on io_uring (fd, off, len). */
struct tfs_cache_hit {
	int fd;			/* the data file (O_DIRECT when the request is) */
	uint64_t off;		/* where in it */
	size_t len;		/* the request, cut at the file's size */
	uint32_t slot;
	bool direct;
};
enum tfs_hit {
	TFS_HIT,	/* *hit filled, counted as tfs_cache_read would, slot pinned */
	TFS_HIT_NO,	/* inside one extent and not (wholly) cached: a miss */
	TFS_HIT_UNSURE,	/* over extents, at the end, or file not loaded: ask tfs_cache_holds */
};
/* Returns TFS_HIT, TFS_HIT_NO or TFS_HIT_UNSURE (above); only TFS_HIT
 * changes anything. */
enum tfs_hit tfs_cache_hit_begin(struct tfs_fs *fs, struct tfs_inode *in, bool direct,
				 struct tfs_cache_hit *hit, size_t len, uint64_t off);
/* Reads the hit into buf (page-aligned).  Returns 0 or -errno (logged). */
int tfs_cache_hit_read(struct tfs_fs *fs, const struct tfs_cache_hit *hit, void *buf);
/* The read is done (res: 0 or -errno, logged here when ring; ring: by the
 * I/O thread): unpins the slot. */
void tfs_cache_hit_end(struct tfs_fs *fs, const struct tfs_cache_hit *hit, int res, bool ring);
/* Reads [off, off+len) of in: hits from the SSD, the rest from the RAID
 * in one request (cache/read.c).  Returns the bytes read (cut at the
 * file's size, 0 at or past it), or -errno: the file's load, -ENOMEM, or
 * the RAID's or the SSD's error. */
ssize_t tfs_cache_read(struct tfs_fs *fs, struct tfs_inode *in, bool direct, void *buf,
		       size_t len, uint64_t off);
/* Returns true if tfs_cache_write of [off, off+len) would wait for the RAID or
 * for the flusher, as far as can be seen now: a mode other than
 * write-back, a sequential stream that bypasses, the writer throttle, or
 * a partial sector the cache does not hold.  It changes nothing. */
bool tfs_cache_write_waits(struct tfs_fs *fs, struct tfs_inode *in, size_t len, uint64_t off);
/* Writes [off, off+len) of in in the current mode (cache/write.c).
 * Returns len (0 for len 0), or -errno: -EFBIG (off + len wraps),
 * -ENOMEM, or the error of the file's load, the RAID, the SSD, the store
 * or the journal (not acknowledged then: some of the bytes may have
 * been written). */
ssize_t tfs_cache_write(struct tfs_fs *fs, struct tfs_inode *in, bool direct,
			const void *buf, size_t len, uint64_t off);
/* The SSD write of a write-back write left to the caller's ring (write.c
 * invariant 7): len bytes from buf (page-aligned: the job's own copy, or
 * the caller's bytes when they stay) at off of fd. */
struct tfs_cache_wring {
	int fd;
	void *buf;
	size_t len;
	uint64_t off;
};
/* Flags of tfs_cache_write_ring. */
#define TFS_CW_NOWAIT 1	/* -EWOULDBLOCK rather than wait for another tier actor */
#define TFS_CW_STAYS 2	/* buf is valid until tfs_cache_write_end */
/* As tfs_cache_write, but a write that comes down to one SSD write of
 * whole sectors is left half done: then returns 0 with *ring set, and the
 * caller runs *ring's write and calls tfs_cache_write_end.  Otherwise
 * *ring is NULL and it returns what tfs_cache_write would.  ring NULL:
 * the SSD write is done here.  flags: TFS_CW_STAYS, buf is valid until
 * tfs_cache_write_end (then, if page-aligned, it is written from without
 * a copy); TFS_CW_NOWAIT, a write that would wait for another writer, the
 * flusher, a detach or the throttle returns -EWOULDBLOCK, nothing done
 * (write.c invariant 8). */
ssize_t tfs_cache_write_ring(struct tfs_fs *fs, struct tfs_inode *in, bool direct,
			     const void *buf, size_t len, uint64_t off, unsigned flags,
			     struct tfs_cache_wring **ring);
/* Finish the write of ring once its SSD write ended with res (0 or
 * -errno, logged here); frees ring.  Returns what tfs_cache_write would:
 * the write's length, or -errno. */
ssize_t tfs_cache_write_end(struct tfs_fs *fs, struct tfs_cache_wring *ring, int res);
/* Makes the file's data durable: on the SSD (write-back) and the
 * members.  Returns 0 or -errno: the store's durability point's, the
 * journal sync's, or the members' (tfs_raid_fsync). */
int tfs_cache_fsync(struct tfs_fs *fs, struct tfs_inode *in, bool datasync);
/* Returns true if tfs_cache_fsync would wait for the members, as far as
 * can be seen now: journal changes to write or sync, or the file's member
 * files to sync.  It changes nothing. */
bool tfs_cache_fsync_waits(struct tfs_fs *fs, struct tfs_inode *in, bool datasync);
/* Returns true if the SSD tier holds anything of the file (an extent, or
 * a size the members do not have yet). */
bool tfs_cache_knows(struct tfs_fs *fs, struct tfs_inode *in);
/* [off, off+len) becomes zeros or goes away (truncate: len = UINT64_MAX;
 * 0: nothing yet): drop it from the cache and hold the flusher off the
 * file until tfs_cache_zero_end, after the members have changed too; that
 * drops [off, off+len) (a punch or zero range, once the members are
 * synced: cut.c invariant 2) and lets the flusher back. */
void tfs_cache_zero_begin(struct tfs_fs *fs, struct tfs_inode *in, uint64_t off, uint64_t len);
/* The members have changed too: drops [off, off+len) (0: nothing) and
 * lets the flusher back on the file.  A store error is logged. */
void tfs_cache_zero_end(struct tfs_fs *fs, struct tfs_inode *in, uint64_t off, uint64_t len);
/* The file's last name is gone and nobody has it open: drops its
 * extents and its size (a store error is logged). */
void tfs_cache_forget(struct tfs_fs *fs, uint64_t fid);
/* A lookup met in (a regular file, loaded): if it has dirty extents not
 * found since a restart, the flusher can reach them now. */
void tfs_cache_found(struct tfs_fs *fs, struct tfs_inode *in);
/* A regular file with identity fid is being created, its intent not yet
 * committed: in write-back, the file is named in the journal's CDIRTY
 * set with that commit (index.c invariant 4), so its first write need not
 * commit the name itself. */
void tfs_cache_created(struct tfs_fs *fs, uint64_t fid);
/* Returns the logical size the cache knows for fid (grown by cached
 * writes), or 0 (none, or no cache). */
uint64_t tfs_cache_size(struct tfs_fs *fs, uint64_t fid);

/* Returns the bytes of fid's writes that only the cache holds (its dirty
 * sectors), 0 without a cache. */
uint64_t tfs_cache_dirty_bytes(struct tfs_fs *fs, uint64_t fid);

/* Control (user.tierfs.ctl): "flush", "cache_mode MODE", "detach".
 * Returns 0 or -errno with one line in err: -ENODEV (no cache attached),
 * -EROFS (read-only mount), -EINVAL (an unknown command or mode), or the
 * detach's (-EAGAIN: dirty files not found since a restart; the flush's
 * error; the unbinding's). */
int tfs_cache_ctl(struct tfs_fs *fs, const char *cmd, const char *arg, char *err,
		  size_t errlen);
/* The cache.* lines of user.tierfs.status into buf (paths: the cache
 * directory shown, else "-").  Returns their length, cut at len - 1. */
int tfs_cache_stats(struct tfs_fs *fs, char *buf, size_t len, bool paths);
/* Returns the name of why a request went around the tier (enum
 * tfs_bypass, rules.h; a file's last bypass, tfs_inode.tier.bypass,
 * fs.h): "none", "sequential", "dirty_high", "mode", "no_slot". */
const char *tfs_bypass_name(enum tfs_bypass b);

/* What the tier holds of a file now (its user.tierfs.* attributes). */
struct tfs_cache_file_info {
	uint64_t cached_bytes, dirty_bytes;	/* its valid and dirty sectors */
	uint32_t extents, dirty_extents;	/* in the tier; with dirty sectors */
	const char *heat;	/* its hottest extent's class: hot, warm, cold, or none */
	bool pinned;		/* kept in the tier (tfs_cache_file_ctl "pin") */
};
/* Fills *fi for in (zeros and "none" without a tier).  Returns 0 or
 * -errno: the file's load. */
int tfs_cache_file_info(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_cache_file_info *fi);
/* The residency map of in: one line "OFFSET LENGTH clean|dirty" per run
 * of sectors the tier holds, by offset, neighbours of one state merged.
 * Returns the length (0: nothing in the tier), or -errno: the file's
 * load, -ENOMEM, -ERANGE (more than len bytes; with len 0 only the
 * length is returned). */
int tfs_cache_residency(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len);
/* A file's control: "flush" writes its dirty sectors to the members and
 * waits; "evict" does that and then drops every extent of it that is
 * clean, idle and not pinned; "pin" keeps the file's extents in the tier
 * from now on (durably, within a cap of half the tier) and loads those
 * it lacks; "unpin" undoes that.  Returns 0 or -errno with one line in
 * err: -ENODEV (no tier), -EROFS, -EINVAL (another command), -ENOSPC (a
 * pin over the cap, or pinned with extents that found no slot), or the
 * flush's (-EBUSY, the RAID's), the store's. */
int tfs_cache_file_ctl(struct tfs_fs *fs, struct tfs_inode *in, const char *cmd, char *err,
		       size_t errlen);
/* A run-time tunable of the tier by name (cache_mode, seq_cutoff in
 * bytes, promote_threshold, dirty_low, dirty_high in percent), as text
 * into buf.  Returns the length, or -errno: -ENODEV (no tier), -ENODATA
 * (not a tunable's name), -ERANGE. */
int tfs_cache_tunable_get(struct tfs_fs *fs, const char *name, char *buf, size_t len);
/* Sets a tunable (as tfs_cache_tunable_get names them) to val until the
 * unmount.  Returns 0 or -errno with one line in err: -ENODEV, -EROFS,
 * -ENODATA (not a tunable), -EINVAL (a value out of range: the line names
 * the range; or dirty_low not below dirty_high). */
int tfs_cache_tunable_set(struct tfs_fs *fs, const char *name, const char *val, char *err,
			  size_t errlen);
/* The trace recorder (the root's user.tierfs.trace): cmd "start PATH"
 * (an absolute path the daemon creates, never an existing file) or
 * "stop".  Returns 0 or -errno with one line in err: -ENODEV (no tier),
 * -EBUSY (a trace runs), -EINVAL, the file's (-EEXIST). */
int tfs_cache_trace(struct tfs_fs *fs, const char *cmd, char *err, size_t errlen);
/* The recorder's state ("off", "on PATH RECORDS", "off PATH RECORDS
 * [ERROR]") into buf.  Returns its length, or -ENODEV (no tier). */
int tfs_cache_trace_state(struct tfs_fs *fs, char *buf, size_t len);
/* Counters back to zero (the root's user.tierfs.reset): this mount's, the
 * totals kept across remounts and the windows. */
void tfs_cache_stats_reset(struct tfs_fs *fs);


#endif
