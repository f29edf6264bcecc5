/* SPDX-License-Identifier: MIT */
/*
 * The packed ring's notification protocol (virtio 1.2 2.8.10, 2.8.21):
 * the driver (src/ring/packed_drv.c under src/runtime/drv.c) and the
 * device (src/ring/packed_dev.c under src/runtime/loop.c) over a ring of
 * N slots; a run of B buffers flips both wrap counters twice.  Each step
 * is one access to shared memory through tso.pml's store buffers and
 * names the docs/RULES.md label and the C function it stands for.
 * Chains are one descriptor: a chain's length changes which slots move,
 * not the order of the accesses that publish and notify.
 *
 *   -DEVENT_IDX          VIRTIO_F_EVENT_IDX (event offsets), else flags
 *   -DM_<rule>           the mutation that removes a barrier or re-check
 *
 * As in split.pml, the runtime's quiet-period look and sleep timeouts
 * are left out: with them no lost notification is a stuck state.
 */
#define N 2             /* queue size */
#ifndef B
#define B 5             /* buffers the driver adds: two laps and more */
#endif
#ifndef POLL
#define POLL 1          /* busy-poll looks before enabling notifications */
#endif

#define DESC_FLAGS 0            /* [N]: AVAIL (1) | USED (2) */
#define DESC_ID (DESC_FLAGS + N)        /* [N]: the buffer id and len */
#define DRV_EV_OFF (DESC_ID + N)        /* the driver's event structure */
#define DRV_EV_FLAGS (DRV_EV_OFF + 1)
#define DEV_EV_OFF (DRV_EV_OFF + 2)     /* the device's */
#define DEV_EV_FLAGS (DRV_EV_OFF + 3)
#define NMEM (DRV_EV_OFF + 4)

#define F_ENABLE 0              /* VQ_EVENT_F_* */
#define F_DISABLE 1
#define F_DESC 2
#define F_UNKNOWN 3             /* DEV_FLAGS_UNKNOWN */

#define DRV 0
#define DEV 1
#include "tso.pml"

/* off_wrap: the offset, and the wrap counter in bit 6 (bit 15 in C) */
#define OW(off, wrap) ((off) + 64 * (wrap))
/* packed_avail_flags, packed_used_flags; packed_is_avail, packed_is_used */
#define AVAIL_FLAGS(w) ((w) + 2 * (1 - (w)))
#define USED_FLAGS(w) (3 * (w))
#define IS_AVAIL(f, w) (((f) & 1) == (w) && ((f) / 2) != (w))
#define IS_USED(f, w) (((f) & 1) == (w) && ((f) / 2) == (w))
#define VAL(s) ((s) % 8 + 1)
/* What a used descriptor's id and len say for the s-th buffer: the len
 * the device writes makes it differ from what the driver wrote there. */
#define USED_VAL(s) (VAL(s) + 16)
/* (uint16_t)x */
#define U16(x) ((((x) % 65536) + 65536) % 65536)

byte consumed;
bit kick, call;

/* packed_need_event (packed.h): an event in the other lap is a ring back,
 * then vq_need_event in 16-bit arithmetic. */
inline need_event(ow, pos, wrap, count, res) {
	if
	:: count >= N -> res = 1
	:: else ->
		evt = ow % 64;
		if
#ifndef M_NOWRAP     /* the mutation: the event's wrap counter ignored */
		:: ow / 64 != wrap -> evt = evt - N
#endif
		:: else -> skip
		fi;
		res = (U16(pos - evt - 1) < count);
		evt = 0
	fi
}

/* packed_advance by one slot */
inline advance(pos, wrap) {
	if
	:: pos + 1 == N -> pos = 0; wrap = 1 - wrap
	:: else -> pos++
	fi
}

proctype driver() {
	byte next_avail, last_used, free_slots = N, num_added, added, ahead;
	byte f, e, ow, efl, flags_shadow = F_ENABLE;
	bit avail_wrap = 1, used_wrap = 1, need, r, w;
	int evt;
	byte pos;

	do
	:: consumed == B -> break
	/* packed_add: the id, then the flags with release (P1) */
	:: atomic { added < B && free_slots > 0 ->
#ifndef M_P1
		st(DRV, DESC_ID + next_avail, VAL(added));
#endif
		st(DRV, DESC_FLAGS + next_avail, AVAIL_FLAGS(avail_wrap));
#ifdef M_P1
		/* without the release the flags may go first */
		st(DRV, DESC_ID + next_avail, VAL(added));
#endif
		advance(next_avail, avail_wrap);
		free_slots--;
		num_added++;
		added++ }
	/* vq_rt_drv_kick -> packed_kick_prepare */
	:: num_added > 0 ->
#ifndef M_P2
		atomic { fence(DRV) }           /* P2: vq_mb */
#endif
		atomic {
			/* packed_event_read: one 32-bit snapshot */
			ow = mem[DEV_EV_OFF];
			efl = mem[DEV_EV_FLAGS];
			if
			:: efl == F_DISABLE -> need = 0
#ifdef EVENT_IDX
			:: efl == F_DESC -> need_event(ow, next_avail, avail_wrap, num_added, need)
#endif
			:: else -> need = 1
			fi;
			num_added = 0;
			ow = 0;
			efl = 0 }
		if
		:: need -> atomic { fence(DRV); kick = 1 }    /* vq_evt_signal */
		:: else -> skip
		fi
	/* vq_rt_drv_wait_used, every added buffer kicked for */
	:: free_slots < N && num_added == 0 ->
		atomic {                            /* packed_has_used */
			ld(DRV, DESC_FLAGS + last_used, f);
			r = IS_USED(f, used_wrap) }
		ahead = 0;
		do                                  /* the busy-poll window */
		:: r || ahead == POLL -> break
		:: else ->
			atomic {
				ld(DRV, DESC_FLAGS + last_used, f);
				r = IS_USED(f, used_wrap);
				ahead++ }
		od;
		if
		:: r -> skip
		:: else ->
			/* enable_at: enable_cb (0) or enable_cb_delayed */
			if
			:: ahead = 0
#ifdef EVENT_IDX
			:: ahead = (N - free_slots) * 3 / 4
#endif
			fi;
			atomic {
#ifdef EVENT_IDX
				/* P4: off_wrap (relaxed) before the flags */
				pos = last_used;
				w = used_wrap;
				if
				:: ahead > 0 -> advance(pos, w)
				:: else -> skip
				fi;
				st(DRV, DRV_EV_OFF, OW(pos, w));
				pos = 0;
				w = 0;
				if      /* set_drv_flags(DESC) */
				:: flags_shadow != F_DESC -> st(DRV, DRV_EV_FLAGS, F_DESC); flags_shadow = F_DESC
				:: else -> skip
				fi
#else
				if      /* set_drv_flags(ENABLE) */
				:: flags_shadow != F_ENABLE -> st(DRV, DRV_EV_FLAGS, F_ENABLE); flags_shadow = F_ENABLE
				:: else -> skip
				fi
#endif
			}
#ifndef M_P4_DRV
			atomic { fence(DRV) }       /* P4: vq_mb */
#endif
			atomic {                    /* P4: the re-check, used_pending */
				ld(DRV, DESC_FLAGS + last_used, f);
				r = IS_USED(f, used_wrap)
#ifdef M_P4_DRV_RECHECK
				; r = 0
#endif
			}
			if
			:: r -> skip
			:: else -> atomic { call -> call = 0; fence(DRV) }     /* vq_evt_wait */
			fi;
			atomic {                    /* packed_disable_cb */
				if
				:: flags_shadow != F_DISABLE -> st(DRV, DRV_EV_FLAGS, F_DISABLE); flags_shadow = F_DISABLE
				:: else -> skip
				fi }
		fi;
		/* vq_drv_get until 0: read_used */
		do
		:: free_slots < N ->
#ifdef M_P3
			/* without the acquire the id may be read first */
			atomic { ld(DRV, DESC_ID + last_used, e) }
#endif
			atomic {
				/* P3: the flags with acquire, then the id */
				ld(DRV, DESC_FLAGS + last_used, f);
				r = IS_USED(f, used_wrap) }
			if
			:: !r -> break
			:: else -> skip
			fi;
			atomic {
#ifndef M_P3
				ld(DRV, DESC_ID + last_used, e);
#endif
				assert(e == USED_VAL(consumed));
				advance(last_used, used_wrap);
				free_slots++;
				consumed++ }
		:: else -> break
		od
	od
}

proctype device() {
	byte last_avail, last_used, unsignalled, popped, n, f, h, ow, efl, i;
	byte nstaged, first, flags_shadow = F_UNKNOWN;
	byte stage[N];
	bit avail_wrap = 1, used_wrap = 1, signalled_valid, busy, armed, r, w;
	int evt;

	/* vq_rt_loop_add: active, kicks off (packed_disable_notify) */
	busy = 1;
	atomic { st(DEV, DEV_EV_FLAGS, F_DISABLE); flags_shadow = F_DISABLE }
	do
	:: busy ->
		/* queue_turn -> process: vq_dev_pop until 0 (packed_pop) */
		n = 0;
		do
		:: true ->
#ifdef M_P1_DEV
			/* without the acquire the id may be read first */
			atomic { ld(DEV, DESC_ID + last_avail, h) }
#endif
			atomic {
				/* P1: the flags with acquire, then the id */
				ld(DEV, DESC_FLAGS + last_avail, f);
				r = IS_AVAIL(f, avail_wrap) }
			if
			:: !r -> break
			:: else -> skip
			fi;
			atomic {
#ifndef M_P1_DEV
				ld(DEV, DESC_ID + last_avail, h);
#endif
				assert(h == VAL(popped));
				stage[nstaged] = h;
				nstaged++;
				popped++;
				n++;
				advance(last_avail, avail_wrap) }
		od;
		if
		:: nstaged > 0 ->
			atomic {                    /* packed_flush */
				first = last_used;
				w = used_wrap;
#ifdef M_P3_DEV
				/* without the release the first flags may go first */
				st(DEV, DESC_FLAGS + first, USED_FLAGS(w));
#endif
				/* the used ids; the flags of all but the first */
				i = 0;
				do
				:: i < nstaged ->
					st(DEV, DESC_ID + last_used, stage[i] + 16);
					if
					:: i > 0 -> st(DEV, DESC_FLAGS + last_used, USED_FLAGS(used_wrap))
					:: else -> skip
					fi;
					advance(last_used, used_wrap);
					i++
				:: else -> break
				od;
				/* P3 (device): the first one's flags last, with release */
#ifndef M_P3_DEV
				st(DEV, DESC_FLAGS + first, USED_FLAGS(w));
#endif
				unsignalled = (unsignalled + nstaged > N -> N : unsignalled + nstaged);
				nstaged = 0;
				first = 0;
				w = 0;
				i = 0 }
		:: else -> skip
		fi;
		/* vq_rt_queue_signal -> packed_should_signal */
		if
		:: n > 0 && unsignalled > 0 ->
#ifndef M_V3
			atomic { fence(DEV) }       /* V3: vq_mb */
#endif
			atomic {
				ow = mem[DRV_EV_OFF];   /* packed_event_read */
				efl = mem[DRV_EV_FLAGS];
				if
				:: efl == F_DISABLE -> r = 0
#ifdef EVENT_IDX
				:: efl == F_DESC && signalled_valid ->
					need_event(ow, last_used, used_wrap, unsignalled, r)
#endif
				:: else -> r = 1
				fi;
				if
				:: r -> unsignalled = 0; signalled_valid = 1
				:: else -> skip
				fi;
				ow = 0;
				efl = 0 }
			if
			:: r -> atomic { fence(DEV); call = 1 }   /* queue_call */
			:: else -> skip
			fi
		:: else -> skip
		fi;
		/* ran dry: the busy-poll window (packed_has_avail) */
		r = 0;
		i = 0;
		do
		:: r || i == POLL -> break
		:: else ->
			atomic {
				ld(DEV, DESC_FLAGS + last_avail, f);
				r = IS_AVAIL(f, avail_wrap);
				i++ }
		od;
		if
		:: r -> skip
		:: else -> busy = 0; armed = 0      /* queue_sleep */
		fi
	/* idle_look: a look, then packed_enable_notify and its re-check */
	:: !busy && !armed ->
		atomic {
			ld(DEV, DESC_FLAGS + last_avail, f);
			r = IS_AVAIL(f, avail_wrap) }
		if
		:: r -> skip
		:: else ->
			atomic {
#ifdef EVENT_IDX
				/* P4: the offset (relaxed) before the flags */
				st(DEV, DEV_EV_OFF, OW(last_avail, avail_wrap));
				if      /* set_dev_flags(DESC) */
				:: flags_shadow != F_DESC -> st(DEV, DEV_EV_FLAGS, F_DESC); flags_shadow = F_DESC
				:: else -> skip
				fi
#else
				if      /* set_dev_flags(ENABLE) */
				:: flags_shadow != F_ENABLE -> st(DEV, DEV_EV_FLAGS, F_ENABLE); flags_shadow = F_ENABLE
				:: else -> skip
				fi
#endif
			}
#ifndef M_P4_DEV
			atomic { fence(DEV) }       /* P4 (its V4): vq_mb */
#endif
			atomic {                    /* the re-check: avail_now */
				ld(DEV, DESC_FLAGS + last_avail, f);
				r = IS_AVAIL(f, avail_wrap)
#ifdef M_P4_DEV_RECHECK
				; r = 0
#endif
			}
		fi;
		if
		:: r -> goto wake
		:: else -> armed = 1
		fi
	/* poll_events: asleep in epoll_wait on the kick eventfd */
	:: !busy && armed ->
end_sleep:
		atomic { kick -> kick = 0; fence(DEV) }
		atomic {                            /* rt_take_events: rt_has_avail */
			ld(DEV, DESC_FLAGS + last_avail, f);
			r = IS_AVAIL(f, avail_wrap) }
		if
		:: r ->
wake:			/* queue_wake: active, kicks off (packed_disable_notify) */
			atomic {
				busy = 1;
				armed = 0;
				if
				:: flags_shadow != F_DISABLE -> st(DEV, DEV_EV_FLAGS, F_DISABLE); flags_shadow = F_DISABLE
				:: else -> skip
				fi }
		:: else -> skip
		fi
	od
}

/* Nothing can move: every buffer must have come back (see split.pml). */
active proctype watchdog() {
	timeout ->
	printf("stuck: consumed %d of %d, kick %d call %d\n", consumed, B, kick, call);
	assert(consumed == B)
}

init {
	atomic {
		run flusher(DRV);
		run flusher(DEV);
		run driver();
		run device()
	}
}
