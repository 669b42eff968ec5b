/* transport.c - the FUSE requests' transport: io_uring queues, one per
 * CPU (FUSE-over-io_uring, uring_abi.h), beside /dev/fuse.
 *
 * Owns: the queues (a thread, its ring and its entries each), the mode
 * and what was negotiated, and libfuse's custom I/O on the session fd.
 * Every answer libfuse sends passes through t_writev: an answer to a
 * request a queue carried is copied into that entry and committed on its
 * ring; any other (the /dev/fuse requests, notifications) is written to
 * /dev/fuse.  The INIT answer is where io_uring is asked for.
 *
 * A request on /dev/fuse costs a read(2) to fetch it, a writev(2) to
 * answer and a context switch each way.  On a queue the thread that
 * takes a request's completion also submits its answer, which fetches
 * the next, in the same io_uring_enter as other answers and reads: a
 * cache hit is one SSD read on the queue's own ring and one commit.
 *
 * Invariants:
 *  1. Only a queue's thread submits on its ring (SINGLE_ISSUER where the
 *     kernel has it): a command's completion is task work of the task that
 *     submitted it, and the kernel cancels a task's commands when it
 *     exits.  An answer made on another thread (a pool job) is handed to
 *     the queue's thread (q->remote, its eventfd read armed on the ring
 *     while the thread may sleep there).
 *  2. An entry's buffers are the kernel's from its submission to its
 *     completion, and the request's from then until its answer is copied
 *     in; its unique is set for exactly that second span, so t_writev
 *     finds the entry of an answer by unique and nothing else matches.
 *  3. io_uring is asked for in the INIT answer only after every queue's
 *     thread and ring exist (the kernel holds every request until each
 *     queue has an entry registered, or a registration fails): a set-up
 *     that fails leaves the connection on /dev/fuse.
 *  4. A queue's thread runs READ, WRITE and FSYNC itself (fs.c hands
 *     what would wait for the members to a pool on its own); every other
 *     request goes to the pool, since it may wait for the members.
 *  5. tfs_transport_stop returns once every request a queue took has been
 *     answered; requests arriving after it are left to the kernel, which
 *     ends them when the connection goes (ECONNABORTED, as on /dev/fuse).
 *     The threads and rings stay until tfs_transport_free, after the
 *     session is unmounted: a request the kernel hands to a ring whose
 *     task is gone ends in ECANCELED instead.  So does the custom I/O
 *     (t_writev): a pool job answering a /dev/fuse request may still pass
 *     through it.
 *  6. An open answer (OPEN, CREATE) that makes the file's I/O direct
 *     (FOPEN_DIRECT_IO: an O_DIRECT open) also lets the kernel send its
 *     direct writes in parallel (FOPEN_PARALLEL_DIRECT_WRITES), as libfuse
 *     3.14 cannot say: every write path below already takes what it needs
 *     for writes that overlap (row locks on the redundant levels, busy
 *     slots in the tier) and is used so by asynchronous direct I/O, which
 *     the kernel never held back; the kernel still serialises writes that
 *     extend the file.  The answer is known as an open by its entry's
 *     opcode on a queue, by t->opens on /dev/fuse (a full table only
 *     leaves an open without the flag).
 *  7. auto asks for io_uring only with an SSD tier: a queue's thread runs
 *     what the tier answers from the SSD, and hands everything that waits
 *     for the members to the pool; an uncached array's requests all do,
 *     and two hand-offs per request cost more than /dev/fuse (4K reads
 *     0.78-0.87x at QD 32, 0.8x at QD 1, stat 0.6x; docs/PROFILE.md).
 *     fuse_uring=on asks for it anyway.
 *  8. A request counts as alone on its queue (tfs_transport_alone: fs.c
 *     then reads a hit right there instead of on the ring) only if no other
 *     request of the queue is taken, completed or delivered.  The kernel
 *     delivers a request as task work, which a DEFER_TASKRUN ring runs only
 *     when its thread enters it: a burst the application submitted at once
 *     shows one completion, and the rest only after that read.  So when the
 *     ring says task work is pending (IORING_SQ_TASKRUN), it is run first.
 *     Without this, the first request of every burst of 31 was read in
 *     place while the other 30 waited behind it, and the queue ran in
 *     lock-step with the application (docs/PROFILE.md, tenth step).
 *  9. The kernel's refusal of a registration (the fuse module's
 *     enable_uring switched off after tfs_transport_attach read it, say),
 *     after which it keeps the connection on /dev/fuse, is said in one
 *     line per mount however many entries and queues it refused (the
 *     other refusals are debug lines): a warning under auto, whose
 *     fallback that is, as when the module said no before the mount; an
 *     error under fuse_uring=on, which does not get what it asked for.
 *     That the kernel took the queues is said when the first request
 *     comes on one (the kernel answers a registration only with a
 *     request), once per mount; the INIT answer only asked for them.
 * 10. So is the daemon's own failure to make the queues (a ring, an
 *     eventfd, an entry's memory, a thread: queues_make), after which the
 *     INIT answer does not ask for io_uring: one line naming the queue,
 *     the step and the reason, a warning under auto, an error under
 *     fuse_uring=on.
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tierfs/defer.h"
#include "tierfs/fs.h"
#include "tierfs/hitio.h"
#include "tierfs/log.h"
#include "tierfs/parse.h"
#include "tierfs/transport.h"
#include "uring_abi.h"

#define DEPTH 64		/* entries per queue */
#define PRE 4096		/* before an entry's payload: its headers, then the request rebuilt */
#define ENABLE_URING "/sys/module/fuse/parameters/enable_uring"

enum { TAG_ENT, TAG_HIT, TAG_EVENT, TAG_MASK = 3 };	/* low bits of user_data */

struct tent {
	struct tq *q;
	char *base;			/* PRE + payload bytes, mmapped */
	struct tfs_uring_req_header *hdr;	/* at base */
	char *payload;			/* base + PRE */
	struct iovec iov[2];
	uint64_t unique;		/* invariant 2 (atomic) */
	uint64_t commit_id;
	uint32_t cmd;			/* the command last submitted (invariant 9) */
	uint32_t opcode;		/* of the request it holds */
	struct fuse_buf buf;		/* the request as libfuse reads it */
	struct tent *rnext;		/* on q->remote */
};

struct tq {
	struct tfs_transport *t;
	unsigned qid;
	struct io_uring ring;
	pthread_t tid;
	int efd;
	uint64_t ebuf;
	bool armed;
	pthread_mutex_t lock;		/* remote, sleeping */
	struct tent *remote;
	bool sleeping;
	unsigned inuser;		/* requests taken, not answered (thread only) */
	unsigned seen;			/* completions of this batch taken (thread only) */
	unsigned live;			/* entries the kernel has or will get back */
	bool quiet;			/* stopping and nothing taken is unanswered (t->lock) */
	uint64_t requests, pooled, reads, writes;	/* atomics, for the status */
	struct tent ents[DEPTH];
};

struct tfs_transport {
	struct fuse_session *se;
	int fd;
	enum tfs_uring_mode asked, mode;	/* as given; as the module lets it be */
	struct tfs_defer *pool;
	uint64_t init_unique;		/* the INIT request's, until answered */
	bool offered;			/* the kernel's INIT offered io_uring */
	uint32_t minor;			/* the kernel's protocol minor (INIT) */
	/* OPEN and CREATE requests read from /dev/fuse and not answered yet
	 * (invariant 6), 0 for a free place; under opens_lock */
	pthread_mutex_t opens_lock;
	uint64_t opens[64];
	uint64_t parallel;		/* opens given parallel direct writes (atomic) */
	pthread_mutex_t lock;		/* below */
	pthread_cond_t cond;
	unsigned ready;			/* queues whose thread reported */
	int setup_err;
	char setup_why[96];		/* its queue and step (invariant 10) */
	int go;				/* 0 wait, 1 register, -1 leave */
	bool stopping;			/* atomic: no request is taken any more */
	bool leaving;			/* atomic: the threads end once quiet */
	bool active;			/* io_uring asked for and not refused */
	bool refusal_said;		/* invariant 9 */
	bool carried_said;		/* atomic: invariant 9 */
	unsigned nq;
	struct tq *q;
	size_t payload;
	char note[200];			/* why /dev/fuse alone, or the refusal */
	long init_delay_ms;		/* TIERFS_FAULT's uring_init_delay */
	const char *queue_fail;		/* TIERFS_FAULT's uring_queue_fail: a step */
};

static __thread struct tq *cur_q;
static __thread struct tent *cur_ent;	/* the request cur_q's thread is running */

int tfs_uring_mode_parse(const char *s)
{
	if (!strcmp(s, "off"))
		return TFS_URING_OFF;
	if (!strcmp(s, "auto"))
		return TFS_URING_AUTO;
	if (!strcmp(s, "on"))
		return TFS_URING_ON;
	return -1;
}

bool tfs_uring_allowed(char *why, size_t len)
{
	FILE *f = fopen(ENABLE_URING, "r");
	int c = f ? fgetc(f) : EOF;

	if (f)
		fclose(f);
	if (c == 'Y' || c == '1')
		return true;
	if (!f)
		snprintf(why, len, "this kernel's fuse module has no io_uring (no %s)",
			 ENABLE_URING);
	else
		snprintf(why, len, "the fuse module does not allow io_uring (%s is N; "
			 "as root: echo Y > %s)", ENABLE_URING, ENABLE_URING);
	return false;
}

/* The kernel's queue count: its possible CPUs (a queue per CPU index). */
static unsigned possible_cpus(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
	unsigned lo, hi = 0, n = 0;
	char sep;

	if (!f)
		return (unsigned)sysconf(_SC_NPROCESSORS_CONF);
	while (fscanf(f, "%u", &lo) == 1) {
		hi = lo;
		if (fscanf(f, "%c", &sep) == 1 && sep == '-' && fscanf(f, "%u%c", &hi, &sep) < 1)
			break;
		n = hi + 1 > n ? hi + 1 : n;
		if (sep != ',')
			break;
	}
	fclose(f);
	return n ? n : 1;
}

static struct io_uring_sqe *sqe_get(struct tq *q)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&q->ring)))
		io_uring_submit(&q->ring);
	return sqe;
}

static void prep_cmd(struct tq *q, struct tent *e, unsigned op)
{
	struct io_uring_sqe *sqe = sqe_get(q);
	struct tfs_uring_cmd_req *cr = (void *)sqe->cmd;

	memset(sqe, 0, 128);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = q->t->fd;
	sqe->cmd_op = op;
	sqe->addr = (uintptr_t)e->iov;
	sqe->len = 2;
	cr->commit_id = op == TFS_URING_CMD_REGISTER ? 0 : e->commit_id;
	cr->qid = (uint16_t)q->qid;
	sqe->user_data = (uintptr_t)e | TAG_ENT;
	e->cmd = op;
}

static void arm_event(struct tq *q)
{
	struct io_uring_sqe *sqe = sqe_get(q);

	io_uring_prep_read(sqe, q->efd, &q->ebuf, sizeof(q->ebuf), 0);
	io_uring_sqe_set_data64(sqe, (uintptr_t)q | TAG_EVENT);
	q->armed = true;
}

/* The answer of e is in its buffers: give e back to the kernel. */
static void commit(struct tq *q, struct tent *e)
{
	prep_cmd(q, e, TFS_URING_CMD_COMMIT_AND_FETCH);
	q->inuser--;
}

/* An answer made off the queue's thread (invariant 1). */
static void commit_remote(struct tq *q, struct tent *e)
{
	uint64_t one = 1;
	bool wake;

	pthread_mutex_lock(&q->lock);
	e->rnext = q->remote;
	q->remote = e;
	wake = q->sleeping;
	q->sleeping = false;
	pthread_mutex_unlock(&q->lock);
	if (wake && write(q->efd, &one, sizeof(one)) < 0)
		tfs_err("fuse io_uring queue %u: eventfd: %s", q->qid, strerror(errno));
}

static void run_pooled(void *arg)
{
	struct tent *e = arg;

	fuse_session_process_buf(e->q->t->se, &e->buf);
}

/* Answer e at once (a request libfuse was never shown). */
static void answer_err(struct tq *q, struct tent *e, int err)
{
	struct fuse_out_header oh = { .error = -err, .unique = e->commit_id,
				      .len = sizeof(oh) };

	memcpy(e->hdr->in_out, &oh, sizeof(oh));
	e->hdr->ring_ent_in_out.payload_sz = 0;
	commit(q, e);
}

/* A request arrived in e: rebuild it as /dev/fuse would have given it
 * (header, first argument, the rest) just before the payload, and run it. */
static void take(struct tq *q, struct tent *e)
{
	struct fuse_in_header *ih = (void *)e->hdr->in_out;
	uint32_t psz = e->hdr->ring_ent_in_out.payload_sz;
	size_t op;
	char *start;

	if (!__atomic_load_n(&q->t->carried_said, __ATOMIC_RELAXED) &&
	    !__atomic_exchange_n(&q->t->carried_said, true, __ATOMIC_RELAXED))
		tfs_info("fuse: requests on io_uring, %u queues of %u", q->t->nq, DEPTH);
	q->inuser++;
	e->commit_id = e->hdr->ring_ent_in_out.commit_id;
	e->opcode = ih->opcode;
	if (ih->len < sizeof(*ih) + (size_t)psz ||
	    (op = ih->len - sizeof(*ih) - psz) > TFS_URING_OP_IN_OUT_SZ ||
	    psz > q->t->payload) {
		tfs_err("fuse io_uring queue %u: a request of %u bytes with a payload of %u",
			q->qid, ih->len, psz);
		answer_err(q, e, EIO);
		return;
	}
	start = e->payload - sizeof(*ih) - op;
	memcpy(start + sizeof(*ih), e->hdr->op_in, op);
	memcpy(start, ih, sizeof(*ih));
	e->buf = (struct fuse_buf){ .mem = start, .size = ih->len };
	__atomic_store_n(&e->unique, ih->unique, __ATOMIC_RELEASE);
	__atomic_fetch_add(&q->requests, 1, __ATOMIC_RELAXED);
	switch (ih->opcode) {
	case FUSE_READ:
	case FUSE_WRITE:
	case FUSE_FSYNC:
		cur_ent = e;
		fuse_session_process_buf(q->t->se, &e->buf);	/* invariant 4 */
		cur_ent = NULL;
		break;
	default:
		__atomic_fetch_add(&q->pooled, 1, __ATOMIC_RELAXED);
		tfs_defer(q->t->pool, run_pooled, e);
	}
}

/* The kernel refused a registration, the first of this mount (invariant
 * 9): one line, and why, if the module no longer allows io_uring. */
static void refusal_say(struct tfs_transport *t, unsigned qid, int res)
{
	char why[256] = "";
	bool allowed = tfs_uring_allowed(why, sizeof(why));

	if (t->asked == TFS_URING_ON)
		tfs_err("fuse_uring=on: the kernel refused io_uring (queue %u: %s)%s%s; requests "
			"stay on /dev/fuse", qid, strerror(-res), allowed ? "" : ": ", why);
	else
		tfs_warn("fuse: the kernel refused io_uring (queue %u: %s)%s%s; fuse_uring=auto: "
			 "requests stay on /dev/fuse", qid, strerror(-res), allowed ? "" : ": ", why);
}

/* A completion of e's command: a request, or the end of e (an error, or a
 * request left to the kernel once stopping: invariant 5). */
static void ent_done(struct tq *q, struct tent *e, int res)
{
	struct tfs_transport *t = q->t;

	if (res >= 0 && !__atomic_load_n(&t->stopping, __ATOMIC_ACQUIRE)) {
		take(q, e);
		return;
	}
	q->live--;
	if (res < 0 && res != -ENOTCONN && res != -ECANCELED && res != -ECONNABORTED) {
		bool first = false;

		pthread_mutex_lock(&t->lock);
		if (t->active)
			snprintf(t->note, sizeof(t->note), "the kernel refused queue %u: %s",
				 q->qid, strerror(-res));
		t->active = false;
		if (e->cmd == TFS_URING_CMD_REGISTER && !t->refusal_said)
			first = t->refusal_said = true;
		pthread_mutex_unlock(&t->lock);
		if (e->cmd != TFS_URING_CMD_REGISTER)
			tfs_err("fuse io_uring queue %u: %s; requests stay on /dev/fuse", q->qid,
				strerror(-res));
		else if (first)
			refusal_say(t, q->qid, res);
		else
			tfs_debug("fuse io_uring queue %u: an entry refused too: %s", q->qid,
				  strerror(-res));
	}
}

/* Whether TIERFS_FAULT's uring_queue_fail names step (fault.c lists it;
 * tests only): that step of the queues' set-up then fails (ENOMEM, a
 * thread EAGAIN) instead of being made.  Returns true to fail it. */
static bool step_fails(const struct tfs_transport *t, const char *step)
{
	size_t n = strlen(step);

	return t->queue_fail && !strncmp(t->queue_fail, step, n) &&
	       (!t->queue_fail[n] || t->queue_fail[n] == ',');
}

/* A step of queue qid's set-up failed with rc: kept if it is the first
 * (invariant 10).  Returns rc. */
static int setup_failed(struct tfs_transport *t, unsigned qid, const char *step, int rc)
{
	pthread_mutex_lock(&t->lock);
	if (!t->setup_err) {
		t->setup_err = rc;
		snprintf(t->setup_why, sizeof(t->setup_why), "queue %u: %s", qid, step);
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

static void ring_init(struct tq *q)
{
	struct io_uring_params p;
	unsigned flags[] = {
		IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
			IORING_SETUP_TASKRUN_FLAG,
		IORING_SETUP_SQE128 | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
		IORING_SETUP_SQE128,
	};
	int rc = step_fails(q->t, "ring") ? -ENOMEM : -EINVAL;

	for (unsigned i = 0; i < sizeof(flags) / sizeof(flags[0]) && rc == -EINVAL; i++) {
		memset(&p, 0, sizeof(p));
		p.flags = flags[i];
		rc = io_uring_queue_init_params(3 * DEPTH, &q->ring, &p);
	}
	if (rc)
		setup_failed(q->t, q->qid, "io_uring_queue_init", rc);
	pthread_mutex_lock(&q->t->lock);
	q->t->ready++;
	pthread_cond_broadcast(&q->t->cond);
	while (!q->t->go)
		pthread_cond_wait(&q->t->cond, &q->t->lock);
	pthread_mutex_unlock(&q->t->lock);
}

static void *queue_main(void *arg)
{
	struct tq *q = arg;
	struct tfs_transport *t = q->t;

	/* not pinned to its CPU: on two CPUs the application and the queue
	 * serving it then share one, and the rate of 4 KiB hits at QD 32 is
	 * 0.63x the unpinned one (docs/PROFILE.md) */
	cur_q = q;
	ring_init(q);
	if (t->go < 0)
		return NULL;
	for (unsigned i = 0; i < DEPTH; i++)
		prep_cmd(q, &q->ents[i], TFS_URING_CMD_REGISTER);
	q->live = DEPTH;
	for (;;) {
		struct tent *remote;
		struct io_uring_cqe *cqe;
		unsigned head;

		pthread_mutex_lock(&q->lock);
		remote = q->remote;
		q->remote = NULL;
		if (!remote)
			q->sleeping = true;
		pthread_mutex_unlock(&q->lock);
		for (struct tent *e = remote, *next; e; e = next) {
			next = e->rnext;
			commit(q, e);
		}
		if (q->inuser == 0 && __atomic_load_n(&t->stopping, __ATOMIC_ACQUIRE) && !q->quiet) {
			pthread_mutex_lock(&t->lock);
			q->quiet = true;
			pthread_cond_broadcast(&t->cond);
			pthread_mutex_unlock(&t->lock);
		}
		if (q->inuser == 0 && (q->live == 0 || __atomic_load_n(&t->leaving,
								       __ATOMIC_ACQUIRE)))
			break;
		if (!q->armed)
			arm_event(q);
		io_uring_submit_and_wait(&q->ring, remote ? 0 : 1);
		pthread_mutex_lock(&q->lock);
		q->sleeping = false;
		pthread_mutex_unlock(&q->lock);
		io_uring_for_each_cqe(&q->ring, head, cqe) {
			uintptr_t ud = (uintptr_t)cqe->user_data;
			void *p = (void *)(ud & ~(uintptr_t)TAG_MASK);

			q->seen++;
			if ((ud & TAG_MASK) == TAG_EVENT) {
				q->armed = false;
			} else if ((ud & TAG_MASK) == TAG_HIT) {
				if (tfs_hit_job_done(p, cqe->res))
					tfs_transport_io(p);
			} else {
				ent_done(q, p, cqe->res);
			}
		}
		io_uring_cq_advance(&q->ring, q->seen);
		q->seen = 0;
	}
	io_uring_submit(&q->ring);	/* the last answers */
	pthread_mutex_lock(&t->lock);
	q->quiet = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

bool tfs_transport_on_queue(void)
{
	return cur_q != NULL;
}

bool tfs_transport_alone(void)
{
	struct tq *q = cur_q;

	if (!q || q->inuser > 1)
		return false;
	/* invariant 8: what was delivered but is not a completion yet */
	if (IO_URING_READ_ONCE(*q->ring.sq.kflags) & IORING_SQ_TASKRUN)
		io_uring_get_events(&q->ring);
	return io_uring_cq_ready(&q->ring) == q->seen;	/* none of the batch left */
}

void *tfs_transport_read_buf(size_t len)
{
	struct tent *e = cur_ent;

	return e && e->opcode == FUSE_READ && len <= e->q->t->payload ? e->payload : NULL;
}

bool tfs_transport_io(struct tfs_hit_job *j)
{
	struct tq *q = cur_q;
	struct io_uring_sqe *sqe;

	if (!q)
		return false;
	sqe = sqe_get(q);
	tfs_hit_job_prep(sqe, j);
	io_uring_sqe_set_data64(sqe, (uintptr_t)j | TAG_HIT);
	if (!j->done)
		__atomic_fetch_add(j->write ? &q->writes : &q->reads, 1, __ATOMIC_RELAXED);
	return true;
}

static struct tent *find(struct tfs_transport *t, uint64_t unique)
{
	for (unsigned i = 0; i < t->nq; i++)
		for (unsigned k = 0; k < DEPTH; k++)
			if (__atomic_load_n(&t->q[i].ents[k].unique, __ATOMIC_ACQUIRE) == unique)
				return &t->q[i].ents[k];
	return NULL;
}

/* Invariant 6: an answer to an open that made the file's I/O direct
 * lets its direct writes run in parallel.  The open_out is the answer's
 * last 16 bytes (after the entry_out of a CREATE). */
static void open_answer(struct tfs_transport *t, struct iovec *iov, int count)
{
	struct fuse_open_out *oo;

	if (count < 2 || iov[count - 1].iov_len < sizeof(*oo) ||
	    t->minor < TFS_MINOR_PARALLEL_DIRECT_WRITES)
		return;
	oo = (void *)((char *)iov[count - 1].iov_base + iov[count - 1].iov_len - sizeof(*oo));
	if (oo->open_flags & FOPEN_DIRECT_IO) {
		oo->open_flags |= TFS_FOPEN_PARALLEL_DIRECT_WRITES;
		__atomic_fetch_add(&t->parallel, 1, __ATOMIC_RELAXED);
	}
}

static bool is_open(uint32_t opcode)
{
	return opcode == FUSE_OPEN || opcode == FUSE_CREATE;
}

/* A /dev/fuse request: note it if an open (invariant 6). */
static void opens_note(struct tfs_transport *t, uint64_t unique)
{
	pthread_mutex_lock(&t->opens_lock);
	for (unsigned i = 0; i < sizeof(t->opens) / sizeof(t->opens[0]); i++)
		if (!t->opens[i]) {
			t->opens[i] = unique;
			break;
		}
	pthread_mutex_unlock(&t->opens_lock);
}

/* Whether unique is a /dev/fuse open's, forgetting it. */
static bool opens_take(struct tfs_transport *t, uint64_t unique)
{
	bool found = false;

	pthread_mutex_lock(&t->opens_lock);
	for (unsigned i = 0; i < sizeof(t->opens) / sizeof(t->opens[0]) && !found; i++)
		if (t->opens[i] == unique) {
			t->opens[i] = 0;
			found = true;
		}
	pthread_mutex_unlock(&t->opens_lock);
	return found;
}

/* libfuse's answer to a request a queue carried: into the entry. */
static ssize_t ring_answer(struct tfs_transport *t, struct tent *e, struct iovec *iov, int count)
{
	struct fuse_out_header *oh = iov[0].iov_base;
	size_t n = 0;

	if (is_open(e->opcode) && oh->error == 0)
		open_answer(t, iov, count);
	for (int i = 1; i < count; i++) {
		if (n + iov[i].iov_len > t->payload) {
			oh->error = -EIO;
			n = 0;
			tfs_err("fuse io_uring: an answer larger than the payload (%zu bytes)",
				t->payload);
			break;
		}
		if (iov[i].iov_base != e->payload + n)
			memmove(e->payload + n, iov[i].iov_base, iov[i].iov_len);
		n += iov[i].iov_len;
	}
	memcpy(e->hdr->in_out, oh, sizeof(*oh));
	e->hdr->ring_ent_in_out.payload_sz = (uint32_t)n;
	__atomic_store_n(&e->unique, 0, __ATOMIC_RELEASE);
	if (cur_q == e->q)
		commit(e->q, e);
	else
		commit_remote(e->q, e);
	return (ssize_t)(sizeof(*oh) + n);
}

static void queues_free(struct tfs_transport *t)
{
	for (unsigned i = 0; i < t->nq; i++) {
		struct tq *q = &t->q[i];

		for (unsigned k = 0; k < DEPTH; k++)
			if (q->ents[k].base)
				munmap(q->ents[k].base, PRE + t->payload);
		if (q->efd >= 0)
			close(q->efd);
		pthread_mutex_destroy(&q->lock);
	}
	free(t->q);
	t->q = NULL;
	t->nq = 0;
}

/* Make every queue (memory, eventfd, thread, ring) before io_uring is
 * asked for (invariant 3).  Returns 0 or -errno; on failure nothing is
 * left. */
static int queues_make(struct tfs_transport *t, size_t payload)
{
	unsigned nq = possible_cpus(), started = 0;
	int rc = 0;

	t->setup_err = 0;
	t->setup_why[0] = 0;
	t->q = calloc(nq, sizeof(*t->q));
	if (!t->q) {
		snprintf(t->setup_why, sizeof(t->setup_why), "the queues' table");
		return -ENOMEM;
	}
	t->nq = nq;
	t->payload = payload;
	t->ready = 0;
	t->go = 0;
	for (unsigned i = 0; i < nq; i++) {	/* what queues_free undoes, for all */
		t->q[i].t = t;
		t->q[i].qid = i;
		t->q[i].efd = -1;	/* not fd 0, which a failure would close */
		pthread_mutex_init(&t->q[i].lock, NULL);
	}
	for (unsigned i = 0; i < nq && !rc; i++) {
		struct tq *q = &t->q[i];

		q->efd = step_fails(t, "eventfd") ? (errno = ENOMEM, -1) : eventfd(0, EFD_CLOEXEC);
		if (q->efd < 0)
			rc = setup_failed(t, i, "eventfd", -errno);
		for (unsigned k = 0; k < DEPTH && !rc; k++) {
			struct tent *e = &q->ents[k];
			void *m = step_fails(t, "mmap") ? (errno = ENOMEM, MAP_FAILED) :
				  mmap(NULL, PRE + payload, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

			if (m == MAP_FAILED) {
				rc = setup_failed(t, i, "an entry's mmap", -errno);
				break;
			}
			e->q = q;
			e->base = m;
			e->hdr = m;
			e->payload = e->base + PRE;
			e->iov[0] = (struct iovec){ e->hdr, sizeof(*e->hdr) };
			e->iov[1] = (struct iovec){ e->payload, payload };
		}
	}
	for (unsigned i = 0; i < nq && !rc; i++) {
		rc = step_fails(t, "thread") ? -EAGAIN
					     : -pthread_create(&t->q[i].tid, NULL, queue_main, &t->q[i]);
		if (rc)		/* not started: no report to wait for */
			setup_failed(t, i, "pthread_create", rc);
		else
			started++;
	}
	pthread_mutex_lock(&t->lock);
	while (t->ready < started)
		pthread_cond_wait(&t->cond, &t->lock);
	if (!rc)
		rc = t->setup_err;
	if (rc)
		t->go = -1;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
	if (rc) {
		for (unsigned i = 0; i < started; i++) {
			pthread_join(t->q[i].tid, NULL);
			if (t->q[i].ring.ring_fd > 0)
				io_uring_queue_exit(&t->q[i].ring);
		}
		queues_free(t);
	}
	return rc;
}

/* libfuse's INIT answer: ask for io_uring in it when the kernel offered it
 * and the queues are ready (invariant 3). */
static ssize_t init_answer(struct tfs_transport *t, int fd, struct iovec *iov, int count)
{
	struct fuse_out_header *oh = iov[0].iov_base;
	char body[256];
	struct tfs_init_out *o = (void *)body;
	struct iovec out[2] = { iov[0], { body, 0 } };
	long page = sysconf(_SC_PAGESIZE);
	size_t payload;
	ssize_t n;
	int rc;

	t->init_unique = 0;
	if (t->mode == TFS_URING_OFF || oh->error || count != 2 || iov[1].iov_len > sizeof(body) ||
	    iov[1].iov_len < sizeof(*o))
		return writev(fd, iov, count);
	if (!t->offered) {
		snprintf(t->note, sizeof(t->note), "the kernel did not offer io_uring at INIT");
		if (t->mode == TFS_URING_ON)
			tfs_err("fuse_uring=on: %s; requests stay on /dev/fuse", t->note);
		return writev(fd, iov, count);
	}
	memcpy(body, iov[1].iov_base, iov[1].iov_len);
	out[1].iov_len = iov[1].iov_len;
	/* the kernel's largest request (fuse_uring_create): FUSE_MIN_READ_BUFFER,
	 * max_write, max_pages (32 when not negotiated) */
	payload = 8192;
	if (o->max_write > payload)
		payload = o->max_write;
	if ((size_t)(o->max_pages ? o->max_pages : 32) * (size_t)page > payload)
		payload = (size_t)(o->max_pages ? o->max_pages : 32) * (size_t)page;
	payload = (payload + (size_t)page - 1) / (size_t)page * (size_t)page;
	rc = queues_make(t, payload);
	if (rc) {
		snprintf(t->note, sizeof(t->note), "io_uring queues could not be made (%s: %s)",
			 t->setup_why, strerror(-rc));
		if (t->asked == TFS_URING_ON)	/* invariant 10 */
			tfs_err("fuse_uring=on: %s; requests stay on /dev/fuse", t->note);
		else
			tfs_warn("fuse: %s; fuse_uring=auto: requests stay on /dev/fuse", t->note);
		return writev(fd, iov, count);
	}
	o->flags |= FUSE_INIT_EXT;
	o->flags2 |= TFS_FUSE_OVER_IO_URING_BIT2;
	if (t->init_delay_ms > 0) {
		tfs_warn("fault: the INIT answer asking for io_uring waits %ld ms "
			 "(uring_init_delay)", t->init_delay_ms);
		usleep((useconds_t)t->init_delay_ms * 1000);
	}
	n = writev(fd, out, 2);
	pthread_mutex_lock(&t->lock);
	t->go = n < 0 ? -1 : 1;
	t->active = n >= 0;
	t->note[0] = 0;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
	if (n >= 0)
		tfs_debug("fuse: io_uring asked for, %u queues of %u", t->nq, DEPTH);
	return n;
}

static ssize_t t_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct tfs_transport *t = ((struct tfs_fs *)userdata)->transport;
	struct fuse_out_header *oh = iov[0].iov_base;
	struct tent *e;

	if (oh->unique && t->nq && (e = find(t, oh->unique)))
		return ring_answer(t, e, iov, count);
	if (oh->unique && oh->unique == t->init_unique)
		return init_answer(t, fd, iov, count);
	if (oh->unique && opens_take(t, oh->unique) && oh->error == 0)
		open_answer(t, iov, count);
	return writev(fd, iov, count);
}

static ssize_t t_read(int fd, void *buf, size_t len, void *userdata)
{
	struct tfs_transport *t = ((struct tfs_fs *)userdata)->transport;
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *ih = buf;

	if (n < (ssize_t)sizeof(*ih))
		return n;
	if (is_open(ih->opcode))
		opens_note(t, ih->unique);
	if (n >= (ssize_t)(sizeof(*ih) + sizeof(struct fuse_init_in)) && ih->opcode == FUSE_INIT) {
		const struct fuse_init_in *in = (const void *)(ih + 1);

		t->offered = (in->flags & FUSE_INIT_EXT) &&
			     (in->flags2 & TFS_FUSE_OVER_IO_URING_BIT2);
		t->minor = in->minor;
		t->init_unique = ih->unique;
	}
	return n;
}

struct tfs_transport *tfs_transport_attach(struct fuse_session *se, enum tfs_uring_mode mode,
					   bool tier, struct tfs_defer *pool)
{
	static const struct fuse_custom_io io = { .writev = t_writev, .read = t_read };
	struct tfs_transport *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	/* TIERFS_FAULT's uring_init_delay=MS (fault.c lists it; tests only):
	 * the INIT answer that asks for io_uring waits MS ms before it is
	 * written, after the module's enable_uring was read */
	t->init_delay_ms = tfs_spec_ms(getenv("TIERFS_FAULT"), "uring_init_delay");
	/* TIERFS_FAULT's uring_queue_fail=STEP (ring, eventfd, mmap or
	 * thread; tests only): that step of the queues' set-up fails */
	t->queue_fail = tfs_spec_value(getenv("TIERFS_FAULT"), "uring_queue_fail");
	t->se = se;
	t->fd = fuse_session_fd(se);
	t->asked = t->mode = mode;
	t->pool = pool;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	pthread_mutex_init(&t->opens_lock, NULL);
	if (mode == TFS_URING_OFF) {
		snprintf(t->note, sizeof(t->note), "fuse_uring=off");
	} else if (!tfs_uring_allowed(t->note, sizeof(t->note))) {
		t->mode = TFS_URING_OFF;
	} else if (mode == TFS_URING_AUTO && !tier) {
		/* invariant 7 */
		snprintf(t->note, sizeof(t->note), "auto: no SSD tier (an uncached array's "
			 "requests all wait for the members, on the pool)");
		t->mode = TFS_URING_OFF;
	}
	if (fuse_session_custom_io(se, &io, t->fd)) {
		free(t);
		return NULL;
	}
	return t;
}

static void wake_all(struct tfs_transport *t)
{
	uint64_t one = 1;

	for (unsigned i = 0; i < t->nq; i++)
		if (write(t->q[i].efd, &one, sizeof(one)) < 0)
			tfs_err("fuse io_uring queue %u: eventfd: %s", i, strerror(errno));
}

void tfs_transport_stop(struct tfs_transport *t)
{
	if (!t || __atomic_exchange_n(&t->stopping, true, __ATOMIC_ACQ_REL))
		return;
	wake_all(t);
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->nq; i++)
		while (!t->q[i].quiet)
			pthread_cond_wait(&t->cond, &t->lock);
	t->active = false;
	snprintf(t->note, sizeof(t->note), "stopped");
	pthread_mutex_unlock(&t->lock);
}

void tfs_transport_free(struct tfs_transport *t)
{
	if (!t)
		return;
	tfs_transport_stop(t);
	/* the connection is gone (the session was unmounted): the kernel has
	 * ended what the queues held, so no request meets a ring that closes */
	__atomic_store_n(&t->leaving, true, __ATOMIC_RELEASE);
	wake_all(t);
	for (unsigned i = 0; i < t->nq; i++) {
		pthread_join(t->q[i].tid, NULL);
		io_uring_queue_exit(&t->q[i].ring);
	}
	queues_free(t);
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->opens_lock);
	free(t);
}

int tfs_transport_stats(struct tfs_transport *t, char *out, size_t cap)
{
	static const char *modes[] = { "off", "auto", "on" };
	uint64_t req = 0, pooled = 0, reads = 0, writes = 0;
	bool active;
	char note[sizeof(t->note)];

	if (!t)
		return 0;
	for (unsigned i = 0; i < t->nq; i++) {
		req += __atomic_load_n(&t->q[i].requests, __ATOMIC_RELAXED);
		pooled += __atomic_load_n(&t->q[i].pooled, __ATOMIC_RELAXED);
		reads += __atomic_load_n(&t->q[i].reads, __ATOMIC_RELAXED);
		writes += __atomic_load_n(&t->q[i].writes, __ATOMIC_RELAXED);
	}
	pthread_mutex_lock(&t->lock);
	active = t->active;
	memcpy(note, t->note, sizeof(note));
	pthread_mutex_unlock(&t->lock);
	return snprintf(out, cap, "fuse.transport=%s\nfuse.uring=%s\nfuse.uring_note=%s\n"
			"fuse.queues=%u\nfuse.queue_depth=%u\nfuse.ring_requests=%" PRIu64
			"\nfuse.ring_pooled=%" PRIu64 "\nfuse.ring_reads=%" PRIu64
			"\nfuse.ring_writes=%" PRIu64 "\nfuse.parallel_write_opens=%" PRIu64 "\n",
			active ? "io_uring" : "dev_fuse", modes[t->asked], note,
			active ? t->nq : 0, active ? DEPTH : 0, req, pooled, reads, writes,
			__atomic_load_n(&t->parallel, __ATOMIC_RELAXED));
}
