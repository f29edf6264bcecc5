// SPDX-License-Identifier: MIT
/*
 * The vhost-user headers' growth rule (docs/DESIGN.md, "ABI"): a struct the
 * caller fills ends in reserved words the library refuses unless zero (a
 * field of a later version is never silently ignored), and the stats the
 * library fills are copied through the caller's size, so either side may
 * be the newer.
 */
#include <fcntl.h>
#include <stddef.h>
#include <sys/socket.h>
#include <unistd.h>

#include <virtq/vhost_user_backend.h>
#include <virtq/guest/frontend.h>

#include "vq_test.h"

static const struct vq_vhu_device_ops ops;

static struct vq_vhu_device device(void)
{
	return (struct vq_vhu_device){
		.name = "abi", .features = VQ_BIT(VQ_F_VERSION_1),
		.nqueues = 1, .ops = &ops,
	};
}

/* vq_vhu_backend_new: every reserved word of the device and of its ops
 * table must be zero. */
static void device_reserved_words_must_be_zero(void)
{
	struct vq_vhu_backend *b = (void *)1;
	struct vq_vhu_device d;

	for (unsigned k = 0; k < 4; k++) {
		d = device();
		d.reserved[k] = 1;
		CHECK_EQ(vq_vhu_backend_new(&d, &b), -EINVAL);
		CHECK(b == NULL);
	}
	for (unsigned k = 0; k < 4; k++) {
		struct vq_vhu_device_ops o = { .reserved = { NULL } };

		o.reserved[k] = &o;
		d = device();
		d.ops = &o;
		CHECK_EQ(vq_vhu_backend_new(&d, &b), -EINVAL);
	}
	d = device();
	CHECK_EQ(vq_vhu_backend_new(&d, &b), 0);
	vq_vhu_backend_free(b);
	/* no ops table at all is still fine */
	d.ops = NULL;
	CHECK_EQ(vq_vhu_backend_new(&d, &b), 0);
	vq_vhu_backend_free(b);
}

/* vq_vhu_frontend_connect and _adopt_fd: every reserved word of the config
 * must be zero; the adopted fd is the front-end's, closed on the refusal. */
static void frontend_config_reserved_words_must_be_zero(void)
{
	for (unsigned k = 0; k < 3; k++) {
		struct vq_vhu_frontend_config c = { .nqueues = 1, .queue_size = 64 };
		struct vq_vhu_frontend *f = (void *)1;
		int sv[2];

		c.reserved[k] = 1;
		CHECK_EQ(vq_vhu_frontend_connect("/nonexistent/vhu-abi", &c, &f), -EINVAL);
		CHECK(f == NULL);
		CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		f = (void *)1;
		CHECK_EQ(vq_vhu_frontend_adopt_fd(sv[0], &c, &f), -EINVAL);
		CHECK(f == NULL);
		CHECK_EQ(fcntl(sv[0], F_GETFD), -1);    /* closed */
		close(sv[1]);
	}
	/* all zero: past the check, to the connect itself */
	{
		struct vq_vhu_frontend_config c = { .nqueues = 1, .queue_size = 64 };
		struct vq_vhu_frontend *f;

		CHECK_EQ(vq_vhu_frontend_connect("/nonexistent/vhu-abi", &c, &f), -ENOENT);
	}
}

/* The stats copy as many bytes as the caller's struct has: an older
 * caller's smaller struct is not overrun, a newer caller's larger one is
 * zeroed past the counters this library knows. */
static void stats_copied_by_the_callers_size(void)
{
	struct vq_vhu_device d = device();
	struct vq_vhu_backend *b;
	union {
		struct vq_vhu_iotlb_stats io;
		struct vq_vhu_postcopy_stats pc;
		uint8_t raw[128];
	} u;
	size_t half = offsetof(struct vq_vhu_iotlb_stats, invalidations);

	CHECK_EQ(vq_vhu_backend_new(&d, &b), 0);
	memset(&u, 0xa5, sizeof(u));
	CHECK_EQ(vq_vhu_backend_iotlb_stats(b, &u.io, half), half);
	CHECK_EQ(u.io.misses, 0);
	CHECK_EQ(u.raw[half], 0xa5);            /* not overrun */
	memset(&u, 0xa5, sizeof(u));
	CHECK_EQ(vq_vhu_backend_iotlb_stats(b, &u.io, sizeof(u.raw)),
		 sizeof(struct vq_vhu_iotlb_stats));
	CHECK_EQ(u.io.quiesce_timeouts, 0);
	for (size_t i = sizeof(struct vq_vhu_iotlb_stats); i < sizeof(u.raw); i++)
		CHECK_EQ(u.raw[i], 0);          /* unknown to us: zero */
	memset(&u, 0xa5, sizeof(u));
	CHECK_EQ(vq_vhu_backend_postcopy_stats(b, &u.pc, sizeof(u.pc)), sizeof(u.pc));
	CHECK_EQ(u.pc.ends, 0);
	CHECK_EQ(u.raw[sizeof(u.pc)], 0xa5);
	CHECK_EQ(vq_vhu_backend_postcopy_stats(b, &u.pc, 0), 0);
	vq_vhu_backend_free(b);
}

int main(void)
{
	RUN(device_reserved_words_must_be_zero);
	RUN(frontend_config_reserved_words_must_be_zero);
	RUN(stats_copied_by_the_callers_size);
	return 0;
}
