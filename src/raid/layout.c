/* layout.c - placement of logical file bytes on member files.
 *
 * Owns: the arithmetic for every RAID level.  No I/O, no state.
 *
 * Invariants:
 *  1. map() and unmap() are inverses for every byte and every copy.
 *  2. Two distinct (logical byte, copy) pairs never map to the same member
 *     byte, and the copies of one byte are on distinct members.
 *  3. For each member, the member bytes that hold logical [0, x) form the
 *     prefix [0, share(x)) of the member file, and share() is monotone.
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

static uint64_t striped_extent(const struct tfs_layout *l, uint64_t off)
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
		.share = striped_share, .extent = striped_extent,
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
		.share = striped_share, .extent = striped_extent,
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
		*why = l->level == TFS_JBOD ? "jbod needs at least 1 member"
					    : "this level needs at least 2 members";
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
	uint64_t off;
	uint32_t copy;

	if (msize == 0 || tfs_layout_unmap(l, rot, member, msize - 1, &off, &copy))
		return 0;
	return off + 1;
}
