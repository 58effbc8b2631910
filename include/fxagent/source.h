/* SPDX-License-Identifier: MIT */
/* source: where `fxagent view` finds chunks.
 *
 * A source is named by one command-line word: a directory (walked
 * recursively), one file, or an http:// or https:// URL of a directory that
 * the server lists as JSON (nginx `autoindex on; autoindex_format json;`,
 * walked recursively). Each kind is one set of operations behind this
 * interface, so that a further kind (s3://) is an addition.
 *
 * A listing holds the chunk files found (names ending in .json.gz or .json;
 * temporaries "*.tmp*" and anything under a directory named "rejected" are
 * left out), sorted by name. Reading returns a file's bytes as stored (gzip or
 * not: the caller decides), at most FX_SOURCE_MAX_BYTES.
 *
 * Nothing read is trusted: a directory's files are opened non-blocking and
 * must be regular files (a FIFO is an error, not a hang); HTTP requests have
 * a connect and a total timeout, follow no redirect, and read no more than
 * the bound.
 */
#ifndef FXAGENT_SOURCE_H
#define FXAGENT_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#define FX_SOURCE_MAX_BYTES (256u << 20)

struct fx_source;

struct fx_source_item {
	char *name;   /* a path, or a full URL; names the chunk in messages */
	int64_t size; /* bytes, -1 when unknown */
};

/* Opens the source @spec. Returns 0 with *out set, or -errno with the reason
 * logged (-ENOENT: no such path; -EINVAL: a scheme not known, naming it). */
int fx_source_open(const char *spec, struct fx_source **out);

/* Lists the chunk files of @s into *items (*n of them; free with
 * fx_source_items_free). Returns 0 or -errno, logged with the path or URL
 * that failed (an unreadable subdirectory or listing is logged and skipped,
 * the rest listed). */
int fx_source_list(struct fx_source *s, struct fx_source_item **items, size_t *n);
void fx_source_items_free(struct fx_source_item *items, size_t n);

/* Called by fx_source_read_each for each item, in any order, from the
 * caller's thread: @data/@len are the item's bytes (valid during the call),
 * or @err is a negative errno (then @data is NULL) with the reason already
 * logged. A nonzero return stops the reading and is returned. */
typedef int (*fx_source_read_fn)(void *arg, size_t index, const struct fx_source_item *it,
				 const void *data, size_t len, int err);

/* Reads items[0..n) of @s and hands each to @cb. HTTP sources fetch a few at
 * once (up to 4 connections); files are read one by one. Returns 0, or what
 * @cb returned to stop. */
int fx_source_read_each(struct fx_source *s, const struct fx_source_item *items, size_t n,
			fx_source_read_fn cb, void *arg);

void fx_source_free(struct fx_source *s);

#endif
