/* SPDX-License-Identifier: MIT */
/* fx_upload_send(): one request on the uploader's handle. The body is read
 * from the chunk's fd as libcurl asks for it (and again when it rewinds);
 * of the answer, only the start of the body and Retry-After are kept.
 */
#include "upload_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/util.h"

/* One transfer's state, handed to the callbacks. */
struct xfer {
	int fd;
	uint64_t size, off;
	int read_err;
	char body[BODY_LEN + MAX_TOKEN_BYTES + 1]; /* see upl_redact_into() */
	size_t body_len, body_cap;
	bool body_cut; /* the answer went on past body_cap: not read */
	int64_t retry_after_ms;
	time_t server_date; /* the answer's Date, or -1 */
};

static size_t on_read(char *buf, size_t size, size_t nmemb, void *p)
{
	struct xfer *x = p;
	size_t want = size * nmemb;
	ssize_t n;

	if (x->off >= x->size)
		return 0;
	if (want > x->size - x->off)
		want = (size_t)(x->size - x->off);
	do {
		n = pread(x->fd, buf, want, (off_t)x->off);
	} while (n < 0 && errno == EINTR);
	if (n <= 0) {
		x->read_err = n < 0 ? errno : EIO; /* EIO: the file shrank under us */
		return CURL_READFUNC_ABORT;
	}
	x->off += (uint64_t)n;
	return (size_t)n;
}

/* libcurl rewinds when it sends again on a fresh connection. */
static int on_seek(void *p, curl_off_t offset, int origin)
{
	struct xfer *x = p;

	if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > x->size)
		return CURL_SEEKFUNC_CANTSEEK;
	x->off = (uint64_t)offset;
	return CURL_SEEKFUNC_OK;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *p)
{
	struct xfer *x = p;
	size_t len = size * nmemb, n = len;

	if (n > x->body_cap - x->body_len)
		n = x->body_cap - x->body_len;
	memcpy(x->body + x->body_len, data, n);
	x->body_len += n;
	/* The status is known by now; the rest of a long answer (a collector
	 * gone wrong could send gigabytes) is not read at all: a short count
	 * ends the transfer (CURLE_WRITE_ERROR), and the connection with it. */
	if (n < len) {
		x->body_cut = true;
		return n;
	}
	return len;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *p)
{
	struct xfer *x = p;
	size_t len = size * nmemb;
	time_t date = upl_parse_date_header(data, len);

	/* A status line starts a new response (after a 100 Continue, say). */
	if (len >= 5 && !memcmp(data, "HTTP/", 5)) {
		x->retry_after_ms = -1;
		x->server_date = -1;
	} else if (len > 12 && !strncasecmp(data, "Retry-After:", 12)) {
		x->retry_after_ms = upl_parse_retry_after(data + 12, len - 12);
	} else if (date != -1) {
		x->server_date = date;
	}
	return len;
}

static struct curl_slist *add_line(struct curl_slist *l, struct sbuf *b, bool *oom)
{
	struct curl_slist *nl;

	if (*oom || b->oom || !b->p) {
		*oom = true;
		return l;
	}
	nl = curl_slist_append(l, b->p);
	if (!nl)
		*oom = true;
	b->len = 0;
	b->p[0] = '\0';
	return nl ? nl : l;
}

static struct curl_slist *build_headers(const struct fx_uploader *u,
					const struct fx_chunk_info *info)
{
	/* The same fields: headers for a collector, an object's metadata in S3. */
	const char *meta = u->s3 ? "x-amz-meta-fxagent-" : "X-Fxagent-";
	struct curl_slist *l = NULL;
	struct sbuf b = { 0 };
	bool oom = false;
	char tmp[64];
	size_t i;

	if (u->auth) {
		upl_sb_puts(&b, u->auth);
		l = add_line(l, &b, &oom);
		if (b.p)
			explicit_bzero(b.p, b.cap);
	}
	upl_sb_puts(&b, "Content-Type: application/json");
	l = add_line(l, &b, &oom);
	upl_sb_puts(&b, "Content-Encoding: gzip");
	l = add_line(l, &b, &oom);
	/* No "Expect: 100-continue" round trip: chunks are small. Not for S3:
	 * libcurl 7.88 signs the empty header it then does not send, and the
	 * store refuses the signature (checked with radosgw). */
	if (!u->s3) {
		upl_sb_puts(&b, "Expect:");
		l = add_line(l, &b, &oom);
	}
	upl_sb_puts(&b, meta);
	upl_sb_puts(&b, "Host: ");
	upl_sb_header_escaped(&b, u->host);
	l = add_line(l, &b, &oom);
	upl_sb_puts(&b, meta);
	upl_sb_puts(&b, "Target: ");
	upl_sb_header_escaped(&b, info->target);
	l = add_line(l, &b, &oom);
	upl_sb_puts(&b, meta);
	upl_sb_puts(&b, "Window-Start: ");
	upl_sb_puts(&b, upl_iso_basic(info->start_ms, tmp, sizeof(tmp)) ? "invalid" : tmp);
	l = add_line(l, &b, &oom);
	upl_sb_puts(&b, meta);
	upl_sb_puts(&b, "Window-End: ");
	upl_sb_puts(&b, upl_iso_basic(info->end_ms, tmp, sizeof(tmp)) ? "invalid" : tmp);
	l = add_line(l, &b, &oom);
	snprintf(tmp, sizeof(tmp), "%" PRId64, info->seq);
	upl_sb_puts(&b, meta);
	upl_sb_puts(&b, "Seq: ");
	upl_sb_puts(&b, tmp);
	l = add_line(l, &b, &oom);
	upl_sb_puts(&b, meta);
	upl_sb_puts(&b, "Chunk-Id: ");
	upl_sb_header_escaped(&b, info->id);
	l = add_line(l, &b, &oom);
	if (u->s3 && u->s3->labels) {
		upl_sb_puts(&b, "x-amz-meta-fxagent-Labels: ");
		upl_sb_header_escaped(&b, u->s3->labels);
		l = add_line(l, &b, &oom);
	}
	if (u->s3) {
		upl_sb_puts(&b, "x-amz-meta-fxagent-Format: firefox-profiler-processed-66");
		l = add_line(l, &b, &oom);
	}
	if (u->s3 && u->s3->storage_class) {
		upl_sb_puts(&b, "x-amz-storage-class: ");
		upl_sb_puts(&b, u->s3->storage_class);
		l = add_line(l, &b, &oom);
	}
	for (i = 0; i < u->n_headers; i++) {
		upl_sb_puts(&b, u->headers[i]);
		l = add_line(l, &b, &oom);
	}
	free(b.p);
	if (oom) {
		curl_slist_free_all(l);
		return NULL;
	}
	return l;
}

/* Sets the per-chunk options: URL, method, body, callbacks. */
static CURLcode set_transfer(struct fx_uploader *u, const char *url, bool file,
			     struct curl_slist *hdrs, struct xfer *x)
{
	CURL *c = u->curl;
	CURLcode rc;

	rc = curl_easy_setopt(c, CURLOPT_URL, url);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_READDATA, x);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_SEEKDATA, x);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	/* file:// only writes with an upload, whatever the method. The other
	 * method is switched off first: each setter resets the request type. */
	if (u->put || file) {
		if (!rc)
			rc = curl_easy_setopt(c, CURLOPT_POST, 0L);
		if (!rc)
			rc = curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		if (!rc)
			rc = curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->size);
	} else {
		if (!rc)
			rc = curl_easy_setopt(c, CURLOPT_UPLOAD, 0L);
		if (!rc)
			rc = curl_easy_setopt(c, CURLOPT_POST, 1L);
		if (!rc)
			rc = curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->size);
	}
	return rc;
}

/* The whole-request and connect timeouts of one request: the configured
 * ones, cut to what is left before @deadline_ns (CLOCK_MONOTONIC; 0 = none).
 * Returns false when nothing is left. */
static bool set_timeouts(struct fx_uploader *u, uint64_t deadline_ns)
{
	uint64_t total = u->timeout_ms, conn = u->connect_timeout_ms;

	if (deadline_ns) {
		uint64_t now = fx_now_ns(CLOCK_MONOTONIC);
		uint64_t left = now < deadline_ns ? (deadline_ns - now) / 1000000ull : 0;

		if (left < 1)
			return false;
		if (!total || total > left)
			total = left;
		if (!conn || conn > left)
			conn = left;
	}
	curl_easy_setopt(u->curl, CURLOPT_TIMEOUT_MS, (long)total);
	curl_easy_setopt(u->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)conn);
	return true;
}

int fx_upload_send(struct fx_uploader *u, const struct fx_chunk_info *info, int fd, uint64_t size,
		   uint64_t deadline_ns, struct fx_upload_result *res)
{
	struct curl_slist *hdrs = NULL;
	struct xfer *x;
	const char *what;
	char shown[160];
	char *url = NULL;
	bool file;
	CURLcode rc;
	int ret = 0;

	memset(res, 0, sizeof(*res));
	res->outcome = FX_UPLOAD_RETRY;
	res->retry_after_ms = -1;
	if (!set_timeouts(u, deadline_ns)) {
		upl_set_error(u, res, "not sent: the agent is stopping");
		return 0;
	}
	/* Out of memory is a reason to try again, not to give the chunk up. */
	x = calloc(1, sizeof(*x));
	if (!x) {
		upl_set_error(u, res, "out of memory");
		return 0;
	}
	x->retry_after_ms = -1;
	x->server_date = -1;
	x->fd = fd;
	x->size = size;
	/* Enough body that a token starting in the kept part is whole; S3's
	 * XML error, as far as it fits. */
	x->body_cap = u->s3 ? sizeof(x->body) - 1
			    : BODY_LEN + (u->auth ? strlen(u->auth) - u->token_off : 0);

	hdrs = build_headers(u, info);
	if (hdrs && u->s3) {
		char sha[65];

		ret = fx_s3_sha256_fd(fd, size, sha);
		if (ret) {
			upl_set_error(u, res, "cannot read chunk %s: %s", info->id, strerror(-ret));
			goto out;
		}
		if (upl_s3_request(u, info, sha, &url, &hdrs)) {
			free(url); /* said below as what it is: memory */
			url = NULL;
		}
	} else if (hdrs) {
		/* The template was checked at fx_upload_new() and gmtime() takes
		 * every int64 millisecond: only memory can fail here. */
		url = fx_upload_expand_url(u->url, info, u->host);
	}
	if (!hdrs || !url) {
		upl_set_error(u, res, "out of memory making the request for chunk %s", info->id);
		goto out;
	}
	file = upl_is_file_url(url);
	what = file ? "write" : u->put ? "PUT" : "POST";
	upl_url_for_log(url, shown, sizeof(shown));

	u->errbuf[0] = '\0';
	rc = set_transfer(u, url, file, hdrs, x);
	if (!rc) {
		rc = curl_easy_perform(u->curl);
		curl_easy_getinfo(u->curl, CURLINFO_RESPONSE_CODE, &res->status);
	}
	curl_easy_setopt(u->curl, CURLOPT_HTTPHEADER, NULL);
	upl_redact_into(res->body, sizeof(res->body), x->body, x->body_len,
			u->auth ? u->auth + u->token_off : NULL,
			u->auth ? strlen(u->auth) - u->token_off : 0);
	if (x->read_err) {
		ret = -x->read_err;
		res->outcome = FX_UPLOAD_RETRY;
		upl_set_error(u, res, "cannot read chunk %s: %s", info->id, strerror(x->read_err));
	} else if (rc && !(rc == CURLE_WRITE_ERROR && x->body_cut && res->status)) {
		upl_classify_curl(u, rc, what, shown, res);
	} else if (file) {
		res->outcome = FX_UPLOAD_OK;
	} else if (u->s3) {
		upl_s3_classify(u, shown, x->body, x->body_len, x->retry_after_ms, x->server_date,
				res);
	} else {
		upl_classify_status(u, what, shown, x->retry_after_ms, res);
	}
out:
	curl_slist_free_all(hdrs);
	free(url);
	free(x);
	return ret;
}
