/* SPDX-License-Identifier: MIT */
#include "fxagent/metrics.h"

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

int fx_metrics_write(const char *path, const struct fx_metric *m, size_t n)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int ret = 0;

	if (!f)
		return -errno;
	for (size_t i = 0; i < n; i++) {
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
