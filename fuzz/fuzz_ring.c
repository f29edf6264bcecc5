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
 * Input: one config byte (bit 0 packed, 1 IN_ORDER, 2 EVENT_IDX, 3
 * INDIRECT_DESC, bits 4-5 the queue size 4/8/64/256), then commands of a
 * byte each with their arguments (see the switch).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
	uint8_t cfg = (uint8_t)take(&r, 1);
	uint64_t feat = VIRTQ_BIT(VIRTIO_F_VERSION_1) |
		(cfg & 1 ? VIRTQ_BIT(VIRTIO_F_RING_PACKED) : 0) |
		(cfg & 2 ? VIRTQ_BIT(VIRTIO_F_IN_ORDER) : 0) |
		(cfg & 4 ? VIRTQ_BIT(VIRTIO_F_EVENT_IDX) : 0) |
		(cfg & 8 ? VIRTQ_BIT(VIRTIO_F_INDIRECT_DESC) : 0);
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
	mem = vq_mem_new();
	reg = (struct vq_mem_region){ .gpa = GBASE, .size = GSIZE,
				      .uaddr = (uintptr_t)guest, .hva = guest };
	if (!mem || vq_mem_add(mem, &reg))
		abort();
	{
		struct vq_dev_config vc = {
			.features = feat, .num = num, .mem = mem,
			.ring = { area[0], area[1], area[2] },
			.avail_idx = packed ? 0x8000 : 0, .used_idx = packed ? 0x8000 : 0,
		};

		if (vq_dev_new(&vc, &d))
			abort();
	}
	for (unsigned i = 0; i < MAXC; i++)
		held[i] = (struct vq_chain){ .iov = iov[i], .iov_max = IOVS };

	while (r.n && steps++ < 4096) {
		uint8_t cmd = (uint8_t)take(&r, 1);
		int k;

		switch (cmd % 10) {
		case 0: {       /* driver writes a descriptor */
			uint16_t slot = (uint16_t)(take(&r, 1) % num);
			uint64_t a = addr_of((uint32_t)take(&r, 4));
			uint32_t len = (uint32_t)take(&r, 3);
			uint16_t flags = (uint16_t)take(&r, 2), nx = (uint16_t)take(&r, 2);

			if (packed) {
				struct virtq_packed_desc *pd = (void *)area[0];

				pd[slot] = (struct virtq_packed_desc){ a, len, nx, flags };
			} else {
				struct virtq_desc *sd = (void *)area[0];

				sd[slot] = (struct virtq_desc){ a, len, flags, nx };
			}
			break;
		}
		case 1: {       /* driver makes heads available (split) */
			struct virtq_avail *av = (void *)area[1];
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
			struct virtq_desc *t = (void *)(guest + (32 << 10));
			uint8_t i = (uint8_t)take(&r, 1);
			uint64_t a = addr_of((uint32_t)take(&r, 4));
			uint32_t len = (uint32_t)take(&r, 2);
			uint16_t flags = (uint16_t)take(&r, 1), nx = (uint16_t)take(&r, 1);

			t[i] = (struct virtq_desc){ a, len, flags, nx };
			break;
		}
		case 3: {       /* any bytes anywhere in the ring areas */
			uint16_t o = (uint16_t)take(&r, 2);
			unsigned n = (unsigned)take(&r, 1) % 16;
			uint8_t *pg = rings + 2 * PG * (o % 3);

			for (unsigned i = 0; i < n; i++)
				pg[(o / 3 + i) % PG] = (uint8_t)take(&r, 1);
			break;
		}
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
			switch (take(&r, 1) % 4) {
			case 0: vq_dev_disable_notify(d); break;
			case 1: vq_dev_enable_notify(d); break;
			case 2: (void)vq_dev_should_signal(d); break;
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
	vq_dev_free(d);
	vq_mem_free(mem);
	return 0;
}
