/* SPDX-License-Identifier: MIT */
/*
 * virtq-perf net rr --rr-breakdown: where one round trip's time goes, in
 * cycle counts (tsc.h) the driver side takes around its steps.
 *
 * The device is another process, so its side is seen only by what it
 * writes: the response's bytes landing in the receive buffer the device
 * takes next (which the driver knows: the device takes them in the order
 * they were posted), then the used entry naming it.  Watching that buffer
 * costs one load per spin, of a line the driver reads a moment later
 * anyway; the run's percentiles say what the watching changed.
 */
#ifndef VIRTQ_PERF_RR_BD_H
#define VIRTQ_PERF_RR_BD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tsc.h"

struct vq_drv;

enum rr_step {
	RS_FILL,        /* reserve a TX slot, write the frame */
	RS_POST,        /* publish it, kick if the ring says so */
	RS_BOOK,        /* post -> buffers given back, TX slots taken back */
	RS_WAIT,        /* post -> the RX used entry seen */
	RS_DATA,        /*   post -> the response's bytes seen */
	RS_USED,        /*   those bytes -> the RX used entry seen */
	RS_RX,          /* take the frame */
	RS_TOTAL,
	RS_SPINS,       /* counts, not cycles: spins while waiting */
	RS_REAPS,       /*   reap attempts that found no slot */
	RS_N
};

struct rr_bd {
	uint32_t *v[RS_N];              /* per transaction, up to cap */
	uint64_t n[RS_N];
	uint64_t cap;
	/* this transaction's marks, set by the caller */
	uint64_t t_start, t_filled, t_posted, t_booked, t_used;
	uint64_t spins, reaps;
	uint64_t t_data;                /* 0: the bytes not seen yet */
	const volatile uint8_t *watch;  /* where the answer's seq lands */
	uint8_t want[4];
	uint8_t *predicted;
	/* the receive buffers in the order they came back */
	uint8_t **fifo;
	uint64_t got;                   /* frames received */
	unsigned fifo_size, depth;      /* depth 0: not known yet */
	uint64_t mispredicted, unseen;
	uint32_t seq_off;               /* the seq's offset in a buffer */
	struct perf_tsc_mark start;     /* the counter's rate measured from */
	double hz;                      /* that rate; 0: not measured yet */
	uint64_t kicks0, wakeups0;      /* the run's totals at the last end */
	uint64_t kicks, wakeups, recorded;      /* over those recorded */
	/* what a poll's pieces cost here, in counter units */
	double cost_clock, cost_tsc, cost_pause, cost_has_used, cost_epoll;
};

/* For a ring of qsize RX buffers whose frames carry the 4-byte sequence
 * number at seq_off (0: none: no data mark).  NULL: no memory. */
struct rr_bd *rr_bd_new(unsigned qsize, uint32_t seq_off);
void rr_bd_free(struct rr_bd *b);

/* Time the poll's pieces on this CPU (rxq idle: nothing in flight). */
void rr_bd_costs(struct rr_bd *b, struct vq_drv *rxq);

/* A transaction with sequence number seq begins: predict its buffer. */
void rr_bd_begin(struct rr_bd *b, uint32_t seq);

/* One spin of a wait: count it, and stamp the answer's bytes the first
 * time they are there. */
static inline void rr_bd_spin(struct rr_bd *b)
{
	const volatile uint8_t *w = b->watch;

	b->spins++;
	if (w && !b->t_data && w[0] == b->want[0] && w[1] == b->want[1] &&
	    w[2] == b->want[2] && w[3] == b->want[3])
		b->t_data = perf_tsc();
}

/* A frame came back in the buffer at data; answer: it is the one the
 * transaction waits for. */
void rr_bd_frame(struct rr_bd *b, uint8_t *data, bool answer);

/* The transaction is over: keep its marks (record false: one not to
 * count, e.g. the first after a pause).  kicks and wakeups: the run's
 * totals so far. */
void rr_bd_end(struct rr_bd *b, bool record, uint64_t kicks, uint64_t wakeups);

void rr_bd_report(FILE *f, struct rr_bd *b);
/* ,"breakdown":{...} */
void rr_bd_json(FILE *f, struct rr_bd *b);

#endif
