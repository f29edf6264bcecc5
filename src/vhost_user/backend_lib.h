/* SPDX-License-Identifier: MIT */
/* What the vhost-user back-end offers the device framework above it. */
#ifndef VIRTQ_VHU_BACKEND_LIB_H
#define VIRTQ_VHU_BACKEND_LIB_H

#include <virtq/vhost_user_backend.h>

#include "util.h"

/* The device reads a split ring's used index on the thread that runs the
 * ring (vq_dev_take_used_idx): the control thread never touches guest
 * memory, whose pages a postcopy front-end may never serve. */
VQ_INTERNAL void vhu_backend_defer_used_idx(struct vq_vhu_backend *b);

/* Let go of every thread a front-end's resources hold (control thread):
 * the ranges registered with a postcopy userfaultfd are unregistered,
 * which wakes the threads waiting on their faults. */
VQ_INTERNAL void vhu_backend_unstall(struct vq_vhu_backend *b);

#endif
