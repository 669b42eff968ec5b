/* inode.c - the inode table: FUSE node ids, names, lifetimes.
 *
 * Owns: every struct tfs_inode and its aliases.
 *
 * Invariants (all under fs->ilock):
 *  1. A hashed inode is the only hashed inode with its st_ino on the
 *     primary member (health.c; rekeyed when the primary changes).
 *     An inode whose object is gone (last link removed) is unhashed, so a
 *     new object that reuses the number gets a new inode.  The remover
 *     unhashes only after the members' unlinks, and the member
 *     filesystem may give the number to a file created meanwhile, in any
 *     directory: so a create (tfs_inode_bind_new) unhashes a hashed
 *     inode of its number instead of joining it.  It once joined, and
 *     the remover then dropped the new file's write-back data as its own
 *     (test_cache.py::test_a_file_created_during_an_unlink_keeps_its_data).
 *     But a walk's lookup (the kernel's wait for the create) may bind the
 *     new file itself, between its create on the primary and the create's
 *     bind: the create joins an inode that has claimed the new identity
 *     (no other object has it), and an inode unhashed before it claimed
 *     never claims (tfs_inode_claim_fid: -ESTALE; the lookup starts again
 *     and finds the create's).  The walk's inode once claimed after the
 *     create's and the two refused each other (EUCLEAN; test_raid.py::
 *     test_a_walk_that_looks_up_a_file_being_created_takes_its_identity_once).
 *  2. Every alias holds a reference (refs) on its parent, so the chain from
 *     any inode to the root stays walkable.  Directories have at most one
 *     alias.
 *  3. An inode is freed when nlookup == 0 and refs == 0; freeing drops its
 *     aliases, which may free its parents in turn.
 *  4. Directory fd cache: a directory may hold one O_PATH fd per member,
 *     opened by path once and then reused.  An fd follows its directory
 *     object, so renames never make it stale; at most dmax directories keep
 *     fds (least recently used ones are closed when dusers == 0), so
 *     descriptors stay bounded however many inodes the kernel knows.
 *  5. One identity, one file: every regular file in the table (hashed or
 *     orphaned, until freed) is in the fid index under the identity its
 *     member files carry (in->fid), and two of them with one identity
 *     are both refused.  A file whose
 *     fid another inode already claims is not the same object (the same
 *     object is the same inode, invariant 1, hard links included): it is
 *     refused, and so is the first from then on (both fid_dup: which is
 *     the original cannot be told), because the SSD tier, the row locks
 *     and the placement all key by fid, and either would read and write
 *     the other's data.  The identity stays contested (fs->contested)
 *     while either is out of the table, and ends only when one of them is
 *     removed (unhashed: its object is gone); the other then claims it
 *     again on its next open (identity.c ns_fid_check_locked) and keeps the
 *     tier's extents of that identity (the removal leaves them).
 *
 * Lifetime:
 *   (new) --tfs_inode_bind--> live --forget/unref to 0/0--> freed
 *   live --tfs_inode_unhash (object removed)--> orphan --0/0--> freed
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tierfs/log.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"


static size_t hslot(struct tfs_fs *fs, uint64_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) >> 20) & (fs->hsize - 1);
}

int tfs_fs_init(struct tfs_fs *fs)
{
	pthread_mutex_init(&fs->ilock, NULL);
	pthread_mutex_init(&fs->fid_lock, NULL);
	pthread_rwlock_init(&fs->rename_lock, NULL);
	pthread_rwlock_init(&fs->ns_lock, NULL);
	pthread_rwlock_init(&fs->io_gate, NULL);
	pthread_rwlock_init(&fs->move_lock, NULL);
	for (int i = 0; i < TFS_NAME_LOCKS; i++)
		pthread_rwlock_init(&fs->name_lock[i], NULL);
	pthread_mutex_init(&fs->health_lock, NULL);
	fs->hsize = 1 << 16;
	fs->htab = calloc(fs->hsize, sizeof(*fs->htab));
	fs->ftab = calloc(fs->hsize, sizeof(*fs->ftab));
	if (!fs->htab || !fs->ftab)
		return -ENOMEM;
	memset(&fs->root, 0, sizeof(fs->root));
	pthread_mutex_init(&fs->root.lock, NULL);
	fs->root.type = S_IFDIR;
	fs->root.nlookup = 2;		/* never forgotten */
	fs->root.fid_valid = true;	/* fid 0 */
	fs->lru.lru_next = fs->lru.lru_prev = &fs->lru;
	fs->dmax = 1024;
	return 0;
}

static void inode_free(struct tfs_fs *fs, struct tfs_inode *in);

static void alias_free_all(struct tfs_fs *fs, struct tfs_inode *in)
{
	struct tfs_alias *a = in->aliases, *next;

	in->aliases = NULL;
	for (; a; a = next) {
		struct tfs_inode *p = a->parent;

		next = a->next;
		free(a);
		if (--p->refs == 0 && p->nlookup == 0 && p != &fs->root)
			inode_free(fs, p);
	}
}

static void unhash_locked(struct tfs_fs *fs, struct tfs_inode *in)
{
	struct tfs_inode **pp;

	if (!in->hashed)
		return;
	for (pp = &fs->htab[hslot(fs, in->ino)]; *pp; pp = &(*pp)->hnext) {
		if (*pp == in) {
			*pp = in->hnext;
			break;
		}
	}
	in->hashed = false;
	fs->icount--;
}

static void dfd_drop_locked(struct tfs_fs *fs, struct tfs_inode *in)
{
	if (!in->dfd)
		return;
	for (uint32_t k = 0; k < fs->n; k++)
		if (in->dfd[k] >= 0)
			close(in->dfd[k]);
	free(in->dfd);
	in->dfd = NULL;
	if (in->lru_next) {
		in->lru_prev->lru_next = in->lru_next;
		in->lru_next->lru_prev = in->lru_prev;
		in->lru_next = in->lru_prev = NULL;
	}
	fs->dcount--;
}

static void unclaim_locked(struct tfs_fs *fs, struct tfs_inode *in)
{
	struct tfs_inode **pp;

	if (!in->fid_claimed)
		return;
	for (pp = &fs->ftab[hslot(fs, in->fid)]; *pp; pp = &(*pp)->fnext) {
		if (*pp == in) {
			*pp = in->fnext;
			break;
		}
	}
	in->fid_claimed = false;
}

static char *path_locked(struct tfs_fs *fs, struct tfs_inode *in, const char *leaf);

static size_t contested_find_locked(struct tfs_fs *fs, uint64_t fid)
{
	size_t i = 0;

	while (i < fs->ncontested && fs->contested[i] != fid)
		i++;
	return i;
}

int tfs_inode_claim_fid(struct tfs_fs *fs, struct tfs_inode *in, char **other)
{
	uint64_t fid = in->fid;
	struct tfs_inode *o;
	size_t s = hslot(fs, fid);
	int rc = 0;

	if (other)
		*other = NULL;
	if (fid == 0)
		return 0;
	pthread_mutex_lock(&fs->ilock);
	if (!in->fid_claimed && !in->hashed) {
		/* superseded before it claimed (invariant 1): no identity */
		pthread_mutex_unlock(&fs->ilock);
		return -ESTALE;
	}
	if (!in->fid_claimed) {
		in->fnext = fs->ftab[s];
		fs->ftab[s] = in;
		in->fid_claimed = true;
	}
	for (o = fs->ftab[s]; o && rc == 0; o = o->fnext) {
		if (o == in || o->fid != fid || !o->hashed)
			continue;	/* an unhashed one's object is gone */
		__atomic_store_n(&o->fid_dup, true, __ATOMIC_RELEASE);
		if (other)
			*other = o->aliases ? path_locked(fs, o->aliases->parent, o->aliases->name)
					    : strdup("(a file with no name left)");
		rc = -EEXIST;
	}
	if (rc == 0 && contested_find_locked(fs, fid) < fs->ncontested) {
		rc = -EEXIST;	/* the other is out of the table, not gone */
		if (other)
			*other = strdup("(another file, seen before)");
	} else if (rc && contested_find_locked(fs, fid) == fs->ncontested) {
		uint64_t *c = realloc(fs->contested, (fs->ncontested + 1) * sizeof(*c));

		if (c) {	/* without memory: refused while both are known */
			fs->contested = c;
			c[fs->ncontested++] = fid;
		}
	}
	pthread_mutex_unlock(&fs->ilock);
	return rc;
}

static void inode_free(struct tfs_fs *fs, struct tfs_inode *in)
{
	dfd_drop_locked(fs, in);
	unclaim_locked(fs, in);
	unhash_locked(fs, in);
	alias_free_all(fs, in);
	if (in->of)
		tfs_warn("inode %llu freed with open member files", (unsigned long long)in->ino);
	pthread_mutex_destroy(&in->lock);
	free(in);
	fs->ilive--;
}

void tfs_fs_destroy(struct tfs_fs *fs)
{
	for (size_t i = 0; i < fs->hsize; i++) {
		struct tfs_inode *in = fs->htab[i], *next;

		for (; in; in = next) {
			struct tfs_alias *a, *an;

			next = in->hnext;
			dfd_drop_locked(fs, in);
			for (a = in->aliases; a; a = an) {
				an = a->next;
				free(a);
			}
			pthread_mutex_destroy(&in->lock);
			free(in);
		}
	}
	dfd_drop_locked(fs, &fs->root);
	free(fs->htab);
	free(fs->ftab);
	free(fs->contested);
	fs->htab = NULL;
	fs->ftab = NULL;
}

struct tfs_inode *tfs_inode_get(struct tfs_fs *fs, uint64_t nodeid)
{
	return nodeid == TFS_ROOT_ID ? &fs->root : (struct tfs_inode *)(uintptr_t)nodeid;
}

uint64_t tfs_inode_count(struct tfs_fs *fs)
{
	size_t n;

	pthread_mutex_lock(&fs->ilock);
	n = fs->ilive;
	pthread_mutex_unlock(&fs->ilock);
	return n;
}

uint64_t tfs_inode_nodeid(struct tfs_fs *fs, struct tfs_inode *in)
{
	return in == &fs->root ? TFS_ROOT_ID : (uint64_t)(uintptr_t)in;
}

static struct tfs_alias *alias_find(struct tfs_inode *in, struct tfs_inode *parent,
				    const char *name)
{
	for (struct tfs_alias *a = in->aliases; a; a = a->next)
		if (a->parent == parent && strcmp(a->name, name) == 0)
			return a;
	return NULL;
}

static int alias_add(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_inode *parent,
		     const char *name)
{
	size_t l = strlen(name) + 1;
	struct tfs_alias *a;

	if (alias_find(in, parent, name))
		return 0;
	a = malloc(sizeof(*a) + l);
	if (!a)
		return -ENOMEM;
	memcpy(a->name, name, l);
	a->parent = parent;
	parent->refs++;
	if (S_ISDIR(in->type) && in->aliases) {
		/* a directory has one name: the newest one wins */
		struct tfs_alias *old = in->aliases;

		struct tfs_inode *op = old->parent;

		in->aliases = NULL;
		free(old);
		if (--op->refs == 0 && op->nlookup == 0 && op != &fs->root)
			inode_free(fs, op);
	}
	a->next = in->aliases;
	in->aliases = a;
	return 0;
}

struct tfs_inode *tfs_inode_find(struct tfs_fs *fs, uint64_t ino)
{
	struct tfs_inode *in;

	for (in = fs->htab[hslot(fs, ino)]; in; in = in->hnext)
		if (in->ino == ino)
			return in;
	return NULL;
}

/* Is in, hashed under the number of an object just created with identity
 * fid, that object's own inode (invariant 1): a lookup that bound it first
 * and claimed fid, which no other object has?  Caller holds ilock. */
static bool new_object_locked(const struct tfs_inode *in, uint64_t fid)
{
	return fid != 0 && in->fid_claimed && in->fid == fid;
}

/* fresh: the object was just created with identity fid (invariant 1). */
static struct tfs_inode *bind(struct tfs_fs *fs, struct tfs_inode *parent, const char *name,
			      const struct stat *st, bool fresh, uint64_t fid)
{
	struct tfs_inode *in;

	pthread_mutex_lock(&fs->ilock);
	in = tfs_inode_find(fs, st->st_ino);
	if (in && (in->type != (st->st_mode & S_IFMT) ||
		   (fresh && !new_object_locked(in, fid)))) {
		/* the number was reused by another object: a new one, or
		 * one of another type (invariant 1) */
		unhash_locked(fs, in);
		in = NULL;
	}
	if (!in) {
		in = calloc(1, sizeof(*in));
		if (!in) {
			pthread_mutex_unlock(&fs->ilock);
			return NULL;
		}
		pthread_mutex_init(&in->lock, NULL);
		fs->ilive++;
		in->ino = st->st_ino;
		in->type = st->st_mode & S_IFMT;
		in->chg_data = in->chg_all = 1;	/* its first sync runs */
		in->hashed = true;
		in->hnext = fs->htab[hslot(fs, in->ino)];
		fs->htab[hslot(fs, in->ino)] = in;
		fs->icount++;
	}
	if (alias_add(fs, in, parent, name)) {
		if (in->nlookup == 0 && in->refs == 0)
			inode_free(fs, in);
		pthread_mutex_unlock(&fs->ilock);
		return NULL;
	}
	in->nlookup++;
	pthread_mutex_unlock(&fs->ilock);
	return in;
}

struct tfs_inode *tfs_inode_bind(struct tfs_fs *fs, struct tfs_inode *parent,
				 const char *name, const struct stat *st)
{
	return bind(fs, parent, name, st, false, 0);
}

struct tfs_inode *tfs_inode_bind_new(struct tfs_fs *fs, struct tfs_inode *parent,
				     const char *name, const struct stat *st, uint64_t fid)
{
	return bind(fs, parent, name, st, true, fid);
}

void tfs_inode_forget(struct tfs_fs *fs, struct tfs_inode *in, uint64_t n)
{
	if (in == &fs->root)
		return;
	pthread_mutex_lock(&fs->ilock);
	in->nlookup = n > in->nlookup ? 0 : in->nlookup - n;
	if (in->nlookup == 0 && in->refs == 0)
		inode_free(fs, in);
	pthread_mutex_unlock(&fs->ilock);
}

void tfs_inode_ref(struct tfs_fs *fs, struct tfs_inode *in)
{
	pthread_mutex_lock(&fs->ilock);
	in->refs++;
	pthread_mutex_unlock(&fs->ilock);
}

void tfs_inode_unref(struct tfs_fs *fs, struct tfs_inode *in)
{
	pthread_mutex_lock(&fs->ilock);
	if (--in->refs == 0 && in->nlookup == 0 && in != &fs->root)
		inode_free(fs, in);
	pthread_mutex_unlock(&fs->ilock);
}

static void alias_unlink(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_alias *a)
{
	struct tfs_alias **pp;

	for (pp = &in->aliases; *pp; pp = &(*pp)->next) {
		if (*pp == a) {
			*pp = a->next;
			break;
		}
	}
}

void tfs_inode_alias_drop(struct tfs_fs *fs, struct tfs_inode *in,
			  struct tfs_inode *parent, const char *name)
{
	struct tfs_alias *a;

	pthread_mutex_lock(&fs->ilock);
	a = alias_find(in, parent, name);
	if (a) {
		alias_unlink(fs, in, a);
		free(a);
		if (--parent->refs == 0 && parent->nlookup == 0 && parent != &fs->root)
			inode_free(fs, parent);
	}
	pthread_mutex_unlock(&fs->ilock);
}

void tfs_inode_alias_move(struct tfs_fs *fs, struct tfs_inode *in,
			  struct tfs_inode *oparent, const char *oname,
			  struct tfs_inode *nparent, const char *nname)
{
	struct tfs_alias *a;
	size_t l = strlen(nname) + 1;

	pthread_mutex_lock(&fs->ilock);
	a = alias_find(in, oparent, oname);
	if (a) {
		struct tfs_alias *na = realloc(a, sizeof(*a) + l);

		if (na) {
			/* realloc may move it: relink */
			struct tfs_alias **pp;

			for (pp = &in->aliases; *pp; pp = &(*pp)->next)
				if (*pp == a)
					break;
			if (*pp)
				*pp = na;
			a = na;
			memcpy(a->name, nname, l);
			if (a->parent != nparent) {
				nparent->refs++;
				a->parent = nparent;
				if (--oparent->refs == 0 && oparent->nlookup == 0 &&
				    oparent != &fs->root)
					inode_free(fs, oparent);
			}
		}
	}
	pthread_mutex_unlock(&fs->ilock);
}

void tfs_inode_unhash(struct tfs_fs *fs, struct tfs_inode *in)
{
	size_t i;

	pthread_mutex_lock(&fs->ilock);
	unhash_locked(fs, in);
	/* invariant 5: one of two files with one identity is gone */
	if (in->fid_claimed && (i = contested_find_locked(fs, in->fid)) < fs->ncontested)
		fs->contested[i] = fs->contested[--fs->ncontested];
	pthread_mutex_unlock(&fs->ilock);
}

/* "a/b/c/leaf" for (in, leaf), malloc'ed; the root alone is ".". */
static char *path_locked(struct tfs_fs *fs, struct tfs_inode *in, const char *leaf)
{
	size_t len = strlen(leaf) + 1, pos;
	struct tfs_inode *p;
	char *buf;

	for (p = in; p != &fs->root; p = p->aliases->parent) {
		if (!p->aliases)
			return NULL;
		len += strlen(p->aliases->name) + 1;
	}
	buf = malloc(len + 2);
	if (!buf)
		return NULL;
	pos = len - 1 - strlen(leaf);
	strcpy(buf + pos, leaf);
	for (p = in; p != &fs->root; p = p->aliases->parent) {
		size_t l = strlen(p->aliases->name);

		buf[--pos] = '/';
		pos -= l;
		memcpy(buf + pos, p->aliases->name, l);
	}
	if (!*buf)
		strcpy(buf, ".");
	return buf;
}

char *tfs_loc_path(struct tfs_fs *fs, const struct tfs_loc *loc)
{
	char *p;

	pthread_mutex_lock(&fs->ilock);
	p = path_locked(fs, loc->parent,
			loc->parent == &fs->root && !strcmp(loc->name, ".") ? "" : loc->name);
	pthread_mutex_unlock(&fs->ilock);
	return p;
}

int tfs_inode_loc(struct tfs_fs *fs, struct tfs_inode *in, struct tfs_loc *loc)
{
	int rc = 0;

	loc->parent = NULL;
	if (in == &fs->root) {
		loc->parent = &fs->root;
		strcpy(loc->name, ".");
		return 0;
	}
	pthread_mutex_lock(&fs->ilock);
	if (!in->aliases) {
		rc = -ENOENT;
	} else {
		snprintf(loc->name, sizeof(loc->name), "%s", in->aliases->name);
		loc->parent = in->aliases->parent;
		if (loc->parent != &fs->root)
			loc->parent->refs++;
	}
	pthread_mutex_unlock(&fs->ilock);
	return rc;
}

int tfs_inode_child_loc(struct tfs_fs *fs, struct tfs_inode *parent, const char *name,
			struct tfs_loc *loc)
{
	loc->parent = NULL;
	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	pthread_mutex_lock(&fs->ilock);
	loc->parent = parent;
	if (parent != &fs->root)
		parent->refs++;
	pthread_mutex_unlock(&fs->ilock);
	strcpy(loc->name, name);
	return 0;
}

void tfs_loc_put(struct tfs_fs *fs, struct tfs_loc *loc)
{
	if (loc->parent && loc->parent != &fs->root)
		tfs_inode_unref(fs, loc->parent);
	loc->parent = NULL;
}

/* ------------------------------------------------------------------ */
/* Directory fd cache                                                  */
/* ------------------------------------------------------------------ */

static void lru_front_locked(struct tfs_fs *fs, struct tfs_inode *dir)
{
	if (dir == &fs->root)
		return;		/* the root keeps its fds for the whole mount */
	if (dir->lru_next) {
		dir->lru_prev->lru_next = dir->lru_next;
		dir->lru_next->lru_prev = dir->lru_prev;
	}
	dir->lru_next = fs->lru.lru_next;
	dir->lru_prev = &fs->lru;
	fs->lru.lru_next->lru_prev = dir;
	fs->lru.lru_next = dir;
}

static void lru_trim_locked(struct tfs_fs *fs)
{
	struct tfs_inode *in = fs->lru.lru_prev, *prev;

	for (; fs->dcount > fs->dmax && in != &fs->root && in != &fs->lru; in = prev) {
		prev = in->lru_prev;
		if (in->dusers == 0)
			dfd_drop_locked(fs, in);
	}
}

static void close_all(struct tfs_fs *fs, int *fd, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		if (fd[k] >= 0)
			close(fd[k]);
}

static int dir_fds(struct tfs_fs *fs, struct tfs_inode *dir, int *fds);

static void dir_fds_put(struct tfs_fs *fs, struct tfs_inode *dir)
{
	pthread_mutex_lock(&fs->ilock);
	dir->dusers--;
	pthread_mutex_unlock(&fs->ilock);
}

int tfs_dir_fds(struct tfs_fs *fs, struct tfs_inode *dir, int *fds)
{
	int rc;

	pthread_rwlock_rdlock(&fs->ns_lock);
	pthread_mutex_lock(&fs->ilock);
	if (dir->dfd) {
		dir->dusers++;
		lru_front_locked(fs, dir);
		memcpy(fds, dir->dfd, fs->n * sizeof(int));
		pthread_mutex_unlock(&fs->ilock);
		return 0;
	}
	pthread_mutex_unlock(&fs->ilock);
	pthread_rwlock_rdlock(&fs->rename_lock);
	rc = dir_fds(fs, dir, fds);
	pthread_rwlock_unlock(&fs->rename_lock);
	if (rc)
		pthread_rwlock_unlock(&fs->ns_lock);
	return rc;
}

/* The slow path, under rename_lock (shared). */
static int dir_fds(struct tfs_fs *fs, struct tfs_inode *dir, int *fds)
{
	struct tfs_inode *parent = NULL;
	char name[NAME_MAX + 1];
	int pfd[TFS_MAX_MEMBERS], *mine, rc = 0;
	uint32_t k;

	pthread_mutex_lock(&fs->ilock);
	if (dir->dfd)
		goto out_hit;
	if (dir != &fs->root) {
		if (!dir->aliases) {
			pthread_mutex_unlock(&fs->ilock);
			return -ENOENT;	/* removed directory */
		}
		parent = dir->aliases->parent;
		parent->refs++;
		snprintf(name, sizeof(name), "%s", dir->aliases->name);
	}
	pthread_mutex_unlock(&fs->ilock);

	/* Open it one name below its parent (recursively for uncached
	 * ancestors): no path is ever built, so depth has no limit. */
	mine = malloc(fs->n * sizeof(int));
	if (!mine)
		rc = -ENOMEM;
	else if (parent)
		rc = dir_fds(fs, parent, pfd);
	/* members that take no changes get -1; one that cannot open a
	 * directory the primary has is failed (if the level allows) */
	for (k = 0; rc == 0 && k < fs->n; k++) {
		mine[k] = -1;
		if (!tfs_m_named(fs, k) || (parent && pfd[k] < 0))
			continue;
		mine[k] = fs->be->ops->open_dir(fs->be, k, parent ? pfd[k] : -1, parent ? name : "");
		if (mine[k] >= 0)
			continue;
		if (k != tfs_primary(fs) && tfs_member_diverged(fs, k, &mine[k], "open directory")) {
			mine[k] = -1;
			continue;
		}
		rc = mine[k];
		close_all(fs, mine, k);
	}
	if (parent) {
		if (mine && k > 0)	/* the parent's fds were taken */
			dir_fds_put(fs, parent);
		tfs_inode_unref(fs, parent);
	}
	if (rc == 0 && dir != &fs->root) {
		/* the name was read before opening: make sure it still named
		 * this directory on the primary (a concurrent rename may move it) */
		struct stat st;
		uint32_t p = tfs_primary(fs);

		if (fs->be->ops->fstat(fs->be, p, mine[p], &st) || st.st_ino != dir->ino) {
			close_all(fs, mine, fs->n);
			rc = -ENOENT;
		}
	}
	if (rc) {
		free(mine);
		return rc;
	}
	pthread_mutex_lock(&fs->ilock);
	if (dir->dfd) {
		close_all(fs, mine, fs->n);
		free(mine);
		goto out_hit;
	}
	dir->dfd = mine;
	dir->dusers++;		/* before trimming, so it cannot trim this one */
	fs->dcount++;
	lru_front_locked(fs, dir);
	lru_trim_locked(fs);
	goto out_copy;
out_hit:
	dir->dusers++;
	lru_front_locked(fs, dir);
out_copy:
	memcpy(fds, dir->dfd, fs->n * sizeof(int));
	pthread_mutex_unlock(&fs->ilock);
	return 0;
}

void tfs_dir_fds_put(struct tfs_fs *fs, struct tfs_inode *dir)
{
	dir_fds_put(fs, dir);
	pthread_rwlock_unlock(&fs->ns_lock);
}

void tfs_inode_member_reset(struct tfs_fs *fs, uint32_t k)
{
	/* no inode lock here: a thread holding one may wait for ns_lock */
	pthread_mutex_lock(&fs->ilock);
	for (size_t i = 0; i < fs->hsize; i++)
		for (struct tfs_inode *in = fs->htab[i]; in; in = in->hnext)
			dfd_drop_locked(fs, in);
	dfd_drop_locked(fs, &fs->root);
	__atomic_add_fetch(&fs->mgen[k], 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fs->ilock);
}

void tfs_inode_rekey(struct tfs_fs *fs, uint64_t (*ino_of)(struct tfs_fs *fs, const char *path))
{
	struct tfs_inode **v;
	char **path;
	size_t n = 0;

	pthread_mutex_lock(&fs->ilock);
	v = calloc(fs->icount + 1, sizeof(*v));
	path = calloc(fs->icount + 1, sizeof(*path));
	for (size_t i = 0; v && path && i < fs->hsize; i++) {
		for (struct tfs_inode *in = fs->htab[i]; in; in = in->hnext) {
			in->refs++;	/* pinned while unlocked below */
			path[n] = in->aliases ? path_locked(fs, in->aliases->parent,
							    in->aliases->name) : NULL;
			v[n++] = in;
		}
	}
	for (size_t i = 0; i < n; i++)
		dfd_drop_locked(fs, v[i]);
	dfd_drop_locked(fs, &fs->root);
	pthread_mutex_unlock(&fs->ilock);

	fs->root.ino = ino_of(fs, ".");
	for (size_t i = 0; i < n; i++) {
		uint64_t ino = path[i] ? ino_of(fs, path[i]) : 0;

		free(path[i]);
		pthread_mutex_lock(&fs->ilock);
		unhash_locked(fs, v[i]);
		if (ino) {
			struct tfs_inode *in = v[i];

			in->ino = ino;
			in->hashed = true;
			in->hnext = fs->htab[hslot(fs, ino)];
			fs->htab[hslot(fs, ino)] = in;
			fs->icount++;
		}
		pthread_mutex_unlock(&fs->ilock);
		tfs_inode_unref(fs, v[i]);
	}
	free(v);
	free(path);
}
