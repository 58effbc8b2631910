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

struct fx_metric {
	const char *name; /* fxagent_..., [a-zA-Z_:][a-zA-Z0-9_:]* */
	const char *help;
	bool gauge;	   /* else a counter */
	const char *label; /* NULL, or one label name (values in label_value) */
	const char *label_value;
	double value;
};

/* Writes @n metrics to @path, mode 0644 (through a fresh temporary file and
 * rename: atomic_file.h). Metrics with the same name must be adjacent: HELP
 * and TYPE are written once per name. Returns 0 or -errno; logs at debug
 * only (the caller decides how loud). */
int fx_metrics_write(const char *path, const struct fx_metric *m, size_t n);

#endif
