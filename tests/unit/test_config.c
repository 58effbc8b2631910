/* SPDX-License-Identifier: MIT */
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
#include <unistd.h>

#include "fxagent/config.h"
#include "fxagent/dwunwind.h"
#include "fxagent/log.h"

#define CFG_DATA FX_TEST_DATA "/config/"
#define SHIPPED	 FX_TEST_DATA "/../../config/fxagent.yaml"

/* One case: a YAML text (inline, generated or a fixture file) and either the
 * exact error message or a check of the values. Messages are written without
 * the file name, which the runner puts in front ("inline.yaml" for texts). */
struct tcase {
	const char *name;
	const char *text;   /* inline YAML, or NULL */
	size_t len;	    /* of @text; 0 means strlen */
	char *(*gen)(void); /* generated YAML, or NULL */
	const char *file;   /* path of a fixture, or NULL */
	int rc;		    /* expected return value */
	const char *msg;    /* expected message after the file name, or NULL */
	void (*check)(const struct fx_config *c);
};

static struct fx_config *new_config(void)
{
	struct fx_config *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	return c;
}

static void assert_labels_equal(const struct fx_label *a, size_t na, const struct fx_label *b,
				size_t nb)
{
	size_t i;

	assert_int_equal(na, nb);
	for (i = 0; i < na; i++) {
		assert_string_equal(a[i].key, b[i].key);
		assert_string_equal(a[i].value, b[i].value);
	}
}

static void assert_str_or_null(const char *a, const char *b)
{
	if (!a || !b)
		assert_ptr_equal(a, b);
	else
		assert_string_equal(a, b);
}

static void assert_config_equal(const struct fx_config *a, const struct fx_config *b)
{
	size_t i;

	assert_int_equal(a->sampling.frequency, b->sampling.frequency);
	assert_int_equal(a->sampling.dwarf, b->sampling.dwarf);
	assert_int_equal(a->sampling.dwarf_engine, b->sampling.dwarf_engine);
	assert_int_equal(a->sampling.stack_bytes, b->sampling.stack_bytes);
	assert_int_equal(a->sampling.kernel_stacks, b->sampling.kernel_stacks);
	assert_int_equal(a->sampling.include_idle, b->sampling.include_idle);
	assert_int_equal(a->window.seconds, b->window.seconds);
	assert_int_equal(a->window.max_stacks, b->window.max_stacks);
	assert_int_equal(a->window.reuse_threads, b->window.reuse_threads);
	assert_int_equal(a->ntargets, b->ntargets);
	for (i = 0; i < a->ntargets; i++) {
		assert_string_equal(a->targets[i].name, b->targets[i].name);
		assert_int_equal(a->targets[i].kind, b->targets[i].kind);
		if (a->targets[i].kind == FX_TARGET_PID)
			assert_int_equal(a->targets[i].pid, b->targets[i].pid);
		else
			assert_string_equal(a->targets[i].value, b->targets[i].value);
		assert_labels_equal(a->targets[i].labels, a->targets[i].nlabels,
				    b->targets[i].labels, b->targets[i].nlabels);
	}
	assert_labels_equal(a->labels, a->nlabels, b->labels, b->nlabels);
	assert_string_equal(a->output.directory, b->output.directory);
	assert_int_equal(a->symbolization.ndebug_dirs, b->symbolization.ndebug_dirs);
	for (i = 0; i < a->symbolization.ndebug_dirs; i++)
		assert_string_equal(a->symbolization.debug_dirs[i], b->symbolization.debug_dirs[i]);
	assert_int_equal(a->symbolization.demangle, b->symbolization.demangle);
	assert_int_equal(a->symbolization.jit, b->symbolization.jit);
	assert_int_equal(a->symbolization.jvm_perfmap, b->symbolization.jvm_perfmap);
	assert_int_equal(a->log.level, b->log.level);
	assert_str_or_null(a->upload.url, b->upload.url);
	assert_int_equal(a->upload.put, b->upload.put);
	assert_labels_equal(a->upload.headers, a->upload.nheaders, b->upload.headers,
			    b->upload.nheaders);
	assert_str_or_null(a->upload.bearer_token_file, b->upload.bearer_token_file);
	assert_str_or_null(a->upload.ca_file, b->upload.ca_file);
	assert_str_or_null(a->upload.cert_file, b->upload.cert_file);
	assert_str_or_null(a->upload.key_file, b->upload.key_file);
	assert_int_equal(a->upload.insecure_skip_verify, b->upload.insecure_skip_verify);
	assert_int_equal(a->upload.connect_timeout_ms, b->upload.connect_timeout_ms);
	assert_int_equal(a->upload.timeout_ms, b->upload.timeout_ms);
	assert_int_equal(a->upload.initial_backoff_ms, b->upload.initial_backoff_ms);
	assert_int_equal(a->upload.max_backoff_ms, b->upload.max_backoff_ms);
	assert_string_equal(a->spool.directory, b->spool.directory);
	assert_int_equal(a->spool.max_bytes, b->spool.max_bytes);
	assert_int_equal(a->spool.max_age_s, b->spool.max_age_s);
	assert_int_equal(a->sampling.ring_bytes, b->sampling.ring_bytes);
	assert_int_equal(a->symbolization.max_memory, b->symbolization.max_memory);
	assert_str_or_null(a->symbolization.debuginfod_urls, b->symbolization.debuginfod_urls);
	assert_str_or_null(a->symbolization.debuginfod_cache, b->symbolization.debuginfod_cache);
	assert_int_equal(a->symbolization.debuginfod_cache_max,
			 b->symbolization.debuginfod_cache_max);
	assert_int_equal(a->symbolization.debuginfod_timeout_ms,
			 b->symbolization.debuginfod_timeout_ms);
	assert_int_equal(a->symbolization.debuginfod_budget_ms,
			 b->symbolization.debuginfod_budget_ms);
	assert_int_equal(a->symbolization.debuginfod_retry_s, b->symbolization.debuginfod_retry_s);
	assert_str_or_null(a->metrics.textfile, b->metrics.textfile);
}

static void check_defaults(const struct fx_config *c)
{
	struct fx_config *d = new_config();

	assert_int_equal(fx_config_defaults(d), 0);
	assert_config_equal(c, d);
	fx_config_release(d);
	free(d);
}

static void check_jit_off(const struct fx_config *c)
{
	assert_false(c->symbolization.jit);
	assert_true(c->symbolization.jvm_perfmap);
}

static void check_jvm_perfmap_off(const struct fx_config *c)
{
	assert_true(c->symbolization.jit);
	assert_false(c->symbolization.jvm_perfmap);
}

static void check_full(const struct fx_config *c)
{
	const struct fx_target *t = c->targets;

	assert_int_equal(c->sampling.frequency, 49);
	assert_false(c->sampling.dwarf);
	assert_int_equal(c->sampling.stack_bytes, 8192);
	assert_false(c->sampling.kernel_stacks);
	assert_true(c->sampling.include_idle);
	assert_int_equal(c->window.seconds, 10);
	assert_int_equal(c->window.max_stacks, 5000);
	assert_true(c->window.reuse_threads);

	assert_int_equal(c->ntargets, 5);
	assert_string_equal(t[0].name, "web");
	assert_int_equal(t[0].kind, FX_TARGET_SYSTEMD_UNIT);
	assert_string_equal(t[0].value, "nginx.service");
	assert_int_equal(t[0].nlabels, 2);
	assert_string_equal(t[0].labels[0].key, "tier");
	assert_string_equal(t[0].labels[0].value, "frontend");
	assert_string_equal(t[0].labels[1].key, "team");
	assert_string_equal(t[0].labels[1].value, "edge");
	assert_string_equal(t[1].name, "db");
	assert_int_equal(t[1].kind, FX_TARGET_CGROUP);
	assert_string_equal(t[1].value, "/system.slice/postgresql.service");
	assert_int_equal(t[1].nlabels, 0);
	assert_string_equal(t[2].name, "pg");
	assert_int_equal(t[2].kind, FX_TARGET_PROCESS);
	assert_string_equal(t[2].value, "postgres");
	assert_string_equal(t[3].name, "one");
	assert_int_equal(t[3].kind, FX_TARGET_PID);
	assert_null(t[3].value);
	assert_int_equal(t[3].pid, 1234);
	/* systemctl's shorthand: a name without a unit type is a service. */
	assert_string_equal(t[4].name, "short.unit-1");
	assert_string_equal(t[4].value, "redis.service");

	/* The file's host replaces the host name; the order is the defaults' then the file's. */
	assert_int_equal(c->nlabels, 3);
	assert_string_equal(fx_config_label(c, "host"), "box-7");
	assert_string_equal(fx_config_label(c, "env"), "prod");
	assert_string_equal(fx_config_label(c, "region"), "eu-west");
	assert_null(fx_config_label(c, "tier"));

	assert_string_equal(c->output.directory, "/srv/fxagent/out");
	assert_int_equal(c->symbolization.ndebug_dirs, 2);
	assert_string_equal(c->symbolization.debug_dirs[0], "/usr/lib/debug");
	assert_string_equal(c->symbolization.debug_dirs[1], "/opt/debug");
	assert_false(c->symbolization.demangle);
	assert_true(c->symbolization.check_names);
	assert_int_equal(c->log.level, FX_LOG_DEBUG);

	/* The template is kept as written: the uploader expands it per chunk. */
	assert_string_equal(c->upload.url,
			    "HTTPS://collector.example:8443/v1/{host}/{target}/{start}-{end}-{seq}-"
			    "{id}?a={{b}");
	assert_true(c->upload.put);
	assert_int_equal(c->upload.nheaders, 2);
	assert_string_equal(c->upload.headers[0].key, "X-Team");
	assert_string_equal(c->upload.headers[0].value, "perf");
	assert_string_equal(c->upload.headers[1].key, "x-scope-orgid");
	assert_string_equal(c->upload.headers[1].value, "tenant 1");
	assert_string_equal(c->upload.bearer_token_file, "/etc/fxagent/token");
	assert_string_equal(c->upload.ca_file, "/etc/fxagent/ca.pem");
	assert_string_equal(c->upload.cert_file, "/etc/fxagent/client.pem");
	assert_string_equal(c->upload.key_file, "/etc/fxagent/client.key");
	assert_true(c->upload.insecure_skip_verify);
	assert_int_equal(c->upload.connect_timeout_ms, 500);
	/* A plain number is seconds. */
	assert_int_equal(c->upload.timeout_ms, 2000);
	assert_int_equal(c->upload.initial_backoff_ms, 250);
	assert_int_equal(c->upload.max_backoff_ms, 3600000);
	assert_string_equal(c->spool.directory, "/srv/fxagent/spool");
	assert_int_equal(c->spool.max_bytes, 3ull << 30);
	assert_int_equal(c->spool.max_age_s, 36 * 3600);
	assert_string_equal(c->metrics.textfile, "/var/lib/node-exporter/fxagent.prom");
	assert_int_equal(c->sampling.ring_bytes, 64 << 10);
	assert_int_equal(c->symbolization.max_memory, 8 << 20);
	/* One space-separated list, as libdebuginfod takes DEBUGINFOD_URLS. */
	assert_string_equal(c->symbolization.debuginfod_urls,
			    "http://debuginfod.lan:8002 https://debuginfod.example/x");
	assert_string_equal(c->symbolization.debuginfod_cache, "/srv/fxagent/debuginfod");
	assert_int_equal(c->symbolization.debuginfod_cache_max, 512 << 20);
	assert_int_equal(c->symbolization.debuginfod_timeout_ms, 2500);
	assert_int_equal(c->symbolization.debuginfod_budget_ms, 60000);
	assert_int_equal(c->symbolization.debuginfod_retry_s, 3600);
}

static void check_no_debuginfod(const struct fx_config *c)
{
	/* [] is "none", not "those of the environment" (NULL). */
	assert_non_null(c->symbolization.debuginfod_urls);
	assert_string_equal(c->symbolization.debuginfod_urls, "");
}

static void check_unwind_libdwfl(const struct fx_config *c)
{
	/* libdwfl and check are DWARF unwinding by another engine. */
	assert_true(c->sampling.dwarf);
	assert_int_equal(c->sampling.dwarf_engine, FX_DWUNWIND_LIBDWFL);
}

static void check_unwind_check(const struct fx_config *c)
{
	assert_true(c->sampling.dwarf);
	assert_int_equal(c->sampling.dwarf_engine, FX_DWUNWIND_CHECK);
}

static void check_low_edges(const struct fx_config *c)
{
	assert_int_equal(c->upload.connect_timeout_ms, 100);
	assert_int_equal(c->upload.timeout_ms, 1000);
	assert_int_equal(c->upload.initial_backoff_ms, 100);
	assert_int_equal(c->upload.max_backoff_ms, 100);
	assert_int_equal(c->spool.max_bytes, 1 << 20);
	assert_int_equal(c->spool.max_age_s, 0);
}

static void check_high_edges(const struct fx_config *c)
{
	assert_int_equal(c->upload.connect_timeout_ms, 600000);
	assert_int_equal(c->upload.timeout_ms, 3600000);
	assert_int_equal(c->upload.initial_backoff_ms, 3600000);
	assert_int_equal(c->upload.max_backoff_ms, 86400000);
	assert_int_equal(c->spool.max_bytes, 1ull << 40);
	assert_int_equal(c->spool.max_age_s, 365 * 86400);
}

static void check_units_mixed(const struct fx_config *c)
{
	assert_int_equal(c->upload.connect_timeout_ms, 90000);
	assert_int_equal(c->upload.timeout_ms, 120000);
	assert_int_equal(c->upload.initial_backoff_ms, 1500);
	assert_int_equal(c->upload.max_backoff_ms, 86400000);
	assert_int_equal(c->spool.max_bytes, 2 << 20);
	assert_int_equal(c->spool.max_age_s, 2);
}

static void check_file_url(const struct fx_config *c)
{
	assert_string_equal(c->upload.url, "file:///srv/collector/{target}/{id}.json.gz");
	assert_false(c->upload.put);
	assert_int_equal(c->upload.nheaders, 0);
	assert_null(c->upload.bearer_token_file);
	assert_null(c->upload.ca_file);
	assert_null(c->upload.cert_file);
	assert_null(c->upload.key_file);
}

static void check_window_5(const struct fx_config *c)
{
	assert_int_equal(c->window.seconds, 5);
	assert_int_equal(c->window.max_stacks, 200000);
	assert_false(c->window.reuse_threads);
	assert_int_equal(c->sampling.frequency, 99);
}

static void check_no_debug_dirs(const struct fx_config *c)
{
	assert_int_equal(c->symbolization.ndebug_dirs, 0);
	assert_true(c->symbolization.demangle);
	assert_false(c->symbolization.check_names); /* off unless asked for */
}

static void check_units(const struct fx_config *c)
{
	assert_int_equal(c->ntargets, 3);
	assert_string_equal(c->targets[0].value, "getty@tty1.service");
	assert_string_equal(c->targets[1].value, "user.slice");
	assert_string_equal(c->targets[2].value, "my.app.service");
}

static void check_edges(const struct fx_config *c)
{
	assert_int_equal(c->sampling.frequency, 10000);
	assert_int_equal(c->sampling.stack_bytes, 32768);
	assert_int_equal(c->window.seconds, 1);
	assert_int_equal(c->window.max_stacks, 10000000);
	assert_int_equal(c->ntargets, 1);
	assert_int_equal(c->targets[0].pid, 4194304);
	/* The limit is in bytes and counts a multi-byte character as its bytes. */
	assert_int_equal(strlen(fx_config_label(c, "k")), 256);
}

/* @head, then @n copies of @item with each '#' replaced by the copy's index, then @tail. */
static char *repeat(const char *head, const char *item, unsigned n, const char *tail)
{
	size_t cap = strlen(head) + strlen(tail) + (size_t)n * strlen(item) * 8 + 1;
	char *s = malloc(cap);
	const char *p;
	size_t o;
	unsigned i;

	assert_non_null(s);
	o = (size_t)snprintf(s, cap, "%s", head);
	for (i = 0; i < n; i++) {
		for (p = item; *p; p++) {
			if (*p == '#')
				o += (size_t)snprintf(s + o, cap - o, "%u", i);
			else
				s[o++] = *p;
		}
	}
	snprintf(s + o, cap - o, "%s", tail);
	return s;
}

static char *gen_33_labels(void)
{
	return repeat("labels:\n  host: h\n", "  k#: v#\n", 32, "");
}

static char *gen_32_labels_no_host(void)
{
	return repeat("labels:\n", "  k#: v#\n", 32, "");
}

static char *gen_32_target_labels(void)
{
	return repeat("targets:\n  - name: t\n    pid: 1\n    labels:\n", "      k#: v#\n", 32, "");
}

static void check_32_target_labels(const struct fx_config *c)
{
	assert_int_equal(c->targets[0].nlabels, 32);
	assert_string_equal(c->targets[0].labels[31].key, "k31");
	/* The host label is the chunk's, not the target's. */
	assert_int_equal(c->nlabels, 1);
}

static char *gen_33_target_labels(void)
{
	return repeat("targets:\n  - name: t\n    pid: 1\n    labels:\n", "      k#: v#\n", 33, "");
}

static char *gen_256_targets(void)
{
	return repeat("targets:\n", "  - {name: t#, pid: 1#}\n", 256, "");
}

static void check_256_targets(const struct fx_config *c)
{
	assert_int_equal(c->ntargets, 256);
	assert_string_equal(c->targets[255].name, "t255");
	assert_int_equal(c->targets[255].pid, 1255);
}

static char *gen_257_targets(void)
{
	return repeat("targets:\n", "  - {name: t#, pid: 1#}\n", 257, "");
}

static char *gen_17_debug_dirs(void)
{
	return repeat("symbolization:\n  debug_dirs:\n", "    - /d#/x#\n", 17, "");
}

static char *gen_33_headers(void)
{
	return repeat("upload:\n  headers:\n", "    H#: v\n", 33, "");
}

static char *gen_long_header(void)
{
	return repeat("upload:\n  headers:\n    X-Long: ", "a", 257, "\n");
}

static char *gen_deep(void)
{
	return repeat("a: ", "[", 70, "");
}

static char *gen_many_nodes(void)
{
	return repeat("targets: [", "1,", 70000, "]\n");
}

static char *gen_long_value(void)
{
	/* 257 bytes; the message cuts it after 47, not inside the 24th character. */
	return repeat("labels:\n  k: \"x", "\xc3\xa9", 128, "\"\n");
}

/* Unit names at systemd's limit of 255 bytes: 247 take ".service" and fit,
 * 248 would not; a name with its own suffix may use all 255. */
static char *gen_unit_247(void)
{
	char *a = repeat("", "x", 247, ""), *b = repeat("", "y", 249, ".slice"), *s;
	size_t cap = strlen(a) + strlen(b) + 128;

	s = malloc(cap);
	assert_non_null(s);
	snprintf(s, cap,
		 "targets:\n  - {name: a, systemd_unit: %s}\n  - {name: b, systemd_unit: %s}\n", a,
		 b);
	free(a);
	free(b);
	return s;
}

static char *gen_unit_248(void)
{
	return repeat("targets:\n  - {name: a, systemd_unit: ", "x", 248, "}\n");
}

static void check_unit_247(const struct fx_config *c)
{
	assert_int_equal(c->ntargets, 2);
	assert_int_equal(strlen(c->targets[0].value), 255);
	assert_string_equal(c->targets[0].value + 247, ".service");
	assert_int_equal(strlen(c->targets[1].value), 255);
}

static char *gen_billion_laughs(void)
{
	return repeat("a: &a [x, x, x, x, x, x, x, x, x, x]\n", "l#: &l# [*a, *a, *a, *a, *a]\n", 9,
		      "targets: [*l8, *l8, *l8, *l8, *l8, *l8, *l8, *l8]\n");
}

/* Four two-byte characters (é), and 70 digits: for byte limits. */
#define E4  "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
#define D70 "0123456789012345678901234567890123456789012345678901234567890123456789"

static void check_s3(const struct fx_config *c)
{
	assert_null(c->upload.url);
	assert_true(fx_config_uploads(c));
	assert_string_equal(c->upload.s3.bucket, "my.bucket-1");
	assert_string_equal(c->upload.s3.region, "eu-west-1");
	/* The '/' after the host is dropped: URLs are made with one. */
	assert_string_equal(c->upload.s3.endpoint, "http://127.0.0.1:7480");
	assert_string_equal(c->upload.s3.prefix, "fleet/prod-");
	assert_true(c->upload.s3.path_style);
	assert_string_equal(c->upload.s3.access_key_id_file, "/etc/fxagent/s3-id");
	assert_string_equal(c->upload.s3.secret_access_key_file, "/etc/fxagent/s3-secret");
	assert_string_equal(c->upload.s3.storage_class, "STANDARD_IA");
}

static void check_off_cpu(const struct fx_config *c)
{
	assert_true(c->sampling.off_cpu.enabled);
	assert_int_equal(c->sampling.off_cpu.min_block_ms, 0);
	assert_int_equal(c->sampling.off_cpu.budget, 500);
	assert_int_equal(c->ntargets, 2);
	/* a target's own setting wins; without one, the section's */
	assert_false(fx_config_off_cpu(c, &c->targets[0]));
	assert_true(fx_config_off_cpu(c, &c->targets[1]));
	assert_true(fx_config_off_cpu(c, NULL));
	assert_true(fx_config_any_off_cpu(c));
}

static void check_off_cpu_one_target(const struct fx_config *c)
{
	/* off by default, on for one target: loaded for it alone */
	assert_false(c->sampling.off_cpu.enabled);
	assert_false(fx_config_off_cpu(c, &c->targets[0]));
	assert_true(fx_config_off_cpu(c, &c->targets[1]));
	assert_true(fx_config_any_off_cpu(c));
}

static const struct tcase cases[] = {
	{ "off-CPU settings, and a target's own",
	  "sampling:\n  off_cpu: {enabled: true, min_block: 0, budget: 500}\ntargets:\n"
	  "  - {name: a, pid: 1, off_cpu: false}\n  - {name: b, pid: 2}\n",
	  0, NULL, NULL, 0, NULL, check_off_cpu },
	{ "off-CPU for one target only",
	  "targets:\n  - {name: a, pid: 1}\n  - {name: b, cgroup: /b, off_cpu: true}\n", 0, NULL,
	  NULL, 0, NULL, check_off_cpu_one_target },
	{ "an off-CPU budget of 0", "sampling:\n  off_cpu: {budget: 0}\n", 0, NULL, NULL, -EINVAL,
	  ":2:21: sampling.off_cpu.budget: expected a whole number from 1 to 100000, got 0", NULL },
	{ "an off-CPU min_block over a second", "sampling:\n  off_cpu:\n    min_block: 2s\n", 0,
	  NULL, NULL, -EINVAL,
	  ":3:16: sampling.off_cpu.min_block: expected a duration from 1ms to 1s (a whole number "
	  "of "
	  "seconds, or with ms, s, m, h or d), got 2s",
	  NULL },
	{ "a target's off_cpu not a boolean", "targets:\n  - {name: a, pid: 1, off_cpu: yes}\n", 0,
	  NULL, NULL, -EINVAL, ":2:32: targets[0].off_cpu: expected true or false, got yes", NULL },
	/* Valid files. */
	{ "empty file gives the defaults", "", 0, NULL, NULL, 0, NULL, check_defaults },
	{ "comments only give the defaults", "# nothing\n\n   # here\n", 0, NULL, NULL, 0, NULL,
	  check_defaults },
	{ "an empty document gives the defaults", "---\n...\n", 0, NULL, NULL, 0, NULL,
	  check_defaults },
	{ "sections with every key commented out count as absent",
	  "sampling:\nwindow: ~\ntargets:\nlabels:\nsymbolization:\n  debug_dirs:\nupload:\n  "
	  "retry:\nspool:\n",
	  0, NULL, NULL, 0, NULL, check_defaults },
	{ "the shipped config/fxagent.yaml gives the defaults", NULL, 0, NULL, SHIPPED, 0, NULL,
	  check_defaults },
	{ "a file setting every key", NULL, 0, NULL, CFG_DATA "full.yaml", 0, NULL, check_full },
	{ "flow style, quoted keys and an unused anchor",
	  "{\"window\": &w {seconds: 5}, 'sampling': {}}", 0, NULL, NULL, 0, NULL, check_window_5 },
	{ "an empty debug_dirs list means none", "symbolization:\n  debug_dirs: []\n", 0, NULL,
	  NULL, 0, NULL, check_no_debug_dirs },
	{ "an empty debuginfod_urls list means no server",
	  "symbolization:\n  debuginfod_urls: []\n", 0, NULL, NULL, 0, NULL, check_no_debuginfod },
	{ "unwind: libdwfl", "sampling: {unwind: libdwfl}\n", 0, NULL, NULL, 0, NULL,
	  check_unwind_libdwfl },
	{ "JIT names off", "symbolization: {jit: false}\n", 0, NULL, NULL, 0, NULL, check_jit_off },
	{ "JVMs not asked for perf maps", "symbolization: {jvm_perfmap: false}\n", 0, NULL, NULL, 0,
	  NULL, check_jvm_perfmap_off },
	{ "jvm_perfmap not a boolean", "symbolization: {jvm_perfmap: 1}\n", 0, NULL, NULL, -EINVAL,
	  ":1:30: symbolization.jvm_perfmap: expected true or false, got 1", NULL },
	{ "unwind: check", "sampling: {unwind: check}\n", 0, NULL, NULL, 0, NULL,
	  check_unwind_check },
	{ "unit names: templates, other types, the .service shorthand",
	  "targets:\n  - {name: a, systemd_unit: getty@tty1.service}\n"
	  "  - {name: b, systemd_unit: user.slice}\n  - {name: c, systemd_unit: my.app}\n",
	  0, NULL, NULL, 0, NULL, check_units },
	{ "a label value of 257 bytes", NULL, 0, gen_long_value, NULL, -EINVAL,
	  ":2:6: labels.k: expected a string of at most 256 bytes, got \"x" E4 E4 E4 E4 E4
	  "\xc3\xa9\xc3\xa9\xc3\xa9...\"",
	  NULL },
	{ "range edges",
	  "sampling: {frequency: 10000, stack_bytes: 32768}\n"
	  "window: {seconds: 1, max_stacks: 10000000}\n"
	  "targets: [{name: p, pid: 4194304}]\n"
	  "labels: {k: \"" E4 E4 E4 E4 D70 D70 D70 "01234567890123\"}\n",
	  0, NULL, NULL, 0, NULL, check_edges },
	{ "32 labels on a target", NULL, 0, gen_32_target_labels, NULL, 0, NULL,
	  check_32_target_labels },
	{ "256 targets", NULL, 0, gen_256_targets, NULL, 0, NULL, check_256_targets },

	/* YAML itself. */
	{ "YAML syntax error", "sampling: [1, 2\n", 0, NULL, NULL, -EINVAL,
	  ":2:1: YAML syntax error: did not find expected ',' or ']' (while parsing a flow "
	  "sequence at line 1, column 11)",
	  NULL },
	{ "YAML syntax error in a file (bad indentation)", NULL, 0, NULL,
	  CFG_DATA "bad-indent.yaml", -EINVAL,
	  ":3:2: YAML syntax error: did not find expected key (while parsing a block mapping at "
	  "line 1, column 1)",
	  NULL },
	{ "a NUL byte in the file", "window:\n  seconds: 5\0\n", 22, NULL, NULL, -EINVAL,
	  ":2:13: YAML syntax error: control characters are not allowed (byte 0x00)", NULL },
	{ "invalid UTF-8",
	  "labels:\n  env: pr\xff"
	  "od\n",
	  0, NULL, NULL, -EINVAL,
	  ":2:10: YAML syntax error: invalid leading UTF-8 octet (byte 0xff)", NULL },
	{ "two documents", "window: {seconds: 5}\n---\nwindow: {seconds: 6}\n", 0, NULL, NULL,
	  -EINVAL, ":2:1: expected a single YAML document, got a second one", NULL },
	{ "nesting too deep", NULL, 0, gen_deep, NULL, -EINVAL,
	  ":1:67: expected at most 64 levels of nesting, got more", NULL },
	{ "too many nodes", NULL, 0, gen_many_nodes, NULL, -EINVAL,
	  ":1:131077: expected at most 65536 YAML nodes, got more", NULL },
	{ "an alias is refused, not expanded", "window: &w {seconds: 5}\nsampling: *w\n", 0, NULL,
	  NULL, -EINVAL,
	  ":2:11: sampling: expected a value, got the alias *w (aliases are not supported, write "
	  "the "
	  "value out)",
	  NULL },
	{ "billion laughs: refused at the first alias looked at", NULL, 0, gen_billion_laughs, NULL,
	  -EINVAL,
	  ":1:1: a: unknown key, expected one of sampling, window, targets, labels, output, "
	  "symbolization, log, upload, spool, metrics",
	  NULL },
	{ "an alias of a whole target",
	  "targets:\n  - &t {name: a, pid: 1, labels: {k: v}}\n  - *t\n", 0, NULL, NULL, -EINVAL,
	  ":3:5: targets[1]: expected a value, got the alias *t (aliases are not supported, write "
	  "the value out)",
	  NULL },
	{ "an alias in a list", "symbolization:\n  debug_dirs: [&d /a, *d]\n", 0, NULL, NULL,
	  -EINVAL,
	  ":2:23: symbolization.debug_dirs[1]: expected a value, got the alias *d (aliases are not "
	  "supported, write the value out)",
	  NULL },
	{ "a tag", "window:\n  seconds: !!int 5\n", 0, NULL, NULL, -EINVAL,
	  ":2:12: window.seconds: expected a value without a YAML tag, got the tag !!int", NULL },

	/* Shape. */
	{ "top level is a list", "- sampling\n- window\n", 0, NULL, NULL, -EINVAL,
	  ":1:1: top level: expected a mapping of sections (sampling, window, ...), got a list",
	  NULL },
	{ "top level is a scalar", "hello\n", 0, NULL, NULL, -EINVAL,
	  ":1:1: top level: expected a mapping of sections (sampling, window, ...), got hello",
	  NULL },
	{ "unknown top-level key", "sampling: {}\nsampler: {}\n", 0, NULL, NULL, -EINVAL,
	  ":2:1: sampler: unknown key, expected one of sampling, window, targets, labels, output, "
	  "symbolization, log, upload, spool, metrics",
	  NULL },
	{ "unknown key in a section", "sampling:\n  freq: 99\n", 0, NULL, NULL, -EINVAL,
	  ":2:3: sampling.freq: unknown key, expected one of frequency, unwind, stack_bytes, "
	  "kernel_stacks, include_idle, ring_size, off_cpu",
	  NULL },
	{ "unknown key in a target", "targets:\n  - name: a\n    pid: 1\n    user: www\n", 0, NULL,
	  NULL, -EINVAL,
	  ":4:5: targets[0].user: unknown key, expected one of name, systemd_unit, cgroup, "
	  "process, "
	  "pid, labels, off_cpu",
	  NULL },
	{ "a section that is not a mapping", "window: 60\n", 0, NULL, NULL, -EINVAL,
	  ":1:9: window: expected a mapping, got 60", NULL },
	{ "a key that is not a scalar", "window:\n  [seconds]: 5\n", 0, NULL, NULL, -EINVAL,
	  ":2:3: window: expected a key name, got a list", NULL },
	{ "a duplicate key", "window:\n  seconds: 5\n  max_stacks: 1000\n  seconds: 6\n", 0, NULL,
	  NULL, -EINVAL, ":4:3: window.seconds: duplicate key (first at line 2, column 3)", NULL },
	{ "a duplicate section", "log: {level: info}\nwindow: {}\nlog: {level: debug}\n", 0, NULL,
	  NULL, -EINVAL, ":3:1: log: duplicate key (first at line 1, column 1)", NULL },
	{ "a duplicate label", "labels:\n  env: prod\n  env: dev\n", 0, NULL, NULL, -EINVAL,
	  ":3:3: labels.env: duplicate key (first at line 2, column 3)", NULL },

	/* Numbers. */
	{ "a list where a number goes", "window:\n  seconds: [1, 2]\n", 0, NULL, NULL, -EINVAL,
	  ":2:12: window.seconds: expected a whole number from 1 to 3600, got a list", NULL },
	{ "zero seconds", "window:\n  seconds: 0\n", 0, NULL, NULL, -EINVAL,
	  ":2:12: window.seconds: expected a whole number from 1 to 3600, got 0", NULL },
	{ "frequency above the range", "sampling: {frequency: 10001}\n", 0, NULL, NULL, -EINVAL,
	  ":1:23: sampling.frequency: expected a whole number from 1 to 10000, got 10001", NULL },
	{ "a fraction", "sampling: {frequency: 99.5}\n", 0, NULL, NULL, -EINVAL,
	  ":1:23: sampling.frequency: expected a whole number from 1 to 10000, got 99.5", NULL },
	{ "an exponent", "sampling: {frequency: 1e3}\n", 0, NULL, NULL, -EINVAL,
	  ":1:23: sampling.frequency: expected a whole number from 1 to 10000, got 1e3", NULL },
	{ "a negative number", "sampling: {frequency: -1}\n", 0, NULL, NULL, -EINVAL,
	  ":1:23: sampling.frequency: expected a whole number from 1 to 10000, got -1", NULL },
	{ "a number beyond 64 bits", "window:\n  max_stacks: 99999999999999999999\n", 0, NULL, NULL,
	  -EINVAL,
	  ":2:15: window.max_stacks: expected a whole number from 1000 to 10000000, got "
	  "99999999999999999999",
	  NULL },
	{ "a quoted number", "sampling: {frequency: \"99\"}\n", 0, NULL, NULL, -EINVAL,
	  ":1:23: sampling.frequency: expected a whole number from 1 to 10000, got \"99\"", NULL },
	{ "no value where a number goes", "window:\n  seconds:\n", 0, NULL, NULL, -EINVAL,
	  ":2:3: window.seconds: expected a whole number from 1 to 3600, got nothing", NULL },
	{ "stack_bytes not a multiple of 8", "sampling: {stack_bytes: 1028}\n", 0, NULL, NULL,
	  -EINVAL,
	  ":1:25: sampling.stack_bytes: expected a multiple of 8 from 1024 to 32768, got 1028",
	  NULL },
	{ "stack_bytes below the range", "sampling: {stack_bytes: 1016}\n", 0, NULL, NULL, -EINVAL,
	  ":1:25: sampling.stack_bytes: expected a multiple of 8 from 1024 to 32768, got 1016",
	  NULL },

	/* Booleans and choices. */
	{ "yes is not a boolean", "sampling:\n  kernel_stacks: yes\n", 0, NULL, NULL, -EINVAL,
	  ":2:18: sampling.kernel_stacks: expected true or false, got yes", NULL },
	{ "a quoted boolean", "symbolization: {demangle: 'true'}\n", 0, NULL, NULL, -EINVAL,
	  ":1:27: symbolization.demangle: expected true or false, got \"true\"", NULL },
	{ "an unknown unwinder", "sampling: {unwind: lbr}\n", 0, NULL, NULL, -EINVAL,
	  ":1:20: sampling.unwind: expected dwarf, fp, libdwfl or check, got lbr", NULL },
	{ "an unknown log level", "log:\n  level: verbose\n", 0, NULL, NULL, -EINVAL,
	  ":2:10: log.level: expected one of error, warning, notice, info, debug, got verbose",
	  NULL },

	/* Strings and paths. */
	{ "a relative output directory", "output:\n  directory: chunks\n", 0, NULL, NULL, -EINVAL,
	  ":2:14: output.directory: expected an absolute path, got \"chunks\"", NULL },
	{ "a ring not a power of two", "sampling:\n  ring_size: 96KiB\n", 0, NULL, NULL, -EINVAL,
	  ":2:14: sampling.ring_size: expected 0 (sized for the records) or a power of two from "
	  "4KiB to 64MiB, got 96KiB",
	  NULL },
	{ "a ring under a page", "sampling:\n  ring_size: 2048\n", 0, NULL, NULL, -EINVAL,
	  ":2:14: sampling.ring_size: expected 0 (sized for the records) or a power of two from "
	  "4KiB to 64MiB, got 2048",
	  NULL },
	{ "a relative metrics file", "metrics:\n  textfile: fxagent.prom\n", 0, NULL, NULL, -EINVAL,
	  ":2:13: metrics.textfile: expected an absolute path, got \"fxagent.prom\"", NULL },
	{ "a metrics file node_exporter ignores", "metrics:\n  textfile: /var/lib/x.txt\n", 0, NULL,
	  NULL, -EINVAL,
	  ":2:13: metrics.textfile: expected a file name ending in .prom (node_exporter's "
	  "textfile collector reads only *.prom files), got \"/var/lib/x.txt\"",
	  NULL },
	{ "a metrics file that is only the suffix", "metrics:\n  textfile: /var/lib/.prom\n", 0,
	  NULL, NULL, -EINVAL,
	  ":2:13: metrics.textfile: expected a file name ending in .prom (node_exporter's "
	  "textfile collector reads only *.prom files), got \"/var/lib/.prom\"",
	  NULL },
	{ "window seconds with a leading zero", "window:\n  seconds: 010\n", 0, NULL, NULL, -EINVAL,
	  ":2:12: window.seconds: expected a whole number from 1 to 3600, got 010 (a leading "
	  "zero is octal in YAML 1.1; write 10 or 8)",
	  NULL },
	{ "a duration with a leading zero", "upload:\n  url: http://c/x\n  timeout: 05s\n", 0, NULL,
	  NULL, -EINVAL,
	  ":3:12: upload.timeout: expected a duration from 1s to 1h (a whole number of seconds, "
	  "or with ms, s, m, h or d), got 05s (a leading zero is octal in YAML 1.1; write 5s)",
	  NULL },
	{ "a size with a leading zero", "spool:\n  max_bytes: 0100MiB\n", 0, NULL, NULL, -EINVAL,
	  ":2:14: spool.max_bytes: expected a size from 1MiB to 1TiB (a whole number of bytes, "
	  "or with KiB, MiB, GiB or TiB), got 0100MiB (a leading zero is octal in YAML 1.1; "
	  "write 100MiB or 64MiB)",
	  NULL },
	{ "an unknown metrics key", "metrics:\n  text_file: /x.prom\n", 0, NULL, NULL, -EINVAL,
	  ":2:3: metrics.text_file: unknown key, expected one of textfile", NULL },
	{ "a NUL character in a string", "output:\n  directory: \"/var/\\0/x\"\n", 0, NULL, NULL,
	  -EINVAL,
	  ":2:14: output.directory: expected a string without control characters, got "
	  "\"/var/\\x00/x\" (the control character \\x00 at byte 6)",
	  NULL },
	/* Columns count characters: the é before the tab must not shift it. */
	{ "a tab in the indentation", "labels: {a: \xc3\xa9}\nwindow:\n\tseconds: 5\n", 0, NULL,
	  NULL, -EINVAL,
	  ":3:1: YAML syntax error: found character that cannot start any token (a tab; YAML "
	  "indents with spaces only)",
	  NULL },
	{ "a newline kept by a block scalar", "output:\n  directory: |\n    /srv/x\n", 0, NULL,
	  NULL, -EINVAL,
	  ":2:14: output.directory: expected a string without control characters, got "
	  "\"/srv/x\\x0a\" (the control character \\x0a at byte 7)",
	  NULL },
	{ "a relative debug dir", "symbolization:\n  debug_dirs: [/usr/lib/debug, debug]\n", 0,
	  NULL, NULL, -EINVAL,
	  ":2:32: symbolization.debug_dirs[1]: expected an absolute path, got \"debug\"", NULL },
	{ "a debuginfod URL with a space",
	  "symbolization:\n  debuginfod_urls: [\"http://a/b c\"]\n", 0, NULL, NULL, -EINVAL,
	  ":2:21: symbolization.debuginfod_urls[0]: expected an http:// or https:// URL with a "
	  "host, without spaces (a space is %20), of at most 1024 bytes, got \"http://a/b c\"",
	  NULL },
	{ "a debuginfod URL of another scheme", "symbolization:\n  debuginfod_urls: [ftp://a]\n", 0,
	  NULL, NULL, -EINVAL,
	  ":2:21: symbolization.debuginfod_urls[0]: expected an http:// or https:// URL with a "
	  "host, without spaces (a space is %20), of at most 1024 bytes, got \"ftp://a\"",
	  NULL },
	{ "debuginfod_urls as one string", "symbolization:\n  debuginfod_urls: http://a\n", 0, NULL,
	  NULL, -EINVAL,
	  ":2:20: symbolization.debuginfod_urls: expected a list of http:// or https:// URLs of "
	  "debuginfod servers, got http://a",
	  NULL },
	{ "a debuginfod timeout under a second", "symbolization:\n  debuginfod_timeout: 500ms\n", 0,
	  NULL, NULL, -EINVAL,
	  ":2:23: symbolization.debuginfod_timeout: expected a duration from 1s to 10m (a whole "
	  "number of seconds, or with ms, s, m, h or d), got 500ms",
	  NULL },
	{ "debug_dirs not a list", "symbolization:\n  debug_dirs: /usr/lib/debug\n", 0, NULL, NULL,
	  -EINVAL,
	  ":2:15: symbolization.debug_dirs: expected a list of absolute paths, got /usr/lib/debug",
	  NULL },
	{ "17 debug dirs", NULL, 0, gen_17_debug_dirs, NULL, -EINVAL,
	  ":19:7: symbolization.debug_dirs: expected at most 16 directories, got 17", NULL },
	{ "a bad label name", "labels:\n  \"my label\": x\n", 0, NULL, NULL, -EINVAL,
	  ":2:3: labels: expected a label name of 1 to 64 characters from A-Z a-z 0-9 _ . -, got "
	  "\"my label\"",
	  NULL },
	/* Control characters: the message says so and where, not that the
	 * value is too long. */
	{ "a label value with a tab", "labels:\n  env: \"a\\tb\"\n", 0, NULL, NULL, -EINVAL,
	  ":2:8: labels.env: expected a string without control characters, got \"a\\x09b\" (the "
	  "control character \\x09 at byte 2)",
	  NULL },
	{ "a target label value with \\x01",
	  "targets:\n  - name: web\n    pid: 1\n    labels: {tier: \"front\\x01end\"}\n", 0, NULL,
	  NULL, -EINVAL,
	  ":4:20: targets[0].labels.tier: expected a string without control characters, got "
	  "\"front\\x01end\" (the control character \\x01 at byte 6)",
	  NULL },
	{ "a label value with a C1 control (NEL)", "labels:\n  env: \"a\\x85b\"\n", 0, NULL, NULL,
	  -EINVAL,
	  ":2:8: labels.env: expected a string without control characters, got \"a\\u0085b\" (the "
	  "control character \\u0085 at byte 2)",
	  NULL },
	{ "a label value with DEL", "labels:\n  env: \"ab\\x7f\"\n", 0, NULL, NULL, -EINVAL,
	  ":2:8: labels.env: expected a string without control characters, got \"ab\\x7f\" (the "
	  "control character \\x7f at byte 3)",
	  NULL },
	{ "a label value that is a mapping", "labels:\n  env: {a: b}\n", 0, NULL, NULL, -EINVAL,
	  ":2:8: labels.env: expected a string of at most 256 bytes, got a mapping", NULL },
	{ "33 labels with host", NULL, 0, gen_33_labels, NULL, -EINVAL,
	  ":34:3: labels.k31: expected at most 32 labels (the host label included), got more",
	  NULL },
	{ "32 labels besides host", NULL, 0, gen_32_labels_no_host, NULL, -EINVAL,
	  ":33:3: labels.k31: expected at most 32 labels (the host label included), got more",
	  NULL },
	{ "33 labels on a target", NULL, 0, gen_33_target_labels, NULL, -EINVAL,
	  ":37:7: targets[0].labels.k32: expected at most 32 labels, got more", NULL },

	/* Targets. */
	{ "targets not a list", "targets:\n  name: web\n", 0, NULL, NULL, -EINVAL,
	  ":2:3: targets: expected a list of targets, got a mapping", NULL },
	{ "257 targets", NULL, 0, gen_257_targets, NULL, -EINVAL,
	  ":258:5: targets: expected at most 256 targets, got 257", NULL },
	{ "a target without a name", "targets:\n  - pid: 1\n", 0, NULL, NULL, -EINVAL,
	  ":2:5: targets[0]: expected a name, got none", NULL },
	{ "a target that is a string", "targets:\n  - web\n", 0, NULL, NULL, -EINVAL,
	  ":2:5: targets[0]: expected a mapping with a name and one of systemd_unit, cgroup, "
	  "process, pid, got web",
	  NULL },
	{ "a bad target name", "targets:\n  - name: web server\n    pid: 1\n", 0, NULL, NULL,
	  -EINVAL,
	  ":2:11: targets[0].name: expected a name of 1 to 64 characters from A-Z a-z 0-9 _ . -, "
	  "got "
	  "\"web server\"",
	  NULL },
	{ "a target name of 65 characters",
	  "targets:\n  - name: "
	  "a1234567890123456789012345678901234567890123456789012345678901234\n    pid: 1\n",
	  0, NULL, NULL, -EINVAL,
	  ":2:11: targets[0].name: expected a name of 1 to 64 characters from A-Z a-z 0-9 _ . -, "
	  "got "
	  "\"a12345678901234567890123456789012345678901234567...\"",
	  NULL },
	{ "a duplicate target name", NULL, 0, NULL, CFG_DATA "bad-duplicate-name.yaml", -EINVAL,
	  ":6:11: targets[2].name: expected a name no other target has, got \"web\" (also the name "
	  "of targets[0] at line 2)",
	  NULL },
	{ "a target without a selector", "targets:\n  - name: web\n    labels: {a: b}\n", 0, NULL,
	  NULL, -EINVAL,
	  ":2:5: targets[0]: expected one of systemd_unit, cgroup, process or pid, got none",
	  NULL },
	{ "a target with two selectors", NULL, 0, NULL, CFG_DATA "bad-two-selectors.yaml", -EINVAL,
	  ":4:5: targets[0]: expected only one of systemd_unit, cgroup, process or pid, got both "
	  "cgroup and process",
	  NULL },
	{ "pid 0 in a file", NULL, 0, NULL, CFG_DATA "bad-pid.yaml", -EINVAL,
	  ":9:10: targets[1].pid: expected a whole number from 1 to 4194304, got 0", NULL },
	{ "a pid that is a name", "targets:\n  - {name: a, pid: nginx}\n", 0, NULL, NULL, -EINVAL,
	  ":2:20: targets[0].pid: expected a whole number from 1 to 4194304, got nginx", NULL },
	{ "a relative cgroup", "targets:\n  - {name: a, cgroup: system.slice}\n", 0, NULL, NULL,
	  -EINVAL,
	  ":2:23: targets[0].cgroup: expected an absolute cgroup path without .. such as "
	  "/system.slice/nginx.service, got \"system.slice\"",
	  NULL },
	{ "a cgroup escaping with ..", "targets:\n  - {name: a, cgroup: /system.slice/../..}\n", 0,
	  NULL, NULL, -EINVAL,
	  ":2:23: targets[0].cgroup: expected an absolute cgroup path without .. such as "
	  "/system.slice/nginx.service, got \"/system.slice/../..\"",
	  NULL },
	{ "a process name with a slash", "targets:\n  - {name: a, process: /usr/bin/foo}\n", 0,
	  NULL, NULL, -EINVAL,
	  ":2:24: targets[0].process: expected a process name (comm or executable base name, 1 to "
	  "255 bytes, no /), got \"/usr/bin/foo\"",
	  NULL },
	{ "unit names of 255 bytes, one with .service added", NULL, 0, gen_unit_247, NULL, 0, NULL,
	  check_unit_247 },
	{ "a unit name that .service would take past 255 bytes", NULL, 0, gen_unit_248, NULL,
	  -EINVAL,
	  ":2:29: targets[0].systemd_unit: expected a systemd unit name such as nginx.service, got "
	  "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\"",
	  NULL },
	{ "a unit name starting with a dot", "targets:\n  - {name: a, systemd_unit: .service}\n", 0,
	  NULL, NULL, -EINVAL,
	  ":2:29: targets[0].systemd_unit: expected a systemd unit name such as nginx.service, got "
	  "\".service\"",
	  NULL },
	{ "a bad unit name", "targets:\n  - {name: a, systemd_unit: \"ng inx\"}\n", 0, NULL, NULL,
	  -EINVAL,
	  ":2:29: targets[0].systemd_unit: expected a systemd unit name such as nginx.service, got "
	  "\"ng inx\"",
	  NULL },

	/* Upload and spool: valid values. */
	{ "upload and spool at the low ends of their ranges",
	  "upload:\n  connect_timeout: 100ms\n  timeout: 1s\n"
	  "  retry: {initial_backoff: 100ms, max_backoff: 100ms}\n"
	  "spool: {max_bytes: 1048576, max_age: 0}\n",
	  0, NULL, NULL, 0, NULL, check_low_edges },
	{ "upload and spool at the high ends of their ranges",
	  "upload:\n  connect_timeout: 10m\n  timeout: 1h\n"
	  "  retry: {initial_backoff: 1h, max_backoff: 24h}\n"
	  "spool: {max_bytes: 1TiB, max_age: 365d}\n",
	  0, NULL, NULL, 0, NULL, check_high_edges },
	{ "durations and sizes: plain seconds, quoted units, every unit",
	  "upload: {connect_timeout: 90, timeout: '2m', retry: {initial_backoff: 1500ms, "
	  "max_backoff: 1d}}\nspool: {max_bytes: \"2048KiB\", max_age: 2000ms}\n",
	  0, NULL, NULL, 0, NULL, check_units_mixed },
	{ "a file:// URL; null options mean none",
	  "upload:\n  url: file:///srv/collector/{target}/{id}.json.gz\n  method: POST\n"
	  "  headers:\n  bearer_token_file: ~\n  ca_file:\n  cert_file: null\n  key_file:\n",
	  0, NULL, NULL, 0, NULL, check_file_url },
	{ "a null url means no upload", "upload: {url: null}\n", 0, NULL, NULL, 0, NULL,
	  check_defaults },
	{ "upload.s3 with every key",
	  "upload:\n  method: POST\n  s3:\n    bucket: my.bucket-1\n    region: eu-west-1\n"
	  "    endpoint: http://127.0.0.1:7480/\n    prefix: fleet/prod-\n    path_style: true\n"
	  "    access_key_id_file: /etc/fxagent/s3-id\n"
	  "    secret_access_key_file: /etc/fxagent/s3-secret\n    storage_class: STANDARD_IA\n",
	  0, NULL, NULL, 0, NULL, check_s3 },
	{ "upload.s3 without a region", "upload:\n  s3: {bucket: abc}\n", 0, NULL, NULL, -EINVAL,
	  ":2:7: upload.s3: expected region, the bucket's region (us-east-1 for most stores but "
	  "AWS)",
	  NULL },
	{ "upload.s3 with a bucket S3 refuses", "upload:\n  s3: {bucket: My_Bucket, region: x}\n",
	  0, NULL, NULL, -EINVAL,
	  ":2:16: upload.s3.bucket: expected a bucket's name: 3 to 63 of a-z 0-9 . -, a letter or "
	  "digit first, got \"My_Bucket\"",
	  NULL },
	{ "upload.s3 with an endpoint that has a path",
	  "upload:\n  s3: {bucket: abc, region: x, endpoint: 'https://h.example/b'}\n", 0, NULL,
	  NULL, -EINVAL,
	  ":2:42: upload.s3.endpoint: expected an http:// or https:// URL of a host, such as "
	  "https://s3.example.com or http://127.0.0.1:7480 (no path), got \"https://h.example/b\"",
	  NULL },
	{ "upload.s3 with one credentials file",
	  "upload:\n  s3: {bucket: abc, region: x, access_key_id_file: /k}\n", 0, NULL, NULL,
	  -EINVAL,
	  ":2:7: upload.s3: expected both access_key_id_file and secret_access_key_file, or "
	  "neither (then AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the environment)",
	  NULL },
	{ "upload.s3 with url",
	  "upload:\n  url: https://c.example/x\n  s3: {bucket: abc, region: x}\n", 0, NULL, NULL,
	  -EINVAL,
	  ":3:3: upload: expected one of url and s3, got s3 with url (S3 requests are signed "
	  "with the s3 credentials)",
	  NULL },
	{ "upload.s3 with a prefix starting with /",
	  "upload:\n  s3: {bucket: abc, region: x, prefix: /fleet}\n", 0, NULL, NULL, -EINVAL,
	  ":2:40: upload.s3.prefix: expected a key prefix of up to 512 printable characters, no "
	  "space, not starting with '/' (such as fleet/), got \"/fleet\"",
	  NULL },

	/* upload.url */
	{ "an ftp URL", "upload:\n  url: ftp://collector.example/x\n", 0, NULL, NULL, -EINVAL,
	  ":2:8: upload.url: expected a URL starting with http://, https:// or file://, got "
	  "\"ftp://collector.example/x\"",
	  NULL },
	{ "a URL without a scheme", "upload: {url: collector.example/v1}\n", 0, NULL, NULL, -EINVAL,
	  ":1:15: upload.url: expected a URL starting with http://, https:// or file://, got "
	  "\"collector.example/v1\"",
	  NULL },
	{ "an https URL without a host", "upload: {url: 'https:///v1/{id}'}\n", 0, NULL, NULL,
	  -EINVAL,
	  ":1:15: upload.url: expected a URL starting with http://, https:// or file://, got "
	  "\"https:///v1/{id}\"",
	  NULL },
	{ "a URL with a space", "upload: {url: \"https://c.example/a b\"}\n", 0, NULL, NULL,
	  -EINVAL,
	  ":1:15: upload.url: expected a URL of at most 2048 bytes without spaces (a space is "
	  "%20), "
	  "got \"https://c.example/a b\"",
	  NULL },
	{ "an unknown placeholder", "upload:\n  url: https://c.example/{host}/{hostname}/{id}\n", 0,
	  NULL, NULL, -EINVAL,
	  ":2:8: upload.url: expected placeholders among {host} {target} {start} {end} {seq} {id} "
	  "(\"{{\" for a literal \"{\"), got \"{hostname}\"",
	  NULL },
	{ "a placeholder without its closing brace", "upload: {url: 'https://c.example/{id'}\n", 0,
	  NULL, NULL, -EINVAL,
	  ":1:15: upload.url: expected placeholders among {host} {target} {start} {end} {seq} {id} "
	  "(\"{{\" for a literal \"{\"), got \"{id\" with no closing \"}\"",
	  NULL },
	{ "a url that is a list", "upload:\n  url: [https://c.example/]\n", 0, NULL, NULL, -EINVAL,
	  ":2:8: upload.url: expected a URL starting with http://, https:// or file://, got a list",
	  NULL },

	/* upload.method and upload.headers */
	{ "a lower-case method", "upload: {method: post}\n", 0, NULL, NULL, -EINVAL,
	  ":1:18: upload.method: expected POST or PUT, got post", NULL },
	{ "headers as a list", "upload:\n  headers: [X-Team]\n", 0, NULL, NULL, -EINVAL,
	  ":2:12: upload.headers: expected a mapping of header names to values, got a list", NULL },
	{ "a header name with an underscore", "upload:\n  headers: {X_Team: perf}\n", 0, NULL, NULL,
	  -EINVAL,
	  ":2:13: upload.headers: expected a header name of 1 to 64 characters from A-Z a-z 0-9 -, "
	  "got \"X_Team\"",
	  NULL },
	{ "a header value with CR LF", "upload:\n  headers:\n    X-Team: \"perf\\r\\nX-Evil: 1\"\n",
	  0, NULL, NULL, -EINVAL,
	  ":3:13: upload.headers.X-Team: expected a string without control characters, got "
	  "\"perf\\x0d\\x0aX-Evil: 1\" (the control character \\x0d at byte 5)",
	  NULL },
	{ "a header value that is not ASCII", "upload:\n  headers:\n    X-Team: caf\xc3\xa9\n", 0,
	  NULL, NULL, -EINVAL,
	  ":3:13: upload.headers.X-Team: expected a header value of 1 to 256 printable ASCII "
	  "characters (not only spaces), got \"caf\xc3\xa9\"",
	  NULL },
	{ "a header value of spaces", "upload:\n  headers:\n    X-Team: '  '\n", 0, NULL, NULL,
	  -EINVAL,
	  ":3:13: upload.headers.X-Team: expected a header value of 1 to 256 printable ASCII "
	  "characters (not only spaces), got \"  \"",
	  NULL },
	{ "a header without a value", "upload:\n  headers:\n    X-Team:\n", 0, NULL, NULL, -EINVAL,
	  ":3:5: upload.headers.X-Team: expected a header value of 1 to 256 printable ASCII "
	  "characters (not only spaces), got nothing",
	  NULL },
	{ "a header value of 257 bytes", NULL, 0, gen_long_header, NULL, -EINVAL,
	  ":3:13: upload.headers.X-Long: expected a header value of 1 to 256 printable ASCII "
	  "characters (not only spaces), got "
	  "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\"",
	  NULL },
	{ "a header fxagent sets, in other case",
	  "upload:\n  headers: {content-type: text/plain}\n", 0, NULL, NULL, -EINVAL,
	  ":2:13: upload.headers.content-type: expected a header fxagent does not set itself "
	  "(Authorization, Content-Type, Content-Encoding, Content-Length, Transfer-Encoding, "
	  "Expect, X-Fxagent-*), got \"content-type\"",
	  NULL },
	{ "an Authorization header", "upload:\n  headers:\n    Authorization: Bearer abc\n", 0,
	  NULL, NULL, -EINVAL,
	  ":3:5: upload.headers.Authorization: expected a header fxagent does not set itself "
	  "(Authorization, Content-Type, Content-Encoding, Content-Length, Transfer-Encoding, "
	  "Expect, X-Fxagent-*), got \"Authorization\" (the token goes in "
	  "upload.bearer_token_file)",
	  NULL },
	{ "an X-Fxagent- header", "upload: {headers: {X-FXAGENT-Host: a}}\n", 0, NULL, NULL,
	  -EINVAL,
	  ":1:20: upload.headers.X-FXAGENT-Host: expected a header fxagent does not set itself "
	  "(Authorization, Content-Type, Content-Encoding, Content-Length, Transfer-Encoding, "
	  "Expect, X-Fxagent-*), got \"X-FXAGENT-Host\"",
	  NULL },
	{ "the same header in two cases", "upload:\n  headers:\n    X-Team: a\n    x-team: b\n", 0,
	  NULL, NULL, -EINVAL,
	  ":4:5: upload.headers.x-team: duplicate key (first at line 3, column 5; header names "
	  "ignore case)",
	  NULL },
	{ "33 headers", NULL, 0, gen_33_headers, NULL, -EINVAL,
	  ":35:5: upload.headers.H32: expected at most 32 headers, got more", NULL },

	/* upload's files */
	{ "a relative token file", "upload:\n  bearer_token_file: token\n", 0, NULL, NULL, -EINVAL,
	  ":2:22: upload.bearer_token_file: expected an absolute path, got \"token\"", NULL },
	{ "a relative CA file", "upload: {ca_file: certs/ca.pem}\n", 0, NULL, NULL, -EINVAL,
	  ":1:19: upload.ca_file: expected an absolute path, got \"certs/ca.pem\"", NULL },
	{ "a client certificate without its key", "upload:\n  cert_file: /etc/fxagent/c.pem\n", 0,
	  NULL, NULL, -EINVAL,
	  ":2:3: upload: expected both cert_file and key_file, got only cert_file", NULL },
	{ "a key without its certificate",
	  "upload:\n  key_file: /etc/fxagent/c.key\n  cert_file:\n", 0, NULL, NULL, -EINVAL,
	  ":2:3: upload: expected both cert_file and key_file, got only key_file", NULL },

	/* Durations */
	{ "a fraction of a second", "upload: {connect_timeout: 1.5s}\n", 0, NULL, NULL, -EINVAL,
	  ":1:27: upload.connect_timeout: expected a duration from 100ms to 10m (a whole number of "
	  "seconds, or with ms, s, m, h or d), got 1.5s",
	  NULL },
	{ "a space before the unit", "upload:\n  timeout: 10 s\n", 0, NULL, NULL, -EINVAL,
	  ":2:12: upload.timeout: expected a duration from 1s to 1h (a whole number of seconds, or "
	  "with ms, s, m, h or d), got 10 s",
	  NULL },
	{ "an unknown unit", "upload:\n  timeout: 10sec\n", 0, NULL, NULL, -EINVAL,
	  ":2:12: upload.timeout: expected a duration from 1s to 1h (a whole number of seconds, or "
	  "with ms, s, m, h or d), got 10sec",
	  NULL },
	{ "an upper-case unit", "upload:\n  timeout: 5M\n", 0, NULL, NULL, -EINVAL,
	  ":2:12: upload.timeout: expected a duration from 1s to 1h (a whole number of seconds, or "
	  "with ms, s, m, h or d), got 5M",
	  NULL },
	{ "a quoted number of seconds", "upload:\n  timeout: \"30\"\n", 0, NULL, NULL, -EINVAL,
	  ":2:12: upload.timeout: expected a duration from 1s to 1h (a whole number of seconds, or "
	  "with ms, s, m, h or d), got \"30\"",
	  NULL },
	{ "a duration below its range", "upload: {connect_timeout: 99ms}\n", 0, NULL, NULL, -EINVAL,
	  ":1:27: upload.connect_timeout: expected a duration from 100ms to 10m (a whole number of "
	  "seconds, or with ms, s, m, h or d), got 99ms",
	  NULL },
	{ "a duration above its range", "upload:\n  timeout: 3601\n", 0, NULL, NULL, -EINVAL,
	  ":2:12: upload.timeout: expected a duration from 1s to 1h (a whole number of seconds, or "
	  "with ms, s, m, h or d), got 3601",
	  NULL },
	{ "a duration beyond 64 bits of milliseconds",
	  "upload:\n  retry:\n    max_backoff: 999999999999999999d\n", 0, NULL, NULL, -EINVAL,
	  ":3:18: upload.retry.max_backoff: expected a duration from 100ms to 1d (a whole number "
	  "of "
	  "seconds, or with ms, s, m, h or d), got 999999999999999999d",
	  NULL },
	{ "a timeout shorter than the connect timeout",
	  "upload:\n  connect_timeout: 30s\n  timeout: 20s\n", 0, NULL, NULL, -EINVAL,
	  ":3:12: upload.timeout: expected a duration of at least connect_timeout (30s), got 20s",
	  NULL },
	{ "a connect timeout longer than the default timeout", "upload:\n  connect_timeout: 2m\n",
	  0, NULL, NULL, -EINVAL,
	  ":2:20: upload.connect_timeout: expected a duration of at most timeout (1m), got 2m",
	  NULL },
	{ "max_backoff below initial_backoff",
	  "upload:\n  retry:\n    initial_backoff: 10s\n    max_backoff: 5000ms\n", 0, NULL, NULL,
	  -EINVAL,
	  ":4:18: upload.retry.max_backoff: expected a duration of at least initial_backoff (10s), "
	  "got 5000ms",
	  NULL },
	{ "initial_backoff above the default max_backoff",
	  "upload: {retry: {initial_backoff: 10m}}\n", 0, NULL, NULL, -EINVAL,
	  ":1:35: upload.retry.initial_backoff: expected a duration of at most max_backoff (5m), "
	  "got "
	  "10m",
	  NULL },
	{ "a max_age with a fraction of a second", "spool: {max_age: 1500ms}\n", 0, NULL, NULL,
	  -EINVAL,
	  ":1:18: spool.max_age: expected a duration from 0 (no limit) to 365d in whole seconds (a "
	  "whole number of seconds, or with ms, s, m, h or d), got 1500ms",
	  NULL },
	{ "a max_age above a year", "spool:\n  max_age: 366d\n", 0, NULL, NULL, -EINVAL,
	  ":2:12: spool.max_age: expected a duration from 0 (no limit) to 365d in whole seconds (a "
	  "whole number of seconds, or with ms, s, m, h or d), got 366d",
	  NULL },

	/* Sizes */
	{ "a decimal size unit", "spool: {max_bytes: 256MB}\n", 0, NULL, NULL, -EINVAL,
	  ":1:20: spool.max_bytes: expected a size from 1MiB to 1TiB (a whole number of bytes, or "
	  "with KiB, MiB, GiB or TiB), got 256MB",
	  NULL },
	{ "a fractional size", "spool: {max_bytes: 1.5GiB}\n", 0, NULL, NULL, -EINVAL,
	  ":1:20: spool.max_bytes: expected a size from 1MiB to 1TiB (a whole number of bytes, or "
	  "with KiB, MiB, GiB or TiB), got 1.5GiB",
	  NULL },
	{ "a size below its range", "spool: {max_bytes: 1023KiB}\n", 0, NULL, NULL, -EINVAL,
	  ":1:20: spool.max_bytes: expected a size from 1MiB to 1TiB (a whole number of bytes, or "
	  "with KiB, MiB, GiB or TiB), got 1023KiB",
	  NULL },
	{ "a size above its range", "spool:\n  max_bytes: 1099511627777\n", 0, NULL, NULL, -EINVAL,
	  ":2:14: spool.max_bytes: expected a size from 1MiB to 1TiB (a whole number of bytes, or "
	  "with KiB, MiB, GiB or TiB), got 1099511627777",
	  NULL },

	/* Shape and paths */
	{ "upload not a mapping", "upload: https://c.example/\n", 0, NULL, NULL, -EINVAL,
	  ":1:9: upload: expected a mapping, got https://c.example/", NULL },
	{ "retry not a mapping", "upload: {retry: 3}\n", 0, NULL, NULL, -EINVAL,
	  ":1:17: upload.retry: expected a mapping, got 3", NULL },
	{ "an unknown key under upload", "upload:\n  uri: https://c.example/\n", 0, NULL, NULL,
	  -EINVAL,
	  ":2:3: upload.uri: unknown key, expected one of url, method, headers, bearer_token_file, "
	  "ca_file, cert_file, key_file, insecure_skip_verify, connect_timeout, timeout, retry, s3",
	  NULL },
	{ "an unknown key under upload.retry", "upload:\n  retry:\n    max_retries: 5\n", 0, NULL,
	  NULL, -EINVAL,
	  ":3:5: upload.retry.max_retries: unknown key, expected one of initial_backoff, "
	  "max_backoff",
	  NULL },
	{ "an unknown key under spool", "spool:\n  max_size: 1GiB\n", 0, NULL, NULL, -EINVAL,
	  ":2:3: spool.max_size: unknown key, expected one of directory, max_bytes, max_age",
	  NULL },
	{ "a relative spool directory", "spool:\n  directory: spool\n", 0, NULL, NULL, -EINVAL,
	  ":2:14: spool.directory: expected an absolute path, got \"spool\"", NULL },
	/* Fails after url, headers and files were set: release frees them (ASan). */
	{ "an error after upload strings were set",
	  "upload:\n  url: https://c.example/\n  headers: {X-A: b}\n  ca_file: /ca.pem\n"
	  "  cert_file: /c.pem\n  key_file: /c.key\n  timeout: 0\n",
	  0, NULL, NULL, -EINVAL,
	  ":7:12: upload.timeout: expected a duration from 1s to 1h (a whole number of seconds, or "
	  "with ms, s, m, h or d), got 0",
	  NULL },
};

static void run_case(void **state)
{
	const struct tcase *t = *state;
	struct fx_config *c = new_config();
	char err[1024] = "untouched", want[1024];
	const char *name;
	char *gen = NULL;
	int r;

	if (t->file) {
		name = t->file;
		r = fx_config_load(t->file, c, err, sizeof(err));
	} else {
		const char *text = t->gen ? (gen = t->gen()) : t->text;

		name = "inline.yaml";
		r = fx_config_parse(name, text, t->len ? t->len : strlen(text), c, err,
				    sizeof(err));
	}
	if (t->msg) {
		snprintf(want, sizeof(want), "%s%s", name, t->msg);
		assert_string_equal(err, want);
		assert_int_equal(r, t->rc);
		/* On error the config is released: nothing to free, nothing dangling. */
		assert_null(c->output.directory);
		assert_int_equal(c->ntargets, 0);
		assert_int_equal(c->nlabels, 0);
		assert_null(c->upload.url);
		assert_int_equal(c->upload.nheaders, 0);
		assert_null(c->spool.directory);
	} else {
		if (r)
			fail_msg("%s", err);
		assert_string_equal(err, "");
		t->check(c);
		fx_config_release(c);
	}
	free(gen);
	free(c);
}

static void test_defaults(void **state)
{
	struct fx_config *c = new_config();
	char host[HOST_NAME_MAX + 1] = "";

	(void)state;
	assert_int_equal(fx_config_defaults(c), 0);
	assert_int_equal(c->sampling.frequency, 99);
	assert_true(c->sampling.dwarf);
	assert_int_equal(c->sampling.dwarf_engine, FX_DWUNWIND_TABLES);
	assert_int_equal(c->sampling.stack_bytes, 16384);
	assert_true(c->sampling.kernel_stacks);
	assert_false(c->sampling.include_idle);
	assert_int_equal(c->window.seconds, 60);
	assert_int_equal(c->window.max_stacks, 200000);
	assert_int_equal(c->ntargets, 0);
	assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
	assert_int_equal(c->nlabels, 1);
	assert_string_equal(fx_config_label(c, "host"), host);
	assert_null(fx_config_label(c, "env"));
	assert_string_equal(c->output.directory, "/var/lib/fxagent/chunks");
	assert_int_equal(c->symbolization.ndebug_dirs, 1);
	assert_string_equal(c->symbolization.debug_dirs[0], "/usr/lib/debug");
	assert_true(c->symbolization.demangle);
	assert_int_equal(c->log.level, FX_LOG_NOTICE);
	assert_null(c->upload.url);
	assert_false(c->upload.put);
	assert_int_equal(c->upload.nheaders, 0);
	assert_null(c->upload.bearer_token_file);
	assert_null(c->upload.ca_file);
	assert_null(c->upload.cert_file);
	assert_null(c->upload.key_file);
	assert_false(c->upload.insecure_skip_verify);
	assert_int_equal(c->upload.connect_timeout_ms, 10000);
	assert_int_equal(c->upload.timeout_ms, 60000);
	assert_int_equal(c->upload.initial_backoff_ms, 1000);
	assert_int_equal(c->upload.max_backoff_ms, 300000);
	assert_string_equal(c->spool.directory, "/var/lib/fxagent/spool");
	assert_int_equal(c->spool.max_bytes, 256ull << 20);
	assert_int_equal(c->spool.max_age_s, 7 * 86400);
	assert_null(c->metrics.textfile);
	assert_int_equal(c->sampling.ring_bytes, 0);
	assert_false(c->sampling.off_cpu.enabled);
	assert_int_equal(c->sampling.off_cpu.min_block_ms, FX_MIN_BLOCK_INTERVAL);
	/* the sampling interval: 10.1 ms at 99 Hz */
	assert_int_equal(fx_config_min_block_ns(c), 10101010);
	assert_int_equal(c->sampling.off_cpu.budget, 250);
	assert_int_equal(c->symbolization.max_memory, 32 << 20);
	fx_config_release(c);
	/* Released twice is harmless: release leaves an empty config. */
	fx_config_release(c);
	free(c);
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "re");
	char *s;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	s = calloc(1, (size_t)n + 1);
	assert_non_null(s);
	assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return s;
}

/* The shipped file must mention every key, so that it stays the reference. */
static void test_shipped_documents_every_key(void **state)
{
	static const char *const keys[] = {
		"sampling:",
		"frequency:",
		"unwind:",
		"stack_bytes:",
		"kernel_stacks:",
		"include_idle:",
		"window:",
		"seconds:",
		"max_stacks:",
		"reuse_threads:",
		"targets:",
		"name:",
		"systemd_unit:",
		"cgroup:",
		"process:",
		"pid:",
		"labels:",
		"host:",
		"output:",
		"directory:",
		"symbolization:",
		"debug_dirs:",
		"demangle:",
		"log:",
		"level:",
		"upload:",
		"url:",
		"method:",
		"headers:",
		"bearer_token_file:",
		"ca_file:",
		"cert_file:",
		"key_file:",
		"insecure_skip_verify:",
		"connect_timeout:",
		"timeout:",
		"retry:",
		"initial_backoff:",
		"max_backoff:",
		"s3:",
		"bucket:",
		"region:",
		"endpoint:",
		"prefix:",
		"path_style:",
		"access_key_id_file:",
		"secret_access_key_file:",
		"storage_class:",
		"spool:",
		"max_bytes:",
		"max_age:",
	};
	char *text = read_text(SHIPPED);
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strstr(text, keys[i]))
			fail_msg("config/fxagent.yaml does not mention %s", keys[i]);
	free(text);
}

/* The commented-out targets example of the shipped file, uncommented, loads. */
static void test_shipped_example_targets(void **state)
{
	char *text = read_text(SHIPPED), *p, *line, err[512];
	struct fx_config *c = new_config();
	bool in_example = false;
	size_t nuncommented = 0;
	int r;

	(void)state;
	for (line = text; *line; line = p + 1) {
		p = strchr(line, '\n');
		assert_non_null(p);
		if (in_example && !strncmp(line, "#  ", 3)) {
			*line = ' ';
			nuncommented++;
		} else {
			in_example = !strncmp(line, "targets:", 8);
		}
	}
	assert_true(nuncommented >= 4);
	r = fx_config_parse("example", text, strlen(text), c, err, sizeof(err));
	if (r)
		fail_msg("%s", err);
	assert_int_equal(c->ntargets, 4);
	assert_int_equal(c->targets[0].kind, FX_TARGET_SYSTEMD_UNIT);
	assert_string_equal(c->targets[0].labels[0].value, "frontend");
	assert_int_equal(c->targets[1].kind, FX_TARGET_CGROUP);
	assert_int_equal(c->targets[2].kind, FX_TARGET_PROCESS);
	assert_int_equal(c->targets[3].kind, FX_TARGET_PID);
	fx_config_release(c);
	free(c);
	free(text);
}

/* The same for the commented-out keys of upload: they load as documented. */
static void test_shipped_example_upload(void **state)
{
	char *text = read_text(SHIPPED), *p, *line, err[512];
	struct fx_config *c = new_config();
	bool in_upload = false;
	size_t nuncommented = 0;
	int r;

	(void)state;
	for (line = text; *line; line = p + 1) {
		p = strchr(line, '\n');
		assert_non_null(p);
		if (!strncmp(line, "upload:", 7))
			in_upload = true;
		/* upload.s3 goes in place of url: its own test below */
		else if ((*line != '#' && *line != ' ' && *line != '\n') ||
			 !strncmp(line, "# s3:", 5))
			in_upload = false;
		/* "# key:" uncommented is "  key:", indented as the keys around it. */
		if (in_upload && !strncmp(line, "# ", 2)) {
			*line = ' ';
			nuncommented++;
		}
	}
	assert_true(nuncommented >= 6);
	r = fx_config_parse("example", text, strlen(text), c, err, sizeof(err));
	if (r)
		fail_msg("%s", err);
	assert_string_equal(
		c->upload.url,
		"https://collector.example/v1/chunks/{host}/{target}/{start}-{seq}-{id}");
	assert_int_equal(c->upload.nheaders, 1);
	assert_string_equal(c->upload.headers[0].key, "X-Team");
	assert_string_equal(c->upload.headers[0].value, "perf");
	assert_non_null(c->upload.bearer_token_file);
	assert_non_null(c->upload.ca_file);
	assert_non_null(c->upload.cert_file);
	assert_non_null(c->upload.key_file);
	fx_config_release(c);
	free(c);
	free(text);
}

/* The commented-out upload.s3 of the shipped file, uncommented, loads. */
static void test_shipped_example_s3(void **state)
{
	char *text = read_text(SHIPPED), *p, *line, err[512];
	struct fx_config *c = new_config();
	bool in_s3 = false;
	size_t nuncommented = 0;
	int r;

	(void)state;
	for (line = text; *line; line = p + 1) {
		p = strchr(line, '\n');
		assert_non_null(p);
		if (!strncmp(line, "# s3:", 5))
			in_s3 = true;
		else if (*line != '#')
			in_s3 = false;
		if (in_s3) {
			*line = ' ';
			nuncommented++;
		}
	}
	assert_true(nuncommented >= 8);
	r = fx_config_parse("example", text, strlen(text), c, err, sizeof(err));
	if (r)
		fail_msg("%s", err);
	assert_string_equal(c->upload.s3.bucket, "profiles");
	assert_string_equal(c->upload.s3.region, "eu-west-1");
	assert_string_equal(c->upload.s3.endpoint, "https://s3.example.com");
	assert_string_equal(c->upload.s3.prefix, "fleet/");
	assert_false(c->upload.s3.path_style);
	assert_non_null(c->upload.s3.access_key_id_file);
	assert_non_null(c->upload.s3.secret_access_key_file);
	assert_string_equal(c->upload.s3.storage_class, "STANDARD_IA");
	fx_config_release(c);
	free(c);
	free(text);
}

static void test_load_missing_file(void **state)
{
	struct fx_config *c = new_config();
	char err[256];

	(void)state;
	assert_int_equal(fx_config_load(CFG_DATA "no-such.yaml", c, err, sizeof(err)), -ENOENT);
	assert_string_equal(err, "config file '" CFG_DATA "no-such.yaml' does not exist");
	assert_null(c->output.directory);
	free(c);
}

static void test_load_directory(void **state)
{
	struct fx_config *c = new_config();
	char err[256];

	(void)state;
	assert_int_equal(fx_config_load(FX_TEST_DATA "/config", c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "config file '" FX_TEST_DATA
				 "/config' is a directory, not a regular file");
	free(c);
}

/* A FIFO would block a read until someone writes it: refused at once. */
static void test_load_fifo(void **state)
{
	char dir[] = "/tmp/fxcfg-XXXXXX", path[64], err[256], want[256];
	struct fx_config *c = new_config();

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/fifo.yaml", dir);
	assert_int_equal(mkfifo(path, 0644), 0);
	/* If it blocked, the test would hang: cmocka has no timeout, ctest does. */
	alarm(10);
	assert_int_equal(fx_config_load(path, c, err, sizeof(err)), -EINVAL);
	alarm(0);
	snprintf(want, sizeof(want), "config file '%s' is a FIFO, not a regular file", path);
	assert_string_equal(err, want);
	assert_null(c->output.directory);
	unlink(path);
	rmdir(dir);
	free(c);
}

/* The config steers a root process: writable by others is refused, with the fix. */
static void test_load_writable_by_others(void **state)
{
	char path[] = "/tmp/fxcfg-XXXXXX", err[256], want[256];
	struct fx_config *c = new_config();
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "window:\n  seconds: 5\n", 21), 21);
	close(fd);
	assert_int_equal(chmod(path, 0666), 0);
	assert_int_equal(fx_config_load(path, c, err, sizeof(err)), -EPERM);
	snprintf(want, sizeof(want), "config file '%s' is writable by others (mode 0666, owner ",
		 path);
	assert_memory_equal(err, want, strlen(want));
	snprintf(want, sizeof(want), "); run: chmod go-w '%s'", path);
	assert_string_equal(err + strlen(err) - strlen(want), want);

	assert_int_equal(chmod(path, 0664), 0);
	assert_int_equal(fx_config_load(path, c, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "is writable by its group (mode 0664"));

	/* Readable by all is the usual 0644, and fine. */
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(fx_config_load(path, c, err, sizeof(err)), 0);
	assert_int_equal(c->window.seconds, 5);
	fx_config_release(c);
	unlink(path);
	free(c);
}

static void test_too_large(void **state)
{
	char path[] = "/tmp/fxcfg-XXXXXX", err[256], want[256];
	struct fx_config *c = new_config();
	size_t len = (1u << 20) + 1;
	char *text = malloc(len);
	int fd;

	(void)state;
	assert_non_null(text);
	/* A valid file, only too long: all comment. */
	memset(text, '#', len);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	assert_int_equal(fx_config_load(path, c, err, sizeof(err)), -EFBIG);
	snprintf(want, sizeof(want), "%s: expected a file of at most 1048576 bytes, got more",
		 path);
	assert_string_equal(err, want);

	/* Exactly at the cap is fine. */
	assert_int_equal(truncate(path, (off_t)len - 1), 0);
	assert_int_equal(fx_config_load(path, c, err, sizeof(err)), 0);
	check_defaults(c);
	fx_config_release(c);
	unlink(path);

	assert_int_equal(fx_config_parse("big.yaml", text, len, c, err, sizeof(err)), -EFBIG);
	assert_string_equal(err, "big.yaml: expected a file of at most 1048576 bytes, got 1048577");
	free(text);
	free(c);
}

/* A short error buffer gets a truncated, terminated message; none at all is fine. */
static void test_small_error_buffer(void **state)
{
	struct fx_config *c = new_config();
	char err[16];

	(void)state;
	assert_int_equal(fx_config_parse("x.yaml", "window: 1\n", 10, c, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "x.yaml:1:9: win");
	assert_int_equal(fx_config_parse("x.yaml", "window: 1\n", 10, c, NULL, 0), -EINVAL);
	free(c);
}

int main(void)
{
	enum { NCASES = sizeof(cases) / sizeof(cases[0]), NFIXED = 10 };
	struct CMUnitTest tests[NCASES + NFIXED] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_shipped_documents_every_key),
		cmocka_unit_test(test_shipped_example_targets),
		cmocka_unit_test(test_shipped_example_upload),
		cmocka_unit_test(test_shipped_example_s3),
		cmocka_unit_test(test_load_missing_file),
		cmocka_unit_test(test_load_directory),
		cmocka_unit_test(test_load_fifo),
		cmocka_unit_test(test_load_writable_by_others),
		cmocka_unit_test(test_too_large),
		cmocka_unit_test(test_small_error_buffer),
	};
	size_t i;

	for (i = 0; i < NCASES; i++) {
		tests[NFIXED + i].name = cases[i].name;
		tests[NFIXED + i].test_func = run_case;
		tests[NFIXED + i].initial_state = (void *)&cases[i];
	}
	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
