/* SPDX-License-Identifier: MIT */
/* upload: the libcurl transport of chunks.
 *
 * An uploader is used by one thread at a time (fx_upload_reload() included):
 * it owns one easy handle, whose connection cache gives connection reuse.
 * Only an HTTP answer can reject a chunk; every transport failure (DNS,
 * connect, TLS, timeout, a failed file:// write) is RETRY, so a chunk is never
 * given up because of the network or the configuration.
 *
 * Secrets: the bearer token is never logged and never put in a result; it is
 * also cut out of a response body that echoes it. URLs in messages lose their
 * user:password@ and their query, and user header values are never logged.
 */
#include "fxagent/upload.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "fxagent/log.h"
#include "fxagent/trust.h"
#include "fxagent/util.h"

#define MAX_TOKEN_BYTES	  8192
#define MAX_RETRY_AFTER_S 3600 /* a collector asking for more gets this */
#define BODY_LEN	  (sizeof(((struct fx_upload_result *)0)->body) - 1)
#define REDACTED	  "[redacted]"

struct fx_uploader {
	CURL *curl;
	char *url; /* the template */
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

/* One transfer's state, handed to the callbacks. */
struct xfer {
	int fd;
	uint64_t size, off;
	int read_err;
	char body[BODY_LEN + MAX_TOKEN_BYTES + 1]; /* see redact_into() */
	size_t body_len, body_cap;
	bool body_cut; /* the answer went on past body_cap: not read */
	int64_t retry_after_ms;
};

/* A growing string; oom sticks. */
struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void sb_putn(struct sbuf *b, const char *s, size_t n)
{
	size_t ncap;
	char *np;

	if (b->oom)
		return;
	if (n >= SIZE_MAX / 2 - b->len) {
		b->oom = true; /* len + n + 1 and the doubling below would wrap */
		return;
	}
	if (b->len + n + 1 > b->cap) {
		ncap = b->cap ? b->cap : 128;
		while (ncap < b->len + n + 1)
			ncap *= 2;
		np = realloc(b->p, ncap);
		if (!np) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = ncap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s)
{
	sb_putn(b, s, strlen(s));
}

static void sb_pct(struct sbuf *b, unsigned char c)
{
	static const char hex[] = "0123456789ABCDEF";
	char e[3] = { '%', hex[c >> 4], hex[c & 15] };

	sb_putn(b, e, 3);
}

static bool is_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

/* RFC 3986 percent-encoding of everything but the unreserved characters. */
static void sb_url_escaped(struct sbuf *b, const char *s)
{
	for (; *s; s++) {
		if (is_unreserved((unsigned char)*s))
			sb_putn(b, s, 1);
		else
			sb_pct(b, (unsigned char)*s);
	}
}

/* Header values keep visible ASCII; '%' and anything else is percent-encoded,
 * so a strange target name cannot break the header block. */
static void sb_header_escaped(struct sbuf *b, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c > 0x20 && c < 0x7f && c != '%')
			sb_putn(b, s, 1);
		else
			sb_pct(b, c);
	}
}

/* UTC ISO 8601 basic, to the second (20261121T031000Z). */
static int iso_basic(int64_t ms, char *out, size_t len)
{
	time_t s = (time_t)(ms / 1000 - (ms % 1000 < 0));
	struct tm tm;

	if (!gmtime_r(&s, &tm) || !strftime(out, len, "%Y%m%dT%H%M%SZ", &tm))
		return -EINVAL;
	return 0;
}

static bool name_is(const char *name, size_t len, const char *want)
{
	return strlen(want) == len && !memcmp(name, want, len);
}

/* Expands @tmpl into @b. On -EINVAL, *@bad points at the faulty "{". */
static int expand(const char *tmpl, const struct fx_chunk_info *info, const char *host,
		  struct sbuf *b, const char **bad)
{
	const char *p = tmpl, *name, *end;
	char tmp[64];
	size_t n;

	while (*p) {
		if (p[0] == '{' && p[1] == '{') {
			sb_putn(b, "{", 1);
			p += 2;
			continue;
		}
		if (*p != '{') {
			n = strcspn(p, "{");
			sb_putn(b, p, n);
			p += n;
			continue;
		}
		*bad = p;
		name = p + 1;
		end = strchr(name, '}');
		if (!end)
			return -EINVAL;
		n = (size_t)(end - name);
		if (name_is(name, n, "host")) {
			sb_url_escaped(b, host);
		} else if (name_is(name, n, "target")) {
			sb_url_escaped(b, info->target);
		} else if (name_is(name, n, "id")) {
			sb_url_escaped(b, info->id);
		} else if (name_is(name, n, "seq")) {
			snprintf(tmp, sizeof(tmp), "%" PRId64, info->seq);
			sb_url_escaped(b, tmp);
		} else if (name_is(name, n, "start") || name_is(name, n, "end")) {
			if (iso_basic(name[0] == 's' ? info->start_ms : info->end_ms, tmp,
				      sizeof(tmp)))
				return -EINVAL;
			sb_url_escaped(b, tmp);
		} else {
			return -EINVAL;
		}
		p = end + 1;
	}
	return b->oom ? -ENOMEM : 0;
}

char *fx_upload_expand_url(const char *tmpl, const struct fx_chunk_info *info, const char *host)
{
	struct sbuf b = { 0 };
	const char *bad = NULL;
	int ret;

	ret = expand(tmpl, info, host, &b, &bad);
	if (!ret && !b.p)
		sb_putn(&b, "", 0);
	if (!ret && b.oom)
		ret = -ENOMEM;
	if (ret) {
		free(b.p);
		errno = -ret;
		return NULL;
	}
	return b.p;
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

/* scheme://host[:port]/path of @url: no user:password@, no query, no fragment. */
static void url_for_log(const char *url, char *out, size_t len)
{
	struct sbuf b = { 0 };
	const char *auth = url, *s, *at;
	size_t n;

	s = strstr(url, "://");
	if (s) {
		sb_putn(&b, url, (size_t)(s - url) + 3);
		auth = s + 3;
	}
	n = strcspn(auth, "/?#");
	at = memchr(auth, '@', n);
	if (at) {
		n -= (size_t)(at + 1 - auth);
		auth = at + 1;
	}
	sb_putn(&b, auth, n);
	auth += n;
	sb_putn(&b, auth, strcspn(auth, "?#"));
	snprintf(out, len, "%s", b.p && !b.oom ? b.p : "(url)");
	free(b.p);
}

static bool is_file_url(const char *url)
{
	return !strncasecmp(url, "file://", 7);
}

/* Copies @len bytes of @src to @dst (@cap bytes with the NUL), with control
 * characters made spaces (it goes to a log) and the token replaced. The caller
 * gives at least BODY_LEN + token length bytes of @src when it has them, so a
 * token starting inside what is kept is whole in @src. */
static void redact_into(char *dst, size_t cap, const char *src, size_t len, const char *tok,
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

__attribute__((format(printf, 3, 4))) static void
set_error(const struct fx_uploader *u, struct fx_upload_result *res, const char *fmt, ...)
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
	redact_into(res->error, sizeof(res->error), tmp, strnlen(tmp, sizeof(tmp)), tok,
		    tok ? strlen(tok) : 0);
}

int fx_upload_read_token(const char *path, char **auth, size_t *token_off, char *err, size_t errlen)
{
	static const char prefix[] = "Authorization: Bearer ";
	static const struct fx_trust_rules rules = { .secret = true };
	const char *what = "upload.bearer_token_file";
	char buf[MAX_TOKEN_BYTES + 1];
	size_t len = 0, start = 0, end, i;
	ssize_t n;
	char *line;
	int fd, rc = 0;

	fd = fx_trust_open(AT_FDCWD, path, what, &rules, NULL, err, errlen);
	if (fd < 0)
		return fd;
	while (len < sizeof(buf)) {
		n = read(fd, buf + len, sizeof(buf) - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s '%s' cannot be read: %s", what, path,
				 strerror(-rc));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > MAX_TOKEN_BYTES) {
		rc = -EFBIG;
		snprintf(err, errlen, "%s '%s' is more than %d bytes", what, path, MAX_TOKEN_BYTES);
		goto out;
	}
	end = len;
	while (start < end && strchr(" \t\r\n\v\f", buf[start]) && buf[start])
		start++;
	while (end > start && strchr(" \t\r\n\v\f", buf[end - 1]) && buf[end - 1])
		end--;
	if (start == end) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s '%s' is empty; it must hold the token", what, path);
		goto out;
	}
	/* Never a byte of the token in a message: only where the bad one is. */
	for (i = start; i < end; i++) {
		if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] >= 0x7f) {
			rc = -EINVAL;
			snprintf(err, errlen,
				 "%s '%s' has a space or a non-printable character at byte %zu; it "
				 "must hold one token",
				 what, path, i + 1);
			goto out;
		}
	}
	if (!auth)
		goto out;
	line = malloc(sizeof(prefix) + end - start);
	if (!line) {
		rc = -ENOMEM;
		snprintf(err, errlen, "%s '%s': out of memory", what, path);
		goto out;
	}
	memcpy(line, prefix, sizeof(prefix) - 1);
	memcpy(line + sizeof(prefix) - 1, buf + start, end - start);
	line[sizeof(prefix) - 1 + end - start] = '\0';
	*auth = line;
	*token_off = sizeof(prefix) - 1;
out:
	explicit_bzero(buf, sizeof(buf));
	close(fd);
	return rc;
}

/* The same, said in the log. */
static int read_token(const char *path, char **auth, size_t *token_off)
{
	char why[PATH_MAX + 256];
	int rc = fx_upload_read_token(path, auth, token_off, why, sizeof(why));

	return rc < 0 ? fx_log_errno(FX_LOG_ERR, -rc, "%s", why) : 0;
}

static void free_auth(char *auth)
{
	if (auth) {
		explicit_bzero(auth, strlen(auth));
		free(auth);
	}
}

static bool is_tchar(unsigned char c)
{
	return is_unreserved(c) || (c && strchr("!#$%&'*+^`|", c));
}

/* "Name: value": a token name, a non-empty value without control characters,
 * and not a header fxagent sets itself. Values are never logged (secrets). */
static int check_header(const char *h, size_t idx, bool have_token)
{
	static const char *const ours[] = { "content-type", "content-encoding", "content-length",
					    "transfer-encoding", "expect" };
	const char *v;
	size_t n = 0, i;

	while (is_tchar((unsigned char)h[n]))
		n++;
	if (!n || h[n] != ':')
		return fx_log_errno(
			FX_LOG_ERR, EINVAL,
			"upload.headers: header %zu is not \"Name: value\" (a name of letters, "
			"digits and -, then ':')",
			idx + 1);
	for (v = h + n + 1; *v == ' ' || *v == '\t'; v++)
		;
	if (!*v)
		return fx_log_errno(FX_LOG_ERR, EINVAL,
				    "upload.headers: header %zu (%.*s) has no value", idx + 1,
				    (int)n, h);
	for (; *v; v++) {
		if (((unsigned char)*v < 0x20 && *v != '\t') || *v == 0x7f)
			return fx_log_errno(
				FX_LOG_ERR, EINVAL,
				"upload.headers: header %zu (%.*s) has a control character",
				idx + 1, (int)n, h);
	}
	for (i = 0; i < sizeof(ours) / sizeof(ours[0]); i++) {
		if (strlen(ours[i]) == n && !strncasecmp(h, ours[i], n))
			goto ours;
	}
	if (n >= 10 && !strncasecmp(h, "x-fxagent-", 10))
		goto ours;
	if (have_token && n == 13 && !strncasecmp(h, "authorization", 13))
		return fx_log_errno(FX_LOG_ERR, EINVAL,
				    "upload.headers: header %zu (Authorization) clashes with "
				    "upload.bearer_token_file; keep one of them",
				    idx + 1);
	return 0;
ours:
	return fx_log_errno(
		FX_LOG_ERR, EINVAL,
		"upload.headers: header %zu (%.*s) is one fxagent sets itself; remove it", idx + 1,
		(int)n, h);
}

/* The template must expand, with a scheme we speak, into a URL libcurl parses. */
static int check_url(const char *tmpl, const char *host)
{
	struct fx_chunk_info info = {
		.start_ms = 1, .end_ms = 2, .seq = 1, .id = "0", .target = "t"
	};
	struct sbuf b = { 0 };
	const char *bad = NULL;
	CURLUcode uc;
	CURLU *cu;
	int ret;

	ret = expand(tmpl, &info, host, &b, &bad);
	if (ret == -EINVAL) {
		ret = fx_log_errno(FX_LOG_ERR, EINVAL,
				   "upload.url: unknown or unclosed placeholder \"%.40s\" (known: "
				   "{host} {target} {start} {end} {seq} {id}; \"{{\" is a \"{\")",
				   bad);
		goto out;
	}
	if (ret < 0) {
		ret = fx_log_errno(FX_LOG_ERR, -ret, "upload: out of memory");
		goto out;
	}
	/* An empty template expands to nothing at all (b.p stays NULL). */
	if (!b.p || (strncasecmp(b.p, "http://", 7) && strncasecmp(b.p, "https://", 8) &&
		     !is_file_url(b.p))) {
		ret = fx_log_errno(FX_LOG_ERR, EINVAL,
				   "upload.url must start with http://, https:// or file://");
		goto out;
	}
	cu = curl_url();
	if (!cu) {
		ret = fx_log_errno(FX_LOG_ERR, ENOMEM, "upload: out of memory");
		goto out;
	}
	uc = curl_url_set(cu, CURLUPART_URL, b.p, 0);
	curl_url_cleanup(cu);
	if (uc != CURLUE_OK) {
		char shown[256];

		url_for_log(b.p, shown, sizeof(shown));
		ret = fx_log_errno(FX_LOG_ERR, EINVAL, "upload.url %s is not a valid URL: %s",
				   shown, curl_url_strerror(uc));
	}
out:
	free(b.p);
	return ret;
}

static int check_readable(const char *what, const char *path)
{
	if (path && access(path, R_OK))
		return fx_log_errno(FX_LOG_ERR, errno, "%s %s: %s", what, path, strerror(errno));
	return 0;
}

static int dup_str(const char *s, char **out)
{
	*out = NULL;
	if (!s)
		return 0;
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

/* The options that stay for the handle's life. */
static int setup_handle(struct fx_uploader *u, const struct fx_upload_opts *o)
{
	CURL *c = u->curl;
	CURLcode rc = CURLE_OK;

	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_ERRORBUFFER, u->errbuf);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https,file");
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_USERAGENT, "fxagent/" FX_VERSION);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)o->connect_timeout_ms);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)o->timeout_ms);
	if (!rc && o->ca_file)
		rc = curl_easy_setopt(c, CURLOPT_CAINFO, o->ca_file);
	if (!rc && o->cert_file)
		rc = curl_easy_setopt(c, CURLOPT_SSLCERT, o->cert_file);
	if (!rc && o->key_file)
		rc = curl_easy_setopt(c, CURLOPT_SSLKEY, o->key_file);
	if (!rc && o->insecure_skip_verify)
		rc = curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
	if (!rc && o->insecure_skip_verify)
		rc = curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	if (rc)
		return fx_log_errno(FX_LOG_ERR, rc == CURLE_OUT_OF_MEMORY ? ENOMEM : ENOTSUP,
				    "upload: libcurl refused an option: %s",
				    curl_easy_strerror(rc));
	/* A libcurl without HTTP/2 still speaks HTTP/1.1: not fatal. */
	rc = curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	if (rc)
		fx_debug("upload: no HTTP/2 in this libcurl (%s), using HTTP/1.1",
			 curl_easy_strerror(rc));
	return 0;
}

int fx_upload_new(const struct fx_upload_opts *opts, const char *host, struct fx_uploader **out)
{
	struct fx_uploader *u;
	size_t n = 0, i;
	int ret;

	if (!opts || !opts->url || !host || !out)
		return fx_log_errno(FX_LOG_ERR, EINVAL, "upload: no url or host given");
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return fx_log_errno(FX_LOG_ERR, EIO, "upload: libcurl initialization failed: %s",
				    curl_easy_strerror(curl_init_rc));
	ret = check_url(opts->url, host);
	if (ret)
		return ret;
	for (n = 0; opts->headers && opts->headers[n]; n++) {
		ret = check_header(opts->headers[n], n, opts->bearer_token_file != NULL);
		if (ret)
			return ret;
	}
	ret = check_readable("upload.ca_file", opts->ca_file);
	if (!ret)
		ret = check_readable("upload.cert_file", opts->cert_file);
	if (!ret)
		ret = check_readable("upload.key_file", opts->key_file);
	if (ret)
		return ret;

	u = calloc(1, sizeof(*u));
	if (!u)
		return fx_log_errno(FX_LOG_ERR, ENOMEM, "upload: out of memory");
	u->put = opts->put;
	u->timeout_ms = opts->timeout_ms;
	u->connect_timeout_ms = opts->connect_timeout_ms;
	ret = dup_str(opts->url, &u->url);
	if (!ret)
		ret = dup_str(host, &u->host);
	if (!ret)
		ret = dup_str(opts->bearer_token_file, &u->token_file);
	if (!ret && n) {
		u->headers = calloc(n, sizeof(*u->headers));
		ret = u->headers ? 0 : -ENOMEM;
	}
	for (i = 0; !ret && i < n; i++) {
		u->n_headers++;
		ret = dup_str(opts->headers[i], &u->headers[i]);
	}
	if (ret) {
		ret = fx_log_errno(FX_LOG_ERR, ENOMEM, "upload: out of memory");
		goto err;
	}
	if (u->token_file) {
		ret = read_token(u->token_file, &u->auth, &u->token_off);
		if (ret)
			goto err;
	}
	u->curl = curl_easy_init();
	if (!u->curl) {
		ret = fx_log_errno(FX_LOG_ERR, ENOMEM, "upload: cannot create a libcurl handle");
		goto err;
	}
	ret = setup_handle(u, opts);
	if (ret)
		goto err;
	if (opts->insecure_skip_verify)
		fx_warn("upload: TLS certificate verification is off "
			"(upload.insecure_skip_verify): "
			"anyone on the network path can read and change the chunks");
	*out = u;
	return 0;
err:
	fx_upload_free(u);
	return ret;
}

void fx_upload_free(struct fx_uploader *u)
{
	size_t i;

	if (!u)
		return;
	if (u->curl)
		curl_easy_cleanup(u->curl);
	for (i = 0; i < u->n_headers; i++)
		free(u->headers[i]);
	free(u->headers);
	free_auth(u->auth);
	free(u->token_file);
	free(u->host);
	free(u->url);
	free(u);
}

/* A token file that cannot be read keeps the token we have: a rotation that
 * is half done must not stop the uploads. */
int fx_upload_reload(struct fx_uploader *u)
{
	size_t off = 0;
	char *auth = NULL;
	int ret;

	if (!u->token_file)
		return 0;
	ret = read_token(u->token_file, &auth, &off);
	if (ret)
		return ret;
	free_auth(u->auth);
	u->auth = auth;
	u->token_off = off;
	return 0;
}

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

/* Retry-After: delay-seconds or an HTTP date; anything else is ignored. */
static int64_t parse_retry_after(const char *v, size_t len)
{
	char buf[128];
	uint64_t s = 0;
	time_t when, now;
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
		now = time(NULL);
		s = when > now ? (uint64_t)(when - now) : 0;
	}
	if (s > MAX_RETRY_AFTER_S)
		s = MAX_RETRY_AFTER_S;
	return (int64_t)s * 1000;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *p)
{
	struct xfer *x = p;
	size_t len = size * nmemb;

	/* A status line starts a new response (after a 100 Continue, say). */
	if (len >= 5 && !memcmp(data, "HTTP/", 5))
		x->retry_after_ms = -1;
	else if (len > 12 && !strncasecmp(data, "Retry-After:", 12))
		x->retry_after_ms = parse_retry_after(data + 12, len - 12);
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
	struct curl_slist *l = NULL;
	struct sbuf b = { 0 };
	bool oom = false;
	char tmp[64];
	size_t i;

	if (u->auth) {
		sb_puts(&b, u->auth);
		l = add_line(l, &b, &oom);
		if (b.p)
			explicit_bzero(b.p, b.cap);
	}
	sb_puts(&b, "Content-Type: application/json");
	l = add_line(l, &b, &oom);
	sb_puts(&b, "Content-Encoding: gzip");
	l = add_line(l, &b, &oom);
	/* No "Expect: 100-continue" round trip: chunks are small. */
	sb_puts(&b, "Expect:");
	l = add_line(l, &b, &oom);
	sb_puts(&b, "X-Fxagent-Host: ");
	sb_header_escaped(&b, u->host);
	l = add_line(l, &b, &oom);
	sb_puts(&b, "X-Fxagent-Target: ");
	sb_header_escaped(&b, info->target);
	l = add_line(l, &b, &oom);
	sb_puts(&b, "X-Fxagent-Window-Start: ");
	sb_puts(&b, iso_basic(info->start_ms, tmp, sizeof(tmp)) ? "invalid" : tmp);
	l = add_line(l, &b, &oom);
	sb_puts(&b, "X-Fxagent-Window-End: ");
	sb_puts(&b, iso_basic(info->end_ms, tmp, sizeof(tmp)) ? "invalid" : tmp);
	l = add_line(l, &b, &oom);
	snprintf(tmp, sizeof(tmp), "%" PRId64, info->seq);
	sb_puts(&b, "X-Fxagent-Seq: ");
	sb_puts(&b, tmp);
	l = add_line(l, &b, &oom);
	sb_puts(&b, "X-Fxagent-Chunk-Id: ");
	sb_header_escaped(&b, info->id);
	l = add_line(l, &b, &oom);
	for (i = 0; i < u->n_headers; i++) {
		sb_puts(&b, u->headers[i]);
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

static void classify_status(struct fx_uploader *u, const char *what, const char *shown,
			    struct xfer *x, struct fx_upload_result *res)
{
	long st = res->status;
	char *loc = NULL;
	char where[200];

	if (st >= 200 && st < 300) {
		res->outcome = FX_UPLOAD_OK;
		return;
	}
	if ((st == 429 || st == 503) && x->retry_after_ms >= 0) {
		res->retry_after_ms = x->retry_after_ms;
		res->outcome = FX_UPLOAD_RETRY;
		set_error(u, res, "%s %s: HTTP %ld (Retry-After %" PRId64 " s)", what, shown, st,
			  x->retry_after_ms / 1000);
		return;
	}
	/* 408 is the server giving up waiting for us: transient like a 5xx. */
	if (st == 429 || st == 408 || st >= 500 || st < 300) {
		res->outcome = FX_UPLOAD_RETRY;
		set_error(u, res, "%s %s: HTTP %ld", what, shown, st);
		return;
	}
	res->outcome = FX_UPLOAD_REJECT;
	if (st < 400 && !curl_easy_getinfo(u->curl, CURLINFO_REDIRECT_URL, &loc) && loc) {
		url_for_log(loc, where, sizeof(where));
		set_error(u, res, "%s %s: HTTP %ld, redirect to %s not followed (fix upload.url)",
			  what, shown, st, where);
		return;
	}
	set_error(u, res, "%s %s: HTTP %ld", what, shown, st);
}

static void classify_curl(struct fx_uploader *u, CURLcode rc, const char *what, const char *shown,
			  struct fx_upload_result *res)
{
	const char *why = u->errbuf[0] ? u->errbuf : curl_easy_strerror(rc);

	res->outcome = FX_UPLOAD_RETRY;
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT:
		set_error(u, res, "%s %s: timeout (upload.timeout %u ms): %s", what, shown,
			  u->timeout_ms, why);
		break;
	case CURLE_PEER_FAILED_VERIFICATION:
		set_error(u, res,
			  "TLS: certificate verify failed for %s: %s; set upload.ca_file to the "
			  "CA of the collector's certificate",
			  shown, why);
		break;
	case CURLE_SSL_CACERT_BADFILE:
		set_error(u, res, "TLS: cannot use upload.ca_file for %s: %s", shown, why);
		break;
	case CURLE_SSL_CERTPROBLEM:
		set_error(u, res, "TLS: client certificate (upload.cert_file/key_file) for %s: %s",
			  shown, why);
		break;
	default:
		set_error(u, res, "%s %s: %s", what, shown, why);
		break;
	}
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
		set_error(u, res, "not sent: the agent is stopping");
		return 0;
	}
	/* Out of memory is a reason to try again, not to give the chunk up. */
	x = calloc(1, sizeof(*x));
	if (!x) {
		set_error(u, res, "out of memory");
		return 0;
	}
	x->retry_after_ms = -1;
	x->fd = fd;
	x->size = size;
	/* Enough body that a token starting in the kept part is whole. */
	x->body_cap = BODY_LEN + (u->auth ? strlen(u->auth) - u->token_off : 0);

	/* The template was checked at fx_upload_new() and gmtime() takes every
	 * int64 millisecond: only memory can fail here. */
	url = fx_upload_expand_url(u->url, info, u->host);
	hdrs = url ? build_headers(u, info) : NULL;
	if (!hdrs) {
		set_error(u, res, "out of memory making the request for chunk %s", info->id);
		goto out;
	}
	file = is_file_url(url);
	what = file ? "write" : u->put ? "PUT" : "POST";
	url_for_log(url, shown, sizeof(shown));

	u->errbuf[0] = '\0';
	rc = set_transfer(u, url, file, hdrs, x);
	if (!rc) {
		rc = curl_easy_perform(u->curl);
		curl_easy_getinfo(u->curl, CURLINFO_RESPONSE_CODE, &res->status);
	}
	curl_easy_setopt(u->curl, CURLOPT_HTTPHEADER, NULL);
	redact_into(res->body, sizeof(res->body), x->body, x->body_len,
		    u->auth ? u->auth + u->token_off : NULL,
		    u->auth ? strlen(u->auth) - u->token_off : 0);
	if (x->read_err) {
		ret = -x->read_err;
		res->outcome = FX_UPLOAD_RETRY;
		set_error(u, res, "cannot read chunk %s: %s", info->id, strerror(x->read_err));
	} else if (rc && !(rc == CURLE_WRITE_ERROR && x->body_cut && res->status)) {
		classify_curl(u, rc, what, shown, res);
	} else if (file) {
		res->outcome = FX_UPLOAD_OK;
	} else {
		classify_status(u, what, shown, x, res);
	}
out:
	curl_slist_free_all(hdrs);
	free(url);
	free(x);
	return ret;
}
