/* SPDX-License-Identifier: MIT */
/* What the runtime layer offers the library's upper layers, and no one else. */
#ifndef VIRTQ_RUNTIME_LIB_H
#define VIRTQ_RUNTIME_LIB_H

#include <virtq/runtime.h>

#include "util.h"

/*
 * An fd that only wakes the loop from its sleep (vq_rt_loop_add_fd
 * otherwise): its owner learns what it signals from memory, *pending,
 * which it reads between rounds itself.  So a busy loop never asks epoll
 * about it (every fd on the loop costs the busy rounds an epoll_wait now
 * and then), and a busy-poll window ends as soon as *pending is non-zero.
 * At most one per loop.  0, -EBUSY (the loop has one), or as
 * vq_rt_loop_add_fd.
 */
VQ_INTERNAL int vq_rt_loop_add_waker(struct vq_rt_loop *l, int fd, vq_rt_fd_fn cb,
				     void *arg, const int *pending);

#endif
