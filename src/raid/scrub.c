/* scrub.c - the per-file and per-row passes of maintenance, and the crash
 * resync.
 *
 * Owns: the pass over every file that scrub, repair and rebuild make
 * (visit: each file through the inode table, its rows ROWS_PER_STEP at a
 * time through stripe.c on the parity levels or data.c on the mirrors),
 * the scrub's findings (mismatches, damaged names, two files with one
 * identity: the set of identities seen), and the resync after a crash
 * (tfs_maint_resync).  The job that runs a pass, its progress and pace,
 * are maint.c's; the member side of a rebuild is rebuild.c's.
 *
 * Invariants:
 *  1. Maintenance reaches files through the inode table (walk.c) and takes
 *     the same row locks as writes (marks.c invariant 1), so it runs while
 *     applications do I/O.
 *  2. Resync after a crash (tfs_maint_resync) recomputes the parity of
 *     every row of every region marked in the journal before the array
 *     serves a request.
 *  3. Scrub goes on past damage and lists it: a name that is not what the
 *     array expects on a member (health.c invariant 5) and two files with
 *     one identity (inode.c invariant 5; it keeps a set of the identities
 *     seen).  A rebuild stops at such a file instead: it cannot place
 *     the file's data without its identity.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tierfs/hash.h"
#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/maint.h"
#include "tierfs/ns.h"
#include "tierfs/raid.h"
#include "tierfs/walk.h"
#include "tierfs/scratch.h"
#include "raid_i.h"

#define ROWS_PER_STEP 16

/* ------------------------------------------------------------------ */
/* Per file                                                            */
/* ------------------------------------------------------------------ */

struct file_job {
	struct tfs_fs *fs;
	struct tfs_inode *in;
	char path[256];
};

static void report(void *arg, uint64_t fid, uint64_t off, int bad)
{
	struct file_job *fj = arg;
	char line[400];
	int l;

	/* "PATH OFFSET", and " member K" when the level located the culprit */
	if (bad >= 0)
		l = snprintf(line, sizeof(line), "%s %" PRIu64 " member %d\n", fj->path, off, bad);
	else
		l = snprintf(line, sizeof(line), "%s %" PRIu64 "\n", fj->path, off);
	tfs_warn("scrub: file '%s' (fid %" PRIu64 ") offset %" PRIu64 ": copies or parity "
		 "disagree%s", fj->path, fid, off, bad >= 0 ? " (one member at fault)" : "");
	r_maint_found(fj->fs, line, l);
}

/* A name scrub could not check: "PATH damaged: why". */
static void report_damaged(struct tfs_fs *fs, const char *path, const char *why)
{
	char line[400];
	int l = snprintf(line, sizeof(line), "%s damaged: %s\n", path, why);

	tfs_warn("scrub: '%s' is damaged: %s", path, why);
	r_maint_found(fs, line, l);
}

/* Run op over rows [r0, r1] of an open file (tfs_row_bytes each),
 * ROWS_PER_STEP at a time: parity rows through stripe.c, chunks on the
 * mirror levels through data.c.  count: add to the job's progress. */
static int rows_op(struct tfs_fs *fs, struct tfs_inode *in, uint64_t r0, uint64_t r1,
		   enum tfs_stripe_op op, struct file_job *fj, bool count)
{
	uint64_t rb = tfs_row_bytes(fs);
	int rc = 0;

	for (uint64_t r = r0; r <= r1 && rc == 0 && !r_maint_cancelled(fs); r += ROWS_PER_STEP) {
		uint64_t e = r1 - r >= ROWS_PER_STEP ? r + ROWS_PER_STEP - 1 : r1;

		rc = tfs_layout_nparity(&fs->layout)
		     ? tfs_stripe_rows(fs, in, r, e, op, fj ? report : NULL, fj)
		     : tfs_data_maint(fs, in, r * rb, (e - r + 1) * rb, op, fj ? report : NULL, fj);
		if (count)
			r_maint_progress(fs, (e - r + 1) * rb);
	}
	tfs_scratch_trim();	/* a file done: its rows' scratch goes back */
	/* a file cut short must not count as done */
	return rc == 0 && r_maint_cancelled(fs) ? -ECANCELED : rc;
}

/* Run op over the whole of an open file. */
static int file_op(struct tfs_fs *fs, struct tfs_inode *in, enum tfs_stripe_op op,
		   struct file_job *fj)
{
	uint64_t rb = tfs_row_bytes(fs), size;
	int rc = tfs_ns_load_file(fs, in);

	if (rc)
		return rc;
	pthread_mutex_lock(&in->lock);
	size = in->size;
	pthread_mutex_unlock(&in->lock);
	return size ? rows_op(fs, in, 0, (size - 1) / rb, op, fj, true) : 0;
}

struct walk_arg {
	struct tfs_fs *fs;
	enum tfs_stripe_op op;
	uint64_t redone;	/* rebuild: files done in this walk */
	int err;
	/* scrub: the identities seen (open addressing, 0 = empty), so that
	 * two files with one identity are found even when the inode table
	 * no longer holds the first (inode.c invariant 5): 16 bytes per file
	 * at most, for the length of a scrub */
	uint64_t *seen;
	size_t nseen, cap;
};

/* Add fid to the set: 1 if it was there already, 0 if added, -ENOMEM. */
static int seen_add(struct walk_arg *wa, uint64_t fid)
{
	size_t i;

	if (2 * (wa->nseen + 1) > wa->cap) {
		size_t cap = wa->cap ? wa->cap * 2 : 1024;
		uint64_t *t = calloc(cap, sizeof(*t)), *old = wa->seen;

		if (!t)
			return -ENOMEM;
		for (size_t j = 0; j < wa->cap; j++) {
			if (!old[j])
				continue;
			for (i = tfs_mix64(old[j]) & (cap - 1); t[i]; i = (i + 1) & (cap - 1))
				;
			t[i] = old[j];
		}
		free(old);
		wa->seen = t;
		wa->cap = cap;
	}
	for (i = tfs_mix64(fid) & (wa->cap - 1); wa->seen[i]; i = (i + 1) & (wa->cap - 1))
		if (wa->seen[i] == fid)
			return 1;
	wa->seen[i] = fid;
	wa->nseen++;
	return 0;
}

static void walk_damaged(void *arg, const char *path)
{
	struct walk_arg *wa = arg;

	report_damaged(wa->fs, path, "a name on a member is not what the array expects "
		       "(see the log)");
}

static void file_path(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len)
{
	struct tfs_loc loc;

	if (tfs_inode_loc(fs, in, &loc) == 0) {
		char *p = tfs_loc_path(fs, &loc);

		snprintf(buf, len, "%s", p ? p : loc.name);
		free(p);
		tfs_loc_put(fs, &loc);
	}
}

static int visit(void *arg, struct tfs_inode *in, const struct stat *st)
{
	struct walk_arg *wa = arg;
	struct tfs_fs *fs = wa->fs;
	struct file_job fj = { fs, in, "" };
	uint64_t fid;
	int rc;

	if (r_maint_cancelled(fs))
		return -ECANCELED;
	rc = tfs_ns_open(fs, in);
	if (rc == -EUCLEAN && wa->op != TFS_STRIPE_REBUILD) {
		file_path(fs, in, fj.path, sizeof(fj.path));
		report_damaged(fs, fj.path, in->fid_dup ? "another file has its identity"
							: "a member's copy is not a file");
		return 0;
	}
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	rc = tfs_ns_load_file(fs, in);
	fid = in->fid;
	if (rc == 0 && wa->op != TFS_STRIPE_REBUILD && fid &&
	    (rc = seen_add(wa, fid)) == 1) {
		file_path(fs, in, fj.path, sizeof(fj.path));
		report_damaged(fs, fj.path, "another file has its identity");
		tfs_ns_release(fs, in);
		return 0;
	}
	if (rc == 0 && wa->op == TFS_STRIPE_REBUILD &&
	    tfs_meta_set_has(fs->meta, TFS_SET_REBUILT, fid, 0) == 1) {
		tfs_ns_release(fs, in);
		return 0;
	}
	file_path(fs, in, fj.path, sizeof(fj.path));
	r_maint_file(fs, fj.path);
	if (rc == 0)
		rc = file_op(fs, in, wa->op, &fj);
	/* the size record too (ofile.c invariant 1): the namespace copy took the
	 * primary's, which a close between the copy and state R may have
	 * changed without reaching this member */
	if (rc == 0 && wa->op == TFS_STRIPE_REBUILD)
		rc = tfs_ns_save_size(fs, in, true);
	if (rc == 0 && wa->op == TFS_STRIPE_REBUILD) {
		rc = tfs_meta_set_put(fs->meta, TFS_SET_REBUILT, fid, 0);
		wa->redone++;
	}
	tfs_ns_release(fs, in);
	if (rc == -EUCLEAN && wa->op != TFS_STRIPE_REBUILD) {
		report_damaged(fs, fj.path, "a member's copy is not a file");
		return 0;
	}
	if (rc && rc != -ECANCELED)
		tfs_err("%s of file '%s': %s", wa->op == TFS_STRIPE_REBUILD ? "rebuild" : "scrub",
			fj.path, strerror(-rc));
	return rc;
}

int r_scrub_pass(struct tfs_fs *fs, enum tfs_stripe_op op)
{
	struct walk_arg wa = { fs, op, 0, 0, NULL, 0, 0 };
	int rc;

	rc = tfs_walk_files_past_damage(fs, visit, walk_damaged, &wa);
	free(wa.seen);
	return rc;
}

int r_rebuild_pass(struct tfs_fs *fs, uint64_t *redone)
{
	struct walk_arg wa = { fs, TFS_STRIPE_REBUILD, 0, 0, NULL, 0, 0 };
	int rc = tfs_walk_files(fs, visit, &wa);

	*redone = wa.redone;
	return rc;
}

/* ------------------------------------------------------------------ */
/* Resync after a crash                                                */
/* ------------------------------------------------------------------ */

struct resync {
	struct tfs_fs *fs;
	uint64_t (*mark)[2];
	size_t n, cap;
	uint64_t rows;
};

static int collect_mark(void *arg, uint64_t fid, uint64_t region)
{
	struct resync *rs = arg;

	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 64;
		void *p = realloc(rs->mark, cap * sizeof(*rs->mark));

		if (!p)
			return -ENOMEM;
		rs->mark = p;
		rs->cap = cap;
	}
	rs->mark[rs->n][0] = fid;
	rs->mark[rs->n++][1] = region;
	return 0;
}

static int resync_file(void *arg, struct tfs_inode *in, const struct stat *st)
{
	struct resync *rs = arg;
	struct tfs_fs *fs = rs->fs;
	uint64_t rb = tfs_row_bytes(fs), region = tfs_mark_rows(fs);
	int rc = tfs_ns_open(fs, in);

	if (rc)
		return 0;
	rc = tfs_ns_load_file(fs, in);
	for (size_t i = 0; i < rs->n && rc == 0 && in->size; i++) {
		uint64_t last = (in->size - 1) / rb, r0 = rs->mark[i][1] * region;
		uint64_t r1 = r0 + region - 1 < last ? r0 + region - 1 : last;

		if (rs->mark[i][0] != in->fid % TFS_MARK_BUCKETS || r0 > last)
			continue;
		/* parity recomputed; mirrors: the copies made equal to the first
		 * in sync */
		rc = rows_op(fs, in, r0, r1, tfs_layout_nparity(&fs->layout) ? TFS_STRIPE_RESYNC
									       : TFS_STRIPE_REPAIR,
			     NULL, false);
		rs->rows += r1 - r0 + 1;
	}
	tfs_ns_release(fs, in);
	return rc == -EBUSY ? 0 : rc;
}

int tfs_maint_resync(struct tfs_fs *fs)
{
	struct resync rs = { fs, NULL, 0, 0, 0 };
	int rc;

	if (!fs->stripes)
		return 0;
	rc = tfs_meta_set_foreach(fs->meta, TFS_SET_MARK, collect_mark, &rs);
	if (rc || rs.n == 0) {
		free(rs.mark);
		return rc;
	}
	tfs_warn("recovery: %zu region(s) had writes in flight; resynchronising them", rs.n);
	for (uint32_t k = 0; k < fs->n; k++)
		if (!tfs_m_readable(fs, k))
			tfs_err("recovery: member %u is not in sync, so rows written when the "
				"daemon stopped cannot be checked (the RAID write hole on a "
				"degraded array)", k);
	rc = tfs_walk_files(fs, resync_file, &rs);
	if (rc == 0) {
		rc = tfs_meta_set_clear(fs->meta, TFS_SET_MARK);
		if (rc == 0)
			rc = tfs_meta_sync(fs->meta);
		tfs_warn("recovery: %" PRIu64 " row(s) resynchronised", rs.rows);
	}
	free(rs.mark);
	return rc;
}
