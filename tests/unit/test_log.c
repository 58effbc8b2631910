/* SPDX-License-Identifier: MIT */
/* The log sink on stderr: a message is one line whatever bytes the names in
 * it hold, and fx_log_errno appends the error text. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/log.h"

/* Sends stderr to a temporary file until capture_end(). */
struct capture {
	FILE *f;
	int saved;
};

static void capture_begin(struct capture *c)
{
	c->f = tmpfile();
	c->saved = dup(STDERR_FILENO);
	assert_non_null(c->f);
	assert_true(c->saved >= 0);
	fflush(stderr);
	assert_true(dup2(fileno(c->f), STDERR_FILENO) >= 0);
}

/* What was written to stderr since capture_begin(); the caller frees it. */
static char *capture_end(struct capture *c)
{
	char *text = calloc(1, 8192);
	size_t n;

	assert_non_null(text);
	fflush(stderr);
	assert_true(dup2(c->saved, STDERR_FILENO) >= 0);
	close(c->saved);
	rewind(c->f);
	n = fread(text, 1, 8191, c->f);
	text[n] = '\0';
	fclose(c->f);
	return text;
}

/* What fx_log wrote to stderr while @msg was logged through "%s". */
static char *logged(const char *msg)
{
	struct capture c;

	capture_begin(&c);
	fx_log(FX_LOG_ERR, "cannot read '%s'", msg);
	return capture_end(&c);
}

static void test_control_bytes_escaped(void **state)
{
	char *got;

	(void)state;
	got = logged("/tmp/a\nfxagent: forged\r\t\x01\x7f\\012 \xc3\xa9");
	assert_string_equal(got,
			    "fxagent: cannot read '/tmp/a\\nfxagent: forged\\r\\t\\x01\\x7f\\\\012 "
			    "\xc3\xa9'\n");
	free(got);
	got = logged("plain name");
	assert_string_equal(got, "fxagent: cannot read 'plain name'\n");
	free(got);
}

/* The longest message (1023 bytes) all escaped still fits, on one line. */
static void test_long_message(void **state)
{
	char msg[1100], *got, *nl;

	(void)state;
	memset(msg, '\n', sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	got = logged(msg);
	nl = strchr(got, '\n');
	assert_non_null(nl);
	assert_string_equal(nl, "\n");
	assert_true(strlen(got) > 2 * 1000);
	free(got);
}

/* fx_log_errno appends the error text after ": ", returns -err (EIO for 0,
 * the same for a negative err), leaves errno alone, and keeps the error text
 * when the message is too long. Below the level it logs nothing but still
 * returns -err. */
static void test_errno_appended(void **state)
{
	struct capture c;
	char msg[1100], *got, *nl;
	int ret;

	(void)state;
	capture_begin(&c);
	errno = EBADF;
	ret = fx_log_errno(FX_LOG_ERR, ENOENT, "cannot open '%s'", "/etc/fx.yaml");
	assert_int_equal(errno, EBADF);
	got = capture_end(&c);
	assert_int_equal(ret, -ENOENT);
	assert_string_equal(got,
			    "fxagent: cannot open '/etc/fx.yaml': No such file or directory\n");
	free(got);

	capture_begin(&c);
	assert_int_equal(fx_log_errno(FX_LOG_WARN, 0, "cannot sync, ignoring"), -EIO);
	assert_int_equal(fx_log_errno(FX_LOG_WARN, -EACCES, "cannot list '%s'", "d"), -EACCES);
	got = capture_end(&c);
	assert_string_equal(got, "fxagent: cannot sync, ignoring: Input/output error\n"
				 "fxagent: cannot list 'd': Permission denied\n");
	free(got);

	memset(msg, 'x', sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	capture_begin(&c);
	assert_int_equal(fx_log_errno(FX_LOG_ERR, ENOSPC, "cannot write '%s'", msg), -ENOSPC);
	got = capture_end(&c);
	nl = strchr(got, '\n');
	assert_non_null(nl);
	assert_string_equal(nl - strlen("xxx: No space left on device"),
			    "xxx: No space left on device\n");
	assert_int_equal(strlen(got), strlen("fxagent: ") + 1023 + 1);
	free(got);

	fx_log_set_level(FX_LOG_NOTICE);
	capture_begin(&c);
	ret = fx_log_errno(FX_LOG_DEBUG, EPERM, "not shown");
	got = capture_end(&c);
	fx_log_set_level(FX_LOG_DEBUG);
	assert_int_equal(ret, -EPERM);
	assert_string_equal(got, "");
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_control_bytes_escaped),
		cmocka_unit_test(test_long_message),
		cmocka_unit_test(test_errno_appended),
	};

	fx_log_set_level(FX_LOG_DEBUG);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
