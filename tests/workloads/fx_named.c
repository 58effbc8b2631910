/* SPDX-License-Identifier: MIT */
/* fx-named: renames itself with prctl(PR_SET_NAME) to NAME, any bytes but NUL
 * (the kernel keeps 15 of them), then spins in named_spin for SECONDS. For
 * tests of names that hold newlines and other control bytes. With NAME "-" it
 * keeps the name exec gave it (the base name of its path). Copied to other
 * paths it is also the "same binary at two paths" workload. */
#include <string.h>
#include <sys/prctl.h>

#include "workload.h"

#define UNIT 20000ULL

volatile uint64_t wl_sink;

__attribute__((noinline)) static uint64_t named_spin(uint64_t x)
{
	WL_SPIN(x, UNIT, 1442695040888963407ULL);
	return x;
}

int main(int argc, char **argv)
{
	double end = wl_now() + wl_seconds(argc, argv, "SECONDS NAME");
	uint64_t x = 1;

	if (argc < 3) {
		fprintf(stderr, "usage: %s SECONDS NAME\n", argv[0]);
		return 2;
	}
	if (strcmp(argv[2], "-") != 0 && prctl(PR_SET_NAME, argv[2], 0, 0, 0) != 0) {
		perror("fx-named: prctl(PR_SET_NAME)");
		return 1;
	}
	/* Tells the test the name is set: it may start recording. */
	printf("ready\n");
	fflush(stdout);
	while (wl_now() < end)
		x = named_spin(x);
	wl_sink = x;
	return 0;
}
