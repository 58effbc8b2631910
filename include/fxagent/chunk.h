/* SPDX-License-Identifier: MIT */
/* chunk: whether some bytes are one of the agent's chunks, before they are
 * sent anywhere.
 *
 * A spool file is sent with "Content-Encoding: gzip" under the agent's
 * credentials, so garbage, a zero-byte file or a file that is not ours must
 * not leave. A chunk is: one whole gzip member (magic, deflate, CRC and
 * length as the trailer says, nothing after it) whose text starts with the
 * processed profile's header as fx_profile_write_file writes it,
 *   {"meta":{"version":N,"preprocessedProfileVersion":N,
 * and decompresses to at most FX_CHUNK_MAX_JSON bytes (a bound on the work).
 * The check streams: any input size in fixed memory.
 */
#ifndef FXAGENT_CHUNK_H
#define FXAGENT_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#define FX_CHUNK_MAX_BYTES (256ull << 20) /* a chunk file */
#define FX_CHUNK_MAX_JSON  (4ull << 30)	  /* its text */

/* Checks @len bytes at @data. Returns 0, or -EBADMSG with what is wrong and
 * where in @why ("not gzip: starts with 7b 22", "truncated: the gzip stream
 * ends after 812 of its bytes", "not a fxagent chunk: the text starts with
 * ..."), -ENOMEM. */
int fx_chunk_check(const void *data, size_t len, char *why, size_t whylen);

/* The same for the @size bytes of the regular file @fd, read with pread from
 * offset 0 (the file offset is not moved). -errno when it cannot be read. */
int fx_chunk_check_fd(int fd, uint64_t size, char *why, size_t whylen);

#endif
