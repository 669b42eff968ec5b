/* tierfs.c - the daemon: assemble the array, recover, mount, serve.
 *
 * Start-up order (each step can refuse with a one-line reason and exit 1,
 * and nothing is mounted until all of them passed):
 *   parse args -> assemble members (super.c) -> upgrade an array made by
 *   an older tierfs (upgrade.c) -> open the journal (meta.c)
 *   -> replay interrupted namespace changes (replay.c) -> mount
 *   -> daemonize (unless -f) -> reopen the journal in the daemon (LMDB
 *   environments must not cross fork) -> serve on the multi-threaded loop
 *   -> unmount on SIGTERM/SIGINT/SIGHUP or fusermount3 -u.
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
#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/scratch.h"
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
};

enum { KEY_RO = 1 };

#define OPT(t, p) { t, offsetof(struct opts, p), 1 }
static const struct fuse_opt tierfs_opts[] = {
	OPT("entry_timeout=%lf", timeout),
	OPT("attr_timeout=%lf", timeout),
	OPT("dir_cache=%u", dir_cache),
	OPT("maint_mbps=%lf", maint_mbps),
	OPT("member_model=%s", member_model),
	OPT("hdd_seek_ms=%lf", hdd.seek_ms),
	OPT("hdd_rpm=%u", hdd.rpm),
	OPT("hdd_mbps=%lf", hdd.mbps),
	OPT("hdd_ncq=%u", hdd.ncq),
	OPT("cache=%s", cache.dir),
	OPT("cache_size=%s", cache.size),
	OPT("cache_extent=%s", cache.extent),
	OPT("cache_mode=%s", cache.mode),
	OPT("cache_policy=%s", cache.policy),
	OPT("cache_seq_cutoff=%s", cache.seq_cutoff),
	OPT("cache_promote=%u", cache.promote),
	OPT("cache_halflife=%lf", cache.halflife),
	OPT("cache_dirty_low=%u", cache.dirty_low),
	OPT("cache_dirty_high=%u", cache.dirty_high),
	OPT("cache_discard", cache.discard),
	OPT("miss_threads=%u", miss_threads),
	OPT("hit_ring=%u", hit_ring),
	FUSE_OPT_KEY("ro", KEY_RO),
	FUSE_OPT_END
};

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct opts *o = data;

	if (key == FUSE_OPT_KEY_NONOPT && !o->members) {
		o->members = strdup(arg);
		return 0;	/* consumed: the next non-option is the mountpoint */
	}
	if (key == KEY_RO)
		o->ro = 1;	/* noted, and kept for the kernel mount */
	return 1;
}

static void usage(const char *prog)
{
	printf("usage: %s [-f] [-d] [-o OPTS] DIR[:DIR...] MOUNTPOINT\n\n"
	       "Assemble the tierfs array whose members are the given directories\n"
	       "(any order) and mount it.  Options:\n"
	       "    -f                 stay in the foreground\n"
	       "    -d                 debug (implies -f)\n"
	       "    -o ro, allow_other, default_permissions (always on), ...\n"
	       "    -o attr_timeout=SECONDS    kernel attribute and name cache (default 10;\n"
	       "                               entry_timeout is the same option)\n"
	       "    -o dir_cache=N             directories whose member fds stay open (1024)\n"
	       "    -o maint_mbps=MB/S         rate cap of scrub and rebuild (default: none)\n"
	       "    -o member_model=hdd7200    make each member behave like a 7200 rpm disk\n"
	       "       hdd_seek_ms=8.5, hdd_rpm=7200, hdd_mbps=180   its parameters\n"
	       "       hdd_ncq=1       requests the disk may reorder (1: none; SATA NCQ: 32)\n"
	       "    -o cache=DIR               SSD tier in DIR (made on first use); options:\n"
	       "       cache_size=1G, cache_extent=256K    set when the cache is made\n"
	       "       cache_mode=writeback|writethrough|writearound|off\n"
	       "       cache_policy=s3fifo|lru, cache_promote=2 (heat that promotes),\n"
	       "       cache_halflife=60 (s), cache_seq_cutoff=4M (0: off),\n"
	       "       cache_dirty_low=20, cache_dirty_high=70 (percent of the cache)\n"
	       "    -o cache_discard           mount although the cache holding dirty data is\n"
	       "                               lost (its files are named in the log)\n"
	       "    -o miss_threads=N          with a cache: threads for the requests that wait\n"
	       "                               for the HDDs, off the FUSE workers (64)\n"
	       "    -o hit_ring=0              with a cache: read hits on the FUSE workers, not\n"
	       "                               on io_uring by one I/O thread (1)\n"
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

/* libfuse's messages become ours: one line, one prefix, syslog when
 * daemonized.  libfuse sometimes builds a line from several calls, so
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

/* Add our fixed mount options; libfuse validates all of them. */
static int add_mount_args(struct fuse_args *args, const char *members)
{
	char fsname[PATH_MAX + 16];

	snprintf(fsname, sizeof(fsname), "-ofsname=%s", members);
	for (char *p = fsname + 3; *p; p++)	/* ',' would split the option */
		if (*p == ',')
			*p = '_';
	return fuse_opt_add_arg(args, fsname) || fuse_opt_add_arg(args, "-osubtype=tierfs") ||
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
	if (fs->be && o->member_model) {
		if (strcmp(o->member_model, "hdd7200") != 0) {
			tfs_err("unknown member_model '%s' (known: hdd7200)", o->member_model);
			return -EINVAL;
		}
		fs->be = tfs_hdd_backend(fs->be, &o->hdd);
	}
	if (fs->be && fault && *fault)
		fs->be = tfs_fault_backend(fs->be, fault);
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
	if (rc == 0 && (rc = tfs_replay(fs)))
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
			  .hit_ring = 1 };
	struct tfs_array array;
	struct tfs_fs fs;
	struct fuse_session *se = NULL;
	struct fuse_loop_config *cfg;
	char *paths[TFS_MAX_MEMBERS + 1], err[512], *list = NULL;
	int npaths, rc, ret = 1;
	bool changed;

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
	if (fuse_opt_parse(&args, &o, tierfs_opts, opt_proc) == -1)
		return 2;
	if (fuse_parse_cmdline(&args, &cl) != 0)
		return 2;
	if (cl.show_help) {
		usage(argv[0]);
		return 0;
	}
	if (cl.show_version) {
		printf("tierfs %s\n", "0.1.0");
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
	if (add_mount_args(&args, o.members))
		goto out;
	se = fuse_session_new(&args, &tfs_fuse_ops, sizeof(tfs_fuse_ops), &fs);
	if (!se)
		goto out;	/* libfuse said why, through fuse_log_to_tfs */

	list = strdup(o.members);
	npaths = list ? split_members(list, paths, TFS_MAX_MEMBERS + 1) : -1;
	if (npaths < 0) {
		tfs_err("too many member directories (at most %d)", TFS_MAX_MEMBERS);
		goto out;
	}
	rc = tfs_array_assemble(paths, (unsigned)npaths, &array, &changed, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "tierfs: %s\n", err);
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
	tfs_info("array %s: %s, %u members, chunk %u, mounted on %s", array.sb.uuid,
		 tfs_level_name(fs.layout.level), fs.n, fs.layout.chunk, cl.mountpoint);
	if (fuse_daemonize(cl.foreground))
		goto out_unmount;
	if (!cl.foreground) {
		tfs_log_syslog = 1;
		openlog("tierfs", LOG_PID, LOG_DAEMON);
	}
	if (journal_open(&array, &fs.meta))
		goto out_unmount;
	if (!fs.readonly && (tfs_stripe_start(&fs) || tfs_maint_start(&fs)))
		goto out_unmount;
	if (tfs_cache_start(&fs))
		goto out_unmount;
	if (o.miss_threads == 0 || o.miss_threads > 1024) {
		tfs_warn("miss_threads=%u is out of range (1..1024): using %u", o.miss_threads,
			 o.miss_threads ? 1024 : 1);
		o.miss_threads = o.miss_threads ? 1024 : 1;
	}
	if (fs.cache && !(fs.defer = tfs_defer_start(o.miss_threads))) {
		tfs_err("out of memory");
		goto out_unmount;
	}
	if (fs.cache && o.hit_ring)
		fs.hitio = tfs_hitio_start();
	if ((rc = tfs_scratch_start()))
		tfs_warn("no idle trim thread (%s): memory a load freed stays with glibc",
			 strerror(-rc));

	cfg = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(cfg, cl.clone_fd);
	/* libfuse 3.14 leaves both at UINT_MAX unless given with -o */
	if (cl.max_threads != UINT_MAX && (cl.max_threads == 0 || cl.max_threads > 1024))
		tfs_warn("max_threads=%u is out of range (1..1024): using %u", cl.max_threads,
			 cl.max_threads ? 1024 : 1);
	fuse_loop_cfg_set_max_threads(cfg, cl.max_threads == UINT_MAX ? 16
					   : cl.max_threads == 0 ? 1
					   : cl.max_threads > 1024 ? 1024 : cl.max_threads);
	fuse_loop_cfg_set_idle_threads(cfg, cl.max_idle_threads <= 1024 ? cl.max_idle_threads
									 : 16);
	rc = cl.singlethread ? fuse_session_loop(se) : fuse_session_loop_mt(se, cfg);
	ret = rc ? 1 : 0;
	fuse_loop_cfg_destroy(cfg);

out_unmount:
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
	if (se)
		fuse_session_destroy(se);
	tfs_meta_close(fs.meta);
	if (fs.htab)
		tfs_fs_destroy(&fs);
	tfs_array_release(&array);
	free(cl.mountpoint);
	free(o.members);
	free(o.member_model);
	free(list);
	fuse_opt_free_args(&args);
	return ret;
}
