/* test_kvjson: the status's key=value lines as JSON (src/util/kvjson.c): nesting by dotted keys in first-appearance order, keys of one object apart in the input, a key that is also a prefix, a key given again (an array), numbers against strings, escaping, and lines that are skipped; then random inputs, each checked to be one well-formed JSON value by a small parser here. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/kvjson.h"
#include "unit.h"

enum { G_TABLE, G_RANDOM, G_COUNT };

static struct unit_group groups[G_COUNT] = {
	[G_TABLE] = { .name = "inputs and their documents" },
	[G_RANDOM] = { .name = "random inputs are well-formed JSON" },
};

static const struct { const char *in, *want; } cases[] = {
	{ "", "{}" },
	{ "\n\n", "{}" },
	{ "a=1", "{\"a\":1}" },
	{ "a=1\n", "{\"a\":1}" },
	{ "a=1\nb=x\n", "{\"a\":1,\"b\":\"x\"}" },
	{ "cache.mode=writeback\ncache.slots=256\n",
	  "{\"cache\":{\"mode\":\"writeback\",\"slots\":256}}" },
	/* one object's keys apart: still one object, first-appearance order */
	{ "a.x=1\nb=2\na.y=3\n", "{\"a\":{\"x\":1,\"y\":3},\"b\":2}" },
	/* a key that is also a prefix keeps its value as "value", before or after */
	{ "cache=/ssd\ncache.mode=off\n", "{\"cache\":{\"value\":\"/ssd\",\"mode\":\"off\"}}" },
	{ "cache.mode=off\ncache=/ssd\n", "{\"cache\":{\"value\":\"/ssd\",\"mode\":\"off\"}}" },
	{ "m.0=in_sync /a b\n", "{\"m\":{\"0\":\"in_sync /a b\"}}" },
	/* numbers, and what only looks like one */
	{ "n=0\n", "{\"n\":0}" },
	{ "n=-12\n", "{\"n\":-12}" },
	{ "n=0.9531\n", "{\"n\":0.9531}" },
	{ "n=007\n", "{\"n\":\"007\"}" },
	{ "n=1.\n", "{\"n\":\"1.\"}" },
	{ "n=.5\n", "{\"n\":\".5\"}" },
	{ "n=1e3\n", "{\"n\":\"1e3\"}" },
	{ "n=+1\n", "{\"n\":\"+1\"}" },
	{ "n=-\n", "{\"n\":\"-\"}" },
	{ "n=\n", "{\"n\":\"\"}" },
	{ "n=12 MiB\n", "{\"n\":\"12 MiB\"}" },
	{ "uuid=59c358f1-730c\n", "{\"uuid\":\"59c358f1-730c\"}" },
	/* escaping */
	{ "s=a\"b\\c\n", "{\"s\":\"a\\\"b\\\\c\"}" },
	{ "s=t\tx\rz\n", "{\"s\":\"t\\u0009x\\u000dz\"}" },
	{ "s=\xc3\xa9\n", "{\"s\":\"\xc3\xa9\"}" },
	/* skipped: no '=', an empty key or key part */
	{ "junk\na=1\n", "{\"a\":1}" },
	{ "=1\na=2\n", "{\"a\":2}" },
	{ "a..b=1\nc.=2\n.d=3\ne=4\n", "{\"e\":4}" },
	/* a key given again: an array of its values, in order */
	{ "a=1\na=2\n", "{\"a\":[1,2]}" },
	{ "m=x 1\nb=0\nm=y 2\n", "{\"m\":[\"x 1\",\"y 2\"],\"b\":0}" },
	{ "c=/d\nc.m=off\nc=/e\n", "{\"c\":{\"value\":[\"/d\",\"/e\"],\"m\":\"off\"}}" },
	/* '=' inside the value */
	{ "ctl_error=x=y\n", "{\"ctl_error\":\"x=y\"}" },
};

/* A small JSON parser: returns the end of one value at s, or NULL. */
static const char *ws(const char *s)
{
	while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
		s++;
	return s;
}

static const char *value(const char *s, int depth);

static const char *string(const char *s)
{
	if (*s++ != '"')
		return NULL;
	while (*s != '"') {
		if ((unsigned char)*s < 0x20)
			return NULL;
		if (*s == '\\') {
			s++;
			if (*s == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!strchr("0123456789abcdefABCDEF", s[i]) || !s[i])
						return NULL;
				s += 4;
			} else if (!strchr("\"\\/bfnrt", *s) || !*s) {
				return NULL;
			}
		}
		s++;
	}
	return s + 1;
}

static const char *number(const char *s)
{
	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (*s >= '1' && *s <= '9')
		while (*s >= '0' && *s <= '9')
			s++;
	else
		return NULL;
	if (*s == '.') {
		s++;
		if (!(*s >= '0' && *s <= '9'))
			return NULL;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	return s;
}

static const char *object(const char *s, int depth)
{
	s = ws(s + 1);
	if (*s == '}')
		return s + 1;
	for (;;) {
		s = string(ws(s));
		if (!s || *(s = ws(s)) != ':')
			return NULL;
		s = value(s + 1, depth + 1);
		if (!s)
			return NULL;
		s = ws(s);
		if (*s == '}')
			return s + 1;
		if (*s++ != ',')
			return NULL;
	}
}

static const char *array(const char *s, int depth)
{
	s = ws(s + 1);
	if (*s == ']')
		return s + 1;
	for (;;) {
		s = value(s, depth + 1);
		if (!s)
			return NULL;
		s = ws(s);
		if (*s == ']')
			return s + 1;
		if (*s++ != ',')
			return NULL;
	}
}

static const char *value(const char *s, int depth)
{
	s = ws(s);
	if (depth > 64)
		return NULL;
	if (*s == '{')
		return object(s, depth);
	if (*s == '[')
		return array(s, depth);
	if (*s == '"')
		return string(s);
	return number(s);
}

static bool well_formed(const char *doc)
{
	const char *e = doc && *ws(doc) == '{' ? value(doc, 0) : NULL;

	return e && *ws(e) == 0;
}

int main(void)
{
	uint64_t rnd = 42;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *out = tfs_kv_to_json(cases[i].in);

		snprintf(ctx, sizeof(ctx), "case %zu", i);
		CHECK(G_TABLE, out && strcmp(out, cases[i].want) == 0, "got '%s', want '%s'",
		      out ? out : "(null)", cases[i].want);
		CHECK(G_TABLE, well_formed(out), "not well-formed: '%s'", out ? out : "(null)");
		free(out);
	}
	/* random lines over a small alphabet: keys collide, nest and clash */
	for (int t = 0; t < 20000; t++) {
		static const char alpha[] = "ab.=\n0123-\"\\\t x.";
		char in[64];
		unsigned n = (unsigned)(unit_rnd(&rnd) % (sizeof(in) - 1));
		char *out;

		for (unsigned i = 0; i < n; i++)
			in[i] = alpha[unit_rnd(&rnd) % (sizeof(alpha) - 1)];
		in[n] = 0;
		out = tfs_kv_to_json(in);
		snprintf(ctx, sizeof(ctx), "random input %d", t);
		CHECK(G_RANDOM, well_formed(out), "not well-formed: '%s' from '%s'",
		      out ? out : "(null)", in);
		free(out);
	}
	if (unit_summary(groups, G_COUNT)) {
		printf("FAILED\n");
		return 1;
	}
	printf("OK\n");
	return 0;
}
