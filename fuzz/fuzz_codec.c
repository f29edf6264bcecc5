// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the vhost-user codec.  Input: byte 0 picks how many
 * fds arrive with the message (0-9) and whether it is decoded as a request or
 * as a reply, the rest is the message.  Checks, beyond "no crash": every fd
 * not kept is closed, kept fds are among those given, and a decoded message
 * re-encodes to one that decodes to the same thing.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <virtq/vhost_user.h>

#include "spec_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *why)
{
	fprintf(stderr, "fuzz_codec: %s\n", why);
	abort();
}

static int mkfds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		fds[i] = eventfd(0, EFD_CLOEXEC);
		if (fds[i] < 0)
			die("eventfd");
	}
	return 0;
}

static bool kept(const struct vq_vhu_msg *m, int fd)
{
	for (unsigned i = 0; i < m->nfds; i++)
		if (m->fds[i] == fd)
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vq_vhu_msg m, m2;
	uint8_t buf[VQ_VHU_MSG_MAX];
	int fds[VQ_VHU_MAX_FDS + 2], fds2[VQ_VHU_MAX_FDS];
	unsigned nfds;
	bool reply, ack;
	uint32_t expect = 0, psize;
	ssize_t n;
	char err[128];
	int r;

	if (size < 1)
		return 0;
	nfds = data[0] % (VQ_VHU_MAX_FDS + 2);
	reply = data[0] & 0x80;
	ack = data[0] & 0x40;
	data++;
	size--;
	if (size >= VQ_VHU_HDR_SIZE) {
		memcpy(&expect, data, 4);
		(void)vq_vhu_check_request_hdr(data, &psize);
	}
	mkfds(fds, nfds);
	if (reply)
		r = vq_vhu_decode_reply(data, size, fds, nfds, expect, ack, &m,
					err, sizeof(err));
	else
		r = vq_vhu_decode_request(data, size, fds, nfds, 16, &m, err,
					  sizeof(err));
	if (r > 0)
		die("positive return");
	/* the spec's place first (docs/vhost-user.md, "Messages") */
	if (r < 0 && !spec_section_first(err))
		die("an error message that does not name the spec's place first");
	if (r < 0 && m.nfds)
		die("fds kept on error");
	if (m.nfds > nfds)
		die("more fds kept than given");
	for (unsigned i = 0; i < nfds; i++) {
		bool open = fcntl(fds[i], F_GETFD) >= 0;

		if (open != kept(&m, fds[i]))
			die(open ? "fd leaked" : "kept fd was closed");
	}
	if (r < 0)
		return 0;
	n = vq_vhu_encode(&m, buf, sizeof(buf));
	if (n < 0)
		die("decoded message does not re-encode");
	mkfds(fds2, m.nfds);
	if (reply)
		r = vq_vhu_decode_reply(buf, n, fds2, m.nfds, expect, ack, &m2,
					NULL, 0);
	else
		r = vq_vhu_decode_request(buf, n, fds2, m.nfds, 16, &m2, NULL, 0);
	if (r)
		die("re-encoded message does not decode");
	if (m2.request != m.request || m2.flags != m.flags ||
	    m2.kind != m.kind || m2.size != m.size ||
	    memcmp(&m2.u, &m.u, sizeof(m.u)))
		die("round trip changed the message");
	vq_vhu_msg_close_fds(&m2);
	vq_vhu_msg_close_fds(&m);
	return 0;
}
