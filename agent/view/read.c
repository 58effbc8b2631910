/* SPDX-License-Identifier: MIT */
/* Reading one chunk: gzip inflated and JSON parsed as a stream (zlib, yajl's
 * event parser), 64 KiB at a time, into the columns of struct vchunk. Only
 * what the merge uses is kept; the JSON text never is. Then the chunk is
 * checked as untrusted input: one length per table, every index in range. */
#include "view_int.h"

#include "fxagent/util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

/* A chunk is far smaller; a text a browser could not parse either is bad. */
#define MAX_TEXT_BYTES (1ull << 30)
#define MAX_DEPTH      32
#define INFLATE_STEP   (64u << 10)

/* Where in the document the parser is. */
enum ctx {
	C_IGNORE, /* a subtree we do not keep */
	C_ROOT,
	C_META,
	C_FX,
	C_LABELS,
	C_LIBS,
	C_LIB,
	C_SHARED,
	C_STRINGS,
	C_TABLE,
	C_COLUMN,
	C_THREADS,
	C_THREAD,
	C_MDATA,
	C_MDATUM,
};

enum table {
	T_RES,
	T_NSYM,
	T_FUNC,
	T_FRAME,
	T_STACK,
	T_SAMPLES,
	T_MARKERS,
};

struct level {
	enum ctx ctx;
	enum table table;
	int col; /* C_COLUMN: the column, -1 for none */
};

struct parse {
	struct vchunk *c;
	struct level st[MAX_DEPTH];
	int depth; /* levels in st; 0 before the root */
	char key[32];
	bool meta_done;
	view_meta_fn meta_cb;
	void *arg;
	int stopped; /* 1: the meta callback said no */
	char *why;
	size_t why_size;
	int err;
	struct vthread *thread; /* the thread being read */
	bool marker_has_count;
};

/* Records the first error; returns 0, which stops yajl from a callback. */
__attribute__((format(printf, 3, 4))) static int fail(struct parse *p, int err, const char *fmt,
						      ...)
{
	va_list ap;

	if (!p->err) {
		va_start(ap, fmt);
		vsnprintf(p->why, p->why_size, fmt, ap);
		va_end(ap);
		/* One line: a key of the chunk it quotes may hold any byte. */
		for (char *c = p->why; p->why_size && *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = '?';
		p->err = err;
	}
	return 0;
}

/* fail(), returning the error: for the code outside the callbacks. */
#define FAIL(p_, err_, ...) (fail((p_), (err_), __VA_ARGS__), (p_)->err)

/* ---- storage ---- */

static int col_push(struct parse *p, struct vcol *col, double v)
{
	if (fx_grow(&col->v, &col->cap, col->n + 1, sizeof(double)) < 0)
		return fail(p, -ENOMEM, "out of memory");
	col->v[col->n++] = v;
	return 1;
}

static int text_add(struct parse *p, const unsigned char *s, size_t len, struct vstr *out)
{
	struct vchunk *c = p->c;

	if (len >= UINT32_MAX || c->tlen + len + 1 >= UINT32_MAX)
		return fail(p, -E2BIG, "strings over 4 GiB");
	if (fx_grow(&c->text, &c->tcap, c->tlen + len + 1, 1) < 0)
		return fail(p, -ENOMEM, "out of memory");
	memcpy(c->text + c->tlen, s, len);
	c->text[c->tlen + len] = '\0';
	*out = (struct vstr){ .off = (uint32_t)c->tlen, .len = (uint32_t)len };
	c->tlen += len + 1;
	return 1;
}

static int strs_push(struct parse *p, struct vstrs *v, const unsigned char *s, size_t len)
{
	if (fx_grow(&v->v, &v->cap, v->n + 1, sizeof(*v->v)) < 0)
		return fail(p, -ENOMEM, "out of memory");
	if (!text_add(p, s, len, &v->v[v->n]))
		return 0;
	v->n++;
	return 1;
}

void view_vchunk_reset(struct vchunk *c)
{
	c->tlen = 0;
	c->strings.n = c->marker_types.n = 0;
	c->version = c->interval = c->start_time = c->end_ms = NAN;
	c->seq = c->window_start = c->window_end = c->window_ms = NAN;
	c->samples = c->lost = c->truncated = NAN;
	c->fx = false;
	c->product = c->target = c->host = (struct vstr){ 0 };
	c->nlabels = c->nlibs = c->nthreads = 0;
	for (int i = 0; i < VC_NCOLS; i++)
		c->col[i].n = 0;
}

void view_vchunk_free(struct vchunk *c)
{
	free(c->text);
	free(c->strings.v);
	free(c->marker_types.v);
	free(c->labels);
	free(c->libs);
	free(c->threads);
	for (int i = 0; i < VC_NCOLS; i++)
		free(c->col[i].v);
	memset(c, 0, sizeof(*c));
}

/* ---- where a key leads ---- */

struct colkey {
	const char *key;
	enum table table;
	enum vcol_id col;
};

static const struct colkey colkeys[] = {
	{ "name", T_RES, VC_RES_NAME },
	{ "lib", T_RES, VC_RES_LIB },
	{ "libIndex", T_NSYM, VC_NSYM_LIB },
	{ "address", T_NSYM, VC_NSYM_ADDR },
	{ "name", T_NSYM, VC_NSYM_NAME },
	{ "functionSize", T_NSYM, VC_NSYM_SIZE },
	{ "name", T_FUNC, VC_FUNC_NAME },
	{ "resource", T_FUNC, VC_FUNC_RES },
	{ "address", T_FRAME, VC_FRAME_ADDR },
	{ "inlineDepth", T_FRAME, VC_FRAME_DEPTH },
	{ "category", T_FRAME, VC_FRAME_CAT },
	{ "func", T_FRAME, VC_FRAME_FUNC },
	{ "nativeSymbol", T_FRAME, VC_FRAME_NSYM },
	{ "line", T_FRAME, VC_FRAME_LINE },
	{ "frame", T_STACK, VC_STACK_FRAME },
	{ "prefixOffset", T_STACK, VC_STACK_PREFIX },
	{ "stack", T_SAMPLES, VC_SAMPLE_STACK },
	{ "time", T_SAMPLES, VC_SAMPLE_TIME },
	{ "timeDeltas", T_SAMPLES, VC_SAMPLE_DELTA },
	{ "weight", T_SAMPLES, VC_SAMPLE_WEIGHT },
	{ "startTime", T_MARKERS, VC_MARKER_START },
};

static int column_of(enum table t, const char *key)
{
	for (size_t i = 0; i < sizeof(colkeys) / sizeof(colkeys[0]); i++) {
		if (colkeys[i].table == t && !strcmp(colkeys[i].key, key))
			return (int)colkeys[i].col;
	}
	return -1;
}

static const char *const shared_tables[] = {
	[T_RES] = "resourceTable", [T_NSYM] = "nativeSymbols", [T_FUNC] = "funcTable",
	[T_FRAME] = "frameTable",  [T_STACK] = "stackTable",
};

const char *const vlib_keys[VLIB_NFIELDS] = {
	[VLIB_NAME] = "name",
	[VLIB_PATH] = "path",
	[VLIB_DEBUG_NAME] = "debugName",
	[VLIB_DEBUG_PATH] = "debugPath",
	[VLIB_ARCH] = "arch",
	[VLIB_BREAKPAD] = "breakpadId",
	[VLIB_CODE_ID] = "codeId",
};

static struct level *top(struct parse *p)
{
	return &p->st[p->depth - 1];
}

/* The level a container opened under the current key (or array) gets. */
static struct level child(struct parse *p, bool is_map)
{
	struct level up = p->depth ? *top(p) : (struct level){ .ctx = C_ROOT };
	struct level l = { .ctx = C_IGNORE, .col = -1 };
	const char *k = p->key;

	if (!p->depth)
		return (struct level){ .ctx = is_map ? C_ROOT : C_IGNORE, .col = -1 };
	switch (up.ctx) {
	case C_ROOT:
		if (is_map && !strcmp(k, "meta"))
			l.ctx = C_META;
		else if (is_map && !strcmp(k, "shared"))
			l.ctx = C_SHARED;
		else if (!is_map && !strcmp(k, "libs"))
			l.ctx = C_LIBS;
		else if (!is_map && !strcmp(k, "threads"))
			l.ctx = C_THREADS;
		break;
	case C_META:
		if (is_map && !strcmp(k, "fxagent"))
			l.ctx = C_FX;
		break;
	case C_FX:
		if (is_map && !strcmp(k, "labels"))
			l.ctx = C_LABELS;
		break;
	case C_LIBS:
		if (is_map)
			l.ctx = C_LIB;
		break;
	case C_THREADS:
		if (is_map)
			l.ctx = C_THREAD;
		break;
	case C_SHARED:
		if (!is_map && !strcmp(k, "stringArray"))
			l.ctx = C_STRINGS;
		for (int t = T_RES; is_map && t <= T_STACK; t++) {
			if (!strcmp(k, shared_tables[t]))
				l = (struct level){ .ctx = C_TABLE,
						    .table = (enum table)t,
						    .col = -1 };
		}
		break;
	case C_THREAD:
		if (is_map && !strcmp(k, "samples"))
			l = (struct level){ .ctx = C_TABLE, .table = T_SAMPLES, .col = -1 };
		else if (is_map && !strcmp(k, "markers"))
			l = (struct level){ .ctx = C_TABLE, .table = T_MARKERS, .col = -1 };
		break;
	case C_TABLE:
		if (!is_map && up.table == T_MARKERS && !strcmp(k, "data"))
			l.ctx = C_MDATA;
		else if (!is_map)
			l = (struct level){ .ctx = C_COLUMN, .col = column_of(up.table, k) };
		if (l.ctx == C_COLUMN && l.col < 0)
			l.ctx = C_IGNORE;
		break;
	case C_MDATA:
		if (is_map)
			l.ctx = C_MDATUM;
		break;
	default:
		break;
	}
	return l;
}

static int push(struct parse *p, bool is_map)
{
	struct level l = child(p, is_map);

	if (p->depth == MAX_DEPTH)
		return fail(p, -EINVAL, "JSON nested deeper than %d levels", MAX_DEPTH);
	if (l.ctx == C_THREAD) {
		struct vchunk *c = p->c;

		if (fx_grow(&c->threads, &c->threads_cap, c->nthreads + 1, sizeof(*c->threads)) < 0)
			return fail(p, -ENOMEM, "out of memory");
		p->thread = &c->threads[c->nthreads++];
		*p->thread = (struct vthread){
			.tid = NAN,
			.samples_begin = c->col[VC_SAMPLE_STACK].n,
			.markers_begin = c->col[VC_MARKER_START].n,
		};
	} else if (l.ctx == C_LIB) {
		struct vchunk *c = p->c;

		if (fx_grow(&c->libs, &c->libs_cap, c->nlibs + 1, sizeof(*c->libs)) < 0)
			return fail(p, -ENOMEM, "out of memory");
		memset(&c->libs[c->nlibs++], 0, sizeof(*c->libs));
	} else if (l.ctx == C_MDATUM) {
		p->marker_has_count = false;
		if (fx_grow(&p->c->marker_types.v, &p->c->marker_types.cap,
			    p->c->marker_types.n + 1, sizeof(struct vstr)) < 0)
			return fail(p, -ENOMEM, "out of memory");
		p->c->marker_types.v[p->c->marker_types.n++] = (struct vstr){ 0 };
	}
	p->st[p->depth++] = l;
	p->key[0] = '\0';
	return 1;
}

/* Ours and of a version we know, or refused before the rest is read. */
static int check_meta(struct parse *p)
{
	const struct vchunk *c = p->c;

	if (isnan(c->version))
		return fail(p, -EINVAL,
			    "not a processed profile (no meta.preprocessedProfileVersion)");
	if (c->version != VIEW_FORMAT_VERSION)
		return fail(p, -EPROTO, "format version %g, not the %d this fxagent reads",
			    c->version, VIEW_FORMAT_VERSION);
	if (!c->fx)
		return fail(p, -EINVAL, "not an fxagent chunk (no meta.fxagent)");
	if (!isfinite(c->start_time) || !isfinite(c->window_start) || !isfinite(c->window_end) ||
	    !(c->interval > 0))
		return fail(p, -EINVAL,
			    "meta without its times (startTime, interval, windowStart, windowEnd)");
	return 1;
}

/* A thread's columns end together: weights default to 1 each. */
static int thread_end(struct parse *p)
{
	struct vchunk *c = p->c;
	struct vthread *t = p->thread;
	size_t n = c->col[VC_SAMPLE_STACK].n;

	t->samples_end = n;
	t->markers_end = c->col[VC_MARKER_START].n;
	if (c->col[VC_SAMPLE_DELTA].n) {
		/* Times from the deltas, summed in whole nanoseconds: the
		 * agent's are exact to the nanosecond, and so are these. */
		struct vcol *d = &c->col[VC_SAMPLE_DELTA];
		double at_ns = 0;

		if (c->col[VC_SAMPLE_TIME].n != t->samples_begin)
			return fail(p, -EINVAL, "thread %zu: both time and timeDeltas",
				    c->nthreads - 1);
		for (size_t i = 0; i < d->n; i++) {
			at_ns += round(d->v[i] * 1e6);
			if (!col_push(p, &c->col[VC_SAMPLE_TIME], at_ns / 1e6))
				return 0;
		}
		d->n = 0;
	}
	if (c->col[VC_SAMPLE_TIME].n != n)
		return fail(p, -EINVAL, "thread %zu: %zu sample times for %zu stacks",
			    c->nthreads - 1, c->col[VC_SAMPLE_TIME].n - t->samples_begin,
			    n - t->samples_begin);
	while (c->col[VC_SAMPLE_WEIGHT].n < n) {
		if (!col_push(p, &c->col[VC_SAMPLE_WEIGHT], 1))
			return 0;
	}
	if (c->col[VC_SAMPLE_WEIGHT].n != n)
		return fail(p, -EINVAL, "thread %zu: more weights than samples", c->nthreads - 1);
	if (c->marker_types.n != t->markers_end)
		return fail(p, -EINVAL, "thread %zu: %zu marker data for %zu markers",
			    c->nthreads - 1, c->marker_types.n, t->markers_end);
	p->thread = NULL;
	return 1;
}

static int pop(struct parse *p)
{
	struct level l = *top(p);

	if (l.ctx == C_MDATUM && !p->marker_has_count &&
	    !col_push(p, &p->c->col[VC_MARKER_COUNT], NAN))
		return 0;
	p->depth--;
	if (l.ctx == C_THREAD && !thread_end(p))
		return 0;
	if (l.ctx == C_META) {
		p->meta_done = true;
		if (!check_meta(p))
			return 0;
		if (p->meta_cb && !p->meta_cb(p->arg, p->c)) {
			p->stopped = 1;
			return 0;
		}
	}
	return 1;
}

/* ---- scalars ---- */

static int scalar(struct parse *p, double num, const unsigned char *s, size_t len, bool is_str)
{
	struct vchunk *c = p->c;
	struct level *l;
	const char *k = p->key;

	if (!p->depth)
		return fail(p, -EINVAL, "not a JSON object");
	l = top(p);
	switch (l->ctx) {
	case C_COLUMN:
		return l->col < 0 ? 1 : col_push(p, &c->col[l->col], is_str ? NAN : num);
	case C_STRINGS:
		if (!is_str)
			return fail(p, -EINVAL, "shared.stringArray holds a non-string");
		return strs_push(p, &c->strings, s, len);
	case C_META:
		if (!strcmp(k, "preprocessedProfileVersion"))
			c->version = is_str ? NAN : num;
		else if (!strcmp(k, "interval"))
			c->interval = num;
		else if (!strcmp(k, "startTime"))
			c->start_time = num;
		else if (!strcmp(k, "profilingEndTime"))
			c->end_ms = num;
		else if (!strcmp(k, "product") && is_str)
			return text_add(p, s, len, &c->product);
		return 1;
	case C_FX:
		c->fx = true;
		if (is_str && !strcmp(k, "target"))
			return text_add(p, s, len, &c->target);
		if (is_str && !strcmp(k, "host"))
			return text_add(p, s, len, &c->host);
		if (!strcmp(k, "seq"))
			c->seq = num;
		else if (!strcmp(k, "windowStart"))
			c->window_start = num;
		else if (!strcmp(k, "windowEnd"))
			c->window_end = num;
		else if (!strcmp(k, "windowMs"))
			c->window_ms = num;
		else if (!strcmp(k, "samples"))
			c->samples = num;
		else if (!strcmp(k, "lost"))
			c->lost = num;
		else if (!strcmp(k, "truncated"))
			c->truncated = num;
		return 1;
	case C_LABELS: {
		struct vlabel *lb;

		if (!is_str)
			return fail(p, -EINVAL, "meta.fxagent.labels.%s is not a string", k);
		if (fx_grow(&c->labels, &c->labels_cap, c->nlabels + 1, sizeof(*lb)) < 0)
			return fail(p, -ENOMEM, "out of memory");
		lb = &c->labels[c->nlabels++];
		if (!text_add(p, (const unsigned char *)k, strlen(k), &lb->key))
			return 0;
		return text_add(p, s, len, &lb->value);
	}
	case C_LIB:
		for (int f = 0; is_str && f < VLIB_NFIELDS; f++) {
			if (!strcmp(k, vlib_keys[f]))
				return text_add(p, s, len, &c->libs[c->nlibs - 1].f[f]);
		}
		return 1;
	case C_TABLE:
		/* A thread's samples are CPU samples or off-CPU waits (ms). */
		if (top(p)->table != T_SAMPLES || strcmp(k, "weightType") || !p->thread)
			return 1;
		if (is_str && len == strlen("tracing-ms") && !memcmp(s, "tracing-ms", len))
			p->thread->off_cpu = true;
		else if (!is_str || len != strlen("samples") || memcmp(s, "samples", len))
			return fail(p, -EINVAL,
				    "thread %zu: samples.weightType is neither \"samples\" nor "
				    "\"tracing-ms\"",
				    c->nthreads - 1);
		return 1;
	case C_THREAD:
		if (!strcmp(k, "tid"))
			p->thread->tid = is_str ? strtod((const char *)s, NULL) : num;
		else if (is_str && !strcmp(k, "name"))
			return text_add(p, s, len, &p->thread->name);
		else if (is_str && !strcmp(k, "processName"))
			return text_add(p, s, len, &p->thread->process_name);
		else if (is_str && !strcmp(k, "pid"))
			return text_add(p, s, len, &p->thread->pid);
		return 1;
	case C_MDATA:
		/* a marker without data: no type, no count */
		if (fx_grow(&c->marker_types.v, &c->marker_types.cap, c->marker_types.n + 1,
			    sizeof(struct vstr)) < 0)
			return fail(p, -ENOMEM, "out of memory");
		c->marker_types.v[c->marker_types.n++] = (struct vstr){ 0 };
		return col_push(p, &c->col[VC_MARKER_COUNT], NAN);
	case C_MDATUM:
		if (is_str && !strcmp(k, "type"))
			return text_add(p, s, len, &c->marker_types.v[c->marker_types.n - 1]);
		if (!is_str && !strcmp(k, "count")) {
			p->marker_has_count = true;
			return col_push(p, &c->col[VC_MARKER_COUNT], num);
		}
		return 1;
	default:
		return 1;
	}
}

static int on_null(void *ctx)
{
	return scalar(ctx, NAN, NULL, 0, false);
}

static int on_bool(void *ctx, int v)
{
	return scalar(ctx, v ? 1 : 0, NULL, 0, false);
}

/* The exact powers of ten a double holds. */
static const double pow10[] = { 1e0,  1e1,  1e2,  1e3,	1e4,  1e5,  1e6,  1e7,
				1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
				1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22 };

/* Most numbers of a chunk are indexes and times with few digits: read at
 * most 15 significant digits and a fraction exactly (digits / 10^k is then
 * correctly rounded, both being exact doubles); anything else through
 * strtod. */
static bool fast_number(const char *s, size_t len, double *out)
{
	uint64_t digits = 0;
	size_t i = 0, n = 0, frac = 0;
	bool neg = len && s[0] == '-', dot = false;

	for (i = neg; i < len; i++) {
		if (s[i] >= '0' && s[i] <= '9') {
			digits = digits * 10 + (uint64_t)(s[i] - '0');
			n++;
			frac += dot;
		} else if (s[i] == '.' && !dot) {
			dot = true;
		} else {
			return false;
		}
	}
	if (!n || n > 15)
		return false;
	*out = (double)digits / pow10[frac];
	if (neg)
		*out = -*out;
	return true;
}

static int on_number(void *ctx, const char *s, size_t len)
{
	char buf[64];
	double v;

	if (fast_number(s, len, &v))
		return scalar(ctx, v, NULL, 0, false);
	if (len >= sizeof(buf))
		return fail(ctx, -EINVAL, "a number of %zu characters", len);
	memcpy(buf, s, len);
	buf[len] = '\0';
	v = strtod(buf, NULL);
	return scalar(ctx, v, NULL, 0, false);
}

static int on_string(void *ctx, const unsigned char *s, size_t len)
{
	return scalar(ctx, NAN, s, len, true);
}

static int on_key(void *ctx, const unsigned char *s, size_t len)
{
	struct parse *p = ctx;

	/* A longer key is none we know, nor one with a NUL in it. */
	if (len >= sizeof(p->key) || memchr(s, '\0', len)) {
		strcpy(p->key, "\x01");
		return 1;
	}
	memcpy(p->key, s, len);
	p->key[len] = '\0';
	return 1;
}

static int on_start_map(void *ctx)
{
	return push(ctx, true);
}

static int on_start_array(void *ctx)
{
	return push(ctx, false);
}

static int on_end(void *ctx)
{
	return pop(ctx);
}

static const yajl_callbacks callbacks = {
	.yajl_null = on_null,
	.yajl_boolean = on_bool,
	.yajl_number = on_number,
	.yajl_string = on_string,
	.yajl_start_map = on_start_map,
	.yajl_map_key = on_key,
	.yajl_end_map = on_end,
	.yajl_start_array = on_start_array,
	.yajl_end_array = on_end,
};

/* ---- the checks of a chunk read whole ---- */

static bool index_ok(double v, size_t n, bool nullable)
{
	if (isnan(v))
		return nullable;
	return v >= 0 && v < (double)n && v == floor(v);
}

/* Every value of column @col is an index below @n (or null if @nullable). */
static int check_refs(const struct vchunk *c, enum vcol_id col, size_t n, bool nullable,
		      const char *what, char *why, size_t why_size)
{
	const struct vcol *v = &c->col[col];

	for (size_t i = 0; i < v->n; i++) {
		/* resource -1 and nativeSymbol null mean none */
		if (v->v[i] == -1 && nullable)
			continue;
		if (!index_ok(v->v[i], n, nullable)) {
			snprintf(why, why_size, "%s[%zu] = %g is out of range (%zu entries)", what,
				 i, v->v[i], n);
			return -EINVAL;
		}
	}
	return 0;
}

static int check_lengths(const struct vchunk *c, enum vcol_id first, enum vcol_id last,
			 const char *table, char *why, size_t why_size)
{
	for (int i = (int)first + 1; i <= (int)last; i++) {
		if (c->col[i].n != c->col[first].n) {
			snprintf(why, why_size, "%s: columns of %zu and %zu entries", table,
				 c->col[first].n, c->col[i].n);
			return -EINVAL;
		}
	}
	return 0;
}

static int check_chunk(const struct vchunk *c, char *why, size_t why_size)
{
	size_t nstr = c->strings.n, nframes = c->col[VC_FRAME_ADDR].n;
	int rc = 0;

	rc = rc ? rc : check_lengths(c, VC_RES_NAME, VC_RES_LIB, "resourceTable", why, why_size);
	rc = rc ? rc : check_lengths(c, VC_NSYM_LIB, VC_NSYM_SIZE, "nativeSymbols", why, why_size);
	rc = rc ? rc : check_lengths(c, VC_FUNC_NAME, VC_FUNC_RES, "funcTable", why, why_size);
	rc = rc ? rc : check_lengths(c, VC_FRAME_ADDR, VC_FRAME_LINE, "frameTable", why, why_size);
	rc = rc ? rc
		: check_lengths(c, VC_STACK_FRAME, VC_STACK_PREFIX, "stackTable", why, why_size);
	rc = rc ? rc : check_refs(c, VC_RES_NAME, nstr, false, "resourceTable.name", why, why_size);
	rc = rc ? rc
		: check_refs(c, VC_RES_LIB, c->nlibs, true, "resourceTable.lib", why, why_size);
	rc = rc ? rc
		: check_refs(c, VC_NSYM_LIB, c->nlibs, false, "nativeSymbols.libIndex", why,
			     why_size);
	rc = rc ? rc
		: check_refs(c, VC_NSYM_NAME, nstr, false, "nativeSymbols.name", why, why_size);
	rc = rc ? rc : check_refs(c, VC_FUNC_NAME, nstr, false, "funcTable.name", why, why_size);
	rc = rc ? rc
		: check_refs(c, VC_FUNC_RES, c->col[VC_RES_NAME].n, true, "funcTable.resource", why,
			     why_size);
	rc = rc ? rc
		: check_refs(c, VC_FRAME_FUNC, c->col[VC_FUNC_NAME].n, false, "frameTable.func",
			     why, why_size);
	rc = rc ? rc
		: check_refs(c, VC_FRAME_NSYM, c->col[VC_NSYM_LIB].n, true,
			     "frameTable.nativeSymbol", why, why_size);
	rc = rc ? rc
		: check_refs(c, VC_STACK_FRAME, nframes, false, "stackTable.frame", why, why_size);
	rc = rc ? rc
		: check_refs(c, VC_SAMPLE_STACK, c->col[VC_STACK_FRAME].n, true, "samples.stack",
			     why, why_size);
	if (rc)
		return rc;
	for (size_t i = 0; i < c->col[VC_STACK_PREFIX].n; i++) {
		double off = c->col[VC_STACK_PREFIX].v[i];

		/* 0 is the root; else the parent is i - off, before i */
		if (isnan(off) || off < 0 || off > (double)i || off != floor(off)) {
			snprintf(why, why_size,
				 "stackTable.prefixOffset[%zu] = %g names no earlier stack", i,
				 off);
			return -EINVAL;
		}
	}
	for (size_t i = 0; i < c->col[VC_SAMPLE_TIME].n; i++) {
		double w = c->col[VC_SAMPLE_WEIGHT].v[i];

		if (!isfinite(c->col[VC_SAMPLE_TIME].v[i]) || !(w >= 0 && w <= UINT32_MAX)) {
			snprintf(why, why_size, "samples[%zu]: time %g, weight %g", i,
				 c->col[VC_SAMPLE_TIME].v[i], w);
			return -EINVAL;
		}
	}
	return 0;
}

/* ---- the stream ---- */

/* yajl's message, on one line. */
static void yajl_fail(struct parse *p, yajl_handle h, const unsigned char *buf, size_t len)
{
	unsigned char *e = yajl_get_error(h, 0, buf, len);
	size_t n = e ? strcspn((char *)e, "\n") : 0;

	fail(p, -EINVAL, "bad JSON: %.*s", (int)n, e ? (char *)e : "");
	if (e)
		yajl_free_error(h, e);
}

static int feed(struct parse *p, yajl_handle h, const unsigned char *buf, size_t len)
{
	if (yajl_parse(h, buf, len) == yajl_status_ok)
		return 0;
	if (p->stopped)
		return 1;
	if (!p->err)
		yajl_fail(p, h, buf, len);
	return p->err;
}

static int inflate_all(struct parse *p, yajl_handle h, const unsigned char *in, size_t len)
{
	unsigned char *out = malloc(INFLATE_STEP);
	z_stream z = { .next_in = (unsigned char *)in, .avail_in = (uInt)len };
	uint64_t total = 0;
	int zr = Z_OK, rc = 0;

	if (len > UINT32_MAX) {
		free(out);
		return FAIL(p, -E2BIG, "over 4 GiB compressed");
	}
	if (!out || inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		free(out);
		return FAIL(p, -ENOMEM, "out of memory");
	}
	while (rc == 0 && zr != Z_STREAM_END) {
		z.next_out = out;
		z.avail_out = INFLATE_STEP;
		zr = inflate(&z, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END) {
			if (zr == Z_BUF_ERROR && !z.avail_in)
				rc = FAIL(p, -EINVAL, "truncated gzip (ends after %zu bytes)", len);
			else
				rc = FAIL(p, -EINVAL, "bad gzip: %s",
					  z.msg ? z.msg : "inflate failed");
			break;
		}
		total += INFLATE_STEP - z.avail_out;
		if (total > MAX_TEXT_BYTES)
			rc = FAIL(p, -E2BIG, "inflates to over 1 GiB");
		else
			rc = feed(p, h, out, INFLATE_STEP - z.avail_out);
	}
	if (rc == 0 && z.avail_in)
		rc = FAIL(p, -EINVAL, "%u bytes after the gzip member", z.avail_in);
	inflateEnd(&z);
	free(out);
	return rc;
}

int view_read_chunk(const void *data, size_t len, struct vchunk *c, view_meta_fn meta_cb, void *arg,
		    char *why, size_t why_size)
{
	struct parse p = {
		.c = c, .meta_cb = meta_cb, .arg = arg, .why = why, .why_size = why_size
	};
	const unsigned char *b = data;
	yajl_handle h;
	int rc;

	why[0] = '\0';
	view_vchunk_reset(c);
	if (!len) {
		snprintf(why, why_size, "empty file");
		return -EINVAL;
	}
	h = yajl_alloc(&callbacks, NULL, &p);
	if (!h) {
		snprintf(why, why_size, "out of memory");
		return -ENOMEM;
	}
	if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		rc = inflate_all(&p, h, b, len);
	else
		rc = feed(&p, h, b, len);
	if (rc == 0 && yajl_complete_parse(h) != yajl_status_ok) {
		if (!p.err && !p.stopped)
			yajl_fail(&p, h, NULL, 0);
		rc = p.err;
	}
	yajl_free(h);
	if (p.stopped)
		return 1;
	if (rc == 0 && !p.meta_done)
		rc = FAIL(&p, -EINVAL, "not a profile (no meta)");
	if (rc == 0)
		rc = check_chunk(c, why, why_size);
	return rc;
}
