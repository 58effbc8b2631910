/* SPDX-License-Identifier: MIT */
/* source: a directory tree is listed with only its chunk files (no
 * temporaries, rejected/, dot-files, symlinked directories), sorted, and read
 * byte for byte, a FIFO giving an error and no hang; one file is a source of
 * its own; a missing path and an unknown scheme are refused. Over HTTP,
 * against tests/tools/autoindex_server.py (nginx's JSON autoindex, started
 * here on 127.0.0.1): two levels and odd names are listed and read, a listing
 * that is not JSON and a redirect are errors that say so, a 404 is one item's
 * error while the others arrive, and a callback can stop the reading. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/source.h"

#define SERVER_SCRIPT FX_TEST_DATA "/../tools/autoindex_server.py"
#ifndef FX_PYTHON3
#define FX_PYTHON3 "python3"
#endif

#define MAX_SEEN 64

static char dir[64]; /* scratch directory, removed at the end */

/* What the callback saw, by item index. */
struct seen {
	size_t calls;
	size_t n;
	int err[MAX_SEEN];
	char *data[MAX_SEEN];
	size_t len[MAX_SEEN];
	size_t stop_after; /* return 7 after this many calls; 0: never */
};

/* ---- helpers ---- */

static void write_file(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	size_t len = strlen(data);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

static const char *at(const char *rel)
{
	static char buf[4][PATH_MAX];
	static unsigned k;
	char *p = buf[k++ % 4];

	snprintf(p, PATH_MAX, "%s/%s", dir, rel);
	return p;
}

static void mkdirs(const char *rel)
{
	char cmd[PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", at(rel));
	assert_int_equal(system(cmd), 0);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int on_item(void *arg, size_t index, const struct fx_source_item *it, const void *data,
		   size_t len, int err)
{
	struct seen *s = arg;

	assert_non_null(it->name);
	assert_true(index < s->n && index < MAX_SEEN);
	assert_int_equal(s->err[index], 1); /* once each */
	s->err[index] = err;
	if (err) {
		assert_null(data);
	} else {
		assert_non_null(data);
		s->data[index] = malloc(len + 1);
		assert_non_null(s->data[index]);
		memcpy(s->data[index], data, len);
		s->data[index][len] = '\0';
		s->len[index] = len;
	}
	s->calls++;
	return s->stop_after && s->calls >= s->stop_after ? 7 : 0;
}

static int read_all(struct fx_source *src, const struct fx_source_item *items, size_t n,
		    struct seen *s)
{
	size_t i;
	int ret;

	memset(s, 0, sizeof(*s) - sizeof(s->stop_after));
	s->n = n;
	for (i = 0; i < MAX_SEEN; i++)
		s->err[i] = 1; /* not called */
	alarm(60);	       /* a hang fails the test instead of stalling it */
	ret = fx_source_read_each(src, items, n, on_item, s);
	alarm(0);
	return ret;
}

static void seen_free(struct seen *s)
{
	for (size_t i = 0; i < MAX_SEEN; i++)
		free(s->data[i]);
}

/* Runs @fn with stderr (where the log goes) into a file; its text in @out. */
static void capture_stderr(char *out, size_t cap, void (*fn)(void *), void *arg)
{
	int saved, fd;
	ssize_t n;

	fflush(stderr);
	saved = dup(2);
	fd = open(at("stderr.txt"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, 2);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, out, cap - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(fd);
	fprintf(stderr, "%s", out); /* still shown */
}

/* ---- directories and files ---- */

static void test_dir_listing(void **state)
{
	struct fx_source_item *items = NULL;
	struct fx_source *src = NULL;
	static const char *want[] = { "t/a/b/x.json.gz", "t/a/f.json.gz", "t/a/l.json.gz",
				      "t/a/y.json" };
	struct seen s = { 0 };
	char top[PATH_MAX];
	size_t n = 0, i;

	(void)state;
	mkdirs("t/a/b");
	mkdirs("t/a/rejected");
	mkdirs("t/a/.git");
	write_file(at("t/a/b/x.json.gz"), "xx-bytes");
	write_file(at("t/a/y.json"), "{\"y\":1}");
	write_file(at("t/a/rejected/z.json.gz"), "rejected");
	write_file(at("t/a/c.json.gz.tmpABC123"), "temporary");
	write_file(at("t/a/.hidden.json.gz"), "hidden");
	write_file(at("t/a/.git/g.json"), "hidden dir");
	write_file(at("t/a/notes.txt"), "notes");
	assert_int_equal(mkfifo(at("t/a/f.json.gz"), 0600), 0);
	/* a symlinked chunk is followed; a symlinked directory is not entered */
	assert_int_equal(symlink("b/x.json.gz", at("t/a/l.json.gz")), 0);
	assert_int_equal(symlink(".", at("t/a/loop")), 0);
	assert_int_equal(symlink("b", at("t/a/dir.json")), 0);

	/* a trailing slash makes no double slash */
	snprintf(top, sizeof(top), "%s/", at("t"));
	assert_int_equal(fx_source_open(top, NULL, &src), 0);
	assert_int_equal(fx_source_list(src, &items, &n), 0);
	assert_int_equal(n, 4);
	for (i = 0; i < n; i++)
		assert_string_equal(items[i].name, at(want[i]));
	assert_int_equal(items[0].size, 8);
	assert_int_equal(items[1].size, -1); /* the FIFO */
	assert_int_equal(items[2].size, 8);
	assert_int_equal(items[3].size, 7);

	assert_int_equal(read_all(src, items, n, &s), 0);
	assert_int_equal(s.calls, 4);
	assert_int_equal(s.err[0], 0);
	assert_string_equal(s.data[0], "xx-bytes");
	assert_int_equal(s.err[1], -EINVAL); /* a FIFO: an error, no hang */
	assert_int_equal(s.err[2], 0);
	assert_string_equal(s.data[2], "xx-bytes");
	assert_int_equal(s.err[3], 0);
	assert_int_equal(s.len[3], 7);
	assert_string_equal(s.data[3], "{\"y\":1}");
	seen_free(&s);

	/* a callback's nonzero return stops the reading */
	s.stop_after = 2;
	assert_int_equal(read_all(src, items, n, &s), 7);
	assert_int_equal(s.calls, 2);
	seen_free(&s);
	fx_source_items_free(items, n);
	fx_source_free(src);
}

/* 0 when u/ lists as u/open.json alone. */
static int list_unreadable(void)
{
	struct fx_source_item *items = NULL;
	struct fx_source *src = NULL;
	size_t n = 0;
	int ret;

	ret = fx_source_open(at("u"), NULL, &src);
	if (!ret)
		ret = fx_source_list(src, &items, &n);
	if (!ret && (n != 1 || strcmp(items[0].name, at("u/open.json"))))
		ret = -1;
	fx_source_items_free(items, ret ? 0 : n);
	fx_source_free(src);
	return ret;
}

static void test_dir_unreadable_subdir(void **state)
{
	int status = -1;
	pid_t pid;

	(void)state;
	mkdirs("u/closed");
	write_file(at("u/closed/in.json"), "{}");
	write_file(at("u/open.json"), "{}");
	assert_int_equal(chmod(at("u/closed"), 0), 0);
	if (geteuid() != 0) {
		assert_int_equal(list_unreadable(), 0);
		return;
	}
	/* Root reads a mode 000 directory all the same: list as nobody. */
	assert_int_equal(chmod(dir, 0755), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(setgid(65534) || setuid(65534) || list_unreadable() ? 1 : 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	chmod(dir, 0700);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_one_file(void **state)
{
	struct fx_source_item *items = NULL;
	struct fx_source *src = NULL;
	struct seen s = { 0 };
	size_t n = 0;

	(void)state;
	write_file(at("single.txt"), "any name will do");
	assert_int_equal(fx_source_open(at("single.txt"), NULL, &src), 0);
	assert_int_equal(fx_source_list(src, &items, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(items[0].name, at("single.txt"));
	assert_int_equal(items[0].size, 16);
	assert_int_equal(read_all(src, items, n, &s), 0);
	assert_int_equal(s.err[0], 0);
	assert_string_equal(s.data[0], "any name will do");
	seen_free(&s);
	fx_source_items_free(items, n);
	fx_source_free(src);
}

/* A file over the bound is refused from its size, before any read. */
static void test_file_too_big(void **state)
{
	struct fx_source_item *items = NULL;
	struct fx_source *src = NULL;
	struct seen s = { 0 };
	size_t n = 0;
	int fd;

	(void)state;
	fd = open(at("big.json.gz"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)FX_SOURCE_MAX_BYTES + 1), 0);
	close(fd);
	assert_int_equal(fx_source_open(at("big.json.gz"), NULL, &src), 0);
	assert_int_equal(fx_source_list(src, &items, &n), 0);
	assert_int_equal(read_all(src, items, n, &s), 0);
	assert_int_equal(s.err[0], -EFBIG);
	seen_free(&s);
	fx_source_items_free(items, n);
	fx_source_free(src);
	unlink(at("big.json.gz"));
}

static void test_refused_specs(void **state)
{
	struct fx_source *src = NULL;

	(void)state;
	assert_int_equal(fx_source_open(at("no/such/path"), NULL, &src), -ENOENT);
	/* s3://: a bucket's name, and credentials from the environment only. */
	assert_int_equal(fx_source_open("s3://", NULL, &src), -EINVAL);
	assert_int_equal(fx_source_open("s3://bad*bucket/prefix/", NULL, &src), -EINVAL);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	assert_int_equal(fx_source_open("s3://bucket/prefix/", NULL, &src), -ENOKEY);
	assert_int_equal(fx_source_open("ftp://host/dir/", NULL, &src), -EINVAL);
	assert_int_equal(mkfifo(at("fifo"), 0600), 0);
	assert_int_equal(fx_source_open(at("fifo"), NULL, &src), -EINVAL);
	assert_null(src);
	fx_source_free(NULL);
	fx_source_items_free(NULL, 0);
}

/* ---- HTTP ---- */

static struct server {
	pid_t pid;
	int port;
	int out_fd, in_fd; /* its stdout; its stdin, whose closing stops it */
} srv;

static char base[64];	    /* http://127.0.0.1:PORT */
static char root[PATH_MAX]; /* what it serves */

static const char *url(const char *path)
{
	static char buf[4][512];
	static unsigned k;
	char *p = buf[k++ % 4];

	snprintf(p, 512, "%s%s", base, path);
	return p;
}

static int start_server(void **state)
{
	const char *argv[] = { FX_PYTHON3, SERVER_SCRIPT, root, NULL };
	int out[2], in[2];
	struct pollfd pfd;
	char line[64] = "";
	size_t len = 0;
	ssize_t n;

	(void)state;
	snprintf(root, sizeof(root), "%s", at("www"));
	mkdirs("www/d/sub dir/deeper");
	mkdirs("www/d/rejected");
	mkdirs("www/d/bad");
	mkdirs("www/d/many");
	mkdirs("www/badtop");
	mkdirs("www/moved");
	write_file(at("www/d/one.json.gz"), "one");
	write_file(at("www/d/gone.json.gz"), "gone soon");
	write_file(at("www/d/odd%#name.json"), "odd");
	write_file(at("www/d/sub dir/two.json"), "two!");
	write_file(at("www/d/sub dir/deeper/three.json.gz"), "three");
	write_file(at("www/d/rejected/no.json.gz"), "no");
	write_file(at("www/d/notes.txt"), "notes");
	write_file(at("www/d/.hidden.json"), "hidden");
	write_file(at("www/d/c.json.gz.tmpABC123"), "tmp");
	write_file(at("www/d/bad/.listing"), "<html>not json</html>");
	write_file(at("www/badtop/.listing"), "not json");
	write_file(at("www/moved/.redirect"), "http://user:pw@127.0.0.1:1/elsewhere/");
	for (int i = 0; i < 20; i++) {
		char name[64], body[16];

		snprintf(name, sizeof(name), "www/d/many/m%02d.json", i);
		snprintf(body, sizeof(body), "body %d", i);
		write_file(at(name), body);
	}

	if (pipe2(out, O_CLOEXEC) || pipe2(in, O_CLOEXEC))
		return -1;
	srv.pid = fork();
	if (srv.pid < 0)
		return -1;
	if (srv.pid == 0) {
		dup2(out[1], 1);
		dup2(in[0], 0);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	close(in[0]);
	srv.out_fd = out[0];
	srv.in_fd = in[1];
	pfd = (struct pollfd){ .fd = srv.out_fd, .events = POLLIN };
	while (len < sizeof(line) - 1 && !memchr(line, '\n', len)) {
		if (poll(&pfd, 1, 15000) != 1)
			return -1;
		n = read(srv.out_fd, line + len, sizeof(line) - 1 - len);
		if (n <= 0)
			return -1;
		len += (size_t)n;
		line[len] = '\0';
	}
	if (sscanf(line, "PORT %d", &srv.port) != 1)
		return -1;
	snprintf(base, sizeof(base), "http://127.0.0.1:%d", srv.port);
	return 0;
}

static int stop_server(void **state)
{
	(void)state;
	if (srv.pid > 0) {
		close(srv.in_fd);
		kill(srv.pid, SIGTERM);
		waitpid(srv.pid, NULL, 0);
		close(srv.out_fd);
	}
	return 0;
}

static void test_http_listing_and_bytes(void **state)
{
	static const char *want[] = { "/d/gone.json.gz", "/d/odd%25%23name.json", "/d/one.json.gz",
				      "/d/sub%20dir/deeper/three.json.gz",
				      "/d/sub%20dir/two.json" };
	static const char *bytes[] = { NULL, "odd", "one", "three", "two!" };
	static const int64_t sizes[] = { 9, 3, 3, 5, 4 };
	struct fx_source_item *items = NULL;
	struct fx_source *src = NULL;
	struct seen s = { 0 };
	size_t n = 0, i;

	(void)state;
	assert_int_equal(fx_source_open(url("/d/"), NULL, &src), 0);
	/* d/bad/ answers no JSON: logged and skipped, the rest listed */
	assert_int_equal(fx_source_list(src, &items, &n), 0);
	assert_int_equal(n, 5 + 20);
	for (i = 0; i < 5; i++) {
		size_t k = i < 1 ? i : i + 20; /* many/ sorts in between */

		assert_string_equal(items[k].name, url(want[i]));
		assert_int_equal(items[k].size, sizes[i]);
	}
	assert_string_equal(items[1].name, url("/d/many/m00.json"));

	/* gone between the listing and the reading: that item's 404 */
	assert_int_equal(unlink(at("www/d/gone.json.gz")), 0);
	assert_int_equal(read_all(src, items, n, &s), 0);
	assert_int_equal(s.calls, n);
	assert_int_equal(s.err[0], -ENOENT);
	for (i = 1; i < 5; i++) {
		size_t k = i < 1 ? i : i + 20;

		assert_int_equal(s.err[k], 0);
		assert_string_equal(s.data[k], bytes[i]);
	}
	for (i = 0; i < 20; i++) {
		char body[16];

		snprintf(body, sizeof(body), "body %zu", i);
		assert_int_equal(s.err[1 + i], 0);
		assert_string_equal(s.data[1 + i], body);
	}
	seen_free(&s);

	/* a callback's nonzero return stops the reading, with transfers going on */
	s.stop_after = 3;
	assert_int_equal(read_all(src, items, n, &s), 7);
	assert_int_equal(s.calls, 3);
	seen_free(&s);
	fx_source_items_free(items, n);
	fx_source_free(src);
}

static void test_http_one_file(void **state)
{
	struct fx_source_item *items = NULL;
	struct fx_source *src = NULL;
	struct seen s = { 0 };
	size_t n = 0;

	(void)state;
	assert_int_equal(fx_source_open(url("/d/sub%20dir/two.json"), NULL, &src), 0);
	assert_int_equal(fx_source_list(src, &items, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(items[0].name, url("/d/sub%20dir/two.json"));
	assert_int_equal(items[0].size, -1);
	assert_int_equal(read_all(src, items, n, &s), 0);
	assert_int_equal(s.err[0], 0);
	assert_string_equal(s.data[0], "two!");
	seen_free(&s);
	fx_source_items_free(items, n);
	fx_source_free(src);
}

struct list_call {
	const char *spec;
	int ret;
	size_t n;
};

static void do_list(void *arg)
{
	struct list_call *c = arg;
	struct fx_source_item *items = NULL;
	struct fx_source *src = NULL;

	c->ret = fx_source_open(c->spec, NULL, &src);
	if (!c->ret)
		c->ret = fx_source_list(src, &items, &c->n);
	fx_source_items_free(items, c->ret ? 0 : c->n);
	fx_source_free(src);
}

static void test_http_bad_listing(void **state)
{
	struct list_call c = { .spec = url("/badtop/") };
	char log[4096];

	(void)state;
	capture_stderr(log, sizeof(log), do_list, &c);
	assert_int_equal(c.ret, -EBADMSG);
	assert_non_null(strstr(log, url("/badtop/")));
	assert_non_null(strstr(log, "not JSON"));
	assert_null(strchr(strchr(log, '\n') + 1, '\n')); /* one line */
}

static void test_http_redirect_not_followed(void **state)
{
	struct list_call c = { .spec = url("/moved/") };
	struct fx_source_item *items = NULL;
	struct fx_source *src = NULL;
	struct seen s = { 0 };
	char log[4096];
	size_t n = 0;

	(void)state;
	capture_stderr(log, sizeof(log), do_list, &c);
	assert_int_equal(c.ret, -EIO);
	assert_non_null(strstr(log, "HTTP 302"));
	assert_non_null(strstr(log, "'http://127.0.0.1:1/elsewhere/'")); /* no user:pw@ */

	/* a directory named without its '/' is one file, the 301 its error */
	assert_int_equal(fx_source_open(url("/d"), NULL, &src), 0);
	assert_int_equal(fx_source_list(src, &items, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(read_all(src, items, n, &s), 0);
	assert_int_equal(s.err[0], -EIO);
	seen_free(&s);
	fx_source_items_free(items, n);
	fx_source_free(src);
}

/* ---- main ---- */

static int make_dir(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/fxsource-test-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest local[] = {
		cmocka_unit_test(test_dir_listing),   cmocka_unit_test(test_dir_unreadable_subdir),
		cmocka_unit_test(test_one_file),      cmocka_unit_test(test_file_too_big),
		cmocka_unit_test(test_refused_specs),
	};
	const struct CMUnitTest http[] = {
		cmocka_unit_test(test_http_listing_and_bytes),
		cmocka_unit_test(test_http_one_file),
		cmocka_unit_test(test_http_bad_listing),
		cmocka_unit_test(test_http_redirect_not_followed),
	};
	int failed = 0;

	if (make_dir(NULL))
		return 1;
	failed += cmocka_run_group_tests_name("source local", local, NULL, NULL);
	failed += cmocka_run_group_tests_name("source http", http, start_server, stop_server);
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return failed;
}
