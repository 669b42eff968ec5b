/* Member states, failing a member, failover (src/ns/health.c), which owns
 * fs->mstate and fs->primary; plus small helpers every layer shares (an
 * all-zero test, the bytes of a row lock, growing the logical size). */
#ifndef TIERFS_HEALTH_H
#define TIERFS_HEALTH_H

#include "tierfs/fs.h"

/* ---- health.c: member states, failure, failover ---- */
/* Returns member k's state, a TFS_M_* character (an atomic load). */
static inline char tfs_mstate(const struct tfs_fs *fs, uint32_t k)
{
	return __atomic_load_n(&fs->mstate[k], __ATOMIC_ACQUIRE);
}
/* Returns true if member k is in sync: it may be read. */
static inline bool tfs_m_readable(const struct tfs_fs *fs, uint32_t k)
{
	return tfs_mstate(fs, k) == 'U';
}
/* Returns true if member k takes changes (in sync or being rebuilt). */
static inline bool tfs_m_writable(const struct tfs_fs *fs, uint32_t k)
{
	return tfs_mstate(fs, k) != '_';
}
/* Returns the primary: the member names are read from and changes go to
 * first (an atomic load). */
static inline uint32_t tfs_primary(const struct tfs_fs *fs)
{
	return __atomic_load_n(&fs->primary, __ATOMIC_ACQUIRE);
}
/* Returns true if member k has its names used: it takes changes, or is
 * still the primary (a failed primary stays one until failover has
 * re-keyed the inode table). */
static inline bool tfs_m_named(const struct tfs_fs *fs, uint32_t k)
{
	return tfs_m_writable(fs, k) || k == tfs_primary(fs);
}
/* Set up states and primary from the assembled array. */
void tfs_health_init(struct tfs_fs *fs);
/* Members that take a change, the primary first (even when it has failed
 * and failover has not run yet), into order.  Returns how many. */
uint32_t tfs_members(struct tfs_fs *fs, uint32_t *order);
/* Member k failed doing what (err = -errno): mark it failed, record that on
 * the other members and carry on degraded -- unless the level cannot lose
 * it (or it is the last in sync), in which case it stays and the error is
 * only logged, once per member.  A primary that fails hands over to the
 * next in-sync member on a thread of its own.  Returns true if the member
 * is now failed (also if it already was), false if it stays. */
bool tfs_member_fail(struct tfs_fs *fs, uint32_t k, int err, const char *what);
/* Returns true if err says that a name on a member is not the kind of
 * object the array expects there (-ELOOP, -ENOTDIR, -EISDIR: something
 * else was put in its place). */
static inline bool tfs_member_misnamed(int err)
{
	return err == -ELOOP || err == -ENOTDIR || err == -EISDIR;
}
/* A namespace call on member k (not the primary) answered *err.  A
 * misnamed object is logged and the member stays in use: *err becomes
 * -EUCLEAN for the request, and false is returned.  Anything else fails the
 * member as tfs_member_fail does (true: go on without it). */
bool tfs_member_diverged(struct tfs_fs *fs, uint32_t k, int *err, const char *what);
/* Returns true if err is a member failure (-EIO, -ENODEV, -ENXIO, -EROFS,
 * -EUCLEAN), as opposed to an answer like -ENOENT or a refusal for space. */
static inline bool tfs_member_error(int err)
{
	return err == -EIO || err == -ENODEV || err == -ENXIO || err == -EROFS ||
	       err == -EUCLEAN;
}
/* The health lines of the status (uuid, level, state, member.N=...);
 * member paths only when paths.  Returns them malloc'ed, or NULL without
 * memory. */
char *tfs_health_report(struct tfs_fs *fs, bool paths);

/* Returns true if [p, p+n) is all zero bytes (n 0 included). */
static inline bool tfs_all_zero(const void *p, size_t n)
{
	const unsigned char *c = p;

	return n == 0 || (c[0] == 0 && memcmp(c, c + 1, n - 1) == 0);
}

/* Returns the logical bytes a row lock (and the maintenance of one row)
 * covers: a parity row, or one chunk on the mirror levels. */
static inline uint64_t tfs_row_bytes(const struct tfs_fs *fs)
{
	return tfs_layout_nparity(&fs->layout)
	       ? (uint64_t)tfs_layout_ndata(&fs->layout) * fs->layout.chunk : fs->layout.chunk;
}

#endif
