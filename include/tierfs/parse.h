#ifndef TIERFS_PARSE_H
#define TIERFS_PARSE_H
#include <stdint.h>
/* "512K", "4k", "16M", "1G", "4096" -> bytes; -EINVAL on junk or overflow. */
int tfs_parse_size(const char *s, uint64_t *out);
/* bytes -> "512K" / "1.5G" style, for summaries */
const char *tfs_fmt_size(uint64_t v, char *buf, unsigned len);
#endif
