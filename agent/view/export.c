/* SPDX-License-Identifier: MIT */
/* The merged profile for other tools: folded stacks (flamegraph.pl,
 * inferno, speedscope) and a table of the top functions for a terminal;
 * pprof is pprof.c's. On-CPU samples only: an off-CPU track's weights are
 * time, and a sum of both would mean neither. */
#include "view_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fxagent/util.h"

#define UNKNOWN_NAME "[unknown]"

static int cmp_weight(const void *a, const void *b, void *ctx)
{
	const struct merge *m = ctx;
	const struct view_weight *x = a, *y = b;
	const uint32_t *rank = m->order + m->tracks.n;

	if (x->track != y->track)
		return rank[x->track] < rank[y->track] ? -1 : 1;
	return (x->stack > y->stack) - (x->stack < y->stack);
}

int view_stack_weights(const struct merge *m, struct view_weight **out, size_t *n, uint64_t *total)
{
	struct view_weight *w = malloc((m->nsamples + 1) * sizeof(*w));
	size_t k = 0;

	*out = NULL;
	*n = 0;
	*total = 0;
	if (!w)
		return -ENOMEM;
	for (size_t i = 0; i < m->nsamples; i++) {
		const struct msample *s = &m->samples[i];

		if (m->tinfo[s->track].off_cpu)
			continue;
		*total += s->weight;
		if (s->stack != UINT32_MAX)
			w[k++] = (struct view_weight){ s->track, s->stack, s->weight };
	}
	if (k)
		qsort_r(w, k, sizeof(*w), cmp_weight, (void *)m);
	*n = 0;
	for (size_t i = 0; i < k; i++) {
		if (*n && w[*n - 1].track == w[i].track && w[*n - 1].stack == w[i].stack)
			w[*n - 1].weight += w[i].weight;
		else
			w[(*n)++] = w[i];
	}
	*out = w;
	return 0;
}

uint32_t view_stack_func(const struct merge *m, uint64_t s)
{
	uint64_t frame = view_rectab_at(&m->stacks, s)[0];
	uint64_t func = frame < m->frames.n ? view_rectab_at(&m->frames, frame)[3] : NONE64;

	return func < m->funcs.n ? (uint32_t)func : UINT32_MAX;
}

size_t view_busiest_track(const struct merge *m)
{
	size_t nt = m->tracks.n, best = 0;
	uint64_t *weight = view_track_weights(m);

	if (!weight)
		return 0;
	for (size_t r = 1; r < nt; r++) {
		if (weight[m->order[r]] > weight[m->order[best]])
			best = r;
	}
	free(weight);
	return best;
}

/* ---- folded stacks ---- */

/* A name as one frame of a folded line: ';' separates frames and a line
 * ends at a newline. */
static int put_name(struct fx_gzip_buf *b, const char *s, size_t len)
{
	if (!len)
		return fx_gzip_write_buf(b, UNKNOWN_NAME, strlen(UNKNOWN_NAME));
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (c == ';')
			c = ':';
		else if (c == '\n' || c == '\r')
			c = ' ';
		if (fx_gzip_write_buf(b, &c, 1) < 0)
			return -ENOMEM;
	}
	return 0;
}

static const char *func_name(const struct merge *m, uint32_t func, size_t *len)
{
	uint64_t name = func == UINT32_MAX ? NONE64 : view_rectab_at(&m->funcs, func)[0];

	if (name >= m->strs.n) {
		*len = 0;
		return "";
	}
	return view_strtab_at(&m->strs, (uint32_t)name, len);
}

struct folded {
	const struct merge *m;
	struct rectab names; /* (parent, function name): stacks by their names */
	uint32_t *node;	     /* merged stack -> names entry */
	struct strtab procs; /* the tracks' process names */
	struct rectab lines; /* (process name, names entry) */
	uint64_t *weight;    /* per line */
	size_t weight_cap;
};

/* Stacks that differ only in addresses or lines read the same: one line. */
static int name_stacks(struct folded *f)
{
	const struct merge *m = f->m;

	f->node = malloc((m->stacks.n + 1) * sizeof(*f->node));
	if (!f->node)
		return -ENOMEM;
	for (size_t s = 0; s < m->stacks.n; s++) {
		uint64_t prefix = view_rectab_at(&m->stacks, s)[1];
		uint32_t func = view_stack_func(m, s);
		uint64_t key[REC_MAX] = {
			prefix == NONE64 ? NONE64 : f->node[prefix],
			func == UINT32_MAX ? NONE64 : view_rectab_at(&m->funcs, func)[0],
		};

		f->node[s] = view_rectab_add(&f->names, key);
		if (f->node[s] == UINT32_MAX)
			return -ENOMEM;
	}
	return 0;
}

static int add_lines(struct folded *f, const struct view_weight *w, size_t n)
{
	char pname[600];

	for (size_t i = 0; i < n; i++) {
		uint64_t key[REC_MAX] = { 0 };
		size_t before = f->lines.n;
		uint32_t line;

		view_track_process(f->m, w[i].track, pname, sizeof(pname));
		key[0] = view_strtab_add(&f->procs, pname, strlen(pname));
		key[1] = f->node[w[i].stack];
		line = key[0] == UINT32_MAX ? UINT32_MAX : view_rectab_add(&f->lines, key);
		if (line == UINT32_MAX ||
		    fx_grow(&f->weight, &f->weight_cap, f->lines.n, sizeof(*f->weight)) < 0)
			return -ENOMEM;
		if (f->lines.n > before)
			f->weight[line] = 0;
		f->weight[line] += w[i].weight;
	}
	return 0;
}

/* Line @line's text, newline included, into @b. */
static int render_line(const struct folded *f, size_t line, uint32_t *path, size_t path_cap,
		       struct fx_gzip_buf *b)
{
	const uint64_t *key = view_rectab_at(&f->lines, line);
	size_t depth = 0, len;
	const char *s = view_strtab_at(&f->procs, (uint32_t)key[0], &len);
	char num[32];
	int rc = put_name(b, s, len);

	for (uint64_t node = key[1]; node != NONE64 && depth < path_cap;
	     node = view_rectab_at(&f->names, node)[0])
		path[depth++] = (uint32_t)node;
	while (rc == 0 && depth--) {
		uint64_t name = view_rectab_at(&f->names, path[depth])[1];

		s = name == NONE64 ? "" : view_strtab_at(&f->m->strs, (uint32_t)name, &len);
		if (name == NONE64)
			len = 0;
		rc = fx_gzip_write_buf(b, ";", 1);
		if (rc == 0)
			rc = put_name(b, s, len);
	}
	len = (size_t)snprintf(num, sizeof(num), " %" PRIu64 "\n", f->weight[line]);
	return rc ? rc : fx_gzip_write_buf(b, num, len);
}

static int cmp_text(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;

	return strcmp(x, y);
}

/* The lines in byte order (a diff of two exports then reads), each made
 * once into @tmp and pointed at. */
static int write_sorted(const struct folded *f, struct fx_gzip_buf *out)
{
	struct fx_gzip_buf tmp = { 0 };
	size_t *at = malloc((f->lines.n + 1) * sizeof(*at));
	char **lines = malloc((f->lines.n + 1) * sizeof(*lines));
	uint32_t *path = malloc((f->names.n + 1) * sizeof(*path));
	int rc = at && lines && path ? 0 : -ENOMEM;

	for (size_t i = 0; rc == 0 && i < f->lines.n; i++) {
		at[i] = tmp.len;
		rc = render_line(f, i, path, f->names.n + 1, &tmp);
		if (rc == 0)
			rc = fx_gzip_write_buf(&tmp, "", 1); /* each line's NUL */
	}
	for (size_t i = 0; rc == 0 && i < f->lines.n; i++)
		lines[i] = (char *)tmp.data + at[i];
	if (rc == 0 && f->lines.n)
		qsort(lines, f->lines.n, sizeof(*lines), cmp_text);
	for (size_t i = 0; rc == 0 && i < f->lines.n; i++)
		rc = fx_gzip_write_buf(out, lines[i], strlen(lines[i]));
	free(tmp.data);
	free(at);
	free(lines);
	free(path);
	return rc;
}

int view_export_folded(const struct merge *m, struct fx_gzip_buf *out)
{
	struct folded f = { .m = m, .names = { .width = 2 }, .lines = { .width = 2 } };
	struct view_weight *w = NULL;
	uint64_t total;
	size_t n;
	int rc = view_stack_weights(m, &w, &n, &total);

	if (rc == 0)
		rc = name_stacks(&f);
	if (rc == 0)
		rc = add_lines(&f, w, n);
	if (rc == 0)
		rc = write_sorted(&f, out);
	free(w);
	free(f.node);
	free(f.weight);
	view_rectab_free(&f.names);
	view_rectab_free(&f.lines);
	view_strtab_free(&f.procs);
	return rc;
}

/* ---- the top functions ---- */

struct top {
	uint64_t *self, *total, *seen;
	uint32_t *order;
};

static int cmp_top(const void *a, const void *b, void *ctx)
{
	const struct top *t = ctx;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (t->self[x] != t->self[y])
		return t->self[x] > t->self[y] ? -1 : 1;
	if (t->total[x] != t->total[y])
		return t->total[x] > t->total[y] ? -1 : 1;
	return (x > y) - (x < y);
}

/* Self and total samples of every function: each sample counts once in the
 * total of every function on its stack (recursion too), as the profiler's
 * call tree counts. */
static void count_functions(const struct merge *m, const struct view_weight *w, size_t n,
			    struct top *t)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t leaf = view_stack_func(m, w[i].stack);

		if (leaf != UINT32_MAX)
			t->self[leaf] += w[i].weight;
		for (uint64_t s = w[i].stack; s != NONE64; s = view_rectab_at(&m->stacks, s)[1]) {
			uint32_t func = view_stack_func(m, s);

			if (func == UINT32_MAX || t->seen[func] == i + 1)
				continue;
			t->seen[func] = i + 1;
			t->total[func] += w[i].weight;
		}
	}
}

static void print_top(const struct merge *m, const struct top *t, size_t rows, uint64_t all,
		      FILE *f)
{
	fprintf(f, "%" PRIu64 " samples on CPU; the %zu functions with the most self samples\n",
		all, rows);
	fprintf(f, "%10s %7s %10s %7s  %s\n", "self", "self%", "total", "total%", "function");
	for (size_t i = 0; i < rows; i++) {
		uint32_t func = t->order[i];
		uint64_t res = view_rectab_at(&m->funcs, func)[1];
		uint64_t lib = res < m->res.n ? view_rectab_at(&m->res, res)[0] : NONE64;
		size_t len, llen = 0;
		const char *name = func_name(m, func, &len);
		const char *lname =
			lib < m->strs.n ? view_strtab_at(&m->strs, (uint32_t)lib, &llen) : "";

		fprintf(f, "%10" PRIu64 " %6.2f%% %10" PRIu64 " %6.2f%%  %.*s%s%.*s%s\n",
			t->self[func], all ? 100.0 * (double)t->self[func] / (double)all : 0,
			t->total[func], all ? 100.0 * (double)t->total[func] / (double)all : 0,
			(int)(len ? len : strlen(UNKNOWN_NAME)), len ? name : UNKNOWN_NAME,
			llen ? " (" : "", (int)llen, lname, llen ? ")" : "");
	}
}

int view_export_top(const struct merge *m, size_t n, FILE *f)
{
	size_t nf = m->funcs.n, nw = 0, rows = 0;
	struct top t = {
		.self = calloc(nf + 1, sizeof(*t.self)),
		.total = calloc(nf + 1, sizeof(*t.total)),
		.seen = calloc(nf + 1, sizeof(*t.seen)),
		.order = malloc((nf + 1) * sizeof(*t.order)),
	};
	struct view_weight *w = NULL;
	uint64_t all = 0;
	int rc = t.self && t.total && t.seen && t.order ? view_stack_weights(m, &w, &nw, &all)
							: -ENOMEM;

	if (rc == 0) {
		count_functions(m, w, nw, &t);
		for (uint32_t i = 0; i < nf; i++) {
			if (t.total[i])
				t.order[rows++] = i;
		}
		if (rows)
			qsort_r(t.order, rows, sizeof(*t.order), cmp_top, &t);
		print_top(m, &t, rows < n ? rows : n, all, f);
	}
	free(w);
	free(t.self);
	free(t.total);
	free(t.seen);
	free(t.order);
	return rc;
}
