/* tierctl.h - what tierctl's files share (src/tierctl/): reading a
 * mount's status and formatting it. */
#ifndef TIERCTL_H
#define TIERCTL_H

#include <stddef.h>

#define XATTR_STATUS "user.tierfs.status"

extern const char *prog;	/* "tierctl", for messages */

/* The mount root's attribute name, malloc'ed and NUL-terminated, or NULL
 * (said why on stderr, naming mnt). */
char *read_attr(const char *mnt, const char *name);
/* The mount's user.tierfs.status, as read_attr. */
char *status(const char *mnt);
/* Returns the value of key in a status text ("" if absent), copied into
 * out (cut at len - 1). */
const char *get(const char *st, const char *key, char *out, size_t len);
/* Returns key's value in st as a number (0 if absent or st NULL). */
unsigned long long num(const char *st, const char *key);
/* Returns buf holding v bytes with a binary unit ("12.5 MiB"). */
const char *human(unsigned long long v, char *buf, size_t len);

/* report.c */

/* Every mounted tierfs array, one line each.  Returns the exit status. */
int cmd_list(void);
/* node_exporter's textfile format for each of the n mounts.  Returns the
 * exit status (1 if a mount could not be read; the others are printed). */
int cmd_prometheus(int n, char **mnts);
/* A live view of mnt every interval seconds, count times (0: until
 * interrupted).  Returns the exit status. */
int cmd_top(const char *mnt, double interval, unsigned count);

#endif
