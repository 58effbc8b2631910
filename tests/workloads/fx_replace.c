/* SPDX-License-Identifier: MIT */
/* fx-replace: one program built twice, the second (FX_PAD) with 0x1b0 bytes
 * of code before its functions, so that an address of one build lies in
 * other functions of the other, as in two builds of one package. The tests
 * rename one build over the other under a running process, as a package
 * upgrade does. Its CPU is spread over eight small functions, called in turn. */
#include "workload.h"

#ifdef FX_PAD
/* GCC emits top-level asm before the functions of the unit. */
__asm__(".pushsection .text\n.skip 0x1b0, 0x90\n.popsection");
#endif

#define UNIT 2000ULL

volatile uint64_t wl_sink;

#define STEP(k)                                                                                    \
	__attribute__((noinline)) static uint64_t step_##k(uint64_t x)                             \
	{                                                                                          \
		WL_SPIN(x, UNIT, 1442695040888963407ULL + 2 * (k));                                \
		return x;                                                                          \
	}
STEP(0)
STEP(1)
STEP(2)
STEP(3)
STEP(4)
STEP(5)
STEP(6)
STEP(7)

__attribute__((noinline)) static uint64_t round_of_steps(uint64_t x)
{
	x = step_0(x);
	x = step_1(x);
	x = step_2(x);
	x = step_3(x);
	x = step_4(x);
	x = step_5(x);
	x = step_6(x);
	x = step_7(x);
	return x;
}

int main(int argc, char **argv)
{
	double end = wl_now() + wl_seconds(argc, argv, "SECONDS");
	uint64_t x = 1;

	while (wl_now() < end)
		x = round_of_steps(x);
	wl_sink = x;
	return 0;
}
