/* In-place upgrade of an assembled array's members to this tierfs's
 * superblock version (upgrade.c). */
#ifndef TIERFS_UPGRADE_H
#define TIERFS_UPGRADE_H

struct tfs_fs;

/* Bring every member in use up to TFS_SUPER_VERSION before anything reads
 * a record; 0, or -errno after a one-line error. */
int tfs_upgrade(struct tfs_fs *fs);

#endif
