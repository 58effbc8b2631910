/* SPDX-License-Identifier: MIT */
/* gzip: see include/fxagent/gzip.h. */
#include "fxagent/gzip.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* Level 1: on a 64-CPU host's chunk it compressed 3-4 times as fast as
 * level 6 for about an eighth more bytes (bench/rate.py, "gzip levels"):
 * the CPU is every server's, the bytes one upload's. */
#define GZIP_LEVEL 1

struct gz {
	z_stream zs;
	fx_json_write_fn out;
	void *out_ctx;
	uint64_t bytes;
	unsigned char buf[64 * 1024];
};

/* Deflates what is in zs.next_in with @flush, handing on full buffers. */
static int gz_run(struct gz *g, int flush)
{
	int zrc;

	do {
		size_t have;
		int rc;

		g->zs.next_out = g->buf;
		g->zs.avail_out = sizeof(g->buf);
		zrc = deflate(&g->zs, flush);
		if (zrc == Z_STREAM_ERROR)
			return -EIO;
		have = sizeof(g->buf) - g->zs.avail_out;
		rc = have ? g->out(g->out_ctx, g->buf, have) : 0;
		if (rc < 0)
			return rc;
		g->bytes += have;
	} while (g->zs.avail_out == 0 || (flush == Z_FINISH && zrc != Z_STREAM_END));
	return 0;
}

static int gz_write(void *ctx, const void *buf, size_t len)
{
	struct gz *g = ctx;
	const unsigned char *p = buf;

	while (len) {
		uInt chunk = len > (1u << 30) ? (1u << 30) : (uInt)len;
		int rc;

		g->zs.next_in = (unsigned char *)p;
		g->zs.avail_in = chunk;
		rc = gz_run(g, Z_NO_FLUSH);
		if (rc < 0)
			return rc;
		p += chunk;
		len -= chunk;
	}
	return 0;
}

static struct gz *gz_new(fx_json_write_fn out, void *out_ctx)
{
	struct gz *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->out = out;
	g->out_ctx = out_ctx;
	/* 15 + 16: the gzip wrapper rather than zlib's. */
	if (deflateInit2(&g->zs, GZIP_LEVEL, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		free(g);
		return NULL;
	}
	return g;
}

/* Ends the stream when @rc is 0, and frees @g; returns @rc or the end's. */
static int gz_end(struct gz *g, int rc, uint64_t *bytes)
{
	if (!rc) {
		g->zs.next_in = NULL;
		g->zs.avail_in = 0;
		rc = gz_run(g, Z_FINISH);
	}
	if (!rc && bytes)
		*bytes = g->bytes;
	deflateEnd(&g->zs);
	free(g);
	return rc;
}

int fx_gzip_json(fx_gzip_emit_fn emit, void *arg, fx_json_write_fn out, void *out_ctx,
		 uint64_t *bytes)
{
	struct gz *g = gz_new(out, out_ctx);
	struct fx_json *j;
	int rc;

	if (!g)
		return -ENOMEM;
	j = fx_json_new(gz_write, g);
	rc = j ? emit(j, arg) : -ENOMEM;
	if (!rc)
		rc = fx_json_finish(j);
	fx_json_free(j);
	return gz_end(g, rc, bytes);
}

int fx_gzip_bytes(const void *data, size_t len, fx_json_write_fn out, void *out_ctx,
		  uint64_t *bytes)
{
	struct gz *g = gz_new(out, out_ctx);

	if (!g)
		return -ENOMEM;
	return gz_end(g, gz_write(g, data, len), bytes);
}

int fx_gzip_write_fd(void *ctx, const void *buf, size_t len)
{
	int fd = *(const int *)ctx;
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int fx_gzip_write_buf(void *ctx, const void *buf, size_t len)
{
	struct fx_gzip_buf *b = ctx;

	if (b->max && len > b->max - b->len)
		return -E2BIG;
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 64 * 1024;
		unsigned char *nd;

		while (cap < b->len + len)
			cap *= 2;
		nd = realloc(b->data, cap);
		if (!nd)
			return -ENOMEM;
		b->data = nd;
		b->cap = cap;
	}
	memcpy(b->data + b->len, buf, len);
	b->len += len;
	return 0;
}
