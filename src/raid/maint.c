/* maint.c - array maintenance: the job, its pace, its status and control.
 *
 * Owns: the maintenance thread and its job (one at a time: scrub, repair
 * or rebuild), the job's progress and findings (struct tfs_maint), the
 * rate cap (fs->maint_mbps, under its lock: the root's
 * user.tierfs.maint_mbps changes it at run time), the maintenance commands (fail, replace,
 * scrub, repair, cancel: tfs_maint_ctl) and its part of the status
 * (tfs_maint_report); fuse/control.c routes the commands and composes the
 * status.  What a job does is the other files': scrub.c the per-file and
 * per-row passes (and the crash resync, which runs before the array
 * serves, on no job), rebuild.c replacing a member and rebuilding it.
 *
 * Invariants:
 *  1. One job at a time: a job starts only when none runs (-EBUSY
 *     otherwise), on the maintenance thread; a rebuild cut short (cancel,
 *     unmount, crash) leaves its member in state R and resumes at the next
 *     mount (tfs_maint_start).
 *  2. A job is paced: after each step it sleeps until the bytes it has
 *     done are no more than fs->maint_mbps MB per second of its running
 *     time (no sleep once cancelled; maint_mbps 0: no cap).
 *  3. Its part of the status names paths (files) to root only.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tierfs/log.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/maint.h"
#include "tierfs/parse.h"
#include "tierfs/raid.h"
#include "tierfs/walk.h"
#include "tierfs/super.h"
#include "raid_i.h"

#define MAX_REPORTED  100

enum job { JOB_NONE, JOB_SCRUB, JOB_REBUILD };

struct tfs_maint {
	pthread_mutex_t lock;
	pthread_t thread;
	bool running, cancel, joinable;
	enum job job;
	enum tfs_stripe_op op;		/* scrub: CHECK or REPAIR */
	uint32_t target;		/* rebuild: the member */
	uint64_t total, done;		/* bytes */
	uint64_t files, mismatches;
	struct timespec started;
	char last[256];			/* how the last job ended */
	char *found;			/* "path offset\n" per mismatch (first 100) */
	size_t found_len;
	char cur_path[256];
};

static struct tfs_maint *M(struct tfs_fs *fs)
{
	return fs->maint;
}

static double elapsed(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* ------------------------------------------------------------------ */
/* A job: its progress, findings and pace                              */
/* ------------------------------------------------------------------ */

/* One line of the scrub's findings (the status shows the first ones). */
void r_maint_found(struct tfs_fs *fs, const char *line, int l)
{
	struct tfs_maint *mt = M(fs);

	pthread_mutex_lock(&mt->lock);
	mt->mismatches++;
	if (mt->mismatches <= MAX_REPORTED && l > 0) {
		char *f = realloc(mt->found, mt->found_len + (size_t)l + 1);

		if (f) {
			memcpy(f + mt->found_len, line, (size_t)l + 1);
			mt->found = f;
			mt->found_len += (size_t)l;
		}
	}
	pthread_mutex_unlock(&mt->lock);
}

bool r_maint_cancelled(struct tfs_fs *fs)
{
	return M(fs)->cancel;
}

bool r_maint_running(struct tfs_fs *fs)
{
	return M(fs)->running;
}

/* The file the job is at now (the status's current=), counted. */
void r_maint_file(struct tfs_fs *fs, const char *path)
{
	pthread_mutex_lock(&M(fs)->lock);
	snprintf(M(fs)->cur_path, sizeof(M(fs)->cur_path), "%s", path);
	M(fs)->files++;
	pthread_mutex_unlock(&M(fs)->lock);
}

int tfs_maint_rate_set(struct tfs_fs *fs, const char *val, char *err, size_t errlen)
{
	/* the range of -o maint_mbps (tierfs.c) */
	static const struct tfs_num_spec spec = { "maint_mbps", TFS_NUM_REAL, 0, 100000,
						  "0: no cap" };
	double v;

	if (tfs_parse_num(&spec, val, &v, err, errlen))
		return -EINVAL;
	pthread_mutex_lock(&M(fs)->lock);
	fs->maint_mbps = v;
	pthread_mutex_unlock(&M(fs)->lock);
	tfs_info("maintenance: rate cap %s", v > 0 ? val : "none");
	return 0;
}

double tfs_maint_rate(struct tfs_fs *fs)
{
	double v;

	pthread_mutex_lock(&M(fs)->lock);
	v = fs->maint_mbps;
	pthread_mutex_unlock(&M(fs)->lock);
	return v;
}

/* Account len bytes done; sleep to keep under the rate cap. */
void r_maint_progress(struct tfs_fs *fs, uint64_t len)
{
	struct tfs_maint *mt = M(fs);
	double t, due;

	pthread_mutex_lock(&mt->lock);
	mt->done += len;
	due = fs->maint_mbps > 0 ? (double)mt->done / (fs->maint_mbps * 1e6) : 0;
	pthread_mutex_unlock(&mt->lock);
	t = elapsed(&mt->started);
	if (due > t && !mt->cancel)
		usleep((useconds_t)((due - t) * 1e6));
}

static int sum_size(void *arg, struct tfs_inode *in, const struct stat *st)
{
	*(uint64_t *)arg += (uint64_t)st->st_size;
	return 0;
}

/* ------------------------------------------------------------------ */
/* The maintenance thread                                              */
/* ------------------------------------------------------------------ */

static void *maint_thread(void *arg)
{
	struct tfs_fs *fs = arg;
	struct tfs_maint *mt = M(fs);
	uint64_t total = 0;
	int rc;

	tfs_walk_files(fs, sum_size, &total);
	pthread_mutex_lock(&mt->lock);
	mt->total = total;
	pthread_mutex_unlock(&mt->lock);
	if (mt->job == JOB_REBUILD)
		rc = r_rebuild(fs, mt->target);
	else
		rc = r_scrub_pass(fs, mt->op);
	pthread_mutex_lock(&mt->lock);
	snprintf(mt->last, sizeof(mt->last), "%s %s: %s, %" PRIu64 " files, %" PRIu64
		 " mismatches%s, %.1f s",
		 mt->job == JOB_REBUILD ? "rebuild" : mt->op == TFS_STRIPE_REPAIR ? "repair"
										 : "check",
		 rc == 0 ? "done" : rc == -ECANCELED ? "cancelled" : "failed",
		 rc == 0 || rc == -ECANCELED ? "ok" : strerror(-rc), mt->files, mt->mismatches,
		 mt->op == TFS_STRIPE_REPAIR && mt->mismatches ? " (repaired)" : "",
		 elapsed(&mt->started));
	mt->running = false;
	pthread_mutex_unlock(&mt->lock);
	tfs_info("maintenance: %s", mt->last);
	return NULL;
}

static int start_job(struct tfs_fs *fs, enum job job, enum tfs_stripe_op op, uint32_t target)
{
	struct tfs_maint *mt = M(fs);
	int rc = 0;

	pthread_mutex_lock(&mt->lock);
	if (mt->running) {
		rc = -EBUSY;
	} else {
		if (mt->joinable)
			pthread_join(mt->thread, NULL);
		mt->joinable = false;
		mt->job = job;
		mt->op = op;
		mt->target = target;
		mt->total = mt->done = mt->files = mt->mismatches = 0;
		mt->cancel = false;
		free(mt->found);
		mt->found = NULL;
		mt->found_len = 0;
		mt->cur_path[0] = 0;
		clock_gettime(CLOCK_MONOTONIC, &mt->started);
		mt->running = true;
		if (pthread_create(&mt->thread, NULL, maint_thread, fs)) {
			mt->running = false;
			rc = -EAGAIN;
		} else {
			mt->joinable = true;
		}
	}
	pthread_mutex_unlock(&mt->lock);
	return rc;
}

int tfs_maint_init(struct tfs_fs *fs)
{
	struct tfs_maint *mt = calloc(1, sizeof(*mt));

	if (!mt)
		return -ENOMEM;
	pthread_mutex_init(&mt->lock, NULL);
	fs->maint = mt;
	return 0;
}

int tfs_maint_start(struct tfs_fs *fs)
{
	/* a rebuild interrupted by an unmount or crash resumes */
	for (uint32_t k = 0; k < fs->n; k++) {
		if (tfs_mstate(fs, k) == TFS_M_REBUILD) {
			tfs_warn("rebuild of member %u (%s) resumes", k, fs->array->path[k]);
			return start_job(fs, JOB_REBUILD, TFS_STRIPE_REBUILD, k);
		}
	}
	return 0;
}

void tfs_maint_stop(struct tfs_fs *fs)
{
	struct tfs_maint *mt = M(fs);

	if (!mt)
		return;
	pthread_mutex_lock(&mt->lock);
	mt->cancel = true;
	pthread_mutex_unlock(&mt->lock);
	if (mt->joinable)
		pthread_join(mt->thread, NULL);
	mt->joinable = false;
}

/* ------------------------------------------------------------------ */
/* Control and status                                                  */
/* ------------------------------------------------------------------ */

int tfs_maint_ctl(struct tfs_fs *fs, const char *cmd, char *err, size_t errlen)
{
	char arg[PATH_MAX + 1];
	unsigned k;
	int rc;

	if (sscanf(cmd, "fail %u", &k) == 1) {
		if (k >= fs->n) {
			snprintf(err, errlen, "no member %u: the array has %u members", k, fs->n);
			return -EINVAL;
		}
		if (tfs_mstate(fs, k) == TFS_M_FAILED)
			return 0;
		if (tfs_mstate(fs, k) == TFS_M_REBUILD) {
			tfs_maint_stop(fs);
			M(fs)->running = false;
		}
		if (!tfs_member_fail(fs, k, -EIO, "tierctl fail")) {
			snprintf(err, errlen, "member %u cannot be failed: %s would lose data", k,
				 tfs_level_name(fs->layout.level));
			return -EBUSY;
		}
		return 0;
	}
	if (sscanf(cmd, "replace %u %4096[^\n]", &k, arg) == 2) {
		rc = r_replace(fs, k, arg, err, errlen);
		return rc ? rc : start_job(fs, JOB_REBUILD, TFS_STRIPE_REBUILD, k);
	}
	if (strcmp(cmd, "scrub") == 0 || strcmp(cmd, "repair") == 0) {
		if (tfs_level_ops(fs->layout.level)->tolerates(&fs->layout) == 0) {
			snprintf(err, errlen, "%s keeps no redundancy: there is nothing to check",
				 tfs_level_name(fs->layout.level));
			return -EINVAL;
		}
		for (uint32_t i = 0; i < fs->n; i++) {
			if (!tfs_m_readable(fs, i)) {
				snprintf(err, errlen, "member %u is not in sync: scrub needs every "
					 "member (replace it first)", i);
				return -EBUSY;
			}
		}
		rc = start_job(fs, JOB_SCRUB, cmd[0] == 's' ? TFS_STRIPE_CHECK : TFS_STRIPE_REPAIR,
			       0);
		if (rc == -EBUSY)
			snprintf(err, errlen, "a rebuild or scrub is already running");
		return rc;
	}
	if (strcmp(cmd, "cancel") == 0) {
		pthread_mutex_lock(&M(fs)->lock);
		M(fs)->cancel = true;
		pthread_mutex_unlock(&M(fs)->lock);
		return 0;
	}
	return -ENOSYS;		/* not a maintenance command */
}

char *tfs_maint_report(struct tfs_fs *fs, bool paths)
{
	struct tfs_maint *mt = M(fs);
	char *out;
	double t;
	size_t cap;
	int l;

	pthread_mutex_lock(&mt->lock);
	/* the fixed lines are bounded (paths 256, messages 256, 100 mismatch
	 * lines of at most found_len plus a prefix each): never truncated */
	cap = 4096 + 2 * mt->found_len;
	out = malloc(cap);
	if (out) {
		t = elapsed(&mt->started);
		l = 0;
		if (mt->running) {
			double pct = mt->total ? 100.0 * (double)mt->done / (double)mt->total : 0;
			double rate = t > 0 ? (double)mt->done / t : 0;

			if (pct > 100)
				pct = 100;
			l += snprintf(out + l, cap - (size_t)l,
				      "job=%s\nprogress=%.1f\ndone_bytes=%" PRIu64 "\ntotal_bytes=%"
				      PRIu64 "\nrate_mbps=%.1f\neta_s=%.0f\nfiles=%" PRIu64
				      "\nmismatches=%" PRIu64 "\ncurrent=%s\n",
				      mt->job == JOB_REBUILD ? "rebuild" : mt->op == TFS_STRIPE_REPAIR
				      ? "repair" : "check", pct, mt->done, mt->total, rate / 1e6,
				      rate > 0 && mt->total > mt->done
				      ? (double)(mt->total - mt->done) / rate : 0,
				      mt->files, mt->mismatches, paths ? mt->cur_path : "-");
		} else {
			l += snprintf(out + l, cap - (size_t)l, "job=none\n");
		}
		if (mt->job == JOB_REBUILD && mt->running)
			l += snprintf(out + l, cap - (size_t)l, "rebuild.member=%u\n", mt->target);
		if (mt->last[0])
			l += snprintf(out + l, cap - (size_t)l, "last=%s\n", mt->last);
		if (paths && mt->found_len && (size_t)l + mt->found_len + 16 < cap) {
			for (char *p = mt->found, *e; p && *p; p = e + 1) {
				e = strchr(p, '\n');
				if (!e)
					break;
				l += snprintf(out + l, cap - (size_t)l, "mismatch=%.*s\n",
					      (int)(e - p), p);
			}
		}
	}
	pthread_mutex_unlock(&mt->lock);
	return out;
}
