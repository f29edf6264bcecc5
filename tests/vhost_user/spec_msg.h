/* SPDX-License-Identifier: MIT */
/*
 * The vhost-user layer's one message format (docs/vhost-user.md,
 * "Messages"): where the rule is, first, then what was wrong.  The first
 * part is a virtio spec section ("2.7: "), a vhost-user.rst message
 * ("VHOST_USER_SET_VRING_ADDR: ") or a vhost-user.rst section
 * ("vhost-user \"Ring states\": ").
 */
#ifndef VQ_SPEC_MSG_H
#define VQ_SPEC_MSG_H

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

static inline bool spec_section_first(const char *m)
{
	const char *p = m;

	if (isdigit((unsigned char)*p)) {               /* 2.7.13.3: */
		while (isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1])))
			p++;
		return p[0] == ':' && p[1] == ' ' && p[2];
	}
	if (!strncmp(p, "VHOST_USER_", 11)) {           /* VHOST_USER_X: */
		p += 11;
		while (isupper((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_')
			p++;
		return p > m + 11 && p[0] == ':' && p[1] == ' ' && p[2];
	}
	if (!strncmp(p, "vhost-user \"", 12)) {         /* vhost-user "Section": */
		p = strchr(p + 12, '"');
		return p && p > m + 12 && p[1] == ':' && p[2] == ' ' && p[3];
	}
	return false;
}

#endif
