/* SPDX-License-Identifier: MIT */
/* The call shape of fx-nofp, fx-lld and fx-dbgframe: main -> level1 -> level2 ->
 * the hot function LEVELS_HOT, nearly all of the CPU in the last. Each target
 * builds it differently (no frame pointers, lld, .debug_frame only); the
 * source is the same so the tests can expect the same stacks. */
#ifndef FX_LEVELS_H
#define FX_LEVELS_H

#include "workload.h"

#define LEVELS_UNIT 1000000ULL

volatile uint64_t wl_sink;

/* Non-static and noclone: no constprop/isra clones renaming them. */
__attribute__((noinline, noclone)) uint64_t LEVELS_HOT(uint64_t x);
__attribute__((noinline, noclone)) uint64_t level2(uint64_t x);
__attribute__((noinline, noclone)) uint64_t level1(uint64_t x);

uint64_t LEVELS_HOT(uint64_t x)
{
	WL_SPIN(x, LEVELS_UNIT, 1442695040888963407ULL);
	return x;
}

uint64_t level2(uint64_t x)
{
	x = LEVELS_HOT(x) + 1;
	return x;
}

uint64_t level1(uint64_t x)
{
	x = level2(x) + 1;
	return x;
}

int main(int argc, char **argv)
{
	double end = wl_now() + wl_seconds(argc, argv, "SECONDS");
	uint64_t x = 1;

	while (wl_now() < end)
		x = level1(x);
	wl_sink = x;
	return 0;
}

#endif
