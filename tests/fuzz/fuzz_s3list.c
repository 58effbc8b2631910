/* SPDX-License-Identifier: MIT */
/* Fuzz target: a page of an S3 ListObjectsV2 listing as `fxagent view
 * s3://` reads it (XML from a store it does not control), src_s3_take_page
 * in agent/view/source_s3.c.
 *
 * The input: byte 0 chooses the scope (bit 0: a listing with a delimiter,
 * bit 1: --target web and --host web-1, bit 2: --from/--to around
 * 2026-11-26); the rest is the page's XML. Checks: 0, or -EBADMSG, or
 * -EFBIG; every key taken is a chunk's URL in the bucket under the prefix
 * (the key escaped, never outside the path); a prefix is taken only with a
 * delimiter; a continuation token only with the page's own bytes; no more
 * keys than the page has Contents.
 */
#include "fuzz.h"

#include <errno.h>
#include <string.h>

#include <libxml/xmlmemory.h>

#include "../../agent/view/source_int.h"

#define BUCKET_URL "http://127.0.0.1:7480/profiles/"
#define PREFIX	   "fleet/"

static size_t count(const char *text, size_t len, const char *what)
{
	size_t n = 0, k = strlen(what);

	for (size_t i = 0; i + k <= len; i++)
		n += !memcmp(text + i, what, k);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const targets[] = { "web" }, *const hosts[] = { "web-1" };
	const struct fx_s3_where where = { .endpoint = "http://127.0.0.1:7480",
					   .region = "us-east-1",
					   .bucket = "profiles" };
	struct fx_source_opts o = { 0 };
	struct src_s3_scope sc = { .prefix = PREFIX, .where = &where, .o = &o };
	struct src_list l = { .top = "s3://profiles/fleet/" }, prefixes = { .top = l.top };
	struct src_s3_page pg = { 0 };
	const char *xml = (const char *)data + 1;
	size_t len = size ? size - 1 : 0;
	int rc;

	if (!size)
		return 0;
	if (data[0] & 2) {
		o.targets = targets;
		o.ntargets = 1;
		o.hosts = hosts;
		o.nhosts = 1;
	}
	if (data[0] & 4) {
		o.from_ms = 1795651200000; /* 2026-11-26T00:00:00Z */
		o.to_ms = o.from_ms + 3600000;
	}
	rc = src_s3_take_page(&sc, xml, len, "s3://profiles/fleet/", data[0] & 1 ? &prefixes : NULL,
			      &l, &pg);
	FUZZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -EFBIG || rc == -ENOMEM, "rc %d", rc);
	FUZZ_CHECK(l.n <= count(xml, len, "Contents") + count(xml, len, "&#"),
		   "%zu keys from %zu Contents", l.n, count(xml, len, "Contents"));
	FUZZ_CHECK(!prefixes.n || data[0] & 1, "prefixes without a delimiter");
	FUZZ_CHECK(rc == 0 || !pg.next, "a token from a page not read");
	for (size_t i = 0; i < l.n; i++) {
		const char *u = l.items[i].name;

		FUZZ_CHECK(!strncmp(u, BUCKET_URL PREFIX, strlen(BUCKET_URL PREFIX)),
			   "'%s' is not under " BUCKET_URL PREFIX, u);
		FUZZ_CHECK(!strstr(u, "/../") && !strstr(u, "/./") && !strchr(u, '?') &&
				   !strchr(u, '#'),
			   "'%s' leaves the key's path", u);
		FUZZ_CHECK(l.items[i].size >= -1, "size %lld", (long long)l.items[i].size);
	}
	xmlFree(pg.next);
	fx_source_items_free(l.items, l.n);
	fx_source_items_free(prefixes.items, prefixes.n);
	return 0;
}
