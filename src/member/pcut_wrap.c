/* pcut_wrap.c - the daemon's own file writes, seen by the power-cut model.
 *
 * Owns: the wrappers the linker puts in front of the libc calls that
 * change or sync a file (-Wl,--wrap=pwrite,... in meson.build) for every
 * object linked into the daemon, LMDB's (linked statically) included.  So
 * the SSD data file, both LMDB stores, the store's log and the superblocks
 * are covered without a seam in each of their users; member data goes
 * through the member seam (fault.c) and io_uring instead.
 *
 * Invariants:
 *  1. With the model off a wrapper is the real call behind one relaxed
 *     load: nothing else is done.
 *  2. A change is noted (its pre-image read) before it is forwarded and
 *     within the model's gate (powercut.c invariant 3); a successful sync
 *     forgets the file after it returns; a write through an O_SYNC or
 *     O_DSYNC fd counts as synced.  Then the operation is counted (the
 *     model may cut there, outside the gate).
 *  3. Standard output and error are the daemon's log, never noted: a cut
 *     must not take back what the daemon said before it.  log.c writes its
 *     lines (to a log= file too) through stdio, whose write(2) is glibc's
 *     own and never reaches these wrappers.
 */
#include <fcntl.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tierfs/powercut.h"

ssize_t __real_pwrite(int fd, const void *buf, size_t n, off_t off);
ssize_t __real_pwrite64(int fd, const void *buf, size_t n, off_t off);
ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __real_writev(int fd, const struct iovec *iov, int cnt);
int __real_fdatasync(int fd);
int __real_fsync(int fd);
int __real_ftruncate(int fd, off_t len);
int __real_fallocate(int fd, int mode, off_t off, off_t len);

ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off);
ssize_t __wrap_pwrite64(int fd, const void *buf, size_t n, off_t off);
ssize_t __wrap_write(int fd, const void *buf, size_t n);
ssize_t __wrap_writev(int fd, const struct iovec *iov, int cnt);
int __wrap_fdatasync(int fd);
int __wrap_fsync(int fd);
int __wrap_ftruncate(int fd, off_t len);
int __wrap_fallocate(int fd, int mode, off_t off, off_t len);

static bool sync_fd(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl >= 0 && (fl & (O_SYNC | O_DSYNC));
}

/* Note [off, off + len) of fd before it changes: false if fd writes
 * through (nothing to note, its file is synced after the write). */
static bool note(int fd, uint64_t off, uint64_t len)
{
	tfs_pcut_enter();
	if (fd <= STDERR_FILENO)
		return true;	/* the log, not a file the daemon keeps durable */
	if (sync_fd(fd))
		return false;
	tfs_pcut_note(TFS_PCUT_OWN, fd, off, len);
	return true;
}

static void done(int fd, bool noted, bool ok)
{
	if (!noted && ok)
		tfs_pcut_synced_fd(fd);
	tfs_pcut_leave();
	tfs_pcut_tick();
}

ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	bool noted;
	ssize_t r;

	if (!tfs_pcut_on())
		return __real_pwrite(fd, buf, n, off);
	noted = note(fd, (uint64_t)off, n);
	r = __real_pwrite(fd, buf, n, off);
	done(fd, noted, r >= 0);
	return r;
}

ssize_t __wrap_pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	return __wrap_pwrite(fd, buf, n, off);
}

/* write and writev: at the file offset (or the end, O_APPEND). */
static uint64_t cur_off(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	off_t o = lseek(fd, 0, fl >= 0 && (fl & O_APPEND) ? SEEK_END : SEEK_CUR);

	return o < 0 ? 0 : (uint64_t)o;
}

ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
	bool noted;
	ssize_t r;

	if (!tfs_pcut_on())
		return __real_write(fd, buf, n);
	noted = note(fd, cur_off(fd), n);
	r = __real_write(fd, buf, n);
	done(fd, noted, r >= 0);
	return r;
}

ssize_t __wrap_writev(int fd, const struct iovec *iov, int cnt)
{
	uint64_t len = 0;
	bool noted;
	ssize_t r;

	if (!tfs_pcut_on())
		return __real_writev(fd, iov, cnt);
	for (int i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	noted = note(fd, cur_off(fd), len);
	r = __real_writev(fd, iov, cnt);
	done(fd, noted, r >= 0);
	return r;
}

/* A sync holds the gate too (the cut waits for it), notes nothing, and
 * makes its file durable once it succeeded.  A slow SSD's wait comes
 * first, outside the gate (own_sync_delay, fault.c). */
static int synced(int fd, int (*sync)(int))
{
	long ms = tfs_pcut_own_sync_delay_ms();
	int r;

	if (ms > 0 && fd > STDERR_FILENO)
		usleep((useconds_t)ms * 1000);
	tfs_pcut_enter();
	r = sync(fd);
	done(fd, false, r == 0);
	return r;
}

int __wrap_fdatasync(int fd)
{
	return tfs_pcut_on() ? synced(fd, __real_fdatasync) : __real_fdatasync(fd);
}

int __wrap_fsync(int fd)
{
	return tfs_pcut_on() ? synced(fd, __real_fsync) : __real_fsync(fd);
}

int __wrap_ftruncate(int fd, off_t len)
{
	bool noted;
	int r;

	if (!tfs_pcut_on())
		return __real_ftruncate(fd, len);
	noted = note(fd, (uint64_t)len, UINT64_MAX);	/* what a shrink cuts, and the size */
	r = __real_ftruncate(fd, len);
	done(fd, noted, r == 0);
	return r;
}

int __wrap_fallocate(int fd, int mode, off_t off, off_t len)
{
	bool noted;
	int r;

	if (!tfs_pcut_on())
		return __real_fallocate(fd, mode, off, len);
	noted = note(fd, (uint64_t)off,
		     mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) ? (uint64_t)len : 0);
	r = __real_fallocate(fd, mode, off, len);
	done(fd, noted, r == 0);
	return r;
}
