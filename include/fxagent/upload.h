/* SPDX-License-Identifier: MIT */
/* upload: sends chunks to the collector over HTTP(S) or file:// (libcurl).
 *
 * One easy handle is reused (connection reuse; HTTP/2 when offered). The body
 * is the chunk's gzip bytes; headers: Content-Type: application/json,
 * Content-Encoding: gzip, X-Fxagent-Host/-Target/-Window-Start/-Window-End/
 * -Seq/-Chunk-Id, Authorization: Bearer <token> when a token file is set, and
 * the user's headers. The token is never logged.
 */
#ifndef FXAGENT_UPLOAD_H
#define FXAGENT_UPLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fxagent/spool.h"

/* upload.s3: each chunk one object of a bucket (keys: include/fxagent/s3.h),
 * PUT with SigV4 (libcurl's) and the body's SHA-256, its metadata in
 * x-amz-meta-fxagent-*: host, target, window-start, window-end, seq,
 * chunk-id, labels, format. A chunk sent twice is the same object. */
struct fx_upload_s3 {
	const char *endpoint; /* http(s)://host[:port]; NULL: AWS's, from the region */
	const char *region, *bucket;
	const char *prefix; /* of every key; NULL = none */
	/* Both or neither; neither: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
	 * AWS_SESSION_TOKEN from the environment. */
	const char *access_key_id_file, *secret_access_key_file;
	const char *storage_class; /* x-amz-storage-class; NULL: the bucket's default */
	const char *labels;	   /* "key=value,..." for the metadata; may be NULL */
	bool path_style;	   /* endpoint/bucket/key, else bucket.endpoint/key */
};

struct fx_upload_opts {
	const char *url; /* template: {host} {target} {start} {end} {seq} {id}; NULL with s3 */
	const struct fx_upload_s3 *s3; /* in place of url, or NULL */
	bool put;		       /* PUT, else POST */
	const char *const *headers;    /* "Name: value", NULL-terminated; may be NULL */
	const char *bearer_token_file; /* may be NULL */
	const char *ca_file, *cert_file, *key_file; /* may be NULL */
	bool insecure_skip_verify;
	unsigned connect_timeout_ms;
	unsigned timeout_ms; /* whole request */
};

enum fx_upload_outcome {
	FX_UPLOAD_OK,	  /* 2xx: the collector has it */
	FX_UPLOAD_RETRY,  /* 5xx, 429, timeout, connection error: try again later */
	FX_UPLOAD_REJECT, /* other 4xx (and 3xx): the collector refused the chunk;
			     for S3, res->error holds the Code and Message of its
			     answer (res->body is empty) */
};

struct fx_upload_result {
	enum fx_upload_outcome outcome;
	long status;		/* HTTP status, 0 when none */
	int64_t retry_after_ms; /* from Retry-After on 429/503, else -1 */
	char error[512];	/* what went wrong, for the log (never the token) */
	char body[256];		/* the start of the response body, for rejections */
};

struct fx_uploader;

/* Reads the bearer token file @path as the uploader does: a secret file
 * (fx_trust_open: regular, not readable by others), one run of printable
 * characters of at most 8 KiB, white space around it ignored. With @auth,
 * *@auth is the "Authorization: Bearer <token>" line (malloc'ed; wipe it
 * before freeing) and *@token_off where the token starts in it. Returns 0,
 * or -errno with one line in @err naming the file and what is wrong, never
 * a byte of the token. */
int fx_upload_read_token(const char *path, char **auth, size_t *token_off, char *err,
			 size_t errlen);

/* @host names this machine in URLs and headers. Reads the token file (or
 * S3's credentials) now; fx_upload_reload() reads them again. Returns 0 or
 * -errno (logged). */
int fx_upload_new(const struct fx_upload_opts *opts, const char *host, struct fx_uploader **out);
void fx_upload_free(struct fx_uploader *u);
int fx_upload_reload(struct fx_uploader *u);

/* Sends the @size bytes of the chunk open at @fd (checked by
 * fx_spool_open_chunk; read with pread, the caller closes it). With
 * @deadline_ns (CLOCK_MONOTONIC; 0 = none) the request's timeouts are cut to
 * what is left before it, and nothing is sent when nothing is left (a
 * RETRY): a stopping agent keeps its bound. At most the first bytes of the
 * answer are read (res->body); a longer answer is cut off, not read. Fills
 * @res; returns 0 when it could try (out of memory included: a RETRY),
 * -errno only when the chunk cannot be read, so the caller may drop it.
 * Thread-safe only per uploader. */
int fx_upload_send(struct fx_uploader *u, const struct fx_chunk_info *info, int fd, uint64_t size,
		   uint64_t deadline_ns, struct fx_upload_result *res);

/* --check-upload: with upload.s3, one signed HEAD on the bucket: 0 when
 * the store accepts the credentials, else -EACCES (403: the key, the
 * secret, the bucket's policy, or this host's clock, whose skew from the
 * store's Date is said), -ENOENT (no such bucket), -EXDEV (another region:
 * the store's x-amz-bucket-region is said), -EIO (anything else, or no
 * answer). A collector's URL is not asked (a request there is a chunk):
 * -ENOTSUP. One line in @msg either way; no secret in it. */
int fx_upload_check(struct fx_uploader *u, char *msg, size_t len);

/* Expands a URL template; placeholder values are URL-escaped; "{{" is a
 * literal "{". {start} and {end} are UTC ISO 8601 basic (20261121T031000Z).
 * Returns a malloc'ed string or NULL (ENOMEM, or EINVAL for an unknown or
 * unclosed placeholder). */
char *fx_upload_expand_url(const char *tmpl, const struct fx_chunk_info *info, const char *host);

/* The next wait before retrying: initial doubling up to max, with full
 * jitter in [d/2, d]; @attempt counts from 0; @retry_after_ms (>= 0) is a
 * floor the server asked for. */
uint64_t fx_upload_backoff_ms(unsigned attempt, uint64_t initial_ms, uint64_t max_ms,
			      int64_t retry_after_ms, uint64_t random);

#endif
