/* tierfs.c - the daemon: assemble the array, recover, mount, serve.
 *
 * Start-up order (each step can refuse with a one-line reason and exit 1,
 * and nothing is mounted until all of them passed):
 *   parse and check options -> open the log file (log=) -> check the
 *   mountpoint -> make the FUSE session (libfuse checks its options; the
 *   default fsname, tierfs:UUID, is only read from the first member's
 *   superblock) -> assemble members (super.c) -> upgrade an array made by
 *   an older tierfs (upgrade.c) -> open the journal (meta.c) -> replay
 *   interrupted namespace changes (replay.c) -> mount -> daemonize (unless
 *   -f; messages then go where log.c says) -> reopen the journal in the
 *   daemon (LMDB environments must not cross fork) -> serve on the
 *   multi-threaded loop -> unmount on SIGTERM/SIGINT/SIGHUP or
 *   fusermount3 -u.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "tierfs/cache.h"
#include "tierfs/defer.h"
#include "tierfs/hitio.h"
#include "tierfs/fuse_fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/maint.h"
#include "tierfs/raid.h"
#include "tierfs/replay.h"
#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/parse.h"
#include "tierfs/scratch.h"
#include "tierfs/transport.h"
#include "tierfs/super.h"
#include "tierfs/upgrade.h"

struct opts {
	char *members;		/* "DIR:DIR:..." */
	double timeout;
	int ro;
	unsigned dir_cache;
	double maint_mbps;
	char *member_model;
	struct tfs_hdd_params hdd;
	struct tfs_cache_opts cache;
	unsigned miss_threads;
	unsigned hit_ring;
	char *fuse_uring;	/* off | auto | on */
	char *fsname;		/* the user's fsname= (also left for libfuse), or NULL */
	char *log;		/* log=FILE */
	char *search;		/* search=PATTERN[:PATTERN]: where a UUID's members are */
	char *conf;		/* conf=FILE: search lines (/etc/tierfs.conf) */
	int uring;		/* enum tfs_uring_mode */
	unsigned max_threads, max_idle_threads;	/* taken from libfuse's parser */
	unsigned max_read;			/* seen, and left for libfuse */
	char *num[32];		/* the text of each numeric option given (numopts[]) */
	const char *blk;	/* blkdev or blksize= given */
};

enum { KEY_RO = 1, KEY_BLK, KEY_FSNAME };

#define OPT(t, p) { t, offsetof(struct opts, p), 1 }
static const struct fuse_opt tierfs_opts[] = {
	OPT("member_model=%s", member_model),
	OPT("cache=%s", cache.dir),
	OPT("cache_mode=%s", cache.mode),
	OPT("cache_policy=%s", cache.policy),
	OPT("cache_reclaim=%s", cache.reclaim),
	OPT("fuse_uring=%s", fuse_uring),
	OPT("log=%s", log),
	OPT("search=%s", search),
	OPT("conf=%s", conf),
	OPT("cache_discard", cache.discard),
	FUSE_OPT_KEY("ro", KEY_RO),
	FUSE_OPT_KEY("blkdev", KEY_BLK),
	FUSE_OPT_KEY("blksize=", KEY_BLK),
	FUSE_OPT_KEY("fsname=", KEY_FSNAME),
	FUSE_OPT_END
};

/* Every numeric -o option, tierfs's and the ones of libfuse tierfs uses:
 * its range (README "Mount options" documents the same), and the option
 * without which it means nothing.  All are checked before anything is
 * touched (start-up order above); max_threads and max_idle_threads are
 * taken from libfuse (which wraps "-1" and clamps), max_read is checked and
 * left for libfuse's mount. */
enum need { NEED_NONE, NEED_CACHE, NEED_MODEL };	/* the option another needs */

struct numopt {
	struct tfs_num_spec spec;
	enum need needs;
	size_t off;		/* the value in struct opts */
	bool keep;		/* also passed on to libfuse */
};

#define NUMOPT(name, field, kind, lo, hi, note, needs, keep) \
	{ { name, kind, lo, hi, note }, needs, offsetof(struct opts, field), keep }
static const struct numopt numopts[] = {
	NUMOPT("attr_timeout", timeout, TFS_NUM_REAL, 0, 86400, NULL, NEED_NONE, false),
	NUMOPT("entry_timeout", timeout, TFS_NUM_REAL, 0, 86400, NULL, NEED_NONE, false),
	NUMOPT("dir_cache", dir_cache, TFS_NUM_UINT, 1, 65536, NULL, NEED_NONE, false),
	NUMOPT("maint_mbps", maint_mbps, TFS_NUM_REAL, 0, 100000, "0: no cap", NEED_NONE, false),
	NUMOPT("max_threads", max_threads, TFS_NUM_UINT, 1, 1024, NULL, NEED_NONE, false),
	NUMOPT("max_idle_threads", max_idle_threads, TFS_NUM_UINT, 0, 1024, NULL, NEED_NONE, false),
	NUMOPT("max_read", max_read, TFS_NUM_UINT, 4096, 1 << 20, NULL, NEED_NONE, true),
	NUMOPT("hdd_seek_ms", hdd.seek_ms, TFS_NUM_REAL, TFS_HDD_T2T_MS, 100, NULL,
	       NEED_MODEL, false),
	NUMOPT("hdd_rpm", hdd.rpm, TFS_NUM_UINT, 1000, 20000, NULL, NEED_MODEL, false),
	NUMOPT("hdd_mbps", hdd.mbps, TFS_NUM_REAL, 0.001, 2000, NULL, NEED_MODEL, false),
	NUMOPT("hdd_ncq", hdd.ncq, TFS_NUM_UINT, 1, TFS_HDD_NCQ_MAX, "1: arrival order",
	       NEED_MODEL, false),
	NUMOPT("cache_size", cache.size, TFS_NUM_SIZE, 64 << 10, (double)(1ull << 51), NULL,
	       NEED_CACHE, false),
	NUMOPT("cache_extent", cache.extent, TFS_NUM_SIZE, 4 << 10, 1 << 20, NULL, NEED_CACHE,
	       false),
	NUMOPT("cache_seq_cutoff", cache.seq_cutoff, TFS_NUM_SIZE, 0, (double)(1ull << 40),
	       "0: off", NEED_CACHE, false),
	NUMOPT("cache_promote", cache.promote, TFS_NUM_UINT, 0, 65535, "0: auto", NEED_CACHE,
	       false),
	NUMOPT("cache_halflife", cache.halflife, TFS_NUM_REAL, 1, 604800, NULL, NEED_CACHE, false),
	NUMOPT("cache_dirty_low", cache.dirty_low, TFS_NUM_UINT, 0, 99, NULL, NEED_CACHE, false),
	NUMOPT("cache_dirty_high", cache.dirty_high, TFS_NUM_UINT, 1, 100, NULL, NEED_CACHE, false),
	NUMOPT("miss_threads", miss_threads, TFS_NUM_UINT, 1, 1024, NULL, NEED_CACHE, false),
	NUMOPT("hit_ring", hit_ring, TFS_NUM_UINT, 0, 1, "0: off", NEED_CACHE, false),
};
#define NNUMOPTS (sizeof(numopts) / sizeof(numopts[0]))
_Static_assert(NNUMOPTS <= sizeof(((struct opts *)0)->num) / sizeof(char *),
	       "struct opts num[] is too small");

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct opts *o = data;

	if (key == FUSE_OPT_KEY_NONOPT && !o->members) {
		o->members = strdup(arg);
		return 0;	/* consumed: the next non-option is the mountpoint */
	}
	if (key == KEY_RO)
		o->ro = 1;	/* noted, and kept for the kernel mount */
	if (key == KEY_BLK)
		o->blk = "blkdev and blksize=";
	if (key == KEY_FSNAME) {
		free(o->fsname);	/* the last one counts, as for libfuse */
		o->fsname = strdup(arg + strlen("fsname="));
	}
	if (key == FUSE_OPT_KEY_OPT) {
		size_t l = strcspn(arg, "=");

		for (unsigned i = 0; i < NNUMOPTS; i++) {
			if (strlen(numopts[i].spec.name) != l || strncmp(arg, numopts[i].spec.name, l))
				continue;
			free(o->num[i]);
			o->num[i] = strdup(arg[l] ? arg + l + 1 : "");
			return numopts[i].keep ? 1 : 0;
		}
	}
	return 1;
}

/* name=value needs option n: 0, or -EINVAL with one line in err if n is
 * not given. */
static int need_given(const struct opts *o, enum need n, const char *name, const char *value,
		      char *err, size_t errlen)
{
	if (n == NEED_NONE || (n == NEED_CACHE && o->cache.dir) ||
	    (n == NEED_MODEL && o->member_model))
		return 0;
	snprintf(err, errlen, "%s=%s: only with -o %s, and no %s is given", name, value,
		 n == NEED_CACHE ? "cache=DIR" : "member_model=hdd7200",
		 n == NEED_CACHE ? "cache" : "member model");
	return -EINVAL;
}

/* Every option on its own, before any member, cache or mount is touched:
 * 0, or -EINVAL with one line in err. */
static int opts_check(struct opts *o, char *err, size_t errlen)
{
	int rc;

	for (unsigned i = 0; i < NNUMOPTS; i++) {
		const struct numopt *n = &numopts[i];

		if (!o->num[i])
			continue;
		rc = tfs_parse_num(&n->spec, o->num[i], (char *)o + n->off, err, errlen);
		if (rc == 0)
			rc = need_given(o, n->needs, n->spec.name, o->num[i], err, errlen);
		if (rc)
			return rc;
	}
	if (o->cache.mode && (rc = need_given(o, NEED_CACHE, "cache_mode", o->cache.mode, err,
					     errlen)))
		return rc;
	if (o->cache.policy && (rc = need_given(o, NEED_CACHE, "cache_policy", o->cache.policy,
					       err, errlen)))
		return rc;
	if (o->cache.reclaim && (rc = need_given(o, NEED_CACHE, "cache_reclaim", o->cache.reclaim,
						err, errlen)))
		return rc;
	if (o->member_model && strcmp(o->member_model, "hdd7200") != 0) {
		snprintf(err, errlen, "unknown member_model '%s' (known: hdd7200)", o->member_model);
		return -EINVAL;
	}
	if (o->fuse_uring && (o->uring = tfs_uring_mode_parse(o->fuse_uring)) < 0) {
		snprintf(err, errlen, "fuse_uring=%s: not off, auto or on", o->fuse_uring);
		return -EINVAL;
	}
	if (o->uring == TFS_URING_ON) {
		char why[256];

		if (!tfs_uring_allowed(why, sizeof(why))) {
			snprintf(err, errlen, "fuse_uring=on: %s", why);
			return -ENOTSUP;	/* the machine refuses, not the line */
		}
	}
	if (o->blk) {
		snprintf(err, errlen, "%s: tierfs is not a block-device filesystem (fuseblk)",
			 o->blk);
		return -EINVAL;
	}
	if (o->fsname && !*o->fsname) {
		snprintf(err, errlen, "fsname=: no name given");
		return -EINVAL;
	}
	if (o->log && !*o->log) {
		snprintf(err, errlen, "log=: no file given");
		return -EINVAL;
	}
	if (o->cache.dir && !*o->cache.dir) {
		snprintf(err, errlen, "cache=: no directory given");
		return -EINVAL;
	}
	return o->cache.dir ? tfs_cache_opts_check(&o->cache, err, errlen) : 0;
}

static void usage(const char *prog)
{
	printf("usage: %s [-f] [-d] [-o OPTS] DIR[:DIR...]|tierfs:UUID MOUNTPOINT\n\n"
	       "Assemble the tierfs array whose members are the given directories\n"
	       "(any order), or the directories search= or the search lines of\n"
	       "/etc/tierfs.conf find with the array's UUID, and mount it.\n"
	       "Options (a number outside its range is refused):\n"
	       "    -f                 stay in the foreground\n"
	       "    -d                 debug (implies -f)\n"
	       "    -o ro, allow_other, default_permissions (always on), ...\n"
	       "    -o suid, dev               honour set-user-ID bits and device files\n"
	       "                               (root only; nosuid,nodev by default)\n"
	       "    -o log=FILE                append every message to FILE, with a timestamp\n"
	       "                               (daemonized: there alone; without it: syslog,\n"
	       "                               or with no /dev/log the standard error tierfs\n"
	       "                               was started with, if a file or a terminal)\n"
	       "    -o fsname=NAME             the source df, findmnt and /proc/mounts show\n"
	       "                               (tierfs:UUID, the array's UUID)\n"
	       "    -o search=GLOB[:GLOB]      where tierfs:UUID's members may be (directories)\n"
	       "    -o conf=FILE               its 'search GLOB' lines instead (/etc/tierfs.conf)\n"
	       "    -o max_threads=N           FUSE worker threads, 1 to 1024 (16)\n"
	       "    -o max_idle_threads=N      idle workers kept, 0 to 1024 (16)\n"
	       "    -o attr_timeout=SECONDS    kernel attribute and name cache, 0 to 86400\n"
	       "                               (10; entry_timeout is the same option)\n"
	       "    -o dir_cache=N             directories whose member fds stay open,\n"
	       "                               1 to 65536 (1024)\n"
	       "    -o maint_mbps=MB/S         rate cap of scrub and rebuild, 0 to 100000\n"
	       "                               (0, the default: none)\n"
	       "    -o max_read=BYTES          largest read the kernel sends, 4096 to 1048576\n"
	       "    -o fuse_uring=auto|on|off  carry requests on io_uring queues, one per CPU\n"
	       "                               (FUSE-over-io_uring; auto, the default: with an\n"
	       "                               SSD tier, when the fuse module's enable_uring is\n"
	       "                               Y; on: also uncached, refuse to mount without it)\n"
	       "    -o member_model=hdd7200    make each member behave like a 7200 rpm disk;\n"
	       "       its parameters (only with member_model):\n"
	       "       hdd_seek_ms=0.8 to 100 (8.5), hdd_rpm=1000 to 20000 (7200),\n"
	       "       hdd_mbps=0.001 to 2000 (180), hdd_ncq=1 to 256 (1: arrival order;\n"
	       "       SATA NCQ: 32)\n"
	       "    -o cache=DIR               SSD tier in DIR (made on first use); options\n"
	       "       (only with cache=):\n"
	       "       cache_size=64K to 2P (1G; at least 16 extents), cache_extent=4K to 1M\n"
	       "       (256K, a power of two): both set when the cache is made\n"
	       "       cache_mode=writeback|writethrough|writearound|off\n"
	       "       cache_policy=wtinylfu|s3fifo|lru, cache_promote=0 to 65535 (0: the tuner\n"
	       "       chooses; N: the heat that promotes), cache_halflife=1 to 604800 (60 s),\n"
	       "       cache_seq_cutoff=0 to 1T\n"
	       "       (4M; 0: off), cache_dirty_low=0 to 99 (20), cache_dirty_high=1 to 100\n"
	       "       (70) (percent of the cache; low < high), cache_reclaim=0|1|auto (auto;\n"
	       "       1: dirty extents eviction wants are destaged first, then evicted;\n"
	       "       auto: that, once the tier sees it pays)\n"
	       "       miss_threads=1 to 1024 (64): threads for the requests that wait for\n"
	       "       the HDDs, off the FUSE workers\n"
	       "       hit_ring=0 or 1 (1): read hits on io_uring by one I/O thread\n"
	       "    -o cache_discard           mount although the cache holding dirty data is\n"
	       "                               lost (its files are named in the log)\n"
	       "FUSE options:\n", prog);
	fuse_lowlevel_help();
}

static int split_members(char *list, char **paths, unsigned max)
{
	unsigned n = 0;

	for (char *save = NULL, *t = strtok_r(list, ":", &save); t;
	     t = strtok_r(NULL, ":", &save)) {
		if (n == max)
			return -1;
		paths[n++] = t;
	}
	return (int)n;
}

/* The journal has a copy on every member that takes changes. */
static int journal_open(struct tfs_array *a, struct tfs_meta **mt)
{
	char dir[TFS_MAX_MEMBERS][PATH_MAX];
	const char *dirs[TFS_MAX_MEMBERS];
	uint32_t tags[TFS_MAX_MEMBERS], n = 0;
	int rc;

	for (uint32_t k = 0; k < a->n; k++) {
		if (a->sb.state[k] == TFS_M_FAILED)
			continue;
		snprintf(dir[n], sizeof(dir[n]), "%s/%s", a->path[k], TFS_JOURNAL_DIR);
		dirs[n] = dir[n];
		tags[n++] = k;
	}
	rc = tfs_meta_open(dirs, tags, n, mt);
	if (rc)
		tfs_err("cannot open the journal on the members: %s", strerror(-rc));
	return rc;
}

/* libfuse's messages become ours: one line, one prefix, where log.c puts
 * every message.  libfuse sometimes builds a line from several calls, so
 * pieces are collected until the newline. */
static void fuse_log_to_tfs(enum fuse_log_level level, const char *fmt, va_list ap)
{
	static __thread char line[1024];
	size_t l = strlen(line);

	vsnprintf(line + l, sizeof(line) - l, fmt, ap);
	l = strlen(line);
	if (l && line[l - 1] != '\n' && l < sizeof(line) - 1)
		return;
	while (l && line[l - 1] == '\n')
		line[--l] = 0;
	tfs_log((int)level, "%s", line);
	line[0] = 0;
}

/* The array's UUID as the first member directory's superblock gives it,
 * only read: the default fsname needs it before the session is made, and
 * the session comes before assembly so that a bad FUSE option touches no
 * member.  Assembly reads the same superblock first (super.c), so the
 * array it assembles has this UUID; "" when it cannot be read (assembly
 * then refuses, with the reason). */
static void first_uuid(const char *member, char uuid[static 37])
{
	struct tfs_super sb;
	const char *why;
	int fd = open(member, O_PATH | O_DIRECTORY | O_CLOEXEC);

	uuid[0] = 0;
	if (fd < 0)
		return;
	if (tfs_super_read(fd, &sb, &why) == 0)
		memcpy(uuid, sb.uuid, 37);
	close(fd);
}

/* Add our fixed mount options; libfuse validates all of them.  The source
 * df and /proc/mounts show is the user's fsname= (left in args), else
 * "tierfs:UUID": short, and the same whatever order the members are given
 * in (the member list made lines of hundreds of characters).
 *
 * nosuid,nodev come first, so a later suid or dev of the user's wins (root
 * may ask for them; fusermount3 refuses them to others).  libfuse's own
 * mount starts from the same flags, but saying it here makes it tierfs's
 * rule, whatever starts the daemon: mount.fuse3 appends "dev,suid" to every
 * mount that does not say nodev/nosuid (mount(8)'s defaults), and the
 * daemon cannot tell those from the user's, so mount(8) runs tierfs's own
 * helper for type fuse.tierfs too (mount.fuse.tierfs, before mount.fuse). */
static int add_mount_args(struct fuse_args *args, const struct opts *o, const char *uuid)
{
	char fsname[64];

	snprintf(fsname, sizeof(fsname), "-ofsname=tierfs:%s", uuid);
	return fuse_opt_insert_arg(args, 1, "-onosuid,nodev") ||
	       (!o->fsname && fuse_opt_add_arg(args, fsname)) ||
	       fuse_opt_add_arg(args, "-osubtype=tierfs") ||
	       fuse_opt_add_arg(args, "-odefault_permissions");
}

/* Build the namespace over the assembled members: backend, inode table,
 * journal, and recovery of interrupted changes. */
static int fs_setup(struct tfs_fs *fs, struct tfs_array *array, const struct opts *o)
{
	const char *fault = getenv("TIERFS_FAULT");
	int rootfd[TFS_MAX_MEMBERS], rc;
	struct stat rst;

	fs->array = array;
	fs->layout = array->sb.layout;
	fs->n = array->n;
	fs->timeout = o->timeout;
	fs->max_read = o->max_read;
	fs->maint_mbps = o->maint_mbps;
	fs->readonly = o->ro;
	fs->chown_ok = geteuid() == 0;
	fs->root_group = getegid() == 0;
	tfs_health_init(fs);
	for (uint32_t k = 0; k < fs->n; k++) {
		rootfd[k] = -1;
		if (array->dirfd[k] < 0)
			continue;	/* failed */
		rootfd[k] = openat(array->dirfd[k], TFS_TREE_DIR,
				   O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (rootfd[k] < 0) {
			rc = -errno;
			tfs_err("member %s: %s/: %s", array->path[k], TFS_TREE_DIR, strerror(errno));
			return rc;
		}
	}
	fs->be = tfs_posix_backend(rootfd, fs->n);
	if (fs->be && o->member_model)	/* checked by opts_check */
		fs->be = tfs_hdd_backend(fs->be, &o->hdd);
	if (fs->be && fault && *fault)
		fs->be = tfs_fault_backend(fs->be, fault);
	if (fs->be)	/* outermost: it sees what the model and faults did */
		fs->be = tfs_iostat_backend(fs->be, fs->n);
	if (!fs->be || (rc = tfs_fs_init(fs)))
		return -ENOMEM;
	if (o->dir_cache)
		fs->dmax = o->dir_cache;
	if (fstat(rootfd[fs->primary], &rst))
		return -errno;
	fs->root.ino = rst.st_ino;
	rc = tfs_upgrade(fs);	/* before anything reads a record */
	if (rc)
		return rc;
	rc = journal_open(array, &fs->meta);
	if (rc)
		return rc;
	/* row geometry and marks first: replay leaves marks (replay.c inv. 5) */
	if (tfs_level_ops(fs->layout.level)->tolerates(&fs->layout))
		rc = tfs_stripe_init(fs);
	if (rc == 0 && (rc = tfs_replay(fs, tfs_stripe_cut_replayed)))
		tfs_err("recovery of interrupted changes failed: %s", strerror(-rc));
	if (rc == 0)
		rc = tfs_maint_init(fs);
	if (rc == 0 && !fs->readonly && (rc = tfs_maint_resync(fs)))
		tfs_err("resync of parity written when the daemon stopped failed: %s",
			strerror(-rc));
	if (rc == 0) {
		char err[1024] = "";

		rc = tfs_cache_setup(fs, &o->cache, err, sizeof(err));
		if (rc)
			tfs_err("%s", err);
	}
	/* LMDB environments must not cross fork(): reopened after daemonizing */
	tfs_meta_close(fs->meta);
	fs->meta = NULL;
	return rc;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts cl;
	/* tierfs owns its members (flock): every change passes through the
	 * kernel, which updates or drops what it cached, so a long cache is
	 * safe and saves a round trip per stat and lookup */
	struct opts o = { .timeout = 10.0, .hdd = TFS_HDD7200, .miss_threads = 64,
			  .hit_ring = 1, .cache = TFS_CACHE_OPTS_DEFAULT, .max_threads = 16,
			  .max_idle_threads = 16, .uring = TFS_URING_AUTO };
	struct tfs_array array;
	struct tfs_fs fs;
	struct fuse_session *se = NULL;
	struct fuse_loop_config *cfg;
	char *paths[TFS_MAX_MEMBERS + 1], err[512], uuid[37], *list = NULL;
	struct stat mst;
	int npaths, rc, ret = 1, found = 0;
	bool changed, live = false;

	umask(0);
	/* Blocks of a FUSE request's size and more (a deferred write's copy,
	 * a queued hit of a 1 MiB extent) are mmapped, so freeing one gives
	 * it back at once.  Setting the threshold also stops glibc raising it
	 * after a large free (up to 32 MiB), which left such blocks in its
	 * arenas (docs/MEMORY.md). */
	mallopt(M_MMAP_THRESHOLD, TFS_SCRATCH_KEEP);
	memset(&fs, 0, sizeof(fs));
	memset(&array, 0, sizeof(array));
	for (unsigned i = 0; i < TFS_MAX_MEMBERS; i++)
		array.dirfd[i] = array.lockfd[i] = -1;
	fuse_set_log_func(fuse_log_to_tfs);
	/* exit status: 0 mounted (or help, version); 2 the command line is
	 * wrong (an unknown option, a value out of its range, an argument
	 * missing: the line names it); 1 refused or failed otherwise (a
	 * member, the mount point, the array's state) */
	if (fuse_opt_parse(&args, &o, tierfs_opts, opt_proc) == -1)
		return 2;	/* libfuse or opt_proc said why */
	if (fuse_parse_cmdline(&args, &cl) != 0)
		return 1;	/* the mount point (unknown options wait for the session) */
	if (cl.show_help) {
		usage(argv[0]);
		return 0;
	}
	if (cl.show_version) {
		printf("tierfs %s\n", TIERFS_VERSION);
		fflush(stdout);		/* before libfuse's lines, which fusermount3 prints */
		fuse_lowlevel_version();
		return 0;
	}
	if (!o.members || !cl.mountpoint) {
		fprintf(stderr, "tierfs: usage: %s [options] DIR[:DIR...] MOUNTPOINT\n", argv[0]);
		return 2;
	}
	if (cl.debug)
		tfs_log_level = LOG_DEBUG;

	/* options first: a typo must not touch any member */
	if ((rc = opts_check(&o, err, sizeof(err)))) {
		tfs_err("%s", err);
		ret = rc == -ENOTSUP ? 1 : 2;
		goto out;
	}
	/* before anything is touched, so a bad path is the only word said */
	if (o.log && (rc = tfs_log_open(o.log))) {
		tfs_err("log=%s: %s", o.log, strerror(-rc));
		goto out;
	}
	if (stat(cl.mountpoint, &mst)) {
		tfs_err("mountpoint %s: %s", cl.mountpoint, strerror(errno));
		goto out;
	}
	if (!S_ISDIR(mst.st_mode)) {
		tfs_err("mountpoint %s: not a directory", cl.mountpoint);
		goto out;
	}
	if (tfs_array_uuid_source(o.members)) {
		/* "tierfs:UUID": the members are found (array/find.c) */
		npaths = tfs_array_find(tfs_array_uuid_source(o.members), o.search,
					o.conf ? o.conf : "/etc/tierfs.conf", paths, err, sizeof(err));
		if (npaths < 0) {
			tfs_err("%s", err);
			goto out;
		}
		found = npaths;
		tfs_info("array %s: members %s%s%s%s%s%s", tfs_array_uuid_source(o.members),
			 paths[0], npaths > 1 ? ", " : "", npaths > 1 ? paths[1] : "",
			 npaths > 2 ? ", " : "", npaths > 2 ? paths[2] : "", npaths > 3 ? ", ..." : "");
	} else {
		list = strdup(o.members);
		npaths = list ? split_members(list, paths, TFS_MAX_MEMBERS + 1) : -1;
		if (npaths < 0) {
			tfs_err("too many member directories (at most %d)", TFS_MAX_MEMBERS);
			goto out;
		}
	}
	first_uuid(npaths ? paths[0] : "", uuid);
	if (add_mount_args(&args, &o, uuid))
		goto out;
	se = fuse_session_new(&args, &tfs_fuse_ops, sizeof(tfs_fuse_ops), &fs);
	if (!se) {
		ret = 2;	/* an option libfuse does not know: it said which */
		goto out;
	}

	rc = tfs_array_assemble(paths, (unsigned)npaths, &array, &changed, err, sizeof(err));
	if (rc) {
		tfs_err("%s", err);
		goto out;
	}
	if (!o.fsname && strcmp(array.sb.uuid, uuid)) {	/* first_uuid */
		tfs_err("member %s: its superblock changed while tierfs read it (array %s, "
			"then %s): mount again", paths[0], uuid[0] ? uuid : "unreadable",
			array.sb.uuid);
		goto out;
	}
	if (changed && !o.ro && tfs_array_record(&array) < 0) {
		tfs_err("cannot record the failed members on the others");
		goto out;
	}
	if (tfs_array_count(&array, TFS_M_UP) < array.n)
		tfs_warn("array %s is DEGRADED: member states %s (U in sync, _ failed, R rebuilding)",
			 array.sb.uuid, array.sb.state);
	if (fs_setup(&fs, &array, &o))
		goto out;
	if (fuse_set_signal_handlers(se))
		goto out;
	if (fuse_session_mount(se, cl.mountpoint)) {
		tfs_err("cannot mount on %s", cl.mountpoint);
		goto out_signals;
	}
	live = true;
	tfs_info("array %s: %s, %u members, chunk %u, mounted on %s", array.sb.uuid,
		 tfs_level_name(fs.layout.level), fs.n, fs.layout.chunk, cl.mountpoint);
	if (!cl.foreground)
		tfs_log_detach_begin();	/* while stderr is still the caller's */
	if (fuse_daemonize(cl.foreground))
		goto out_unmount;
	if (!cl.foreground)
		tfs_log_detach_end();
	if (journal_open(&array, &fs.meta))
		goto out_unmount;
	if (!fs.readonly && (tfs_stripe_start(&fs) || tfs_maint_start(&fs)))
		goto out_unmount;
	if (tfs_cache_start(&fs))
		goto out_unmount;
	/* the io_uring queues hand what waits for the members to the pool too
	 * (auto asks for them only with a tier: transport.c invariant 7) */
	if ((fs.cache || o.uring == TFS_URING_ON) &&
	    !(fs.defer = tfs_defer_start(o.miss_threads))) {
		tfs_err("out of memory");
		goto out_unmount;
	}
	if (fs.cache && o.hit_ring)
		fs.hitio = tfs_hitio_start();
	if ((rc = tfs_scratch_start()))
		tfs_warn("no idle trim thread (%s): memory a load freed stays with glibc",
			 strerror(-rc));

	/* before the loop reads the INIT, where io_uring is asked for */
	if (!(fs.transport = tfs_transport_attach(se, (enum tfs_uring_mode)o.uring, fs.cache != NULL,
						   fs.defer))) {
		tfs_err("cannot set up the FUSE transport");
		goto out_unmount;
	}

	cfg = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(cfg, cl.clone_fd);
	/* our values (numopts), not libfuse's: it never saw the options */
	fuse_loop_cfg_set_max_threads(cfg, o.max_threads);
	fuse_loop_cfg_set_idle_threads(cfg, o.max_idle_threads);
	rc = cl.singlethread ? fuse_session_loop(se) : fuse_session_loop_mt(se, cfg);
	ret = rc ? 1 : 0;
	fuse_loop_cfg_destroy(cfg);

out_unmount:
	tfs_transport_stop(fs.transport);	/* its answers come from the pool and the hit ring */
	tfs_scratch_stop();
	tfs_hitio_stop(fs.hitio);
	tfs_defer_stop(fs.defer);
	tfs_cache_stop(&fs);
	tfs_maint_stop(&fs);
	tfs_stripe_stop(&fs);
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out:
	if (!live)	/* refused: what the cache set-up made goes again */
		tfs_cache_abandon(&fs);
	if (se)
		fuse_session_destroy(se);
	tfs_transport_free(fs.transport);	/* libfuse answered through it to the end */
	tfs_meta_close(fs.meta);
	if (fs.htab)
		tfs_fs_destroy(&fs);
	tfs_array_release(&array);
	free(cl.mountpoint);
	free(o.members);
	free(o.member_model);
	free(o.cache.dir);
	free(o.cache.mode);
	free(o.cache.policy);
	free(o.cache.reclaim);
	free(o.fuse_uring);
	free(o.fsname);
	free(o.log);
	free(o.search);
	free(o.conf);
	for (unsigned i = 0; i < NNUMOPTS; i++)
		free(o.num[i]);
	free(list);
	for (int i = 0; i < found; i++)
		free(paths[i]);
	fuse_opt_free_args(&args);
	return ret;
}
