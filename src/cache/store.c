/* store.c - the SSD tier's cache directory: what tierfs keeps in it,
 * making a new cache there, and reading what an existing one is.
 *
 * Owns: the names in a cache directory (DIR/data, the preallocated
 * slots; DIR/meta, the LMDB store of cstore.c) and the store's info keys
 * that say what the cache is (version, array, cache, extent, slots;
 * bind.c keeps "clean" and "boot"): the check that the directory is
 * private, creating an empty cache, probing an existing one, wiping one,
 * and opening its files at start.  Whether a cache is used, made anew or
 * refused is bind.c's.
 *
 * Invariants:
 *  1. The cache directory is root's, mode 0700, before anything in it is
 *     read or written, and no directory above it lets a user swap it
 *     (c_dir_private, the first thing tfs_cache_setup does with it).
 *  2. Only the names tierfs keeps are removed from a cache directory
 *     (c_dir_wipe): a directory given by mistake loses nothing else.
 *  3. When c_create returns 0 the data file has its full size
 *     (preallocated where the filesystem can) and the store names its
 *     version, array, uuid and geometry, marked clean, synced: a cache
 *     the journal is then bound to is whole (bind.c invariant 1).
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
#include "tierfs/fs.h"
#include "tierfs/secure.h"
#include "tierfs/super.h"
#include "cache_i.h"

#define DATA_FILE	"data"
#define META_DIR	"meta"
#define STORE_VERSION	"1"

static int path_of(char *out, size_t len, const char *dir, const char *name)
{
	return snprintf(out, len, "%s/%s", dir, name) >= (int)len ? -ENAMETOOLONG : 0;
}

/* Invariant 1: the directory is root's (secure.h). */
int c_dir_private(const char *dir, char *err, size_t errlen)
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

/* Remove what tierfs keeps in a cache directory (only its own names:
 * invariant 2). */
int c_dir_wipe(const char *dir)
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

/* Make a new, empty cache in dir bound to this array. */
int c_create(struct tfs_cache *c, char *err, size_t errlen)
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

/* What is in dir: nothing, something unreadable (why), or a cache whose
 * info lands in c (uuid, geometry) and *array.  Its store is opened for
 * the info strings alone: the log it holds after a kill is read back (and
 * said) once, by c_dir_open after daemonizing (an LMDB environment must
 * not cross fork, so that open cannot be this one). */
enum c_probe c_probe(struct tfs_cache *c, char *array, size_t alen, char *why,
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
		return C_PROBE_EMPTY;
	if (!meta || !data) {
		snprintf(why, wlen, "its %s is missing", meta ? "data file" : "extent map");
		return C_PROBE_CORRUPT;
	}
	path_of(p, sizeof(p), c->dir, META_DIR);
	rc = tfs_cstore_open_info(p, &cs);
	if (rc) {
		snprintf(why, wlen, "its extent map cannot be read (%s)", strerror(-rc));
		return C_PROBE_CORRUPT;
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
		return C_PROBE_CORRUPT;
	}
	if (ext < C_SECTOR || ext > C_SECTOR * 64 * TFS_CEXT_WORDS || (ext & (ext - 1)) ||
	    slots == 0 || slots > UINT32_MAX / 2 || (uint64_t)st.st_size != ext * slots) {
		snprintf(why, wlen, "its geometry is inconsistent (extent %" PRIu64 ", %" PRIu64
			 " slots, data file %lld bytes)", ext, slots, (long long)st.st_size);
		return C_PROBE_CORRUPT;
	}
	c->extent = (uint32_t)ext;
	c->nslots = (uint32_t)slots;
	return C_PROBE_OK;
}

/* At start: open the data file (buffered, and O_DIRECT if the filesystem
 * allows) and the store. */
int c_dir_open(struct tfs_cache *c)
{
	char p[PATH_MAX];
	int rc;

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
	return 0;
}
