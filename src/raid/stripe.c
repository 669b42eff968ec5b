/* stripe.c - file data on the parity levels (RAID5, RAID6).
 *
 * Owns: turning one logical request on a parity level into member reads,
 * parity arithmetic (parity.c) and member writes; the row locks; the
 * write-intent marks that close the write hole.
 *
 * A row (stripe) of a file is ndata data chunks plus nparity parity chunks
 * at the same member offset (layout.c).  For every row and every in-chunk
 * offset x, P[x] is the xor and Q[x] the GF(2^8) syndrome of the data
 * chunks' bytes at x, where bytes past a member file's end count as zeros.
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
 *     in a marked bucket (maint.c tfs_maint_resync).
 *  3. Per row, a write reads either what it overwrites plus the parity
 *     (read-modify-write) or what it does not overwrite (reconstruct-
 *     write), whichever is fewer member reads and possible with the members
 *     in sync; a write covering whole rows reads nothing.  A degraded row
 *     that allows neither reads everything left, reconstructs what is
 *     missing and recomputes the parity.  All reads of a request go to the
 *     members in one batch, then all writes in a second.
 *  4. A member error during the reads fails the member and the request is
 *     planned again; during the writes it fails the member and the write
 *     stands, because the parity written covers the data that member lost.
 *  5. A write refused for space (ENOSPC, EDQUOT: not a member error) never
 *     leaves a row whose parity disagrees with its data: on members short
 *     of space the write's ranges are allocated first and a refusal fails
 *     the request before any member write (data.c invariant 6); a member
 *     write refused anyway has the rows' parity recomputed from what the
 *     data members hold, rows still locked and marked (write_refused); if
 *     that fails too, the rows' marks are kept for the next mount's resync
 *     (tfs_marks_keep), and the error says so.
 *  6. A mark is durable (in the journal and synced) before a write relies
 *     on it; the journal refusing (ENOSPC, EIO) fails the write with that
 *     error before any member is written.  A mark is deleted from the
 *     journal only after syncfs of every member, while no write holds it:
 *     a writer of a mark being deleted waits, then marks the region again.
 *  7. A planning pass (read_rows, write_rows, rows_read_all) takes one view
 *     of which members are in sync (req_view) and every decision of the
 *     pass, from what to read to what to recover, uses it: a member coming
 *     into sync meanwhile (a rebuild ending) is used from the next pass
 *     on.  Looking at the live states after the reads once found member 0
 *     in sync, recovered nothing, and returned what the scratch held.
 *     A member failing meanwhile fails a read, which plans again.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/ns.h"
#include "tierfs/raid.h"
#include "tierfs/parity.h"
#include "tierfs/scratch.h"
#include "tierfs/super.h"

#define ROW_LOCKS    TFS_ROW_LOCKS
#define REGION_BYTES (1ull << 30)	/* logical bytes a write-intent mark covers */
#define MARK_IDLE_NS (2ull * 1000000000ull)
#define MARK_SLOTS   1024
#define BLK_ALIGN    4096		/* scratch blocks: O_DIRECT member requests use them */

/* How a row is written (invariant 3). */
enum { M_FULL, M_RMW, M_RCW, M_DEGRADED };

struct mark {
	uint64_t fid, region;
	bool durable;		/* in the journal and synced */
	bool syncing;		/* a writer is making it durable */
	bool clearing;		/* the cleaner is deleting it from the journal */
	bool keep;		/* until the next mount's resync (invariant 5) */
	unsigned users;		/* writes in flight */
	uint64_t idle_since;	/* ns, when users dropped to 0 */
	struct mark *next;
	struct mark *cnext;	/* marks_clear's list */
};

struct tfs_stripes {
	pthread_mutex_t row_lock[ROW_LOCKS];
	pthread_mutex_t mlock;		/* marks */
	struct mark *marks[MARK_SLOTS];	/* hash chains by (bucket, region) */
	pthread_t cleaner;
	pthread_cond_t cond;
	pthread_cond_t synced;		/* a new mark became durable */
	bool stop, cleaner_running;
	int journal_err;		/* the journal's last refusal, logged once */
	uint64_t region_rows;
	/* statistics (user.tierfs.status): rows written per mode, and the
	 * member requests writes of parity rows cost */
	_Atomic uint64_t rows[4], reads, writes;
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
static unsigned rows_lock(struct tfs_stripes *s, uint64_t fid, uint64_t r0, uint64_t r1,
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

static void rows_unlock(struct tfs_stripes *s, const unsigned *held, unsigned n)
{
	while (n-- > 0)
		pthread_mutex_unlock(&s->row_lock[held[n]]);
}

unsigned tfs_rows_lock(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1, unsigned *held)
{
	return rows_lock(fs->stripes, fid, r0, r1, held);
}

void tfs_rows_unlock(struct tfs_fs *fs, const unsigned *held, unsigned n)
{
	rows_unlock(fs->stripes, held, n);
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
static void marks_release(struct tfs_stripes *s, uint64_t fid, uint64_t g0, uint64_t g1)
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
		marks_release(s, fid, g0, g - 1);
	pthread_mutex_unlock(&s->mlock);
	return rc;
}

void tfs_marks_put(struct tfs_fs *fs, uint64_t fid, uint64_t r0, uint64_t r1)
{
	struct tfs_stripes *s = fs->stripes;

	fid %= TFS_MARK_BUCKETS;
	pthread_mutex_lock(&s->mlock);
	marks_release(s, fid, r0 / s->region_rows, r1 / s->region_rows);
	pthread_mutex_unlock(&s->mlock);
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
 * invariant 5) stays for the next mount's resync. */
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

int tfs_stripe_stats(struct tfs_fs *fs, char *buf, size_t len)
{
	struct tfs_stripes *s = fs->stripes;

	if (!s || !tfs_layout_nparity(&fs->layout))
		return 0;
	return snprintf(buf, len, "stripe.rows_full=%" PRIu64 "\nstripe.rows_rmw=%" PRIu64
			"\nstripe.rows_rcw=%" PRIu64 "\nstripe.rows_degraded=%" PRIu64
			"\nstripe.member_reads=%" PRIu64 "\nstripe.member_writes=%" PRIu64 "\n",
			(uint64_t)s->rows[M_FULL], (uint64_t)s->rows[M_RMW], (uint64_t)s->rows[M_RCW],
			(uint64_t)s->rows[M_DEGRADED], (uint64_t)s->reads, (uint64_t)s->writes);
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

/* ------------------------------------------------------------------ */
/* Planning                                                            */
/* ------------------------------------------------------------------ */

/* One row of a request. */
struct row {
	uint64_t row;
	uint32_t a, b;				/* in-chunk span the row's work covers */
	int mode;
	uint32_t member[TFS_MAX_MEMBERS];	/* by position: data 0..nd-1, P, Q */
	uint32_t cs[TFS_MAX_MEMBERS], ce[TFS_MAX_MEMBERS];	/* covered part of data i */
	const char *src[TFS_MAX_MEMBERS];	/* new bytes for [cs, ce) */
	char *blk[TFS_MAX_MEMBERS];		/* span-sized buffers */
	uint32_t fix;				/* positions to write back (whole rows) */
	uint64_t rowlen;			/* whole rows: bytes of the file in the row */
};

struct req {
	struct tfs_fs *fs;
	struct tfs_inode *in;
	uint32_t rot, nd, np, npos;
	uint64_t C;
	bool direct;
	bool in_locked;			/* caller holds in->lock (truncate) */
	struct row *rows;
	unsigned nrows;
	struct tfs_mio *v;
	unsigned nv, capv;
	unsigned nreads;		/* reads the last planning queued */
	char *mem;
	size_t memcap, memused;
	int *fd;			/* per member, -1 unopened */
	uint32_t insync;		/* members in sync when this pass was planned (invariant 7) */
};

/* A request's rows, member requests and blocks are the thread's scratch
 * (scratch.c: kept between requests up to TFS_SCRATCH_KEEP, freed at
 * thread exit); a nested request (write_refused) reuses them. */
static int req_mem(struct req *q, size_t mem)
{
	q->mem = mem ? tfs_scratch(TFS_SCR_STRIPE, mem) : NULL;
	if (mem && !q->mem)
		return -ENOMEM;
	q->memcap = mem;
	q->memused = 0;
	return 0;
}

/* Scratch for rows [0, nrows) already planned: per position, the span. */
static int req_mem_rows(struct req *q, unsigned nrows)
{
	size_t mem = 0;

	for (unsigned k = 0; k < nrows; k++)
		mem += (size_t)(q->npos + q->np) * (q->rows[k].b - q->rows[k].a + BLK_ALIGN);
	return req_mem(q, mem);
}

static int req_setup(struct req *q, unsigned nrows, unsigned nv, size_t mem)
{
	q->rows = tfs_scratch_array(TFS_SCR_ROWS, nrows, sizeof(*q->rows));
	q->v = tfs_scratch_array(TFS_SCR_SVEC, nv, sizeof(*q->v));
	if (!q->rows || !q->v)
		return -ENOMEM;
	q->capv = nv;
	q->nv = 0;
	return req_mem(q, mem);
}

static char *req_buf(struct req *q, size_t len)
{
	char *p = q->mem + q->memused;

	q->memused += (len + BLK_ALIGN - 1) & ~(size_t)(BLK_ALIGN - 1);
	if (q->memused > q->memcap) {	/* a sizing bug: never write past it */
		tfs_err("stripe scratch overrun (%zu of %zu bytes)", q->memused, q->memcap);
		abort();
	}
	return p;
}

static int mfd(struct req *q, uint32_t member)
{
	int fd;

	if (!q->in_locked)
		return tfs_ns_member_fd(q->fs, q->in, member, q->direct);
	/* the caller holds in->lock and opened every member file */
	fd = q->in->of->fd[member];
	return fd >= 0 ? fd : -ENOENT;
}

static int add_io(struct req *q, uint8_t op, uint32_t member, void *buf, uint64_t len,
		  uint64_t moff)
{
	int fd;

	if (len == 0)
		return 0;
	if (q->nv == q->capv) {	/* a sizing bug: never write past the array */
		tfs_err("stripe request array overrun (%u entries)", q->capv);
		return -EOVERFLOW;
	}
	fd = mfd(q, member);
	/* a member being rebuilt lacks files unlinked before it joined */
	if (fd == -ENOENT && tfs_mstate(q->fs, member) == TFS_M_REBUILD)
		return 0;
	if (fd < 0)
		return fd;
	q->v[q->nv++] = (struct tfs_mio){ .member = member, .op = op, .fd = fd, .buf = buf,
					   .len = (uint32_t)len, .off = moff };
	return 0;
}

/* Submit the batch; zero what reads found past a member file's end.
 * Returns 0, -EAGAIN if a member failed (replan), or -errno. */
static int req_run(struct req *q, bool reads)
{
	struct tfs_fs *fs = q->fs;
	bool failed = false;
	int rc = q->nv ? OPS(fs)->submit(BE(fs), q->v, q->nv) : 0;

	for (unsigned i = 0; i < q->nv && rc == 0; i++) {
		struct tfs_mio *m = &q->v[i];

		if (m->res == -EINVAL && q->direct) {	/* O_DIRECT refused: buffered */
			m->fd = tfs_ns_member_fd(fs, q->in, m->member, false);
			rc = m->fd < 0 ? m->fd : OPS(fs)->submit(BE(fs), m, 1);
			if (rc)
				break;
		}
		if (m->res >= 0) {
			if (m->op == TFS_MIO_READ && (uint64_t)m->res < m->len)
				memset((char *)m->buf + m->res, 0, m->len - (size_t)m->res);
			continue;
		}
		if (tfs_member_error((int)m->res) &&
		    tfs_member_fail(fs, m->member, (int)m->res, reads ? "read" : "write"))
			failed = true;
		else
			rc = (int)m->res;
	}
	q->nv = 0;
	if (rc)
		return rc;
	return failed && reads ? -EAGAIN : 0;
}

static bool any_unreadable(struct tfs_fs *fs)
{
	for (uint32_t k = 0; k < fs->n; k++)
		if (!tfs_m_readable(fs, k))
			return true;
	return false;
}

/* Fill the geometry of row r and the covered part of each data chunk for
 * logical [off, end). */
static void row_init(struct req *q, struct row *rw, uint64_t r, uint64_t off, uint64_t end,
		     const char *src)
{
	uint64_t rs = r * q->nd * q->C;

	rw->row = r;
	rw->a = (uint32_t)q->C;
	rw->b = 0;
	for (uint32_t pos = 0; pos < q->npos; pos++)
		rw->member[pos] = tfs_layout_row_member(&q->fs->layout, q->rot, r, pos);
	for (uint32_t i = 0; i < q->nd; i++) {
		uint64_t cs = rs + i * q->C, ce = cs + q->C;
		uint64_t s = off > cs ? off : cs, e = end < ce ? end : ce;

		if (s >= e) {
			rw->cs[i] = rw->ce[i] = 0;
			rw->src[i] = NULL;
			continue;
		}
		rw->cs[i] = (uint32_t)(s - cs);
		rw->ce[i] = (uint32_t)(e - cs);
		rw->src[i] = src ? src + (s - off) : NULL;
		if (rw->cs[i] < rw->a)
			rw->a = rw->cs[i];
		if (rw->ce[i] > rw->b)
			rw->b = rw->ce[i];
	}
}

/* Take the view of the members a planning pass uses from its first
 * decision to its last (invariant 7). */
static void req_view(struct req *q)
{
	q->insync = 0;
	for (uint32_t k = 0; k < q->fs->n; k++)
		if (tfs_m_readable(q->fs, k))
			q->insync |= 1u << k;
}

static bool readable(struct req *q, struct row *rw, uint32_t pos)
{
	return (q->insync >> rw->member[pos]) & 1u;
}

static bool writable(struct req *q, struct row *rw, uint32_t pos)
{
	return tfs_m_writable(q->fs, rw->member[pos]);
}

/* Choose how to write row rw (invariant 3). */
static int row_mode(struct req *q, struct row *rw)
{
	unsigned rmw = 0, rcw = 0;
	bool rmw_ok = true, rcw_ok = true, full = rw->a == 0 && rw->b == q->C;

	for (uint32_t i = 0; i < q->nd; i++) {
		bool touched = rw->ce[i] > rw->cs[i];
		bool whole = rw->cs[i] <= rw->a && rw->ce[i] >= rw->b;

		full = full && whole;
		if (touched) {
			rmw++;
			rmw_ok = rmw_ok && readable(q, rw, i);
		}
		if (!whole) {
			rcw += 1 + (touched && rw->cs[i] > rw->a && rw->ce[i] < rw->b);
			rcw_ok = rcw_ok && readable(q, rw, i);
		}
	}
	for (uint32_t j = 0; j < q->np; j++) {
		rmw += readable(q, rw, q->nd + j);
		/* parity on a member being rebuilt holds nothing to modify yet:
		 * it must be computed whole */
		if (!readable(q, rw, q->nd + j) && writable(q, rw, q->nd + j))
			rmw_ok = false;
	}
	if (full)
		return M_FULL;
	if (rmw_ok && (!rcw_ok || rmw <= rcw))
		return M_RMW;
	if (rcw_ok)
		return M_RCW;
	return M_DEGRADED;
}

static uint64_t moff_of(struct req *q, struct row *rw, uint32_t x)
{
	return rw->row * q->C + x;
}

/* Queue the reads row rw's mode needs. */
static int row_reads(struct req *q, struct row *rw)
{
	uint32_t span = rw->b - rw->a;
	int rc = 0;

	for (uint32_t pos = 0; pos < q->npos && rc == 0; pos++) {
		bool data = pos < q->nd;
		bool touched = data && rw->ce[pos] > rw->cs[pos];

		rw->blk[pos] = NULL;
		switch (rw->mode) {
		case M_FULL:
			if (!data)
				rw->blk[pos] = req_buf(q, span);
			break;
		case M_RMW:
			if (touched) {	/* old bytes of what is overwritten */
				rw->blk[pos] = req_buf(q, span);
				rc = add_io(q, TFS_MIO_READ, rw->member[pos],
					    rw->blk[pos] + (rw->cs[pos] - rw->a),
					    rw->ce[pos] - rw->cs[pos], moff_of(q, rw, rw->cs[pos]));
			} else if (!data) {
				rw->blk[pos] = req_buf(q, span);
				if (readable(q, rw, pos))
					rc = add_io(q, TFS_MIO_READ, rw->member[pos], rw->blk[pos],
						    span, moff_of(q, rw, rw->a));
			}
			break;
		case M_RCW:
			rw->blk[pos] = req_buf(q, span);
			if (!data)
				break;
			if (!touched) {
				rc = add_io(q, TFS_MIO_READ, rw->member[pos], rw->blk[pos], span,
					    moff_of(q, rw, rw->a));
				break;
			}
			rc = add_io(q, TFS_MIO_READ, rw->member[pos], rw->blk[pos],
				    rw->cs[pos] - rw->a, moff_of(q, rw, rw->a));
			if (rc == 0)
				rc = add_io(q, TFS_MIO_READ, rw->member[pos],
					    rw->blk[pos] + (rw->ce[pos] - rw->a), rw->b - rw->ce[pos],
					    moff_of(q, rw, rw->ce[pos]));
			break;
		case M_DEGRADED:
			rw->blk[pos] = req_buf(q, span);
			if (readable(q, rw, pos))
				rc = add_io(q, TFS_MIO_READ, rw->member[pos], rw->blk[pos], span,
					    moff_of(q, rw, rw->a));
			break;
		}
	}
	return rc;
}

/* Rebuild the positions of rw that are not readable from the others. */
static int row_recover(struct req *q, struct row *rw, uint32_t a, uint32_t b)
{
	unsigned miss[2], nmiss = 0;
	void *blk[TFS_MAX_MEMBERS];

	for (uint32_t pos = 0; pos < q->npos; pos++) {
		blk[pos] = rw->blk[pos] + (a - rw->a);
		if (!readable(q, rw, pos)) {
			if (nmiss == q->np)
				return -EIO;	/* more members lost than the level survives */
			miss[nmiss++] = pos;
		}
	}
	return nmiss ? tfs_parity_recover(blk, q->nd, q->np, miss, nmiss, b - a) : 0;
}

/* Compute the new parity of row rw from what the reads brought. */
static int row_compute(struct req *q, struct row *rw)
{
	uint32_t span = rw->b - rw->a;
	void *blk[TFS_MAX_MEMBERS];
	int rc = 0;

	switch (rw->mode) {
	case M_RMW:
		for (uint32_t i = 0; i < q->nd; i++) {
			uint32_t len = rw->ce[i] - rw->cs[i];
			char *old = rw->blk[i] + (rw->cs[i] - rw->a);

			if (!len)
				continue;
			tfs_parity_xor(old, rw->src[i], len);	/* old ^ new: the change */
			tfs_parity_xor(rw->blk[q->nd] + (rw->cs[i] - rw->a), old, len);
			if (q->np == 2)
				tfs_parity_mul_xor(rw->blk[q->nd + 1] + (rw->cs[i] - rw->a), old,
						   tfs_gf_pow2(i), len);
		}
		return 0;
	case M_DEGRADED:
		rc = row_recover(q, rw, rw->a, rw->b);
		if (rc)
			return rc;
		/* overlay the new bytes, then as reconstruct-write */
		__attribute__((fallthrough));
	case M_RCW:
	case M_FULL:
		for (uint32_t i = 0; i < q->nd; i++) {
			if (rw->ce[i] > rw->cs[i] && rw->blk[i])
				memcpy(rw->blk[i] + (rw->cs[i] - rw->a), rw->src[i],
				       rw->ce[i] - rw->cs[i]);
			blk[i] = rw->blk[i] ? rw->blk[i] : (void *)(rw->src[i] - (rw->cs[i] - rw->a));
		}
		for (uint32_t j = 0; j < q->np; j++)
			blk[q->nd + j] = rw->blk[q->nd + j];
		tfs_parity_gen(blk, q->nd, q->np, span);
		return 0;
	}
	return -EINVAL;
}

/* Queue the writes of row rw: new data, then parity, where writable. */
static int row_writes(struct req *q, struct row *rw)
{
	int rc = 0;

	for (uint32_t i = 0; i < q->nd && rc == 0; i++)
		if (rw->ce[i] > rw->cs[i] && writable(q, rw, i))
			rc = add_io(q, TFS_MIO_WRITE, rw->member[i], (void *)rw->src[i],
				    rw->ce[i] - rw->cs[i], moff_of(q, rw, rw->cs[i]));
	for (uint32_t j = 0; j < q->np && rc == 0; j++)
		if (writable(q, rw, q->nd + j))
			rc = add_io(q, TFS_MIO_WRITE, rw->member[q->nd + j], rw->blk[q->nd + j],
				    rw->b - rw->a, moff_of(q, rw, rw->a));
	return rc;
}

static void req_init(struct req *q, struct tfs_fs *fs, struct tfs_inode *in, uint32_t rot,
		     bool direct)
{
	memset(q, 0, sizeof(*q));
	q->fs = fs;
	q->in = in;
	q->rot = rot;
	q->direct = direct;
	q->nd = tfs_layout_ndata(&fs->layout);
	q->np = tfs_layout_nparity(&fs->layout);
	q->npos = q->nd + q->np;
	q->C = fs->layout.chunk;
}

static int rows_fix(struct req *q, uint64_t fid, uint64_t r0, uint64_t r1, uint64_t size,
		    enum tfs_stripe_op op, tfs_stripe_report_fn report, void *arg);

/* A member refused one of the nv writes of rows r0..r1 of a write ending
 * at end (err: ENOSPC, ...; invariant 5).  The others may have landed, so
 * the rows' parity may not match their data: recompute it from what the
 * data members now hold, the rows still locked and marked.  If that fails
 * too, the marks stay for the next mount's resync. */
static void write_refused(struct req *q, unsigned nv, uint64_t r0, uint64_t r1, uint64_t end,
			  int err)
{
	struct tfs_fs *fs = q->fs;
	struct tfs_inode *in = q->in;
	struct req fix;
	uint64_t size;
	int rc;

	for (unsigned i = 0; i < nv; i++)
		if (q->v[i].res < 0 && tfs_space_error((int)q->v[i].res))
			tfs_space_refused(fs, q->v[i].member);
	if (!q->in_locked)
		pthread_mutex_lock(&in->lock);
	size = in->size > end ? in->size : end;
	if (!q->in_locked)
		pthread_mutex_unlock(&in->lock);
	req_init(&fix, fs, in, q->rot, false);
	fix.in_locked = q->in_locked;
	rc = rows_fix(&fix, in->fid, r0, r1, size, TFS_STRIPE_RESYNC, NULL, NULL);
	if (rc == 0)
		return;
	tfs_err("file %" PRIu64 ": a write refused by a member (%s) left rows %" PRIu64
		"-%" PRIu64 " whose parity cannot be recomputed (%s): the next mount resyncs "
		"them", in->fid, strerror(-err), r0, r1, strerror(-rc));
	tfs_marks_keep(fs, in->fid, r0, r1);
}

/* Write [off, off+len) from src; rows locked and marked by the caller. */
static int write_rows(struct req *q, const char *src, size_t len, uint64_t off,
		      uint64_t r0, uint64_t r1)
{
	unsigned nrows = (unsigned)(r1 - r0 + 1);
	int rc;

	for (int tries = 0;; tries++) {
		req_view(q);
		rc = req_setup(q, nrows, nrows * q->npos * 2, 0);
		for (unsigned k = 0; k < nrows && rc == 0; k++)
			row_init(q, &q->rows[k], r0 + k, off, off + len, src);
		if (rc == 0)
			rc = req_mem_rows(q, nrows);
		for (unsigned k = 0; k < nrows && rc == 0; k++) {
			struct row *rw = &q->rows[k];

			rw->mode = row_mode(q, rw);
			if (tries == 0)
				q->fs->stripes->rows[rw->mode]++;
			rc = row_reads(q, rw);
		}
		q->nreads = q->nv;
		if (rc == 0)
			rc = req_run(q, true);
		if (rc != -EAGAIN || tries > (int)q->fs->n)
			break;
	}
	for (unsigned k = 0; k < nrows && rc == 0; k++)
		rc = row_compute(q, &q->rows[k]);
	q->fs->stripes->reads += q->nreads;
	for (unsigned k = 0; k < nrows && rc == 0; k++)
		rc = row_writes(q, &q->rows[k]);
	q->fs->stripes->writes += q->nv;
	if (rc == 0)
		rc = tfs_space_reserve(q->fs, q->v, q->nv);
	if (rc == 0) {
		unsigned nv = q->nv;

		rc = req_run(q, false);
		if (rc)
			write_refused(q, nv, r0, r1, off + len, rc);
	}
	return rc;
}

/* Write [off, off+len) under row locks and write-intent marks. */
static int locked_write(struct req *q, uint64_t fid, const char *buf, size_t len, uint64_t off)
{
	struct tfs_stripes *s = q->fs->stripes;
	unsigned held[ROW_LOCKS], nheld;
	uint64_t rowbytes = q->nd * q->C, r0 = off / rowbytes, r1 = (off + len - 1) / rowbytes;
	int rc;

	nheld = q->in_locked ? 0 : rows_lock(s, fid, r0, r1, held);	/* truncate holds them */
	rc = tfs_marks_get(q->fs, fid, r0, r1);
	if (rc == 0) {
		rc = write_rows(q, buf, len, off, r0, r1);
		tfs_marks_put(q->fs, fid, r0, r1);
	}
	rows_unlock(s, held, nheld);
	return rc;
}

ssize_t tfs_stripe_write(struct tfs_fs *fs, struct tfs_inode *in, uint32_t rot, uint64_t size,
			 bool direct, const void *buf, size_t len, uint64_t off)
{
	struct req q;
	int rc;

	req_init(&q, fs, in, rot, direct);
	/* the identity is fixed once known (file_state loaded it); an
	 * O_DIRECT payload arrives staged aligned (data.c invariant 4) */
	rc = locked_write(&q, in->fid, buf, len, off);
	if (rc == 0)
		tfs_size_grow(in, off + len);
	return rc ? rc : (ssize_t)len;
}

int tfs_stripe_zero(struct tfs_fs *fs, struct tfs_inode *in, bool in_locked, uint64_t off,
		    uint64_t len)
{
	const size_t step = 1u << 20;
	struct req q;
	char *zero = calloc(1, step);
	int rc = zero ? 0 : -ENOMEM;

	req_init(&q, fs, in, in->rot, false);
	q.in_locked = in_locked;
	for (uint64_t pos = off; rc == 0 && pos < off + len; pos += step) {
		size_t l = off + len - pos < step ? (size_t)(off + len - pos) : step;

		rc = locked_write(&q, in->fid, zero, l, pos);
	}
	free(zero);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Reads                                                               */
/* ------------------------------------------------------------------ */

/* Read logical [off, off+len) of rows r0..r1; pieces on members that are
 * not in sync are rebuilt from the rest of their row. */
static int read_rows(struct req *q, char *dst, size_t len, uint64_t off, uint64_t r0,
		     uint64_t r1, bool *degraded)
{
	unsigned nrows = (unsigned)(r1 - r0 + 1);
	int rc;

	/* per row: the data pieces, and for a degraded row every position */
	req_view(q);
	rc = req_setup(q, nrows, nrows * (q->nd + q->npos), 0);
	for (unsigned k = 0; k < nrows && rc == 0; k++)
		row_init(q, &q->rows[k], r0 + k, off, off + len, NULL);
	/* scratch for rebuilding rows, in case a member fails meanwhile */
	if (rc == 0)
		rc = req_mem_rows(q, nrows);
	if (rc)
		return rc;
	*degraded = false;
	for (unsigned k = 0; k < nrows && rc == 0; k++) {
		struct row *rw = &q->rows[k];

		rw->mode = M_FULL;
		for (uint32_t i = 0; i < q->nd && rc == 0; i++) {
			uint32_t l = rw->ce[i] - rw->cs[i];
			char *to = dst + (r0 + k) * q->nd * q->C + i * q->C + rw->cs[i] - off;

			rw->blk[i] = NULL;
			if (l && readable(q, rw, i))
				rc = add_io(q, TFS_MIO_READ, rw->member[i], to, l,
					    moff_of(q, rw, rw->cs[i]));
			else if (l)
				rw->mode = M_DEGRADED;
		}
		if (rw->mode != M_DEGRADED || rc)
			continue;
		*degraded = true;
		for (uint32_t pos = 0; pos < q->npos && rc == 0; pos++) {
			rw->blk[pos] = req_buf(q, rw->b - rw->a);
			if (readable(q, rw, pos))
				rc = add_io(q, TFS_MIO_READ, rw->member[pos], rw->blk[pos],
					    rw->b - rw->a, moff_of(q, rw, rw->a));
		}
	}
	if (rc == 0)
		rc = req_run(q, true);
	for (unsigned k = 0; k < nrows && rc == 0; k++) {
		struct row *rw = &q->rows[k];

		if (rw->mode != M_DEGRADED)
			continue;
		rc = row_recover(q, rw, rw->a, rw->b);
		for (uint32_t i = 0; i < q->nd && rc == 0; i++) {
			uint32_t l = rw->ce[i] - rw->cs[i];
			char *to = dst + (r0 + k) * q->nd * q->C + i * q->C + rw->cs[i] - off;

			if (l && !readable(q, rw, i))
				memcpy(to, rw->blk[i] + (rw->cs[i] - rw->a), l);
		}
	}
	return rc;
}

ssize_t tfs_stripe_read(struct tfs_fs *fs, struct tfs_inode *in, uint32_t rot, uint64_t size,
			bool direct, void *buf, size_t len, uint64_t off)
{
	struct tfs_stripes *s = fs->stripes;
	struct req q;
	unsigned held[ROW_LOCKS], nheld = 0;
	uint64_t rowbytes, r0, r1, fid;
	bool degraded, locked = false;
	int rc;

	if (off >= size || len == 0)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	req_init(&q, fs, in, rot, direct);
	rowbytes = q.nd * q.C;
	r0 = off / rowbytes;
	r1 = (off + len - 1) / rowbytes;
	fid = in->fid;		/* fixed once known (file_state loaded it) */
	for (int tries = 0;; tries++) {
		/* a reconstruction reads whole rows: keep writers out of them */
		if (!locked && any_unreadable(fs)) {
			nheld = rows_lock(s, fid, r0, r1, held);
			locked = true;
		}
		rc = read_rows(&q, buf, len, off, r0, r1, &degraded);
		if (rc == -EAGAIN && tries <= (int)fs->n)
			continue;
		if (rc == 0 && degraded && !locked)
			continue;	/* a member failed meanwhile: read again, locked */
		break;
	}
	if (locked)
		rows_unlock(s, held, nheld);
	return rc ? rc : (ssize_t)len;
}

/* ------------------------------------------------------------------ */
/* Whole rows: resync, check, rebuild                                  */
/* ------------------------------------------------------------------ */

/* Read all positions of rows [r0, r1] of a file of logical size size
 * (only what the file has: up to share), into q's rows, whole chunks. */
static int rows_read_all(struct req *q, uint64_t r0, uint64_t r1, uint64_t size)
{
	unsigned nrows = (unsigned)(r1 - r0 + 1);
	uint64_t rowbytes = q->nd * q->C;
	int rc;

	req_view(q);
	/* whole chunks of every position, and the recomputed parity */
	rc = req_setup(q, nrows, nrows * q->npos,
		       (size_t)nrows * (q->npos + q->np) * ((size_t)q->C + BLK_ALIGN));

	for (unsigned k = 0; k < nrows && rc == 0; k++) {
		struct row *rw = &q->rows[k];
		uint64_t rs = (r0 + k) * rowbytes;
		uint64_t rowlen = size > rs ? size - rs : 0;

		row_init(q, rw, r0 + k, rs, rs + (rowlen < rowbytes ? rowlen : rowbytes), NULL);
		rw->rowlen = rowlen;
		rw->a = 0;
		rw->b = (uint32_t)(rowlen >= q->C ? q->C : rowlen);
		rw->mode = M_DEGRADED;
		for (uint32_t pos = 0; pos < q->npos && rc == 0; pos++) {
			rw->blk[pos] = req_buf(q, q->C);
			memset(rw->blk[pos], 0, q->C);
			if (readable(q, rw, pos) && rw->b)
				rc = add_io(q, TFS_MIO_READ, rw->member[pos], rw->blk[pos], rw->b,
					    moff_of(q, rw, 0));
		}
	}
	if (rc == 0)
		rc = req_run(q, true);
	return rc;
}

/* Decide what to write back of whole row rw (read by rows_read_all):
 * positions go into rw->fix.  Rebuild: the member being rebuilt.  Resync:
 * the parity, recomputed.  Check/repair: compare the stored parity with
 * the data's; report a mismatch; repair rewrites the parity from the data,
 * or on RAID6, when the syndromes point at one data chunk, that chunk. */
static int row_fix(struct req *q, struct row *rw, uint64_t fid, enum tfs_stripe_op op,
		   tfs_stripe_report_fn report, void *arg)
{
	uint32_t span = rw->b;
	void *blk[TFS_MAX_MEMBERS];
	bool match = true;
	int who = -1;

	rw->fix = 0;
	if (span == 0)
		return 0;
	if (op == TFS_STRIPE_REBUILD) {
		int rc = row_recover(q, rw, 0, span);

		/* a hole stays a hole on the new member (sparse files stay
		 * sparse), except in the last row, where the member holding the
		 * last byte must reach its share (layout.c invariant 4) */
		for (uint32_t pos = 0; pos < q->npos && rc == 0; pos++)
			if (!readable(q, rw, pos) &&
			    (rw->rowlen < q->nd * q->C || !tfs_all_zero(rw->blk[pos], span)))
				rw->fix |= 1u << pos;
		return rc;
	}
	for (uint32_t k = 0; k < q->fs->n; k++)
		if (!((q->insync >> k) & 1u))
			return -EBUSY;	/* no redundancy to compare against */
	for (uint32_t pos = 0; pos < q->npos; pos++)
		blk[pos] = pos < q->nd ? rw->blk[pos] : req_buf(q, span);
	tfs_parity_gen(blk, q->nd, q->np, span);
	for (uint32_t j = 0; j < q->np; j++)
		match = match && memcmp(blk[q->nd + j], rw->blk[q->nd + j], span) == 0;
	if (op == TFS_STRIPE_RESYNC || !match) {
		if (!match && q->np == 2) {
			void *all[TFS_MAX_MEMBERS];

			for (uint32_t pos = 0; pos < q->npos; pos++)
				all[pos] = rw->blk[pos];
			who = tfs_parity_locate(all, q->nd, span);
		}
		if (!match && report)
			report(arg, fid, rw->row * q->nd * q->C, who >= 0 ? (int)rw->member[who] : -1);
		if (op == TFS_STRIPE_CHECK)
			return 0;
		if (who >= 0 && who < (int)q->nd) {
			unsigned miss = (unsigned)who;
			uint64_t in_row = (uint64_t)who * q->C, inside;
			void *all[TFS_MAX_MEMBERS];
			int rc;

			for (uint32_t pos = 0; pos < q->npos; pos++)
				all[pos] = rw->blk[pos];
			rw->fix |= 1u << who;
			rc = tfs_parity_recover(all, q->nd, q->np, &miss, 1, span);
			if (rc || rw->rowlen >= in_row + span)
				return rc;
			/* the chunk crosses the file's end, past which every byte
			 * is zero whatever the parity says (a truncate cut them,
			 * and a replayed one leaves the parity covering them):
			 * only what is inside the file is recovered, and the
			 * parity is made to follow */
			inside = rw->rowlen > in_row ? rw->rowlen - in_row : 0;
			memset((char *)rw->blk[who] + inside, 0, span - inside);
			tfs_parity_gen(all, q->nd, q->np, span);
			for (uint32_t j = 0; j < q->np; j++)
				rw->fix |= 1u << (q->nd + j);
			return 0;
		}
		for (uint32_t j = 0; j < q->np; j++) {
			memcpy(rw->blk[q->nd + j], blk[q->nd + j], span);
			rw->fix |= 1u << (q->nd + j);
		}
	}
	return 0;
}

/* Whole rows r0..r1 of a file of logical size size, locked and (but for a
 * check) marked by the caller. */
static int rows_fix(struct req *q, uint64_t fid, uint64_t r0, uint64_t r1, uint64_t size,
		    enum tfs_stripe_op op, tfs_stripe_report_fn report, void *arg)
{
	int rc = 0;

	if (op != TFS_STRIPE_REBUILD && any_unreadable(q->fs))
		return -EBUSY;	/* nothing to check or resync against */
	do {
		rc = rows_read_all(q, r0, r1, size);
	} while (rc == -EAGAIN);
	for (unsigned k = 0; rc == 0 && k <= r1 - r0; k++)
		rc = row_fix(q, &q->rows[k], fid, op, report, arg);
	for (unsigned k = 0; rc == 0 && k <= r1 - r0; k++) {
		struct row *rw = &q->rows[k];

		for (uint32_t pos = 0; pos < q->npos && rc == 0; pos++) {
			/* a data chunk is written only as far as the file goes
			 * (layout.c invariant 4: no member past its share) */
			uint64_t in_row = pos * q->C, len = rw->b;

			if (pos < q->nd)
				len = rw->rowlen <= in_row ? 0 : rw->rowlen - in_row < len
				      ? rw->rowlen - in_row : len;
			if (rw->fix & (1u << pos) && writable(q, rw, pos))
				rc = add_io(q, TFS_MIO_WRITE, rw->member[pos], rw->blk[pos],
					    len, moff_of(q, rw, 0));
		}
	}
	if (rc == 0)
		rc = req_run(q, false);
	return rc;
}

int tfs_stripe_rows(struct tfs_fs *fs, struct tfs_inode *in, uint64_t r0, uint64_t r1,
		    enum tfs_stripe_op op, tfs_stripe_report_fn report, void *arg)
{
	struct tfs_stripes *s = fs->stripes;
	struct req q;
	unsigned held[ROW_LOCKS], nheld;
	uint64_t fid = in->fid, size;	/* identity and rotation never change */
	bool marked = op != TFS_STRIPE_CHECK;
	int rc;

	req_init(&q, fs, in, in->rot, false);
	nheld = rows_lock(s, fid, r0, r1, held);
	/* the size now, not when the caller looked: a truncate may have run */
	pthread_mutex_lock(&in->lock);
	size = in->size;
	pthread_mutex_unlock(&in->lock);
	rc = marked ? tfs_marks_get(fs, fid, r0, r1) : 0;
	if (rc == 0)
		rc = rows_fix(&q, fid, r0, r1, size, op, report, arg);
	else
		marked = false;	/* tfs_marks_get took nothing */
	if (marked)
		tfs_marks_put(fs, fid, r0, r1);
	rows_unlock(s, held, nheld);
	return rc;
}
