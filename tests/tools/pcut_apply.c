/* pcut_apply: make one crash state from a power-cut dump (powercut.c).
 *
 *   pcut_apply DUMP FROM TO KEEP SEED
 *
 * The dump lists every change the daemon had not synced when it was cut;
 * FROM is the directory its paths start with, TO a copy of it taken after
 * the daemon died.  Each unsynced 4 KiB block of the copy is put back to
 * its pre-image unless the draw (SEED) keeps it, with probability KEEP.
 * Prints the number of blocks lost; exit 0, or 1 with a one-line error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/powercut.h"

int main(int argc, char **argv)
{
	long lost;

	if (argc != 6) {
		fprintf(stderr, "usage: pcut_apply DUMP FROM TO KEEP SEED\n");
		return 1;
	}
	lost = tfs_pcut_apply_dump(argv[1], argv[2], argv[3], strtod(argv[4], NULL),
				   strtoull(argv[5], NULL, 0));
	if (lost < 0) {
		fprintf(stderr, "pcut_apply: %s: %s\n", argv[1], strerror((int)-lost));
		return 1;
	}
	printf("%ld\n", lost);
	return 0;
}
