/* SPDX-License-Identifier: MIT */
/* source_s3: chunks in an S3 bucket, s3://BUCKET/PREFIX. The listing is
 * ListObjectsV2 (pages of up to 1000 keys, XML read with libxml2), narrowed
 * by the key layout of include/fxagent/s3.h before anything is read: one
 * listing per target (the targets asked for, or those found under PREFIX
 * with the delimiter '/'), each starting at the hour before --since or
 * --from and stopping past --to; other hosts' keys are left out. The
 * objects are then read as the HTTP kind reads files (source_http.c), each
 * GET signed, 16 at a time.
 *
 * The store: --endpoint, else AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else
 * AWS's; the region: --region, else AWS_REGION or AWS_DEFAULT_REGION, else
 * us-east-1. The credentials come from the environment (AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), never from the command line.
 */
#include "source_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "fxagent/log.h"

#define PAGE_MAX_BYTES (16u << 20) /* 1000 keys are about 300 KB */
#define HOUR_MS	       3600000LL
/* A window is at most an hour: a window that ends after --from started at
 * most this long before it. */
#define WINDOW_MAX_MS HOUR_MS

struct src_s3 {
	struct src_http h; /* first: the container is the same pointer */
	struct fx_s3_where where;
	char *bucket, *prefix, *endpoint, *name;
	struct fx_source_opts o; /* the caller's, valid while the source is */
};

static bool is_named(const xmlNode *n, const char *name)
{
	return n->type == XML_ELEMENT_NODE && !xmlStrcmp(n->name, (const xmlChar *)name);
}

static char *text_of(const xmlNode *parent, const char *name)
{
	for (const xmlNode *n = parent->children; n; n = n->next) {
		if (is_named(n, name))
			return (char *)xmlNodeGetContent(n);
	}
	return NULL;
}

/* Whether the chunk of @p may be one the caller keeps. *@past is set when
 * every later key of its target is past --to. */
static bool wanted(const struct src_s3_scope *sc, const struct fx_s3_key_parts *p, bool *past)
{
	const struct fx_source_opts *o = sc->o;
	char h[256];
	size_t i;

	if (o->to_ms && p->start_ms - p->start_ms % HOUR_MS > o->to_ms)
		*past = true;
	if (o->to_ms && p->start_ms >= o->to_ms)
		return false;
	/* The key's end is cut to the second. */
	if (o->from_ms && p->end_ms + 1000 <= o->from_ms)
		return false;
	for (i = 0; i < o->nhosts; i++) {
		fx_s3_key_part(o->hosts[i], h, sizeof(h));
		if (!strcmp(h, p->host))
			return true;
	}
	return !o->nhosts;
}

/* Whether @key has a "." or ".." segment: its URL would name another key
 * once libcurl squashes the dots. Agents never write one. */
static bool dot_segment(const char *key)
{
	for (const char *p = key; *p; p = strchr(p, '/') ? strchr(p, '/') + 1 : p + strlen(p)) {
		size_t n = strcspn(p, "/");

		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return true;
	}
	return false;
}

/* A key of the listing: into @l when it may be wanted. */
static int take_key(const struct src_s3_scope *sc, const char *key, const char *size,
		    struct src_list *l, bool *past)
{
	const char *base = strrchr(key, '/');
	struct fx_s3_key_parts p;
	long long sz = -1;
	char *end, *url;
	int ret;

	ret = src_list_visit(l);
	if (ret)
		return ret;
	base = base ? base + 1 : key;
	if (!src_is_chunk_name(base) || strncmp(key, sc->prefix, strlen(sc->prefix)) ||
	    dot_segment(key))
		return 0;
	if (!fx_s3_parse_key(key + strlen(sc->prefix), &p) && !wanted(sc, &p, past))
		return 0;
	if (size) {
		sz = strtoll(size, &end, 10);
		if (end == size || *end || sz < 0)
			sz = -1;
	}
	url = fx_s3_url(sc->where, key, NULL);
	return src_list_add(l, url, sz);
}

int src_s3_take_page(const struct src_s3_scope *sc, const char *xml, size_t len, const char *shown,
		     struct src_list *prefixes, struct src_list *l, struct src_s3_page *pg)
{
	xmlDoc *doc;
	xmlNode *root;
	char *t;
	int ret = 0;

	pg->truncated = false;
	pg->next = NULL;
	doc = xml && len <= INT_MAX
		      ? xmlReadMemory(xml, (int)len, "list.xml", NULL,
				      XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING)
		      : NULL;
	root = doc ? xmlDocGetRootElement(doc) : NULL;
	if (!root || xmlStrcmp(root->name, (const xmlChar *)"ListBucketResult")) {
		fx_err("cannot list '%s': the answer is not a ListObjectsV2 result (XML "
		       "ListBucketResult)",
		       shown);
		xmlFreeDoc(doc);
		return -EBADMSG;
	}
	t = text_of(root, "IsTruncated");
	pg->truncated = t && !strcmp(t, "true");
	xmlFree(t);
	pg->next = text_of(root, "NextContinuationToken");
	for (xmlNode *n = root->children; n && !ret && !pg->past; n = n->next) {
		char *key, *size;

		if (prefixes && is_named(n, "CommonPrefixes")) {
			key = text_of(n, "Prefix");
			ret = key ? src_list_add(prefixes, strdup(key), -1) : 0;
			xmlFree(key);
		} else if (is_named(n, "Contents")) {
			key = text_of(n, "Key");
			size = text_of(n, "Size");
			ret = key ? take_key(sc, key, size, l, &pg->past) : 0;
			xmlFree(key);
			xmlFree(size);
		}
	}
	xmlFreeDoc(doc);
	return ret;
}

/* "name=value&" with the value encoded, onto @q (@cap bytes) at *@n. */
static int add_param(char *q, size_t cap, size_t *n, const char *name, const char *value)
{
	int w;

	if (!value)
		return 0;
	w = snprintf(q + *n, cap - *n, "%s%s=", *n ? "&" : "", name);
	if (w < 0 || (size_t)w >= cap - *n)
		return -ENAMETOOLONG;
	*n += (size_t)w;
	w = fx_s3_query_escape(value, q + *n, cap - *n);
	if (w < 0)
		return w;
	*n += (size_t)w;
	return 0;
}

/* Lists the keys under @prefix (from after @start_after) into @l, page by
 * page; with @prefixes, only those up to the next '/', and the
 * CommonPrefixes into @prefixes. Returns 0 or -errno (logged). */
static int list_prefix(struct src_s3 *s, const char *prefix, struct src_list *prefixes,
		       const char *start_after, struct src_list *l)
{
	struct src_http *h = &s->h;
	struct body b = { .max = PAGE_MAX_BYTES };
	char errbuf[CURL_ERROR_SIZE], shown[FX_S3_KEY_MAX + 64];
	const struct src_s3_scope sc = { .prefix = s->prefix, .where = &s->where, .o = &s->o };
	struct src_s3_page pg = { 0 };
	char *token = NULL, *q = NULL, *url = NULL;
	size_t cap, n;
	CURLcode rc;
	int ret = 0;

	snprintf(shown, sizeof(shown), "s3://%s/%s", s->bucket, prefix);
	do {
		/* The parameters sorted by name, as SigV4 signs them. */
		cap = 3 * (strlen(prefix) + (start_after ? strlen(start_after) : 0) +
			   (token ? strlen(token) : 0)) +
		      128;
		free(q);
		q = malloc(cap);
		if (!q) {
			ret = -ENOMEM;
			break;
		}
		n = 0;
		q[0] = '\0';
		ret = add_param(q, cap, &n, "continuation-token", token);
		if (!ret)
			ret = add_param(q, cap, &n, "delimiter", prefixes ? "/" : NULL);
		if (!ret)
			ret = add_param(q, cap, &n, "list-type", "2");
		if (!ret)
			ret = add_param(q, cap, &n, "prefix", prefix);
		if (!ret && !token)
			ret = add_param(q, cap, &n, "start-after", start_after);
		if (ret)
			break;
		free(url);
		url = fx_s3_url(&s->where, NULL, q);
		if (!url) {
			ret = -ENOMEM;
			break;
		}
		src_body_reset(&b, PAGE_MAX_BYTES);
		ret = src_http_setup(h, h->curl, url, &b, errbuf, NULL);
		if (ret)
			break;
		rc = curl_easy_perform(h->curl);
		ret = src_http_outcome(h, h->curl, rc, &b, errbuf, "list", shown, false);
		if (ret)
			break;
		ret = src_s3_take_page(&sc, b.p, b.len, shown, prefixes, l, &pg);
		xmlFree(token);
		token = pg.next;
		pg.next = NULL;
	} while (!ret && !pg.past && pg.truncated && token && token[0]);
	if (ret == -ENOMEM || ret == -ENAMETOOLONG)
		fx_err("view: cannot list '%s': %s", shown,
		       ret == -ENOMEM ? "out of memory" : "a key or token too long");
	xmlFree(token);
	src_body_reset(&b, 0);
	free(q);
	free(url);
	return ret;
}

/* One target's chunks: from the hour before --from (or all). */
static int list_target(struct src_s3 *s, const char *target_prefix, struct src_list *l)
{
	char after[FX_S3_KEY_MAX + 1], hour[512];
	const char *t = target_prefix + strlen(s->prefix);
	size_t tl = strcspn(t, "/");
	char name[256];

	if (!s->o.from_ms || tl >= sizeof(name))
		return list_prefix(s, target_prefix, NULL, NULL, l);
	memcpy(name, t, tl);
	name[tl] = '\0';
	if (fx_s3_hour_prefix(name, s->o.from_ms - WINDOW_MAX_MS, hour, sizeof(hour)) ||
	    (size_t)snprintf(after, sizeof(after), "%s%s", s->prefix, hour) >= sizeof(after))
		return list_prefix(s, target_prefix, NULL, NULL, l);
	return list_prefix(s, target_prefix, NULL, after, l);
}

static int s3_list(struct fx_source *src, struct src_list *l)
{
	struct src_s3 *s = (struct src_s3 *)src;
	struct src_list targets = { .top = l->top };
	char tp[FX_S3_KEY_MAX + 1], part[128];
	size_t i;
	int ret = 0;

	if (s->o.ntargets) {
		for (i = 0; i < s->o.ntargets && !ret; i++) {
			fx_s3_key_part(s->o.targets[i], part, sizeof(part));
			if ((size_t)snprintf(tp, sizeof(tp), "%s%s/", s->prefix, part) >=
			    sizeof(tp))
				continue;
			ret = list_target(s, tp, l);
		}
		return ret;
	}
	/* The targets under the prefix; then each as above. Keys right under
	 * the prefix, in no layout, are listed as they are. */
	ret = list_prefix(s, s->prefix, &targets, NULL, l);
	for (i = 0; i < targets.n && !ret; i++)
		ret = list_target(s, targets.items[i].name, l);
	fx_source_items_free(targets.items, targets.n);
	return ret;
}

static void s3_free(struct fx_source *src)
{
	struct src_s3 *s = (struct src_s3 *)src;

	if (!s)
		return;
	free(s->bucket);
	free(s->prefix);
	free(s->endpoint);
	free(s->name);
	src_http_free(src);
}

static const char *first_env(const char *a, const char *b)
{
	const char *v = getenv(a);

	if (!v || !v[0])
		v = getenv(b);
	return v && v[0] ? v : NULL;
}

/* s3://BUCKET/PREFIX into s->bucket and s->prefix. */
static int parse_spec(struct src_s3 *s, const char *spec)
{
	const char *b = spec + 5, *slash = strchr(b, '/');
	size_t bl = slash ? (size_t)(slash - b) : strlen(b);

	for (size_t i = 0; i < bl; i++) {
		char c = b[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '-' || c == '_'))
			bl = 0;
	}
	if (!bl || bl > 255) {
		fx_err("view: cannot read '%s': expected s3://BUCKET/PREFIX, a bucket's name of "
		       "A-Z a-z 0-9 . _ -",
		       spec);
		return -EINVAL;
	}
	s->bucket = strndup(b, bl);
	s->prefix = strdup(slash ? slash + 1 : "");
	return s->bucket && s->prefix ? 0 : -ENOMEM;
}

static int s3_open(const char *spec, const struct fx_source_opts *o, struct fx_source **out)
{
	const char *region = o->s3_region, *ep = o->s3_endpoint;
	char why[512];
	struct src_s3 *s;
	size_t n;
	int ret;

	ret = src_http_global_init();
	if (ret)
		return ret;
	s = calloc(1, sizeof(*s));
	if (!s) {
		fx_err("view: out of memory");
		return -ENOMEM;
	}
	s->h.base.ops = &src_s3_ops;
	s->o = *o;
	ret = parse_spec(s, spec);
	if (ret)
		goto out;
	if (!region)
		region = first_env("AWS_REGION", "AWS_DEFAULT_REGION");
	if (!ep)
		ep = first_env("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL");
	n = strlen(spec) + 1;
	s->name = malloc(n);
	s->h.s3_region = strdup(region ? region : "us-east-1");
	s->endpoint = ep ? strdup(ep) : NULL;
	if (!s->name || !s->h.s3_region || (ep && !s->endpoint)) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(s->name, spec, n);
	s->h.base.name = s->name;
	s->where = (struct fx_s3_where){ .endpoint = s->endpoint,
					 .region = s->h.s3_region,
					 .bucket = s->bucket,
					 .path_style = o->s3_path_style };
	s->h.url = fx_s3_url(&s->where, NULL, NULL);
	if (!s->h.url) {
		fx_err("view: cannot read '%s': the endpoint '%s' is not an http:// or https:// "
		       "URL of a host",
		       spec, ep ? ep : "(AWS's)");
		ret = -EINVAL;
		goto out;
	}
	ret = fx_s3_creds_load(&s->h.s3, "view", NULL, NULL, why, sizeof(why));
	if (ret) {
		fx_err("%s", why);
		goto out;
	}
	s->h.curl = curl_easy_init();
	if (!s->h.curl || fx_s3_sign(s->h.curl, &s->h.s3, s->h.s3_region, NULL, &s->h.headers))
		ret = -ENOMEM;
	s->h.dir = true;
	/* A store answers each GET in tens of ms (radosgw here: 42 ms for
	 * 9 KiB): more requests at once, not more bandwidth, is what helps. */
	s->h.parallel = 16;
out:
	if (ret == -ENOMEM)
		fx_err("view: out of memory opening '%s'", spec);
	if (ret) {
		s3_free(&s->h.base);
		return ret;
	}
	*out = &s->h.base;
	return 0;
}

const struct src_ops src_s3_ops = {
	.open = s3_open,
	.list = s3_list,
	.read_each = src_http_read_each,
	.free = s3_free,
};
