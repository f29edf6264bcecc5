// SPDX-License-Identifier: MIT
/*
 * The checks on what the guest (and the host side) sends, one helper per
 * check: each counts its own statistic and leaves a message, the spec
 * section first, then what was wrong, with the numbers.  The device never
 * prints; vq_vsock_last_bad() hands the newest message to the caller.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "vsock_internal.h"

static void bad(struct vq_vsock *v, uint64_t *counter, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void bad(struct vq_vsock *v, uint64_t *counter, const char *fmt, ...)
{
	va_list ap;

	(*counter)++;
	va_start(ap, fmt);
	vsnprintf(v->bad_msg, sizeof(v->bad_msg), fmt, ap);
	va_end(ap);
}

static const char *type_name(uint16_t type)
{
	return type == VQ_VSOCK_TYPE_STREAM ? "stream" :
	       type == VQ_VSOCK_TYPE_SEQPACKET ? "seqpacket" : "unknown";
}

bool vs_check_chain(struct vq_vsock *v, const struct vq_chain *ch)
{
	if (ch->out_len >= VQ_VSOCK_HDR_SIZE)
		return true;
	bad(v, &v->st.bad_short_buf,
	    "5.10.6: TX chain of %" PRIu64 " readable bytes, shorter than the %u-byte header",
	    ch->out_len, VQ_VSOCK_HDR_SIZE);
	return false;
}

bool vs_check_addr(struct vq_vsock *v, uint64_t src_cid, uint64_t dst_cid)
{
	/* the host, or another guest's CID (a sibling, or a RST saying
	 * there is none) */
	bool dst_ok = dst_cid == VQ_VSOCK_CID_HOST ||
		      (dst_cid > VQ_VSOCK_CID_HOST && dst_cid != v->cfg.guest_cid &&
		       dst_cid <= 0xffffffffull);

	if (src_cid == v->cfg.guest_cid && dst_ok)
		return true;
	bad(v, &v->st.bad_addr,
	    "5.10.6.4: packet from CID %" PRIu64 " to CID %" PRIu64
	    ", not from the guest's CID %" PRIu64 " to the host's 2",
	    src_cid, dst_cid, v->cfg.guest_cid);
	return false;
}

bool vs_check_len(struct vq_vsock *v, uint32_t len, const struct vq_chain *ch)
{
	uint64_t room = ch->out_len - VQ_VSOCK_HDR_SIZE;

	if (len <= VQ_VSOCK_MAX_PKT && len <= room)
		return true;
	if (len > room)
		bad(v, &v->st.bad_len,
		    "5.10.6: header len %u, more than the %" PRIu64 " payload bytes of its chain",
		    len, room);
	else
		bad(v, &v->st.bad_len,
		    "5.10.6: header len %u, more than the largest packet's %u bytes",
		    len, VQ_VSOCK_MAX_PKT);
	return false;
}

bool vs_check_type(struct vq_vsock *v, uint16_t type, const struct vs_conn *c)
{
	bool known = type == VQ_VSOCK_TYPE_STREAM ||
		     (type == VQ_VSOCK_TYPE_SEQPACKET && v->seqpacket);

	if (known && (!c || c->type == type))
		return true;
	if (!known)
		bad(v, &v->st.bad_type, "5.10.6.4: type %u (%s) was not negotiated",
		    type, type_name(type));
	else
		bad(v, &v->st.bad_type,
		    "5.10.6.2: type %u (%s) on the %s connection of ports %u -> %u",
		    type, type_name(type), type_name(c->type), c->pport, c->lport);
	return false;
}

bool vs_check_credit(struct vq_vsock *v, const struct vs_conn *c, uint32_t len)
{
	uint32_t free_space = c->buf_alloc - (c->rx_cnt - c->fwd_cnt);

	if (len <= free_space)
		return true;
	bad(v, &v->st.bad_credit,
	    "5.10.6.3: RW of %u bytes on ports %u -> %u, beyond the %u bytes of credit left",
	    len, c->pport, c->lport, free_space);
	return false;
}

bool vs_check_rx_buf(struct vq_vsock *v, const struct vq_chain *ch)
{
	if (vs_rx_buf_usable(ch))
		return true;
	if (ch->nout)
		bad(v, &v->st.bad_rx_buf,
		    "5.10.6.4: RX buffer %u has %u device-readable descriptors",
		    ch->id, ch->nout);
	else
		bad(v, &v->st.bad_rx_buf,
		    "5.10.6.4: RX buffer %u of %" PRIu64 " bytes has no room past the %u-byte header",
		    ch->id, ch->in_len, VQ_VSOCK_HDR_SIZE);
	return false;
}

bool vs_check_ev_buf(struct vq_vsock *v, const struct vq_chain *ch)
{
	if (ch->nout == 0 && ch->in_len >= sizeof(struct vq_vsock_event))
		return true;
	bad(v, &v->st.bad_rx_buf,
	    "5.10.6.7: event buffer %u of %u readable descriptors and %" PRIu64
	    " writable bytes, not a writable %zu-byte event",
	    ch->id, ch->nout, ch->in_len, sizeof(struct vq_vsock_event));
	return false;
}

static const char *op_name(uint16_t op)
{
	static const char *const names[] = {
		"INVALID", "REQUEST", "RESPONSE", "RST", "SHUTDOWN", "RW",
		"CREDIT_UPDATE", "CREDIT_REQUEST",
	};

	return op < VQ_ARRAY_SIZE(names) ? names[op] : "unknown op";
}

void vs_bad_op(struct vq_vsock *v, const struct vs_conn *c, uint16_t op,
	       const char *why)
{
	if (c)
		bad(v, &v->st.bad_op, "5.10.6.5: %s (op %u) on ports %u -> %u: %s",
		    op_name(op), op, c->pport, c->lport, why);
	else
		bad(v, &v->st.bad_op, "5.10.6.5: %s (op %u): %s", op_name(op), op, why);
}

void vs_bad_seq(struct vq_vsock *v, const struct vs_conn *c, const char *why,
		uint32_t n)
{
	bad(v, &v->st.bad_seq, "5.10.6.6: ports %u -> %u: %s (%u)", c->pport,
	    c->lport, why, n);
}

void vs_bad_host_msg(struct vq_vsock *v, const struct vs_conn *c, uint64_t len)
{
	bad(v, &v->st.host_msg_too_big,
	    "5.10.6.6: host message of %" PRIu64 " bytes on ports %u -> %u, more than "
	    "the guest's buf_alloc %u or the device's %u: it can never be received",
	    len, c->lport, c->pport, c->peer_buf_alloc, VS_SEQ_MSG_MAX);
}
