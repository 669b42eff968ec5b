/* log.c - the project's single log sink (stderr, or syslog once daemonized). */
#include <stdarg.h>
#include <stdio.h>

#include "tierfs/log.h"

int tfs_log_level = LOG_INFO;
int tfs_log_syslog;

void tfs_log(int level, const char *fmt, ...)
{
	static const char *const tag[] = {
		"emerg", "alert", "crit", "error", "warning", "notice", "info", "debug"
	};
	va_list ap;

	if (level > tfs_log_level)
		return;
	va_start(ap, fmt);
	if (tfs_log_syslog) {
		vsyslog(level, fmt, ap);
	} else {
		fprintf(stderr, "tierfs: %s: ", tag[level & 7]);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}
