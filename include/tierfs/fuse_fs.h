/* The FUSE front end (src/fuse/fs.c): the low-level ops table and the
 * per-request glue between a fuse_req_t and the namespace and data layers
 * below it. */
#ifndef TIERFS_FUSE_FS_H
#define TIERFS_FUSE_FS_H
#include <fuse_lowlevel.h>
#include "tierfs/fs.h"

/* The FUSE front end: low-level operations over a struct tfs_fs (userdata). */
extern const struct fuse_lowlevel_ops tfs_fuse_ops;

#endif
