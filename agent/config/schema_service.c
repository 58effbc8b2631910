/* SPDX-License-Identifier: MIT */
/* The sections of the running service: upload (URL template, headers, TLS
 * files, timeouts, retry), spool, metrics and log.
 */
#include "config_int.h"
#include "fxagent/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define URL_MAX		2048
#define HEADER_NAME_MAX 64
/* A header line ("Name: value") must fit the uploader's 512-byte buffer. */
#define HEADER_VALUE_MAX 256

/* The upload URL template, checked as far as it can be without libcurl: a
 * scheme the uploader speaks, a host for http(s), and only the placeholders
 * fx_upload_expand_url() knows ("{{" is a literal "{"). Null means no upload. */
static int get_url(struct ctx *x, const struct node *n, const char *path, char **out)
{
	static const char *const schemes[] = { "http://", "https://", "file://" };
	static const char *const names[] = { "host", "target", "start", "end", "seq", "id" };
	const char *what = "a URL starting with http://, https:// or file://";
	const char *ph = "placeholders among {host} {target} {start} {end} {seq} {id} (\"{{\" for "
			 "a literal \"{\")";
	char buf[SHOW_BUF], w[96];
	const char *s, *p, *end;
	size_t len, i, sl = 0;
	int r;

	r = cfg_check_optional(x, n, path, out);
	if (r)
		return r < 0 ? r : 0;
	r = cfg_get_text(x, n, path, what, &s, &len);
	if (r)
		return r;
	snprintf(w, sizeof(w), "a URL of at most %d bytes without spaces (a space is %%20)",
		 URL_MAX);
	if (len > URL_MAX || memchr(s, ' ', len))
		return cfg_expected_str(x, n, path, w);
	for (i = 0; i < NUNITS(schemes); i++) {
		sl = strlen(schemes[i]);
		if (len > sl && !strncasecmp(s, schemes[i], sl))
			break;
	}
	/* http(s) (the first two) needs a host; file:///path has an empty one. */
	if (i == NUNITS(schemes) || (i < 2 && strchr("/?#", s[sl])))
		return cfg_expected_str(x, n, path, what);
	for (p = s; p < s + len; p++) {
		if (*p != '{')
			continue;
		if (p + 1 < s + len && p[1] == '{') {
			p++;
			continue;
		}
		end = memchr(p, '}', (size_t)(s + len - p));
		if (!end)
			return fail(x, n, path, "expected %s, got %s with no closing \"}\"", ph,
				    cfg_show(p, (size_t)(s + len - p), true, buf, sizeof(buf)));
		for (i = 0; i < NUNITS(names); i++)
			if ((size_t)(end - p - 1) == strlen(names[i]) &&
			    !memcmp(p + 1, names[i], strlen(names[i])))
				break;
		if (i == NUNITS(names))
			return fail(x, n, path, "expected %s, got %s", ph,
				    cfg_show(p, (size_t)(end + 1 - p), true, buf, sizeof(buf)));
		p = end;
	}
	return cfg_set_str(x, out, s, len);
}

static bool is_header_name(const char *s, size_t len)
{
	size_t i;

	if (!len || len > HEADER_NAME_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* A header the uploader sets itself. Authorization comes from
 * bearer_token_file, which keeps the token out of a file many can read. */
static bool is_ours(const char *s, size_t len)
{
	static const char *const ours[] = { "Authorization",	 "Content-Type",
					    "Content-Encoding",	 "Content-Length",
					    "Transfer-Encoding", "Expect" };
	size_t i;

	if (len >= 10 && !strncasecmp(s, "X-Fxagent-", 10))
		return true;
	for (i = 0; i < NUNITS(ours); i++)
		if (len == strlen(ours[i]) && !strncasecmp(s, ours[i], len))
			return true;
	return false;
}

/* The name of the header at @i in mapping @n: valid, not set before in any
 * case, not one of ours. Its key path goes into @sub (PATH_BUF bytes). */
static int get_header_name(struct ctx *x, const struct node *n, size_t i, const char *path,
			   char *sub)
{
	const struct node *key = n->kid[i];
	char buf[SHOW_BUF];
	size_t j;
	int r;

	r = cfg_check_node(x, key, path);
	if (r)
		return r;
	if (key->type != N_SCALAR || !is_header_name(key->str, key->len))
		return fail(
			x, key, path,
			"expected a header name of 1 to %d characters from A-Z a-z 0-9 -, got %s",
			HEADER_NAME_MAX, cfg_describe(key, true, buf, sizeof(buf)));
	cfg_child_path(sub, path, key->str);
	for (j = 0; j < i; j += 2)
		if (n->kid[j]->len == key->len && !strncasecmp(n->kid[j]->str, key->str, key->len))
			return fail(x, key, sub,
				    "duplicate key (first at line %zu, column %zu; header names "
				    "ignore case)",
				    n->kid[j]->line, n->kid[j]->col);
	if (is_ours(key->str, key->len))
		return fail(x, key, sub,
			    "expected a header fxagent does not set itself (Authorization, "
			    "Content-Type, Content-Encoding, Content-Length, Transfer-Encoding, "
			    "Expect, X-Fxagent-*), got %s%s",
			    cfg_show(key->str, key->len, true, buf, sizeof(buf)),
			    key->len == 13 && !strncasecmp(key->str, "Authorization", 13)
				    ? " (the token goes in upload.bearer_token_file)"
				    : "");
	return 0;
}

/* A header value: printable ASCII, not empty, not only spaces. *@v points
 * into @n. */
static int get_header_value(struct ctx *x, const struct node *n, const char *path, const char **v,
			    size_t *vlen)
{
	char what[128];
	size_t j, sp = 0;
	int r;

	snprintf(what, sizeof(what),
		 "a header value of 1 to %d printable ASCII characters (not only spaces)",
		 HEADER_VALUE_MAX);
	r = cfg_get_text(x, n, path, what, v, vlen);
	if (r)
		return r;
	for (j = 0; j < *vlen; j++) {
		if ((unsigned char)(*v)[j] > 0x7e)
			return cfg_expected_str(x, n, path, what);
		sp += (*v)[j] == ' ';
	}
	if (!*vlen || *vlen > HEADER_VALUE_MAX || sp == *vlen)
		return cfg_expected_str(x, n, path, what);
	return 0;
}

/* Extra request headers: a map of names to values. Names ignore case (as in
 * HTTP), so "x-team" and "X-Team" are one header. */
static int get_headers(struct ctx *x, const struct node *n, const char *path)
{
	char sub[PATH_BUF];
	const char *v;
	size_t i, vlen;
	int r;

	r = cfg_check_node(x, n, path);
	if (r || cfg_is_null(n))
		return r;
	if (n->type != N_MAP)
		return cfg_expected(x, n, path, "a mapping of header names to values");
	for (i = 0; i + 1 < n->nkid; i += 2) {
		const struct node *key = n->kid[i];

		r = get_header_name(x, n, i, path, sub);
		if (r)
			return r;
		if (x->c->upload.nheaders == FX_CONFIG_MAX_LABELS)
			return fail(x, key, sub, "expected at most %d headers, got more",
				    FX_CONFIG_MAX_LABELS);
		r = get_header_value(x, n->kid[i + 1], sub, &v, &vlen);
		if (r)
			return r;
		r = cfg_set_label(x, x->c->upload.headers, &x->c->upload.nheaders, key->str,
				  key->len, v, vlen);
		if (r)
			return r;
	}
	return 0;
}

int cfg_get_log(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "level" };
	static const char *const levels[] = { "error", "warning", "notice", "info", "debug" };
	static const int values[] = { FX_LOG_ERR, FX_LOG_WARN, FX_LOG_NOTICE, FX_LOG_INFO,
				      FX_LOG_DEBUG };
	const struct node *v[1], *k[1];
	size_t idx = 0;
	int r;

	r = cfg_get_map(x, n, "log", "a mapping", keys, 1, v, k);
	if (!r && v[0]) {
		r = cfg_get_enum(x, v[0], "log.level", "one of error, warning, notice, info, debug",
				 levels, 5, &idx);
		if (!r)
			x->c->log.level = values[idx];
	}
	return r;
}

static int get_retry(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "initial_backoff", "max_backoff" };
	const struct node *v[2], *k[2];
	int r;

	r = cfg_get_map(x, n, "upload.retry", "a mapping", keys, 2, v, k);
	if (!r && v[0])
		r = cfg_get_duration(x, v[0], "upload.retry.initial_backoff", 100, 3600000, 1,
				     &x->c->upload.initial_backoff_ms);
	if (!r && v[1])
		r = cfg_get_duration(x, v[1], "upload.retry.max_backoff", 100, 24 * 3600000, 1,
				     &x->c->upload.max_backoff_ms);
	/* Blame the key the file set; with both set, the maximum. (The defaults
	 * are in order: with neither set there is nothing to blame.) */
	if (!r && (v[0] || v[1]) && x->c->upload.max_backoff_ms < x->c->upload.initial_backoff_ms)
		r = v[1] ? cfg_duration_order(x, v[1], "upload.retry.max_backoff", true,
					      "initial_backoff", x->c->upload.initial_backoff_ms)
			 : cfg_duration_order(x, v[0], "upload.retry.initial_backoff", false,
					      "max_backoff", x->c->upload.max_backoff_ms);
	return r;
}

enum { URL, METHOD, HEADERS, TOKEN, CA, CERT, KEY, INSECURE, CONNECT, TIMEOUT, RETRY, S3, NK };
static const char *const upload_keys[NK] = { "url",
					     "method",
					     "headers",
					     "bearer_token_file",
					     "ca_file",
					     "cert_file",
					     "key_file",
					     "insecure_skip_verify",
					     "connect_timeout",
					     "timeout",
					     "retry",
					     "s3" };

/* The bearer token file and the TLS files, among the values @v and keys @k
 * of the upload section. */
static int get_files(struct ctx *x, const struct node *const *v, const struct node *const *k)
{
	struct fx_config *c = x->c;
	char **files[] = { &c->upload.bearer_token_file, &c->upload.ca_file, &c->upload.cert_file,
			   &c->upload.key_file };
	char sub[PATH_BUF];
	size_t i;
	int r = 0;

	for (i = TOKEN; i <= KEY && !r; i++) {
		if (!v[i])
			continue;
		cfg_child_path(sub, "upload", upload_keys[i]);
		r = cfg_get_opt_path(x, v[i], sub, files[i - TOKEN]);
	}
	/* Either one alone is a half-configured client certificate. */
	if (!r && !c->upload.cert_file != !c->upload.key_file)
		r = fail(x, c->upload.cert_file ? k[CERT] : k[KEY], "upload",
			 "expected both cert_file and key_file, got only %s",
			 c->upload.cert_file ? "cert_file" : "key_file");
	return r;
}

/* connect_timeout and timeout, among the values @v of the upload section. */
static int get_timeouts(struct ctx *x, const struct node *const *v)
{
	struct fx_config *c = x->c;
	uint64_t u;
	int r = 0;

	if (v[CONNECT]) {
		r = cfg_get_duration(x, v[CONNECT], "upload.connect_timeout", 100, 600000, 1, &u);
		if (!r)
			c->upload.connect_timeout_ms = (unsigned)u;
	}
	if (!r && v[TIMEOUT]) {
		r = cfg_get_duration(x, v[TIMEOUT], "upload.timeout", 1000, 3600000, 1, &u);
		if (!r)
			c->upload.timeout_ms = (unsigned)u;
	}
	/* The whole request includes its connect. */
	if (!r && c->upload.timeout_ms < c->upload.connect_timeout_ms)
		r = v[TIMEOUT] ? cfg_duration_order(x, v[TIMEOUT], "upload.timeout", true,
						    "connect_timeout", c->upload.connect_timeout_ms)
			       : cfg_duration_order(x, v[CONNECT], "upload.connect_timeout", false,
						    "timeout", c->upload.timeout_ms);
	return r;
}

/* S3's rules for a bucket's name (3-63 of a-z 0-9 . -, a letter or digit
 * first); the rest of them (last, "..") the store checks. */
static bool bucket_char(unsigned char c, size_t i)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (i && (c == '.' || c == '-'));
}

static bool region_char(unsigned char c, size_t i)
{
	(void)i;
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

static bool class_char(unsigned char c, size_t i)
{
	(void)i;
	return (c >= 'A' && c <= 'Z') || c == '_';
}

/* A prefix: printable ASCII, not starting with '/' (S3 keys would start
 * with an empty segment). */
static bool prefix_char(unsigned char c, size_t i)
{
	return c > 0x20 && c < 0x7f && (i || c != '/');
}

/* http(s)://host[:port] and nothing after it but a '/'. */
static int get_endpoint(struct ctx *x, const struct node *n, char **out)
{
	const char *what = "an http:// or https:// URL of a host, such as https://s3.example.com "
			   "or http://127.0.0.1:7480 (no path)";
	const char *path = "upload.s3.endpoint";
	const char *s, *h;
	size_t len;
	int r;

	r = cfg_get_text(x, n, path, what, &s, &len);
	if (r)
		return r;
	h = !strncasecmp(s, "https://", 8) ? s + 8 : !strncasecmp(s, "http://", 7) ? s + 7 : NULL;
	if (!h || h == s + len || len > URL_MAX || memchr(s, ' ', len) || strchr("/?#@", *h))
		return cfg_expected_str(x, n, path, what);
	for (const char *p = h; p < s + len; p++) {
		if (strchr("?#@", *p) || (*p == '/' && p != s + len - 1))
			return cfg_expected_str(x, n, path, what);
	}
	return cfg_set_str(x, out, s, len - (s[len - 1] == '/'));
}

static int get_s3(struct ctx *x, const struct node *n)
{
	enum { BUCKET, REGION, ENDPOINT, PREFIX, ID_FILE, SECRET_FILE, PATH_STYLE, CLASS, NS };
	static const char *const keys[NS] = { "bucket",
					      "region",
					      "endpoint",
					      "prefix",
					      "access_key_id_file",
					      "secret_access_key_file",
					      "path_style",
					      "storage_class" };
	struct fx_config *c = x->c;
	const struct node *v[NS], *k[NS];
	char sub[PATH_BUF];
	int r;

	r = cfg_get_map(x, n, "upload.s3", "a mapping", keys, NS, v, k);
	if (r)
		return r;
	if (!v[BUCKET] || !v[REGION])
		return fail(x, n, "upload.s3", "expected %s",
			    v[BUCKET]
				    ? "region, the bucket's region (us-east-1 for most stores but "
				      "AWS)"
				    : "bucket, the bucket to write to");
	r = cfg_get_word(x, v[BUCKET], "upload.s3.bucket",
			 "a bucket's name: 3 to 63 of a-z 0-9 . -, a letter or digit first", 3, 63,
			 bucket_char, &c->upload.s3.bucket);
	if (!r)
		r = cfg_get_word(x, v[REGION], "upload.s3.region",
				 "a region such as eu-west-1 (a-z 0-9 -, up to 32)", 1, 32,
				 region_char, &c->upload.s3.region);
	if (!r && v[ENDPOINT])
		r = get_endpoint(x, v[ENDPOINT], &c->upload.s3.endpoint);
	if (!r && v[PREFIX])
		r = cfg_get_word(x, v[PREFIX], "upload.s3.prefix",
				 "a key prefix of up to 512 printable characters, no space, not "
				 "starting with '/' (such as fleet/)",
				 0, 512, prefix_char, &c->upload.s3.prefix);
	for (size_t i = ID_FILE; !r && i <= SECRET_FILE; i++) {
		if (!v[i])
			continue;
		cfg_child_path(sub, "upload.s3", keys[i]);
		r = cfg_get_opt_path(x, v[i], sub,
				     i == ID_FILE ? &c->upload.s3.access_key_id_file
						  : &c->upload.s3.secret_access_key_file);
	}
	if (!r && !c->upload.s3.access_key_id_file != !c->upload.s3.secret_access_key_file)
		r = fail(x, n, "upload.s3",
			 "expected both access_key_id_file and secret_access_key_file, or neither "
			 "(then AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the environment)");
	if (!r && v[PATH_STYLE])
		r = cfg_get_bool(x, v[PATH_STYLE], "upload.s3.path_style",
				 &c->upload.s3.path_style);
	if (!r && v[CLASS])
		r = cfg_get_word(x, v[CLASS], "upload.s3.storage_class",
				 "a storage class such as STANDARD_IA (A-Z _)", 1, 32, class_char,
				 &c->upload.s3.storage_class);
	return r;
}

int cfg_get_upload(struct ctx *x, const struct node *n)
{
	static const char *const methods[] = { "POST", "PUT" };
	struct fx_config *c = x->c;
	const struct node *v[NK], *k[NK];
	size_t idx = 0;
	int r;

	r = cfg_get_map(x, n, "upload", "a mapping", upload_keys, NK, v, k);
	if (!r && v[URL])
		r = get_url(x, v[URL], "upload.url", &c->upload.url);
	if (!r && v[METHOD]) {
		r = cfg_get_enum(x, v[METHOD], "upload.method", "POST or PUT", methods, 2, &idx);
		if (!r)
			c->upload.put = idx == 1;
	}
	if (!r && v[HEADERS])
		r = get_headers(x, v[HEADERS], "upload.headers");
	if (!r)
		r = get_files(x, v, k);
	if (!r && v[INSECURE])
		r = cfg_get_bool(x, v[INSECURE], "upload.insecure_skip_verify",
				 &c->upload.insecure_skip_verify);
	if (!r)
		r = get_timeouts(x, v);
	if (!r && v[RETRY])
		r = get_retry(x, v[RETRY]);
	if (!r && v[S3] && !cfg_is_null(v[S3]))
		r = get_s3(x, v[S3]);
	/* One place for the chunks; a token is for url alone (method too, but
	 * the shipped file sets it: with s3 it is not used). */
	if (!r && c->upload.s3.bucket && (c->upload.url || c->upload.bearer_token_file))
		r = fail(x, k[S3], "upload",
			 "expected one of url and s3, got s3 with %s (S3 requests are signed "
			 "with the s3 credentials)",
			 c->upload.url ? "url" : "bearer_token_file");
	return r;
}

int cfg_get_spool(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "directory", "max_bytes", "max_age" };
	const struct node *v[3], *k[3];
	uint64_t u;
	int r;

	r = cfg_get_map(x, n, "spool", "a mapping", keys, 3, v, k);
	if (!r && v[0])
		r = cfg_get_abs_path(x, v[0], "spool.directory", "an absolute path", false,
				     &x->c->spool.directory);
	if (!r && v[1])
		r = cfg_get_size(x, v[1], "spool.max_bytes", 1ull << 20, 1ull << 40,
				 &x->c->spool.max_bytes);
	if (!r && v[2]) {
		/* Stored in seconds: a fraction of one would be lost. */
		r = cfg_get_duration(x, v[2], "spool.max_age", 0, 365ull * 86400000, 1000, &u);
		if (!r)
			x->c->spool.max_age_s = u / 1000;
	}
	return r;
}

int cfg_get_metrics(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "textfile" };
	const struct node *v[1], *k[1];
	int r;

	r = cfg_get_map(x, n, "metrics", "a mapping", keys, 1, v, k);
	if (!r && v[0])
		r = cfg_get_opt_path(x, v[0], "metrics.textfile", &x->c->metrics.textfile);
	/* node_exporter's textfile collector reads *.prom and nothing else. */
	if (!r && v[0] && x->c->metrics.textfile) {
		const char *t = x->c->metrics.textfile;
		size_t len = strlen(t);
		char buf[SHOW_BUF];

		if (len < 6 || strcmp(t + len - 5, ".prom") || t[len - 6] == '/')
			r = fail(x, v[0], "metrics.textfile",
				 "expected a file name ending in .prom (node_exporter's textfile "
				 "collector reads only *.prom files), got %s",
				 cfg_describe(v[0], true, buf, sizeof(buf)));
	}
	return r;
}
