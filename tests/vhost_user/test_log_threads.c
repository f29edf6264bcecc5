// SPDX-License-Identifier: MIT
/*
 * The log callback set while another thread logs (virtq/log.h's thread
 * rules): a call gets its own callback's arg, never another's; calls never
 * overlap; and once vq_log_set returns, the callback it replaced is not
 * called again.  Also under TSan (suite threads).
 */
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <virtq/log.h>

#include "log_internal.h"
#include "vq_test.h"

#define ROUNDS 2000

struct sink {
	unsigned long calls;            /* only ever touched inside a call */
	bool bad_arg;
};

static struct sink sink[2];
static int inside;                      /* calls in progress, at most 1 */
static unsigned long total_calls;       /* atomic: whether loggers run yet */
static bool overlapped;
static bool stop;

static void to_sink(unsigned which, void *arg, enum vq_log_level level,
		    const char *msg)
{
	struct sink *s = &sink[which];

	if (__atomic_fetch_add(&inside, 1, __ATOMIC_SEQ_CST) != 0)
		__atomic_store_n(&overlapped, true, __ATOMIC_RELAXED);
	/* each function is called with the arg set with it, never the other's */
	if (arg != s || strcmp(msg, "tick") || level != VQ_LOG_WARNING)
		s->bad_arg = true;
	s->calls++;
	__atomic_fetch_add(&total_calls, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&inside, 1, __ATOMIC_SEQ_CST);
}

static void to_sink0(void *arg, enum vq_log_level level, const char *msg)
{
	to_sink(0, arg, level, msg);
}

static void to_sink1(void *arg, enum vq_log_level level, const char *msg)
{
	to_sink(1, arg, level, msg);
}

static void *logger(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
		vq_log(VQ_LOG_WARNING, "tick");
	return NULL;
}

static void set_while_another_thread_logs(void)
{
	pthread_t t[2];

	for (unsigned i = 0; i < 2; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, logger, NULL), 0);
	/* On a loaded machine the loggers may not run before all the rounds
	 * are done, and nothing would be tested: wait for their first call. */
	CHECK_EQ(vq_log_set(to_sink1, &sink[1], VQ_LOG_WARNING), 0);
	for (unsigned w = 0; !__atomic_load_n(&total_calls, __ATOMIC_RELAXED); w++) {
		CHECK(w < 30000);               /* 30 s: the loggers never ran */
		usleep(1000);
	}
	for (unsigned r = 0; r < ROUNDS; r++) {
		struct sink *now = &sink[r & 1], *old = &sink[!(r & 1)];
		unsigned long old_calls;

		CHECK_EQ(vq_log_set(r & 1 ? to_sink1 : to_sink0, now,
				    VQ_LOG_WARNING), 0);
		/* the replaced callback has returned and stays unused: its
		 * count may be read without a lock and does not move */
		old_calls = old->calls;
		sched_yield();
		CHECK_EQ(old->calls, old_calls);
		/* and the new one's count is read only once it is replaced */
	}
	CHECK_EQ(vq_log_set(NULL, NULL, VQ_LOG_ERR), 0);
	__atomic_store_n(&stop, true, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < 2; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	CHECK(!overlapped);
	CHECK(!sink[0].bad_arg && !sink[1].bad_arg);
	CHECK(sink[0].calls + sink[1].calls > 0);
	fprintf(stderr, "   %lu + %lu calls\n", sink[0].calls, sink[1].calls);
}

int main(void)
{
	RUN(set_while_another_thread_logs);
	return 0;
}
