/* SPDX-License-Identifier: MIT */
/*
 * The split ring's notification protocol (virtio 1.2 2.7.7, 2.7.10):
 * the driver (src/ring/split_drv.c under src/runtime/drv.c) and the device
 * (src/ring/split_dev.c under src/runtime/loop.c) over a ring of N
 * entries, with free-running indices modulo M standing for the 16-bit
 * ones, so that a run of B buffers crosses the wrap.  Each step is one
 * access to shared memory through tso.pml's store buffers and names the
 * docs/RULES.md label and the C function it stands for.
 *
 *   -DEVENT_IDX          VIRTIO_F_EVENT_IDX, else the flags
 *   -DM_<rule>           the mutation that removes a barrier or re-check
 *                        (see the #ifdefs; run-models.sh lists them)
 *
 * The runtime's quiet-period look (loop.c quiet_recheck) is left out: it
 * bounds a lost notification's cost for a guest whose barriers fail,
 * and with it no lost notification would ever be a stuck state.  Sleeps
 * have no timeout for the same reason.
 */
#ifndef M
#define M 4             /* index modulus: 2^16 in the code; 2N, as 2^16 is
                         * twice the largest queue */
#endif
#define N 2             /* queue size */
#ifndef B
#define B 5             /* buffers the driver adds: past the wrap at M */
#endif
#ifndef POLL
#define POLL 1          /* busy-poll looks before enabling notifications */
#endif

#define AVAIL_IDX 0
#define USED_IDX 1
#define AVAIL_EVENT 2   /* after used->ring[N] */
#define USED_EVENT 3    /* after avail->ring[N] */
#define USED_FLAGS 4    /* VRING_USED_F_NO_NOTIFY */
#define AVAIL_FLAGS 5   /* VRING_AVAIL_F_NO_INTERRUPT */
#define AVAIL_RING 6
#define USED_RING (AVAIL_RING + N)
#define NMEM (USED_RING + N)

#define DRV 0
#define DEV 1
#include "tso.pml"

/* (uint16_t)(a - b) */
#define DIST(a, b) (((a) + M - (b)) % M)
/* vq_need_event (spec.h, 2.7.10): (u16)(new - event - 1) < (u16)(new - old) */
#ifndef M_NOWRAP
#define NEED_EVENT(ev, new, old) (DIST(new, ((ev) + 1) % M) < DIST(new, old))
#else
/* the comparison in plain integers: wrong once an index wraps */
#define NEED_EVENT(ev, new, old) ((new) - (ev) - 1 < (new) - (old))
#endif
/* What a ring entry holds for the s-th buffer: 0 is "never written", and
 * the entry a lap earlier differs, so a stale read shows. */
#define VAL(s) ((s) % M + 1)

byte consumed;          /* buffers the driver got back */
bit kick, call;         /* the eventfds: signalled, not yet read */

proctype driver() {
	byte avail_shadow, kicked, old, last_used, used_shadow, outstanding;
	byte added, bufs, u, e, ev;
	bit flags_shadow, need, r;

	do
	:: consumed == B -> break
	/* sq_add, sq_expose: the entry now, published by kick_prepare (D1) */
	:: atomic { added < B && outstanding < N ->
#ifndef M_D1
		st(DRV, AVAIL_RING + avail_shadow % N, VAL(added));
#endif
		avail_shadow = (avail_shadow + 1) % M;
		outstanding++;
		added++ }
	/* vq_rt_drv_kick -> sq_kick_prepare */
	:: avail_shadow != kicked ->
		atomic {
			old = kicked;
			/* D1: entries, then avail->idx with release */
			st(DRV, AVAIL_IDX, avail_shadow);
			kicked = avail_shadow;
#ifdef M_D1
			/* without the release the entries may follow the index */
			e = old;
			do
			:: e != kicked ->
				st(DRV, AVAIL_RING + e % N, VAL(added - DIST(kicked, e)));
				e = (e + 1) % M
			:: else -> break
			od
#endif
		}
#ifndef M_D2
		atomic { fence(DRV) }           /* D2: vq_mb */
#endif
		atomic {
#ifdef EVENT_IDX
			ld(DRV, AVAIL_EVENT, ev);
			need = NEED_EVENT(ev, kicked, old)
#else
			ld(DRV, USED_FLAGS, ev);
			need = (ev == 0)
#endif
		}
		if
		:: need -> atomic { fence(DRV); kick = 1 }    /* vq_evt_signal: a syscall */
		:: else -> skip
		fi
	/* vq_rt_drv_wait_used, all added buffers published */
	:: outstanding > 0 && avail_shadow == kicked ->
		atomic { ld(DRV, USED_IDX, u); r = (u != last_used) }  /* sq_has_used */
		bufs = 0;
		do                                  /* the busy-poll window */
		:: r || bufs == POLL -> break
		:: else -> atomic { ld(DRV, USED_IDX, u); r = (u != last_used); bufs++ }
		od;
		if
		:: r -> skip
		:: else ->
			/* sq_enable_cb_at: enable_cb (0) or enable_cb_delayed */
			if
			:: bufs = 0
#ifdef EVENT_IDX
			:: bufs = outstanding * 3 / 4
#endif
			fi;
			atomic {                    /* sq_set_avail_flags(0) */
				if
				:: flags_shadow -> st(DRV, AVAIL_FLAGS, 0); flags_shadow = 0
				:: else -> skip
				fi }
#ifdef EVENT_IDX
			atomic { st(DRV, USED_EVENT, (last_used + bufs) % M) }
#endif
#ifndef M_D4
			atomic { fence(DRV) }       /* D4: vq_mb */
#endif
			atomic {                    /* D4: the re-check */
				ld(DRV, USED_IDX, u);
				r = (DIST(u, last_used) > bufs)
#ifdef M_D4_RECHECK
				; r = 0
#endif
			}
			if
			:: r -> skip
			:: else ->
				/* vq_evt_wait on the call eventfd */
				atomic { call -> call = 0; fence(DRV) }
			fi;
			atomic {                    /* sq_disable_cb */
				if
				:: !flags_shadow -> st(DRV, AVAIL_FLAGS, 1); flags_shadow = 1
				:: else -> skip
				fi }
		fi;
		/* vq_drv_get until it returns 0: sq_used_count, sq_read_used */
		do
		:: last_used == used_shadow ->
#ifdef M_D3
			/* without the acquire the element may be read first */
			atomic { ld(DRV, USED_RING + last_used % N, e) }
#endif
			atomic {
				ld(DRV, USED_IDX, u);
				/* 2.7.8: no further than the buffers published */
				assert(DIST(u, last_used) <= outstanding - DIST(avail_shadow, kicked));
				used_shadow = u }
			if
			:: used_shadow == last_used -> break
			:: else -> skip
			fi
#ifdef M_D3
			; atomic {
				assert(e == VAL(consumed));
				last_used = (last_used + 1) % M;
				outstanding--;
				consumed++ }
#endif
		:: last_used != used_shadow ->
			atomic {
				/* D3: the element after the index */
				ld(DRV, USED_RING + last_used % N, e);
				assert(e == VAL(consumed));
				last_used = (last_used + 1) % M;
				outstanding--;
				consumed++ }
		od
	od
}

proctype device() {
	byte last_avail, avail_shadow, used_idx, signalled_used, unsignalled;
	byte popped, n, a, h, ev, old, nstaged, i;
	byte stage[N];
	bit signalled_valid, flags_known, flags_shadow, busy, armed, r, valid;

	/* vq_rt_loop_add: the queue starts active (busy), kicks off
	 * (sd_disable_notify: the flag; nothing with EVENT_IDX) */
	busy = 1;
#ifndef EVENT_IDX
	atomic { st(DEV, USED_FLAGS, 1); flags_shadow = 1; flags_known = 1 }
#endif
	do
	:: busy ->
		/* queue_turn -> process: vq_dev_pop until 0 (sd_pop_common) */
		n = 0;
		do
		:: last_avail == avail_shadow ->
#ifdef M_V1
			/* without the acquire the entry may be read first */
			atomic { ld(DEV, AVAIL_RING + last_avail % N, h) }
#endif
			atomic {                    /* V1: sd_avail_count */
				ld(DEV, AVAIL_IDX, a);
				assert(DIST(a, last_avail) <= N);   /* 2.7.13.3 */
				avail_shadow = a }
			if
			:: avail_shadow == last_avail -> break
			:: else -> skip
			fi
#ifdef M_V1
			; atomic {
				assert(h == VAL(popped));
				stage[nstaged] = h; nstaged++;
				popped++; n++;
				last_avail = (last_avail + 1) % M }
#endif
		:: last_avail != avail_shadow ->
			atomic {                    /* V1: the entry after the index */
				ld(DEV, AVAIL_RING + last_avail % N, h);
				assert(h == VAL(popped));
				stage[nstaged] = h; nstaged++;
				popped++; n++;
				last_avail = (last_avail + 1) % M }
		od;
		if
		:: nstaged > 0 ->
			atomic {                    /* sd_flush */
#ifndef M_V2
				i = 0;
				do
				:: i < nstaged -> st(DEV, USED_RING + (used_idx + i) % N, stage[i]); i++
				:: else -> break
				od;
#endif
				/* V2: the elements, then used->idx with release */
				st(DEV, USED_IDX, (used_idx + nstaged) % M);
#ifdef M_V2
				i = 0;
				do
				:: i < nstaged -> st(DEV, USED_RING + (used_idx + i) % N, stage[i]); i++
				:: else -> break
				od;
#endif
				/* sd_published: 2^16 used entries since the last look */
				a = (used_idx + nstaged) % M;
				if
				:: DIST(a, signalled_used) < DIST(a, used_idx) -> signalled_valid = 0
				:: else -> skip
				fi;
				used_idx = a;
				unsignalled = (unsignalled + nstaged > M -> M : unsignalled + nstaged);
				nstaged = 0;
				i = 0 }
		:: else -> skip
		fi;
		/* vq_rt_queue_signal -> sd_should_signal */
		if
		:: n > 0 && unsignalled > 0 ->
#ifndef M_V3
			atomic { fence(DEV) }       /* V3: vq_mb */
#endif
			atomic {
#ifdef EVENT_IDX
				ld(DEV, USED_EVENT, ev);
				old = signalled_used;
				valid = signalled_valid;
				signalled_used = used_idx;
				signalled_valid = 1;
				r = !(valid && !NEED_EVENT(ev, used_idx, old));
#else
				ld(DEV, AVAIL_FLAGS, ev);
				r = (ev == 0);
#endif
				if
				:: r -> unsignalled = 0
				:: else -> skip
				fi }
			if
			:: r -> atomic { fence(DEV); call = 1 }   /* queue_call */
			:: else -> skip
			fi
		:: else -> skip
		fi;
		/* ran dry: the busy-poll window (rt_busy_poll on has_avail) */
		r = 0;
		i = 0;
		do
		:: r || i == POLL -> break
		:: else ->
			atomic {                    /* sd_has_avail */
				if
				:: avail_shadow != last_avail -> r = 1
				:: else -> ld(DEV, AVAIL_IDX, a); r = (a != last_avail)
				fi;
				i++ }
		od;
		if
		:: r -> skip
		:: else -> busy = 0; armed = 0      /* queue_sleep */
		fi
	/* idle_look: a look, then sd_enable_notify and its re-check (V4) */
	:: !busy && !armed ->
		atomic {
			if
			:: avail_shadow != last_avail -> r = 1
			:: else -> ld(DEV, AVAIL_IDX, a); r = (a != last_avail)
			fi }
		if
		:: r -> skip
		:: else ->
			atomic {
#ifdef EVENT_IDX
				st(DEV, AVAIL_EVENT, last_avail)
#else
				if                  /* sd_set_used_flags(0) */
				:: !(flags_known && flags_shadow == 0) ->
					st(DEV, USED_FLAGS, 0); flags_shadow = 0; flags_known = 1
				:: else -> skip
				fi
#endif
			}
#ifndef M_V4
			atomic { fence(DEV) }       /* V4: vq_mb */
#endif
			atomic {                    /* V4: the re-check */
				ld(DEV, AVAIL_IDX, a);
				assert(DIST(a, last_avail) <= N);
				avail_shadow = a;
				r = (a != last_avail)
#ifdef M_V4_RECHECK
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
			if
			:: avail_shadow != last_avail -> r = 1
			:: else -> ld(DEV, AVAIL_IDX, a); r = (a != last_avail)
			fi }
		if
		:: r ->
wake:			/* queue_wake: active, kicks off (sd_disable_notify) */
			atomic {
				busy = 1;
				armed = 0;
#ifndef EVENT_IDX
				if
				:: !(flags_known && flags_shadow == 1) ->
					st(DEV, USED_FLAGS, 1); flags_shadow = 1; flags_known = 1
				:: else -> skip
				fi
#endif
			}
		:: else -> skip
		fi
	od
}

/* Nothing can move: every buffer must have come back.  A stuck state
 * short of that is a lost kick (the device asleep on a ring with buffers)
 * or a lost call (the driver asleep with used buffers waiting). */
active proctype watchdog() {
	timeout ->
	printf("stuck: consumed %d of %d, avail idx %d, used idx %d, kick %d call %d\n",
	       consumed, B, mem[AVAIL_IDX], mem[USED_IDX], kick, call);
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
