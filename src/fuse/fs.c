/* fs.c - the FUSE front end.
 *
 * Owns: translating low-level FUSE requests into namespace (ns.c) and data
 * (data.c) calls, and the handles the kernel holds.
 *
 * Invariants:
 *  1. Every handler replies exactly once; helpers return 0 or -errno and the
 *     handler turns that into fuse_reply_err(req, -rc).
 *  2. A file handle pins its inode's open member files (tfs_ns_open) until
 *     release, so I/O on an unlinked file keeps working.
 *  3. Permission checks are the kernel's (default_permissions is always
 *     on): tierfs sees only requests the kernel already allowed.
 *  4. A handler that may have grown the thread's scratch (data requests:
 *     read, write, hit, fsync, fallocate, setattr) trims it after its
 *     reply (scratch.c invariant 3): a FUSE worker holds no request's
 *     memory between requests.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tierfs/attrs.h"
#include "tierfs/cache.h"
#include "tierfs/control.h"
#include "tierfs/data.h"
#include "tierfs/defer.h"
#include "tierfs/hitio.h"
#include "tierfs/fuse_fs.h"
#include "tierfs/inode.h"
#include "tierfs/ns.h"
#include "tierfs/raid.h"
#include "tierfs/log.h"
#include "tierfs/scratch.h"
#include "tierfs/transport.h"

struct tfs_fh {
	struct tfs_inode *in;
	bool direct;
	bool sync;		/* O_SYNC / O_DSYNC: sync after each write */
};

struct tfs_dirh {
	DIR *dp;
	off_t offset;
	struct dirent *entry;
};

static struct tfs_fs *FS(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct tfs_inode *INO(fuse_req_t req, fuse_ino_t ino)
{
	return tfs_inode_get(FS(req), ino);
}

static void reply_entry(fuse_req_t req, struct tfs_entry *e, int rc)
{
	struct fuse_entry_param ep;

	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	memset(&ep, 0, sizeof(ep));
	ep.ino = tfs_inode_nodeid(FS(req), e->in);
	ep.attr = e->st;
	ep.attr_timeout = FS(req)->timeout;
	ep.entry_timeout = FS(req)->timeout;
	if (fuse_reply_entry(req, &ep) == -ENOENT)	/* interrupted: undo the lookup */
		tfs_inode_forget(FS(req), e->in, 1);
}

static void tfs_init(void *userdata, struct fuse_conn_info *conn)
{
	/* O_TRUNC arrives as a separate setattr(size=0), which carries the intent */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	/* a write is acknowledged once the daemon has it, never by the kernel
	 * alone: a killed daemon would lose the kernel's dirty pages (DESIGN §3) */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	/* asynchronous requests (O_DIRECT aio, readahead) the kernel keeps in
	 * flight: enough for a QD 256 workload to reach the daemon's threads
	 * (the RAID benchmark found 64 capped it) */
	conn->max_background = 256;
	conn->congestion_threshold = 192;
	conn->time_gran = 1;
	/* libfuse 3.14 ends the session unless init() asks for the same
	 * max_read as the mount option did */
	conn->max_read = ((struct tfs_fs *)userdata)->max_read;
}

static void tfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct tfs_entry e;
	int rc = tfs_ns_lookup(FS(req), INO(req, parent), name, &e);

	if (rc == -ENOENT) {
		/* negative entry: cache the absence like any other entry */
		struct fuse_entry_param ep = { .ino = 0, .entry_timeout = FS(req)->timeout };

		fuse_reply_entry(req, &ep);
		return;
	}
	reply_entry(req, &e, rc);
}

static void tfs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	tfs_inode_forget(FS(req), INO(req, ino), nlookup);
	fuse_reply_none(req);
}

static void tfs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		tfs_inode_forget(FS(req), INO(req, f[i].ino), f[i].nlookup);
	fuse_reply_none(req);
}

static void tfs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int rc = tfs_ns_getattr(FS(req), INO(req, ino), &st);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, FS(req)->timeout);
}

_Static_assert(TFS_ROOT_ID == FUSE_ROOT_ID, "the inode table's root is the kernel's");

/* The kernel's FUSE_SET_ATTR_* as the namespace's TFS_SET_* (ns.h). */
static int ns_set_attr(int to_set)
{
	static const int map[][2] = {
		{ FUSE_SET_ATTR_MODE, TFS_SET_MODE },	{ FUSE_SET_ATTR_UID, TFS_SET_UID },
		{ FUSE_SET_ATTR_GID, TFS_SET_GID },	{ FUSE_SET_ATTR_ATIME, TFS_SET_ATIME },
		{ FUSE_SET_ATTR_MTIME, TFS_SET_MTIME },
		{ FUSE_SET_ATTR_ATIME_NOW, TFS_SET_ATIME_NOW },
		{ FUSE_SET_ATTR_MTIME_NOW, TFS_SET_MTIME_NOW },
	};
	int r = 0;

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (to_set & map[i][0])
			r |= map[i][1];
	return r;
}

static void tfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			struct fuse_file_info *fi)
{
	struct tfs_inode *in = INO(req, ino);
	struct stat st;
	int rc = 0;

	/* a size first: the data path's (the namespace keeps the rest) */
	if (to_set & FUSE_SET_ATTR_SIZE)
		rc = tfs_data_truncate(FS(req), in, (uint64_t)attr->st_size);
	if (rc == 0)
		rc = tfs_ns_setattr(FS(req), in, attr, ns_set_attr(to_set), &st);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, FS(req)->timeout);
	tfs_scratch_trim();	/* a truncate may have rewritten a row */
}

static struct tfs_ctx ctx_of(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);

	return (struct tfs_ctx){ c->uid, c->gid };
}

static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      dev_t rdev, const char *target)
{
	struct tfs_ctx ctx = ctx_of(req);
	struct tfs_entry e;
	int rc = tfs_ns_mknod(FS(req), &ctx, INO(req, parent), name, mode, rdev, target, &e);

	reply_entry(req, &e, rc);
}

static void tfs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      dev_t rdev)
{
	make_node(req, parent, name, mode, rdev, NULL);
}

static void tfs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL);
}

static void tfs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	make_node(req, parent, name, S_IFLNK | 0777, 0, link);
}

static void tfs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -tfs_ns_remove(FS(req), INO(req, parent), name, false));
}

static void tfs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -tfs_ns_remove(FS(req), INO(req, parent), name, true));
}

static void tfs_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		       fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	fuse_reply_err(req, -tfs_ns_rename(FS(req), INO(req, parent), name,
					   INO(req, newparent), newname, flags));
}

static void tfs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct tfs_entry e;
	int rc = tfs_ns_link(FS(req), INO(req, ino), INO(req, newparent), newname, &e);

	reply_entry(req, &e, rc);
}

static void tfs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	int rc = tfs_ns_readlink(FS(req), INO(req, ino), buf, sizeof(buf) - 1);

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	buf[rc] = 0;
	fuse_reply_readlink(req, buf);
}

/* ---- files ---- */

static struct tfs_fh *fh_new(struct tfs_inode *in, int flags)
{
	struct tfs_fh *h = calloc(1, sizeof(*h));

	if (h) {
		h->in = in;
		h->direct = (flags & O_DIRECT) != 0;
		h->sync = (flags & (O_SYNC | O_DSYNC)) != 0;
	}
	return h;
}

static void fi_setup(struct fuse_file_info *fi, struct tfs_fh *h)
{
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->direct_io = h->direct;
	/* every byte passes through the mount: the kernel's pages stay right
	 * from one open to the next (DESIGN §3, the kernel's page cache) */
	fi->keep_cache = !h->direct;
}

static void tfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_inode *in = INO(req, ino);
	struct tfs_fh *h = fh_new(in, fi->flags);
	int rc = h ? tfs_ns_open(FS(req), in) : -ENOMEM;

	if (rc == 0 && (fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) {
		rc = tfs_data_truncate(FS(req), in, 0);
		if (rc)
			tfs_ns_release(FS(req), in);
	}
	if (rc) {
		free(h);
		fuse_reply_err(req, -rc);
		return;
	}
	fi_setup(fi, h);
	if (fuse_reply_open(req, fi) == -ENOENT) {
		tfs_ns_release(FS(req), in);
		free(h);
	}
}

static void tfs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		       struct fuse_file_info *fi)
{
	struct tfs_ctx ctx = ctx_of(req);
	struct tfs_entry e;
	struct fuse_entry_param ep;
	struct tfs_fh *h;
	int rc = tfs_ns_create(FS(req), &ctx, INO(req, parent), name, mode, &e);

	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	h = fh_new(e.in, fi->flags);
	if (!h) {
		tfs_ns_release(FS(req), e.in);
		tfs_inode_forget(FS(req), e.in, 1);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi_setup(fi, h);
	memset(&ep, 0, sizeof(ep));
	ep.ino = tfs_inode_nodeid(FS(req), e.in);
	ep.attr = e.st;
	ep.attr_timeout = ep.entry_timeout = FS(req)->timeout;
	if (fuse_reply_create(req, &ep, fi) == -ENOENT) {
		tfs_ns_release(FS(req), e.in);
		tfs_inode_forget(FS(req), e.in, 1);
		free(h);
	}
}

static struct tfs_fh *FH(struct fuse_file_info *fi)
{
	return (struct tfs_fh *)(uintptr_t)fi->fh;
}

static void read_reply(fuse_req_t req, struct tfs_fh *h, size_t size, off_t off)
{
	void *buf = tfs_iobuf(size);
	ssize_t n = buf ? tfs_data_read(FS(req), h->in, h->direct, buf, size, (uint64_t)off)
			: -ENOMEM;

	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	tfs_scratch_trim();	/* replied: buf is free (invariant 4) */
}

static void write_reply(fuse_req_t req, struct tfs_fh *h, const char *buf, size_t size,
			off_t off)
{
	ssize_t n = tfs_data_write(FS(req), h->in, h->direct, buf, size, (uint64_t)off);

	if (n >= 0 && h->sync) {
		int rc = tfs_data_fsync(FS(req), h->in, true);

		if (rc)
			n = rc;
	}
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
	tfs_scratch_trim();
}

/* A read, write or fsync handed to the miss pool (defer.c).  The handle
 * stays: the kernel sends no release while a request on the file is
 * pending. */
struct io_job {
	fuse_req_t req;
	struct tfs_fh *h;
	size_t size;
	off_t off;
	char *buf;		/* a write's bytes (libfuse's buffer is the worker's) */
	bool datasync;
};

static void read_job(void *arg)
{
	struct io_job *j = arg;

	read_reply(j->req, j->h, j->size, j->off);
	free(j);
}

static void write_job(void *arg)
{
	struct io_job *j = arg;

	write_reply(j->req, j->h, j->buf, j->size, j->off);
	free(j->buf);
	free(j);
}

static struct io_job *io_job(fuse_req_t req, struct tfs_fh *h, size_t size, off_t off,
			     const char *wbuf)
{
	struct io_job *j = malloc(sizeof(*j));

	if (!j)
		return NULL;
	*j = (struct io_job){ .req = req, .h = h, .size = size, .off = off };
	if (wbuf) {
		if (posix_memalign((void **)&j->buf, 4096, size ? size : 1)) {
			free(j);
			return NULL;
		}
		memcpy(j->buf, wbuf, size);
	}
	return j;
}

/* A cache hit read by the I/O thread (hitio.c), answered from there. */
struct hit_req {
	struct tfs_hit_job job;
	fuse_req_t req;
	struct tfs_cache_hit hit;
	bool ring;		/* on the FUSE queue's own ring, not hitio's */
	bool own;		/* job.buf is ours (else the queue entry's) */
};

static void hit_finish(struct tfs_hit_job *job, int err)
{
	struct hit_req *r = (struct hit_req *)((char *)job - offsetof(struct hit_req, job));
	struct tfs_fs *fs = FS(r->req);

	tfs_cache_hit_end(fs, &r->hit, err, true);
	if (!r->ring)
		tfs_hitio_leave(fs->hitio);
	if (err)
		fuse_reply_err(r->req, EIO);
	else
		fuse_reply_buf(r->req, job->buf, job->len);
	if (r->own)
		free(job->buf);
	free(r);
}

/* Hand a begun hit to the I/O thread, or to the ring of the FUSE queue
 * this thread serves (ring); false (nothing done) if out of memory. */
static bool hit_queue(fuse_req_t req, struct tfs_fs *fs, const struct tfs_cache_hit *hit,
		      bool ring)
{
	struct hit_req *r = malloc(sizeof(*r));
	void *buf = ring ? tfs_transport_read_buf(hit->len) : NULL;
	bool own = !buf;

	if (!r || (own && posix_memalign(&buf, 4096, hit->len))) {
		free(r);
		return false;
	}
	r->req = req;
	r->hit = *hit;
	r->ring = ring;
	r->own = own;
	r->job = (struct tfs_hit_job){ .fd = hit->fd, .buf = buf, .len = hit->len,
				       .off = hit->off, .finish = hit_finish };
	if (!ring)
		tfs_hitio_queue(fs->hitio, &r->job);
	else
		tfs_transport_io(&r->job);	/* true: this thread serves a queue */
	return true;
}

/* A hit inside one extent: while other requests are under way, on the
 * ring of the FUSE queue this thread serves (no hand-off at all) or
 * through the I/O thread; alone, read here (the ring's round trip or the
 * hand-off's wake-up costs more than it saves). */
static void hit_reply(fuse_req_t req, struct tfs_fs *fs, const struct tfs_cache_hit *hit)
{
	bool queue = tfs_transport_on_queue();
	bool ring = queue && !tfs_transport_alone();
	bool busy = !queue && fs->hitio && tfs_hitio_enter(fs->hitio);
	void *buf;
	int rc;

	if ((ring || busy) && hit_queue(req, fs, hit, ring))
		return;		/* hit_finish leaves */
	if (!(buf = tfs_transport_read_buf(hit->len)))	/* the answer's own buffer */
		buf = tfs_iobuf(hit->len);
	rc = buf ? tfs_cache_hit_read(fs, hit, buf) : -ENOMEM;
	tfs_cache_hit_end(fs, hit, rc, false);
	if (!queue && fs->hitio)
		tfs_hitio_leave(fs->hitio);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, buf, hit->len);
	tfs_scratch_trim();
}

/* With an SSD tier: a hit inside one extent is served by hit_reply; a
 * read that would wait for the HDDs goes to the miss pool, and this worker
 * back to /dev/fuse.  Without one the workers are the HDD queue, but a
 * FUSE io_uring queue's thread must not wait (transport.h): it hands every
 * read and write to the pool. */
static void tfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct tfs_fh *h = FH(fi);
	struct tfs_fs *fs = FS(req);
	struct tfs_cache_hit hit;
	enum tfs_hit k;
	struct io_job *j;

	if (!fs->cache) {
		if (tfs_transport_on_queue() && (j = io_job(req, h, size, off, NULL)))
			tfs_defer(fs->defer, read_job, j);
		else
			read_reply(req, h, size, off);
		return;
	}
	k = tfs_cache_hit_begin(fs, h->in, h->direct, &hit, size, (uint64_t)off);
	if (k == TFS_HIT) {
		hit_reply(req, fs, &hit);
		return;
	}
	if ((k == TFS_HIT_NO || !tfs_cache_holds(fs, h->in, size, (uint64_t)off)) &&
	    (j = io_job(req, h, size, off, NULL)))
		tfs_defer(fs->defer, read_job, j);
	else
		read_reply(req, h, size, off);
}

/* A write-back write whose SSD write a FUSE queue's ring runs
 * (cache/write.c invariant 7), answered from its completion there. */
struct wring_req {
	struct tfs_hit_job job;
	fuse_req_t req;
	struct tfs_cache_wring *w;
};

static void wring_finish(struct tfs_hit_job *job, int err)
{
	struct wring_req *r = (struct wring_req *)((char *)job - offsetof(struct wring_req, job));
	ssize_t n = tfs_cache_write_end(FS(r->req), r->w, err);

	if (n < 0)
		fuse_reply_err(r->req, (int)-n);
	else
		fuse_reply_write(r->req, (size_t)n);
	free(r);
}

/* Hand a write to the miss pool (its bytes copied: libfuse's buffer is
 * the caller's); false (nothing done) if out of memory. */
static bool write_defer(fuse_req_t req, struct tfs_fs *fs, struct tfs_fh *h, const char *buf,
			size_t size, off_t off)
{
	struct io_job *j = io_job(req, h, size, off, buf);

	if (j)
		tfs_defer(fs->defer, write_job, j);
	return j != NULL;
}

/* A write that does not wait (tfs_write).  On a FUSE io_uring queue its
 * SSD write goes on the queue's ring when other requests are under way
 * and the tier leaves it one, from the request's own bytes (they stay
 * until the answer); a write that would wait for another tier actor goes
 * to the pool (cache/write.c invariant 8: the queue's ring completes the
 * writes they may be waiting for).  On /dev/fuse the worker writes
 * itself: handing the SSD write to hitio's thread cost more than it saved
 * (0.92x, docs/PROFILE.md). */
static void write_now(fuse_req_t req, struct tfs_fs *fs, struct tfs_fh *h, const char *buf,
		      size_t size, off_t off)
{
	struct tfs_cache_wring *w = NULL;
	struct wring_req *r = NULL;
	ssize_t n;

	if (!fs->cache || h->sync || !tfs_transport_on_queue()) {
		write_reply(req, h, buf, size, off);
		return;
	}
	/* alone, the ring's round trip costs more than the write here */
	if (!tfs_transport_alone() && !(r = malloc(sizeof(*r)))) {
		write_reply(req, h, buf, size, off);
		return;
	}
	n = tfs_cache_write_ring(fs, h->in, h->direct, buf, size, (uint64_t)off,
				 TFS_CW_NOWAIT | TFS_CW_STAYS, r ? &w : NULL);
	if (w) {
		*r = (struct wring_req){ .req = req, .w = w };
		r->job = (struct tfs_hit_job){ .write = true, .fd = w->fd, .buf = w->buf,
					       .len = w->len, .off = w->off,
					       .finish = wring_finish };
		tfs_transport_io(&r->job);	/* true: this thread serves a queue */
		return;
	}
	free(r);
	if (n == -EWOULDBLOCK) {
		if (write_defer(req, fs, h, buf, size, off))
			return;
		n = -ENOMEM;
	}
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
	tfs_scratch_trim();
}

static void tfs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		      off_t off, struct fuse_file_info *fi)
{
	struct tfs_fh *h = FH(fi);
	struct tfs_fs *fs = FS(req);
	bool waits = fs->cache ? h->sync || tfs_cache_write_waits(fs, h->in, size, (uint64_t)off)
			       : tfs_transport_on_queue();

	if (!(fs->defer && waits && write_defer(req, fs, h, buf, size, off)))
		write_now(req, fs, h, buf, size, off);
}

static void tfs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	tfs_ns_times_put(FS(req), FH(fi)->in);	/* a close: the time due (attr.c inv. 4) */
	fuse_reply_err(req, 0);
}

static void tfs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fh *h = FH(fi);

	tfs_ns_release(FS(req), h->in);	/* the last close of a file gone drops it (identity.c inv. 2) */
	free(h);
	fuse_reply_err(req, 0);
}

static void fsync_job(void *arg)
{
	struct io_job *j = arg;

	fuse_reply_err(j->req, -tfs_data_fsync(FS(j->req), j->h->in, j->datasync));
	free(j);
}

/* An fsync that may wait for the members (whose HDDs see it as a barrier
 * behind their queues) goes to the miss pool; one that waits for the SSD
 * tier alone (a database's fdatasync of its log, once the tier holds what
 * it wrote) is run here, on /dev/fuse's worker, sparing two hand-offs.  A
 * FUSE io_uring queue's thread must not wait for the tier's durability
 * point (another thread's): always the pool there. */
static void tfs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = FS(req);
	struct io_job *j;

	if (fs->defer && (tfs_transport_on_queue() ||
			  tfs_data_fsync_waits(fs, FH(fi)->in, datasync != 0)) &&
	    (j = io_job(req, FH(fi), 0, 0, NULL))) {
		j->datasync = datasync != 0;
		tfs_defer(fs->defer, fsync_job, j);
		return;
	}
	fuse_reply_err(req, -tfs_data_fsync(fs, FH(fi)->in, datasync != 0));
	tfs_scratch_trim();
}

static void tfs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			  struct fuse_file_info *fi)
{
	if (off < 0 || len <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	fuse_reply_err(req, -tfs_data_fallocate(FS(req), FH(fi)->in, mode, (uint64_t)off,
						(uint64_t)len));
	tfs_scratch_trim();
}

/* ---- directories ---- */

static void tfs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_dirh *d = calloc(1, sizeof(*d));
	int fd, rc = d ? tfs_ns_opendir(FS(req), INO(req, ino), &fd) : -ENOMEM;

	if (rc == 0) {
		d->dp = fdopendir(fd);
		if (!d->dp) {
			rc = -errno;
			close(fd);
		}
	}
	if (rc) {
		free(d);
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		closedir(d->dp);
		free(d);
	}
}

static void tfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
			struct fuse_file_info *fi)
{
	struct tfs_dirh *d = (struct tfs_dirh *)(uintptr_t)fi->fh;
	char *buf = malloc(size), *p = buf;
	size_t rem = size;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (offset != d->offset) {
		seekdir(d->dp, offset);
		d->entry = NULL;
		d->offset = offset;
	}
	for (;;) {
		struct stat st;
		size_t len;

		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dp);
			if (!d->entry) {
				if (errno && rem == size) {
					int e = errno;

					free(buf);
					fuse_reply_err(req, e);
					return;
				}
				break;
			}
		}
		memset(&st, 0, sizeof(st));
		st.st_ino = d->entry->d_ino;
		st.st_mode = (mode_t)d->entry->d_type << 12;
		len = fuse_add_direntry(req, p, rem, d->entry->d_name, &st, d->entry->d_off);
		if (len > rem)
			break;
		p += len;
		rem -= len;
		d->offset = d->entry->d_off;
		d->entry = NULL;
	}
	fuse_reply_buf(req, buf, size - rem);
	free(buf);
}

static void tfs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_dirh *d = (struct tfs_dirh *)(uintptr_t)fi->fh;

	closedir(d->dp);
	free(d);
	fuse_reply_err(req, 0);
}

static void tfs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, -tfs_ns_fsyncdir(FS(req), INO(req, ino)));
}

static void tfs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	int rc = tfs_ns_statfs(FS(req), &sv);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_statfs(req, &sv);
}

/* ---- xattrs ---- */

/* tierfs's own names (user.tierfs.*) are attrs.c's; every other passes
 * through to the members (ns/xattr.c). */
static struct tfs_attr_caller caller(fuse_req_t req, fuse_ino_t ino)
{
	return (struct tfs_attr_caller){ .uid = fuse_req_ctx(req)->uid,
					 .root_node = ino == FUSE_ROOT_ID };
}

static void tfs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			 size_t size, int flags)
{
	struct tfs_attr_caller who = caller(req, ino);

	if (tfs_attr_ours(name))
		fuse_reply_err(req, -tfs_attr_set(FS(req), INO(req, ino), &who, name, value, size));
	else
		fuse_reply_err(req, -tfs_ns_setxattr(FS(req), INO(req, ino), name, value, size,
						     flags));
}

static void reply_xattr(fuse_req_t req, char *buf, size_t size, int rc)
{
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, buf, (size_t)rc);
}

static void tfs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct tfs_attr_caller who = caller(req, ino);
	char *buf = size ? malloc(size) : NULL;
	int rc = size && !buf ? -ENOMEM
		 : tfs_attr_ours(name) ? tfs_attr_get(FS(req), INO(req, ino), &who, name, buf, size)
		 : tfs_ns_getxattr(FS(req), INO(req, ino), name, buf, size);

	reply_xattr(req, buf, size, rc);
	free(buf);
}

static void tfs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct tfs_attr_caller who = caller(req, ino);
	char *buf = size ? malloc(size) : NULL;
	int rc = (size && !buf) ? -ENOMEM
		 : tfs_ns_listxattr(FS(req), INO(req, ino), buf, size, who.uid == 0);

	if (rc >= 0)
		rc = tfs_attr_list(FS(req), INO(req, ino), &who, buf, size, (size_t)rc);
	reply_xattr(req, buf, size, rc);
	free(buf);
}

static void tfs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, -tfs_ns_removexattr(FS(req), INO(req, ino), name));
}

const struct fuse_lowlevel_ops tfs_fuse_ops = {
	.init = tfs_init,
	.lookup = tfs_lookup,
	.forget = tfs_forget,
	.forget_multi = tfs_forget_multi,
	.getattr = tfs_getattr,
	.setattr = tfs_setattr,
	.readlink = tfs_readlink,
	.mknod = tfs_mknod,
	.mkdir = tfs_mkdir,
	.symlink = tfs_symlink,
	.unlink = tfs_unlink,
	.rmdir = tfs_rmdir,
	.rename = tfs_rename,
	.link = tfs_link,
	.open = tfs_open,
	.create = tfs_create,
	.read = tfs_read,
	.write = tfs_write,
	.flush = tfs_flush,
	.release = tfs_release,
	.fsync = tfs_fsync,
	.fallocate = tfs_fallocate,
	.opendir = tfs_opendir,
	.readdir = tfs_readdir,
	.releasedir = tfs_releasedir,
	.fsyncdir = tfs_fsyncdir,
	.statfs = tfs_statfs,
	.setxattr = tfs_setxattr,
	.getxattr = tfs_getxattr,
	.listxattr = tfs_listxattr,
	.removexattr = tfs_removexattr,
};
