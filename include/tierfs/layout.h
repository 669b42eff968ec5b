/* Placement math: where each logical byte of a file lives on the members.
 *
 * Every function here is pure (no I/O, no globals) so that it can be tested
 * exhaustively.  map() and unmap() are inverses: for every level, member
 * count, chunk size, rotation, copy and offset,
 *     unmap(map(off, copy)) == (off, copy).
 */
#ifndef TIERFS_LAYOUT_H
#define TIERFS_LAYOUT_H

#include <stdint.h>

#define TFS_MAX_MEMBERS   32
#define TFS_CHUNK_MIN     (4u << 10)
#define TFS_CHUNK_MAX     (16u << 20)
#define TFS_CHUNK_DEFAULT (512u << 10)

enum tfs_level {
	TFS_JBOD = 0,
	TFS_RAID0,
	TFS_RAID1,
	TFS_RAID10,
	TFS_RAID5,
	TFS_RAID6,
	TFS_LEVEL_COUNT
};

struct tfs_layout {
	enum tfs_level level;
	uint32_t nmembers;
	uint32_t chunk;		/* bytes, power of two */
};

/* One placement: a member and the byte offset inside that member's file. */
struct tfs_place {
	uint32_t member;
	uint64_t moff;
};

/* Per-level behaviour.  Levels that share their math share the functions:
 * RAID0 and RAID10 are both "striped" (1 and 2 copies), JBOD and RAID1 are
 * both "whole file" (1 and n copies), RAID5 and RAID6 are both "parity"
 * (1 and 2 parity chunks per row). */
struct tfs_level_ops {
	const char *name;
	uint32_t min_members;
	/* parity chunks per row: 0, or 1 (RAID5, P) or 2 (RAID6, P and Q) */
	uint32_t nparity;
	/* Returns the copies of every byte kept on the array. */
	uint32_t (*copies)(const struct tfs_layout *l);
	/* Returns the member failures the level always survives. */
	uint32_t (*tolerates)(const struct tfs_layout *l);
	/* Returns the usable bytes given the smallest member's capacity. */
	uint64_t (*usable)(const struct tfs_layout *l, uint64_t member_bytes);
	/* Where copy `copy` of logical byte off of a file of rotation rot
	 * lives: *p. */
	void (*map)(const struct tfs_layout *l, uint32_t rot, uint64_t off,
		    uint32_t copy, struct tfs_place *p);
	/* The inverse of map: *off and *copy of the byte at (member, moff).
	 * Returns 0, or -1 when (member, moff) holds no byte of the file
	 * (JBOD: not member rot; parity levels: a parity byte). */
	int (*unmap)(const struct tfs_layout *l, uint32_t rot, uint32_t member,
		     uint64_t moff, uint64_t *off, uint32_t *copy);
	/* Returns the bytes of member's file that cover logical [0, len)
	 * (layout.c invariant 3). */
	uint64_t (*share)(const struct tfs_layout *l, uint32_t rot,
			  uint32_t member, uint64_t len);
	/* Returns the bytes from off to the next point where placement
	 * changes: to the chunk boundary, or UINT64_MAX - off on the
	 * whole-file levels (JBOD, RAID1: it never changes). */
	uint64_t (*extent)(const struct tfs_layout *l, uint64_t off);
};

/* Returns the ops of level (which must be < TFS_LEVEL_COUNT: unchecked). */
const struct tfs_level_ops *tfs_level_ops(enum tfs_level level);
/* Returns the level's name ("raid5"), or "?" for an unknown level. */
const char *tfs_level_name(enum tfs_level level);
/* A level by name, any case.  Returns 0, or -EINVAL for an unknown name. */
int tfs_level_parse(const char *s, enum tfs_level *level);

/* Validate a geometry (level, member count, chunk a power of two from
 * TFS_CHUNK_MIN to TFS_CHUNK_MAX).  Returns 0, or -EINVAL with a reason
 * in *why. */
int tfs_layout_check(const struct tfs_layout *l, const char **why);

/* Returns the per-file rotation derived from the file identity: spreads
 * small files and JBOD placement over the members. */
static inline uint32_t tfs_layout_rot(const struct tfs_layout *l, uint64_t fid)
{
	return (uint32_t)(fid % l->nmembers);
}

/* The level's map, unmap, share, extent and copies for l (see struct
 * tfs_level_ops for what each returns). */
static inline void tfs_layout_map(const struct tfs_layout *l, uint32_t rot,
				  uint64_t off, uint32_t copy, struct tfs_place *p)
{
	tfs_level_ops(l->level)->map(l, rot, off, copy, p);
}

/* Returns 0, or -1 when (member, moff) holds no byte of the file. */
static inline int tfs_layout_unmap(const struct tfs_layout *l, uint32_t rot,
				   uint32_t member, uint64_t moff,
				   uint64_t *off, uint32_t *copy)
{
	return tfs_level_ops(l->level)->unmap(l, rot, member, moff, off, copy);
}

/* Returns the bytes of member's file that cover logical [0, len). */
static inline uint64_t tfs_layout_share(const struct tfs_layout *l, uint32_t rot,
					uint32_t member, uint64_t len)
{
	return tfs_level_ops(l->level)->share(l, rot, member, len);
}

/* Returns the bytes from off to the next change of placement. */
static inline uint64_t tfs_layout_extent(const struct tfs_layout *l, uint64_t off)
{
	return tfs_level_ops(l->level)->extent(l, off);
}

/* Returns the copies of every byte. */
static inline uint32_t tfs_layout_copies(const struct tfs_layout *l)
{
	return tfs_level_ops(l->level)->copies(l);
}

/* Returns the logical file size implied by one member's file size (0 when
 * the member holds nothing).  The file's size is the maximum over the members.
 * It is the least L with share(member, L) >= msize.  On parity levels a
 * member whose last byte is a parity byte (row r, in-chunk offset x) gives
 * r * rowbytes + x + 1: a lower bound (that parity byte exists once data
 * chunk 0 of the row reaches x + 1 bytes), exact when x + 1 < chunk;
 * the member holding the file's last data byte gives the exact size. */
uint64_t tfs_layout_size_from_member(const struct tfs_layout *l, uint32_t rot,
				     uint32_t member, uint64_t msize);

/* ------------------------------------------------------------------ */
/* Parity levels (RAID5, RAID6)                                         */
/*                                                                      */
/* A row is one chunk on every member: ndata data chunks, then P (and Q */
/* on RAID6).  A file's logical chunk c is data index c % ndata of row   */
/* c / ndata; everything in row r sits at member offset r * chunk.       */
/* md's left-symmetric rotation: pd = n-1 - r % n; RAID5 puts P on pd   */
/* and data i on (pd+1+i) % n; RAID6 puts P on pd, Q on (pd+1) % n and  */
/* data i on (pd+2+i) % n; then each member number m becomes            */
/* (m + rot) % n.                                                       */
/* ------------------------------------------------------------------ */

/* Positions inside a row, as tfs_layout_row_member() takes them and as
 * the parity library (tierfs/parity.h) orders its blocks: data index i is
 * position i, P is position ndata, Q is position ndata + 1. */

/* Returns the parity chunks per row: 0 for non-parity levels, 1 for RAID5,
 * 2 for RAID6. */
uint32_t tfs_layout_nparity(const struct tfs_layout *l);
/* Returns nmembers - nparity (for non-parity levels simply nmembers). */
uint32_t tfs_layout_ndata(const struct tfs_layout *l);
/* Parity levels only: returns the member holding position pos
 * (< nmembers) of row `row`. */
uint32_t tfs_layout_row_member(const struct tfs_layout *l, uint32_t rot,
			       uint64_t row, uint32_t pos);
/* Parity levels only: the inverse; returns the position member holds in
 * row. */
uint32_t tfs_layout_row_pos(const struct tfs_layout *l, uint32_t rot,
			    uint64_t row, uint32_t member);

#endif
