/* SPDX-License-Identifier: MIT */
/* fx-deep: nearly all of its CPU in deep_hot, at the bottom of a recursion of
 * DEPTH frames of deep_down, each with a 96-byte local buffer: the stack from
 * deep_hot up to main is over 200 KiB, far more than a sample's stack copy, so
 * a DWARF walk must stop early (and say so). */
#include <string.h>

#include "workload.h"

#define DEPTH 2000
#define UNIT  1000000ULL

volatile uint64_t wl_sink;

__attribute__((noinline, noclone)) static uint64_t deep_hot(uint64_t x)
{
	WL_SPIN(x, 10 * UNIT, 1442695040888963407ULL);
	return x;
}

__attribute__((noinline, noclone)) static uint64_t deep_down(int depth, uint64_t x)
{
	volatile unsigned char pad[96];

	/* The buffer is used on both sides of the call: it stays in this frame. */
	memset((void *)pad, (int)(x & 0xff), sizeof(pad));
	if (depth > 0)
		x = deep_down(depth - 1, x);
	else
		x = deep_hot(x);
	return x + pad[depth % sizeof(pad)];
}

int main(int argc, char **argv)
{
	double end = wl_now() + wl_seconds(argc, argv, "SECONDS");
	uint64_t x = 1;

	while (wl_now() < end)
		x = deep_down(DEPTH, x);
	wl_sink = x;
	return 0;
}
