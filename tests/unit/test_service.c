/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fxagent/log.h"
#include "fxagent/service.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_CHECKPOINT_RESTORE
#define CAP_CHECKPOINT_RESTORE 40
#endif

#define BIT(c) (1ull << (c))

static void test_caps_all_present(void **state)
{
	char buf[1024];

	(void)state;
	assert_int_equal(fx_service_caps_explain(fx_service_caps_wanted(), buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
	/* Root's set (everything) lacks nothing either. */
	assert_int_equal(fx_service_caps_explain(~0ull, buf, sizeof(buf)), 0);
}

/* The unit's user with only CAP_PERFMON: each missing one is named with what
 * it costs, in one line. */
static void test_caps_missing_named(void **state)
{
	char buf[1024];

	(void)state;
	assert_int_equal(fx_service_caps_explain(BIT(CAP_PERFMON), buf, sizeof(buf)), 4);
	assert_non_null(strstr(buf, "CAP_SYSLOG (kernel frames are not named"));
	assert_non_null(strstr(buf, "CAP_SYS_PTRACE ("));
	assert_non_null(strstr(buf, "CAP_CHECKPOINT_RESTORE ("));
	assert_non_null(strstr(buf, "CAP_DAC_READ_SEARCH ("));
	assert_null(strstr(buf, "CAP_PERFMON"));
	assert_null(strchr(buf, '\n'));
	/* Nothing at all: CAP_PERFMON leads. */
	assert_int_equal(fx_service_caps_explain(0, buf, sizeof(buf)), 5);
	assert_int_equal(strncmp(buf, "CAP_PERFMON (", 13), 0);
}

/* CAP_SYS_ADMIN covers CAP_PERFMON and CAP_CHECKPOINT_RESTORE (older kernels
 * know only it), not the others. */
static void test_caps_sys_admin(void **state)
{
	char buf[1024];
	uint64_t eff = BIT(CAP_SYS_ADMIN) | BIT(CAP_SYSLOG) | BIT(CAP_SYS_PTRACE) |
		       BIT(CAP_DAC_READ_SEARCH);

	(void)state;
	assert_int_equal(fx_service_caps_explain(eff, buf, sizeof(buf)), 0);
	assert_int_equal(fx_service_caps_explain(BIT(CAP_SYS_ADMIN), buf, sizeof(buf)), 3);
	assert_null(strstr(buf, "CAP_PERFMON"));
	assert_null(strstr(buf, "CAP_CHECKPOINT_RESTORE"));
}

static void test_caps_small_buffer(void **state)
{
	char buf[8];

	(void)state;
	assert_int_equal(fx_service_caps_explain(0, buf, sizeof(buf)), 5);
	assert_int_equal(strlen(buf), sizeof(buf) - 1);
}

/* The journal is stderr's sink only when JOURNAL_STREAM names stderr itself,
 * or INVOCATION_ID is set and stderr is no terminal. */
static void test_journal_detection(void **state)
{
	char js[64];
	struct stat st;
	int saved = dup(STDERR_FILENO);
	int fd = open("/dev/null", O_WRONLY);

	(void)state;
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, STDERR_FILENO);
	unsetenv("INVOCATION_ID");
	unsetenv("JOURNAL_STREAM");
	assert_false(fx_log_journal_wanted());
	assert_int_equal(fstat(STDERR_FILENO, &st), 0);
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", js, 1);
	assert_true(fx_log_journal_wanted());
	/* Inherited from a parent whose stderr was the journal: not ours. */
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino + 1);
	setenv("JOURNAL_STREAM", js, 1);
	assert_false(fx_log_journal_wanted());
	setenv("INVOCATION_ID", "0123456789abcdef0123456789abcdef", 1);
	assert_true(fx_log_journal_wanted());
	unsetenv("INVOCATION_ID");
	unsetenv("JOURNAL_STREAM");
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(fd);
}

/* sd_notify() reaches $NOTIFY_SOCKET; the watchdog pings only when due. */
static void test_notify_and_watchdog(void **state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct fx_service_watchdog wd;
	char buf[256];
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ssize_t n;

	(void)state;
	assert_true(s >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/fx-notify-%d", (int)getpid());
	unlink(sa.sun_path);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setenv("NOTIFY_SOCKET", sa.sun_path, 1);
	fx_service_notifyf("STATUS=%d targets", 3);
	n = recv(s, buf, sizeof(buf) - 1, 0);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, "STATUS=3 targets");

	unsetenv("WATCHDOG_USEC");
	fx_service_watchdog_init(&wd);
	assert_int_equal(wd.interval_ns, 0);
	fx_service_watchdog_tick(&wd, 10000000000ull);
	assert_true(recv(s, buf, sizeof(buf), 0) < 0);

	setenv("WATCHDOG_USEC", "2000000", 1);
	fx_service_watchdog_init(&wd);
	assert_int_equal(wd.interval_ns, 1000000000ull);
	fx_service_watchdog_tick(&wd, 5000000000ull);
	n = recv(s, buf, sizeof(buf) - 1, 0);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, "WATCHDOG=1");
	fx_service_watchdog_tick(&wd, 5500000000ull); /* half an interval later: not due */
	assert_true(recv(s, buf, sizeof(buf), 0) < 0);
	fx_service_watchdog_tick(&wd, 6000000000ull);
	assert_true(recv(s, buf, sizeof(buf), 0) > 0);

	/* Meant for another process (WATCHDOG_PID): off. */
	setenv("WATCHDOG_PID", "1", 1);
	fx_service_watchdog_init(&wd);
	assert_int_equal(wd.interval_ns, 0);
	unsetenv("WATCHDOG_PID");
	unsetenv("WATCHDOG_USEC");
	unsetenv("NOTIFY_SOCKET");
	close(s);
	unlink(sa.sun_path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_caps_all_present),
		cmocka_unit_test(test_caps_missing_named),
		cmocka_unit_test(test_caps_sys_admin),
		cmocka_unit_test(test_caps_small_buffer),
		cmocka_unit_test(test_journal_detection),
		cmocka_unit_test(test_notify_and_watchdog),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
