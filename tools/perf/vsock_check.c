// SPDX-License-Identifier: MIT
/* virtq-perf vsock's transfer checks (see vsock_check.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "vsock_check.h"

static uint64_t mix(uint64_t w, uint64_t k)
{
	return (w ^ (k * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
}

/* x86-64: the word loop also in copies for AVX-512 (eight multiplies at
 * once) and AVX2, the loader picking the best (an ifunc): 15 -> ~100
 * GB/s in cache on AVX-512.  Not under ThreadSanitizer, whose runtime is
 * not up yet when the loader picks. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VS_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define VS_TSAN 1
#endif
#if defined(__x86_64__) && !defined(VS_TSAN) && defined(__clang__)
#define VS_CLONES __attribute__((target_clones("avx512dq", "avx2", "default")))
#elif defined(__x86_64__) && !defined(VS_TSAN) && defined(__GNUC__)
#define VS_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VS_CLONES
#endif

/* Whole words at word index k: the sum of mix(w, k++), a multiply per
 * word, which the compiler vectorizes: the check keeps pace with the
 * copies it checks (a slow check would compete with the backend for the
 * CPUs). */
VS_CLONES static uint64_t csum_words(const uint8_t *p, size_t nw, uint64_t k)
{
	const uint64_t c1 = 0x9E3779B97F4A7C15ull, c2 = 0xBF58476D1CE4E5B9ull;
	uint64_t h = 0;

	for (size_t i = 0; i < nw; i++) {
		uint64_t w;

		memcpy(&w, p + 8 * i, 8);
		h += (w ^ ((k + i) * c1)) * c2;
	}
	return h;
}

void vs_csum_add(struct vs_csum *c, const uint8_t *p, size_t n)
{
	size_t nw;

	while (n && (c->off & 7)) {
		c->part[c->off & 7] = *p++;
		c->off++;
		n--;
		if (!(c->off & 7)) {
			uint64_t w;

			memcpy(&w, c->part, 8);
			c->h += mix(w, c->off / 8 - 1);
		}
	}
	nw = n / 8;
	c->h += csum_words(p, nw, c->off / 8);
	c->off += nw * 8;
	p += nw * 8;
	n -= nw * 8;
	while (n) {
		c->part[c->off & 7] = *p++;
		c->off++;
		n--;
	}
}

uint64_t vs_csum_final(const struct vs_csum *c)
{
	uint64_t w = 0;

	if (c->off & 7) {
		memcpy(&w, c->part, c->off & 7);
		return c->h + mix(w, c->off / 8) + c->off;
	}
	return c->h + c->off;
}

#define PAT_WORDS (1u << 17)
static uint64_t pattern[PAT_WORDS];

void vs_pattern_init(uint64_t seed)
{
	uint64_t x = seed;

	for (unsigned i = 0; i < PAT_WORDS; i++) {
		x += 0x9E3779B97F4A7C15ull;
		uint64_t z = x;

		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		pattern[i] = z ^ (z >> 31);
	}
}

/* Word k of the stream: the pattern, plus the lap, so no two laps of
 * the pattern are equal. */
static uint64_t stream_word(uint64_t k)
{
	return pattern[k & (PAT_WORDS - 1)] + (k / PAT_WORDS);
}

void vs_stream_fill(uint8_t *buf, uint64_t off, size_t n)
{
	/* a partial word at either end; whole words between */
	while (n && ((off & 7) || n < 8)) {
		uint64_t w = stream_word(off / 8);
		unsigned b = off & 7, take = 8 - b;

		if (take > n)
			take = (unsigned)n;
		memcpy(buf, (uint8_t *)&w + b, take);
		buf += take;
		off += take;
		n -= take;
	}
	while (n >= 8) {
		uint64_t k = off / 8, lap = k / PAT_WORDS, i = k & (PAT_WORDS - 1);
		size_t run = PAT_WORDS - i;

		if (run > n / 8)
			run = n / 8;
		for (size_t j = 0; j < run; j++) {
			uint64_t w = pattern[i + j] + lap;

			memcpy(buf + 8 * j, &w, 8);
		}
		buf += 8 * run;
		off += 8 * run;
		n -= 8 * run;
	}
	if (n)
		vs_stream_fill(buf, off, n);
}

/* ---- seqpacket messages ---- */

static void put_le64(uint8_t *p, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* The check of a message: its payload's checksum (which counts the
 * payload's length) mixed with the sequence number. */
static uint64_t msg_sum(const uint8_t *m, size_t len, uint64_t seq)
{
	struct vs_csum c = { 0 };

	vs_csum_add(&c, m + VS_MSG_HDR, len - VS_MSG_HDR);
	return mix(vs_csum_final(&c), seq + 1);
}

uint64_t vs_msg_fill(uint8_t *buf, uint64_t seq, uint32_t len)
{
	uint64_t sum;

	vs_stream_fill(buf + VS_MSG_HDR, seq * len + VS_MSG_HDR, len - VS_MSG_HDR);
	sum = msg_sum(buf, len, seq);
	put_le64(buf, seq);
	put_le64(buf + 8, sum);
	return sum;
}

bool vs_msg_check(const uint8_t *m, size_t len, uint64_t want_seq,
		  uint32_t want_len, uint64_t *check, char *why, size_t whylen)
{
	uint64_t seq, sum;

	/* The length first: a cut or merged message is what a broken
	 * boundary looks like, and it says so better than a checksum. */
	if (len != want_len) {
		snprintf(why, whylen, "message %" PRIu64 " is %zu bytes, not %u (%s)",
			 want_seq, len, want_len,
			 len < want_len ? "cut short or split" : "merged with the next");
		return false;
	}
	seq = get_le64(m);
	if (seq != want_seq) {
		snprintf(why, whylen, "message %" PRIu64 " came where %" PRIu64
			 " was due (lost, repeated or reordered)", seq, want_seq);
		return false;
	}
	sum = msg_sum(m, len, seq);
	if (sum != get_le64(m + 8)) {
		snprintf(why, whylen, "message %" PRIu64 ": its content does not match its checksum",
			 seq);
		return false;
	}
	*check = sum;
	return true;
}
