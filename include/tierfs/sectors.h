/* An extent's sectors, shared by the SSD tier (src/cache) and its model
 * (model.h): the sector size, the bitmaps of an extent's valid and dirty
 * sectors, and the arithmetic of a request's piece in one extent.  Pure,
 * inline, no state.
 */
#ifndef TIERFS_SECTORS_H
#define TIERFS_SECTORS_H

#include <stdbool.h>
#include <stdint.h>

#define TFS_SECTOR 4096u	/* the unit of validity and dirt in an extent */
/* Sector bitmaps: up to 256 sectors of 4K, so extents of up to 1 MiB. */
#define TFS_CEXT_WORDS 4

/* The part [*a, *b) of the request [off, off+len) (len > 0) that falls in
 * extent idx of extent bytes. */
static inline void tfs_piece_span(uint32_t extent, uint64_t idx, uint64_t off, uint64_t len,
				  uint64_t *a, uint64_t *b)
{
	uint64_t s = idx * extent, e = s + extent;

	*a = off > s ? off : s;
	*b = off + len < e ? off + len : e;
}

/* The sectors [*s0, *s1) of extent idx that the bytes [a, b) in it touch. */
static inline void tfs_piece_sectors(uint32_t extent, uint64_t idx, uint64_t a, uint64_t b,
				     unsigned *s0, unsigned *s1)
{
	uint64_t base = idx * extent;

	*s0 = (unsigned)((a - base) / TFS_SECTOR);
	*s1 = (unsigned)((b - base + TFS_SECTOR - 1) / TFS_SECTOR);
}

/* The sectors [*w0, *w1) of extent idx that the bytes [a, b) cover whole
 * (none when *w1 <= *w0): what a write-through makes valid. */
static inline void tfs_piece_whole(uint32_t extent, uint64_t idx, uint64_t a, uint64_t b,
				   unsigned *w0, unsigned *w1)
{
	uint64_t base = idx * extent;

	*w0 = (unsigned)((a - base + TFS_SECTOR - 1) / TFS_SECTOR);
	*w1 = (unsigned)((b - base) / TFS_SECTOR);
}

/* Sector bitmaps of an extent (TFS_CEXT_WORDS words).  Sets sectors
 * [a, b). */
static inline void bm_set(uint64_t *m, unsigned a, unsigned b)	/* [a, b) */
{
	for (unsigned i = a; i < b; i++)
		m[i / 64] |= 1ull << (i % 64);
}
/* Clears sectors [a, b). */
static inline void bm_clear(uint64_t *m, unsigned a, unsigned b)
{
	for (unsigned i = a; i < b; i++)
		m[i / 64] &= ~(1ull << (i % 64));
}
/* Returns true if sector i is set. */
static inline bool bm_test(const uint64_t *m, unsigned i)
{
	return m[i / 64] >> (i % 64) & 1;
}
/* Returns true if every sector of [a, b) is set. */
static inline bool bm_all(const uint64_t *m, unsigned a, unsigned b)
{
	for (unsigned i = a; i < b; i++)
		if (!bm_test(m, i))
			return false;
	return true;
}
/* Returns true if any sector of [a, b) is set. */
static inline bool bm_any_in(const uint64_t *m, unsigned a, unsigned b)
{
	for (unsigned i = a; i < b; i++)
		if (bm_test(m, i))
			return true;
	return false;
}
/* Returns true if any sector is set. */
static inline bool bm_any(const uint64_t *m)
{
	for (unsigned w = 0; w < TFS_CEXT_WORDS; w++)
		if (m[w])
			return true;
	return false;
}
/* Returns how many sectors are set. */
static inline unsigned bm_count(const uint64_t *m)
{
	unsigned n = 0;

	for (unsigned w = 0; w < TFS_CEXT_WORDS; w++)
		n += (unsigned)__builtin_popcountll(m[w]);
	return n;
}

#endif
