/* Parsing and formatting of the numbers users type (src/util/parse.c):
 * sizes with K/M/G suffixes and range-checked option values; a key of a
 * comma-separated spec. */
#ifndef TIERFS_PARSE_H
#define TIERFS_PARSE_H
#include <stddef.h>
#include <stdint.h>
/* "512K", "4k", "16M", "1G", "4096" -> bytes in *out.  Returns 0, or
 * -EINVAL on junk or overflow. */
int tfs_parse_size(const char *s, uint64_t *out);
/* bytes -> "512K" / "1.5G" style, for summaries.  Returns buf. */
const char *tfs_fmt_size(uint64_t v, char *buf, unsigned len);

/* Numbers from the command line, each with a range (parse.c invariants). */
enum tfs_num_kind {
	TFS_NUM_UINT,	/* a whole number; stored as unsigned */
	TFS_NUM_SIZE,	/* a size with an optional K/M/G/T suffix; stored as uint64_t */
	TFS_NUM_REAL,	/* a decimal number ("0.5", "10"); stored as double */
};

struct tfs_num_spec {
	const char *name;	/* the option, for messages */
	enum tfs_num_kind kind;
	double min, max;	/* inclusive; whole numbers below 2^53 for UINT and SIZE */
	const char *note;	/* what an end of the range means ("0: off"), or NULL */
};

/* s as sp says, into *out (unsigned, uint64_t or double by kind).
 * Returns 0, or
 * -EINVAL (not a number of that kind) / -ERANGE (outside the range), with
 * one line naming the option, the value and the range in err. */
int tfs_parse_num(const struct tfs_num_spec *sp, const char *s, void *out, char *err,
		  size_t errlen);
/* The range as messages and documentation give it: "1 to 1024",
 * "4K to 1M", "0 to 86400", written into buf.  Returns buf. */
const char *tfs_num_range(const struct tfs_num_spec *sp, char *buf, size_t len);
/* The value of key in spec, a comma-separated list of KEY=VALUE and words
 * (TIERFS_FAULT's): a pointer into spec just past "key=", running to the
 * next comma or the end; NULL if spec (may be NULL) has no such key. */
const char *tfs_spec_value(const char *spec, const char *key);
/* key's value in spec read as a number of milliseconds (a delay knob).
 * Returns it, or 0 if spec has no such key or its value does not start
 * with a number. */
long tfs_spec_ms(const char *spec, const char *key);
#endif
