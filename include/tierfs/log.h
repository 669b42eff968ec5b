/* One logging function for the whole project (src/util/log.c): syslog
 * levels, printf format.  It owns where messages go and which are kept. */
#ifndef TIERFS_LOG_H
#define TIERFS_LOG_H

#include <syslog.h>

extern int tfs_log_level;	/* messages above this level are dropped */
extern int tfs_log_syslog;	/* 1: to syslog (daemonized), 0: to stderr */

/* Log one line at a syslog level (LOG_ERR ...), dropped above
 * tfs_log_level; to syslog or to stderr as tfs_log_syslog says. */
void tfs_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define tfs_err(...)   tfs_log(LOG_ERR, __VA_ARGS__)
#define tfs_warn(...)  tfs_log(LOG_WARNING, __VA_ARGS__)
#define tfs_info(...)  tfs_log(LOG_INFO, __VA_ARGS__)
#define tfs_debug(...) do { if (tfs_log_level >= LOG_DEBUG) tfs_log(LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
