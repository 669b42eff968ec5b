/* Array maintenance (src/raid/maint.c, scrub.c, rebuild.c): crash
 * resync, scrub, replace and rebuild, the maintenance commands and their
 * lines of the status.  maint.c defines all but tfs_maint_resync
 * (scrub.c). */
#ifndef TIERFS_MAINT_H
#define TIERFS_MAINT_H

#include "tierfs/fs.h"

/* ---- maint.c: the maintenance job, its commands and status ---- */
struct tfs_maint;
/* Allocate the maintenance state (no thread yet).  Returns 0 or -ENOMEM. */
int tfs_maint_init(struct tfs_fs *fs);
/* Resume an interrupted rebuild (a member in state R) on the maintenance
 * thread.  Returns 0 (also when there is none), or -EAGAIN if the thread
 * could not be started. */
int tfs_maint_start(struct tfs_fs *fs);
/* Cancel the running job and wait for its thread (fs->maint may be NULL);
 * a rebuild resumes at the next mount. */
void tfs_maint_stop(struct tfs_fs *fs);
/* A maintenance command (NUL-terminated: fail N, replace N DIR, scrub,
 * repair, cancel).  Returns 0 once it is done or its job started (fail of
 * a failed member and cancel with no job are 0 too), -errno with a reason
 * in err (-EINVAL no such member or no redundancy to scrub, -EBUSY a job
 * runs, a member is not in sync or cannot be failed, -ENOTEMPTY a
 * replacement that is not empty, -EAGAIN no thread), or -ENOSYS, err
 * untouched, if cmd is none of them (the caller tries the tier's). */
int tfs_maint_ctl(struct tfs_fs *fs, const char *cmd, char *err, size_t errlen);
/* Maintenance's lines of the status (job, progress, last, mismatch=);
 * paths of files, and the mismatch= lines, only when paths.  Returns them
 * malloc'ed, or NULL without memory. */
char *tfs_maint_report(struct tfs_fs *fs, bool paths);
/* Sets the rate cap of scrub and rebuild (MB/s as text, 0 to 100000, 0:
 * none), a running job included.  Returns 0 or -EINVAL with one line in
 * err naming the value and the range. */
int tfs_maint_rate_set(struct tfs_fs *fs, const char *val, char *err, size_t errlen);
/* Returns the rate cap in MB/s (0: none). */
double tfs_maint_rate(struct tfs_fs *fs);

/* ---- scrub.c: the crash resync ---- */
/* Parity levels: recompute the parity of every row of every region marked
 * in the journal (writes in flight at a crash), then clear the marks,
 * synced; run before serving (scrub.c invariant 2).  Returns 0 (also with
 * no marks or on a level without parity) or -errno. */
int tfs_maint_resync(struct tfs_fs *fs);

#endif
