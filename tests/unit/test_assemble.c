/* test_assemble: which superblock assembly believes (tfs_array_believe, super.c invariant 4), on the superblocks of simulated member histories (failures, members away, replacements, old disks put back, records cut short by crashes) and on one corrupted counter: no member that missed a write is ever used, a history without accidents assembles exactly as it ran, a cut record does not cost the members that missed it, and a lone wrong counter is named and, where no history of put-back disks explains it, outvoted. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/super.h"
#include "unit.h"

enum { G_SAFE, G_CLEAN, G_CUT, G_CORRUPT_SAFE, G_CORRUPT_NAMED, G_CORRUPT_MOUNTS,
       G_CORRUPT_REFUSED, G_NAMED_ALONE, G_EXAMPLES, G_COUNT };

static struct unit_group groups[G_COUNT] = {
	[G_SAFE] = { .name = "history: no member used that missed a write" },
	[G_CLEAN] = { .name = "history without accidents: as it ran" },
	[G_CUT] = { .name = "cut record: its laggards are used" },
	[G_CORRUPT_SAFE] = { .name = "one wrong counter: no member missed a write" },
	[G_CORRUPT_NAMED] = { .name = "one counter above the rest: it is named" },
	[G_CORRUPT_MOUNTS] = { .name = "outvoted counter: mounts as before" },
	[G_CORRUPT_REFUSED] = { .name = "put-back-disk distance: count kept" },
	[G_NAMED_ALONE] = { .name = "a member named is alone at the top count" },
	[G_EXAMPLES] = { .name = "worked examples (DESIGN section 9)" },
};

static uint64_t rng_state;
static int trace;	/* TRACE=1: print every step of every history */

static uint64_t rnd(void)
{
	return unit_rnd(&rng_state);
}

static uint32_t below(uint32_t n)
{
	return (uint32_t)(rnd() % n);
}

static bool chance(unsigned pct)
{
	return below(100) < pct;
}

/* ------------------------------------------------------------------ */
/* The model: directories with superblocks, and the data they hold      */
/*                                                                     */
/* It does what the daemon does: a mount believes what                 */
/* tfs_array_believe says and marks the members it does not use        */
/* failed; every state change is a record (events+1 written to every   */
/* member the new view does not call failed, in index order), which a  */
/* crash may cut after any member; a write reaches every member in     */
/* sync or rebuilding.  gen is the last write a directory holds.       */
/* ------------------------------------------------------------------ */

#define MAXD 64

struct dir {
	bool sb_ok;
	struct tfs_super sb;
	uint64_t gen;
};

struct model {
	uint32_t n, tol;
	struct dir d[MAXD];
	uint32_t nd;
	uint32_t slot[TFS_MAX_MEMBERS];		/* the current directory of each index */
	uint32_t old[MAXD], nold;		/* directories replaced since (put-back candidates) */
	bool mounted;
	char mstate[TFS_MAX_MEMBERS + 1];
	uint64_t events;			/* of the mounted array */
	uint64_t gen;				/* the last write */
	uint32_t used[TFS_MAX_MEMBERS];		/* directory assembled for each index */
	/* what happened: accidents are cut records, put-back disks and mounts
	 * where no superblock given was the newest; after such a mount no
	 * rule can know what the superblocks do not say (tainted) */
	unsigned accidents;
	bool tainted;
	bool last_cut;				/* the last thing was a cut record... */
	bool last_cut_fail;			/* ... that only failed members */
	char cut_state[TFS_MAX_MEMBERS + 1];
};

static uint32_t new_dir(struct model *m)
{
	if (m->nd == MAXD)
		return UINT32_MAX;
	memset(&m->d[m->nd], 0, sizeof(m->d[0]));
	return m->nd++;
}

static void set_sb(struct dir *d, uint32_t index, uint64_t events, const char *state)
{
	memset(&d->sb, 0, sizeof(d->sb));
	d->sb_ok = true;
	d->sb.index = index;
	d->sb.events = events;
	strcpy(d->sb.state, state);
}

static void model_init(struct model *m, uint32_t n, uint32_t tol)
{
	char all[TFS_MAX_MEMBERS + 1] = "";

	memset(m, 0, sizeof(*m));
	m->n = n;
	m->tol = tol;
	memset(all, TFS_M_UP, n);
	strcpy(m->mstate, all);
	for (uint32_t k = 0; k < n; k++) {
		m->slot[k] = new_dir(m);
		set_sb(&m->d[m->slot[k]], k, 1, all);	/* mkfs */
	}
}

static uint64_t newest(const struct model *m)
{
	uint64_t e = 0;

	for (uint32_t d = 0; d < m->nd; d++)
		if (m->d[d].sb_ok && m->d[d].sb.events > e)
			e = m->d[d].sb.events;
	return e;
}

static uint32_t count(const char *st, uint32_t n, char c)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++)
		k += st[i] == c;
	return k;
}

/* Record the mounted state (tfs_array_record).  A crash cuts it, with
 * some chance, after one or more of its members but before the last. */
static void record(struct model *m, bool fail_only)
{
	uint32_t live = m->n - count(m->mstate, m->n, TFS_M_FAILED), w = 0;
	uint32_t cut = chance(12) && live > 1 ? 1 + below(live - 1) : UINT32_MAX;

	m->events++;
	for (uint32_t k = 0; k < m->n; k++) {
		if (m->mstate[k] == TFS_M_FAILED)
			continue;
		if (w++ == cut) {
			m->mounted = false;
			m->accidents++;
			m->last_cut = true;
			m->last_cut_fail = fail_only;
			memcpy(m->cut_state, m->mstate, sizeof(m->cut_state));
			return;
		}
		set_sb(&m->d[m->used[k]], k, m->events, m->mstate);
	}
}

/* ------------------------------------------------------------------ */
/* Assembly as tfs_array_assemble does it, on the model                */
/* ------------------------------------------------------------------ */

struct outcome {
	bool mounted;
	struct tfs_belief b;
	char state[TFS_MAX_MEMBERS + 1];	/* believed, with the unused failed */
};

static void assemble(const struct model *m, const uint32_t *given_dir, struct outcome *o)
{
	const struct tfs_super *sb[TFS_MAX_MEMBERS] = { 0 };

	for (uint32_t k = 0; k < m->n; k++)
		if (given_dir[k] != UINT32_MAX && m->d[given_dir[k]].sb_ok)
			sb[k] = &m->d[given_dir[k]].sb;
	tfs_array_believe(sb, m->n, m->tol, &o->b);
	memcpy(o->state, o->b.state, sizeof(o->state));
	o->mounted = true;
	for (uint32_t k = 0; k < m->n; k++) {
		if (o->b.v[k] != TFS_V_USE)
			o->state[k] = TFS_M_FAILED;
		if (m->tol == 0 && (o->b.v[k] == TFS_V_MISSING || o->b.v[k] == TFS_V_STALE))
			o->mounted = false;
	}
	if (count(o->state, m->n, TFS_M_FAILED) > m->tol || count(o->state, m->n, TFS_M_UP) == 0)
		o->mounted = false;
}

/* Every member used holds the last write: the safety property. */
static bool safe(const struct model *m, const uint32_t *given_dir, const struct outcome *o)
{
	if (!o->mounted)
		return true;
	for (uint32_t k = 0; k < m->n; k++)
		if (o->state[k] != TFS_M_FAILED && m->d[given_dir[k]].gen != m->gen)
			return false;
	return true;
}

static void describe(const struct model *m, const uint32_t *given_dir, const struct outcome *o)
{
	int l = snprintf(ctx, sizeof(ctx), "n=%u tol=%u:", m->n, m->tol);

	for (uint32_t k = 0; k < m->n && l < (int)sizeof(ctx); k++) {
		const struct dir *d = given_dir[k] == UINT32_MAX ? NULL : &m->d[given_dir[k]];

		l += snprintf(ctx + l, sizeof(ctx) - (size_t)l, d ? " [%" PRIu64 " %s g%" PRIu64 "%s]"
			      : " [-]", d ? d->sb.events : 0, d ? d->sb.state : "",
			      d ? d->gen : 0, d && d->gen == m->gen ? "" : " old");
	}
	if (l < (int)sizeof(ctx))
		snprintf(ctx + l, sizeof(ctx) - (size_t)l, " -> %s %s", o->state,
			 o->mounted ? "mounted" : "refused");
}

/* How many of the superblocks given say event e. */
static uint32_t ntop(const struct model *m, const uint32_t *given_dir, uint64_t e)
{
	uint32_t c = 0;

	for (uint32_t k = 0; k < m->n; k++)
		c += given_dir[k] != UINT32_MAX && m->d[given_dir[k]].sb_ok &&
		     m->d[given_dir[k]].sb.events == e;
	return c;
}

/* A mount with the directories given: all current ones, or some away, or
 * an old directory in place of a current one. */
static void mount(struct model *m)
{
	uint32_t given_dir[TFS_MAX_MEMBERS];
	struct outcome o;
	uint64_t top = newest(m);
	bool all = true, knows = false;
	bool cut = m->last_cut;
	unsigned before = m->accidents;

	m->last_cut = false;
	for (uint32_t k = 0; k < m->n; k++)
		given_dir[k] = m->slot[k];
	if (m->tol && chance(20)) {			/* members away */
		for (uint32_t k = 0; k < m->n; k++)
			if (chance(30))
				given_dir[k] = UINT32_MAX, all = false;
	}
	if (m->nold && chance(15)) {			/* old disks put back */
		for (uint32_t t = 1 + below(2); t--;) {
			uint32_t d = m->old[below(m->nold)];

			given_dir[m->d[d].sb.index] = d;
		}
		all = false;
		m->accidents++;
	}
	for (uint32_t k = 0; k < m->n; k++)
		if (given_dir[k] != UINT32_MAX && m->d[given_dir[k]].sb.events == top)
			knows = true;
	assemble(m, given_dir, &o);
	describe(m, given_dir, &o);
	if (trace)
		printf("  mount (knows %d, all %d): %s\n", knows, all, ctx);
	if (!m->tainted && knows)
		CHECK(G_SAFE, safe(m, given_dir, &o), "a member that missed writes is used");
	CHECK(G_NAMED_ALONE, o.b.lone < 0 || ntop(m, given_dir, o.b.events) == 1,
	      "member %d named, but %u members say event %" PRIu64, o.b.lone,
	      ntop(m, given_dir, o.b.events), o.b.events);
	if (!knows) {
		m->accidents++;
		m->tainted = true;
	}
	if (all && m->accidents == 0)
		CHECK(G_CLEAN, !strcmp(o.state, m->mstate) && o.mounted ==
		      (count(m->mstate, m->n, TFS_M_FAILED) <= m->tol &&
		       count(m->mstate, m->n, TFS_M_UP) > 0), "assembled otherwise than it ran (%s)",
		      m->mstate);
	if (all && cut && m->last_cut_fail && before == 1 && m->accidents == 1 &&
	    count(m->cut_state, m->n, TFS_M_FAILED) <= m->tol &&
	    count(m->cut_state, m->n, TFS_M_UP) > 0)
		CHECK(G_CUT, o.mounted && !strcmp(o.state, m->cut_state),
		      "a record cut short (%s) cost members", m->cut_state);
	if (!o.mounted)
		return;
	m->mounted = true;
	memcpy(m->mstate, o.state, sizeof(m->mstate));
	m->events = o.b.events;
	for (uint32_t k = 0; k < m->n; k++)
		m->used[k] = given_dir[k] == UINT32_MAX ? m->slot[k] : given_dir[k];
	if (o.b.rewrite)
		record(m, true);
}

static void write_data(struct model *m)
{
	m->gen++;
	for (uint32_t k = 0; k < m->n; k++)
		if (m->mstate[k] != TFS_M_FAILED)
			m->d[m->used[k]].gen = m->gen;
}

static void fail_member(struct model *m)
{
	uint32_t k = below(m->n);
	char st = m->mstate[k];

	if (st == TFS_M_FAILED)
		return;
	/* refused, as tfs_member_fail does; a member being rebuilt counts as
	 * failed here (the daemon counts only failed ones: see the report) */
	if (st == TFS_M_UP && (count(m->mstate, m->n, TFS_M_FAILED) +
			       count(m->mstate, m->n, TFS_M_REBUILD) + 1 > m->tol ||
			       count(m->mstate, m->n, TFS_M_UP) == 1))
		return;
	m->mstate[k] = TFS_M_FAILED;
	record(m, true);
}

static void replace_member(struct model *m)
{
	uint32_t k = below(m->n), d;

	if (m->mstate[k] != TFS_M_FAILED || (d = new_dir(m)) == UINT32_MAX)
		return;
	/* the new directory says it is failed until R is recorded (rebuild.c) */
	set_sb(&m->d[d], k, m->events, m->mstate);
	if (m->nold < MAXD)
		m->old[m->nold++] = m->slot[k];
	m->slot[k] = m->used[k] = d;
	if (chance(5)) {			/* crash before R is recorded */
		m->mounted = false;
		return;
	}
	m->mstate[k] = TFS_M_REBUILD;
	m->d[d].gen = m->gen;			/* takes every write from now on */
	record(m, false);
}

static void rebuild_done(struct model *m)
{
	for (uint32_t k = 0; k < m->n; k++)
		if (m->mstate[k] == TFS_M_REBUILD) {
			m->mstate[k] = TFS_M_UP;	/* the rebuild copied everything */
			m->d[m->used[k]].gen = m->gen;
			record(m, false);
			return;
		}
}

static void run_history(uint32_t n, uint32_t tol, unsigned steps, struct model *m)
{
	model_init(m, n, tol);
	for (unsigned s = 0; s < steps; s++) {
		if (!m->mounted) {
			mount(m);
			continue;
		}
		if (trace)
			printf("  events %llu state %s gen %llu\n", (unsigned long long)m->events,
			       m->mstate, (unsigned long long)m->gen);
		switch (below(8)) {
		case 0: case 1: case 2: write_data(m); break;
		case 3: fail_member(m); break;
		case 4: replace_member(m); break;
		case 5: rebuild_done(m); break;
		case 6: m->mounted = false; break;		/* clean unmount */
		default: write_data(m); m->mounted = false; break;	/* crash */
		}
	}
}

/* ------------------------------------------------------------------ */
/* One wrong counter on arrays that ran without accidents               */
/* ------------------------------------------------------------------ */

static void corrupt(const struct model *m0)
{
	static const int64_t delta[] = { 1, 2, 3, 4, 5, 7, 100, 999, -1, -2, -1000 };
	uint32_t given_dir[TFS_MAX_MEMBERS];
	struct outcome ref, o;

	for (uint32_t k = 0; k < m0->n; k++)
		given_dir[k] = m0->slot[k];
	assemble(m0, given_dir, &ref);
	for (uint32_t i = 0; i < m0->n; i++) {
		for (size_t x = 0; x < sizeof(delta) / sizeof(delta[0]); x++) {
			static struct model m;
			uint64_t top = newest(m0), e;
			uint32_t agree = 0, back = 0;

			m = *m0;
			e = m.d[m.slot[i]].sb.events;
			if (delta[x] < 0 && (uint64_t)-delta[x] > e)
				continue;
			m.d[m.slot[i]].sb.events = top + (uint64_t)delta[x];
			if (delta[x] < 0)
				m.d[m.slot[i]].sb.events = e - (uint64_t)-delta[x];
			assemble(&m, given_dir, &o);
			describe(&m, given_dir, &o);
			CHECK(G_CORRUPT_SAFE, safe(&m, given_dir, &o),
			      "member %u's counter %+" PRId64 ": a member that missed writes is used",
			      i, delta[x]);
			if (delta[x] < 0)
				continue;
			/* the members that agree with each other, and how many of them
			 * its view calls in use: put-back disks that could explain it */
			for (uint32_t k = 0; k < m.n; k++)
				if (k != i && m.d[m.slot[k]].sb.events == top &&
				    !strcmp(m.d[m.slot[k]].sb.state, m.d[m.slot[i]].sb.state)) {
					agree++;
					back += m.d[m.slot[i]].sb.state[k] != TFS_M_FAILED;
				}
			if (agree * 2 <= m.n)
				continue;	/* no majority to outvote it */
			CHECK(G_CORRUPT_NAMED, o.b.lone == (int)i, "member %u's counter +%" PRId64
			      " is not the one named (%d)", i, delta[x], o.b.lone);
			if (m.tol == 0 || (uint64_t)delta[x] <= back)
				CHECK(G_CORRUPT_MOUNTS, o.b.overruled && o.b.ref == top &&
				      o.mounted == ref.mounted && !strcmp(o.state, ref.state),
				      "member %u's counter +%" PRId64 " not outvoted (%d) or changed "
				      "the assembly (%s, was %s)", i, delta[x], o.b.overruled,
				      o.state, ref.state);
			else
				CHECK(G_CORRUPT_REFUSED, o.b.ref == m.d[m.slot[i]].sb.events &&
				      !o.b.overruled, "member %u's counter +%" PRId64 " outvoted although "
				      "%u put-back disks could explain it", i, delta[x], back);
		}
	}
}

/* ------------------------------------------------------------------ */
/* The worked examples of DESIGN section 9                              */
/* ------------------------------------------------------------------ */

struct example {
	const char *name;
	uint32_t n, tol;
	struct { uint64_t events; const char *state; } sb[5];	/* events 0: not given */
	const char *want;	/* verdicts: U use, _ failed, S stale, - missing */
	int lone;
};

static const struct example examples[] = {
	{ "a lone counter outvoted", 4, 1, { { 3, "UUUU" }, { 1, "UUUU" }, { 1, "UUUU" },
	  { 1, "UUUU" } }, "UUUU", 0 },
	{ "a lone counter too far ahead is believed", 4, 1, { { 1, "UUUU" }, { 1, "UUUU" },
	  { 1, "UUUU" }, { 999, "UUUU" } }, "SSSU", 3 },
	{ "a stale member's counter raised: still failed", 4, 1, { { 2, "UU_U" },
	  { 2, "UU_U" }, { 3, "UUUU" }, { 2, "UU_U" } }, "UU_U", 2 },
	{ "a record cut after the first member", 4, 1, { { 2, "UU_U" }, { 1, "UUUU" },
	  { 1, "UUUU" }, { 1, "UUUU" } }, "UU_U", 0 },
	{ "old disk put back, index replaced since", 3, 2, { { 5, "UUU" }, { 2, "UUU" },
	  { 5, "UUU" } }, "USU", -1 },
	{ "two old disks put back", 3, 2, { { 6, "UUU" }, { 2, "UUU" }, { 2, "UUU" } },
	  "USS", 0 },
	{ "away while the array changed", 3, 1, { { 2, "UU_" }, { 2, "UU_" }, { 1, "UUU" } },
	  "UU_", -1 },
	{ "ran in two parts", 2, 1, { { 2, "U_" }, { 2, "_U" } }, "__", -1 },
	{ "raid0: counters never move, any lone one is wrong", 3, 0, { { 1, "UUU" },
	  { 1, "UUU" }, { 50, "UUU" } }, "UUU", 2 },
	{ "two members, the stale one's counter raised: the other vouches", 2, 1,
	  { { 2, "U_" }, { 3, "UU" } }, "U_", -1 },
	{ "no majority: a member behind still vouches (the top may be stale)", 3, 2,
	  { { 2, "U__" }, { 5, "UUU" }, { 1, "UUU" } }, "S__", -1 },
	{ "missing member", 3, 1, { { 1, "UUU" }, { 0, NULL }, { 1, "UUU" } }, "U-U", -1 },
};

static void test_examples(void)
{
	for (size_t x = 0; x < sizeof(examples) / sizeof(examples[0]); x++) {
		const struct example *e = &examples[x];
		struct tfs_super s[5];
		const struct tfs_super *sb[TFS_MAX_MEMBERS] = { 0 };
		struct tfs_belief b;
		char got[6] = "";

		for (uint32_t k = 0; k < e->n; k++) {
			if (!e->sb[k].events)
				continue;
			memset(&s[k], 0, sizeof(s[k]));
			s[k].index = k;
			s[k].events = e->sb[k].events;
			strcpy(s[k].state, e->sb[k].state);
			sb[k] = &s[k];
		}
		tfs_array_believe(sb, e->n, e->tol, &b);
		for (uint32_t k = 0; k < e->n; k++)
			got[k] = "U-_S"[b.v[k]];
		snprintf(ctx, sizeof(ctx), "%s", e->name);
		CHECK(G_EXAMPLES, !strcmp(got, e->want) && b.lone == e->lone,
		      "verdicts %s (want %s), lone %d (want %d)", got, e->want, b.lone, e->lone);
	}
}

int main(void)
{
	static const uint32_t shapes[][2] = { { 2, 1 }, { 3, 2 }, { 3, 1 }, { 4, 1 }, { 4, 2 },
					      { 5, 2 }, { 2, 0 }, { 4, 0 } };
	static struct model m;
	uint64_t clean = 0;

	trace = getenv("TRACE") != NULL;
	test_examples();
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		for (uint64_t seed = 1; seed <= 4000; seed++) {
			rng_state = seed * 7919 + s;
			if (trace)
				printf("history %zu/%llu\n", s, (unsigned long long)seed);
			run_history(shapes[s][0], shapes[s][1], 10 + below(40), &m);
			if (m.accidents == 0) {
				m.mounted = false;
				corrupt(&m);
				clean++;
			}
		}
	}
	printf("%" PRIu64 " histories without accidents corrupted\n", clean);
	if (unit_summary(groups, G_COUNT)) {
		printf("FAILED\n");
		return 1;
	}
	printf("OK\n");
	return 0;
}
