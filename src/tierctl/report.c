/* report.c - tierctl's views over several mounts or over time: list (every
 * mounted array), prometheus (node_exporter's textfile format) and top
 * (a live view).
 *
 * Owns: nothing but their output.  Each reads only the mounts'
 * user.tierfs.status, like the rest of tierctl.
 *
 * Invariants:
 *  1. A mount that cannot be read is said so on stderr and the others are
 *     still shown; the exit status is then 1.
 *  2. prometheus prints each metric's samples together (sorted by name,
 *     the mounts in the order given), every numeric status key as a
 *     sample labelled with the mount and the array's uuid; the states
 *     (health, each member's, the cache mode) as a sample of 1 with the
 *     state as a label.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tierctl.h"

static double numf(const char *st, const char *key)
{
	char v[64];

	return atof(get(st, key, v, sizeof(v)));
}

/* /proc/mounts escapes ' ', '\t', '\n' and '\\' as octal. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

int cmd_list(void)
{
	FILE *f = fopen("/proc/self/mounts", "r");
	char line[8192], src[4096], mnt[4096], type[64];
	int rc = 0, n = 0;

	if (!f) {
		perror("tierctl: /proc/self/mounts");
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		char v[6][256], b[32];
		char *st;

		if (sscanf(line, "%4095s %4095s %63s", src, mnt, type) != 3 ||
		    strcmp(type, "fuse.tierfs") != 0)
			continue;
		unescape(mnt);
		st = status(mnt);
		if (!st) {
			rc = 1;
			continue;
		}
		if (n++ == 0)
			printf("%-30s %-36s %-7s %-7s %-9s %s\n", "MOUNTPOINT", "UUID", "LEVEL",
			       "MEMBERS", "HEALTH", "SSD TIER");
		get(st, "cache", v[4], sizeof(v[4]));
		snprintf(v[5], sizeof(v[5]), "%s, %s dirty", get(st, "cache.mode", v[3], 64),
			 human((unsigned long long)numf(st, "cache.dirty_bytes"), b, sizeof(b)));
		printf("%-30s %-36s %-7s %-7s %-9s %s\n", mnt, get(st, "uuid", v[0], sizeof(v[0])),
		       get(st, "level", v[1], sizeof(v[1])), get(st, "state", v[2], sizeof(v[2])),
		       get(st, "health", v[3], sizeof(v[3])),
		       !strcmp(v[4], "none") || !v[4][0] ? "none" : v[5]);
		free(st);
	}
	fclose(f);
	return rc;
}

/* One sample: its metric name, its labels (without braces), its value. */
struct sample {
	char name[96];
	char labels[4096 + 160];
	char value[40];
	unsigned order;
};

static struct sample *samples;
static size_t nsamples, capsamples;

/* Appends v to o (a label value): backslash, quote and newline escaped. */
static void label_value(char *o, size_t len, const char *v)
{
	size_t l = strlen(o);

	for (; *v && l + 3 < len; v++) {
		if (*v == '\\' || *v == '"' || *v == '\n')
			o[l++] = '\\';
		o[l++] = *v == '\n' ? 'n' : *v;
	}
	o[l] = 0;
}

/* Appends ,k="v" to the labels o. */
static void label(char *o, size_t len, const char *k, const char *v)
{
	size_t l = strlen(o);

	snprintf(o + l, len - l, ",%s=\"", k);
	label_value(o, len - 2, v);
	strcat(o, "\"");
}

static void add_sample(const char *name, const char *labels, const char *value)
{
	struct sample *s;

	if (nsamples == capsamples) {
		size_t cap = capsamples ? 2 * capsamples : 256;
		struct sample *v = realloc(samples, cap * sizeof(*v));

		if (!v)
			return;
		samples = v;
		capsamples = cap;
	}
	s = &samples[nsamples];
	snprintf(s->name, sizeof(s->name), "tierfs_%s", name);
	for (char *p = s->name; *p; p++)
		if (*p == '.')
			*p = '_';
	snprintf(s->labels, sizeof(s->labels), "%s", labels);
	snprintf(s->value, sizeof(s->value), "%s", value);
	s->order = (unsigned)nsamples;
	nsamples++;
}

static bool is_number(const char *v)
{
	char *end;

	if (!*v)
		return false;
	(void)strtod(v, &end);
	return *end == 0 && strspn(v, "0123456789.-") == strlen(v);
}

static void mount_samples(const char *mnt, const char *st)
{
	char base[4096 + 64] = "mount=\"", uuid[64];

	label_value(base, sizeof(base) - 64, mnt);
	snprintf(base + strlen(base), sizeof(base) - strlen(base), "\",uuid=\"%s\"",
		 get(st, "uuid", uuid, sizeof(uuid)));
	for (const char *p = st; *p;) {
		const char *e = strchr(p, '\n'), *eq;
		char key[128], val[512];
		unsigned m;
		int kl;

		if (!e)
			e = p + strlen(p);
		eq = memchr(p, '=', (size_t)(e - p));
		if (eq && eq - p < (long)sizeof(key) && e - eq - 1 < (long)sizeof(val)) {
			kl = (int)(eq - p);
			snprintf(key, sizeof(key), "%.*s", kl, p);
			snprintf(val, sizeof(val), "%.*s", (int)(e - eq - 1), eq + 1);
			if (sscanf(key, "member.%u", &m) == 1) {
				const char *sub = strchr(key + 7, '.');
				char lv[16], lab[sizeof(base) + 600], name[160];

				snprintf(lv, sizeof(lv), "%u", m);
				snprintf(lab, sizeof(lab), "%s", base);
				label(lab, sizeof(lab), "member", lv);
				if (sub && is_number(val)) {
					snprintf(name, sizeof(name), "member_%s", sub + 1);
					add_sample(name, lab, val);
				} else if (!sub) {
					val[strcspn(val, " ")] = 0;	/* the state, not the path */
					label(lab, sizeof(lab), "state", val);
					add_sample("member_state", lab, "1");
				}
			} else if (!strcmp(key, "health") || !strcmp(key, "cache.mode")) {
				char lab[sizeof(base) + 600];
				bool h = !strcmp(key, "health");

				snprintf(lab, sizeof(lab), "%s", base);
				label(lab, sizeof(lab), h ? "state" : "mode", val);
				add_sample(h ? "health" : "cache_mode", lab, "1");
			} else if (is_number(val)) {
				add_sample(key, base, val);
			}
		}
		p = *e ? e + 1 : e;
	}
}

static int sample_cmp(const void *a, const void *b)
{
	const struct sample *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : x->order < y->order ? -1 : x->order > y->order;
}

int cmd_prometheus(int n, char **mnts)
{
	int rc = 0;

	for (int i = 0; i < n; i++) {
		char *st = status(mnts[i]);

		if (!st) {
			rc = 1;
			continue;
		}
		mount_samples(mnts[i], st);
		free(st);
	}
	qsort(samples, nsamples, sizeof(*samples), sample_cmp);
	for (size_t i = 0; i < nsamples; i++)
		printf("%s{%s} %s\n", samples[i].name, samples[i].labels, samples[i].value);
	free(samples);
	return rc;
}

/* The counters top follows, and their values at the last look. */
struct snap {
	double t;
	double rreq, rhit, wreq, flushed, mr[64], mw[64], mrb[64], mwb[64];
	unsigned nm;
};

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void take(const char *st, struct snap *s)
{
	char key[64];

	s->t = mono();
	s->rhit = numf(st, "cache.read_req_hits");
	s->rreq = s->rhit + numf(st, "cache.read_req_misses");
	s->wreq = numf(st, "cache.write_req_hits") + numf(st, "cache.write_req_misses");
	s->flushed = numf(st, "cache.flushed_bytes");
	s->nm = (unsigned)numf(st, "members");
	if (s->nm > 64)
		s->nm = 64;
	for (unsigned k = 0; k < s->nm; k++) {
		snprintf(key, sizeof(key), "member.%u.reads", k);
		s->mr[k] = numf(st, key);
		snprintf(key, sizeof(key), "member.%u.writes", k);
		s->mw[k] = numf(st, key);
		snprintf(key, sizeof(key), "member.%u.read_bytes", k);
		s->mrb[k] = numf(st, key);
		snprintf(key, sizeof(key), "member.%u.write_bytes", k);
		s->mwb[k] = numf(st, key);
	}
}

static void show(const char *mnt, const char *st, const struct snap *a, const struct snap *b)
{
	double dt = b->t - a->t > 0 ? b->t - a->t : 1;
	double slots = numf(st, "cache.slots");
	char v[3][64], h[4][32];

	if (isatty(STDOUT_FILENO))
		printf("\033[H\033[J");
	printf("%s: %s %s, %s\n", mnt, get(st, "level", v[0], sizeof(v[0])),
	       get(st, "state", v[1], sizeof(v[1])), get(st, "health", v[2], sizeof(v[2])));
	if (slots > 0) {
		double dr = b->rreq - a->rreq;

		printf("tier: %.0f reads/s, %.1f%% hits; %.0f writes/s; dirty %.1f%% (low %s, "
		       "high %s); flushing %s/s\n",
		       dr / dt, dr > 0 ? 100 * (b->rhit - a->rhit) / dr : 0.0, (b->wreq - a->wreq) / dt,
		       100 * numf(st, "cache.dirty_extents") / slots,
		       get(st, "cache.dirty_low", v[0], sizeof(v[0])),
		       get(st, "cache.dirty_high", v[1], sizeof(v[1])),
		       human((unsigned long long)((b->flushed - a->flushed) / dt), h[0], sizeof(h[0])));
	}
	printf("%-8s %10s %10s %12s %12s\n", "member", "reads/s", "writes/s", "read/s", "write/s");
	for (unsigned k = 0; k < b->nm; k++)
		printf("%-8u %10.0f %10.0f %12s %12s\n", k, (b->mr[k] - a->mr[k]) / dt,
		       (b->mw[k] - a->mw[k]) / dt,
		       human((unsigned long long)((b->mrb[k] - a->mrb[k]) / dt), h[1], sizeof(h[1])),
		       human((unsigned long long)((b->mwb[k] - a->mwb[k]) / dt), h[2], sizeof(h[2])));
	fflush(stdout);
}

int cmd_top(const char *mnt, double interval, unsigned count)
{
	struct snap prev, cur;
	char *st = status(mnt);

	if (!st)
		return 1;
	take(st, &prev);
	free(st);
	for (unsigned i = 0; count == 0 || i < count; i++) {
		usleep((useconds_t)(interval * 1e6));
		st = status(mnt);
		if (!st)
			return 1;
		take(st, &cur);
		show(mnt, st, &prev, &cur);
		free(st);
		prev = cur;
	}
	return 0;
}
