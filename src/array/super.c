/* super.c - member superblocks and array assembly.
 *
 * Owns: the on-member superblock format and the rules for accepting a set of
 * directories as one array.
 *
 * Invariants:
 *  1. A superblock is replaced atomically (rename over the old one), so a
 *     member always has either the old or the new one.
 *  2. An assembled array has exactly one member for each index 0..n-1, all
 *     with the same uuid and geometry.
 *  3. While mounted, every member's superblock is flock()ed, so a second
 *     daemon (or mkfs) cannot use a member of a live array.
 *  4. Which superblock to believe (tfs_array_believe; the argument is in
 *     docs/DESIGN.md section 9, "Assembly").  Every change of member states
 *     is one record: events+1, written one member after another to every
 *     member the new view does not call failed (tfs_array_record), and a
 *     mount that finds a member behind writes one before it serves.  So,
 *     without corruption:
 *     (a) a member that was away or failed while the array changed is
 *         called failed in every later view (nothing writes it until a
 *         replace), and its own superblock is older;
 *     (b) a member the newest view calls in use carries its count, or less
 *         where a crash cut records short (one record; more only by
 *         crashes in the catch-up records, before anything is served);
 *     (c) a directory put back after its index was replaced is at least
 *         two records (fail, replace) behind any view that calls the index
 *         in use; k such directories at least 1 + k, and directories in
 *         use cannot share their count and states (a replace needs a mount
 *         that served, and that mount wrote them).
 *     Failures are never outvoted: those of every view at the highest
 *     count count, and those of the view of every member those views call
 *     in use (it vouches for its view).  A member whose own superblock
 *     calls itself failed is a replacement never brought in: not used.
 *     The count members are measured against is the highest, except when
 *     one member alone holds it and a strict majority of the members given
 *     agree on a lower count e, and the lone member is at most as far
 *     ahead of e as the majority has members it calls in use (so no set of
 *     put-back directories explains the majority, (c)), or the level
 *     survives no failure (it never records one): then e, and the lone
 *     member is the odd one out (named).  A member is used iff it is not
 *     failed and at most one record behind that count.
 *  5. An assembled member directory is root's, mode 0700 (repaired with a
 *     warning, once nothing else refuses the mount), and no directory
 *     above it lets a user swap it (refused):
 *     secure.h.  a->sb.version is the oldest version any member in use
 *     has, so an upgrade torn by a crash is finished at the next mount
 *     (upgrade.c); a failed member is not upgraded and does not count.
 *
 * Member states (one character per member in sb.state):
 *   U --fails (I/O error, tierctl fail, missing at mount)--> _
 *   _ --tierctl replace (health.c)--> R --rebuild done (rebuild.c)--> U
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <ftw.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tierfs/log.h"
#include "tierfs/secure.h"
#include "tierfs/super.h"

int tfs_super_format(const struct tfs_super *sb, char *buf, unsigned len)
{
	int n = snprintf(buf, len,
			 "%s %u\nuuid=%s\nlevel=%s\nchunk=%" PRIu32 "\nmembers=%" PRIu32
			 "\nindex=%" PRIu32 "\ncreated=%" PRId64 "\nevents=%" PRIu64
			 "\nstate=%s\n",
			 TFS_SUPER_MAGIC, sb->version, sb->uuid,
			 tfs_level_name(sb->layout.level), sb->layout.chunk,
			 sb->layout.nmembers, sb->index, sb->created, sb->events, sb->state);
	return n < 0 || (unsigned)n >= len ? -ENOSPC : n;
}

static int parse_u64(const char *v, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(v, &end, 10);
	return errno || end == v || *end ? -EINVAL : 0;
}

int tfs_super_parse(const char *buf, struct tfs_super *sb, const char **why)
{
	char line[256];
	const char *p = buf;
	unsigned seen = 0;
	uint64_t v;

	memset(sb, 0, sizeof(*sb));
	if (sscanf(buf, TFS_SUPER_MAGIC " %u", &sb->version) != 1) {
		*why = "superblock has no tierfs magic";
		return -EINVAL;
	}
	if (sb->version < 1 || sb->version > TFS_SUPER_VERSION) {
		*why = "superblock version is not supported by this tierfs";
		return -EINVAL;
	}
	while ((p = strchr(p, '\n')) != NULL) {
		const char *e;
		char *eq;
		size_t l;

		p++;
		e = strchr(p, '\n');
		l = e ? (size_t)(e - p) : strlen(p);
		if (l == 0 || l >= sizeof(line))
			continue;
		memcpy(line, p, l);
		line[l] = 0;
		eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq++ = 0;
		if (!strcmp(line, "uuid") && strlen(eq) == 36) {
			memcpy(sb->uuid, eq, 37);
			seen |= 1;
		} else if (!strcmp(line, "level") && !tfs_level_parse(eq, &sb->layout.level)) {
			seen |= 2;
		} else if (!strcmp(line, "chunk") && !parse_u64(eq, &v) && v <= UINT32_MAX) {
			sb->layout.chunk = (uint32_t)v;
			seen |= 4;
		} else if (!strcmp(line, "members") && !parse_u64(eq, &v) && v <= TFS_MAX_MEMBERS) {
			sb->layout.nmembers = (uint32_t)v;
			seen |= 8;
		} else if (!strcmp(line, "index") && !parse_u64(eq, &v) && v < TFS_MAX_MEMBERS) {
			sb->index = (uint32_t)v;
			seen |= 16;
		} else if (!strcmp(line, "created") && !parse_u64(eq, &v)) {
			sb->created = (int64_t)v;
			seen |= 32;
		} else if (!strcmp(line, "events") && !parse_u64(eq, &v)) {
			sb->events = v;
			seen |= 64;
		} else if (!strcmp(line, "state") && strlen(eq) <= TFS_MAX_MEMBERS &&
			   strspn(eq, "U_R") == strlen(eq)) {
			strcpy(sb->state, eq);
			seen |= 128;
		}
	}
	if (sb->version == 1 && (seen & 63) == 63) {	/* all members in sync */
		memset(sb->state, TFS_M_UP, sb->layout.nmembers);
		sb->state[sb->layout.nmembers] = 0;
		seen |= 64 | 128;
	}
	if (seen != 255) {
		*why = "superblock is missing a field";
		return -EINVAL;
	}
	if (tfs_layout_check(&sb->layout, why))
		return -EINVAL;
	if (strlen(sb->state) != sb->layout.nmembers) {
		*why = "superblock member states do not match the member count";
		return -EINVAL;
	}
	if (sb->index >= sb->layout.nmembers) {
		*why = "superblock index is out of range";
		return -EINVAL;
	}
	return 0;
}

int tfs_super_read(int memberfd, struct tfs_super *sb, const char **why)
{
	char buf[1024];
	ssize_t n;
	int fd = openat(memberfd, TFS_SUPER_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		*why = errno == ENOENT ? "not a tierfs member (no superblock)"
				       : "cannot open superblock";
		return -errno;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0) {
		*why = "cannot read superblock";
		return -errno;
	}
	buf[n] = 0;
	return tfs_super_parse(buf, sb, why);
}

int tfs_super_write(int memberfd, const struct tfs_super *sb)
{
	char buf[1024];
	int n = tfs_super_format(sb, buf, sizeof(buf)), fd, rc = 0, dfd;

	if (n < 0)
		return n;
	if (mkdirat(memberfd, TFS_META_DIR, 0700) && errno != EEXIST)
		return -errno;
	fd = openat(memberfd, TFS_SUPER_NAME ".tmp",
		    O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, (size_t)n) != n || fsync(fd))
		rc = errno ? -errno : -EIO;
	close(fd);
	if (rc)
		return rc;
	if (renameat(memberfd, TFS_SUPER_NAME ".tmp", memberfd, TFS_SUPER_NAME))
		return -errno;
	dfd = openat(memberfd, TFS_META_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

int tfs_dir_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int empty = 1;

	if (!d)
		return -errno;
	while (empty && (e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = 0;
	closedir(d);
	return empty;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p) ? -1 : 0;
}

int tfs_member_wipe(const char *dir)
{
	static const char *const sub[] = { TFS_META_DIR, TFS_TREE_DIR };
	char path[PATH_MAX];

	for (unsigned i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, sub[i]);
		if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) && errno != ENOENT)
			return -errno;
	}
	return 0;
}

void tfs_uuid_generate(char out[37])
{
	uint8_t b[16];

	if (getrandom(b, sizeof(b), 0) != sizeof(b)) {
		for (unsigned i = 0; i < 16; i++)
			b[i] = (uint8_t)(rand() ^ (time(NULL) >> (i % 8)));
	}
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(out, 37,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
		 b[11], b[12], b[13], b[14], b[15]);
}

/* ------------------------------------------------------------------ */
/* Assembly                                                            */
/* ------------------------------------------------------------------ */

void tfs_array_release(struct tfs_array *a)
{
	for (uint32_t i = 0; i < TFS_MAX_MEMBERS; i++) {
		if (a->dirfd[i] >= 0)
			close(a->dirfd[i]);
		if (a->lockfd[i] >= 0)
			close(a->lockfd[i]);
		free(a->path[i]);
		a->dirfd[i] = a->lockfd[i] = -1;
		a->path[i] = NULL;
	}
}

#define FAIL(code, ...) do { snprintf(err, errlen, __VA_ARGS__); rc = (code); goto out_fail; } while (0)

uint32_t tfs_array_count(const struct tfs_array *a, char st)
{
	uint32_t c = 0;

	for (uint32_t i = 0; i < a->n; i++)
		c += a->sb.state[i] == st;
	return c;
}

/* Lock a member's superblock.  A daemon that was just unmounted may still
 * be exiting (and holding it): wait a little before calling it in use. */
static int lock_member(int lfd)
{
	for (int i = 0; i < 60; i++) {
		if (flock(lfd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK)
			return -1;
		usleep(50000);
	}
	errno = EWOULDBLOCK;
	return -1;
}

static void drop_member(struct tfs_array *a, uint32_t i)
{
	if (a->dirfd[i] >= 0)
		close(a->dirfd[i]);
	if (a->lockfd[i] >= 0)
		close(a->lockfd[i]);
	a->dirfd[i] = a->lockfd[i] = -1;
}

/* The more pessimistic of two member states: failed over rebuilding over
 * in sync. */
static char worse(char a, char b)
{
	if (a == TFS_M_FAILED || b == TFS_M_FAILED)
		return TFS_M_FAILED;
	return a == TFS_M_REBUILD || b == TFS_M_REBUILD ? TFS_M_REBUILD : TFS_M_UP;
}

static bool same_view(const struct tfs_super *x, const struct tfs_super *y)
{
	return x->events == y->events && strcmp(x->state, y->state) == 0;
}

void tfs_array_believe(const struct tfs_super *const sb[], uint32_t n, uint32_t tolerates,
		       struct tfs_belief *b)
{
	uint32_t given = 0, ntop = 0, best = 0;
	int top = -1, maj = -1;
	char topstate[TFS_MAX_MEMBERS + 1];

	memset(b, 0, sizeof(*b));
	b->lone = b->tie[0] = b->tie[1] = -1;
	for (uint32_t i = 0; i < n; i++)
		if (sb[i]) {
			given++;
			if (top < 0 || sb[i]->events > b->events)
				b->events = sb[i]->events, top = (int)i;
		}
	memset(b->state, TFS_M_UP, n);
	b->state[n] = 0;
	/* the highest count: every view there (invariant 4) */
	for (uint32_t i = 0; i < n; i++) {
		if (!sb[i] || sb[i]->events != b->events)
			continue;
		ntop++;
		if (strcmp(sb[i]->state, sb[top]->state) && b->tie[0] < 0)
			b->tie[0] = top, b->tie[1] = (int)i;
		for (uint32_t k = 0; k < n; k++)
			b->state[k] = worse(b->state[k], sb[i]->state[k]);
	}
	/* the view a strict majority of the members given agree on, if it is
	 * not the highest */
	for (uint32_t i = 0; i < n; i++) {
		uint32_t c = 0;

		if (!sb[i] || sb[i]->events == b->events)
			continue;
		for (uint32_t j = 0; j < n; j++)
			c += sb[j] && same_view(sb[i], sb[j]);
		if (c > best)
			best = c, maj = (int)i;
	}
	memcpy(topstate, b->state, sizeof(topstate));
	b->ref = b->events;
	if (maj >= 0 && best * 2 > given) {
		uint32_t back = 0;	/* majority members the top view calls in use */

		for (uint32_t j = 0; j < n; j++)
			back += sb[j] && same_view(sb[j], sb[maj]) && topstate[j] != TFS_M_FAILED;
		if (ntop == 1) {
			b->lone = top;
			b->maj_events = sb[maj]->events;
			b->maj_n = best;
			b->overruled = tolerates == 0 || b->events - b->maj_events <= back;
			if (b->overruled)
				b->ref = b->maj_events;
		}
	}
	/* a member the newest views call in use vouches for its own view */
	for (uint32_t i = 0; i < n; i++)
		if (sb[i] && topstate[i] != TFS_M_FAILED && sb[i]->state[i] != TFS_M_FAILED)
			for (uint32_t k = 0; k < n; k++)
				b->state[k] = worse(b->state[k], sb[i]->state[k]);
	for (uint32_t i = 0; i < n; i++) {
		if (!sb[i])
			b->v[i] = TFS_V_MISSING;
		else if (b->state[i] == TFS_M_FAILED || sb[i]->state[i] == TFS_M_FAILED)
			b->v[i] = TFS_V_FAILED;	/* ... or a replacement never brought in */
		else if (tolerates && sb[i]->events + 1 < b->ref)
			b->v[i] = TFS_V_STALE;
		else
			b->v[i] = TFS_V_USE;
	}
	/* the states the array runs with: what is not used is failed, and
	 * every member used must say so (a record) */
	for (uint32_t i = 0; i < n; i++)
		if (b->v[i] != TFS_V_USE)
			b->state[i] = TFS_M_FAILED;
	for (uint32_t i = 0; i < n; i++)
		if (b->v[i] == TFS_V_USE &&
		    (sb[i]->events != b->events || strcmp(sb[i]->state, b->state)))
			b->rewrite = true;
}

int tfs_array_assemble(char **paths, unsigned npaths, struct tfs_array *a,
		       bool *changed, char *err, unsigned errlen)
{
	struct tfs_super sbs[TFS_MAX_MEMBERS];
	const struct tfs_super *given[TFS_MAX_MEMBERS] = { 0 };
	const struct tfs_level_ops *ops;
	struct tfs_belief b;
	char lone[PATH_MAX + 256] = "";
	uint32_t tol;
	int rc = 0;
	const char *why;

	*changed = false;
	memset(a, 0, sizeof(*a));
	for (unsigned i = 0; i < TFS_MAX_MEMBERS; i++)
		a->dirfd[i] = a->lockfd[i] = -1;
	if (npaths == 0)
		FAIL(-EINVAL, "no member directories given");
	if (npaths > TFS_MAX_MEMBERS)
		FAIL(-EINVAL, "too many members (at most %d)", TFS_MAX_MEMBERS);

	for (unsigned i = 0; i < npaths; i++) {
		struct tfs_super sb;
		char real[PATH_MAX];
		char unsafe[PATH_MAX + 200];
		struct stat st;
		int fd, lfd;

		if (!realpath(paths[i], real))
			FAIL(-errno, "member %s: %s", paths[i], strerror(errno));
		fd = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			FAIL(-errno, "member %s: %s", paths[i], strerror(errno));
		rc = tfs_super_read(fd, &sb, &why);
		if (rc) {
			close(fd);
			FAIL(rc, "member %s: %s", paths[i], why);
		}
		rc = tfs_path_check_ancestors(real, unsafe, sizeof(unsafe));	/* invariant 5 */
		if (rc) {
			close(fd);
			FAIL(rc, "member %s: %s", paths[i], unsafe);
		}
		if (i == 0) {
			a->sb = sb;
		} else if (strcmp(sb.uuid, a->sb.uuid)) {
			close(fd);
			FAIL(-EINVAL, "member %s: belongs to array %s, not %s (from %s)",
			     paths[i], sb.uuid, a->sb.uuid, paths[0]);
		} else if (memcmp(&sb.layout, &a->sb.layout, sizeof(sb.layout))) {
			close(fd);
			FAIL(-EINVAL, "member %s: geometry differs from the other members", paths[i]);
		}
		if (a->dirfd[sb.index] >= 0) {
			close(fd);
			FAIL(-EINVAL, "member %s: index %u is also claimed by %s%s", paths[i],
			     sb.index, a->path[sb.index],
			     strcmp(real, a->path[sb.index]) ? "" : " (same directory given twice)");
		}
		if (fstatat(fd, TFS_TREE_DIR, &st, AT_SYMLINK_NOFOLLOW) || !S_ISDIR(st.st_mode)) {
			close(fd);
			FAIL(-EINVAL, "member %s: tree directory %s/ is missing", paths[i], TFS_TREE_DIR);
		}
		lfd = openat(fd, TFS_SUPER_NAME, O_RDONLY | O_CLOEXEC);
		if (lfd < 0 || lock_member(lfd)) {
			int e = errno;
			if (lfd >= 0)
				close(lfd);
			close(fd);
			FAIL(-(e == EWOULDBLOCK ? EBUSY : e), "member %s: %s", paths[i],
			     e == EWOULDBLOCK ? "in use by another tierfs (array already mounted?)"
					      : strerror(e));
		}
		a->dirfd[sb.index] = fd;
		a->lockfd[sb.index] = lfd;
		a->path[sb.index] = strdup(real);
		sbs[sb.index] = sb;
		given[sb.index] = &sbs[sb.index];
	}
	a->n = a->sb.layout.nmembers;
	if (npaths > a->n)
		FAIL(-EINVAL, "array %s has %u members but %u directories were given", a->sb.uuid,
		     a->n, npaths);
	ops = tfs_level_ops(a->sb.layout.level);
	tol = ops->tolerates(&a->sb.layout);
	tfs_array_believe(given, a->n, tol, &b);
	a->sb.events = b.events;
	memcpy(a->sb.state, b.state, sizeof(b.state));
	*changed = b.rewrite;
	if (b.lone >= 0 && !b.overruled)
		snprintf(lone, sizeof(lone), "member %s (index %d) alone says event %" PRIu64
			 " and %u of the %u members given say %" PRIu64 ": either its superblock is "
			 "wrong (then set its events= to %" PRIu64 ") or they are older disks put "
			 "back (then give the current ones), so its count is believed",
			 a->path[b.lone], b.lone, b.events, b.maj_n, npaths, b.maj_events,
			 b.maj_events);
	/* refuse before a word about single members: the reason is the array's */
	for (uint32_t i = 0; i < a->n; i++) {
		if (tol == 0 && (b.v[i] == TFS_V_MISSING || b.v[i] == TFS_V_STALE))
			FAIL(-ENODEV, "array %s: member %u of %u is %s (give all member "
			     "directories)", a->sb.uuid, i, a->n,
			     b.v[i] == TFS_V_MISSING ? "missing" : "stale");
	}
	if (tfs_array_count(a, TFS_M_FAILED) > tol && lone[0])
		FAIL(-ENODEV, "array %s not mounted: %s, and then %u of %u members are behind "
		     "or failed (%s) where %s survives %u", a->sb.uuid, lone,
		     tfs_array_count(a, TFS_M_FAILED), a->n, a->sb.state,
		     tfs_level_name(a->sb.layout.level), tol);
	if (tfs_array_count(a, TFS_M_FAILED) > tol)
		FAIL(-ENODEV, "array %s: %u of %u members are missing or failed (%s) and %s "
		     "survives only %u: not mounted%s", a->sb.uuid,
		     tfs_array_count(a, TFS_M_FAILED), a->n, a->sb.state,
		     tfs_level_name(a->sb.layout.level), tol,
		     b.tie[0] >= 0 ? "; members at the highest event count disagree: the array "
		     "ran in two parts, give only the members of the part to keep" : "");
	if (tfs_array_count(a, TFS_M_UP) == 0)
		FAIL(-ENODEV, "array %s: no member is in sync (%s): not mounted", a->sb.uuid,
		     a->sb.state);
	if (b.lone >= 0 && b.overruled)
		tfs_warn("member %s (index %d): its superblock says event %" PRIu64 ", but %u of "
			 "the %u members given agree on %" PRIu64 "%s: the majority's count is "
			 "believed, and a member either view calls failed is not used",
			 a->path[b.lone], b.lone, b.events, b.maj_n, npaths, b.maj_events,
			 strcmp(given[b.lone]->state, b.state) ? "" : " (the same member states)");
	if (lone[0])
		tfs_warn("%s", lone);
	if (b.tie[0] >= 0)
		tfs_warn("members %s and %s both say event %" PRIu64 " but disagree on the "
			 "member states (%s, %s): the array ran in two parts; a member either "
			 "calls failed is not used", a->path[b.tie[0]], a->path[b.tie[1]], b.events,
			 given[b.tie[0]]->state, given[b.tie[1]]->state);
	/* invariant 5, once nothing refuses the mount: a refused one leaves
	 * every directory as it found it */
	for (uint32_t i = 0; i < a->n; i++) {
		if (a->dirfd[i] >= 0 &&
		    (rc = tfs_dir_secure(a->dirfd[i], a->path[i], "member", err, errlen)))
			goto out_fail;
	}
	a->sb.version = TFS_SUPER_VERSION;	/* the oldest in use, below */
	for (uint32_t i = 0; i < a->n; i++) {
		if (b.v[i] == TFS_V_USE && given[i]->events < b.ref)
			tfs_info("member %s (index %u) missed the last change record (event %"
				 PRIu64 " of %" PRIu64 ": cut short by a crash): its superblock is "
				 "brought up to date", a->path[i], i, given[i]->events, b.ref);
		else if (b.v[i] == TFS_V_FAILED && a->dirfd[i] >= 0)
			tfs_warn("member %s (index %u) failed earlier and is stale: not used "
				 "(rebuild it with tierctl replace)", a->path[i], i);
		else if (b.v[i] == TFS_V_MISSING)
			tfs_warn("member %u is missing: marking it failed", i);
		else if (b.v[i] == TFS_V_STALE)
			tfs_warn("member %s (index %u) is stale (event %" PRIu64 ", the array is at %"
				 PRIu64 ": it missed changes): marking it failed", a->path[i], i,
				 given[i]->events, b.ref);
		if (b.v[i] != TFS_V_USE)
			drop_member(a, i);
		else if (given[i]->version < a->sb.version)
			a->sb.version = given[i]->version;	/* invariant 5 */
	}
	a->sb.index = 0;
	return 0;

out_fail:
	tfs_array_release(a);
	return rc;
}

/* sb, with each member's index, to every member in use: how many took it;
 * *first is the first error (0: none), each logged as "cannot WHAT". */
static int write_in_use(struct tfs_array *a, struct tfs_super sb, const char *what, int *first)
{
	int written = 0;

	*first = 0;
	for (uint32_t i = 0; i < a->n; i++) {
		int r;

		if (a->sb.state[i] == TFS_M_FAILED || a->dirfd[i] < 0)
			continue;
		sb.index = i;
		r = tfs_super_write(a->dirfd[i], &sb);
		if (r) {
			tfs_err("member %s: cannot %s: %s", a->path[i], what, strerror(-r));
			if (!*first)
				*first = r;
		} else {
			written++;
		}
	}
	return written;
}

int tfs_array_set_version(struct tfs_array *a, unsigned v)
{
	struct tfs_super sb = a->sb;
	int rc;

	sb.version = v;
	write_in_use(a, sb, "write the superblock", &rc);
	if (rc == 0)
		a->sb.version = v;
	return rc;
}

int tfs_array_record(struct tfs_array *a)
{
	int written, rc;

	a->sb.events++;
	written = write_in_use(a, a->sb, "record the array state", &rc);
	return written ? written : rc ? rc : -ENODEV;
}
