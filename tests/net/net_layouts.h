/* SPDX-License-Identifier: MIT */
/* The four ring layouts the net tests run every case on. */
#ifndef VQ_NET_LAYOUTS_H
#define VQ_NET_LAYOUTS_H

#include <stdio.h>

#include <virtq/spec.h>

static const struct {
	const char *name;
	uint64_t f;
} layouts[] = {
	{ "split", 0 },
	{ "split-inorder", VQ_BIT(VQ_F_IN_ORDER) },
	{ "packed", VQ_BIT(VQ_F_RING_PACKED) },
	{ "packed-inorder", VQ_BIT(VQ_F_RING_PACKED) | VQ_BIT(VQ_F_IN_ORDER) },
};

#define RUN_LAYOUTS(fn) do {                                                \
	for (unsigned l_ = 0; l_ < sizeof(layouts) / sizeof(layouts[0]); l_++) { \
		fprintf(stderr, "-- %s [%s]\n", #fn, layouts[l_].name);     \
		fn(layouts[l_].f);                                          \
	}                                                                   \
} while (0)

#endif
