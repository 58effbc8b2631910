/* SPDX-License-Identifier: MIT */
/* config_int.h: what the files of agent/config/ share, and nobody else sees
 * (include/fxagent/config.h is the module's contract).
 *
 * YAML -> struct fx_config in two steps: tree.c turns libyaml's events into a
 * small tree of nodes with their positions (aliases are kept as leaves, never
 * expanded), then a schema walk over that tree fills the config and reports
 * the first problem as "FILE:LINE:COL: KEY.PATH: expected ..., got ...":
 *   config.c          the API, and the walk over the top-level sections
 *   tree.c            libyaml events -> nodes; YAML syntax errors
 *   message.c         the error message: position, key path, the value shown
 *   values.c          one reader per kind of value (numbers, durations, sizes,
 *                     booleans, strings, paths) and of a mapping of known keys
 *   schema_profile.c  sampling, window, output, symbolization
 *   schema_targets.c  targets and labels
 *   schema_service.c  upload, spool, metrics, log
 * Functions shared between these files are cfg_<verb>; the readers return 0
 * or a negative errno with the message in the context's buffer.
 */
#ifndef FXAGENT_CONFIG_INT_H
#define FXAGENT_CONFIG_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fxagent/config.h"

#define MAX_PATH_BYTES 4095
#define SHOW_MAX       48 /* bytes of a value quoted in a message */
/* A buffer for a value shown in a message (escapes take up to 6 bytes). */
#define SHOW_BUF (SHOW_MAX * 4 + 16)
#define PATH_BUF 320 /* a key path ("targets[3].labels.team") */

/* The number of elements of an array. */
#define NUNITS(a) (sizeof(a) / sizeof((a)[0]))

enum node_type { N_SCALAR, N_SEQ, N_MAP, N_ALIAS };

struct node {
	enum node_type type;
	size_t line, col; /* 1-based */
	char *tag;	  /* explicit tag, or NULL */
	char *str;	  /* scalar value (may hold NUL bytes) or alias name */
	size_t len;
	bool plain;	   /* a plain (unquoted) scalar */
	struct node **kid; /* sequence items; mapping keys and values alternating */
	size_t nkid, cap;
};

/* One parse: the name for messages, where the message goes, what is filled. */
struct ctx {
	const char *name;
	char *err;
	size_t errlen;
	struct fx_config *c;
};

/* ---- tree.c ------------------------------------------------------------- */

/* Parses @text into a tree; *@rootp is NULL for an empty stream. */
int cfg_build_tree(struct ctx *x, const char *text, size_t len, struct node **rootp);
void cfg_node_free(struct node *n);
/* @len bytes of @s and a NUL, or NULL. */
char *cfg_dup_mem(const void *s, size_t len);
/* *@out replaced by a copy of @len bytes of @s. Returns 0 or -ENOMEM (said). */
int cfg_set_str(struct ctx *x, char **out, const char *s, size_t len);

/* ---- message.c ---------------------------------------------------------- */

/* Writes "NAME:LINE:COL: PATH: <fmt>" (no "PATH: " when @path is NULL or
 * empty) and returns -EINVAL. */
int cfg_fail_at(struct ctx *x, size_t line, size_t col, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* -EINVAL in the expansion, not only inside cfg_fail_at(): the static analyzer
 * does not look into variadic functions, and took every error path for a
 * success. */
#define fail(x, n, path, ...) (cfg_fail_at(x, (n)->line, (n)->col, path, __VA_ARGS__), -EINVAL)

/* "NAME: out of memory". */
void cfg_tell_nomem(struct ctx *x);
/* The same, and -ENOMEM. */
#define cfg_nomem(x) (cfg_tell_nomem(x), -ENOMEM)

/* Writes @s (@len bytes) into @buf for a one-line message: quotes and
 * backslashes escaped, control bytes as \xHH, cut after SHOW_MAX bytes. */
const char *cfg_show(const char *s, size_t len, bool quote, char *buf, size_t size);
bool cfg_is_null(const struct node *n);
/* What a node is, for "got ...": plain scalars as written, quoted ones in
 * quotes (or always in quotes with @quote, for string values). */
const char *cfg_describe(const struct node *n, bool quote, char *buf, size_t size);
/* "expected @what, got <@n>", the value in quotes if @quote (for strings,
 * even when written plain) or if it was quoted. */
void cfg_tell_expected(struct ctx *x, const struct node *n, const char *path, const char *what,
		       bool quote);
/* The same, and -EINVAL; _str for string values. As with fail(), the error is
 * in the expansion for the static analyzer, which does not follow a call into
 * another file. */
#define cfg_expected(x, n, path, what)	   (cfg_tell_expected(x, n, path, what, false), -EINVAL)
#define cfg_expected_str(x, n, path, what) (cfg_tell_expected(x, n, path, what, true), -EINVAL)
/* Refuses aliases and tags; every node the schema looks at passes here. */
int cfg_check_node(struct ctx *x, const struct node *n, const char *path);
/* For an optional string *@out: checks node @n; a null one (or none) frees
 * and clears *@out. Returns 1 when it did, 0 when @n holds a value to read,
 * or -errno (the error recorded). */
int cfg_check_optional(struct ctx *x, const struct node *n, const char *path, char **out);
/* "@parent.@key" and "@parent[@i]" into @buf (PATH_BUF bytes). */
void cfg_child_path(char *buf, const char *parent, const char *key);
void cfg_item_path(char *buf, const char *parent, size_t i);

/* ---- values.c ----------------------------------------------------------- */

/* A plain decimal integer from @min to @max and a multiple of @step. */
int cfg_get_uint(struct ctx *x, const struct node *n, const char *path, uint64_t min, uint64_t max,
		 uint64_t step, uint64_t *out);
/* true or false, and nothing else. */
int cfg_get_bool(struct ctx *x, const struct node *n, const char *path, bool *out);
/* Any non-null scalar without control characters; *@s points into @n. */
int cfg_get_text(struct ctx *x, const struct node *n, const char *path, const char *what,
		 const char **s, size_t *len);
/* One of @names (@count of them); its index in *@idx. */
int cfg_get_enum(struct ctx *x, const struct node *n, const char *path, const char *what,
		 const char *const *names, size_t count, size_t *idx);
/* A string of @min to @max bytes whose bytes all pass @ok (given the byte
 * and its index), copied into *@out (whose old value is freed). */
int cfg_get_word(struct ctx *x, const struct node *n, const char *path, const char *what,
		 size_t min, size_t max, bool (*ok)(unsigned char c, size_t i), char **out);
bool cfg_is_name_char(char ch);
/* [A-Za-z0-9_.-]{1,@max}: target names and label keys. */
bool cfg_is_name(const char *s, size_t len, size_t max);
/* An absolute path (without ".." components if @no_dotdot) into *@out,
 * replacing what was there. */
int cfg_get_abs_path(struct ctx *x, const struct node *n, const char *path, const char *what,
		     bool no_dotdot, char **out);
/* The same, or null for none. */
int cfg_get_opt_path(struct ctx *x, const struct node *n, const char *path, char **out);
/* A duration in milliseconds from @min to @max and a multiple of @step; a
 * @min of 0 is "no limit". */
int cfg_get_duration(struct ctx *x, const struct node *n, const char *path, uint64_t min,
		     uint64_t max, uint64_t step, uint64_t *out);
/* A size in bytes from @min to @max. */
int cfg_get_size(struct ctx *x, const struct node *n, const char *path, uint64_t min, uint64_t max,
		 uint64_t *out);
/* Two durations in the wrong order: @n, at @path, should be at least (or at
 * most) the other one, @other_ms. Returns -EINVAL. */
int cfg_duration_order(struct ctx *x, const struct node *n, const char *path, bool at_least,
		       const char *other, uint64_t other_ms);
/* A mapping whose keys are among @keys (@nkeys), each at most once: the value
 * and key node of each in @vals and @knodes (NULL when absent). */
int cfg_get_map(struct ctx *x, const struct node *n, const char *path, const char *what,
		const char *const *keys, size_t nkeys, const struct node **vals,
		const struct node **knodes);

/* ---- schema_targets.c --------------------------------------------------- */

int cfg_get_targets(struct ctx *x, const struct node *n);
/* A map of label names to strings, merged over @labels (@nlabels of them). */
int cfg_get_labels(struct ctx *x, const struct node *n, const char *path, struct fx_label *labels,
		   size_t *nlabels);
/* Sets @key (@klen bytes) to @value (@vlen bytes) in @labels: replaces the
 * value of a key already there, else appends (the caller checked room). */
int cfg_set_label(struct ctx *x, struct fx_label *labels, size_t *nlabels, const char *key,
		  size_t klen, const char *value, size_t vlen);

/* ---- schema_profile.c --------------------------------------------------- */

int cfg_get_sampling(struct ctx *x, const struct node *n);
int cfg_get_window(struct ctx *x, const struct node *n);
int cfg_get_output(struct ctx *x, const struct node *n);
int cfg_get_symbolization(struct ctx *x, const struct node *n);

/* ---- schema_service.c --------------------------------------------------- */

int cfg_get_upload(struct ctx *x, const struct node *n);
int cfg_get_spool(struct ctx *x, const struct node *n);
int cfg_get_metrics(struct ctx *x, const struct node *n);
int cfg_get_log(struct ctx *x, const struct node *n);

#endif
