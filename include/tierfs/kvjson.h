/* The status's key=value lines as one JSON document (src/util/kvjson.c),
 * for the root's user.tierfs.stats. */
#ifndef TIERFS_KVJSON_H
#define TIERFS_KVJSON_H

/* kv: lines "KEY=VALUE"; a key's dotted parts nest ("cache.read_hits=5"
 * -> {"cache": {"read_hits": 5}}), in the order the keys first appear.
 * A value that is a plain decimal number (no sign but '-', no leading
 * zero, no exponent) becomes a JSON number, every other a string.  A key
 * that is also the prefix of others (the status's "cache=DIR" beside
 * "cache.mode=...") keeps its value as "value" inside that object; a key
 * given more than once (the status's mismatch= lines) has an array of its
 * values, in order.
 * Lines without '=' and empty keys or key parts are skipped.  Returns the
 * document malloc'ed, one line, no newline; NULL without memory. */
char *tfs_kv_to_json(const char *kv);

#endif
