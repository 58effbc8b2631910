/* SPDX-License-Identifier: MIT */
/* The targets (a name and one selector: systemd unit, cgroup, process name or
 * pid, and labels of its own) and the labels of every chunk.
 */
#include "config_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LABEL_KEY_MAX	 64
#define LABEL_VALUE_MAX	 256
#define TARGET_NAME_MAX	 64
#define UNIT_NAME_MAX	 255
#define PROCESS_NAME_MAX 255
#define PID_MAX		 4194304 /* the kernel's PID_MAX_LIMIT */

int cfg_set_label(struct ctx *x, struct fx_label *labels, size_t *nlabels, const char *key,
		  size_t klen, const char *value, size_t vlen)
{
	char *k = NULL, *v;
	size_t i;

	v = cfg_dup_mem(value, vlen);
	if (!v)
		return cfg_nomem(x);
	for (i = 0; i < *nlabels; i++) {
		if (strlen(labels[i].key) == klen && !memcmp(labels[i].key, key, klen)) {
			free(labels[i].value);
			labels[i].value = v;
			return 0;
		}
	}
	k = cfg_dup_mem(key, klen);
	if (!k) {
		free(v);
		return cfg_nomem(x);
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
int cfg_get_labels(struct ctx *x, const struct node *n, const char *path, struct fx_label *labels,
		   size_t *nlabels)
{
	char buf[SHOW_BUF], sub[PATH_BUF], what[96];
	size_t i, j;
	int r;

	r = cfg_check_node(x, n, path);
	if (r)
		return r;
	if (cfg_is_null(n))
		return 0;
	if (n->type != N_MAP)
		return cfg_expected(x, n, path, "a mapping of label names to strings");
	for (i = 0; i + 1 < n->nkid; i += 2) {
		const struct node *key = n->kid[i], *val = n->kid[i + 1];
		const char *v;
		size_t vlen;

		r = cfg_check_node(x, key, path);
		if (r)
			return r;
		if (key->type != N_SCALAR || !cfg_is_name(key->str, key->len, LABEL_KEY_MAX))
			return fail(
				x, key, path,
				"expected a label name of 1 to %d characters from A-Z a-z 0-9 _ "
				". -, got %s",
				LABEL_KEY_MAX, cfg_describe(key, true, buf, sizeof(buf)));
		cfg_child_path(sub, path, key->str);
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
		r = cfg_get_text(x, val, sub, what, &v, &vlen);
		if (r)
			return r;
		if (vlen > LABEL_VALUE_MAX)
			return cfg_expected_str(x, val, sub, what);
		r = cfg_set_label(x, labels, nlabels, key->str, key->len, v, vlen);
		if (r)
			return r;
	}
	return 0;
}

/* A unit name's bytes; systemd escapes others as "\x2d". */
static bool unit_char(unsigned char c, size_t i)
{
	return (cfg_is_name_char((char)c) && (i || c != '.')) || c == ':' || c == '@' || c == '\\';
}

/* Unit names as systemctl takes them: "nginx" is short for "nginx.service". */
static int get_unit(struct ctx *x, const struct node *n, const char *path, char **out)
{
	static const char *const suffixes[] = { ".service",   ".socket", ".device", ".mount",
						".automount", ".swap",	 ".target", ".path",
						".timer",     ".slice",	 ".scope" };
	const char *what = "a systemd unit name such as nginx.service";
	char *name = NULL, *full;
	size_t len;
	int r;

	r = cfg_get_word(x, n, path, what, 1, UNIT_NAME_MAX, unit_char, &name);
	if (r)
		return r;
	len = strlen(name);
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		size_t sl = strlen(suffixes[i]);

		if (len > sl && !memcmp(name + len - sl, suffixes[i], sl)) {
			*out = name;
			return 0;
		}
	}
	if (len + strlen(".service") > UNIT_NAME_MAX) {
		free(name);
		return cfg_expected_str(x, n, path, what);
	}
	full = realloc(name, len + sizeof(".service"));
	if (!full) {
		free(name);
		return cfg_nomem(x);
	}
	memcpy(full + len, ".service", sizeof(".service"));
	*out = full;
	return 0;
}

enum { T_NAME, T_UNIT, T_CGROUP, T_PROCESS, T_PID, T_LABELS, T_OFF_CPU, T_NKEYS };
static const char *const target_keys[T_NKEYS] = { "name", "systemd_unit", "cgroup", "process",
						  "pid",  "labels",	  "off_cpu" };

/* The name of @t, the target at @idx: one no earlier target has (@names
 * holds their name nodes; this one's is added). */
static int get_target_name(struct ctx *x, const struct node *n, const char *path,
			   struct fx_target *t, size_t idx, const struct node **names)
{
	char sub[PATH_BUF], what[96];
	const char *s;
	size_t len, i;
	int r;

	cfg_child_path(sub, path, "name");
	snprintf(what, sizeof(what), "a name of 1 to %d characters from A-Z a-z 0-9 _ . -",
		 TARGET_NAME_MAX);
	r = cfg_get_text(x, n, sub, what, &s, &len);
	if (r)
		return r;
	if (!cfg_is_name(s, len, TARGET_NAME_MAX))
		return cfg_expected_str(x, n, sub, what);
	for (i = 0; i < idx; i++)
		if (names[i]->len == len && !memcmp(names[i]->str, s, len))
			return fail(
				x, n, sub,
				"expected a name no other target has, got \"%s\" (also the name "
				"of targets[%zu] at line %zu)",
				s, i, names[i]->line);
	names[idx] = n;
	t->name = cfg_dup_mem(s, len);
	if (!t->name)
		return cfg_nomem(x);
	return 0;
}

/* Exactly one selector among the key nodes @k of target @n; of two, the
 * second one named in file order is blamed. */
static int check_selector(struct ctx *x, const struct node *n, const char *path,
			  const struct node *const *k)
{
	const char *sel = "systemd_unit, cgroup, process or pid";
	const struct node *first = NULL, *second = NULL;
	size_t i;

	for (i = T_UNIT; i <= T_PID; i++) {
		if (!k[i])
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
	return 0;
}

static int get_process(struct ctx *x, const struct node *n, const char *path, char **out)
{
	char what[96];
	const char *s;
	size_t len;
	int r;

	snprintf(what, sizeof(what),
		 "a process name (comm or executable base name, 1 to %d bytes, no /)",
		 PROCESS_NAME_MAX);
	r = cfg_get_text(x, n, path, what, &s, &len);
	if (!r && (len > PROCESS_NAME_MAX || memchr(s, '/', len)))
		r = cfg_expected_str(x, n, path, what);
	if (!r) {
		*out = cfg_dup_mem(s, len);
		if (!*out)
			r = cfg_nomem(x);
	}
	return r;
}

/* The value of the one selector among the values @v of a target. */
static int get_selector(struct ctx *x, const struct node *const *v, const char *path,
			struct fx_target *t)
{
	char sub[PATH_BUF];
	uint64_t u;
	int r;

	if (v[T_UNIT]) {
		t->kind = FX_TARGET_SYSTEMD_UNIT;
		cfg_child_path(sub, path, target_keys[T_UNIT]);
		return get_unit(x, v[T_UNIT], sub, &t->value);
	}
	if (v[T_CGROUP]) {
		t->kind = FX_TARGET_CGROUP;
		cfg_child_path(sub, path, target_keys[T_CGROUP]);
		/* ".." could leave the cgroup2 mount the path is relative to. */
		return cfg_get_abs_path(x, v[T_CGROUP], sub,
					"an absolute cgroup path without .. such as "
					"/system.slice/nginx.service",
					true, &t->value);
	}
	if (v[T_PROCESS]) {
		t->kind = FX_TARGET_PROCESS;
		cfg_child_path(sub, path, target_keys[T_PROCESS]);
		return get_process(x, v[T_PROCESS], sub, &t->value);
	}
	t->kind = FX_TARGET_PID;
	cfg_child_path(sub, path, target_keys[T_PID]);
	r = cfg_get_uint(x, v[T_PID], sub, 1, PID_MAX, 1, &u);
	if (!r)
		t->pid = (uint32_t)u;
	return r;
}

/* Target @idx; @names holds the name nodes of those before it. */
static int get_target(struct ctx *x, const struct node *n, const char *path, size_t idx,
		      const struct node **names)
{
	struct fx_target *t = &x->c->targets[idx];
	const struct node *v[T_NKEYS], *k[T_NKEYS];
	char sub[PATH_BUF];
	int r;

	r = cfg_get_map(x, n, path,
			"a mapping with a name and one of systemd_unit, cgroup, process, pid",
			target_keys, T_NKEYS, v, k);
	if (r)
		return r;
	if (!v[T_NAME])
		return fail(x, n, path, "expected a name, got none");
	r = get_target_name(x, v[T_NAME], path, t, idx, names);
	if (!r)
		r = check_selector(x, n, path, k);
	if (!r)
		r = get_selector(x, v, path, t);
	if (!r && v[T_LABELS]) {
		cfg_child_path(sub, path, target_keys[T_LABELS]);
		r = cfg_get_labels(x, v[T_LABELS], sub, t->labels, &t->nlabels);
	}
	t->off_cpu = -1;
	if (!r && v[T_OFF_CPU]) {
		bool on = false;

		cfg_child_path(sub, path, target_keys[T_OFF_CPU]);
		r = cfg_get_bool(x, v[T_OFF_CPU], sub, &on);
		t->off_cpu = on ? 1 : 0;
	}
	return r;
}

int cfg_get_targets(struct ctx *x, const struct node *n)
{
	const struct node *names[FX_CONFIG_MAX_TARGETS];
	char sub[PATH_BUF];
	size_t i;
	int r;

	r = cfg_check_node(x, n, "targets");
	if (r || cfg_is_null(n))
		return r;
	if (n->type != N_SEQ)
		return cfg_expected(x, n, "targets", "a list of targets");
	if (n->nkid > FX_CONFIG_MAX_TARGETS)
		return fail(x, n->kid[FX_CONFIG_MAX_TARGETS], "targets",
			    "expected at most %d targets, got %zu", FX_CONFIG_MAX_TARGETS, n->nkid);
	for (i = 0; i < n->nkid; i++) {
		cfg_item_path(sub, "targets", i);
		/* Counted first so that release frees what a failing target holds. */
		x->c->ntargets = i + 1;
		r = get_target(x, n->kid[i], sub, i, names);
		if (r)
			return r;
	}
	return 0;
}
