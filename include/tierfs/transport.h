/* The FUSE transport (src/fuse/transport.c): requests carried on io_uring
 * queues, one per CPU (FUSE-over-io_uring), with /dev/fuse kept for what
 * the kernel still sends there; or /dev/fuse alone. */
#ifndef TIERFS_TRANSPORT_H
#define TIERFS_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>

struct fuse_session;
struct tfs_defer;
struct tfs_hit_job;
struct tfs_transport;

enum tfs_uring_mode { TFS_URING_OFF, TFS_URING_AUTO, TFS_URING_ON };

/* "off", "auto", "on": returns the mode; -1 for anything else. */
int tfs_uring_mode_parse(const char *s);
/* Returns true if the fuse module lets a connection use io_uring (its
 * enable_uring parameter); false with the reason in why otherwise. */
bool tfs_uring_allowed(char *why, size_t len);

/* Put the transport under se's mounted /dev/fuse fd (libfuse's custom I/O:
 * se's userdata must be the struct tfs_fs whose transport field holds the
 * result).  Requests the transport's queues do not run themselves (those
 * that may wait for the members) go to pool.  tier: the array has an SSD
 * tier (auto asks for io_uring only then, transport.c invariant 7).
 * Returns the transport, or NULL if out of memory. */
struct tfs_transport *tfs_transport_attach(struct fuse_session *se, enum tfs_uring_mode mode,
					   bool tier, struct tfs_defer *pool);
/* Stop taking requests from the queues, wait for the answers of those
 * taken and stop their threads (t may be NULL).  Before pool and the hit
 * ring stop: their jobs answer through t. */
void tfs_transport_stop(struct tfs_transport *t);
/* Stop t if it runs, and free it: after fuse_session_destroy, since every
 * answer libfuse sends passes through t. */
void tfs_transport_free(struct tfs_transport *t);

/* Returns true if this thread is a queue's: it carries every request of
 * its CPU, so it must not wait for the HDD members (hand such work to a
 * pool). */
bool tfs_transport_on_queue(void);
/* Returns true on a queue's thread if the request it runs is the only one
 * its queue has: nothing else taken and not answered, no other completion
 * of the batch waiting, none delivered and not yet a completion
 * (transport.c invariant 8; then a short wait on the SSD is cheaper done
 * at once than through the ring); false otherwise. */
bool tfs_transport_alone(void);
/* On a queue's thread, while it runs a READ: returns the buffer its
 * answer goes out from (the queue entry's payload, page-aligned, valid
 * until the answer), if len bytes fit; NULL elsewhere.  Data read there is
 * answered without a copy. */
void *tfs_transport_read_buf(size_t len);
/* On a queue's thread: run j's read or write on its ring, finish j from
 * the completion there (hitio.h), and return true; elsewhere false,
 * nothing done. */
bool tfs_transport_io(struct tfs_hit_job *j);

/* The status lines (fuse.*=); returns their length. */
int tfs_transport_stats(struct tfs_transport *t, char *out, size_t cap);

#endif
