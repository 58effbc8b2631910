/* SPDX-License-Identifier: MIT */
/* fx-libc: nearly all of its CPU inside libc, in memchr (from scan_memchr) and
 * strlen (from scan_strlen) over a 1 MiB buffer, 3 calls against 2 per round
 * (about 60/40). libc's string functions keep no frame pointer, so a
 * frame-pointer walk skips their caller; a DWARF walk names it. */
#include <string.h>

#include "workload.h"

#define SIZE (1024 * 1024)

volatile uint64_t wl_sink;
static char buf[SIZE];

/* The empty asm with a memory clobber stops GCC from merging or hoisting the
 * calls (it knows memchr and strlen are pure). */
__attribute__((noinline, noclone)) static uint64_t scan_memchr(const char *p)
{
	uint64_t n = 0;

	for (int i = 0; i < 3; i++) {
		__asm__ volatile("" : : "r"(p) : "memory");
		const char *hit = memchr(p, 'x', SIZE);

		n += hit ? (uint64_t)(hit - p) : 0;
	}
	wl_sink = n;
	return n;
}

__attribute__((noinline, noclone)) static uint64_t scan_strlen(const char *p)
{
	uint64_t n = 0;

	for (int i = 0; i < 2; i++) {
		__asm__ volatile("" : : "r"(p) : "memory");
		n += strlen(p);
	}
	wl_sink = n;
	return n;
}

int main(int argc, char **argv)
{
	double end = wl_now() + wl_seconds(argc, argv, "SECONDS");
	uint64_t total = 0;

	/* No 'x' before the last byte and no NUL before it: both scan it all. */
	memset(buf, 'a', SIZE - 2);
	buf[SIZE - 2] = 'x';
	buf[SIZE - 1] = '\0';
	while (wl_now() < end) {
		total += scan_memchr(buf);
		total += scan_strlen(buf);
	}
	wl_sink = total;
	return 0;
}
