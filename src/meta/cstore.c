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
 *   "pin"   key: u64 fid (big-endian)   value: u64 extents reserved (host order)
 *
 * Invariants:
 *  1. Writers are serialised by wlock; every change is one write
 *     transaction (tfs_mdb_write), so a batch of ops is all or nothing.
 *  2. The environment is opened with LMDB's default durability (no
 *     MDB_NOSYNC, MDB_NOMETASYNC or MDB_WRITEMAP): a commit returns once
 *     its pages and then its meta page are on stable storage, and LMDB
 *     promises that a system crash leaves the last committed transaction.
 *     Commits happen only at durability points (tfs_cstore_sync).
 *  3. A full map is grown (doubled) and the transaction retried; callers
 *     never see MDB_MAP_FULL.
 *  4. Readers hold maplock for reading for as long as they look into the
 *     map; only the growth of invariant 3 takes it for writing (the map
 *     moves).  So readers never block a writer's commits, and a foreach
 *     callback must neither write to the store nor wait for a writer.
 *  5. A record is decoded only after its key and value sizes and version
 *     are checked: anything else is -EUCLEAN, never a bad read.
 *  6. Open refuses (-EUCLEAN) a data.mdb that is not an LMDB file or
 *     lacks a page a record sits on (a truncated copy): LMDB would abort
 *     on the first missing page.  A file shorter than the pages its meta
 *     page counts is not that by itself (free pages LMDB never wrote can
 *     end it): it is walked whole in a child first (check_length).
 *     (Damage inside the pages of a full-length file is not detected.)
 *  7. The log (DIR/log) makes an applied batch survive the daemon's death
 *     without a sync: tfs_cstore_apply appends one entry (seq, epoch, CRC,
 *     the ops) with pwrite and keeps it pending in memory.  Entries reach
 *     LMDB in seq order, at durability points only: take the pending
 *     entries (up to seq S), run the barrier (the cache syncs its data
 *     file, so every slot byte an entry names is durable before the entry
 *     is), commit them with info "logseq" = S in one transaction.  The
 *     barrier runs with no entry pending too: a durability point makes
 *     every slot byte written before it durable, recorded anew or not.
 *  8. Open reads the log back into pending (the entries of the store's
 *     epoch, in seq order from logseq + 1, up to the first bad or missing
 *     one): after a kill they are all in the page cache.  After a power
 *     cut nothing in the log was covered by a durability point, so the
 *     caller drops them (tfs_cstore_drop_unsynced), which also starts a
 *     new epoch so no stale entry is ever read again.  An open for the
 *     info strings alone (tfs_cstore_open_info) neither opens nor reads
 *     the log, and its close leaves it as it was: what the log holds is
 *     read back, and said, by the open that applies it.
 *  9. The log only grows between compactions; a compaction writes the
 *     pending entries to log.new and renames it over the log (either file
 *     holds every entry past logseq).  Its blocks are preallocated, so an
 *     append on a full filesystem is -ENOSPC, never a signal.
 * 10. Concurrent durability points are shared (group commit): a caller of
 *     tfs_cstore_sync takes a ticket, and returns once a point that began
 *     after its ticket has finished, with that point's result; the first
 *     caller to find no point under way makes one for every ticket taken
 *     so far.  A point's barrier begins after every covered caller's call,
 *     so after every write those callers finished before they called: what
 *     a point began after, it covers.  N fsyncs arriving together cost two
 *     points at most, not N in a row.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tierfs/cstore.h"
#include "tierfs/log.h"
#include "tierfs/parse.h"
#include "tierfs/scratch.h"
#include "meta_i.h"

#define CS_INFO_MAX 255		/* longest info key and value, NUL excluded */
#define EXT_VERSION 1

enum { DB_EXT, DB_SIZE, DB_INFO, DB_PIN, DB_COUNT };
static const char *const db_name[DB_COUNT] = { "ext", "size", "info", "pin" };

#define LOG_MAGIC	0x4c534654u	/* "TFSL" */
#define LOG_PREALLOC	(16u << 20)
#define LOG_COMPACT	(8u << 20)	/* compact a log longer than this */
#define PEND_MAX	(4u << 20)	/* a durability point when more is pending */

struct tfs_cstore {
	MDB_env *env;
	MDB_dbi dbi[DB_COUNT];
	size_t mapsize;
	pthread_mutex_t wlock;		/* invariant 1 */
	pthread_rwlock_t maplock;	/* invariant 4 */
	/* the log (invariants 7-9) */
	pthread_mutex_t llock;		/* lfd, loff, seq, pend */
	pthread_mutex_t slock;		/* one durability point at a time */
	/* invariant 10: callers of tfs_cstore_sync share durability points */
	pthread_mutex_t glock;
	pthread_cond_t gdone;
	uint64_t greq;			/* tickets taken */
	uint64_t gdone_upto;		/* tickets the last finished point covers */
	int grc;			/* its result */
	bool gbusy;			/* a point is being made */
	int lfd;
	uint64_t loff;			/* where the next entry goes */
	uint64_t seq;			/* last entry appended */
	uint64_t synced;		/* last entry in LMDB (logseq) */
	uint64_t epoch;
	unsigned char *pend;		/* entries synced+1 .. seq, as in the log */
	size_t plen, pcap;
	int (*barrier)(void *arg);
	void *barg;
	char dir[PATH_MAX];
};

/* One log entry: this header, then nops struct log_op. */
struct log_hdr {
	uint32_t magic;
	uint32_t nops;
	uint64_t seq;
	uint64_t epoch;
	uint32_t crc;			/* crc32c of the entry with crc = 0 */
	uint32_t pad;
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

/* One op of a log entry (host byte order; the log never leaves this
 * machine's cache directory). */
struct log_op {
	uint32_t op;			/* enum tfs_cstore_opcode */
	uint32_t pad;
	uint64_t fid, idx, size;
	struct ext_val ev;		/* TFS_CS_PUT_EXT */
};

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;	/* Castagnoli */
		crc_table[i] = c;
	}
}

static uint32_t crc32c(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint32_t crc = ~0u;

	pthread_once(&crc_once, crc_init);
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

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

/* Reads a byte of every 512 of v and its last: a page of it past the end
 * of data.mdb faults here. */
static void touch(const MDB_val *v)
{
	const volatile unsigned char *p = v->mv_data;

	for (size_t i = 0; i < v->mv_size; i += 512)
		(void)p[i];
	if (v->mv_size)
		(void)p[v->mv_size - 1];
}

/* In a child: open dir read-only and read every record of every database,
 * the free list's included.  Returns 0 when all of it reads (a page past
 * the end of the file kills the child with SIGBUS instead). */
static int walk_all(const char *dir)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_dbi dbi[DB_COUNT + 2] = { 0, 1 };	/* FREE_DBI, MAIN_DBI */
	unsigned n = 2;
	int rc;

	if (mdb_env_create(&env))
		return 1;
	mdb_env_set_maxdbs(env, DB_COUNT + 1);
	rc = mdb_env_open(env, dir, MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS, 0600);
	if (rc == 0)
		rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
	for (int d = 0; rc == 0 && d < DB_COUNT; d++) {
		int r = mdb_dbi_open(txn, db_name[d], 0, &dbi[n]);

		if (r == 0)
			n++;
		else if (r != MDB_NOTFOUND)
			rc = r;
	}
	for (unsigned d = 0; rc == 0 && d < n; d++) {
		if ((rc = mdb_cursor_open(txn, dbi[d], &cur)))
			break;
		for (int op = MDB_FIRST; rc == 0; op = MDB_NEXT) {
			rc = mdb_cursor_get(cur, &k, &v, op);
			if (rc == 0) {
				touch(&k);
				touch(&v);
			}
		}
		if (rc == MDB_NOTFOUND)
			rc = 0;
		mdb_cursor_close(cur);
	}
	return rc ? 1 : 0;
}

/* -EUCLEAN if data.mdb (size before the open, 0: none) lacks a page that
 * is in use: a truncated store.
 *
 * Invariant: a store is refused only if a page some record sits on is
 * past the end of the file.  The meta page's last page number is not
 * that bound: a page LMDB allocated and freed in one transaction (a
 * "loose" page) is never written, so when the highest pages are such,
 * the file legitimately ends before them (seen after a daemon kill: the
 * tier, and every write-back byte with it, was refused).  So a file
 * shorter than that bound is walked whole, every database and the free
 * list, in a child (a missing page is a SIGBUS there, not here), and is
 * refused only if the walk does not complete. */
static int check_length(struct tfs_cstore *cs, off_t before)
{
	MDB_envinfo info;
	MDB_stat st;
	int rc = mdb_env_info(cs->env, &info), status;
	pid_t pid;

	if (rc == 0)
		rc = mdb_env_stat(cs->env, &st);
	if (rc)
		return tfs_mdb_errno(rc);
	if (!before || (uint64_t)before >= ((uint64_t)info.me_last_pgno + 1) * st.ms_psize)
		return 0;
	if ((uint64_t)before < 2ull * st.ms_psize)
		return -EUCLEAN;	/* not even both meta pages */
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		_exit(walk_all(cs->dir));
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EUCLEAN;
}

static int info_key(const char *key, MDB_val *k);

/* A u64 kept as a decimal info string (0 when missing). */
static int info_u64(MDB_txn *txn, struct tfs_cstore *cs, const char *key, uint64_t *out)
{
	MDB_val k = { strlen(key), (void *)key }, v;
	char buf[32];
	int rc = mdb_get(txn, cs->dbi[DB_INFO], &k, &v);

	*out = 0;
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (v.mv_size == 0 || v.mv_size > sizeof(buf) ||
	    ((const char *)v.mv_data)[v.mv_size - 1] != '\0')
		return -EUCLEAN;
	memcpy(buf, v.mv_data, v.mv_size);
	*out = strtoull(buf, NULL, 10);
	return 0;
}

static int put_u64(MDB_txn *txn, struct tfs_cstore *cs, const char *key, uint64_t val)
{
	char buf[32];
	MDB_val k = { strlen(key), (void *)key }, v = { 0, buf };

	v.mv_size = (size_t)snprintf(buf, sizeof(buf), "%" PRIu64, val) + 1;
	return mdb_put(txn, cs->dbi[DB_INFO], &k, &v, 0);
}

/* ------------------------------------------------------------------ */
/* The log (invariants 7-9)                                            */
/* ------------------------------------------------------------------ */

static size_t entry_len(const struct log_hdr *h)
{
	return sizeof(*h) + (size_t)h->nops * sizeof(struct log_op);
}

static int pend_add(struct tfs_cstore *cs, const void *e, size_t len)
{
	if (cs->plen + len > cs->pcap) {
		size_t cap = cs->pcap ? cs->pcap : 65536;
		unsigned char *p;

		while (cap < cs->plen + len)
			cap *= 2;
		p = realloc(cs->pend, cap);
		if (!p)
			return -ENOMEM;
		cs->pend = p;
		cs->pcap = cap;
	}
	memcpy(cs->pend + cs->plen, e, len);
	cs->plen += len;
	return 0;
}

static int write_all(int fd, const void *buf, size_t len, uint64_t off)
{
	for (size_t done = 0; done < len;) {
		ssize_t r = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		done += (size_t)r;
	}
	return 0;
}

static int log_open(struct tfs_cstore *cs, const char *name, int flags)
{
	char p[PATH_MAX + 16];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", cs->dir, name);
	fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | flags, 0600);
	if (fd < 0)
		return -errno;
	/* invariant 9; a filesystem without fallocate, or one already too
	 * full for it, still gets -ENOSPC from pwrite when it runs out */
	fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, LOG_PREALLOC);
	return fd;
}

/* Read the log back into pending (invariant 8). */
static int log_load(struct tfs_cstore *cs)
{
	struct stat sb;
	unsigned char *buf;
	uint64_t next = cs->synced + 1;
	size_t off = 0;
	int rc = 0;

	if (fstat(cs->lfd, &sb))
		return -errno;
	if (sb.st_size == 0)
		return 0;
	buf = malloc((size_t)sb.st_size);
	if (!buf)
		return -ENOMEM;
	for (size_t done = 0; done < (size_t)sb.st_size;) {
		ssize_t r = pread(cs->lfd, buf + done, (size_t)sb.st_size - done, (off_t)done);

		if (r <= 0) {
			rc = r < 0 ? -errno : -EIO;
			goto out;
		}
		done += (size_t)r;
	}
	while (off + sizeof(struct log_hdr) <= (size_t)sb.st_size) {
		struct log_hdr h;
		size_t len;

		memcpy(&h, buf + off, sizeof(h));
		if (h.magic != LOG_MAGIC || h.epoch != cs->epoch || h.nops == 0 ||
		    h.nops > (1u << 20))
			break;
		len = entry_len(&h);
		if (off + len > (size_t)sb.st_size)
			break;
		((struct log_hdr *)(buf + off))->crc = 0;
		if (crc32c(buf + off, len) != h.crc)
			break;
		((struct log_hdr *)(buf + off))->crc = h.crc;
		if (h.seq >= next) {
			if (h.seq != next)
				break;	/* a gap: nothing after it can be applied */
			rc = pend_add(cs, buf + off, len);
			if (rc)
				goto out;
			next++;
		}
		off += len;
	}
	cs->seq = next - 1;
	cs->loff = off;
	if (cs->seq > cs->synced)
		tfs_info("cache store %s: %" PRIu64 " logged updates to apply", cs->dir,
			 cs->seq - cs->synced);
out:
	free(buf);
	return rc;
}

/* Start the log afresh with what is pending (llock held, or no other
 * thread yet): log.new, renamed over the log (invariant 9). */
static int log_rewrite(struct tfs_cstore *cs)
{
	char from[PATH_MAX + 16], to[PATH_MAX + 16];
	int fd = log_open(cs, "log.new", O_TRUNC), rc;

	if (fd < 0)
		return fd;
	rc = write_all(fd, cs->pend, cs->plen, 0);
	snprintf(from, sizeof(from), "%s/log.new", cs->dir);
	snprintf(to, sizeof(to), "%s/log", cs->dir);
	if (rc == 0 && rename(from, to))
		rc = -errno;
	if (rc) {
		close(fd);
		unlink(from);
		return rc;
	}
	close(cs->lfd);
	cs->lfd = fd;
	cs->loff = cs->plen;
	return 0;
}

/* with_log: read the log back (invariant 8); else leave it alone. */
static int store_open(const char *dir, bool with_log, struct tfs_cstore **out)
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
	snprintf(cs->dir, sizeof(cs->dir), "%s", dir);
	cs->lfd = -1;
	cs->mapsize = 64u << 20;
	rc = mdb_env_create(&cs->env);
	if (rc) {
		free(cs);
		return tfs_mdb_errno(rc);
	}
	mdb_env_set_maxdbs(cs->env, DB_COUNT + 1);
	mdb_env_set_mapsize(cs->env, cs->mapsize);
	rc = mdb_env_open(cs->env, dir, MDB_NOTLS, 0600);	/* invariant 2 */
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
		rc = info_u64(txn, cs, "logseq", &cs->synced);
	if (rc == 0)
		rc = info_u64(txn, cs, "logepoch", &cs->epoch);
	if (rc == 0)
		rc = mdb_txn_commit(txn);
	else if (txn)
		mdb_txn_abort(txn);
	cs->seq = cs->synced;
	if (rc == 0 && with_log) {
		cs->lfd = log_open(cs, "log", 0);
		rc = cs->lfd < 0 ? cs->lfd : log_load(cs);
	}
	if (rc) {
		tfs_err("cache store %s: %s", dir,
			rc < 0 && rc > -4096 ? strerror(-rc) : mdb_strerror(rc));
		if (cs->lfd >= 0)
			close(cs->lfd);
		mdb_env_close(cs->env);
		free(cs->pend);
		free(cs);
		/* MDB_INCOMPATIBLE: a database of another kind under our name */
		return rc == MDB_INCOMPATIBLE ? -EUCLEAN : tfs_mdb_errno(rc);
	}
	pthread_mutex_init(&cs->wlock, NULL);
	pthread_rwlock_init(&cs->maplock, NULL);
	pthread_mutex_init(&cs->llock, NULL);
	pthread_mutex_init(&cs->slock, NULL);
	pthread_mutex_init(&cs->glock, NULL);
	pthread_cond_init(&cs->gdone, NULL);
	*out = cs;
	return 0;
}

int tfs_cstore_open(const char *dir, struct tfs_cstore **out)
{
	return store_open(dir, true, out);
}

int tfs_cstore_open_info(const char *dir, struct tfs_cstore **out)
{
	return store_open(dir, false, out);
}

void tfs_cstore_close(struct tfs_cstore *cs)
{
	if (!cs)
		return;
	/* what is pending stays in the log for the next open (invariant 8);
	 * an open for the info strings alone has no log (lfd -1) */
	if (cs->lfd >= 0) {
		if (cs->plen == 0 && cs->loff)
			ftruncate(cs->lfd, 0);
		close(cs->lfd);
	}
	mdb_env_close(cs->env);
	pthread_cond_destroy(&cs->gdone);
	pthread_mutex_destroy(&cs->glock);
	pthread_mutex_destroy(&cs->slock);
	pthread_mutex_destroy(&cs->llock);
	pthread_rwlock_destroy(&cs->maplock);
	pthread_mutex_destroy(&cs->wlock);
	free(cs->pend);
	free(cs);
}

void tfs_cstore_set_barrier(struct tfs_cstore *cs, int (*fn)(void *arg), void *arg)
{
	cs->barrier = fn;
	cs->barg = arg;
}

bool tfs_cstore_pending(struct tfs_cstore *cs)
{
	bool any;

	pthread_mutex_lock(&cs->llock);
	any = cs->plen != 0;
	pthread_mutex_unlock(&cs->llock);
	return any;
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

static void encode_op(const struct tfs_cstore_op *op, struct log_op *lo)
{
	memset(lo, 0, sizeof(*lo));
	lo->op = op->op;
	lo->fid = op->fid;
	lo->idx = op->idx;
	lo->size = op->size;
	if (op->op == TFS_CS_PUT_EXT) {
		lo->fid = op->rec->fid;
		lo->idx = op->rec->idx;
		lo->ev.version = EXT_VERSION;
		lo->ev.heat = op->rec->heat;
		lo->ev.slot = op->rec->slot;
		lo->ev.flags = op->rec->flags;
		memcpy(lo->ev.valid, op->rec->valid, sizeof(lo->ev.valid));
		memcpy(lo->ev.dirty, op->rec->dirty, sizeof(lo->ev.dirty));
	}
}

static int apply_one(struct tfs_cstore *cs, MDB_txn *txn, const struct log_op *op)
{
	unsigned char key[16];
	MDB_val k = { 16, key }, v;
	int rc;

	switch (op->op) {
	case TFS_CS_PUT_EXT:
		ext_key(op->fid, op->idx, key);
		v.mv_size = sizeof(op->ev);
		v.mv_data = (void *)&op->ev;
		return mdb_put(txn, cs->dbi[DB_EXT], &k, &v, 0);
	case TFS_CS_DEL_EXT:
		ext_key(op->fid, op->idx, key);
		rc = mdb_del(txn, cs->dbi[DB_EXT], &k, NULL);
		return rc == MDB_NOTFOUND ? 0 : rc;
	case TFS_CS_PUT_SIZE:
	case TFS_CS_PUT_PIN:	/* both fid -> u64 (the size, the extents reserved) */
		tfs_be64(op->fid, key);
		k.mv_size = 8;
		v.mv_size = sizeof(op->size);
		v.mv_data = (void *)&op->size;
		return mdb_put(txn, cs->dbi[op->op == TFS_CS_PUT_PIN ? DB_PIN : DB_SIZE], &k, &v, 0);
	case TFS_CS_DEL_SIZE:
	case TFS_CS_DEL_PIN:
		tfs_be64(op->fid, key);
		k.mv_size = 8;
		rc = mdb_del(txn, cs->dbi[op->op == TFS_CS_DEL_PIN ? DB_PIN : DB_SIZE], &k, NULL);
		return rc == MDB_NOTFOUND ? 0 : rc;
	}
	return -EINVAL;
}

struct apply_arg {
	struct tfs_cstore *cs;
	const unsigned char *ents;	/* log entries, in seq order */
	size_t len;
	uint64_t seq;			/* the last of them */
};

static int apply_fn(MDB_txn *txn, void *arg)
{
	struct apply_arg *aa = arg;
	int rc = 0;

	for (size_t off = 0; off < aa->len && rc == 0;) {
		struct log_hdr h;

		memcpy(&h, aa->ents + off, sizeof(h));
		for (uint32_t i = 0; i < h.nops && rc == 0; i++) {
			struct log_op op;

			memcpy(&op, aa->ents + off + sizeof(h) + i * sizeof(op), sizeof(op));
			rc = apply_one(aa->cs, txn, &op);
		}
		off += entry_len(&h);
	}
	return rc ? rc : put_u64(txn, aa->cs, "logseq", aa->seq);
}

/* TIERFS_FAULT's store_put_delay=MS[:N] (fault.c lists it; tests only):
 * every batch that puts an extent record sleeps MS ms before it is
 * logged, or the N-th such batch only.  Read once, process-wide. */
static long put_delay_ms;
static unsigned long put_delay_nth, put_batches;
static pthread_once_t put_delay_once = PTHREAD_ONCE_INIT;

static void put_delay_read(void)
{
	const char *t = tfs_spec_value(getenv("TIERFS_FAULT"), "store_put_delay");

	if (t && sscanf(t, "%ld:%lu", &put_delay_ms, &put_delay_nth) < 1)
		put_delay_ms = 0;
}

static void put_delay(const struct tfs_cstore_op *ops, unsigned n)
{
	pthread_once(&put_delay_once, put_delay_read);
	if (put_delay_ms <= 0)
		return;
	for (unsigned i = 0; i < n; i++) {
		unsigned long k;

		if (ops[i].op != TFS_CS_PUT_EXT)
			continue;
		k = __atomic_add_fetch(&put_batches, 1, __ATOMIC_RELAXED);
		if (!put_delay_nth || k == put_delay_nth)
			usleep((useconds_t)put_delay_ms * 1000);
		return;
	}
}

int tfs_cstore_apply(struct tfs_cstore *cs, const struct tfs_cstore_op *ops, unsigned n)
{
	size_t len = sizeof(struct log_hdr) + (size_t)n * sizeof(struct log_op);
	unsigned char *buf;
	struct log_hdr *h;
	bool full;
	int rc;

	if (n == 0)
		return 0;
	for (unsigned i = 0; i < n; i++)
		if (ops[i].op > TFS_CS_DEL_PIN || (ops[i].op == TFS_CS_PUT_EXT && !ops[i].rec))
			return -EINVAL;
	put_delay(ops, n);
	buf = tfs_scratch_array(TFS_SCR_LOG, len, 1);	/* the thread's (scratch.c) */
	if (!buf)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		encode_op(&ops[i], (struct log_op *)(buf + sizeof(*h)) + i);
	h = (struct log_hdr *)buf;
	pthread_mutex_lock(&cs->llock);
	*h = (struct log_hdr){ .magic = LOG_MAGIC, .nops = n, .seq = cs->seq + 1,
			       .epoch = cs->epoch };
	h->crc = crc32c(buf, len);
	rc = write_all(cs->lfd, buf, len, cs->loff);
	if (rc == 0)
		rc = pend_add(cs, buf, len);
	if (rc == 0) {
		cs->seq++;
		cs->loff += len;
	}
	full = cs->plen > PEND_MAX;
	pthread_mutex_unlock(&cs->llock);
	if (rc)
		tfs_err("cache store %s: cannot log an update: %s", cs->dir, strerror(-rc));
	else if (full)
		tfs_cstore_sync(cs);	/* logged: a failure here is the next sync's */
	return rc;
}

/* One durability point (invariant 7). */
static int sync_point(struct tfs_cstore *cs)
{
	struct apply_arg aa = { .cs = cs };
	unsigned char *taken;
	int rc = 0;

	pthread_mutex_lock(&cs->slock);
	pthread_mutex_lock(&cs->llock);
	taken = cs->pend;
	aa.ents = taken;
	aa.len = cs->plen;
	aa.seq = cs->seq;
	cs->pend = NULL;
	cs->plen = cs->pcap = 0;
	pthread_mutex_unlock(&cs->llock);
	/* every slot byte the entries name is durable before they are
	 * (invariant 7); with no entry too: an overwrite of dirty sectors
	 * changes no record, and its bytes must be durable all the same */
	if (cs->barrier)
		rc = cs->barrier(cs->barg);
	if (aa.len == 0) {
		if (rc)
			tfs_err("cache store %s: sync failed: %s", cs->dir, strerror(-rc));
		goto out;
	}
	if (rc == 0)
		rc = write_txn(cs, apply_fn, &aa);
	pthread_mutex_lock(&cs->llock);
	if (rc) {
		/* still pending, ahead of what was appended meanwhile */
		unsigned char *later = cs->pend;
		size_t llen = cs->plen;

		cs->pend = taken;
		cs->plen = cs->pcap = aa.len;
		taken = NULL;
		if (llen && pend_add(cs, later, llen))
			rc = -ENOMEM;	/* cannot happen silently: logged below */
		free(later);
	} else {
		cs->synced = aa.seq;
		if (cs->loff > LOG_COMPACT) {
			int r = log_rewrite(cs);

			if (r)
				tfs_warn("cache store %s: log compaction: %s", cs->dir,
					 strerror(-r));
		}
	}
	pthread_mutex_unlock(&cs->llock);
	if (rc)
		tfs_err("cache store %s: sync failed: %s", cs->dir, strerror(-rc));
out:
	free(taken);
	pthread_mutex_unlock(&cs->slock);
	return rc;
}

/* Invariant 10: the result of the last finished point, which began after
 * this call's ticket; made by this caller or another. */
int tfs_cstore_sync(struct tfs_cstore *cs)
{
	uint64_t mine, upto;
	int rc;

	pthread_mutex_lock(&cs->glock);
	mine = ++cs->greq;
	while (cs->gdone_upto < mine) {
		if (cs->gbusy) {
			pthread_cond_wait(&cs->gdone, &cs->glock);
			continue;
		}
		cs->gbusy = true;
		upto = cs->greq;
		pthread_mutex_unlock(&cs->glock);
		rc = sync_point(cs);
		pthread_mutex_lock(&cs->glock);
		cs->gbusy = false;
		cs->gdone_upto = upto;
		cs->grc = rc;
		pthread_cond_broadcast(&cs->gdone);
	}
	rc = cs->grc;
	pthread_mutex_unlock(&cs->glock);
	return rc;
}

static int epoch_fn(MDB_txn *txn, void *arg)
{
	struct tfs_cstore *cs = arg;
	int rc = put_u64(txn, cs, "logepoch", cs->epoch + 1);

	return rc ? rc : put_u64(txn, cs, "logseq", cs->synced);
}

/* A new epoch and an empty log, nothing pending (slock held). */
static int log_reset(struct tfs_cstore *cs)
{
	int rc = write_txn(cs, epoch_fn, cs);

	if (rc)
		return rc;
	pthread_mutex_lock(&cs->llock);
	cs->epoch++;
	cs->seq = cs->synced;
	cs->plen = 0;
	cs->loff = 0;
	if (ftruncate(cs->lfd, 0))
		rc = -errno;
	pthread_mutex_unlock(&cs->llock);
	return rc;
}

int tfs_cstore_drop_unsynced(struct tfs_cstore *cs, uint64_t *dropped)
{
	int rc;

	pthread_mutex_lock(&cs->slock);
	*dropped = cs->seq - cs->synced;
	rc = log_reset(cs);
	pthread_mutex_unlock(&cs->slock);
	return rc;
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

	rc = tfs_cstore_sync(cs);	/* the walk sees what was applied */
	if (rc)
		return rc;
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

/* A database of fid -> u64 records ("size", "pin"), walked in fid order. */
struct u64_visit {
	int (*cb)(void *arg, uint64_t fid, uint64_t v);
	void *arg;
	const char *what;	/* for the message about a bad record */
};

static int u64_visit(void *arg, const MDB_val *k, const MDB_val *v)
{
	struct u64_visit *uv = arg;
	uint64_t x;

	if (k->mv_size != 8 || v->mv_size != sizeof(x)) {
		tfs_err("cache store: bad %s record (key %zu, value %zu bytes)", uv->what,
			k->mv_size, v->mv_size);
		return -EUCLEAN;
	}
	memcpy(&x, v->mv_data, sizeof(x));
	return uv->cb(uv->arg, tfs_from_be64(k->mv_data), x);
}

int tfs_cstore_size_foreach(struct tfs_cstore *cs,
			    int (*cb)(void *arg, uint64_t fid, uint64_t size), void *arg)
{
	struct u64_visit uv = { cb, arg, "size" };

	return db_foreach(cs, DB_SIZE, u64_visit, &uv);
}

int tfs_cstore_pin_foreach(struct tfs_cstore *cs,
			   int (*cb)(void *arg, uint64_t fid, uint64_t need), void *arg)
{
	struct u64_visit uv = { cb, arg, "pin" };

	return db_foreach(cs, DB_PIN, u64_visit, &uv);
}

static int clear_fn(MDB_txn *txn, void *arg)
{
	struct tfs_cstore *cs = arg;
	int rc = mdb_drop(txn, cs->dbi[DB_EXT], 0);

	if (rc == 0)
		rc = mdb_drop(txn, cs->dbi[DB_PIN], 0);
	return rc ? rc : mdb_drop(txn, cs->dbi[DB_SIZE], 0);
}

int tfs_cstore_clear(struct tfs_cstore *cs)
{
	int rc;

	/* what is pending would be dropped by the clear anyway */
	pthread_mutex_lock(&cs->slock);
	rc = write_txn(cs, clear_fn, cs);
	if (rc == 0)
		rc = log_reset(cs);
	pthread_mutex_unlock(&cs->slock);
	return rc;
}
