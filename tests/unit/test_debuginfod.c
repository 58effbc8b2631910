/* SPDX-License-Identifier: MIT */
/* The debuginfod client's bounds, against a file:// "server" (libdebuginfod
 * reads file:// URLs as it reads http ones: <url>/buildid/<hex>/debuginfo):
 * the cache's size bound with least-recently-used eviction, a miss counted
 * and remembered, the per-batch budget, and the counters. The real server is
 * integration.debuginfod's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/debuginfod.h"

#define MIB (1u << 20)

static char dir[] = "/tmp/fx-debuginfod-XXXXXX";
static char srv[PATH_MAX], cache[PATH_MAX], urls[PATH_MAX + 16];

static const uint8_t ids[4][20] = {
	{ 0xa1, 0x01 }, { 0xa2, 0x02 }, { 0xa3, 0x03 }, { 0xa4, 0x04 } /* the last not served */
};

static void id_hex(const uint8_t *id, char *hex)
{
	for (int i = 0; i < 20; i++)
		sprintf(hex + 2 * i, "%02x", id[i]);
}

/* <srv>/buildid/<hex>/debuginfo of @size bytes. */
static void serve(const uint8_t *id, size_t size)
{
	char hex[41], path[PATH_MAX + 128];
	char *buf = calloc(1, size);
	FILE *f;

	id_hex(id, hex);
	snprintf(path, sizeof(path), "mkdir -p %s/buildid/%s", srv, hex);
	assert_int_equal(system(path), 0);
	snprintf(path, sizeof(path), "%s/buildid/%s/debuginfo", srv, hex);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, size, f), size);
	fclose(f);
	free(buf);
}

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(srv, sizeof(srv), "%s/srv", dir);
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	snprintf(urls, sizeof(urls), "file://%s", srv);
	for (int i = 0; i < 3; i++)
		serve(ids[i], MIB);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static struct fx_debuginfod *client(unsigned budget_ms)
{
	struct fx_debuginfod_opts o = {
		.urls = urls,
		.cache_dir = cache,
		.cache_max_bytes = 2 * MIB + MIB / 2,
		.timeout_ms = 5000,
		.budget_ms = budget_ms,
		.retry_s = 60,
	};

	assert_int_equal(fx_debuginfod_setenv(&o), 0);
	return fx_debuginfod_new(&o);
}

static bool cached(const uint8_t *id)
{
	char hex[41], path[PATH_MAX + 64];
	struct stat st;

	id_hex(id, hex);
	snprintf(path, sizeof(path), "%s/%s/debuginfo", cache, hex);
	return stat(path, &st) == 0 && st.st_size > 0;
}

static void find_ok(struct fx_debuginfod *d, const uint8_t *id)
{
	char path[PATH_MAX];
	int fd = fx_debuginfod_find(d, id, 20, path, sizeof(path));

	assert_true(fd >= 0);
	assert_true(strncmp(path, cache, strlen(cache)) == 0);
	close(fd);
}

/* Three files of 1 MiB into a cache of 2.5 MiB: the one used least recently
 * goes, the two others stay; asked again, it comes back from the server. */
static void test_cache_bound(void **state)
{
	struct fx_debuginfod *d = client(0);
	struct fx_debuginfod_stats st;

	(void)state;
	assert_non_null(d);
	fx_debuginfod_begin_batch(d);
	find_ok(d, ids[0]);
	find_ok(d, ids[1]);
	sleep(1);	    /* mtimes in whole seconds apart */
	find_ok(d, ids[0]); /* from the cache: 0 is now the most recent */
	sleep(1);
	find_ok(d, ids[2]);
	assert_true(cached(ids[0]));
	assert_false(cached(ids[1]));
	assert_true(cached(ids[2]));
	fx_debuginfod_get_stats(d, &st);
	assert_int_equal(st.hits, 4);
	assert_int_equal(st.bytes, 3 * MIB); /* the cache hit downloads nothing */
	assert_int_equal(st.evicted, 1);
	assert_int_equal(st.misses, 0);
	assert_int_equal(st.errors, 0);
	fx_debuginfod_free(d);
}

/* A build-id no server has: -ENOENT, counted, and remembered: asked again,
 * the answer comes from the cache without the server (which now has it). */
static void test_miss_remembered(void **state)
{
	struct fx_debuginfod *d = client(0);
	struct fx_debuginfod_stats st;
	char path[PATH_MAX];

	(void)state;
	fx_debuginfod_begin_batch(d);
	assert_int_equal(fx_debuginfod_find(d, ids[3], 20, path, sizeof(path)), -ENOENT);
	serve(ids[3], 4096);
	assert_int_equal(fx_debuginfod_find(d, ids[3], 20, path, sizeof(path)), -ENOENT);
	fx_debuginfod_get_stats(d, &st);
	assert_int_equal(st.misses, 2);
	assert_int_equal(fx_debuginfod_retry_s(d), 60);
	fx_debuginfod_free(d);
}

/* The budget spent, nothing is asked: -EAGAIN, counted as deferred; the
 * next batch asks. */
static void test_budget(void **state)
{
	struct fx_debuginfod *d = client(1);
	struct fx_debuginfod_stats st;
	struct timespec ms5 = { 0, 5000000 };
	char path[PATH_MAX];

	(void)state;
	fx_debuginfod_begin_batch(d);
	nanosleep(&ms5, NULL);
	assert_int_equal(fx_debuginfod_find(d, ids[1], 20, path, sizeof(path)), -EAGAIN);
	fx_debuginfod_get_stats(d, &st);
	assert_int_equal(st.deferred, 1);
	assert_int_equal(st.hits + st.misses + st.errors, 0);
	fx_debuginfod_free(d);
}

/* No server named: no client (the symbolizer then never asks). */
static void test_no_servers(void **state)
{
	struct fx_debuginfod_opts o = { .urls = "  ", .cache_dir = cache };

	(void)state;
	assert_null(fx_debuginfod_new(&o));
}

/* A cache directory others can write is refused: no client. */
static void test_cache_dir_refused(void **state)
{
	char bad[PATH_MAX + 8];
	struct fx_debuginfod_opts o = { .urls = urls, .cache_dir = bad };

	(void)state;
	snprintf(bad, sizeof(bad), "%s/open", dir);
	assert_int_equal(mkdir(bad, 0777), 0);
	assert_int_equal(chmod(bad, 0777), 0);
	assert_null(fx_debuginfod_new(&o));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_bound),
		cmocka_unit_test(test_miss_remembered),
		cmocka_unit_test(test_budget),
		cmocka_unit_test(test_no_servers),
		cmocka_unit_test(test_cache_dir_refused),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
