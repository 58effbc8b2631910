/* SPDX-License-Identifier: MIT */
/* YAML -> struct fx_config in two steps: libyaml's event parser builds a small
 * tree of nodes with their positions (aliases are kept as leaves, never
 * expanded), then a schema walk over that tree fills the config and reports the
 * first problem as "FILE:LINE:COL: KEY.PATH: expected ..., got ...".
 */
#include "fxagent/config.h"
#include "fxagent/log.h"
#include "fxagent/trust.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <yaml.h>

/* A config is a few KiB; the cap keeps a wrong path (a log file, /dev/zero)
 * from being read whole. */
#define CONFIG_MAX_BYTES (1u << 20)
/* The schema is four levels deep; anything much deeper is a mistake, and the
 * bound keeps the recursive free and walk shallow. */
#define MAX_DEPTH	 64
#define MAX_PATH_BYTES	 4095
#define LABEL_KEY_MAX	 64
#define LABEL_VALUE_MAX	 256
#define TARGET_NAME_MAX	 64
#define UNIT_NAME_MAX	 255
#define PROCESS_NAME_MAX 255
#define PID_MAX		 4194304 /* the kernel's PID_MAX_LIMIT */
#define SHOW_MAX	 48	 /* bytes of a value quoted in a message */
#define URL_MAX		 2048
#define HEADER_NAME_MAX	 64
/* A header line ("Name: value") must fit the uploader's 512-byte buffer. */
#define HEADER_VALUE_MAX 256
#define PATH_BUF	 320
/* The largest valid config (256 targets with 32 labels each) has about 20000
 * nodes; the cap keeps the tree of a 1 MiB file of "[1,1,1,..." small. */
#define MAX_NODES 65536

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

struct ctx {
	const char *name;
	char *err;
	size_t errlen;
	struct fx_config *c;
};

/* Recursion bounded by MAX_DEPTH, the parser's nesting limit.
 * NOLINTNEXTLINE(misc-no-recursion) */
static void node_free(struct node *n)
{
	size_t i;

	if (!n)
		return;
	for (i = 0; i < n->nkid; i++)
		node_free(n->kid[i]);
	free(n->kid);
	free(n->tag);
	free(n->str);
	free(n);
}

__attribute__((format(printf, 5, 6))) static int fail_at(struct ctx *x, size_t line, size_t col,
							 const char *path, const char *fmt, ...)
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

/* -EINVAL in the expansion, not only inside fail_at(): the static analyzer does
 * not look into variadic functions, and took every error path for a success. */
#define fail(x, n, path, ...) (fail_at(x, (n)->line, (n)->col, path, __VA_ARGS__), -EINVAL)

static int nomem(struct ctx *x)
{
	if (x->err && x->errlen)
		snprintf(x->err, x->errlen, "%s: out of memory", x->name);
	return -ENOMEM;
}

/* Writes @s (@len bytes) into @buf for a one-line message: quotes and
 * backslashes escaped, control bytes as \xHH, cut after SHOW_MAX bytes. */
static const char *show(const char *s, size_t len, bool quote, char *buf, size_t size)
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

static bool is_null(const struct node *n)
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
static const char *describe(const struct node *n, bool quote, char *buf, size_t size)
{
	if (n->type == N_MAP)
		return "a mapping";
	if (n->type == N_SEQ)
		return "a list";
	if (n->type == N_ALIAS)
		return "an alias";
	if (is_null(n))
		return n->len ? "null" : "nothing";
	return show(n->str, n->len, quote || !n->plain, buf, size);
}

static int expected(struct ctx *x, const struct node *n, const char *path, const char *what)
{
	char buf[SHOW_MAX * 4 + 16];

	return fail(x, n, path, "expected %s, got %s", what, describe(n, false, buf, sizeof(buf)));
}

/* The same for string values, shown in quotes even when written plain. */
static int expected_str(struct ctx *x, const struct node *n, const char *path, const char *what)
{
	char buf[SHOW_MAX * 4 + 16];

	return fail(x, n, path, "expected %s, got %s", what, describe(n, true, buf, sizeof(buf)));
}

/* Every node the schema looks at passes here: aliases are refused rather than
 * expanded (a few lines of aliases can stand for gigabytes), and tags, which
 * would change what a value means, are not supported. */
static int check_node(struct ctx *x, const struct node *n, const char *path)
{
	char buf[SHOW_MAX * 4 + 16];

	if (n->type == N_ALIAS)
		return fail(
			x, n, path,
			"expected a value, got the alias *%s (aliases are not supported, write the "
			"value out)",
			show(n->str, n->len, false, buf, sizeof(buf)));
	if (n->tag) {
		const char *core = "tag:yaml.org,2002:";
		const char *t = n->tag;
		bool is_core = !strncmp(t, core, strlen(core));

		if (is_core)
			t += strlen(core);
		return fail(x, n, path, "expected a value without a YAML tag, got the tag %s%s",
			    is_core ? "!!" : "", show(t, strlen(t), false, buf, sizeof(buf)));
	}
	return 0;
}

static void child_path(char *buf, const char *parent, const char *key)
{
	/* Key paths are short; a cut one is still a readable message. */
	int n = *parent ? snprintf(buf, PATH_BUF, "%s.%s", parent, key)
			: snprintf(buf, PATH_BUF, "%s", key);

	if (n < 0 || n >= PATH_BUF)
		buf[PATH_BUF - 1] = '\0';
}

static void item_path(char *buf, const char *parent, size_t i)
{
	snprintf(buf, PATH_BUF, "%s[%zu]", parent, i);
}

/* ---- the tree ---------------------------------------------------------- */

static void mark_of(const char *text, size_t len, size_t offset, size_t *line, size_t *col)
{
	size_t i;

	*line = 1;
	*col = 1;
	for (i = 0; i < offset && i < len; i++) {
		if (text[i] == '\n') {
			(*line)++;
			*col = 1;
		} else if (((unsigned char)text[i] & 0xc0) != 0x80) {
			(*col)++;
		}
	}
}

/* The byte at a 0-based line and column (in characters), or 0 past the end. */
static char char_at(const char *text, size_t len, size_t line, size_t col)
{
	size_t i = 0;

	for (; i < len && line; i++)
		if (text[i] == '\n')
			line--;
	for (; i < len; i++) {
		if (((unsigned char)text[i] & 0xc0) == 0x80)
			continue;
		if (!col--)
			return text[i];
	}
	return 0;
}

static int syntax_error(struct ctx *x, const yaml_parser_t *p, const char *text, size_t len)
{
	const char *problem = p->problem ? p->problem : "unknown error";
	size_t line, col;

	if (p->error == YAML_MEMORY_ERROR)
		return nomem(x);
	if (p->error == YAML_READER_ERROR) {
		/* Reader errors carry a byte offset, not a mark. */
		mark_of(text, len, p->problem_offset, &line, &col);
		if (p->problem_value != -1)
			return fail_at(x, line, col, NULL, "YAML syntax error: %s (byte 0x%02x)",
				       problem, (unsigned)p->problem_value);
		return fail_at(x, line, col, NULL, "YAML syntax error: %s", problem);
	}
	/* The most common one deserves a plain word. */
	if (char_at(text, len, p->problem_mark.line, p->problem_mark.column) == '\t')
		return fail_at(x, p->problem_mark.line + 1, p->problem_mark.column + 1, NULL,
			       "YAML syntax error: %s (a tab; YAML indents with spaces only)",
			       problem);
	if (p->context)
		return fail_at(x, p->problem_mark.line + 1, p->problem_mark.column + 1, NULL,
			       "YAML syntax error: %s (%s at line %zu, column %zu)", problem,
			       p->context, p->context_mark.line + 1, p->context_mark.column + 1);
	return fail_at(x, p->problem_mark.line + 1, p->problem_mark.column + 1, NULL,
		       "YAML syntax error: %s", problem);
}

static char *dup_mem(const void *s, size_t len)
{
	char *d = malloc(len + 1);

	if (d) {
		memcpy(d, s, len);
		d[len] = '\0';
	}
	return d;
}

/* Turns one event into a node and hangs it under the innermost open
 * collection (or makes it the root). */
static int add_node(struct ctx *x, const yaml_event_t *ev, struct node **stack, size_t *depth,
		    struct node **root, size_t *nnodes)
{
	const yaml_char_t *tag = NULL;
	struct node *n, *parent;

	if (++*nnodes > MAX_NODES)
		return fail_at(x, ev->start_mark.line + 1, ev->start_mark.column + 1, NULL,
			       "expected at most %d YAML nodes, got more", MAX_NODES);
	n = calloc(1, sizeof(*n));
	if (!n)
		return nomem(x);
	n->line = ev->start_mark.line + 1;
	n->col = ev->start_mark.column + 1;
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		n->type = N_SCALAR;
		n->str = dup_mem(ev->data.scalar.value, ev->data.scalar.length);
		n->len = ev->data.scalar.length;
		n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		tag = ev->data.scalar.tag;
		break;
	case YAML_ALIAS_EVENT:
		n->type = N_ALIAS;
		n->len = strlen((const char *)ev->data.alias.anchor);
		n->str = dup_mem(ev->data.alias.anchor, n->len);
		break;
	case YAML_SEQUENCE_START_EVENT:
		n->type = N_SEQ;
		n->str = dup_mem("", 0);
		tag = ev->data.sequence_start.tag;
		break;
	default:
		n->type = N_MAP;
		n->str = dup_mem("", 0);
		tag = ev->data.mapping_start.tag;
		break;
	}
	if (tag)
		n->tag = dup_mem(tag, strlen((const char *)tag));
	if (!n->str || (tag && !n->tag)) {
		node_free(n);
		return nomem(x);
	}
	if (*depth == 0) {
		*root = n;
	} else {
		parent = stack[*depth - 1];
		/* libyaml puts an empty value where the next token starts, often the
		 * next line; its key is the better place to point at. */
		if (parent->type == N_MAP && parent->nkid % 2 && n->type == N_SCALAR && n->plain &&
		    !n->len) {
			n->line = parent->kid[parent->nkid - 1]->line;
			n->col = parent->kid[parent->nkid - 1]->col;
		}
		if (parent->nkid == parent->cap) {
			/* Most collections here are small: start at 4, not fx_grow's 64. */
			size_t cap = parent->cap ? parent->cap * 2 : 4;
			/* An array of pointers. NOLINTNEXTLINE(bugprone-sizeof-expression) */
			struct node **kid = realloc(parent->kid, cap * sizeof(*kid));

			if (!kid) {
				node_free(n);
				return nomem(x);
			}
			parent->kid = kid;
			parent->cap = cap;
		}
		parent->kid[parent->nkid++] = n;
	}
	if (n->type == N_SEQ || n->type == N_MAP) {
		if (*depth == MAX_DEPTH)
			return fail(x, n, NULL, "expected at most %d levels of nesting, got more",
				    MAX_DEPTH);
		stack[(*depth)++] = n;
	}
	return 0;
}

/* Parses @text into a tree; *@rootp is NULL for an empty stream. */
static int build_tree(struct ctx *x, const char *text, size_t len, struct node **rootp)
{
	struct node *stack[MAX_DEPTH];
	struct node *root = NULL;
	size_t depth = 0, nnodes = 0;
	unsigned ndocs = 0;
	bool done = false;
	yaml_parser_t p;
	yaml_event_t ev;
	int r = 0;

	if (!yaml_parser_initialize(&p))
		return nomem(x);
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	while (!done && !r) {
		if (!yaml_parser_parse(&p, &ev)) {
			r = syntax_error(x, &p, text, len);
			break;
		}
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++ndocs > 1)
				r = fail_at(x, ev.start_mark.line + 1, ev.start_mark.column + 1,
					    NULL,
					    "expected a single YAML document, got a second one");
			break;
		case YAML_SCALAR_EVENT:
		case YAML_ALIAS_EVENT:
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT:
			r = add_node(x, &ev, stack, &depth, &root, &nnodes);
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			if (depth)
				depth--;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	if (r) {
		node_free(root);
		return r;
	}
	*rootp = root;
	return 0;
}

/* ---- scalar values ----------------------------------------------------- */

static bool parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (!len || len > 20)
		return false;
	for (i = 0; i < len; i++) {
		unsigned d = (unsigned char)s[i] - '0';

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

/* "010": YAML 1.1 readers take it for octal 8, we would read 10. Either
 * way not everyone reads it alike, so it is refused. */
static bool has_leading_zero(const struct node *n)
{
	return n->type == N_SCALAR && n->len >= 2 && n->str[0] == '0' && n->str[1] >= '0' &&
	       n->str[1] <= '9';
}

/* The message for such a number: what was expected, and both readings
 * ("write 10s or 8s"). */
static void leading_zero(struct ctx *x, const struct node *n, const char *path, const char *what)
{
	char buf[SHOW_MAX * 4 + 16], dec[32] = "", oct[32] = "";
	size_t d = 0, z = 0;
	uint64_t o = 0;
	bool octal = true;

	while (d < n->len && n->str[d] >= '0' && n->str[d] <= '9') {
		octal = octal && n->str[d] <= '7' && o < (UINT64_MAX >> 3);
		o = o * 8 + (uint64_t)(n->str[d] - '0');
		d++;
	}
	while (z + 1 < d && n->str[z] == '0')
		z++;
	snprintf(dec, sizeof(dec), "%.*s%.*s", (int)(d - z < 20 ? d - z : 20), n->str + z,
		 (int)(n->len - d < 8 ? n->len - d : 8), n->str + d);
	if (octal)
		snprintf(oct, sizeof(oct), " or %llu%.*s", (unsigned long long)o,
			 (int)(n->len - d < 8 ? n->len - d : 8), n->str + d);
	if (!strcmp(oct + (octal ? 4 : 0), dec))
		oct[0] = '\0'; /* "05": the same either way */
	fail_at(x, n->line, n->col, path,
		"expected %s, got %s (a leading zero is octal in YAML 1.1; write %s%s)", what,
		describe(n, false, buf, sizeof(buf)), dec, oct);
}

/* A plain decimal integer from @min to @max and a multiple of @step. */
static int get_uint(struct ctx *x, const struct node *n, const char *path, uint64_t min,
		    uint64_t max, uint64_t step, uint64_t *out)
{
	char what[96];
	uint64_t v;
	int r;

	r = check_node(x, n, path);
	if (r)
		return r;
	if (!has_leading_zero(n) && n->type == N_SCALAR && n->plain &&
	    parse_u64(n->str, n->len, &v) && v >= min && v <= max && v % step == 0) {
		*out = v;
		return 0;
	}
	if (step > 1)
		snprintf(what, sizeof(what), "a multiple of %llu from %llu to %llu",
			 (unsigned long long)step, (unsigned long long)min,
			 (unsigned long long)max);
	else
		snprintf(what, sizeof(what), "a whole number from %llu to %llu",
			 (unsigned long long)min, (unsigned long long)max);
	if (has_leading_zero(n)) {
		leading_zero(x, n, path, what);
		return -EINVAL;
	}
	return expected(x, n, path, what);
}

/* Only the YAML 1.2 spellings: "yes", "on" and friends mean different things
 * to different YAML libraries. */
static int get_bool(struct ctx *x, const struct node *n, const char *path, bool *out)
{
	int r;

	r = check_node(x, n, path);
	if (r)
		return r;
	if (n->type == N_SCALAR && n->plain && n->len == 4 && !memcmp(n->str, "true", 4)) {
		*out = true;
		return 0;
	}
	if (n->type == N_SCALAR && n->plain && n->len == 5 && !memcmp(n->str, "false", 5)) {
		*out = false;
		return 0;
	}
	return expected(x, n, path, "true or false");
}

/* The length of the control character at @s (C0, DEL, or C1 as UTF-8),
 * else 0. */
static size_t control_len(const char *s, size_t len)
{
	unsigned char c = (unsigned char)s[0];

	if (c < 0x20 || c == 0x7f)
		return 1;
	if (c == 0xc2 && len > 1 && (unsigned char)s[1] >= 0x80 && (unsigned char)s[1] <= 0x9f)
		return 2;
	return 0;
}

/* Says which control character (@off bytes into @n) and where: an escape
 * in double quotes is not visible as such in the file's columns. */
static void control_char(struct ctx *x, const struct node *n, const char *path, size_t off)
{
	char buf[SHOW_MAX * 4 + 16], ch[16];
	const unsigned char *p = (const unsigned char *)n->str + off;

	if (control_len(n->str + off, n->len - off) == 2)
		snprintf(ch, sizeof(ch), "\\u%04x", (unsigned)p[1]);
	else
		snprintf(ch, sizeof(ch), "\\x%02x", p[0]);
	fail_at(x, n->line, n->col, path,
		"expected a string without control characters, got %s (the control character %s "
		"at byte %zu)",
		show(n->str, n->len, true, buf, sizeof(buf)), ch, off + 1);
}

/* Any non-null scalar without control characters, plain or quoted (a process
 * may well be called "1234"). The result points into the node. */
static int get_text(struct ctx *x, const struct node *n, const char *path, const char *what,
		    const char **s, size_t *len)
{
	size_t i;
	int r;

	r = check_node(x, n, path);
	if (r)
		return r;
	if (n->type != N_SCALAR || is_null(n))
		return expected(x, n, path, what);
	/* A newline kept by a block scalar ("|"), a "\t" or "\x01" of a quoted
	 * one: a mistake in every value here, and one that would go on into
	 * logs, headers and chunks. */
	for (i = 0; i < n->len; i++) {
		if (control_len(n->str + i, n->len - i)) {
			control_char(x, n, path, i);
			return -EINVAL;
		}
	}
	*s = n->str;
	*len = n->len;
	return 0;
}

static int get_enum(struct ctx *x, const struct node *n, const char *path, const char *what,
		    const char *const *names, size_t count, size_t *idx)
{
	const char *s;
	size_t len, i;
	int r;

	r = get_text(x, n, path, what, &s, &len);
	if (r)
		return r;
	for (i = 0; i < count; i++) {
		if (len == strlen(names[i]) && !memcmp(s, names[i], len)) {
			*idx = i;
			return 0;
		}
	}
	return expected(x, n, path, what);
}

static bool is_name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_' || ch == '.' || ch == '-';
}

/* [A-Za-z0-9_.-]{1,@max}: target names and label keys. */
static bool is_name(const char *s, size_t len, size_t max)
{
	size_t i;

	if (!len || len > max)
		return false;
	for (i = 0; i < len; i++)
		if (!is_name_char(s[i]))
			return false;
	return true;
}

/* An absolute path, with no ".." components if @no_dotdot. */
static bool is_abs_path(const char *s, size_t len, bool no_dotdot)
{
	size_t i = 0;

	if (!len || len > MAX_PATH_BYTES || s[0] != '/')
		return false;
	while (no_dotdot && i < len) {
		size_t start, clen;

		while (i < len && s[i] == '/')
			i++;
		start = i;
		while (i < len && s[i] != '/')
			i++;
		clen = i - start;
		if (clen == 2 && s[start] == '.' && s[start + 1] == '.')
			return false;
	}
	return true;
}

static int get_abs_path(struct ctx *x, const struct node *n, const char *path, const char *what,
			bool no_dotdot, char **out)
{
	const char *s;
	size_t len;
	char *d;
	int r;

	r = get_text(x, n, path, what, &s, &len);
	if (r)
		return r;
	if (!is_abs_path(s, len, no_dotdot))
		return expected_str(x, n, path, what);
	d = dup_mem(s, len);
	if (!d)
		return nomem(x);
	free(*out);
	*out = d;
	return 0;
}

/* ---- mappings ---------------------------------------------------------- */

/* Checks that @n is a mapping whose keys are among @keys, each at most once,
 * and hands out the value and key node of each (NULL when absent). A null
 * value (a section whose keys are all commented out) counts as empty. */
static int get_map(struct ctx *x, const struct node *n, const char *path, const char *what,
		   const char *const *keys, size_t nkeys, const struct node **vals,
		   const struct node **knodes)
{
	char buf[SHOW_MAX * 4 + 16], sub[PATH_BUF], list[256];
	const char *where = *path ? path : "top level";
	size_t i, k, o = 0;
	int r;

	for (k = 0; k < nkeys; k++) {
		vals[k] = NULL;
		knodes[k] = NULL;
	}
	r = check_node(x, n, where);
	if (r)
		return r;
	if (is_null(n))
		return 0;
	if (n->type != N_MAP)
		return expected(x, n, where, what);
	for (i = 0; i + 1 < n->nkid; i += 2) {
		const struct node *key = n->kid[i];

		r = check_node(x, key, where);
		if (r)
			return r;
		if (key->type != N_SCALAR || is_null(key))
			return expected(x, key, where, "a key name");
		for (k = 0; k < nkeys; k++)
			if (key->len == strlen(keys[k]) && !memcmp(key->str, keys[k], key->len))
				break;
		if (k == nkeys) {
			for (k = 0; k < nkeys && o < sizeof(list); k++)
				o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s",
						      k ? ", " : "", keys[k]);
			child_path(sub, path, show(key->str, key->len, false, buf, sizeof(buf)));
			return fail(x, key, sub, "unknown key, expected one of %s", list);
		}
		child_path(sub, path, keys[k]);
		if (vals[k])
			return fail(x, key, sub, "duplicate key (first at line %zu, column %zu)",
				    knodes[k]->line, knodes[k]->col);
		knodes[k] = key;
		vals[k] = n->kid[i + 1];
	}
	return 0;
}

static int set_label(struct ctx *x, struct fx_label *labels, size_t *nlabels, const char *key,
		     size_t klen, const char *value, size_t vlen)
{
	char *k = NULL, *v;
	size_t i;

	v = dup_mem(value, vlen);
	if (!v)
		return nomem(x);
	for (i = 0; i < *nlabels; i++) {
		if (strlen(labels[i].key) == klen && !memcmp(labels[i].key, key, klen)) {
			free(labels[i].value);
			labels[i].value = v;
			return 0;
		}
	}
	k = dup_mem(key, klen);
	if (!k) {
		free(v);
		return nomem(x);
	}
	labels[*nlabels].key = k;
	labels[*nlabels].value = v;
	(*nlabels)++;
	return 0;
}

static bool has_label(const struct fx_label *labels, size_t nlabels, const char *key, size_t klen)
{
	size_t i;

	for (i = 0; i < nlabels; i++)
		if (strlen(labels[i].key) == klen && !memcmp(labels[i].key, key, klen))
			return true;
	return false;
}

/* A map of label names to strings, merged over the labels already there (the
 * host label of the defaults). */
static int get_labels(struct ctx *x, const struct node *n, const char *path,
		      struct fx_label *labels, size_t *nlabels)
{
	char buf[SHOW_MAX * 4 + 16], sub[PATH_BUF], what[96];
	size_t i, j;
	int r;

	r = check_node(x, n, path);
	if (r)
		return r;
	if (is_null(n))
		return 0;
	if (n->type != N_MAP)
		return expected(x, n, path, "a mapping of label names to strings");
	for (i = 0; i + 1 < n->nkid; i += 2) {
		const struct node *key = n->kid[i], *val = n->kid[i + 1];
		const char *v;
		size_t vlen;

		r = check_node(x, key, path);
		if (r)
			return r;
		if (key->type != N_SCALAR || !is_name(key->str, key->len, LABEL_KEY_MAX))
			return fail(
				x, key, path,
				"expected a label name of 1 to %d characters from A-Z a-z 0-9 _ "
				". -, got %s",
				LABEL_KEY_MAX, describe(key, true, buf, sizeof(buf)));
		child_path(sub, path, key->str);
		for (j = 0; j < i; j += 2)
			if (n->kid[j]->len == key->len &&
			    !memcmp(n->kid[j]->str, key->str, key->len))
				return fail(x, key, sub,
					    "duplicate key (first at line %zu, column %zu)",
					    n->kid[j]->line, n->kid[j]->col);
		if (*nlabels == FX_CONFIG_MAX_LABELS &&
		    !has_label(labels, *nlabels, key->str, key->len))
			return fail(x, key, sub, "expected at most %d labels%s, got more",
				    FX_CONFIG_MAX_LABELS,
				    labels == x->c->labels ? " (the host label included)" : "");
		snprintf(what, sizeof(what), "a string of at most %d bytes", LABEL_VALUE_MAX);
		r = get_text(x, val, sub, what, &v, &vlen);
		if (r)
			return r;
		if (vlen > LABEL_VALUE_MAX)
			return expected_str(x, val, sub, what);
		r = set_label(x, labels, nlabels, key->str, key->len, v, vlen);
		if (r)
			return r;
	}
	return 0;
}

/* ---- upload and spool values ------------------------------------------- */

struct unit {
	const char *name;
	uint64_t mul;
};

/* Largest first: printing picks the first unit that divides the value. */
static const struct unit duration_units[] = {
	{ "d", 86400000 }, { "h", 3600000 }, { "m", 60000 }, { "s", 1000 }, { "ms", 1 },
};
/* Only the binary units: "MB" means 10^6 to some and 2^20 to others, so it
 * is refused rather than guessed. */
static const struct unit size_units[] = {
	{ "TiB", 1ull << 40 },
	{ "GiB", 1ull << 30 },
	{ "MiB", 1ull << 20 },
	{ "KiB", 1ull << 10 },
};

#define NUNITS(a) (sizeof(a) / sizeof((a)[0]))

/* Digits and one of @units right after them ("10s", "256MiB"), or digits
 * alone counting as @bare each when the scalar is plain (a quoted "10" is a
 * mistake, as for every other number). Overflow fails: such a value is out of
 * every range anyway. */
static bool parse_with_unit(const struct node *n, const struct unit *units, size_t nunits,
			    uint64_t bare, uint64_t *out)
{
	uint64_t v, mul = bare;
	size_t d = 0, i;

	if (n->type != N_SCALAR || is_null(n))
		return false;
	while (d < n->len && n->str[d] >= '0' && n->str[d] <= '9')
		d++;
	if (!parse_u64(n->str, d, &v))
		return false;
	if (d == n->len && !n->plain)
		return false;
	if (d < n->len) {
		for (i = 0; i < nunits; i++)
			if (n->len - d == strlen(units[i].name) &&
			    !memcmp(n->str + d, units[i].name, n->len - d))
				break;
		if (i == nunits)
			return false;
		mul = units[i].mul;
	}
	if (v > UINT64_MAX / mul)
		return false;
	*out = v * mul;
	return true;
}

/* @v in the largest unit that divides it ("10m", "1TiB"); bytes without a unit. */
static const char *fmt_unit(uint64_t v, const struct unit *units, size_t nunits, char *buf,
			    size_t size)
{
	size_t i;

	for (i = 0; v && i < nunits; i++) {
		if (v % units[i].mul == 0) {
			snprintf(buf, size, "%llu%s", (unsigned long long)(v / units[i].mul),
				 units[i].name);
			return buf;
		}
	}
	snprintf(buf, size, "%llu", (unsigned long long)v);
	return buf;
}

static const char *fmt_duration(uint64_t ms, char *buf, size_t size)
{
	return fmt_unit(ms, duration_units, NUNITS(duration_units), buf, size);
}

/* A duration in milliseconds from @min to @max and a multiple of @step. A
 * @min of 0 is "no limit" (spool.max_age). */
static int get_duration(struct ctx *x, const struct node *n, const char *path, uint64_t min,
			uint64_t max, uint64_t step, uint64_t *out)
{
	char what[256], lo[32], hi[32];
	uint64_t v;
	int r;

	r = check_node(x, n, path);
	if (r)
		return r;
	if (!has_leading_zero(n) &&
	    parse_with_unit(n, duration_units, NUNITS(duration_units), 1000, &v) && v >= min &&
	    v <= max && v % step == 0) {
		*out = v;
		return 0;
	}
	snprintf(what, sizeof(what),
		 "a duration from %s to %s%s (a whole number of seconds, or with ms, s, m, h or d)",
		 min ? fmt_duration(min, lo, sizeof(lo)) : "0 (no limit)",
		 fmt_duration(max, hi, sizeof(hi)), step == 1000 ? " in whole seconds" : "");
	if (has_leading_zero(n)) {
		leading_zero(x, n, path, what);
		return -EINVAL;
	}
	return expected(x, n, path, what);
}

/* A size in bytes from @min to @max. */
static int get_size(struct ctx *x, const struct node *n, const char *path, uint64_t min,
		    uint64_t max, uint64_t *out)
{
	char what[256], lo[32], hi[32];
	uint64_t v;
	int r;

	r = check_node(x, n, path);
	if (r)
		return r;
	if (!has_leading_zero(n) && parse_with_unit(n, size_units, NUNITS(size_units), 1, &v) &&
	    v >= min && v <= max) {
		*out = v;
		return 0;
	}
	snprintf(what, sizeof(what),
		 "a size from %s to %s (a whole number of bytes, or with KiB, MiB, GiB or TiB)",
		 fmt_unit(min, size_units, NUNITS(size_units), lo, sizeof(lo)),
		 fmt_unit(max, size_units, NUNITS(size_units), hi, sizeof(hi)));
	if (has_leading_zero(n)) {
		leading_zero(x, n, path, what);
		return -EINVAL;
	}
	return expected(x, n, path, what);
}

/* Two durations in the wrong order: @n, at @path, should be at least (or at
 * most) the other one, @other_ms. */
static int duration_order(struct ctx *x, const struct node *n, const char *path, bool at_least,
			  const char *other, uint64_t other_ms)
{
	char buf[SHOW_MAX * 4 + 16], val[32];

	return fail(x, n, path, "expected a duration of at %s %s (%s), got %s",
		    at_least ? "least" : "most", other, fmt_duration(other_ms, val, sizeof(val)),
		    describe(n, false, buf, sizeof(buf)));
}

/* An absolute path whose default is none: null (or nothing) keeps it none. */
static int get_opt_path(struct ctx *x, const struct node *n, const char *path, char **out)
{
	int r;

	r = check_node(x, n, path);
	if (r)
		return r;
	if (is_null(n)) {
		free(*out);
		*out = NULL;
		return 0;
	}
	return get_abs_path(x, n, path, "an absolute path", false, out);
}

/* The upload URL template, checked as far as it can be without libcurl: a
 * scheme the uploader speaks, a host for http(s), and only the placeholders
 * fx_upload_expand_url() knows ("{{" is a literal "{"). Null means no upload. */
static int get_url(struct ctx *x, const struct node *n, const char *path, char **out)
{
	static const char *const schemes[] = { "http://", "https://", "file://" };
	static const char *const names[] = { "host", "target", "start", "end", "seq", "id" };
	const char *what = "a URL starting with http://, https:// or file://";
	const char *ph = "placeholders among {host} {target} {start} {end} {seq} {id} (\"{{\" for "
			 "a literal \"{\")";
	char buf[SHOW_MAX * 4 + 16], w[96];
	const char *s, *p, *end;
	size_t len, i, sl = 0;
	char *d;
	int r;

	r = check_node(x, n, path);
	if (r)
		return r;
	if (is_null(n)) {
		free(*out);
		*out = NULL;
		return 0;
	}
	r = get_text(x, n, path, what, &s, &len);
	if (r)
		return r;
	snprintf(w, sizeof(w), "a URL of at most %d bytes without spaces (a space is %%20)",
		 URL_MAX);
	if (len > URL_MAX || memchr(s, ' ', len))
		return expected_str(x, n, path, w);
	for (i = 0; i < NUNITS(schemes); i++) {
		sl = strlen(schemes[i]);
		if (len > sl && !strncasecmp(s, schemes[i], sl))
			break;
	}
	/* http(s) (the first two) needs a host; file:///path has an empty one. */
	if (i == NUNITS(schemes) || (i < 2 && strchr("/?#", s[sl])))
		return expected_str(x, n, path, what);
	for (p = s; p < s + len; p++) {
		if (*p != '{')
			continue;
		if (p + 1 < s + len && p[1] == '{') {
			p++;
			continue;
		}
		end = memchr(p, '}', (size_t)(s + len - p));
		if (!end)
			return fail(x, n, path, "expected %s, got %s with no closing \"}\"", ph,
				    show(p, (size_t)(s + len - p), true, buf, sizeof(buf)));
		for (i = 0; i < NUNITS(names); i++)
			if ((size_t)(end - p - 1) == strlen(names[i]) &&
			    !memcmp(p + 1, names[i], strlen(names[i])))
				break;
		if (i == NUNITS(names))
			return fail(x, n, path, "expected %s, got %s", ph,
				    show(p, (size_t)(end + 1 - p), true, buf, sizeof(buf)));
		p = end;
	}
	d = dup_mem(s, len);
	if (!d)
		return nomem(x);
	free(*out);
	*out = d;
	return 0;
}

static bool is_header_name(const char *s, size_t len)
{
	size_t i;

	if (!len || len > HEADER_NAME_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* Extra request headers: a map of names to values. Names ignore case (as in
 * HTTP), so "x-team" and "X-Team" are one header. */
static int get_headers(struct ctx *x, const struct node *n, const char *path)
{
	/* The uploader sets these itself. Authorization comes from
	 * bearer_token_file, which keeps the token out of a file many can read. */
	static const char *const ours[] = { "Authorization",	 "Content-Type",
					    "Content-Encoding",	 "Content-Length",
					    "Transfer-Encoding", "Expect" };
	char buf[SHOW_MAX * 4 + 16], sub[PATH_BUF], what[128];
	struct fx_label *h = x->c->upload.headers;
	size_t i, j, vlen, sp;
	const char *v;
	int r;

	r = check_node(x, n, path);
	if (r || is_null(n))
		return r;
	if (n->type != N_MAP)
		return expected(x, n, path, "a mapping of header names to values");
	snprintf(what, sizeof(what),
		 "a header value of 1 to %d printable ASCII characters (not only spaces)",
		 HEADER_VALUE_MAX);
	for (i = 0; i + 1 < n->nkid; i += 2) {
		const struct node *key = n->kid[i], *val = n->kid[i + 1];
		bool forbidden, auth;

		r = check_node(x, key, path);
		if (r)
			return r;
		if (key->type != N_SCALAR || !is_header_name(key->str, key->len))
			return fail(x, key, path,
				    "expected a header name of 1 to %d characters from A-Z a-z 0-9 "
				    "-, got %s",
				    HEADER_NAME_MAX, describe(key, true, buf, sizeof(buf)));
		child_path(sub, path, key->str);
		for (j = 0; j < i; j += 2)
			if (n->kid[j]->len == key->len &&
			    !strncasecmp(n->kid[j]->str, key->str, key->len))
				return fail(x, key, sub,
					    "duplicate key (first at line %zu, column %zu; header "
					    "names ignore case)",
					    n->kid[j]->line, n->kid[j]->col);
		forbidden = key->len >= 10 && !strncasecmp(key->str, "X-Fxagent-", 10);
		auth = key->len == 13 && !strncasecmp(key->str, "Authorization", 13);
		for (j = 0; j < NUNITS(ours); j++)
			if (key->len == strlen(ours[j]) &&
			    !strncasecmp(key->str, ours[j], key->len))
				forbidden = true;
		if (forbidden)
			return fail(x, key, sub,
				    "expected a header fxagent does not set itself (Authorization, "
				    "Content-Type, Content-Encoding, Content-Length, "
				    "Transfer-Encoding, Expect, X-Fxagent-*), got %s%s",
				    show(key->str, key->len, true, buf, sizeof(buf)),
				    auth ? " (the token goes in upload.bearer_token_file)" : "");
		if (x->c->upload.nheaders == FX_CONFIG_MAX_LABELS)
			return fail(x, key, sub, "expected at most %d headers, got more",
				    FX_CONFIG_MAX_LABELS);
		r = get_text(x, val, sub, what, &v, &vlen);
		if (r)
			return r;
		for (j = 0, sp = 0; j < vlen; j++) {
			if ((unsigned char)v[j] > 0x7e)
				return expected_str(x, val, sub, what);
			sp += v[j] == ' ';
		}
		if (!vlen || vlen > HEADER_VALUE_MAX || sp == vlen)
			return expected_str(x, val, sub, what);
		r = set_label(x, h, &x->c->upload.nheaders, key->str, key->len, v, vlen);
		if (r)
			return r;
	}
	return 0;
}

/* ---- sections ---------------------------------------------------------- */

static int get_sampling(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "frequency",     "unwind",	     "stack_bytes",
					    "kernel_stacks", "include_idle", "ring_size" };
	static const char *const unwinds[] = { "dwarf", "fp" };
	const struct node *v[6], *k[6];
	char sub[PATH_BUF];
	uint64_t u;
	size_t idx = 0;
	int r;

	r = get_map(x, n, "sampling", "a mapping", keys, 6, v, k);
	if (!r && v[0]) {
		r = get_uint(x, v[0], "sampling.frequency", 1, 10000, 1, &u);
		if (!r)
			x->c->sampling.frequency = (unsigned)u;
	}
	if (!r && v[1]) {
		r = get_enum(x, v[1], "sampling.unwind", "dwarf or fp", unwinds, 2, &idx);
		if (!r)
			x->c->sampling.dwarf = idx == 0;
	}
	if (!r && v[2]) {
		r = get_uint(x, v[2], "sampling.stack_bytes", 1024, 32768, 8, &u);
		if (!r)
			x->c->sampling.stack_bytes = (uint32_t)u;
	}
	if (!r && v[3]) {
		child_path(sub, "sampling", keys[3]);
		r = get_bool(x, v[3], sub, &x->c->sampling.kernel_stacks);
	}
	if (!r && v[4]) {
		child_path(sub, "sampling", keys[4]);
		r = get_bool(x, v[4], sub, &x->c->sampling.include_idle);
	}
	if (!r && v[5]) {
		/* The kernel maps a power of two of pages per CPU. */
		r = get_size(x, v[5], "sampling.ring_size", 0, 64ull << 20, &u);
		if (!r && u && (u < 4096 || (u & (u - 1))))
			r = expected(
				x, v[5], "sampling.ring_size",
				"0 (sized for the records) or a power of two from 4KiB to 64MiB");
		if (!r)
			x->c->sampling.ring_bytes = u;
	}
	return r;
}

static int get_window(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "seconds", "max_stacks" };
	const struct node *v[2], *k[2];
	uint64_t u;
	int r;

	r = get_map(x, n, "window", "a mapping", keys, 2, v, k);
	if (!r && v[0]) {
		r = get_uint(x, v[0], "window.seconds", 1, 3600, 1, &u);
		if (!r)
			x->c->window.seconds = (unsigned)u;
	}
	if (!r && v[1]) {
		r = get_uint(x, v[1], "window.max_stacks", 1000, 10000000, 1, &u);
		if (!r)
			x->c->window.max_stacks = (size_t)u;
	}
	return r;
}

/* Unit names as systemctl takes them: "nginx" is short for "nginx.service". */
static int get_unit(struct ctx *x, const struct node *n, const char *path, char **out)
{
	static const char *const suffixes[] = { ".service",   ".socket", ".device", ".mount",
						".automount", ".swap",	 ".target", ".path",
						".timer",     ".slice",	 ".scope" };
	const char *what = "a systemd unit name such as nginx.service";
	bool suffixed = false;
	const char *s;
	size_t len, i;
	int r;

	r = get_text(x, n, path, what, &s, &len);
	if (r)
		return r;
	for (i = 0; i < len; i++) {
		char ch = s[i];

		if (!is_name_char(ch) && ch != ':' && ch != '@' && ch != '\\')
			return expected_str(x, n, path, what);
	}
	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		size_t sl = strlen(suffixes[i]);

		if (len > sl && !memcmp(s + len - sl, suffixes[i], sl))
			suffixed = true;
	}
	if (!len || len + (suffixed ? 0 : strlen(".service")) > UNIT_NAME_MAX || s[0] == '.')
		return expected_str(x, n, path, what);
	*out = malloc(len + sizeof(".service"));
	if (!*out)
		return nomem(x);
	memcpy(*out, s, len);
	memcpy(*out + len, ".service", suffixed ? 0 : strlen(".service"));
	(*out)[len + (suffixed ? 0 : strlen(".service"))] = '\0';
	return 0;
}

static int get_target(struct ctx *x, const struct node *n, const char *path, struct fx_target *t,
		      const struct node **names)
{
	static const char *const keys[] = { "name",    "systemd_unit", "cgroup",
					    "process", "pid",	       "labels" };
	const char *sel = "systemd_unit, cgroup, process or pid";
	const struct node *v[6], *k[6], *first = NULL, *second = NULL;
	char sub[PATH_BUF], what[96];
	const char *s;
	size_t len, i, idx = (size_t)(t - x->c->targets);
	uint64_t u;
	int r;

	r = get_map(x, n, path,
		    "a mapping with a name and one of systemd_unit, cgroup, process, pid", keys, 6,
		    v, k);
	if (r)
		return r;
	if (!v[0])
		return fail(x, n, path, "expected a name, got none");
	child_path(sub, path, "name");
	snprintf(what, sizeof(what), "a name of 1 to %d characters from A-Z a-z 0-9 _ . -",
		 TARGET_NAME_MAX);
	r = get_text(x, v[0], sub, what, &s, &len);
	if (r)
		return r;
	if (!is_name(s, len, TARGET_NAME_MAX))
		return expected_str(x, v[0], sub, what);
	for (i = 0; i < idx; i++)
		if (names[i]->len == len && !memcmp(names[i]->str, s, len))
			return fail(
				x, v[0], sub,
				"expected a name no other target has, got \"%s\" (also the name "
				"of targets[%zu] at line %zu)",
				s, i, names[i]->line);
	names[idx] = v[0];
	t->name = dup_mem(s, len);
	if (!t->name)
		return nomem(x);

	/* The selector: exactly one, the second one named in file order. */
	for (i = 1; i <= 4; i++) {
		if (!v[i])
			continue;
		if (!first || k[i]->line < first->line ||
		    (k[i]->line == first->line && k[i]->col < first->col)) {
			second = first;
			first = k[i];
		} else if (!second || k[i]->line < second->line ||
			   (k[i]->line == second->line && k[i]->col < second->col)) {
			second = k[i];
		}
	}
	if (!first)
		return fail(x, n, path, "expected one of %s, got none", sel);
	if (second)
		return fail(x, second, path, "expected only one of %s, got both %s and %s", sel,
			    first->str, second->str);
	if (v[1]) {
		t->kind = FX_TARGET_SYSTEMD_UNIT;
		child_path(sub, path, keys[1]);
		r = get_unit(x, v[1], sub, &t->value);
	} else if (v[2]) {
		t->kind = FX_TARGET_CGROUP;
		child_path(sub, path, keys[2]);
		/* ".." could leave the cgroup2 mount the path is relative to. */
		r = get_abs_path(x, v[2], sub,
				 "an absolute cgroup path without .. such as "
				 "/system.slice/nginx.service",
				 true, &t->value);
	} else if (v[3]) {
		t->kind = FX_TARGET_PROCESS;
		child_path(sub, path, keys[3]);
		snprintf(what, sizeof(what),
			 "a process name (comm or executable base name, 1 to %d bytes, no /)",
			 PROCESS_NAME_MAX);
		r = get_text(x, v[3], sub, what, &s, &len);
		if (!r && (len > PROCESS_NAME_MAX || memchr(s, '/', len)))
			r = expected_str(x, v[3], sub, what);
		if (!r) {
			t->value = dup_mem(s, len);
			if (!t->value)
				r = nomem(x);
		}
	} else {
		t->kind = FX_TARGET_PID;
		child_path(sub, path, keys[4]);
		r = get_uint(x, v[4], sub, 1, PID_MAX, 1, &u);
		if (!r)
			t->pid = (uint32_t)u;
	}
	if (!r && v[5]) {
		child_path(sub, path, keys[5]);
		r = get_labels(x, v[5], sub, t->labels, &t->nlabels);
	}
	return r;
}

static int get_targets(struct ctx *x, const struct node *n)
{
	const struct node *names[FX_CONFIG_MAX_TARGETS];
	char sub[PATH_BUF];
	size_t i;
	int r;

	r = check_node(x, n, "targets");
	if (r || is_null(n))
		return r;
	if (n->type != N_SEQ)
		return expected(x, n, "targets", "a list of targets");
	if (n->nkid > FX_CONFIG_MAX_TARGETS)
		return fail(x, n->kid[FX_CONFIG_MAX_TARGETS], "targets",
			    "expected at most %d targets, got %zu", FX_CONFIG_MAX_TARGETS, n->nkid);
	for (i = 0; i < n->nkid; i++) {
		item_path(sub, "targets", i);
		/* Counted first so that release frees what a failing target holds. */
		x->c->ntargets = i + 1;
		r = get_target(x, n->kid[i], sub, &x->c->targets[i], names);
		if (r)
			return r;
	}
	return 0;
}

static int get_output(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "directory" };
	const struct node *v[1], *k[1];
	int r;

	r = get_map(x, n, "output", "a mapping", keys, 1, v, k);
	if (!r && v[0])
		r = get_abs_path(x, v[0], "output.directory", "an absolute path", false,
				 &x->c->output.directory);
	return r;
}

static int get_symbolization(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "debug_dirs", "demangle", "max_memory" };
	const struct node *v[3], *k[3];
	char sub[PATH_BUF];
	size_t i;
	int r;

	r = get_map(x, n, "symbolization", "a mapping", keys, 3, v, k);
	if (!r && v[0])
		r = check_node(x, v[0], "symbolization.debug_dirs");
	if (!r && v[0] && !is_null(v[0])) {
		const struct node *l = v[0];

		if (l->type != N_SEQ)
			return expected(x, l, "symbolization.debug_dirs",
					"a list of absolute paths");
		if (l->nkid > FX_CONFIG_MAX_DEBUG_DIRS)
			return fail(x, l->kid[FX_CONFIG_MAX_DEBUG_DIRS], "symbolization.debug_dirs",
				    "expected at most %d directories, got %zu",
				    FX_CONFIG_MAX_DEBUG_DIRS, l->nkid);
		/* The list replaces the default one. */
		for (i = 0; i < x->c->symbolization.ndebug_dirs; i++) {
			free(x->c->symbolization.debug_dirs[i]);
			x->c->symbolization.debug_dirs[i] = NULL;
		}
		x->c->symbolization.ndebug_dirs = 0;
		for (i = 0; i < l->nkid && !r; i++) {
			item_path(sub, "symbolization.debug_dirs", i);
			r = get_abs_path(x, l->kid[i], sub, "an absolute path", false,
					 &x->c->symbolization.debug_dirs[i]);
			if (!r)
				x->c->symbolization.ndebug_dirs = i + 1;
		}
	}
	if (!r && v[1])
		r = get_bool(x, v[1], "symbolization.demangle", &x->c->symbolization.demangle);
	if (!r && v[2])
		r = get_size(x, v[2], "symbolization.max_memory", 1ull << 20, 16ull << 30,
			     &x->c->symbolization.max_memory);
	return r;
}

static int get_log(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "level" };
	static const char *const levels[] = { "error", "warning", "notice", "info", "debug" };
	static const int values[] = { FX_LOG_ERR, FX_LOG_WARN, FX_LOG_NOTICE, FX_LOG_INFO,
				      FX_LOG_DEBUG };
	const struct node *v[1], *k[1];
	size_t idx = 0;
	int r;

	r = get_map(x, n, "log", "a mapping", keys, 1, v, k);
	if (!r && v[0]) {
		r = get_enum(x, v[0], "log.level", "one of error, warning, notice, info, debug",
			     levels, 5, &idx);
		if (!r)
			x->c->log.level = values[idx];
	}
	return r;
}

static int get_retry(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "initial_backoff", "max_backoff" };
	const struct node *v[2], *k[2];
	int r;

	r = get_map(x, n, "upload.retry", "a mapping", keys, 2, v, k);
	if (!r && v[0])
		r = get_duration(x, v[0], "upload.retry.initial_backoff", 100, 3600000, 1,
				 &x->c->upload.initial_backoff_ms);
	if (!r && v[1])
		r = get_duration(x, v[1], "upload.retry.max_backoff", 100, 24 * 3600000, 1,
				 &x->c->upload.max_backoff_ms);
	/* Blame the key the file set; with both set, the maximum. (The defaults
	 * are in order: with neither set there is nothing to blame.) */
	if (!r && (v[0] || v[1]) && x->c->upload.max_backoff_ms < x->c->upload.initial_backoff_ms)
		r = v[1] ? duration_order(x, v[1], "upload.retry.max_backoff", true,
					  "initial_backoff", x->c->upload.initial_backoff_ms)
			 : duration_order(x, v[0], "upload.retry.initial_backoff", false,
					  "max_backoff", x->c->upload.max_backoff_ms);
	return r;
}

static int get_upload(struct ctx *x, const struct node *n)
{
	enum { URL, METHOD, HEADERS, TOKEN, CA, CERT, KEY, INSECURE, CONNECT, TIMEOUT, RETRY, NK };
	static const char *const keys[] = { "url",
					    "method",
					    "headers",
					    "bearer_token_file",
					    "ca_file",
					    "cert_file",
					    "key_file",
					    "insecure_skip_verify",
					    "connect_timeout",
					    "timeout",
					    "retry" };
	static const char *const methods[] = { "POST", "PUT" };
	struct fx_config *c = x->c;
	char **files[] = { &c->upload.bearer_token_file, &c->upload.ca_file, &c->upload.cert_file,
			   &c->upload.key_file };
	const struct node *v[NK], *k[NK];
	char sub[PATH_BUF];
	size_t idx = 0, i;
	uint64_t u;
	int r;

	r = get_map(x, n, "upload", "a mapping", keys, NK, v, k);
	if (!r && v[URL])
		r = get_url(x, v[URL], "upload.url", &c->upload.url);
	if (!r && v[METHOD]) {
		r = get_enum(x, v[METHOD], "upload.method", "POST or PUT", methods, 2, &idx);
		if (!r)
			c->upload.put = idx == 1;
	}
	if (!r && v[HEADERS])
		r = get_headers(x, v[HEADERS], "upload.headers");
	for (i = TOKEN; i <= KEY && !r; i++) {
		if (!v[i])
			continue;
		child_path(sub, "upload", keys[i]);
		r = get_opt_path(x, v[i], sub, files[i - TOKEN]);
	}
	/* Either one alone is a half-configured client certificate. */
	if (!r && !c->upload.cert_file != !c->upload.key_file)
		r = fail(x, c->upload.cert_file ? k[CERT] : k[KEY], "upload",
			 "expected both cert_file and key_file, got only %s",
			 c->upload.cert_file ? "cert_file" : "key_file");
	if (!r && v[INSECURE])
		r = get_bool(x, v[INSECURE], "upload.insecure_skip_verify",
			     &c->upload.insecure_skip_verify);
	if (!r && v[CONNECT]) {
		r = get_duration(x, v[CONNECT], "upload.connect_timeout", 100, 600000, 1, &u);
		if (!r)
			c->upload.connect_timeout_ms = (unsigned)u;
	}
	if (!r && v[TIMEOUT]) {
		r = get_duration(x, v[TIMEOUT], "upload.timeout", 1000, 3600000, 1, &u);
		if (!r)
			c->upload.timeout_ms = (unsigned)u;
	}
	/* The whole request includes its connect. */
	if (!r && c->upload.timeout_ms < c->upload.connect_timeout_ms)
		r = v[TIMEOUT] ? duration_order(x, v[TIMEOUT], "upload.timeout", true,
						"connect_timeout", c->upload.connect_timeout_ms)
			       : duration_order(x, v[CONNECT], "upload.connect_timeout", false,
						"timeout", c->upload.timeout_ms);
	if (!r && v[RETRY])
		r = get_retry(x, v[RETRY]);
	return r;
}

static int get_spool(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "directory", "max_bytes", "max_age" };
	const struct node *v[3], *k[3];
	uint64_t u;
	int r;

	r = get_map(x, n, "spool", "a mapping", keys, 3, v, k);
	if (!r && v[0])
		r = get_abs_path(x, v[0], "spool.directory", "an absolute path", false,
				 &x->c->spool.directory);
	if (!r && v[1])
		r = get_size(x, v[1], "spool.max_bytes", 1ull << 20, 1ull << 40,
			     &x->c->spool.max_bytes);
	if (!r && v[2]) {
		/* Stored in seconds: a fraction of one would be lost. */
		r = get_duration(x, v[2], "spool.max_age", 0, 365ull * 86400000, 1000, &u);
		if (!r)
			x->c->spool.max_age_s = u / 1000;
	}
	return r;
}

static int get_metrics(struct ctx *x, const struct node *n)
{
	static const char *const keys[] = { "textfile" };
	const struct node *v[1], *k[1];
	int r;

	r = get_map(x, n, "metrics", "a mapping", keys, 1, v, k);
	if (!r && v[0])
		r = get_opt_path(x, v[0], "metrics.textfile", &x->c->metrics.textfile);
	/* node_exporter's textfile collector reads *.prom and nothing else. */
	if (!r && v[0] && x->c->metrics.textfile) {
		const char *t = x->c->metrics.textfile;
		size_t len = strlen(t);
		char buf[SHOW_MAX * 4 + 16];

		if (len < 6 || strcmp(t + len - 5, ".prom") || t[len - 6] == '/')
			r = fail(x, v[0], "metrics.textfile",
				 "expected a file name ending in .prom (node_exporter's textfile "
				 "collector reads only *.prom files), got %s",
				 describe(v[0], true, buf, sizeof(buf)));
	}
	return r;
}

static int get_config(struct ctx *x, const struct node *root)
{
	static const char *const keys[] = { "sampling", "window",	 "targets", "labels",
					    "output",	"symbolization", "log",	    "upload",
					    "spool",	"metrics" };
	const struct node *v[10], *k[10];
	int r;

	if (!root)
		return 0;
	r = get_map(x, root, "", "a mapping of sections (sampling, window, ...)", keys, 10, v, k);
	if (!r && v[0])
		r = get_sampling(x, v[0]);
	if (!r && v[1])
		r = get_window(x, v[1]);
	if (!r && v[2])
		r = get_targets(x, v[2]);
	if (!r && v[3])
		r = get_labels(x, v[3], "labels", x->c->labels, &x->c->nlabels);
	if (!r && v[4])
		r = get_output(x, v[4]);
	if (!r && v[5])
		r = get_symbolization(x, v[5]);
	if (!r && v[6])
		r = get_log(x, v[6]);
	if (!r && v[7])
		r = get_upload(x, v[7]);
	if (!r && v[8])
		r = get_spool(x, v[8]);
	if (!r && v[9])
		r = get_metrics(x, v[9]);
	return r;
}

/* ---- the API ----------------------------------------------------------- */

int fx_config_defaults(struct fx_config *c)
{
	char host[HOST_NAME_MAX + 1];

	memset(c, 0, sizeof(*c));
	c->sampling.frequency = 99;
	c->sampling.dwarf = true;
	c->sampling.stack_bytes = 16384;
	c->sampling.kernel_stacks = true;
	c->sampling.include_idle = false;
	c->window.seconds = 60;
	c->window.max_stacks = 200000;
	c->symbolization.demangle = true;
	c->symbolization.max_memory = 32ull << 20;
	c->log.level = FX_LOG_NOTICE;
	c->upload.connect_timeout_ms = 10000;
	c->upload.timeout_ms = 60000;
	c->upload.initial_backoff_ms = 1000;
	c->upload.max_backoff_ms = 300000;
	c->spool.max_bytes = 256ull << 20;
	c->spool.max_age_s = 7 * 86400;

	if (gethostname(host, sizeof(host)) || !host[0])
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	c->labels[0].key = strdup("host");
	c->labels[0].value = strdup(host);
	c->nlabels = 1;
	c->output.directory = strdup("/var/lib/fxagent/chunks");
	c->symbolization.debug_dirs[0] = strdup("/usr/lib/debug");
	c->symbolization.ndebug_dirs = 1;
	c->spool.directory = strdup("/var/lib/fxagent/spool");
	if (!c->labels[0].key || !c->labels[0].value || !c->output.directory ||
	    !c->symbolization.debug_dirs[0] || !c->spool.directory) {
		fx_config_release(c);
		return -ENOMEM;
	}
	return 0;
}

int fx_config_parse(const char *name, const char *text, size_t len, struct fx_config *c, char *err,
		    size_t errlen)
{
	struct ctx x = { .name = name ? name : "<config>", .err = err, .errlen = errlen, .c = c };
	struct node *root = NULL;
	int r;

	if (err && errlen)
		err[0] = '\0';
	r = fx_config_defaults(c);
	if (r)
		return nomem(&x);
	if (!text)
		text = "";
	if (len > CONFIG_MAX_BYTES) {
		fx_config_release(c);
		if (err && errlen)
			snprintf(err, errlen, "%s: expected a file of at most %u bytes, got %zu",
				 x.name, CONFIG_MAX_BYTES, len);
		return -EFBIG;
	}
	r = build_tree(&x, text, len, &root);
	if (!r)
		r = get_config(&x, root);
	node_free(root);
	if (r)
		fx_config_release(c);
	return r;
}

int fx_config_load(const char *path, struct fx_config *c, char *err, size_t errlen)
{
	static const struct fx_trust_rules rules = { .trusted = true };
	size_t len = 0, cap = 64 * 1024;
	char *buf, *p;
	ssize_t n;
	int fd, r = 0;

	memset(c, 0, sizeof(*c));
	buf = malloc(cap);
	if (!buf) {
		r = -ENOMEM;
		goto fail;
	}
	/* Not a secret (usually 0644), but it steers a root process: nobody
	 * but root or the agent's user may write it. Opened without blocking,
	 * so a FIFO or a device is refused instead of hanging the agent. */
	fd = fx_trust_open(AT_FDCWD, path, "config file", &rules, NULL, err, errlen);
	if (fd < 0) {
		r = fd;
		free(buf);
		return r;
	}
	/* Reads one byte past the cap to tell "exactly at the cap" from "over". */
	for (;;) {
		if (len == cap) {
			if (cap > CONFIG_MAX_BYTES) {
				r = -EFBIG;
				break;
			}
			cap = cap * 2 > CONFIG_MAX_BYTES ? CONFIG_MAX_BYTES + 1 : cap * 2;
			p = realloc(buf, cap);
			if (!p) {
				r = -ENOMEM;
				break;
			}
			buf = p;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = -errno;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (r)
		goto fail;
	r = fx_config_parse(path, buf, len, c, err, errlen);
	free(buf);
	return r;
fail:
	if (err && errlen) {
		if (r == -EFBIG)
			snprintf(err, errlen, "%s: expected a file of at most %u bytes, got more",
				 path, CONFIG_MAX_BYTES);
		else
			snprintf(err, errlen, "%s: cannot read: %s", path, strerror(-r));
	}
	free(buf);
	return r;
}

void fx_config_release(struct fx_config *c)
{
	size_t i, j;

	if (!c)
		return;
	for (i = 0; i < c->ntargets; i++) {
		free(c->targets[i].name);
		free(c->targets[i].value);
		for (j = 0; j < c->targets[i].nlabels; j++) {
			free(c->targets[i].labels[j].key);
			free(c->targets[i].labels[j].value);
		}
	}
	for (i = 0; i < c->nlabels; i++) {
		free(c->labels[i].key);
		free(c->labels[i].value);
	}
	free(c->output.directory);
	for (i = 0; i < c->symbolization.ndebug_dirs; i++)
		free(c->symbolization.debug_dirs[i]);
	free(c->upload.url);
	for (i = 0; i < c->upload.nheaders; i++) {
		free(c->upload.headers[i].key);
		free(c->upload.headers[i].value);
	}
	free(c->upload.bearer_token_file);
	free(c->upload.ca_file);
	free(c->upload.cert_file);
	free(c->upload.key_file);
	free(c->spool.directory);
	free(c->metrics.textfile);
	memset(c, 0, sizeof(*c));
}

const char *fx_config_label(const struct fx_config *c, const char *key)
{
	size_t i;

	for (i = 0; i < c->nlabels; i++)
		if (!strcmp(c->labels[i].key, key))
			return c->labels[i].value;
	return NULL;
}
