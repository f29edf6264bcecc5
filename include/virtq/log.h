/* SPDX-License-Identifier: MIT */
/*
 * virtq/log.h - what the library has to say, through the caller.
 *
 * The library never prints.  Its calls report through their return values
 * (and the handles' error_msg calls); what has no caller to return to (a
 * connection the vhost-user back-end closed while serving, a refused
 * request it carried on after, an IOTLB invalidation a queue held up)
 * goes to a log callback the application sets.  None is set at first:
 * the library is silent, and a message is not even formatted.
 *
 * Levels are syslog's priorities, so a callback may hand them to syslog(3)
 * as they are.
 */
#ifndef VIRTQ_LOG_H
#define VIRTQ_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

enum vq_log_level {
	VQ_LOG_ERR = 3,         /* something failed: a connection closed for an error */
	VQ_LOG_WARNING = 4,     /* carried on, but not as asked: a request refused */
	VQ_LOG_INFO = 6,        /* a connection opened or ended */
	VQ_LOG_DEBUG = 7,       /* each message handled */
};

/* msg is one line without a newline, valid only during the call. */
typedef void (*vq_log_fn)(void *arg, enum vq_log_level level, const char *msg);

/*
 * Send the library's messages of max_level and more severe to fn(arg, ...)
 * from now on; a NULL fn silences it again (the default).
 *
 * Safe from any thread at any time.  The callback may be called from any
 * thread that runs the library, but never twice at once: calls are
 * serialized, so it needs no lock of its own.  When vq_log_set returns,
 * the previous callback has returned and will not be called again, so its
 * arg may be freed.  The callback must not call vq_log_set (-EDEADLK); a
 * message the library would log from inside the callback is dropped.
 *
 * 0, -EINVAL for a max_level that is not a vq_log_level, or -EDEADLK.
 */
int vq_log_set(vq_log_fn fn, void *arg, enum vq_log_level max_level);

#ifdef __cplusplus
}
#endif
#endif
