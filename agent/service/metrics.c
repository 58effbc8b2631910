/* SPDX-License-Identifier: MIT */
#include "fxagent/metrics.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fxagent/atomic_file.h"

/* Label values escape \, " and newlines, as the text format says. */
static void put_label_value(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f), fputc(*v, f);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

static struct fx_metric cache_series(const char *name, const char *help, bool gauge,
				     const struct fx_metrics_cache *c, uint64_t value)
{
	return (struct fx_metric){ name, help, gauge, "cache", c->name, (double)value };
}

size_t fx_metrics_caches(const struct fx_metrics_cache *c, size_t n, struct fx_metric *out)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		out[k++] = cache_series("fxagent_cache_evictions_total",
					"Entries a cache let go: for its bound, or idle.", false,
					&c[i], c[i].evictions);
	for (size_t i = 0; i < n; i++)
		out[k++] = cache_series("fxagent_cache_entries", "Entries a cache holds.", true,
					&c[i], c[i].entries);
	for (size_t i = 0; i < n; i++)
		if (c[i].bytes_known)
			out[k++] = cache_series("fxagent_cache_bytes", "Heap bytes a cache holds.",
						true, &c[i], c[i].bytes);
	return k;
}

int fx_metrics_write(const char *path, const struct fx_metric *m, size_t n)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int ret = 0;

	if (!f)
		return -errno;
	for (size_t i = 0; i < n; i++) {
		/* One name's metrics are adjacent: its HELP and TYPE come once. */
		for (size_t k = 0; k + 1 < i; k++)
			assert(strcmp(m[k].name, m[i].name) || !strcmp(m[i - 1].name, m[i].name));
		if (i == 0 || strcmp(m[i].name, m[i - 1].name)) {
			fprintf(f, "# HELP %s %s\n", m[i].name, m[i].help);
			fprintf(f, "# TYPE %s %s\n", m[i].name, m[i].gauge ? "gauge" : "counter");
		}
		fputs(m[i].name, f);
		if (m[i].label) {
			fprintf(f, "{%s=\"", m[i].label);
			put_label_value(f, m[i].label_value ? m[i].label_value : "");
			fputs("\"}", f);
		}
		/* Counters are whole numbers; %.17g keeps them exact up to 2^53. */
		fprintf(f, " %.17g\n", m[i].value);
	}
	if (fflush(f) != 0 || ferror(f))
		ret = -(errno ? errno : ENOMEM);
	if (fclose(f) != 0 && !ret)
		ret = -(errno ? errno : ENOMEM);
	/* A fresh temporary name (O_EXCL): node_exporter's directory is often
	 * writable by others, who could put a symlink at a fixed name.
	 * node_exporter reads the file as another user; counters are not
	 * secret. The caller reports failures: logged at debug here. */
	if (!ret)
		ret = fx_atomic_file_write_buf(path, 0644, FX_LOG_DEBUG, text, len);
	free(text);
	return ret;
}
