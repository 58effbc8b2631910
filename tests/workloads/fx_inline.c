/* SPDX-License-Identifier: MIT */
/* fx-inline: nearly all CPU in inline_helper, which is always inlined into
 * inline_caller; a profiler that reads DWARF inline info shows inline_helper as
 * its own frame under inline_caller. */
#include "workload.h"

#define UNIT 1000000ULL

volatile uint64_t wl_sink;

static inline __attribute__((always_inline)) uint64_t inline_helper(uint64_t x)
{
	WL_SPIN(x, 9 * UNIT, 1442695040888963407ULL);
	return x;
}

__attribute__((noinline)) static uint64_t inline_caller(uint64_t x)
{
	/* A little work of its own, so the caller has self samples too. */
	WL_SPIN(x, UNIT / 2, 1442695040888963411ULL);
	return inline_helper(x);
}

int main(int argc, char **argv)
{
	double end = wl_now() + wl_seconds(argc, argv, "SECONDS");
	uint64_t x = 1;

	while (wl_now() < end)
		x = inline_caller(x);
	wl_sink = x;
	return 0;
}
