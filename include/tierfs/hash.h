/* hash.h - 64-bit integer mixers, for hash tables and seeded draws.
 *
 * tfs_mix64: MurmurHash3's 64-bit finalizer (every input bit flips each
 * output bit with probability about 1/2): hash-table indexes.
 * tfs_splitmix64: the finalizer of Vigna's splitmix64; fed a counter
 * advanced by TFS_GOLDEN64, a PRNG whose draws are reproducible from a
 * seed (fault injection, the power-cut model).
 * tfs_pow2_at_least: a table's size for n entries.
 */
#ifndef TIERFS_HASH_H
#define TIERFS_HASH_H

#include <stdint.h>

#define TFS_GOLDEN64 0x9E3779B97F4A7C15ull	/* 2^64 / golden ratio, odd */

/* Returns x mixed by MurmurHash3's fmix64 (0 stays 0). */
static inline uint64_t tfs_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* Returns the splitmix64 output for counter value z. */
static inline uint64_t tfs_splitmix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Returns the least power of two at or above n (at most 2^30): the sizes
 * of hash tables and sketches. */
static inline uint32_t tfs_pow2_at_least(uint64_t n)
{
	uint32_t p = 1;

	while (p < n && p < (1u << 30))
		p <<= 1;
	return p;
}

/* Returns a draw in [0, 1) from a mixed value (its top 53 bits). */
static inline double tfs_unit(uint64_t z)
{
	return (double)(z >> 11) * 0x1.0p-53;
}

#endif
