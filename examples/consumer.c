// SPDX-License-Identifier: MIT
/*
 * The smallest program built against the INSTALLED headers and library
 * (scripts/test.sh does this after `meson install`): every public header
 * compiles on its own with -Wall -Wextra -Werror, and the library links.
 */
#include <virtq/spec.h>
#include <virtq/mem.h>
#include <virtq/ring.h>
#include <virtq/runtime.h>
#include <virtq/vhost_user.h>
#include <virtq/vhost_user_backend.h>
#include <virtq/guest/frontend.h>
#include <virtq/net.h>
#include <virtq/vsock.h>
#include <virtq/version.h>

#include <stdio.h>

int main(void)
{
	uint64_t off[3];
	uint64_t size = vq_ring_layout(VQ_BIT(VQ_F_VERSION_1), 256, off);

	/* descriptors 16 x 256, avail 6 + 2 x 256, used at the next 64-byte
	 * boundary (4672), 6 + 8 x 256 long */
	if (size != 6726 || off[0] != 0 || off[1] != 4096 || off[2] != 4672) {
		fprintf(stderr, "unexpected split layout: size %llu\n", (unsigned long long)size);
		return 1;
	}
	if (vq_version_number() != VIRTQ_VERSION_NUMBER) {
		fprintf(stderr, "headers say %s, library says %s\n", VIRTQ_VERSION, vq_version());
		return 1;
	}
	printf("consumer: libvirtq %s links; a 256-entry split ring takes %llu bytes\n",
	       vq_version(), (unsigned long long)size);
	return 0;
}
