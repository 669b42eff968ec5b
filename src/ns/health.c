/* health.c - member states, failure and failover.
 *
 * Owns: fs->mstate, fs->primary and the record of member states in the
 * superblocks (super.c writes them).
 *
 * Invariants:
 *  1. A member is failed at most once per mount and never comes back by
 *     itself; only a replacement (maint.c rebuild) brings the index back.
 *  2. Failing a member is recorded (events+1) on every member still in use
 *     before anything else depends on it, so a later mount never trusts a
 *     member that missed writes (super.c invariant 4).
 *  3. A member is failed only while the level survives it; otherwise it
 *     stays, the error goes to the application, and nothing acknowledged
 *     is lost.  A replacement being rebuilt (R) can always be failed.
 *  4. The primary is always in sync.  When it fails, another in-sync member
 *     takes over: under ns_lock exclusive (no thread holds directory fds),
 *     the inode table is re-keyed by the new primary's inode numbers.
 *  5. A member fails on errors of the member (EIO, a change it refuses
 *     that the primary made), never because one name on it is not the
 *     kind of object the array expects there (tfs_member_diverged): that
 *     is damage to one name, which an unprivileged user could once cause
 *     (DESIGN §11); the request is refused with EUCLEAN, as ext4 refuses a
 *     damaged inode, and scrub finds it.
 *
 * States of a member (super.h):
 *   U --tfs_member_fail--> _ --replace (rebuild.c)--> R --rebuild done--> U
 *   R --tfs_member_fail--> _
 * (rebuild.c sets R when the new member starts taking changes
 * and U once its data is copied; health.c only ever fails members.)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/replay.h"
#include "tierfs/super.h"

void tfs_health_init(struct tfs_fs *fs)
{
	for (uint32_t k = 0; k < fs->n; k++)
		fs->mstate[k] = fs->array->sb.state[k];
	for (uint32_t k = fs->n; k-- > 0;)
		if (fs->mstate[k] == TFS_M_UP)
			fs->primary = k;
}

uint32_t tfs_members(struct tfs_fs *fs, uint32_t *order)
{
	uint32_t p = tfs_primary(fs), n = 0;

	order[n++] = p;
	for (uint32_t k = 0; k < fs->n; k++)
		if (k != p && tfs_m_writable(fs, k))
			order[n++] = k;
	return n;
}

static uint32_t count_state(struct tfs_fs *fs, char st)
{
	uint32_t c = 0;

	for (uint32_t k = 0; k < fs->n; k++)
		c += tfs_mstate(fs, k) == st;
	return c;
}

/* Inode number of path on the primary (0 if it is not there). */
static uint64_t primary_ino(struct tfs_fs *fs, const char *path)
{
	char name[NAME_MAX + 1];
	uint32_t p = tfs_primary(fs);
	struct stat st;
	int dfd, rc;

	if (strcmp(path, ".") == 0) {
		dfd = OPS(fs)->open_dir(BE(fs), p, -1, "");
		rc = dfd < 0 ? dfd : OPS(fs)->fstat(BE(fs), p, dfd, &st);
	} else {
		dfd = tfs_member_at(fs, p, path, name);
		rc = dfd < 0 ? dfd : OPS(fs)->fstatat(BE(fs), p, dfd, name, &st);
	}
	if (dfd >= 0)
		close(dfd);
	return rc ? 0 : (uint64_t)st.st_ino;
}

/* The primary failed: the next in-sync member takes over.  Runs on its own
 * thread, because the thread that saw the failure may hold directory fds
 * (ns_lock shared) and ns_lock must be taken exclusive. */
static void *failover(void *arg)
{
	struct tfs_fs *fs = arg;
	uint32_t old, np = UINT32_MAX;

	pthread_rwlock_wrlock(&fs->ns_lock);
	pthread_mutex_lock(&fs->health_lock);
	old = fs->primary;
	for (uint32_t k = 0; k < fs->n && np == UINT32_MAX; k++)
		if (tfs_m_readable(fs, k))
			np = k;
	if (np != UINT32_MAX && !tfs_m_readable(fs, old))
		__atomic_store_n(&fs->primary, np, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fs->health_lock);
	if (np != UINT32_MAX && np != old) {
		tfs_inode_rekey(fs, primary_ino);
		tfs_warn("member %u is the primary now (member %u failed)", np, old);
	}
	pthread_rwlock_unlock(&fs->ns_lock);
	return NULL;
}

bool tfs_member_fail(struct tfs_fs *fs, uint32_t k, int err, const char *what)
{
	const struct tfs_level_ops *lo = tfs_level_ops(fs->layout.level);
	char st;
	bool primary;

	pthread_mutex_lock(&fs->health_lock);
	st = tfs_mstate(fs, k);
	if (st == TFS_M_FAILED) {
		pthread_mutex_unlock(&fs->health_lock);
		return true;
	}
	if (st == TFS_M_UP && (count_state(fs, TFS_M_FAILED) + 1 > lo->tolerates(&fs->layout) ||
			       count_state(fs, TFS_M_UP) == 1)) {
		bool first = !(fs->fail_refused & (1u << k));

		fs->fail_refused |= 1u << k;
		pthread_mutex_unlock(&fs->health_lock);
		if (first)	/* once per member: a dead disk fails every request */
			tfs_err("member %u (%s): %s failed: %s; the array cannot lose it (%s "
				"survives %u failed member%s), so it stays in use and requests "
				"that need it fail", k, fs->array->path[k], what, strerror(-err),
				lo->name, lo->tolerates(&fs->layout),
				lo->tolerates(&fs->layout) == 1 ? "" : "s");
		return false;
	}
	__atomic_store_n(&fs->mstate[k], TFS_M_FAILED, __ATOMIC_RELEASE);
	fs->array->sb.state[k] = TFS_M_FAILED;
	primary = k == fs->primary;
	if (!fs->readonly)
		tfs_array_record(fs->array);
	if (fs->meta)
		tfs_meta_drop(fs->meta, k);
	pthread_mutex_unlock(&fs->health_lock);
	tfs_err("member %u (%s) FAILED: %s: %s; the array is DEGRADED (%s)%s", k,
		fs->array->path[k], what, strerror(-err), fs->array->sb.state,
		st == TFS_M_REBUILD ? "; its rebuild stops" : "");
	if (primary) {
		pthread_t t;

		/* not inline: this thread may hold ns_lock shared */
		if (pthread_create(&t, NULL, failover, fs) == 0)
			pthread_detach(t);
		else
			tfs_err("cannot start the failover thread: names stay on failed member %u",
				k);
	}
	return true;
}

bool tfs_member_diverged(struct tfs_fs *fs, uint32_t k, int *err, const char *what)
{
	if (!tfs_member_misnamed(*err))
		return tfs_member_fail(fs, k, *err, what);
	tfs_err("member %u (%s): %s: %s: the name there is not what the array expects; the "
		"member stays in use (invariant 5; tierctl scrub lists such names)", k,
		fs->array->path[k], what, strerror(-*err));
	*err = -EUCLEAN;
	return false;
}

char *tfs_health_report(struct tfs_fs *fs, bool paths)
{
	const struct tfs_level_ops *lo = tfs_level_ops(fs->layout.level);
	size_t cap = 1024 + (size_t)fs->n * (PATH_MAX + 48);
	char *buf = malloc(cap);
	int len;
	uint32_t failed = count_state(fs, TFS_M_FAILED);

	if (!buf)
		return NULL;
	len = snprintf(buf, cap,
		       "uuid=%s\nlevel=%s\nchunk=%u\nmembers=%u\nstate=%s\nhealth=%s\n"
		       "tolerates=%u\nprimary=%u\nevents=%" PRIu64 "\n",
		       fs->array->sb.uuid, lo->name, fs->layout.chunk, fs->n,
		       fs->array->sb.state,
		       failed == 0 && count_state(fs, TFS_M_REBUILD) == 0 ? "optimal"
		       : failed ? "degraded" : "rebuilding",
		       lo->tolerates(&fs->layout), tfs_primary(fs), fs->array->sb.events);
	for (uint32_t k = 0; k < fs->n && len > 0 && (size_t)len < cap; k++) {
		char st = tfs_mstate(fs, k);

		len += snprintf(buf + len, cap - (size_t)len, "member.%u=%s %s\n", k,
				st == TFS_M_UP ? "in_sync" : st == TFS_M_FAILED ? "failed"
				: "rebuilding", paths && fs->array->path[k] ? fs->array->path[k] : "-");
	}
	return buf;
}
