/* RAID5/RAID6 parity over GF(2^8): P is the XOR of the data blocks, Q is
 * sum g^i * D_i with g = 2 in the field of polynomial 0x11d (the field and
 * Q of Linux md's raid6, so blocks compare with md's).
 *
 * A stripe is an array of equal-length blocks, ordered as the layout's row
 * positions (tierfs/layout.h): blocks[0..ndata-1] data, blocks[ndata] P,
 * blocks[ndata+1] Q.  Every function takes any len >= 1 and any alignment
 * of the block pointers, keeps no state between calls, and writes only the
 * bytes [0, len) of the blocks it fills.  Blocks must not overlap except
 * where a function says so.
 *
 * The kernels are picked once, at first use, for the CPU (see
 * tfs_parity_impl()); every kernel set gives bit-identical results.
 */
#ifndef TIERFS_PARITY_H
#define TIERFS_PARITY_H

#include <stddef.h>
#include <stdint.h>

/* Q tells up to 255 data blocks apart (g has order 255). */
#define TFS_PARITY_MAX_DATA 255

/* Fill P (nparity 1) or P and Q (nparity 2) from the ndata data blocks.
 * ndata >= 1; nparity 1 or 2. */
void tfs_parity_gen(void **blocks, unsigned ndata, unsigned nparity, size_t len);

/* dst ^= src; dst == src is allowed (zeroes dst). */
void tfs_parity_xor(void *dst, const void *src, size_t len);

/* dst ^= coef * src in GF(2^8); dst == src is allowed. */
void tfs_parity_mul_xor(void *dst, const void *src, uint8_t coef, size_t len);

/* Returns g^i in GF(2^8) (i taken mod 255). */
uint8_t tfs_gf_pow2(unsigned i);

/* Rebuild the nmiss blocks named in miss[] (positions as above, distinct)
 * in place from the others; the other blocks are only read.  Returns 0,
 * or -EINVAL when it cannot: more missing blocks than parity blocks, a
 * position out of range, nparity not 1 or 2, ndata 0 or above
 * TFS_PARITY_MAX_DATA.  nmiss 0 does nothing. */
int tfs_parity_recover(void **blocks, unsigned ndata, unsigned nparity,
		       const unsigned *miss, unsigned nmiss, size_t len);

/* RAID6 scrub: with P and Q present (ndata + 2 blocks), returns
 *   -1        P and Q both agree with the data,
 *   i         data block i alone explains both syndromes in every byte
 *             where they are not zero (rebuild it with recover()),
 *   ndata     only P is wrong,
 *   ndata + 1 only Q is wrong,
 *   -2        the damage is in more than one block, or cannot be located;
 *             -EINVAL for ndata 0 or above TFS_PARITY_MAX_DATA.
 * The blocks are not modified. */
int tfs_parity_locate(void **blocks, unsigned ndata, size_t len);

/* Returns the name of the kernel set in use: "generic" (portable C, vectorised by the
 * compiler), "ssse3", "avx2" or "gfni" (x86 only). */
const char *tfs_parity_impl(void);

/* For tests and benchmarks: switch every later call to the named kernel
 * set.  Returns 0, -EINVAL for an unknown name, -ENOTSUP when this CPU
 * lacks it.  Not safe while other threads are computing parity. */
int tfs_parity_use(const char *name);

#endif
