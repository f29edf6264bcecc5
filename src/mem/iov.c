// SPDX-License-Identifier: MIT
/* Copies between a flat buffer and an iovec view of guest memory. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "util.h"
#include "mem_lib.h"

/* Move up to len bytes between buf and the bytes of iov from offset off on;
 * returns how many moved (fewer when the iovec ends first). */
static size_t iov_xfer(const struct iovec *iov, unsigned cnt, size_t off,
		       uint8_t *buf, size_t len, bool into_iov)
{
	size_t done = 0;
	unsigned i;

	for (i = 0; i < cnt && done < len; i++) {
		size_t n = iov[i].iov_len;
		uint8_t *p;

		if (off >= n) {
			off -= n;
			continue;
		}
		n -= off;
		if (n > len - done)
			n = len - done;
		p = (uint8_t *)iov[i].iov_base + off;
		if (into_iov)
			memcpy(p, buf + done, n);
		else
			memcpy(buf + done, p, n);
		done += n;
		off = 0;
	}
	return done;
}

size_t vq_iov_to_buf(const struct iovec *iov, unsigned cnt, size_t off,
		     void *dst, size_t len)
{
	return iov_xfer(iov, cnt, off, dst, len, false);
}

size_t vq_iov_from_buf(const struct iovec *iov, unsigned cnt, size_t off,
		       const void *src, size_t len)
{
	return iov_xfer(iov, cnt, off, (uint8_t *)src, len, true);
}
