/* scratch.c - per-thread scratch memory, bounded between requests.
 *
 * Owns: the buffers a thread reuses from one request to the next (the
 * buffer a read is replied from, parity scratch, member request arrays,
 * the store's log entry, ...), one per slot (scratch.h) and thread, and
 * the count of all of them.
 *
 * Invariants:
 *  1. A thread's buffers are its own: only it gets, grows and trims them
 *     (no locks); the count (held) is the one shared word.
 *  2. Every buffer of a thread is freed when the thread exits (a
 *     pthread key destructor, set on its first buffer).  Before this
 *     module each file kept its own __thread buffers and a thread that
 *     exited left them behind: the flusher starts up to three destage
 *     threads per batch, each with stripe scratch for its segment (up to
 *     64 extents).
 *  3. Between requests a thread keeps at most TFS_SCRATCH_KEEP bytes per
 *     slot: each thread's loop (fs.c handlers, defer.c, flush.c, scrub.c)
 *     calls tfs_scratch_trim when a request is done, which frees larger
 *     buffers.  So what a thread holds while idle is bounded by
 *     TFS_SCRATCH_KEEP per slot whatever it served, and a large request
 *     costs memory only while it runs (DESIGN §3, Memory).  Before, a
 *     buffer grew to the largest request its thread had served and never
 *     shrank, in exact sizes from glibc's arenas (each regrowth left a
 *     resident hole): on a RAID5 with a 2 GiB write-back tier under an
 *     fsstress-like load, the stripe scratch of the FUSE workers (zero
 *     ranges, punches), the miss pool (read misses) and the promoters
 *     held 66 of 76 MiB after 24,000 operations, more the longer it ran
 *     (issue 12 measured 4.5 GB; docs/MEMORY.md).
 *  4. Buffers grow in 64 KiB steps (arrays exactly), so a thread that
 *     serves growing requests reallocates a few times, not every time.
 *     They are mappings of their own (mmap), not malloc blocks: freeing
 *     one gives its pages back at once, and the holes a grown buffer
 *     leaves never sit in glibc's arenas between live blocks.
 *  5. Idle trim: glibc gives back only the top of each arena; the freed
 *     blocks of a load (job buffers, LMDB pages, inodes) stay resident
 *     between live ones.  The idle thread (tfs_scratch_start) asks
 *     malloc_trim(0) to give them back once per idle period: when
 *     requests that used scratch were served (tfs_scratch_trim sets
 *     `served`) and then none for IDLE_SECS.  A request that used none (a
 *     status read, a lookup run on the pool for a FUSE io_uring queue)
 *     does not count, as on a FUSE worker, where it calls no trim.  The
 *     mark is written only while it is clear (once per idle period at
 *     most), so a request only reads a shared word; it was an atomic add
 *     per request on one cache line.  With scratch in arenas a trim gave back 24 of 45
 *     MiB after an fsstress-like run; with scratch mapped (invariant 4),
 *     1-2 MiB (docs/MEMORY.md).
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "tierfs/scratch.h"

#define STEP (64u << 10)
#define IDLE_SECS 5

struct slot {
	void *p;
	size_t cap;		/* bytes */
	bool mapped;		/* tfs_scratch's (munmap), not an array (free) */
};

struct tls {
	struct slot s[TFS_SCR_NSLOTS];
	bool keyed;		/* the destructor will run (invariant 2) */
	bool used;		/* scratch asked for since the last trim (invariant 5) */
};

static __thread struct tls tls;
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t held;		/* all threads' cap, atomic */
static bool served;		/* a request ended since idle_main looked, atomic */
static uint64_t trims;		/* idle trims done, atomic */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t tid;
	bool running, stop;
} idle = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void slot_free(struct slot *s)
{
	if (!s->p)
		return;
	if (s->mapped)
		munmap(s->p, s->cap);
	else
		free(s->p);
	__atomic_sub_fetch(&held, s->cap, __ATOMIC_RELAXED);
	s->p = NULL;
	s->cap = 0;
	s->mapped = false;
}

static void thread_exit(void *arg)
{
	struct tls *t = arg;

	for (unsigned i = 0; i < TFS_SCR_NSLOTS; i++)
		slot_free(&t->s[i]);
	t->keyed = false;
}

static void key_init(void)
{
	pthread_key_create(&key, thread_exit);
}

/* The slot, with the thread registered for its exit (invariant 2). */
static struct slot *slot_of(enum tfs_scratch_slot slot)
{
	tls.used = true;
	if (!tls.keyed) {
		pthread_once(&once, key_init);
		if (pthread_setspecific(key, &tls))
			return NULL;
		tls.keyed = true;
	}
	return &tls.s[slot];
}

void *tfs_scratch(enum tfs_scratch_slot slot, size_t len)
{
	struct slot *s = slot_of(slot);
	size_t cap;
	void *p;

	if (!s)
		return NULL;
	if (len <= s->cap && s->p)
		return s->p;
	cap = len ? (len + STEP - 1) & ~(size_t)(STEP - 1) : STEP;
	p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	slot_free(s);
	s->p = p;
	s->cap = cap;
	s->mapped = true;
	__atomic_add_fetch(&held, cap, __ATOMIC_RELAXED);
	return p;
}

void *tfs_scratch_array(enum tfs_scratch_slot slot, size_t n, size_t size)
{
	struct slot *s = slot_of(slot);
	size_t want = (n ? n : 1) * size;
	void *p;

	if (!s || (size && want / size != (n ? n : 1)))
		return NULL;
	if (want <= s->cap && s->p)
		return s->p;
	p = realloc(s->p, want);	/* a slot is used one way only: never mapped */
	if (!p)
		return NULL;
	__atomic_add_fetch(&held, want - s->cap, __ATOMIC_RELAXED);
	s->p = p;
	s->cap = want;
	return p;
}

void tfs_scratch_trim(void)
{
	/* invariant 5: a request that used scratch ended */
	if (tls.used && !__atomic_load_n(&served, __ATOMIC_RELAXED))
		__atomic_store_n(&served, true, __ATOMIC_RELAXED);
	tls.used = false;
	for (unsigned i = 0; i < TFS_SCR_NSLOTS; i++)
		if (tls.s[i].cap > TFS_SCRATCH_KEEP)
			slot_free(&tls.s[i]);
}

uint64_t tfs_scratch_bytes(void)
{
	return __atomic_load_n(&held, __ATOMIC_RELAXED);
}

uint64_t tfs_scratch_idle_trims(void)
{
	return __atomic_load_n(&trims, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ */
/* The idle trim (invariant 5)                                         */
/* ------------------------------------------------------------------ */

static void *idle_main(void *arg)
{
	bool pending = false;	/* requests served since the last trim */

	pthread_mutex_lock(&idle.lock);
	while (!idle.stop) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += IDLE_SECS;
		pthread_cond_timedwait(&idle.cond, &idle.lock, &ts);
		if (idle.stop)
			break;
		if (__atomic_exchange_n(&served, false, __ATOMIC_RELAXED)) {
			pending = true;		/* served this period: not idle */
		} else if (pending) {
			pthread_mutex_unlock(&idle.lock);
			malloc_trim(0);
			__atomic_add_fetch(&trims, 1, __ATOMIC_RELAXED);
			pthread_mutex_lock(&idle.lock);
			pending = false;
		}
	}
	pthread_mutex_unlock(&idle.lock);
	return NULL;
}

int tfs_scratch_start(void)
{
	int rc;

	pthread_mutex_lock(&idle.lock);
	idle.stop = false;
	rc = idle.running ? 0 : pthread_create(&idle.tid, NULL, idle_main, NULL);
	if (rc == 0)
		idle.running = true;
	pthread_mutex_unlock(&idle.lock);
	return -rc;
}

void tfs_scratch_stop(void)
{
	pthread_mutex_lock(&idle.lock);
	if (!idle.running) {
		pthread_mutex_unlock(&idle.lock);
		return;
	}
	idle.stop = true;
	pthread_cond_signal(&idle.cond);
	pthread_mutex_unlock(&idle.lock);
	pthread_join(idle.tid, NULL);
	idle.running = false;
}
