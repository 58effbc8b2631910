/* SPDX-License-Identifier: MIT */
/* The merged profile as pprof reads it (pprof.proto, packed by protobuf-c,
 * gzip-compressed): what `go tool pprof`, Pyroscope and Grafana take. One
 * sample per track and stack with two values (samples, CPU nanoseconds)
 * and the thread, process and host as labels; a location per frame (an
 * inlined function is a frame of its own, as in the profile); a function
 * per function. On-CPU samples only, as the other exports. */
#include "view_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pprof.pb-c.h"

enum { L_THREAD, L_PROCESS, L_HOST, NLABELS };

/* An element of protobuf-c's arrays of message pointers. */
#define PTR_SIZE sizeof(void *)

struct pp {
	const struct merge *m;
	struct strtab strs; /* pprof's string table, "" first */
	uint32_t *str_of;   /* merged string -> pprof's + 1; 0: not yet */
	Fxpprof__Function *funcs;
	Fxpprof__Function **func_ptr;
	Fxpprof__Location *locs;
	Fxpprof__Location **loc_ptr;
	Fxpprof__Line *lines;
	Fxpprof__Line **line_ptr;
	uint32_t *func_id, *loc_id; /* merged index -> pprof id; 0: none yet */
	size_t nfuncs, nlocs;
	Fxpprof__Sample *samples;
	Fxpprof__Sample **sample_ptr;
	uint64_t *ids;	 /* every sample's location ids, one after another */
	int64_t *values; /* two per sample */
	Fxpprof__Label *labels;
	Fxpprof__Label **label_ptr;
};

static int64_t add_str(struct pp *p, const char *s)
{
	uint32_t i = view_strtab_add(&p->strs, s, strlen(s));

	return i == UINT32_MAX ? -ENOMEM : (int64_t)i;
}

static int64_t merged_str(struct pp *p, uint64_t i)
{
	size_t len;
	const char *s;
	uint32_t k;

	if (i >= p->m->strs.n)
		return 0;
	if (p->str_of[i])
		return p->str_of[i] - 1;
	s = view_strtab_at(&p->m->strs, (uint32_t)i, &len);
	k = view_strtab_add(&p->strs, s, len);
	if (k == UINT32_MAX)
		return -ENOMEM;
	p->str_of[i] = k + 1;
	return k;
}

/* The pprof id of merged function @func, made on first use. */
static int64_t func_id(struct pp *p, uint32_t func)
{
	Fxpprof__Function *f;
	int64_t name;

	if (p->func_id[func])
		return p->func_id[func];
	name = merged_str(p, view_rectab_at(&p->m->funcs, func)[0]);
	if (name < 0)
		return name;
	f = &p->funcs[p->nfuncs];
	fxpprof__function__init(f);
	f->id = p->nfuncs + 1;
	f->name = f->system_name = name;
	p->func_ptr[p->nfuncs] = f;
	p->func_id[func] = (uint32_t)++p->nfuncs;
	return p->func_id[func];
}

/* The pprof id of the location of merged stack @s's frame. */
static int64_t loc_id(struct pp *p, uint64_t s)
{
	uint64_t frame = view_rectab_at(&p->m->stacks, s)[0];
	const uint64_t *fr = view_rectab_at(&p->m->frames, frame);
	uint32_t func = view_stack_func(p->m, s);
	Fxpprof__Location *l;
	Fxpprof__Line *ln;
	double addr;

	if (p->loc_id[frame])
		return p->loc_id[frame];
	l = &p->locs[p->nlocs];
	ln = &p->lines[p->nlocs];
	fxpprof__location__init(l);
	fxpprof__line__init(ln);
	l->id = p->nlocs + 1;
	memcpy(&addr, &fr[0], sizeof(addr));
	l->address = addr >= 0 && addr < 1.8e19 ? (uint64_t)addr : 0;
	if (func != UINT32_MAX) {
		int64_t id = func_id(p, func);

		if (id < 0)
			return id;
		ln->function_id = (uint64_t)id;
		ln->line = fr[5] == NONE64 ? 0 : (int64_t)fr[5];
		p->line_ptr[p->nlocs] = ln;
		l->line = &p->line_ptr[p->nlocs];
		l->n_line = 1;
	}
	p->loc_ptr[p->nlocs] = l;
	p->loc_id[frame] = (uint32_t)++p->nlocs;
	return p->loc_id[frame];
}

static int alloc_tables(struct pp *p, size_t nw, size_t depth)
{
	const struct merge *m = p->m;

	p->str_of = calloc(m->strs.n + 1, sizeof(*p->str_of));
	p->funcs = calloc(m->funcs.n + 1, sizeof(*p->funcs));
	p->func_ptr = calloc(m->funcs.n + 1, PTR_SIZE);
	p->func_id = calloc(m->funcs.n + 1, sizeof(*p->func_id));
	p->locs = calloc(m->frames.n + 1, sizeof(*p->locs));
	p->loc_ptr = calloc(m->frames.n + 1, PTR_SIZE);
	p->lines = calloc(m->frames.n + 1, sizeof(*p->lines));
	p->line_ptr = calloc(m->frames.n + 1, PTR_SIZE);
	p->loc_id = calloc(m->frames.n + 1, sizeof(*p->loc_id));
	p->samples = calloc(nw + 1, sizeof(*p->samples));
	p->sample_ptr = calloc(nw + 1, PTR_SIZE);
	p->ids = calloc(depth + 1, sizeof(*p->ids));
	p->values = calloc(2 * nw + 1, sizeof(*p->values));
	p->labels = calloc(NLABELS * nw + 1, sizeof(*p->labels));
	p->label_ptr = calloc(NLABELS * nw + 1, PTR_SIZE);
	return p->str_of && p->funcs && p->func_ptr && p->func_id && p->locs && p->loc_ptr &&
			       p->lines && p->line_ptr && p->loc_id && p->samples &&
			       p->sample_ptr && p->ids && p->values && p->labels && p->label_ptr
		       ? 0
		       : -ENOMEM;
}

static void free_tables(struct pp *p)
{
	free(p->str_of);
	free(p->funcs);
	free(p->func_ptr);
	free(p->func_id);
	free(p->locs);
	free(p->loc_ptr);
	free(p->lines);
	free(p->line_ptr);
	free(p->loc_id);
	free(p->samples);
	free(p->sample_ptr);
	free(p->ids);
	free(p->values);
	free(p->labels);
	free(p->label_ptr);
	view_strtab_free(&p->strs);
}

static size_t stack_depth(const struct merge *m, uint64_t s)
{
	size_t d = 0;

	for (; s != NONE64; s = view_rectab_at(&m->stacks, s)[1])
		d++;
	return d;
}

/* Sample @i of @w: its locations leaf first, its values and labels. */
static int add_sample(struct pp *p, size_t i, const struct view_weight *w, uint64_t **ids,
		      int64_t period, const int64_t *keys)
{
	const struct merge *m = p->m;
	Fxpprof__Sample *s = &p->samples[i];
	Fxpprof__Label *lb = &p->labels[NLABELS * i];
	const uint64_t *track = view_rectab_at(&m->tracks, w->track);
	char pname[600];
	int64_t str[NLABELS];

	fxpprof__sample__init(s);
	s->location_id = *ids;
	for (uint64_t k = w->stack; k != NONE64; k = view_rectab_at(&m->stacks, k)[1]) {
		int64_t id = loc_id(p, k);

		if (id < 0)
			return (int)id;
		s->location_id[s->n_location_id++] = (uint64_t)id;
	}
	*ids += s->n_location_id;
	s->value = &p->values[2 * i];
	s->n_value = 2;
	s->value[0] = (int64_t)w->weight;
	s->value[1] = (int64_t)w->weight * period;
	view_track_process(m, w->track, pname, sizeof(pname));
	str[L_THREAD] = merged_str(p, m->tinfo[w->track].name);
	str[L_PROCESS] = add_str(p, pname);
	str[L_HOST] = merged_str(p, track[0]);
	s->label = &p->label_ptr[NLABELS * i];
	for (int k = 0; k < NLABELS; k++) {
		if (str[k] < 0)
			return -ENOMEM;
		fxpprof__label__init(&lb[k]);
		lb[k].key = keys[k];
		lb[k].str = str[k];
		s->label[s->n_label++] = &lb[k];
	}
	p->sample_ptr[i] = s;
	return 0;
}

/* Packs @prof and gzips it into @out. */
static int pack(Fxpprof__Profile *prof, const struct strtab *strs, struct fx_gzip_buf *out)
{
	char **table = malloc((strs->n + 1) * sizeof(*table));
	size_t len;
	uint8_t *buf;
	int rc;

	if (!table)
		return -ENOMEM;
	for (size_t i = 0; i < strs->n; i++)
		table[i] = strs->text + (strs->ref[i] >> 32);
	prof->string_table = table;
	prof->n_string_table = strs->n;
	len = fxpprof__profile__get_packed_size(prof);
	buf = malloc(len + 1);
	rc = buf ? 0 : -ENOMEM;
	if (rc == 0 && fxpprof__profile__pack(prof, buf) != len)
		rc = -EIO;
	if (rc == 0)
		rc = fx_gzip_bytes(buf, len, fx_gzip_write_buf, out, NULL);
	free(buf);
	free(table);
	return rc;
}

static int build(struct pp *p, const struct view_weight *w, size_t nw, struct fx_gzip_buf *out)
{
	const struct merge *m = p->m;
	static const char *const names[] = { "",       "samples", "count", "cpu", "nanoseconds",
					     "thread", "process", "host" };
	Fxpprof__Profile prof = FXPPROF__PROFILE__INIT;
	Fxpprof__ValueType types[3];
	Fxpprof__ValueType *type_ptr[2] = { &types[0], &types[1] };
	int64_t period = llround((m->interval > 0 ? m->interval : 1000.0 / 99) * 1e6);
	int64_t keys[NLABELS] = { 5, 6, 7 };
	uint64_t *ids = p->ids;
	int rc = 0;

	/* the fixed strings first: their indexes are their places in names[] */
	for (size_t i = 0; rc == 0 && i < sizeof(names) / sizeof(*names); i++)
		rc = add_str(p, names[i]) == (int64_t)i ? 0 : -ENOMEM;
	for (int i = 0; i < 3; i++)
		fxpprof__value_type__init(&types[i]);
	types[0] = (Fxpprof__ValueType){ types[0].base, 1, 2 }; /* samples, count */
	types[1] = (Fxpprof__ValueType){ types[1].base, 3, 4 }; /* cpu, nanoseconds */
	types[2] = (Fxpprof__ValueType){ types[2].base, 3, 4 };
	for (size_t i = 0; rc == 0 && i < nw; i++)
		rc = add_sample(p, i, &w[i], &ids, period, keys);
	if (rc < 0)
		return rc;
	prof.sample_type = type_ptr;
	prof.n_sample_type = 2;
	prof.sample = p->sample_ptr;
	prof.n_sample = nw;
	prof.location = p->loc_ptr;
	prof.n_location = p->nlocs;
	prof.function = p->func_ptr;
	prof.n_function = p->nfuncs;
	prof.time_nanos = (int64_t)llround(m->start * 1e6);
	prof.duration_nanos = m->end > m->start ? (int64_t)llround((m->end - m->start) * 1e6) : 0;
	prof.period_type = &types[2];
	prof.period = period;
	return pack(&prof, &p->strs, out);
}

int view_export_pprof(const struct merge *m, struct fx_gzip_buf *out)
{
	struct pp p = { .m = m };
	struct view_weight *w = NULL;
	uint64_t total;
	size_t nw = 0, depth = 0;
	int rc = view_stack_weights(m, &w, &nw, &total);

	for (size_t i = 0; rc == 0 && i < nw; i++)
		depth += stack_depth(m, w[i].stack);
	if (rc == 0)
		rc = alloc_tables(&p, nw, depth);
	if (rc == 0)
		rc = build(&p, w, nw, out);
	free_tables(&p);
	free(w);
	return rc;
}
