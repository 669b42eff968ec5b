/* test_parse: the command-line number parser (src/util/parse.c): whole numbers, sizes and reals against a table of accepted and refused spellings, each range end and one past it, and the one-line refusal naming the option, the value and the range. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tierfs/parse.h"
#include "unit.h"

enum { G_UINT, G_SIZE, G_REAL, G_MSG, G_SPEC, G_COUNT };

static struct unit_group groups[G_COUNT] = {
	[G_UINT] = { .name = "whole numbers" },
	[G_SIZE] = { .name = "sizes" },
	[G_REAL] = { .name = "reals" },
	[G_MSG] = { .name = "refusal lines" },
	[G_SPEC] = { .name = "a key of a comma-separated spec" },
};

static const struct tfs_num_spec u_spec = { "n", TFS_NUM_UINT, 1, 1024, NULL };
static const struct tfs_num_spec u0_spec = { "z", TFS_NUM_UINT, 0, 4294967295.0, NULL };
static const struct tfs_num_spec s_spec = { "sz", TFS_NUM_SIZE, 4096, 1 << 20, NULL };
static const struct tfs_num_spec s0_spec = { "cut", TFS_NUM_SIZE, 0, (double)(1ull << 40),
					      "0: off" };
static const struct tfs_num_spec p_spec = { "big", TFS_NUM_SIZE, 0, (double)(2ull << 50), NULL };
static const struct tfs_num_spec r_spec = { "t", TFS_NUM_REAL, 0, 86400, NULL };
static const struct tfs_num_spec r1_spec = { "ms", TFS_NUM_REAL, 0.8, 100, NULL };

struct ucase { const struct tfs_num_spec *sp; const char *s; int rc; uint64_t v; };
struct rcase { const struct tfs_num_spec *sp; const char *s; int rc; double v; };

static const struct ucase ucases[] = {
	{ &u_spec, "1", 0, 1 }, { &u_spec, "1024", 0, 1024 }, { &u_spec, "16", 0, 16 },
	{ &u_spec, "0016", 0, 16 }, { &u_spec, "0", -ERANGE, 0 }, { &u_spec, "1025", -ERANGE, 0 },
	{ &u_spec, "-1", -EINVAL, 0 }, { &u_spec, "+1", -EINVAL, 0 }, { &u_spec, " 1", -EINVAL, 0 },
	{ &u_spec, "1 ", -EINVAL, 0 }, { &u_spec, "16x", -EINVAL, 0 }, { &u_spec, "abc", -EINVAL, 0 },
	{ &u_spec, "", -EINVAL, 0 }, { &u_spec, "0x10", -EINVAL, 0 }, { &u_spec, "1e3", -EINVAL, 0 },
	{ &u_spec, "1.5", -EINVAL, 0 }, { &u_spec, "16K", -EINVAL, 0 },
	{ &u_spec, "99999999999999999999999", -ERANGE, 0 },
	{ &u0_spec, "0", 0, 0 }, { &u0_spec, "4294967295", 0, 4294967295u },
	{ &u0_spec, "4294967296", -ERANGE, 0 }, { &u0_spec, "-0", -EINVAL, 0 },
	{ &s_spec, "4K", 0, 4096 }, { &s_spec, "4096", 0, 4096 }, { &s_spec, "1M", 0, 1 << 20 },
	{ &s_spec, "1MiB", 0, 1 << 20 }, { &s_spec, "1MB", 0, 1 << 20 }, { &s_spec, "64k", 0, 65536 },
	{ &s_spec, "4095", -ERANGE, 0 }, { &s_spec, "1025K", -ERANGE, 0 }, { &s_spec, "2M", -ERANGE, 0 },
	{ &s_spec, "-4K", -EINVAL, 0 }, { &s_spec, "4Q", -EINVAL, 0 }, { &s_spec, "4KK", -EINVAL, 0 },
	{ &s_spec, "K", -EINVAL, 0 }, { &s_spec, "", -EINVAL, 0 }, { &s_spec, "16E", -EINVAL, 0 },
	{ &s_spec, "99999999999T", -ERANGE, 0 }, { &s_spec, "99999999999999999999", -ERANGE, 0 },
	{ &s0_spec, "0", 0, 0 }, { &s0_spec, "1T", 0, 1ull << 40 }, { &s0_spec, "1025G", -ERANGE, 0 },
	{ &p_spec, "2P", 0, 2ull << 50 }, { &p_spec, "2048T", 0, 2ull << 50 },
	{ &p_spec, "3p", -ERANGE, 0 }, { &p_spec, "2PiB", 0, 2ull << 50 }, { &p_spec, "2Q", -EINVAL, 0 },
};

static const struct rcase rcases[] = {
	{ &r_spec, "0", 0, 0 }, { &r_spec, "10", 0, 10 }, { &r_spec, "0.5", 0, 0.5 },
	{ &r_spec, ".5", 0, 0.5 }, { &r_spec, "86400", 0, 86400 }, { &r_spec, "1e3", 0, 1000 },
	{ &r_spec, "86400.5", -ERANGE, 0 }, { &r_spec, "-1", -EINVAL, 0 },
	{ &r_spec, "-0", -EINVAL, 0 }, { &r_spec, "+1", -EINVAL, 0 }, { &r_spec, "soon", -EINVAL, 0 },
	{ &r_spec, "nan", -EINVAL, 0 }, { &r_spec, "inf", -EINVAL, 0 }, { &r_spec, "0x10", -EINVAL, 0 },
	{ &r_spec, "1e400", -ERANGE, 0 }, { &r_spec, "1e-400", 0, 0 }, { &r_spec, "1.2.3", -EINVAL, 0 },
	{ &r_spec, "1-2", -EINVAL, 0 }, { &r_spec, "", -EINVAL, 0 }, { &r_spec, "10s", -EINVAL, 0 },
	{ &r_spec, " 1", -EINVAL, 0 }, { &r1_spec, "0.8", 0, 0.8 }, { &r1_spec, "0.79", -ERANGE, 0 },
	{ &r1_spec, "100", 0, 100 }, { &r1_spec, "100.01", -ERANGE, 0 },
};

int main(void)
{
	char err[256];

	for (size_t i = 0; i < sizeof(ucases) / sizeof(ucases[0]); i++) {
		const struct ucase *c = &ucases[i];
		uint64_t v64 = 12345;
		unsigned v32 = 12345;
		int rc;

		snprintf(ctx, sizeof(ctx), "%s=\"%s\"", c->sp->name, c->s);
		err[0] = 0;
		if (c->sp->kind == TFS_NUM_SIZE) {
			rc = tfs_parse_num(c->sp, c->s, &v64, err, sizeof(err));
			CHECK(G_SIZE, rc == c->rc && (rc || v64 == c->v) && (!rc || v64 == 12345),
			      "rc %d (want %d), value %llu (want %llu)", rc, c->rc,
			      (unsigned long long)v64, (unsigned long long)c->v);
		} else {
			rc = tfs_parse_num(c->sp, c->s, &v32, err, sizeof(err));
			CHECK(G_UINT, rc == c->rc && (rc || v32 == c->v) && (!rc || v32 == 12345),
			      "rc %d (want %d), value %u (want %llu)", rc, c->rc, v32,
			      (unsigned long long)c->v);
		}
		CHECK(G_MSG, rc ? strlen(err) > 0 && !strchr(err, '\n') : err[0] == 0,
		      "refusal line '%s'", err);
	}
	for (size_t i = 0; i < sizeof(rcases) / sizeof(rcases[0]); i++) {
		const struct rcase *c = &rcases[i];
		double v = 12345;
		int rc;

		snprintf(ctx, sizeof(ctx), "%s=\"%s\"", c->sp->name, c->s);
		err[0] = 0;
		rc = tfs_parse_num(c->sp, c->s, &v, err, sizeof(err));
		CHECK(G_REAL, rc == c->rc && (rc || v == c->v) && (!rc || v == 12345),
		      "rc %d (want %d), value %g (want %g)", rc, c->rc, v, c->v);
	}
	/* the line names the option, the value and the whole range */
	{
		static const struct { const struct tfs_num_spec *sp; const char *s, *want; } m[] = {
			{ &u_spec, "abc", "n=abc: not a whole number; the range is 1 to 1024" },
			{ &u_spec, "0", "n=0: out of range; the range is 1 to 1024" },
			{ &s_spec, "2M", "sz=2M: out of range; the range is 4K to 1M" },
			{ &s0_spec, "x", "cut=x: not a size; the range is 0 to 1T (0: off)" },
			{ &r1_spec, "-1", "ms=-1: not a number; the range is 0.8 to 100" },
		};
		for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
			double v;

			snprintf(ctx, sizeof(ctx), "%s=%s", m[i].sp->name, m[i].s);
			tfs_parse_num(m[i].sp, m[i].s, &v, err, sizeof(err));
			CHECK(G_MSG, !strcmp(err, m[i].want), "'%s', want '%s'", err, m[i].want);
		}
	}
	/* a key is a whole token's start, followed by '=' */
	{
		static const struct { const char *spec, *key, *want; } k[] = {
			{ "a=1,b=2,c", "a", "1,b=2,c" },
			{ "a=1,b=2,c", "b", "2,c" },
			{ "torn,xdelay=5,delay=7", "delay", "7" },
			{ "delay_ms=5", "delay", NULL },
			{ "a=1,c", "c", NULL },
			{ "a=1,,c=", "c", "" },
			{ "", "a", NULL },
			{ NULL, "a", NULL },
		};
		for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
			const char *v = tfs_spec_value(k[i].spec, k[i].key);

			snprintf(ctx, sizeof(ctx), "'%s' %s", k[i].spec ? k[i].spec : "(null)", k[i].key);
			CHECK(G_SPEC, k[i].want ? v && !strcmp(v, k[i].want) : !v, "got '%s'",
			      v ? v : "(null)");
		}
	}
	/* a delay knob's milliseconds; 0 when absent or not a number */
	{
		static const struct { const char *spec; long want; } d[] = {
			{ "torn,lookup_bind_delay=1000,x", 1000 }, { "lookup_bind_delay=25:3", 25 },
			{ "lookup_bind_delay=", 0 }, { "lookup_bind_delay=x", 0 }, { "torn", 0 },
			{ NULL, 0 },
		};
		for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
			long got = tfs_spec_ms(d[i].spec, "lookup_bind_delay");

			snprintf(ctx, sizeof(ctx), "'%s'", d[i].spec ? d[i].spec : "(null)");
			CHECK(G_SPEC, got == d[i].want, "got %ld, want %ld", got, d[i].want);
		}
	}
	if (unit_summary(groups, G_COUNT)) {
		printf("FAILED\n");
		return 1;
	}
	printf("OK\n");
	return 0;
}
