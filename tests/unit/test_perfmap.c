/* SPDX-License-Identifier: MIT */
/* perfmap: the lines runtimes write, the ones they write badly, and the files
 * a root agent must not read. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/perfmap.h"

#define NADDR(a) (sizeof(a) / sizeof((a)[0]))

static void parse(const char *text, const uint64_t *addrs, size_t n, struct fx_perfmap_hit *out,
		  struct fx_perfmap_stats *st)
{
	memset(out, 0, n * sizeof(*out));
	memset(st, 0, sizeof(*st));
	assert_int_equal(fx_perfmap_parse(text, strlen(text), addrs, n, out, st), 0);
}

/* Node's and CPython's lines, the JVM's 0x, names with spaces; later lines
 * win; a range ends before START + SIZE. */
static void test_lines(void **state)
{
	static const char text[] = "7f387c005b80 6c JS:*fib /srv/app/fib.js:1:13\n"
				   "7f387c005c00 80 JS:~work /srv/app/fib.js:5:14\n"
				   "0x7f0000001000 0x40 Interpreter::invoke(long, int)\n"
				   "7f387c005b80 20 JS:*fib2 /srv/app/fib.js:1:13\n"
				   "7f9e10000000 b py::fib:/srv/fib.py\r\n";
	const uint64_t addrs[] = { 0x7f0000001000, 0x7f000000103f, 0x7f0000001040, 0x7f387c005b95,
				   0x7f387c005beb, 0x7f387c005bec, 0x7f387c005c5c, 0x7f9e1000000a };
	struct fx_perfmap_hit h[NADDR(addrs)];
	struct fx_perfmap_stats st;

	(void)state;
	parse(text, addrs, NADDR(addrs), h, &st);
	assert_int_equal(st.lines, 5);
	assert_int_equal(st.skipped, 0);
	assert_int_equal(st.partial, 0);
	assert_string_equal(h[0].name, "Interpreter::invoke(long, int)");
	assert_string_equal(h[1].name, "Interpreter::invoke(long, int)");
	assert_null(h[2].name);
	/* 0x...b95 is in both fib lines: the later one names it. */
	assert_string_equal(h[3].name, "JS:*fib2 /srv/app/fib.js:1:13");
	assert_int_equal(h[3].start, 0x7f387c005b80);
	assert_int_equal(h[3].size, 0x20);
	/* 0x...beb is past the later line: the first still covers it, to its last byte. */
	assert_string_equal(h[4].name, "JS:*fib /srv/app/fib.js:1:13");
	assert_null(h[5].name);
	assert_string_equal(h[6].name, "JS:~work /srv/app/fib.js:5:14");
	assert_string_equal(h[7].name, "py::fib:/srv/fib.py");
	fx_perfmap_hits_free(h, NADDR(addrs));
}

/* What a runtime killed mid-write or a hostile process leaves. */
static void test_bad_lines(void **state)
{
	static const char text[] = "\n"
				   "zz 10 bad start\n"
				   "1000 10\n"
				   "1000 10 \n"
				   "1000 qq name\n"
				   "11112222333344445 10 seventeen digits\n"
				   "1000 0 empty range\n"
				   "ffffffffffffff00 1000 wraps at the top\n"
				   "1000 10 good\n"
				   "1008 10 cut off by the writ";
	const uint64_t addrs[] = { 0x1008, 0xffffffffffffffff };
	struct fx_perfmap_hit h[2];
	struct fx_perfmap_stats st;

	(void)state;
	parse(text, addrs, 2, h, &st);
	assert_int_equal(st.lines, 9);
	assert_int_equal(st.skipped, 6);
	assert_int_equal(st.partial, 1);
	assert_string_equal(h[0].name, "good");
	assert_string_equal(h[1].name, "wraps at the top");
	fx_perfmap_hits_free(h, 2);
}

static char *tmpdir;

static int setup(void **state)
{
	char tmpl[] = "/tmp/fx-perfmap-XXXXXX";

	(void)state;
	tmpdir = strdup(mkdtemp(tmpl));
	return tmpdir ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[512];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	assert_int_equal(system(cmd), 0);
	free(tmpdir);
	return 0;
}

static void path_in(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(out, len, "%s/", tmpdir);

	va_start(ap, fmt);
	vsnprintf(out + n, len - (size_t)n, fmt, ap);
	va_end(ap);
}

/* A file of many blocks: lines across block edges, a line longer than
 * FX_PERFMAP_MAX_LINE across an edge, the same answers as fx_perfmap_parse. */
static void test_read_blocks(void **state)
{
	size_t cap = 400000, len = 0;
	char *text = malloc(cap), path[512];
	uint64_t addrs[64];
	struct fx_perfmap_hit a[64], b[64];
	struct fx_perfmap_stats sa, sb;
	int fd;

	(void)state;
	assert_non_null(text);
	for (unsigned i = 0; len < 300000; i++) {
		if (i == 500) {
			len += (size_t)snprintf(text + len, cap - len, "%x 10 ",
						0x100000 + i * 0x10);
			memset(text + len, 'L', 9000);
			len += 9000;
			text[len++] = '\n';
		}
		len += (size_t)snprintf(text + len, cap - len, "%x 10 fn_%u with spaces %u\n",
					0x100000 + i * 0x10, i, i * 7);
	}
	for (size_t i = 0; i < 64; i++)
		addrs[i] = 0x100000 + i * 0x100 + 3;
	parse(text, addrs, 64, a, &sa);
	path_in(path, sizeof(path), "blocks.map");
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	memset(b, 0, sizeof(b));
	memset(&sb, 0, sizeof(sb));
	assert_int_equal(fx_perfmap_read(fd, addrs, 64, b, &sb), 0);
	close(fd);
	assert_int_equal(sa.lines, sb.lines);
	assert_int_equal(sa.skipped, 1);
	assert_int_equal(sb.skipped, 1);
	for (size_t i = 0; i < 64; i++) {
		assert_non_null(a[i].name);
		assert_string_equal(a[i].name, b[i].name);
		assert_int_equal(a[i].start, b[i].start);
	}
	fx_perfmap_hits_free(a, 64);
	fx_perfmap_hits_free(b, 64);
	free(text);
}

/* A fake /proc: ROOT/PID/root/tmp/perf-NSPID.map. */
static struct fx_perfmap_owner owner(void)
{
	return (struct fx_perfmap_owner){
		.proc_root = NULL, .pid = 42, .ns_pid = 7, .uid = 1000, .start_s = time(NULL) - 60
	};
}

static void make_dirs(void)
{
	char p[512];

	path_in(p, sizeof(p), "proc");
	mkdir(p, 0755);
	path_in(p, sizeof(p), "proc/42");
	mkdir(p, 0755);
	path_in(p, sizeof(p), "proc/42/root");
	mkdir(p, 0755);
	path_in(p, sizeof(p), "proc/42/root/tmp");
	mkdir(p, 0755);
}

static void write_map(const char *text, mode_t mode, uid_t uid)
{
	char p[512];
	int fd;

	path_in(p, sizeof(p), "proc/42/root/tmp/perf-7.map");
	unlink(p);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(fchown(fd, uid, 0), 0);
	close(fd);
}

static void test_open_checks(void **state)
{
	struct fx_perfmap_owner o = owner();
	char root[512], p[512], q[512];
	struct timeval old[2] = { { time(NULL) - 3600, 0 }, { time(NULL) - 3600, 0 } };
	int fd;

	(void)state;
	if (geteuid() != 0)
		skip(); /* chown to another user needs root */
	make_dirs();
	path_in(root, sizeof(root), "proc");
	o.proc_root = root;
	path_in(p, sizeof(p), "proc/42/root/tmp/perf-7.map");

	assert_int_equal(fx_perfmap_open(&o), -ENOENT);
	/* The process's own file, and one root wrote for it: read. */
	write_map("1000 10 f\n", 0644, 1000);
	fd = fx_perfmap_open(&o);
	assert_true(fd >= 0);
	close(fd);
	write_map("1000 10 f\n", 0644, 0);
	fd = fx_perfmap_open(&o);
	assert_true(fd >= 0);
	close(fd);
	/* Another user's, or one anyone may write: not. */
	write_map("1000 10 f\n", 0644, 1001);
	assert_int_equal(fx_perfmap_open(&o), -EPERM);
	write_map("1000 10 f\n", 0666, 1000);
	assert_int_equal(fx_perfmap_open(&o), -EPERM);
	/* Older than the process: a reused pid's. */
	write_map("1000 10 f\n", 0644, 1000);
	assert_int_equal(utimes(p, old), 0);
	assert_int_equal(fx_perfmap_open(&o), -ESTALE);
	/* Past the size bound (sparse). */
	write_map("", 0644, 1000);
	assert_int_equal(truncate(p, (off_t)FX_PERFMAP_MAX_BYTES + 1), 0);
	assert_int_equal(fx_perfmap_open(&o), -EFBIG);
	/* A symlink (to a secret), a FIFO: not opened, not read. */
	unlink(p);
	assert_int_equal(symlink("/etc/shadow", p), 0);
	assert_int_equal(fx_perfmap_open(&o), -ELOOP);
	unlink(p);
	assert_int_equal(mkfifo(p, 0644), 0);
	assert_int_equal(chown(p, 1000, 0), 0);
	assert_int_equal(fx_perfmap_open(&o), -EINVAL);
	unlink(p);
	/* tmp/ itself a symlink: not followed. */
	path_in(q, sizeof(q), "proc/42/root/tmp");
	assert_int_equal(rmdir(q), 0);
	assert_int_equal(symlink("/etc", q), 0);
	assert_int_equal(fx_perfmap_open(&o), -ELOOP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_bad_lines),
		cmocka_unit_test_setup_teardown(test_read_blocks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_checks, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
