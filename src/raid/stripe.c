/* stripe.c - file data on the parity levels (RAID5, RAID6).
 *
 * Owns: turning one logical request on a parity level into member reads,
 * parity arithmetic (parity.c) and member writes: the planner of a
 * request's rows, the write and read paths, the whole-row passes of
 * resync, check, repair and rebuild (tfs_stripe_rows), and the parity
 * rows' counters of the status.  The row locks and write-intent marks
 * the paths take are marks.c's (its invariants 1-3).  The whole-row
 * passes stay here: they run the same planner, and a write refused for
 * space runs one (invariant 3).
 *
 * A row (stripe) of a file is ndata data chunks plus nparity parity chunks
 * at the same member offset (layout.c).  For every row and every in-chunk
 * offset x, P[x] is the xor and Q[x] the GF(2^8) syndrome of the data
 * chunks' bytes at x, where bytes past a member file's end count as zeros.
 *
 * Invariants:
 *  1. Per row, a write reads either what it overwrites plus the parity
 *     (read-modify-write) or what it does not overwrite (reconstruct-
 *     write), whichever is fewer member reads and possible with the members
 *     in sync; a write covering whole rows reads nothing.  A degraded row
 *     that allows neither reads everything left, reconstructs what is
 *     missing and recomputes the parity.  All reads of a request go to the
 *     members in one batch, then all writes in a second.
 *  2. A member error during the reads fails the member and the request is
 *     planned again; during the writes it fails the member and the write
 *     stands, because the parity written covers the data that member lost.
 *  3. A write refused for space (ENOSPC, EDQUOT: not a member error) never
 *     leaves a row whose parity disagrees with its data: on members short
 *     of space the write's ranges are allocated first and a refusal fails
 *     the request before any member write (data.c invariant 6); a member
 *     write refused anyway has the rows' parity recomputed from what the
 *     data members hold, rows still locked and marked (write_refused); if
 *     that fails too, the rows' marks are kept for the next mount's resync
 *     (tfs_marks_keep), and the error says so.
 *  4. A planning pass (read_rows, write_rows, rows_read_all) takes one view
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

#include "tierfs/log.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/ns.h"
#include "tierfs/raid.h"
#include "tierfs/parity.h"
#include "tierfs/scratch.h"
#include "tierfs/super.h"
#include "raid_i.h"

#define BLK_ALIGN    4096		/* scratch blocks: O_DIRECT member requests use them */

/* How a row is written (invariant 1). */
enum { M_FULL, M_RMW, M_RCW, M_DEGRADED };

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
	uint32_t insync;		/* members in sync when this pass was planned (invariant 4) */
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
 * decision to its last (invariant 4). */
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

/* Choose how to write row rw (invariant 1). */
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
 * at end (err: ENOSPC, ...; invariant 3).  The others may have landed, so
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

	nheld = q->in_locked ? 0 : r_rows_lock(s, fid, r0, r1, held);	/* truncate holds them */
	rc = tfs_marks_get(q->fs, fid, r0, r1);
	if (rc == 0) {
		rc = write_rows(q, buf, len, off, r0, r1);
		r_marks_put(s, fid, r0, r1);
	}
	r_rows_unlock(s, held, nheld);
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
			nheld = r_rows_lock(s, fid, r0, r1, held);
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
		r_rows_unlock(s, held, nheld);
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
	nheld = r_rows_lock(s, fid, r0, r1, held);
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
		r_marks_put(s, fid, r0, r1);
	r_rows_unlock(s, held, nheld);
	return rc;
}
