/* SPDX-License-Identifier: MIT */
#include "fxagent/chunk.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define HEAD_LEN  96
#define BLOCK_LEN 65536

struct check {
	z_stream zs;
	uint8_t out[BLOCK_LEN];
	char head[HEAD_LEN + 1]; /* the text's start, for the header check */
	size_t head_len;
	uint64_t in_total, out_total;
	bool started, ended, head_ok;
	char *why;
	size_t whylen;
};

/* "a" then digits: returns past the digits, or NULL. */
static const char *skip_lit_num(const char *s, const char *lit)
{
	size_t n = strlen(lit);

	if (strncmp(s, lit, n))
		return NULL;
	s += n;
	if (*s < '0' || *s > '9')
		return NULL;
	while (*s >= '0' && *s <= '9')
		s++;
	return s;
}

/* The header fx_profile_write_file writes first, versions free. */
static bool head_is_ours(const char *h)
{
	const char *p = skip_lit_num(h, "{\"meta\":{\"version\":");

	if (p)
		p = skip_lit_num(p, ",\"preprocessedProfileVersion\":");
	return p && *p == ',';
}

/* The text's first bytes for a message: printable ASCII as is, the rest as
 * \xHH, so that a file's bytes cannot forge a log line. */
static const char *shown_head(struct check *c, char *out, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < c->head_len && i < 24 && o + 5 < len; i++) {
		unsigned char b = (unsigned char)c->head[i];

		if (b >= 0x20 && b < 0x7f && b != '\\' && b != '"')
			out[o++] = (char)b;
		else
			o += (size_t)snprintf(out + o, len - o, "\\x%02x", b);
	}
	out[o] = '\0';
	return out;
}

__attribute__((format(printf, 2, 3))) static int fail(struct check *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why, c->whylen, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

/* The text's first bytes go to head[]; once there are enough, they are
 * checked. */
static int take_text(struct check *c, size_t n)
{
	char shown[128];
	size_t room = HEAD_LEN - c->head_len;

	c->out_total += n;
	if (c->out_total > FX_CHUNK_MAX_JSON)
		return fail(c, "too big: the text is over %" PRIu64 " bytes",
			    (uint64_t)FX_CHUNK_MAX_JSON);
	if (c->head_ok || !room)
		return 0;
	if (n > room)
		n = room;
	memcpy(c->head + c->head_len, c->out, n);
	c->head_len += n;
	c->head[c->head_len] = '\0';
	if (c->head_len == HEAD_LEN)
		c->head_ok = head_is_ours(c->head);
	if (c->head_len == HEAD_LEN && !c->head_ok)
		return fail(c, "not a fxagent chunk: the text starts with \"%s\"",
			    shown_head(c, shown, sizeof(shown)));
	return 0;
}

static int feed(struct check *c, const uint8_t *p, size_t n)
{
	int zr, rc;

	if (!c->started && n) {
		if (n < 3 || p[0] != 0x1f || p[1] != 0x8b || p[2] != 8) {
			snprintf(c->why, c->whylen, "not gzip: starts with %02x %02x %02x", p[0],
				 n > 1 ? p[1] : 0, n > 2 ? p[2] : 0);
			return -EBADMSG;
		}
		c->started = true;
	}
	if (c->ended && n)
		return fail(c, "%zu bytes after the end of the gzip stream (at byte %" PRIu64 ")",
			    n, c->in_total);
	c->zs.next_in = (Bytef *)p;
	c->zs.avail_in = (uInt)n;
	while (c->zs.avail_in && !c->ended) {
		c->zs.next_out = c->out;
		c->zs.avail_out = sizeof(c->out);
		zr = inflate(&c->zs, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR)
			return fail(c, "corrupt gzip: %s near byte %" PRIu64,
				    c->zs.msg ? c->zs.msg : "bad data",
				    c->in_total + (n - c->zs.avail_in));
		rc = take_text(c, sizeof(c->out) - c->zs.avail_out);
		if (rc < 0)
			return rc;
		if (zr == Z_STREAM_END)
			c->ended = true;
		else if (zr == Z_BUF_ERROR && c->zs.avail_in)
			return fail(c, "corrupt gzip: no progress near byte %" PRIu64,
				    c->in_total + (n - c->zs.avail_in));
	}
	/* Input left after the end: a second member or trailing bytes. */
	if (c->ended && c->zs.avail_in)
		return fail(c, "%u bytes after the end of the gzip stream (at byte %" PRIu64 ")",
			    c->zs.avail_in, c->in_total + (n - c->zs.avail_in));
	c->in_total += n;
	return 0;
}

/* After the last byte: the stream ended and the text is ours. */
static int finish(struct check *c)
{
	char shown[128];

	if (!c->started)
		return fail(c, "empty: 0 bytes");
	if (!c->ended)
		return fail(c, "truncated: the gzip stream does not end in its %" PRIu64 " bytes",
			    c->in_total);
	if (!c->head_ok && !head_is_ours(c->head))
		return fail(c, "not a fxagent chunk: the text starts with \"%s\"",
			    shown_head(c, shown, sizeof(shown)));
	return 0;
}

static int begin(struct check *c, char *why, size_t whylen)
{
	memset(&c->zs, 0, sizeof(c->zs));
	c->head_len = 0;
	c->head[0] = '\0';
	c->in_total = c->out_total = 0;
	c->started = c->ended = c->head_ok = false;
	c->why = why;
	c->whylen = whylen;
	/* 16 + 15: gzip only, the largest window. */
	if (inflateInit2(&c->zs, 16 + MAX_WBITS) != Z_OK) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

int fx_chunk_check(const void *data, size_t len, char *why, size_t whylen)
{
	struct check *c = malloc(sizeof(*c));
	int rc;

	if (!c) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	rc = begin(c, why, whylen);
	if (rc == 0) {
		rc = feed(c, data, len);
		if (rc == 0)
			rc = finish(c);
		inflateEnd(&c->zs);
	}
	free(c);
	return rc;
}

int fx_chunk_check_fd(int fd, uint64_t size, char *why, size_t whylen)
{
	struct check *c = malloc(sizeof(*c));
	uint8_t *buf = malloc(BLOCK_LEN);
	uint64_t off = 0;
	int rc;

	if (!c || !buf) {
		free(c);
		free(buf);
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	rc = begin(c, why, whylen);
	while (rc == 0 && off < size) {
		size_t want = size - off < BLOCK_LEN ? (size_t)(size - off) : BLOCK_LEN;
		ssize_t n = pread(fd, buf, want, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO; /* EIO: shorter than its size said */
			snprintf(why, whylen, "unreadable: %s", strerror(-rc));
			break;
		}
		rc = feed(c, buf, (size_t)n);
		off += (uint64_t)n;
	}
	if (rc == 0)
		rc = finish(c);
	if (c->why)
		inflateEnd(&c->zs);
	free(buf);
	free(c);
	return rc;
}
