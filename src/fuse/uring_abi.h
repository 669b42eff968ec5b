/* uring_abi.h - the kernel's FUSE-over-io_uring interface (FUSE ABI 7.42,
 * Linux 6.14 and later), for the build machines whose <linux/fuse.h> is
 * older (Debian 12 ships 6.1's, 7.37).  Layouts are the kernel's: checked
 * by the static assertions below, never changed here.
 *
 * Protocol (Documentation/filesystems/fuse/fuse-io-uring.rst):
 *  - the daemon answers FUSE_INIT with FUSE_OVER_IO_URING in flags2 (and
 *    FUSE_INIT_EXT in flags, which makes the kernel read flags2);
 *  - it then submits, on an io_uring created with IORING_SETUP_SQE128,
 *    IORING_OP_URING_CMD on the /dev/fuse fd: cmd_op REGISTER, addr an
 *    iovec[2] (a struct fuse_uring_req_header, a payload buffer of at
 *    least the connection's largest request), and in the SQE's command
 *    area a struct fuse_uring_cmd_req naming the queue (one per possible
 *    CPU; the kernel queues a request on the CPU its caller runs on);
 *  - once every queue has an entry, requests arrive as completions of
 *    those commands: in_out holds the fuse_in_header, op_in the opcode's
 *    first argument, the payload the rest (payload_sz bytes);
 *  - the answer goes back the same way (fuse_out_header in in_out, the
 *    reply's arguments in the payload, payload_sz their length) with
 *    cmd_op COMMIT_AND_FETCH and the commit_id the request came with,
 *    which also hands the entry back for the next request.
 * FORGET, INTERRUPT and notifications still use /dev/fuse.
 *
 * Also here, for either transport: FOPEN_PARALLEL_DIRECT_WRITES (7.38),
 * which libfuse 3.14 cannot set in an open answer.
 */
#ifndef TIERFS_URING_ABI_H
#define TIERFS_URING_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <linux/fuse.h>

#define TFS_FUSE_OVER_IO_URING_BIT2 (1u << (41 - 32))	/* FUSE_OVER_IO_URING in flags2 */
/* open_flags (7.38): direct writes of one file may run in parallel */
#define TFS_FOPEN_PARALLEL_DIRECT_WRITES (1u << 6)
#define TFS_MINOR_PARALLEL_DIRECT_WRITES 38

#define TFS_URING_IN_OUT_HEADER_SZ 128
#define TFS_URING_OP_IN_OUT_SZ 128

struct tfs_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;	/* the request's unique, given back on commit */
	uint32_t payload_sz;	/* bytes in the payload, either direction */
	uint32_t padding;
	uint64_t reserved;
};

struct tfs_uring_req_header {
	char in_out[TFS_URING_IN_OUT_HEADER_SZ];	/* fuse_in_header / fuse_out_header */
	char op_in[TFS_URING_OP_IN_OUT_SZ];		/* the opcode's first argument */
	struct tfs_uring_ent_in_out ring_ent_in_out;
};

enum tfs_uring_cmd {
	TFS_URING_CMD_REGISTER = 1,
	TFS_URING_CMD_COMMIT_AND_FETCH = 2,
};

/* In the 80-byte command area of a 128-byte SQE. */
struct tfs_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

/* fuse_init_out as the kernel reads it (7.36 and later: flags2 at 32). */
struct tfs_init_out {
	uint32_t major, minor, max_readahead, flags;
	uint16_t max_background, congestion_threshold;
	uint32_t max_write, time_gran;
	uint16_t max_pages, map_alignment;
	uint32_t flags2;
};

_Static_assert(sizeof(struct tfs_uring_ent_in_out) == 32, "kernel layout");
_Static_assert(sizeof(struct tfs_uring_req_header) == 288, "kernel layout");
_Static_assert(sizeof(struct tfs_uring_cmd_req) == 24, "kernel layout");
_Static_assert(offsetof(struct tfs_init_out, flags2) == 32, "kernel layout");
_Static_assert(offsetof(struct fuse_init_in, flags2) == 16, "kernel layout");
_Static_assert(sizeof(struct fuse_in_header) == 40, "kernel layout");
_Static_assert(sizeof(struct fuse_open_out) == 16, "kernel layout");

#endif
