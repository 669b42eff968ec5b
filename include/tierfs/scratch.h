/* scratch.h - per-thread scratch memory that a thread gives back.
 *
 * A thread reuses its scratch buffers from one request to the next (no
 * allocation per request), keeps at most TFS_SCRATCH_KEEP bytes of each
 * between requests (tfs_scratch_trim), and frees them all when it exits.
 */
#ifndef TIERFS_SCRATCH_H
#define TIERFS_SCRATCH_H
#include <stddef.h>
#include <stdint.h>

/* One buffer per slot and thread; a slot is used by one module. */
enum tfs_scratch_slot {
	TFS_SCR_IO,		/* data.c tfs_iobuf: a request's bytes */
	TFS_SCR_MIO,		/* data.c: member requests of one call */
	TFS_SCR_STRIPE,		/* stripe.c: parity and reconstruction blocks */
	TFS_SCR_ROWS,		/* stripe.c: rows of one request */
	TFS_SCR_SVEC,		/* stripe.c: member requests of one request */
	TFS_SCR_CACHE,		/* cache/index.c c_buf: an extent's bytes */
	TFS_SCR_PIECES,		/* cache/request.c: a request's pieces */
	TFS_SCR_COPS,		/* cache/request.c: a request's store ops */
	TFS_SCR_LOG,		/* cstore.c: one log entry */
	TFS_SCR_HDD,		/* hdd.c: one batch of modelled requests */
	TFS_SCR_NSLOTS
};

/* What a thread keeps of one slot between requests: the largest FUSE
 * request (1 MiB) and the largest extent (cache_extent <= 1M) fit; more
 * is given back.  The stripe scratch of a parity request does not fit:
 * (n + P) x (span + 4 KiB) per row spanned, 5 MiB for 1 MiB on RAID5 x4
 * (DESIGN §3 Memory), so each such request maps and unmaps its own (one
 * mmap and munmap per 1 MiB buffered write on RAID5 x4, strace -c). */
#define TFS_SCRATCH_KEEP (1u << 20)

/* The calling thread's buffer for slot, at least len bytes, 4 KiB
 * aligned; its contents are not kept when it grows.  NULL: no memory. */
void *tfs_scratch(enum tfs_scratch_slot slot, size_t len);

/* The calling thread's array for slot, at least n elements of size bytes;
 * what it held is kept when it grows (realloc).  NULL: no memory, and the
 * old array stays. */
void *tfs_scratch_array(enum tfs_scratch_slot slot, size_t n, size_t size);

/* The calling thread is between requests: free its buffers larger than
 * TFS_SCRATCH_KEEP.  Nothing it got from tfs_scratch may be in use. */
void tfs_scratch_trim(void);

/* Returns the bytes of scratch held by all threads now. */
uint64_t tfs_scratch_bytes(void);

/* The idle trim (scratch.c invariant 5): a thread that gives glibc's freed
 * blocks back (malloc_trim) once the daemon has been idle a while after
 * serving requests.  Start returns 0 or -errno (no thread). */
int tfs_scratch_start(void);
/* Stop the idle trim thread (nothing if it is not running). */
void tfs_scratch_stop(void);
/* Returns how many idle trims ran (mem.idle_trims of the status). */
uint64_t tfs_scratch_idle_trims(void);

#endif
