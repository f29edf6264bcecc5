// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the virtio-vsock device (src/vsock/vsock.c, built in
 * with coverage): a hostile guest's TX packets and a host side that writes,
 * reads, half-closes and closes its sockets, of both types, in any order.
 * Beyond "no crash": the device's rings never break on packets alone, the
 * connection count stays within the table, and every host socket and
 * buffer is gone when the device is freed.
 *
 * Record: u8 op, u8 arg, u16 len, len bytes.
 *   op 0  a guest packet: a valid header template with fields taken from
 *         the bytes (op, type, flags, len, credit, ports), the rest payload
 *         (or, flags bit 7, a made-up payload of up to 64 KiB, so that short
 *         inputs can fill windows); arg bit 7 sends the bytes raw instead;
 *         arg bit 6 sends it 1 + (arg & 7) times, one burst of packets
 *   op 1  host writes the bytes to host socket arg (one message if
 *         seqpacket; arg bit 6: 60 KiB made-up bytes instead)
 *   op 2  host reads everything pending on socket arg
 *   op 3  host closes (arg bit 7: shuts down writing) socket arg
 *   op 4  host attaches a new socket (arg bit 0: seqpacket) and writes the
 *         bytes on it (the CONNECT line, or junk)
 *   op 5  the guest listens on, or connects to, a port (stream or seqpacket)
 *   op 6  a hostile device: a packet forged straight into the guest
 *         driver's next RX buffer (header fields from the bytes, CIDs,
 *         ports, op, type, flags, credit; len the truth or, arg bit 6, a
 *         lie; the used length exact or, arg bit 7, short): the guest
 *         driver counts what makes no sense and never breaks on it
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vsock_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	if (!d)
		abort();
	while ((de = readdir(d)))
		n++;
	closedir(d);
	return n;
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void guest_packet(struct fx *f, uint8_t arg, const uint8_t *p, uint16_t len)
{
	static uint8_t pkt[VQ_VSOCK_HDR_SIZE + 70000];
	struct vq_vsock_hdr h;
	uint32_t plen;

	if ((arg & 0x80) || len < 16) {
		vq_vsg_send_bytes(f->g, p, len);
		return;
	}
	vq_vsg_hdr(f->g, &h, 50000 + (p[15] & 3), 10 + ((p[15] >> 2) & 3),
		   p[0] % 9, 0);
	h.type = vq_le16(p[1] % 4 == 3 ? p[1] : 1 + p[1] % 2);
	h.flags = vq_le32(p[2] & 0x7f);
	h.buf_alloc = vq_le32(rd32(p + 7) & 0x7ffff);
	h.fwd_cnt = vq_le32(rd32(p + 11));
	if (p[2] & 0x80) {
		plen = rd32(p + 3) % (VQ_VSOCK_MAX_PKT + 1);
		memset(pkt + sizeof(h), p[15], plen);
		h.len = vq_le32(plen);
	} else {
		plen = len - 16u;
		memcpy(pkt + sizeof(h), p + 16, plen);
		/* mostly the true payload length, sometimes a lie */
		h.len = vq_le32(p[3] & 1 ? rd32(p + 3) : plen);
	}
	memcpy(pkt, &h, sizeof(h));
	for (unsigned i = 0; i < (arg & 0x40 ? 1u + (arg & 7) : 1u); i++)
		vq_vsg_send_bytes(f->g, pkt, (uint32_t)sizeof(h) + plen);
}

static void forged_rx(struct fx *f, uint8_t arg, const uint8_t *p, uint16_t len)
{
	struct iovec iov[8];
	struct vq_chain ch = { .iov = iov, .iov_max = 8 };
	struct vq_vsock_hdr h;
	uint32_t plen, used, at = 0;
	const uint8_t *src;

	if (len < 16 || vq_dev_pop(f->vq.dq[VQ_VSOCK_RXQ], &ch) != 1)
		return;
	memset(&h, 0, sizeof(h));
	h.src_cid = vq_le64(p[0] & 0x80 ? p[1] : VQ_VSOCK_CID_HOST);
	h.dst_cid = vq_le64(p[0] & 0x40 ? p[1] : FX_CID);
	h.src_port = vq_le32(10 + (p[2] & 7));
	h.dst_port = vq_le32(p[2] & 8 ? 10 + (p[3] & 7) : 50000 + (p[3] & 7));
	h.type = vq_le16(p[4] % 4);
	h.op = vq_le16(p[5] % 9);
	h.flags = vq_le32(p[6]);
	h.buf_alloc = vq_le32(rd32(p + 7) & 0x7ffff);
	h.fwd_cnt = vq_le32(p[11] & 1 ? rd32(p + 12) : 0);
	plen = len - 16u;
	if (plen > ch.in_len - sizeof(h))
		plen = (uint32_t)(ch.in_len - sizeof(h));
	h.len = vq_le32(arg & 0x40 ? rd32(p + 12) : plen);
	/* header, then payload, across the chain's writable parts */
	for (unsigned i = ch.nout; i < ch.nout + ch.nin; i++) {
		uint8_t *dst = iov[i].iov_base;

		for (size_t k = 0; k < iov[i].iov_len && at < sizeof(h) + plen; k++, at++) {
			src = at < sizeof(h) ? (const uint8_t *)&h + at : p + 16 + (at - sizeof(h));
			dst[k] = *src;
		}
	}
	used = (uint32_t)sizeof(h) + plen;
	if (arg & 0x80)
		used = p[0] % (used + 1);
	if (vq_dev_push(f->vq.dq[VQ_VSOCK_RXQ], &ch, used) < 0)
		abort();
}

static int host_fd(struct fx *f, uint8_t arg)
{
	if (!f->nhost)
		return -1;
	return f->host[(arg & 0x7f) % f->nhost];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct fx_opts o = { .rx_buf_size = 1024, .guest_buf_alloc = 65536,
					  .dev_buf_alloc = 65536, .max_conns = 16 };
	static uint8_t buf[1 << 17];
	struct fx f;
	struct vq_vsg_conn *gc;
	size_t pos = 0;
	int fds0 = count_fds();

	fx_init(&f, &o);
	for (uint32_t port = 10; port < 14; port++)
		fx_listen(&f, port);
	while (pos + 4 <= size) {
		uint8_t op = data[pos], arg = data[pos + 1];
		uint16_t len = (uint16_t)(data[pos + 2] | data[pos + 3] << 8);
		const uint8_t *p = data + pos + 4;
		int fd, sv[2];

		pos += 4;
		if (len > size - pos)
			len = (uint16_t)(size - pos);
		pos += len;
		switch (op % 7) {
		case 0:
			guest_packet(&f, arg, p, len);
			break;
		case 1:
			if ((fd = host_fd(&f, arg)) < 0)
				break;
			if (arg & 0x40) {
				memset(buf, arg, 60 << 10);
				(void)!send(fd, buf, 60 << 10, MSG_DONTWAIT | MSG_NOSIGNAL);
			} else {
				(void)!send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
			}
			break;
		case 2:
			if ((fd = host_fd(&f, arg)) >= 0)
				while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
					;
			break;
		case 3:
			if ((fd = host_fd(&f, arg)) < 0)
				break;
			if (arg & 0x80) {
				shutdown(fd, SHUT_WR);
			} else {
				unsigned i = (arg & 0x7f) % f.nhost;

				close(fd);
				f.host[i] = f.host[--f.nhost];
			}
			break;
		case 4:
			if (f.nhost >= FX_MAX_HOST ||
			    socketpair(AF_UNIX, (arg & 1 ? SOCK_SEQPACKET : SOCK_STREAM) |
				       SOCK_CLOEXEC, 0, sv) < 0)
				break;
			fx_set_nonblock(sv[0]);
			fx_set_nonblock(sv[1]);
			f.host[f.nhost++] = sv[1];
			vq_vsock_host_attach(f.dev, sv[0]);
			(void)!send(sv[1], p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
			break;
		case 5:
			if (arg & 1)
				vq_vsg_listen(f.g, 10 + ((arg >> 1) & 7));
			else
				vq_vsg_connect(f.g, 10 + ((arg >> 1) & 7),
					       arg & 0x10 ? VQ_VSOCK_TYPE_SEQPACKET :
							    VQ_VSOCK_TYPE_STREAM, &gc);
			break;
		case 6:
			forged_rx(&f, arg, p, len);
			break;
		}
		fx_round(&f);
		if (vq_vsock_conn_count(f.dev) > o.max_conns)
			abort();
	}
	fx_settle(&f);
	fx_fini(&f);
	/* every host socket (the device's ends, ours were closed by fx_fini)
	 * and every guest-memory mapping is gone */
	if (count_fds() != fds0)
		abort();
	return 0;
}
