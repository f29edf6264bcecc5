// SPDX-License-Identifier: MIT
/* The split virtqueue: placeholder until the layout lands. */
#include <errno.h>

#include "ring_internal.h"

int vq_split_dev_new(const struct vq_dev_config *cfg, struct vq_dev **out)
{
	(void)cfg;
	*out = NULL;
	return -ENOTSUP;
}

int vq_split_drv_new(const struct vq_drv_config *cfg, struct vq_drv **out)
{
	(void)cfg;
	*out = NULL;
	return -ENOTSUP;
}
