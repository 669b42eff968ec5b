/* Mount-time recovery of interrupted namespace changes (src/ns/replay.c):
 * it owns rolling the intent log forward, and the walk of a member path
 * one name at a time that recovery and failover use. */
#ifndef TIERFS_REPLAY_H
#define TIERFS_REPLAY_H

#include "tierfs/fs.h"

/* ---- replay.c: crash recovery of the intent log ---- */
/* A truncate of file fid to len was replayed: what the RAID must redo for
 * its redundancy is committed to the journal (before the intents are
 * deleted, replay.c invariant 5).  Returns 0 or -errno. */
typedef int (*tfs_replay_cut_fn)(struct tfs_fs *fs, uint64_t fid, uint64_t len);
/* Before serving, single threaded: finish every intent in the journal
 * (make the other members agree with the primary at its paths, replay.c
 * invariant 2), telling cut of each truncate replayed, delete the intents
 * and sync the journal.  Returns 0 (also with no intents) or -errno. */
int tfs_replay(struct tfs_fs *fs, tfs_replay_cut_fn cut);
/* Parent directory fd (O_PATH) of path on member m, walked one name at a
 * time (no length limit, no symlink followed), and the last name of path
 * in name.  Returns the fd (the caller's to close), or -errno
 * (-ENAMETOOLONG for a name over NAME_MAX, the member's open_dir error). */
int tfs_member_at(struct tfs_fs *fs, uint32_t m, const char *path, char name[NAME_MAX + 1]);

#endif
