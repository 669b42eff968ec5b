/* The superblock every member carries, and assembly of members into an array.
 *
 * Member directory layout (see docs/DESIGN.md):
 *     MEMBER/.tierfs/superblock   this file, text, versioned
 *     MEMBER/.tierfs/journal/     LMDB environment (journal copy; every member)
 *     MEMBER/root/                the array's tree; regular files hold this
 *                                 member's share of the data
 */
#ifndef TIERFS_SUPER_H
#define TIERFS_SUPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "tierfs/layout.h"

#define TFS_META_DIR     ".tierfs"
#define TFS_SUPER_NAME   ".tierfs/superblock"
#define TFS_JOURNAL_DIR  ".tierfs/journal"
#define TFS_TREE_DIR     "root"
#define TFS_SUPER_MAGIC  "tierfs-superblock"
/* 1: no events/state (all in sync); 2: identity and size records in
 * user.tierfs.*, which a member file's owner could set; 3: in trusted.*,
 * which only root can (upgrade.c moves a version 2 tree at mount). */
#define TFS_SUPER_VERSION 3
#define TFS_XATTR_FID    "trusted.tierfs.fid"	/* on member files and dirs */
/* Parity levels: the logical size as of the last close, fsync or truncate,
 * on every member file.  Member file sizes give the size exactly while
 * every member is there; with one missing, the size may have ended on it,
 * and this is the lower bound that survives (ofile.c size_save_locked). */
#define TFS_XATTR_SIZE   "trusted.tierfs.size"
/* Their names up to version 2 */
#define TFS_XATTR_FID_V2  "user.tierfs.fid"
#define TFS_XATTR_SIZE_V2 "user.tierfs.size"

/* Member states, one character each in tfs_super.state ("UU_R"). */
enum tfs_mstate {
	TFS_M_UP = 'U',		/* in sync: read and written */
	TFS_M_FAILED = '_',	/* missing, failed or stale: never touched */
	TFS_M_REBUILD = 'R',	/* replacement being rebuilt: written, not read */
};

struct tfs_super {
	unsigned version;
	char uuid[37];
	struct tfs_layout layout;
	uint32_t index;		/* this member's position in the array */
	int64_t created;	/* seconds since the epoch */
	/* The array's member states as of event number `events`.  Every
	 * change of a member's state bumps events and is written to every
	 * member that is not failed, so the member with the highest events
	 * knows the truth, and a member that missed an event is stale. */
	uint64_t events;
	char state[TFS_MAX_MEMBERS + 1];
};

/* Text form (of sb->version); returns bytes written (< len) or -ENOSPC. */
int tfs_super_format(const struct tfs_super *sb, char *buf, unsigned len);
/* Returns 0, or -EINVAL with a reason. */
int tfs_super_parse(const char *buf, struct tfs_super *sb, const char **why);

/* Read MEMBER/.tierfs/superblock: 0, -ENOENT (not a member) or -errno/-EINVAL. */
int tfs_super_read(int memberfd, struct tfs_super *sb, const char **why);
/* Write it atomically (temp file, fsync, rename, fsync dir), as version
 * sb->version.  Returns 0 or -errno. */
int tfs_super_write(int memberfd, const struct tfs_super *sb);

/* A random (version 4) UUID, text form with its NUL, into out.  If
 * getrandom fails it silently falls back to rand() and the time. */
void tfs_uuid_generate(char out[37]);

/* 1 if the directory is empty, 0 if not, -errno. */
int tfs_dir_empty(const char *path);
/* Remove a member's tierfs metadata and tree (only tierfs's own names).
 * Returns 0 or -errno. */
int tfs_member_wipe(const char *dir);

/* An assembled array: members in index order.  A failed member has no
 * dirfd; sb.state says which members are usable. */
struct tfs_array {
	struct tfs_super sb;		/* freshest view; index is meaningless;
					 * version is the oldest any member has */
	uint32_t n;
	char *path[TFS_MAX_MEMBERS];	/* member directory, absolute */
	int dirfd[TFS_MAX_MEMBERS];	/* MEMBER, O_PATH, held for the mount */
	int lockfd[TFS_MAX_MEMBERS];	/* superblock, flock()ed: one mount at a time */
};

/* Which member states assembly believes (super.c invariant 4), from the
 * superblocks of the members given. */
enum tfs_verdict {
	TFS_V_USE,	/* not failed in the believed view, and up to date (or one
			 * record behind: a record cut by a crash) */
	TFS_V_MISSING,	/* not given */
	TFS_V_FAILED,	/* the believed view calls it failed */
	TFS_V_STALE,	/* two or more events behind the believed count */
};

struct tfs_belief {
	uint64_t events;		/* the array's count: the highest given */
	uint64_t ref;			/* the count members are measured against */
	char state[TFS_MAX_MEMBERS + 1];	/* the states to run with: believed,
						 * and every member not used failed */
	enum tfs_verdict v[TFS_MAX_MEMBERS];
	/* One member alone at the highest count while a strict majority of
	 * the members given agree on a lower one: the member, the majority's
	 * count and size, and whether the majority's count is believed. */
	int lone;			/* -1: none */
	uint64_t maj_events;
	uint32_t maj_n;
	bool overruled;
	/* Two members at the highest count that disagree on the states
	 * (the array ran in two parts), or -1. */
	int tie[2];
	bool rewrite;			/* a used member's superblock differs from
					 * events and state: they need a record */
};

/* sb[i]: the superblock given for member index i (NULL: not given), n
 * members, tolerates: how many failed members the level survives.  Pure. */
void tfs_array_believe(const struct tfs_super *const sb[], uint32_t n, uint32_t tolerates,
		       struct tfs_belief *b);

/* Open, check and order the members, and decide their states
 * (tfs_array_believe).  Members that are missing, stale or failed are
 * marked failed in a->sb.state as long as the level survives it; *changed
 * says the superblocks of the members used must be rewritten (a member
 * marked failed now, or one behind or at odds with the result).  On failure
 * returns -errno and writes a one-line reason naming the member into err. */
int tfs_array_assemble(char **paths, unsigned npaths, struct tfs_array *a,
		       bool *changed, char *err, unsigned errlen);
/* Bump the event count and write a->sb to every member that is not failed.
 * Returns the number of members written, or -errno if none could be. */
int tfs_array_record(struct tfs_array *a);
/* Write a->sb with version v to every member that is not failed, events
 * unchanged (a torn write leaves members of both versions, none stale).
 * Returns 0 or the first error. */
int tfs_array_set_version(struct tfs_array *a, unsigned v);
/* Returns the number of members in state st. */
uint32_t tfs_array_count(const struct tfs_array *a, char st);
/* Close the members' fds (unlocking them) and free their paths. */
void tfs_array_release(struct tfs_array *a);

/* find.c: members found by the array's UUID */

/* Returns the UUID a source names ("tierfs:UUID" or "UUID=UUID", a
 * lower-case UUID of 36 characters), or NULL for a member list. */
const char *tfs_array_uuid_source(const char *src);
/* Looks for uuid's members in the directories the colon-separated glob
 * patterns of search name, or (search NULL) those of the "search PATTERN"
 * lines of the file conf, and puts their paths (malloc'ed, resolved) in
 * paths[] in member index order.  Returns how many (at least 1), or
 * -errno with one line in err: -ENOENT (nowhere to look, or no member
 * there), -EEXIST (two directories claim one index), -ENOMEM. */
int tfs_array_find(const char *uuid, const char *search, const char *conf, char **paths,
		   char *err, size_t errlen);

#endif
