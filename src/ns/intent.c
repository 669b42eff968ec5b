/* intent.c - the intent records that make a change on N members
 * crash-safe.
 *
 * Owns: the record's encoding (tfs_intent_encode, tfs_intent_decode:
 * replay.c reads it back), and the bracket every change of ns.c, attr.c
 * and xattr.c is made in: ns_intent_begin before the primary is touched,
 * ns_intent_end (ns_i.h) after the last member, ns_truncate_intent_end
 * for a truncate's.
 *
 * Invariants:
 *  1. On arrays of more than one member, a change that touches several
 *     members is bracketed by an intent record in LMDB: added before member
 *     0 is touched, deleted after the last member is done and before the
 *     reply.  So an intent exists only for a change that may be half done,
 *     and replay.c can finish it by making members 1..n-1 agree with member
 *     0 at the recorded paths.
 *  2. A truncate's intent is deleted at once, not retired with the next
 *     journal write: replayed, it would cut what the file got since.  One
 *     the journal refuses to delete goes with the next transaction that
 *     works (meta.c), and until then the file's fsync fails
 *     (tfs_meta_sync_to), so nothing it covers can be cut by a replay.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/ns.h"
#include "ns_i.h"

struct intent_hdr {
	uint32_t op, flags;
	uint64_t arg;
	uint64_t fid;		/* the file changed, or 0 */
	uint16_t len1, len2;
};

int tfs_intent_encode(const struct tfs_intent *it, void *buf, size_t len)
{
	struct intent_hdr h = { it->op, it->flags, it->arg, it->fid, 0, 0 };
	size_t l1 = strlen(it->path), l2 = it->path2 ? strlen(it->path2) : 0;

	if (sizeof(h) + l1 + l2 > len || l1 > UINT16_MAX || l2 > UINT16_MAX)
		return -ENAMETOOLONG;
	h.len1 = (uint16_t)l1;
	h.len2 = (uint16_t)l2;
	memcpy(buf, &h, sizeof(h));
	memcpy((char *)buf + sizeof(h), it->path, l1);
	if (l2)
		memcpy((char *)buf + sizeof(h) + l1, it->path2, l2);
	return (int)(sizeof(h) + l1 + l2);
}

int tfs_intent_decode(const void *buf, size_t len, struct tfs_intent *it, char *p1, char *p2)
{
	struct intent_hdr h;

	if (len < sizeof(h))
		return -EINVAL;
	memcpy(&h, buf, sizeof(h));
	if (sizeof(h) + h.len1 + h.len2 != len)
		return -EINVAL;
	memcpy(p1, (const char *)buf + sizeof(h), h.len1);
	p1[h.len1] = 0;
	memcpy(p2, (const char *)buf + sizeof(h) + h.len1, h.len2);
	p2[h.len2] = 0;
	it->op = h.op;
	it->flags = h.flags;
	it->arg = h.arg;
	it->fid = h.fid;
	it->path = p1;
	it->path2 = p2;
	return 0;
}

bool ns_intent_kept(const struct tfs_fs *fs, enum tfs_intent_op op)
{
	/* one member: nothing to make agree, but a truncate with an SSD tier
	 * is replayed so the members follow the cache's cut (tfs_data_truncate) */
	return fs->n > 1 || (op == TFS_I_TRUNCATE && fs->tier);
}

/* Record a change (op, flags, arg, fid of it) at a (and b, or the extra
 * string) before touching member 0; *seq = 0 means "no record". */
int ns_intent_begin(struct tfs_fs *fs, struct tfs_intent it, const struct tfs_loc *a,
		    const struct tfs_loc *b, const char *extra, uint64_t *seq)
{
	char *p1, *p2 = NULL, *rec = NULL;
	size_t cap;
	int len;

	*seq = 0;
	if (!ns_intent_kept(fs, it.op))
		return 0;
	p1 = tfs_loc_path(fs, a);
	if (b)
		p2 = tfs_loc_path(fs, b);
	if (!p1 || (b && !p2)) {
		len = -ENOMEM;
		goto out;
	}
	it.path = p1;
	it.path2 = b ? p2 : extra;
	cap = sizeof(struct intent_hdr) + strlen(p1) + (it.path2 ? strlen(it.path2) : 0);
	rec = malloc(cap);
	len = rec ? tfs_intent_encode(&it, rec, cap) : -ENOMEM;
	if (len >= 0)
		len = tfs_meta_intent_add(fs->meta, rec, (size_t)len, seq);
out:
	free(p1);
	free(p2);
	free(rec);
	return len < 0 ? len : 0;
}

/* A truncate's intent is deleted at once: replayed, it would cut what the
 * file got since.  If the journal refuses, the record goes with the next
 * transaction that works (meta.c); meanwhile the file's fsync fails
 * (tfs_meta_sync_to), so nothing it covers can be cut by a replay. */
void ns_truncate_intent_end(struct tfs_fs *fs, uint64_t seq)
{
	int rc;

	if (!seq || (rc = tfs_meta_intent_del(fs->meta, seq)) == 0)
		return;
	if (tfs_space_error(rc))
		tfs_warn("intent %" PRIu64 ": cannot retire it yet: journal: %s", seq,
			 strerror(-rc));
	else
		tfs_err("intent %" PRIu64 ": cannot retire it: %s", seq, strerror(-rc));
}
