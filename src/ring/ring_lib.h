/* SPDX-License-Identifier: MIT */
/* What the ring layer offers the library's upper layers, and no one else. */
#ifndef VIRTQ_RING_LIB_H
#define VIRTQ_RING_LIB_H

#include <virtq/ring.h>

#include "util.h"

/*
 * A split ring resumes where the driver's memory says the device was
 * (vhost-user gives only the avail index), but the thread that creates
 * the queue may be one that must not touch guest memory.  It marks the
 * new queue's used index unread; the thread that runs the queue then
 * reads it, before anything else, as if the config had given it.  A queue
 * already read (one that is started again after a disable) is left as it
 * is, and so is a packed ring.
 */
VQ_INTERNAL void vq_dev_defer_used_idx(struct vq_dev *d);
VQ_INTERNAL void vq_dev_take_used_idx(struct vq_dev *d);

#endif
