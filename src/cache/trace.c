/* trace.c - the trace recorder: every request the SSD tier sees, written
 * to a file while a trace runs (issue 16; the root's user.tierfs.trace,
 * tierctl trace).
 *
 * Owns: the trace file, the recording threads' buffers and the record
 * format (struct tfs_trace_rec, cache.h; docs/DESIGN.md §10.7).
 *
 * Invariants:
 *  1. With no trace running a request pays one relaxed load.
 *  2. Each thread appends its records to a buffer of its own, written to
 *     the file with one write(2) (O_APPEND) when full and when the trace
 *     stops; a stop takes every buffer's lock in turn, so no record is cut
 *     and none is lost.  A buffer of an earlier trace (its generation) is
 *     emptied, not written, when its thread records again.
 *  3. A buffer's records are in time order; buffers interleave in the file
 *     in blocks, so a reader sorts by time.
 *  4. The file is made by the daemon (root) with O_CREAT | O_EXCL |
 *     O_NOFOLLOW, mode 0600, at a path root gave (the root's attribute is
 *     root's to set): it never follows a link or overwrites a file.
 *  5. A write that fails stops the trace (logged, kept as its error);
 *     requests never fail because of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tierfs/log.h"
#include "cache_i.h"

#define TRACE_BUF 2048		/* records per thread buffer (64 KiB) */

struct tbuf {
	pthread_mutex_t lock;
	uint64_t gen;		/* the trace its records belong to */
	unsigned n;
	struct tbuf *next;	/* on bufs */
	struct tfs_trace_rec r[TRACE_BUF];
};

/* One recorder per daemon (one array, one tier). */
static pthread_mutex_t tlock = PTHREAD_MUTEX_INITIALIZER;	/* all below */
static struct tbuf *bufs;
static pthread_key_t tkey;
static pthread_once_t tonce = PTHREAD_ONCE_INIT;
static int tfd = -1;
static uint64_t tgen, t0, nrec;	/* tgen: atomic (odd: running) */
static char tpath[PATH_MAX];
static int terr;

/* Writes b's records if they belong to the running trace; empties it.
 * Under b->lock and tlock. */
static void spill(struct tbuf *b)
{
	size_t len = (size_t)b->n * sizeof(b->r[0]);

	if (b->n && b->gen == tgen && tfd >= 0 && terr == 0) {
		ssize_t w = write(tfd, b->r, len);

		if (w != (ssize_t)len) {
			terr = w < 0 ? errno : ENOSPC;
			tfs_err("trace %s: %s: the trace stops", tpath, strerror(terr));
			__atomic_store_n(&tgen, tgen + 1, __ATOMIC_RELEASE);	/* off */
		} else {
			nrec += b->n;
		}
	}
	b->n = 0;
}

static void buf_gone(void *arg)
{
	struct tbuf *b = arg, **pp;

	pthread_mutex_lock(&tlock);
	pthread_mutex_lock(&b->lock);
	spill(b);
	pthread_mutex_unlock(&b->lock);
	for (pp = &bufs; *pp && *pp != b; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = b->next;
	pthread_mutex_unlock(&tlock);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

static void key_make(void)
{
	(void)pthread_key_create(&tkey, buf_gone);
}

void c_trace(uint64_t fid, uint64_t off, uint64_t len, uint8_t op, uint8_t flags)
{
	uint64_t gen = __atomic_load_n(&tgen, __ATOMIC_ACQUIRE);	/* t0 after it */
	struct tbuf *b;

	if (!(gen & 1))
		return;		/* invariant 1 */
	pthread_once(&tonce, key_make);
	b = pthread_getspecific(tkey);
	if (!b) {
		b = calloc(1, sizeof(*b));
		if (!b)
			return;
		pthread_mutex_init(&b->lock, NULL);
		pthread_mutex_lock(&tlock);
		b->next = bufs;
		bufs = b;
		pthread_mutex_unlock(&tlock);
		(void)pthread_setspecific(tkey, b);
	}
	pthread_mutex_lock(&b->lock);
	if (b->gen != gen) {	/* an earlier trace's: dropped (invariant 2) */
		b->n = 0;
		b->gen = gen;
	}
	b->r[b->n++] = (struct tfs_trace_rec){ .t_ns = c_mono_ns() - t0, .fid = fid, .off = off,
					       .len = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len,
					       .op = op, .flags = flags };
	if (b->n == TRACE_BUF) {
		pthread_mutex_unlock(&b->lock);
		pthread_mutex_lock(&tlock);
		pthread_mutex_lock(&b->lock);
		if (b->n == TRACE_BUF)
			spill(b);
		pthread_mutex_unlock(&tlock);
	}
	pthread_mutex_unlock(&b->lock);
}

/* Stops a running trace: every buffer written, the file closed.  Under
 * tlock. */
static void stop_locked(void)
{
	for (struct tbuf *b = bufs; b; b = b->next) {
		pthread_mutex_lock(&b->lock);
		spill(b);
		pthread_mutex_unlock(&b->lock);
	}
	if (tgen & 1)
		__atomic_store_n(&tgen, tgen + 1, __ATOMIC_RELEASE);
	if (tfd >= 0) {
		if (fsync(tfd) && !terr)
			terr = errno;
		close(tfd);
		tfd = -1;
	}
}

int c_trace_ctl(const char *cmd, char *err, size_t errlen)
{
	struct tfs_trace_hdr h = { .magic = TFS_TRACE_MAGIC, .version = 1,
				   .rec_size = sizeof(struct tfs_trace_rec) };
	int rc = 0, fd;

	pthread_mutex_lock(&tlock);
	if (strcmp(cmd, "stop") == 0) {
		if (!(tgen & 1) && tfd < 0) {
			snprintf(err, errlen, "no trace is running");
			rc = -EINVAL;
		} else {
			stop_locked();
			tfs_info("trace %s: stopped, %" PRIu64 " records", tpath, nrec);
		}
	} else if (strncmp(cmd, "start ", 6) == 0) {
		const char *path = cmd + 6;

		if (tgen & 1) {
			snprintf(err, errlen, "a trace is running already (%s): stop it first", tpath);
			rc = -EBUSY;
		} else if (path[0] != '/' || strlen(path) >= sizeof(tpath)) {
			snprintf(err, errlen, "trace start '%.100s': an absolute path", path);
			rc = -EINVAL;
		} else if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND |
				      O_CLOEXEC, 0600)) < 0) {
			rc = -errno;
			snprintf(err, errlen, "trace %.200s: %s", path, strerror(errno));
		} else if (write(fd, &h, sizeof(h)) != (ssize_t)sizeof(h)) {
			rc = -EIO;
			snprintf(err, errlen, "trace %.200s: cannot write its header", path);
			close(fd);
			unlink(path);
		} else {
			tfd = fd;
			snprintf(tpath, sizeof(tpath), "%s", path);
			nrec = 0;
			terr = 0;
			t0 = c_mono_ns();
			__atomic_store_n(&tgen, tgen + 1, __ATOMIC_RELEASE);	/* odd: on */
			tfs_info("trace %s: started", tpath);
		}
	} else {
		snprintf(err, errlen, "trace: 'start PATH' or 'stop', not '%.60s'", cmd);
		rc = -EINVAL;
	}
	pthread_mutex_unlock(&tlock);
	return rc;
}

int c_trace_state(char *buf, size_t len)
{
	int l;

	pthread_mutex_lock(&tlock);
	if (tgen & 1)
		l = snprintf(buf, len, "on %s %" PRIu64, tpath, nrec);
	else if (tpath[0])
		l = snprintf(buf, len, "off %s %" PRIu64 "%s%s", tpath, nrec, terr ? " " : "",
			     terr ? strerror(terr) : "");
	else
		l = snprintf(buf, len, "off");
	pthread_mutex_unlock(&tlock);
	return l;
}

void c_trace_stop(void)
{
	pthread_mutex_lock(&tlock);
	stop_locked();
	pthread_mutex_unlock(&tlock);
}
