/* meta.c - LMDB owner.
 *
 * Owns: the array's journal, kept as one LMDB environment per member that
 * is not failed (MEMBER/.tierfs/journal), its named databases, and what
 * every LMDB client of meta/ shares (meta_i.h): the mapping of MDB_* codes
 * to -errno and the write transaction that grows a full map.
 *
 * Schema (docs/DESIGN.md has the full story):
 *   "intent"  key: u64 sequence, big-endian (so cursor order is age order)
 *             value: an intent record, opaque here (intent.c encodes it)
 *   "counter" key: name string          value: u64 next free value
 *   "mark"    key: u64 fid % 256, u64 region (big-endian)   value: empty
 *             parity regions that may have stripes in flight (marks.c)
 *   "rebuilt" key: u64 fid, u64 0        value: empty
 *             files whose data a running rebuild has finished (rebuild.c)
 *   "cache"   key: the bound SSD tier's uuid as two u64      value: empty
 *   "cdirty"  key: u64 fid, u64 0        value: empty
 *             files with writes only in the SSD tier (cache/index.c)
 *
 * Invariants:
 *  1. Writers are serialised by wlock (write_txn) and every write
 *     transaction is applied to every copy, the copies in parallel (the
 *     caller and a helper per further copy, invariant 10: they are on
 *     different disks and each commit waits for an fdatasync), so the
 *     copies hold the same records (a crash leaves
 *     some a transaction behind; opening merges them: union of records,
 *     maximum of counters).  A commit that fails on one copy returns the
 *     error: the copies that committed are a transaction ahead, as after
 *     such a crash, and every record is safe to find left over (an intent
 *     replays as a no-op, a mark costs a resync, a counter only skips
 *     values).  The fid counter's next value is read from the first copy
 *     before the copies commit.
 *  2. Environments are opened with MDB_NOMETASYNC (no MDB_WRITEMAP, no
 *     MDB_NOSYNC).  A commit writes its new pages with pwrite, fdatasyncs
 *     them, then writes the meta page without a sync; for this mode LMDB
 *     promises integrity after a system crash, which may undo only the
 *     last commit (lmdb.h, MDB_NOMETASYNC).  tfs_meta_sync()
 *     (mdb_env_sync) makes that last commit durable too: the durability
 *     point for power loss.  A returned commit is in the page cache, so it
 *     survives the daemon's death whether synced or not.  An intent's add
 *     is synced before it returns (write_txn's durable, for its whole
 *     group), so no member sees a change whose intent a power cut can
 *     undo: a member filesystem may commit its own journal, and with it the
 *     change, at any time after (test_crash.py
 *     test_power_cut_midway_is_finished_on_remount: the cut lost the add,
 *     and member 0 listed a name the others did not have, with nothing to
 *     replay; test_journal's group: an add in a group another caller led
 *     returns synced too).
 *  3. No store into a mapping can fault: the data file is mapped read-only
 *     (LMDB writes it with pwrite, so a full filesystem fails the commit
 *     with ENOSPC and LMDB aborts it, leaving the environment usable), and
 *     the lock file, LMDB's only shared writable map, is allocated in full
 *     (fallocate) before LMDB maps it.  Every write error reaches the
 *     caller as -errno, never a SIGBUS.
 *  4. The data file has blocks allocated (fallocate, KEEP_SIZE) up to
 *     HEADROOM_BYTES past its last page, renewed when half is used
 *     (store_headroom): LMDB writes new pages there, so a full member
 *     filesystem does not stop the journal at once, and an unlink, which
 *     frees space, still gets its intent in.  A commit that does not fit
 *     fails with ENOSPC (invariant 3).
 *  5. A full map is grown (doubled) under wlock and the transaction retried;
 *     callers never see MDB_MAP_FULL.
 *  6. Reads use the first live copy; readers never block the writer (MVCC).
 *  7. An intent retired (its change is on every member) is deleted by the
 *     next write transaction, whatever it is for: a namespace change costs
 *     one commit (its intent's add, carrying the previous changes'
 *     deletions), not two.  Until then a crash leaves it to be replayed,
 *     and replaying a finished change is a no-op (replay.c: the members
 *     already agree with the primary), except a truncate's, which intent.c
 *     deletes at once (tfs_meta_intent_del) and whose deletion an fsync of
 *     the file makes durable (tfs_meta_sync_to).  An intent whose own add
 *     or delete failed may be in some copies (a truncate's would replay):
 *     it is retired too, and tfs_meta_sync_to commits the retired ones
 *     before it syncs while there is one ("owed"); a finished change's
 *     retirement alone costs an fsync no commit.  A clean close commits
 *     them; beyond RETIRED_MAX a retirement commits them first.
 *  8. Group commit: write_txn queues the caller's transaction; the first
 *     caller to find no group committing commits every queued one as one
 *     LMDB transaction on each copy (in queue order) and wakes their
 *     callers, each of which returns only once its own transaction is
 *     committed.  If the group's commit fails, each is committed alone, so
 *     each caller gets its own result.  Transactions that need wlock for
 *     more than their commit (the fid counter, a sync) take it directly.
 *  9. A rider (tfs_meta_set_put_next: a set put that needs no commit of
 *     its own) goes with every write transaction, as the retired intents
 *     do, until one commits on every copy; so it is committed by the
 *     first transaction that commits after it was queued.
 * 10. The copies' work (a commit, a sync) runs on helpers that live as
 *     long as the journal, one per copy after the first, which the caller
 *     does itself: a namespace change does not start and end a thread per
 *     copy (three per create on four members).  Helpers run only under
 *     wlock, so one job at a time each; a helper that cannot be started
 *     leaves its copy's work to the caller, in turn.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <lmdb.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

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
	uint64_t reserved;		/* data file bytes known allocated (invariant 4) */
	int headroom_err;		/* the last fallocate refusal, logged once */
};

#define RETIRED_MAX 256
#define RIDERS_MAX 64		/* invariant 9 */

/* A copy's helper (invariant 10): runs fn(arg) when given one. */
struct helper {
	pthread_t th;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int (*fn)(void *);		/* the job, NULL when there is none */
	void *arg;
	int ret;
	bool quit;
};

struct tfs_meta {
	pthread_mutex_t wlock;
	struct helper help[TFS_META_MAX];	/* [0] unused: the caller's copy */
	uint64_t next_seq;
	unsigned n;
	struct store st[TFS_META_MAX];
	unsigned nretired;		/* intents the next write txn deletes (wlock) */
	uint64_t retired[RETIRED_MAX];
	bool owed;			/* one of them is a failed intent txn's (atomic) */
	uint64_t gen;			/* write transactions begun, under wlock */
	/* group commit (invariant 8): callers of write_txn queue here; one of
	 * them at a time commits everything queued, as one transaction */
	pthread_mutex_t glock;
	pthread_cond_t gdone;
	struct gop *gq;			/* queued, newest first */
	bool gleader;			/* a caller is committing a group */
	uint64_t synced;		/* gen at the last sync of every copy (atomic) */
	uint64_t syncs;			/* syncs of every copy run, under wlock */
	/* set puts the next write txn makes (invariant 9), under rlock; a
	 * transaction takes the first nsnap of them (wlock) */
	pthread_mutex_t rlock;
	unsigned nriders, nsnap;
	struct rider { int db; uint64_t a, b; } riders[RIDERS_MAX];
};

static int sync_locked(struct tfs_meta *mt);
static int retired_commit_locked(struct tfs_meta *mt);

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

/* LMDB reports a short write of its pages as EIO ("filesystem full?"):
 * that is ENOSPC when the filesystem under env has (almost) no room left,
 * as a short write there means. */
static int short_write_errno(MDB_env *env, int rc)
{
	struct statvfs sv;
	int fd;

	if (rc != EIO || mdb_env_get_fd(env, &fd) || fstatvfs(fd, &sv))
		return rc;
	return (uint64_t)sv.f_bfree * sv.f_frsize < (1u << 20) ? ENOSPC : rc;
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
			rc = short_write_errno(env, mdb_txn_commit(txn));
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

/* Reader slots: every reader holds wlock (read_txn), so one or two at a
 * time; 16 keep LMDB's lock file (a 128-byte header and 64 bytes a slot)
 * inside LOCK_BYTES. */
#define JOURNAL_READERS 16
#define LOCK_BYTES      4096

/* Allocate dir/lock.mdb before LMDB maps it shared and writes it
 * (invariant 3): a store into a page of a sparse file on a full
 * filesystem is a SIGBUS, not an error.  LMDB maps a file that is large
 * enough as it is, all of it (one made with more reader slots is bigger). */
static int lock_file_alloc(const char *dir)
{
	char path[4096];
	struct stat st;
	int fd, rc;

	if (snprintf(path, sizeof(path), "%s/lock.mdb", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = fstat(fd, &st) ? errno
	     : posix_fallocate(fd, 0, st.st_size > LOCK_BYTES ? st.st_size : LOCK_BYTES);
	close(fd);
	return -rc;
}

#define HEADROOM_BYTES (256u << 10)

/* Keep HEADROOM_BYTES allocated past the last page (invariant 4).  From
 * offset 0: a file an older tierfs made sparse (MDB_WRITEMAP) gets its
 * holes filled as well. */
static void store_headroom(struct store *s)
{
	MDB_envinfo info;
	MDB_stat st;
	uint64_t used;
	int fd, rc;

	if (mdb_env_info(s->env, &info) || mdb_env_stat(s->env, &st) ||
	    mdb_env_get_fd(s->env, &fd))
		return;
	used = ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
	if (s->reserved >= used + HEADROOM_BYTES / 2)
		return;
	rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)(used + HEADROOM_BYTES)) ? -errno : 0;
	if (rc == 0)
		s->reserved = used + HEADROOM_BYTES;
	if (rc && rc != s->headroom_err)
		tfs_warn("journal copy on member %u: cannot allocate room to grow: %s; "
			 "its commits fail once what is left is used", s->tag, strerror(-rc));
	s->headroom_err = rc;
}

static int store_open(struct store *s, const char *dir, uint32_t tag)
{
	MDB_txn *txn = NULL;
	int rc;

	s->mapsize = 64u << 20;
	s->tag = tag;
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	rc = lock_file_alloc(dir);
	if (rc) {
		tfs_err("journal %s: lock file: %s", dir, strerror(-rc));
		return rc;
	}
	rc = mdb_env_create(&s->env);
	if (rc)
		goto out;
	mdb_env_set_maxdbs(s->env, 8);
	mdb_env_set_maxreaders(s->env, JOURNAL_READERS);
	mdb_env_set_mapsize(s->env, s->mapsize);
	/* invariants 2 and 3 */
	rc = mdb_env_open(s->env, dir, MDB_NOMETASYNC | MDB_NOTLS, 0600);
	if (rc == 0)
		rc = mdb_txn_begin(s->env, NULL, 0, &txn);
	for (int d = 0; rc == 0 && d < DB_COUNT; d++)
		rc = mdb_dbi_open(txn, db_name[d], MDB_CREATE, &s->dbi[d]);
	if (rc == 0)
		rc = mdb_txn_commit(txn);
	else if (txn)
		mdb_txn_abort(txn);
	if (rc == 0) {
		s->reserved = 0;
		s->headroom_err = 0;
		store_headroom(s);
		return 0;
	}
	mdb_env_close(s->env);
out:
	s->env = NULL;
	tfs_err("journal %s: %s", dir, mdb_strerror(rc));
	return tfs_mdb_errno(rc);
}

static void store_close(struct store *s)
{
	int rc = mdb_env_sync(s->env, 1);

	/* only the last commit can be lost (invariant 2); say so */
	if (rc)
		tfs_err("journal copy on member %u: sync at close: %s", s->tag, mdb_strerror(rc));
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

/* ------------------------------------------------------------------ */
/* The copies' helpers (invariant 10)                                  */
/* ------------------------------------------------------------------ */

static void *helper_main(void *arg)
{
	struct helper *h = arg;

	pthread_mutex_lock(&h->lock);
	for (;;) {
		while (!h->fn && !h->quit)
			pthread_cond_wait(&h->cond, &h->lock);
		if (!h->fn)
			break;
		pthread_mutex_unlock(&h->lock);
		h->ret = h->fn(h->arg);
		pthread_mutex_lock(&h->lock);
		h->fn = NULL;
		pthread_cond_broadcast(&h->cond);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

/* fn(args[i]) for every copy i, copy 0 on the caller, the others on their
 * helpers, in parallel.  Returns the first copy's non-zero result, or 0.
 * wlock held. */
static int on_copies(struct tfs_meta *mt, int (*fn)(void *), void *const *args)
{
	bool given[TFS_META_MAX] = { false };
	int rcs[TFS_META_MAX], rc = 0;

	for (unsigned i = 1; i < mt->n; i++) {
		struct helper *h = &mt->help[i];

		if (!h->started) {
			pthread_mutex_init(&h->lock, NULL);
			pthread_cond_init(&h->cond, NULL);
			h->started = pthread_create(&h->th, NULL, helper_main, h) == 0;
			if (!h->started) {
				pthread_cond_destroy(&h->cond);
				pthread_mutex_destroy(&h->lock);
				continue;	/* the caller does it, below */
			}
		}
		pthread_mutex_lock(&h->lock);
		h->arg = args[i];
		h->fn = fn;
		pthread_cond_broadcast(&h->cond);
		pthread_mutex_unlock(&h->lock);
		given[i] = true;
	}
	rcs[0] = fn(args[0]);
	for (unsigned i = 1; i < mt->n; i++) {
		struct helper *h = &mt->help[i];

		if (!given[i]) {
			rcs[i] = fn(args[i]);	/* no helper: in turn */
			continue;
		}
		pthread_mutex_lock(&h->lock);
		while (h->fn)
			pthread_cond_wait(&h->cond, &h->lock);
		rcs[i] = h->ret;
		pthread_mutex_unlock(&h->lock);
	}
	for (unsigned i = 0; i < mt->n && rc == 0; i++)
		rc = rcs[i];
	return rc;
}

static void helpers_stop(struct tfs_meta *mt)
{
	for (unsigned i = 1; i < TFS_META_MAX; i++) {
		struct helper *h = &mt->help[i];

		if (!h->started)
			continue;
		pthread_mutex_lock(&h->lock);
		h->quit = true;
		pthread_cond_broadcast(&h->cond);
		pthread_mutex_unlock(&h->lock);
		pthread_join(h->th, NULL);
		pthread_cond_destroy(&h->cond);
		pthread_mutex_destroy(&h->lock);
		h->started = false;
	}
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
	pthread_mutex_init(&mt->glock, NULL);
	pthread_mutex_init(&mt->rlock, NULL);
	pthread_cond_init(&mt->gdone, NULL);
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
	int rc;

	if (!mt)
		return;
	/* a clean stop leaves nothing to replay */
	pthread_mutex_lock(&mt->wlock);
	if ((mt->nretired || __atomic_load_n(&mt->nriders, __ATOMIC_RELAXED)) &&
	    ((rc = retired_commit_locked(mt)) || (rc = sync_locked(mt))))
		tfs_warn("journal: %u finished change(s) left in it (replayed, as no-ops, at "
			 "the next mount): %s", mt->nretired, strerror(-rc));
	pthread_mutex_unlock(&mt->wlock);
	helpers_stop(mt);
	for (unsigned i = 0; i < mt->n; i++)
		store_close(&mt->st[i]);
	pthread_mutex_destroy(&mt->wlock);
	pthread_mutex_destroy(&mt->rlock);
	pthread_mutex_destroy(&mt->glock);
	pthread_cond_destroy(&mt->gdone);
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

static int sync_main(void *arg)
{
	struct store *s = arg;

	return tfs_mdb_errno(mdb_env_sync(s->env, 1));
}

/* Every copy synced, in parallel (they are on different disks). */
static int sync_locked(struct tfs_meta *mt)
{
	void *args[TFS_META_MAX];
	uint64_t gen = mt->gen;
	int rc;

	__atomic_store_n(&mt->syncs, mt->syncs + 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < mt->n; i++)
		args[i] = &mt->st[i];
	rc = on_copies(mt, sync_main, args);
	if (rc == 0)
		__atomic_store_n(&mt->synced, gen, __ATOMIC_RELEASE);
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
	const struct tfs_meta *mt;
	struct store *s;
	txn_fn fn;
	void *arg;
};

static int intent_del_key(struct store *s, MDB_txn *txn, uint64_t seq);

/* The retired intents and the riders go with every transaction
 * (invariants 7, 9). */
static int store_call(MDB_txn *txn, void *arg)
{
	struct store_call *c = arg;
	int rc = 0;

	for (unsigned i = 0; i < c->mt->nretired && rc == 0; i++)
		rc = intent_del_key(c->s, txn, c->mt->retired[i]);
	for (unsigned i = 0; i < c->mt->nsnap && rc == 0; i++) {
		const struct rider *r = &c->mt->riders[i];
		unsigned char key[16];
		MDB_val k = { 16, key }, v = { 0, NULL };

		tfs_be64(r->a, key);
		tfs_be64(r->b, key + 8);
		rc = mdb_put(txn, c->s->dbi[r->db], &k, &v, 0);
	}
	return rc ? rc : c->fn(c->s, txn, c->arg);
}

static int store_txn(const struct tfs_meta *mt, struct store *s, txn_fn fn, void *arg)
{
	struct store_call c = { mt, s, fn, arg };

	/* readers hold wlock too (db_foreach): no map lock needed */
	return tfs_mdb_write(s->env, &s->mapsize, NULL, store_call, &c, "journal");
}

struct copy_job {
	const struct tfs_meta *mt;
	struct store *s;
	txn_fn fn;
	void *arg;
};

static int copy_main(void *arg)
{
	struct copy_job *j = arg;
	int rc = store_txn(j->mt, j->s, j->fn, j->arg);

	if (rc == 0)
		store_headroom(j->s);
	return rc;
}

/* fn on every copy, wlock held (invariant 1); sync: make it durable.  The
 * copies live on different members' disks and each commit waits for an
 * fdatasync: they commit in parallel, on the helpers (invariant 10; fn
 * must only read arg; the first error is returned, and the copies that
 * committed are a transaction ahead, as after a crash between two of
 * them). */
static int write_txn_locked(struct tfs_meta *mt, txn_fn fn, void *arg, bool sync)
{
	struct copy_job job[TFS_META_MAX];
	void *args[TFS_META_MAX];
	int rc;

	/* counted before it starts: a failed one may have committed somewhere */
	__atomic_store_n(&mt->gen, mt->gen + 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&mt->rlock);	/* the riders queued so far (invariant 9) */
	mt->nsnap = mt->nriders;
	pthread_mutex_unlock(&mt->rlock);
	for (unsigned i = 0; i < mt->n; i++) {
		job[i] = (struct copy_job){ mt, &mt->st[i], fn, arg };
		args[i] = &job[i];
	}
	rc = tfs_mdb_errno(on_copies(mt, copy_main, args));
	if (rc == 0) {	/* every copy deleted them, and has the riders */
		__atomic_store_n(&mt->nretired, 0, __ATOMIC_RELAXED);
		pthread_mutex_lock(&mt->rlock);
		memmove(mt->riders, mt->riders + mt->nsnap,
			(mt->nriders - mt->nsnap) * sizeof(mt->riders[0]));
		mt->nriders -= mt->nsnap;
		pthread_mutex_unlock(&mt->rlock);
		__atomic_store_n(&mt->owed, false, __ATOMIC_RELAXED);
	}
	if (rc == 0 && sync)
		rc = sync_locked(mt);
	return rc;
}

/* One caller's transaction in a group (write_txn). */
struct gop {
	txn_fn fn;
	void *arg;
	bool durable;		/* synced before it returns (invariant 2) */
	int rc;
	bool done;
	struct gop *next;
};

/* The group's transactions in the order they were queued. */
static int group_fn(struct store *s, MDB_txn *txn, void *arg)
{
	struct gop *g = arg;	/* oldest first */
	int rc = 0;

	for (; g && rc == 0; g = g->next)
		rc = g->fn(s, txn, g->arg);
	return rc;
}

/* fn on every copy, committed with whatever other callers queued
 * meanwhile (invariant 8): while one group commits, the next one gathers,
 * so N concurrent namespace changes cost about one commit's fdatasyncs,
 * not N.  durable: synced too before it returns, and so is the group
 * (invariant 2); else committed, not synced. */
static int write_txn(struct tfs_meta *mt, txn_fn fn, void *arg, bool durable)
{
	struct gop me = { fn, arg, durable, 0, false, NULL }, *g, *old = NULL;
	unsigned n = 0;
	bool sync = false;
	int rc;

	pthread_mutex_lock(&mt->glock);
	me.next = mt->gq;
	mt->gq = &me;
	while (!me.done && mt->gleader)
		pthread_cond_wait(&mt->gdone, &mt->glock);
	if (me.done) {
		pthread_mutex_unlock(&mt->glock);
		return me.rc;
	}
	mt->gleader = true;	/* this caller commits everything queued */
	for (g = mt->gq; g; n++) {	/* reversed: oldest first */
		struct gop *next = g->next;

		sync |= g->durable;
		g->next = old;
		old = g;
		g = next;
	}
	mt->gq = NULL;
	pthread_mutex_unlock(&mt->glock);

	pthread_mutex_lock(&mt->wlock);
	rc = write_txn_locked(mt, group_fn, old, sync);
	for (g = old; g; g = g->next)	/* a failed group: each alone, for its own error */
		g->rc = rc == 0 || n == 1 ? rc : write_txn_locked(mt, g->fn, g->arg, g->durable);
	pthread_mutex_unlock(&mt->wlock);

	pthread_mutex_lock(&mt->glock);
	for (g = old; g; g = g->next)
		g->done = true;
	mt->gleader = false;
	pthread_cond_broadcast(&mt->gdone);
	pthread_mutex_unlock(&mt->glock);
	return me.rc;
}

/* Read-only transaction on the first copy. */
static int read_txn(struct tfs_meta *mt, MDB_txn **txn)
{
	return mdb_txn_begin(mt->st[0].env, NULL, MDB_RDONLY, txn);
}

/* ------------------------------------------------------------------ */
/* Intent log                                                          */
/* ------------------------------------------------------------------ */

/* Intents whose change is done are retired (tfs_meta_intent_retire): the
 * next write transaction of any kind deletes them (invariant 7).  So is an
 * intent whose add or delete failed, which may be in some copies. */
struct intent_op {
	uint64_t seq;
	const void *rec;	/* NULL: delete seq */
	size_t len;
};

static int intent_del_key(struct store *s, MDB_txn *txn, uint64_t seq)
{
	unsigned char key[8];
	MDB_val k = { 8, key };
	int rc;

	tfs_be64(seq, key);
	rc = mdb_del(txn, s->dbi[DB_INTENT], &k, NULL);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

static int intent_fn(struct store *s, MDB_txn *txn, void *arg)
{
	struct intent_op *op = arg;
	unsigned char key[8];
	MDB_val k = { 8, key }, v = { op->len, (void *)op->rec };

	if (!op->rec)
		return intent_del_key(s, txn, op->seq);
	tfs_be64(op->seq, key);
	return mdb_put(txn, s->dbi[DB_INTENT], &k, &v, 0);
}

/* seq goes with the next write transaction; wlock held.  Beyond
 * RETIRED_MAX it stays in the journal and is replayed, as a no-op, at the
 * next mount. */
static void retire_locked(struct tfs_meta *mt, uint64_t seq)
{
	if (mt->nretired < RETIRED_MAX) {
		mt->retired[mt->nretired] = seq;
		__atomic_store_n(&mt->nretired, mt->nretired + 1, __ATOMIC_RELAXED);
	}
}

static int intent_txn(struct tfs_meta *mt, struct intent_op *op)
{
	/* an add is durable before its change reaches a member (invariant 2) */
	int rc = write_txn(mt, intent_fn, op, op->rec != NULL);

	if (rc) {	/* it may be in some copies: gone before an fsync returns */
		pthread_mutex_lock(&mt->wlock);
		retire_locked(mt, op->seq);
		__atomic_store_n(&mt->owed, true, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&mt->wlock);
	}
	return rc;
}

int tfs_meta_intent_add(struct tfs_meta *mt, const void *rec, size_t len, uint64_t *seq)
{
	struct intent_op op = { 0, rec, len };
	int rc;

	op.seq = __atomic_fetch_add(&mt->next_seq, 1, __ATOMIC_RELAXED);
	rc = intent_txn(mt, &op);
	*seq = op.seq;
	return rc;
}

int tfs_meta_intent_del(struct tfs_meta *mt, uint64_t seq)
{
	struct intent_op op = { seq, NULL, 0 };

	return intent_txn(mt, &op);
}

/* A transaction of nothing but the retired intents (store_call adds them). */
static int nothing_fn(struct store *s, MDB_txn *txn, void *arg)
{
	(void)s, (void)txn, (void)arg;
	return 0;
}

/* The retired intents deleted (committed, not synced); wlock held. */
static int retired_commit_locked(struct tfs_meta *mt)
{
	return mt->nretired || __atomic_load_n(&mt->nriders, __ATOMIC_RELAXED)
		       ? write_txn_locked(mt, nothing_fn, NULL, false) : 0;
}

void tfs_meta_intent_retire(struct tfs_meta *mt, uint64_t seq)
{
	pthread_mutex_lock(&mt->wlock);
	if (mt->nretired == RETIRED_MAX)	/* make room (a failure: the next txn retries) */
		(void)retired_commit_locked(mt);
	retire_locked(mt, seq);
	pthread_mutex_unlock(&mt->wlock);
}

uint64_t tfs_meta_gen(struct tfs_meta *mt)
{
	return __atomic_load_n(&mt->gen, __ATOMIC_RELAXED);
}

int tfs_meta_stats(struct tfs_meta *mt, char *buf, size_t len)
{
	return snprintf(buf, len, "journal.commits=%" PRIu64 "\njournal.syncs=%" PRIu64 "\n",
			__atomic_load_n(&mt->gen, __ATOMIC_RELAXED),
			__atomic_load_n(&mt->syncs, __ATOMIC_RELAXED));
}

bool tfs_meta_synced(struct tfs_meta *mt, uint64_t gen)
{
	return __atomic_load_n(&mt->synced, __ATOMIC_ACQUIRE) >= gen;
}

bool tfs_meta_sync_due(struct tfs_meta *mt, uint64_t gen)
{
	return !tfs_meta_synced(mt, gen) || __atomic_load_n(&mt->owed, __ATOMIC_RELAXED);
}

int tfs_meta_sync_to(struct tfs_meta *mt, uint64_t gen)
{
	int rc = 0;

	if (!tfs_meta_sync_due(mt, gen))
		return 0;
	pthread_mutex_lock(&mt->wlock);
	if (mt->owed)	/* invariant 7: a finished change's retirement can wait */
		rc = retired_commit_locked(mt);
	if (rc == 0 && __atomic_load_n(&mt->synced, __ATOMIC_ACQUIRE) < mt->gen)
		rc = sync_locked(mt);
	pthread_mutex_unlock(&mt->wlock);
	return rc;
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

	tfs_be64(ca->first + ca->count, buf);
	v.mv_size = 8;
	v.mv_data = buf;
	return mdb_put(txn, s->dbi[DB_COUNTER], &k, &v, 0);
}

int tfs_meta_counter_reserve(struct tfs_meta *mt, const char *name, uint64_t count,
			     uint64_t *first)
{
	struct counter_arg ca = { name, count, 0 };
	MDB_val k = { strlen(name), (void *)name }, v;
	MDB_txn *txn;
	int rc;

	/* every copy hands out the same range: the first copy decides, read
	 * before the copies commit in parallel; synced: a reserved range must
	 * never come back */
	pthread_mutex_lock(&mt->wlock);
	rc = read_txn(mt, &txn);
	if (rc == 0) {
		rc = mdb_get(txn, mt->st[0].dbi[DB_COUNTER], &k, &v);
		ca.first = rc == 0 && v.mv_size == 8 ? tfs_from_be64(v.mv_data) : 1;
		rc = rc == MDB_NOTFOUND ? 0 : rc;
		mdb_txn_abort(txn);
	}
	rc = tfs_mdb_errno(rc);
	if (rc == 0)
		rc = write_txn_locked(mt, counter_fn, &ca, true);
	pthread_mutex_unlock(&mt->wlock);
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

struct set_many {
	int db;
	const uint64_t (*keys)[2];
	const bool *put;	/* NULL: every key deleted */
	size_t n;
};

static int set_many_fn(struct store *s, MDB_txn *txn, void *arg)
{
	struct set_many *sm = arg;
	int rc = 0;

	for (size_t i = 0; i < sm->n && rc == 0; i++) {
		unsigned char key[16];
		MDB_val k = { 16, key }, v = { 0, NULL };

		tfs_be64(sm->keys[i][0], key);
		tfs_be64(sm->keys[i][1], key + 8);
		if (sm->put && sm->put[i]) {
			rc = mdb_put(txn, s->dbi[sm->db], &k, &v, 0);
		} else {
			rc = mdb_del(txn, s->dbi[sm->db], &k, NULL);
			if (rc == MDB_NOTFOUND)
				rc = 0;
		}
	}
	return rc;
}

int tfs_meta_set_del_many(struct tfs_meta *mt, enum tfs_meta_set set, const uint64_t (*keys)[2],
			  size_t n)
{
	struct set_many sm = { set_db(set), keys, NULL, n };

	return n ? write_txn(mt, set_many_fn, &sm, false) : 0;
}

int tfs_meta_set_apply(struct tfs_meta *mt, enum tfs_meta_set set, const uint64_t (*keys)[2],
		       const bool *put, size_t n)
{
	struct set_many sm = { set_db(set), keys, put, n };

	return n ? write_txn(mt, set_many_fn, &sm, false) : 0;
}

bool tfs_meta_set_put_next(struct tfs_meta *mt, enum tfs_meta_set set, uint64_t a, uint64_t b)
{
	bool queued;

	pthread_mutex_lock(&mt->rlock);	/* not wlock: no wait behind a commit */
	queued = mt->nriders < RIDERS_MAX;
	if (queued)
		mt->riders[mt->nriders++] = (struct rider){ set_db(set), a, b };
	pthread_mutex_unlock(&mt->rlock);
	return queued;
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
