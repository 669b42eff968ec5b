/* layout.c - placement of logical file bytes on member files.
 *
 * Owns: the arithmetic for every RAID level.  No I/O, no state.
 *
 * Invariants:
 *  1. map() and unmap() are inverses for every byte and every copy.
 *  2. Two distinct (logical byte, copy) pairs never map to the same member
 *     byte, and the copies of one byte are on distinct members.  On parity
 *     levels no data byte maps to a parity byte (unmap() of one is -1).
 *  3. For each member, the member bytes that hold logical [0, x) form the
 *     prefix [0, share(x)) of the member file, and share() is monotone.
 *     On parity levels a member's parity bytes count as held by [0, x) once
 *     the byte at the same offset of the row's data chunk 0 is below x (so
 *     a row's P and Q are as long as its longest data chunk).
 *     So a member's portion of any logical range [a, b) is the contiguous
 *     member range [share(a), share(b)): truncate, fallocate and hole punch
 *     map to one call per member.
 *  4. A file's logical size is max over members of
 *     size_from_member(member file size); every member file is at most its
 *     share of the logical size.  Writes keep this by extending only the
 *     members they touch, truncate by setting every member to its share.
 *
 * Striped levels (RAID0: 1 copy, RAID10 "near 2": 2 copies) place "slots":
 * logical chunk c, copy k is slot s = c * copies + k, on member
 * (s + rot) % n at row s / n.  That is md's near layout with a per-file
 * rotation, so small files do not all start on member 0.
 * Whole-file levels keep every byte at the same offset: RAID1 on all
 * members (copy k on member k), JBOD on member rot only.
 * Parity levels (RAID5: P, RAID6: P and Q) fill rows of one chunk per
 * member: ndata = n - nparity data chunks and the parity chunks, all at
 * member offset row * chunk.  Which member holds what rotates by row as in
 * md's left-symmetric layout (see layout.h), then by the file's rot.
 * Counted from P's member, a row holds P, Q (RAID6), data 0, 1, ...: that
 * distance from P is called the row slot here.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "tierfs/layout.h"

/* ------------------------------------------------------------------ */
/* Striped levels: RAID0 and RAID10                                    */
/* ------------------------------------------------------------------ */

static uint32_t striped_copies(const struct tfs_layout *l)
{
	return l->level == TFS_RAID10 ? 2 : 1;
}

static uint32_t col_of(const struct tfs_layout *l, uint32_t rot, uint32_t member)
{
	return (member + l->nmembers - rot % l->nmembers) % l->nmembers;
}

static void striped_map(const struct tfs_layout *l, uint32_t rot, uint64_t off,
			uint32_t copy, struct tfs_place *p)
{
	uint64_t c = off / l->chunk;
	uint64_t slot = c * striped_copies(l) + copy;

	p->member = (uint32_t)((slot + rot) % l->nmembers);
	p->moff = (slot / l->nmembers) * l->chunk + off % l->chunk;
}

static int striped_unmap(const struct tfs_layout *l, uint32_t rot, uint32_t member,
			 uint64_t moff, uint64_t *off, uint32_t *copy)
{
	uint64_t slot = (moff / l->chunk) * l->nmembers + col_of(l, rot, member);
	uint32_t cp = striped_copies(l);

	*off = (slot / cp) * l->chunk + moff % l->chunk;
	*copy = (uint32_t)(slot % cp);
	return 0;
}

static uint64_t striped_share(const struct tfs_layout *l, uint32_t rot,
			      uint32_t member, uint64_t len)
{
	uint32_t cp = striped_copies(l);
	uint64_t full = len / l->chunk, part = len % l->chunk;
	uint64_t slots = full * cp + (part ? cp : 0);
	uint64_t j = col_of(l, rot, member), last;

	if (slots <= j)
		return 0;
	last = j + l->nmembers * ((slots - 1 - j) / l->nmembers);
	return (last / l->nmembers) * l->chunk + (last < full * cp ? l->chunk : part);
}

static uint64_t chunk_extent(const struct tfs_layout *l, uint64_t off)
{
	return l->chunk - off % l->chunk;
}

static uint32_t raid0_tolerates(const struct tfs_layout *l)
{
	return 0;
}

static uint64_t raid0_usable(const struct tfs_layout *l, uint64_t m)
{
	return m * l->nmembers;
}

static uint32_t raid10_tolerates(const struct tfs_layout *l)
{
	return 1;
}

static uint64_t raid10_usable(const struct tfs_layout *l, uint64_t m)
{
	return m * l->nmembers / 2;
}

/* ------------------------------------------------------------------ */
/* Whole-file levels: JBOD and RAID1                                   */
/* ------------------------------------------------------------------ */

static uint32_t whole_copies(const struct tfs_layout *l)
{
	return l->level == TFS_RAID1 ? l->nmembers : 1;
}

static void whole_map(const struct tfs_layout *l, uint32_t rot, uint64_t off,
		      uint32_t copy, struct tfs_place *p)
{
	p->member = l->level == TFS_RAID1 ? copy : rot % l->nmembers;
	p->moff = off;
}

static int whole_unmap(const struct tfs_layout *l, uint32_t rot, uint32_t member,
		       uint64_t moff, uint64_t *off, uint32_t *copy)
{
	if (l->level == TFS_JBOD && member != rot % l->nmembers)
		return -1;
	*off = moff;
	*copy = l->level == TFS_RAID1 ? member : 0;
	return 0;
}

static uint64_t whole_share(const struct tfs_layout *l, uint32_t rot,
			    uint32_t member, uint64_t len)
{
	if (l->level == TFS_JBOD && member != rot % l->nmembers)
		return 0;
	return len;
}

static uint64_t whole_extent(const struct tfs_layout *l, uint64_t off)
{
	return UINT64_MAX - off;
}

static uint32_t jbod_tolerates(const struct tfs_layout *l)
{
	return 0;
}

static uint64_t jbod_usable(const struct tfs_layout *l, uint64_t m)
{
	return m * l->nmembers;
}

static uint32_t raid1_tolerates(const struct tfs_layout *l)
{
	return l->nmembers - 1;
}

static uint64_t raid1_usable(const struct tfs_layout *l, uint64_t m)
{
	return m;
}

/* ------------------------------------------------------------------ */
/* Parity levels: RAID5 and RAID6                                      */
/* ------------------------------------------------------------------ */

uint32_t tfs_layout_nparity(const struct tfs_layout *l)
{
	return tfs_level_ops(l->level)->nparity;
}

uint32_t tfs_layout_ndata(const struct tfs_layout *l)
{
	return l->nmembers - tfs_layout_nparity(l);
}

/* Member holding P in row (before the file rotation): md's pd_idx. */
static uint32_t parity_pd(const struct tfs_layout *l, uint64_t row)
{
	return l->nmembers - 1 - (uint32_t)(row % l->nmembers);
}

uint32_t tfs_layout_row_member(const struct tfs_layout *l, uint32_t rot,
			       uint64_t row, uint32_t pos)
{
	uint32_t n = l->nmembers, np = tfs_layout_nparity(l), nd = n - np;
	uint32_t slot = pos < nd ? np + pos : pos - nd;

	return (parity_pd(l, row) + slot + rot % n) % n;
}

uint32_t tfs_layout_row_pos(const struct tfs_layout *l, uint32_t rot,
			    uint64_t row, uint32_t member)
{
	uint32_t n = l->nmembers, np = tfs_layout_nparity(l), nd = n - np;
	uint32_t slot = (member + 2 * n - parity_pd(l, row) - rot % n) % n;

	return slot < np ? nd + slot : slot - np;
}

static uint32_t parity_copies(const struct tfs_layout *l)
{
	return 1;
}

static uint32_t parity_tolerates(const struct tfs_layout *l)
{
	return tfs_layout_nparity(l);
}

static uint64_t parity_usable(const struct tfs_layout *l, uint64_t m)
{
	return m * tfs_layout_ndata(l);
}

static void parity_map(const struct tfs_layout *l, uint32_t rot, uint64_t off,
		       uint32_t copy, struct tfs_place *p)
{
	uint64_t c = off / l->chunk, nd = tfs_layout_ndata(l);

	p->member = tfs_layout_row_member(l, rot, c / nd, (uint32_t)(c % nd));
	p->moff = (c / nd) * l->chunk + off % l->chunk;
}

static int parity_unmap(const struct tfs_layout *l, uint32_t rot, uint32_t member,
			uint64_t moff, uint64_t *off, uint32_t *copy)
{
	uint64_t row = moff / l->chunk;
	uint32_t pos = tfs_layout_row_pos(l, rot, row, member);
	uint32_t nd = tfs_layout_ndata(l);

	if (pos >= nd)
		return -1;
	*off = (row * nd + pos) * l->chunk + moff % l->chunk;
	*copy = 0;
	return 0;
}

/* Rows below len / rowbytes are full: a chunk on every member.  In the
 * partial row a data member holds what of its chunk lies below len, a
 * parity member as much as data chunk 0 holds. */
static uint64_t parity_share(const struct tfs_layout *l, uint32_t rot,
			     uint32_t member, uint64_t len)
{
	uint32_t nd = tfs_layout_ndata(l);
	uint64_t rowbytes = (uint64_t)nd * l->chunk;
	uint64_t full = len / rowbytes, rem = len % rowbytes;
	uint32_t pos;

	if (rem == 0)
		return full * l->chunk;
	pos = tfs_layout_row_pos(l, rot, full, member);
	if (pos < nd)
		rem = rem > (uint64_t)pos * l->chunk ? rem - (uint64_t)pos * l->chunk : 0;
	return full * l->chunk + (rem < l->chunk ? rem : l->chunk);
}

/* ------------------------------------------------------------------ */
/* Level table                                                         */
/* ------------------------------------------------------------------ */

static const struct tfs_level_ops level_ops[TFS_LEVEL_COUNT] = {
	[TFS_JBOD] = {
		.name = "jbod", .min_members = 1,
		.copies = whole_copies, .tolerates = jbod_tolerates,
		.usable = jbod_usable, .map = whole_map, .unmap = whole_unmap,
		.share = whole_share, .extent = whole_extent,
	},
	[TFS_RAID0] = {
		.name = "raid0", .min_members = 2,
		.copies = striped_copies, .tolerates = raid0_tolerates,
		.usable = raid0_usable, .map = striped_map, .unmap = striped_unmap,
		.share = striped_share, .extent = chunk_extent,
	},
	[TFS_RAID1] = {
		.name = "raid1", .min_members = 2,
		.copies = whole_copies, .tolerates = raid1_tolerates,
		.usable = raid1_usable, .map = whole_map, .unmap = whole_unmap,
		.share = whole_share, .extent = whole_extent,
	},
	[TFS_RAID10] = {
		.name = "raid10", .min_members = 2,
		.copies = striped_copies, .tolerates = raid10_tolerates,
		.usable = raid10_usable, .map = striped_map, .unmap = striped_unmap,
		.share = striped_share, .extent = chunk_extent,
	},
	[TFS_RAID5] = {
		.name = "raid5", .min_members = 3, .nparity = 1,
		.copies = parity_copies, .tolerates = parity_tolerates,
		.usable = parity_usable, .map = parity_map, .unmap = parity_unmap,
		.share = parity_share, .extent = chunk_extent,
	},
	[TFS_RAID6] = {
		.name = "raid6", .min_members = 4, .nparity = 2,
		.copies = parity_copies, .tolerates = parity_tolerates,
		.usable = parity_usable, .map = parity_map, .unmap = parity_unmap,
		.share = parity_share, .extent = chunk_extent,
	},
};

const struct tfs_level_ops *tfs_level_ops(enum tfs_level level)
{
	return &level_ops[level];
}

const char *tfs_level_name(enum tfs_level level)
{
	return (unsigned)level < TFS_LEVEL_COUNT ? level_ops[level].name : "?";
}

int tfs_level_parse(const char *s, enum tfs_level *level)
{
	for (unsigned i = 0; i < TFS_LEVEL_COUNT; i++) {
		if (strcasecmp(s, level_ops[i].name) == 0) {
			*level = (enum tfs_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

int tfs_layout_check(const struct tfs_layout *l, const char **why)
{
	if ((unsigned)l->level >= TFS_LEVEL_COUNT) {
		*why = "unknown RAID level";
		return -EINVAL;
	}
	if (l->chunk < TFS_CHUNK_MIN || l->chunk > TFS_CHUNK_MAX ||
	    (l->chunk & (l->chunk - 1))) {
		*why = "chunk size must be a power of two from 4K to 16M";
		return -EINVAL;
	}
	if (l->nmembers < level_ops[l->level].min_members) {
		switch (l->level) {
		case TFS_JBOD: *why = "jbod needs at least 1 member"; break;
		case TFS_RAID5: *why = "raid5 needs at least 3 members"; break;
		case TFS_RAID6: *why = "raid6 needs at least 4 members"; break;
		default: *why = "this level needs at least 2 members"; break;
		}
		return -EINVAL;
	}
	if (l->nmembers > TFS_MAX_MEMBERS) {
		*why = "at most 32 members";
		return -EINVAL;
	}
	return 0;
}

uint64_t tfs_layout_size_from_member(const struct tfs_layout *l, uint32_t rot,
				     uint32_t member, uint64_t msize)
{
	uint64_t off, last = msize - 1;
	uint32_t copy;

	if (msize == 0)
		return 0;
	if (tfs_layout_unmap(l, rot, member, last, &off, &copy) == 0)
		return off + 1;
	if (tfs_layout_nparity(l) == 0)
		return 0;
	/* a parity byte: the file reaches at least the byte at the same
	 * offset of the row's data chunk 0 (see layout.h) */
	return (last / l->chunk) * tfs_layout_ndata(l) * l->chunk + last % l->chunk + 1;
}
