/* data.c - file data over the layout: read, write, sync, allocate.
 *
 * Owns: turning one logical request into member requests and running them
 * as one batch through the member seam.
 *
 * Invariants:
 *  1. A request is split at placement boundaries (tfs_layout_extent); each
 *     piece becomes one member request per copy.  All pieces of a request go
 *     to the backend in one submit.
 *  2. Reads are clamped to the logical size; bytes past a member file's EOF
 *     but inside the logical size are holes and read as zeros.
 *  3. A write extends only the member files it lands on (layout.c,
 *     invariant 4); the logical size in the inode grows with it.
 *  4. O_DIRECT requests are staged through a per-thread 4K-aligned buffer,
 *     because libfuse hands write payloads at an unaligned address.  A
 *     member that refuses an O_DIRECT transfer (EINVAL: misaligned) gets the
 *     same request through its buffered fd.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/log.h"
#include "tierfs/ns.h"

#define OPS(fs) ((fs)->be->ops)
#define BE(fs)  ((fs)->be)

struct scratch {
	void *buf;
	size_t cap;
	struct tfs_mio *mio;
	unsigned mcap;
};

static __thread struct scratch scr;

void *tfs_iobuf(size_t len)
{
	if (len > scr.cap) {
		size_t cap = (len + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1);
		void *p;

		if (posix_memalign(&p, 4096, cap))
			return NULL;
		free(scr.buf);
		scr.buf = p;
		scr.cap = cap;
	}
	return scr.buf;
}

static struct tfs_mio *mio_array(unsigned n)
{
	if (n > scr.mcap) {
		struct tfs_mio *m = realloc(scr.mio, n * sizeof(*m));

		if (!m)
			return NULL;
		scr.mio = m;
		scr.mcap = n;
	}
	return scr.mio;
}

/* Snapshot what a data request needs from the inode: one lock round trip
 * once the identity and size are known (the caller holds a handle). */
static int file_state(struct tfs_fs *fs, struct tfs_inode *in, uint32_t *rot, uint64_t *size)
{
	for (int tries = 0;; tries++) {
		bool known;
		int rc;

		pthread_mutex_lock(&in->lock);
		known = in->fid_valid && in->size_valid;
		*rot = in->rot;
		*size = in->size;
		pthread_mutex_unlock(&in->lock);
		if (known)
			return 0;
		if (tries)
			return -EIO;	/* not a regular file on member 0 any more */
		rc = tfs_ns_load_file(fs, in);
		if (rc)
			return rc;
	}
}

static unsigned pieces(const struct tfs_layout *l, uint64_t off, uint64_t len)
{
	if (l->level == TFS_JBOD || l->level == TFS_RAID1)
		return 1;
	return (unsigned)((off % l->chunk + len + l->chunk - 1) / l->chunk);
}

/* Retry, through the buffered fd, each request O_DIRECT refused.  Rare
 * (misaligned I/O), so one at a time. */
static int redo_buffered(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_mio *v, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (v[i].res == -EINVAL) {
			int rc;

			v[i].fd = tfs_ns_member_fd(fs, in, v[i].member, false);
			if (v[i].fd < 0)
				return v[i].fd;
			rc = OPS(fs)->submit(BE(fs), &v[i], 1);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Submit a batch; returns the first error of the batch or of any request. */
static int run_batch(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_mio *v, unsigned n,
		     bool direct)
{
	int rc = OPS(fs)->submit(BE(fs), v, n);

	if (rc == 0 && direct)
		rc = redo_buffered(fs, in, v, n);
	for (unsigned i = 0; i < n && rc == 0; i++)
		if (v[i].res < 0)
			rc = (int)v[i].res;
	return rc;
}

ssize_t tfs_data_read(struct tfs_fs *fs, struct tfs_inode *in, bool direct, void *buf,
		      size_t len, uint64_t off)
{
	const struct tfs_layout *l = &fs->layout;
	struct tfs_mio *v;
	uint64_t size, pos, end;
	uint32_t rot, copies = tfs_layout_copies(l);
	unsigned n = 0;
	int rc = file_state(fs, in, &rot, &size);

	if (rc)
		return rc;
	if (off >= size || len == 0)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	end = off + len;
	v = mio_array(pieces(l, off, len));
	if (!v)
		return -ENOMEM;
	for (pos = off; pos < end; n++) {
		uint64_t ext = tfs_layout_extent(l, pos), chunk_no = pos / l->chunk;
		struct tfs_place p;

		if (ext > end - pos)
			ext = end - pos;
		/* spread reads of mirrored data over the copies, chunk by chunk */
		tfs_layout_map(l, rot, pos, (uint32_t)((chunk_no + rot) % copies), &p);
		v[n] = (struct tfs_mio){
			.member = p.member, .op = TFS_MIO_READ,
			.fd = tfs_ns_member_fd(fs, in, p.member, direct),
			.buf = (char *)buf + (pos - off), .len = (uint32_t)ext, .off = p.moff,
		};
		if (v[n].fd < 0)
			return v[n].fd;
		pos += ext;
	}
	rc = run_batch(fs, in, v, n, direct);
	if (rc)
		return rc;
	/* holes: zero what the members did not have */
	for (unsigned i = 0; i < n; i++) {
		if ((uint64_t)v[i].res < v[i].len)
			memset((char *)v[i].buf + v[i].res, 0, v[i].len - (size_t)v[i].res);
	}
	return (ssize_t)len;
}

ssize_t tfs_data_write(struct tfs_fs *fs, struct tfs_inode *in, bool direct, const void *buf,
		       size_t len, uint64_t off)
{
	const struct tfs_layout *l = &fs->layout;
	struct tfs_mio *v;
	uint64_t size, pos, end = off + len;
	uint32_t rot, copies = tfs_layout_copies(l);
	unsigned n = 0;
	const char *src = buf;
	int rc = file_state(fs, in, &rot, &size);

	if (rc)
		return rc;
	if (len == 0)
		return 0;
	if (end < off)
		return -EFBIG;
	if (direct) {
		char *b = tfs_iobuf(len);

		if (!b)
			return -ENOMEM;
		memcpy(b, buf, len);
		src = b;
	}
	v = mio_array(pieces(l, off, len) * copies);
	if (!v)
		return -ENOMEM;
	for (pos = off; pos < end;) {
		uint64_t ext = tfs_layout_extent(l, pos);

		if (ext > end - pos)
			ext = end - pos;
		for (uint32_t c = 0; c < copies; c++, n++) {
			struct tfs_place p;

			tfs_layout_map(l, rot, pos, c, &p);
			v[n] = (struct tfs_mio){
				.member = p.member, .op = TFS_MIO_WRITE,
				.fd = tfs_ns_member_fd(fs, in, p.member, direct),
				.buf = (void *)(src + (pos - off)), .len = (uint32_t)ext,
				.off = p.moff,
			};
			if (v[n].fd < 0)
				return v[n].fd;
		}
		pos += ext;
	}
	rc = run_batch(fs, in, v, n, direct);
	if (rc)
		return rc;
	pthread_mutex_lock(&in->lock);
	if (end > in->size)
		in->size = end;
	pthread_mutex_unlock(&in->lock);
	return (ssize_t)len;
}

int tfs_data_fsync(struct tfs_fs *fs, struct tfs_inode *in, bool datasync)
{
	struct tfs_mio v[TFS_MAX_MEMBERS];
	uint64_t size;
	uint32_t rot;
	int rc = file_state(fs, in, &rot, &size);

	if (rc == 0)
		rc = tfs_ns_fill(fs, in);	/* every member may hold dirty data */
	if (rc)
		return rc;
	for (uint32_t k = 0; k < fs->n; k++)	/* in->of: pinned by the handle */
		v[k] = (struct tfs_mio){ .member = k, .fd = in->of->fd[k],
					 .op = datasync ? TFS_MIO_FDATASYNC : TFS_MIO_FSYNC };
	rc = OPS(fs)->submit(BE(fs), v, fs->n);
	for (uint32_t k = 0; k < fs->n && rc == 0; k++)
		if (v[k].res < 0)
			rc = (int)v[k].res;
	return rc;
}

int tfs_data_fallocate(struct tfs_fs *fs, struct tfs_inode *in, int mode, uint64_t off,
		       uint64_t len)
{
	const int supported = FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE;
	uint64_t size, end = off + len;
	uint32_t rot;
	int rc;

	if (mode & ~supported)
		return -EOPNOTSUPP;
	if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE))
		return -EOPNOTSUPP;
	if (end < off)
		return -EFBIG;
	rc = file_state(fs, in, &rot, &size);
	if (rc)
		return rc;
	/* layout.c invariant 3: member k's part of [off, end) is one range */
	for (uint32_t k = 0; k < fs->n && rc == 0; k++) {
		uint64_t a = tfs_layout_share(&fs->layout, rot, k, off);
		uint64_t b = tfs_layout_share(&fs->layout, rot, k, end);

		if (b > a) {
			int fd = tfs_ns_member_fd(fs, in, k, false);

			rc = fd < 0 ? fd : OPS(fs)->fallocate(BE(fs), k, fd, mode, a, b - a);
		}
	}
	if (rc == 0 && !(mode & FALLOC_FL_KEEP_SIZE)) {
		pthread_mutex_lock(&in->lock);
		if (end > in->size)
			in->size = end;
		pthread_mutex_unlock(&in->lock);
	}
	return rc;
}
