/* SPDX-License-Identifier: MIT */
/* A profile as a gzip file, written atomically (atomic_file.h); Breakpad ids. */
#include "fxagent/atomic_file.h"
#include "fxagent/log.h"
#include "fxagent/util.h"
#include "profile_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---- gzip file output ---- */

struct gz_sink {
	z_stream zs;
	int fd;
	uint64_t bytes;
	unsigned char out[64 * 1024];
};

static int write_all(int fd, const void *buf, size_t len)
{
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

/* Deflates what is in zs.next_in with @flush, writing full output buffers. */
static int gz_run(struct gz_sink *g, int flush)
{
	int zrc;

	do {
		size_t have;
		int rc;

		g->zs.next_out = g->out;
		g->zs.avail_out = sizeof(g->out);
		zrc = deflate(&g->zs, flush);
		if (zrc == Z_STREAM_ERROR)
			return -EIO;
		have = sizeof(g->out) - g->zs.avail_out;
		rc = write_all(g->fd, g->out, have);
		if (rc < 0)
			return rc;
		g->bytes += have;
	} while (g->zs.avail_out == 0 || (flush == Z_FINISH && zrc != Z_STREAM_END));
	return 0;
}

static int gz_write(void *ctx, const void *buf, size_t len)
{
	struct gz_sink *g = ctx;
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

/* Writes the whole gzip stream to @fd. Returns 0 or -errno, not logged. */
static int write_gz(const struct fx_profile_input *in, int fd, struct fx_profile_stats *stats)
{
	struct gz_sink *g = calloc(1, sizeof(*g));
	struct fx_json *j = NULL;
	int rc = -ENOMEM;

	if (!g)
		return -ENOMEM;
	g->fd = fd;
	/* 15 + 16: gzip wrapper rather than zlib. */
	if (deflateInit2(&g->zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		free(g);
		return -ENOMEM;
	}
	j = fx_json_new(gz_write, g);
	if (!j)
		goto out;
	rc = fx_profile_write_json(in, j, stats);
	if (!rc)
		rc = fx_json_finish(j);
	if (!rc) {
		g->zs.next_in = NULL;
		g->zs.avail_in = 0;
		rc = gz_run(g, Z_FINISH);
	}
	if (!rc && stats)
		stats->bytes = g->bytes;
out:
	fx_json_free(j);
	deflateEnd(&g->zs);
	free(g);
	return rc;
}

/* The umask, read without changing it (umask(2) can only set it, and other
 * threads create files meanwhile). */
static mode_t file_umask(void)
{
	unsigned long long mask = 022;

	return fx_self_status("Umask", 8, &mask) == 0 ? (mode_t)(mask & 0777) : 022;
}

struct gz_job {
	const struct fx_profile_input *in;
	struct fx_profile_stats *stats;
};

static int write_gz_job(int fd, void *arg)
{
	const struct gz_job *job = arg;

	return write_gz(job->in, fd, job->stats);
}

int fx_profile_write_file(const struct fx_profile_input *in, const char *path,
			  struct fx_profile_stats *stats)
{
	struct gz_job job = { .in = in, .stats = stats };
	int rc;

	if (!strcmp(path, "-")) {
		rc = write_gz(in, STDOUT_FILENO, stats);
		if (rc < 0)
			return fx_log_errno(FX_LOG_ERR, -rc, "cannot write the profile to stdout");
		return 0;
	}
	/* What open(0666) would give under the process's umask (the service's
	 * UMask=0027 keeps chunks private). */
	return fx_atomic_file_write(path, 0666 & ~file_umask(), FX_LOG_ERR, write_gz_job, &job);
}

int fx_profile_breakpad_id(const uint8_t *build_id, size_t len, char out[34])
{
	/* GUID layout: the first three fields (4, 2, 2 bytes) are little-endian. */
	static const uint8_t order[16] = { 3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15 };
	static const char hex[] = "0123456789ABCDEF";

	if (!len || !build_id)
		return -EINVAL;
	for (size_t i = 0; i < 16; i++) {
		uint8_t b = order[i] < len ? build_id[order[i]] : 0;

		out[2 * i] = hex[b >> 4];
		out[2 * i + 1] = hex[b & 15];
	}
	out[32] = '0';
	out[33] = '\0';
	return 0;
}
