/* SPDX-License-Identifier: MIT */
/* fx-maps SECONDS REGIONS: maps REGIONS separate anonymous executable regions
 * (each a copy of nothing but a return instruction, with unmapped gaps so the
 * kernel cannot merge them), calls into every one of them, then spins in
 * maps_hot until SECONDS pass: a process with thousands of mappings, each an
 * MMAP2 record and a line of /proc/PID/maps. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "workload.h"

volatile uint64_t wl_sink;

__attribute__((noinline, noclone)) static uint64_t maps_hot(uint64_t x)
{
	WL_SPIN(x, 1000000ULL, 1442695040888963407ULL);
	return x;
}

int main(int argc, char **argv)
{
	double end = wl_now() + wl_seconds(argc, argv, "SECONDS REGIONS");
	long n = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *base;
	uint64_t x = 1;

	if (n <= 0 || n > 60000) {
		fprintf(stderr, "fx-maps: bad region count\n");
		return 2;
	}
	/* Reserve room for n regions and n gaps, then map each region RX. */
	base = mmap(NULL, 2 * (size_t)n * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED) {
		perror("fx-maps: mmap");
		return 1;
	}
	munmap(base, 2 * (size_t)n * page);
	for (long i = 0; i < n; i++) {
		uint8_t *p = mmap(base + 2 * (size_t)i * page, page, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

		if (p == MAP_FAILED) {
			perror("fx-maps: region");
			return 1;
		}
		p[0] = 0xc3; /* ret */
		if (mprotect(p, page, PROT_READ | PROT_EXEC) < 0) {
			perror("fx-maps: mprotect");
			return 1;
		}
		((void (*)(void))p)();
	}
	printf("%ld\n", n);
	fflush(stdout);
	while (wl_now() < end)
		x = maps_hot(x);
	wl_sink = x;
	return 0;
}
