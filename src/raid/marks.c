/* marks.c - the row locks and the write-intent marks (every redundant
 * level).
 *
 * Owns: fs->stripes (struct tfs_stripes, raid_i.h) and its set-up; the
 * row locks, a hash of fid and row (rows are parity rows, or chunks on the
 * mirror levels); the write-intent marks that close the write hole, kept
 * in the journal's mark set, and the cleaner thread that deletes idle
 * ones.  The writes under them are stripe.c's (parity rows) and data.c's
 * (mirror chunks); the next mount's resync of the marked regions is
 * scrub.c's tfs_maint_resync.
 *
 * Invariants:
 *  1. Every write of a row holds that row's lock (a hash of fid and row)
 *     from its first read to its last write, so two writers never compute
 *     parity from each other's half-written data.  Degraded reads, rebuild
 *     and scrub take the same locks.  Locks of one request are taken in
 *     ascending order.
 *  2. A row written without all of its data and parity in place would have
 *     parity that disagrees with its data if the daemon dies in the middle
 *     (the write hole).  So before any member write, the row's region is
 *     marked in the journal and the mark is made durable; it is cleared
 *     lazily, once no write has touched the region for a while (md's
 *     write-intent bitmap).  A mark is (fid % TFS_MARK_BUCKETS, region):
 *     files share marks, as md's bitmap bits cover many blocks, so a stream
 *     of new small files costs a synced journal commit per bucket, not per
 *     file.  The next mount resynchronises the marked regions of every file
 *     in a marked bucket (scrub.c tfs_maint_resync).
 *  3. A mark is durable (in the journal and synced) before a write relies
 *     on it; the journal refusing (ENOSPC, EIO) fails the write with that
 *     error before any member is written.  A mark is deleted from the
 *     journal only after syncfs of every member, while no write holds it:
 *     a writer of a mark being deleted waits, then marks the region again.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/raid.h"
#include "raid_i.h"

#define REGION_BYTES (1ull << 30)	/* logical bytes a write-intent mark covers */
#define MARK_IDLE_NS (2ull * 1000000000ull)

struct mark {
	uint64_t fid, region;
	bool durable;		/* in the journal and synced */
	bool syncing;		/* a writer is making it durable */
	bool clearing;		/* the cleaner is deleting it from the journal */
	bool keep;		/* until the next mount's resync (stripe.c invariant 3) */
	unsigned users;		/* writes in flight */
	uint64_t idle_since;	/* ns, when users dropped to 0 */
	struct mark *next;
	struct mark *cnext;	/* marks_clear's list */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* Row locks                                                           */
/* ------------------------------------------------------------------ */

static unsigned lock_of(uint64_t fid, uint64_t row)
{
	return (unsigned)(((fid * 0x9E3779B97F4A7C15ull) ^ (row * 0xC2B2AE3D27D4EB4Full)) >> 54) %
	       ROW_LOCKS;
}

static int cmp_uint(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

/* Lock rows [r0, r1] of fid; the distinct lock numbers go to held[]. */
unsigned r_rows_lock(struct tfs_stripes *s, uint64_t fid, uint64_t r0, uint64_t r1,
		     unsigned *held)
{
	unsigned n = 0, m = 0;

	if (r1 - r0 >= ROW_LOCKS) {
		/* every lock (ROW_LOCKS rows in a row need not hash to all) */
		for (unsigned i = 0; i < ROW_LOCKS; i++)
			held[n++] = i;
	} else {
		for (uint64_t r = r0; r <= r1; r++)
			held[n++] = lock_of(fid, r);
	}
	qsort(held, n, sizeof(*held), cmp_uint);
	for (unsigned i = 0; i < n; i++)
		if (m == 0 || held[m - 1] != held[i])
			held[m++] = held[i];
	for (unsigned i = 0; i < m; i++)
		pthread_mutex_lock(&s->row_lock[held[i]]);
	return m;
}

unsigned tfs_rows_lock(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1, unsigned *held)
{
	return r_rows_lock(fs->stripes, fid, r0, r1, held);
}

void tfs_rows_unlock(struct tfs_fs *fs, const unsigned *held, unsigned n)
{
	r_rows_unlock(fs->stripes, held, n);
}

/* ------------------------------------------------------------------ */
/* Write-intent marks                                                  */
/* ------------------------------------------------------------------ */

/* Log the journal refusing a mark change once, and once when it works
 * again; mlock held.  A full member filesystem is the admin's business
 * (a warning); any other journal error is an error. */
static void journal_result(struct tfs_stripes *s, const char *what, int rc)
{
	if (rc == s->journal_err)
		return;
	if (rc == -ENOSPC || rc == -EDQUOT)
		tfs_warn("%s: journal: %s; writes into regions not marked yet fail with it",
			 what, strerror(-rc));
	else if (rc)
		tfs_err("%s: journal: %s", what, strerror(-rc));
	else
		tfs_info("write-intent marks: the journal takes changes again");
	s->journal_err = rc;
}

static struct mark **mark_slot(struct tfs_stripes *s, uint64_t fid, uint64_t region)
{
	return &s->marks[((fid * 0x9E3779B97F4A7C15ull) ^ (region * 0xC2B2AE3D27D4EB4Full)) >>
			 54 & (MARK_SLOTS - 1)];
}

static struct mark *mark_find(struct tfs_stripes *s, uint64_t fid, uint64_t region)
{
	for (struct mark *m = *mark_slot(s, fid, region); m; m = m->next)
		if (m->fid == fid && m->region == region)
			return m;
	return NULL;
}

/* Make mark m durable (invariant 2), mlock held and m->users counting the
 * caller.  One writer commits and syncs it without mlock, so writers of
 * other regions go on meanwhile; writers of this one wait for that sync
 * (a group commit), or for the cleaner deleting it to finish.  If the
 * journal refuses (ENOSPC, EIO), the writer gets the error and the mark
 * stays not durable: the next writer tries again. */
static int mark_durable(struct tfs_fs *fs, struct mark *m)
{
	struct tfs_stripes *s = fs->stripes;
	int rc;

	while (!m->durable || m->clearing) {
		if (m->syncing || m->clearing) {
			pthread_cond_wait(&s->synced, &s->mlock);
			continue;
		}
		m->syncing = true;
		pthread_mutex_unlock(&s->mlock);
		rc = tfs_meta_set_put(fs->meta, TFS_SET_MARK, m->fid, m->region);
		if (rc == 0)
			rc = tfs_meta_sync(fs->meta);
		pthread_mutex_lock(&s->mlock);
		m->syncing = false;
		m->durable = rc == 0;
		pthread_cond_broadcast(&s->synced);
		journal_result(s, "write-intent mark", rc);
		if (rc)
			return rc;
	}
	return 0;
}

/* Drop this call's use of the marks of regions [g0, g1]. */
void r_marks_release(struct tfs_stripes *s, uint64_t fid, uint64_t g0, uint64_t g1)
{
	uint64_t now = now_ns();

	for (uint64_t g = g0; g <= g1; g++) {
		struct mark *m = mark_find(s, fid, g);

		if (m && --m->users == 0)
			m->idle_since = now;
	}
}

/* Mark the regions of rows [r0, r1] before writing them; -errno (the
 * journal's ENOSPC or EIO) and no mark taken if one cannot be made
 * durable. */
int tfs_marks_get(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1)
{
	struct tfs_stripes *s = fs->stripes;
	uint64_t g0 = r0 / s->region_rows, g;
	int rc = 0;

	fid %= TFS_MARK_BUCKETS;	/* files share marks: see invariant 2 */
	pthread_mutex_lock(&s->mlock);
	for (g = g0; g <= r1 / s->region_rows; g++) {
		struct mark *m = mark_find(s, fid, g);

		if (!m) {
			m = calloc(1, sizeof(*m));
			if (!m) {
				rc = -ENOMEM;
				break;
			}
			m->fid = fid;
			m->region = g;
			m->next = *mark_slot(s, fid, g);
			*mark_slot(s, fid, g) = m;
		}
		m->users++;
		rc = mark_durable(fs, m);
		if (rc) {
			g++;	/* this one is held too */
			break;
		}
	}
	if (rc && g > g0)	/* undo what this call took */
		r_marks_release(s, fid, g0, g - 1);
	pthread_mutex_unlock(&s->mlock);
	return rc;
}

void tfs_marks_put(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1)
{
	r_marks_put(fs->stripes, fid, r0, r1);
}

void tfs_marks_keep(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1)
{
	struct tfs_stripes *s = fs->stripes;

	fid %= TFS_MARK_BUCKETS;
	pthread_mutex_lock(&s->mlock);
	for (uint64_t g = r0 / s->region_rows; g <= r1 / s->region_rows; g++) {
		struct mark *m = mark_find(s, fid, g);

		if (m)
			m->keep = true;
	}
	pthread_mutex_unlock(&s->mlock);
}

/* Take m off its hash chain (mlock held). */
static void mark_unlink(struct tfs_stripes *s, struct mark *m)
{
	struct mark **pp = mark_slot(s, m->fid, m->region);

	while (*pp != m)
		pp = &(*pp)->next;
	*pp = m->next;
}

/* Clear marks idle for at least idle ns.  The members' data must be on
 * stable storage first: a mark is the only record that a row may be torn,
 * so it goes only after syncfs of every member.  The marks are deleted in
 * one journal transaction without mlock; meanwhile they stay in the table
 * as clearing, and a writer of their region waits, then marks it again.  A
 * mark the journal cannot delete (ENOSPC, EIO), or whose rows a member's
 * syncfs could not make durable, stays and is tried again after another
 * idle period; a kept mark (rows a refused write may have left torn,
 * stripe.c invariant 3) stays for the next mount's resync. */
static void marks_clear(struct tfs_fs *fs, uint64_t idle)
{
	struct tfs_stripes *s = fs->stripes;
	struct mark *gone = NULL;
	uint64_t now = now_ns(), (*keys)[2], n = 0;
	int rc = 0;

	pthread_mutex_lock(&s->mlock);
	for (unsigned i = 0; i < MARK_SLOTS; i++) {
		for (struct mark *m = s->marks[i]; m; m = m->next) {
			if (m->users == 0 && !m->keep && !m->clearing &&
			    now - m->idle_since >= idle) {
				m->clearing = true;
				m->cnext = gone;
				gone = m;
				n++;
			}
		}
	}
	pthread_mutex_unlock(&s->mlock);
	if (!gone)
		return;
	keys = malloc(n * sizeof(*keys));
	if (!keys)
		rc = -ENOMEM;
	for (uint32_t k = 0; k < fs->n && rc == 0; k++) {
		int r = tfs_m_writable(fs, k) ? OPS(fs)->syncfs(BE(fs), k) : 0;

		/* a member that loses data fails (if the level survives it) and
		 * its rows no longer count; otherwise the marks stay */
		if (r && !(tfs_member_error(r) && tfs_member_fail(fs, k, r, "syncfs"))) {
			tfs_err("member %u: syncfs: %s; write-intent marks stay", k, strerror(-r));
			rc = r;
		}
	}
	n = 0;
	for (struct mark *m = gone; m && rc == 0; m = m->cnext) {
		keys[n][0] = m->fid;
		keys[n++][1] = m->region;
	}
	if (rc == 0)
		rc = tfs_meta_set_del_many(fs->meta, TFS_SET_MARK, keys, n);
	free(keys);
	pthread_mutex_lock(&s->mlock);
	if (rc != -ENOMEM)
		journal_result(s, "clearing write-intent marks", rc);
	while (gone) {
		struct mark *m = gone;

		gone = m->cnext;
		m->clearing = false;
		m->durable = false;	/* deleted, or perhaps from some copies only */
		m->idle_since = now_ns();
		if (rc == 0 && m->users == 0) {
			mark_unlink(s, m);
			free(m);
		}
	}
	pthread_cond_broadcast(&s->synced);	/* writers waiting for a clearing */
	pthread_mutex_unlock(&s->mlock);
}

static void *cleaner(void *arg)
{
	struct tfs_fs *fs = arg;
	struct tfs_stripes *s = fs->stripes;

	pthread_mutex_lock(&s->mlock);
	while (!s->stop) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&s->cond, &s->mlock, &ts);
		if (s->stop)
			break;
		pthread_mutex_unlock(&s->mlock);
		marks_clear(fs, MARK_IDLE_NS);
		pthread_mutex_lock(&s->mlock);
	}
	pthread_mutex_unlock(&s->mlock);
	return NULL;
}

int tfs_stripe_init(struct tfs_fs *fs)
{
	struct tfs_stripes *s;
	uint64_t rowbytes;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (unsigned i = 0; i < ROW_LOCKS; i++)
		pthread_mutex_init(&s->row_lock[i], NULL);
	pthread_mutex_init(&s->mlock, NULL);
	pthread_cond_init(&s->cond, NULL);
	pthread_cond_init(&s->synced, NULL);
	rowbytes = tfs_row_bytes(fs);
	s->region_rows = REGION_BYTES / rowbytes ? REGION_BYTES / rowbytes : 1;
	fs->stripes = s;
	return 0;
}

int tfs_stripe_start(struct tfs_fs *fs)
{
	struct tfs_stripes *s = fs->stripes;

	if (!s || s->cleaner_running)
		return 0;
	if (pthread_create(&s->cleaner, NULL, cleaner, fs))
		return -EAGAIN;
	s->cleaner_running = true;
	return 0;
}

void tfs_stripe_stop(struct tfs_fs *fs)
{
	struct tfs_stripes *s = fs->stripes;

	if (!s)
		return;
	if (s->cleaner_running) {
		pthread_mutex_lock(&s->mlock);
		s->stop = true;
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->mlock);
		pthread_join(s->cleaner, NULL);
		s->cleaner_running = false;
	}
	if (fs->meta)
		marks_clear(fs, 0);	/* clean unmount: nothing is in flight */
}

uint64_t tfs_mark_rows(struct tfs_fs *fs)
{
	return fs->stripes->region_rows;
}

int tfs_stripe_cut_replayed(struct tfs_fs *fs, uint64_t fid, uint64_t len)
{
	uint64_t rb;

	if (!fs->stripes || !tfs_layout_nparity(&fs->layout) || !(len % (rb = tfs_row_bytes(fs))))
		return 0;
	/* the new last row's parity covered the bytes cut from it: a mark
	 * has the resync after replay recompute it (replay.c invariant 5) */
	return tfs_meta_set_put(fs->meta, TFS_SET_MARK, fid % TFS_MARK_BUCKETS,
				len / rb / fs->stripes->region_rows);
}

uint64_t tfs_stripe_marks(struct tfs_fs *fs)
{
	uint64_t n = 0;

	if (fs->meta && fs->stripes)
		tfs_meta_set_count(fs->meta, TFS_SET_MARK, &n);
	return n;
}
