/* Mount-time recovery of interrupted namespace changes (src/ns/replay.c). */
#ifndef TIERFS_REPLAY_H
#define TIERFS_REPLAY_H

#include "tierfs/fs.h"

/* ---- replay.c: crash recovery of the intent log ---- */
/* A truncate of file fid to len was replayed: what the RAID must redo for
 * its redundancy is committed to the journal (before the intents are
 * deleted, replay.c invariant 5).  Returns 0 or -errno. */
typedef int (*tfs_replay_cut_fn)(struct tfs_fs *fs, uint64_t fid, uint64_t len);
/* Finish every interrupted namespace change in the journal, telling cut of
 * each truncate replayed, then delete the intents and sync the journal.
 * Returns 0 or -errno (the mount fails). */
int tfs_replay(struct tfs_fs *fs, tfs_replay_cut_fn cut);
/* Parent directory fd (O_PATH) of path on member m, walked one name at a
 * time (no length limit, no symlink followed), and the last name of path
 * in name; -errno on failure. */
int tfs_member_at(struct tfs_fs *fs, uint32_t m, const char *path, char name[NAME_MAX + 1]);

#endif
