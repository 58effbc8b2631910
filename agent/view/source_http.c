/* SPDX-License-Identifier: MIT */
/* source_http: chunks on an HTTP server. A URL ending in '/' is a directory
 * the server lists as JSON, the way nginx does with `autoindex on;
 * autoindex_format json;`:
 *   [ { "name":"a", "type":"directory", "mtime":"..." },
 *     { "name":"x.json.gz", "type":"file", "mtime":"...", "size":123 } ]
 * walked recursively; any other URL is one file.
 *
 * The server is not trusted: every request has a connect and a total timeout
 * and a low-speed limit, follows no redirect (a 3xx is an error naming where it
 * points), speaks only http and https, and reads at most a bound (a listing
 * 64 MiB, a chunk FX_SOURCE_MAX_BYTES). TLS is verified as libcurl does by
 * default. A user:password@ in the URL is sent as basic auth and kept out of
 * every name and message; FXAGENT_VIEW_TOKEN, when set, is sent as a bearer
 * token and never logged.
 *
 * Listings are fetched one at a time on one handle; chunks, by up to
 * h->parallel transfers of one multi handle (4; s3: 16), so at most that many bodies are in
 * memory at once.
 */
#include "source_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <yajl/yajl_tree.h>

#include "fxagent/log.h"
#include "fxagent/util.h"

#define PARALLEL	  4  /* an HTTP server's */
#define PARALLEL_MAX	  16 /* src_http.parallel's bound */
#define LISTING_MAX_BYTES (64u << 20)
#define CONNECT_TIMEOUT_S 10L
/* A stalled transfer ends after LOW_SPEED_TIME_S below LOW_SPEED_BYTES/s;
 * one that trickles, at TIMEOUT_S, long enough for a chunk at the bound at
 * about 1 MB/s (chunks are a few MB). */
#define TIMEOUT_S	 300L
#define LOW_SPEED_BYTES	 1024L
#define LOW_SPEED_TIME_S 30L
#define TOKEN_ENV	 "FXAGENT_VIEW_TOKEN"
#define AUTH_PREFIX	 "Authorization: Bearer "

/* One transfer of read_each(). */
struct xfer {
	CURL *curl;
	size_t index;
	bool busy; /* holds item index, in flight or done */
	bool done; /* ended (err, or the body in b), not yet handed over */
	int err;
	struct body b;
	char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct body *b = arg;
	size_t n = size * nmemb, ncap;
	char *np;

	if (n > b->max - b->len) {
		b->over = true;
		return 0; /* ends the transfer: CURLE_WRITE_ERROR */
	}
	if (b->len + n + 1 > b->cap) {
		ncap = b->cap ? b->cap : 64 * 1024;
		while (ncap < b->len + n + 1)
			ncap *= 2;
		if (ncap > b->max + 1)
			ncap = b->max + 1;
		np = realloc(b->p, ncap);
		if (!np) {
			b->oom = true;
			return 0;
		}
		b->p = np;
		b->cap = ncap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
	return n;
}

void src_body_reset(struct body *b, size_t max)
{
	free(b->p);
	*b = (struct body){ .max = max };
}

/* @url as it may be logged: without user:password@ (a Location header's). */
static void url_shown(const char *url, char *out, size_t len)
{
	const char *auth = strstr(url, "://"), *at;
	size_t n;

	auth = auth ? auth + 3 : url;
	n = strcspn(auth, "/?#");
	at = memchr(auth, '@', n);
	if (at)
		snprintf(out, len, "%.*s%s", (int)(auth - url), url, at + 1);
	else
		snprintf(out, len, "%s", url);
}

static int curl_errno(CURLcode rc)
{
	switch (rc) {
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	default:
		return -EIO;
	}
}

int src_http_setup(const struct src_http *h, CURL *c, const char *url, struct body *b, char *errbuf,
		   void *priv)
{
	CURLcode rc;

	curl_easy_reset(c);
	errbuf[0] = '\0';
	rc = curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_URL, url);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_USERAGENT, "fxagent/" FX_VERSION);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_TIMEOUT, TIMEOUT_S);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, LOW_SPEED_BYTES);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, LOW_SPEED_TIME_S);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)b->max);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	if (!rc)
		rc = curl_easy_setopt(c, CURLOPT_PRIVATE, priv);
	if (!rc && h->headers)
		rc = curl_easy_setopt(c, CURLOPT_HTTPHEADER, h->headers);
	if (!rc && h->user)
		rc = curl_easy_setopt(c, CURLOPT_USERNAME, h->user);
	if (!rc && h->password)
		rc = curl_easy_setopt(c, CURLOPT_PASSWORD, h->password);
	/* The headers (the payload's hash) were made at open. */
	if (!rc && h->s3_region && fx_s3_sign(c, &h->s3, h->s3_region, NULL, NULL))
		rc = CURLE_OUT_OF_MEMORY;
	if (rc) {
		fx_err("view: libcurl refused an option for '%s': %s", url, curl_easy_strerror(rc));
		return rc == CURLE_OUT_OF_MEMORY ? -ENOMEM : -ENOTSUP;
	}
	return 0;
}

int src_http_outcome(const struct src_http *h, CURL *c, CURLcode rc, const struct body *b,
		     const char *errbuf, const char *verb, const char *url, bool ignoring)
{
	enum fx_log_level lvl = ignoring ? FX_LOG_WARN : FX_LOG_ERR;
	const char *ign = ignoring ? ", ignoring it" : "";
	char *loc = NULL;
	char where[512];
	long st = 0;
	bool dir;
	size_t n;

	if (b->over || rc == CURLE_FILESIZE_EXCEEDED) {
		fx_log(lvl, "cannot %s '%s'%s: more than %zu bytes, the most read", verb, url, ign,
		       b->max);
		return -EFBIG;
	}
	if (b->oom) {
		fx_log(lvl, "cannot %s '%s'%s: out of memory", verb, url, ign);
		return -ENOMEM;
	}
	if (rc != CURLE_OK) {
		fx_log(lvl, "cannot %s '%s'%s: %s", verb, url, ign,
		       errbuf[0] ? errbuf : curl_easy_strerror(rc));
		return curl_errno(rc);
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	if (st >= 300 && st < 400) {
		if (curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &loc) || !loc)
			loc = "nowhere";
		url_shown(loc, where, sizeof(where));
		n = strlen(url);
		/* How servers answer a directory named without its '/'. */
		dir = !strncmp(where, url, n) && !strcmp(where + n, "/");
		fx_log(lvl, "cannot %s '%s'%s: HTTP %ld, a redirect to '%s', not followed%s", verb,
		       url, ign, st, where, dir ? " (a directory? end the URL with '/')" : "");
		return -EIO;
	}
	if ((st < 200 || st >= 300) && h->s3_region) {
		char code[64], msg[256];

		fx_s3_parse_error(b->p, b->len, code, sizeof(code), msg, sizeof(msg));
		fx_log(lvl, "cannot %s '%s'%s: HTTP %ld %s: %s", verb, url, ign, st,
		       code[0] ? code : "(no S3 error code)", msg[0] ? msg : "no message");
	} else if (st < 200 || st >= 300) {
		fx_log(lvl, "cannot %s '%s'%s: HTTP %ld", verb, url, ign, st);
	}
	if (st < 200 || st >= 300) {
		if (st == 404 || st == 410)
			return -ENOENT;
		return st == 401 || st == 403 ? -EACCES : -EIO;
	}
	return 0;
}

/* ---- listing ---- */

/* sub-delims of RFC 3986 stay as they are, like the unreserved characters. */
static bool keep_in_path(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       (c && strchr("-._~!$&'()*+,;=", c));
}

/* @base (ending in '/') + @name percent-encoded + '/' when @dir. */
static char *url_join(const char *base, const char *name, bool dir)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(base), k = strlen(name);
	char *p, *q;

	if (k > (SIZE_MAX - n - 2) / 3)
		return NULL;
	p = malloc(n + 3 * k + 2);
	if (!p)
		return NULL;
	memcpy(p, base, n);
	q = p + n;
	for (; *name; name++) {
		unsigned char c = (unsigned char)*name;

		if (keep_in_path(c)) {
			*q++ = (char)c;
		} else {
			*q++ = '%';
			*q++ = hex[c >> 4];
			*q++ = hex[c & 15];
		}
	}
	if (dir)
		*q++ = '/';
	*q = '\0';
	return p;
}

/* yajl's error text is several lines (the input, a caret): the first says it. */
static void first_line(char *s)
{
	s[strcspn(s, "\r\n")] = '\0';
}

/* Takes the entries of the listing @tree of @url: files into @l, the URLs of
 * directories into *subs (*nsubs of them). */
static int take_entries(yajl_val tree, const char *url, unsigned depth, struct src_list *l,
			char ***subs, size_t *nsubs)
{
	static const char *name_path[] = { "name", NULL };
	static const char *type_path[] = { "type", NULL };
	static const char *size_path[] = { "size", NULL };
	size_t i, cap = 0;
	int ret;

	for (i = 0; i < tree->u.array.len; i++) {
		yajl_val v = tree->u.array.values[i];
		yajl_val name = yajl_tree_get(v, name_path, yajl_t_string);
		yajl_val type = yajl_tree_get(v, type_path, yajl_t_string);
		yajl_val size = yajl_tree_get(v, size_path, yajl_t_number);
		const char *nm = YAJL_GET_STRING(name), *ty = YAJL_GET_STRING(type);
		char *u;

		/* An entry without a name or type, or with one we do not know
		 * (nginx says "other" for what is neither), is passed over. */
		if (!nm || !ty || !nm[0] || !strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		ret = src_list_visit(l);
		if (ret)
			return ret;
		if (!strcmp(ty, "directory")) {
			if (src_is_skipped_dir(nm))
				continue;
			if (depth >= SRC_MAX_DEPTH) {
				fx_warn("view: '%s%s/' is more than %u directories deep, ignoring "
					"it",
					url, nm, SRC_MAX_DEPTH);
				continue;
			}
			u = url_join(url, nm, true);
			if (!u || fx_grow(subs, &cap, *nsubs + 1, sizeof(**subs))) {
				free(u);
				return src_list_add(l, NULL, 0); /* says out of memory */
			}
			(*subs)[(*nsubs)++] = u;
		} else if (!strcmp(ty, "file") && src_is_chunk_name(nm)) {
			ret = src_list_add(l, url_join(url, nm, false),
					   YAJL_IS_INTEGER(size) && YAJL_GET_INTEGER(size) >= 0
						   ? (int64_t)YAJL_GET_INTEGER(size)
						   : -1);
			if (ret)
				return ret;
		}
	}
	return 0;
}

int src_http_take_listing(const char *text, const char *url, unsigned int depth, struct src_list *l,
			  char ***subs, size_t *nsubs, char *why, size_t whylen)
{
	char ebuf[256] = "";
	yajl_val tree = text ? yajl_tree_parse(text, ebuf, sizeof(ebuf)) : NULL;
	int ret;

	if (!tree || !YAJL_IS_ARRAY(tree)) {
		first_line(ebuf);
		if (tree)
			snprintf(why, whylen, "the answer is not a JSON array");
		else
			snprintf(why, whylen, "the answer is not JSON: %s",
				 ebuf[0] ? ebuf : "empty");
		yajl_tree_free(tree);
		return -EBADMSG;
	}
	ret = take_entries(tree, url, depth, l, subs, nsubs);
	yajl_tree_free(tree);
	return ret;
}

/* Lists the directory @url into @l; a subdirectory that cannot be listed is
 * logged and skipped. Returns 0 or -errno (logged). Recursion bounded by
 * SRC_MAX_DEPTH, one level's URLs kept a level. NOLINTNEXTLINE(misc-no-recursion) */
static int list_dir(struct src_http *h, const char *url, unsigned depth, struct src_list *l)
{
	struct body b = { .max = LISTING_MAX_BYTES };
	char errbuf[CURL_ERROR_SIZE], why[300];
	bool top = depth == 0;
	char **subs = NULL;
	size_t nsubs = 0, i;
	CURLcode rc;
	int ret;

	ret = src_http_setup(h, h->curl, url, &b, errbuf, NULL);
	if (ret)
		goto out;
	rc = curl_easy_perform(h->curl);
	ret = src_http_outcome(h, h->curl, rc, &b, errbuf, "list", url, !top);
	if (ret)
		goto out;
	ret = src_http_take_listing(b.p, url, depth, l, &subs, &nsubs, why, sizeof(why));
	if (ret == -EBADMSG) {
		fx_log(top ? FX_LOG_ERR : FX_LOG_WARN,
		       "cannot list '%s'%s: %s (is the server's autoindex_format json?)", url,
		       top ? "" : ", ignoring it", why);
		goto out;
	}
	/* Before going down: one level's listing in memory at a time. */
	src_body_reset(&b, 0);
	for (i = 0; !ret && i < nsubs; i++)
		ret = list_dir(h, subs[i], depth + 1, l);
out:
	for (i = 0; i < nsubs; i++)
		free(subs[i]);
	free(subs);
	free(b.p);
	/* Below the top, only running out of memory or the entry bound stops. */
	if (!top && ret != -ENOMEM && ret != -EFBIG)
		ret = 0;
	return ret;
}

static int http_list(struct fx_source *s, struct src_list *l)
{
	struct src_http *h = (struct src_http *)s;

	if (!h->dir)
		return src_list_add(l, strdup(h->url), -1);
	return list_dir(h, h->url, 0, l);
}

/* ---- reading ---- */

static int start(struct src_http *h, CURLM *m, struct xfer *x, size_t index,
		 const struct fx_source_item *it)
{
	CURLMcode mc;
	int ret;

	if (!x->curl) {
		x->curl = curl_easy_init();
		if (!x->curl) {
			fx_err("cannot read '%s': out of memory", it->name);
			return -ENOMEM;
		}
	}
	src_body_reset(&x->b, FX_SOURCE_MAX_BYTES);
	/* The size the listing gave, when it is believable, saves the doubling. */
	if (it->size >= 0 && (uint64_t)it->size < FX_SOURCE_MAX_BYTES) {
		x->b.p = malloc((size_t)it->size + 1);
		x->b.cap = x->b.p ? (size_t)it->size + 1 : 0;
	}
	ret = src_http_setup(h, x->curl, it->name, &x->b, x->errbuf, x);
	if (ret)
		return ret;
	mc = curl_multi_add_handle(m, x->curl);
	if (mc) {
		fx_err("cannot read '%s': %s", it->name, curl_multi_strerror(mc));
		return mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EIO;
	}
	x->index = index;
	x->busy = true;
	return 0;
}

/* Marks the transfers that ended as done, keeping their bodies. */
static void finish(const struct src_http *h, CURLM *m, const struct fx_source_item *items,
		   size_t *active)
{
	struct CURLMsg *msg;
	struct xfer *x;
	char *p;
	CURLcode rc;
	int left;

	while ((msg = curl_multi_info_read(m, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		rc = msg->data.result; /* msg is gone once the handle is removed */
		p = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &p);
		x = (struct xfer *)p;
		curl_multi_remove_handle(m, x->curl);
		(*active)--;
		x->done = true;
		x->err = src_http_outcome(h, x->curl, rc, &x->b, x->errbuf, "read",
					  items[x->index].name, false);
	}
}

/* Hands over the items that ended, in the listing's order (so that what is
 * made of them does not depend on which server answered first), from
 * *@want on. Returns 0 or what @cb returned. */
static int deliver(struct xfer *x, size_t np, const struct fx_source_item *items, size_t *want,
		   fx_source_read_fn cb, void *arg)
{
	struct xfer *d;
	int ret = 0;

	do {
		d = NULL;
		for (size_t i = 0; i < np; i++) {
			if (x[i].busy && x[i].done && x[i].index == *want)
				d = &x[i];
		}
		if (!d)
			break;
		ret = cb(arg, d->index, &items[d->index],
			 d->err	  ? NULL
			 : d->b.p ? d->b.p
				  : "",
			 d->err ? 0 : d->b.len, d->err);
		src_body_reset(&d->b, 0);
		d->busy = d->done = false;
		(*want)++;
	} while (!ret);
	return ret;
}

int src_http_read_each(struct fx_source *s, const struct fx_source_item *items, size_t n,
		       fx_source_read_fn cb, void *arg)
{
	struct src_http *h = (struct src_http *)s;
	struct xfer x[PARALLEL_MAX] = { 0 };
	size_t np = h->parallel ? h->parallel : PARALLEL;
	size_t next = 0, want = 0, active = 0, i;
	int ret = 0, err, running;
	CURLMcode mc;
	CURLM *m;

	m = curl_multi_init();
	if (!m) {
		fx_err("view: out of memory reading '%s'", s->name);
		return -ENOMEM;
	}
	if (np > PARALLEL_MAX)
		np = PARALLEL_MAX;
	/* A slot is free once its item is handed over: at most np
	 * bodies in memory, in flight or waiting for an earlier one. */
	while (!ret && want < n) {
		for (i = 0; i < np && next < n; i++) {
			if (x[i].busy)
				continue;
			err = start(h, m, &x[i], next, &items[next]);
			if (err) {
				src_body_reset(&x[i].b, 0);
				x[i] = (struct xfer){ .curl = x[i].curl,
						      .index = next,
						      .busy = true,
						      .done = true,
						      .err = err };
			} else {
				active++;
			}
			next++;
		}
		ret = deliver(x, np, items, &want, cb, arg);
		if (ret || !active)
			continue;
		mc = curl_multi_perform(m, &running);
		if (!mc)
			finish(h, m, items, &active);
		if (!mc && active)
			mc = curl_multi_poll(m, NULL, 0, 1000, NULL);
		if (mc) {
			fx_err("view: cannot read '%s': %s", s->name, curl_multi_strerror(mc));
			ret = mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EIO;
		}
	}
	for (i = 0; i < np; i++) {
		if (x[i].busy && !x[i].done)
			curl_multi_remove_handle(m, x[i].curl);
		curl_easy_cleanup(x[i].curl);
		free(x[i].b.p);
	}
	curl_multi_cleanup(m);
	return ret;
}

/* ---- open and free ---- */

void src_http_free(struct fx_source *s)
{
	struct src_http *h = (struct src_http *)s;
	struct curl_slist *l;

	if (!h)
		return;
	for (l = h->headers; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(h->headers);
	if (h->password)
		explicit_bzero(h->password, strlen(h->password));
	curl_free(h->user);
	curl_free(h->password);
	curl_easy_cleanup(h->curl);
	fx_s3_creds_wipe(&h->s3);
	free(h->s3_region);
	free(h->url);
	free(h);
}

/* "Authorization: Bearer <token>" from the environment, when set. */
static int token_header(struct src_http *h)
{
	const char *tok = getenv(TOKEN_ENV);
	size_t n, k = strlen(AUTH_PREFIX);
	char *line;
	int ret = 0;

	if (!tok || !tok[0])
		return 0;
	for (n = 0; tok[n]; n++) {
		if ((unsigned char)tok[n] <= 0x20 || (unsigned char)tok[n] >= 0x7f) {
			fx_err("view: %s holds a space or a control character", TOKEN_ENV);
			return -EINVAL;
		}
	}
	line = malloc(k + n + 1);
	if (!line)
		return -ENOMEM;
	memcpy(line, AUTH_PREFIX, k);
	memcpy(line + k, tok, n + 1);
	h->headers = curl_slist_append(NULL, line);
	if (!h->headers)
		ret = -ENOMEM;
	explicit_bzero(line, k + n);
	free(line);
	return ret;
}

/* Parses @spec into h->url (credentials out), h->user, h->password. */
static int parse_url(struct src_http *h, const char *spec, const char *shown)
{
	CURLU *u = curl_url();
	char *url = NULL;
	CURLUcode uc;
	int ret = 0;

	if (!u)
		return -ENOMEM;
	uc = curl_url_set(u, CURLUPART_URL, spec, 0);
	if (uc == CURLUE_OUT_OF_MEMORY) {
		ret = -ENOMEM; /* logged by the caller */
		goto out;
	}
	if (uc) {
		fx_err("view: cannot read '%s': not a URL: %s", shown, curl_url_strerror(uc));
		ret = -EINVAL;
		goto out;
	}
	uc = curl_url_get(u, CURLUPART_USER, &h->user, CURLU_URLDECODE);
	if (uc == CURLUE_OK || uc == CURLUE_NO_USER)
		uc = curl_url_get(u, CURLUPART_PASSWORD, &h->password, CURLU_URLDECODE);
	if (uc == CURLUE_OK || uc == CURLUE_NO_PASSWORD)
		uc = curl_url_set(u, CURLUPART_USER, NULL, 0);
	if (!uc)
		uc = curl_url_set(u, CURLUPART_PASSWORD, NULL, 0);
	if (!uc)
		uc = curl_url_get(u, CURLUPART_URL, &url, 0);
	if (uc == CURLUE_OUT_OF_MEMORY) {
		ret = -ENOMEM;
		goto out;
	}
	if (uc) {
		fx_err("view: cannot read '%s': %s", shown, curl_url_strerror(uc));
		ret = -EINVAL;
		goto out;
	}
	h->url = strdup(url);
	if (!h->url)
		ret = -ENOMEM;
out:
	curl_free(url);
	curl_url_cleanup(u);
	return ret;
}

int src_http_global_init(void)
{
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		fx_err("view: libcurl initialization failed: %s", curl_easy_strerror(curl_init_rc));
		return -EIO;
	}
	return 0;
}

static int http_open(const char *spec, const struct fx_source_opts *o, struct fx_source **out)
{
	struct src_http *h;
	char shown[1024];
	int ret;

	(void)o;
	ret = src_http_global_init();
	if (ret)
		return ret;
	url_shown(spec, shown, sizeof(shown));
	h = calloc(1, sizeof(*h));
	if (!h) {
		fx_err("view: out of memory");
		return -ENOMEM;
	}
	h->base.ops = &src_http_ops;
	ret = parse_url(h, spec, shown);
	if (!ret)
		ret = token_header(h);
	if (!ret) {
		h->curl = curl_easy_init();
		if (!h->curl)
			ret = -ENOMEM;
	}
	if (ret) {
		if (ret == -ENOMEM)
			fx_err("view: out of memory opening '%s'", shown);
		src_http_free(&h->base);
		return ret;
	}
	h->base.name = h->url;
	h->dir = h->url[strlen(h->url) - 1] == '/';
	*out = &h->base;
	return 0;
}

const struct src_ops src_http_ops = {
	.open = http_open,
	.list = http_list,
	.read_each = src_http_read_each,
	.free = src_http_free,
};
