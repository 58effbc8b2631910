/* SPDX-License-Identifier: MIT */
#include "fxagent/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
	char tmp[PATH_MAX];
	FILE *f;
	int ret = 0;

	int fd;

	/* A fresh name made with O_EXCL: node_exporter's directory is often
	 * writable by others, who could put a symlink at a fixed name. */
	if (snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* node_exporter reads it as another user; counters are not secret. */
	if (fchmod(fd, 0644) < 0 || !(f = fdopen(fd, "w"))) {
		ret = -errno;
		close(fd);
		unlink(tmp);
		return ret;
	}
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
		ret = -(errno ? errno : EIO);
	if (fclose(f) != 0 && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path) < 0)
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}
