/* powercut.c - the power-cut model (tierfs/powercut.h), for tests.
 *
 * Owns: the undo log of every unsynced change to a file the daemon keeps
 * on stable storage, and the cut that loses what a power cut may lose.
 * fault.c feeds it the member files (domain = member), pcut_wrap.c the
 * daemon's own files through its libc calls (domain TFS_PCUT_OWN).
 *
 * Invariants:
 *  1. A file (st_dev, st_ino: one file may have several fds, e.g. an
 *     O_DIRECT twin) keeps its records newest first; each record holds
 *     what one operation changed (the old bytes of the range, data extents
 *     only, and the old size), read under the log lock before the
 *     operation is forwarded.  Applied newest first, the records restore
 *     each byte to its value before the oldest unsynced change.
 *  2. A successful fsync/fdatasync of the file (any of its fds), a syncfs
 *     of its domain, or a write through an O_SYNC/O_DSYNC fd drops the
 *     file's records: what they changed is durable.
 *  3. No noted operation runs while the log is applied: each holds the
 *     gate (tfs_pcut_enter/leave) from its pre-image to its completion;
 *     the cut closes the gate, waits for those inside, and never opens it.
 *  4. At the cut each 4 KiB block a record touches is lost (back to its
 *     oldest pre-image) or kept (as the disk holds it now), and each
 *     file's size is the oldest recorded or the current one, each drawn
 *     from a hash of (seed, file path, block): any subset, in any order,
 *     as a volatile disk cache and the page cache allow.  Intermediate
 *     versions of a block are not produced.
 *  5. The log is bounded (CAP_BYTES of old data, CAP_FILES files); past
 *     the cap it logs an error and records nothing more, so the cut keeps
 *     what it could not undo.
 *  6. Namespace changes (create, rename, unlink) are not undone: the cut
 *     is a cut after the filesystems committed their metadata journals.
 *  7. The cut does not stop the threads that note nothing: one reading
 *     LMDB through its map while the cut puts the file back may see a
 *     page undone under it and abort (an assertion) or fault.  From the
 *     cut on, SIGABRT, SIGSEGV and SIGBUS park the thread until the
 *     SIGKILL, so the cut completes and the files are as it left them (a
 *     run of the suite lost a cut to mdb.c's "root > 1" before; a thread
 *     that blocks SIGSEGV still dies of one, as the kernel forces it).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tierfs/hash.h"
#include "tierfs/log.h"
#include "tierfs/powercut.h"

#define CAP_BYTES	(256ull << 20)
#define CAP_FILES	4096
#define DUMP_MAGIC	"TFSPCUT1"

struct seg {
	uint64_t off, len;
	unsigned char *data;
};

struct rec {
	struct rec *older;
	uint64_t off, end;		/* the changed range, clipped to old_size */
	uint64_t old_size;
	unsigned nseg;			/* the range's data extents, saved */
	struct seg seg[];
};

struct file {
	struct file *next;
	dev_t dev;
	ino_t ino;
	uint32_t domain;
	int fd;				/* our own buffered fd of the file */
	struct rec *newest;
};

static struct {
	atomic_bool on;
	struct tfs_pcut_conf conf;
	atomic_long ops;
	atomic_long when_at;		/* ops when conf.when was first seen, or -1 */
	pthread_mutex_t lock;
	pthread_cond_t idle;		/* inflight dropped to 0, or never again */
	unsigned inflight;
	bool crashing, overflow;
	uint64_t bytes;
	unsigned nfiles;
	struct file *files;
} pc = { .when_at = -1, .lock = PTHREAD_MUTEX_INITIALIZER,
	  .idle = PTHREAD_COND_INITIALIZER };

/* The model's own writes bypass the wrappers (pcut_wrap.c). */
static ssize_t raw_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	return syscall(SYS_pwrite64, fd, buf, len, (off_t)off);
}

static int raw_ftruncate(int fd, uint64_t len)
{
	return (int)syscall(SYS_ftruncate, fd, (off_t)len);
}

static int raw_punch(int fd, uint64_t off, uint64_t len)
{
	return (int)syscall(SYS_fallocate, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			    (off_t)off, (off_t)len);
}

/* At a normal exit: how many operations were noted (tests pick cut
 * points from it). */
static void report(void)
{
	long ops = atomic_load(&pc.ops), at = atomic_load(&pc.when_at);

	if (at >= 0)
		tfs_info("power-cut model: %ld operations noted, %ld after %s appeared", ops,
			 ops - at, pc.conf.when);
	else
		tfs_info("power-cut model: %ld operations noted", ops);
}

void tfs_pcut_enable(const struct tfs_pcut_conf *conf)
{
	pc.conf = *conf;
	if (conf->dump)
		pc.conf.dump = strdup(conf->dump);
	if (conf->when)
		pc.conf.when = strdup(conf->when);
	atomic_store(&pc.on, true);
	atexit(report);
}

bool tfs_pcut_on(void)
{
	return atomic_load_explicit(&pc.on, memory_order_relaxed);
}

long tfs_pcut_own_sync_delay_ms(void)
{
	return tfs_pcut_on() ? pc.conf.own_sync_delay_ms : 0;
}

/* ------------------------------------------------------------------ */
/* The log                                                              */
/* ------------------------------------------------------------------ */

void tfs_pcut_enter(void)
{
	if (!tfs_pcut_on())
		return;
	pthread_mutex_lock(&pc.lock);
	while (pc.crashing)	/* the process is about to die */
		pthread_cond_wait(&pc.idle, &pc.lock);
	pc.inflight++;
	pthread_mutex_unlock(&pc.lock);
}

void tfs_pcut_leave(void)
{
	if (!tfs_pcut_on())
		return;
	pthread_mutex_lock(&pc.lock);
	if (--pc.inflight == 0)
		pthread_cond_broadcast(&pc.idle);
	pthread_mutex_unlock(&pc.lock);
}

static void overflow_locked(const char *why)
{
	if (!pc.overflow)
		tfs_err("fault: power-cut model: undo log full (%s; cap %llu MiB, %d files): "
			"unsynced changes from now on survive the cut", why, CAP_BYTES >> 20,
			CAP_FILES);
	pc.overflow = true;
}

static struct file *file_locked(uint32_t domain, int fd, const struct stat *st)
{
	struct file *f;
	char p[64];

	for (f = pc.files; f; f = f->next)
		if (f->dev == st->st_dev && f->ino == st->st_ino)
			return f;
	if (pc.nfiles >= CAP_FILES) {
		overflow_locked("too many files");
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	/* our own buffered fd: fd may be O_DIRECT, and its owner may close it */
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	f->fd = open(p, O_RDWR | O_CLOEXEC);
	if (f->fd < 0) {
		tfs_warn("fault: power-cut model: cannot reopen fd %d: %s", fd, strerror(errno));
		free(f);
		return NULL;
	}
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	f->domain = domain;
	f->next = pc.files;
	pc.files = f;
	pc.nfiles++;
	return f;
}

/* The data extents of [off, end) in fd, as a growing array. */
static struct seg *data_extents(int fd, uint64_t off, uint64_t end, unsigned *n, uint64_t *bytes)
{
	struct seg *seg = NULL;
	unsigned cap = 0;

	*n = 0;
	*bytes = 0;
	while (off < end) {
		off_t d = lseek(fd, (off_t)off, SEEK_DATA), hole;

		if (d < 0 || (uint64_t)d >= end)
			break;	/* ENXIO: no data past off */
		hole = lseek(fd, d, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > end)
			hole = (off_t)end;
		if (*n == cap) {
			struct seg *s = realloc(seg, (cap = cap ? 2 * cap : 4) * sizeof(*s));

			if (!s) {
				free(seg);
				return NULL;
			}
			seg = s;
		}
		seg[(*n)++] = (struct seg){ .off = (uint64_t)d, .len = (uint64_t)(hole - d) };
		*bytes += (uint64_t)(hole - d);
		off = (uint64_t)hole;
	}
	return seg ? seg : calloc(1, sizeof(*seg));
}

void tfs_pcut_note(uint32_t domain, int fd, uint64_t off, uint64_t len)
{
	struct file *f;
	struct rec *r = NULL;
	struct seg *seg = NULL;
	unsigned char *data;
	uint64_t end, bytes;
	struct stat st;
	unsigned nseg;

	if (!tfs_pcut_on() || fstat(fd, &st) || !S_ISREG(st.st_mode))
		return;
	pthread_mutex_lock(&pc.lock);
	if (pc.overflow || !(f = file_locked(domain, fd, &st)) || fstat(f->fd, &st))
		goto out;
	end = len > UINT64_MAX - off ? UINT64_MAX : off + len;
	if (end > (uint64_t)st.st_size)
		end = (uint64_t)st.st_size;
	if (off > end)
		off = end;
	seg = data_extents(f->fd, off, end, &nseg, &bytes);
	if (!seg)
		goto out;
	if (pc.bytes + bytes + sizeof(*r) > CAP_BYTES) {
		overflow_locked("too much unsynced data");
		goto out;
	}
	r = malloc(sizeof(*r) + nseg * sizeof(r->seg[0]) + bytes);
	if (!r)
		goto out;
	*r = (struct rec){ .off = off, .end = end, .old_size = (uint64_t)st.st_size, .nseg = nseg };
	data = (unsigned char *)&r->seg[nseg];
	for (unsigned i = 0; i < nseg; i++) {
		ssize_t got = pread(f->fd, data, seg[i].len, (off_t)seg[i].off);

		if (got < 0)
			got = 0;
		memset(data + got, 0, seg[i].len - (uint64_t)got);	/* shrunk meanwhile */
		r->seg[i] = (struct seg){ .off = seg[i].off, .len = seg[i].len, .data = data };
		data += seg[i].len;
	}
	r->older = f->newest;
	f->newest = r;
	pc.bytes += bytes + sizeof(*r);

out:
	pthread_mutex_unlock(&pc.lock);
	free(seg);
}

static void free_file(struct file *f)
{
	while (f->newest) {
		struct rec *r = f->newest;

		f->newest = r->older;
		for (unsigned i = 0; i < r->nseg; i++)
			pc.bytes -= r->seg[i].len;
		pc.bytes -= sizeof(*r);
		free(r);
	}
	close(f->fd);
	pc.nfiles--;
	free(f);
}

/* Drop the records of fd's file (st non-NULL) or of every file of domain. */
static void forget(const struct stat *st, uint32_t domain)
{
	pthread_mutex_lock(&pc.lock);
	for (struct file **pp = &pc.files; *pp;) {
		struct file *f = *pp;

		if (st ? f->dev == st->st_dev && f->ino == st->st_ino : f->domain == domain) {
			*pp = f->next;
			free_file(f);
		} else {
			pp = &f->next;
		}
	}
	pthread_mutex_unlock(&pc.lock);
}

void tfs_pcut_synced_fd(int fd)
{
	struct stat st;

	if (tfs_pcut_on() && fstat(fd, &st) == 0)
		forget(&st, 0);
}

void tfs_pcut_synced_domain(uint32_t domain)
{
	if (tfs_pcut_on())
		forget(NULL, domain);
}

void tfs_pcut_tick(void)
{
	struct stat st;

	if (!tfs_pcut_on())
		return;
	long n = atomic_fetch_add(&pc.ops, 1) + 1, at, none = -1;

	if (!pc.conf.when) {
		if (n == pc.conf.cut_after)
			tfs_pcut_cut("operation count");
		return;
	}
	/* with cut_when, cut_after counts from the file's appearance (at
	 * least the first operation after it) */
	at = atomic_load(&pc.when_at);
	if (at < 0 && stat(pc.conf.when, &st) == 0) {
		atomic_compare_exchange_strong(&pc.when_at, &none, n - 1);
		at = atomic_load(&pc.when_at);
	}
	if (at >= 0 && n - at >= (pc.conf.cut_after > 0 ? pc.conf.cut_after : 1))
		tfs_pcut_cut(pc.conf.when);
}

/* ------------------------------------------------------------------ */
/* The cut                                                              */
/* ------------------------------------------------------------------ */

/* splitmix64 of (seed, key, block): kept with probability keep (inv. 4). */
static bool kept(uint64_t seed, uint64_t key, uint64_t block, double keep)
{
	uint64_t z = seed ^ (key * TFS_GOLDEN64) ^ (block * 0xC2B2AE3D27D4EB4Full);

	return tfs_unit(tfs_splitmix64(z + TFS_GOLDEN64)) < keep;
}

static uint64_t path_key(const char *p)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*p)
		h = (h ^ (unsigned char)*p++) * 0x100000001b3ull;
	return h;
}

/* Zero [off, end) of fd: a hole where the filesystem can. */
static int zero_range(int fd, uint64_t off, uint64_t end)
{
	static const unsigned char zeros[65536];

	if (end <= off || raw_punch(fd, off, end - off) == 0)
		return 0;
	while (off < end) {
		size_t l = end - off < sizeof(zeros) ? (size_t)(end - off) : sizeof(zeros);
		ssize_t w = raw_pwrite(fd, zeros, l, off);

		if (w <= 0)
			return -1;
		off += (uint64_t)w;
	}
	return 0;
}

/* Put back r's old bytes in the blocks the draw loses; counts them. */
static int rec_apply(int fd, const struct rec *r, uint64_t seed, uint64_t key, double keep,
		     uint64_t *lost)
{
	uint64_t B = TFS_PCUT_BLOCK;

	for (uint64_t b = r->off / B; b * B < r->end; b++) {
		uint64_t a = b * B > r->off ? b * B : r->off;
		uint64_t e = (b + 1) * B < r->end ? (b + 1) * B : r->end;

		if (kept(seed, key, b, keep))
			continue;
		(*lost)++;
		if (zero_range(fd, a, e))
			return -1;
		for (unsigned i = 0; i < r->nseg; i++) {
			uint64_t sa = r->seg[i].off > a ? r->seg[i].off : a;
			uint64_t se = r->seg[i].off + r->seg[i].len < e ? r->seg[i].off + r->seg[i].len : e;

			if (sa < se && raw_pwrite(fd, r->seg[i].data + (sa - r->seg[i].off), se - sa, sa) !=
					       (ssize_t)(se - sa))
				return -1;
		}
	}
	return 0;
}

/* One file's records, newest first, then its size (invariant 4). */
static int file_apply(int fd, const struct rec *newest, uint64_t cur_size, uint64_t key,
		      uint64_t seed, double keep, uint64_t *lost)
{
	uint64_t size = cur_size;
	int rc = 0;

	for (const struct rec *r = newest; r && rc == 0; r = r->older) {
		rc = rec_apply(fd, r, seed, key, keep, lost);
		if (!kept(seed, key, UINT64_MAX, keep))
			size = r->old_size;	/* ends as the oldest's */
	}
	if (rc == 0 && newest)
		rc = raw_ftruncate(fd, size);
	return rc;
}

/* The file's path now (it may have been renamed since it was noted) and
 * size: false if it is gone (no name left: nothing to put back). */
static bool file_now(const struct file *f, char *name, size_t len, uint64_t *size)
{
	char link[64];
	struct stat st;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", f->fd);
	n = readlink(link, name, len - 1);
	if (n <= 0 || fstat(f->fd, &st) || st.st_nlink == 0)
		return false;
	name[n] = 0;
	*size = (uint64_t)st.st_size;
	return true;
}

static int put(FILE *o, const void *p, size_t len)
{
	return fwrite(p, 1, len, o) == len ? 0 : -1;
}

/* The undo log, for tfs_pcut_apply_dump (lock held, gate closed). */
static int dump_locked(const char *path)
{
	FILE *o = fopen(path, "w");
	int rc;

	if (!o)
		return -1;
	rc = put(o, DUMP_MAGIC, 8);
	for (struct file *f = pc.files; f && rc == 0; f = f->next) {
		char name[4096];
		uint32_t len, nrec = 0;
		uint64_t size;

		if (!file_now(f, name, sizeof(name), &size))
			continue;
		len = (uint32_t)strlen(name);
		for (struct rec *r = f->newest; r; r = r->older)
			nrec++;
		rc = put(o, &len, 4) || put(o, name, len) || put(o, &size, 8) || put(o, &nrec, 4);
		for (struct rec *r = f->newest; r && rc == 0; r = r->older) {
			rc = put(o, &r->off, 8) || put(o, &r->end, 8) || put(o, &r->old_size, 8) ||
			     put(o, &r->nseg, 4);
			for (unsigned i = 0; i < r->nseg && rc == 0; i++)
				rc = put(o, &r->seg[i].off, 8) || put(o, &r->seg[i].len, 8) ||
				     put(o, r->seg[i].data, r->seg[i].len);
		}
	}
	if (rc == 0) {
		uint32_t end = 0;

		rc = put(o, &end, 4);
	}
	if (fclose(o))
		rc = -1;
	return rc;
}

/* A thread that trips over a file while the cut puts it back waits for
 * the SIGKILL (invariant 7). */
static void park(int sig)
{
	(void)sig;
	for (;;)
		pause();
}

_Noreturn void tfs_pcut_cut(const char *why)
{
	struct sigaction sa = { .sa_handler = park };
	unsigned nrec = 0, nfail = 0;
	uint64_t lost = 0;

	pthread_mutex_lock(&pc.lock);
	pc.crashing = true;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGABRT, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	while (pc.inflight)
		pthread_cond_wait(&pc.idle, &pc.lock);
	for (struct file *f = pc.files; f; f = f->next)
		for (struct rec *r = f->newest; r; r = r->older)
			nrec++;
	if (pc.conf.dump) {
		if (dump_locked(pc.conf.dump))
			tfs_err("fault: power cut: cannot write %s: %s", pc.conf.dump,
				strerror(errno));
		tfs_warn("fault: power cut (%s): %u unsynced changes in %u files dumped to %s",
			 why, nrec, pc.nfiles, pc.conf.dump);
	} else {
		for (struct file *f = pc.files; f; f = f->next) {
			char name[4096];
			uint64_t size;

			if (file_now(f, name, sizeof(name), &size) &&
			    file_apply(f->fd, f->newest, size, path_key(name), pc.conf.seed,
				       pc.conf.keep, &lost))
				nfail++;
		}
		tfs_warn("fault: power cut: undid %u unsynced changes in %u files, %" PRIu64
			 " blocks lost (undo log: %llu bytes; %s)%s", nrec, pc.nfiles, lost,
			 (unsigned long long)pc.bytes, why,
			 pc.overflow ? "; the log had overflowed, some changes survive" : "");
		if (nfail)
			tfs_warn("fault: power cut: %u files could not be put back: %s", nfail,
				 strerror(errno));
	}
	kill(getpid(), SIGKILL);
	for (;;)
		pause();
}

/* ------------------------------------------------------------------ */
/* Crash states from a dump                                             */
/* ------------------------------------------------------------------ */

static int get(FILE *in, void *p, size_t len)
{
	return fread(p, 1, len, in) == len ? 0 : -1;
}

static void free_recs(struct rec *r)
{
	while (r) {
		struct rec *o = r->older;

		free(r);
		r = o;
	}
}

long tfs_pcut_apply_dump(const char *dump, const char *from, const char *to, double keep,
			 uint64_t seed)
{
	FILE *in = fopen(dump, "r");
	char magic[8];
	uint64_t lost = 0;
	int rc = 0;

	if (!in)
		return -errno;
	if (get(in, magic, 8) || memcmp(magic, DUMP_MAGIC, 8)) {
		fclose(in);
		return -EINVAL;
	}
	for (;;) {
		uint32_t len, nrec;
		char name[4096], path[8192];
		uint64_t size;
		struct rec *newest = NULL, **tail = &newest;
		size_t fl = strlen(from);
		int fd;

		if (get(in, &len, 4) || len >= sizeof(name)) {
			rc = -EINVAL;
			break;
		}
		if (len == 0)
			break;
		if (get(in, name, len) || get(in, &size, 8) || get(in, &nrec, 4)) {
			rc = -EINVAL;
			break;
		}
		name[len] = 0;
		for (uint32_t i = 0; i < nrec && rc == 0; i++) {
			uint64_t hdr[3];
			uint32_t nseg;
			struct rec *r;

			if (get(in, hdr, sizeof(hdr)) || get(in, &nseg, 4) || nseg > (1u << 20)) {
				rc = -EINVAL;
				break;
			}
			r = calloc(1, sizeof(*r) + nseg * sizeof(r->seg[0]));
			if (!r) {
				rc = -ENOMEM;
				break;
			}
			*r = (struct rec){ .off = hdr[0], .end = hdr[1], .old_size = hdr[2],
					   .nseg = nseg };
			*tail = r;
			tail = &r->older;
			for (uint32_t k = 0; k < nseg && rc == 0; k++) {
				uint64_t sh[2];

				if (get(in, sh, sizeof(sh)) || sh[1] > CAP_BYTES ||
				    !(r->seg[k].data = malloc(sh[1] ? sh[1] : 1)) ||
				    get(in, r->seg[k].data, sh[1]))
					rc = -EINVAL;
				r->seg[k].off = sh[0];
				r->seg[k].len = sh[1];
			}
		}
		if (rc == 0 && strncmp(name, from, fl) == 0) {
			snprintf(path, sizeof(path), "%s%s", to, name + fl);
			fd = open(path, O_RDWR | O_CLOEXEC);
			if (fd >= 0) {
				if (file_apply(fd, newest, size, path_key(name + fl), seed, keep, &lost))
					rc = -errno;
				close(fd);
			}
		}
		for (struct rec *r = newest; r; r = r->older)
			for (unsigned k = 0; k < r->nseg; k++)
				free(r->seg[k].data);
		free_recs(newest);
		if (rc)
			break;
	}
	fclose(in);
	return rc ? rc : (long)lost;
}
