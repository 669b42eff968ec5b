/* Array maintenance (src/raid/maint.c): crash resync, scrub, replace and
 * rebuild, the maintenance commands and their lines of the status. */
#ifndef TIERFS_MAINT_H
#define TIERFS_MAINT_H

#include "tierfs/fs.h"

/* ---- maint.c: resync, scrub, replace/rebuild ---- */
struct tfs_maint;
int tfs_maint_init(struct tfs_fs *fs);
/* Resync the rows of every marked region (after a crash), before serving. */
int tfs_maint_resync(struct tfs_fs *fs);
/* Resume an interrupted rebuild. */
int tfs_maint_start(struct tfs_fs *fs);
void tfs_maint_stop(struct tfs_fs *fs);
/* A maintenance command (NUL-terminated: fail N, replace N DIR, scrub,
 * repair, cancel): 0, -errno with a reason in err, or -ENOSYS if cmd is
 * none of them. */
int tfs_maint_ctl(struct tfs_fs *fs, const char *cmd, char *err, size_t errlen);
/* Maintenance's lines of the status (job, progress, last, mismatch=),
 * malloc'ed; paths of files only when paths. */
char *tfs_maint_report(struct tfs_fs *fs, bool paths);

#endif
