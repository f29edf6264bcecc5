/* SPDX-License-Identifier: MIT */
/*
 * What both ends of virtq-perf vsock compute to check a transfer, pure so
 * a test can feed it broken input: the position-dependent stream checksum
 * and, for seqpacket, the message format and its checker.
 */
#ifndef VIRTQ_PERF_VSOCK_CHECK_H
#define VIRTQ_PERF_VSOCK_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The checksum both ends compute: 64-bit words of the stream at aligned
 * offsets, each mixed with its index, so lost, duplicated, reordered or
 * changed bytes show; independent of how the stream was chunked.  It is
 * the sum over words w_k of (w_k ^ k * 0x9E3779B97F4A7C15) *
 * 0xBF58476D1CE4E5B9 (a partial last word padded with zeros), plus the
 * length. */
struct vs_csum {
	uint64_t off, h;
	uint8_t part[8];
};

void vs_csum_add(struct vs_csum *c, const uint8_t *p, size_t n);
uint64_t vs_csum_final(const struct vs_csum *c);

/* The stream's bytes: a 1 MiB random pattern from seed, plus a block
 * counter so no two blocks are equal.  Init once before filling. */
void vs_pattern_init(uint64_t seed);
/* Bytes [off, off+n) of the stream into buf. */
void vs_stream_fill(uint8_t *buf, uint64_t off, size_t n);

/*
 * A seqpacket message of len bytes (len >= VS_MSG_HDR): le64 sequence
 * number, le64 check, then the stream's bytes from seq * len + VS_MSG_HDR.
 * The check mixes the payload's checksum with seq and len, so a message
 * cut short, merged with the next, or changed fails it even when its
 * length happens to be right.
 */
#define VS_MSG_HDR 16u

/* Message seq of len bytes into buf; its check value. */
uint64_t vs_msg_fill(uint8_t *buf, uint64_t seq, uint32_t len);

/*
 * Is m[0, len) message want_seq, whole, of want_len bytes?  true and its
 * check value in *check; false with the reason in why (a short, long,
 * out-of-order or corrupted message).
 */
bool vs_msg_check(const uint8_t *m, size_t len, uint64_t want_seq,
		  uint32_t want_len, uint64_t *check, char *why, size_t whylen);

#endif
