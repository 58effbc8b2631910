/* SPDX-License-Identifier: MIT */
/* fx-syscalls: spends most of its time in the kernel, reading /dev/zero (the
 * kernel clears the buffer) and writing /dev/null, from syscall_loop. */
#include <fcntl.h>
#include <unistd.h>

#include "workload.h"

volatile uint64_t wl_sink;
static char buf[64 * 1024];

__attribute__((noinline)) static uint64_t syscall_loop(int zero, int null)
{
	uint64_t total = 0;

	for (int i = 0; i < 200; i++) {
		ssize_t n = read(zero, buf, sizeof(buf));

		if (n > 0)
			total += (uint64_t)write(null, buf, (size_t)n);
	}
	return total;
}

int main(int argc, char **argv)
{
	double end = wl_now() + wl_seconds(argc, argv, "SECONDS");
	int zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	uint64_t total = 0;

	if (zero < 0 || null < 0) {
		perror("fx-syscalls: open /dev/zero or /dev/null");
		return 1;
	}
	while (wl_now() < end)
		total += syscall_loop(zero, null);
	wl_sink = total;
	close(zero);
	close(null);
	return 0;
}
