/* SPDX-License-Identifier: MIT */
/* gzip: JSON written through fx_json, gzip-compressed on the way out, to
 * any byte sink (a file descriptor, a memory buffer). One gzip member, zlib
 * level 6, deflated 64 KiB at a time: the text itself is never held. */
#ifndef FXAGENT_GZIP_H
#define FXAGENT_GZIP_H

#include <stddef.h>
#include <stdint.h>

#include "fxagent/json.h"

/* Writes the document into @j; returns 0 or -errno. */
typedef int (*fx_gzip_emit_fn)(struct fx_json *j, void *arg);

/* Runs @emit with a writer whose bytes are deflated and handed to @out
 * (@out_ctx). *@bytes (may be NULL) gets the compressed size. Returns 0, or
 * -errno: @emit's, the writer's, @out's or -ENOMEM. Logs nothing. */
int fx_gzip_json(fx_gzip_emit_fn emit, void *arg, fx_json_write_fn out, void *out_ctx,
		 uint64_t *bytes);

/* The same for @len bytes at @data (a binary message, a text). */
int fx_gzip_bytes(const void *data, size_t len, fx_json_write_fn out, void *out_ctx,
		  uint64_t *bytes);

/* An @out for fx_gzip_json that writes to the file descriptor *(int *)ctx,
 * whole (short writes and EINTR retried). */
int fx_gzip_write_fd(void *ctx, const void *buf, size_t len);

/* A growing memory buffer, and an @out that appends to it. */
struct fx_gzip_buf {
	unsigned char *data;
	size_t len, cap;
	size_t max; /* -E2BIG past this many bytes; 0 = no bound */
};
int fx_gzip_write_buf(void *ctx, const void *buf, size_t len);

#endif
