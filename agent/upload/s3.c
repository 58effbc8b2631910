/* SPDX-License-Identifier: MIT */
/* s3: credentials, keys, URLs, signing and errors of an S3 store; see
 * include/fxagent/s3.h. The signing itself is libcurl's (CURLOPT_AWS_SIGV4).
 */
#include "fxagent/s3.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <openssl/evp.h>

#include "fxagent/trust.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static char *dup_env_secret(const char *name, const char *what, char *err, size_t errlen, int *rc)
{
	const char *v = getenv(name);
	size_t n;

	*rc = 0;
	if (!v || !v[0])
		return NULL;
	n = strlen(v);
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f) {
			snprintf(err, errlen,
				 "%s: %s has a space or a non-printable character at "
				 "byte %zu",
				 what, name, i + 1);
			*rc = -EINVAL;
			return NULL;
		}
	}
	if (n > FX_S3_SECRET_MAX) {
		snprintf(err, errlen, "%s: %s is more than %d bytes", what, name, FX_S3_SECRET_MAX);
		*rc = -EFBIG;
		return NULL;
	}
	char *d = strdup(v);

	if (!d) {
		snprintf(err, errlen, "%s: out of memory", what);
		*rc = -ENOMEM;
	}
	return d;
}

int fx_s3_creds_load(struct fx_s3_creds *c, const char *what, const char *id_file,
		     const char *secret_file, char *err, size_t errlen)
{
	char key[128];
	int rc = 0;

	memset(c, 0, sizeof(*c));
	if (!id_file != !secret_file) {
		snprintf(err, errlen,
			 "%s: set both access_key_id_file and secret_access_key_file, "
			 "or neither (then AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
			 what);
		return -EINVAL;
	}
	if (id_file) {
		snprintf(key, sizeof(key), "%s.access_key_id_file", what);
		rc = fx_trust_read_secret(id_file, key, FX_S3_SECRET_MAX, &c->key_id, NULL, err,
					  errlen);
		snprintf(key, sizeof(key), "%s.secret_access_key_file", what);
		if (!rc)
			rc = fx_trust_read_secret(secret_file, key, FX_S3_SECRET_MAX, &c->secret,
						  NULL, err, errlen);
	} else {
		c->key_id = dup_env_secret("AWS_ACCESS_KEY_ID", what, err, errlen, &rc);
		if (!rc)
			c->secret = dup_env_secret("AWS_SECRET_ACCESS_KEY", what, err, errlen, &rc);
		if (!rc)
			c->token = dup_env_secret("AWS_SESSION_TOKEN", what, err, errlen, &rc);
		if (!rc && (!c->key_id || !c->secret)) {
			snprintf(err, errlen,
				 "%s: no credentials: set access_key_id_file and "
				 "secret_access_key_file, or AWS_ACCESS_KEY_ID and "
				 "AWS_SECRET_ACCESS_KEY in the environment (%s is not set)",
				 what, c->key_id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
			rc = -ENOKEY;
		}
	}
	if (!rc && strchr(c->key_id, ':')) {
		snprintf(err, errlen, "%s: the access key id has a ':'", what);
		rc = -EINVAL;
	}
	if (rc)
		fx_s3_creds_wipe(c);
	return rc;
}

static void wipe_str(char **s)
{
	if (*s) {
		explicit_bzero(*s, strlen(*s));
		free(*s);
		*s = NULL;
	}
}

void fx_s3_creds_wipe(struct fx_s3_creds *c)
{
	wipe_str(&c->key_id);
	wipe_str(&c->secret);
	wipe_str(&c->token);
}

/* ---- URLs and keys ---- */

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

/* Appends @s encoded to @out at *@n (@cap with the NUL); '/' kept with @path. */
static int escape_into(const char *s, bool path, char *out, size_t cap, size_t *n)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (unreserved(c) || (path && c == '/')) {
			if (*n + 1 >= cap)
				return -ENAMETOOLONG;
			out[(*n)++] = (char)c;
			continue;
		}
		if (*n + 3 >= cap)
			return -ENAMETOOLONG;
		out[(*n)++] = '%';
		out[(*n)++] = hex[c >> 4];
		out[(*n)++] = hex[c & 15];
	}
	out[*n] = '\0';
	return 0;
}

int fx_s3_query_escape(const char *s, char *out, size_t cap)
{
	size_t n = 0;
	int rc;

	if (!cap)
		return -ENAMETOOLONG;
	rc = escape_into(s, false, out, cap, &n);
	return rc ? rc : (int)n;
}

/* An endpoint named by an IP address or localhost has no DNS for
 * bucket.host: path style then, as AWS's own CLI does. @host is as libcurl
 * gives it (an IPv6 address in brackets). */
static bool path_style_host(const char *host)
{
	struct in_addr a;

	return host[0] == '[' || inet_pton(AF_INET, host, &a) == 1 ||
	       !strcasecmp(host, "localhost");
}

char *fx_s3_url(const struct fx_s3_where *w, const char *key, const char *query)
{
	char def[160], *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *out = NULL;
	const char *ep = w->endpoint;
	size_t cap, n = 0, total;
	bool path_style;
	CURLU *u = NULL;

	if (!ep) {
		snprintf(def, sizeof(def), "https://s3.%s.amazonaws.com", w->region);
		ep = def;
	}
	/* libcurl's URL API takes the endpoint apart; the URL is put together
	 * here, since its API would lower-case the path's %XX and SigV4 signs
	 * them upper-case, as S3 does. */
	u = curl_url();
	if (!u || curl_url_set(u, CURLUPART_URL, ep, 0) ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0))
		goto out;
	if (strcmp(scheme, "http") && strcmp(scheme, "https"))
		goto out;
	if (curl_url_get(u, CURLUPART_PORT, &port, 0))
		port = NULL;
	path_style = w->path_style || path_style_host(host);
	cap = 3 * (strlen(w->bucket) + (key ? strlen(key) : 0)) + 8;
	path = malloc(cap);
	if (!path)
		goto out;
	/* cap holds every byte encoded, the two '/' and the NUL */
	path[n++] = '/';
	path[n] = '\0';
	if (path_style) {
		if (escape_into(w->bucket, false, path, cap, &n))
			goto out;
		path[n++] = '/';
		path[n] = '\0';
	}
	if (key && escape_into(key, true, path, cap, &n))
		goto out;
	total = strlen(scheme) + strlen(w->bucket) + strlen(host) + (port ? strlen(port) : 0) + n +
		(query ? strlen(query) : 0) + 16;
	out = malloc(total);
	if (out)
		snprintf(out, total, "%s://%s%s%s%s%s%s%s%s", scheme, path_style ? "" : w->bucket,
			 path_style ? "" : ".", host, port ? ":" : "", port ? port : "", path,
			 query ? "?" : "", query ? query : "");
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	free(path);
	return out;
}

void fx_s3_key_part(const char *s, char *out, size_t cap)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < cap; i++) {
		out[i] = s[i];
		if (!unreserved((unsigned char)s[i]) || s[i] == '~')
			out[i] = '_';
	}
	out[i] = '\0';
}

static int iso_basic(int64_t ms, char *out, size_t len, struct tm *tm)
{
	time_t t;

	if (ms < 0 || ms / 1000 > (int64_t)253402300799) /* 9999-12-31 */
		return -EINVAL;
	t = (time_t)(ms / 1000);
	if (!gmtime_r(&t, tm) || !strftime(out, len, "%Y%m%dT%H%M%SZ", tm))
		return -EINVAL;
	return 0;
}

int fx_s3_chunk_key(const char *prefix, const struct fx_chunk_info *info, const char *host,
		    char *out, size_t len)
{
	char start[32], end[32], t[sizeof(info->target)], h[256];
	struct tm tm, tm_end;
	int n;

	if (iso_basic(info->start_ms, start, sizeof(start), &tm) ||
	    iso_basic(info->end_ms, end, sizeof(end), &tm_end))
		return -EINVAL;
	fx_s3_key_part(info->target, t, sizeof(t));
	fx_s3_key_part(host, h, sizeof(h));
	if (len > FX_S3_KEY_MAX + 1)
		len = FX_S3_KEY_MAX + 1;
	n = snprintf(out, len, "%s%s/%04d/%02d/%02d/%02d/%s/%s-%s-%s.json.gz", prefix, t,
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, h, start, end,
		     info->id);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int fx_s3_hour_prefix(const char *target, int64_t ms, char *out, size_t len)
{
	char t[128], iso[32];
	struct tm tm;
	int n;

	if (ms < 0)
		ms = 0;
	if (iso_basic(ms, iso, sizeof(iso), &tm))
		return -EINVAL;
	fx_s3_key_part(target, t, sizeof(t));
	n = snprintf(out, len, "%s/%04d/%02d/%02d/%02d/", t, tm.tm_year + 1900, tm.tm_mon + 1,
		     tm.tm_mday, tm.tm_hour);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* "YYYYMMDDTHHMMSSZ" at @s (exactly 16 bytes) in ms. */
static int parse_iso(const char *s, int64_t *ms)
{
	struct tm tm = { 0 };
	char *end;

	end = strptime(s, "%Y%m%dT%H%M%SZ", &tm);
	if (!end || end - s != 16)
		return -EINVAL;
	*ms = (int64_t)timegm(&tm) * 1000;
	return 0;
}

int fx_s3_parse_key(const char *rest, struct fx_s3_key_parts *p)
{
	const char *seg[7];
	char iso[17];
	size_t n = 0, len;
	const char *s = rest;

	/* target / YYYY / MM / DD / HH / host / name */
	seg[n++] = s;
	while (n < 7 && (s = strchr(s, '/'))) {
		s++;
		seg[n++] = s;
	}
	if (n != 7 || strchr(seg[6], '/'))
		return -EINVAL;
	len = (size_t)(seg[1] - seg[0] - 1);
	if (!len || len >= sizeof(p->target))
		return -EINVAL;
	memcpy(p->target, seg[0], len);
	p->target[len] = '\0';
	len = (size_t)(seg[6] - seg[5] - 1);
	if (!len || len >= sizeof(p->host))
		return -EINVAL;
	memcpy(p->host, seg[5], len);
	p->host[len] = '\0';
	/* <start>-<end>-<id>.json.gz */
	len = strlen(seg[6]);
	if (len < 16 + 1 + 16 + 1 + 1 + 8 || seg[6][16] != '-' || seg[6][33] != '-' ||
	    strcmp(seg[6] + len - 8, ".json.gz"))
		return -EINVAL;
	memcpy(iso, seg[6], 16);
	iso[16] = '\0';
	if (parse_iso(iso, &p->start_ms))
		return -EINVAL;
	memcpy(iso, seg[6] + 17, 16);
	if (parse_iso(iso, &p->end_ms) || p->end_ms < p->start_ms)
		return -EINVAL;
	return 0;
}

/* ---- signing ---- */

int fx_s3_sign(CURL *c, const struct fx_s3_creds *cr, const char *region, const char *sha256_hex,
	       struct curl_slist **hdrs)
{
	char sigv4[96], line[160];
	struct curl_slist *l;
	CURLcode rc;

	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", region);
	rc = curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_USERNAME, cr->key_id);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_PASSWORD, cr->secret);
	if (rc)
		return rc == CURLE_OUT_OF_MEMORY ? -ENOMEM : -ENOTSUP;
	if (!hdrs)
		return 0;
	snprintf(line, sizeof(line), "x-amz-content-sha256: %s",
		 sha256_hex ? sha256_hex : EMPTY_SHA256);
	l = curl_slist_append(*hdrs, line);
	if (!l)
		return -ENOMEM;
	*hdrs = l;
	if (cr->token) {
		size_t n = strlen(cr->token) + 32;
		char *t = malloc(n);

		if (!t)
			return -ENOMEM;
		snprintf(t, n, "x-amz-security-token: %s", cr->token);
		l = curl_slist_append(*hdrs, t);
		explicit_bzero(t, n);
		free(t);
		if (!l)
			return -ENOMEM;
		*hdrs = l;
	}
	return 0;
}

int fx_s3_sha256_fd(int fd, uint64_t size, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE], buf[65536];
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint64_t off = 0;
	unsigned mdlen = 0;
	ssize_t n;
	int rc = 0;

	if (!ctx)
		return -ENOMEM;
	if (!EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		rc = -EIO;
		goto out;
	}
	while (off < size) {
		size_t want = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);

		n = pread(fd, buf, want, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			goto out;
		}
		if (!EVP_DigestUpdate(ctx, buf, (size_t)n)) {
			rc = -EIO;
			goto out;
		}
		off += (uint64_t)n;
	}
	if (!EVP_DigestFinal_ex(ctx, md, &mdlen) || mdlen != 32) {
		rc = -EIO;
		goto out;
	}
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
out:
	EVP_MD_CTX_free(ctx);
	return rc;
}

/* ---- errors ---- */

static pthread_once_t xml_once = PTHREAD_ONCE_INIT;

static void xml_init(void)
{
	xmlInitParser();
}

static void copy_text(xmlNode *n, char *out, size_t cap)
{
	xmlChar *t = xmlNodeGetContent(n);
	size_t i;

	out[0] = '\0';
	if (!t)
		return;
	snprintf(out, cap, "%s", (const char *)t);
	for (i = 0; out[i]; i++) {
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
			out[i] = ' ';
	}
	xmlFree(t);
}

void fx_s3_parse_error(const char *body, size_t len, char *code, size_t code_len, char *msg,
		       size_t msg_len)
{
	xmlDoc *doc;
	xmlNode *root, *n;

	code[0] = msg[0] = '\0';
	/* S3's errors have no DTD: one with a DTD (entities, a billion
	 * laughs) is not S3's, and is not parsed. */
	if (!body || !len || len > INT32_MAX || memmem(body, len, "<!", 2))
		return;
	pthread_once(&xml_once, xml_init);
	/* No network, no entities expanded, no DTD; a body cut short is read
	 * as far as it goes. */
	doc = xmlReadMemory(body, (int)len, "error.xml", NULL,
			    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
				    XML_PARSE_RECOVER | XML_PARSE_NOBLANKS);
	if (!doc)
		return;
	root = xmlDocGetRootElement(doc);
	if (root && !xmlStrcmp(root->name, (const xmlChar *)"Error")) {
		for (n = root->children; n; n = n->next) {
			if (n->type != XML_ELEMENT_NODE)
				continue;
			if (!xmlStrcmp(n->name, (const xmlChar *)"Code"))
				copy_text(n, code, code_len);
			else if (!xmlStrcmp(n->name, (const xmlChar *)"Message"))
				copy_text(n, msg, msg_len);
		}
	}
	xmlFreeDoc(doc);
}
