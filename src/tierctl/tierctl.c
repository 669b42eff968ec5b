/* tierctl.c - the administrator's command for a mounted tierfs array.
 *
 * Owns: nothing but the command line.  It speaks to the daemon through two
 * xattrs on the mount's root (src/fuse/control.c):
 *   user.tierfs.status   read: key=value lines describing the array
 *   user.tierfs.ctl      write: a command ("fail N", "replace N DIR",
 *                        "scrub", "repair", "cancel", and for the SSD
 *                        tier "flush", "cache_mode MODE", "detach"); on
 *                        refusal the reason is the status's ctl_error line
 *
 * It also reads and sets the other user.tierfs.* names of the root and
 * of files (src/fuse/attrs.c): stats (JSON), files, set, a file's flush
 * and evict.
 *
 * Exit status: 0 done; 1 refused or failed; 2 usage; 3 scrub found
 * mismatches it did not repair.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "monitor.h"
#include "tierctl.h"

#define XATTR_CTL    "user.tierfs.ctl"
#define XATTR_STATS  "user.tierfs.stats"
#define XATTR_PFX    "user.tierfs."

const char *prog = "tierctl";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s COMMAND MOUNTPOINT [ARGS]\n\n"
		"  status  MOUNTPOINT [--raw|--json]   level, chunk, member states, jobs, the\n"
		"                                      SSD tier (--json: as stats does)\n"
		"  fail    MOUNTPOINT INDEX            take a member out of the array\n"
		"  replace MOUNTPOINT INDEX NEWDIR [--wait]\n"
		"                                      rebuild a failed member onto the empty\n"
		"                                      directory NEWDIR, in the background\n"
		"  scrub   MOUNTPOINT [--repair] [--wait]\n"
		"                                      read everything, check mirrors and\n"
		"                                      parity (and repair mismatches)\n"
		"  cancel  MOUNTPOINT                  stop a running scrub\n"
		"  wait    MOUNTPOINT                  wait for a running job, with progress\n"
		"  flush   MOUNTPOINT                  write every dirty byte of the SSD tier\n"
		"                                      to the members, with progress\n"
		"  flush   FILE                        write the file's dirty bytes now\n"
		"  evict   FILE                        flush the file, then drop it from the\n"
		"                                      SSD tier\n"
		"  pin     FILE                        load the file into the SSD tier and keep\n"
		"                                      it there (up to half the tier in all)\n"
		"  unpin   FILE                        let the tier evict it again\n"
		"  stats   MOUNTPOINT [--json]         every counter and state, as one JSON\n"
		"                                      document\n"
		"  stats   MOUNTPOINT... --prometheus  the same in node_exporter's textfile\n"
		"                                      format, for several arrays\n"
		"  top     MOUNTPOINT [--interval S] [--count N]\n"
		"                                      a live view: requests, hit ratio, dirty\n"
		"                                      level, flush rate, each member's I/O\n"
		"  list                                every mounted tierfs array and its state\n"
		"  trace   MOUNTPOINT [start FILE|stop]\n"
		"                                      record every request the SSD tier sees\n"
		"                                      into FILE (a new file), for cache_sim\n"
		"  files   PATH [N]                    the N files under PATH the tier holds\n"
		"                                      most of (20), with dirty bytes and heat\n"
		"  set     MOUNTPOINT TUNABLE VALUE    cache_mode, seq_cutoff, promote_threshold,\n"
		"                                      dirty_low, dirty_high or maint_mbps,\n"
		"                                      until unmount\n"
		"  mode    MOUNTPOINT MODE             set the cache mode: writeback,\n"
		"                                      writethrough, writearound or off (leaving\n"
		"                                      writeback waits for the flush)\n"
		"  detach  MOUNTPOINT                  flush, empty and unbind the SSD tier;\n"
		"                                      the array runs uncached\n"
		"  monitor MOUNTPOINT... [--program PROG] [--interval SECONDS] [--oneshot]\n"
		"                                      log events (Fail, Degraded, RebuildFinished,\n"
		"                                      ScrubMismatch, CacheError, DirtyHigh, ...)\n"
		"                                      and run PROG EVENT MOUNTPOINT [DETAIL]\n",
		prog);
}

char *read_attr(const char *mnt, const char *name)
{
	ssize_t n = getxattr(mnt, name, NULL, 0);
	char *buf;

	if (n < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, mnt,
			errno == ENODATA || errno == ENOTSUP ? "not a tierfs mount"
							      : strerror(errno));
		return NULL;
	}
	buf = malloc((size_t)n + 4097);	/* it may grow between the calls */
	if (!buf)
		return NULL;
	n = getxattr(mnt, name, buf, (size_t)n + 4096);
	if (n < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, mnt, strerror(errno));
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	return buf;
}

char *status(const char *mnt)
{
	return read_attr(mnt, XATTR_STATUS);
}

const char *get(const char *st, const char *key, char *out, size_t len)
{
	size_t kl = strlen(key);

	out[0] = 0;
	for (const char *p = st; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
			const char *e = strchr(p, '\n');
			size_t l = e ? (size_t)(e - p - (ptrdiff_t)kl - 1) : strlen(p + kl + 1);

			if (l >= len)
				l = len - 1;
			memcpy(out, p + kl + 1, l);
			out[l] = 0;
			break;
		}
	}
	return out;
}

unsigned long long num(const char *st, const char *key)
{
	char v[32];

	return strtoull(get(st, key, v, sizeof(v)), NULL, 10);
}

/* "can lose N more member(s)": what the array survives from now on. */
static void say_margin(const char *st)
{
	char state[64];
	unsigned failed = 0;
	unsigned long long tol = num(st, "tolerates");

	for (const char *p = get(st, "state", state, sizeof(state)); *p; p++)
		failed += *p == '_';
	if (failed > tol)
		printf(", %u failed: data lost where they overlap", failed);
	else if (failed)
		printf(", %u failed, can lose %llu more", failed, tol - failed);
	else
		printf(", can lose %llu member%s", tol, tol == 1 ? "" : "s");
}

/* The tier's miss-ratio curve: each cache.mrc_xS line (S its size in the
 * tier's, 0_25 for 0.25) is the read hit ratio a tier of that size would
 * have reached on the reads since mount; and the promotion threshold in
 * force. */
static void print_curve(const char *st)
{
	static const char pre[] = "\ncache.mrc_x";
	unsigned long long size = num(st, "cache.size");
	const char *p = strstr(st, pre);
	char v[64], b[32];

	if (!p)
		return;
	printf("  if the tier were (read hits, from %s sampled reads):",
	       get(st, "cache.mrc_reads", v, sizeof(v)));
	for (int i = 0; p; p = strstr(p + 1, pre), i++) {
		char scale[16];
		int n = 0;

		/* "0_25=0.9836": the scale with '_' for '.', then the ratio */
		p += sizeof(pre) - 1;
		for (; n < (int)sizeof(scale) - 1 && p[n] && p[n] != '='; n++)
			scale[n] = p[n] == '_' ? '.' : p[n];
		scale[n] = 0;
		printf("%s %s ", i ? "," : "",
		       human((unsigned long long)((double)size * atof(scale)), b, sizeof(b)));
		if (p[n] == '=' && p[n + 1] != '-')
			printf("%.1f%%", 100 * atof(p + n + 1));
		else
			printf("-");
	}
	printf("\n  promotion threshold %s (%s)\n",
	       get(st, "cache.promote_threshold", v, sizeof(v)),
	       num(st, "cache.promote_auto") ? "tuned" : "fixed");
}

static void print_status(const char *st)
{
	char v[8][PATH_MAX + 64], b[4][32];

	printf("array %s: %s, %s members, chunk %s: %s", get(st, "uuid", v[0], sizeof(v[0])),
	       get(st, "level", v[1], sizeof(v[1])), get(st, "members", v[2], sizeof(v[2])),
	       human(num(st, "chunk"), b[0], sizeof(b[0])), get(st, "health", v[4], sizeof(v[4])));
	say_margin(st);
	printf("\n");
	for (unsigned k = 0;; k++) {
		char key[48], *sp;
		unsigned long long rd, wr;

		snprintf(key, sizeof(key), "member.%u", k);
		if (!*get(st, key, v[0], sizeof(v[0])))
			break;
		sp = strchr(v[0], ' ');
		if (sp)
			*sp++ = 0;
		snprintf(v[2], sizeof(v[2]), "%s", v[0]);
		/* a member being rebuilt shows how far it is */
		if (!strcmp(v[0], "rebuilding") && *get(st, "rebuild.member", v[1], sizeof(v[1])) &&
		    (unsigned)atoi(v[1]) == k)
			snprintf(v[2], sizeof(v[2]), "rebuilding %s%%",
				 get(st, "progress", v[3], sizeof(v[3])));
		snprintf(key, sizeof(key), "member.%u.read_bytes", k);
		rd = num(st, key);
		snprintf(key, sizeof(key), "member.%u.write_bytes", k);
		wr = num(st, key);
		snprintf(key, sizeof(key), "member.%u.errors", k);
		printf("  member %-2u %-16s read %9s  written %9s  errors %llu  %s\n", k, v[2],
		       human(rd, b[0], sizeof(b[0])), human(wr, b[1], sizeof(b[1])), num(st, key),
		       sp ? sp : "");
	}
	if (strcmp(get(st, "job", v[0], sizeof(v[0])), "none") != 0)
		printf("  %s running: %s%% (%s of %s bytes), %s MB/s, ETA %s s, %s files, "
		       "%s mismatches\n", v[0], get(st, "progress", v[1], sizeof(v[1])),
		       get(st, "done_bytes", v[2], sizeof(v[2])),
		       get(st, "total_bytes", v[3], sizeof(v[3])),
		       get(st, "rate_mbps", v[4], sizeof(v[4])), get(st, "eta_s", v[5], sizeof(v[5])),
		       get(st, "files", v[6], sizeof(v[6])), get(st, "mismatches", v[7], sizeof(v[7])));
	if (*get(st, "last", v[0], sizeof(v[0])))
		printf("  last job: %s\n", v[0]);
	if (strcmp(get(st, "cache", v[0], sizeof(v[0])), "none") != 0 && v[0][0]) {
		unsigned long long ext = num(st, "cache.extent");

		printf("cache %s: %s, %s, %s of %s extents of %s (%s), %s dirty\n", v[0],
		       get(st, "cache.mode", v[1], sizeof(v[1])),
		       get(st, "cache.policy", v[2], sizeof(v[2])),
		       get(st, "cache.cached_extents", v[3], sizeof(v[3])),
		       get(st, "cache.slots", v[4], sizeof(v[4])), human(ext, b[0], sizeof(b[0])),
		       human(num(st, "cache.size"), b[1], sizeof(b[1])),
		       human(num(st, "cache.dirty_bytes"), b[2], sizeof(b[2])));
		printf("  read hits: %.1f%% over 5 min, %.1f%% over an hour, %.1f%% over a day, "
		       "%.1f%% since made (%llu of %llu reads)\n",
		       100 * atof(get(st, "cache.read_hit_ratio_5m", v[1], 64)),
		       100 * atof(get(st, "cache.read_hit_ratio_1h", v[1], 64)),
		       100 * atof(get(st, "cache.read_hit_ratio_1d", v[1], 64)),
		       100 * atof(get(st, "cache.read_hit_ratio_total", v[1], 64)),
		       num(st, "cache.total.read_req_hits"),
		       num(st, "cache.total.read_req_hits") + num(st, "cache.total.read_req_misses"));
		printf("  since mount: %s promotions, %s evictions, %s flushed, %s pinned files\n",
		       get(st, "cache.promotions", v[1], sizeof(v[1])),
		       get(st, "cache.evictions", v[2], sizeof(v[2])),
		       human(num(st, "cache.flushed_bytes"), b[0], sizeof(b[0])),
		       get(st, "cache.pinned_files", v[3], sizeof(v[3])));
		printf("  extents: %s hot, %s warm, %s cold\n",
		       get(st, "cache.hot_extents", v[1], sizeof(v[1])),
		       get(st, "cache.warm_extents", v[2], sizeof(v[2])),
		       get(st, "cache.cold_extents", v[3], sizeof(v[3])));
		print_curve(st);
	}
	if (!strcmp(get(st, "fuse.transport", v[0], sizeof(v[0])), "io_uring"))
		printf("requests: io_uring, %s queues of %s (fuse_uring=%s); %s requests, %s of "
		       "them to the pool, %s reads on the queues' rings\n",
		       get(st, "fuse.queues", v[1], sizeof(v[1])),
		       get(st, "fuse.queue_depth", v[2], sizeof(v[2])),
		       get(st, "fuse.uring", v[3], sizeof(v[3])),
		       get(st, "fuse.ring_requests", v[4], sizeof(v[4])),
		       get(st, "fuse.ring_pooled", v[5], sizeof(v[5])),
		       get(st, "fuse.ring_reads", v[6], sizeof(v[6])));
	else if (*v[0])
		printf("requests: /dev/fuse (fuse_uring=%s: %s)\n",
		       get(st, "fuse.uring", v[1], sizeof(v[1])),
		       get(st, "fuse.uring_note", v[2], sizeof(v[2])));
	for (const char *p = strstr(st, "mismatch="); p; p = strstr(p + 1, "\nmismatch=")) {
		const char *s = strchr(p, '=') + 1, *e = strchr(s, '\n');

		printf("  mismatch: %.*s\n", (int)(e ? e - s : (long)strlen(s)), s);
	}
}

#define FUSE_SUPER_MAGIC 0x65735546

/* The root of the mount path is on, into out (path itself for a mount
 * root).  Returns 0, or -1 (errno set). */
static int mount_root(const char *path, char *out, size_t len)
{
	char real[PATH_MAX];
	struct stat st, up;

	if (!realpath(path, real) || stat(real, &st))
		return -1;
	for (;;) {
		char *slash = strrchr(real, '/');
		char parent[PATH_MAX];

		if (!slash || slash == real) {
			snprintf(parent, sizeof(parent), "/");
		} else {
			memcpy(parent, real, (size_t)(slash - real));
			parent[slash - real] = 0;
		}
		if (!strcmp(real, "/") || stat(parent, &up) || up.st_dev != st.st_dev)
			break;
		snprintf(real, sizeof(real), "%s", parent);
	}
	snprintf(out, len, "%s", real);
	return 0;
}

/* Returns true if path is on a mounted tierfs array (a FUSE filesystem
 * whose root answers user.tierfs.status); says so on stderr if not, so
 * that no command leaves a user.tierfs.* attribute on another filesystem. */
static bool on_tierfs(const char *path)
{
	char root[PATH_MAX];
	struct statfs sf;

	if (statfs(path, &sf) || mount_root(path, root, sizeof(root))) {
		if (errno == EACCES || errno == EPERM)
			return true;	/* cannot tell: the set itself is refused */
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		return false;
	}
	if ((unsigned long)sf.f_type != FUSE_SUPER_MAGIC ||
	    getxattr(root, XATTR_STATUS, NULL, 0) < 0) {
		fprintf(stderr, "%s: %s: not on a tierfs mount\n", prog, path);
		return false;
	}
	return true;
}

static int ctl(const char *mnt, const char *cmd)
{
	char err[1024];
	char *st;

	if (!on_tierfs(mnt))
		return 1;
	if (setxattr(mnt, XATTR_CTL, cmd, strlen(cmd), 0) == 0)
		return 0;
	st = status(mnt);
	if (st && *get(st, "ctl_error", err, sizeof(err)))
		fprintf(stderr, "%s: %s\n", prog, err);
	else
		fprintf(stderr, "%s: %s: %s\n", prog, mnt,
			errno == EPERM || errno == EACCES ? "only root may change the array" : strerror(errno));
	free(st);
	return 1;
}

/* Sets a file's or the root's user.tierfs.NAME to val; on refusal says
 * why, naming the path and the word (the root's reason from ctl_error).
 * Returns 0 or 1. */
static int set_attr(const char *path, const char *name, const char *val)
{
	char xname[128], err[1024], root[PATH_MAX];
	char *st;

	if (!on_tierfs(path))
		return 1;
	snprintf(xname, sizeof(xname), XATTR_PFX "%s", name);
	if (setxattr(path, xname, val, strlen(val), 0) == 0)
		return 0;
	/* the reason is the mount root's status's, to root */
	st = getuid() == 0 && mount_root(path, root, sizeof(root)) == 0 ? status(root) : NULL;
	if (st && *get(st, "ctl_error", err, sizeof(err)) && strstr(err, name))
		fprintf(stderr, "%s: %s: %s\n", prog, path, err);
	else
		fprintf(stderr, "%s: %s: %s %s: %s\n", prog, path, name, val,
			errno == EPERM || errno == EACCES ? "not permitted (a file's owner or root; the array's settings: root)"
				       : strerror(errno));
	free(st);
	return 1;
}

/* A file action run on its own thread while the caller shows progress. */
struct file_action {
	const char *path, *name;
	int rc;
	bool done;		/* atomic */
};

static void *file_action_run(void *arg)
{
	struct file_action *a = arg;

	a->rc = set_attr(a->path, a->name, "1");
	__atomic_store_n(&a->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static unsigned long long file_num(const char *path, const char *name);

/* flush or evict FILE: the set runs until the file's dirty bytes are on
 * the members; meanwhile a progress bar of its dirty bytes.  Returns the
 * exit status. */
static int file_flush(const char *path, const char *name)
{
	struct file_action a = { path, name, 1, false };
	unsigned long long first, left = 0;
	bool tty = isatty(STDOUT_FILENO), shown = false;
	pthread_t t;
	char b1[32];

	first = file_num(path, "dirty_bytes");	/* 0 off tierfs: set_attr says why */
	if (pthread_create(&t, NULL, file_action_run, &a))
		return set_attr(path, name, "1");
	while (!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE)) {
		int w;

		usleep(200000);
		if (__atomic_load_n(&a.done, __ATOMIC_ACQUIRE) || !first)
			break;
		left = file_num(path, "dirty_bytes");
		w = (int)(40 * (first - (left < first ? left : first)) / first);
		printf(tty ? "\r%s [%-40.*s] %3d%%, %s dirty   " : "%s [%-40.*s] %3d%%, %s dirty\n",
		       name, w, "########################################", w * 100 / 40,
		       human(left, b1, sizeof(b1)));
		fflush(stdout);
		shown = true;
	}
	pthread_join(t, NULL);
	if (shown && tty)
		printf("\n");
	if (a.rc == 0)
		printf("%s: %s %s\n", path, !strcmp(name, "evict") ? "flushed and evicted," : "flushed,",
		       first ? human(first, b1, sizeof(b1)) : "nothing was dirty");
	return a.rc;
}

/* A regular file's user.tierfs.NAME as a number (0 when unreadable). */
static unsigned long long file_num(const char *path, const char *name)
{
	char xname[128], v[32];
	ssize_t n;

	snprintf(xname, sizeof(xname), XATTR_PFX "%s", name);
	n = getxattr(path, xname, v, sizeof(v) - 1);
	if (n <= 0)
		return 0;
	v[n] = 0;
	return strtoull(v, NULL, 10);
}

struct fent {
	char *path;
	unsigned long long cached, dirty;
	char heat[8];
};

static struct fent *fents;
static size_t nfents, capfents;

static int file_cb(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	struct fent *e;
	ssize_t n;

	(void)ftw;
	if (type != FTW_F || !S_ISREG(sb->st_mode))
		return 0;
	if (nfents == capfents) {
		size_t cap = capfents ? 2 * capfents : 256;
		struct fent *v = realloc(fents, cap * sizeof(*v));

		if (!v)
			return -1;
		fents = v;
		capfents = cap;
	}
	e = &fents[nfents];
	e->cached = file_num(path, "cached_bytes");
	if (!e->cached)
		return 0;
	e->dirty = file_num(path, "dirty_bytes");
	n = getxattr(path, XATTR_PFX "heat", e->heat, sizeof(e->heat) - 1);
	e->heat[n > 0 ? n : 0] = 0;
	e->path = strdup(path);
	if (!e->path)
		return -1;
	nfents++;
	return 0;
}

static int fent_cmp(const void *a, const void *b)
{
	const struct fent *x = a, *y = b;

	return x->cached < y->cached ? 1 : x->cached > y->cached ? -1 : strcmp(x->path, y->path);
}

const char *human(unsigned long long v, char *buf, size_t len)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double d = (double)v;
	unsigned i = 0;

	while (d >= 1024 && i + 1 < sizeof(u) / sizeof(u[0])) {
		d /= 1024;
		i++;
	}
	snprintf(buf, len, i && d != (double)(unsigned long long)d ? "%.1f %s" : "%.0f %s", d, u[i]);
	return buf;
}

/* The files under root the tier holds most of, at most max. */
static int files(const char *root, unsigned max)
{
	char b1[32], b2[32];

	if (nftw(root, file_cb, 32, FTW_PHYS | FTW_MOUNT)) {
		fprintf(stderr, "%s: %s: %s\n", prog, root, strerror(errno));
		return 1;
	}
	qsort(fents, nfents, sizeof(*fents), fent_cmp);
	if (nfents)
		printf("%12s %12s  %-5s %s\n", "in the tier", "dirty", "heat", "file");
	for (size_t i = 0; i < nfents; i++) {
		if (i < max)
			printf("%12s %12s  %-5s %s\n", human(fents[i].cached, b1, sizeof(b1)),
			       human(fents[i].dirty, b2, sizeof(b2)), fents[i].heat, fents[i].path);
		free(fents[i].path);
	}
	if (nfents > max)
		printf("(%zu more)\n", nfents - max);
	free(fents);
	return 0;
}

/* Follow the running job until it ends; returns the exit status (its
 * result).  Not started by this call and none running: says so, 0. */
static int wait_job(const char *mnt, bool started)
{
	bool tty = isatty(STDOUT_FILENO);
	char job[64], pct[32], rate[32], eta[32], last[512], mism[32];
	char *st;

	for (unsigned i = 0;; i++) {
		st = status(mnt);
		if (!st)
			return 1;
		/* a job this call started may be over already: its result */
		if (strcmp(get(st, "job", job, sizeof(job)), "none") == 0 && i == 0 && !started) {
			get(st, "last", last, sizeof(last));
			printf("no job running on %s%s%s\n", mnt, last[0] ? "; the last one: " : "",
			       last);
			free(st);
			return 0;
		}
		if (strcmp(job, "none") == 0)
			break;
		get(st, "progress", pct, sizeof(pct));
		get(st, "rate_mbps", rate, sizeof(rate));
		get(st, "eta_s", eta, sizeof(eta));
		printf(tty ? "\r%s: %s%%, %s MB/s, ETA %s s   " : "%s: %s%%, %s MB/s, ETA %s s\n",
		       job, pct, rate, eta);
		fflush(stdout);
		free(st);
		usleep(500000);
	}
	get(st, "last", last, sizeof(last));
	printf("%s%s\n", tty ? "\r" : "", last);
	free(st);
	if (!strstr(last, "done: ok"))
		return 1;
	if (strstr(last, "check done") && sscanf(strstr(last, "files, ") ?
						 strstr(last, "files, ") + 7 : "0", "%31s", mism) &&
	    strcmp(mism, "0") != 0)
		return 3;
	return 0;
}

static int wait_flush(const char *mnt, unsigned long long before);

/* The tier's cache.flushed_bytes now (0 if the status cannot be read). */
static unsigned long long flushed_bytes(const char *mnt)
{
	char *st = status(mnt);
	unsigned long long v = st ? num(st, "cache.flushed_bytes") : 0;

	free(st);
	return v;
}

/* Ask for a flush and follow it until nothing is dirty, with a progress
 * bar; says how many bytes went to the members meanwhile.  Returns the
 * exit status. */
static int flush_and_wait(const char *mnt)
{
	unsigned long long before = flushed_bytes(mnt);

	if (ctl(mnt, "flush"))
		return 1;
	return wait_flush(mnt, before);
}

/* Follow the SSD tier's flush until nothing is dirty, with a progress
 * bar; before: cache.flushed_bytes before it was asked for.  Returns the
 * exit status. */
static int wait_flush(const char *mnt, unsigned long long before)
{
	bool tty = isatty(STDOUT_FILENO);
	unsigned long long first = 0, left;
	char v[64], pend[16], err[256];
	char *st;

	for (unsigned i = 0;; i++) {
		int w;

		st = status(mnt);
		if (!st)
			return 1;
		if (!strcmp(get(st, "cache", v, sizeof(v)), "none") || !v[0]) {
			free(st);
			fprintf(stderr, "%s: %s has no SSD tier\n", prog, mnt);
			return 1;
		}
		left = strtoull(get(st, "cache.dirty_bytes", v, sizeof(v)), NULL, 10);
		get(st, "cache.flush_pending", pend, sizeof(pend));
		get(st, "cache.flush_error", err, sizeof(err));
		free(st);
		if (!strcmp(pend, "0") && left && err[0]) {
			fprintf(stderr, "%s%s: flush stopped with %llu bytes dirty: %s (the "
				"daemon's log says more)\n", tty ? "\n" : "", prog, left, err);
			return 1;
		}
		if (i == 0 || left > first)
			first = left;
		w = first ? (int)(40 * (first - left) / first) : 40;
		printf(tty ? "\rflush [%-40.*s] %3d%%, %llu MiB dirty   "
			   : "flush [%-40.*s] %3d%%, %llu MiB dirty\n",
		       w, "########################################", w * 100 / 40, left >> 20);
		fflush(stdout);
		if (!strcmp(pend, "0") && (left == 0 || i > 0))
			break;	/* done (what is dirty now was written since) */
		usleep(tty ? 200000 : 1000000);
	}
	{
		char b1[32], b2[32];
		unsigned long long done = flushed_bytes(mnt) - before;

		if (!done)
			printf("%sflushed: nothing was dirty\n", tty ? "\n" : "");
		else if (left)
			printf("%sflushed %s to the members (%s written since is dirty)\n",
			       tty ? "\n" : "", human(done, b1, sizeof(b1)),
			       human(left, b2, sizeof(b2)));
		else
			printf("%sflushed %s to the members: nothing dirty\n", tty ? "\n" : "",
			       human(done, b1, sizeof(b1)));
	}
	return 0;
}

/* tierctl trace MOUNTPOINT [start FILE | stop]: the recorder's state, or
 * start it into FILE (made by the daemon: it must not exist), or stop it.
 * Returns the exit status. */
static int trace(const char *mnt, const char *what, const char *file)
{
	char cmd[PATH_MAX + 16], dir[PATH_MAX], real[PATH_MAX];
	char *st;

	if (!what) {
		st = read_attr(mnt, XATTR_PFX "trace");
		if (!st)
			return 1;
		printf("%s\n", st);
		free(st);
		return 0;
	}
	if (!strcmp(what, "stop")) {
		if (set_attr(mnt, "trace", "stop"))
			return 1;
		st = read_attr(mnt, XATTR_PFX "trace");
		printf("trace stopped: %s\n", st ? st : "?");
		free(st);
		return 0;
	}
	/* the daemon's working directory is not ours: an absolute path, the
	 * directory resolved here (the file itself must not exist yet) */
	snprintf(dir, sizeof(dir), "%s", file);
	{
		char *slash = strrchr(dir, '/');
		const char *base = slash ? slash + 1 : file;

		if (slash == dir)
			snprintf(dir, sizeof(dir), "/");
		else if (slash)
			*slash = 0;
		else
			snprintf(dir, sizeof(dir), ".");
		if (!*base || !realpath(dir, real)) {
			fprintf(stderr, "%s: trace: %s: %s\n", prog, file,
				*base ? strerror(errno) : "a file name, not a directory");
			return 1;
		}
		snprintf(cmd, sizeof(cmd), "start %s/%s", strcmp(real, "/") ? real : "", base);
	}
	if (set_attr(mnt, "trace", cmd))
		return 1;
	printf("tracing into %s; stop with: %s trace %s stop\n", cmd + 6, prog, mnt);
	return 0;
}

static int index_arg(const char *s, unsigned *k)
{
	char *e;
	unsigned long v = strtoul(s, &e, 10);

	if (!*s || *e || v > 31) {
		fprintf(stderr, "%s: '%s' is not a member index\n", prog, s);
		return -1;
	}
	*k = (unsigned)v;
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd, *mnt;
	bool wait = false, repair = false, raw = false, prom = false, json = false;
	double interval = 1;
	unsigned count = 0;
	char buf[PATH_MAX + 64];
	int nargs = 0;
	char *args[16];
	struct stat sb;
	unsigned k;

	if (argc > 1 && !strcmp(argv[1], "monitor"))	/* options of its own */
		return tierctl_monitor(argc - 1, argv + 1);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--wait"))
			wait = true;
		else if (!strcmp(argv[i], "--repair"))
			repair = true;
		else if (!strcmp(argv[i], "--raw"))
			raw = true;
		else if (!strcmp(argv[i], "--json"))
			json = true;	/* stats prints JSON with or without it */
		else if (!strcmp(argv[i], "--prometheus"))
			prom = true;
		else if ((!strcmp(argv[i], "--interval") || !strcmp(argv[i], "--count")) &&
			 i + 1 < argc) {
			char *end;
			double x = strtod(argv[i + 1], &end);

			if (*end || !*argv[i + 1] || !(x > 0) || x > 86400 ||
			    (argv[i][2] == 'c' && x != (unsigned)x)) {
				fprintf(stderr, "%s: %s '%s': a number above 0\n", prog, argv[i],
					argv[i + 1]);
				return 2;
			}
			if (argv[i][2] == 'i')
				interval = x;
			else
				count = (unsigned)x;
			i++;
		}
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return usage(stdout), 0;
		else if (!strcmp(argv[i], "--version"))
			return printf("tierctl %s\n", TIERFS_VERSION), 0;
		else if (argv[i][0] == '-' && argv[i][1])
			return fprintf(stderr, "%s: unknown option '%s'\n", prog, argv[i]),
			       usage(stderr), 2;
		else if (nargs < 16)
			args[nargs++] = argv[i];
		else
			return usage(stderr), 2;
	}
	if (nargs == 1 && !strcmp(args[0], "list"))
		return cmd_list();
	if (nargs >= 2 && !strcmp(args[0], "stats") && prom)
		return cmd_prometheus(nargs - 1, args + 1);
	if (nargs < 2)
		return usage(stderr), 2;
	cmd = args[0];
	mnt = args[1];
	if (!strcmp(cmd, "top") && nargs == 2)
		return cmd_top(mnt, interval, count);
	if (!strcmp(cmd, "status") && nargs == 2 && json)
		cmd = "stats";	/* the same document */
	if (!strcmp(cmd, "status") && nargs == 2) {
		char *st = status(mnt);

		if (!st)
			return 1;
		if (raw)
			fputs(st, stdout);
		else
			print_status(st);
		free(st);
		return 0;
	}
	if (!strcmp(cmd, "fail") && nargs == 3) {
		if (index_arg(args[2], &k))
			return 2;
		snprintf(buf, sizeof(buf), "fail %u", k);
		return ctl(mnt, buf);
	}
	if (!strcmp(cmd, "replace") && nargs == 4) {
		char real[PATH_MAX];

		if (index_arg(args[2], &k))
			return 2;
		if (!realpath(args[3], real)) {
			fprintf(stderr, "%s: %s: %s\n", prog, args[3], strerror(errno));
			return 1;
		}
		snprintf(buf, sizeof(buf), "replace %u %s", k, real);
		if (ctl(mnt, buf))
			return 1;
		return wait ? wait_job(mnt, true) : 0;
	}
	if (!strcmp(cmd, "scrub") && nargs == 2) {
		if (ctl(mnt, repair ? "repair" : "scrub"))
			return 1;
		return wait ? wait_job(mnt, true) : 0;
	}
	if (!strcmp(cmd, "cancel") && nargs == 2)
		return ctl(mnt, "cancel");
	if (!strcmp(cmd, "wait") && nargs == 2)
		return wait_job(mnt, false);
	if (!strcmp(cmd, "stats") && nargs == 2) {
		char *js = read_attr(mnt, XATTR_STATS);

		if (!js)
			return 1;
		printf("%s\n", js);
		free(js);
		return 0;
	}
	if (!strcmp(cmd, "files") && (nargs == 2 || nargs == 3)) {
		unsigned long max = 20;
		char *end;

		if (nargs == 3) {
			errno = 0;
			max = strtoul(args[2], &end, 10);
			if (errno || *end || !*args[2] || max == 0) {
				fprintf(stderr, "%s: files: '%s' is not a count of files\n", prog,
					args[2]);
				return 2;
			}
		}
		return files(mnt, (unsigned)(max > UINT_MAX ? UINT_MAX : max));
	}
	if (!strcmp(cmd, "set") && nargs == 4)
		return set_attr(mnt, args[2], args[3]);
	if (!strcmp(cmd, "trace") && (nargs == 2 || (nargs == 3 && !strcmp(args[2], "stop")) ||
				      (nargs == 4 && !strcmp(args[2], "start"))))
		return trace(mnt, nargs > 2 ? args[2] : NULL, nargs > 3 ? args[3] : NULL);
	if ((!strcmp(cmd, "flush") || !strcmp(cmd, "evict")) && nargs == 2 &&
	    stat(mnt, &sb) == 0 && S_ISREG(sb.st_mode))
		return file_flush(mnt, cmd);
	if ((!strcmp(cmd, "pin") || !strcmp(cmd, "unpin")) && nargs == 2)
		return set_attr(mnt, "pinned", cmd[0] == 'p' ? "1" : "0");
	if (!strcmp(cmd, "flush") && nargs == 2)
		return flush_and_wait(mnt);
	if (!strcmp(cmd, "mode") && nargs == 3) {
		unsigned long long before = flushed_bytes(mnt);

		snprintf(buf, sizeof(buf), "cache_mode %s", args[2]);
		if (ctl(mnt, buf))
			return 1;
		return strcmp(args[2], "writeback") ? wait_flush(mnt, before) : 0;
	}
	if (!strcmp(cmd, "detach") && nargs == 2) {
		/* the flush with progress first; the detach itself then has
		 * little left to write */
		if (flush_and_wait(mnt) || ctl(mnt, "detach"))
			return 1;
		printf("detached: %s runs without its SSD tier\n", mnt);
		return 0;
	}
	usage(stderr);
	return 2;
}
