/* defer.c - requests that wait for the HDD tier, served off the FUSE workers.
 *
 * Owns: a queue of jobs and the threads that run them.  With an SSD tier
 * attached, a read the cache cannot serve whole goes to the RAID and holds
 * its thread for one or more HDD service times (milliseconds, more when
 * the disks queue); so do writes that go to the RAID or are throttled,
 * and fsync.  Run on a FUSE worker, such requests would take the workers
 * away from the cache hits queued behind them in the one FUSE request
 * queue; more workers would cost every hit CPU instead (the benchmark in
 * docs/CACHE_BENCH.md §c3).  So fs.c hands them here and the worker goes
 * back to /dev/fuse; the job replies (libfuse lets any thread reply to a
 * request).
 *
 * Invariants:
 *  1. A job is run exactly once: by a pool thread, or by the caller of
 *     tfs_defer when the pool cannot take it (no memory, stopping).
 *  2. Threads are started on demand, when a job finds none idle, up to
 *     max; they live until tfs_defer_stop, which runs every queued job
 *     before it returns.
 *  3. Between jobs a thread holds no more scratch than scratch.c keeps
 *     (tfs_scratch_trim after each job): an idle pool costs its stacks
 *     and at most TFS_SCRATCH_KEEP per scratch slot and thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/defer.h"
#include "tierfs/log.h"
#include "tierfs/scratch.h"

struct job {
	struct job *next;
	void (*fn)(void *);
	void *arg;
};

struct tfs_defer {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct job *head, **tail;
	unsigned max, nthreads, idle, queued;
	uint64_t run;			/* jobs run on a pool thread (the status) */
	bool stopping;
	pthread_t *tid;
};

static void *worker(void *arg)
{
	struct tfs_defer *d = arg;

	pthread_mutex_lock(&d->lock);
	for (;;) {
		struct job *j = d->head;

		if (!j) {
			if (d->stopping)
				break;
			d->idle++;
			pthread_cond_wait(&d->wake, &d->lock);
			d->idle--;
			continue;
		}
		d->head = j->next;
		if (!d->head)
			d->tail = &d->head;
		d->queued--;
		d->run++;
		pthread_mutex_unlock(&d->lock);
		j->fn(j->arg);
		free(j);
		tfs_scratch_trim();	/* invariant 3 */
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

struct tfs_defer *tfs_defer_start(unsigned max)
{
	struct tfs_defer *d = calloc(1, sizeof(*d));

	if (!d || !(d->tid = calloc(max ? max : 1, sizeof(*d->tid)))) {
		free(d);
		return NULL;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->wake, NULL);
	d->tail = &d->head;
	d->max = max ? max : 1;
	return d;
}

void tfs_defer(struct tfs_defer *d, void (*fn)(void *), void *arg)
{
	struct job *j = malloc(sizeof(*j));

	if (!j) {
		fn(arg);
		return;
	}
	j->next = NULL;
	j->fn = fn;
	j->arg = arg;
	pthread_mutex_lock(&d->lock);
	if (d->stopping) {
		pthread_mutex_unlock(&d->lock);
		free(j);
		fn(arg);
		return;
	}
	*d->tail = j;
	d->tail = &j->next;
	d->queued++;
	/* a thread for every queued job that no idle one will take */
	if (d->queued > d->idle && d->nthreads < d->max) {
		int rc = pthread_create(&d->tid[d->nthreads], NULL, worker, d);

		if (rc == 0)
			d->nthreads++;
		else if (d->nthreads == 0) {
			/* nobody would ever run it: take it back */
			d->head = NULL;
			d->tail = &d->head;
			d->queued--;
			pthread_mutex_unlock(&d->lock);
			tfs_warn("cannot start a thread for slow requests: %s", strerror(rc));
			free(j);
			fn(arg);
			return;
		}
	}
	if (d->idle)
		pthread_cond_signal(&d->wake);
	pthread_mutex_unlock(&d->lock);
}

int tfs_defer_stats(struct tfs_defer *d, char *out, size_t cap)
{
	uint64_t run;
	unsigned n;

	if (!d)
		return 0;
	pthread_mutex_lock(&d->lock);
	run = d->run;
	n = d->nthreads;
	pthread_mutex_unlock(&d->lock);
	return snprintf(out, cap, "pool.jobs=%" PRIu64 "\npool.threads=%u\n", run, n);
}

void tfs_defer_stop(struct tfs_defer *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	d->stopping = true;
	pthread_cond_broadcast(&d->wake);
	pthread_mutex_unlock(&d->lock);
	for (unsigned i = 0; i < d->nthreads; i++)
		pthread_join(d->tid[i], NULL);
	pthread_cond_destroy(&d->wake);
	pthread_mutex_destroy(&d->lock);
	free(d->tid);
	free(d);
}
