// SPDX-License-Identifier: MIT
/*
 * "Backend program conventions" (vhost-user.rst): --socket-path, --fd,
 * --print-capabilities as JSON, end promptly on SIGTERM.  Small pieces the
 * virtq daemons share.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <virtq/vhost_user_backend.h>

/* Match "--name=V" or "--name V"; sets *val and how many argv slots it took. */
static int match(char **argv, int i, int argc, const char *name,
		 bool has_val, const char **val, int *used)
{
	size_t n = strlen(name);
	const char *a = argv[i];

	if (strncmp(a, name, n) != 0)
		return 0;
	if (!has_val) {
		if (a[n] != '\0')
			return 0;
		*used = 1;
		return 1;
	}
	if (a[n] == '=') {
		*val = a + n + 1;
		*used = 1;
		return 1;
	}
	if (a[n] != '\0')
		return 0;
	if (i + 1 >= argc)
		return -1;
	*val = argv[i + 1];
	*used = 2;
	return 1;
}

int vq_vhu_parse_opts(int *argc, char **argv, struct vq_vhu_opts *o)
{
	int i = 1, out = 1;

	o->socket_path = NULL;
	o->fd = -1;
	o->print_capabilities = false;
	while (i < *argc) {
		const char *v = NULL;
		int used = 0, m;

		if ((m = match(argv, i, *argc, "--socket-path", true, &v, &used))) {
			if (m < 0 || !*v)
				goto bad;
			o->socket_path = v;
		} else if ((m = match(argv, i, *argc, "--fd", true, &v, &used))) {
			char *end;
			long fd;

			if (m < 0)
				goto bad;
			errno = 0;
			fd = strtol(v, &end, 10);
			if (errno || *end || end == v || fd < 0 || fd > 0x7fffffff)
				goto bad;
			o->fd = (int)fd;
		} else if (match(argv, i, *argc, "--print-capabilities", false,
				 &v, &used)) {
			o->print_capabilities = true;
		} else {
			argv[out++] = argv[i++];
			continue;
		}
		i += used;
	}
	argv[out] = NULL;
	*argc = out;
	if (o->socket_path && o->fd >= 0 && !o->print_capabilities) {
		fprintf(stderr, "--socket-path and --fd are incompatible\n");
		return -EINVAL;
	}
	return 0;
bad:
	fprintf(stderr, "bad value for %s\n", argv[i]);
	return -EINVAL;
}

void vq_vhu_print_capabilities(FILE *f, const char *type,
			       const char *const *features)
{
	fprintf(f, "{\n  \"type\": \"%s\"", type);
	if (features && features[0]) {
		fprintf(f, ",\n  \"features\": [\n");
		for (unsigned i = 0; features[i]; i++)
			fprintf(f, "    \"%s\"%s\n", features[i],
				features[i + 1] ? "," : "");
		fprintf(f, "  ]");
	}
	fprintf(f, "\n}\n");
}

static volatile sig_atomic_t *term_flag;

static void on_term(int sig)
{
	(void)sig;
	if (term_flag)
		*term_flag = 1;
}

int vq_vhu_on_sigterm(volatile sig_atomic_t *flag)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;        /* no SA_RESTART: poll returns EINTR */
	term_flag = flag;
	if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0)
		return -errno;
	return 0;
}

int vq_vhu_backend_open(struct vq_vhu_backend *b, const struct vq_vhu_opts *o)
{
	if (o->fd >= 0)
		return vq_vhu_backend_adopt_fd(b, o->fd);
	if (o->socket_path)
		return vq_vhu_backend_listen(b, o->socket_path, 0600);
	fprintf(stderr, "one of --socket-path or --fd is required\n");
	return -EINVAL;
}
