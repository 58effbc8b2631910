/* SPDX-License-Identifier: MIT */
/* source: where `fxagent view` finds chunks.
 *
 * A source is named by one command-line word: a directory (walked
 * recursively), one file, an http:// or https:// URL of a directory that
 * the server lists as JSON (nginx `autoindex on; autoindex_format json;`,
 * walked recursively), or s3://BUCKET/PREFIX: the objects under PREFIX,
 * listed with ListObjectsV2 and read with signed GETs (keys and credentials:
 * include/fxagent/s3.h). Each kind is one set of operations behind this
 * interface.
 *
 * An s3:// listing is narrowed by the key layout before anything is read:
 * with targets, only their prefixes are listed; with a time, each target's
 * listing starts at the hour before it (start-after) and stops past its
 * end; with hosts, other hosts' keys are left out. Keys not in the layout
 * are listed as any file would be.
 *
 * A listing holds the chunk files found (names ending in .json.gz or .json;
 * temporaries "*.tmp*", dot-files, and anything under a directory named
 * "rejected" or starting with '.' are left out), sorted by name (strcmp of
 * the full path or URL). A walk goes at most 16 directories down and visits
 * at most 1,000,000 entries (more is an error, -EFBIG). One file named on
 * its own is listed whatever its name.
 *
 * Reading returns a file's bytes as stored (gzip or not: the caller
 * decides), at most FX_SOURCE_MAX_BYTES.
 *
 * Nothing read is trusted: a directory's files are opened non-blocking and
 * must end at regular files (a FIFO with a chunk's name is listed, and
 * reading it is an error, not a hang); symlinked directories are not
 * entered, a symlinked file is followed. HTTP requests have a connect and a
 * total timeout and a low-speed limit, follow no redirect (a 3xx is an error
 * naming its Location), and read no more than the bound. A user:password@ in
 * the URL is sent as basic auth and kept out of item names and messages; the
 * environment variable FXAGENT_VIEW_TOKEN, when set, is sent as
 * "Authorization: Bearer <token>" and never logged. TLS is verified.
 */
#ifndef FXAGENT_SOURCE_H
#define FXAGENT_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FX_SOURCE_MAX_BYTES (256u << 20)

struct fx_source;

/* How to open a source; all may be zero. */
struct fx_source_opts {
	/* s3://: the store (NULL: AWS's, from the region), its region (NULL:
	 * us-east-1), and path-style URLs. */
	const char *s3_endpoint, *s3_region;
	bool s3_path_style;
	/* What the caller keeps, by the chunks' metadata: a source whose names
	 * say it (s3:// keys) lists only what may match. */
	const char *const *targets, *const *hosts;
	size_t ntargets, nhosts;
	int64_t from_ms, to_ms; /* Unix ms; 0: none */
};

struct fx_source_item {
	char *name;   /* a path, or a full URL; names the chunk in messages */
	int64_t size; /* bytes, -1 when unknown */
};

/* Opens the source @spec. Returns 0 with *out set, or -errno with the reason
 * logged (-ENOENT: no such path; -EINVAL: a scheme not known, naming it, a
 * path that is neither a directory nor a regular file, or a bad URL). Only
 * local paths are looked at here: a server is first asked by fx_source_list. */
int fx_source_open(const char *spec, const struct fx_source_opts *opts, struct fx_source **out);

/* Lists the chunk files of @s into *items (*n of them, maybe 0; free with
 * fx_source_items_free). Returns 0 or -errno, logged with the path or URL
 * that failed (an unreadable subdirectory or listing below the top is logged
 * as a warning and skipped, the rest listed; the top's own failure is the
 * error: -EBADMSG for a listing that is no JSON array, -EIO for a redirect,
 * -ENOENT/-EACCES for HTTP 404/403). Item sizes come from stat or the
 * listing, -1 when unknown. */
int fx_source_list(struct fx_source *s, struct fx_source_item **items, size_t *n);
void fx_source_items_free(struct fx_source_item *items, size_t n);

/* Called by fx_source_read_each for each item, in the listing's order, from the
 * caller's thread: @data/@len are the item's bytes (valid during the call),
 * or @err is a negative errno (then @data is NULL) with the reason already
 * logged. A nonzero return stops the reading and is returned. */
typedef int (*fx_source_read_fn)(void *arg, size_t index, const struct fx_source_item *it,
				 const void *data, size_t len, int err);

/* Reads items[0..n) of @s and hands each to @cb, once each. HTTP sources
 * fetch a few at once (up to 4 transfers, s3:// 16, so as many bodies in memory,
 * ended or waiting for an earlier one) and call @cb in order as they end;
 * files are read one by one. An item that
 * cannot be read (missing, a FIFO, over the bound, an HTTP error) is @cb's
 * @err, logged, and the reading goes on. Returns 0, what @cb returned to
 * stop, or -errno (logged) when libcurl itself fails. */
int fx_source_read_each(struct fx_source *s, const struct fx_source_item *items, size_t n,
			fx_source_read_fn cb, void *arg);

/* Takes NULL. */
void fx_source_free(struct fx_source *s);

#endif
