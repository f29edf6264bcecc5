// SPDX-License-Identifier: MIT
/*
 * The log callback (virtq/log.h).  One mutex holds the callback and its arg
 * together: a thread logging while another sets a new callback calls either
 * the old pair or the new one, never one's function with the other's arg,
 * and once vq_log_set returns nobody is still inside the old one.  Logging
 * is rare (errors, connections), so the lock costs nothing that matters;
 * the common case, no callback, is one relaxed load (vq_log_on).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "log_internal.h"

/* Longer messages are cut: every message the library logs is one line. */
#define VQ_LOG_MSG_MAX 512

int vq_log_max = -1;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static vq_log_fn log_fn;
static void *log_arg;
/* This thread is inside the callback: it may not take the lock again. */
static __thread bool in_callback;

int vq_log_set(vq_log_fn fn, void *arg, enum vq_log_level max_level)
{
	if (fn && max_level != VQ_LOG_ERR && max_level != VQ_LOG_WARNING &&
	    max_level != VQ_LOG_INFO && max_level != VQ_LOG_DEBUG)
		return -EINVAL;
	if (in_callback)
		return -EDEADLK;
	pthread_mutex_lock(&log_lock);
	log_fn = fn;
	log_arg = fn ? arg : NULL;
	__atomic_store_n(&vq_log_max, fn ? (int)max_level : -1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&log_lock);
	return 0;
}

void vq_log_emit(enum vq_log_level level, const char *fmt, ...)
{
	char msg[VQ_LOG_MSG_MAX];
	va_list ap;

	if (in_callback)
		return;         /* the callback called into the library */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&log_lock);
	/* the level again, under the lock: the callback may have changed */
	if (log_fn && (int)level <= vq_log_max) {
		in_callback = true;
		log_fn(log_arg, level, msg);
		in_callback = false;
	}
	pthread_mutex_unlock(&log_lock);
}
