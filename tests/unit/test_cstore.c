/* test_cstore: the SSD tier's LMDB metadata store (src/meta/cstore.c) in a scratch directory: records, batches, order, info strings, reopen, map growth under a concurrent reader, bad stores, the log, shared durability points. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tierfs/cstore.h"
#include "tierfs/log.h"
#include "unit.h"

/* ------------------------------------------------------------------ */
/* Reporting                                                           */
/* ------------------------------------------------------------------ */

enum {
	G_OPEN, G_ORDER, G_APPLY, G_DEL, G_SIZE, G_PIN, G_INFO, G_CLEAR, G_REOPEN, G_GROW,
	G_READER, G_BAD, G_LOG, G_GROUP, G_COUNT
};

static struct unit_group groups[G_COUNT] = {
	[G_OPEN] = { .name = "open/close/sync" },
	[G_ORDER] = { .name = "put, foreach in (fid, idx) order" },
	[G_APPLY] = { .name = "apply: batches, all or nothing" },
	[G_DEL] = { .name = "del, del of a missing key" },
	[G_SIZE] = { .name = "size records" },
	[G_PIN] = { .name = "pin records" },
	[G_INFO] = { .name = "info get/set" },
	[G_CLEAR] = { .name = "clear" },
	[G_REOPEN] = { .name = "reopen keeps everything" },
	[G_GROW] = { .name = "map growth past 64 MiB" },
	[G_READER] = { .name = "reader during growth" },
	[G_BAD] = { .name = "bad stores: error, no crash" },
	[G_LOG] = { .name = "log: kill, power cut, torn tail, barrier" },
	[G_GROUP] = { .name = "concurrent syncs share durability points" },
};

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static char root[64];

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void rm_rf(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void subdir(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", root, name);
}

/* A record that is a function of (fid, idx), so a walk can check it. */
static void make_rec(struct tfs_cext_rec *r, uint64_t fid, uint64_t idx)
{
	uint64_t h = (fid * 0x9e3779b97f4a7c15ull) ^ (idx * 0xc2b2ae3d27d4eb4full);

	memset(r, 0, sizeof(*r));
	r->fid = fid;
	r->idx = idx;
	r->slot = (uint32_t)h;
	r->heat = (uint16_t)(h >> 32);
	r->flags = 0;
	for (int w = 0; w < TFS_CEXT_WORDS; w++) {
		r->valid[w] = h * (uint64_t)(w + 1) | 1;
		r->dirty[w] = r->valid[w] & (h >> w);
	}
}

static int rec_ok(const struct tfs_cext_rec *r)
{
	struct tfs_cext_rec want;

	make_rec(&want, r->fid, r->idx);
	return memcmp(&want, r, sizeof(want)) == 0;
}

static int put_ext(struct tfs_cstore *cs, uint64_t fid, uint64_t idx)
{
	struct tfs_cext_rec r;
	struct tfs_cstore_op op = { TFS_CS_PUT_EXT, &r, 0, 0, 0 };

	make_rec(&r, fid, idx);
	return tfs_cstore_apply(cs, &op, 1);
}

/* Collects a walk: keys, whether every record checked out and was in order. */
struct walk {
	uint64_t n, max;
	uint64_t (*key)[2];
	uint64_t last_fid, last_idx;
	int bad, unordered;
	uint64_t stop_at;	/* return 42 at this record (1-based), 0: never */
};

static int walk_cb(void *arg, const struct tfs_cext_rec *r)
{
	struct walk *w = arg;

	if (w->n && (r->fid < w->last_fid || (r->fid == w->last_fid && r->idx <= w->last_idx)))
		w->unordered++;
	if (!rec_ok(r))
		w->bad++;
	if (w->key && w->n < w->max) {
		w->key[w->n][0] = r->fid;
		w->key[w->n][1] = r->idx;
	}
	w->last_fid = r->fid;
	w->last_idx = r->idx;
	w->n++;
	return w->stop_at && w->n == w->stop_at ? 42 : 0;
}

static int walk(struct tfs_cstore *cs, struct walk *w)
{
	uint64_t (*key)[2] = w->key;
	uint64_t max = w->max, stop = w->stop_at;

	memset(w, 0, sizeof(*w));
	w->key = key;
	w->max = max;
	w->stop_at = stop;
	return tfs_cstore_ext_foreach(cs, walk_cb, w);
}

static int has_ext(struct tfs_cstore *cs, uint64_t fid, uint64_t idx)
{
	uint64_t key[64][2];
	struct walk w = { .key = key, .max = 64 };

	if (walk(cs, &w) || w.n > 64)
		return -1;
	for (uint64_t i = 0; i < w.n; i++)
		if (key[i][0] == fid && key[i][1] == idx)
			return 1;
	return 0;
}

struct sizes {
	uint64_t n, fid[16], size[16];
};

static int size_cb(void *arg, uint64_t fid, uint64_t size)
{
	struct sizes *s = arg;

	if (s->n < 16) {
		s->fid[s->n] = fid;
		s->size[s->n] = size;
	}
	s->n++;
	return 0;
}

static int sizes_of(struct tfs_cstore *cs, struct sizes *s)
{
	memset(s, 0, sizeof(*s));
	return tfs_cstore_size_foreach(cs, size_cb, s);
}

struct pins {
	uint64_t n, fid[16], need[16];
};

static int pin_cb(void *arg, uint64_t fid, uint64_t need)
{
	struct pins *p = arg;

	if (p->n < 16) {
		p->fid[p->n] = fid;
		p->need[p->n] = need;
	}
	p->n++;
	return 0;
}

static int pins_of(struct tfs_cstore *cs, struct pins *p)
{
	memset(p, 0, sizeof(*p));
	return tfs_cstore_pin_foreach(cs, pin_cb, p);
}

/* ------------------------------------------------------------------ */
/* Tests on one small store                                            */
/* ------------------------------------------------------------------ */

/* fids and idxs whose big-endian order differs from their little-endian
 * and 32-bit truncated orders. */
static const uint64_t fids[] = {
	1, 2, 255, 256, 0xffffffffull, 0x100000000ull, 0x100000001ull,
	0x1ff00000000ull, 0x8000000000000000ull, 0xfffffffffffffffeull,
};
static const uint64_t idxs[] = { 0, 1, 256, 0x100000000ull, UINT64_MAX };
#define NF (sizeof(fids) / sizeof(fids[0]))
#define NI (sizeof(idxs) / sizeof(idxs[0]))

static void test_order(struct tfs_cstore *cs)
{
	uint64_t key[NF * NI][2];
	struct walk w = { .key = key, .max = NF * NI };
	unsigned i = 0;
	int rc;

	snprintf(ctx, sizeof(ctx), "order");
	/* put in a scrambled order */
	for (unsigned k = 0; k < NF * NI; k++) {
		unsigned j = (k * 7 + 3) % (NF * NI);

		rc = put_ext(cs, fids[j / NI], idxs[j % NI]);
		CHECK(G_ORDER, rc == 0, "put %u: %d", j, rc);
	}
	rc = walk(cs, &w);
	CHECK(G_ORDER, rc == 0, "foreach: %d", rc);
	CHECK(G_ORDER, w.n == NF * NI, "%" PRIu64 " records, want %zu", w.n, NF * NI);
	CHECK(G_ORDER, w.bad == 0, "%d records differ from what was put", w.bad);
	CHECK(G_ORDER, w.unordered == 0, "%d records out of order", w.unordered);
	for (unsigned f = 0; f < NF && w.n == NF * NI; f++)
		for (unsigned x = 0; x < NI; x++, i++)
			CHECK(G_ORDER, key[i][0] == fids[f] && key[i][1] == idxs[x],
			      "record %u is (%" PRIx64 ", %" PRIx64 ")", i, key[i][0], key[i][1]);

	/* overwrite: a put of an existing key replaces it */
	{
		struct tfs_cext_rec r;
		struct tfs_cstore_op op = { TFS_CS_PUT_EXT, &r, 0, 0, 0 };
		struct walk w2 = { .stop_at = 1 };

		make_rec(&r, fids[0], idxs[0]);
		r.slot ^= 1;
		rc = tfs_cstore_apply(cs, &op, 1);
		CHECK(G_ORDER, rc == 0, "overwrite: %d", rc);
		rc = walk(cs, &w2);
		CHECK(G_ORDER, rc == 42 && w2.n == 1 && w2.bad == 1,
		      "overwrite: walk %d, %" PRIu64 " records, %d changed", rc, w2.n, w2.bad);
		r.slot ^= 1;
		rc = tfs_cstore_apply(cs, &op, 1);
		CHECK(G_ORDER, rc == 0, "overwrite back: %d", rc);
	}

	/* a non-zero return of cb stops the walk and is returned */
	w.stop_at = 3;
	rc = walk(cs, &w);
	CHECK(G_ORDER, rc == 42 && w.n == 3, "stop: %d after %" PRIu64, rc, w.n);
}

static void test_apply(struct tfs_cstore *cs)
{
	struct tfs_cext_rec r[4];
	struct tfs_cstore_op ops[8];
	struct sizes s;
	struct walk w = { 0 };
	int rc;

	snprintf(ctx, sizeof(ctx), "apply");
	rc = tfs_cstore_clear(cs);
	CHECK(G_APPLY, rc == 0, "clear: %d", rc);
	rc = tfs_cstore_apply(cs, NULL, 0);
	CHECK(G_APPLY, rc == 0, "empty batch: %d", rc);

	/* one batch: four puts, a size, a delete of one of the puts, a
	 * delete of a size put earlier in the batch, a size put again */
	for (int i = 0; i < 4; i++)
		make_rec(&r[i], 7, (uint64_t)i);
	ops[0] = (struct tfs_cstore_op){ TFS_CS_PUT_EXT, &r[0], 0, 0, 0 };
	ops[1] = (struct tfs_cstore_op){ TFS_CS_PUT_EXT, &r[1], 0, 0, 0 };
	ops[2] = (struct tfs_cstore_op){ TFS_CS_PUT_SIZE, NULL, 7, 0, 12345 };
	ops[3] = (struct tfs_cstore_op){ TFS_CS_PUT_EXT, &r[2], 0, 0, 0 };
	ops[4] = (struct tfs_cstore_op){ TFS_CS_DEL_EXT, NULL, 7, 1, 0 };
	ops[5] = (struct tfs_cstore_op){ TFS_CS_PUT_EXT, &r[3], 0, 0, 0 };
	ops[6] = (struct tfs_cstore_op){ TFS_CS_DEL_SIZE, NULL, 7, 0, 0 };
	ops[7] = (struct tfs_cstore_op){ TFS_CS_PUT_SIZE, NULL, 7, 0, 999 };
	rc = tfs_cstore_apply(cs, ops, 8);
	CHECK(G_APPLY, rc == 0, "batch: %d", rc);
	rc = walk(cs, &w);
	CHECK(G_APPLY, rc == 0 && w.n == 3 && w.bad == 0, "after batch: %d, %" PRIu64 " records",
	      rc, w.n);
	CHECK(G_APPLY, has_ext(cs, 7, 1) == 0, "deleted in the batch, still there");
	CHECK(G_APPLY, has_ext(cs, 7, 3) == 1, "put after the delete, missing");
	rc = sizes_of(cs, &s);
	CHECK(G_APPLY, rc == 0 && s.n == 1 && s.fid[0] == 7 && s.size[0] == 999,
	      "size after batch: %d, %" PRIu64 " records, size %" PRIu64, rc, s.n, s.size[0]);

	/* a batch that fails half way (a PUT_EXT without a record; an
	 * unknown op) leaves nothing of itself behind */
	for (int bad = 0; bad < 2; bad++) {
		struct tfs_cext_rec nr;

		make_rec(&nr, 8, 0);
		ops[0] = (struct tfs_cstore_op){ TFS_CS_PUT_EXT, &nr, 0, 0, 0 };
		ops[1] = (struct tfs_cstore_op){ TFS_CS_DEL_EXT, NULL, 7, 0, 0 };
		ops[2] = (struct tfs_cstore_op){ TFS_CS_PUT_SIZE, NULL, 7, 0, 1 };
		ops[3] = (struct tfs_cstore_op){ bad ? (enum tfs_cstore_opcode)99 : TFS_CS_PUT_EXT,
						 NULL, 0, 0, 0 };
		rc = tfs_cstore_apply(cs, ops, 4);
		CHECK(G_APPLY, rc == -EINVAL, "bad batch %d: %d", bad, rc);
		CHECK(G_APPLY, has_ext(cs, 8, 0) == 0, "bad batch %d: its put stayed", bad);
		CHECK(G_APPLY, has_ext(cs, 7, 0) == 1, "bad batch %d: its delete stayed", bad);
		rc = sizes_of(cs, &s);
		CHECK(G_APPLY, rc == 0 && s.n == 1 && s.size[0] == 999,
		      "bad batch %d: its size stayed (%" PRIu64 ")", bad, s.size[0]);
	}
}

static void test_del(struct tfs_cstore *cs)
{
	struct tfs_cstore_op op = { TFS_CS_DEL_EXT, NULL, 7, 0, 0 };
	int rc;

	snprintf(ctx, sizeof(ctx), "del");
	rc = tfs_cstore_apply(cs, &op, 1);
	CHECK(G_DEL, rc == 0 && has_ext(cs, 7, 0) == 0, "del: %d", rc);
	rc = tfs_cstore_apply(cs, &op, 1);
	CHECK(G_DEL, rc == 0, "del again: %d", rc);
	op.fid = 0xdeadbeefcafeull;
	op.idx = 5;
	rc = tfs_cstore_apply(cs, &op, 1);
	CHECK(G_DEL, rc == 0, "del of a key never put: %d", rc);
	op.op = TFS_CS_DEL_SIZE;
	rc = tfs_cstore_apply(cs, &op, 1);
	CHECK(G_DEL, rc == 0, "del of a size never put: %d", rc);
	CHECK(G_DEL, has_ext(cs, 7, 2) == 1 && has_ext(cs, 7, 3) == 1, "other records went too");
}

static void test_size(struct tfs_cstore *cs)
{
	static const uint64_t f[] = { 0x100000000ull, 3, UINT64_MAX, 0xffffffffull };
	struct tfs_cstore_op op = { TFS_CS_PUT_SIZE, NULL, 0, 0, 0 };
	struct sizes s;
	int rc;

	snprintf(ctx, sizeof(ctx), "size");
	rc = tfs_cstore_clear(cs);
	CHECK(G_SIZE, rc == 0, "clear: %d", rc);
	for (int i = 0; i < 4; i++) {
		op.fid = f[i];
		op.size = f[i] ^ 0x123456789ull;
		rc = tfs_cstore_apply(cs, &op, 1);
		CHECK(G_SIZE, rc == 0, "put %d: %d", i, rc);
	}
	op.fid = 3;
	op.size = UINT64_MAX;	/* replaces */
	rc = tfs_cstore_apply(cs, &op, 1);
	CHECK(G_SIZE, rc == 0, "replace: %d", rc);
	rc = sizes_of(cs, &s);
	CHECK(G_SIZE, rc == 0 && s.n == 4, "foreach: %d, %" PRIu64 " records", rc, s.n);
	CHECK(G_SIZE, s.fid[0] == 3 && s.fid[1] == 0xffffffffull && s.fid[2] == 0x100000000ull &&
	      s.fid[3] == UINT64_MAX, "order %" PRIx64 " %" PRIx64 " %" PRIx64 " %" PRIx64,
	      s.fid[0], s.fid[1], s.fid[2], s.fid[3]);
	CHECK(G_SIZE, s.size[0] == UINT64_MAX && s.size[2] == (0x100000000ull ^ 0x123456789ull),
	      "values %" PRIx64 " %" PRIx64, s.size[0], s.size[2]);
	op.op = TFS_CS_DEL_SIZE;
	op.fid = 0xffffffffull;
	rc = tfs_cstore_apply(cs, &op, 1);
	CHECK(G_SIZE, rc == 0, "del: %d", rc);
	rc = sizes_of(cs, &s);
	CHECK(G_SIZE, rc == 0 && s.n == 3 && s.fid[1] == 0x100000000ull, "after del: %" PRIu64,
	      s.n);
}

static void test_info(struct tfs_cstore *cs)
{
	char buf[256], big[300];
	int rc;

	snprintf(ctx, sizeof(ctx), "info");
	rc = tfs_cstore_info_get(cs, "array", buf, sizeof(buf));
	CHECK(G_INFO, rc == -ENOENT, "missing key: %d", rc);
	rc = tfs_cstore_info_set(cs, "array", "uuid-1");
	CHECK(G_INFO, rc == 0, "set: %d", rc);
	rc = tfs_cstore_info_set(cs, "geometry", "extent=1M sectors=4K");
	CHECK(G_INFO, rc == 0, "set: %d", rc);
	rc = tfs_cstore_info_set(cs, "array", "uuid-2");
	CHECK(G_INFO, rc == 0, "replace: %d", rc);
	rc = tfs_cstore_info_get(cs, "array", buf, sizeof(buf));
	CHECK(G_INFO, rc == 0 && strcmp(buf, "uuid-2") == 0, "get: %d '%s'", rc, buf);
	rc = tfs_cstore_info_get(cs, "array", buf, 7);	/* "uuid-2" + NUL just fits */
	CHECK(G_INFO, rc == 0, "exact buffer: %d", rc);
	rc = tfs_cstore_info_get(cs, "array", buf, 6);
	CHECK(G_INFO, rc == -ERANGE, "short buffer: %d", rc);
	rc = tfs_cstore_info_set(cs, "empty", "");
	CHECK(G_INFO, rc == 0, "empty value: %d", rc);
	rc = tfs_cstore_info_get(cs, "empty", buf, sizeof(buf));
	CHECK(G_INFO, rc == 0 && buf[0] == '\0', "empty value: %d", rc);
	memset(big, 'x', sizeof(big));
	big[255] = '\0';
	rc = tfs_cstore_info_set(cs, "big", big);
	CHECK(G_INFO, rc == 0, "255 bytes: %d", rc);
	rc = tfs_cstore_info_get(cs, "big", buf, sizeof(buf));
	CHECK(G_INFO, rc == 0 && strlen(buf) == 255, "255 bytes: %d", rc);
	big[255] = 'x';
	big[256] = '\0';
	rc = tfs_cstore_info_set(cs, "big", big);
	CHECK(G_INFO, rc == -EINVAL, "256 bytes: %d", rc);
	rc = tfs_cstore_info_set(cs, "", "x");
	CHECK(G_INFO, rc == -EINVAL, "empty key: %d", rc);
	rc = tfs_cstore_info_get(cs, "geometry", buf, sizeof(buf));
	CHECK(G_INFO, rc == 0 && strcmp(buf, "extent=1M sectors=4K") == 0, "get: %d", rc);
}

static void test_clear(struct tfs_cstore *cs)
{
	struct walk w = { 0 };
	struct sizes s;
	char buf[64];
	int rc;

	snprintf(ctx, sizeof(ctx), "clear");
	for (uint64_t i = 0; i < 100; i++)
		put_ext(cs, i << 32, i);
	rc = tfs_cstore_clear(cs);
	CHECK(G_CLEAR, rc == 0, "clear: %d", rc);
	rc = walk(cs, &w);
	CHECK(G_CLEAR, rc == 0 && w.n == 0, "extents left: %" PRIu64, w.n);
	rc = sizes_of(cs, &s);
	CHECK(G_CLEAR, rc == 0 && s.n == 0, "sizes left: %" PRIu64, s.n);
	rc = tfs_cstore_info_get(cs, "array", buf, sizeof(buf));
	CHECK(G_CLEAR, rc == 0 && strcmp(buf, "uuid-2") == 0, "info went: %d", rc);
	rc = put_ext(cs, 1, 1);
	CHECK(G_CLEAR, rc == 0 && has_ext(cs, 1, 1) == 1, "put after clear: %d", rc);
}

static void test_pin(struct tfs_cstore *cs)
{
	static const uint64_t pfids[] = { 0x100000000ull, 3, 0xffffffffull, 3 };
	struct tfs_cstore_op ops[4];
	struct pins p;
	int rc;

	struct sizes before, sz;

	snprintf(ctx, sizeof(ctx), "pin");
	sizes_of(cs, &before);
	for (int i = 0; i < 4; i++)	/* 3 twice: one record */
		ops[i] = (struct tfs_cstore_op){ TFS_CS_PUT_PIN, NULL, pfids[i], 0, 10 + (uint64_t)i };
	rc = tfs_cstore_apply(cs, ops, 4);
	CHECK(G_PIN, rc == 0, "put: %d", rc);
	rc = pins_of(cs, &p);
	CHECK(G_PIN, rc == 0 && p.n == 3 && p.fid[0] == 3 && p.fid[1] == 0xffffffffull &&
	      p.fid[2] == 0x100000000ull && p.need[0] == 13 && p.need[2] == 10,
	      "foreach: %d, %" PRIu64 " records, first %" PRIu64,
	      rc, p.n, p.fid[0]);
	ops[0] = (struct tfs_cstore_op){ TFS_CS_DEL_PIN, NULL, 0xffffffffull, 0, 0 };
	ops[1] = (struct tfs_cstore_op){ TFS_CS_DEL_PIN, NULL, 99, 0, 0 };	/* never put */
	rc = tfs_cstore_apply(cs, ops, 2);
	CHECK(G_PIN, rc == 0, "del: %d", rc);
	rc = pins_of(cs, &p);
	CHECK(G_PIN, rc == 0 && p.n == 2 && p.fid[0] == 3 && p.fid[1] == 0x100000000ull,
	      "after del: %" PRIu64 " records", p.n);
	/* a pin is not a size */
	rc = sizes_of(cs, &sz);
	CHECK(G_PIN, rc == 0 && sz.n == before.n, "pins seen as sizes: %" PRIu64 " for %" PRIu64,
	      sz.n, before.n);
	rc = tfs_cstore_clear(cs);
	CHECK(G_PIN, rc == 0, "clear: %d", rc);
	rc = pins_of(cs, &p);
	CHECK(G_PIN, rc == 0 && p.n == 0, "after clear: %" PRIu64 " records", p.n);
}

static void test_small(void)
{
	char dir[128], buf[64];
	struct tfs_cstore *cs = NULL;
	struct tfs_cstore_op op = { TFS_CS_PUT_SIZE, NULL, 5, 0, 4096 };
	struct walk w = { 0 };
	struct sizes s;
	struct stat sb;
	int rc;

	subdir(dir, sizeof(dir), "small");
	snprintf(ctx, sizeof(ctx), "%s", dir);
	rc = tfs_cstore_open(dir, &cs);
	CHECK(G_OPEN, rc == 0, "open: %d", rc);
	if (rc)
		return;
	CHECK(G_OPEN, stat(dir, &sb) == 0 && (sb.st_mode & 0777) == 0700,
	      "dir mode %o", sb.st_mode & 0777);
	rc = walk(cs, &w);
	CHECK(G_OPEN, rc == 0 && w.n == 0, "new store: %d, %" PRIu64 " records", rc, w.n);
	test_order(cs);
	test_apply(cs);
	test_del(cs);
	test_size(cs);
	test_pin(cs);
	test_info(cs);
	test_clear(cs);

	/* reopen: what was there before closing is there after */
	snprintf(ctx, sizeof(ctx), "reopen");
	rc = tfs_cstore_apply(cs, &op, 1);
	CHECK(G_REOPEN, rc == 0, "size: %d", rc);
	{
		struct tfs_cstore_op pin = { TFS_CS_PUT_PIN, NULL, 42, 0, 7 };

		rc = tfs_cstore_apply(cs, &pin, 1);
		CHECK(G_REOPEN, rc == 0, "pin: %d", rc);
	}
	for (unsigned i = 0; i < NF; i++)
		put_ext(cs, fids[i], 9);
	rc = tfs_cstore_sync(cs);
	CHECK(G_OPEN, rc == 0, "sync: %d", rc);
	tfs_cstore_close(cs);
	cs = NULL;
	rc = tfs_cstore_open(dir, &cs);
	CHECK(G_REOPEN, rc == 0, "reopen: %d", rc);
	if (rc)
		return;
	rc = walk(cs, &w);
	CHECK(G_REOPEN, rc == 0 && w.n == NF + 1 && w.bad == 0 && w.unordered == 0,
	      "extents: %d, %" PRIu64 " records, %d bad", rc, w.n, w.bad);
	rc = sizes_of(cs, &s);
	CHECK(G_REOPEN, rc == 0 && s.n == 1 && s.fid[0] == 5 && s.size[0] == 4096,
	      "sizes: %d, %" PRIu64, rc, s.n);
	{
		struct pins p;

		rc = pins_of(cs, &p);
		CHECK(G_REOPEN, rc == 0 && p.n == 1 && p.fid[0] == 42 && p.need[0] == 7,
		      "pins: %d, %" PRIu64, rc,
		      p.n);
	}
	rc = tfs_cstore_info_get(cs, "array", buf, sizeof(buf));
	CHECK(G_REOPEN, rc == 0 && strcmp(buf, "uuid-2") == 0, "info: %d", rc);
	tfs_cstore_close(cs);
	tfs_cstore_close(NULL);
}

/* ------------------------------------------------------------------ */
/* Map growth, with a reader walking all along                         */
/* ------------------------------------------------------------------ */

#define GROW_RECS 600000u
#define GROW_FIDS 1000u		/* each batch touches every fid: pages half full */

struct reader {
	struct tfs_cstore *cs;
	volatile int stop;
	uint64_t walks, errors, bad, unordered, shrank, last;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;

	while (!rd->stop) {
		struct walk w = { 0 };
		int rc = walk(rd->cs, &w);

		rd->walks++;
		rd->errors += rc != 0;
		rd->bad += w.bad != 0;
		rd->unordered += w.unordered != 0;
		rd->shrank += w.n < rd->last;	/* the writer only adds */
		rd->last = w.n;
	}
	return NULL;
}

static void test_grow(void)
{
	static struct tfs_cext_rec recs[GROW_FIDS];
	static struct tfs_cstore_op ops[GROW_FIDS];
	struct reader rd = { 0 };
	struct tfs_cstore *cs;
	struct walk w = { 0 };
	pthread_t th;
	char dir[128], path[160];
	struct stat sb;
	int rc, started;

	subdir(dir, sizeof(dir), "grow");
	snprintf(ctx, sizeof(ctx), "%s", dir);
	rc = tfs_cstore_open(dir, &cs);
	CHECK(G_GROW, rc == 0, "open: %d", rc);
	if (rc)
		return;
	rd.cs = cs;
	started = pthread_create(&th, NULL, reader_main, &rd) == 0;
	CHECK(G_READER, started, "no reader thread");
	/* batch b puts extent b of every fid; fids spread past 2^32 */
	for (uint64_t b = 0; b < GROW_RECS / GROW_FIDS && rc == 0; b++) {
		for (uint64_t f = 0; f < GROW_FIDS; f++) {
			make_rec(&recs[f], f * 0x100000007ull, b);
			ops[f] = (struct tfs_cstore_op){ TFS_CS_PUT_EXT, &recs[f], 0, 0, 0 };
		}
		rc = tfs_cstore_apply(cs, ops, GROW_FIDS);
		CHECK(G_GROW, rc == 0, "batch %" PRIu64 ": %d", b, rc);
	}
	rd.stop = 1;
	if (started)
		pthread_join(th, NULL);
	CHECK(G_READER, rd.walks > 1, "%" PRIu64 " walks", rd.walks);
	CHECK(G_READER, rd.errors == 0 && rd.bad == 0 && rd.unordered == 0 && rd.shrank == 0,
	      "%" PRIu64 " walks: %" PRIu64 " errors, %" PRIu64 " bad, %" PRIu64
	      " unordered, %" PRIu64 " shrank", rd.walks, rd.errors, rd.bad, rd.unordered,
	      rd.shrank);
	printf("reader: %" PRIu64 " walks during the growth\n", rd.walks);

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	CHECK(G_GROW, stat(path, &sb) == 0 && sb.st_size > (64 << 20),
	      "data.mdb is %jd bytes: the map never grew", (intmax_t)sb.st_size);
	rc = walk(cs, &w);
	CHECK(G_GROW, rc == 0 && w.n == GROW_RECS && w.bad == 0 && w.unordered == 0,
	      "walk: %d, %" PRIu64 " records, %d bad, %d unordered", rc, w.n, w.bad, w.unordered);
	tfs_cstore_close(cs);

	/* the grown store opens again and grows further from its size */
	rc = tfs_cstore_open(dir, &cs);
	CHECK(G_GROW, rc == 0, "reopen: %d", rc);
	if (rc)
		return;
	rc = walk(cs, &w);
	CHECK(G_GROW, rc == 0 && w.n == GROW_RECS && w.bad == 0, "after reopen: %" PRIu64, w.n);
	rc = tfs_cstore_clear(cs);
	CHECK(G_GROW, rc == 0, "clear: %d", rc);
	rc = walk(cs, &w);
	CHECK(G_GROW, rc == 0 && w.n == 0, "after clear: %" PRIu64, w.n);
	tfs_cstore_close(cs);
}

/* ------------------------------------------------------------------ */
/* Bad stores                                                          */
/* ------------------------------------------------------------------ */

static int write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int ok = fd >= 0 && write(fd, buf, len) == (ssize_t)len;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* Open must fail with a -errno (and not crash); close if it did not. */
static void expect_fail(const char *dir, const char *what)
{
	struct tfs_cstore *cs = NULL;
	int rc = tfs_cstore_open(dir, &cs);

	snprintf(ctx, sizeof(ctx), "%s", what);
	CHECK(G_BAD, rc < 0 && rc > -4096, "open: %d", rc);
	if (rc == 0)
		tfs_cstore_close(cs);
}

/* Put a raw value under a raw key of the "ext" db, behind cstore's back. */
static int raw_put(const char *dir, const void *key, size_t klen, const void *val, size_t vlen)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k = { klen, (void *)key }, v = { vlen, (void *)val };
	int rc = mdb_env_create(&env);

	if (rc)
		return rc;
	mdb_env_set_maxdbs(env, 8);
	rc = mdb_env_open(env, dir, 0, 0600);
	if (rc == 0 && (rc = mdb_txn_begin(env, NULL, 0, &txn)) == 0) {
		rc = mdb_dbi_open(txn, "ext", 0, &dbi);
		if (rc == 0)
			rc = mdb_put(txn, dbi, &k, &v, 0);
		if (rc == 0)
			rc = mdb_txn_commit(txn);
		else
			mdb_txn_abort(txn);
	}
	mdb_env_close(env);
	return rc;
}

/* The length of the run of free pages that ends data.mdb's last page
 * (per its meta page), read from LMDB's free list: 0 if that page is in
 * use. */
static uint64_t free_tail(const char *dir, uint64_t *last)
{
	static unsigned char isfree[1 << 16];
	MDB_env *env;
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_envinfo info;
	MDB_val k, v;
	uint64_t n = 0;

	memset(isfree, 0, sizeof(isfree));
	*last = 0;
	if (mdb_env_create(&env))
		return 0;
	if (mdb_env_open(env, dir, MDB_RDONLY, 0600) == 0 && mdb_env_info(env, &info) == 0 &&
	    info.me_last_pgno < sizeof(isfree) &&
	    mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) == 0) {
		*last = info.me_last_pgno;
		if (mdb_cursor_open(txn, 0, &cur) == 0) {
			for (int op = MDB_FIRST; mdb_cursor_get(cur, &k, &v, op) == 0; op = MDB_NEXT) {
				size_t ids[1 << 12];

				memcpy(ids, v.mv_data, v.mv_size < sizeof(ids) ? v.mv_size : sizeof(ids));
				for (size_t i = 1; i <= ids[0] && i < 1 << 12; i++)
					if (ids[i] < sizeof(isfree))
						isfree[ids[i]] = 1;
			}
			mdb_cursor_close(cur);
		}
		mdb_txn_abort(txn);
		while (n <= *last && isfree[*last - n])
			n++;
	}
	mdb_env_close(env);
	return n;
}

/* data.mdb may end before the last page LMDB's meta page counts: a page
 * allocated and freed in one transaction is never written, so when the
 * highest pages are such the file is short of them, and they are free.
 * Made here by cutting off the free pages that end a store whose records
 * were moved to lower pages: the open must take it as the store it is,
 * with every record, not as a truncated copy (it was -EUCLEAN, which
 * refused the cache, and every write-back byte with it, at the restart
 * after a daemon kill: test_fsx.py).  A cut into a page in use is still
 * refused (test_bad). */
static void test_short_tail(void)
{
	char dir[128], path[160];
	struct tfs_cstore *cs;
	struct walk w = { 0 };
	uint64_t tail = 0, last = 0;
	int rc;

	subdir(dir, sizeof(dir), "shorttail");
	snprintf(ctx, sizeof(ctx), "%s", dir);
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	rc = tfs_cstore_open(dir, &cs);
	CHECK(G_REOPEN, rc == 0, "open: %d", rc);
	if (rc)
		return;
	/* 3000 records, then all but 100 gone over a few durability points,
	 * so that the pages at the end are free */
	for (uint64_t i = 0; i < 3000 && rc == 0; i++)
		rc = put_ext(cs, 7, i);
	tfs_cstore_sync(cs);
	for (unsigned round = 0; round < 6 && rc == 0; round++) {
		for (uint64_t i = 100; i < 3000 && rc == 0; i++) {
			struct tfs_cstore_op op = { TFS_CS_DEL_EXT, NULL, 7, i, 0 };

			if (i % 6 == round)
				rc = tfs_cstore_apply(cs, &op, 1);
		}
		if (rc == 0)
			rc = put_ext(cs, 8, round);	/* the live pages move down */
		if (rc == 0)
			rc = tfs_cstore_sync(cs);
	}
	CHECK(G_REOPEN, rc == 0, "deletes: %d", rc);
	tfs_cstore_close(cs);
	tail = free_tail(dir, &last);
	CHECK(G_REOPEN, tail > 0, "the last page (%" PRIu64 ") is in use: nothing to cut", last);
	if (tail == 0)
		return;
	rc = truncate(path, (off_t)((last + 1 - tail) * 4096));
	CHECK(G_REOPEN, rc == 0, "truncate: %d", errno);
	rc = tfs_cstore_open(dir, &cs);
	CHECK(G_REOPEN, rc == 0, "open with the %" PRIu64 " free pages at its end cut: %d",
	      tail, rc);
	if (rc)
		return;
	rc = walk(cs, &w);
	CHECK(G_REOPEN, rc == 0 && w.n == 106 && !w.bad, "walk: %d, %" PRIu64 " records", rc, w.n);
	free(w.key);
	/* and it goes on: records added land on the pages cut off */
	for (uint64_t i = 0; i < 3000 && rc == 0; i++)
		rc = put_ext(cs, 9, i);
	if (rc == 0)
		rc = tfs_cstore_sync(cs);
	CHECK(G_REOPEN, rc == 0, "writes after: %d", rc);
	tfs_cstore_close(cs);
	rc = tfs_cstore_open(dir, &cs);
	CHECK(G_REOPEN, rc == 0, "reopen: %d", rc);
	if (rc == 0)
		tfs_cstore_close(cs);
}

static void test_bad(void)
{
	static unsigned char junk[65536];
	char dir[128], path[160];
	struct tfs_cstore *cs;
	struct walk w = { 0 };
	uint64_t x = 0x2545f4914f6cdd1dull;
	int rc;

	/* a file of garbage named data.mdb */
	for (size_t i = 0; i < sizeof(junk); i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		junk[i] = (unsigned char)x;
	}
	subdir(dir, sizeof(dir), "junk");
	mkdir(dir, 0700);
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	write_file(path, junk, sizeof(junk));
	expect_fail(dir, "garbage data.mdb");
	/* ... of a few bytes, of zeros */
	write_file(path, junk, 100);
	expect_fail(dir, "100-byte data.mdb");
	memset(junk, 0, sizeof(junk));
	write_file(path, junk, sizeof(junk));
	expect_fail(dir, "zeroed data.mdb");

	/* data.mdb a directory; the store's dir a file */
	subdir(dir, sizeof(dir), "isdir");
	mkdir(dir, 0700);
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	mkdir(path, 0700);
	expect_fail(dir, "data.mdb a directory");
	subdir(dir, sizeof(dir), "isfile");
	write_file(dir, "x", 1);
	expect_fail(dir, "dir a file");

	/* a real store, truncated: half way through its pages (LMDB would
	 * walk into zeroed pages and abort), to its meta pages, to 100 bytes */
	subdir(dir, sizeof(dir), "trunc");
	snprintf(ctx, sizeof(ctx), "%s", dir);
	rc = tfs_cstore_open(dir, &cs);
	CHECK(G_BAD, rc == 0, "open: %d", rc);
	if (rc)
		return;
	for (uint64_t i = 0; i < 20000 && rc == 0; i++)
		rc = put_ext(cs, i, 0);
	tfs_cstore_sync(cs);	/* into data.mdb, not only the log */
	tfs_cstore_close(cs);
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	rc = truncate(path, 1 << 20);	/* 20000 records use about 2 MiB */
	CHECK(G_BAD, rc == 0, "truncate: %d", errno);
	expect_fail(dir, "data.mdb truncated to 1 MiB");
	rc = truncate(path, 3 * 4096);
	CHECK(G_BAD, rc == 0, "truncate: %d", errno);
	expect_fail(dir, "data.mdb truncated to 3 pages");
	rc = truncate(path, 100);
	expect_fail(dir, "data.mdb truncated to 100 bytes");

	/* records of the wrong size or version: -EUCLEAN from the walk */
	subdir(dir, sizeof(dir), "badrec");
	snprintf(ctx, sizeof(ctx), "%s", dir);
	rc = tfs_cstore_open(dir, &cs);
	CHECK(G_BAD, rc == 0, "open: %d", rc);
	if (rc)
		return;
	put_ext(cs, 1, 0);
	tfs_cstore_close(cs);
	{
		unsigned char key[16] = { 0 }, val[80] = { 2 };	/* version 2 */

		key[7] = 2;
		rc = raw_put(dir, key, 16, val, 80);
		CHECK(G_BAD, rc == 0, "raw put: %s", mdb_strerror(rc));
		rc = tfs_cstore_open(dir, &cs);
		CHECK(G_BAD, rc == 0, "open: %d", rc);
		if (rc)
			return;
		rc = walk(cs, &w);
		CHECK(G_BAD, rc == -EUCLEAN && w.n == 1, "version 2: %d after %" PRIu64, rc, w.n);
		tfs_cstore_close(cs);
		rc = raw_put(dir, key, 16, val, 10);
		CHECK(G_BAD, rc == 0, "raw put: %s", mdb_strerror(rc));
		rc = tfs_cstore_open(dir, &cs);
		CHECK(G_BAD, rc == 0, "open: %d", rc);
		if (rc)
			return;
		rc = walk(cs, &w);
		CHECK(G_BAD, rc == -EUCLEAN && w.n == 1, "10-byte value: %d", rc);
		tfs_cstore_close(cs);
	}
}


/* ------------------------------------------------------------------ */
/* The log: what a kill keeps, what a power cut drops                  */
/* ------------------------------------------------------------------ */

struct bar {
	struct tfs_cstore *cs;
	int calls, fail;
};

static int barrier_fn(void *arg)
{
	struct bar *b = arg;

	b->calls++;
	return b->fail ? -EIO : 0;
}

/* A child applies n extents of fid (synced first when sync_first) and
 * dies without closing the store, as a killed daemon would. */
static void die_after(const char *dir, uint64_t fid, unsigned synced, unsigned unsynced)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct tfs_cstore *cs;

		if (tfs_cstore_open(dir, &cs))
			_exit(2);
		for (unsigned i = 0; i < synced; i++)
			put_ext(cs, fid, i);
		if (synced && tfs_cstore_sync(cs))
			_exit(3);
		for (unsigned i = synced; i < synced + unsynced; i++)
			put_ext(cs, fid, i);
		_exit(0);
	}
	int st = 0;

	waitpid(pid, &st, 0);
	CHECK(G_LOG, WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %d", st);
}

static uint64_t count_fid(struct tfs_cstore *cs, uint64_t fid, unsigned upto)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < upto; i++)
		n += has_ext(cs, fid, i) == 1;
	return n;
}

static void test_log(void)
{
	char dir[128], path[160];
	struct tfs_cstore *cs;
	struct bar b = { 0 };
	uint64_t dropped = 0;
	int rc, fd;

	subdir(dir, sizeof(dir), "log");
	snprintf(ctx, sizeof(ctx), "%s", dir);

	/* a kill: every applied batch is there after the next open, an open
	 * for the info strings alone before it (the probe's) leaving the log
	 * as it was */
	die_after(dir, 7, 10, 20);
	snprintf(path, sizeof(path), "%s/log", dir);
	{
		struct stat s0, s1;
		char v[8] = "";

		rc = stat(path, &s0);
		if (rc == 0)
			rc = tfs_cstore_open_info(dir, &cs);
		if (rc == 0) {
			rc = tfs_cstore_info_set(cs, "probe", "1");
			if (rc == 0)
				rc = tfs_cstore_info_get(cs, "probe", v, sizeof(v));
			tfs_cstore_close(cs);
		}
		CHECK(G_LOG, rc == 0 && strcmp(v, "1") == 0, "info open after a kill: %d", rc);
		CHECK(G_LOG, stat(path, &s1) == 0 && s1.st_size == s0.st_size &&
		      s1.st_mtim.tv_sec == s0.st_mtim.tv_sec &&
		      s1.st_mtim.tv_nsec == s0.st_mtim.tv_nsec, "the info open touched the log");
	}
	rc = tfs_cstore_open(dir, &cs);
	CHECK(G_LOG, rc == 0, "open after a kill: %d", rc);
	if (rc)
		return;
	CHECK(G_LOG, tfs_cstore_pending(cs), "nothing pending after a kill");
	CHECK(G_LOG, count_fid(cs, 7, 30) == 30, "after a kill: %" PRIu64 " of 30",
	      count_fid(cs, 7, 30));
	tfs_cstore_close(cs);

	/* a power cut: only what a sync covered */
	die_after(dir, 8, 5, 12);
	rc = tfs_cstore_open(dir, &cs);
	CHECK(G_LOG, rc == 0, "open after a cut: %d", rc);
	if (rc)
		return;
	rc = tfs_cstore_drop_unsynced(cs, &dropped);
	CHECK(G_LOG, rc == 0 && dropped == 12, "drop_unsynced: %d, %" PRIu64 " dropped", rc,
	      dropped);
	CHECK(G_LOG, count_fid(cs, 8, 17) == 5, "after a cut: %" PRIu64 " of 5 synced",
	      count_fid(cs, 8, 17));
	CHECK(G_LOG, count_fid(cs, 7, 30) == 30, "older synced records: %" PRIu64,
	      count_fid(cs, 7, 30));
	/* the dropped entries never come back, even if a later kill finds
	 * them in the file (a new epoch) */
	put_ext(cs, 9, 0);
	tfs_cstore_close(cs);
	rc = tfs_cstore_open(dir, &cs);
	CHECK(G_LOG, rc == 0 && count_fid(cs, 8, 17) == 5 && count_fid(cs, 9, 1) == 1,
	      "after reopen: %d, fid 8: %" PRIu64, rc, rc ? 0 : count_fid(cs, 8, 17));
	if (rc)
		return;
	tfs_cstore_close(cs);

	/* a torn tail: the entries before it are kept, nothing after */
	die_after(dir, 10, 0, 8);
	snprintf(path, sizeof(path), "%s/log", dir);
	fd = open(path, O_RDWR);
	if (fd >= 0) {
		struct stat sb;
		char junk[64];

		memset(junk, 0x5a, sizeof(junk));
		fstat(fd, &sb);
		/* damage the middle of the 5th entry: 4 survive */
		pwrite(fd, junk, sizeof(junk), sb.st_size / 8 * 4 + 40);
		close(fd);
	}
	rc = tfs_cstore_open(dir, &cs);
	CHECK(G_LOG, rc == 0, "open with a torn log: %d", rc);
	if (rc)
		return;
	CHECK(G_LOG, count_fid(cs, 10, 8) == 4, "torn log: %" PRIu64 " of the 4 before it",
	      count_fid(cs, 10, 8));

	/* the barrier runs before the commit; if it fails nothing commits
	 * and the batch stays pending for the next sync */
	b.cs = cs;
	tfs_cstore_set_barrier(cs, barrier_fn, &b);
	put_ext(cs, 11, 0);
	b.fail = 1;
	rc = tfs_cstore_sync(cs);
	CHECK(G_LOG, rc == -EIO && b.calls == 1 && tfs_cstore_pending(cs),
	      "failed barrier: %d, %d calls", rc, b.calls);
	b.fail = 0;
	rc = tfs_cstore_sync(cs);
	CHECK(G_LOG, rc == 0 && b.calls == 2 && !tfs_cstore_pending(cs), "sync: %d", rc);
	/* nothing pending: the barrier all the same (an overwrite of dirty
	 * sectors changes no record, its bytes must be durable too) */
	rc = tfs_cstore_sync(cs);
	CHECK(G_LOG, rc == 0 && b.calls == 3, "a sync with nothing pending: %d barrier calls",
	      b.calls);
	tfs_cstore_close(cs);
	rc = tfs_cstore_open(dir, &cs);
	if (rc == 0) {
		uint64_t d = 1;

		tfs_cstore_drop_unsynced(cs, &d);
		CHECK(G_LOG, d == 0 && count_fid(cs, 11, 1) == 1, "synced batch lost: %" PRIu64, d);
		tfs_cstore_close(cs);
	}
}

/* ------------------------------------------------------------------ */
/* Concurrent syncs share durability points (invariant 10)             */
/* ------------------------------------------------------------------ */

#define G_THREADS 8
#define G_POINTS 64

/* One clock for everything: a caller's entry and return, a barrier's
 * start and end are ticks of it, so "began after" is a comparison. */
struct gsync {
	struct tfs_cstore *cs;
	uint64_t clock;
	pthread_mutex_t lock;
	unsigned npoints;
	uint64_t pstart[G_POINTS], pend[G_POINTS];
	int fail_from;			/* points from this one on fail */
	pthread_barrier_t go;
};

struct gcall {
	struct gsync *g;
	uint64_t in, out;
	int rc;
};

static int gbarrier(void *arg)
{
	struct gsync *g = arg;
	unsigned k;

	pthread_mutex_lock(&g->lock);
	k = g->npoints < G_POINTS ? g->npoints++ : G_POINTS - 1;
	pthread_mutex_unlock(&g->lock);
	g->pstart[k] = __atomic_add_fetch(&g->clock, 1, __ATOMIC_SEQ_CST);
	usleep(50 * 1000);	/* a slow SSD: the others arrive meanwhile */
	g->pend[k] = __atomic_add_fetch(&g->clock, 1, __ATOMIC_SEQ_CST);
	return g->fail_from >= 0 && (int)k >= g->fail_from ? -EIO : 0;
}

static void *gcaller(void *arg)
{
	struct gcall *c = arg;

	pthread_barrier_wait(&c->g->go);
	c->in = __atomic_add_fetch(&c->g->clock, 1, __ATOMIC_SEQ_CST);
	c->rc = tfs_cstore_sync(c->g->cs);
	c->out = __atomic_add_fetch(&c->g->clock, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* G_THREADS callers at once; returns how many got a point that began
 * after their call and ended before their return. */
static unsigned gsync_round(struct gsync *g, struct gcall *c)
{
	pthread_t th[G_THREADS];
	unsigned started = 0, served = 0;

	g->npoints = 0;
	pthread_barrier_init(&g->go, NULL, G_THREADS);
	for (unsigned i = 0; i < G_THREADS; i++) {
		c[i] = (struct gcall){ .g = g };
		started += pthread_create(&th[i], NULL, gcaller, &c[i]) == 0;
	}
	CHECK(G_GROUP, started == G_THREADS, "%u of %d threads started", started, G_THREADS);
	if (started < G_THREADS)
		exit(1);	/* the others wait at the barrier forever */
	for (unsigned i = 0; i < G_THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&g->go);
	for (unsigned i = 0; i < G_THREADS; i++) {
		bool ok = false;

		for (unsigned k = 0; k < g->npoints && !ok; k++)
			ok = g->pstart[k] > c[i].in && g->pend[k] < c[i].out;
		served += ok;
	}
	return served;
}

static void test_group(void)
{
	char dir[128];
	struct gsync g = { .fail_from = -1 };
	struct gcall c[G_THREADS];
	unsigned served, failed = 0;
	int rc;

	subdir(dir, sizeof(dir), "group");
	rc = tfs_cstore_open(dir, &g.cs);
	CHECK(G_GROUP, rc == 0, "open: %d", rc);
	if (rc)
		return;
	pthread_mutex_init(&g.lock, NULL);
	tfs_cstore_set_barrier(g.cs, gbarrier, &g);
	put_ext(g.cs, 1, 0);

	/* every caller is served by a point that began after its call; the
	 * callers that arrive during the first point share the second */
	served = gsync_round(&g, c);
	CHECK(G_GROUP, served == G_THREADS, "%u of %d callers covered by a later point", served,
	      G_THREADS);
	CHECK(G_GROUP, g.npoints <= 2, "%d concurrent syncs made %u points (at most 2)",
	      G_THREADS, g.npoints);
	for (unsigned i = 0; i < G_THREADS; i++)
		failed += c[i].rc != 0;
	CHECK(G_GROUP, failed == 0, "%u callers failed", failed);
	CHECK(G_GROUP, !tfs_cstore_pending(g.cs), "pending after the syncs");

	/* a failed point fails the callers it serves, and what was pending
	 * stays pending */
	put_ext(g.cs, 1, 1);
	g.fail_from = 0;
	served = gsync_round(&g, c);
	failed = 0;
	for (unsigned i = 0; i < G_THREADS; i++)
		failed += c[i].rc == -EIO;
	CHECK(G_GROUP, served == G_THREADS && failed == G_THREADS,
	      "failing points: %u covered, %u of %d got -EIO", served, failed, G_THREADS);
	CHECK(G_GROUP, tfs_cstore_pending(g.cs), "a failed point dropped what was pending");
	g.fail_from = -1;
	rc = tfs_cstore_sync(g.cs);
	CHECK(G_GROUP, rc == 0 && !tfs_cstore_pending(g.cs), "sync after the failures: %d", rc);
	tfs_cstore_close(g.cs);
	pthread_mutex_destroy(&g.lock);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	uint64_t total_fail;

	tfs_log_level = LOG_WARNING;	/* no "map full: growing" lines */
	snprintf(root, sizeof(root), "%s/test_cstore.XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
	if (!mkdtemp(root)) {
		printf("mkdtemp %s: %s: skipped\n", root, strerror(errno));
		return 77;
	}
	test_small();
	test_grow();
	test_log();
	test_group();
	test_short_tail();
	tfs_log_level = -1;	/* the bad stores are expected to log errors */
	test_bad();
	rm_rf(root);

	total_fail = unit_summary(groups, G_COUNT);
	printf("%s\n", total_fail ? "FAILED" : "OK");
	return total_fail ? 1 : 0;
}
