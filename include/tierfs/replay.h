/* Mount-time recovery of interrupted namespace changes (src/ns/replay.c). */
#ifndef TIERFS_REPLAY_H
#define TIERFS_REPLAY_H

#include "tierfs/fs.h"

/* ---- replay.c: crash recovery of the intent log ---- */
int tfs_replay(struct tfs_fs *fs);
/* Parent directory fd (O_PATH) of path on member m, walked one name at a
 * time (no length limit, no symlink followed), and the last name of path
 * in name; -errno on failure. */
int tfs_member_at(struct tfs_fs *fs, uint32_t m, const char *path, char name[NAME_MAX + 1]);

#endif
