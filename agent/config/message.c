/* SPDX-License-Identifier: MIT */
/* How a problem in a config is said: "FILE:LINE:COL: KEY.PATH: expected ...,
 * got ...", with the value shown escaped and cut to one short line, and the
 * node checks every value passes first (no aliases, no tags).
 */
#include "config_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int cfg_fail_at(struct ctx *x, size_t line, size_t col, const char *path, const char *fmt, ...)
{
	va_list ap;
	int off;

	if (!x->err || !x->errlen)
		return -EINVAL;
	if (path && *path)
		off = snprintf(x->err, x->errlen, "%s:%zu:%zu: %s: ", x->name, line, col, path);
	else
		off = snprintf(x->err, x->errlen, "%s:%zu:%zu: ", x->name, line, col);
	if (off >= 0 && (size_t)off < x->errlen) {
		va_start(ap, fmt);
		vsnprintf(x->err + off, x->errlen - (size_t)off, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

void cfg_tell_nomem(struct ctx *x)
{
	if (x->err && x->errlen)
		snprintf(x->err, x->errlen, "%s: out of memory", x->name);
}

/* Writes @s (@len bytes) into @buf for a one-line message: quotes and
 * backslashes escaped, control bytes as \xHH, cut after SHOW_MAX bytes. */
const char *cfg_show(const char *s, size_t len, bool quote, char *buf, size_t size)
{
	size_t o = 0, i, lim = len;

	if (lim > SHOW_MAX) {
		lim = SHOW_MAX;
		/* Do not cut a UTF-8 sequence in two. */
		while (lim > 0 && ((unsigned char)s[lim] & 0xc0) == 0x80)
			lim--;
	}
	if (quote)
		buf[o++] = '"';
	for (i = 0; i < lim && o + 8 < size; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch < 0x20 || ch == 0x7f) {
			o += (size_t)snprintf(buf + o, size - o, "\\x%02x", ch);
		} else if (ch == 0xc2 && i + 1 < lim && (unsigned char)s[i + 1] >= 0x80 &&
			   (unsigned char)s[i + 1] <= 0x9f) {
			/* A C1 control (U+0080-U+009F): as harmful on a terminal. */
			o += (size_t)snprintf(buf + o, size - o, "\\u%04x",
					      (unsigned)(unsigned char)s[++i]);
		} else if (quote && (ch == '"' || ch == '\\'))
			o += (size_t)snprintf(buf + o, size - o, "\\%c", ch);
		else
			buf[o++] = (char)ch;
	}
	if (i < len && o + 4 < size) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	if (quote)
		buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

bool cfg_is_null(const struct node *n)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };
	size_t i;

	if (n->type != N_SCALAR || !n->plain || n->tag)
		return false;
	for (i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
		if (n->len == strlen(nulls[i]) && !memcmp(n->str, nulls[i], n->len))
			return true;
	return false;
}

/* What a node is, for "got ...": plain scalars as written, quoted ones in
 * quotes (or always in quotes with @quote, for string values). */
const char *cfg_describe(const struct node *n, bool quote, char *buf, size_t size)
{
	if (n->type == N_MAP)
		return "a mapping";
	if (n->type == N_SEQ)
		return "a list";
	if (n->type == N_ALIAS)
		return "an alias";
	if (cfg_is_null(n))
		return n->len ? "null" : "nothing";
	return cfg_show(n->str, n->len, quote || !n->plain, buf, size);
}

/* "expected @what, got <@n>"; string values (@quote) are shown in quotes even
 * when written plain. */
void cfg_tell_expected(struct ctx *x, const struct node *n, const char *path, const char *what,
		       bool quote)
{
	char buf[SHOW_BUF];

	cfg_fail_at(x, n->line, n->col, path, "expected %s, got %s", what,
		    cfg_describe(n, quote, buf, sizeof(buf)));
}

/* Every node the schema looks at passes here: aliases are refused rather than
 * expanded (a few lines of aliases can stand for gigabytes), and tags, which
 * would change what a value means, are not supported. */
int cfg_check_node(struct ctx *x, const struct node *n, const char *path)
{
	char buf[SHOW_BUF];

	if (n->type == N_ALIAS)
		return fail(
			x, n, path,
			"expected a value, got the alias *%s (aliases are not supported, write the "
			"value out)",
			cfg_show(n->str, n->len, false, buf, sizeof(buf)));
	if (n->tag) {
		const char *core = "tag:yaml.org,2002:";
		const char *t = n->tag;
		bool is_core = !strncmp(t, core, strlen(core));

		if (is_core)
			t += strlen(core);
		return fail(x, n, path, "expected a value without a YAML tag, got the tag %s%s",
			    is_core ? "!!" : "", cfg_show(t, strlen(t), false, buf, sizeof(buf)));
	}
	return 0;
}

void cfg_child_path(char *buf, const char *parent, const char *key)
{
	/* Key paths are short; a cut one is still a readable message. */
	int n = *parent ? snprintf(buf, PATH_BUF, "%s.%s", parent, key)
			: snprintf(buf, PATH_BUF, "%s", key);

	if (n < 0 || n >= PATH_BUF)
		buf[PATH_BUF - 1] = '\0';
}

void cfg_item_path(char *buf, const char *parent, size_t i)
{
	snprintf(buf, PATH_BUF, "%s[%zu]", parent, i);
}
