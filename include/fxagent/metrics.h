/* SPDX-License-Identifier: MIT */
/* metrics: the agent's counters as a Prometheus text file.
 *
 * For node_exporter's textfile collector, which reads every *.prom file of a
 * directory at each scrape: the file is written beside its final name and
 * renamed over it, so a scrape never sees half a file.
 */
#ifndef FXAGENT_METRICS_H
#define FXAGENT_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fx_metric {
	const char *name; /* fxagent_..., [a-zA-Z_:][a-zA-Z0-9_:]* */
	const char *help;
	bool gauge;	   /* else a counter */
	const char *label; /* NULL, or one label name (values in label_value) */
	const char *label_value;
	double value;
};

/* One cache's figures, for fx_metrics_caches(). */
struct fx_metrics_cache {
	const char *name; /* the value of its cache="..." label */
	uint64_t entries; /* held now */
	uint64_t bytes;	  /* heap bytes held now, when bytes_known */
	bool bytes_known;
	uint64_t evictions; /* entries let go, so far: for the bound, or idle */
};

/* The series of @n caches into @out (room for 3 * @n): every cache's
 * fxagent_cache_evictions_total, then every fxagent_cache_entries, then
 * fxagent_cache_bytes of those whose bytes are known, labelled
 * cache="<name>", each name's series together as fx_metrics_write() wants
 * them. Returns how many were written. */
size_t fx_metrics_caches(const struct fx_metrics_cache *c, size_t n, struct fx_metric *out);

/* Writes @n metrics to @path, mode 0644 (through a fresh temporary file and
 * rename: atomic_file.h). Metrics with the same name must be adjacent: HELP
 * and TYPE are written once per name. Returns 0 or -errno; logs at debug
 * only (the caller decides how loud). */
int fx_metrics_write(const char *path, const struct fx_metric *m, size_t n);

#endif
