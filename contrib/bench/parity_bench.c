/* parity_bench: throughput of the RAID5/6 parity kernels (src/raid/parity.c).
 *
 * For ndata 3 and 8 and blocks of 4K, 64K and 1M, times generating P,
 * generating P and Q, rebuilding one data block (from P) and rebuilding
 * two data blocks (from P and Q), and prints MB/s of data processed:
 * ndata * block size per stripe, 10^6 bytes a MB, best of 5 rounds.
 * One thread.
 *
 * usage: parity_bench [-t SECONDS] [-k KERNELS|all]
 *   -t  time per measurement, all rounds (default 0.5)
 *   -k  kernel set (generic, ssse3, avx2, gfni) or all; default: the one
 *       the library picks for this CPU
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tierfs/parity.h"

enum { OP_P, OP_PQ, OP_REC1, OP_REC2, OP_COUNT };

static const char *const op_name[OP_COUNT] = {
	[OP_P] = "gen P", [OP_PQ] = "gen P+Q", [OP_REC1] = "rec 1 data",
	[OP_REC2] = "rec 2 data",
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void run_op(int op, void **b, unsigned nd, size_t len)
{
	static const unsigned miss[2] = { 0, 1 };

	switch (op) {
	case OP_P: tfs_parity_gen(b, nd, 1, len); break;
	case OP_PQ: tfs_parity_gen(b, nd, 2, len); break;
	case OP_REC1: tfs_parity_recover(b, nd, 2, miss, 1, len); break;
	case OP_REC2: tfs_parity_recover(b, nd, 2, miss, 2, len); break;
	}
}

/* MB/s of data for one op on one stripe of nd data blocks of len bytes:
 * the best of ROUNDS rounds of secs / ROUNDS each (the machine may be
 * shared; the best round is the one least disturbed). */
#define ROUNDS 5

static double measure(int op, void **b, unsigned nd, size_t len, double secs)
{
	double best = 0;

	for (int r = 0; r < ROUNDS; r++) {
		unsigned long iters = 0, batch = 1;
		double t0 = now(), t;

		for (;;) {
			for (unsigned long i = 0; i < batch; i++)
				run_op(op, b, nd, len);
			iters += batch;
			t = now() - t0;
			if (t >= secs / ROUNDS)
				break;
			if (t < secs / ROUNDS / 8)
				batch *= 2;
		}
		if ((double)iters * nd * len / t / 1e6 > best)
			best = (double)iters * nd * len / t / 1e6;
	}
	return best;
}

static int bench(const char *kernels, double secs)
{
	static const unsigned nds[] = { 3, 8 };
	static const size_t lens[] = { 4096, 65536, 1u << 20 };
	void *b[10];

	if (kernels) {
		int rc = tfs_parity_use(kernels);

		if (rc == -ENOTSUP) {
			printf("kernels %s: not on this CPU\n\n", kernels);
			return 0;
		}
		if (rc) {
			fprintf(stderr, "parity_bench: unknown kernel set '%s'\n", kernels);
			return 1;
		}
	}
	printf("kernels %s, MB/s of data (ndata x block per stripe)\n", tfs_parity_impl());
	printf("%5s %6s", "ndata", "block");
	for (int op = 0; op < OP_COUNT; op++)
		printf(" %11s", op_name[op]);
	putchar('\n');
	for (size_t ni = 0; ni < sizeof(nds) / sizeof(nds[0]); ni++)
		for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
			unsigned nd = nds[ni];
			size_t len = lens[li];

			for (unsigned i = 0; i < nd + 2; i++) {
				if (posix_memalign(&b[i], 64, len)) {
					perror("posix_memalign");
					return 1;
				}
				for (size_t k = 0; k < len; k++)
					((unsigned char *)b[i])[k] = (unsigned char)(k * 131 + i * 7 + (k >> 9));
			}
			tfs_parity_gen(b, nd, 2, len);
			printf("%5u %5zuK", nd, len >> 10);
			for (int op = 0; op < OP_COUNT; op++)
				printf(" %11.0f", measure(op, b, nd, len, secs));
			putchar('\n');
			fflush(stdout);
			for (unsigned i = 0; i < nd + 2; i++)
				free(b[i]);
		}
	putchar('\n');
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const all[] = { "generic", "ssse3", "avx2", "gfni" };
	const char *kernels = NULL;
	double secs = 0.5;
	int c, rc = 0;

	while ((c = getopt(argc, argv, "t:k:h")) != -1) {
		switch (c) {
		case 't': secs = atof(optarg); break;
		case 'k': kernels = optarg; break;
		default:
			fprintf(stderr, "usage: parity_bench [-t SECONDS] [-k generic|ssse3|avx2|gfni|all]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (secs <= 0)
		secs = 0.5;
	if (kernels && strcmp(kernels, "all") == 0) {
		for (size_t i = 0; i < sizeof(all) / sizeof(all[0]) && !rc; i++)
			rc = bench(all[i], secs);
		return rc;
	}
	return bench(kernels, secs);
}
