/* control.c - the array's control and status: the user.tierfs.ctl and
 * user.tierfs.status xattrs of the mount's root (tierctl's interface).
 *
 * Owns: the command language, the reason the last command was refused,
 * and the order of the status text.  It changes nothing itself.
 *
 * Invariants:
 *  1. A command goes to the one subsystem that owns what it changes:
 *     maintenance (raid/maint.c: fail, replace, scrub, repair, cancel) or
 *     the SSD tier (cache/status.c: flush, cache_mode, detach).
 *  2. The status is each subsystem's part, in this order: the array's
 *     health (ns/health.c), each member's I/O counters (member/iostat.c),
 *     maintenance (raid/maint.c), write-intent marks
 *     (raid/marks.c) and parity counters (raid/stripe.c), the tier
 *     (cache/status.c), the FUSE transport (fuse/transport.c) and the
 *     pool (fuse/defer.c), memory (ns/inode.c, util/scratch.c), the last
 *     refusal.  Paths only for root (DESIGN §11).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/cache.h"
#include "tierfs/control.h"
#include "tierfs/defer.h"
#include "tierfs/fs.h"
#include "tierfs/meta.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/maint.h"
#include "tierfs/member.h"
#include "tierfs/raid.h"
#include "tierfs/scratch.h"
#include "tierfs/transport.h"

static pthread_mutex_t last_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_error[512];	/* one array per daemon */

static int route(struct tfs_fs *fs, const char *cmd, char *err, size_t errlen)
{
	char arg[64];
	int rc;

	if (strcmp(cmd, "flush") == 0 || strcmp(cmd, "detach") == 0)
		return tfs_cache_ctl(fs, cmd, NULL, err, errlen);
	if (sscanf(cmd, "cache_mode %63s", arg) == 1)
		return tfs_cache_ctl(fs, "cache_mode", arg, err, errlen);
	rc = tfs_maint_ctl(fs, cmd, err, errlen);
	if (rc == -ENOSYS) {
		snprintf(err, errlen, "unknown command '%.60s' (fail N, replace N DIR, scrub, "
			 "repair, cancel, flush, cache_mode MODE, detach)", cmd);
		rc = -EINVAL;
	}
	return rc;
}

int tfs_control(struct tfs_fs *fs, const char *val, size_t len, char *err, size_t errlen)
{
	char cmd[PATH_MAX + 64];
	int rc;

	if (len >= sizeof(cmd)) {
		rc = -E2BIG;
	} else if (fs->readonly) {
		rc = -EROFS;	/* the kernel refuses the setxattr before us anyway */
	} else {
		memcpy(cmd, val, len);
		cmd[len] = 0;
		rc = route(fs, cmd, err, errlen);
	}
	pthread_mutex_lock(&last_lock);
	snprintf(last_error, sizeof(last_error), "%s", rc ? err : "");
	pthread_mutex_unlock(&last_lock);
	return rc;
}

void tfs_control_refused(const char *why)
{
	pthread_mutex_lock(&last_lock);
	snprintf(last_error, sizeof(last_error), "%s", why);
	pthread_mutex_unlock(&last_lock);
}

char *tfs_status(struct tfs_fs *fs, bool paths)
{
	char *h = tfs_health_report(fs, paths), *m = tfs_maint_report(fs, paths), *out = NULL;
	size_t cap;
	int l;

	if (!h || !m)
		goto out;
	/* the fixed lines are bounded: stripe and tier counters fit in 8 KiB,
	 * each member's I/O counters in 512 bytes, the last refusal in 512 */
	cap = strlen(h) + strlen(m) + 8192 + 1024 + 512 * (size_t)fs->n;
	out = malloc(cap);
	if (!out)
		goto out;
	l = snprintf(out, cap, "%s", h);
	l += tfs_iostat_report(fs->be, out + l, cap - (size_t)l);
	l += snprintf(out + l, cap - (size_t)l, "%s", m);
	l += snprintf(out + l, cap - (size_t)l, "marks=%" PRIu64 "\n", tfs_stripe_marks(fs));
	l += tfs_stripe_stats(fs, out + l, cap - (size_t)l);
	l += tfs_raid_syncs(fs, out + l, cap - (size_t)l);
	if (fs->meta)
		l += tfs_meta_stats(fs->meta, out + l, cap - (size_t)l);
	l += tfs_cache_stats(fs, out + l, cap - (size_t)l, paths);
	l += tfs_transport_stats(fs->transport, out + l, cap - (size_t)l);
	l += tfs_defer_stats(fs->defer, out + l, cap - (size_t)l);
	l += snprintf(out + l, cap - (size_t)l, "mem.inodes=%" PRIu64 "\nmem.scratch_bytes=%" PRIu64
		      "\nmem.idle_trims=%" PRIu64 "\n", tfs_inode_count(fs), tfs_scratch_bytes(),
		      tfs_scratch_idle_trims());
	pthread_mutex_lock(&last_lock);
	if (last_error[0] && paths)
		snprintf(out + l, cap - (size_t)l, "ctl_error=%s\n", last_error);
	pthread_mutex_unlock(&last_lock);
out:
	free(h);
	free(m);
	return out;
}
