/* SPDX-License-Identifier: MIT */
/* What the sampler decides before it opens anything: the CPU list it reads
 * from sysfs, and the ring size for its rate and records (ringplan.h). */
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
	struct fx_sampler_opts o = dwarf;
	size_t n;

	(void)state;
	assert_int_equal(page, 4096); /* the sizes below are in 4 KiB pages */
	/* Header, fields, a full callchain; registers and the stack copy. */
	assert_int_equal(fx_sampler_record_bytes(&fp), 1152);
	assert_int_equal(fx_sampler_record_bytes(&dwarf), 1152 + 8 + 8 * 17 + 16 + 16384);
	/* Frame pointers: small records, the 64-page floor. */
	assert_int_equal(fx_sampler_ring_pages(&fp), 64);
	/* 99 Hz, 16 KiB stack copies: 1 MiB, as many as 32 records needed. */
	n = fx_sampler_ring_pages(&dwarf);
	assert_true(n * page >= 32 * fx_sampler_record_bytes(&dwarf));
	assert_int_equal(n & (n - 1), 0);
	assert_int_equal(n, 256);
	/* The rate of 64 and 128 CPUs at 99 Hz, sampled on 2: 32 and 64 MiB. */
	o.frequency = 3168;
	assert_int_equal(fx_sampler_ring_pages(&o), 8192);
	o.frequency = 6336;
	assert_int_equal(fx_sampler_ring_pages(&o), 16384);
	/* The stack copy scales it. */
	o = dwarf;
	o.stack_bytes = 32768;
	assert_int_equal(fx_sampler_ring_pages(&o), 512);
	o.stack_bytes = 8192;
	assert_int_equal(fx_sampler_ring_pages(&o), 128);
	o.frequency = 3168;
	assert_int_equal(fx_sampler_ring_pages(&o), 4096);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_cpus),
		cmocka_unit_test(test_ring_pages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
