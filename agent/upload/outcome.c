/* SPDX-License-Identifier: MIT */
/* What an answer means: OK on 2xx; RETRY on 5xx, 408, 429 and every transport
 * failure; REJECT on the other 4xx and 3xx. The message for the log says
 * which, with the token cut out. Also when to try again: Retry-After, and
 * the backoff with jitter.
 */
#include "upload_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_RETRY_AFTER_S 3600 /* a collector asking for more gets this */
#define REDACTED	  "[redacted]"

/* Copies @len bytes of @src to @dst (@cap bytes with the NUL), with control
 * characters made spaces (it goes to a log) and the token replaced. The caller
 * gives at least BODY_LEN + token length bytes of @src when it has them, so a
 * token starting inside what is kept is whole in @src. */
void upl_redact_into(char *dst, size_t cap, const char *src, size_t len, const char *tok,
		     size_t tok_len)
{
	size_t i = 0, o = 0, r;

	while (i < len && o + 1 < cap) {
		if (tok_len && len - i >= tok_len && !memcmp(src + i, tok, tok_len)) {
			for (r = 0; REDACTED[r] && o + 1 < cap; r++)
				dst[o++] = REDACTED[r];
			i += tok_len;
			continue;
		}
		dst[o++] = (char)((unsigned char)src[i] < 0x20 || src[i] == 0x7f ? ' ' : src[i]);
		i++;
	}
	dst[o] = '\0';
}

void upl_set_error(const struct fx_uploader *u, struct fx_upload_result *res, const char *fmt, ...)
{
	char tmp[sizeof(res->error) + MAX_TOKEN_BYTES];
	const char *tok = u->auth ? u->auth + u->token_off : NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		tmp[0] = '\0';
	upl_redact_into(res->error, sizeof(res->error), tmp, strnlen(tmp, sizeof(tmp)), tok,
			tok ? strlen(tok) : 0);
}

time_t upl_parse_date_header(const char *data, size_t len)
{
	char d[128];

	if (len <= 5 || len >= sizeof(d) + 5 || strncasecmp(data, "Date:", 5))
		return -1;
	memcpy(d, data + 5, len - 5);
	d[len - 5] = '\0';
	return curl_getdate(d, NULL);
}

/* Retry-After: delay-seconds or an HTTP date; anything else is ignored. */
int64_t upl_parse_retry_after(const char *v, size_t len)
{
	char buf[128];
	struct timespec now;
	uint64_t s = 0;
	int64_t ms;
	time_t when;
	size_t i;

	while (len && (*v == ' ' || *v == '\t')) {
		v++;
		len--;
	}
	while (len && strchr(" \t\r\n", v[len - 1]))
		len--;
	if (!len || len >= sizeof(buf))
		return -1;
	memcpy(buf, v, len);
	buf[len] = '\0';
	if (strspn(buf, "0123456789") == len) {
		for (i = 0; i < len && s <= MAX_RETRY_AFTER_S; i++)
			s = s * 10 + (uint64_t)(buf[i] - '0');
	} else {
		when = curl_getdate(buf, NULL);
		if (when == -1)
			return -1;
		/*
		 * To the millisecond, from the precise clock: time() reads the
		 * coarse one, which may still show the second before the
		 * collector's, and a date 3 s ahead became 4 s.
		 */
		clock_gettime(CLOCK_REALTIME, &now);
		if (when > now.tv_sec + MAX_RETRY_AFTER_S)
			return (int64_t)MAX_RETRY_AFTER_S * 1000;
		ms = ((int64_t)when - now.tv_sec) * 1000 - now.tv_nsec / 1000000;
		return ms > 0 ? ms : 0;
	}
	if (s > MAX_RETRY_AFTER_S)
		s = MAX_RETRY_AFTER_S;
	return (int64_t)s * 1000;
}

void upl_classify_status(struct fx_uploader *u, const char *what, const char *shown,
			 int64_t retry_after_ms, struct fx_upload_result *res)
{
	long st = res->status;
	char *loc = NULL;
	char where[200];

	if (st >= 200 && st < 300) {
		res->outcome = FX_UPLOAD_OK;
		return;
	}
	if ((st == 429 || st == 503) && retry_after_ms >= 0) {
		res->retry_after_ms = retry_after_ms;
		res->outcome = FX_UPLOAD_RETRY;
		upl_set_error(u, res, "%s %s: HTTP %ld (Retry-After %" PRId64 " s)", what, shown,
			      st, retry_after_ms / 1000);
		return;
	}
	/* 408 is the server giving up waiting for us: transient like a 5xx. */
	if (st == 429 || st == 408 || st >= 500 || st < 300) {
		res->outcome = FX_UPLOAD_RETRY;
		upl_set_error(u, res, "%s %s: HTTP %ld", what, shown, st);
		return;
	}
	res->outcome = FX_UPLOAD_REJECT;
	if (st < 400 && !curl_easy_getinfo(u->curl, CURLINFO_REDIRECT_URL, &loc) && loc) {
		upl_url_for_log(loc, where, sizeof(where));
		upl_set_error(u, res,
			      "%s %s: HTTP %ld, redirect to %s not followed (fix upload.url)", what,
			      shown, st, where);
		return;
	}
	upl_set_error(u, res, "%s %s: HTTP %ld", what, shown, st);
}

void upl_classify_curl(struct fx_uploader *u, CURLcode rc, const char *what, const char *shown,
		       struct fx_upload_result *res)
{
	const char *why = u->errbuf[0] ? u->errbuf : curl_easy_strerror(rc);

	res->outcome = FX_UPLOAD_RETRY;
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT:
		upl_set_error(u, res, "%s %s: timeout (upload.timeout %u ms): %s", what, shown,
			      u->timeout_ms, why);
		break;
	case CURLE_PEER_FAILED_VERIFICATION:
		upl_set_error(
			u, res,
			"TLS: certificate verify failed for %s: %s; set upload.ca_file to the "
			"CA of the collector's certificate",
			shown, why);
		break;
	case CURLE_SSL_CACERT_BADFILE:
		upl_set_error(u, res, "TLS: cannot use upload.ca_file for %s: %s", shown, why);
		break;
	case CURLE_SSL_CERTPROBLEM:
		upl_set_error(u, res,
			      "TLS: client certificate (upload.cert_file/key_file) for %s: %s",
			      shown, why);
		break;
	default:
		upl_set_error(u, res, "%s %s: %s", what, shown, why);
		break;
	}
}

uint64_t fx_upload_backoff_ms(unsigned attempt, uint64_t initial_ms, uint64_t max_ms,
			      int64_t retry_after_ms, uint64_t random)
{
	uint64_t d = initial_ms, lo, span, wait;
	unsigned i;

	for (i = 0; i < attempt && d < max_ms; i++)
		d = d > UINT64_MAX / 2 ? UINT64_MAX : d * 2;
	if (d > max_ms)
		d = max_ms;
	lo = d / 2;
	span = d - lo + 1; /* [d/2, d] has d - d/2 + 1 values; no overflow */
	wait = lo + random % span;
	if (retry_after_ms >= 0 && wait < (uint64_t)retry_after_ms)
		wait = (uint64_t)retry_after_ms;
	return wait;
}
