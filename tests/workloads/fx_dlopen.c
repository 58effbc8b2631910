/* SPDX-License-Identifier: MIT */
/* fx-dlopen: spins in warm_up for the first second, then dlopen()s
 * libfxplug.so (beside its own binary) and spends the rest of its time in the
 * plugin's plug_hot, called through dlsym from call_plugin. Started after the
 * agent, the plugin is new code in a process the agent already unwinds. */
#include <dlfcn.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "workload.h"

#define UNIT	1000000ULL
#define WARM_UP 1.0

volatile uint64_t wl_sink;

__attribute__((noinline, noclone)) static uint64_t warm_up(uint64_t x)
{
	WL_SPIN(x, UNIT, 1442695040888963407ULL);
	return x;
}

__attribute__((noinline, noclone)) static uint64_t call_plugin(uint64_t (*hot)(uint64_t),
							       uint64_t x)
{
	x = hot(x) + 1;
	return x;
}

/* The plugin's path: libfxplug.so in the directory of /proc/self/exe. */
static int plugin_path(char *out, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", out, size - 1);
	char *slash;

	if (n <= 0)
		return -1;
	out[n] = '\0';
	slash = strrchr(out, '/');
	if (!slash || (size_t)(slash - out) + sizeof("/libfxplug.so") > size)
		return -1;
	strcpy(slash, "/libfxplug.so");
	return 0;
}

int main(int argc, char **argv)
{
	double start = wl_now();
	double end = start + wl_seconds(argc, argv, "SECONDS");
	uint64_t (*hot)(uint64_t);
	char path[PATH_MAX];
	uint64_t x = 1;
	void *lib;

	while (wl_now() < start + WARM_UP && wl_now() < end)
		x = warm_up(x);
	if (plugin_path(path, sizeof(path)) < 0) {
		fprintf(stderr, "fx-dlopen: cannot find its own directory\n");
		return 1;
	}
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "fx-dlopen: %s\n", dlerror());
		return 1;
	}
	hot = (uint64_t(*)(uint64_t))dlsym(lib, "plug_hot");
	if (!hot) {
		fprintf(stderr, "fx-dlopen: %s\n", dlerror());
		return 1;
	}
	while (wl_now() < end)
		x = call_plugin(hot, x);
	wl_sink = x;
	dlclose(lib);
	return 0;
}
