/* meta.c - LMDB owner.
 *
 * Owns: the array's journal, kept as one LMDB environment per member that
 * is not failed (MEMBER/.tierfs/journal), its named databases, and what
 * every LMDB client of meta/ shares (meta_i.h): the mapping of MDB_* codes
 * to -errno and the write transaction that grows a full map.
 *
 * Schema (docs/DESIGN.md has the full story):
 *   "intent"  key: u64 sequence, big-endian (so cursor order is age order)
 *             value: an intent record, opaque here (ns.c encodes it)
 *   "counter" key: name string          value: u64 next free value
 *   "mark"    key: u64 fid % 256, u64 region (big-endian)   value: empty
 *             parity regions that may have stripes in flight (stripe.c)
 *   "rebuilt" key: u64 fid, u64 0        value: empty
 *             files whose data a running rebuild has finished (rebuild.c)
 *   "cache"   key: the bound SSD tier's uuid as two u64      value: empty
 *   "cdirty"  key: u64 fid, u64 0        value: empty
 *             files with writes only in the SSD tier (cache.c)
 *
 * Invariants:
 *  1. Writers are serialised by wlock (write_txn) and every write
 *     transaction is applied to every copy in turn, so the copies hold the same records
 *     (a crash between two copies leaves one a transaction behind; opening
 *     merges them: union of records, maximum of counters).
 *  2. Environments are opened with MDB_NOSYNC | MDB_WRITEMAP, so a commit
 *     is stores into a shared file mapping: no system call, no fsync, yet
 *     it survives the daemon's death (the pages are in the kernel's page
 *     cache).  tfs_meta_sync() is the durability point for power loss.
 *  3. A full map is grown (doubled) under wlock and the transaction retried;
 *     callers never see MDB_MAP_FULL.
 *  4. Reads use the first live copy; readers never block the writer (MVCC).
 */
#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "meta_i.h"

enum { DB_INTENT, DB_COUNTER, DB_MARK, DB_REBUILT, DB_CACHE, DB_CDIRTY, DB_COUNT };
static const char *const db_name[DB_COUNT] = { "intent", "counter", "mark", "rebuilt", "cache",
					       "cdirty" };

struct store {
	MDB_env *env;
	MDB_dbi dbi[DB_COUNT];
	size_t mapsize;
	uint32_t tag;			/* the member it lives on */
};

struct tfs_meta {
	pthread_mutex_t wlock;
	uint64_t next_seq;
	unsigned n;
	struct store st[TFS_META_MAX];
};

int tfs_mdb_errno(int rc)
{
	switch (rc) {
	case MDB_SUCCESS: return 0;
	case MDB_NOTFOUND: return -ENOENT;
	case MDB_MAP_FULL: return -ENOSPC;
	case MDB_READERS_FULL: return -EAGAIN;
	case MDB_INVALID: case MDB_CORRUPTED: case MDB_PAGE_NOTFOUND: return -EUCLEAN;
	case MDB_VERSION_MISMATCH: return -EPROTO;
	default:
		if (rc < 0 && rc > -4096)
			return rc;	/* already -errno (LMDB's codes are below) */
		return rc > 0 ? -rc : -EIO;
	}
}

int tfs_mdb_write(MDB_env *env, size_t *mapsize, pthread_rwlock_t *maplock,
		  int (*fn)(MDB_txn *txn, void *arg), void *arg, const char *what)
{
	MDB_txn *txn;
	int rc;

	for (;;) {
		rc = mdb_txn_begin(env, NULL, 0, &txn);
		if (rc)
			return rc;
		rc = fn(txn, arg);
		if (rc)
			mdb_txn_abort(txn);
		else
			rc = mdb_txn_commit(txn);
		if (rc != MDB_MAP_FULL)
			return rc;
		*mapsize *= 2;
		tfs_info("%s map full: growing to %zu MiB", what, *mapsize >> 20);
		if (maplock)
			pthread_rwlock_wrlock(maplock);
		rc = mdb_env_set_mapsize(env, *mapsize);
		if (maplock)
			pthread_rwlock_unlock(maplock);
		if (rc)
			return rc;
	}
}

/* ------------------------------------------------------------------ */
/* Copies                                                              */
/* ------------------------------------------------------------------ */

static int store_open(struct store *s, const char *dir, uint32_t tag)
{
	MDB_txn *txn = NULL;
	int rc;

	s->mapsize = 64u << 20;
	s->tag = tag;
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	rc = mdb_env_create(&s->env);
	if (rc)
		goto out;
	mdb_env_set_maxdbs(s->env, 8);
	mdb_env_set_mapsize(s->env, s->mapsize);
	rc = mdb_env_open(s->env, dir, MDB_NOMETASYNC | MDB_NOTLS, 0600);
	if (rc == 0)
		rc = mdb_txn_begin(s->env, NULL, 0, &txn);
	for (int d = 0; rc == 0 && d < DB_COUNT; d++)
		rc = mdb_dbi_open(txn, db_name[d], MDB_CREATE, &s->dbi[d]);
	if (rc == 0)
		rc = mdb_txn_commit(txn);
	else if (txn)
		mdb_txn_abort(txn);
	if (rc == 0)
		return 0;
	mdb_env_close(s->env);
out:
	s->env = NULL;
	tfs_err("journal %s: %s", dir, mdb_strerror(rc));
	return tfs_mdb_errno(rc);
}

static void store_close(struct store *s)
{
	mdb_env_sync(s->env, 1);
	mdb_env_close(s->env);
	s->env = NULL;
}

/* Copy every record of db d in src that dst lacks into dst; counters take
 * the larger value. */
static int merge_db(struct store *dst, struct store *src, int d)
{
	MDB_txn *rt, *wt;
	MDB_cursor *cur;
	MDB_val k, v, old;
	int rc, op = MDB_FIRST;

	rc = mdb_txn_begin(src->env, NULL, MDB_RDONLY, &rt);
	if (rc)
		return rc;
	rc = mdb_txn_begin(dst->env, NULL, 0, &wt);
	if (rc) {
		mdb_txn_abort(rt);
		return rc;
	}
	rc = mdb_cursor_open(rt, src->dbi[d], &cur);
	while (rc == 0 && (rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
		op = MDB_NEXT;
		if (d == DB_COUNTER && mdb_get(wt, dst->dbi[d], &k, &old) == 0 &&
		    old.mv_size == 8 && v.mv_size == 8 &&
		    tfs_from_be64(old.mv_data) >= tfs_from_be64(v.mv_data))
			continue;
		rc = mdb_put(wt, dst->dbi[d], &k, &v, d == DB_COUNTER ? 0 : MDB_NOOVERWRITE);
		if (rc == MDB_KEYEXIST)
			rc = 0;
	}
	if (rc == MDB_NOTFOUND)
		rc = 0;
	mdb_txn_abort(rt);
	if (rc == 0)
		rc = mdb_txn_commit(wt);
	else
		mdb_txn_abort(wt);
	return rc;
}

/* Make every copy hold the union of all of them. */
static int merge_all(struct tfs_meta *mt)
{
	int rc = 0;

	for (unsigned a = 0; a < mt->n && rc == 0; a++)
		for (unsigned b = 0; b < mt->n && rc == 0; b++)
			for (int d = 0; a != b && d < DB_COUNT && rc == 0; d++)
				rc = merge_db(&mt->st[a], &mt->st[b], d);
	return tfs_mdb_errno(rc);
}

static int next_seq_of(struct store *s, uint64_t *next)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);

	if (rc)
		return tfs_mdb_errno(rc);
	*next = 1;	/* 0 means "no record" to callers */
	rc = mdb_cursor_open(txn, s->dbi[DB_INTENT], &cur);
	if (rc == 0) {
		if (mdb_cursor_get(cur, &k, &v, MDB_LAST) == 0 && k.mv_size == 8)
			*next = tfs_from_be64(k.mv_data) + 1;
		mdb_cursor_close(cur);
	}
	mdb_txn_abort(txn);
	return tfs_mdb_errno(rc);
}

int tfs_meta_open(const char *const *dirs, const uint32_t *tags, unsigned n,
		  struct tfs_meta **out)
{
	struct tfs_meta *mt = calloc(1, sizeof(*mt));
	int rc = 0;

	if (!mt)
		return -ENOMEM;
	if (n == 0 || n > TFS_META_MAX) {
		free(mt);
		return -EINVAL;
	}
	pthread_mutex_init(&mt->wlock, NULL);
	for (unsigned i = 0; i < n && rc == 0; i++) {
		rc = store_open(&mt->st[i], dirs[i], tags[i]);
		if (rc == 0)
			mt->n++;
	}
	if (rc == 0)
		rc = merge_all(mt);
	if (rc == 0)
		rc = next_seq_of(&mt->st[0], &mt->next_seq);
	if (rc) {
		tfs_meta_close(mt);
		return rc;
	}
	*out = mt;
	return 0;
}

void tfs_meta_close(struct tfs_meta *mt)
{
	if (!mt)
		return;
	for (unsigned i = 0; i < mt->n; i++)
		store_close(&mt->st[i]);
	pthread_mutex_destroy(&mt->wlock);
	free(mt);
}

void tfs_meta_drop(struct tfs_meta *mt, uint32_t tag)
{
	pthread_mutex_lock(&mt->wlock);
	for (unsigned i = 0; i < mt->n; i++) {
		if (mt->st[i].tag != tag || mt->n == 1)
			continue;
		mdb_env_close(mt->st[i].env);
		mt->st[i] = mt->st[--mt->n];
		break;
	}
	pthread_mutex_unlock(&mt->wlock);
}

int tfs_meta_add(struct tfs_meta *mt, const char *dir, uint32_t tag)
{
	struct store s;
	int rc;

	pthread_mutex_lock(&mt->wlock);
	rc = mt->n == TFS_META_MAX ? -ENOSPC : store_open(&s, dir, tag);
	for (int d = 0; rc == 0 && d < DB_COUNT; d++) {
		rc = tfs_mdb_errno(merge_db(&s, &mt->st[0], d));
		if (rc)
			store_close(&s);
	}
	if (rc == 0)
		mt->st[mt->n++] = s;
	pthread_mutex_unlock(&mt->wlock);
	return rc;
}

static int sync_locked(struct tfs_meta *mt)
{
	int rc = 0;

	for (unsigned i = 0; i < mt->n; i++) {
		int r = tfs_mdb_errno(mdb_env_sync(mt->st[i].env, 1));

		if (r && !rc)
			rc = r;
	}
	return rc;
}

int tfs_meta_sync(struct tfs_meta *mt)
{
	int rc;

	pthread_mutex_lock(&mt->wlock);	/* the copy list must not change */
	rc = sync_locked(mt);
	pthread_mutex_unlock(&mt->wlock);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Transactions                                                        */
/* ------------------------------------------------------------------ */

/* Apply fn in one write transaction to every copy, growing a full map. */
typedef int (*txn_fn)(struct store *s, MDB_txn *txn, void *arg);

struct store_call {
	struct store *s;
	txn_fn fn;
	void *arg;
};

static int store_call(MDB_txn *txn, void *arg)
{
	struct store_call *c = arg;

	return c->fn(c->s, txn, c->arg);
}

static int store_txn(struct store *s, txn_fn fn, void *arg)
{
	struct store_call c = { s, fn, arg };

	/* readers hold wlock too (db_foreach): no map lock needed */
	return tfs_mdb_write(s->env, &s->mapsize, NULL, store_call, &c, "journal");
}

/* Under wlock (invariant 1); sync: make it durable before returning. */
static int write_txn(struct tfs_meta *mt, txn_fn fn, void *arg, bool sync)
{
	int rc = 0;

	pthread_mutex_lock(&mt->wlock);
	for (unsigned i = 0; i < mt->n && rc == 0; i++)
		rc = store_txn(&mt->st[i], fn, arg);
	rc = tfs_mdb_errno(rc);
	if (rc == 0 && sync)
		rc = sync_locked(mt);
	pthread_mutex_unlock(&mt->wlock);
	return rc;
}

/* Read-only transaction on the first copy. */
static int read_txn(struct tfs_meta *mt, MDB_txn **txn)
{
	return mdb_txn_begin(mt->st[0].env, NULL, MDB_RDONLY, txn);
}

/* ------------------------------------------------------------------ */
/* Intent log                                                          */
/* ------------------------------------------------------------------ */

struct intent_put {
	const void *rec;
	size_t len;
	uint64_t seq;
};

static int intent_put_fn(struct store *s, MDB_txn *txn, void *arg)
{
	struct intent_put *ip = arg;
	unsigned char key[8];
	MDB_val k = { 8, key }, v = { ip->len, (void *)ip->rec };

	tfs_be64(ip->seq, key);
	return mdb_put(txn, s->dbi[DB_INTENT], &k, &v, 0);
}

int tfs_meta_intent_add(struct tfs_meta *mt, const void *rec, size_t len, uint64_t *seq)
{
	struct intent_put ip = { rec, len, 0 };
	int rc;

	ip.seq = __atomic_fetch_add(&mt->next_seq, 1, __ATOMIC_RELAXED);
	rc = write_txn(mt, intent_put_fn, &ip, false);
	*seq = ip.seq;
	return rc;
}

static int intent_del_fn(struct store *s, MDB_txn *txn, void *arg)
{
	unsigned char key[8];
	MDB_val k = { 8, key };
	int rc;

	tfs_be64(*(uint64_t *)arg, key);
	rc = mdb_del(txn, s->dbi[DB_INTENT], &k, NULL);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int tfs_meta_intent_del(struct tfs_meta *mt, uint64_t seq)
{
	return write_txn(mt, intent_del_fn, &seq, false);
}

typedef int (*visit_fn)(void *arg, const MDB_val *k, const MDB_val *v);

static int db_foreach(struct tfs_meta *mt, int d, visit_fn fn, void *arg)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, op = MDB_FIRST;

	pthread_mutex_lock(&mt->wlock);	/* the copy list must not change */
	rc = read_txn(mt, &txn);
	if (rc == 0 && (rc = mdb_cursor_open(txn, mt->st[0].dbi[d], &cur)) != 0)
		mdb_txn_abort(txn);
	if (rc) {
		pthread_mutex_unlock(&mt->wlock);
		return tfs_mdb_errno(rc);
	}
	while ((rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
		op = MDB_NEXT;
		rc = fn(arg, &k, &v);
		if (rc)
			break;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	pthread_mutex_unlock(&mt->wlock);
	return rc == MDB_NOTFOUND ? 0 : (rc > 0 ? tfs_mdb_errno(rc) : rc);
}

struct intent_visit {
	tfs_meta_intent_cb cb;
	void *arg;
};

static int intent_visit(void *arg, const MDB_val *k, const MDB_val *v)
{
	struct intent_visit *iv = arg;

	if (k->mv_size != 8)
		return 0;
	return iv->cb(iv->arg, tfs_from_be64(k->mv_data), v->mv_data, v->mv_size);
}

int tfs_meta_intent_foreach(struct tfs_meta *mt, tfs_meta_intent_cb cb, void *arg)
{
	struct intent_visit iv = { cb, arg };

	return db_foreach(mt, DB_INTENT, intent_visit, &iv);
}

static int db_count(struct tfs_meta *mt, int d, uint64_t *count)
{
	MDB_txn *txn;
	MDB_stat st;
	int rc;

	pthread_mutex_lock(&mt->wlock);
	rc = read_txn(mt, &txn);
	if (rc == 0) {
		rc = mdb_stat(txn, mt->st[0].dbi[d], &st);
		mdb_txn_abort(txn);
	}
	pthread_mutex_unlock(&mt->wlock);
	*count = rc ? 0 : st.ms_entries;
	return tfs_mdb_errno(rc);
}

int tfs_meta_intent_count(struct tfs_meta *mt, uint64_t *count)
{
	return db_count(mt, DB_INTENT, count);
}

/* ------------------------------------------------------------------ */
/* Counters                                                            */
/* ------------------------------------------------------------------ */

struct counter_arg {
	const char *name;
	uint64_t count;
	uint64_t first;
};

static int counter_fn(struct store *s, MDB_txn *txn, void *arg)
{
	struct counter_arg *ca = arg;
	MDB_val k = { strlen(ca->name), (void *)ca->name }, v;
	unsigned char buf[8];
	int rc;

	rc = mdb_get(txn, s->dbi[DB_COUNTER], &k, &v);
	if (rc && rc != MDB_NOTFOUND)
		return rc;
	/* every copy hands out the same range: the first copy decides */
	if (ca->first == 0)
		ca->first = rc == 0 && v.mv_size == 8 ? tfs_from_be64(v.mv_data) : 1;
	tfs_be64(ca->first + ca->count, buf);
	v.mv_size = 8;
	v.mv_data = buf;
	return mdb_put(txn, s->dbi[DB_COUNTER], &k, &v, 0);
}

int tfs_meta_counter_reserve(struct tfs_meta *mt, const char *name, uint64_t count,
			     uint64_t *first)
{
	struct counter_arg ca = { name, count, 0 };
	int rc;

	/* synced: a reserved range must never come back */
	rc = write_txn(mt, counter_fn, &ca, true);
	*first = ca.first;
	return rc;
}

/* ------------------------------------------------------------------ */
/* Sets of (u64, u64) keys                                             */
/* ------------------------------------------------------------------ */

static int set_db(enum tfs_meta_set set)
{
	switch (set) {
	case TFS_SET_MARK: return DB_MARK;
	case TFS_SET_REBUILT: return DB_REBUILT;
	case TFS_SET_CACHE: return DB_CACHE;
	default: return DB_CDIRTY;
	}
}

struct set_arg {
	int db;
	unsigned char key[16];
	bool del;
};

static int set_fn(struct store *s, MDB_txn *txn, void *arg)
{
	struct set_arg *sa = arg;
	MDB_val k = { 16, sa->key }, v = { 0, NULL };
	int rc;

	if (sa->del) {
		rc = mdb_del(txn, s->dbi[sa->db], &k, NULL);
		return rc == MDB_NOTFOUND ? 0 : rc;
	}
	return mdb_put(txn, s->dbi[sa->db], &k, &v, 0);
}

static int set_change(struct tfs_meta *mt, enum tfs_meta_set set, uint64_t a, uint64_t b,
		      bool del)
{
	struct set_arg sa = { set_db(set), { 0 }, del };

	tfs_be64(a, sa.key);
	tfs_be64(b, sa.key + 8);
	return write_txn(mt, set_fn, &sa, false);
}

int tfs_meta_set_put(struct tfs_meta *mt, enum tfs_meta_set set, uint64_t a, uint64_t b)
{
	return set_change(mt, set, a, b, false);
}

int tfs_meta_set_del(struct tfs_meta *mt, enum tfs_meta_set set, uint64_t a, uint64_t b)
{
	return set_change(mt, set, a, b, true);
}

static int clear_fn(struct store *s, MDB_txn *txn, void *arg)
{
	return mdb_drop(txn, s->dbi[*(int *)arg], 0);
}

int tfs_meta_set_clear(struct tfs_meta *mt, enum tfs_meta_set set)
{
	int db = set_db(set);

	return write_txn(mt, clear_fn, &db, false);
}

int tfs_meta_set_has(struct tfs_meta *mt, enum tfs_meta_set set, uint64_t a, uint64_t b)
{
	unsigned char key[16];
	MDB_val k = { 16, key }, v;
	MDB_txn *txn;
	int rc;

	tfs_be64(a, key);
	tfs_be64(b, key + 8);
	pthread_mutex_lock(&mt->wlock);
	rc = read_txn(mt, &txn);
	if (rc == 0) {
		rc = mdb_get(txn, mt->st[0].dbi[set_db(set)], &k, &v);
		mdb_txn_abort(txn);
	}
	pthread_mutex_unlock(&mt->wlock);
	return rc == 0 ? 1 : rc == MDB_NOTFOUND ? 0 : tfs_mdb_errno(rc);
}

struct set_visit {
	tfs_meta_set_cb cb;
	void *arg;
};

static int set_visit(void *arg, const MDB_val *k, const MDB_val *v)
{
	struct set_visit *sv = arg;

	if (k->mv_size != 16)
		return 0;
	return sv->cb(sv->arg, tfs_from_be64(k->mv_data),
		      tfs_from_be64((const unsigned char *)k->mv_data + 8));
}

int tfs_meta_set_foreach(struct tfs_meta *mt, enum tfs_meta_set set, tfs_meta_set_cb cb,
			 void *arg)
{
	struct set_visit sv = { cb, arg };

	return db_foreach(mt, set_db(set), set_visit, &sv);
}

int tfs_meta_set_count(struct tfs_meta *mt, enum tfs_meta_set set, uint64_t *count)
{
	return db_count(mt, set_db(set), count);
}
