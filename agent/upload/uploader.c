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
 *
 * This file makes, reloads and frees an uploader: the options checked, the
 * handle's lasting options (timeouts, TLS) set. How the files of
 * agent/upload/ divide the rest is said in upload_int.h.
 */
#include "upload_int.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "fxagent/log.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* The same, said in the log. The message holds the reason already (and
 * strerror() where there is one): fx_log_errno() would say it twice. */
static int read_token(const char *path, char **auth, size_t *token_off)
{
	char why[PATH_MAX + 256];
	int rc = fx_upload_read_token(path, auth, token_off, why, sizeof(why));

	if (rc < 0)
		fx_err("%s", why);
	return rc;
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
	return upl_is_unreserved(c) || (c && strchr("!#$%&'*+^`|", c));
}

/* "Name: value": a token name, a non-empty value without control characters,
 * and not a header fxagent sets itself. Values are never logged (secrets). */
static int check_header(const char *h, size_t idx, bool have_token)
{
	static const char *const ours[] = { "content-type",
					    "content-encoding",
					    "content-length",
					    "transfer-encoding",
					    "expect",
					    "x-amz-content-sha256",
					    "x-amz-date",
					    "x-amz-security-token",
					    "x-amz-storage-class" };
	const char *v;
	size_t n = 0, i;

	while (is_tchar((unsigned char)h[n]))
		n++;
	if (!n || h[n] != ':') {
		fx_err("upload.headers: header %zu is not \"Name: value\" (a name of letters, "
		       "digits and -, then ':')",
		       idx + 1);
		return -EINVAL;
	}
	for (v = h + n + 1; *v == ' ' || *v == '\t'; v++)
		;
	if (!*v) {
		fx_err("upload.headers: header %zu (%.*s) has no value", idx + 1, (int)n, h);
		return -EINVAL;
	}
	for (; *v; v++) {
		if (((unsigned char)*v < 0x20 && *v != '\t') || *v == 0x7f) {
			fx_err("upload.headers: header %zu (%.*s) has a control character", idx + 1,
			       (int)n, h);
			return -EINVAL;
		}
	}
	for (i = 0; i < sizeof(ours) / sizeof(ours[0]); i++) {
		if (strlen(ours[i]) == n && !strncasecmp(h, ours[i], n))
			goto ours;
	}
	if ((n >= 10 && !strncasecmp(h, "x-fxagent-", 10)) ||
	    (n >= 19 && !strncasecmp(h, "x-amz-meta-fxagent-", 19)))
		goto ours;
	if (have_token && n == 13 && !strncasecmp(h, "authorization", 13)) {
		fx_err("upload.headers: header %zu (Authorization) clashes with "
		       "upload.bearer_token_file or upload.s3; keep one of them",
		       idx + 1);
		return -EINVAL;
	}
	return 0;
ours:
	fx_err("upload.headers: header %zu (%.*s) is one fxagent sets itself; remove it", idx + 1,
	       (int)n, h);
	return -EINVAL;
}

static int check_readable(const char *what, const char *path)
{
	if (path && access(path, R_OK))
		return fx_log_errno(FX_LOG_ERR, errno, "%s %s", what, path);
	return 0;
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
	if (rc) {
		fx_err("upload: libcurl refused an option: %s", curl_easy_strerror(rc));
		return rc == CURLE_OUT_OF_MEMORY ? -ENOMEM : -ENOTSUP;
	}
	/* A libcurl without HTTP/2 still speaks HTTP/1.1: not fatal. */
	rc = curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	if (rc)
		fx_debug("upload: no HTTP/2 in this libcurl (%s), using HTTP/1.1",
			 curl_easy_strerror(rc));
	return 0;
}

/* What can be checked before anything is made: libcurl, the URL template,
 * the headers (*@nheaders of them) and that the TLS files can be read.
 * Returns 0 or -errno (logged). */
static int check_opts(const struct fx_upload_opts *opts, const char *host, size_t *nheaders)
{
	size_t n;
	int ret;

	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		fx_err("upload: libcurl initialization failed: %s",
		       curl_easy_strerror(curl_init_rc));
		return -EIO;
	}
	if (opts->s3 && (opts->url || opts->bearer_token_file)) {
		fx_err("upload: %s and upload.s3 are both set; keep one",
		       opts->url ? "upload.url" : "upload.bearer_token_file");
		return -EINVAL;
	}
	ret = opts->s3 ? 0 : upl_check_url(opts->url, host);
	if (ret)
		return ret;
	for (n = 0; opts->headers && opts->headers[n]; n++) {
		ret = check_header(opts->headers[n], n, opts->bearer_token_file || opts->s3);
		if (ret)
			return ret;
	}
	ret = check_readable("upload.ca_file", opts->ca_file);
	if (!ret)
		ret = check_readable("upload.cert_file", opts->cert_file);
	if (!ret)
		ret = check_readable("upload.key_file", opts->key_file);
	if (!ret)
		*nheaders = n;
	return ret;
}

/* Copies into @u the options it keeps: the strings and the @n headers.
 * Returns 0 or -ENOMEM (not logged). */
static int copy_opts(struct fx_uploader *u, const struct fx_upload_opts *opts, const char *host,
		     size_t n)
{
	size_t i;
	int ret;

	u->put = opts->put;
	u->timeout_ms = opts->timeout_ms;
	u->connect_timeout_ms = opts->connect_timeout_ms;
	ret = upl_dup_str(opts->url, &u->url);
	if (!ret)
		ret = upl_dup_str(host, &u->host);
	if (!ret)
		ret = upl_dup_str(opts->bearer_token_file, &u->token_file);
	if (!ret && n) {
		u->headers = calloc(n, sizeof(*u->headers));
		ret = u->headers ? 0 : -ENOMEM;
	}
	for (i = 0; !ret && i < n; i++) {
		u->n_headers++;
		ret = upl_dup_str(opts->headers[i], &u->headers[i]);
	}
	return ret;
}

int fx_upload_new(const struct fx_upload_opts *opts, const char *host, struct fx_uploader **out)
{
	struct fx_uploader *u;
	size_t n = 0;
	int ret;

	if (!opts || (!opts->url && !opts->s3) || !host || !out) {
		fx_err("upload: no url, s3 or host given");
		return -EINVAL;
	}
	ret = check_opts(opts, host, &n);
	if (ret)
		return ret;
	u = calloc(1, sizeof(*u));
	if (!u) {
		fx_err("upload: out of memory");
		return -ENOMEM;
	}
	ret = copy_opts(u, opts, host, n);
	if (ret) {
		fx_err("upload: out of memory");
		goto err;
	}
	if (u->token_file) {
		ret = read_token(u->token_file, &u->auth, &u->token_off);
		if (ret)
			goto err;
	}
	if (opts->s3) {
		ret = upl_s3_new(u, opts->s3);
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
	upl_s3_free(u->s3);
	free(u->token_file);
	free(u->host);
	free(u->url);
	free(u);
}

/* A token file (or S3's credentials) that cannot be read keeps what we
 * have: a rotation that is half done must not stop the uploads. */
int fx_upload_reload(struct fx_uploader *u)
{
	size_t off = 0;
	char *auth = NULL;
	int ret;

	if (u->s3)
		return upl_s3_reload(u);
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
