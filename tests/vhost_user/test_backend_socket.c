// SPDX-License-Identifier: MIT
/*
 * The back-end's socket rules and the program conventions: a listening
 * path that is not a socket (or a live one) is refused, a stale one is
 * replaced with mode 0600 and removed on free; client mode reconnects;
 * the standard options; serve() ends promptly on SIGTERM.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include "backend_fixture.h"

static void listen_refuses_non_sockets(struct fx *x)
{
	struct vq_vhu_backend *b;
	struct vq_vhu_device d = { .features = ECHO_FEATURES, .nqueues = 1 };
	char p[96], l[96];
	struct stat st;
	int fd;

	CHECK_EQ(vq_vhu_backend_new(&d, &b), 0);
	snprintf(p, sizeof(p), "%s/file", x->dir);
	fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ(vq_vhu_backend_listen(b, p, 0), -EEXIST);
	CHECK_EQ(stat(p, &st), 0);
	CHECK(S_ISREG(st.st_mode));             /* not clobbered */
	unlink(p);
	/* a symlink, even to a socket, is not followed */
	snprintf(l, sizeof(l), "%s/link", x->dir);
	CHECK_EQ(symlink(x->path, l), 0);
	CHECK_EQ(vq_vhu_backend_listen(b, l, 0), -EEXIST);
	unlink(l);
	/* a live socket is not stolen */
	CHECK_EQ(vq_vhu_backend_listen(b, x->path, 0), -EADDRINUSE);
	/* a stale one is replaced, with mode 0600 */
	snprintf(p, sizeof(p), "%s/stale", x->dir);
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int s = socket(AF_UNIX, SOCK_STREAM, 0);

		strcpy(sa.sun_path, p);
		CHECK_EQ(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
		close(s);
	}
	CHECK_EQ(vq_vhu_backend_listen(b, p, 0), 0);
	CHECK_EQ(lstat(p, &st), 0);
	CHECK(S_ISSOCK(st.st_mode));
	CHECK_EQ(st.st_mode & 0777, 0600);
	vq_vhu_backend_free(b);
	CHECK(lstat(p, &st) < 0);               /* our socket is removed */
}

/* Backend program conventions: a back-end removes only the socket it
 * created.  One that another process put at the path since (a second
 * instance that found ours stale after a crash, say) is left alone. */
static void listen_removes_only_its_own(struct fx *x)
{
	struct vq_vhu_backend *b;
	struct vq_vhu_device d = { .features = ECHO_FEATURES, .nqueues = 1 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int s;

	CHECK_EQ(vq_vhu_backend_new(&d, &b), 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/taken", x->dir);
	CHECK_EQ(vq_vhu_backend_listen(b, sa.sun_path, 0), 0);
	CHECK_EQ(unlink(sa.sun_path), 0);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(s >= 0);
	CHECK_EQ(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	vq_vhu_backend_free(b);
	CHECK_EQ(lstat(sa.sun_path, &st), 0);   /* the other one's, kept */
	CHECK(S_ISSOCK(st.st_mode));
	close(s);
	unlink(sa.sun_path);
}

static void client_mode_reconnects(struct fx *x)
{
	struct vq_vhu_backend *b;
	struct vq_vhu_device d = { .features = ECHO_FEATURES, .nqueues = 1 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int ls, s;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/fe", x->dir);
	ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK_EQ(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CHECK_EQ(listen(ls, 2), 0);
	CHECK_EQ(vq_vhu_backend_new(&d, &b), 0);
	CHECK_EQ(vq_vhu_backend_connect(b, sa.sun_path, 50), 0);
	s = accept(ls, NULL, NULL);
	CHECK(s >= 0);
	CHECK(vq_vhu_backend_connected(b));
	close(s);
	CHECK_EQ(vq_vhu_backend_process(b), -ECONNRESET);
	CHECK(!vq_vhu_backend_connected(b));
	CHECK(vq_vhu_backend_timeout_ms(b) > 0);
	CHECK_EQ(vq_vhu_backend_fd(b), -1);
	usleep(60000);
	CHECK_EQ(vq_vhu_backend_timeout_ms(b), 0);
	CHECK_EQ(vq_vhu_backend_process(b), 1);
	CHECK(vq_vhu_backend_connected(b));
	s = accept(ls, NULL, NULL);
	CHECK(s >= 0);
	close(s);
	vq_vhu_backend_free(b);
	close(ls);
	unlink(sa.sun_path);
}

/* The program's SIGTERM handler: no SA_RESTART, so serve's poll returns. */
static volatile sig_atomic_t serve_stop;

static void serve_on_term(int sig)
{
	(void)sig;
	serve_stop = 1;
}

/* The blocking serve helper ends promptly on SIGTERM (conventions). */
static void serve_ends_on_sigterm(struct fx *x)
{
	char path[96], err[256] = "";
	struct vq_vhu_frontend_config c = {
		.features = ECHO_FEATURES, .nqueues = 1, .queue_size = 64,
		.mem_size = 1 << 20, .err = err, .errlen = sizeof(err),
	};
	struct vq_vhu_frontend *f = NULL;
	struct stat st;
	int status = 0, r = -1;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/serve", x->dir);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct sigaction sa = { .sa_handler = serve_on_term };
		struct echo e;

		echo_init(&e);
		if (sigaction(SIGTERM, &sa, NULL) || vq_vhu_backend_listen(e.b, path, 0))
			_exit(2);
		r = vq_vhu_backend_serve(e.b, &serve_stop, false);
		vq_vhu_backend_free(e.b);
		_exit(r ? 3 : 0);
	}
	for (int i = 0; i < 300; i++) {
		r = vq_vhu_frontend_connect(path, &c, &f);
		if (r != -ENOENT && r != -ECONNREFUSED)
			break;
		usleep(10000);
	}
	CHECK_EQ(r, 0);
	CHECK_EQ(vq_vhu_frontend_start(f), 0);
	vq_vhu_frontend_free(f);
	CHECK_EQ(kill(pid, SIGTERM), 0);
	for (int i = 0; i < 200 && waitpid(pid, &status, WNOHANG) == 0; i++)
		usleep(10000);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(lstat(path, &st) < 0);    /* the socket was removed */
}

int main(void)
{
	struct fx x;

	signal(SIGPIPE, SIG_IGN);
	fx_init(&x);
	T(listen_refuses_non_sockets);
	T(listen_removes_only_its_own);
	T(client_mode_reconnects);
	T(serve_ends_on_sigterm);
	fx_fini(&x);
	return 0;
}
