/* SPDX-License-Identifier: MIT */
/* The log sink on stderr: a message is one line whatever bytes the names in
 * it hold. */
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

/* What fx_log wrote to stderr while @msg was logged through "%s". */
static char *logged(const char *msg)
{
	FILE *f = tmpfile();
	int saved = dup(STDERR_FILENO);
	char *text = calloc(1, 8192);
	size_t n;

	assert_non_null(f);
	assert_non_null(text);
	assert_true(saved >= 0);
	fflush(stderr);
	assert_true(dup2(fileno(f), STDERR_FILENO) >= 0);
	fx_log(FX_LOG_ERR, "cannot read '%s'", msg);
	fflush(stderr);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	rewind(f);
	n = fread(text, 1, 8191, f);
	text[n] = '\0';
	fclose(f);
	return text;
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_control_bytes_escaped),
		cmocka_unit_test(test_long_message),
	};

	fx_log_set_level(FX_LOG_DEBUG);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
