/* unit.h - reporting shared by the C unit tests: checks counted in named
 * groups, the first failures of each group printed with what is under
 * test (ctx), and a summary line a group at the end.
 *
 * A test defines its groups as
 *     static struct unit_group groups[G_COUNT] = { [G_X] = { .name = "..." }, ... };
 * and checks with CHECK(G_X, condition, printf-style message).
 */
#ifndef TIERFS_UNIT_H
#define TIERFS_UNIT_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

struct unit_group {
	const char *name;
	uint64_t pass, fail;
};

#define UNIT_MAX_REPORTED 8	/* failures printed per group */

static char ctx[160];	/* what is under test, printed with failures */

__attribute__((format(printf, 2, 3)))
static void unit_fail(struct unit_group *g, const char *fmt, ...)
{
	va_list ap;

	if (g->fail++ >= UNIT_MAX_REPORTED)
		return;
	printf("FAIL [%s] %s: ", g->name, ctx);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

#define CHECK(g, cond, ...)                                       \
	do {                                                      \
		if (cond)                                         \
			groups[g].pass++;                         \
		else                                              \
			unit_fail(&groups[g], __VA_ARGS__);       \
	} while (0)

/* splitmix64: the random numbers of the randomized tests (seeded, so a
 * failure repeats). */
static inline uint64_t unit_rnd(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* One line a group; returns the number of failed checks. */
static uint64_t unit_summary(const struct unit_group *g, int n)
{
	uint64_t failed = 0;

	for (int i = 0; i < n; i++) {
		printf("%-45s %10" PRIu64 " passed, %" PRIu64 " failed\n",
		       g[i].name, g[i].pass, g[i].fail);
		failed += g[i].fail;
	}
	return failed;
}

#endif
