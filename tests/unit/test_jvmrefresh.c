/* SPDX-License-Identifier: MIT */
/* jvmrefresh and jvmattach against a stand-in JVM: a child process that,
 * on SIGQUIT with its attach file present, opens a listener and answers one
 * request as HotSpot does, or one that never answers. The agent sees it
 * through a made-up /proc (its real status and stat, a libjvm.so mapping,
 * the java launcher), so the whole way is taken: the attach file, the
 * signal through a pidfd, the socket's checks, the request's bytes, the
 * reply; then once a window, the backoff, the switch. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/jvmrefresh.h"

static char dir[64];
static volatile sig_atomic_t quit_seen;

static void on_quit(int sig)
{
	(void)sig;
	quit_seen = 1;
}

/* The stand-in: answers when asked, or (@mute) never. Exit status 0: the
 * attach file was there at the signal and the request was jcmd's. */
static int stand_in(int ready, bool mute)
{
	static const char want[] = "1\0jcmd\0Compiler.perfmap\0\0";
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[PATH_MAX], req[64];
	struct pollfd p;
	size_t got = 0;
	int s, c;

	signal(SIGQUIT, on_quit);
	if (write(ready, "r", 1) != 1)
		return 10;
	for (int i = 0; i < 150 && !quit_seen; i++)
		usleep(10000);
	if (!quit_seen)
		return 11;
	snprintf(path, sizeof(path), "%s/cwd/.attach_pid%d", dir, (int)getpid());
	if (access(path, F_OK) != 0)
		return 12;
	if (mute)
		for (;;)
			pause();
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/root/tmp/.java_pid%d", dir, (int)getpid());
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 1) < 0)
		return 13;
	p = (struct pollfd){ .fd = s, .events = POLLIN };
	if (poll(&p, 1, 10000) != 1 || (c = accept(s, NULL, NULL)) < 0)
		return 14;
	while (got < sizeof(want)) {
		ssize_t n = read(c, req + got, sizeof(req) - got);

		if (n <= 0)
			return 15;
		got += (size_t)n;
	}
	if (got != sizeof(want) || memcmp(req, want, got))
		return 16;
	if (write(c, "0\n", 2) != 2)
		return 17;
	close(c);
	unlink(sa.sun_path);
	return 0;
}

static void copy(const char *from, const char *to)
{
	char buf[65536];
	ssize_t n;
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(in >= 0 && out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
}

static void put(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
}

/* The made-up /proc entry of @pid. */
static void fake_proc(pid_t pid, bool jvm)
{
	static const char maps[] = "7f1000000000-7f1000800000 r-xp 00000000 08:01 2 "
				   "/usr/lib/jvm/java-17/lib/server/libjvm.so\n";
	char p[PATH_MAX], q[PATH_MAX];

	snprintf(p, sizeof(p), "%s/proc/%d", dir, (int)pid);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	snprintf(q, sizeof(q), "%s/proc/%d/status", dir, (int)pid);
	copy(p, q);
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	snprintf(q, sizeof(q), "%s/proc/%d/stat", dir, (int)pid);
	copy(p, q);
	snprintf(q, sizeof(q), "%s/proc/%d/maps", dir, (int)pid);
	put(q, jvm ? maps : "", jvm ? sizeof(maps) - 1 : 0);
	snprintf(q, sizeof(q), "%s/proc/%d/cmdline", dir, (int)pid);
	put(q, "java\0-cp\0/srv\0Main\0", 19);
	snprintf(q, sizeof(q), "%s/proc/%d/environ", dir, (int)pid);
	put(q, "PATH=/bin\0", 10);
	snprintf(q, sizeof(q), "%s/proc/%d/exe", dir, (int)pid);
	assert_int_equal(symlink("/usr/lib/jvm/java-17/bin/java", q), 0);
	snprintf(p, sizeof(p), "%s/root", dir);
	snprintf(q, sizeof(q), "%s/proc/%d/root", dir, (int)pid);
	assert_int_equal(symlink(p, q), 0);
	snprintf(p, sizeof(p), "%s/cwd", dir);
	snprintf(q, sizeof(q), "%s/proc/%d/cwd", dir, (int)pid);
	assert_int_equal(symlink(p, q), 0);
}

static pid_t start(bool mute, bool jvm)
{
	int fds[2];
	char c;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		_exit(stand_in(fds[1], mute));
	}
	close(fds[1]);
	/* Its handler is in place: its status says SIGQUIT is caught. */
	assert_int_equal(read(fds[0], &c, 1), 1);
	close(fds[0]);
	fake_proc(pid, jvm);
	return pid;
}

static int setup(void **state)
{
	char p[PATH_MAX];

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/fx-test-jvmrefresh-XXXXXX");
	assert_non_null(mkdtemp(dir));
	for (const char *const *s =
		     (const char *const[]){ "proc", "root", "root/tmp", "cwd", NULL };
	     *s; s++) {
		snprintf(p, sizeof(p), "%s/%s", dir, *s);
		assert_int_equal(mkdir(p, 0755), 0);
	}
	snprintf(p, sizeof(p), "%s/proc/stat", dir);
	copy("/proc/stat", p);
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static struct fx_jvmrefresh *new_state(void)
{
	char root[PATH_MAX];
	static char proc[PATH_MAX];
	struct fx_jvmrefresh_opts o = FX_JVMREFRESH_DEFAULTS;

	snprintf(root, sizeof(root), "%s/proc", dir);
	snprintf(proc, sizeof(proc), "%s", root);
	o.proc_root = proc;
	o.budget_ms = 5000;
	o.wait_ms = 1000;
	return fx_jvmrefresh_new(&o);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_answers(void **state)
{
	struct fx_jvmrefresh *r = new_state();
	const char *why = NULL;
	char p[PATH_MAX];
	pid_t pid = start(false, true);
	int status;

	(void)state;
	assert_non_null(r);
	fx_jvmrefresh_begin_window(r);
	/* Off: only says so. */
	assert_int_equal(fx_jvmrefresh_ask(r, pid, false, &why), -ECANCELED);
	assert_non_null(strstr(why, "symbolization.jvm_perfmap"));
	assert_int_equal(fx_jvmrefresh_ask(r, pid, true, &why), 1);
	/* Once a window: the answer given again, the JVM not asked. */
	assert_int_equal(fx_jvmrefresh_ask(r, pid, true, &why), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	snprintf(p, sizeof(p), "%s/cwd/.attach_pid%d", dir, (int)pid);
	assert_int_equal(access(p, F_OK), -1);
	fx_jvmrefresh_free(r);
}

static void test_mute_backs_off(void **state)
{
	struct fx_jvmrefresh *r = new_state();
	const char *why = NULL;
	pid_t pid = start(true, true);
	char p[PATH_MAX];
	double t0;

	(void)state;
	fx_jvmrefresh_begin_window(r);
	t0 = now_s();
	assert_int_equal(fx_jvmrefresh_ask(r, pid, true, &why), -ETIMEDOUT);
	assert_true(now_s() - t0 >= 0.9 && now_s() - t0 < 3);
	assert_non_null(strstr(why, "no answer in time"));
	assert_non_null(strstr(why, "asked again in 60 s"));
	snprintf(p, sizeof(p), "%s/cwd/.attach_pid%d", dir, (int)pid);
	assert_int_equal(access(p, F_OK), -1);
	/* The next window: not asked, at once. */
	fx_jvmrefresh_begin_window(r);
	t0 = now_s();
	assert_int_equal(fx_jvmrefresh_ask(r, pid, true, &why), -EAGAIN);
	assert_true(now_s() - t0 < 0.5);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	fx_jvmrefresh_free(r);
}

static void test_not_a_jvm(void **state)
{
	struct fx_jvmrefresh *r = new_state();
	const char *why = NULL;
	pid_t pid = start(true, false);
	int status;

	(void)state;
	fx_jvmrefresh_begin_window(r);
	assert_int_equal(fx_jvmrefresh_ask(r, pid, true, &why), 0);
	assert_null(why);
	/* Never signalled: it ends by itself, having seen no SIGQUIT. */
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(WEXITSTATUS(status), 11);
	fx_jvmrefresh_free(r);
	fx_jvmrefresh_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_answers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mute_backs_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_a_jvm, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
