/* bind.c - the SSD tier's life: binding to the array, start, stop,
 * status and control.
 *
 * Owns: the cache directory as a whole (DIR/data, the preallocated slots;
 * DIR/meta, the LMDB store), the journal's record of which cache the array
 * is bound to and which files have writes only in it (DESIGN §10.2),
 * loading the index at start and saving heat at a clean stop, the cache.*
 * status lines and the user.tierfs.ctl cache commands.
 *
 * Invariants:
 *  1. A cache is used only if the journal names it as the array's cache:
 *     any other (an older one, one from before a mount without cache=) may
 *     be stale and is made anew; one bound to another array is refused.
 *  2. A mount never goes ahead while files named dirty in the journal
 *     would lose their data, unless cache_discard says so (and names them).
 *  3. After a stop that was not clean under another boot id, only dirty
 *     sectors are trusted (DESIGN §10.5).
 *  4. A mount refused after the cache was set up leaves the cache directory
 *     as it found it, as far as it can: what set-up made (the directory,
 *     a new data file and extent map) is removed again (cache_unmake); a
 *     stale cache it wiped stays wiped (it would have been made anew).  The
 *     options are checked before (tfs_cache_opts_check), so a bad option
 *     makes nothing.
 *  5. The cache directory is root's, mode 0700, before anything in it is
 *     read or written, and no directory above it lets a user swap it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tierfs/cache.h"
#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/inode.h"
#include "tierfs/ns.h"
#include "tierfs/walk.h"
#include "tierfs/parse.h"
#include "tierfs/secure.h"
#include "tierfs/super.h"
#include "cache_i.h"

#define DEF_SIZE	(1ull << 30)
#define DEF_EXTENT	(256u << 10)
#define DATA_FILE	"data"
#define META_DIR	"meta"
#define STORE_VERSION	"1"

static const char *const mode_names[] = {
	[TFS_CACHE_WRITEBACK] = "writeback",
	[TFS_CACHE_WRITETHROUGH] = "writethrough",
	[TFS_CACHE_WRITEAROUND] = "writearound",
	[TFS_CACHE_OFF] = "off",
};

const char *tfs_cache_mode_name(enum tfs_cache_mode m)
{
	return m <= TFS_CACHE_OFF ? mode_names[m] : "?";
}

int tfs_cache_mode_parse(const char *s, enum tfs_cache_mode *m)
{
	for (unsigned i = 0; i <= TFS_CACHE_OFF; i++)
		if (strcmp(s, mode_names[i]) == 0) {
			*m = (enum tfs_cache_mode)i;
			return 0;
		}
	return -EINVAL;
}

/* ------------------------------------------------------------------ */
/* Binding and set-up                                                  */
/* ------------------------------------------------------------------ */

/* A uuid as the two u64 of a journal set entry. */
static void uuid_pair(const char *uuid, uint64_t *a, uint64_t *b)
{
	char hex[33];
	unsigned n = 0;

	for (const char *p = uuid; *p && n < 32; p++)
		if (*p != '-')
			hex[n++] = *p;
	hex[n] = 0;
	*b = strtoull(hex + (n > 16 ? 16 : n), NULL, 16);
	hex[n > 16 ? 16 : n] = 0;
	*a = strtoull(hex, NULL, 16);
}

struct bound {
	uint64_t a, b;
	unsigned n;
};

static int bound_cb(void *arg, uint64_t a, uint64_t b)
{
	struct bound *bd = arg;

	bd->a = a;
	bd->b = b;
	bd->n++;
	return 0;
}

/* Bind the array to cache uuid (NULL: to none) in its journal. */
static int journal_bind(struct tfs_fs *fs, const char *uuid)
{
	uint64_t a, b;
	int rc = tfs_meta_set_clear(fs->meta, TFS_SET_CACHE);

	if (rc == 0 && uuid) {
		uuid_pair(uuid, &a, &b);
		rc = tfs_meta_set_put(fs->meta, TFS_SET_CACHE, a, b);
	}
	return rc ? rc : tfs_meta_sync(fs->meta);
}

struct lost {
	struct tfs_fs *fs;
	uint64_t found;
};

static int lost_cb(void *arg, struct tfs_inode *in, const struct stat *st)
{
	struct lost *l = arg;
	struct tfs_loc loc;

	if (tfs_ns_load_file(l->fs, in) || tfs_meta_set_has(l->fs->meta, TFS_SET_CDIRTY,
							     in->fid, 0) != 1)
		return 0;
	l->found++;
	if (tfs_inode_loc(l->fs, in, &loc) == 0) {
		char *p = tfs_loc_path(l->fs, &loc);

		tfs_warn("cache_discard: /%s lost the writes that were only in the cache",
			 p ? p : loc.name);
		free(p);
		tfs_loc_put(l->fs, &loc);
	}
	return 0;
}

/* cache_discard: name the files whose dirty data is given up, forget them. */
static int discard_lost(struct tfs_fs *fs, uint64_t ndirty)
{
	struct lost l = { .fs = fs };
	int rc = tfs_walk_files(fs, lost_cb, &l);

	if (rc)
		return rc;
	tfs_warn("cache_discard: %" PRIu64 " files lost data; %" PRIu64 " more were deleted since",
		 l.found, ndirty > l.found ? ndirty - l.found : 0);
	rc = tfs_meta_set_clear(fs->meta, TFS_SET_CDIRTY);
	return rc ? rc : journal_bind(fs, NULL);
}

static int path_of(char *out, size_t len, const char *dir, const char *name)
{
	return snprintf(out, len, "%s/%s", dir, name) >= (int)len ? -ENAMETOOLONG : 0;
}

/* Invariant 5: the directory is root's (secure.h). */
static int cache_private(const char *dir, char *err, size_t errlen)
{
	int fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), rc;

	if (fd < 0) {
		snprintf(err, errlen, "cache %s: %s", dir, strerror(errno));
		return -errno;
	}
	rc = tfs_dir_secure(fd, dir, "cache", err, errlen);
	close(fd);
	return rc;
}

static int cache_wipe(const char *dir);

/* Remove what this mount's set-up made (invariant 4). */
static void cache_unmake(struct tfs_cache *c)
{
	if (c->made_files && cache_wipe(c->dir))
		tfs_warn("cache %s: cannot remove the cache this refused mount made", c->dir);
	if (c->made_dir && rmdir(c->dir))
		tfs_warn("cache %s: cannot remove the directory this refused mount made: %s",
			 c->dir, strerror(errno));
	c->made_files = c->made_dir = false;
}

/* Remove what tierfs keeps in a cache directory (only its own names). */
static int cache_wipe(const char *dir)
{
	char p[PATH_MAX];
	static const char *const names[] = { META_DIR "/data.mdb", META_DIR "/lock.mdb",
					     META_DIR "/log", META_DIR "/log.new", DATA_FILE };

	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (path_of(p, sizeof(p), dir, names[i]))
			return -ENAMETOOLONG;
		if (unlink(p) && errno != ENOENT)
			return -errno;
	}
	if (path_of(p, sizeof(p), dir, META_DIR) == 0 && rmdir(p) && errno != ENOENT)
		return -errno;
	return 0;
}

/* The kernel's boot id; TIERFS_BOOT_ID stands in for it in tests, which
 * mount the crash states of a power cut without rebooting. */
static void boot_id(char *out, size_t len)
{
	const char *fake = getenv("TIERFS_BOOT_ID");
	FILE *f;

	if (fake && *fake) {
		snprintf(out, len, "%s", fake);
		return;
	}
	f = fopen("/proc/sys/kernel/random/boot_id", "r");
	out[0] = 0;
	if (f) {
		if (fgets(out, (int)len, f))
			out[strcspn(out, "\n")] = 0;
		fclose(f);
	}
}

/* Make a new, empty cache in dir bound to this array. */
static int cache_create(struct tfs_cache *c, char *err, size_t errlen)
{
	char p[PATH_MAX], v[32];
	uint64_t bytes = (uint64_t)c->nslots * c->extent;
	struct tfs_cstore *cs;
	int fd, rc;

	tfs_uuid_generate(c->uuid);
	if (path_of(p, sizeof(p), c->dir, DATA_FILE))
		return -ENAMETOOLONG;
	fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cache %s: cannot create %s: %s", c->dir, p, strerror(errno));
		return rc;
	}
	/* preallocated: a full SSD must not surface as ENOSPC on a write */
	rc = posix_fallocate(fd, 0, (off_t)bytes);
	if (rc == EOPNOTSUPP || rc == EINVAL)
		rc = ftruncate(fd, (off_t)bytes) ? errno : 0;
	close(fd);
	if (rc) {
		snprintf(err, errlen, "cache %s: cannot allocate %" PRIu64 " bytes: %s", c->dir,
			 bytes, strerror(rc));
		unlink(p);
		return -rc;
	}
	if (path_of(p, sizeof(p), c->dir, META_DIR))
		return -ENAMETOOLONG;
	rc = tfs_cstore_open(p, &cs);
	if (rc) {
		snprintf(err, errlen, "cache %s: cannot create its store: %s", c->dir, strerror(-rc));
		return rc;
	}
	rc = tfs_cstore_info_set(cs, "version", STORE_VERSION);
	if (rc == 0)
		rc = tfs_cstore_info_set(cs, "array", c->fs->array->sb.uuid);
	if (rc == 0)
		rc = tfs_cstore_info_set(cs, "cache", c->uuid);
	snprintf(v, sizeof(v), "%u", c->extent);
	if (rc == 0)
		rc = tfs_cstore_info_set(cs, "extent", v);
	snprintf(v, sizeof(v), "%u", c->nslots);
	if (rc == 0)
		rc = tfs_cstore_info_set(cs, "slots", v);
	if (rc == 0)
		rc = tfs_cstore_info_set(cs, "clean", "1");
	if (rc == 0)
		rc = tfs_cstore_sync(cs);
	tfs_cstore_close(cs);
	if (rc)
		snprintf(err, errlen, "cache %s: cannot write its store: %s", c->dir, strerror(-rc));
	else
		tfs_info("cache %s: created, %u slots of %u KiB", c->dir, c->nslots, c->extent >> 10);
	return rc;
}

enum probe { P_EMPTY, P_CORRUPT, P_OK };

/* What is in dir: nothing, something unreadable (why), or a cache whose
 * info lands in c (uuid, geometry) and *array. */
static enum probe cache_probe(struct tfs_cache *c, char *array, size_t alen, char *why,
			      size_t wlen)
{
	char p[PATH_MAX], v[256];
	struct tfs_cstore *cs;
	struct stat st;
	bool meta, data;
	uint64_t ext = 0, slots = 0;
	int rc;

	path_of(p, sizeof(p), c->dir, META_DIR);
	meta = stat(p, &st) == 0;
	path_of(p, sizeof(p), c->dir, DATA_FILE);
	data = stat(p, &st) == 0;
	if (!meta && !data)
		return P_EMPTY;
	if (!meta || !data) {
		snprintf(why, wlen, "its %s is missing", meta ? "data file" : "extent map");
		return P_CORRUPT;
	}
	path_of(p, sizeof(p), c->dir, META_DIR);
	rc = tfs_cstore_open(p, &cs);
	if (rc) {
		snprintf(why, wlen, "its extent map cannot be read (%s)", strerror(-rc));
		return P_CORRUPT;
	}
	rc = tfs_cstore_info_get(cs, "version", v, sizeof(v));
	if (rc == 0 && strcmp(v, STORE_VERSION) != 0)
		rc = -EPROTO;
	if (rc == 0)
		rc = tfs_cstore_info_get(cs, "array", array, alen);
	if (rc == 0)
		rc = tfs_cstore_info_get(cs, "cache", c->uuid, sizeof(c->uuid));
	if (rc == 0 && (rc = tfs_cstore_info_get(cs, "extent", v, sizeof(v))) == 0)
		ext = strtoull(v, NULL, 10);
	if (rc == 0 && (rc = tfs_cstore_info_get(cs, "slots", v, sizeof(v))) == 0)
		slots = strtoull(v, NULL, 10);
	tfs_cstore_close(cs);
	if (rc) {
		snprintf(why, wlen, "its extent map is incomplete (%s)", strerror(-rc));
		return P_CORRUPT;
	}
	if (ext < C_SECTOR || ext > C_SECTOR * 64 * TFS_CEXT_WORDS || (ext & (ext - 1)) ||
	    slots == 0 || slots > UINT32_MAX / 2 || (uint64_t)st.st_size != ext * slots) {
		snprintf(why, wlen, "its geometry is inconsistent (extent %" PRIu64 ", %" PRIu64
			 " slots, data file %lld bytes)", ext, slots, (long long)st.st_size);
		return P_CORRUPT;
	}
	c->extent = (uint32_t)ext;
	c->nslots = (uint32_t)slots;
	return P_OK;
}

/* Options into c (the ranges of the numbers were checked by tierfs.c);
 * returns 0 or -EINVAL with err set. */
static int cache_config(struct tfs_cache *c, const struct tfs_cache_opts *o, char *err,
			size_t errlen)
{
	uint64_t ext = o->extent ? o->extent : DEF_EXTENT, size = o->size ? o->size : DEF_SIZE;
	char b1[32], b2[32], b3[32];

	if (ext < C_SECTOR || ext > C_SECTOR * 64 * TFS_CEXT_WORDS || (ext & (ext - 1))) {
		snprintf(err, errlen, "cache_extent=%s: a power of two from 4K to 1M",
			 tfs_fmt_size(ext, b1, sizeof(b1)));
		return -EINVAL;
	}
	c->extent = (uint32_t)ext;
	if (size / ext < 16 || size / ext > UINT32_MAX / 2) {
		snprintf(err, errlen, "cache_size=%s: from 16 extents (%s) to %u extents of %s",
			 tfs_fmt_size(size, b1, sizeof(b1)), tfs_fmt_size(ext * 16, b2, sizeof(b2)),
			 UINT32_MAX / 2, tfs_fmt_size(ext, b3, sizeof(b3)));
		return -EINVAL;
	}
	c->nslots = (uint32_t)(size / ext);
	c->seq_cutoff = o->seq_cutoff;
	c->mode = TFS_CACHE_WRITEBACK;
	if (o->mode && tfs_cache_mode_parse(o->mode, &c->mode)) {
		snprintf(err, errlen, "cache_mode=%s: writeback, writethrough, writearound or off",
			 o->mode);
		return -EINVAL;
	}
	c->policy_kind = TFS_POLICY_S3FIFO;
	if (o->policy && tfs_policy_parse(o->policy, &c->policy_kind)) {
		snprintf(err, errlen, "cache_policy=%s: lru or s3fifo", o->policy);
		return -EINVAL;
	}
	c->promote = o->promote;			/* 1 to 65535 */
	c->halflife = (uint32_t)(o->halflife * 16);	/* 1 to 604800 s, in 1/16 s */
	c->dirty_low = o->dirty_low;
	c->dirty_high = o->dirty_high;
	if (c->dirty_low >= c->dirty_high) {	/* each in range, but not together */
		snprintf(err, errlen, "cache_dirty_low=%u, cache_dirty_high=%u: 0 <= low < high <= 100",
			 c->dirty_low, c->dirty_high);
		return -EINVAL;
	}
	return 0;
}

int tfs_cache_opts_check(const struct tfs_cache_opts *o, char *err, size_t errlen)
{
	struct tfs_cache *c = calloc(1, sizeof(*c));
	int rc;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = cache_config(c, o, err, errlen);
	free(c);
	return rc;
}

/* What the namespace needs from the tier (fs.h): it calls nothing else. */
static const struct tfs_tier_hooks tier_hooks = {
	.holds = tfs_cache_knows,
	.cut_begin = tfs_cache_zero_begin,
	.cut_end = tfs_cache_zero_end,
	.gone = tfs_cache_forget,
	.found = tfs_cache_found,
	.size = tfs_cache_size,
	.dirty_bytes = tfs_cache_dirty_bytes,
};

int tfs_cache_setup(struct tfs_fs *fs, const struct tfs_cache_opts *o, char *err,
		    size_t errlen)
{
	struct tfs_cache *c;
	struct bound bd = { 0 };
	uint64_t ndirty = 0, a, b;
	char array[256] = "", why[512] = "";
	enum probe pr;
	bool bound, discarded = false;
	int rc;

	rc = tfs_meta_set_foreach(fs->meta, TFS_SET_CACHE, bound_cb, &bd);
	if (rc == 0)
		rc = tfs_meta_set_count(fs->meta, TFS_SET_CDIRTY, &ndirty);
	if (rc) {
		snprintf(err, errlen, "cannot read the cache binding from the journal: %s",
			 strerror(-rc));
		return rc;
	}
	if (!o->dir) {
		if (ndirty && !o->discard) {
			snprintf(err, errlen, "%" PRIu64 " files have writes that are only in the "
				 "array's write-back cache: mount with -o cache=DIR, or with "
				 "-o cache_discard to give them up", ndirty);
			return -EBUSY;
		}
		if (fs->readonly)
			return 0;
		if (ndirty)
			return discard_lost(fs, ndirty);
		/* running uncached: a cache used before is stale from now on */
		return bd.n ? journal_bind(fs, NULL) : 0;
	}

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fs = fs;
	c->fd = c->dfd = -1;
	c->readonly = fs->readonly;
	c->dir = realpath(o->dir, NULL);
	if (!c->dir && errno == ENOENT && mkdir(o->dir, 0700) == 0) {
		c->made_dir = true;
		c->dir = realpath(o->dir, NULL);
	}
	if (!c->dir) {
		snprintf(err, errlen, "cache=%s: %s", o->dir, strerror(errno));
		rc = -errno;
		goto fail;
	}
	rc = cache_private(c->dir, err, errlen);
	if (rc == 0)
		rc = cache_config(c, o, err, errlen);
	if (rc)
		goto fail;
	pr = cache_probe(c, array, sizeof(array), why, sizeof(why));
	if (pr == P_OK && strcmp(array, fs->array->sb.uuid) != 0) {
		if (array[0]) {
			snprintf(err, errlen, "cache %s belongs to array %s, not to this array "
				 "(%s): give another directory, or detach it from its array first",
				 c->dir, array, fs->array->sb.uuid);
			rc = -EEXIST;
			goto fail;
		}
		pr = P_CORRUPT;	/* detached from its array: free to reuse */
		snprintf(why, sizeof(why), "it was detached");
	}
	uuid_pair(c->uuid, &a, &b);
	bound = pr == P_OK && bd.n == 1 && bd.a == a && bd.b == b;
	if (!bound && ndirty) {
		if (!o->discard) {
			snprintf(err, errlen, "%" PRIu64 " files have writes that are only in the "
				 "array's write-back cache, and %s is not that cache%s%s: mount "
				 "with the right cache=DIR, or with -o cache_discard to give them up",
				 ndirty, c->dir, why[0] ? ": " : "", why);
			rc = -EBUSY;
			goto fail;
		}
		if (fs->readonly) {
			snprintf(err, errlen, "cache_discard needs a read-write mount");
			rc = -EROFS;
			goto fail;
		}
		rc = discard_lost(fs, ndirty);
		if (rc)
			goto fail;
		discarded = true;
	}
	if (!bound && fs->readonly) {
		/* nothing of it can be trusted and nothing may be written */
		tfs_warn("cache %s is not this array's current cache: not used on a read-only "
			 "mount", c->dir);
		goto fail_quiet;
	}
	if (!bound) {
		if (pr == P_CORRUPT)
			tfs_warn("cache %s: %s; made anew (%s)", c->dir, why, discarded
				 ? "the writes only it held are given up: cache_discard"
				 : "no dirty data was in it");
		else if (pr == P_OK)
			tfs_warn("cache %s is stale (the array ran without it): emptied", c->dir);
		rc = cache_config(c, o, err, errlen);	/* probe may have set geometry */
		if (rc == 0)
			rc = cache_wipe(c->dir);
		if (rc == 0) {
			c->made_files = true;
			rc = cache_create(c, err, errlen);
		}
		if (rc == 0)
			rc = journal_bind(fs, c->uuid);
		if (rc) {
			if (!err[0])
				snprintf(err, errlen, "cache %s: %s", c->dir, strerror(-rc));
			goto fail;
		}
	} else {
		char b1[32], b2[32];

		if (o->extent && o->extent != c->extent)
			tfs_warn("cache %s: extent size is %s (set when it was made); "
				 "cache_extent=%s ignored", c->dir,
				 tfs_fmt_size(c->extent, b1, sizeof(b1)),
				 tfs_fmt_size(o->extent, b2, sizeof(b2)));
		if (o->size && o->size / c->extent != c->nslots)
			tfs_warn("cache %s: size is %s (set when it was made); "
				 "cache_size=%s ignored", c->dir,
				 tfs_fmt_size((uint64_t)c->nslots * c->extent, b1, sizeof(b1)),
				 tfs_fmt_size(o->size, b2, sizeof(b2)));
	}
	c->spe = c->extent / C_SECTOR;
	fs->cache = c;
	fs->tier = &tier_hooks;
	return 0;
fail:
	if (!err[0])
		snprintf(err, errlen, "cache %s: %s", o->dir, strerror(-rc));
fail_quiet:
	if (c->dir)
		cache_unmake(c);
	free(c->dir);
	free(c);
	return rc;
}

void tfs_cache_abandon(struct tfs_fs *fs)
{
	struct tfs_cache *c = fs->cache;

	if (!c)
		return;
	cache_unmake(c);
	fs->cache = NULL;
	fs->tier = NULL;
	free(c->dir);
	free(c);
}

/* ------------------------------------------------------------------ */
/* Start and stop                                                      */
/* ------------------------------------------------------------------ */

struct loader {
	struct tfs_cache *c;
	bool keep_clean;		/* the page cache outlived the daemon */
	uint64_t dropped;
};

static int load_ext(void *arg, const struct tfs_cext_rec *r)
{
	struct loader *ld = arg;
	struct tfs_cache *c = ld->c;
	struct cfile *f;
	struct cext *x;

	if (r->slot >= c->nslots || c->e[r->slot].used) {
		tfs_err("cache %s: extent map names slot %u twice or out of range", c->dir, r->slot);
		return -EUCLEAN;
	}
	f = c_link_slot(c, r->slot, r->fid, r->idx);
	if (!f)
		return -ENOMEM;
	x = &c->e[r->slot];
	memcpy(x->dirty, r->dirty, sizeof(x->dirty));
	memcpy(x->valid, ld->keep_clean ? r->valid : r->dirty, sizeof(x->valid));
	for (unsigned w = 0; w < TFS_CEXT_WORDS; w++)
		x->valid[w] |= x->dirty[w];
	x->heat = r->heat;
	x->heat_t = c_now();
	if (bm_any(x->dirty)) {
		c_dirty_add(c, f, bm_count(x->dirty));
		c->ndirty++;
		if (f->ndirty++ == 0) {
			f->unresolved = true;
			f->journaled = true;
			c->unresolved++;
		}
	}
	if (!bm_any(x->valid))
		ld->dropped++;
	return 0;
}

static int load_size(void *arg, uint64_t fid, uint64_t size)
{
	struct tfs_cache *c = arg;
	struct cfile *f = c_file_get(c, fid);

	if (!f)
		return -ENOMEM;
	f->size = size;
	return 0;
}

/* Drop the slots the load left without a valid sector. */
static int drop_empty(struct tfs_cache *c)
{
	for (uint32_t s = 0; s < c->nslots; s++) {
		struct tfs_cstore_op op;
		int rc;

		if (!c->e[s].used || bm_any(c->e[s].valid))
			continue;
		op = (struct tfs_cstore_op){ .op = TFS_CS_DEL_EXT, .fid = c->e[s].fid,
					     .idx = c->e[s].idx };
		rc = c_commit(c, &op, 1);
		if (rc)
			return rc;
		c_unlink_slot(c, s);
	}
	return 0;
}

struct stale {
	struct tfs_cache *c;
	uint64_t *fid;
	unsigned n, cap;
};

static int stale_cb(void *arg, uint64_t fid, uint64_t zero)
{
	struct stale *st = arg;
	struct cfile *f = c_file_find(st->c, fid);

	if (f && f->ndirty)
		return 0;
	if (st->n == st->cap) {
		unsigned cap = st->cap ? 2 * st->cap : 64;
		uint64_t *p = realloc(st->fid, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		st->fid = p;
		st->cap = cap;
	}
	st->fid[st->n++] = fid;
	return 0;
}

/* Journal entries of files with no dirty extent (a stop came between the
 * flush and the entry's removal) are dropped. */
static int journal_reconcile(struct tfs_cache *c)
{
	struct stale st = { .c = c };
	int rc = tfs_meta_set_foreach(c->fs->meta, TFS_SET_CDIRTY, stale_cb, &st);

	for (unsigned i = 0; rc == 0 && i < st.n; i++)
		rc = tfs_meta_set_del(c->fs->meta, TFS_SET_CDIRTY, st.fid[i], 0);
	free(st.fid);
	return rc;
}

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t p = 1;

	while (p < n && p < (1u << 30))
		p <<= 1;
	return p;
}

/* The store's barrier (cstore.c invariant 7): the slots' bytes first. */
static int data_barrier(void *arg)
{
	struct tfs_cache *c = arg;

	return fdatasync(c->fd) ? -errno : 0;
}

int tfs_cache_start(struct tfs_fs *fs)
{
	struct tfs_cache *c = fs->cache;
	struct loader ld = { .c = c };
	char p[PATH_MAX], v[64], boot[64];
	int rc;

	if (!c)
		return 0;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->jlock, NULL);
	pthread_cond_init(&c->cond, NULL);
	pthread_cond_init(&c->fcond, NULL);
	pthread_cond_init(&c->pcond, NULL);
	path_of(p, sizeof(p), c->dir, DATA_FILE);
	c->fd = open(p, (c->readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (c->fd < 0) {
		tfs_err("cache %s: %s: %s", c->dir, p, strerror(errno));
		return -errno;
	}
	c->dfd = open(p, (c->readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_DIRECT);
	path_of(p, sizeof(p), c->dir, META_DIR);
	rc = tfs_cstore_open(p, &c->cs);
	if (rc) {
		tfs_err("cache %s: extent map: %s", c->dir, strerror(-rc));
		return rc;
	}
	c->e = calloc(c->nslots, sizeof(*c->e));
	c->hmask = pow2_at_least(c->nslots) - 1;
	c->htab = malloc((size_t)(c->hmask + 1) * sizeof(*c->htab));
	c->freel = malloc((size_t)c->nslots * sizeof(*c->freel));
	c->fmask = pow2_at_least(c->nslots / 4 + 1) - 1;
	c->ftab = calloc((size_t)c->fmask + 1, sizeof(*c->ftab));
	c->umask = pow2_at_least((uint64_t)c->nslots * 4 > 65536 ? (uint64_t)c->nslots * 4 : 65536) - 1;
	c->uheat = calloc((size_t)c->umask + 1, sizeof(*c->uheat));
	c->pol = tfs_policy_new(c->policy_kind, c->nslots);
	if (!c->e || !c->htab || !c->freel || !c->ftab || !c->uheat || !c->pol)
		return -ENOMEM;
	memset(c->htab, 0xff, (size_t)(c->hmask + 1) * sizeof(*c->htab));

	/* the clean sectors are trusted when the daemon stopped cleanly, or
	 * died without the machine going down (its writes are in the page
	 * cache); after a reboot only what was fsynced is (DESIGN §10.5) */
	boot_id(boot, sizeof(boot));
	ld.keep_clean = (tfs_cstore_info_get(c->cs, "clean", v, sizeof(v)) == 0 &&
			 strcmp(v, "1") == 0) ||
			(tfs_cstore_info_get(c->cs, "boot", v, sizeof(v)) == 0 &&
			 strcmp(v, boot) == 0);
	tfs_cstore_set_barrier(c->cs, data_barrier, c);
	if (!ld.keep_clean && !c->readonly) {
		/* the machine went down: no durability point covered what the
		 * store's log holds beyond the last one (cstore.c invariant 8) */
		uint64_t n = 0;

		rc = tfs_cstore_drop_unsynced(c->cs, &n);
		if (rc) {
			tfs_err("cache %s: cannot drop the unsynced log: %s", c->dir, strerror(-rc));
			return rc;
		}
		if (n)
			tfs_info("cache %s: %" PRIu64 " extent map updates were never synced: "
				 "dropped (after a restart of the machine)", c->dir, n);
	}
	rc = tfs_cstore_ext_foreach(c->cs, load_ext, &ld);
	if (rc == 0)
		rc = tfs_cstore_size_foreach(c->cs, load_size, c);
	if (rc) {
		tfs_err("cache %s: cannot load the extent map: %s", c->dir, strerror(-rc));
		return rc;
	}
	for (uint32_t s = c->nslots; s-- > 0;)
		if (!c->e[s].used)
			c->freel[c->nfree++] = s;
	c->free_synced = c->nfree;	/* the walk above is after a durability point */
	if (!c->readonly) {
		rc = drop_empty(c);
		if (rc == 0)
			rc = journal_reconcile(c);
		if (rc == 0)
			rc = tfs_cstore_info_set(c->cs, "clean", "0");
		if (rc == 0)
			rc = tfs_cstore_info_set(c->cs, "boot", boot);
		if (rc)
			return rc;
	}
	tfs_info("cache %s: %s, %u of %u extents cached, %u dirty%s%s", c->dir,
		 tfs_cache_mode_name(c->mode), c->nused, c->nslots, c->ndirty,
		 ld.keep_clean ? "" : " (after a restart of the machine: clean extents dropped)",
		 c->unresolved ? "; looking for the dirty files" : "");
	if (ld.dropped)
		tfs_info("cache %s: %" PRIu64 " extents held nothing that survived", c->dir, ld.dropped);
	return c->readonly ? 0 : c_threads_start(c);
}

void tfs_cache_stop(struct tfs_fs *fs)
{
	struct tfs_cache *c = fs->cache;
	struct tfs_cext_rec *recs;
	struct tfs_cstore_op *ops;
	unsigned n = 0;
	int rc;

	if (!c || !c->cs)
		return;
	c_threads_stop(c);
	if (!c->readonly) {
		/* heat is kept in memory and saved here (and not on every hit) */
		recs = calloc(c->nused + 1, sizeof(*recs));
		ops = calloc(c->nused + 1, sizeof(*ops));
		pthread_mutex_lock(&c->lock);
		for (uint32_t s = 0; recs && ops && s < c->nslots; s++) {
			if (!c->e[s].used || c->e[s].dead)
				continue;
			c_record(c, s, &recs[n]);
			ops[n] = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT, .rec = &recs[n] };
			n++;
		}
		pthread_mutex_unlock(&c->lock);
		/* "clean" only after a durability point over the saved records:
		 * else the next start after a reboot trusts the dirty sectors
		 * alone */
		rc = ops ? c_commit(c, ops, n) : 0;
		if (rc == 0)
			rc = tfs_cstore_sync(c->cs);
		if (rc == 0)
			rc = tfs_cstore_info_set(c->cs, "clean", "1");
		if (rc)
			tfs_err("cache %s: cannot mark the cache clean at stop: %s", c->dir,
				strerror(-rc));
		free(recs);
		free(ops);
	}
	/* dirty files keep their journal entries: the cache still holds them */
	if (c_journal_drain(c))
		tfs_err("cache %s: stopped with files not named in the journal: the mount "
			"cannot tell they have data in the cache if it is lost", c->dir);
	for (uint32_t h = 0; h <= c->fmask; h++)
		for (struct cfile *f = c->ftab[h]; f; f = f->next)
			if (f->in) {
				tfs_inode_unref(fs, f->in);
				f->in = NULL;
			}
	rc = tfs_meta_sync(fs->meta);
	if (rc)
		tfs_err("cache %s: journal sync at stop failed: %s", c->dir, strerror(-rc));
	tfs_cstore_close(c->cs);
	c->cs = NULL;
	close(c->fd);
	if (c->dfd >= 0)
		close(c->dfd);
	tfs_info("cache %s: stopped with %u extents cached, %u dirty", c->dir, c->nused, c->ndirty);
}

/* ------------------------------------------------------------------ */
/* Statistics and control                                              */
/* ------------------------------------------------------------------ */

int tfs_cache_stats(struct tfs_fs *fs, char *buf, size_t len, bool paths)
{
	struct tfs_cache *c = fs->cache;
	unsigned hot = 0, warm = 0, cold = 0;
	uint32_t now = c_now();
	struct cstats st;
	uint64_t dirty;
	uint32_t used, ndirty, unresolved;
	enum tfs_cache_mode mode;
	bool flushing, flush_unresolved;
	char ferr[96] = "";
	int l, flush_err;

	if (!c || c->detached)
		return snprintf(buf, len, "cache=none\n");
	pthread_mutex_lock(&c->lock);
	for (uint32_t s = 0; s < c->nslots; s++) {
		unsigned h;

		if (!c->e[s].used)
			continue;
		h = c_heat_now(c, c->e[s].heat, c->e[s].heat_t, now);
		if (h >= 2 * c->promote)
			hot++;
		else if (h >= c->promote)
			warm++;
		else
			cold++;
	}
	st = c->st;
	dirty = c->dirty_sectors * C_SECTOR;
	used = c->nused;
	ndirty = c->ndirty;
	unresolved = c->unresolved;
	flushing = c->flush_req != c->flush_done;
	flush_err = c->flush_err;
	flush_unresolved = c->flush_unresolved;
	mode = c_mode(c);
	pthread_mutex_unlock(&c->lock);
	if (flush_err)
		snprintf(ferr, sizeof(ferr), "%s", strerror(-flush_err));
	else if (flush_unresolved && unresolved)
		snprintf(ferr, sizeof(ferr), "%u files with dirty data not found since the restart",
			 unresolved);
	l = snprintf(buf, len,
		     "cache=%s\ncache.uuid=%s\ncache.mode=%s\ncache.policy=%s\n"
		     "cache.extent=%u\ncache.slots=%u\ncache.size=%" PRIu64 "\n"
		     "cache.cached_extents=%u\ncache.dirty_extents=%u\ncache.dirty_bytes=%" PRIu64 "\n"
		     "cache.hot_extents=%u\ncache.warm_extents=%u\ncache.cold_extents=%u\n"
		     "cache.read_hits=%" PRIu64 "\ncache.read_misses=%" PRIu64 "\n"
		     "cache.read_hit_bytes=%" PRIu64 "\ncache.read_miss_bytes=%" PRIu64 "\n"
		     "cache.ring_hits=%" PRIu64 "\n"
		     "cache.write_hits=%" PRIu64 "\ncache.write_misses=%" PRIu64 "\n"
		     "cache.write_around=%" PRIu64 "\ncache.seq_bypass=%" PRIu64 "\n"
		     "cache.promotions=%" PRIu64 "\ncache.promote_dropped=%" PRIu64 "\n"
		     "cache.evictions=%" PRIu64 "\ncache.invalidations=%" PRIu64 "\n"
		     "cache.fills=%" PRIu64 "\ncache.flushed_bytes=%" PRIu64 "\n"
		     "cache.flush_writes=%" PRIu64 "\ncache.full_stripe_flushes=%" PRIu64 "\n"
		     "cache.throttled=%" PRIu64 "\ncache.flush_pending=%d\n"
		     "cache.unresolved_files=%u\ncache.promote_threshold=%u\n"
		     "cache.seq_cutoff=%" PRIu64 "\ncache.dirty_low=%u\ncache.dirty_high=%u\n"
		     "cache.flush_error=%s\n",
		     paths ? c->dir : "-", c->uuid, tfs_cache_mode_name(mode), tfs_policy_name(c->policy_kind),
		     c->extent, c->nslots, (uint64_t)c->nslots * c->extent,
		     used, ndirty, dirty, hot, warm, cold,
		     st.read_hits, st.read_misses, st.read_hit_bytes, st.read_miss_bytes,
		     st.ring_hits,
		     st.write_hits, st.write_misses, st.write_around, st.seq_bypass,
		     st.promotions, st.promote_dropped, st.evictions, st.invalidations,
		     st.fills, st.flushed_bytes, st.flush_writes, st.full_stripe_flushes,
		     st.throttled, flushing, unresolved, c->promote, c->seq_cutoff,
		     c->dirty_low, c->dirty_high, ferr);
	return l < 0 ? 0 : (size_t)l >= len ? (int)len - 1 : l;
}

int tfs_cache_file_stats(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len)
{
	struct tfs_cache *c = fs->cache;
	uint64_t cached = 0, dirty = 0;
	struct cfile *f;
	int rc = tfs_ns_load_file(fs, in);

	if (rc)
		return rc;
	if (c && !c->detached) {
		pthread_mutex_lock(&c->lock);
		f = c_file_find(c, in->fid);
		for (uint32_t s = f ? f->head : C_NONE; s != C_NONE; s = c->e[s].fnext) {
			cached += (uint64_t)bm_count(c->e[s].valid) * C_SECTOR;
			dirty += (uint64_t)bm_count(c->e[s].dirty) * C_SECTOR;
		}
		pthread_mutex_unlock(&c->lock);
	}
	rc = snprintf(buf, len, "fid=%" PRIu64 "\ncached_bytes=%" PRIu64 "\ndirty_bytes=%" PRIu64
		      "\n", in->fid, cached, dirty);
	return rc >= (int)len ? -ERANGE : rc;
}

/* Detach: everything flushed, the cache emptied and unbound, the array
 * uncached from now on.  A write that read the mode before it either ends
 * before the last flush (which takes what it wrote) or waits at the gate
 * and then goes to the RAID (write.c invariant 5). */
static int cache_detach(struct tfs_cache *c, char *err, size_t errlen)
{
	bool stopped = false;
	int rc;

	__atomic_store_n(&c->mode, TFS_CACHE_OFF, __ATOMIC_RELEASE);
	rc = c_flush_all(c);	/* the bulk, with writes still coming in */
	if (rc == 0) {
		pthread_mutex_lock(&c->lock);
		c->gate = true;
		while (c->writers)
			pthread_cond_wait(&c->cond, &c->lock);
		pthread_mutex_unlock(&c->lock);
		rc = c_flush_all(c);	/* what they wrote; nobody adds more */
	}
	if (rc == 0) {
		c_threads_stop(c);
		stopped = true;
	}
	pthread_mutex_lock(&c->lock);
	if (rc == 0 && c->ndirty)
		rc = -EBUSY;	/* cannot happen: the gate is closed */
	if (rc == 0)
		__atomic_store_n(&c->detached, true, __ATOMIC_RELEASE);
	c->gate = false;
	pthread_cond_broadcast(&c->cond);
	if (rc && c->unresolved) {
		snprintf(err, errlen, "%u files with dirty data not found since the restart "
			 "(cache.unresolved_files): the cache stays attached", c->unresolved);
		rc = -EAGAIN;	/* the flusher keeps looking */
	} else if (rc) {
		snprintf(err, errlen, "flush failed (%s): the cache stays attached", strerror(-rc));
	}
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		int r = stopped ? c_threads_start(c) : 0;

		if (r)
			tfs_err("cache %s: the flusher cannot be restarted after a failed detach: "
				"%s; dirty data stays until the next mount", c->dir, strerror(-r));
		return rc;
	}
	/* requests already past the detached check see mode off: they only
	 * read the index, which empties under them without harm */
	pthread_mutex_lock(&c->lock);
	for (uint32_t s = 0; s < c->nslots; s++)
		if (c->e[s].used && !c->e[s].busy)
			c_unlink_slot(c, s);
	pthread_mutex_unlock(&c->lock);
	rc = tfs_cstore_clear(c->cs);
	if (rc == 0)
		rc = tfs_cstore_info_set(c->cs, "array", "");
	if (rc == 0)
		rc = tfs_cstore_sync(c->cs);
	if (rc == 0)
		rc = tfs_meta_set_clear(c->fs->meta, TFS_SET_CDIRTY);
	if (rc == 0)
		rc = journal_bind(c->fs, NULL);
	if (rc)
		snprintf(err, errlen, "cache emptied, but unbinding failed: %s", strerror(-rc));
	else
		tfs_info("cache %s: detached; the array runs uncached", c->dir);
	return rc;
}

int tfs_cache_ctl(struct tfs_fs *fs, const char *cmd, const char *arg, char *err,
		  size_t errlen)
{
	struct tfs_cache *c = fs->cache;
	enum tfs_cache_mode m;

	if (!c || c->detached) {
		snprintf(err, errlen, "no cache is attached (mount with -o cache=DIR)");
		return -ENODEV;
	}
	if (c->readonly) {
		snprintf(err, errlen, "the mount is read-only");
		return -EROFS;
	}
	if (strcmp(cmd, "flush") == 0) {
		pthread_mutex_lock(&c->lock);
		c_flush_request(c);
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	if (strcmp(cmd, "cache_mode") == 0) {
		if (!arg || tfs_cache_mode_parse(arg, &m)) {
			snprintf(err, errlen, "cache_mode: writeback, writethrough, writearound or off");
			return -EINVAL;
		}
		__atomic_store_n(&c->mode, m, __ATOMIC_RELEASE);
		tfs_info("cache %s: mode %s", c->dir, tfs_cache_mode_name(m));
		if (m != TFS_CACHE_WRITEBACK) {	/* leaving write-back: drain */
			pthread_mutex_lock(&c->lock);
			c_flush_request(c);
			pthread_mutex_unlock(&c->lock);
		}
		return 0;
	}
	if (strcmp(cmd, "detach") == 0)
		return cache_detach(c, err, errlen);
	snprintf(err, errlen, "unknown cache command '%s' (flush, cache_mode MODE, detach)", cmd);
	return -EINVAL;
}
