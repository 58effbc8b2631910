/* SPDX-License-Identifier: MIT */
/* The URL template: its placeholders expanded and URL-escaped, its check at
 * start (a scheme we speak, a URL libcurl parses), and a URL as it may be
 * logged (no user:password@, no query). Also the growing string that URLs
 * and header lines are built in.
 */
#include "upload_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "fxagent/log.h"

void upl_sb_putn(struct sbuf *b, const char *s, size_t n)
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

void upl_sb_puts(struct sbuf *b, const char *s)
{
	upl_sb_putn(b, s, strlen(s));
}

static void sb_pct(struct sbuf *b, unsigned char c)
{
	static const char hex[] = "0123456789ABCDEF";
	char e[3] = { '%', hex[c >> 4], hex[c & 15] };

	upl_sb_putn(b, e, 3);
}

bool upl_is_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

/* RFC 3986 percent-encoding of everything but the unreserved characters. */
static void sb_url_escaped(struct sbuf *b, const char *s)
{
	for (; *s; s++) {
		if (upl_is_unreserved((unsigned char)*s))
			upl_sb_putn(b, s, 1);
		else
			sb_pct(b, (unsigned char)*s);
	}
}

/* Header values keep visible ASCII; '%' and anything else is percent-encoded,
 * so a strange target name cannot break the header block. */
void upl_sb_header_escaped(struct sbuf *b, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c > 0x20 && c < 0x7f && c != '%')
			upl_sb_putn(b, s, 1);
		else
			sb_pct(b, c);
	}
}

/* UTC ISO 8601 basic, to the second (20261121T031000Z). */
int upl_iso_basic(int64_t ms, char *out, size_t len)
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
			upl_sb_putn(b, "{", 1);
			p += 2;
			continue;
		}
		if (*p != '{') {
			n = strcspn(p, "{");
			upl_sb_putn(b, p, n);
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
			if (upl_iso_basic(name[0] == 's' ? info->start_ms : info->end_ms, tmp,
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
		upl_sb_putn(&b, "", 0);
	if (!ret && b.oom)
		ret = -ENOMEM;
	if (ret) {
		free(b.p);
		errno = -ret;
		return NULL;
	}
	return b.p;
}

/* scheme://host[:port]/path of @url: no user:password@, no query, no fragment. */
void upl_url_for_log(const char *url, char *out, size_t len)
{
	struct sbuf b = { 0 };
	const char *auth = url, *s, *at;
	size_t n;

	s = strstr(url, "://");
	if (s) {
		upl_sb_putn(&b, url, (size_t)(s - url) + 3);
		auth = s + 3;
	}
	n = strcspn(auth, "/?#");
	at = memchr(auth, '@', n);
	if (at) {
		n -= (size_t)(at + 1 - auth);
		auth = at + 1;
	}
	upl_sb_putn(&b, auth, n);
	auth += n;
	upl_sb_putn(&b, auth, strcspn(auth, "?#"));
	snprintf(out, len, "%s", b.p && !b.oom ? b.p : "(url)");
	free(b.p);
}

bool upl_is_file_url(const char *url)
{
	return !strncasecmp(url, "file://", 7);
}

/* The template must expand, with a scheme we speak, into a URL libcurl parses. */
int upl_check_url(const char *tmpl, const char *host)
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
		fx_err("upload.url: unknown or unclosed placeholder \"%.40s\" (known: {host} "
		       "{target} {start} {end} {seq} {id}; \"{{\" is a \"{\")",
		       bad);
		goto out;
	}
	if (ret < 0) {
		fx_err("upload: out of memory");
		goto out;
	}
	/* An empty template expands to nothing at all (b.p stays NULL). */
	if (!b.p || (strncasecmp(b.p, "http://", 7) && strncasecmp(b.p, "https://", 8) &&
		     !upl_is_file_url(b.p))) {
		fx_err("upload.url must start with http://, https:// or file://");
		ret = -EINVAL;
		goto out;
	}
	cu = curl_url();
	if (!cu) {
		fx_err("upload: out of memory");
		ret = -ENOMEM;
		goto out;
	}
	uc = curl_url_set(cu, CURLUPART_URL, b.p, 0);
	curl_url_cleanup(cu);
	if (uc != CURLUE_OK) {
		char shown[256];

		upl_url_for_log(b.p, shown, sizeof(shown));
		fx_err("upload.url %s is not a valid URL: %s", shown, curl_url_strerror(uc));
		ret = -EINVAL;
	}
out:
	free(b.p);
	return ret;
}

/* Used by both uploaders (uploader.c, s3_uploader.c): kept in a file both use,
 * so that neither depends on the other for it. */
int upl_dup_str(const char *s, char **out)
{
	*out = NULL;
	if (!s)
		return 0;
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}
