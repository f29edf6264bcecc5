// SPDX-License-Identifier: MIT
/*
 * The version a program was built with and the one it runs with
 * (virtq/version.h): both are the project's version in meson.build, given
 * to this test as its argument, and the macros agree with each other.
 * Linked against the shared library, as a program that checks would be.
 */
#include <stdio.h>

#include <virtq/version.h>

#include "vq_test.h"

static const char *project_version;

/* The header's macros say the project's version, and the number orders
 * them as 0xMMmmpp. */
static void header_is_project_version(void)
{
	char s[64];

	snprintf(s, sizeof(s), "%d.%d.%d", VIRTQ_VERSION_MAJOR,
		 VIRTQ_VERSION_MINOR, VIRTQ_VERSION_PATCH);
	CHECK(strcmp(s, project_version) == 0);
	CHECK(strcmp(VIRTQ_VERSION, project_version) == 0);
	CHECK_EQ(VIRTQ_VERSION_NUMBER, (VIRTQ_VERSION_MAJOR << 16) |
		 (VIRTQ_VERSION_MINOR << 8) | VIRTQ_VERSION_PATCH);
	CHECK(VIRTQ_VERSION_ENCODE(0, 1, 0) < VIRTQ_VERSION_ENCODE(0, 2, 0));
	CHECK(VIRTQ_VERSION_ENCODE(0, 255, 255) < VIRTQ_VERSION_ENCODE(1, 0, 0));
}

/* The library this program runs with is the one the headers describe. */
static void library_is_header_version(void)
{
	CHECK(vq_version() != NULL);
	CHECK(strcmp(vq_version(), VIRTQ_VERSION) == 0);
	CHECK_EQ(vq_version_number(), VIRTQ_VERSION_NUMBER);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s PROJECT_VERSION\n", argv[0]);
		return 1;
	}
	project_version = argv[1];
	RUN(header_is_project_version);
	RUN(library_is_header_version);
	return 0;
}
