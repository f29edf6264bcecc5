// SPDX-License-Identifier: MIT
/*
 * The log callback (virtq/log.h): silent by default with nothing even
 * formatted, the level filter, one line per message, the -EINVAL and
 * -EDEADLK refusals, and a callback that calls back into the library.
 */
#include <virtq/log.h>

#include "log_internal.h"
#include "vq_test.h"

struct seen {
	unsigned n;
	enum vq_log_level level[8];
	char msg[8][600];
};

static void keep(void *arg, enum vq_log_level level, const char *msg)
{
	struct seen *s = arg;

	if (s->n < 8) {
		s->level[s->n] = level;
		snprintf(s->msg[s->n], sizeof(s->msg[0]), "%s", msg);
	}
	s->n++;
}

static unsigned evaluated;

static int count_evaluation(void)
{
	return (int)++evaluated;
}

/* No callback: every level is off, and a message's arguments are not even
 * evaluated (so nothing is formatted). */
static void silent_by_default_nothing_formatted(void)
{
	CHECK(!vq_log_on(VQ_LOG_ERR));
	CHECK(!vq_log_on(VQ_LOG_DEBUG));
	vq_log(VQ_LOG_ERR, "x %d", count_evaluation());
	CHECK_EQ(evaluated, 0);
}

/* A callback takes its level and the more severe ones; the others are not
 * formatted either.  Levels are syslog's priorities. */
static void level_filter(void)
{
	struct seen s = { 0 };

	CHECK_EQ(VQ_LOG_ERR, 3);
	CHECK_EQ(VQ_LOG_WARNING, 4);
	CHECK_EQ(VQ_LOG_INFO, 6);
	CHECK_EQ(VQ_LOG_DEBUG, 7);
	CHECK_EQ(vq_log_set(keep, &s, VQ_LOG_WARNING), 0);
	vq_log(VQ_LOG_ERR, "error %d", 1);
	vq_log(VQ_LOG_WARNING, "warning %s", "two");
	vq_log(VQ_LOG_INFO, "info %d", count_evaluation());
	vq_log(VQ_LOG_DEBUG, "debug %d", count_evaluation());
	CHECK_EQ(evaluated, 0);
	CHECK_EQ(s.n, 2);
	CHECK_EQ(s.level[0], VQ_LOG_ERR);
	CHECK(!strcmp(s.msg[0], "error 1"));
	CHECK_EQ(s.level[1], VQ_LOG_WARNING);
	CHECK(!strcmp(s.msg[1], "warning two"));
	CHECK_EQ(vq_log_set(keep, &s, VQ_LOG_DEBUG), 0);
	vq_log(VQ_LOG_DEBUG, "debug %d", count_evaluation());
	CHECK_EQ(evaluated, 1);
	CHECK_EQ(s.n, 3);
	CHECK(!strcmp(s.msg[2], "debug 1"));
	/* silenced again: nothing arrives */
	CHECK_EQ(vq_log_set(NULL, NULL, VQ_LOG_DEBUG), 0);
	vq_log(VQ_LOG_ERR, "error %d", 2);
	CHECK_EQ(s.n, 3);
	CHECK(!vq_log_on(VQ_LOG_ERR));
}

/* A level that is not one of the four is refused, and the callback set
 * before stays. */
static void bad_level_refused(void)
{
	struct seen s = { 0 }, t = { 0 };

	CHECK_EQ(vq_log_set(keep, &s, VQ_LOG_ERR), 0);
	CHECK_EQ(vq_log_set(keep, &t, (enum vq_log_level)5), -EINVAL);
	CHECK_EQ(vq_log_set(keep, &t, (enum vq_log_level)0), -EINVAL);
	CHECK_EQ(vq_log_set(keep, &t, (enum vq_log_level)8), -EINVAL);
	vq_log(VQ_LOG_ERR, "still");
	CHECK_EQ(s.n, 1);
	CHECK_EQ(t.n, 0);
	CHECK_EQ(vq_log_set(NULL, NULL, (enum vq_log_level)0), 0);
}

/* A message is one line, cut at 511 bytes. */
static void long_message_cut(void)
{
	struct seen s = { 0 };
	char big[700];

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK_EQ(vq_log_set(keep, &s, VQ_LOG_ERR), 0);
	vq_log(VQ_LOG_ERR, "%s", big);
	CHECK_EQ(s.n, 1);
	CHECK_EQ(strlen(s.msg[0]), 511);
	CHECK_EQ(vq_log_set(NULL, NULL, VQ_LOG_ERR), 0);
}

static struct seen reentered;
static int reenter_set;

/* A callback that logs and sets the log itself. */
static void reenter(void *arg, enum vq_log_level level, const char *msg)
{
	keep(&reentered, level, msg);
	vq_log(VQ_LOG_ERR, "from inside the callback");
	reenter_set = vq_log_set(NULL, NULL, VQ_LOG_ERR);
}

/* Inside the callback vq_log_set refuses (the lock is held) and what the
 * library would log is dropped, not recursed into. */
static void callback_calls_back(void)
{
	CHECK_EQ(vq_log_set(reenter, NULL, VQ_LOG_ERR), 0);
	vq_log(VQ_LOG_ERR, "outside");
	CHECK_EQ(reentered.n, 1);
	CHECK(!strcmp(reentered.msg[0], "outside"));
	CHECK_EQ(reenter_set, -EDEADLK);
	CHECK(vq_log_on(VQ_LOG_ERR));           /* still set */
	CHECK_EQ(vq_log_set(NULL, NULL, VQ_LOG_ERR), 0);
}

int main(void)
{
	RUN(silent_by_default_nothing_formatted);
	RUN(level_filter);
	RUN(bad_level_refused);
	RUN(long_message_cut);
	RUN(callback_calls_back);
	return 0;
}
