// SPDX-License-Identifier: MIT
/*
 * virtq-perf vsock's transfer checks fed broken input: a seqpacket message
 * must arrive whole, in order, with its exact length and content (5.10.6.7:
 * a message's bounds are kept), so a cut, split, merged, repeated,
 * reordered or changed message fails the receiver's check; and the stream
 * checksum does not depend on how the stream was chunked but does on its
 * bytes.
 */
#include "vq_test.h"
#include "vsock_check.h"

#define LEN 4096u

static uint8_t a[2 * LEN], b[2 * LEN];
static char why[160];

/* The sender's message passes, and both ends get the same check value. */
static void seqpacket_whole_message_passes(void)
{
	uint64_t sent, got = 0;

	sent = vs_msg_fill(a, 7, LEN);
	CHECK(vs_msg_check(a, LEN, 7, LEN, &got, why, sizeof(why)));
	CHECK_EQ(got, sent);
	/* the smallest message: a header and no payload */
	sent = vs_msg_fill(a, 0, VS_MSG_HDR);
	CHECK(vs_msg_check(a, VS_MSG_HDR, 0, VS_MSG_HDR, &got, why, sizeof(why)));
	CHECK_EQ(got, sent);
}

/* A message cut short (or the first part of a split one) fails on its
 * length, however little is missing. */
static void seqpacket_truncated_message_fails(void)
{
	uint64_t c;

	vs_msg_fill(a, 3, LEN);
	CHECK(!vs_msg_check(a, LEN - 1, 3, LEN, &c, why, sizeof(why)));
	CHECK(strstr(why, "cut short"));
	CHECK(!vs_msg_check(a, 100, 3, LEN, &c, why, sizeof(why)));
	CHECK(!vs_msg_check(a, 0, 3, LEN, &c, why, sizeof(why)));
	/* the rest of a split message, arriving as one on its own */
	CHECK(!vs_msg_check(a + 100, LEN - 100, 3, LEN, &c, why, sizeof(why)));
}

/* Two messages delivered as one fail: too long. */
static void seqpacket_merged_messages_fail(void)
{
	uint64_t c;

	vs_msg_fill(a, 4, LEN);
	vs_msg_fill(a + LEN, 5, LEN);
	CHECK(!vs_msg_check(a, 2 * LEN, 4, LEN, &c, why, sizeof(why)));
	CHECK(strstr(why, "merged"));
	/* merged with a single byte of the next */
	CHECK(!vs_msg_check(a, LEN + 1, 4, LEN, &c, why, sizeof(why)));
}

/* A lost, repeated or reordered message fails on its sequence number. */
static void seqpacket_out_of_order_fails(void)
{
	uint64_t c;

	vs_msg_fill(a, 9, LEN);
	CHECK(!vs_msg_check(a, LEN, 8, LEN, &c, why, sizeof(why)));
	CHECK(strstr(why, "reordered"));
	CHECK(!vs_msg_check(a, LEN, 10, LEN, &c, why, sizeof(why)));
}

/* A changed byte anywhere (header or payload) fails, as does a right-sized
 * message whose length was not the one it was made for. */
static void seqpacket_corrupted_message_fails(void)
{
	uint64_t c;
	unsigned at[] = { 8, 15, 16, 17, 2000, LEN - 1 };

	for (unsigned i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		vs_msg_fill(a, 11, LEN);
		a[at[i]] ^= 0x20;
		CHECK(!vs_msg_check(a, LEN, 11, LEN, &c, why, sizeof(why)));
	}
	/* message 11 made 4096 long, cut to 2048 and expected at 2048: its
	 * header is intact, its checksum counted 4080 payload bytes */
	vs_msg_fill(a, 11, LEN);
	CHECK(!vs_msg_check(a, LEN / 2, 11, LEN / 2, &c, why, sizeof(why)));
	CHECK(strstr(why, "checksum"));
}

/* The stream checksum: the same for any chunking, different for a changed,
 * missing or moved byte. */
static void stream_checksum_chunking_and_bytes(void)
{
	struct vs_csum whole = { 0 }, parts = { 0 }, bad = { 0 }, shifted = { 0 };
	size_t off = 0, k = 1;

	vs_stream_fill(a, 0, sizeof(a));
	vs_csum_add(&whole, a, sizeof(a));
	while (off < sizeof(a)) {
		size_t n = k < sizeof(a) - off ? k : sizeof(a) - off;

		vs_csum_add(&parts, a + off, n);
		off += n;
		k = k * 3 + 1;          /* odd sizes: every alignment */
	}
	CHECK_EQ(vs_csum_final(&parts), vs_csum_final(&whole));
	memcpy(b, a, sizeof(a));
	b[4097] ^= 1;
	vs_csum_add(&bad, b, sizeof(b));
	CHECK(vs_csum_final(&bad) != vs_csum_final(&whole));
	vs_csum_add(&shifted, a + 1, sizeof(a) - 1);
	CHECK(vs_csum_final(&shifted) != vs_csum_final(&whole));
}

/* The pattern repeats every 1 MiB, each lap plus its count. */
#define LAP (1u << 20)
static uint8_t big[3 * LAP], big2[3 * LAP];

/* A stream's bytes do not depend on how they were asked for: any chunk
 * at any alignment, across the pattern's laps, gives the bytes of one
 * fill; and the next lap is not the first again. */
static void stream_fill_any_chunking(void)
{
	size_t off = 0, k = 1;

	vs_stream_fill(big, 5, sizeof(big));
	while (off < sizeof(big2)) {
		size_t n = k < sizeof(big2) - off ? k : sizeof(big2) - off;

		vs_stream_fill(big2 + off, 5 + off, n);
		off += n;
		k = k * 5 + 3;
	}
	CHECK(memcmp(big, big2, sizeof(big)) == 0);
	CHECK(memcmp(big, big + LAP, LAP) != 0);
	/* --conns: a stream far away is another stream */
	vs_stream_fill(big2, 5 + (1ull << 40), LAP);
	CHECK(memcmp(big, big2, LAP) != 0);
}

/* The checksum is its definition (vsock_check.h): the sum over the
 * stream's 64-bit words w_k of (w_k ^ k * C1) * C2, a partial last word
 * padded with zeros, plus the length; however fast it is computed. */
static uint64_t csum_by_definition(const uint8_t *p, uint64_t n)
{
	uint64_t h = 0, k;

	for (k = 0; 8 * k < n; k++) {
		uint64_t w = 0;

		memcpy(&w, p + 8 * k, n - 8 * k < 8 ? n - 8 * k : 8);
		h += (w ^ (k * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
	}
	return h + n;
}

static void stream_checksum_is_its_definition(void)
{
	struct vs_csum c = { 0 }, d = { 0 };
	size_t n = sizeof(big) - 3;

	vs_stream_fill(big, 0, sizeof(big));
	vs_csum_add(&c, big, n);
	CHECK_EQ(vs_csum_final(&c), csum_by_definition(big, n));
	vs_csum_add(&d, big, 13);
	vs_csum_add(&d, big + 13, n - 13);
	CHECK_EQ(vs_csum_final(&d), csum_by_definition(big, n));
}

int main(void)
{
	vs_pattern_init(0x5eed);
	RUN(seqpacket_whole_message_passes);
	RUN(seqpacket_truncated_message_fails);
	RUN(seqpacket_merged_messages_fail);
	RUN(seqpacket_out_of_order_fails);
	RUN(seqpacket_corrupted_message_fails);
	RUN(stream_checksum_chunking_and_bytes);
	RUN(stream_fill_any_chunking);
	RUN(stream_checksum_is_its_definition);
	return 0;
}
