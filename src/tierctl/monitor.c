/* monitor.c - `tierctl monitor`: watch mounted arrays and tell the
 * administrator when one needs attention (mdadm --monitor, ZFS's zed).
 *
 * Owns: the event names and when each fires, the log line for each, and
 * running the administrator's program (--program) for them.  It reads
 * nothing but each mount's user.tierfs.status (fuse/control.c composes it
 * from ns/health.c, raid/maint.c and cache/status.c) and changes nothing.
 *
 * Events, found by comparing a poll of a mount with its previous poll (at
 * the first poll: everything that is not healthy), as
 * EVENT MOUNTPOINT [DETAIL]:
 *   Fail             member.N became failed             member N [PATH]
 *   Degraded         health became degraded             state U_U
 *   DegradedArray    first poll: health not optimal     health H, state S
 *   RebuildStarted   job=rebuild began, or a rebuild    member N
 *                    ran and ended between two polls
 *   RebuildFinished  the rebuild's last= line appeared  member N in sync: LAST
 *                                                       (or "not in sync (STATE)")
 *   ScrubFinished    a check's or repair's last=        N mismatches: LAST
 *   ScrubMismatch    ... with N > 0; at the first poll  N mismatches repaired
 *                    a check's that repaired nothing    (or "not repaired")
 *   CacheError       cache.flush_error became non-empty or changed: its text
 *   DirtyHigh        cache.dirty_extents reached cache.dirty_high % of
 *                    cache.slots: D of S extents dirty (P%, high watermark H%)
 *   Unmounted        the status cannot be read: why (the mount is gone, or
 *                    its daemon died); the mount is not watched any more
 *
 * Invariants:
 *  1. An event is reported once per change it names: each test compares
 *     the new status with the previous one of the same mount (w->prev),
 *     never with a fixed state, so a degraded array is not reported again
 *     at every poll.  A job's end is its last= line changing (maint.c
 *     writes it as the job stops), so a job that starts and ends between
 *     two polls is still reported.
 *  2. The log line goes to stderr when the event is found; the program
 *     runs from a queue, one at a time and in the order of the events.
 *     Polling never waits for it.
 *  3. A program runs at most prog_timeout seconds; then its process group
 *     (it leads one) is killed.  A program that fails, hangs or cannot be
 *     started is logged, and changes nothing else.
 *  4. SIGTERM, SIGINT and SIGCHLD are blocked except inside ppoll(); their
 *     handlers only set a flag.  A stop signal ends the loop: the running
 *     program gets SIGTERM, then SIGKILL after STOP_GRACE seconds; queued
 *     events are counted in the log, not run.
 *  5. Exit status: --oneshot 0 if no event was found, else 1.  Otherwise 0
 *     once stopped by a signal or when every mount has been reported
 *     Unmounted (the end of a mount is not a failure of the monitor:
 *     systemd's Restart=on-failure does not restart it), 1 if no mount
 *     could be read at the start.  2: usage.
 *
 * States:
 *   a mount:    NEW --poll_mount (read)--> WATCHED --poll_mount (fails)--> GONE
 *               NEW --poll_mount (fails)--> GONE
 *   DirtyHigh:  ARMED --cache_events (>= high)--> FIRED
 *               FIRED --cache_events (< low)--> ARMED
 *   the program: IDLE --prog_start--> RUNNING --prog_reap--> IDLE
 *               RUNNING --prog_reap (past the deadline)--> KILLED
 *               KILLED --prog_reap--> IDLE
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "monitor.h"
#include "tierctl.h"

#define XATTR_STATUS  "user.tierfs.status"
#define MAX_MEMBERS   32	/* tierctl's member indexes are 0..31 */
#define MAX_QUEUED    1000	/* events waiting for the program */
#define STOP_GRACE    5.0	/* seconds a program gets after SIGTERM */

static const char *me = "tierctl monitor";

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line to stderr (the journal under systemd), prefixed. */
static void say(const char *fmt, ...)
{
	va_list ap;
	char line[2048];

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s\n", me, line);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------ */
/* The status text                                                     */
/* ------------------------------------------------------------------ */

/* Returns true if key's value in st (NULL: none) is want (not ""); the
 * status is read with tierctl.h's get() and num(). */
static bool kv_is(const char *st, const char *key, const char *want)
{
	char v[256];

	return strcmp(get(st, key, v, sizeof(v)), want) == 0;
}

/* Member k's state word ("in_sync", "failed", "rebuilding"; "" if there
 * is no member k) into buf, and its path (none: "") into path. */
static char *member(const char *st, unsigned k, char *buf, size_t size, char *path,
		    size_t psize)
{
	char key[32], line[PATH_MAX + 32], *sp;

	snprintf(key, sizeof(key), "member.%u", k);
	get(st, key, line, sizeof(line));
	sp = strchr(line, ' ');
	if (sp)
		*sp++ = 0;
	snprintf(buf, size, "%s", line);
	if (path)
		snprintf(path, psize, "%s", sp && strcmp(sp, "-") ? sp : "");
	return buf;
}

/* The status of mnt, malloc'ed and NUL-terminated, or NULL with *why
 * saying why it cannot be read. */
static char *read_status(const char *mnt, const char **why)
{
	for (int tries = 0; tries < 8; tries++) {
		ssize_t n = getxattr(mnt, XATTR_STATUS, NULL, 0);
		char *buf;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		buf = malloc((size_t)n + 4097);	/* it may grow between the calls */
		if (!buf)
			break;
		n = getxattr(mnt, XATTR_STATUS, buf, (size_t)n + 4096);
		if (n >= 0) {
			buf[n] = 0;
			return buf;
		}
		free(buf);
		if (errno != ERANGE && errno != EINTR)
			break;
	}
	*why = errno == ENODATA || errno == ENOTSUP ? "not a tierfs mount" : strerror(errno);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* The program: a queue of events, one run at a time                   */
/* ------------------------------------------------------------------ */

struct qent {
	struct qent *next;
	char *argv[5];		/* PROG EVENT MOUNTPOINT [DETAIL] NULL */
};

static struct {
	const char *path;	/* NULL: no --program */
	double timeout;
	struct qent *head, **tail, *cur;
	unsigned queued, dropped;
	pid_t pid;		/* 0: IDLE */
	double deadline;
	bool killed;
	sigset_t mask;		/* the mask tierctl started with, for the child */
} runq = { .tail = &runq.head, .timeout = 60 };

static volatile sig_atomic_t stop_sig;

static void on_signal(int sig)
{
	if (sig != SIGCHLD)
		stop_sig = sig;
}

static void qent_free(struct qent *q)
{
	if (q)
		for (int i = 1; i < 4; i++)
			free(q->argv[i]);
	free(q);
}

static void prog_queue(const char *ev, const char *mnt, const char *detail)
{
	struct qent *q;

	if (!runq.path)
		return;
	if (runq.queued >= MAX_QUEUED) {
		if (!runq.dropped++)
			say("%s: %u events wait for it: dropping new ones", runq.path, runq.queued);
		return;
	}
	q = calloc(1, sizeof(*q));
	if (!q || !(q->argv[1] = strdup(ev)) || !(q->argv[2] = strdup(mnt)) ||
	    (*detail && !(q->argv[3] = strdup(detail)))) {
		say("%s %s %s: out of memory: not run", runq.path, ev, mnt);
		qent_free(q);
		return;
	}
	q->argv[0] = (char *)runq.path;
	*runq.tail = q;
	runq.tail = &q->next;
	runq.queued++;
}

/* IDLE -> RUNNING: the next queued event's program, in its own process
 * group, stdin from /dev/null, stdout and stderr ours. */
static void prog_start(void)
{
	struct qent *q;
	pid_t pid;

	while (!runq.pid && (q = runq.head)) {
		runq.head = q->next;
		if (!runq.head)
			runq.tail = &runq.head;
		runq.queued--;
		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			say("%s %s %s: cannot start it: %s", runq.path, q->argv[1], q->argv[2],
			    strerror(errno));
			qent_free(q);
			continue;
		}
		if (pid == 0) {
			int fd = open("/dev/null", O_RDONLY);

			setpgid(0, 0);
			if (fd > 0) {
				dup2(fd, STDIN_FILENO);
				close(fd);
			}
			sigprocmask(SIG_SETMASK, &runq.mask, NULL);
			execvp(q->argv[0], q->argv);
			fprintf(stderr, "%s: %s: %s\n", me, q->argv[0], strerror(errno));
			_exit(127);
		}
		setpgid(pid, pid);	/* either side may win; both ask the same */
		runq.pid = pid;
		runq.cur = q;
		runq.killed = false;
		runq.deadline = now() + runq.timeout;
	}
}

/* RUNNING -> IDLE when the program has ended (its status logged unless
 * 0); past its deadline RUNNING -> KILLED.  Then starts the next one. */
static void prog_reap(void)
{
	int st;
	pid_t r;

	while (runq.pid) {
		struct qent *q = runq.cur;

		r = waitpid(runq.pid, &st, WNOHANG);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0) {
			if (!runq.killed && now() >= runq.deadline) {
				say("%s %s %s: still running after %g s: killed", q->argv[0],
				    q->argv[1], q->argv[2], runq.timeout);
				kill(-runq.pid, SIGKILL);
				kill(runq.pid, SIGKILL);
				runq.killed = true;
			}
			return;
		}
		if (r > 0 && WIFEXITED(st) && WEXITSTATUS(st))
			say("%s %s %s: exit status %d", q->argv[0], q->argv[1], q->argv[2],
			    WEXITSTATUS(st));
		else if (r > 0 && WIFSIGNALED(st) && !runq.killed)
			say("%s %s %s: killed by signal %d (%s)", q->argv[0], q->argv[1],
			    q->argv[2], WTERMSIG(st), strsignal(WTERMSIG(st)));
		qent_free(q);
		runq.cur = NULL;
		runq.pid = 0;
		prog_start();
	}
}

/* Waits until a signal comes or until the time t (monotonic seconds). */
static void sleep_until(double t)
{
	sigset_t none;
	double d = t - now();
	struct timespec ts;

	if (d < 0)
		d = 0;
	ts.tv_sec = (time_t)d;
	ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
	sigemptyset(&none);
	ppoll(NULL, 0, &ts, &none);	/* EINTR: a handler ran */
}

/* A stop signal came: the queued events are dropped (counted), the
 * running program is asked to end (SIGTERM) and killed after STOP_GRACE;
 * one that SIGKILL does not end in another STOP_GRACE is left behind. */
static void prog_stop(void)
{
	double until = now() + STOP_GRACE;

	if (runq.queued)
		say("stopped: %u events not passed to %s", runq.queued, runq.path);
	while (runq.head) {
		struct qent *q = runq.head;

		runq.head = q->next;
		qent_free(q);
	}
	runq.tail = &runq.head;
	runq.queued = 0;
	if (runq.pid) {
		kill(-runq.pid, SIGTERM);
		kill(runq.pid, SIGTERM);
		if (!runq.killed)
			runq.deadline = until;
	}
	while (runq.pid && now() < until + STOP_GRACE) {
		prog_reap();
		if (runq.pid)
			sleep_until(runq.killed ? until + STOP_GRACE : runq.deadline);
	}
	if (runq.pid)
		say("%s %s %s: still there after SIGKILL: left behind", runq.cur->argv[0],
		    runq.cur->argv[1], runq.cur->argv[2]);
}

/* ------------------------------------------------------------------ */
/* Events                                                              */
/* ------------------------------------------------------------------ */

struct watch {
	const char *mnt;
	char *prev;		/* the previous poll's status; NULL: NEW */
	bool gone;		/* GONE: reported Unmounted */
	bool dirty_fired;	/* DirtyHigh FIRED, not re-armed yet */
	bool rebuild_seen;	/* RebuildStarted reported for the running rebuild */
	int rebuild_member;	/* ... of this member */
};

static unsigned nevents;

static void event(struct watch *w, const char *ev, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Logs EVENT MOUNTPOINT [DETAIL] and queues it for the program. */
static void event(struct watch *w, const char *ev, const char *fmt, ...)
{
	char detail[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	say("%s %s%s%s", ev, w->mnt, *detail ? " " : "", detail);
	prog_queue(ev, w->mnt, detail);
	nevents++;
}

/* Fail for each member failed now and not before (prev NULL: at all). */
static void member_events(struct watch *w, const char *prev, const char *cur)
{
	char now_st[16], was[16], path[PATH_MAX];

	for (unsigned k = 0; k < MAX_MEMBERS; k++) {
		if (!*member(cur, k, now_st, sizeof(now_st), path, sizeof(path)))
			break;
		if (strcmp(now_st, "failed") == 0 &&
		    (!prev || strcmp(member(prev, k, was, sizeof(was), NULL, 0), "failed") != 0))
			event(w, "Fail", "member %u%s%s", k, *path ? " " : "", path);
	}
}

static void health_events(struct watch *w, const char *prev, const char *cur)
{
	char h[32], s[MAX_MEMBERS + 8];

	get(cur, "health", h, sizeof(h));
	get(cur, "state", s, sizeof(s));
	if (!prev && strcmp(h, "optimal") != 0)
		event(w, "DegradedArray", "health %s, state %s", h, s);
	else if (prev && strcmp(h, "degraded") == 0 && !kv_is(prev, "health", "degraded"))
		event(w, "Degraded", "state %s", s);
}

/* The member a rebuild that ended worked on: the one RebuildStarted
 * named, else the one that left failed or rebuilding since prev, else one
 * rebuilding now; -1 if none can be told. */
static int rebuilt_member(struct watch *w, const char *prev, const char *cur)
{
	char a[16], b[16];
	int rebuilding = -1;

	if (w->rebuild_seen)
		return w->rebuild_member;
	for (unsigned k = 0; k < MAX_MEMBERS && *member(cur, k, b, sizeof(b), NULL, 0); k++) {
		member(prev, k, a, sizeof(a), NULL, 0);
		if (strcmp(a, "in_sync") != 0 && strcmp(b, "in_sync") == 0)
			return (int)k;
		if (rebuilding < 0 && strcmp(b, "rebuilding") == 0)
			rebuilding = (int)k;
	}
	return rebuilding;
}

/* A job ended (its last= line changed, or the job went away with the
 * same words) and one began: RebuildStarted, RebuildFinished,
 * ScrubFinished, ScrubMismatch.  At the first poll (prev NULL) a running
 * rebuild is reported started, and a check that found mismatches it did
 * not repair as ScrubMismatch. */
static void job_events(struct watch *w, const char *prev, const char *cur)
{
	char last[512], was[512], st[16];
	const char *files;
	unsigned long long mism = 0;
	bool ended, repaired, scrub;

	get(cur, "last", last, sizeof(last));
	get(prev, "last", was, sizeof(was));
	ended = prev && *last && (strcmp(last, was) != 0 ||
				  (!kv_is(prev, "job", "none") && kv_is(cur, "job", "none")));
	files = strstr(last, " files, ");
	if (files)
		mism = strtoull(files + 8, NULL, 10);
	repaired = strncmp(last, "repair ", 7) == 0;
	scrub = repaired || strncmp(last, "check ", 6) == 0;
	if (ended && strncmp(last, "rebuild ", 8) == 0) {
		int k = rebuilt_member(w, prev, cur);
		char who[32] = "?";

		if (k >= 0)
			snprintf(who, sizeof(who), "%d", k);
		if (!w->rebuild_seen)	/* it began and ended between two polls */
			event(w, "RebuildStarted", "member %s", who);
		member(cur, k < 0 ? MAX_MEMBERS : (unsigned)k, st, sizeof(st), NULL, 0);
		if (strcmp(st, "in_sync") == 0)
			event(w, "RebuildFinished", "member %s in sync: %s", who, last);
		else
			event(w, "RebuildFinished", "member %s not in sync (%s): %s", who,
			      *st ? st : "unknown", last);
		w->rebuild_seen = false;
	} else if (ended && scrub) {
		event(w, "ScrubFinished", "%llu mismatches: %s", mism, last);
	}
	/* a scrub that found mismatches; at the first poll only one that
	 * repaired nothing: they are still there */
	if (scrub && mism > 0 && (ended || (!prev && !repaired)))
		event(w, "ScrubMismatch", "%llu mismatches %s%s%s", mism,
		      repaired ? "repaired" : "not repaired (tierctl scrub ",
		      repaired ? "" : w->mnt, repaired ? "" : " --repair)");
	if (kv_is(cur, "job", "rebuild")) {
		int k = (int)num(cur, "rebuild.member");

		if (!w->rebuild_seen || k != w->rebuild_member)
			event(w, "RebuildStarted", "member %d", k);
		w->rebuild_seen = true;
		w->rebuild_member = k;
	}
}

/* CacheError and DirtyHigh (ARMED -> FIRED at dirty_high, FIRED ->
 * ARMED below dirty_low), if the mount has a tier. */
static void cache_events(struct watch *w, const char *prev, const char *cur)
{
	char err[256], was[256];
	unsigned long long dirty, slots, high, low;

	if (!get(cur, "cache", (char[2]){ 0 }, 2)[0] || kv_is(cur, "cache", "none"))
		return;
	get(cur, "cache.flush_error", err, sizeof(err));
	get(prev, "cache.flush_error", was, sizeof(was));
	if (*err && (!prev || strcmp(err, was) != 0))
		event(w, "CacheError", "%s", err);
	dirty = num(cur, "cache.dirty_extents");
	slots = num(cur, "cache.slots");
	high = num(cur, "cache.dirty_high");
	low = num(cur, "cache.dirty_low");
	if (!w->dirty_fired && slots && dirty * 100 >= high * slots) {
		event(w, "DirtyHigh", "%llu of %llu extents dirty (%llu%%, high watermark %llu%%)",
		      dirty, slots, dirty * 100 / slots, high);
		w->dirty_fired = true;
	} else if (w->dirty_fired && dirty * 100 < low * slots) {
		w->dirty_fired = false;
	}
}

/* One poll of one mount: NEW or WATCHED -> WATCHED, or -> GONE. */
static void poll_mount(struct watch *w)
{
	const char *why = "";
	char *cur = read_status(w->mnt, &why);

	if (!cur) {
		event(w, "Unmounted", "%s", why);
		w->gone = true;
		free(w->prev);
		w->prev = NULL;
		return;
	}
	member_events(w, w->prev, cur);
	health_events(w, w->prev, cur);
	job_events(w, w->prev, cur);
	cache_events(w, w->prev, cur);
	free(w->prev);
	w->prev = cur;
}

/* ------------------------------------------------------------------ */
/* The command                                                         */
/* ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tierctl monitor MOUNTPOINT... [--program PROG] [--interval SECONDS]\n"
		"                       [--program-timeout SECONDS] [--oneshot]\n"
		"  logs an event to stderr when an array needs attention (Fail, Degraded,\n"
		"  DegradedArray, RebuildStarted, RebuildFinished, ScrubFinished,\n"
		"  ScrubMismatch, CacheError, DirtyHigh, Unmounted) and runs\n"
		"  PROG EVENT MOUNTPOINT [DETAIL] for each; polls every 10 s; --oneshot\n"
		"  polls once: exit 0 healthy, 1 needs attention\n");
}

/* Seconds from s for option opt, within [lo, hi]; -1 (said why) if not. */
static double seconds(const char *opt, const char *s, double lo, double hi)
{
	char *e;
	double v = strtod(s, &e);

	if (!*s || *e || !isfinite(v) || v < lo || v > hi) {
		fprintf(stderr, "%s: %s: '%s' is not a number of seconds from %g to %g\n", me,
			opt, s, lo, hi);
		return -1;
	}
	return v;
}

int tierctl_monitor(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_NOCLDSTOP };
	struct watch *w = calloc((size_t)argc, sizeof(*w));
	double interval = 10, next;
	bool oneshot = false, opts = true, ever = false;
	unsigned n = 0, left;
	sigset_t block;
	int rc;

	if (!w)
		return 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v, *eq = strchr(a, '=');
		char name[24];

		if (!opts || a[0] != '-' || !a[1]) {
			w[n++] = (struct watch){ .mnt = a };
			continue;
		}
		if (!strcmp(a, "--")) {
			opts = false;
			continue;
		}
		if (!strcmp(a, "--oneshot")) {
			oneshot = true;
			continue;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return usage(stdout), free(w), 0;
		/* --program, --interval, --program-timeout: "--opt VALUE" or "--opt=VALUE" */
		snprintf(name, sizeof(name), "%.*s", (int)(eq ? eq - a : (long)strlen(a)), a);
		if (strcmp(name, "--program") && strcmp(name, "--interval") &&
		    strcmp(name, "--program-timeout"))
			return fprintf(stderr, "%s: unknown option '%s'\n", me, a), usage(stderr),
			       free(w), 2;
		v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
		if (!v)
			return fprintf(stderr, "%s: %s needs a value\n", me, name), free(w), 2;
		if (!strcmp(name, "--program"))
			runq.path = v;
		else if (!strcmp(name, "--interval"))
			interval = seconds(name, v, 0.01, 86400);
		else
			runq.timeout = seconds(name, v, 0.1, 86400);
		if (interval < 0 || runq.timeout < 0)
			return free(w), 2;
	}
	if (!n)
		return usage(stderr), free(w), 2;
	if (runq.path && strchr(runq.path, '/') && access(runq.path, X_OK)) {
		fprintf(stderr, "%s: --program %s: %s\n", me, runq.path, strerror(errno));
		return free(w), 2;
	}

	/* invariant 4: the signals arrive only inside ppoll */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGCHLD);
	sigprocmask(SIG_BLOCK, &block, &runq.mask);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL);

	if (!oneshot)
		say("watching %u mount point%s every %g s%s%s", n, n == 1 ? "" : "s", interval,
		    runq.path ? ", program " : "", runq.path ? runq.path : "");
	next = now();
	for (;;) {
		if (!stop_sig && now() >= next) {
			left = 0;
			for (unsigned i = 0; i < n; i++) {
				if (w[i].gone)
					continue;
				poll_mount(&w[i]);
				ever |= !w[i].gone;
				left += !w[i].gone;
			}
			next += interval;
			if (next < now())
				next = now() + interval;
			if (oneshot || !left)
				break;
		}
		prog_reap();
		prog_start();
		if (stop_sig)
			break;
		sleep_until(runq.pid && !runq.killed && runq.deadline < next ? runq.deadline
									      : next);
	}
	/* the end: what is queued runs, unless a stop signal came */
	while (!stop_sig && (runq.pid || runq.head)) {
		prog_reap();
		prog_start();
		if (runq.pid)
			sleep_until(runq.killed ? now() + 1 : runq.deadline);
	}
	if (stop_sig) {
		prog_stop();
		say("stopped by signal %d (%s)", (int)stop_sig, strsignal(stop_sig));
	}
	rc = oneshot ? nevents > 0 : stop_sig || ever ? 0 : 1;
	for (unsigned i = 0; i < n; i++)
		free(w[i].prev);
	free(w);
	return rc;
}
