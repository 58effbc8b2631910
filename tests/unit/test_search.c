/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fxagent/search.h"

struct range {
	uint32_t tag; /* the key is not the first member */
	uint64_t start;
};

/* Against a linear scan, for every key around every element. */
static void test_last_le_matches_a_scan(void **state)
{
	struct range r[64];

	(void)state;
	for (size_t n = 0; n <= 64; n++) {
		for (size_t i = 0; i < n; i++)
			r[i] = (struct range){ .tag = (uint32_t)i, .start = 100 + 10 * (i / 2) };
		for (uint64_t key = 90; key < 100 + 10 * 33; key++) {
			size_t want = SIZE_MAX;

			for (size_t i = 0; i < n; i++)
				if (r[i].start <= key)
					want = i;
			assert_int_equal(FX_SEARCH_LAST_LE(r, n, start, key), want);
		}
	}
}

/* The extremes of the key's range. */
static void test_last_le_extremes(void **state)
{
	struct range r[] = { { 0, 0 }, { 1, 5 }, { 2, UINT64_MAX } };

	(void)state;
	assert_int_equal(FX_SEARCH_LAST_LE(r, 3, start, 0), 0);
	assert_int_equal(FX_SEARCH_LAST_LE(r, 3, start, UINT64_MAX - 1), 1);
	assert_int_equal(FX_SEARCH_LAST_LE(r, 3, start, UINT64_MAX), 2);
	assert_int_equal(FX_SEARCH_LAST_LE(r + 1, 2, start, 4), SIZE_MAX);
	assert_int_equal(FX_SEARCH_LAST_LE(r, 0, start, 7), SIZE_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_last_le_matches_a_scan),
		cmocka_unit_test(test_last_le_extremes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
