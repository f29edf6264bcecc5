// SPDX-License-Identifier: MIT
/*
 * virtq-perf vsock, the guest side of one connection: rx (read until the
 * end, honouring --rcvlowat), tx (send --bytes or for --seconds), the
 * ping-pong's echo, and the three in whole messages (--type seqpacket).
 * Everything goes through the transport's calls (vsock_run.h), so the
 * vsock run and its UNIX socket baseline do the same work and the same
 * checks.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <virtq/runtime.h>

#include "vsock_run.h"

int vs_guest_idle(struct vs_run *n, struct vs_end *ends, unsigned nends)
{
	int r;

	if (n->o.busy_poll_us) {
		uint64_t now = vq_rt_now_ns();

		if (!n->spin_end)
			n->spin_end = now + n->o.busy_poll_us * 1000;
		/* Spin, but give the CPU to anything else runnable on it:
		 * the guest, the host program and the backend are three on
		 * a machine of two CPUs here, and a spinner that keeps its
		 * CPU delays the party that has the work (a 64 B ping-pong,
		 * both sides polling: measured in 04a9ea3). */
		if (now < n->spin_end) {
			sched_yield();
			return 0;
		}
	}
	n->spin_end = 0;
	r = n->x->wait(n, ends, nends, 200);
	if (r < 0)
		return r;
	return vs_stopped(n) ? -EPIPE : 0;
}

int vs_guest_next(struct vs_run *n, struct vs_end *ends, unsigned nends, bool moved)
{
	int p = n->x->pump(n);

	if (p < 0)
		return p;
	if (moved || p > 0) {
		vs_guest_moved(n);
		return 0;
	}
	return vs_guest_idle(n, ends, nends);
}

int vs_guest_finish(struct vs_run *n, struct vs_end *e)
{
	for (;;) {
		int r = n->x->finish(e);

		if (r != -ENOSPC)
			return r;
		if ((r = vs_guest_next(n, e, 1, false)) < 0)
			return r;
	}
}

/* Pump until the connection closed both ways or seconds passed. */
static void guest_until_closed(struct vs_run *n, struct vs_end *e, double seconds)
{
	uint64_t end = vq_rt_now_ns() + (uint64_t)(seconds * 1e9);

	while (!n->x->closed(e) && vq_rt_now_ns() < end)
		if (vs_guest_next(n, e, 1, false) < 0)
			return;
}

/* rx: read until the end, checksumming. */
static int guest_receive(struct vs_run *n, struct vs_end *e)
{
	uint8_t *buf = malloc(n->o.rcvbuf);
	struct vs_csum cs = { 0 };
	int r = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		bool eof = false;
		int p = n->x->pump(n);
		long k;

		if (p < 0) {
			r = p;
			break;
		}
		k = n->x->read(e, buf, n->o.rcvbuf, &eof);
		if (k < 0) {
			r = (int)k;
			break;
		}
		if (k > 0 || p > 0) {
			vs_csum_add(&cs, buf, (size_t)k);
			vs_guest_moved(n);
			continue;
		}
		if (eof)
			break;
		r = vs_guest_idle(n, e, 1);
		if (r < 0)
			break;
	}
	n->t_last = vq_rt_now_ns();
	n->guest_bytes = cs.off;
	n->guest_csum = vs_csum_final(&cs);
	free(buf);
	if (r == 0)
		r = vs_guest_finish(n, e);
	return r;
}

/* tx: total bytes in --buf-size writes (or until the deadline), then
 * our side closes. */
static int guest_send(struct vs_run *n, struct vs_end *e, uint64_t total,
		      uint64_t deadline)
{
	uint8_t *buf = malloc(n->o.buf_size);
	struct vs_csum cs = { 0 };
	uint64_t off = 0;
	uint32_t have = 0, at = 0;
	int r = 0;

	if (!buf)
		return -ENOMEM;
	while (off < total) {
		long w;

		if (have == at) {
			uint64_t k = n->o.buf_size;

			if (deadline && vq_rt_now_ns() >= deadline)
				break;
			if (k > total - off)
				k = total - off;
			vs_stream_fill(buf, off, k);
			vs_csum_add(&cs, buf, k);
			have = (uint32_t)k;
			at = 0;
		}
		w = n->x->write(e, buf + at, have - at);
		if (w < 0) {
			r = (int)w;
			break;
		}
		at += (uint32_t)w;
		off += (uint64_t)w;
		if ((r = vs_guest_next(n, e, 1, w > 0)) < 0)
			break;
	}
	n->guest_bytes = off;
	n->guest_csum = vs_csum_final(&cs);
	free(buf);
	if (r == 0)
		r = vs_guest_finish(n, e);
	return r;
}

/* All k bytes of buf out, pumping meanwhile. */
static int guest_write_all(struct vs_run *n, struct vs_end *e, const uint8_t *buf,
			   uint32_t k)
{
	uint32_t at = 0;

	while (at < k) {
		long w = n->x->write(e, buf + at, k - at);
		int r;

		if (w < 0)
			return (int)w;
		at += (uint32_t)w;
		if (at < k && (r = vs_guest_next(n, e, 1, w > 0)) < 0)
			return r;
	}
	return 0;
}

/* latency: echo every byte back as it comes. */
static int guest_echo(struct vs_run *n, struct vs_end *e)
{
	uint8_t *buf = malloc(n->o.buf_size);
	uint64_t want = n->o.iters * n->o.buf_size, done = 0;
	int r = 0;

	if (!buf)
		return -ENOMEM;
	while (done < want) {
		bool eof = false;
		long k = n->x->read(e, buf, n->o.buf_size, &eof);
		int p;

		if (k < 0) {
			r = (int)k;
			break;
		}
		if (k > 0) {
			r = guest_write_all(n, e, buf, (uint32_t)k);
			if (r < 0)
				break;
			done += (uint64_t)k;
		}
		p = n->x->pump(n);
		if (p < 0) {
			r = p;
			break;
		}
		if (k > 0 || p > 0) {
			vs_guest_moved(n);
			continue;
		}
		if (eof) {
			r = -ECONNRESET;
			break;
		}
		r = vs_guest_idle(n, e, 1);
		if (r < 0)
			break;
	}
	free(buf);
	return r;
}

/* ---- the transfers in whole messages (--type seqpacket) ---- */

/* The next whole message into buf, checked as message seq: its check
 * value in *check; 1 at the end of the connection when eof_ok; 0;
 * -EBADMSG with guest_err set, -errno. */
static int guest_read_msg(struct vs_run *n, struct vs_end *e, uint8_t *buf,
			  uint64_t seq, uint64_t *check, bool eof_ok)
{
	for (;;) {
		long k = n->x->read_msg(e, buf, n->o.rcvbuf);
		int p;

		if (k >= 0)
			return vs_msg_check(buf, (size_t)k, seq, n->o.buf_size, check,
					    n->guest_err, sizeof(n->guest_err)) ? 0 : -EBADMSG;
		if (k == -EPIPE)
			return eof_ok ? 1 : -ECONNRESET;
		if (k != -EAGAIN) {
			char why[sizeof(n->guest_err)];

			snprintf(why, sizeof(why), "%s",
				 n->guest_err[0] ? n->guest_err : strerror((int)-k));
			snprintf(n->guest_err, sizeof(n->guest_err), "message %" PRIu64 ": %.120s",
				 seq, why);
			return -EBADMSG;
		}
		if ((p = vs_guest_next(n, e, 1, false)) < 0)
			return p;
	}
}

/* One message, whole: 0, 1 if the deadline came first, -errno. */
static int guest_write_msg(struct vs_run *n, struct vs_end *e, const uint8_t *buf,
			   uint64_t deadline)
{
	for (;;) {
		long w = n->x->write_msg(e, buf, n->o.buf_size);
		int p;

		if (w < 0)
			return (int)w;
		p = n->x->pump(n);
		if (p < 0)
			return p;
		if (w > 0)
			return 0;
		if (deadline && vq_rt_now_ns() >= deadline)
			return 1;
		if (p > 0)
			vs_guest_moved(n);
		else if ((p = vs_guest_idle(n, e, 1)) < 0)
			return p;
	}
}

/* The device must give credit for a whole message, or it never goes. */
static int msg_fits(struct vs_run *n, struct vs_end *e)
{
	if (!e->c || vq_vsg_credit(e->c) >= n->o.buf_size)
		return 0;
	snprintf(n->guest_err, sizeof(n->guest_err),
		 "a %u-byte message is larger than the device's window (%u)",
		 n->o.buf_size, vq_vsg_credit(e->c));
	return -EMSGSIZE;
}

/* rx, tx and latency in messages; the counts and check sums go where the
 * stream versions put bytes and checksums. */
static int guest_messages(struct vs_run *n, struct vs_end *e, uint64_t total,
			  uint64_t deadline)
{
	uint32_t len = n->o.buf_size;
	uint8_t *buf = malloc(n->o.rcvbuf > len ? n->o.rcvbuf : len);
	uint64_t seq = 0, sum = 0, chk;
	int r = 0;

	if (!buf)
		return -ENOMEM;
	if (n->o.latency) {
		r = msg_fits(n, e);
		while (r == 0 && seq < n->o.iters) {
			r = guest_read_msg(n, e, buf, seq, &chk, false);
			if (r == 0)
				r = guest_write_msg(n, e, buf, 0);
			if (r == 0) {
				sum += chk;
				seq++;
			}
		}
	} else if (n->o.rx) {
		for (;;) {
			r = guest_read_msg(n, e, buf, seq, &chk, true);
			if (r)
				break;
			sum += chk;
			seq++;
		}
		n->t_last = vq_rt_now_ns();
		r = r > 0 ? 0 : r;
	} else {
		uint64_t nmsg = total == UINT64_MAX ? UINT64_MAX : (total + len - 1) / len;

		r = msg_fits(n, e);
		while (r == 0 && seq < nmsg) {
			if (deadline && vq_rt_now_ns() >= deadline)
				break;
			chk = vs_msg_fill(buf, seq, len);
			r = guest_write_msg(n, e, buf, deadline);
			if (r == 0) {
				sum += chk;
				seq++;
			}
		}
		r = r > 0 ? 0 : r;      /* the deadline came: seq was not sent */
	}
	n->guest_msgs = seq;
	n->guest_bytes = seq * len;
	n->guest_csum = sum;
	free(buf);
	if (r == 0 && !n->o.latency)
		r = vs_guest_finish(n, e);
	return r;
}

int vs_guest_transfer(struct vs_run *n, struct vs_end *e, uint64_t total, uint64_t deadline)
{
	const struct vs_opts *o = &n->o;
	int r;

	if (o->seqpacket)
		r = guest_messages(n, e, total, !o->rx && !o->latency ? deadline : 0);
	else if (o->latency)
		r = guest_echo(n, e);
	else if (o->rx)
		/* with --seconds the host ends the stream at its deadline */
		r = guest_receive(n, e);
	else
		r = guest_send(n, e, total, deadline);
	/* Let the close handshake finish (RST from the device). */
	if (r == 0 && !o->latency)
		guest_until_closed(n, e, 5);
	return r;
}
