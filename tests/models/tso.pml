/* SPDX-License-Identifier: MIT */
/*
 * x86's memory model (TSO) for two processes, 0 the driver and 1 the
 * device: each store goes into its process's FIFO store buffer and reaches
 * shared memory later, in order, when flush() runs (nondeterministically:
 * the flusher process, or a full buffer).  A load sees its own process's
 * newest buffered store to the address, else memory: a load can pass an
 * earlier store to another address, the one reordering x86 allows.  A
 * full fence (vq_mb, a locked instruction, a syscall) drains the buffer.
 * Release stores and acquire loads need nothing more under TSO: what
 * removing one allows is the compiler's reordering, which the models'
 * mutations write out by hand.
 */
/* Two entries: enough for a store to wait behind another (flush1 is
 * written for two). */
#define SB 2

byte mem[NMEM];
byte sba[2 * SB];
byte sbv[2 * SB];
byte sbn[2];

/* The oldest buffered store of process sbp reaches memory. */
inline flush1(sbp) {
	mem[sba[sbp * SB]] = sbv[sbp * SB];
	sba[sbp * SB] = sba[sbp * SB + 1];
	sbv[sbp * SB] = sbv[sbp * SB + 1];
	sba[sbp * SB + 1] = 0;
	sbv[sbp * SB + 1] = 0;
	sbn[sbp]--
}

inline st(sbp, sbaddr, sbval) {
	if
	:: sbn[sbp] == SB -> flush1(sbp)
	:: else -> skip
	fi;
	sba[sbp * SB + sbn[sbp]] = sbaddr;
	sbv[sbp * SB + sbn[sbp]] = sbval;
	sbn[sbp]++
}

/* Store forwarding: the newest buffered store to sbaddr wins. */
inline ld(sbp, sbaddr, sbret) {
	sbret = mem[sbaddr];
	if
	:: sbn[sbp] >= 1 && sba[sbp * SB] == sbaddr -> sbret = sbv[sbp * SB]
	:: else -> skip
	fi;
	if
	:: sbn[sbp] >= 2 && sba[sbp * SB + 1] == sbaddr -> sbret = sbv[sbp * SB + 1]
	:: else -> skip
	fi
}

inline fence(sbp) {
	do
	:: sbn[sbp] > 0 -> flush1(sbp)
	:: else -> break
	od
}

/* Stores drain on their own; blocked here is a valid end. */
proctype flusher(byte sbp) {
end:	do
	:: atomic { sbn[sbp] > 0 -> flush1(sbp) }
	od
}
