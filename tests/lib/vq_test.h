/* SPDX-License-Identifier: MIT */
/*
 * The test harness every test program uses: one program per behaviour, exit
 * 0 pass, 1 fail, 77 skip (Meson's convention).  CHECK prints where and what
 * failed and exits, so a failure names its line and its spec rule.
 */
#ifndef VQ_TEST_H
#define VQ_TEST_H

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VQ_TEST_SKIP 77

#define CHECK(cond) do {                                                    \
	if (!(cond)) {                                                      \
		fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__,  \
			__LINE__, __func__, #cond);                         \
		exit(1);                                                    \
	}                                                                   \
} while (0)

#define CHECK_EQ(a, b) do {                                                 \
	long long va_ = (long long)(a), vb_ = (long long)(b);               \
	if (va_ != vb_) {                                                   \
		fprintf(stderr, "%s:%d: %s: %s == %lld, expected %s == %lld\n", \
			__FILE__, __LINE__, __func__, #a, va_, #b, vb_);    \
		exit(1);                                                    \
	}                                                                   \
} while (0)

/* A library message names its rule first, then says what was wrong:
 * "2.7.13.3: avail index moved from 5 to 300, more than the queue size
 * 256" (CONTRIBUTING.md, "Messages"). */
#define CHECK_RULE_FIRST(msg) do {                                          \
	const char *m_ = (msg), *p_ = m_;                                   \
	int dots_ = 0;                                                      \
	while ((*p_ >= '0' && *p_ <= '9') || (*p_ == '.' && ++dots_))       \
		p_++;                                                       \
	if (p_ == m_ || !dots_ || p_[0] != ':' || p_[1] != ' ') {           \
		fprintf(stderr, "%s:%d: \"%s\" does not start with its "    \
			"spec section\n", __FILE__, __LINE__, m_);          \
		exit(1);                                                    \
	}                                                                   \
} while (0)

/* Run one named case: the name says which spec rule it checks. */
#define RUN(fn) do {                                                        \
	fprintf(stderr, "-- %s\n", #fn);                                    \
	fn();                                                               \
} while (0)

/* A deterministic PRNG (xorshift64*), seeded per test so failures repeat. */
static inline uint64_t vq_test_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* The seed: VQ_TEST_SEED from the environment, else a fixed default. */
static inline uint64_t vq_test_seed(uint64_t dflt)
{
	const char *e = getenv("VQ_TEST_SEED");

	return e ? strtoull(e, NULL, 0) : dflt;
}

#endif
