/* SPDX-License-Identifier: MIT */
/* libyaml's event parser -> a tree of nodes, each with its line and column.
 * Aliases stay leaves (the schema refuses them; a few lines of aliases can
 * stand for gigabytes), and the size of the tree is bounded in nodes and in
 * depth. A syntax error is said at its position, in plain words for a tab.
 */
#include "config_int.h"

#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* The schema is four levels deep; anything much deeper is a mistake, and the
 * bound keeps the recursive free and walk shallow. */
#define MAX_DEPTH 64
/* The largest valid config (256 targets with 32 labels each) has about 20000
 * nodes; the cap keeps the tree of a 1 MiB file of "[1,1,1,..." small. */
#define MAX_NODES 65536

/* Recursion bounded by MAX_DEPTH, the parser's nesting limit.
 * NOLINTNEXTLINE(misc-no-recursion) */
void cfg_node_free(struct node *n)
{
	size_t i;

	if (!n)
		return;
	for (i = 0; i < n->nkid; i++)
		cfg_node_free(n->kid[i]);
	free(n->kid);
	free(n->tag);
	free(n->str);
	free(n);
}

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
		return cfg_nomem(x);
	if (p->error == YAML_READER_ERROR) {
		/* Reader errors carry a byte offset, not a mark. */
		mark_of(text, len, p->problem_offset, &line, &col);
		if (p->problem_value != -1)
			return cfg_fail_at(x, line, col, NULL,
					   "YAML syntax error: %s (byte 0x%02x)", problem,
					   (unsigned)p->problem_value);
		return cfg_fail_at(x, line, col, NULL, "YAML syntax error: %s", problem);
	}
	/* The most common one deserves a plain word. */
	if (char_at(text, len, p->problem_mark.line, p->problem_mark.column) == '\t')
		return cfg_fail_at(x, p->problem_mark.line + 1, p->problem_mark.column + 1, NULL,
				   "YAML syntax error: %s (a tab; YAML indents with spaces only)",
				   problem);
	if (p->context)
		return cfg_fail_at(x, p->problem_mark.line + 1, p->problem_mark.column + 1, NULL,
				   "YAML syntax error: %s (%s at line %zu, column %zu)", problem,
				   p->context, p->context_mark.line + 1,
				   p->context_mark.column + 1);
	return cfg_fail_at(x, p->problem_mark.line + 1, p->problem_mark.column + 1, NULL,
			   "YAML syntax error: %s", problem);
}

char *cfg_dup_mem(const void *s, size_t len)
{
	char *d = malloc(len + 1);

	if (d) {
		memcpy(d, s, len);
		d[len] = '\0';
	}
	return d;
}

/* The node of a scalar, alias or collection start event, or NULL when out
 * of memory. */
static struct node *new_node(const yaml_event_t *ev)
{
	const yaml_char_t *tag = NULL;
	struct node *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->line = ev->start_mark.line + 1;
	n->col = ev->start_mark.column + 1;
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		n->type = N_SCALAR;
		n->str = cfg_dup_mem(ev->data.scalar.value, ev->data.scalar.length);
		n->len = ev->data.scalar.length;
		n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		tag = ev->data.scalar.tag;
		break;
	case YAML_ALIAS_EVENT:
		n->type = N_ALIAS;
		n->len = strlen((const char *)ev->data.alias.anchor);
		n->str = cfg_dup_mem(ev->data.alias.anchor, n->len);
		break;
	case YAML_SEQUENCE_START_EVENT:
		n->type = N_SEQ;
		n->str = cfg_dup_mem("", 0);
		tag = ev->data.sequence_start.tag;
		break;
	default:
		n->type = N_MAP;
		n->str = cfg_dup_mem("", 0);
		tag = ev->data.mapping_start.tag;
		break;
	}
	if (tag)
		n->tag = cfg_dup_mem(tag, strlen((const char *)tag));
	if (!n->str || (tag && !n->tag)) {
		cfg_node_free(n);
		return NULL;
	}
	return n;
}

/* Appends @n to @parent's children. Returns 0 or -ENOMEM. */
static int add_kid(struct node *parent, struct node *n)
{
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

		if (!kid)
			return -ENOMEM;
		parent->kid = kid;
		parent->cap = cap;
	}
	parent->kid[parent->nkid++] = n;
	return 0;
}

/* Turns one event into a node and hangs it under the innermost open
 * collection (or makes it the root). */
static int add_node(struct ctx *x, const yaml_event_t *ev, struct node **stack, size_t *depth,
		    struct node **root, size_t *nnodes)
{
	struct node *n;

	if (++*nnodes > MAX_NODES)
		return cfg_fail_at(x, ev->start_mark.line + 1, ev->start_mark.column + 1, NULL,
				   "expected at most %d YAML nodes, got more", MAX_NODES);
	n = new_node(ev);
	if (!n)
		return cfg_nomem(x);
	if (*depth == 0) {
		/* One document (build_tree() refuses a second), one root. */
		if (*root) {
			cfg_node_free(n);
			return cfg_fail_at(x, ev->start_mark.line + 1, ev->start_mark.column + 1,
					   NULL,
					   "expected a single YAML document, got a second one");
		}
		*root = n;
	} else if (add_kid(stack[*depth - 1], n)) {
		cfg_node_free(n);
		return cfg_nomem(x);
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
int cfg_build_tree(struct ctx *x, const char *text, size_t len, struct node **rootp)
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
		return cfg_nomem(x);
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
				r = cfg_fail_at(
					x, ev.start_mark.line + 1, ev.start_mark.column + 1, NULL,
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
		cfg_node_free(root);
		return r;
	}
	*rootp = root;
	return 0;
}
