// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the device side of the rings (src/ring/, built in
 * with coverage), split and packed, IN_ORDER, EVENT_IDX and indirect on or
 * off: a hostile driver writes descriptors, indirect tables, avail entries
 * and indices, and any other byte of the ring, between the device's pops,
 * fills, flushes, unpops and notification calls.
 *
 * Beyond "no crash": every iovec the device hands out lies inside guest
 * memory (and is written there, as a device would), a broken queue stays
 * broken and refuses work, and a fill the rules forbid is refused.  Each
 * ring area ends at an inaccessible page, so reading one entry past it
 * faults.
 *
 * With config bit 6 the ring is a virtio-net queue (src/net/net.c) and
 * the device commands are the net layer's: bit 7 picks the receive queue
 * (frames of any size delivered one by one or in bursts, mergeable buffers
 * when config byte 2 bit 0 says MRG_RXBUF) or the transmit queue (drained
 * into a sink that reads every frame, CSUM with bit 1).  Bit 3 adds the
 * other offloads (TSO, ECN, GUEST_CSUM): the sink checks that a header it
 * gets asks for no more than was negotiated, and RX frames may carry a
 * header made of input bytes.
 *
 * With config byte 2 bit 2 the roles turn: the input is a hostile device
 * writing used entries (split) or used descriptors (packed) and any ring
 * byte, against the driver side (split_drv.c, packed_drv.c) adding buffers, getting
 * used ones and switching callbacks.  Every token it returns must be one
 * outstanding, once, with a length no larger than the buffer's writable
 * part; what it detaches at the end must be the rest.
 *
 * Input: one config byte (bit 0 packed, 1 IN_ORDER, 2 EVENT_IDX, 3
 * INDIRECT_DESC, bits 4-5 the queue size 4/8/64/256, 6 net, 7 receive
 * queue), a second config byte, then commands of a byte each with their
 * arguments (see the switches).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <virtq/net.h>
#include <virtq/ring.h>
#include <virtq/spec.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define GBASE  0x100000ull              /* guest-physical base of the region */
#define GSIZE  (1u << 20)
#define MAXC   256u                     /* chains held (popped, not filled) */
#define IOVS   8u

struct rd {
	const uint8_t *p;
	size_t n;
};

static uint64_t take(struct rd *r, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++) {
		v |= (uint64_t)(r->n ? *r->p : 0) << (8 * i);
		if (r->n) {
			r->p++;
			r->n--;
		}
	}
	return v;
}

static uint8_t *guest;
static uint8_t *rings;                  /* 3 areas, each ending at a guard page */
#define PG 4096u

/* Most addresses inside guest memory (so chains get far), some anywhere. */
static uint64_t addr_of(uint32_t v)
{
	return v & 0x80000000u ? (uint64_t)v << 8 : GBASE + (v % GSIZE);
}

static bool in_guest(const void *p, size_t l)
{
	uintptr_t b = (uintptr_t)p;

	return b >= (uintptr_t)guest && l <= GSIZE && b - (uintptr_t)guest <= GSIZE - l;
}

/* TX sink: a frame is read whole, from guest memory only, and its header
 * asks only for what was negotiated (arg: the features), by its rules. */
static int sink(void *arg, const struct iovec *iov, unsigned n, uint32_t len,
		const struct vq_net_hdr *h)
{
	uint64_t f = *(const uint64_t *)arg;
	uint8_t x = 0, type = h->gso_type & ~VQ_NET_HDR_GSO_ECN;
	uint64_t total = 0;

	if (!(f & VQ_BIT(VQ_NET_F_CSUM)) && (h->flags || h->gso_type))
		abort();
	if ((h->flags & VQ_NET_HDR_F_NEEDS_CSUM) &&
	    (uint32_t)h->csum_start + h->csum_offset + 2 > len)
		abort();
	if (h->gso_type &&
	    (!(h->flags & VQ_NET_HDR_F_NEEDS_CSUM) || h->gso_size < VQ_NET_MIN_GSO_SIZE ||
	     ((h->gso_type & VQ_NET_HDR_GSO_ECN) && !(f & VQ_BIT(VQ_NET_F_HOST_ECN))) ||
	     !((type == VQ_NET_HDR_GSO_TCPV4 && (f & VQ_BIT(VQ_NET_F_HOST_TSO4))) ||
	       (type == VQ_NET_HDR_GSO_TCPV6 && (f & VQ_BIT(VQ_NET_F_HOST_TSO6))))))
		abort();
	for (unsigned i = 0; i < n; i++) {
		if (!in_guest(iov[i].iov_base, iov[i].iov_len))
			abort();
		for (size_t k = 0; k < iov[i].iov_len; k += 64)
			x ^= ((const uint8_t *)iov[i].iov_base)[k];
		total += iov[i].iov_len;
	}
	if (total != len)
		abort();
	__asm__ volatile("" : : "r"(x));        /* the reads happen */
	return len % 7 == 3 ? VQ_NET_SINK_DROP(VQ_NET_DROP_SINK) : 0;
}

/* The net layer's turn: command c with its arguments. */
static void net_cmd(struct vq_net_queue *q, bool rx, uint64_t feat, uint8_t c,
		    struct rd *r)
{
	static uint8_t frame[VQ_NET_MAX_FRAME + 64];
	struct iovec fi[3];
	struct vq_net_hdr h;
	uint8_t hb[12];
	uint32_t len;

	if (!rx) {
		vq_net_tx_process(q, 1 + c % 64, sink, &feat, NULL);
		return;
	}
	switch (c % 3) {
	case 0:         /* one frame, in up to three pieces, maybe a header */
		len = (uint32_t)take(r, 3) % (VQ_NET_MAX_FRAME + 16);
		memset(frame, 0x5a, len < sizeof(frame) ? len : sizeof(frame));
		fi[0] = (struct iovec){ frame, len / 3 };
		fi[1] = (struct iovec){ frame + len / 3, len / 3 };
		fi[2] = (struct iovec){ frame + 2 * (len / 3), len - 2 * (len / 3) };
		for (unsigned i = 0; i < sizeof(hb); i++)
			hb[i] = (uint8_t)take(r, 1);
		vq_net_hdr_decode(hb, 12, &h);
		if (len <= sizeof(frame))
			vq_net_rx_deliver(q, fi, 3, len, c & 0x80 ? &h : NULL);
		break;
	case 1: {       /* a burst of small frames */
		struct vq_net_frame f[VQ_NET_BURST];
		struct iovec one = { frame, 0 };
		unsigned n = 1 + (unsigned)take(r, 1) % VQ_NET_BURST;

		one.iov_len = 14 + (size_t)take(r, 2) % 3000;
		for (unsigned i = 0; i < n; i++)
			f[i] = (struct vq_net_frame){ &one, 1, (uint32_t)one.iov_len, NULL };
		vq_net_rx_deliver_burst(q, f, n);
		break;
	}
	default:
		vq_net_rx_flush(q);
		break;
	}
}

/* Any bytes anywhere in the ring areas (either side misbehaving). */
static void ring_poke(struct rd *r)
{
	uint16_t o = (uint16_t)take(r, 2);
	unsigned n = (unsigned)take(r, 1) % 16;
	uint8_t *pg = rings + 2 * PG * (o % 3);

	for (unsigned i = 0; i < n; i++)
		pg[(o / 3 + i) % PG] = (uint8_t)take(r, 1);
}

#define DBUFS 1024u
static struct dbuf {
	bool live;
	uint32_t in_len;
} dbufs[DBUFS];

/* A returned token: one of ours, outstanding, and a length that fits. */
static void drv_returned(void *tok, uint32_t len, bool check_len)
{
	uintptr_t i = (uintptr_t)tok - 1;

	if (i >= DBUFS || !dbufs[i].live || (check_len && len > dbufs[i].in_len))
		abort();
	dbufs[i].live = false;
}

/* The driver side against a hostile device (config byte 2 bit 2). */
static void drv_session(struct rd *r, uint64_t feat, uint16_t num, uint8_t *area[3])
{
	bool packed = feat & VQ_BIT(VQ_F_RING_PACKED);
	struct vq_drv_config dc = {
		.features = feat, .num = num, .ring = { area[0], area[1], area[2] },
		.indirect = guest + (64 << 10), .indirect_gpa = GBASE + (64 << 10),
		.indirect_max = 16,
	};
	struct vq_drv *q;
	unsigned steps = 0, next = 0;
	void *toks[32];
	uint32_t lens[32];

	memset(dbufs, 0, sizeof(dbufs));
	if (vq_drv_new(&dc, &q))
		abort();
	while (r->n && steps++ < 4096) {
		uint8_t cmd = (uint8_t)take(r, 1);
		int k;

		switch (cmd % 8) {
		case 0: {       /* device writes a used entry / descriptor */
			uint16_t slot = (uint16_t)(take(r, 1) % num);
			uint32_t id = (uint32_t)(take(r, 1) % (num + 2));
			uint32_t len = (uint32_t)take(r, 3);
			uint16_t flags = (uint16_t)take(r, 2);

			if (packed) {
				struct vq_packed_desc *pd = (void *)area[0];

				pd[slot].id = (uint16_t)id;
				pd[slot].len = len;
				__atomic_store_n(&pd[slot].flags, flags, __ATOMIC_RELEASE);
			} else {
				struct vq_used *u = (void *)area[2];

				u->ring[slot] = (struct vq_used_elem){ id, len };
			}
			break;
		}
		case 1: {       /* device moves used->idx (split) */
			struct vq_used *u = (void *)area[2];

			if (!packed)
				__atomic_store_n(&u->idx, (uint16_t)(u->idx + take(r, 1) % 9),
						 __ATOMIC_RELEASE);
			break;
		}
		case 2:
			ring_poke(r);
			break;
		case 3: {       /* driver adds a buffer of up to 4 segments */
			struct vq_seg seg[4];
			unsigned nout = (unsigned)take(r, 1) % 3, nin = (unsigned)take(r, 1) % 3;
			uint32_t in_len = 0;

			if (!nout && !nin)
				nin = 1;
			for (unsigned i = 0; i < nout + nin; i++) {
				seg[i] = (struct vq_seg){ GBASE + (128 << 10) + (take(r, 2) << 3),
							  (uint32_t)take(r, 2) + 1 };
				if (i >= nout)
					in_len += seg[i].len;
			}
			if (dbufs[next % DBUFS].live)
				break;
			k = vq_drv_add(q, seg, nout, nin, (void *)(uintptr_t)(next % DBUFS + 1));
			if (k == 0) {
				dbufs[next % DBUFS] = (struct dbuf){ true, in_len };
				next++;
			}
			break;
		}
		case 4:         /* driver takes used buffers */
			k = vq_drv_get_burst(q, toks, lens, 1 + (unsigned)take(r, 1) % 32);
			for (int i = 0; i < k; i++)
				drv_returned(toks[i], lens[i], true);
			break;
		case 5:
			vq_drv_kick_prepare(q);
			break;
		case 6:
			switch (take(r, 1) % 4) {
			case 0: vq_drv_disable_cb(q); break;
			case 1: vq_drv_enable_cb(q); break;
			case 2: vq_drv_enable_cb_delayed(q); break;
			default: (void)vq_drv_has_used(q); break;
			}
			break;
		default: {      /* a broken queue refuses buffers */
			struct vq_seg s = { GBASE + (128 << 10), 64 };

			if (vq_drv_error(q) && vq_drv_add(q, &s, 0, 1, (void *)1) >= 0)
				abort();
			break;
		}
		}
	}
	/* the device stopped: the rest comes back, each once */
	for (void *t; (t = vq_drv_detach_unused(q));)
		drv_returned(t, 0, false);
	for (unsigned i = 0; i < DBUFS; i++)
		if (dbufs[i].live)
			abort();
	vq_drv_free(q);
}

static void check_iov(const struct vq_chain *c)
{
	for (unsigned i = 0; i < c->nout + c->nin; i++) {
		uintptr_t b = (uintptr_t)c->iov[i].iov_base;
		size_t l = c->iov[i].iov_len;

		if (b < (uintptr_t)guest || l > GSIZE ||
		    b - (uintptr_t)guest > GSIZE - l)
			abort();        /* outside guest memory */
		if (i >= c->nout)
			memset(c->iov[i].iov_base, 0xd5, l);    /* device writes */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t nums[4] = { 4, 8, 64, 256 };
	static struct iovec iov[MAXC][IOVS];
	static struct vq_chain held[MAXC];
	struct rd r = { data, size };
	uint8_t cfg = (uint8_t)take(&r, 1), cfg2 = (uint8_t)take(&r, 1);
	bool net = cfg & 0x40, rx = cfg & 0x80;
	struct vq_net_queue *nq = NULL;
	uint64_t feat = VQ_BIT(VQ_F_VERSION_1) |
		(net && (cfg2 & 1) ? VQ_BIT(VQ_NET_F_MRG_RXBUF) : 0) |
		(net && (cfg2 & 2) ? VQ_BIT(VQ_NET_F_CSUM) : 0) |
		/* the offloads, HOST_* even without CSUM (the layer must
		 * not read a header then) */
		(net && (cfg2 & 8) ? VQ_NET_OFFLOADS & ~VQ_BIT(VQ_NET_F_CSUM) : 0) |
		(cfg & 1 ? VQ_BIT(VQ_F_RING_PACKED) : 0) |
		(cfg & 2 ? VQ_BIT(VQ_F_IN_ORDER) : 0) |
		(cfg & 4 ? VQ_BIT(VQ_F_EVENT_IDX) : 0) |
		(cfg & 8 ? VQ_BIT(VQ_F_INDIRECT_DESC) : 0);
	uint16_t num = nums[(cfg >> 4) & 3], avail_idx = 0;
	bool packed = cfg & 1;
	uint64_t off[3], ring_size;
	struct vq_mem_region reg;
	struct vq_mem *mem;
	struct vq_dev *d;
	unsigned nheld = 0, steps = 0;

	uint8_t *area[3];

	if (!guest) {
		guest = mmap(NULL, GSIZE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		rings = mmap(NULL, 6 * PG, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (guest == MAP_FAILED || rings == MAP_FAILED)
			abort();
		for (unsigned i = 1; i < 6; i += 2)
			mprotect(rings + i * PG, PG, PROT_NONE);
	}
	memset(guest, 0, 64 << 10);     /* the indirect table's neighbourhood */
	for (unsigned i = 0; i < 6; i += 2)
		memset(rings + i * PG, 0, PG);
	ring_size = vq_ring_layout(feat, num, off);
	if (!ring_size)
		abort();
	/* each area's last byte just before its guard page (4-byte aligned) */
	for (unsigned i = 0; i < 3; i++) {
		uint64_t sz = (i < 2 ? off[i + 1] : ring_size) - off[i];

		area[i] = rings + (2 * i + 1) * PG - ((sz + 3) & ~3ull);
	}
	/* Two regions meeting in the middle, over the same pages: a burst's
	 * descriptors move between them and some cross from one into the
	 * other (the device caches a burst's region, ring_internal.h). */
	vq_mem_new(&mem);
	reg = (struct vq_mem_region){ .gpa = GBASE, .size = GSIZE / 2,
				      .uaddr = (uintptr_t)guest, .hva = guest };
	if (!mem || vq_mem_add(mem, &reg))
		abort();
	reg = (struct vq_mem_region){ .gpa = GBASE + GSIZE / 2, .size = GSIZE / 2,
				      .uaddr = (uintptr_t)guest + GSIZE / 2,
				      .hva = guest + GSIZE / 2 };
	if (vq_mem_add(mem, &reg))
		abort();
	if (cfg2 & 4) {
		drv_session(&r, feat, num, area);
		vq_mem_free(mem);
		return 0;
	}
	{
		struct vq_dev_config vc = {
			.features = feat, .num = num, .mem = mem,
			.ring = { area[0], area[1], area[2] },
			.avail_idx = packed ? 0x8000 : 0, .used_idx = packed ? 0x8000 : 0,
		};

		if (vq_dev_new(&vc, &d))
			abort();
	}
	if (net) {
		struct vq_net_queue_config nc = {
			.dev = d, .role = rx ? VQ_NET_RX : VQ_NET_TX,
			.used_batch = cfg2 >> 4,
		};

		if (vq_net_queue_new(&nc, &nq))
			abort();
	}
	for (unsigned i = 0; i < MAXC; i++)
		held[i] = (struct vq_chain){ .iov = iov[i], .iov_max = IOVS };

	while (r.n && steps++ < 4096) {
		uint8_t cmd = (uint8_t)take(&r, 1);
		int k;

		/* the net layer drives the device: no chains of our own */
		if (net && cmd % 10 >= 4 && cmd % 10 <= 7) {
			net_cmd(nq, rx, feat, cmd, &r);
			continue;
		}
		switch (cmd % 10) {
		case 0: {       /* driver writes a descriptor */
			uint16_t slot = (uint16_t)(take(&r, 1) % num);
			uint64_t a = addr_of((uint32_t)take(&r, 4));
			uint32_t len = (uint32_t)take(&r, 3);
			uint16_t flags = (uint16_t)take(&r, 2), nx = (uint16_t)take(&r, 2);

			if (packed) {
				struct vq_packed_desc *pd = (void *)area[0];

				pd[slot] = (struct vq_packed_desc){ a, len, nx, flags };
			} else {
				struct vq_desc *sd = (void *)area[0];

				sd[slot] = (struct vq_desc){ a, len, flags, nx };
			}
			break;
		}
		case 1: {       /* driver makes heads available (split) */
			struct vq_avail *av = (void *)area[1];
			unsigned cnt = (unsigned)take(&r, 1) % 8;

			if (packed)
				break;  /* its descriptors' flags say it */
			for (unsigned i = 0; i < cnt; i++)
				av->ring[(avail_idx + i) % num] = (uint16_t)(take(&r, 1) % (num + 2));
			avail_idx = (uint16_t)(avail_idx + cnt);
			__atomic_store_n(&av->idx, avail_idx, __ATOMIC_RELEASE);
			break;
		}
		case 2: {       /* driver writes an indirect table entry at 32 KiB */
			struct vq_desc *t = (void *)(guest + (32 << 10));
			uint8_t i = (uint8_t)take(&r, 1);
			uint64_t a = addr_of((uint32_t)take(&r, 4));
			uint32_t len = (uint32_t)take(&r, 2);
			uint16_t flags = (uint16_t)take(&r, 1), nx = (uint16_t)take(&r, 1);

			t[i] = (struct vq_desc){ a, len, flags, nx };
			break;
		}
		case 3:
			ring_poke(&r);
			break;
		case 4: {       /* device pops a burst */
			unsigned want = 1 + (unsigned)take(&r, 1) % 32;

			if (want > MAXC - nheld)
				want = MAXC - nheld;
			if (!want)
				break;
			k = vq_dev_pop_burst(d, &held[nheld], want);
			if (k > (int)want)
				abort();
			for (int i = 0; i < k; i++)
				check_iov(&held[nheld + i]);
			if (k > 0)
				nheld += (unsigned)k;
			if (vq_dev_error(d) && k == 0)
				abort();        /* a broken queue says so */
			break;
		}
		case 5: {       /* device fills the oldest held chain */
			uint32_t len = (uint32_t)take(&r, 3);

			if (!nheld)
				break;
			if (len > held[0].in_len + 1)
				len = (uint32_t)(held[0].in_len + (len & 1));
			k = vq_dev_fill(d, &held[0], len);
			if (len > held[0].in_len && k >= 0)
				abort();        /* more than the buffer holds */
			if (k >= 0) {
				struct iovec *keep = held[0].iov;

				memmove(held, held + 1, (nheld - 1) * sizeof(held[0]));
				nheld--;
				held[nheld] = (struct vq_chain){ .iov = keep, .iov_max = IOVS };
			}
			break;
		}
		case 6:
			vq_dev_flush(d);
			break;
		case 7: {       /* device gives the newest held chains back */
			unsigned n = 1 + (unsigned)take(&r, 1) % 4;

			if (n > nheld)
				n = nheld;
			if (n && vq_dev_unpop(d, &held[nheld - n], n) >= 0)
				nheld -= n;
			break;
		}
		case 8:
			switch (take(&r, 1) % 5) {
			case 0: vq_dev_disable_notify(d); break;
			case 1: vq_dev_enable_notify(d); break;
			case 2: (void)vq_dev_should_signal(d); break;
			case 3:
				/* a call owed is owed once: nothing was
				 * published since, whatever the driver wrote */
				if (vq_dev_signal_owed(d) &&
				    (vq_dev_signal_owed(d) || vq_dev_should_signal(d)))
					abort();
				break;
			default: (void)vq_dev_has_avail(d); break;
			}
			break;
		default: {      /* a broken queue refuses work */
			struct vq_chain c = { .iov = iov[MAXC - 1], .iov_max = IOVS };

			if (vq_dev_error(d) && vq_dev_pop(d, &c) >= 0)
				abort();
			break;
		}
		}
	}
	vq_net_queue_free(nq);
	vq_dev_free(d);
	vq_mem_free(mem);
	return 0;
}
