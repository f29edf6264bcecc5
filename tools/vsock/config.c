// SPDX-License-Identifier: MIT
/*
 * --config FILE: the VMs in vhost-device-vsock's YAML shape, so that its
 * users' files run unchanged:
 *
 *	vms:
 *	    - guest_cid: 3
 *	      socket: /tmp/vhost3.socket
 *	      uds_path: /tmp/vm3.vsock
 *	      groups: group1+groupA
 *
 * A strict reader of exactly that shape, not of YAML: one top-level key
 * (vms), a block list of maps whose values are scalars (plain, or
 * quoted), comments and blank lines.  Anything else is an error that
 * names the line and what was found there, and a value goes through the
 * same checks as a --vm key's (vsock_vm_set).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "virtq-vsock.h"

#define CONFIG_MAX (1u << 20)   /* bytes of a config file */

struct reader {
	struct vsock_opts *o;
	const char *path;
	unsigned line;
	struct vsock_vm *vm;            /* the entry being read */
	int item_col, key_col;          /* "- " and its keys' column; -1: none yet */
	char seen[16][24];              /* the entry's keys so far */
	unsigned nseen;
};

static _Noreturn void fail(const struct reader *r, const char *fmt, const char *what)
	__attribute__((format(printf, 2, 0)));

static _Noreturn void fail(const struct reader *r, const char *fmt, const char *what)
{
	char msg[256];

	snprintf(msg, sizeof(msg), fmt, what);
	cli_usage_error("--config %s:%u: %s", r->path, r->line, msg);
}

/* "--config FILE:LINE" into w (n bytes), or a copy the VM keeps. */
static const char *where(const struct reader *r, char *w, size_t n)
{
	if (!w) {
		n = strlen(r->path) + 32;
		w = malloc(n);
		if (!w)
			cli_usage_error("--config %s: out of memory", r->path);
	}
	snprintf(w, n, "--config %s:%u", r->path, r->line);
	return w;
}

/* Cut a comment off s: '#' at its start or after a blank, outside
 * quotes. */
static void cut_comment(char *s)
{
	char q = 0;

	for (char *p = s; *p; p++) {
		if (q) {
			if (*p == q)
				q = 0;
		} else if (*p == '"' || *p == '\'') {
			q = *p;
		} else if (*p == '#' && (p == s || p[-1] == ' ')) {
			*p = '\0';
			break;
		}
	}
}

static char *trim(char *s)
{
	size_t n;

	while (*s == ' ')
		s++;
	n = strlen(s);
	while (n && s[n - 1] == ' ')
		s[--n] = '\0';
	return s;
}

/* A scalar: plain, '...' ('' a quote) or "..." (\" and \\ the escapes
 * taken), in place. */
static char *scalar(const struct reader *r, char *v)
{
	char q = *v, *d, *s;

	if (q != '"' && q != '\'') {
		if (strchr("[{&*!|>%@`", *v))
			fail(r, "'%s' is not a plain value this file may hold (quote it)", v);
		return v;
	}
	for (d = s = v + 1; *s; s++) {
		if (q == '\'' && s[0] == '\'' && s[1] == '\'')
			s++;
		else if (q == '"' && s[0] == '\\' && (s[1] == '"' || s[1] == '\\'))
			s++;
		else if (q == '"' && s[0] == '\\')
			fail(r, "'%s': only \\\" and \\\\ are escapes here", v);
		else if (*s == q)
			break;
		*d++ = *s;
	}
	if (*s != q || *trim(s + 1))
		fail(r, "'%s': a quoted value must end with its quote, and the line there", v);
	*d = '\0';
	return v + 1;
}

/* "key: value" at the entry's key column. */
static void entry_key(struct reader *r, char *kv)
{
	char *colon = strchr(kv, ':'), *val, w[4160];
	size_t klen;

	if (!colon || (colon[1] && colon[1] != ' '))
		fail(r, "'%s' is not KEY: VALUE", kv);
	*colon = '\0';
	klen = strlen(kv);
	if (!klen || strspn(kv, "abcdefghijklmnopqrstuvwxyz_-") != klen)
		fail(r, "'%s' is not a key of a VM", kv);
	for (unsigned i = 0; i < r->nseen; i++)
		if (!strcmp(r->seen[i], kv))
			fail(r, "%s: given twice for one VM", kv);
	if (r->nseen < 16 && klen < sizeof(r->seen[0]))
		strcpy(r->seen[r->nseen++], kv);
	val = trim(colon + 1);
	if (!*val)
		fail(r, "%s: needs a value (a VM's keys hold a word, a number or a path)", kv);
	vsock_vm_set(r->o, r->vm, kv, scalar(r, val), where(r, w, sizeof(w)));
}

/* One line of the "vms:" list (col: its indentation). */
static void list_line(struct reader *r, int col, char *s)
{
	if (s[0] == '-' && (s[1] == ' ' || !s[1])) {
		if (r->item_col < 0)
			r->item_col = col;
		if (col != r->item_col)
			fail(r, "%s: a VM's \"-\" must line up with the first one's", "-");
		r->vm = vsock_vm_add(r->o, where(r, NULL, 0));
		r->nseen = 0;
		r->key_col = -1;
		s++;
		col++;
		while (*s == ' ') {
			s++;
			col++;
		}
		if (!*s)
			return;         /* the keys on the lines below */
		r->key_col = col;
		entry_key(r, s);
		return;
	}
	if (!r->vm)
		fail(r, "'%s': the list of VMs starts with \"- \"", s);
	if (r->key_col < 0 && col > r->item_col)
		r->key_col = col;
	if (col != r->key_col)
		fail(r, "'%s': a VM's keys must line up with its first one", s);
	entry_key(r, s);
}

static void config_line(struct reader *r, char *s, bool *in_vms)
{
	int col = 0;

	if (s[0] && s[strlen(s) - 1] == '\r')
		s[strlen(s) - 1] = '\0';
	while (s[col] == ' ')
		col++;
	if (s[col] == '\t')
		fail(r, "%s in the indentation (YAML indents with spaces)", "a tab");
	cut_comment(s);
	s = trim(s);
	if (!*s)
		return;
	if (!*in_vms) {
		if (!strcmp(s, "---") && !r->o->nvm)
			return;
		if (col || strcmp(s, "vms:"))
			fail(r, "'%s': the file is a \"vms:\" list (the only top-level key)", s);
		*in_vms = true;
		return;
	}
	if (col == 0 && strncmp(s, "- ", 2) && strcmp(s, "-"))
		fail(r, "'%s': the only top-level key is vms", s);
	list_line(r, col, s);
}

void vsock_config_read(struct vsock_opts *o, const char *path)
{
	/* static: reachable when a bad line ends the program */
	static char *buf;
	struct reader r = { .o = o, .path = path, .item_col = -1, .key_col = -1 };
	FILE *f = fopen(path, "r");
	char *line, *save = NULL;
	size_t n;
	bool in_vms = false;

	buf = malloc(CONFIG_MAX + 2);
	if (!f || !buf)
		cli_usage_error("--config: cannot read %s: %s", path, strerror(errno));
	n = fread(buf, 1, CONFIG_MAX + 1, f);
	fclose(f);
	if (n > CONFIG_MAX)
		cli_usage_error("--config %s: larger than %u bytes", path, CONFIG_MAX);
	if (memchr(buf, '\0', n))
		cli_usage_error("--config %s: not a text file (a NUL byte)", path);
	buf[n] = '\0';
	/* strtok_r would skip empty lines, and their numbers with them */
	for (line = buf; line; line = save) {
		save = strchr(line, '\n');
		if (save)
			*save++ = '\0';
		r.line++;
		if (!*line && !save)
			break;
		config_line(&r, line, &in_vms);
	}
	if (!o->nvm)
		cli_usage_error("--config %s: no VMs (a \"vms:\" list of at least one)", path);
	free(buf);
	buf = NULL;
}
