/* test_journal: the array journal (src/meta/meta.c) on a full filesystem: every commit that does not fit fails with ENOSPC (never a SIGBUS), what was committed stays, and commits work again once space is freed; opening on a full filesystem is an error too.  Runs on its own small tmpfs in a private mount namespace (root only; 77 otherwise). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tierfs/meta.h"
#include "unit.h"

enum { G_FILL, G_KEPT, G_FREED, G_REOPEN, G_OPENFULL, G_GROUP, G_RETIRE, G_COUNT };

static struct unit_group groups[G_COUNT] = {
	[G_FILL] = { .name = "commits on a full fs: ENOSPC, no signal" },
	[G_KEPT] = { .name = "committed records stay" },
	[G_FREED] = { .name = "commits work again once space is freed" },
	[G_REOPEN] = { .name = "reopen keeps everything" },
	[G_OPENFULL] = { .name = "open on a full fs: an error, no signal" },
	[G_GROUP] = { .name = "group commit: every caller's record, fewer commits, adds synced" },
	[G_RETIRE] = { .name = "a finished change's retirement costs an fsync no commit" },
};

static char root[64];

/* Write zeros to path until the filesystem is full. */
static void fill(const char *path)
{
	static char buf[4096];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	while (fd >= 0 && write(fd, buf, sizeof(buf)) > 0)
		;
	if (fd >= 0)
		close(fd);
}

static int counted;

/* every record is 8 KiB of 0x5a */
static int count_cb(void *arg, uint64_t seq, const void *rec, size_t len)
{
	const unsigned char *p = rec;

	counted++;
	for (size_t i = 0; i < len; i++)
		if (p[i] != 0x5a)
			return -EBADMSG;
	return len == 8192 ? 0 : -EBADMSG;
}

static void journal(void)
{
	char d0[96], d1[96], filler[96], fresh[96];
	const char *dirs[2] = { d0, d1 };
	const uint32_t tags[2] = { 0, 1 };
	static unsigned char rec[8192];
	uint64_t seq, n = 0, count;
	struct tfs_meta *mt;
	int rc = 0;

	snprintf(d0, sizeof(d0), "%s/j0", root);
	snprintf(d1, sizeof(d1), "%s/j1", root);
	snprintf(filler, sizeof(filler), "%s/filler", root);
	snprintf(fresh, sizeof(fresh), "%s/fresh", root);
	snprintf(ctx, sizeof(ctx), "two copies on one 2 MiB tmpfs");
	rc = tfs_meta_open(dirs, tags, 2, &mt);
	CHECK(G_FILL, rc == 0, "open: %s", strerror(-rc));
	if (rc)
		return;
	memset(rec, 0x5a, sizeof(rec));
	fill(filler);
	/* records that stay make the journal grow past any room it kept */
	for (int i = 0; i < 4096; i++) {
		rc = tfs_meta_intent_add(mt, rec, sizeof(rec), &seq);
		if (rc)
			break;
		n++;
	}
	CHECK(G_FILL, rc == -ENOSPC, "intent add on a full fs: %s after %" PRIu64 " records",
	      strerror(-rc), n);
	rc = tfs_meta_set_put(mt, TFS_SET_MARK, 1, 2);
	CHECK(G_FILL, rc == 0 || rc == -ENOSPC, "mark put: %s", strerror(-rc));
	rc = tfs_meta_sync(mt);
	CHECK(G_FILL, rc == 0, "sync: %s", strerror(-rc));
	counted = 0;
	rc = tfs_meta_intent_foreach(mt, count_cb, NULL);
	/* the refused add may be in the first copy (invariant 1) */
	CHECK(G_KEPT, rc == 0 && ((uint64_t)counted == n || (uint64_t)counted == n + 1),
	      "%d records read back (%s), %" PRIu64 " committed", counted, strerror(-rc), n);
	CHECK(G_KEPT, n > 8, "only %" PRIu64 " records before the fs was full", n);
	unlink(filler);
	rc = tfs_meta_intent_add(mt, rec, sizeof(rec), &seq);
	CHECK(G_FREED, rc == 0, "intent add after freeing space: %s", strerror(-rc));
	if (rc == 0) {
		rc = tfs_meta_intent_del(mt, seq);
		CHECK(G_FREED, rc == 0, "intent del: %s", strerror(-rc));
	}
	rc = tfs_meta_set_put(mt, TFS_SET_MARK, 3, 4);
	CHECK(G_FREED, rc == 0, "mark put after freeing space: %s", strerror(-rc));
	tfs_meta_close(mt);
	rc = tfs_meta_open(dirs, tags, 2, &mt);
	CHECK(G_REOPEN, rc == 0, "reopen: %s", strerror(-rc));
	if (rc == 0) {
		counted = 0;
		rc = tfs_meta_intent_foreach(mt, count_cb, NULL);
		/* the refused add went with the next intent transaction */
		CHECK(G_REOPEN, rc == 0 && (uint64_t)counted == n, "%d records after reopen (%s), "
		      "%" PRIu64 " committed", counted, strerror(-rc), n);
		rc = tfs_meta_set_count(mt, TFS_SET_MARK, &count);
		CHECK(G_REOPEN, rc == 0 && count >= 1, "%" PRIu64 " marks after reopen", count);
		tfs_meta_close(mt);
	}
	/* a journal made on a filesystem that is already full */
	fill(filler);
	{
		const char *fd1[1] = { fresh };

		rc = tfs_meta_open(fd1, tags, 1, &mt);
		CHECK(G_OPENFULL, rc == -ENOSPC, "open: %s", rc ? strerror(-rc) : "worked");
		if (rc == 0)
			tfs_meta_close(mt);
	}
	unlink(filler);
}

#define GROUP_THREADS 8
#define GROUP_PUTS 100

struct putter {
	struct tfs_meta *mt;
	unsigned id;
	int rc;
};

static void *putter_main(void *arg)
{
	struct putter *p = arg;

	for (unsigned i = 0; i < GROUP_PUTS && p->rc == 0; i++)
		p->rc = tfs_meta_set_put(p->mt, TFS_SET_CDIRTY, p->id * GROUP_PUTS + i, 0);
	return NULL;
}

/* An intent adder beside the putters: each add must return synced
 * (meta.c invariant 2), whichever caller's group committed it; synced
 * counts the adds that did. */
struct adder {
	struct tfs_meta *mt;
	unsigned adds, synced;
	int rc;
};

static void *adder_main(void *arg)
{
	static const char rec[] = "change";
	struct adder *a = arg;

	for (unsigned i = 0; i < GROUP_PUTS && a->rc == 0; i++) {
		/* only this thread syncs: a sync covering the add is its own */
		uint64_t gen0 = tfs_meta_gen(a->mt), seq;

		a->rc = tfs_meta_intent_add(a->mt, rec, sizeof(rec), &seq);
		a->adds++;
		a->synced += a->rc == 0 && tfs_meta_synced(a->mt, gen0 + 1);
	}
	return NULL;
}

/* meta.c invariant 8: concurrent callers share commits, and each returns
 * with its own record committed; an intent's add returns synced even in a
 * group another caller led (invariant 2).  On the disk under /var/tmp (a
 * commit waits for a real fdatasync, as on the members), two copies. */
static void group(void)
{
	char base[] = "/var/tmp/tfs-group-XXXXXX", d0[64], d1[64];
	const char *dirs[2] = { d0, d1 };
	const uint32_t tags[2] = { 0, 1 };
	struct putter p[GROUP_THREADS];
	pthread_t th[GROUP_THREADS], ath;
	struct adder a;
	struct tfs_meta *mt;
	uint64_t gen0, count = 0;
	int rc;

	snprintf(ctx, sizeof(ctx), "%d threads x %d set puts and one of %d intent adds, two copies",
		 GROUP_THREADS, GROUP_PUTS, GROUP_PUTS);
	if (!mkdtemp(base)) {
		CHECK(G_GROUP, 0, "mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(d0, sizeof(d0), "%s/j0", base);
	snprintf(d1, sizeof(d1), "%s/j1", base);
	rc = tfs_meta_open(dirs, tags, 2, &mt);
	CHECK(G_GROUP, rc == 0, "open: %s", strerror(-rc));
	if (rc)
		return;
	gen0 = tfs_meta_gen(mt);
	for (unsigned i = 0; i < GROUP_THREADS; i++) {
		p[i] = (struct putter){ mt, i, 0 };
		pthread_create(&th[i], NULL, putter_main, &p[i]);
	}
	a = (struct adder){ mt, 0, 0, 0 };
	pthread_create(&ath, NULL, adder_main, &a);
	for (unsigned i = 0; i < GROUP_THREADS; i++) {
		pthread_join(th[i], NULL);
		CHECK(G_GROUP, p[i].rc == 0, "thread %u: %s", i, strerror(-p[i].rc));
	}
	pthread_join(ath, NULL);
	CHECK(G_GROUP, a.rc == 0, "intent add: %s", strerror(-a.rc));
	CHECK(G_GROUP, a.synced == a.adds, "%u of %u intent adds returned unsynced",
	      a.adds - a.synced, a.adds);
	rc = tfs_meta_set_count(mt, TFS_SET_CDIRTY, &count);
	CHECK(G_GROUP, rc == 0 && count == GROUP_THREADS * GROUP_PUTS,
	      "%" PRIu64 " records, not %d", count, GROUP_THREADS * GROUP_PUTS);
	CHECK(G_GROUP, tfs_meta_gen(mt) - gen0 < (GROUP_THREADS + 1) * GROUP_PUTS,
	      "%" PRIu64 " commits for %d puts and adds: none grouped", tfs_meta_gen(mt) - gen0,
	      (GROUP_THREADS + 1) * GROUP_PUTS);
	printf("group commit: %d puts from %d threads and %d intent adds in %" PRIu64
	       " commits\n", GROUP_THREADS * GROUP_PUTS, GROUP_THREADS, GROUP_PUTS,
	       tfs_meta_gen(mt) - gen0);
	tfs_meta_close(mt);
	snprintf(ctx, sizeof(ctx), "rm -rf %s", base);
	if (system(ctx) != 0)
		printf("could not remove %s\n", base);
}

/* meta.c invariant 7: an intent retired as finished waits for the next
 * write transaction; tfs_meta_sync_to (every fsync) neither commits nor
 * syncs for it, and the next transaction deletes it. */
static void retire(void)
{
	static const char rec[] = "finished";
	const char *dirs[2] = { "r0", "r1" };
	const uint32_t tags[2] = { 0, 1 };
	uint64_t seq, gen, count = 0;
	struct tfs_meta *mt;
	int rc;

	/* the copies beside the full-filesystem test's, on the same tmpfs */
	snprintf(ctx, sizeof(ctx), "two copies, one intent added and retired");
	rc = chdir(root) ? -errno : tfs_meta_open(dirs, tags, 2, &mt);
	CHECK(G_RETIRE, rc == 0, "open in %s: %s", root, strerror(-rc));
	if (rc)
		return;
	rc = tfs_meta_intent_add(mt, rec, sizeof(rec), &seq);
	CHECK(G_RETIRE, rc == 0, "intent add: %s", strerror(-rc));
	rc = tfs_meta_sync(mt);
	CHECK(G_RETIRE, rc == 0, "sync: %s", strerror(-rc));
	tfs_meta_intent_retire(mt, seq);
	gen = tfs_meta_gen(mt);
	rc = tfs_meta_sync_to(mt, gen);
	CHECK(G_RETIRE, rc == 0 && tfs_meta_gen(mt) == gen,
	      "sync_to: %s, %" PRIu64 " commit(s) for a retirement", strerror(-rc),
	      tfs_meta_gen(mt) - gen);
	rc = tfs_meta_set_put(mt, TFS_SET_MARK, 5, 6);
	CHECK(G_RETIRE, rc == 0, "mark put: %s", strerror(-rc));
	rc = tfs_meta_intent_count(mt, &count);
	CHECK(G_RETIRE, rc == 0 && count == 0, "%" PRIu64 " intent(s) after the next "
	      "transaction (%s)", count, strerror(-rc));
	tfs_meta_close(mt);
}

int main(void)
{
	if (geteuid() != 0 || unshare(CLONE_NEWNS) ||
	    mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		printf("SKIP: needs root for a private tmpfs\n");
		return 77;
	}
	snprintf(root, sizeof(root), "/tmp/tfs-journal-XXXXXX");
	/* the mount lives in this process's namespace: it goes with it */
	if (!mkdtemp(root) || mount("tmpfs", root, "tmpfs", 0, "size=2m")) {
		perror(root);
		return 1;
	}
	journal();
	retire();
	group();
	umount(root);
	rmdir(root);
	return unit_summary(groups, G_COUNT) ? 1 : 0;
}
