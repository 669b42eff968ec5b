/* mkfs.c - mkfs.tierfs: format member directories into one array.
 *
 * Exit status, as tierfs's and tierctl's: 0 made; 2 the command line is
 * wrong (an unknown flag, level or chunk size, a member count the level
 * cannot use, no members: the line names the word); 1 refused or failed.
 *
 * Refuses, with a one-line reason and exit 1, anything that could lose data
 * or cannot work: a member that is not an empty directory or already belongs
 * to an array (unless --force), a member of a mounted array (even with
 * --force), the same directory twice, a member count or chunk size the level
 * cannot use, a filesystem without trusted xattrs, a member a user could
 * swap (secure.h).  Every member directory it formats is root's, mode 0700.
 */
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "tierfs/layout.h"
#include "tierfs/parse.h"
#include "tierfs/secure.h"
#include "tierfs/super.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: mkfs.tierfs --level jbod|raid0|raid1|raid10|raid5|raid6 [--chunk SIZE] [--force] DIR...\n"
		   "  --level   RAID level (required)\n"
		   "  --chunk   stripe unit, a power of two from 4K to 16M (default 512K)\n"
		   "  --force   reformat members that already belong to an array\n"
		   "  --version print the version\n"
		   "Exit status: 0 made, 1 refused (a member), 2 a wrong command line.\n");
}

/* Says why, returns rc: 1 a refusal (die), 2 a wrong command line
 * (bad_usage). */
static int fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int rc, const char *fmt, ...)
{
	va_list ap;

	fputs("mkfs.tierfs: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return rc;
}
#define die(...) fail(1, __VA_ARGS__)
#define bad_usage(...) fail(2, __VA_ARGS__)

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "level", required_argument, NULL, 'l' },
		{ "chunk", required_argument, NULL, 'c' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct tfs_super sb = { .version = TFS_SUPER_VERSION };
	const char *why;
	char *real[TFS_MAX_MEMBERS], buf[32], buf2[32];
	int was_member[TFS_MAX_MEMBERS] = { 0 };
	uint64_t chunk = TFS_CHUNK_DEFAULT, minavail = UINT64_MAX, sumavail = 0;
	int force = 0, have_level = 0, c, n;

	while ((c = getopt_long(argc, argv, "l:c:fhV", lo, NULL)) != -1) {
		switch (c) {
		case 'l':
			if (tfs_level_parse(optarg, &sb.layout.level))
				return bad_usage("unknown level '%s' (jbod, raid0, raid1, raid10, raid5, "
						 "raid6)", optarg);
			have_level = 1;
			break;
		case 'c':
			if (tfs_parse_size(optarg, &chunk) || chunk > UINT32_MAX)
				return bad_usage("bad chunk size '%s'", optarg);
			break;
		case 'f':
			force = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("mkfs.tierfs %s\n", TIERFS_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!have_level) {
		usage(stderr);
		return bad_usage("--level is required");
	}
	n = argc - optind;
	if (n <= 0)
		return bad_usage("no member directories given");
	if (n > TFS_MAX_MEMBERS)
		return bad_usage("too many members (%d, at most %d)", n, TFS_MAX_MEMBERS);
	sb.layout.nmembers = (uint32_t)n;
	sb.layout.chunk = (uint32_t)chunk;
	if (tfs_layout_check(&sb.layout, &why))
		return bad_usage("%s %s with %d member%s: %s", tfs_level_name(sb.layout.level),
			   "array", n, n == 1 ? "" : "s", why);

	/* check everything before writing anything */
	for (int i = 0; i < n; i++) {
		const char *p = argv[optind + i];
		struct tfs_super old;
		struct statvfs sv;
		struct stat st;
		int fd, e;

		real[i] = realpath(p, NULL);
		if (!real[i])
			return die("member %s: %s", p, strerror(errno));
		if (stat(real[i], &st) || !S_ISDIR(st.st_mode))
			return die("member %s: not a directory", p);
		for (int j = 0; j < i; j++)
			if (strcmp(real[i], real[j]) == 0)
				return die("member %s: the same directory is given twice", p);
		fd = open(real[i], O_PATH | O_DIRECTORY);
		if (fd < 0)
			return die("member %s: %s", p, strerror(errno));
		e = tfs_super_read(fd, &old, &why);
		if (e == 0) {
			int lfd = openat(fd, TFS_SUPER_NAME, O_RDONLY);

			if (lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK)
				return die("member %s: belongs to array %s, which is mounted", p, old.uuid);
			if (lfd >= 0)
				close(lfd);
			if (!force)
				return die("member %s: already belongs to array %s (use --force to reformat)",
					   p, old.uuid);
			was_member[i] = 1;
		} else if (e != -ENOENT) {
			if (!force)
				return die("member %s: has a damaged tierfs superblock (use --force to reformat)", p);
			was_member[i] = 1;
		} else {
			struct stat tst;
			int empty = tfs_dir_empty(real[i]);

			if (empty < 0)
				return die("member %s: %s", p, strerror(-empty));
			if (!empty && !force)
				return die("member %s: directory is not empty (use --force to use it anyway)", p);
			/* --force on a directory that was never a member keeps what is
			 * there: it must not hold names tierfs would take over */
			if (fstatat(fd, TFS_TREE_DIR, &tst, AT_SYMLINK_NOFOLLOW) == 0 ||
			    fstatat(fd, TFS_META_DIR, &tst, AT_SYMLINK_NOFOLLOW) == 0)
				return die("member %s: holds %s/ or %s/ but is not a tierfs member; "
					   "refusing to overwrite them", p, TFS_TREE_DIR, TFS_META_DIR);
		}
		close(fd);
		{
			char unsafe[PATH_MAX + 200];

			if (tfs_path_check_ancestors(real[i], unsafe, sizeof(unsafe)))
				return die("member %s: %s", p, unsafe);
		}
		/* the identity and size records live in trusted.* (super.h) */
		if (setxattr(real[i], "trusted.tierfs.probe", "1", 1, 0) && errno != EEXIST)
			return die("member %s: cannot set trusted xattrs (%s)%s", p, strerror(errno),
				   errno == EPERM ? ": run mkfs.tierfs as root"
						  : ": the filesystem does not support them");
		removexattr(real[i], "trusted.tierfs.probe");
		if (statvfs(real[i], &sv) == 0) {
			uint64_t avail = (uint64_t)sv.f_blocks * sv.f_frsize;

			sumavail += avail;
			if (avail < minavail)
				minavail = avail;
		}
	}

	tfs_uuid_generate(sb.uuid);
	sb.created = (int64_t)time(NULL);
	sb.events = 1;
	memset(sb.state, TFS_M_UP, (size_t)n);
	for (int i = 0; i < n; i++) {
		int fd, rc;

		if (was_member[i]) {	/* --force: the old array's metadata and tree go */
			tfs_member_wipe(real[i]);
		}
		unsigned ouid, omode;

		fd = open(real[i], O_PATH | O_DIRECTORY);
		if (fd < 0)
			return die("member %s: %s", real[i], strerror(errno));
		rc = tfs_dir_make_private(fd, &ouid, &omode);
		if (rc < 0)
			return die("member %s: cannot make it root's (0700): %s", real[i],
				   strerror(-rc));
		if (mkdirat(fd, TFS_TREE_DIR, 0755) && errno != EEXIST)
			return die("member %s: cannot create %s/: %s", real[i], TFS_TREE_DIR,
				   strerror(errno));
		sb.index = (uint32_t)i;
		rc = tfs_super_write(fd, &sb);
		if (rc)
			return die("member %s: cannot write the superblock: %s", real[i], strerror(-rc));
		close(fd);
	}
	{
		const struct tfs_level_ops *ops = tfs_level_ops(sb.layout.level);
		uint64_t usable = sb.layout.level == TFS_JBOD ? sumavail
							     : ops->usable(&sb.layout, minavail);

		printf("tierfs: created %s array %s\n"
		       "  members: %d, chunk %s\n"
		       "  usable capacity: %s\n"
		       "  member failures tolerated: %u\n",
		       tfs_level_name(sb.layout.level), sb.uuid, n,
		       tfs_fmt_size(sb.layout.chunk, buf, sizeof(buf)),
		       tfs_fmt_size(usable, buf2, sizeof(buf2)), ops->tolerates(&sb.layout));
		for (int i = 0; i < n; i++)
			printf("  member %d: %s\n", i, real[i]);
	}
	return 0;
}
