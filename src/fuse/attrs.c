/* attrs.c - tierfs's own extended attributes: the user.tierfs.* names of
 * regular files and of the mount's root (DESIGN §10.6 lists each, with
 * its unit and when it changes).
 *
 * Owns: which names exist where, who may read and set each, and their
 * formats.  The values belong to the subsystems it asks (cache/status.c
 * for the tier, fuse/control.c for the status, the inode for the
 * layout); it keeps nothing.
 *
 * Invariants:
 *  1. A name is listed only where it reads: the file names on regular
 *     files, the root names on the root (the tunables only with a tier).
 *     Actions (flush, evict, ctl, reset) are written, never read or
 *     listed; user.tierfs.cache (the older summary) reads, unlisted.
 *  2. The kernel has checked the caller's read (get) or write (set)
 *     permission on the object before a request gets here, as for any
 *     user.* name (default_permissions): who cannot read a file cannot
 *     read its statistics.  A file's actions also need its owner or root;
 *     anything set on the root needs root.
 *  3. Errors: reading a name that is not there ENODATA; setting a name
 *     that only reads EPERM, an unknown name or a bad value EINVAL;
 *     removing any tierfs name EPERM (ns/xattr.c).  The reason of a
 *     refused set is logged and kept as the status's ctl_error.
 *  4. Scalars are decimal text without a newline; maps are lines.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tierfs/attrs.h"
#include "tierfs/cache.h"
#include "tierfs/control.h"
#include "tierfs/fs.h"
#include "tierfs/kvjson.h"
#include "tierfs/layout.h"
#include "tierfs/log.h"
#include "tierfs/maint.h"
#include "tierfs/ns.h"

#define PFX_LEN (sizeof(TFS_ATTR_PREFIX) - 1)

/* Listed on regular files (invariant 1), in this order. */
static const char *const file_names[] = {
	"cached_bytes", "dirty_bytes", "extents", "dirty_extents", "heat",
	"read_hits", "read_misses", "write_hits", "write_misses", "last_bypass",
	"layout", "residency", "pinned",
};
/* Listed on the root; the tunables only with a tier. */
static const char *const root_names[] = { "status", "stats", "maint_mbps" };
static const char *const tunable_names[] = {
	"cache_mode", "seq_cutoff", "promote_threshold", "dirty_low", "dirty_high",
};
/* The array's own tunable, with or without a tier (raid/maint.c). */
#define MAINT_RATE "maint_mbps"

#define N(a) (sizeof(a) / sizeof((a)[0]))

bool tfs_attr_ours(const char *name)
{
	return strncmp(name, TFS_ATTR_PREFIX, PFX_LEN) == 0;
}

static bool in_list(const char *const *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], name) == 0)
			return true;
	return false;
}

/* text (l bytes) as the answer to a get of len bytes */
static int answer(char *buf, size_t len, const char *text, size_t l)
{
	if (l > INT32_MAX)
		return -E2BIG;
	if (len == 0)
		return (int)l;
	if (l > len)
		return -ERANGE;
	memcpy(buf, text, l);
	return (int)l;
}

static int answer_u64(char *buf, size_t len, uint64_t v)
{
	char t[24];

	return answer(buf, len, t, (size_t)snprintf(t, sizeof(t), "%" PRIu64, v));
}

/* A malloc'ed text as the answer, freed. */
static int answer_owned(char *buf, size_t len, char *text)
{
	int rc = text ? answer(buf, len, text, strlen(text)) : -ENOMEM;

	free(text);
	return rc;
}

static uint64_t counted(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

static int file_get(struct tfs_fs *fs, struct tfs_inode *in, const char *n, char *buf,
		    size_t len)
{
	const struct tfs_tier_counts *t = &in->tier;
	struct tfs_cache_file_info fi;
	char text[160];
	int rc;

	if (!strcmp(n, "read_hits"))
		return answer_u64(buf, len, counted(&t->read_hits));
	if (!strcmp(n, "read_misses"))
		return answer_u64(buf, len, counted(&t->read_misses));
	if (!strcmp(n, "write_hits"))
		return answer_u64(buf, len, counted(&t->write_hits));
	if (!strcmp(n, "write_misses"))
		return answer_u64(buf, len, counted(&t->write_misses));
	if (!strcmp(n, "last_bypass")) {
		uint32_t why = __atomic_load_n(&t->bypass, __ATOMIC_RELAXED);
		time_t when = (time_t)__atomic_load_n(&t->bypass_time, __ATOMIC_RELAXED);
		struct tm tm;
		size_t l = (size_t)snprintf(text, sizeof(text), "%s",
					    tfs_bypass_name((enum tfs_bypass)why));

		if (why != TFS_BYPASS_NONE && gmtime_r(&when, &tm))
			l += strftime(text + l, sizeof(text) - l, " %Y-%m-%dT%H:%M:%SZ", &tm);
		return answer(buf, len, text, l);
	}
	if (!strcmp(n, "residency")) {
		char *map;
		int l = tfs_cache_residency(fs, in, NULL, 0);

		if (l <= 0)
			return l;
		map = malloc((size_t)l);
		if (!map)
			return -ENOMEM;
		l = tfs_cache_residency(fs, in, map, (size_t)l);
		rc = l < 0 ? l : answer(buf, len, map, (size_t)l);
		free(map);
		return rc;
	}
	rc = tfs_ns_load_file(fs, in);
	if (rc)
		return rc;
	if (!strcmp(n, "layout")) {
		const struct tfs_layout *lo = &fs->layout;

		return answer(buf, len, text, (size_t)snprintf(text, sizeof(text),
			      "%s chunk=%" PRIu32 " members=%" PRIu32 " rotation=%" PRIu32,
			      tfs_level_name(lo->level), lo->chunk, lo->nmembers, in->rot));
	}
	rc = tfs_cache_file_info(fs, in, &fi);
	if (rc)
		return rc;
	if (!strcmp(n, "cached_bytes"))
		return answer_u64(buf, len, fi.cached_bytes);
	if (!strcmp(n, "dirty_bytes"))
		return answer_u64(buf, len, fi.dirty_bytes);
	if (!strcmp(n, "extents"))
		return answer_u64(buf, len, fi.extents);
	if (!strcmp(n, "dirty_extents"))
		return answer_u64(buf, len, fi.dirty_extents);
	if (!strcmp(n, "heat"))
		return answer(buf, len, fi.heat, strlen(fi.heat));
	if (!strcmp(n, "pinned"))
		return answer(buf, len, fi.pinned ? "1" : "0", 1);
	if (!strcmp(n, "cache"))	/* the older summary */
		return answer(buf, len, text, (size_t)snprintf(text, sizeof(text),
			      "fid=%" PRIu64 "\ncached_bytes=%" PRIu64 "\ndirty_bytes=%" PRIu64 "\n",
			      in->fid, fi.cached_bytes, fi.dirty_bytes));
	return -ENODATA;
}

static int root_get(struct tfs_fs *fs, const struct tfs_attr_caller *who, const char *n,
		    char *buf, size_t len)
{
	char text[64];
	int l;

	/* paths (members, the tier, files being scrubbed) are root's
	 * business; the counters are everybody's (DESIGN §11) */
	if (!strcmp(n, "status"))
		return answer_owned(buf, len, tfs_status(fs, who->uid == 0));
	if (!strcmp(n, "stats")) {
		char *st = tfs_status(fs, who->uid == 0), *js = st ? tfs_kv_to_json(st) : NULL;

		free(st);
		return answer_owned(buf, len, js);
	}
	if (!strcmp(n, MAINT_RATE))
		return answer(buf, len, text, (size_t)snprintf(text, sizeof(text), "%g",
							      tfs_maint_rate(fs)));
	if (!strcmp(n, "trace")) {
		char st[PATH_MAX + 128];

		if (who->uid != 0)	/* a path */
			return -ENODATA;
		l = tfs_cache_trace_state(fs, st, sizeof(st));
		return l < 0 ? -ENODATA : answer(buf, len, st, (size_t)l);
	}
	if (!in_list(tunable_names, N(tunable_names), n))
		return -ENODATA;
	l = tfs_cache_tunable_get(fs, n, text, sizeof(text));
	return l == -ENODEV ? -ENODATA : l < 0 ? l : answer(buf, len, text, (size_t)l);
}

int tfs_attr_get(struct tfs_fs *fs, struct tfs_inode *in, const struct tfs_attr_caller *who,
		 const char *name, char *buf, size_t len)
{
	const char *n = name + PFX_LEN;

	if (who->root_node)
		return root_get(fs, who, n, buf, len);
	if (!S_ISREG(in->type))
		return -ENODATA;
	return file_get(fs, in, n, buf, len);
}

/* A refused set: logged, and the status's ctl_error (invariant 3). */
static int refused(int rc, const char *name, const char *why)
{
	char line[600];

	snprintf(line, sizeof(line), "setfattr %s: %s", name, why);
	tfs_warn("%s", line);
	tfs_control_refused(line);
	return rc;
}

/* The value as a string (trailing newlines off, as `echo` leaves one). */
static char *value_of(const char *val, size_t len)
{
	char *v = strndup(val ? val : "", val ? len : 0);
	size_t l = v ? strlen(v) : 0;

	while (l && (v[l - 1] == '\n' || v[l - 1] == ' '))
		v[--l] = 0;
	return v;
}

int tfs_attr_set(struct tfs_fs *fs, struct tfs_inode *in, const struct tfs_attr_caller *who,
		 const char *name, const char *val, size_t len)
{
	const char *n = name + PFX_LEN;
	char err[512] = "", *v;
	int rc;

	if (who->root_node) {
		if (!strcmp(n, "ctl")) {
			if (who->uid != 0)
				return refused(-EPERM, name, "only root controls the array");
			rc = tfs_control(fs, val, len, err, sizeof(err));
			if (rc && err[0])
				tfs_warn("tierctl: %s", err);
			return rc;
		}
		if (strcmp(n, "reset") && strcmp(n, MAINT_RATE) && strcmp(n, "trace") &&
		    !in_list(tunable_names, N(tunable_names), n))
			return in_list(root_names, N(root_names), n)
			       ? refused(-EPERM, name, "it only reads")
			       : refused(-EINVAL, name, "no such tierfs attribute on the root");
		if (who->uid != 0)
			return refused(-EPERM, name, "only root sets the array's attributes");
		if (!strcmp(n, "reset")) {
			tfs_cache_stats_reset(fs);
			tfs_info("counters reset");
			return 0;
		}
		v = value_of(val, len);
		if (!v)
			return -ENOMEM;
		rc = !strcmp(n, MAINT_RATE) ? tfs_maint_rate_set(fs, v, err, sizeof(err))
		     : !strcmp(n, "trace") ? tfs_cache_trace(fs, v, err, sizeof(err))
		     : tfs_cache_tunable_set(fs, n, v, err, sizeof(err));
		free(v);
		return rc ? refused(rc == -ENODATA ? -EINVAL : rc, name, err) : 0;
	}
	if (!S_ISREG(in->type) || (strcmp(n, "flush") && strcmp(n, "evict") && strcmp(n, "pinned"))) {
		bool ro = S_ISREG(in->type) && (in_list(file_names, N(file_names), n) ||
						!strcmp(n, "cache"));

		return ro ? refused(-EPERM, name, "it only reads")
			  : refused(-EINVAL, name, S_ISREG(in->type)
				    ? "no such tierfs attribute on a file"
				    : "tierfs attributes are on regular files and the root");
	}
	if (who->uid != 0) {
		struct stat st;

		rc = tfs_ns_getattr(fs, in, &st);
		if (rc)
			return rc;
		if (st.st_uid != who->uid)
			return refused(-EPERM, name, "only the file's owner or root");
	}
	if (!strcmp(n, "pinned")) {
		v = value_of(val, len);
		if (!v)
			return -ENOMEM;
		rc = strcmp(v, "1") && strcmp(v, "0") ? -EINVAL : 0;
		if (rc)
			snprintf(err, sizeof(err), "'%.40s': 1 (pin) or 0 (unpin)", v);
		else
			rc = tfs_cache_file_ctl(fs, in, v[0] == '1' ? "pin" : "unpin", err,
						sizeof(err));
		free(v);
	} else {
		rc = tfs_cache_file_ctl(fs, in, n, err, sizeof(err));
	}
	return rc ? refused(rc, name, err) : 0;
}

static int list_add(char *buf, size_t len, size_t off, const char *n)
{
	size_t l = PFX_LEN + strlen(n) + 1;

	if (len) {
		if (off + l > len)
			return -ERANGE;
		memcpy(buf + off, TFS_ATTR_PREFIX, PFX_LEN);
		memcpy(buf + off + PFX_LEN, n, l - PFX_LEN);
	}
	return (int)(off + l);
}

int tfs_attr_list(struct tfs_fs *fs, struct tfs_inode *in, const struct tfs_attr_caller *who,
		  char *buf, size_t len, size_t off)
{
	int n = (int)off;

	if (who->root_node) {
		for (size_t i = 0; i < N(root_names) && n >= 0; i++)
			n = list_add(buf, len, (size_t)n, root_names[i]);
		if (fs->cache && !tfs_cache_detached(fs->cache)) {	/* a tier: its names */
			for (size_t i = 0; i < N(tunable_names) && n >= 0; i++)
				n = list_add(buf, len, (size_t)n, tunable_names[i]);
			if (who->uid == 0 && n >= 0)	/* it names a path */
				n = list_add(buf, len, (size_t)n, "trace");
		}
	} else if (S_ISREG(in->type)) {
		for (size_t i = 0; i < N(file_names) && n >= 0; i++)
			n = list_add(buf, len, (size_t)n, file_names[i]);
	}
	return n;
}
