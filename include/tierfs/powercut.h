/* The power-cut model (tests only): every write the daemon makes to a file
 * it keeps on stable storage is noted with its pre-image until a sync
 * covers it; a cut loses (or keeps) each unsynced 4 KiB block, then the
 * daemon dies.  Off, it costs one branch per write.  Members are noted at
 * the member seam (fault.c), the daemon's own files (the SSD data file,
 * both LMDB stores, the store's log, superblocks) by the libc wrappers of
 * pcut_wrap.c.  DESIGN.md section 6 has the model and why it is here.
 */
#ifndef TIERFS_POWERCUT_H
#define TIERFS_POWERCUT_H

#include <stdbool.h>
#include <stdint.h>

#define TFS_PCUT_BLOCK 4096u
#define TFS_PCUT_OWN	UINT32_MAX	/* domain of files noted by the wrappers */

struct tfs_pcut_conf {
	long cut_after;		/* cut at the N-th noted operation (0: only when asked);
				 * with when, the N-th once it exists */
	double keep;		/* chance an unsynced block survives the cut */
	uint64_t seed;		/* of the per-block choice */
	const char *dump;	/* write the undo log here instead of applying it */
	const char *when;	/* cut at the first noted operation once this exists */
	long own_sync_delay_ms;	/* each sync of the daemon's own files waits this first */
};

/* Turn the model on (once, before the writes it is to see). */
void tfs_pcut_enable(const struct tfs_pcut_conf *conf);
/* Returns true if the model is on. */
bool tfs_pcut_on(void);
/* Returns own_sync_delay_ms of the configuration (0 with the model off). */
long tfs_pcut_own_sync_delay_ms(void);

/* The gate: a noted operation holds it from its pre-image to its
 * completion, so the cut never sees half of one. */
void tfs_pcut_enter(void);
void tfs_pcut_leave(void);	/* see tfs_pcut_enter */

/* Note that [off, off + len) of fd's file (and its size) is about to
 * change; domain is the member (or TFS_PCUT_OWN).  Inside the gate. */
void tfs_pcut_note(uint32_t domain, int fd, uint64_t off, uint64_t len);
/* A sync made fd's file (or every file of domain) durable. */
void tfs_pcut_synced_fd(int fd);
void tfs_pcut_synced_domain(uint32_t domain);	/* see tfs_pcut_synced_fd */
/* Count one noted operation (outside the gate): cuts at cut_after (or
 * at when, cut_after operations after it appears). */
void tfs_pcut_tick(void);

/* The cut: close the gate, wait for what is inside, lose each unsynced
 * block unless the draw keeps it (or dump the log), SIGKILL. */
_Noreturn void tfs_pcut_cut(const char *why);

/* Apply a dump to a copy of the files: every path starting with from is
 * taken under to instead.  Returns the number of blocks lost, or -errno. */
long tfs_pcut_apply_dump(const char *dump, const char *from, const char *to, double keep,
			 uint64_t seed);

#endif
