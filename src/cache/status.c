/* status.c - the SSD tier's status lines and control commands.
 *
 * Owns: the cache.* lines of user.tierfs.status (tfs_cache_stats;
 * fuse/control.c composes the whole status), what a file's user.tierfs.*
 * attributes show of the tier (fuse/attrs.c asks), the run-time
 * tunables, and the commands of user.tierfs.ctl (flush, cache_mode,
 * detach: the detach itself is bind.c's c_detach) and of a file (flush,
 * evict).
 *
 * Invariants:
 *  1. The status's counts and tunables are one snapshot, taken in one
 *     c->lock section (the geometry does not change while mounted); the
 *     cache directory is shown only when paths says so (to root,
 *     fuse/control.c).
 *  2. A command changes nothing on a read-only mount or with no cache
 *     attached.  cache_mode is one atomic store; a mode other than
 *     write-back also asks for a flush (dirty extents take writes
 *     write-back until they are flushed, write.c invariant 1).
 *  3. The tunables change at run time under c->lock, each checked against
 *     the range its mount option has (tierfs.c) and the watermarks against
 *     each other; seq_cutoff, read outside c->lock (request.c), is one
 *     atomic store.
 *  4. A file's counters (fs.h, tfs_tier_counts) are relaxed atomics on its
 *     inode, counted by request; the tier's counters in c->st are counted
 *     by request and by piece under c->lock, and a reset zeroes them all
 *     in one c->lock section.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tierfs/cache.h"
#include "tierfs/log.h"
#include "tierfs/fs.h"
#include "tierfs/ns.h"
#include "tierfs/parse.h"
#include "cache_i.h"

/* The class of heat h: hot at twice the promotion threshold, warm at it. */
static const char *heat_class(const struct tfs_cache *c, unsigned h)
{
	unsigned p = c_promote(c);

	return h >= 2 * p ? "hot" : h >= p ? "warm" : "cold";
}

int tfs_cache_stats(struct tfs_fs *fs, char *buf, size_t len, bool paths)
{
	struct tfs_cache *c = fs->cache;
	unsigned hot = 0, warm = 0, cold = 0;
	uint32_t now = c_now();
	struct cstats st;
	struct tfs_copy_ev cev;
	uint64_t dirty;
	uint32_t used, ndirty, unresolved;
	unsigned promote, dirty_low, dirty_high;
	uint32_t pin_files, pin_reserved;
	unsigned backlog, rbacklog;
	uint64_t seq_cutoff;
	enum tfs_cache_mode mode;
	bool flushing, flush_unresolved, reclaim_on;
	char ferr[96] = "", hist[1024];
	int evidence;
	int l, flush_err;

	if (!c || c->detached)
		return snprintf(buf, len, "cache=none\n");
	pthread_mutex_lock(&c->lock);
	for (uint32_t s = 0; s < c->nslots; s++) {
		unsigned h;

		if (!c->e[s].used)
			continue;
		h = c_heat_now(c, c->e[s].heat, c->e[s].heat_t, now);
		const char *k = heat_class(c, h);

		hot += k[0] == 'h';
		warm += k[0] == 'w';
		cold += k[0] == 'c';
	}
	st = c->st;
	cev = c->copy_ev;
	dirty = c->dirty_sectors * C_SECTOR;
	used = c->nused;
	ndirty = c->ndirty;
	unresolved = c->unresolved;
	flushing = c->flush_req != c->flush_done;
	flush_err = c->flush_err;
	flush_unresolved = c->flush_unresolved;
	mode = c_mode(c);
	c_history_lines(c, hist, sizeof(hist));
	promote = c_promote(c);
	backlog = c->qlen + c->qbusy;
	rbacklog = c->nrq + c->rbusy;
	reclaim_on = c_reclaiming(c);
	evidence = c->ev ? tfs_evidence_score(c->ev) : 0;
	pin_files = c->pin_files;
	pin_reserved = c->pin_reserved;
	seq_cutoff = c->seq_cutoff;
	dirty_low = c->dirty_low;
	dirty_high = c->dirty_high;
	pthread_mutex_unlock(&c->lock);
	if (flush_err)
		snprintf(ferr, sizeof(ferr), "%s", strerror(-flush_err));
	else if (flush_unresolved && unresolved)
		snprintf(ferr, sizeof(ferr), "%u files with dirty data not found since the restart",
			 unresolved);
	l = snprintf(buf, len,
		     "cache=%s\ncache.uuid=%s\ncache.mode=%s\ncache.policy=%s\n"
		     "cache.extent=%u\ncache.slots=%u\ncache.size=%" PRIu64 "\n"
		     "cache.cached_extents=%u\ncache.dirty_extents=%u\ncache.dirty_bytes=%" PRIu64 "\n"
		     "cache.hot_extents=%u\ncache.warm_extents=%u\ncache.cold_extents=%u\n"
		     "cache.read_hits=%" PRIu64 "\ncache.read_misses=%" PRIu64 "\n"
		     "cache.read_hit_bytes=%" PRIu64 "\ncache.read_miss_bytes=%" PRIu64 "\n"
		     "cache.ring_hits=%" PRIu64 "\ncache.ring_writes=%" PRIu64 "\n"
		     "cache.write_hits=%" PRIu64 "\ncache.write_misses=%" PRIu64 "\n"
		     "cache.read_req_hits=%" PRIu64 "\ncache.read_req_misses=%" PRIu64 "\n"
		     "cache.write_req_hits=%" PRIu64 "\ncache.write_req_misses=%" PRIu64 "\n"
		     "cache.read_hit_ratio=%.4f\n"
		     "cache.pinned_files=%u\ncache.pin_reserved_extents=%u\n"
		     "cache.pin_cap_extents=%u\n"
		     "cache.write_around=%" PRIu64 "\ncache.seq_bypass=%" PRIu64 "\n"
		     "cache.stream_copies=%" PRIu64 "\ncache.stream_copy_evidence=%u/%u\n"
		     "cache.full_bypass=%" PRIu64 "\n"
		     "cache.promotions=%" PRIu64 "\ncache.promote_dropped=%" PRIu64 "\n"
		     "cache.promote_full=%" PRIu64 "\n"
		     "cache.promote_backlog=%u\n"
		     "cache.evictions=%" PRIu64 "\ncache.invalidations=%" PRIu64 "\n"
		     "cache.fills=%" PRIu64 "\ncache.fill_promotions=%" PRIu64 "\n"
		     "cache.fill_dropped=%" PRIu64 "\n"
		     "cache.flushed_bytes=%" PRIu64 "\n"
		     "cache.flush_writes=%" PRIu64 "\ncache.flush_syncs=%" PRIu64 "\n"
		     "cache.full_stripe_flushes=%" PRIu64 "\n"
		     "cache.throttled=%" PRIu64 "\ncache.flush_pending=%d\n"
		     "cache.reclaim=%d\ncache.reclaim_mode=%s\ncache.reclaim_evidence=%d\n"
		     "cache.reclaimed=%" PRIu64 "\ncache.reclaim_backlog=%u\n"
		     "cache.unresolved_files=%u\ncache.promote_threshold=%u\n"
		     "cache.seq_cutoff=%" PRIu64 "\ncache.dirty_low=%u\ncache.dirty_high=%u\n"
		     "cache.flush_error=%s\n",
		     paths ? c->dir : "-", c->uuid, tfs_cache_mode_name(mode), tfs_policy_name(c->policy_kind),
		     c->extent, c->nslots, (uint64_t)c->nslots * c->extent,
		     used, ndirty, dirty, hot, warm, cold,
		     st.read_hits, st.read_misses, st.read_hit_bytes, st.read_miss_bytes,
		     st.ring_hits, st.ring_writes,
		     st.write_hits, st.write_misses,
		     st.read_req_hits, st.read_req_misses, st.write_req_hits, st.write_req_misses,
		     st.read_req_hits + st.read_req_misses
		     ? (double)st.read_req_hits / (double)(st.read_req_hits + st.read_req_misses) : 0.0,
		     pin_files, pin_reserved,
		     (uint32_t)((uint64_t)c->nslots * C_PIN_CAP_PCT / 100), st.write_around, st.seq_bypass, st.stream_copies, cev.used, cev.used + cev.unused,
		     st.full_bypass,
		     st.promotions, st.promote_dropped, st.promote_full, backlog, st.evictions, st.invalidations,
		     st.fills, st.fill_promotions, st.fill_dropped, st.flushed_bytes, st.flush_writes, st.flush_syncs, st.full_stripe_flushes,
		     st.throttled, flushing, reclaim_on, tfs_reclaim_name(c->reclaim_mode), evidence,
		     st.reclaimed, rbacklog, unresolved,
		     promote, seq_cutoff,
		     dirty_low, dirty_high, ferr);
	if (l >= 0 && (size_t)l < len)
		l += snprintf(buf + l, len - (size_t)l, "%s", hist);
	if (l >= 0 && (size_t)l < len)
		l += c_watch_lines(c, buf + l, len - (size_t)l);
	return l < 0 ? 0 : (size_t)l >= len ? (int)len - 1 : l;
}

/* The tier attached and usable (not detached), or NULL. */
static struct tfs_cache *attached(struct tfs_fs *fs)
{
	struct tfs_cache *c = fs->cache;

	return c && !c->detached ? c : NULL;
}

/* Returns 0 if c (NULL: none attached) may be changed, else -ENODEV or
 * -EROFS with one line in err (invariant 2). */
static int changeable(const struct tfs_cache *c, char *err, size_t errlen)
{
	if (!c) {
		snprintf(err, errlen, "no cache is attached (mount with -o cache=DIR)");
		return -ENODEV;
	}
	if (c->readonly) {
		snprintf(err, errlen, "the mount is read-only");
		return -EROFS;
	}
	return 0;
}

int tfs_cache_ctl(struct tfs_fs *fs, const char *cmd, const char *arg, char *err,
		  size_t errlen)
{
	struct tfs_cache *c = attached(fs);
	enum tfs_cache_mode m;
	int rc = changeable(c, err, errlen);

	if (rc)
		return rc;
	if (strcmp(cmd, "flush") == 0) {
		pthread_mutex_lock(&c->lock);
		c_flush_request(c);
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	if (strcmp(cmd, "cache_mode") == 0) {
		if (!arg || tfs_cache_mode_parse(arg, &m)) {
			snprintf(err, errlen, "cache_mode: writeback, writethrough, writearound or off");
			return -EINVAL;
		}
		__atomic_store_n(&c->mode, m, __ATOMIC_RELEASE);
		tfs_info("cache %s: mode %s", c->dir, tfs_cache_mode_name(m));
		if (m != TFS_CACHE_WRITEBACK) {	/* leaving write-back: drain */
			pthread_mutex_lock(&c->lock);
			c_flush_request(c);
			pthread_mutex_unlock(&c->lock);
		}
		return 0;
	}
	if (strcmp(cmd, "detach") == 0)
		return c_detach(c, err, errlen);
	snprintf(err, errlen, "unknown cache command '%s' (flush, cache_mode MODE, detach)", cmd);
	return -EINVAL;
}

const char *tfs_bypass_name(enum tfs_bypass b)
{
	static const char *const names[] = { "none", "sequential", "dirty_high", "mode", "no_slot" };

	return (unsigned)b < sizeof(names) / sizeof(names[0]) ? names[b] : "?";
}

void c_count_file(struct tfs_inode *in, bool write, bool hit, enum tfs_bypass why)
{
	struct tfs_tier_counts *t = &in->tier;
	uint64_t *n = write ? (hit ? &t->write_hits : &t->write_misses)
			    : (hit ? &t->read_hits : &t->read_misses);

	__atomic_add_fetch(n, 1, __ATOMIC_RELAXED);
	if (why != TFS_BYPASS_NONE) {
		__atomic_store_n(&t->bypass_time, (uint64_t)time(NULL), __ATOMIC_RELAXED);
		__atomic_store_n(&t->bypass, (uint32_t)why, __ATOMIC_RELAXED);
	}
}


/* Loads in; with a tier, takes c->lock and finds in's record (*f, NULL:
 * none).  Returns the tier, locked, or NULL with nothing held and *rc the
 * load's error (0: no tier). */
static struct tfs_cache *file_locked(struct tfs_fs *fs, struct tfs_inode *in, struct cfile **f,
				     int *rc)
{
	struct tfs_cache *c = attached(fs);

	*rc = tfs_ns_load_file(fs, in);
	if (*rc || !c)
		return NULL;
	pthread_mutex_lock(&c->lock);
	*f = c_file_find(c, in->fid);
	return c;
}

int tfs_cache_file_info(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_cache_file_info *fi)
{
	uint32_t now = c_now();
	unsigned heat = 0;
	struct cfile *f;
	int rc;
	struct tfs_cache *c = file_locked(fs, in, &f, &rc);

	*fi = (struct tfs_cache_file_info){ .heat = "none" };
	if (!c)
		return rc;
	for (uint32_t s = f ? f->head : C_NONE; s != C_NONE; s = c->e[s].fnext) {
		const struct cext *x = &c->e[s];
		unsigned h = c_heat_now(c, x->heat, x->heat_t, now);

		fi->cached_bytes += (uint64_t)bm_count(x->valid) * C_SECTOR;
		fi->dirty_bytes += (uint64_t)bm_count(x->dirty) * C_SECTOR;
		fi->extents++;
		fi->dirty_extents += bm_any(x->dirty);
		if (h > heat)
			heat = h;
	}
	if (fi->extents)
		fi->heat = heat_class(c, heat);
	fi->pinned = f && f->pinned;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* One extent of a file as the residency map sees it. */
struct rext {
	uint64_t idx;
	uint64_t valid[TFS_CEXT_WORDS], dirty[TFS_CEXT_WORDS];
};

static int rext_cmp(const void *a, const void *b)
{
	const struct rext *x = a, *y = b;

	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Appends "off len state\n" to buf (cut at len: *n counts on). */
static void run_out(char *buf, size_t len, size_t *n, uint64_t off, uint64_t rlen, bool dirty)
{
	char line[64];
	int l = snprintf(line, sizeof(line), "%" PRIu64 " %" PRIu64 " %s\n", off, rlen,
			 dirty ? "dirty" : "clean");

	if (*n + (size_t)l <= len)
		memcpy(buf + *n, line, (size_t)l);
	*n += (size_t)l;
}

int tfs_cache_residency(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len)
{
	struct rext *v = NULL;
	uint32_t n = 0, cap = 0;
	uint64_t run_a = 0, run_b = 0;
	bool run_dirty = false;
	size_t out = 0;
	struct cfile *f;
	int rc;
	struct tfs_cache *c = file_locked(fs, in, &f, &rc);

	if (!c)
		return rc;
	cap = f ? f->ncached : 0;
	v = cap ? malloc(cap * sizeof(*v)) : NULL;
	for (uint32_t s = f && v ? f->head : C_NONE; s != C_NONE && n < cap; s = c->e[s].fnext) {
		v[n].idx = c->e[s].idx;
		memcpy(v[n].valid, c->e[s].valid, sizeof(v[n].valid));
		memcpy(v[n].dirty, c->e[s].dirty, sizeof(v[n].dirty));
		n++;
	}
	pthread_mutex_unlock(&c->lock);
	if (cap && !v)
		return -ENOMEM;
	qsort(v, n, sizeof(*v), rext_cmp);
	for (uint32_t i = 0; i < n; i++)
		for (unsigned k = 0; k < c->spe; k++) {
			uint64_t a = v[i].idx * c->extent + (uint64_t)k * C_SECTOR;
			bool d = bm_test(v[i].dirty, k);

			if (!bm_test(v[i].valid, k))
				continue;
			if (run_b == a && run_b > run_a && d == run_dirty) {
				run_b += C_SECTOR;
				continue;
			}
			if (run_b > run_a)
				run_out(buf, len, &out, run_a, run_b - run_a, run_dirty);
			run_a = a;
			run_b = a + C_SECTOR;
			run_dirty = d;
		}
	if (run_b > run_a)
		run_out(buf, len, &out, run_a, run_b - run_a, run_dirty);
	free(v);
	if (out > INT32_MAX || (len && out > len))
		return -ERANGE;
	return (int)out;
}

int tfs_cache_file_ctl(struct tfs_fs *fs, struct tfs_inode *in, const char *cmd, char *err,
		       size_t errlen)
{
	struct tfs_cache *c = attached(fs);
	bool evict = strcmp(cmd, "evict") == 0, pin = strcmp(cmd, "pin") == 0;
	int rc;

	if (!evict && !pin && strcmp(cmd, "flush") != 0 && strcmp(cmd, "unpin") != 0) {
		snprintf(err, errlen, "unknown file command '%.40s' (flush, evict, pin, unpin)", cmd);
		return -EINVAL;
	}
	rc = changeable(c, err, errlen);
	if (rc)
		return rc;
	rc = tfs_ns_load_file(fs, in);
	if (rc == 0 && (pin || strcmp(cmd, "unpin") == 0))
		return c_pin_set(c, in, pin, err, errlen);
	if (rc == 0 && evict) {
		struct cfile *f;

		pthread_mutex_lock(&c->lock);
		f = c_file_find(c, in->fid);
		rc = f && f->pinned ? -EBUSY : 0;
		pthread_mutex_unlock(&c->lock);
		if (rc) {
			snprintf(err, errlen, "the file is pinned (unpin it first)");
			return rc;
		}
	}
	if (rc == 0)
		rc = c_flush_file(c, in);
	if (rc == 0 && evict)
		c_evict_file(c, in->fid);
	if (rc)
		snprintf(err, errlen, "%s of file %" PRIu64 ": %s", cmd, in->fid, strerror(-rc));
	return rc;
}

/* The tunables with a number, and the ranges of their mount options
 * (tierfs.c; invariant 3). */
static const struct tfs_num_spec tunables[] = {
	{ "seq_cutoff", TFS_NUM_SIZE, 0, (double)(1ull << 40), "0: off" },
	{ "promote_threshold", TFS_NUM_UINT, 0, 65535, "0: auto" },
	{ "dirty_low", TFS_NUM_UINT, 0, 99, NULL },
	{ "dirty_high", TFS_NUM_UINT, 1, 100, NULL },
};

static const struct tfs_num_spec *tunable(const char *name)
{
	for (size_t i = 0; i < sizeof(tunables) / sizeof(tunables[0]); i++)
		if (strcmp(tunables[i].name, name) == 0)
			return &tunables[i];
	return NULL;
}

int tfs_cache_tunable_get(struct tfs_fs *fs, const char *name, char *buf, size_t len)
{
	struct tfs_cache *c = attached(fs);
	int l;

	if (!c)
		return -ENODEV;
	pthread_mutex_lock(&c->lock);
	if (strcmp(name, "cache_mode") == 0)
		l = snprintf(buf, len, "%s", tfs_cache_mode_name(c_mode(c)));
	else if (strcmp(name, "seq_cutoff") == 0)
		l = snprintf(buf, len, "%" PRIu64, c->seq_cutoff);
	else if (strcmp(name, "promote_threshold") == 0)
		l = snprintf(buf, len, "%u", c_tuned(c) ? 0 : c_promote(c));
	else if (strcmp(name, "dirty_low") == 0)
		l = snprintf(buf, len, "%u", c->dirty_low);
	else if (strcmp(name, "dirty_high") == 0)
		l = snprintf(buf, len, "%u", c->dirty_high);
	else
		l = -ENODATA;
	pthread_mutex_unlock(&c->lock);
	return l >= 0 && (size_t)l >= len ? -ERANGE : l;
}

int tfs_cache_tunable_set(struct tfs_fs *fs, const char *name, const char *val, char *err,
			  size_t errlen)
{
	struct tfs_cache *c = attached(fs);
	const struct tfs_num_spec *sp = tunable(name);
	uint64_t size = 0;
	unsigned u = 0;
	int rc;

	if (strcmp(name, "cache_mode") == 0)
		return tfs_cache_ctl(fs, "cache_mode", val, err, errlen);
	if (!sp) {
		snprintf(err, errlen, "'%.40s' is not a tunable (cache_mode, seq_cutoff, "
			 "promote_threshold, dirty_low, dirty_high)", name);
		return -ENODATA;
	}
	rc = changeable(c, err, errlen);
	if (rc)
		return rc;
	rc = tfs_parse_num(sp, val, sp->kind == TFS_NUM_SIZE ? (void *)&size : (void *)&u, err,
			   errlen);
	if (rc)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	if ((strcmp(name, "dirty_low") == 0 && u >= c->dirty_high) ||
	    (strcmp(name, "dirty_high") == 0 && u <= c->dirty_low)) {
		snprintf(err, errlen, "%s=%u: dirty_low (%u) must stay below dirty_high (%u)", name,
			 u, name[6] == 'l' ? u : c->dirty_low, name[6] == 'h' ? u : c->dirty_high);
		rc = -EINVAL;
	} else if (sp->kind == TFS_NUM_SIZE) {
		__atomic_store_n(&c->seq_cutoff, size, __ATOMIC_RELAXED);
	} else if (strcmp(name, "promote_threshold") == 0) {
		c_watch_promote(c, u, u == 0);	/* 0: auto */
	} else if (strcmp(name, "dirty_low") == 0) {
		c->dirty_low = u;
	} else {
		c->dirty_high = u;
	}
	pthread_cond_signal(&c->fcond);	/* the flusher's pace follows the watermarks */
	pthread_mutex_unlock(&c->lock);
	if (rc == 0)
		tfs_info("cache %s: %s %s", c->dir, name, val);
	return rc;
}

void tfs_cache_stats_reset(struct tfs_fs *fs)
{
	struct tfs_cache *c = attached(fs);

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c_history_reset(c);
	c_watch_reset(c);
	pthread_mutex_unlock(&c->lock);
}

int tfs_cache_trace(struct tfs_fs *fs, const char *cmd, char *err, size_t errlen)
{
	if (!attached(fs)) {
		snprintf(err, errlen, "no cache is attached (mount with -o cache=DIR)");
		return -ENODEV;
	}
	return c_trace_ctl(cmd, err, errlen);
}

int tfs_cache_trace_state(struct tfs_fs *fs, char *buf, size_t len)
{
	return attached(fs) ? c_trace_state(buf, len) : -ENODEV;
}
