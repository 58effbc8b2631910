/* SPDX-License-Identifier: MIT */
/* json: a small streaming JSON writer.
 *
 * Values are written straight to a sink callback through a small buffer; the
 * writer inserts commas and checks nesting. Strings may hold any bytes: control
 * characters are escaped and invalid UTF-8 is replaced by U+FFFD, so the output
 * is always valid JSON whatever a symbol or thread name contains.
 *
 * Errors are sticky: after the sink fails (or nesting is misused) every later
 * call is a no-op and fx_json_finish() returns the first error.
 */
#ifndef FXAGENT_JSON_H
#define FXAGENT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Writes @len bytes; returns 0 or a negative errno. */
typedef int (*fx_json_write_fn)(void *ctx, const void *buf, size_t len);

struct fx_json;

/* Returns a writer to @write/@ctx (which must outlive it), or NULL on ENOMEM.
 * Free with fx_json_free(). */
struct fx_json *fx_json_new(fx_json_write_fn write, void *ctx);
void fx_json_free(struct fx_json *j);

/* Flushes buffered bytes. Returns 0, or the first error seen (negative errno;
 * -EINVAL for unbalanced nesting or a value where a key was due). */
int fx_json_finish(struct fx_json *j);

/* The first error seen so far (0 if none), without flushing: lets a caller
 * that writes part of a larger document report the writer's errors. */
int fx_json_error(const struct fx_json *j);

void fx_json_object_begin(struct fx_json *j);
void fx_json_object_end(struct fx_json *j);
void fx_json_array_begin(struct fx_json *j);
void fx_json_array_end(struct fx_json *j);

/* Inside an object, each value is preceded by its key. */
void fx_json_key(struct fx_json *j, const char *key);

void fx_json_string(struct fx_json *j, const char *s); /* NULL writes null */
void fx_json_string_n(struct fx_json *j, const char *s, size_t n);
void fx_json_int(struct fx_json *j, int64_t v);
void fx_json_uint(struct fx_json *j, uint64_t v);
void fx_json_double(struct fx_json *j, double v); /* NaN and infinities write null */
/* A finite @v as fx_json_double() writes it, into @b of @cap (at least 40)
 * bytes: for a value written many times over, formatted once. Returns the
 * length, or -1 for a value JSON has no number for. */
int fx_json_format_double(char *b, size_t cap, double v);
/* @v / 10^@decimals (at most 9) exactly, as a decimal without trailing zeros:
 * for fixed-point values (ns as ms), a reader gets the double that
 * fx_json_double(v / 10^decimals) writes, and no printf is called. */
void fx_json_fixed(struct fx_json *j, int64_t v, unsigned decimals);
void fx_json_bool(struct fx_json *j, bool v);
void fx_json_null(struct fx_json *j);

/* Writes @len bytes of already valid JSON as one value (for fixed fragments). */
void fx_json_raw(struct fx_json *j, const char *json, size_t len);

/* A key and its value, for the members of an object. */
void fx_json_key_string(struct fx_json *j, const char *key, const char *value);
void fx_json_key_int(struct fx_json *j, const char *key, int64_t value);
void fx_json_key_double(struct fx_json *j, const char *key, double value);
void fx_json_key_raw(struct fx_json *j, const char *key, const char *json); /* NUL-ended */
/* A key and an array, or an object, begun. */
void fx_json_key_array(struct fx_json *j, const char *key);
void fx_json_key_object(struct fx_json *j, const char *key);
/* A key and an array of @n copies of the JSON value @value_json (a column of
 * one constant). */
void fx_json_key_column(struct fx_json *j, const char *key, size_t n, const char *value_json);

#endif
