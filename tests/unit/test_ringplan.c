/* SPDX-License-Identifier: MIT */
/* The ring plan: sizes from the rate, the record and the drain interval, and
 * the locked-memory check against limits given here (not this machine's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "fxagent/ringplan.h"

#define PAGE 4096
#define MIB  (1024ull * 1024)
/* DWARF records with 16384-, 32768- and 8192-byte stack copies, and
 * frame-pointer records (fx_sampler_record_bytes). */
#define REC16K 17696
#define REC32K 34080
#define REC8K  9504
#define RECFP  1152

#define has(msg, s) assert_non_null(strstr((msg), (s)))

static void test_pages_from_rate(void **state)
{
	(void)state;
	/* 99 Hz: 40 records in 2 x 200 ms (700 KiB) round up to 1 MiB, what 32
	 * records gave before. */
	assert_int_equal(fx_ringplan_pages(99, REC16K, 200, PAGE), 256);
	/* A 64-CPU host's rate on 2 CPUs: 1268 records, 21.4 MiB -> 32 MiB, the
	 * size that lost no sample where 1 MiB lost hundreds (FLEET.md). */
	assert_int_equal(fx_ringplan_pages(3168, REC16K, 200, PAGE), 8192);
	/* A 128-CPU host's rate: 42.8 MiB -> 64 MiB. */
	assert_int_equal(fx_ringplan_pages(6336, REC16K, 200, PAGE), 16384);
	/* The rate scales it: a slower drain as well. */
	assert_int_equal(fx_ringplan_pages(3168, REC16K, 100, PAGE), 4096);
}

static void test_pages_from_record(void **state)
{
	(void)state;
	assert_int_equal(fx_ringplan_pages(99, REC32K, 200, PAGE), 512);
	assert_int_equal(fx_ringplan_pages(99, REC8K, 200, PAGE), 128);
	assert_int_equal(fx_ringplan_pages(3168, REC8K, 200, PAGE), 4096);
	/* Frame pointers: the 64-page floor. */
	assert_int_equal(fx_ringplan_pages(99, RECFP, 200, PAGE), FX_RINGPLAN_MIN_PAGES);
}

static void test_pages_bounds(void **state)
{
	size_t n;

	(void)state;
	/* 1 Hz: still 32 records (fewer and the kernel drops samples without a
	 * LOST record): 553 KiB -> 1 MiB. */
	n = fx_ringplan_pages(1, REC16K, 200, PAGE);
	assert_true((uint64_t)n * PAGE >= FX_RINGPLAN_MIN_RECORDS * REC16K);
	assert_int_equal(n, 256);
	/* 10 kHz with 32 KiB copies wants 130 MiB: capped at the largest
	 * sampling.ring_size. */
	assert_int_equal(fx_ringplan_pages(10000, REC32K, 200, PAGE), FX_RINGPLAN_MAX_BYTES / PAGE);
	/* Always a power of two. */
	for (unsigned hz = 1; hz <= 10000; hz += 97) {
		n = fx_ringplan_pages(hz, REC16K, 200, PAGE);
		assert_int_equal(n & (n - 1), 0);
	}
}

static const struct fx_ringplan_limits debian = { .rlimit = 8 * MIB,
						  .mlock_kb = 516,
						  .paranoid = 2 };

/* The defaults on 2 CPUs: half in the allowance, half charged. */
static void test_check_fits(void **state)
{
	struct fx_ringplan p;
	char msg[1024];

	(void)state;
	fx_ringplan_make(2, 256, PAGE, &debian, &p);
	assert_int_equal(p.locked, 2 * (MIB + PAGE));
	assert_int_equal(p.allowance, 2 * 516 * 1024);
	assert_int_equal(p.charged, 2 * (MIB + PAGE) - 2 * 516 * 1024);
	assert_int_equal(fx_ringplan_check(&p, &debian, msg, sizeof(msg)), 0);
	has(msg, "perf rings: 2 CPUs x (1 MiB + a 4 KiB header) = 2056 KiB locked");
	has(msg, "1 MiB beyond kernel.perf_event_mlock_kb (516 KiB x 2 CPUs = 1032 KiB) is "
		 "charged to RLIMIT_MEMLOCK (8 MiB)");
	/* Frame-pointer rings stay within the allowance. */
	fx_ringplan_make(2, 64, PAGE, &debian, &p);
	assert_int_equal(p.charged, 0);
	assert_int_equal(fx_ringplan_check(&p, &debian, msg, sizeof(msg)), 0);
	has(msg, "within kernel.perf_event_mlock_kb (516 KiB x 2 CPUs = 1032 KiB)");
}

/* The table of docs/usage.md ("Perf rings"): 64 and 128 CPUs at 99 Hz, and
 * the packaged unit's LimitMEMLOCK=512M covers them. */
static void test_check_big_hosts(void **state)
{
	struct fx_ringplan_limits unit = debian;
	struct fx_ringplan p;
	char msg[1024];

	(void)state;
	unit.rlimit = 512 * MIB;
	fx_ringplan_make(64, 256, PAGE, &unit, &p);
	assert_int_equal(p.locked, 64 * (MIB + PAGE)); /* 64.25 MiB */
	assert_int_equal(p.charged, 32 * MIB);
	assert_int_equal(fx_ringplan_check(&p, &unit, msg, sizeof(msg)), 0);
	has(msg, "= 64.25 MiB locked");
	fx_ringplan_make(128, 256, PAGE, &unit, &p);
	assert_int_equal(p.locked, 128 * (MIB + PAGE));
	assert_int_equal(p.charged, 64 * MIB);
	assert_int_equal(fx_ringplan_check(&p, &unit, msg, sizeof(msg)), 0);
	has(msg, "= 128.50 MiB locked; 64 MiB beyond");
	/* 1024 CPUs at most under 512M; one more is refused. */
	fx_ringplan_make(1024, 256, PAGE, &unit, &p);
	assert_int_equal(fx_ringplan_check(&p, &unit, msg, sizeof(msg)), 0);
	fx_ringplan_make(1025, 256, PAGE, &unit, &p);
	assert_int_equal(fx_ringplan_check(&p, &unit, msg, sizeof(msg)), -EPERM);
}

/* Over the limits without CAP_IPC_LOCK: both limits, the need, and how to
 * raise each, in one line. */
static void test_check_refused(void **state)
{
	struct fx_ringplan_limits lim = { .rlimit = 64 * 1024, .mlock_kb = 516, .paranoid = 2 };
	struct fx_ringplan p;
	char msg[1024];

	(void)state;
	fx_ringplan_make(128, 256, PAGE, &lim, &p);
	assert_int_equal(fx_ringplan_check(&p, &lim, msg, sizeof(msg)), -EPERM);
	has(msg, "cannot lock the perf rings: 128 CPUs x (1 MiB + a 4 KiB header) = 128.50 MiB");
	has(msg, "kernel.perf_event_mlock_kb 516 KiB x 128 CPUs = 64.50 MiB");
	has(msg, "RLIMIT_MEMLOCK 64 KiB for the rest (64 MiB needed)");
	has(msg, "RLIMIT_MEMLOCK to at least 65536 KiB (LimitMEMLOCK=64M in the systemd unit, "
		 "ulimit -l 65536)");
	has(msg, "kernel.perf_event_mlock_kb to at least 1028 (sysctl "
		 "kernel.perf_event_mlock_kb=1028)");
	has(msg, "sampling.ring_size");
	assert_null(strchr(msg, '\n'));
	/* The rate's rings: 32 MiB on 2 CPUs under a shell's 8 MiB. */
	fx_ringplan_make(2, 8192, PAGE, &debian, &p);
	assert_int_equal(fx_ringplan_check(&p, &debian, msg, sizeof(msg)), -EPERM);
	has(msg, "(63 MiB needed)");
	has(msg, "LimitMEMLOCK=63M");
	has(msg, "kernel.perf_event_mlock_kb=32772");
	/* At the limit exactly: fits. */
	lim.rlimit = p.charged;
	assert_int_equal(fx_ringplan_check(&p, &lim, msg, sizeof(msg)), 0);
	/* A cut message is still a string. */
	lim.rlimit = 0;
	assert_int_equal(fx_ringplan_check(&p, &lim, msg, 16), -EPERM);
	assert_int_equal(strlen(msg), 15);
}

/* Root (CAP_IPC_LOCK) or perf_event_paranoid -1: over the limits, allowed,
 * said as a note. */
static void test_check_exempt(void **state)
{
	struct fx_ringplan_limits lim = debian;
	struct fx_ringplan p;
	char msg[1024];

	(void)state;
	fx_ringplan_make(2, 8192, PAGE, &lim, &p);
	lim.ipc_lock = lim.root = true;
	assert_int_equal(fx_ringplan_check(&p, &lim, msg, sizeof(msg)), 1);
	has(msg, "is over RLIMIT_MEMLOCK (8 MiB), allowed to root (CAP_IPC_LOCK)");
	lim.root = false;
	assert_int_equal(fx_ringplan_check(&p, &lim, msg, sizeof(msg)), 1);
	has(msg, "allowed by CAP_IPC_LOCK");
	lim.ipc_lock = false;
	lim.paranoid = -1;
	assert_int_equal(fx_ringplan_check(&p, &lim, msg, sizeof(msg)), 1);
	has(msg, "allowed by kernel.perf_event_paranoid -1");
	lim.paranoid = 2;
	lim.rlimit = UINT64_MAX;
	assert_int_equal(fx_ringplan_check(&p, &lim, msg, sizeof(msg)), 0);
	has(msg, "is charged to RLIMIT_MEMLOCK (unlimited)");
}

static void test_size(void **state)
{
	char b[32];

	(void)state;
	assert_string_equal(fx_ringplan_size(516 * 1024, b, sizeof(b)), "516 KiB");
	assert_string_equal(fx_ringplan_size(MIB, b, sizeof(b)), "1 MiB");
	assert_string_equal(fx_ringplan_size(MIB + PAGE, b, sizeof(b)), "1028 KiB");
	assert_string_equal(fx_ringplan_size(64 * (MIB + PAGE), b, sizeof(b)), "64.25 MiB");
	assert_string_equal(fx_ringplan_size(4096 * MIB, b, sizeof(b)), "4 GiB");
	assert_string_equal(fx_ringplan_size(1, b, sizeof(b)), "1 KiB");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pages_from_rate), cmocka_unit_test(test_pages_from_record),
		cmocka_unit_test(test_pages_bounds),	cmocka_unit_test(test_check_fits),
		cmocka_unit_test(test_check_big_hosts), cmocka_unit_test(test_check_refused),
		cmocka_unit_test(test_check_exempt),	cmocka_unit_test(test_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
