/* SPDX-License-Identifier: MIT */
/*
 * The dirty log during migration (docs/RULES.md V5; src/mem/log.c): the
 * device writes a guest page and marks its bit, the front-end harvests
 * (an atomic exchange clears the bit, then it copies the page), and after
 * the device stops, a last harvest.  The copy must end up equal to the
 * page.  The device marks either way the code does: vq_dirty_log_mark
 * (a locked OR after the write) or vq_log_batch_flush (a full fence, a
 * plain look at the bit, a locked OR only when it is clear).
 *
 *   -DM_V5       vq_log_batch_flush without its fence
 *   -DM_V5_MARK  vq_dirty_log_mark's OR before the write (no release)
 */
#define K 2             /* writes to the page: the second finds the bit set */

#define PAGE 0
#define BIT 1
#define NMEM 2

#define DEV 0
#define FE 1
#include "tso.pml"

byte copy;              /* the front-end's copy of the page */
bit stopped;            /* the device stopped (GET_VRING_BASE) */

/* A locked OR: it drains the store buffer and acts on memory. */
inline locked_or(p) {
	fence(p);
	mem[BIT] = 1
}

proctype device() {
	byte k = 1, b;

	do
	:: k > K -> break
	/* vq_dirty_log_mark, after each write */
	:: k <= K ->
		atomic {
#ifdef M_V5_MARK
			locked_or(DEV);
#endif
			st(DEV, PAGE, k);
#ifndef M_V5_MARK
			locked_or(DEV);
#endif
			k++ }
	/* the ring's flush: vq_log_batch_flush */
	:: k <= K ->
		atomic { st(DEV, PAGE, k) }
#ifndef M_V5
		atomic { fence(DEV) }   /* V5: the writes before the look at the bits */
#endif
		atomic {
			ld(DEV, BIT, b);
			if
			:: !b -> locked_or(DEV)
			:: else -> skip
			fi;
			b = 0;
			k++ }
	od;
	atomic { fence(DEV); stopped = 1 }      /* the stop is a syscall */
}

/* QEMU's migration: harvest while the device runs, once more after. */
proctype frontend() {
	bit b, last;

	do
	:: atomic {
		last = stopped;
		b = mem[BIT];           /* the exchange: clear, then copy */
		mem[BIT] = 0 }
		if
		:: b -> atomic { ld(FE, PAGE, copy) }
		:: else -> skip
		fi;
		if
		:: last -> break
		:: else -> skip
		fi
	od;
	assert(copy == K)
}

init {
	atomic {
		run flusher(DEV);
		run device();
		run frontend()
	}
}
