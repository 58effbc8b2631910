/* SPDX-License-Identifier: MIT */
/* util: small helpers several modules share. */
#ifndef FXAGENT_UTIL_H
#define FXAGENT_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fxagent/hash.h" /* fx_mix64 was here: its users still find it */

/* Grows the array *@arr (a pointer to the array pointer) to hold @need
 * elements of @elem bytes, doubling. Returns 0 or -ENOMEM (*@arr unchanged). */
static inline int fx_grow(void *arr, size_t *cap, size_t need, size_t elem)
{
	void **p = arr;
	size_t ncap;
	void *np;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 64;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	if (ncap > SIZE_MAX / elem)
		return -ENOMEM;
	np = realloc(*p, ncap * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

/* The time of @clk in nanoseconds. */
static inline uint64_t fx_now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* mkdir -p @path (mode 0755). Returns 0 or -errno. */
static inline int fx_mkdir_parents(const char *path)
{
	char *buf = strdup(path);
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST) {
			rc = -errno;
			break;
		}
		*p = '/';
	}
	if (!rc && mkdir(buf, 0755) < 0 && errno != EEXIST)
		rc = -errno;
	free(buf);
	return rc;
}

/* A number field of /proc/self/status ("VmHWM", "Umask"), read in @base
 * (10; 8 for Umask). Returns 0 or -errno (-ENOENT: no such field). */
static inline int fx_self_status(const char *field, int base, unsigned long long *out)
{
	size_t n = strlen(field);
	char line[128];
	int rc = -ENOENT;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, field, n) == 0 && line[n] == ':') {
			*out = strtoull(line + n + 1, NULL, base);
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

/* This process's peak resident set (VmHWM) in KiB, 0 if unknown. Not
 * getrusage(): its ru_maxrss keeps the peak of the image before exec (the
 * parent that forked us), which can be larger than ours. */
static inline uint64_t fx_peak_rss_kib(void)
{
	unsigned long long kib = 0;

	return fx_self_status("VmHWM", 10, &kib) == 0 ? kib : 0;
}

#endif
