/* SPDX-License-Identifier: MIT */
/* upload_int.h: what the files of agent/upload/ share, and nobody else sees
 * (include/fxagent/upload.h is the module's contract).
 *   uploader.c  fx_upload_new/_free/_reload: the options checked, the libcurl
 *               handle set up (timeouts, TLS), the bearer token held
 *   token.c     fx_upload_read_token(): the bearer token file
 *   url.c       the URL template (expansion, check), URLs as logged, and the
 *               growing string the URL and the headers are built in
 *   send.c      fx_upload_send(): one request (headers, body, callbacks)
 *   outcome.c   the answer: OK, RETRY or REJECT and the message (the token
 *               cut out), Retry-After, fx_upload_backoff_ms()
 *   s3_uploader.c upload.s3: the credentials, each chunk's key, metadata
 *               and signature, and what an S3 error answer means
 * Functions shared between these files are upl_<verb>.
 */
#ifndef FXAGENT_UPLOAD_INT_H
#define FXAGENT_UPLOAD_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <curl/curl.h>

#include "fxagent/s3.h"
#include "fxagent/upload.h"

#define MAX_TOKEN_BYTES 8192
#define BODY_LEN	(sizeof(((struct fx_upload_result *)0)->body) - 1)

/* upload.s3's options, copied, and the credentials. */
struct upl_s3 {
	struct fx_s3_where where; /* into the strings below */
	char *endpoint, *region, *bucket, *prefix, *storage_class, *labels;
	char *id_file, *secret_file;
	struct fx_s3_creds creds;
};

struct fx_uploader {
	CURL *curl;
	struct upl_s3 *s3; /* upload.s3, or NULL: url */
	char *url;	   /* the template */
	char *host;
	char **headers; /* the user's, validated */
	size_t n_headers;
	char *token_file;
	char *auth;	  /* "Authorization: Bearer <token>", or NULL */
	size_t token_off; /* where the token starts in auth */
	bool put;
	unsigned timeout_ms, connect_timeout_ms;
	char errbuf[CURL_ERROR_SIZE];
};

/* ---- url.c -------------------------------------------------------------- */

/* A growing string; oom sticks. */
struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

void upl_sb_putn(struct sbuf *b, const char *s, size_t n);
void upl_sb_puts(struct sbuf *b, const char *s);
/* @s as a header value: visible ASCII but '%' as is, the rest percent-encoded. */
void upl_sb_header_escaped(struct sbuf *b, const char *s);
/* RFC 3986's unreserved characters: A-Z a-z 0-9 - . _ ~ */
bool upl_is_unreserved(unsigned char c);
/* UTC ISO 8601 basic, to the second (20261121T031000Z). Returns 0 or -EINVAL. */
int upl_iso_basic(int64_t ms, char *out, size_t len);
/* The template must expand, with a scheme we speak, into a URL libcurl
 * parses. Returns 0 or -errno (logged). */
int upl_check_url(const char *tmpl, const char *host);
/* scheme://host[:port]/path of @url into @out: no user:password@, no query,
 * no fragment. */
void upl_url_for_log(const char *url, char *out, size_t len);
bool upl_is_file_url(const char *url);

/* ---- uploader.c --------------------------------------------------------- */

/* *@out a copy of @s, or NULL for NULL. Returns 0 or -ENOMEM. */
int upl_dup_str(const char *s, char **out);

/* ---- outcome.c ---------------------------------------------------------- */

/* Copies @len bytes of @src to @dst (@cap bytes with the NUL), control
 * characters made spaces and the token @tok (@tok_len bytes) replaced. */
void upl_redact_into(char *dst, size_t cap, const char *src, size_t len, const char *tok,
		     size_t tok_len);
/* res->error from @fmt, without the token. */
void upl_set_error(const struct fx_uploader *u, struct fx_upload_result *res, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The time of a "Date:" header line (@len bytes at @data, name included),
 * or -1 when the line is another header or the date is unusable. */
time_t upl_parse_date_header(const char *data, size_t len);
/* Retry-After's value (@len bytes at @v) in ms, capped; -1 when unusable. */
int64_t upl_parse_retry_after(const char *v, size_t len);
/* The outcome of an answer with status res->status; @retry_after_ms from its
 * Retry-After, or -1. @what is the request ("POST"), @shown its URL as logged. */
void upl_classify_status(struct fx_uploader *u, const char *what, const char *shown,
			 int64_t retry_after_ms, struct fx_upload_result *res);
/* The outcome of a transfer libcurl failed with @rc: always RETRY. */
void upl_classify_curl(struct fx_uploader *u, CURLcode rc, const char *what, const char *shown,
		       struct fx_upload_result *res);

/* ---- s3_uploader.c ---------------------------------------------------------- */

/* Checks and copies @o into u->s3 and loads the credentials. Returns 0 or
 * -errno (logged). */
int upl_s3_new(struct fx_uploader *u, const struct fx_upload_s3 *o);
void upl_s3_free(struct upl_s3 *s);
/* Reads the credentials again; on failure keeps those held. 0 or -errno. */
int upl_s3_reload(struct fx_uploader *u);
/* The object URL of chunk @info into *@url (malloc'ed), and the request's
 * signature set on u->curl over the body's SHA-256 @sha (hex), its headers
 * added to *@hdrs. Returns 0, or -ENOMEM (or -ENAMETOOLONG, -EINVAL: not for
 * a chunk of the spool's). */
int upl_s3_request(struct fx_uploader *u, const struct fx_chunk_info *info, const char *sha,
		   char **url, struct curl_slist **hdrs);
/* The outcome of S3's answer with status res->status and the start of its
 * body (@body, @len), its Date header @server_date (-1 if none). */
void upl_s3_classify(struct fx_uploader *u, const char *shown, const char *body, size_t len,
		     int64_t retry_after_ms, time_t server_date, struct fx_upload_result *res);

#endif
