// SPDX-License-Identifier: MIT
/* The packed virtqueue: placeholder until the layout lands. */
#include <errno.h>

#include "ring_internal.h"

int vq_packed_dev_new(const struct vq_dev_config *cfg, struct vq_dev **out)
{
	(void)cfg;
	*out = NULL;
	return -ENOTSUP;
}

int vq_packed_drv_new(const struct vq_drv_config *cfg, struct vq_drv **out)
{
	(void)cfg;
	*out = NULL;
	return -ENOTSUP;
}
