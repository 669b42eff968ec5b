/* meta.c - LMDB owner.
 *
 * Owns: one LMDB environment per store, its named databases and the mapping
 * of MDB_* codes to -errno.
 *
 * Schema (docs/DESIGN.md has the full story):
 *   "intent"  key: u64 sequence, big-endian (so cursor order is age order)
 *             value: an intent record, opaque here (ns.c encodes it)
 *   "counter" key: name string          value: u64 next free value
 *
 * Invariants:
 *  1. Writers are serialised by wlock; the environment is opened with
 *     MDB_NOSYNC | MDB_WRITEMAP, so a commit is stores into a shared file
 *     mapping: no system call, no fsync, yet it survives the daemon's death
 *     (the pages are in the kernel's page cache).  tfs_meta_sync() is the
 *     durability point for power loss.
 *  2. A full map is grown (doubled) under wlock and the transaction retried;
 *     callers never see MDB_MAP_FULL.
 */
#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tierfs/log.h"
#include "tierfs/meta.h"

struct tfs_meta {
	MDB_env *env;
	MDB_dbi intent;
	MDB_dbi counter;
	size_t mapsize;
	uint64_t next_seq;
	pthread_mutex_t wlock;
};

static int mdb_errno(int rc)
{
	switch (rc) {
	case MDB_SUCCESS: return 0;
	case MDB_NOTFOUND: return -ENOENT;
	case MDB_MAP_FULL: return -ENOSPC;
	case MDB_READERS_FULL: return -EAGAIN;
	case MDB_INVALID: case MDB_CORRUPTED: case MDB_PAGE_NOTFOUND: return -EUCLEAN;
	case MDB_VERSION_MISMATCH: return -EPROTO;
	default: return rc > 0 ? -rc : -EIO;
	}
}

static void be64(uint64_t v, unsigned char out[8])
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		out[i] = (unsigned char)v;
}

static uint64_t from_be64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

int tfs_meta_open(const char *dir, struct tfs_meta **out)
{
	struct tfs_meta *mt = calloc(1, sizeof(*mt));
	MDB_txn *txn = NULL;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc;

	if (!mt)
		return -ENOMEM;
	pthread_mutex_init(&mt->wlock, NULL);
	mt->mapsize = 64u << 20;
	if (mkdir(dir, 0700) && errno != EEXIST) {
		rc = -errno;
		goto out_free;
	}
	rc = mdb_env_create(&mt->env);
	if (rc)
		goto out_free_mdb;
	mdb_env_set_maxdbs(mt->env, 8);
	mdb_env_set_mapsize(mt->env, mt->mapsize);
	rc = mdb_env_open(mt->env, dir, MDB_NOSYNC | MDB_WRITEMAP | MDB_NOTLS, 0600);
	if (rc)
		goto out_env;
	rc = mdb_txn_begin(mt->env, NULL, 0, &txn);
	if (rc)
		goto out_env;
	if ((rc = mdb_dbi_open(txn, "intent", MDB_CREATE, &mt->intent)) ||
	    (rc = mdb_dbi_open(txn, "counter", MDB_CREATE, &mt->counter)))
		goto out_txn;
	/* continue the intent sequence after the newest record left behind */
	rc = mdb_cursor_open(txn, mt->intent, &cur);
	if (rc)
		goto out_txn;
	mt->next_seq = 1;	/* 0 means "no record" to callers */
	if (mdb_cursor_get(cur, &k, &v, MDB_LAST) == 0 && k.mv_size == 8)
		mt->next_seq = from_be64(k.mv_data) + 1;
	mdb_cursor_close(cur);
	rc = mdb_txn_commit(txn);
	if (rc)
		goto out_env;
	*out = mt;
	return 0;

out_txn:
	mdb_txn_abort(txn);
out_env:
	mdb_env_close(mt->env);
out_free_mdb:
	tfs_err("LMDB store %s: %s", dir, mdb_strerror(rc));
	rc = mdb_errno(rc);
out_free:
	free(mt);
	return rc;
}

void tfs_meta_close(struct tfs_meta *mt)
{
	if (!mt)
		return;
	mdb_env_sync(mt->env, 1);
	mdb_env_close(mt->env);
	pthread_mutex_destroy(&mt->wlock);
	free(mt);
}

int tfs_meta_sync(struct tfs_meta *mt)
{
	return mdb_errno(mdb_env_sync(mt->env, 1));
}

/* Run fn in a write transaction, growing the map when it is full. */
typedef int (*txn_fn)(struct tfs_meta *mt, MDB_txn *txn, void *arg);

static int write_txn(struct tfs_meta *mt, txn_fn fn, void *arg)
{
	MDB_txn *txn;
	int rc;

	pthread_mutex_lock(&mt->wlock);
	for (;;) {
		rc = mdb_txn_begin(mt->env, NULL, 0, &txn);
		if (rc)
			break;
		rc = fn(mt, txn, arg);
		if (rc) {
			mdb_txn_abort(txn);
		} else {
			rc = mdb_txn_commit(txn);
		}
		if (rc != MDB_MAP_FULL)
			break;
		mt->mapsize *= 2;
		tfs_info("LMDB map full: growing to %zu MiB", mt->mapsize >> 20);
		rc = mdb_env_set_mapsize(mt->env, mt->mapsize);
		if (rc)
			break;
	}
	pthread_mutex_unlock(&mt->wlock);
	return mdb_errno(rc);
}

struct intent_put {
	const void *rec;
	size_t len;
	uint64_t seq;
};

static int intent_put_fn(struct tfs_meta *mt, MDB_txn *txn, void *arg)
{
	struct intent_put *ip = arg;
	unsigned char key[8];
	MDB_val k = { 8, key }, v = { ip->len, (void *)ip->rec };

	ip->seq = mt->next_seq++;
	be64(ip->seq, key);
	return mdb_put(txn, mt->intent, &k, &v, MDB_APPEND);
}

int tfs_meta_intent_add(struct tfs_meta *mt, const void *rec, size_t len, uint64_t *seq)
{
	struct intent_put ip = { rec, len, 0 };
	int rc = write_txn(mt, intent_put_fn, &ip);

	*seq = ip.seq;
	return rc;
}

static int intent_del_fn(struct tfs_meta *mt, MDB_txn *txn, void *arg)
{
	unsigned char key[8];
	MDB_val k = { 8, key };
	int rc;

	be64(*(uint64_t *)arg, key);
	rc = mdb_del(txn, mt->intent, &k, NULL);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int tfs_meta_intent_del(struct tfs_meta *mt, uint64_t seq)
{
	return write_txn(mt, intent_del_fn, &seq);
}

int tfs_meta_intent_foreach(struct tfs_meta *mt, tfs_meta_intent_cb cb, void *arg)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, op = MDB_FIRST;

	rc = mdb_txn_begin(mt->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return mdb_errno(rc);
	rc = mdb_cursor_open(txn, mt->intent, &cur);
	if (rc) {
		mdb_txn_abort(txn);
		return mdb_errno(rc);
	}
	while ((rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
		op = MDB_NEXT;
		if (k.mv_size != 8)
			continue;
		rc = cb(arg, from_be64(k.mv_data), v.mv_data, v.mv_size);
		if (rc)
			break;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	return rc == MDB_NOTFOUND ? 0 : (rc > 0 ? mdb_errno(rc) : rc);
}

int tfs_meta_intent_count(struct tfs_meta *mt, uint64_t *count)
{
	MDB_txn *txn;
	MDB_stat st;
	int rc = mdb_txn_begin(mt->env, NULL, MDB_RDONLY, &txn);

	if (rc)
		return mdb_errno(rc);
	rc = mdb_stat(txn, mt->intent, &st);
	mdb_txn_abort(txn);
	*count = rc ? 0 : st.ms_entries;
	return mdb_errno(rc);
}

struct counter_arg {
	const char *name;
	uint64_t count;
	uint64_t first;
};

static int counter_fn(struct tfs_meta *mt, MDB_txn *txn, void *arg)
{
	struct counter_arg *ca = arg;
	MDB_val k = { strlen(ca->name), (void *)ca->name }, v;
	unsigned char buf[8];
	uint64_t cur = 1;
	int rc = mdb_get(txn, mt->counter, &k, &v);

	if (rc == 0 && v.mv_size == 8)
		cur = from_be64(v.mv_data);
	else if (rc && rc != MDB_NOTFOUND)
		return rc;
	ca->first = cur;
	be64(cur + ca->count, buf);
	v.mv_size = 8;
	v.mv_data = buf;
	return mdb_put(txn, mt->counter, &k, &v, 0);
}

int tfs_meta_counter_reserve(struct tfs_meta *mt, const char *name, uint64_t count,
			     uint64_t *first)
{
	struct counter_arg ca = { name, count, 0 };
	int rc = write_txn(mt, counter_fn, &ca);

	if (rc == 0)
		rc = tfs_meta_sync(mt);	/* a reserved range must never come back */
	*first = ca.first;
	return rc;
}
