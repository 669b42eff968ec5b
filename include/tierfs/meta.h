/* The metadata store: the only module that talks to LMDB.
 *
 * Today it holds the namespace intent log and the file-identity counter of
 * an array (in MEMBER0/.tierfs/journal).  Every function returns 0 or -errno
 * (MDB_* codes are mapped here and nowhere else).
 */
#ifndef TIERFS_META_H
#define TIERFS_META_H

#include <stddef.h>
#include <stdint.h>

struct tfs_meta;

int tfs_meta_open(const char *dir, struct tfs_meta **out);
void tfs_meta_close(struct tfs_meta *mt);
/* Make every committed transaction durable (fsync). */
int tfs_meta_sync(struct tfs_meta *mt);

/* Intent log: records of namespace operations that may be half-applied. */
int tfs_meta_intent_add(struct tfs_meta *mt, const void *rec, size_t len, uint64_t *seq);
int tfs_meta_intent_del(struct tfs_meta *mt, uint64_t seq);
typedef int (*tfs_meta_intent_cb)(void *arg, uint64_t seq, const void *rec, size_t len);
/* Visit intents oldest first; stops at the first non-zero return. */
int tfs_meta_intent_foreach(struct tfs_meta *mt, tfs_meta_intent_cb cb, void *arg);
int tfs_meta_intent_count(struct tfs_meta *mt, uint64_t *count);

/* Reserve count consecutive values of a persistent counter; *first is the
 * first.  Values handed out are never handed out again, crash or not. */
int tfs_meta_counter_reserve(struct tfs_meta *mt, const char *name, uint64_t count,
			     uint64_t *first);

#endif
