/* tierfs.c - the daemon: assemble the array, recover, mount, serve.
 *
 * Start-up order (each step can refuse with a one-line reason and exit 1,
 * and nothing is mounted until all of them passed):
 *   parse args -> assemble members (super.c) -> open the journal (meta.c)
 *   -> replay interrupted namespace changes (replay.c) -> mount
 *   -> daemonize (unless -f) -> reopen the journal in the daemon (LMDB
 *   environments must not cross fork) -> serve on the multi-threaded loop
 *   -> unmount on SIGTERM/SIGINT/SIGHUP or fusermount3 -u.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "tierfs/fuse_fs.h"
#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/super.h"

struct opts {
	char *members;		/* "DIR:DIR:..." */
	double timeout;
	int ro;
};

enum { KEY_RO = 1 };

#define OPT(t, p) { t, offsetof(struct opts, p), 1 }
static const struct fuse_opt tierfs_opts[] = {
	OPT("entry_timeout=%lf", timeout),
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
	       "    -o entry_timeout=SECONDS   kernel attribute/entry cache (default 1)\n"
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

static int journal_open(struct tfs_array *a, struct tfs_meta **mt)
{
	char dir[PATH_MAX];
	int rc;

	snprintf(dir, sizeof(dir), "%s/%s", a->path[0], TFS_JOURNAL_DIR);
	rc = tfs_meta_open(dir, mt);
	if (rc)
		tfs_err("cannot open the journal %s: %s", dir, strerror(-rc));
	return rc;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts cl;
	struct opts o = { .timeout = 1.0 };
	struct tfs_array array;
	struct tfs_fs fs;
	struct fuse_session *se = NULL;
	struct fuse_loop_config *cfg = NULL;
	char *paths[TFS_MAX_MEMBERS + 1], err[512], fsname[PATH_MAX + 16], *list = NULL;
	int rootfd[TFS_MAX_MEMBERS], npaths, rc, ret = 1;
	struct stat rst;
	const char *fault = getenv("TIERFS_FAULT");

	umask(0);
	memset(&fs, 0, sizeof(fs));
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

	list = strdup(o.members);
	npaths = list ? split_members(list, paths, TFS_MAX_MEMBERS + 1) : -1;
	if (npaths < 0) {
		fprintf(stderr, "tierfs: too many member directories (at most %d)\n", TFS_MAX_MEMBERS);
		return 1;
	}
	rc = tfs_array_assemble(paths, (unsigned)npaths, &array, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "tierfs: %s\n", err);
		return 1;
	}

	/* the namespace over the members */
	fs.array = &array;
	fs.layout = array.sb.layout;
	fs.n = array.n;
	fs.timeout = o.timeout;
	fs.chown_ok = geteuid() == 0;
	fs.root_group = getegid() == 0;
	for (uint32_t k = 0; k < fs.n; k++) {
		rootfd[k] = openat(array.dirfd[k], TFS_TREE_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW |
				   O_CLOEXEC);
		if (rootfd[k] < 0) {
			fprintf(stderr, "tierfs: member %s: %s/: %s\n", array.path[k], TFS_TREE_DIR,
				strerror(errno));
			goto out_array;
		}
	}
	fs.be = tfs_posix_backend(rootfd, fs.n);
	if (fs.be && fault && *fault)
		fs.be = tfs_fault_backend(fs.be, fault);
	if (!fs.be || tfs_fs_init(&fs))
		goto out_array;
	if (fstat(rootfd[0], &rst))
		goto out_array;
	fs.root.ino = rst.st_ino;

	if (journal_open(&array, &fs.meta))
		goto out_array;
	rc = tfs_replay(&fs);
	if (rc) {
		fprintf(stderr, "tierfs: recovery of interrupted changes failed: %s\n", strerror(-rc));
		goto out_meta;
	}
	tfs_meta_close(fs.meta);	/* reopened after fork */
	fs.meta = NULL;

	snprintf(fsname, sizeof(fsname), "-ofsname=%s", o.members);
	for (char *p = fsname + 3; *p; p++)	/* ',' would split the option */
		if (*p == ',')
			*p = '_';
	if (fuse_opt_add_arg(&args, fsname) || fuse_opt_add_arg(&args, "-osubtype=tierfs") ||
	    fuse_opt_add_arg(&args, "-odefault_permissions"))
		goto out_array;
	fs.readonly = o.ro;

	se = fuse_session_new(&args, &tfs_fuse_ops, sizeof(tfs_fuse_ops), &fs);
	if (!se) {
		fprintf(stderr, "tierfs: bad mount options (see tierfs --help)\n");
		goto out_array;
	}
	if (fuse_set_signal_handlers(se))
		goto out_session;
	if (fuse_session_mount(se, cl.mountpoint)) {
		fprintf(stderr, "tierfs: cannot mount on %s\n", cl.mountpoint);
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

	cfg = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(cfg, cl.clone_fd);
	fuse_loop_cfg_set_idle_threads(cfg, cl.max_idle_threads);
	/* libfuse 3.14 leaves max_threads at UINT_MAX unless -o max_threads= */
	fuse_loop_cfg_set_max_threads(cfg, cl.max_threads > 0 && cl.max_threads <= 1024
					   ? cl.max_threads : 16);
	rc = cl.singlethread ? fuse_session_loop(se) : fuse_session_loop_mt(se, cfg);
	ret = rc ? 1 : 0;
	fuse_loop_cfg_destroy(cfg);

out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_meta:
	tfs_meta_close(fs.meta);
out_array:
	if (fs.htab)
		tfs_fs_destroy(&fs);
	tfs_array_release(&array);
	free(cl.mountpoint);
	free(o.members);
	free(list);
	fuse_opt_free_args(&args);
	return ret;
}
