// SPDX-License-Identifier: MIT
/*
 * The SIGBUS guard (guard.h).  The registry is a fixed array of slots that
 * the signal handler reads without a lock: each slot's word holds a state
 * and a generation, changed by compare-and-swap; its fields are written
 * between a slot's claim and its publication (release), and a reader
 * re-checks the word after reading them, as a seqlock reader does, so a
 * slot being reused is never taken for the mapping it held before.
 *
 *   FREE -> SETTING -> LIVE -> FREE                      (vq_guard_unmap)
 *                      LIVE -> LOSING -> LOST -> FREE    (a fault in it)
 *
 * LOSING is the handler at work (replacing the mapping, shutting the
 * socket down): other threads faulting in the range wait for it to be
 * done, and so does its owner before it unmaps the range or closes the
 * socket.  The handler makes only system calls (mmap, shutdown,
 * sched_yield; sigaction and raise on the way to the default action) and
 * lock-free atomic accesses: nothing that locks or allocates.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <virtq/mem.h>

#include "guard.h"

enum { FREE, SETTING, LIVE, LOSING, LOST };

/*
 * The handler runs inside whatever faulted.  Under TSan that is often the
 * runtime's own code for an atomic operation on guest memory, holding a
 * lock the runtime takes again for any atomic operation of ours (a
 * deadlock): the handler's code is left out of the sanitizers'
 * instrumentation.
 */
#if defined(__clang__) && __has_attribute(disable_sanitizer_instrumentation)
#define HANDLER_CODE __attribute__((disable_sanitizer_instrumentation))
#elif defined(__GNUC__) && !defined(__clang__)
#define HANDLER_CODE __attribute__((no_sanitize_thread))
#else
#define HANDLER_CODE
#endif

#define STATE(w) ((w) & 7u)
#define NEXT_GEN(w) ((((w) >> 3) + 1) << 3)

struct slot {
	uint64_t word;          /* generation << 3 | state */
	uintptr_t addr;
	size_t len;
	int fd;                 /* shut down when lost, or -1 */
	uint64_t lost_at;       /* the first fault's offset in the mapping */
};

static struct slot slots[VQ_GUARD_SLOTS];
static unsigned slots_seen;     /* claimed ever: the handler reads no more */
static struct sigaction prev;   /* SIGBUS's action before ours */
static int install_err;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

bool vq_guard_needed(int fd)
{
	struct statfs sfs;
	int seals = fcntl(fd, F_GET_SEALS);

	/* -EINVAL: not a memfd (a plain file, hugetlbfs) */
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return true;
	return fstatfs(fd, &sfs) < 0 ||
	       sfs.f_type == (typeof(sfs.f_type))HUGETLBFS_MAGIC;
}

/* Not ours: what would have happened without us. */
static void chain(int sig, siginfo_t *si, void *uc)
{
	struct sigaction dfl;

	if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
		if (prev.sa_flags & SA_SIGINFO)
			prev.sa_sigaction(sig, si, uc);
		else
			prev.sa_handler(sig);
		return;
	}
	/* A SIGBUS someone sent (kill, tgkill) is ignored if it was. */
	if (si->si_code <= 0 && prev.sa_handler == SIG_IGN)
		return;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(SIGBUS, &dfl, NULL);
	/* A fault repeats once we return and kills with the default action
	 * (the kernel kills for an ignored fault as well); a sent signal is
	 * sent again, pending until we return. */
	if (si->si_code <= 0)
		raise(SIGBUS);
}

HANDLER_CODE static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	if (!vq_mem_handle_sigbus(si))
		chain(sig, si, uc);
	errno = saved;
}

static void install(void)
{
	struct sigaction sa, now;

	/* read the old action first: a fault on another thread may reach
	 * our handler before sigaction() returned what it replaced */
	if (sigaction(SIGBUS, NULL, &prev) < 0) {
		install_err = -errno;
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, NULL) < 0 ||
	    sigaction(SIGBUS, NULL, &now) < 0)
		install_err = -errno;
	else if (!(now.sa_flags & SA_SIGINFO) || now.sa_sigaction != on_sigbus)
		/* refused without an error: ASan and TSan keep SIGBUS to
		 * themselves under allow_user_segv_handler=0 */
		install_err = -ENOTSUP;
}

/* The slot's word once no handler is at work on it. */
HANDLER_CODE static uint64_t settled(const struct slot *s)
{
	uint64_t w;

	while (STATE(w = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE)) == LOSING)
		sched_yield();
	return w;
}

/* Anonymous zero pages over [base, base+len).  The system call itself
 * where it takes its six arguments as they are: a sanitizer's mmap
 * interceptor records the replacement as this thread writing the whole
 * range, and every other thread's later access to it as a race (the
 * kernel orders them; the sanitizer cannot see it). */
HANDLER_CODE static bool replace(uintptr_t base, size_t len)
{
	int prot = PROT_READ | PROT_WRITE;
	int flags = MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

#if defined(__x86_64__) || defined(__aarch64__) || defined(__powerpc64__) || \
	(defined(__riscv) && __riscv_xlen == 64)
	return syscall(SYS_mmap, (long)base, (long)len, (long)prot, (long)flags,
		       -1L, 0L) != -1;
#else
	return mmap((void *)base, len, prot, flags, -1, 0) != MAP_FAILED;
#endif
}

enum try { NOT_MINE, MINE, AGAIN, FAILED };

/* The fault at a, against one slot. */
HANDLER_CODE static enum try try_slot(struct slot *s, uintptr_t a)
{
	uint64_t w = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE);
	uintptr_t base;
	size_t len;
	int fd;

	if (STATE(w) < LIVE)
		return NOT_MINE;
	base = __atomic_load_n(&s->addr, __ATOMIC_RELAXED);
	len = __atomic_load_n(&s->len, __ATOMIC_RELAXED);
	fd = __atomic_load_n(&s->fd, __ATOMIC_RELAXED);
	/* the fields read before the word is looked at again */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (a - base >= len)
		return NOT_MINE;
	if (STATE(w) == LOSING) {
		/* another thread is replacing it: the access retries after */
		settled(s);
		return AGAIN;
	}
	if (STATE(w) == LOST)   /* replaced: the access retries */
		return __atomic_load_n(&s->word, __ATOMIC_RELAXED) == w ?
		       MINE : AGAIN;
	if (!__atomic_compare_exchange_n(&s->word, &w, (w & ~7ull) | LOSING,
					 false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return AGAIN;
	if (!replace(base, len)) {
		/* LIVE again: the fault kills, as it would have */
		__atomic_store_n(&s->word, w, __ATOMIC_RELEASE);
		return FAILED;
	}
	__atomic_store_n(&s->lost_at, (uint64_t)(a - base), __ATOMIC_RELAXED);
	if (fd >= 0)
		shutdown(fd, SHUT_RDWR);
	__atomic_store_n(&s->word, (w & ~7ull) | LOST, __ATOMIC_RELEASE);
	return MINE;
}

HANDLER_CODE bool vq_mem_handle_sigbus(const siginfo_t *si)
{
	unsigned n;
	uintptr_t a;

	/* a page the file no longer has, or memory that failed under it */
	if (!si || si->si_signo != SIGBUS ||
	    (si->si_code != BUS_ADRERR && si->si_code != BUS_MCEERR_AR))
		return false;
	a = (uintptr_t)si->si_addr;
	n = __atomic_load_n(&slots_seen, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++) {
		enum try t;

		while ((t = try_slot(&slots[i], a)) == AGAIN)
			;
		if (t != NOT_MINE)
			return t == MINE;
	}
	return false;
}

int vq_guard_add(void *addr, size_t len, int shut_fd)
{
	pthread_once(&install_once, install);
	if (install_err)
		return install_err;
	for (unsigned i = 0; i < VQ_GUARD_SLOTS; i++) {
		struct slot *s = &slots[i];
		uint64_t w = __atomic_load_n(&s->word, __ATOMIC_RELAXED), gen;
		unsigned seen = __atomic_load_n(&slots_seen, __ATOMIC_RELAXED);

		gen = NEXT_GEN(w);
		if (STATE(w) != FREE ||
		    !__atomic_compare_exchange_n(&s->word, &w, gen | SETTING,
						 false, __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			continue;
		/* the claim is seen before the fields change */
		__atomic_thread_fence(__ATOMIC_RELEASE);
		__atomic_store_n(&s->addr, (uintptr_t)addr, __ATOMIC_RELAXED);
		__atomic_store_n(&s->len, len, __ATOMIC_RELAXED);
		__atomic_store_n(&s->fd, shut_fd, __ATOMIC_RELAXED);
		__atomic_store_n(&s->lost_at, 0, __ATOMIC_RELAXED);
		while (seen < i + 1 &&
		       !__atomic_compare_exchange_n(&slots_seen, &seen, i + 1,
						    false, __ATOMIC_RELEASE,
						    __ATOMIC_RELAXED))
			;
		__atomic_store_n(&s->word, gen | LIVE, __ATOMIC_RELEASE);
		return (int)i;
	}
	return -ENOSPC;
}

void vq_guard_unmap(int slot, void *addr, size_t len)
{
	if (slot >= 0 && (unsigned)slot < VQ_GUARD_SLOTS) {
		struct slot *s = &slots[slot];
		uint64_t w;

		/* a handler may take it LIVE -> LOSING meanwhile: then wait
		 * for it again */
		do
			w = settled(s);
		while (STATE(w) >= LIVE &&
		       !__atomic_compare_exchange_n(&s->word, &w,
						    (w & ~7ull) | FREE, false,
						    __ATOMIC_RELEASE,
						    __ATOMIC_RELAXED));
	}
	munmap(addr, len);
}

bool vq_guard_lost(int slot, uint64_t *offset)
{
	const struct slot *s;

	if (slot < 0 || (unsigned)slot >= VQ_GUARD_SLOTS)
		return false;
	s = &slots[slot];
	if (STATE(settled(s)) != LOST)
		return false;
	*offset = __atomic_load_n(&s->lost_at, __ATOMIC_RELAXED);
	return true;
}

unsigned vq_guard_count(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < VQ_GUARD_SLOTS; i++) {
		uint64_t w = __atomic_load_n(&slots[i].word, __ATOMIC_RELAXED);

		n += STATE(w) != FREE;
	}
	return n;
}
