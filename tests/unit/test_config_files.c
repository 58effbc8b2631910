/* SPDX-License-Identifier: MIT */
/* fx_config_check_files(): each path of a config against a scratch directory,
 * and the one-line message a user sees for each kind of mistake. (The TLS
 * files with real certificates are covered by integration.hostile_config,
 * which makes them with openssl.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fxagent/config.h"

struct scratch {
	char dir[32];
	char path[256];
	struct fx_config c;
};

/* @dir/@name, into s->path. */
static const char *at(struct scratch *s, const char *name)
{
	snprintf(s->path, sizeof(s->path), "%s/%s", s->dir, name);
	return s->path;
}

static void set(char **field, const char *value)
{
	free(*field);
	*field = strdup(value);
	assert_non_null(*field);
}

static void put(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(chmod(path, mode), 0);
}

/* A config of defaults whose directories are in a fresh scratch directory. */
static int setup(void **state)
{
	struct scratch *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	snprintf(s->dir, sizeof(s->dir), "/tmp/fxcff-XXXXXX");
	assert_non_null(mkdtemp(s->dir));
	assert_int_equal(fx_config_defaults(&s->c), 0);
	set(&s->c.output.directory, at(s, "chunks"));
	set(&s->c.spool.directory, at(s, "spool"));
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	struct scratch *s = *state;
	char cmd[64];

	fx_config_release(&s->c);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
	assert_int_equal(system(cmd), 0);
	free(s);
	return 0;
}

/* Checks @s's config: @want_rc, and @want with "@" standing for s->dir. */
static void expect(struct scratch *s, int want_rc, const char *want)
{
	char err[1024] = "", full[1024];
	size_t o = 0;
	const char *p;

	assert_int_equal(fx_config_check_files(&s->c, err, sizeof(err)), want_rc);
	if (!want)
		return;
	for (p = want; *p && o + sizeof(s->dir) < sizeof(full); p++) {
		if (*p == '@')
			o += (size_t)snprintf(full + o, sizeof(full) - o, "%s", s->dir);
		else
			full[o++] = *p;
	}
	full[o] = '\0';
	assert_string_equal(err, full);
}

static void test_defaults_pass(void **state)
{
	struct scratch *s = *state;

	/* Missing directories that can be made, a missing debug dir: fine. */
	set(&s->c.symbolization.debug_dirs[0], at(s, "no-debug"));
	expect(s, 0, "");
}

static void test_token(void **state)
{
	struct scratch *s = *state;

	set(&s->c.upload.url, "file:///srv/{id}");
	set(&s->c.upload.bearer_token_file, at(s, "token"));
	expect(s, -ENOENT, "upload.bearer_token_file '@/token' does not exist");

	assert_int_equal(mkfifo(at(s, "token"), 0600), 0);
	expect(s, -EINVAL, "upload.bearer_token_file '@/token' is a FIFO, not a regular file");
	unlink(at(s, "token"));

	assert_int_equal(mkdir(at(s, "token"), 0700), 0);
	expect(s, -EINVAL, "upload.bearer_token_file '@/token' is a directory, not a regular file");
	rmdir(at(s, "token"));

	put(at(s, "token"), "tok-123\n", 0644);
	expect(s, -EPERM,
	       "upload.bearer_token_file '@/token' is readable by others (mode 0644, owner "
	       "root:root); run: chmod o-rwx '@/token'");

	put(at(s, "token"), " \n\n", 0600);
	expect(s, -EINVAL, "upload.bearer_token_file '@/token' is empty; it must hold the secret");

	put(at(s, "token"), "tok 123\n", 0600);
	expect(s, -EINVAL,
	       "upload.bearer_token_file '@/token' has a space or a non-printable character at "
	       "byte 4; it must hold one secret");

	/* Group-readable (root:fxagent 0640) is the packaged way. */
	put(at(s, "token"), "tok-123\n", 0640);
	expect(s, 0, "");
}

static void test_tls_garbage(void **state)
{
	struct scratch *s = *state;

	put(at(s, "ca.pem"), "not a certificate\n", 0644);
	set(&s->c.upload.ca_file, at(s, "ca.pem"));
	expect(s, -EINVAL,
	       "upload.ca_file '@/ca.pem' is not a file of PEM certificates (no \"-----BEGIN "
	       "CERTIFICATE-----\" block)");
	put(at(s, "ca.pem"), "x\n", 0666);
	expect(s, -EPERM,
	       "upload.ca_file '@/ca.pem' is writable by others (mode 0666, owner root:root); "
	       "run: chmod go-w '@/ca.pem'");
	free(s->c.upload.ca_file);
	s->c.upload.ca_file = NULL;

	put(at(s, "client.key"), "garbage\n", 0600);
	set(&s->c.upload.key_file, at(s, "client.key"));
	expect(s, -EINVAL,
	       "upload.key_file '@/client.key' is not a PEM private key (no \"-----BEGIN PRIVATE "
	       "KEY-----\" block)");
	assert_int_equal(chmod(at(s, "client.key"), 0604), 0);
	expect(s, -EPERM,
	       "upload.key_file '@/client.key' is readable by others (mode 0604, owner root:root); "
	       "run: chmod o-rwx '@/client.key'");
}

static void test_output_and_spool(void **state)
{
	struct scratch *s = *state;

	put(at(s, "chunks"), "", 0644);
	expect(s, -ENOTDIR, "output.directory '@/chunks' is a regular file, not a directory");
	set(&s->c.output.directory, at(s, "chunks/sub"));
	expect(s, -ENOTDIR,
	       "output.directory '@/chunks/sub' cannot be created: '@/chunks' is a regular file, "
	       "not a directory");
	set(&s->c.output.directory, at(s, "out"));

	assert_int_equal(mkdir(at(s, "spool"), 0700), 0);
	assert_int_equal(chmod(at(s, "spool"), 0777), 0);
	/* Without a url the spool is never used. */
	expect(s, 0, "");
	set(&s->c.upload.url, "file:///srv/{id}");
	expect(s, -EPERM,
	       "spool.directory '@/spool' is writable by others (mode 0777, owner root:root); "
	       "run: chmod go-w '@/spool'");
}

static void test_debug_dirs(void **state)
{
	struct scratch *s = *state;

	put(at(s, "debug"), "", 0644);
	set(&s->c.symbolization.debug_dirs[0], at(s, "debug"));
	expect(s, -ENOTDIR,
	       "symbolization.debug_dirs[0] '@/debug' is a regular file, not a directory");
}

static void test_debuginfod_cache(void **state)
{
	struct scratch *s = *state;

	set(&s->c.symbolization.debuginfod_cache, at(s, "dbg"));
	assert_int_equal(mkdir(at(s, "dbg"), 0700), 0);
	assert_int_equal(chmod(at(s, "dbg"), 0777), 0);
	/* No server named (in the config or, here, the environment): never made. */
	unsetenv("DEBUGINFOD_URLS");
	set(&s->c.symbolization.debuginfod_urls, "");
	expect(s, 0, "");
	set(&s->c.symbolization.debuginfod_urls, "http://debuginfod.lan");
	expect(s, -EPERM,
	       "symbolization.debuginfod_cache '@/dbg' is writable by others (mode 0777, owner "
	       "root:root); run: chmod go-w '@/dbg'");
	/* Not in the config: DEBUGINFOD_URLS decides. */
	free(s->c.symbolization.debuginfod_urls);
	s->c.symbolization.debuginfod_urls = NULL;
	expect(s, 0, "");
	setenv("DEBUGINFOD_URLS", "http://debuginfod.lan", 1);
	expect(s, -EPERM,
	       "symbolization.debuginfod_cache '@/dbg' is writable by others (mode 0777, owner "
	       "root:root); run: chmod go-w '@/dbg'");
	unsetenv("DEBUGINFOD_URLS");
}

static void test_metrics(void **state)
{
	struct scratch *s = *state;

	set(&s->c.metrics.textfile, at(s, "nodir/fx.prom"));
	expect(s, -ENOENT,
	       "metrics.textfile '@/nodir/fx.prom': its directory '@/nodir' does not exist");
	put(at(s, "nodir"), "", 0644);
	expect(s, -ENOTDIR,
	       "metrics.textfile '@/nodir/fx.prom': '@/nodir' is a regular file, not a directory");

	set(&s->c.metrics.textfile, at(s, "fx.prom"));
	expect(s, 0, "");
	assert_int_equal(symlink("/etc/passwd", at(s, "fx.prom")), 0);
	set(&s->c.metrics.textfile, at(s, "fx.prom"));
	expect(s, -EINVAL,
	       "metrics.textfile '@/fx.prom' is a symlink, not a regular file (the agent replaces "
	       "it by a rename; remove the link)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_defaults_pass, setup, teardown),
		cmocka_unit_test_setup_teardown(test_token, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tls_garbage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_output_and_spool, setup, teardown),
		cmocka_unit_test_setup_teardown(test_debug_dirs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_debuginfod_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metrics, setup, teardown),
	};

	/* The messages name root as the owner: files made by root. */
	if (geteuid() != 0) {
		print_message("skipped: the expected messages assume root\n");
		return 0;
	}
	return cmocka_run_group_tests_name("config_files", tests, NULL, NULL);
}
