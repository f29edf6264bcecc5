/* SPDX-License-Identifier: MIT */
/* What the ring layer offers the library's upper layers, and no one else. */
#ifndef VIRTQ_RING_LIB_H
#define VIRTQ_RING_LIB_H

#include <virtq/ring.h>

#include "internal.h"

/*
 * A split ring's used index, read from the ring now, as if the config had
 * given it (vhost-user resumes a split ring where the driver's memory says
 * the device was): for a queue created by a thread that must not touch
 * guest memory, called by the thread that will run it before anything
 * else.  Nothing for a packed ring.
 */
VQ_INTERNAL void vq_dev_take_used_idx(struct vq_dev *d);

#endif
