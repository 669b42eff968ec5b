/* log.c - the project's single log sink.
 *
 * Owns: where the messages of the daemon and the tools go, and the shape of
 * their lines.
 *
 * Where messages go (the function that changes it):
 *   from the start: stderr, "tierfs: LEVEL: text"
 *   tfs_log_open (-o log=FILE): stderr and FILE
 *   daemonized (tfs_log_detach_begin before fuse_daemonize, which points
 *   stderr at /dev/null; tfs_log_detach_end in the daemon), the first that
 *   applies:
 *     a FILE was given                 -> FILE alone
 *     /dev/log accepts a connection    -> syslog (daemon facility, "tierfs",
 *                                         with the pid)
 *     stderr was a regular file or a   -> that stderr, kept: a duplicate is
 *     character device (a terminal,       taken before daemonizing
 *     the console; /dev/null drops
 *     them, as its giver asked)
 *     else (a pipe or a socket)        -> nowhere, and the last line on that
 *                                         stderr says so and names log=: a
 *                                         pipe's reader waits for its end
 *                                         ($(...), ssh, a test's
 *                                         subprocess), and would wait until
 *                                         the unmount
 *   FILE and a kept stderr get "TIMESTAMP tierfs[PID]: LEVEL: text", the
 *   timestamp in local time, ISO 8601 with milliseconds and UTC offset.
 *
 * Invariants:
 *  1. A message is one line: a control character in it other than tab is
 *     written as '?' (a file name with a newline cannot forge a line), and
 *     a line is at most LINE bytes (the rest is cut).
 *  2. A line reaches each stream in one stdio call on an unbuffered stream,
 *     which glibc writes with one write(2) under the stream's lock: threads
 *     never interleave their lines, nor do daemons appending to one FILE
 *     (O_APPEND).
 *  3. The log is written through stdio, whose write(2) is glibc's own: the
 *     daemon's wrappers of write (pcut_wrap.c) never see it, so the
 *     power-cut model neither notes nor counts a line (its invariant 3).
 *  4. Where messages go changes only while one thread runs (start-up and
 *     around fuse_daemonize).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "tierfs/log.h"

#define LINE 4096

int tfs_log_level = LOG_INFO;

static bool to_stderr = true;	/* until daemonized */
static bool to_syslog;		/* daemonized, no FILE, /dev/log answered */
static FILE *file;		/* -o log=FILE */
static FILE *kept;		/* the caller's stderr, kept across daemonizing */

/* "2024-05-01T12:00:00.123+02:00" */
static void timestamp(char *out, size_t len)
{
	struct timespec ts;
	struct tm tm;
	char z[8];
	size_t k;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	k = strftime(out, len, "%Y-%m-%dT%H:%M:%S", &tm);
	if (strftime(z, sizeof(z), "%z", &tm) != 5)	/* +hhmm */
		z[0] = 0;
	snprintf(out + k, len - k, ".%03ld%.3s%s%s", ts.tv_nsec / 1000000, z, z[0] ? ":" : "",
		 z[0] ? z + 3 : "");
}

void tfs_log(int level, const char *fmt, ...)
{
	static const char *const tag[] = {
		"emerg", "alert", "crit", "error", "warning", "notice", "info", "debug"
	};
	char text[LINE], line[LINE + 128], stamp[48];
	va_list ap;

	if (level > tfs_log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	for (char *p = text; *p; p++)	/* invariant 1 */
		if ((unsigned char)*p < ' ' && *p != '\t')
			*p = '?';
	if (to_stderr) {
		snprintf(line, sizeof(line), "tierfs: %s: %s\n", tag[level & 7], text);
		fputs(line, stderr);
	}
	if (to_syslog)
		syslog(level, "%s", text);
	if (file || kept) {
		timestamp(stamp, sizeof(stamp));
		snprintf(line, sizeof(line), "%s tierfs[%ld]: %s: %s\n", stamp, (long)getpid(),
			 tag[level & 7], text);
		if (file)
			fputs(line, file);
		if (kept)
			fputs(line, kept);
	}
}

/* A stream of ours on fd, unbuffered (invariant 2); NULL (fd closed) if not. */
static FILE *log_stream(int fd)
{
	FILE *f = fdopen(fd, "a");

	if (!f) {
		close(fd);
		return NULL;
	}
	setvbuf(f, NULL, _IONBF, 0);
	return f;
}

int tfs_log_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);

	if (fd < 0)
		return -errno;
	if (!(file = log_stream(fd)))
		return -ENOMEM;
	tzset();	/* the time zone of the timestamps */
	return 0;
}

/* Whether syslog(3) would reach a daemon: /dev/log accepts a connection of
 * either kind glibc tries.  why: the reason when not. */
static bool syslog_reachable(char *why, size_t len)
{
	static const int kinds[] = { SOCK_DGRAM, SOCK_STREAM };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int e = 0;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", _PATH_LOG);
	for (unsigned i = 0; i < 2; i++) {
		int fd = socket(AF_UNIX, kinds[i] | SOCK_CLOEXEC, 0), rc;

		if (fd < 0) {
			e = errno;
			break;
		}
		rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		e = errno;
		close(fd);
		if (rc == 0)
			return true;
		if (e != EPROTOTYPE)
			break;
	}
	snprintf(why, len, "%s: %s", _PATH_LOG, strerror(e));
	return false;
}

void tfs_log_detach_begin(void)
{
	struct stat st;
	char why[128];
	int fd;

	if (file)
		return;
	if (syslog_reachable(why, sizeof(why))) {
		to_syslog = true;
		return;
	}
	if (fstat(STDERR_FILENO, &st))
		return;		/* closed: nobody to tell */
	if (S_ISREG(st.st_mode) || S_ISCHR(st.st_mode)) {
		fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
		if (fd >= 0 && (kept = log_stream(fd)))
			return;
		tfs_warn("no syslog (%s) and standard error cannot be kept (%s): the daemon's "
			 "messages are lost; mount with -o log=FILE", why, strerror(errno));
		return;
	}
	tfs_warn("no syslog (%s) and standard error is %s, which the daemon cannot keep (its "
		 "reader would wait for its end until the unmount): the daemon's messages are "
		 "lost; mount with -o log=FILE", why,
		 S_ISFIFO(st.st_mode) ? "a pipe" : S_ISSOCK(st.st_mode) ? "a socket"
		 : "a directory or a block device");
}

void tfs_log_detach_end(void)
{
	to_stderr = false;
	if (to_syslog)
		openlog("tierfs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
}
