/* SPDX-License-Identifier: MIT */
#include "fxagent/log.h"

#include <stdio.h>

static enum fx_log_level log_level = FX_LOG_NOTICE;

void fx_log_set_level(enum fx_log_level level)
{
	log_level = level;
}

enum fx_log_level fx_log_get_level(void)
{
	return log_level;
}

__attribute__((format(printf, 2, 0))) static void log_va(enum fx_log_level level, const char *fmt,
							 va_list ap)
{
	char buf[1024];

	if (level > log_level)
		return;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	/* One fprintf per message so concurrent threads do not interleave lines. */
	fprintf(stderr, "fxagent: %s\n", buf);
}

void fx_log(enum fx_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_va(level, fmt, ap);
	va_end(ap);
}

int fx_log_errno(enum fx_log_level level, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_va(level, fmt, ap);
	va_end(ap);
	return err > 0 ? -err : err;
}
