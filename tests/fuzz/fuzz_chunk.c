/* SPDX-License-Identifier: MIT */
/* Fuzz target: the check of a spool file before it is sent
 * (include/fxagent/chunk.h).
 *
 * The input is the file's bytes. Checks: the answer is 0 or -EBADMSG with a
 * one-line reason; the check of the same bytes through a file (memfd, read
 * in 64 KiB blocks) gives the same answer and reason; and an accepted input
 * is what the contract says, by a second reading with zlib's one-shot
 * inflate: one whole gzip member, nothing after it, a text that starts with
 * the processed profile's header.
 */
#include "fuzz.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "fxagent/chunk.h"

#define HEAD "{\"meta\":{\"version\":"

/* The first bytes of the text and whether the member ends exactly at the
 * input's end, read in one go. */
static int oracle(const uint8_t *data, size_t size, char *head, size_t headlen)
{
	static uint8_t out[1 << 20];
	z_stream zs;
	int zr;

	memset(&zs, 0, sizeof(zs));
	if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
		return -ENOMEM;
	zs.next_in = (Bytef *)data;
	zs.avail_in = (uInt)size;
	memset(head, 0, headlen);
	do {
		bool first = zs.total_out == 0;

		zs.next_out = out;
		zs.avail_out = sizeof(out);
		zr = inflate(&zs, Z_NO_FLUSH);
		if (first)
			memcpy(head, out, zs.total_out < headlen - 1 ? zs.total_out : headlen - 1);
	} while (zr == Z_OK && zs.avail_in);
	inflateEnd(&zs);
	return zr == Z_STREAM_END && zs.avail_in == 0 ? 0 : -EBADMSG;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[256] = "", why_fd[256] = "", head[64];
	int rc, rc_fd, fd;

	rc = fx_chunk_check(data, size, why, sizeof(why));
	FUZZ_CHECK(rc == 0 || rc == -EBADMSG, "rc %d", rc);
	FUZZ_CHECK(rc == 0 || (why[0] && !strchr(why, '\n')), "reason '%s'", why);

	fd = memfd_create("chunk", MFD_CLOEXEC);
	FUZZ_CHECK(fd >= 0, "memfd_create");
	FUZZ_CHECK(write(fd, data, size) == (ssize_t)size, "write");
	rc_fd = fx_chunk_check_fd(fd, size, why_fd, sizeof(why_fd));
	close(fd);
	FUZZ_CHECK(rc_fd == rc, "memory %d (%s), file %d (%s)", rc, why, rc_fd, why_fd);
	/* Byte positions may differ with the block size: compare the kind. */
	FUZZ_CHECK(!strncmp(why, why_fd, 12), "memory '%s', file '%s'", why, why_fd);

	if (rc == 0) {
		FUZZ_CHECK(size >= 18 && data[0] == 0x1f && data[1] == 0x8b, "accepted non-gzip");
		FUZZ_CHECK(oracle(data, size, head, sizeof(head)) == 0,
			   "accepted what zlib reads as not one whole gzip member");
		FUZZ_CHECK(!strncmp(head, HEAD, strlen(HEAD)), "accepted the text '%.40s'", head);
	}
	return 0;
}
