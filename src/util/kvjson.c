/* kvjson.c - key=value lines to one JSON document (kvjson.h).
 *
 * Owns: nothing; a pure function.  The lines become a tree (objects by
 * dotted key parts, first appearance order), printed once it is whole, so
 * keys of one object need not be adjacent in the input.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/kvjson.h"

struct node {
	char *name;
	char **values;		/* a leaf's values, or the "value" of an object */
	unsigned nvalues;
	struct node *kids, *last, *next;
};

struct out {
	char *buf;
	size_t len, cap;
	bool nomem;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->nomem)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t cap = o->cap ? o->cap : 256;
		char *b;

		while (o->len + n + 1 > cap)
			cap *= 2;
		b = realloc(o->buf, cap);
		if (!b) {
			o->nomem = true;
			return;
		}
		o->buf = b;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = 0;
}

static void puts_(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

static void put_string(struct out *o, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	put(o, "\"", 1);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		char esc[7] = { '\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15], 0 };

		if (ch == '"' || ch == '\\') {
			put(o, "\\", 1);
			put(o, s, 1);
		} else if (ch < 0x20) {
			puts_(o, esc);
		} else {
			put(o, s, 1);
		}
	}
	put(o, "\"", 1);
}

/* A plain decimal number: -?(0|[1-9][0-9]*)(.[0-9]+)? */
static bool is_number(const char *s)
{
	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (*s >= '1' && *s <= '9')
		while (*s >= '0' && *s <= '9')
			s++;
	else
		return false;
	if (*s == '.') {
		if (!(*++s >= '0' && *s <= '9'))
			return false;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	return *s == 0;
}

static void put_value(struct out *o, const char *v)
{
	if (is_number(v))
		puts_(o, v);
	else
		put_string(o, v);
}

static struct node *child(struct node *n, const char *name, size_t len)
{
	struct node *k;

	for (k = n->kids; k; k = k->next)
		if (strlen(k->name) == len && memcmp(k->name, name, len) == 0)
			return k;
	k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	k->name = strndup(name, len);
	if (!k->name) {
		free(k);
		return NULL;
	}
	if (n->last)
		n->last->next = k;
	else
		n->kids = k;
	n->last = k;
	return k;
}

/* Adds key=value (the line [line, end)).  Returns false without memory. */
static bool add(struct node *root, const char *line, const char *end)
{
	const char *eq = memchr(line, '=', (size_t)(end - line)), *p = line;
	struct node *n = root;

	if (!eq || eq == line || *line == '.' || eq[-1] == '.')
		return true;	/* no key, or an empty part: skipped */
	for (const char *q = line; q + 1 < eq; q++)
		if (q[0] == '.' && q[1] == '.')
			return true;
	while (p < eq) {
		const char *dot = memchr(p, '.', (size_t)(eq - p));
		const char *e = dot ? dot : eq;

		n = child(n, p, (size_t)(e - p));
		if (!n)
			return false;
		p = e + (dot ? 1 : 0);
	}
	{
		char **v = realloc(n->values, (n->nvalues + 1) * sizeof(*v));

		if (!v)
			return false;
		n->values = v;
		v[n->nvalues] = strndup(eq + 1, (size_t)(end - eq - 1));
		return v[n->nvalues++] != NULL;
	}
}

/* A leaf's values: one as itself, several (a key repeated) as an array. */
static void put_values(struct out *o, const struct node *n)
{
	if (n->nvalues == 1) {
		put_value(o, n->values[0]);
		return;
	}
	put(o, "[", 1);
	for (unsigned i = 0; i < n->nvalues; i++) {
		if (i)
			put(o, ",", 1);
		put_value(o, n->values[i]);
	}
	put(o, "]", 1);
}

static void print(struct out *o, const struct node *n)
{
	bool first = true;

	if (!n->kids) {
		put_values(o, n);
		return;
	}
	put(o, "{", 1);
	if (n->nvalues) {
		puts_(o, "\"value\":");
		put_values(o, n);
		first = false;
	}
	for (const struct node *k = n->kids; k; k = k->next) {
		if (!first)
			put(o, ",", 1);
		first = false;
		put_string(o, k->name);
		put(o, ":", 1);
		print(o, k);
	}
	put(o, "}", 1);
}

static void drop(struct node *n)
{
	while (n) {
		struct node *next = n->next;

		drop(n->kids);
		free(n->name);
		for (unsigned i = 0; i < n->nvalues; i++)
			free(n->values[i]);
		free(n->values);
		free(n);
		n = next;
	}
}

char *tfs_kv_to_json(const char *kv)
{
	struct node root = { 0 };
	struct out o = { 0 };
	bool ok = true;

	for (const char *p = kv; ok && *p;) {
		const char *e = strchr(p, '\n');

		if (!e)
			e = p + strlen(p);
		ok = add(&root, p, e);
		p = *e ? e + 1 : e;
	}
	if (ok) {
		if (root.kids)
			print(&o, &root);
		else
			puts_(&o, "{}");
	}
	drop(root.kids);
	if (!ok || o.nomem) {
		free(o.buf);
		return NULL;
	}
	return o.buf;
}
