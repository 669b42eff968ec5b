/* cstore.c - the SSD tier's metadata store (tierfs/cstore.h).
 *
 * Owns: the cache's LMDB environment (CACHE_DIR/meta), its named
 * databases and the encoding of their records.
 *
 * Schema:
 *   "ext"   key: u64 fid, u64 idx (big-endian, so cursor order is
 *           (fid, idx) order)
 *           value: struct ext_val (host byte order, 80 bytes, version 1)
 *   "size"  key: u64 fid (big-endian)   value: u64 size (host byte order)
 *   "info"  key: name string            value: string including its NUL
 *
 * Invariants:
 *  1. Writers are serialised by wlock; every change is one write
 *     transaction (tfs_mdb_write), so a batch of ops is all or nothing.
 *  2. The environment is opened with MDB_NOSYNC | MDB_WRITEMAP: a commit
 *     survives the daemon's death at once; tfs_cstore_sync() is the
 *     durability point for power loss.
 *  3. A full map is grown (doubled) and the transaction retried; callers
 *     never see MDB_MAP_FULL.
 *  4. Readers hold maplock for reading for as long as they look into the
 *     map; only the growth of invariant 3 takes it for writing (the map
 *     moves).  So readers never block a writer's commits, and a foreach
 *     callback must neither write to the store nor wait for a writer.
 *  5. A record is decoded only after its key and value sizes and version
 *     are checked: anything else is -EUCLEAN, never a bad read.
 *  6. Open refuses (-EUCLEAN) a data.mdb that is not an LMDB file or is
 *     shorter than the pages its meta page counts: MDB_WRITEMAP extends
 *     the file with zeros, and LMDB would abort on the first zero page.
 *     (Damage inside the pages of a full-length file is not detected.)
 */
#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tierfs/cstore.h"
#include "tierfs/log.h"
#include "meta_i.h"

#define CS_INFO_MAX 255		/* longest info key and value, NUL excluded */
#define EXT_VERSION 1

enum { DB_EXT, DB_SIZE, DB_INFO, DB_COUNT };
static const char *const db_name[DB_COUNT] = { "ext", "size", "info" };

struct tfs_cstore {
	MDB_env *env;
	MDB_dbi dbi[DB_COUNT];
	size_t mapsize;
	pthread_mutex_t wlock;		/* invariant 1 */
	pthread_rwlock_t maplock;	/* invariant 4 */
};

/* The value of an "ext" record; no implicit padding. */
struct ext_val {
	uint8_t version;		/* EXT_VERSION */
	uint8_t pad0;
	uint16_t heat;
	uint32_t slot;
	uint16_t flags;
	uint16_t pad1;
	uint32_t pad2;
	uint64_t valid[TFS_CEXT_WORDS];
	uint64_t dirty[TFS_CEXT_WORDS];
};
_Static_assert(sizeof(struct ext_val) == 16 + 16 * TFS_CEXT_WORDS, "ext_val is packed");

static void ext_key(uint64_t fid, uint64_t idx, unsigned char key[16])
{
	tfs_be64(fid, key);
	tfs_be64(idx, key + 8);
}

static int ext_decode(const MDB_val *k, const MDB_val *v, struct tfs_cext_rec *rec)
{
	struct ext_val ev;

	if (k->mv_size != 16 || v->mv_size != sizeof(ev))
		return -EUCLEAN;
	memcpy(&ev, v->mv_data, sizeof(ev));	/* values are only 2-aligned */
	if (ev.version != EXT_VERSION)
		return -EUCLEAN;
	rec->fid = tfs_from_be64(k->mv_data);
	rec->idx = tfs_from_be64((const unsigned char *)k->mv_data + 8);
	rec->slot = ev.slot;
	rec->heat = ev.heat;
	rec->flags = ev.flags;
	memcpy(rec->valid, ev.valid, sizeof(rec->valid));
	memcpy(rec->dirty, ev.dirty, sizeof(rec->dirty));
	return 0;
}

/* ------------------------------------------------------------------ */
/* Environment                                                         */
/* ------------------------------------------------------------------ */

/* -EUCLEAN if data.mdb (size before the open, 0: none) is shorter than
 * the pages its meta page says are in use: a truncated store. */
static int check_length(struct tfs_cstore *cs, off_t before)
{
	MDB_envinfo info;
	MDB_stat st;
	int rc = mdb_env_info(cs->env, &info);

	if (rc == 0)
		rc = mdb_env_stat(cs->env, &st);
	if (rc)
		return tfs_mdb_errno(rc);
	if (before && (uint64_t)before < ((uint64_t)info.me_last_pgno + 1) * st.ms_psize)
		return -EUCLEAN;
	return 0;
}

int tfs_cstore_open(const char *dir, struct tfs_cstore **out)
{
	struct tfs_cstore *cs;
	char path[4096];
	struct stat sb;
	off_t before = 0;
	MDB_txn *txn = NULL;
	int rc;

	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	if ((size_t)snprintf(path, sizeof(path), "%s/data.mdb", dir) >= sizeof(path))
		return -ENAMETOOLONG;
	if (stat(path, &sb) == 0) {
		if (!S_ISREG(sb.st_mode)) {
			tfs_err("cache store %s: data.mdb is not a file", dir);
			return -EUCLEAN;
		}
		before = sb.st_size;
	}
	cs = calloc(1, sizeof(*cs));
	if (!cs)
		return -ENOMEM;
	cs->mapsize = 64u << 20;
	rc = mdb_env_create(&cs->env);
	if (rc) {
		free(cs);
		return tfs_mdb_errno(rc);
	}
	mdb_env_set_maxdbs(cs->env, DB_COUNT + 1);
	mdb_env_set_mapsize(cs->env, cs->mapsize);
	rc = mdb_env_open(cs->env, dir, MDB_NOSYNC | MDB_WRITEMAP | MDB_NOTLS, 0600);
	if (rc == 0) {
		MDB_envinfo info;

		/* a store grown earlier opens with its own, larger map */
		if (mdb_env_info(cs->env, &info) == 0 && info.me_mapsize > cs->mapsize)
			cs->mapsize = info.me_mapsize;
		rc = check_length(cs, before);
	}
	if (rc == 0)
		rc = mdb_txn_begin(cs->env, NULL, 0, &txn);
	for (int d = 0; rc == 0 && d < DB_COUNT; d++)
		rc = mdb_dbi_open(txn, db_name[d], MDB_CREATE, &cs->dbi[d]);
	if (rc == 0)
		rc = mdb_txn_commit(txn);
	else if (txn)
		mdb_txn_abort(txn);
	if (rc) {
		tfs_err("cache store %s: %s", dir,
			rc < 0 && rc > -4096 ? strerror(-rc) : mdb_strerror(rc));
		mdb_env_close(cs->env);
		free(cs);
		/* MDB_INCOMPATIBLE: a database of another kind under our name */
		return rc == MDB_INCOMPATIBLE ? -EUCLEAN : tfs_mdb_errno(rc);
	}
	pthread_mutex_init(&cs->wlock, NULL);
	pthread_rwlock_init(&cs->maplock, NULL);
	*out = cs;
	return 0;
}

void tfs_cstore_close(struct tfs_cstore *cs)
{
	int rc;

	if (!cs)
		return;
	rc = mdb_env_sync(cs->env, 1);
	if (rc)
		tfs_err("cache store: sync at close failed: %s", strerror(-tfs_mdb_errno(rc)));
	mdb_env_close(cs->env);
	pthread_rwlock_destroy(&cs->maplock);
	pthread_mutex_destroy(&cs->wlock);
	free(cs);
}

int tfs_cstore_sync(struct tfs_cstore *cs)
{
	int rc;

	pthread_rwlock_rdlock(&cs->maplock);	/* msync of the map */
	rc = mdb_env_sync(cs->env, 1);
	pthread_rwlock_unlock(&cs->maplock);
	return tfs_mdb_errno(rc);
}

/* Under wlock (invariant 1). */
static int write_txn(struct tfs_cstore *cs, int (*fn)(MDB_txn *txn, void *arg), void *arg)
{
	int rc;

	pthread_mutex_lock(&cs->wlock);
	rc = tfs_mdb_write(cs->env, &cs->mapsize, &cs->maplock, fn, arg, "cache store");
	pthread_mutex_unlock(&cs->wlock);
	return tfs_mdb_errno(rc);
}

/* A read transaction under maplock (invariant 4); read_end ends both. */
static int read_begin(struct tfs_cstore *cs, MDB_txn **txn)
{
	int rc;

	pthread_rwlock_rdlock(&cs->maplock);
	rc = mdb_txn_begin(cs->env, NULL, MDB_RDONLY, txn);
	if (rc)
		pthread_rwlock_unlock(&cs->maplock);
	return rc;
}

static void read_end(struct tfs_cstore *cs, MDB_txn *txn)
{
	mdb_txn_abort(txn);
	pthread_rwlock_unlock(&cs->maplock);
}

/* ------------------------------------------------------------------ */
/* Info strings                                                        */
/* ------------------------------------------------------------------ */

static int info_key(const char *key, MDB_val *k)
{
	size_t len = key ? strlen(key) : 0;

	if (len == 0 || len > CS_INFO_MAX)
		return -EINVAL;
	k->mv_size = len;
	k->mv_data = (void *)key;
	return 0;
}

int tfs_cstore_info_get(struct tfs_cstore *cs, const char *key, char *buf, size_t len)
{
	MDB_val k, v;
	MDB_txn *txn;
	int rc = info_key(key, &k);

	if (rc)
		return rc;
	rc = read_begin(cs, &txn);
	if (rc)
		return tfs_mdb_errno(rc);
	rc = tfs_mdb_errno(mdb_get(txn, cs->dbi[DB_INFO], &k, &v));
	if (rc == 0 && (v.mv_size == 0 || v.mv_size > CS_INFO_MAX + 1 ||
			((const char *)v.mv_data)[v.mv_size - 1] != '\0'))
		rc = -EUCLEAN;
	else if (rc == 0 && v.mv_size > len)
		rc = -ERANGE;
	else if (rc == 0)
		memcpy(buf, v.mv_data, v.mv_size);
	read_end(cs, txn);
	return rc;
}

struct info_put {
	MDB_dbi dbi;
	MDB_val k, v;
};

static int info_put_fn(MDB_txn *txn, void *arg)
{
	struct info_put *ip = arg;

	return mdb_put(txn, ip->dbi, &ip->k, &ip->v, 0);
}

int tfs_cstore_info_set(struct tfs_cstore *cs, const char *key, const char *val)
{
	struct info_put ip = { .dbi = cs->dbi[DB_INFO] };
	int rc = info_key(key, &ip.k);

	if (rc)
		return rc;
	if (!val || strlen(val) > CS_INFO_MAX)
		return -EINVAL;
	ip.v.mv_size = strlen(val) + 1;
	ip.v.mv_data = (void *)val;
	return write_txn(cs, info_put_fn, &ip);
}

/* ------------------------------------------------------------------ */
/* Extents and sizes                                                   */
/* ------------------------------------------------------------------ */

struct apply_arg {
	struct tfs_cstore *cs;
	const struct tfs_cstore_op *ops;
	unsigned n;
};

static int apply_one(struct tfs_cstore *cs, MDB_txn *txn, const struct tfs_cstore_op *op)
{
	unsigned char key[16];
	MDB_val k = { 16, key }, v;
	struct ext_val ev;
	uint64_t size;
	int rc;

	switch (op->op) {
	case TFS_CS_PUT_EXT:
		if (!op->rec)
			return -EINVAL;
		memset(&ev, 0, sizeof(ev));
		ev.version = EXT_VERSION;
		ev.heat = op->rec->heat;
		ev.slot = op->rec->slot;
		ev.flags = op->rec->flags;
		memcpy(ev.valid, op->rec->valid, sizeof(ev.valid));
		memcpy(ev.dirty, op->rec->dirty, sizeof(ev.dirty));
		ext_key(op->rec->fid, op->rec->idx, key);
		v.mv_size = sizeof(ev);
		v.mv_data = &ev;
		return mdb_put(txn, cs->dbi[DB_EXT], &k, &v, 0);
	case TFS_CS_DEL_EXT:
		ext_key(op->fid, op->idx, key);
		rc = mdb_del(txn, cs->dbi[DB_EXT], &k, NULL);
		return rc == MDB_NOTFOUND ? 0 : rc;
	case TFS_CS_PUT_SIZE:
		tfs_be64(op->fid, key);
		k.mv_size = 8;
		size = op->size;
		v.mv_size = sizeof(size);
		v.mv_data = &size;
		return mdb_put(txn, cs->dbi[DB_SIZE], &k, &v, 0);
	case TFS_CS_DEL_SIZE:
		tfs_be64(op->fid, key);
		k.mv_size = 8;
		rc = mdb_del(txn, cs->dbi[DB_SIZE], &k, NULL);
		return rc == MDB_NOTFOUND ? 0 : rc;
	}
	return -EINVAL;
}

static int apply_fn(MDB_txn *txn, void *arg)
{
	struct apply_arg *aa = arg;
	int rc = 0;

	for (unsigned i = 0; i < aa->n && rc == 0; i++)
		rc = apply_one(aa->cs, txn, &aa->ops[i]);
	return rc;
}

int tfs_cstore_apply(struct tfs_cstore *cs, const struct tfs_cstore_op *ops, unsigned n)
{
	struct apply_arg aa = { cs, ops, n };

	if (n == 0)
		return 0;
	return write_txn(cs, apply_fn, &aa);
}

typedef int (*visit_fn)(void *arg, const MDB_val *k, const MDB_val *v);

/* Walk db d in key order in one read transaction: 0, visit's first
 * non-zero return, or -errno. */
static int db_foreach(struct tfs_cstore *cs, int d, visit_fn visit, void *arg)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, ret = 0, op = MDB_FIRST;

	rc = read_begin(cs, &txn);
	if (rc)
		return tfs_mdb_errno(rc);
	rc = mdb_cursor_open(txn, cs->dbi[d], &cur);
	if (rc == 0) {
		while ((rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
			op = MDB_NEXT;
			ret = visit(arg, &k, &v);
			if (ret)
				break;
		}
		mdb_cursor_close(cur);
	}
	read_end(cs, txn);
	if (ret)
		return ret;
	return rc == MDB_NOTFOUND ? 0 : tfs_mdb_errno(rc);
}

struct ext_visit {
	int (*cb)(void *arg, const struct tfs_cext_rec *rec);
	void *arg;
};

static int ext_visit(void *arg, const MDB_val *k, const MDB_val *v)
{
	struct ext_visit *ev = arg;
	struct tfs_cext_rec rec;
	int rc = ext_decode(k, v, &rec);

	if (rc) {
		tfs_err("cache store: bad extent record (key %zu, value %zu bytes)",
			k->mv_size, v->mv_size);
		return rc;
	}
	return ev->cb(ev->arg, &rec);
}

int tfs_cstore_ext_foreach(struct tfs_cstore *cs,
			   int (*cb)(void *arg, const struct tfs_cext_rec *rec), void *arg)
{
	struct ext_visit ev = { cb, arg };

	return db_foreach(cs, DB_EXT, ext_visit, &ev);
}

struct size_visit {
	int (*cb)(void *arg, uint64_t fid, uint64_t size);
	void *arg;
};

static int size_visit(void *arg, const MDB_val *k, const MDB_val *v)
{
	struct size_visit *sv = arg;
	uint64_t size;

	if (k->mv_size != 8 || v->mv_size != sizeof(size)) {
		tfs_err("cache store: bad size record (key %zu, value %zu bytes)",
			k->mv_size, v->mv_size);
		return -EUCLEAN;
	}
	memcpy(&size, v->mv_data, sizeof(size));
	return sv->cb(sv->arg, tfs_from_be64(k->mv_data), size);
}

int tfs_cstore_size_foreach(struct tfs_cstore *cs,
			    int (*cb)(void *arg, uint64_t fid, uint64_t size), void *arg)
{
	struct size_visit sv = { cb, arg };

	return db_foreach(cs, DB_SIZE, size_visit, &sv);
}

static int clear_fn(MDB_txn *txn, void *arg)
{
	struct tfs_cstore *cs = arg;
	int rc = mdb_drop(txn, cs->dbi[DB_EXT], 0);

	return rc ? rc : mdb_drop(txn, cs->dbi[DB_SIZE], 0);
}

int tfs_cstore_clear(struct tfs_cstore *cs)
{
	return write_txn(cs, clear_fn, cs);
}
