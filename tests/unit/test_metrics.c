/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fxagent/metrics.h"

static char dir[] = "/tmp/fx-metrics-XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static char *slurp(const char *path)
{
	static char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* What node_exporter's textfile collector parses: HELP and TYPE once per
 * name, then one sample line per series, values exact. */
static void test_text_format(void **state)
{
	const struct fx_metric m[] = {
		{ "fxagent_samples_total", "Samples recorded.", false, NULL, NULL,
		  9007199254740992.0 },
		{ "fxagent_spool_bytes", "Bytes waiting.", true, NULL, NULL, 0 },
		{ "fxagent_info", "Version.", true, "version", "0.1.0", 1 },
		{ "fxagent_target_samples_total", "Per target.", false, "target", "web", 3 },
		{ "fxagent_target_samples_total", "Per target.", false, "target", "a\"b\\c\nd", 4 },
	};
	char path[256];

	(void)state;
	snprintf(path, sizeof(path), "%s/fxagent.prom", dir);
	assert_int_equal(fx_metrics_write(path, m, 5), 0);
	assert_string_equal(slurp(path),
			    "# HELP fxagent_samples_total Samples recorded.\n"
			    "# TYPE fxagent_samples_total counter\n"
			    "fxagent_samples_total 9007199254740992\n"
			    "# HELP fxagent_spool_bytes Bytes waiting.\n"
			    "# TYPE fxagent_spool_bytes gauge\n"
			    "fxagent_spool_bytes 0\n"
			    "# HELP fxagent_info Version.\n"
			    "# TYPE fxagent_info gauge\n"
			    "fxagent_info{version=\"0.1.0\"} 1\n"
			    "# HELP fxagent_target_samples_total Per target.\n"
			    "# TYPE fxagent_target_samples_total counter\n"
			    "fxagent_target_samples_total{target=\"web\"} 3\n"
			    "fxagent_target_samples_total{target=\"a\\\"b\\\\c\\nd\"} 4\n");
}

/* The caches' series: one name's series together (HELP and TYPE once), a
 * cache whose bytes are not known has no bytes series. */
static void test_cache_series(void **state)
{
	const struct fx_metrics_cache c[] = {
		{ "symbol_objects", 12, 4096, true, 3 },
		{ "unwind", 2, 0, false, 7 },
	};
	struct fx_metric m[6];
	char path[256];

	(void)state;
	assert_int_equal(fx_metrics_caches(c, 2, m), 5);
	snprintf(path, sizeof(path), "%s/caches.prom", dir);
	assert_int_equal(fx_metrics_write(path, m, 5), 0);
	assert_string_equal(slurp(path),
			    "# HELP fxagent_cache_evictions_total Entries a cache let go: for its "
			    "bound, or idle.\n"
			    "# TYPE fxagent_cache_evictions_total counter\n"
			    "fxagent_cache_evictions_total{cache=\"symbol_objects\"} 3\n"
			    "fxagent_cache_evictions_total{cache=\"unwind\"} 7\n"
			    "# HELP fxagent_cache_entries Entries a cache holds.\n"
			    "# TYPE fxagent_cache_entries gauge\n"
			    "fxagent_cache_entries{cache=\"symbol_objects\"} 12\n"
			    "fxagent_cache_entries{cache=\"unwind\"} 2\n"
			    "# HELP fxagent_cache_bytes Heap bytes a cache holds.\n"
			    "# TYPE fxagent_cache_bytes gauge\n"
			    "fxagent_cache_bytes{cache=\"symbol_objects\"} 4096\n");
	assert_int_equal(fx_metrics_caches(c, 0, m), 0);
}

/* Files in the test directory whose name says they are temporaries. */
static int temporaries(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += strstr(de->d_name, ".tmp") != NULL;
	closedir(d);
	return n;
}

/* A scrape never sees half a file: the new one replaces the old by rename,
 * and no temporary file is left behind. */
static void test_replaced_atomically(void **state)
{
	struct fx_metric m = { "fxagent_windows_total", "Windows.", false, NULL, NULL, 1 };
	char path[256];
	struct stat before, after;

	(void)state;
	snprintf(path, sizeof(path), "%s/w.prom", dir);
	assert_int_equal(fx_metrics_write(path, &m, 1), 0);
	assert_int_equal(stat(path, &before), 0);
	m.value = 2;
	assert_int_equal(fx_metrics_write(path, &m, 1), 0);
	assert_int_equal(stat(path, &after), 0);
	assert_int_not_equal(before.st_ino, after.st_ino);
	assert_non_null(strstr(slurp(path), "fxagent_windows_total 2\n"));
	assert_int_equal(temporaries(), 0);
}

/* Someone who can write in node_exporter's directory puts a symlink where a
 * temporary file could be: the agent (root) must not write through it. */
static void test_symlink_not_followed(void **state)
{
	struct fx_metric m = { "fxagent_windows_total", "Windows.", false, NULL, NULL, 1 };
	char path[256], link[300], victim[256];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/s.prom", dir);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	f = fopen(victim, "w");
	assert_non_null(f);
	fputs("precious\n", f);
	fclose(f);
	snprintf(link, sizeof(link), "%s.tmp", path);
	assert_int_equal(symlink(victim, link), 0);
	assert_int_equal(fx_metrics_write(path, &m, 1), 0);
	assert_string_equal(slurp(victim), "precious\n");
	assert_non_null(strstr(slurp(path), "fxagent_windows_total 1\n"));
	unlink(link);
	unlink(victim);
}

/* A directory that is not there is the caller's error to report, and the
 * old file stays as it was. */
static void test_errors(void **state)
{
	struct fx_metric m = { "fxagent_windows_total", "Windows.", false, NULL, NULL, 1 };
	char path[256];

	(void)state;
	snprintf(path, sizeof(path), "%s/missing/x.prom", dir);
	assert_int_equal(fx_metrics_write(path, &m, 1), -ENOENT);
	/* Renaming onto a directory fails; the temporary file goes away. */
	snprintf(path, sizeof(path), "%s/adir", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_true(fx_metrics_write(path, &m, 1) < 0);
	assert_int_equal(temporaries(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_format),
		cmocka_unit_test(test_cache_series),
		cmocka_unit_test(test_replaced_atomically),
		cmocka_unit_test(test_symlink_not_followed),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
