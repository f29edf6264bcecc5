// SPDX-License-Identifier: MIT
/* The library's own version, for programs to compare against the headers
 * they were built with (virtq/version.h). */
#include <virtq/version.h>

const char *vq_version(void)
{
	return VIRTQ_VERSION;
}

unsigned vq_version_number(void)
{
	return VIRTQ_VERSION_NUMBER;
}
