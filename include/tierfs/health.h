/* Member states, failing a member, failover (src/ns/health.c). */
#ifndef TIERFS_HEALTH_H
#define TIERFS_HEALTH_H

#include "tierfs/fs.h"

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

#endif
