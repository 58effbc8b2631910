/* SPDX-License-Identifier: MIT */
/* Fuzz target: the JSON listing of a directory that `fxagent view
 * http(s)://` reads (nginx's autoindex_format json; a collector it does not
 * control answers it), src_http_take_listing in agent/view/source_http.c.
 *
 * The input: byte 0 is the directory's depth below the source's top (low 5
 * bits); the rest is the answer's text. Checks: 0, or -EBADMSG with a
 * one-line reason, or -EFBIG; every file listed is a URL under the
 * directory's, of a chunk's name, its size -1 or more; every subdirectory a
 * URL under the directory's ending in '/', one level down, and none at all
 * below the depth bound; no more entries than the text has objects.
 */
#include "fuzz.h"

#include <errno.h>
#include <string.h>

#include "../../agent/view/source_int.h"

#define DIR_URL "http://collector.invalid/chunks/"

static void check_url(const char *u, bool dir)
{
	size_t len = strlen(u), base = strlen(DIR_URL);

	FUZZ_CHECK(len > base && !strncmp(u, DIR_URL, base), "'%s' is not under " DIR_URL, u);
	FUZZ_CHECK(dir == (u[len - 1] == '/'), "'%s': a %s", u, dir ? "directory" : "file");
	/* one level down: the name is escaped, no '/' of its own */
	FUZZ_CHECK(!strchr(u + base, '/') || (dir && strchr(u + base, '/') == u + len - 1),
		   "'%s' is not one level below " DIR_URL, u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned int depth = size ? data[0] & 31 : 0;
	struct src_list l = { .top = DIR_URL };
	char **subs = NULL, why[300] = "", *text;
	size_t nsubs = 0, objects = 0;
	int rc;

	if (size < 1)
		return 0;
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	for (size_t i = 0; i + 1 < size; i++)
		objects += text[i] == '{';
	rc = src_http_take_listing(text, DIR_URL, depth, &l, &subs, &nsubs, why, sizeof(why));
	FUZZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -EFBIG || rc == -ENOMEM, "rc %d", rc);
	FUZZ_CHECK(rc != -EBADMSG || (why[0] && !strchr(why, '\n')), "reason '%s'", why);
	FUZZ_CHECK(l.n + nsubs <= objects, "%zu entries from %zu objects", l.n + nsubs, objects);
	FUZZ_CHECK(!nsubs || depth < SRC_MAX_DEPTH, "%zu directories at depth %u", nsubs, depth);
	for (size_t i = 0; i < l.n; i++) {
		const char *base = strrchr(l.items[i].name, '/') + 1;

		check_url(l.items[i].name, false);
		FUZZ_CHECK(src_is_chunk_name(base) || strchr(base, '%'), "'%s' is no chunk's name",
			   l.items[i].name);
		FUZZ_CHECK(l.items[i].size >= -1, "size %lld", (long long)l.items[i].size);
	}
	for (size_t i = 0; i < nsubs; i++) {
		check_url(subs[i], true);
		free(subs[i]);
	}
	free(subs);
	fx_source_items_free(l.items, l.n);
	free(text);
	return 0;
}
