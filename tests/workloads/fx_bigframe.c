/* SPDX-License-Identifier: MIT */
/* fx-bigframe: main -> bf_big (a 20 KiB on-stack buffer) -> bf_outer ->
 * bf_mid -> bf_leaf, which spins. Nearly every sample is taken under
 * bf_big, whose frame alone is larger than the default 16 KiB user-stack
 * copy: a DWARF walk from the leaf finds bf_big's return address 20 KiB
 * above the stack pointer, beyond the copy, and cannot reach main or _start
 * from the copy alone. A 32 KiB copy holds it all.
 *
 * fx-bigframe is built with frame pointers (as Node.js is): the kernel's
 * frame-pointer callchain walks the whole stack, whatever the frame sizes.
 * fx-bigframe-nofp is the same program without frame pointers: nothing but
 * a copy that holds bf_big's frame can walk it, so with 8 or 16 KiB its
 * stacks end at bf_big and must be counted as truncated. */
#include <string.h>

#include "workload.h"

/* More than the default stack copy (16 KiB), less than the largest (32 KiB)
 * with what lies between bf_big's frame and _start. */
#define BIG_BYTES (20 * 1024)
#define UNIT	  1000000ULL

volatile uint64_t wl_sink;

__attribute__((noinline, noclone)) static uint64_t bf_leaf(uint64_t x)
{
	WL_SPIN(x, UNIT, 1442695040888963407ULL);
	return x;
}

__attribute__((noinline, noclone)) static uint64_t bf_mid(uint64_t x)
{
	x = bf_leaf(x);
	wl_touch(x);
	return x + 1;
}

__attribute__((noinline, noclone)) static uint64_t bf_outer(uint64_t x)
{
	x = bf_mid(x);
	wl_touch(x);
	return x + 1;
}

/* The buffer is written before and read after the calls: it stays in this
 * frame, live across them, and the calls run below it. */
__attribute__((noinline, noclone)) static uint64_t bf_big(double end, uint64_t x)
{
	volatile unsigned char buf[BIG_BYTES];

	memset((void *)buf, (int)(x & 0xff), sizeof(buf));
	while (wl_now() < end) {
		x = bf_outer(x);
		buf[x % sizeof(buf)] = (unsigned char)x;
	}
	return x + buf[0] + buf[sizeof(buf) - 1];
}

int main(int argc, char **argv)
{
	double end = wl_now() + wl_seconds(argc, argv, "SECONDS");

	wl_sink = bf_big(end, 1);
	return 0;
}
