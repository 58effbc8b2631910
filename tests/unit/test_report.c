/* SPDX-License-Identifier: MIT */
/* Lost-sample markers: each one inside the window of the chunk that carries
 * it, whenever its LOST record was read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fxagent/report.h"

#define MS    1000000ull
#define START (5000 * MS)
#define END   (START + 2000 * MS)

static void test_lost_inside(void **state)
{
	struct fx_lost_event ev[] = { { START, 3 }, { START + 1234 * MS + MS / 2, 4 }, { END, 5 } };
	struct fx_profile_marker m[3];

	(void)state;
	assert_int_equal(fx_report_lost_markers(ev, 3, START, END, m), 3);
	assert_int_equal(m[0].type, FX_MARKER_LOST);
	assert_true(m[0].start_ms == 0 && m[0].count == 3 && m[0].outside_ms == 0);
	assert_true(m[1].start_ms == 1234.5 && m[1].count == 4 && m[1].outside_ms == 0);
	/* The end itself is still this window's. */
	assert_true(m[2].start_ms == 2000 && m[2].count == 5 && m[2].outside_ms == 0);
}

static void test_lost_outside_counted_at_edge(void **state)
{
	/* modes_parity met this: a record 9.78 ms past a 2 s window's end. */
	struct fx_lost_event ev[] = { { END + 9784848, 7 }, { START - 250 * MS, 2 } };
	struct fx_profile_marker m[2];

	(void)state;
	assert_int_equal(fx_report_lost_markers(ev, 2, START, END, m), 2);
	assert_true(m[0].start_ms == 2000 && m[0].count == 7);
	assert_true(m[0].outside_ms > 9.784 && m[0].outside_ms < 9.785);
	assert_true(m[1].start_ms == 0 && m[1].count == 2 && m[1].outside_ms == -250);
	/* No count is dropped on the way. */
	assert_int_equal(m[0].count + m[1].count, 9);
}

static void test_lost_without_end(void **state)
{
	/* A window not yet closed has no end: nothing is after it. */
	struct fx_lost_event ev[] = { { START + 90000 * MS, 1 } };
	struct fx_profile_marker m[1];

	(void)state;
	fx_report_lost_markers(ev, 1, START, 0, m);
	assert_true(m[0].start_ms == 90000 && m[0].outside_ms == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lost_inside),
		cmocka_unit_test(test_lost_outside_counted_at_edge),
		cmocka_unit_test(test_lost_without_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
