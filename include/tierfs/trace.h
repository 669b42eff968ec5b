/* The trace file the SSD tier's recorder writes (src/cache/trace.c; the
 * root's user.tierfs.trace, tierctl trace; docs/DESIGN.md §10.7): a
 * header, then one fixed-size record per request the tier saw, little
 * endian as the machine that wrote it, in time order within blocks (a
 * reader sorts by t_ns).  A reader skips an op it does not know (cuts
 * came after the first traces). */
#ifndef TIERFS_TRACE_H
#define TIERFS_TRACE_H

#include <stdint.h>

#define TFS_TRACE_MAGIC 0x3130435254534654ull	/* "TFSTRC01" */

struct tfs_trace_hdr {
	uint64_t magic;
	uint32_t version;	/* 1 */
	uint32_t rec_size;	/* sizeof(struct tfs_trace_rec): 32 */
};

enum tfs_trace_op {
	TFS_TR_READ = 'R',
	TFS_TR_WRITE = 'W',
	TFS_TR_FSYNC = 'S',
	TFS_TR_FDATASYNC = 'D',
	TFS_TR_CUT = 'C',	/* [off, off+len) of the file is gone (a punch or zero
				 * range; TFS_TR_TO_END: a truncate to off, or off 0
				 * an unlink): the tier drops it (cut.c) */
};

#define TFS_TR_DIRECT 1		/* the request was O_DIRECT */
#define TFS_TR_HIT 2		/* the tier served all of it from extents it held */
#define TFS_TR_TO_END 4		/* a cut to the file's end (len 0) */
#define TFS_TR_AROUND 8		/* a write of which some went to the RAID, not
				 * into the tier (past the cutoff, at dirty_high,
				 * no slot, write-around) */

struct tfs_trace_rec {
	uint64_t t_ns;		/* since the trace started (CLOCK_MONOTONIC) */
	uint64_t fid;		/* the file's identity (stable across renames, remounts) */
	uint64_t off;		/* bytes (0 for a sync) */
	uint32_t len;		/* bytes (0 for a sync) */
	uint8_t op;		/* enum tfs_trace_op */
	uint8_t flags;		/* TFS_TR_* */
	uint16_t pad;		/* 0 */
};

#endif
