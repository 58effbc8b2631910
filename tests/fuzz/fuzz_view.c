/* SPDX-License-Identifier: MIT */
/* Fuzz target: fxagent view's reader and merge (agent/view/).
 *
 * The input is a chunk's bytes, gzip or plain JSON, as a collector's tree
 * may hold anything. Checks: the reader answers 0, 1 (not chosen) or a
 * negative errno with a one-line reason; a chunk read is merged twice (the
 * second time as the same window: nothing added) and written as the merged
 * profile without a writer error, whatever its tables held.
 */
#include "fuzz.h"

#include <errno.h>
#include <string.h>

#include "../../agent/view/view_int.h"

static int discard(void *ctx, const void *buf, size_t len)
{
	(void)ctx;
	(void)buf;
	(void)len;
	return 0;
}

static bool take_all(void *arg, const struct vchunk *c)
{
	(void)arg;
	(void)c;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vchunk c = { 0 };
	struct merge m;
	char why[256];
	int rc = view_read_chunk(data, size, &c, take_all, NULL, why, sizeof(why));

	FUZZ_CHECK(rc == 0 || rc == 1 || rc == -EINVAL || rc == -EPROTO || rc == -E2BIG ||
			   rc == -ENOMEM,
		   "rc %d", rc);
	FUZZ_CHECK(rc >= 0 || (why[0] && !strchr(why, '\n')), "reason '%s'", why);
	if (rc == 0) {
		struct fx_json *j = fx_json_new(discard, NULL);
		size_t nsamples;

		/* A small threshold: folding runs too. */
		view_merge_init(&m, (enum fx_view_merge)(size % 3), 0, 64);
		FUZZ_CHECK(view_merge_add(&m, &c) == 0, "view_merge_add");
		nsamples = m.nsamples;
		FUZZ_CHECK(view_merge_add(&m, &c) == 0 && m.nsamples == nsamples,
			   "the same window merged twice");
		FUZZ_CHECK(view_merge_finish(&m) == 0, "view_merge_finish");
		FUZZ_CHECK(j != NULL, "fx_json_new");
		FUZZ_CHECK(view_write_json(&m, j) == 0 && fx_json_finish(j) == 0, "write");
		fx_json_free(j);
		view_merge_free(&m);
	}
	view_vchunk_free(&c);
	return 0;
}
