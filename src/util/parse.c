/* parse.c - numbers and sizes from the command line.
 *
 * Owns: the one parser every numeric option goes through (mount options,
 * mkfs --chunk), and the wording of its refusals; the lookup of one key
 * of a comma-separated spec (tfs_spec_value: TIERFS_FAULT's knobs).
 *
 * Invariants:
 *  1. A number is accepted only whole: decimal digits (a size: then one
 *     K/M/G/T suffix, optionally followed by "i" and/or "B"; a real: digits,
 *     one point, an exponent), nothing before it (no sign, no space, no
 *     "0x"), nothing after it.  So "-1" is refused, never wrapped to
 *     4294967295, and "16x" is not 16.
 *  2. A number that does not fit (strtoull's ERANGE, a suffix that
 *     overflows 64 bits, a real that is not finite) is out of range, never
 *     clamped.
 *  3. A refusal is one line that names the option, the value given and the
 *     whole range (tfs_num_range), so the user need not look it up.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/parse.h"

int tfs_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	case 'p': case 'P': shift = 50; end++; break;
	default: return -EINVAL;
	}
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

const char *tfs_fmt_size(uint64_t v, char *buf, unsigned len)
{
	static const char unit[] = "BKMGTPE";
	double d = (double)v;
	unsigned u = 0;

	while (d >= 1024 && u < 6) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%lluB", (unsigned long long)v);
	else
		snprintf(buf, len, "%.*f%c", d < 10 && d != (uint64_t)d ? 1 : 0, d, unit[u]);
	return buf;
}

/* ------------------------------------------------------------------ */
/* Numbers with a range                                                */
/* ------------------------------------------------------------------ */

static int parse_uint(const char *s, uint64_t *out)
{
	char *end;

	if (!*s || strspn(s, "0123456789") != strlen(s))
		return -EINVAL;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno ? -ERANGE : 0;
}

static int parse_real(const char *s, double *out)
{
	char *end;

	if (!((*s >= '0' && *s <= '9') || *s == '.') ||
	    strspn(s, "0123456789.eE+-") != strlen(s))
		return -EINVAL;
	errno = 0;
	*out = strtod(s, &end);
	if (*end || end == s)
		return -EINVAL;
	if (errno == ERANGE && (*out > 1 || *out < -1))
		return -ERANGE;		/* overflow; an underflow is as good as 0 */
	return isfinite(*out) ? 0 : -ERANGE;
}

static const char *fmt_bound(const struct tfs_num_spec *sp, double v, char *buf, unsigned len)
{
	if (sp->kind == TFS_NUM_SIZE && v != 0)
		return tfs_fmt_size((uint64_t)v, buf, len);
	snprintf(buf, len, sp->kind == TFS_NUM_REAL ? "%g" : "%.0f", v);
	return buf;
}

const char *tfs_num_range(const struct tfs_num_spec *sp, char *buf, size_t len)
{
	char lo[32], hi[32];

	snprintf(buf, len, "%s to %s%s%s%s", fmt_bound(sp, sp->min, lo, sizeof(lo)),
		 fmt_bound(sp, sp->max, hi, sizeof(hi)), sp->note ? " (" : "",
		 sp->note ? sp->note : "", sp->note ? ")" : "");
	return buf;
}

int tfs_parse_num(const struct tfs_num_spec *sp, const char *s, void *out, char *err,
		  size_t errlen)
{
	static const char *const what[] = {
		[TFS_NUM_UINT] = "not a whole number",
		[TFS_NUM_SIZE] = "not a size",
		[TFS_NUM_REAL] = "not a number",
	};
	char range[96];
	uint64_t u = 0;
	double d = 0;
	int rc;

	if (!s)
		s = "";
	if (sp->kind == TFS_NUM_REAL) {
		rc = parse_real(s, &d);
		if (rc == 0 && (d < sp->min || d > sp->max))
			rc = -ERANGE;
	} else {
		rc = sp->kind == TFS_NUM_SIZE ? tfs_parse_size(s, &u) : parse_uint(s, &u);
		if (rc == 0 && ((double)u < sp->min || (double)u > sp->max))
			rc = -ERANGE;
	}
	if (rc) {
		snprintf(err, errlen, "%s=%s: %s; the range is %s", sp->name, s,
			 rc == -EINVAL ? what[sp->kind] : "out of range",
			 tfs_num_range(sp, range, sizeof(range)));
		return rc;
	}
	if (sp->kind == TFS_NUM_REAL)
		*(double *)out = d;
	else if (sp->kind == TFS_NUM_SIZE)
		*(uint64_t *)out = u;
	else
		*(unsigned *)out = (unsigned)u;
	return 0;
}

const char *tfs_spec_value(const char *spec, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = spec; p && *p; p = strchr(p, ','), p = p ? p + 1 : NULL)
		if (strncmp(p, key, kl) == 0 && p[kl] == '=')
			return p + kl + 1;
	return NULL;
}

long tfs_spec_ms(const char *spec, const char *key)
{
	const char *v = tfs_spec_value(spec, key);
	long ms;

	return v && sscanf(v, "%ld", &ms) == 1 ? ms : 0;
}
