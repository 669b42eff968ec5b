/* One logging function for the whole project (src/util/log.c): syslog
 * levels, printf format.  It owns where messages go and which are kept. */
#ifndef TIERFS_LOG_H
#define TIERFS_LOG_H

#include <syslog.h>

extern int tfs_log_level;	/* messages above this level are dropped */

/* Log one line at a syslog level (LOG_ERR ...), dropped above
 * tfs_log_level: to stderr, to the log file once tfs_log_open gave one,
 * and once daemonized as log.c says. */
void tfs_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* -o log=FILE: every later message is appended to FILE too (made 0640 if
 * missing; O_APPEND | O_CLOEXEC), with a timestamp; once daemonized, to
 * FILE alone.  Returns 0 or -errno. */
int tfs_log_open(const char *path);

/* Daemonizing: called just before fuse_daemonize, while stderr is still
 * the caller's; it chooses where messages go next, and may keep a
 * duplicate of stderr. */
void tfs_log_detach_begin(void);
/* Called in the daemon after fuse_daemonize, before any other thread
 * runs: messages go where tfs_log_detach_begin chose. */
void tfs_log_detach_end(void);

#define tfs_err(...)   tfs_log(LOG_ERR, __VA_ARGS__)
#define tfs_warn(...)  tfs_log(LOG_WARNING, __VA_ARGS__)
#define tfs_info(...)  tfs_log(LOG_INFO, __VA_ARGS__)
#define tfs_debug(...) do { if (tfs_log_level >= LOG_DEBUG) tfs_log(LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
