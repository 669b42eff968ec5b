/* The metadata store: the only module that talks to LMDB.
 *
 * It holds the array's journal: the namespace intent log, the file-identity
 * counter, the parity write-intent marks and rebuild progress.  A copy lives
 * on every member that is not failed (MEMBER/.tierfs/journal) and every
 * write goes to all copies, so losing members the level survives loses no
 * journal.  Every function that can fail returns 0 or -errno (MDB_* codes
 * are mapped here and nowhere else; tfs_meta_set_has also returns 1).
 */
#ifndef TIERFS_META_H
#define TIERFS_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TFS_META_MAX 32

struct tfs_meta;

/* Open (creating) the n copies in dirs[], each tagged with its member, and
 * merge them (union of records, maximum of counters: meta.c invariant 1).
 * Returns 0 with *out set, or -errno: -EINVAL for n 0 or above
 * TFS_META_MAX, -ENOMEM, a copy's LMDB error. */
int tfs_meta_open(const char *const *dirs, const uint32_t *tags, unsigned n,
		  struct tfs_meta **out);
/* Commit the retired intents and sync (a failure is logged: they replay
 * as no-ops), then close every copy (mt may be NULL). */
void tfs_meta_close(struct tfs_meta *mt);
/* Stop using the copy tagged tag (its member failed); the last copy stays. */
void tfs_meta_drop(struct tfs_meta *mt, uint32_t tag);
/* Start a copy in dir (a replacement member) holding what the others hold.
 * Returns 0, or -errno (-ENOSPC: TFS_META_MAX copies already). */
int tfs_meta_add(struct tfs_meta *mt, const char *dir, uint32_t tag);
/* Make every committed transaction durable (mdb_env_sync of each copy,
 * meta.c invariant 2).  Returns 0 or -errno. */
int tfs_meta_sync(struct tfs_meta *mt);
/* Returns the journal's commit generation: it grows with every write
 * transaction. */
uint64_t tfs_meta_gen(struct tfs_meta *mt);
/* Format the journal's write transactions and syncs since the open as
 * "journal.commits=N\njournal.syncs=N\n" into buf.  Returns the length
 * snprintf gives. */
int tfs_meta_stats(struct tfs_meta *mt, char *buf, size_t len);
/* Returns true if every commit up to generation gen is durable. */
bool tfs_meta_synced(struct tfs_meta *mt, uint64_t gen);
/* Returns true if tfs_meta_sync_to(mt, gen) has anything to do (a sync or
 * an owed deletion), as far as can be seen now. */
bool tfs_meta_sync_due(struct tfs_meta *mt, uint64_t gen);
/* Make every commit up to generation gen durable and every intent whose own
 * add or delete failed deleted (durably): a no-op (no lock, no sync) when
 * both are so.  Intents retired as finished stay for the next write.
 * Returns 0 or -errno. */
int tfs_meta_sync_to(struct tfs_meta *mt, uint64_t gen);

/* Intent log: records of namespace operations that may be half-applied. */
/* Add record rec (len bytes), committed (with the retired intents'
 * deletions) and synced on every copy before this returns, so a power
 * cut cannot undo it once its change reaches a member (meta.c invariant
 * 2); *seq is its number.  Returns 0 or
 * -errno (-ENOSPC: a full member filesystem, meta.c invariant 4); a
 * failed add may be in some copies, so it is retired too. */
int tfs_meta_intent_add(struct tfs_meta *mt, const void *rec, size_t len, uint64_t *seq);
/* Delete intent seq now, in its own commit (not synced).  Returns 0 or
 * -errno; on failure it is retired, and deleted by a later commit. */
int tfs_meta_intent_del(struct tfs_meta *mt, uint64_t seq);
/* The change of intent seq is done: the next write transaction deletes it. */
void tfs_meta_intent_retire(struct tfs_meta *mt, uint64_t seq);
typedef int (*tfs_meta_intent_cb)(void *arg, uint64_t seq, const void *rec, size_t len);
/* Visit intents oldest first, from the first live copy.  Returns 0, the
 * first non-zero return of cb (which stops the visit), or -errno.
 * Visitors (here and in set_foreach) must not write to the journal. */
int tfs_meta_intent_foreach(struct tfs_meta *mt, tfs_meta_intent_cb cb, void *arg);
/* *count: the intents in the journal.  Returns 0 or -errno. */
int tfs_meta_intent_count(struct tfs_meta *mt, uint64_t *count);

/* Reserve count consecutive values of a persistent counter; *first is the
 * first.  Values handed out are never handed out again, crash or not.
 * Returns 0 or -errno. */
int tfs_meta_counter_reserve(struct tfs_meta *mt, const char *name, uint64_t count,
			     uint64_t *first);

/* Persistent sets of (a, b) pairs. */
enum tfs_meta_set {
	TFS_SET_MARK,		/* (fid bucket, region): parity regions with writes in flight */
	TFS_SET_REBUILT,	/* (fid, 0): file done by the running rebuild */
	TFS_SET_CACHE,		/* (uuid hi, uuid lo): the SSD tier bound to the array */
	TFS_SET_CDIRTY,		/* (fid, 0): file with writes only in the SSD tier */
};
/* Add (a, b) to set, committed (present already is no error).  Returns 0
 * or -errno. */
int tfs_meta_set_put(struct tfs_meta *mt, enum tfs_meta_set set, uint64_t a, uint64_t b);
/* Delete (a, b) from set, committed (absent is no error).  Returns 0 or
 * -errno. */
int tfs_meta_set_del(struct tfs_meta *mt, enum tfs_meta_set set, uint64_t a, uint64_t b);
/* Delete n pairs in one transaction (absent ones are no error).  Returns
 * 0 or -errno. */
int tfs_meta_set_del_many(struct tfs_meta *mt, enum tfs_meta_set set, const uint64_t (*keys)[2],
			  size_t n);
/* Add (put[i]) or delete each of n pairs, in order, in one transaction
 * (present or absent already is no error).  Returns 0 or -errno (then
 * none of them is committed). */
int tfs_meta_set_apply(struct tfs_meta *mt, enum tfs_meta_set set, const uint64_t (*keys)[2],
		       const bool *put, size_t n);
/* Add (a, b) to set with the next write transaction, whatever it is for
 * (meta.c invariant 9): committed once a transaction that begins after
 * this call has committed.  Returns false (nothing queued) if the queue
 * is full: the caller puts it itself. */
bool tfs_meta_set_put_next(struct tfs_meta *mt, enum tfs_meta_set set, uint64_t a, uint64_t b);
/* Delete every pair of set, committed.  Returns 0 or -errno. */
int tfs_meta_set_clear(struct tfs_meta *mt, enum tfs_meta_set set);
/* Returns 1 if (a, b) is in set, 0 if not, or -errno. */
int tfs_meta_set_has(struct tfs_meta *mt, enum tfs_meta_set set, uint64_t a, uint64_t b);
typedef int (*tfs_meta_set_cb)(void *arg, uint64_t a, uint64_t b);
/* Visit the pairs of set in (a, b) order.  Returns 0, the first non-zero
 * return of cb (which stops the visit), or -errno. */
int tfs_meta_set_foreach(struct tfs_meta *mt, enum tfs_meta_set set, tfs_meta_set_cb cb,
			 void *arg);
/* *count: the pairs in set.  Returns 0 or -errno. */
int tfs_meta_set_count(struct tfs_meta *mt, enum tfs_meta_set set, uint64_t *count);

#endif
