/* SPDX-License-Identifier: MIT */
/* What the sampler decides before it opens anything: the CPU list it reads
 * from sysfs, and ring sizes that hold 32 of the largest records (fewer and
 * the kernel drops samples without a LOST record). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/sampler.h"

static void test_parse_cpus(void **state)
{
	uint8_t map[16];

	(void)state;
	assert_int_equal(fx_sampler_parse_cpus("0-3,5,7-8\n", map, 128), 7);
	assert_int_equal(map[0], 0xaf); /* 0 1 2 3 5 7 */
	assert_int_equal(map[1], 0x01); /* 8 */
	assert_int_equal(fx_sampler_parse_cpus("0", map, 128), 1);
	assert_int_equal(fx_sampler_parse_cpus("3-1", map, 128), -EINVAL);
	assert_int_equal(fx_sampler_parse_cpus("0-200", map, 128), -EINVAL);
	assert_int_equal(fx_sampler_parse_cpus("a", map, 128), -EINVAL);
	assert_int_equal(fx_sampler_parse_cpus("1,,2", map, 128), -EINVAL);
}

static void test_ring_pages(void **state)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct fx_sampler_opts fp = { .frequency = 99, .kernel = true };
	struct fx_sampler_opts dwarf = {
		.frequency = 99, .kernel = true, .user_regs_stack = true, .stack_bytes = 16384
	};
	struct fx_sampler_opts big = dwarf;
	size_t n;

	(void)state;
	/* Frame pointers: small records, the 64-page floor. */
	assert_int_equal(fx_sampler_ring_pages(&fp), 64);
	/* 16 KiB stack copies: 32 of them need more than 512 KiB. */
	n = fx_sampler_ring_pages(&dwarf);
	assert_true(n * page >= 32 * (16384 + 136 + 8 * 136));
	assert_int_equal(n & (n - 1), 0);
	assert_int_equal(n, 256);
	big.stack_bytes = 32768;
	assert_int_equal(fx_sampler_ring_pages(&big), 512);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_cpus),
		cmocka_unit_test(test_ring_pages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
