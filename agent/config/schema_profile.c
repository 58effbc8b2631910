/* SPDX-License-Identifier: MIT */
/* The sections of how profiles are taken and kept: sampling, window, output
 * and symbolization.
 */
#include "config_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* debuginfod servers listed, and the length of one URL. */
#define DEBUGINFOD_URLS_MAX 8
#define DEBUGINFOD_URL_MAX  1024

/* sampling.off_cpu: waits of the sampled threads (offcpu.h). */
static int get_off_cpu(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "enabled", "min_block", "budget" };
	const struct node *v[3], *k[3];
	uint64_t u;
	int r;

	r = cfg_get_map(x, n, "sampling.off_cpu", "a mapping", keys, 3, v, k);
	if (!r && v[0])
		r = cfg_get_bool(x, v[0], "sampling.off_cpu.enabled",
				 &x->c->sampling.off_cpu.enabled);
	if (!r && v[1]) {
		/* 0 is every wait: not the "no limit" a duration's 0 says */
		const struct node *m = v[1];

		if (m->type == N_SCALAR && m->plain && !m->tag && m->len == 1 && m->str[0] == '0')
			u = 0;
		else
			r = cfg_get_duration(x, m, "sampling.off_cpu.min_block", 1, 1000, 1, &u);
		if (!r)
			x->c->sampling.off_cpu.min_block_ms = (unsigned)u;
	}
	if (!r && v[2]) {
		r = cfg_get_uint(x, v[2], "sampling.off_cpu.budget", 1, 100000, 1, &u);
		if (!r)
			x->c->sampling.off_cpu.budget = (unsigned)u;
	}
	return r;
}

int cfg_get_sampling(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "frequency",     "unwind",	     "stack_bytes",
					    "kernel_stacks", "include_idle", "ring_size",
					    "off_cpu" };
	/* "libdwfl" and "check" are dwarf too: the engine (dwunwind.h) */
	static const char *const unwinds[] = { "dwarf", "fp", "libdwfl", "check" };
	const struct node *v[7], *k[7];
	char sub[PATH_BUF];
	uint64_t u;
	size_t idx = 0;
	int r;

	r = cfg_get_map(x, n, "sampling", "a mapping", keys, 7, v, k);
	if (!r && v[0]) {
		r = cfg_get_uint(x, v[0], "sampling.frequency", 1, 10000, 1, &u);
		if (!r)
			x->c->sampling.frequency = (unsigned)u;
	}
	if (!r && v[1]) {
		r = cfg_get_enum(x, v[1], "sampling.unwind", "dwarf, fp, libdwfl or check", unwinds,
				 4, &idx);
		if (!r) {
			x->c->sampling.dwarf = idx != 1;
			x->c->sampling.dwarf_engine = idx < 2 ? 0 : (uint8_t)(idx - 1);
		}
	}
	if (!r && v[2]) {
		r = cfg_get_uint(x, v[2], "sampling.stack_bytes", 1024, 32768, 8, &u);
		if (!r)
			x->c->sampling.stack_bytes = (uint32_t)u;
	}
	if (!r && v[3]) {
		cfg_child_path(sub, "sampling", keys[3]);
		r = cfg_get_bool(x, v[3], sub, &x->c->sampling.kernel_stacks);
	}
	if (!r && v[4]) {
		cfg_child_path(sub, "sampling", keys[4]);
		r = cfg_get_bool(x, v[4], sub, &x->c->sampling.include_idle);
	}
	if (!r && v[5]) {
		/* The kernel maps a power of two of pages per CPU. */
		r = cfg_get_size(x, v[5], "sampling.ring_size", 0, 64ull << 20, &u);
		if (!r && u && (u < 4096 || (u & (u - 1))))
			r = cfg_expected(
				x, v[5], "sampling.ring_size",
				"0 (sized for the records) or a power of two from 4KiB to 64MiB");
		if (!r)
			x->c->sampling.ring_bytes = u;
	}
	if (!r && v[6])
		r = get_off_cpu(x, v[6]);
	return r;
}

int cfg_get_window(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "seconds", "max_stacks", "reuse_threads" };
	const struct node *v[3], *k[3];
	uint64_t u;
	int r;

	r = cfg_get_map(x, n, "window", "a mapping", keys, 3, v, k);
	if (!r && v[0]) {
		r = cfg_get_uint(x, v[0], "window.seconds", 1, 3600, 1, &u);
		if (!r)
			x->c->window.seconds = (unsigned)u;
	}
	if (!r && v[1]) {
		r = cfg_get_uint(x, v[1], "window.max_stacks", 1000, 10000000, 1, &u);
		if (!r)
			x->c->window.max_stacks = (size_t)u;
	}
	if (!r && v[2])
		r = cfg_get_bool(x, v[2], "window.reuse_threads", &x->c->window.reuse_threads);
	return r;
}

int cfg_get_output(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "directory" };
	const struct node *v[1], *k[1];
	int r;

	r = cfg_get_map(x, n, "output", "a mapping", keys, 1, v, k);
	if (!r && v[0])
		r = cfg_get_abs_path(x, v[0], "output.directory", "an absolute path", false,
				     &x->c->output.directory);
	return r;
}

/* symbolization.debuginfod_urls: a list of http(s) URLs, kept as one
 * space-separated string as libdebuginfod takes them; [] turns debuginfod off
 * even where DEBUGINFOD_URLS is set. */
static int get_debuginfod_urls(struct ctx *x, const struct node *l)
{
	const char *what = "a list of http:// or https:// URLs of debuginfod servers";
	char sub[PATH_BUF], *out;
	size_t total = 1, i;
	int r;

	r = cfg_check_node(x, l, "symbolization.debuginfod_urls");
	if (r)
		return r;
	if (l->type != N_SEQ)
		return cfg_expected(x, l, "symbolization.debuginfod_urls", what);
	if (l->nkid > DEBUGINFOD_URLS_MAX)
		return fail(x, l->kid[DEBUGINFOD_URLS_MAX], "symbolization.debuginfod_urls",
			    "expected at most %d servers, got %zu", DEBUGINFOD_URLS_MAX, l->nkid);
	for (i = 0; i < l->nkid; i++) {
		const char *u;
		size_t len;

		cfg_item_path(sub, "symbolization.debuginfod_urls", i);
		r = cfg_get_text(x, l->kid[i], sub, "an http:// or https:// URL", &u, &len);
		if (r)
			return r;
		/* A space would split it in two for libdebuginfod. */
		if (len > DEBUGINFOD_URL_MAX || memchr(u, ' ', len) ||
		    !((len > 7 && !strncasecmp(u, "http://", 7) && !strchr("/?#", u[7])) ||
		      (len > 8 && !strncasecmp(u, "https://", 8) && !strchr("/?#", u[8]))))
			return cfg_expected_str(x, l->kid[i], sub,
						"an http:// or https:// URL with a host, without "
						"spaces (a space is %20), of at most 1024 bytes");
		total += len + 1;
	}
	out = calloc(1, total);
	if (!out)
		return cfg_nomem(x);
	for (i = 0, total = 0; i < l->nkid; i++) {
		if (i)
			out[total++] = ' ';
		memcpy(out + total, l->kid[i]->str, l->kid[i]->len);
		total += l->kid[i]->len;
	}
	free(x->c->symbolization.debuginfod_urls);
	x->c->symbolization.debuginfod_urls = out;
	return 0;
}

/* The debuginfod_* keys: @v[0] is debuginfod_urls, then cache, cache_max,
 * timeout, budget, retry. */
static int get_debuginfod(struct ctx *x, const struct node *const *v)
{
	struct fx_config *c = x->c;
	uint64_t u;
	int r = 0;

	if (v[0] && !cfg_is_null(v[0]))
		r = get_debuginfod_urls(x, v[0]);
	if (!r && v[1])
		r = cfg_get_abs_path(x, v[1], "symbolization.debuginfod_cache", "an absolute path",
				     false, &c->symbolization.debuginfod_cache);
	if (!r && v[2])
		r = cfg_get_size(x, v[2], "symbolization.debuginfod_cache_max", 16ull << 20,
				 1ull << 40, &c->symbolization.debuginfod_cache_max);
	if (!r && v[3] &&
	    !(r = cfg_get_duration(x, v[3], "symbolization.debuginfod_timeout", 1000, 600000, 1,
				   &u)))
		c->symbolization.debuginfod_timeout_ms = (unsigned)u;
	if (!r && v[4] &&
	    !(r = cfg_get_duration(x, v[4], "symbolization.debuginfod_budget", 1000, 3600000, 1,
				   &u)))
		c->symbolization.debuginfod_budget_ms = (unsigned)u;
	if (!r && v[5] &&
	    !(r = cfg_get_duration(x, v[5], "symbolization.debuginfod_retry", 1000, 7ull * 86400000,
				   1000, &u)))
		c->symbolization.debuginfod_retry_s = (unsigned)(u / 1000);
	return r;
}

int cfg_get_symbolization(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "debug_dirs",
					    "demangle",
					    "max_memory",
					    "debuginfod_urls",
					    "debuginfod_cache",
					    "debuginfod_cache_max",
					    "debuginfod_timeout",
					    "debuginfod_budget",
					    "debuginfod_retry",
					    "check_names",
					    "jit",
					    "jvm_perfmap" };
	const struct node *v[NUNITS(keys)], *k[NUNITS(keys)];
	char sub[PATH_BUF];
	size_t i;
	int r;

	r = cfg_get_map(x, n, "symbolization", "a mapping", keys, NUNITS(keys), v, k);
	if (!r && v[0])
		r = cfg_check_node(x, v[0], "symbolization.debug_dirs");
	if (!r && v[0] && !cfg_is_null(v[0])) {
		const struct node *l = v[0];

		if (l->type != N_SEQ)
			return cfg_expected(x, l, "symbolization.debug_dirs",
					    "a list of absolute paths");
		if (l->nkid > FX_CONFIG_MAX_DEBUG_DIRS)
			return fail(x, l->kid[FX_CONFIG_MAX_DEBUG_DIRS], "symbolization.debug_dirs",
				    "expected at most %d directories, got %zu",
				    FX_CONFIG_MAX_DEBUG_DIRS, l->nkid);
		/* The list replaces the default one. */
		for (i = 0; i < x->c->symbolization.ndebug_dirs; i++) {
			free(x->c->symbolization.debug_dirs[i]);
			x->c->symbolization.debug_dirs[i] = NULL;
		}
		x->c->symbolization.ndebug_dirs = 0;
		for (i = 0; i < l->nkid && !r; i++) {
			cfg_item_path(sub, "symbolization.debug_dirs", i);
			r = cfg_get_abs_path(x, l->kid[i], sub, "an absolute path", false,
					     &x->c->symbolization.debug_dirs[i]);
			if (!r)
				x->c->symbolization.ndebug_dirs = i + 1;
		}
	}
	if (!r && v[1])
		r = cfg_get_bool(x, v[1], "symbolization.demangle", &x->c->symbolization.demangle);
	if (!r && v[2])
		r = cfg_get_size(x, v[2], "symbolization.max_memory", 1ull << 20, 16ull << 30,
				 &x->c->symbolization.max_memory);
	if (!r)
		r = get_debuginfod(x, v + 3);
	if (!r && v[9])
		r = cfg_get_bool(x, v[9], "symbolization.check_names",
				 &x->c->symbolization.check_names);
	if (!r && v[10])
		r = cfg_get_bool(x, v[10], "symbolization.jit", &x->c->symbolization.jit);
	if (!r && v[11])
		r = cfg_get_bool(x, v[11], "symbolization.jvm_perfmap",
				 &x->c->symbolization.jvm_perfmap);
	return r;
}
