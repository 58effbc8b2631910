/* SPDX-License-Identifier: MIT */
/* s3: what the S3 uploader (upload.s3) and `fxagent view s3://` share: the
 * credentials, the key layout of a fleet's chunks, the URLs of a bucket
 * (virtual-hosted or path style), the signing (libcurl's own SigV4), and the
 * error an S3 store answers with (XML, read with libxml2).
 *
 * The key of a chunk:
 *   <prefix><target>/<YYYY>/<MM>/<DD>/<HH>/<host>/<start>-<end>-<id>.json.gz
 * with the hour (UTC) and <start>/<end> of the window, ISO 8601 basic
 * (20261126T031000Z). One target's hour is one prefix; within a target the
 * keys sort by time, so a listing can start at an hour (start-after). The
 * target and host keep A-Z a-z 0-9 . _ - and have '_' for anything else
 * (the object's metadata holds them as they are).
 *
 * Secrets (the secret key, the session token) go only to libcurl, which
 * signs with them; no message holds a byte of them.
 */
#ifndef FXAGENT_S3_H
#define FXAGENT_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "fxagent/spool.h"

#define FX_S3_KEY_MAX	 1024 /* S3's own bound on a key, in bytes */
#define FX_S3_SECRET_MAX 4096 /* a credentials file or variable, in bytes */

struct fx_s3_creds {
	char *key_id, *secret; /* both set once loaded */
	char *token;	       /* the session token, or NULL */
};

/* Loads the credentials: from @id_file and @secret_file (read as secrets,
 * fx_trust_read_secret) when they are set, both or neither; else from the
 * environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and, when set,
 * AWS_SESSION_TOKEN. @what names the config section for messages. Returns 0,
 * or -errno with one line in @err (no byte of a secret). */
int fx_s3_creds_load(struct fx_s3_creds *c, const char *what, const char *id_file,
		     const char *secret_file, char *err, size_t errlen);
/* Wipes and frees what the credentials hold; takes a zeroed struct. */
void fx_s3_creds_wipe(struct fx_s3_creds *c);

/* Where a bucket is. */
struct fx_s3_where {
	const char *endpoint; /* scheme://host[:port]; NULL: https://s3.<region>.amazonaws.com */
	const char *region, *bucket;
	/* endpoint/bucket/key, else bucket.host/key; path style all the same
	 * for an endpoint named by an IP address or localhost (no DNS name for
	 * bucket.host), as AWS's CLI does. */
	bool path_style;
};

/* The URL of @key in the bucket (URI-encoded as S3 signs it: all but A-Z
 * a-z 0-9 - . _ ~ and '/' percent-encoded), or of the bucket itself with
 * @key NULL, then "?@query" when @query is set (already canonical: sorted by
 * name, each value encoded by fx_s3_query_escape). Malloc'ed; NULL when out
 * of memory or the endpoint is no http(s) URL. */
char *fx_s3_url(const struct fx_s3_where *w, const char *key, const char *query);
/* Appends @s to @out (@cap bytes with the NUL) as a query value is encoded
 * for signing: all but A-Z a-z 0-9 - . _ ~ percent-encoded, '/' too.
 * Returns the length, or -ENAMETOOLONG. */
int fx_s3_query_escape(const char *s, char *out, size_t cap);

/* The key of the chunk @info of @host under @prefix into @out. Returns 0, or
 * -ENAMETOOLONG past FX_S3_KEY_MAX, -EINVAL for a window out of range. */
int fx_s3_chunk_key(const char *prefix, const struct fx_chunk_info *info, const char *host,
		    char *out, size_t len);

/* @s as a segment of a key: A-Z a-z 0-9 . _ - kept, '_' for the rest. */
void fx_s3_key_part(const char *s, char *out, size_t cap);

/* A chunk's key, after the prefix, taken apart. */
struct fx_s3_key_parts {
	char target[128], host[256];
	int64_t start_ms, end_ms;
};
/* Parses @rest (a key without its prefix). Returns 0, or -EINVAL when it is
 * not in the layout (then nothing can be said of it from its name). */
int fx_s3_parse_key(const char *rest, struct fx_s3_key_parts *p);
/* "<target>/<YYYY>/<MM>/<DD>/<HH>/" of the hour holding @ms, for a listing's
 * start-after. Returns 0 or -ENAMETOOLONG. */
int fx_s3_hour_prefix(const char *target, int64_t ms, char *out, size_t len);

/* Signs the requests of @c with SigV4 for @region: the credentials as user
 * and password; and, with @hdrs, appends to *@hdrs "x-amz-content-sha256:
 * @sha256_hex" (NULL: the hash of an empty body) and the session token
 * (libcurl signs every header it is given). Returns 0 or -ENOMEM (-ENOTSUP
 * when libcurl cannot sign). */
int fx_s3_sign(CURL *c, const struct fx_s3_creds *cr, const char *region, const char *sha256_hex,
	       struct curl_slist **hdrs);

/* The SHA-256 of the @size bytes at @fd (pread from 0), in hex. Returns 0,
 * or -errno (-EIO when the file is shorter). */
int fx_s3_sha256_fd(int fd, uint64_t size, char hex[65]);

/* Code and Message of the S3 error in @body (@len bytes, maybe cut off):
 * empty strings when it holds none. Control characters become spaces. */
void fx_s3_parse_error(const char *body, size_t len, char *code, size_t code_len, char *msg,
		       size_t msg_len);

#endif
