/* bind.c - the SSD tier's life: binding to the array, set-up, start,
 * stop and detach.
 *
 * Owns: the journal's record of which cache the array is bound to and
 * which files have writes only in it (DESIGN §10.2), as a mount reads it:
 * whether the cache directory given is used, made anew or refused, and
 * what cache_discard gives up (tfs_cache_setup, tfs_cache_abandon);
 * loading the index from the store at start, saving heat and marking the
 * cache clean at a clean stop; and detach (tierctl detach).  store.c has
 * what is in the cache directory, opts.c the options, status.c the
 * status lines and the control commands.
 *
 * Invariants:
 *  1. A cache is used only if the journal names it as the array's cache:
 *     any other (an older one, one from before a mount without cache=) may
 *     be stale and is made anew; one bound to another array is refused.
 *  2. A mount never goes ahead while files named dirty in the journal
 *     would lose their data, unless cache_discard says so (and names them).
 *  3. After a stop that was not clean under another boot id, only dirty
 *     sectors are trusted (DESIGN §10.5).
 *  4. A mount refused after the cache was set up leaves the cache directory
 *     as it found it, as far as it can: what set-up made (the directory,
 *     a new data file and extent map) is removed again (cache_unmake); a
 *     stale cache it wiped stays wiped (it would have been made anew).  The
 *     options are checked before (tfs_cache_opts_check, opts.c), so a bad
 *     option makes nothing.
 *
 * The cache directory is private before set-up reads it (store.c
 * invariant 1); detach never leaves a write in the unbound cache
 * (write.c invariant 5).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tierfs/cache.h"
#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/inode.h"
#include "tierfs/ns.h"
#include "tierfs/walk.h"
#include "tierfs/parse.h"
#include "tierfs/super.h"
#include "cache_i.h"

/* ------------------------------------------------------------------ */
/* Binding and set-up                                                  */
/* ------------------------------------------------------------------ */

/* A uuid as the two u64 of a journal set entry. */
static void uuid_pair(const char *uuid, uint64_t *a, uint64_t *b)
{
	char hex[33];
	unsigned n = 0;

	for (const char *p = uuid; *p && n < 32; p++)
		if (*p != '-')
			hex[n++] = *p;
	hex[n] = 0;
	*b = strtoull(hex + (n > 16 ? 16 : n), NULL, 16);
	hex[n > 16 ? 16 : n] = 0;
	*a = strtoull(hex, NULL, 16);
}

struct bound {
	uint64_t a, b;
	unsigned n;
};

static int bound_cb(void *arg, uint64_t a, uint64_t b)
{
	struct bound *bd = arg;

	bd->a = a;
	bd->b = b;
	bd->n++;
	return 0;
}

/* Bind the array to cache uuid (NULL: to none) in its journal. */
static int journal_bind(struct tfs_fs *fs, const char *uuid)
{
	uint64_t a, b;
	int rc = tfs_meta_set_clear(fs->meta, TFS_SET_CACHE);

	if (rc == 0 && uuid) {
		uuid_pair(uuid, &a, &b);
		rc = tfs_meta_set_put(fs->meta, TFS_SET_CACHE, a, b);
	}
	return rc ? rc : tfs_meta_sync(fs->meta);
}

struct lost {
	struct tfs_fs *fs;
	uint64_t found;
};

static int lost_cb(void *arg, struct tfs_inode *in, const struct stat *st)
{
	struct lost *l = arg;
	struct tfs_loc loc;

	if (tfs_ns_load_file(l->fs, in) || tfs_meta_set_has(l->fs->meta, TFS_SET_CDIRTY,
							     in->fid, 0) != 1)
		return 0;
	l->found++;
	if (tfs_inode_loc(l->fs, in, &loc) == 0) {
		char *p = tfs_loc_path(l->fs, &loc);

		tfs_warn("cache_discard: /%s lost the writes that were only in the cache",
			 p ? p : loc.name);
		free(p);
		tfs_loc_put(l->fs, &loc);
	}
	return 0;
}

/* cache_discard: name the files whose dirty data is given up, forget them. */
static int discard_lost(struct tfs_fs *fs, uint64_t ndirty)
{
	struct lost l = { .fs = fs };
	int rc = tfs_walk_files(fs, lost_cb, &l);

	if (rc)
		return rc;
	tfs_warn("cache_discard: %" PRIu64 " files lost data; %" PRIu64 " more were deleted since",
		 l.found, ndirty > l.found ? ndirty - l.found : 0);
	rc = tfs_meta_set_clear(fs->meta, TFS_SET_CDIRTY);
	return rc ? rc : journal_bind(fs, NULL);
}

/* Remove what this mount's set-up made (invariant 4). */
static void cache_unmake(struct tfs_cache *c)
{
	if (c->made_files && c_dir_wipe(c->dir))
		tfs_warn("cache %s: cannot remove the cache this refused mount made", c->dir);
	if (c->made_dir && rmdir(c->dir))
		tfs_warn("cache %s: cannot remove the directory this refused mount made: %s",
			 c->dir, strerror(errno));
	c->made_files = c->made_dir = false;
}

/* The kernel's boot id; TIERFS_BOOT_ID stands in for it in tests, which
 * mount the crash states of a power cut without rebooting. */
static void boot_id(char *out, size_t len)
{
	const char *fake = getenv("TIERFS_BOOT_ID");
	FILE *f;

	if (fake && *fake) {
		snprintf(out, len, "%s", fake);
		return;
	}
	f = fopen("/proc/sys/kernel/random/boot_id", "r");
	out[0] = 0;
	if (f) {
		if (fgets(out, (int)len, f))
			out[strcspn(out, "\n")] = 0;
		fclose(f);
	}
}

/* What the namespace needs from the tier (fs.h): it calls nothing else. */
static const struct tfs_tier_hooks tier_hooks = {
	.gone = tfs_cache_forget,
	.found = tfs_cache_found,
	.created = tfs_cache_created,
	.size = tfs_cache_size,
	.dirty_bytes = tfs_cache_dirty_bytes,
};

int tfs_cache_setup(struct tfs_fs *fs, const struct tfs_cache_opts *o, char *err,
		    size_t errlen)
{
	struct tfs_cache *c;
	struct bound bd = { 0 };
	uint64_t ndirty = 0, a, b;
	char array[256] = "", why[512] = "";
	enum c_probe pr;
	bool bound, discarded = false;
	int rc;

	rc = tfs_meta_set_foreach(fs->meta, TFS_SET_CACHE, bound_cb, &bd);
	if (rc == 0)
		rc = tfs_meta_set_count(fs->meta, TFS_SET_CDIRTY, &ndirty);
	if (rc) {
		snprintf(err, errlen, "cannot read the cache binding from the journal: %s",
			 strerror(-rc));
		return rc;
	}
	if (!o->dir) {
		if (ndirty && !o->discard) {
			snprintf(err, errlen, "%" PRIu64 " files have writes that are only in the "
				 "array's write-back cache: mount with -o cache=DIR, or with "
				 "-o cache_discard to give them up", ndirty);
			return -EBUSY;
		}
		if (fs->readonly)
			return 0;
		if (ndirty)
			return discard_lost(fs, ndirty);
		/* running uncached: a cache used before is stale from now on */
		return bd.n ? journal_bind(fs, NULL) : 0;
	}

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fs = fs;
	c->fd = c->dfd = -1;
	c->readonly = fs->readonly;
	c->dir = realpath(o->dir, NULL);
	if (!c->dir && errno == ENOENT && mkdir(o->dir, 0700) == 0) {
		c->made_dir = true;
		c->dir = realpath(o->dir, NULL);
	}
	if (!c->dir) {
		snprintf(err, errlen, "cache=%s: %s", o->dir, strerror(errno));
		rc = -errno;
		goto fail;
	}
	rc = c_dir_private(c->dir, err, errlen);
	if (rc == 0)
		rc = c_config(c, o, err, errlen);
	if (rc)
		goto fail;
	pr = c_probe(c, array, sizeof(array), why, sizeof(why));
	if (pr == C_PROBE_OK && strcmp(array, fs->array->sb.uuid) != 0) {
		if (array[0]) {
			snprintf(err, errlen, "cache %s belongs to array %s, not to this array "
				 "(%s): give another directory, or detach it from its array first",
				 c->dir, array, fs->array->sb.uuid);
			rc = -EEXIST;
			goto fail;
		}
		pr = C_PROBE_CORRUPT;	/* detached from its array: free to reuse */
		snprintf(why, sizeof(why), "it was detached");
	}
	uuid_pair(c->uuid, &a, &b);
	bound = pr == C_PROBE_OK && bd.n == 1 && bd.a == a && bd.b == b;
	if (!bound && ndirty) {
		if (!o->discard) {
			snprintf(err, errlen, "%" PRIu64 " files have writes that are only in the "
				 "array's write-back cache, and %s is not that cache%s%s: mount "
				 "with the right cache=DIR, or with -o cache_discard to give them up",
				 ndirty, c->dir, why[0] ? ": " : "", why);
			rc = -EBUSY;
			goto fail;
		}
		if (fs->readonly) {
			snprintf(err, errlen, "cache_discard needs a read-write mount");
			rc = -EROFS;
			goto fail;
		}
		rc = discard_lost(fs, ndirty);
		if (rc)
			goto fail;
		discarded = true;
	}
	if (!bound && fs->readonly) {
		/* nothing of it can be trusted and nothing may be written */
		tfs_warn("cache %s is not this array's current cache: not used on a read-only "
			 "mount", c->dir);
		goto fail_quiet;
	}
	if (!bound) {
		if (pr == C_PROBE_CORRUPT)
			tfs_warn("cache %s: %s; made anew (%s)", c->dir, why, discarded
				 ? "the writes only it held are given up: cache_discard"
				 : "no dirty data was in it");
		else if (pr == C_PROBE_OK)
			tfs_warn("cache %s is stale (the array ran without it): emptied", c->dir);
		rc = c_config(c, o, err, errlen);	/* probe may have set geometry */
		if (rc == 0)
			rc = c_dir_wipe(c->dir);
		if (rc == 0) {
			c->made_files = true;
			rc = c_create(c, err, errlen);
		}
		if (rc == 0)
			rc = journal_bind(fs, c->uuid);
		if (rc) {
			if (!err[0])
				snprintf(err, errlen, "cache %s: %s", c->dir, strerror(-rc));
			goto fail;
		}
	} else {
		char b1[32], b2[32];

		if (o->extent && o->extent != c->extent)
			tfs_warn("cache %s: extent size is %s (set when it was made); "
				 "cache_extent=%s ignored", c->dir,
				 tfs_fmt_size(c->extent, b1, sizeof(b1)),
				 tfs_fmt_size(o->extent, b2, sizeof(b2)));
		if (o->size && o->size / c->extent != c->nslots)
			tfs_warn("cache %s: size is %s (set when it was made); "
				 "cache_size=%s ignored", c->dir,
				 tfs_fmt_size((uint64_t)c->nslots * c->extent, b1, sizeof(b1)),
				 tfs_fmt_size(o->size, b2, sizeof(b2)));
	}
	c->spe = c->extent / C_SECTOR;
	fs->cache = c;
	fs->tier = &tier_hooks;
	return 0;
fail:
	if (!err[0])
		snprintf(err, errlen, "cache %s: %s", o->dir, strerror(-rc));
fail_quiet:
	if (c->dir)
		cache_unmake(c);
	free(c->dir);
	free(c);
	return rc;
}

void tfs_cache_abandon(struct tfs_fs *fs)
{
	struct tfs_cache *c = fs->cache;

	if (!c)
		return;
	cache_unmake(c);
	fs->cache = NULL;
	fs->tier = NULL;
	free(c->dir);
	free(c);
}

/* ------------------------------------------------------------------ */
/* Start and stop                                                      */
/* ------------------------------------------------------------------ */

struct loader {
	struct tfs_cache *c;
	bool keep_clean;		/* the page cache outlived the daemon */
	uint64_t dropped;
};

static int load_ext(void *arg, const struct tfs_cext_rec *r)
{
	struct loader *ld = arg;
	struct tfs_cache *c = ld->c;
	struct cfile *f;
	struct cext *x;

	if (r->slot >= c->nslots || c->e[r->slot].used) {
		tfs_err("cache %s: extent map names slot %u twice or out of range", c->dir, r->slot);
		return -EUCLEAN;
	}
	f = c_link_slot(c, r->slot, r->fid, r->idx);
	if (!f)
		return -ENOMEM;
	x = &c->e[r->slot];
	memcpy(x->dirty, r->dirty, sizeof(x->dirty));
	memcpy(x->valid, ld->keep_clean ? r->valid : r->dirty, sizeof(x->valid));
	for (unsigned w = 0; w < TFS_CEXT_WORDS; w++)
		x->valid[w] |= x->dirty[w];
	x->heat = r->heat;
	x->heat_t = c_now();
	if (bm_any(x->dirty)) {
		c_dirty_add(c, f, bm_count(x->dirty));
		c_dirty_join(c, r->slot);
		c->ndirty++;
		if (f->ndirty++ == 0) {
			f->unresolved = true;
			f->journaled = true;
			c->unresolved++;
		}
	}
	if (!bm_any(x->valid))
		ld->dropped++;
	return 0;
}

static int load_size(void *arg, uint64_t fid, uint64_t size)
{
	struct tfs_cache *c = arg;
	struct cfile *f = c_file_get(c, fid);

	if (!f)
		return -ENOMEM;
	f->size = size;
	return 0;
}

/* Drop the slots the load left without a valid sector. */
static int drop_empty(struct tfs_cache *c)
{
	for (uint32_t s = 0; s < c->nslots; s++) {
		struct tfs_cstore_op op;
		int rc;

		if (!c->e[s].used || bm_any(c->e[s].valid))
			continue;
		op = (struct tfs_cstore_op){ .op = TFS_CS_DEL_EXT, .fid = c->e[s].fid,
					     .idx = c->e[s].idx };
		rc = c_commit(c, &op, 1);
		if (rc)
			return rc;
		c_unlink_slot(c, s);
	}
	return 0;
}

struct stale {
	struct tfs_cache *c;
	uint64_t *fid;
	unsigned n, cap;
};

static int stale_cb(void *arg, uint64_t fid, uint64_t zero)
{
	struct stale *st = arg;
	struct cfile *f = c_file_find(st->c, fid);

	if (f && f->ndirty)
		return 0;
	if (st->n == st->cap) {
		unsigned cap = st->cap ? 2 * st->cap : 64;
		uint64_t *p = realloc(st->fid, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		st->fid = p;
		st->cap = cap;
	}
	st->fid[st->n++] = fid;
	return 0;
}

/* Journal entries of files with no dirty extent (a stop came between the
 * flush and the entry's removal) are dropped. */
static int journal_reconcile(struct tfs_cache *c)
{
	struct stale st = { .c = c };
	int rc = tfs_meta_set_foreach(c->fs->meta, TFS_SET_CDIRTY, stale_cb, &st);

	for (unsigned i = 0; rc == 0 && i < st.n; i++)
		rc = tfs_meta_set_del(c->fs->meta, TFS_SET_CDIRTY, st.fid[i], 0);
	free(st.fid);
	return rc;
}

/* The store's barrier (cstore.c invariant 7): the slots' bytes first. */
static int data_barrier(void *arg)
{
	struct tfs_cache *c = arg;

	return fdatasync(c->fd) ? -errno : 0;
}

int tfs_cache_start(struct tfs_fs *fs)
{
	struct tfs_cache *c = fs->cache;
	struct loader ld = { .c = c };
	char v[64], boot[64];
	int rc;

	if (!c)
		return 0;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->jlock, NULL);
	pthread_cond_init(&c->cond, NULL);
	pthread_cond_init(&c->fcond, NULL);
	pthread_cond_init(&c->pcond, NULL);
	rc = c_dir_open(c);
	if (rc)
		return rc;
	c->e = calloc(c->nslots, sizeof(*c->e));
	c->dhead = c->dtail = C_NONE;
	c->hmask = tfs_pow2_at_least(c->nslots) - 1;
	c->htab = malloc((size_t)(c->hmask + 1) * sizeof(*c->htab));
	c->freel = malloc((size_t)c->nslots * sizeof(*c->freel));
	c->fmask = tfs_pow2_at_least(c->nslots / 4 + 1) - 1;
	c->ftab = calloc((size_t)c->fmask + 1, sizeof(*c->ftab));
	c->umask = tfs_heat_entries(c->nslots) - 1;
	c->uheat = calloc((size_t)c->umask + 1, sizeof(*c->uheat));
	c->pol = tfs_policy_new(c->policy_kind, c->nslots, 0);	/* hash seed 0: the daemon's */
	/* a flusher round's worth of noted slots (flush.c invariant 15) */
	c->rqcap = c->nslots < TFS_FLUSH_FILES * TFS_FLUSH_BATCH ? c->nslots
								 : TFS_FLUSH_FILES * TFS_FLUSH_BATCH;
	c->rq = malloc((size_t)c->rqcap * sizeof(*c->rq));
	if (c->reclaim_mode == TFS_RECLAIM_AUTO)
		c->ev = tfs_evidence_new(c->nslots, TFS_EVIDENCE_ON);
	if (!c->e || !c->htab || !c->freel || !c->ftab || !c->uheat || !c->pol || !c->rq ||
	    (c->reclaim_mode == TFS_RECLAIM_AUTO && !c->ev) || c_watch_start(c))
		return -ENOMEM;
	memset(c->htab, 0xff, (size_t)(c->hmask + 1) * sizeof(*c->htab));

	/* the clean sectors are trusted when the daemon stopped cleanly, or
	 * died without the machine going down (its writes are in the page
	 * cache); after a reboot only what was fsynced is (DESIGN §10.5) */
	boot_id(boot, sizeof(boot));
	ld.keep_clean = (tfs_cstore_info_get(c->cs, "clean", v, sizeof(v)) == 0 &&
			 strcmp(v, "1") == 0) ||
			(tfs_cstore_info_get(c->cs, "boot", v, sizeof(v)) == 0 &&
			 strcmp(v, boot) == 0);
	tfs_cstore_set_barrier(c->cs, data_barrier, c);
	if (!ld.keep_clean && !c->readonly) {
		/* the machine went down: no durability point covered what the
		 * store's log holds beyond the last one (cstore.c invariant 8) */
		uint64_t n = 0;

		rc = tfs_cstore_drop_unsynced(c->cs, &n);
		if (rc) {
			tfs_err("cache %s: cannot drop the unsynced log: %s", c->dir, strerror(-rc));
			return rc;
		}
		if (n)
			tfs_info("cache %s: %" PRIu64 " extent map updates were never synced: "
				 "dropped (after a restart of the machine)", c->dir, n);
	}
	rc = tfs_cstore_ext_foreach(c->cs, load_ext, &ld);
	if (rc == 0)
		rc = tfs_cstore_size_foreach(c->cs, load_size, c);
	if (rc == 0)
		rc = c_pin_load(c);
	if (rc) {
		tfs_err("cache %s: cannot load the extent map: %s", c->dir, strerror(-rc));
		return rc;
	}
	for (uint32_t s = c->nslots; s-- > 0;)
		if (!c->e[s].used)
			c->freel[c->nfree++] = s;
	c->free_synced = c->nfree;	/* the walk above is after a durability point */
	if (!c->readonly) {
		rc = drop_empty(c);
		if (rc == 0)
			rc = journal_reconcile(c);
		if (rc == 0)
			rc = tfs_cstore_info_set(c->cs, "clean", "0");
		if (rc == 0)
			rc = tfs_cstore_info_set(c->cs, "boot", boot);
		if (rc)
			return rc;
	}
	c_history_load(c);
	tfs_info("cache %s: %s, %u of %u extents cached, %u dirty%s%s", c->dir,
		 tfs_cache_mode_name(c->mode), c->nused, c->nslots, c->ndirty,
		 ld.keep_clean ? "" : " (after a restart of the machine: clean extents dropped)",
		 c->unresolved ? "; looking for the dirty files" : "");
	if (ld.dropped)
		tfs_info("cache %s: %" PRIu64 " extents held nothing that survived", c->dir, ld.dropped);
	return c->readonly ? 0 : c_threads_start(c);
}

void tfs_cache_stop(struct tfs_fs *fs)
{
	struct tfs_cache *c = fs->cache;
	struct tfs_cext_rec *recs;
	struct tfs_cstore_op *ops;
	unsigned n = 0;
	int rc;

	if (!c || !c->cs)
		return;
	c_threads_stop(c);
	c_trace_stop();		/* a running trace ends with the mount */
	if (!c->readonly) {
		c_history_save(c, true);
		/* heat is kept in memory and saved here (and not on every hit) */
		recs = calloc(c->nused + 1, sizeof(*recs));
		ops = calloc(c->nused + 1, sizeof(*ops));
		pthread_mutex_lock(&c->lock);
		for (uint32_t s = 0; recs && ops && s < c->nslots; s++) {
			if (!c->e[s].used || c->e[s].dead)
				continue;
			c_record(c, s, &recs[n]);
			ops[n] = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT, .rec = &recs[n] };
			n++;
		}
		pthread_mutex_unlock(&c->lock);
		/* "clean" only after a durability point over the saved records:
		 * else the next start after a reboot trusts the dirty sectors
		 * alone */
		rc = ops ? c_commit(c, ops, n) : 0;
		if (rc == 0)
			rc = tfs_cstore_sync(c->cs);
		if (rc == 0)
			rc = tfs_cstore_info_set(c->cs, "clean", "1");
		if (rc)
			tfs_err("cache %s: cannot mark the cache clean at stop: %s", c->dir,
				strerror(-rc));
		free(recs);
		free(ops);
	}
	/* dirty files keep their journal entries: the cache still holds them;
	 * files named by their create and never dirtied here (their writes
	 * went to the RAID, or there were none) lose theirs, as the flusher's
	 * durability point would have dropped them a few seconds later
	 * (index.c invariant 4): an uncached mount refuses an array whose
	 * journal names files */
	c_prenamed_expire(c, 0);
	if (c_journal_drain(c))
		tfs_err("cache %s: stopped with files not named in the journal: the mount "
			"cannot tell they have data in the cache if it is lost", c->dir);
	for (uint32_t h = 0; h <= c->fmask; h++)
		for (struct cfile *f = c->ftab[h]; f; f = f->next)
			if (f->in) {
				tfs_inode_unref(fs, f->in);
				f->in = NULL;
			}
	rc = tfs_meta_sync(fs->meta);
	if (rc)
		tfs_err("cache %s: journal sync at stop failed: %s", c->dir, strerror(-rc));
	tfs_cstore_close(c->cs);
	c->cs = NULL;
	close(c->fd);
	if (c->dfd >= 0)
		close(c->dfd);
	tfs_info("cache %s: stopped with %u extents cached, %u dirty", c->dir, c->nused, c->ndirty);
}

/* ------------------------------------------------------------------ */
/* Detach                                                              */
/* ------------------------------------------------------------------ */

/* Detach: everything flushed, the cache emptied and unbound, the array
 * uncached from now on.  A write that read the mode before it either ends
 * before the last flush (which takes what it wrote) or waits at the gate
 * and then goes to the RAID (write.c invariant 5). */
int c_detach(struct tfs_cache *c, char *err, size_t errlen)
{
	bool stopped = false;
	int rc;

	__atomic_store_n(&c->mode, TFS_CACHE_OFF, __ATOMIC_RELEASE);
	rc = c_flush_all(c);	/* the bulk, with writes still coming in */
	if (rc == 0) {
		pthread_mutex_lock(&c->lock);
		c->gate = true;
		while (c->writers)
			pthread_cond_wait(&c->cond, &c->lock);
		pthread_mutex_unlock(&c->lock);
		rc = c_flush_all(c);	/* what they wrote; nobody adds more */
	}
	if (rc == 0) {
		c_threads_stop(c);
		stopped = true;
	}
	pthread_mutex_lock(&c->lock);
	if (rc == 0 && c->ndirty)
		rc = -EBUSY;	/* cannot happen: the gate is closed */
	if (rc == 0)
		__atomic_store_n(&c->detached, true, __ATOMIC_RELEASE);
	c->gate = false;
	pthread_cond_broadcast(&c->cond);
	if (rc && c->unresolved) {
		snprintf(err, errlen, "%u files with dirty data not found since the restart "
			 "(cache.unresolved_files): the cache stays attached", c->unresolved);
		rc = -EAGAIN;	/* the flusher keeps looking */
	} else if (rc) {
		snprintf(err, errlen, "flush failed (%s): the cache stays attached", strerror(-rc));
	}
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		int r = stopped ? c_threads_start(c) : 0;

		if (r)
			tfs_err("cache %s: the flusher cannot be restarted after a failed detach: "
				"%s; dirty data stays until the next mount", c->dir, strerror(-r));
		return rc;
	}
	/* requests already past the detached check see mode off: they only
	 * read the index, which empties under them without harm */
	pthread_mutex_lock(&c->lock);
	for (uint32_t s = 0; s < c->nslots; s++)
		if (c->e[s].used && !c->e[s].busy)
			c_unlink_slot(c, s);
	pthread_mutex_unlock(&c->lock);
	rc = tfs_cstore_clear(c->cs);
	if (rc == 0)
		rc = tfs_cstore_info_set(c->cs, "array", "");
	if (rc == 0)
		rc = tfs_cstore_sync(c->cs);
	if (rc == 0)
		rc = tfs_meta_set_clear(c->fs->meta, TFS_SET_CDIRTY);
	if (rc == 0)
		rc = journal_bind(c->fs, NULL);
	if (rc)
		snprintf(err, errlen, "cache emptied, but unbinding failed: %s", strerror(-rc));
	else
		tfs_info("cache %s: detached; the array runs uncached", c->dir);
	return rc;
}

