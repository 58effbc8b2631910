/* SPDX-License-Identifier: MIT */
/* fx-plt: a hot loop of calls to strlen and memcpy through the PLT, on
 * strings of 0 to 3 bytes, so that libc's functions are short and the stubs
 * (`strlen@plt`, `memcpy@plt`: one indirect jump each) are leaves of enough
 * samples at 99 Hz to compare their shares. Built with -fno-builtin (GCC
 * would otherwise inline or fold both calls) and without -fno-plt; the
 * string and the size come through an empty asm the optimizer cannot see
 * through, so every call is a real `call <name>@plt`
 * (integration.stripped_perf checks that with objdump).
 *
 * A sample lands on the instruction after the one the interrupt waited for,
 * so which instructions collect samples depends on the CPU. On the machine
 * this was written on, the loop without the test of pause_copy left
 * strlen@plt without a sample (memcpy@plt had 4%); with it, each stub is a
 * leaf of 3-5% of the samples. */
#include <string.h>

#include "workload.h"

/* Calls between two looks at the clock: about 1 ms of work. */
#define ROUND 20000

volatile uint64_t wl_sink;
/* Never set. */
static volatile int pause_copy;

static char dst[64];
static const char *const words[4] = { "", "a", "bc", "def" };

__attribute__((noinline, noclone)) static uint64_t copy_round(uint64_t seed)
{
	uint64_t acc = seed;

	for (uint64_t i = 0; i < ROUND; i++) {
		const char *w = words[(acc + i) & 3];
		size_t n;

		__asm__ volatile("" : "+r"(w) : : "memory");
		if (pause_copy)
			wl_sink = i;
		n = strlen(w);
		memcpy(dst, w, n);
		acc += n + (unsigned char)dst[0];
	}
	wl_touch(acc);
	return acc;
}

int main(int argc, char **argv)
{
	double end = wl_now() + wl_seconds(argc, argv, "SECONDS");
	uint64_t acc = 1;

	while (wl_now() < end)
		acc = copy_round(acc);
	wl_sink = acc;
	return 0;
}
