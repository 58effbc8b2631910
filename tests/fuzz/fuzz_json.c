/* SPDX-License-Identifier: MIT */
/* Fuzz target: the streaming JSON writer (include/fxagent/json.h).
 *
 * The input is a program of writer calls: byte 0 picks a sink that fails
 * past some size (bit 7; the size is (byte & 0x7f) KiB), then each op is one
 * byte (low 3 bits: the call) and its operands:
 *   0 object_begin  1 object_end  2 array_begin  3 array_end
 *   4 key           5 string      (op bit 4: 2-byte length, else 1 byte; then
 *                                  the bytes; bit 7: NULL; bit 6: string())
 *   6 number        (bits 6-7: int, uint, double; then 8 bytes)
 *   7 other         (bits 6-7 modulo 3: bool (bit 5 = value), null, a raw
 *                    fragment; but 0xff: a long string, a 1-byte length and
 *                    bytes repeated past the writer's 64 KiB buffer, once)
 * A model of the nesting rules says which calls are mistakes. Checks: the
 * writer reports exactly the model's first error (and nothing else while the
 * sink works); without error the output is strict JSON (RFC 8259, valid
 * UTF-8) whose parse gives back every call: strings equal to their input
 * with each invalid UTF-8 sequence replaced by U+FFFD (the maximal valid
 * prefix of a sequence, at least one byte, per replacement), numbers that
 * read back to the same value.
 */
#include "fuzz.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "fxagent/json.h"

#define MAX_DEPTH   64 /* json.c refuses deeper nesting */
#define MAX_EVENTS  4096
#define MAX_LONG    1
#define LONG_STRING (64 * 1024 + 64) /* past the writer's buffer */

/* ---- a growing byte buffer ---- */

struct buf {
	uint8_t *p;
	size_t n, cap;
};

static void buf_add(struct buf *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;

		while (cap < b->n + n)
			cap *= 2;
		b->p = realloc(b->p, cap);
		FUZZ_CHECK(b->p, "out of memory");
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->n, p, n);
	b->n += n;
}

/* ---- UTF-8, by the table of well-formed sequences (Unicode 3.9) ---- */

/* For a lead byte: the sequence length and the range of the first
 * continuation byte; 0 for a byte that starts no sequence. */
static unsigned utf8_lead(uint8_t c, uint8_t *lo, uint8_t *hi)
{
	*lo = 0x80;
	*hi = 0xbf;
	if (c <= 0x7f)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return 2;
	if (c == 0xe0)
		*lo = 0xa0;
	if (c == 0xed)
		*hi = 0x9f;
	if (c >= 0xe0 && c <= 0xef)
		return 3;
	if (c == 0xf0)
		*lo = 0x90;
	if (c == 0xf4)
		*hi = 0x8f;
	if (c >= 0xf0 && c <= 0xf4)
		return 4;
	return 0;
}

/* How many bytes at @s form a well-formed sequence (0: none); *@prefix gets
 * the length of the longest prefix of one. */
static size_t utf8_well_formed(const uint8_t *s, size_t n, size_t *prefix)
{
	uint8_t lo, hi;
	unsigned need = utf8_lead(s[0], &lo, &hi), k;

	*prefix = 1;
	if (!need)
		return 0;
	for (k = 1; k < need; k++) {
		if (k >= n || s[k] < lo || s[k] > hi)
			return 0;
		*prefix = k + 1;
		lo = 0x80;
		hi = 0xbf;
	}
	return need;
}

/* What a string of arbitrary bytes must read back as. */
static void sanitize(const uint8_t *s, size_t n, struct buf *out)
{
	size_t i = 0, len, prefix;

	while (i < n) {
		/* Runs of ASCII at once: long strings stay cheap. */
		for (len = 0; i + len < n && s[i + len] < 0x80; len++)
			;
		if (len) {
			buf_add(out, s + i, len);
			i += len;
			continue;
		}
		len = utf8_well_formed(s + i, n - i, &prefix);
		if (len) {
			buf_add(out, s + i, len);
			i += len;
		} else {
			buf_add(out, "\xef\xbf\xbd", 3);
			i += prefix;
		}
	}
}

/* ---- events: what was written, and what was read back ---- */

enum ev_kind { EV_OBEGIN, EV_OEND, EV_ABEGIN, EV_AEND, EV_KEY, EV_STR, EV_NUM, EV_LIT };

struct event {
	enum ev_kind kind;
	struct buf str; /* EV_KEY, EV_STR: bytes; EV_LIT: "true", "false", "null" */
	int num_kind;	/* EV_NUM: 0 int, 1 uint, 2 double, 3 fixed (i / 10^decimals) */
	unsigned decimals;
	int64_t i;	 /* EV_NUM */
	uint64_t u;	 /* EV_NUM */
	double d;	 /* EV_NUM */
	const char *raw; /* EV_NUM parsed: the text */
	size_t raw_len;	 /* EV_NUM parsed */
	bool any_number; /* EV_NUM of a raw fragment: any value */
};

struct events {
	struct event v[MAX_EVENTS];
	size_t n;
	bool overflow;
};

static struct event *ev_add(struct events *e, enum ev_kind kind)
{
	struct event *ev;

	if (e->n == MAX_EVENTS) {
		e->overflow = true;
		return NULL;
	}
	ev = &e->v[e->n++];
	memset(ev, 0, sizeof(*ev));
	ev->kind = kind;
	return ev;
}

static void ev_free(struct events *e)
{
	size_t i;

	for (i = 0; i < e->n; i++)
		free(e->v[i].str.p);
	e->n = 0;
}

/* ---- a strict JSON parser that records events ---- */

struct parser {
	const uint8_t *p, *end;
	struct events *ev;
	const char *why;
};

static bool perr(struct parser *ps, const char *why)
{
	if (!ps->why)
		ps->why = why;
	return false;
}

static void put_utf8(struct buf *b, uint32_t cp)
{
	uint8_t u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (uint8_t)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (uint8_t)(0xc0 | cp >> 6);
		u[1] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (uint8_t)(0xe0 | cp >> 12);
		u[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (uint8_t)(0xf0 | cp >> 18);
		u[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 4;
	}
	buf_add(b, u, n);
}

static bool hex4(struct parser *ps, uint32_t *out)
{
	uint32_t v = 0;
	int i;

	if (ps->end - ps->p < 4)
		return perr(ps, "short \\u escape");
	for (i = 0; i < 4; i++) {
		uint8_t c = *ps->p++;

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return perr(ps, "bad hex digit");
	}
	*out = v;
	return true;
}

static bool parse_string(struct parser *ps, struct buf *out)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";

	if (ps->p == ps->end || *ps->p != '"')
		return perr(ps, "expected a string");
	ps->p++;
	for (;;) {
		uint8_t c;
		size_t len, prefix;

		if (ps->p == ps->end)
			return perr(ps, "unterminated string");
		c = *ps->p;
		if (c == '"') {
			ps->p++;
			return true;
		}
		if (c < 0x20)
			return perr(ps, "raw control character in a string");
		for (len = 0; ps->p + len < ps->end && ps->p[len] >= 0x20 && ps->p[len] < 0x80 &&
			      ps->p[len] != '"' && ps->p[len] != '\\';
		     len++)
			;
		if (len) {
			buf_add(out, ps->p, len);
			ps->p += len;
			continue;
		}
		if (c == '\\') {
			const char *e;
			uint32_t cp, lo;

			if (ps->end - ps->p < 2)
				return perr(ps, "short escape");
			c = ps->p[1];
			ps->p += 2;
			if (c == 'u') {
				if (!hex4(ps, &cp))
					return false;
				if (cp >= 0xdc00 && cp <= 0xdfff)
					return perr(ps, "lone low surrogate");
				if (cp >= 0xd800 && cp <= 0xdbff) {
					if (ps->end - ps->p < 2 || ps->p[0] != '\\' ||
					    ps->p[1] != 'u')
						return perr(ps, "lone high surrogate");
					ps->p += 2;
					if (!hex4(ps, &lo))
						return false;
					if (lo < 0xdc00 || lo > 0xdfff)
						return perr(ps, "bad surrogate pair");
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				}
				put_utf8(out, cp);
				continue;
			}
			e = c ? strchr(from, c) : NULL;
			if (!e)
				return perr(ps, "bad escape");
			buf_add(out, &to[e - from], 1);
			continue;
		}
		len = utf8_well_formed(ps->p, (size_t)(ps->end - ps->p), &prefix);
		if (!len)
			return perr(ps, "invalid UTF-8 in a string");
		buf_add(out, ps->p, len);
		ps->p += len;
	}
}

static bool is_digit(const uint8_t *p, const uint8_t *end)
{
	return p < end && *p >= '0' && *p <= '9';
}

static bool parse_number(struct parser *ps)
{
	const uint8_t *start = ps->p;
	struct event *ev;

	if (ps->p < ps->end && *ps->p == '-')
		ps->p++;
	if (!is_digit(ps->p, ps->end))
		return perr(ps, "bad number");
	if (*ps->p == '0')
		ps->p++;
	else
		while (is_digit(ps->p, ps->end))
			ps->p++;
	if (ps->p < ps->end && *ps->p == '.') {
		ps->p++;
		if (!is_digit(ps->p, ps->end))
			return perr(ps, "bad fraction");
		while (is_digit(ps->p, ps->end))
			ps->p++;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (!is_digit(ps->p, ps->end))
			return perr(ps, "bad exponent");
		while (is_digit(ps->p, ps->end))
			ps->p++;
	}
	ev = ev_add(ps->ev, EV_NUM);
	if (ev) {
		ev->raw = (const char *)start;
		ev->raw_len = (size_t)(ps->p - start);
	}
	return true;
}

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static bool parse_value(struct parser *ps, int depth)
{
	static const char *const lits[] = { "true", "false", "null" };
	struct event *ev;
	size_t i;

	if (depth > MAX_DEPTH + 1)
		return perr(ps, "too deep");
	skip_ws(ps);
	if (ps->p == ps->end)
		return perr(ps, "expected a value");
	if (*ps->p == '{' || *ps->p == '[') {
		bool obj = *ps->p == '{';
		uint8_t close = obj ? '}' : ']';
		bool first = true;

		ev_add(ps->ev, obj ? EV_OBEGIN : EV_ABEGIN);
		ps->p++;
		skip_ws(ps);
		while (ps->p < ps->end && *ps->p != close) {
			if (!first) {
				if (*ps->p != ',')
					return perr(ps, "expected a comma");
				ps->p++;
				skip_ws(ps);
			}
			first = false;
			if (obj) {
				ev = ev_add(ps->ev, EV_KEY);
				if (!parse_string(ps, ev ? &ev->str : &(struct buf){ 0 }))
					return false;
				skip_ws(ps);
				if (ps->p == ps->end || *ps->p != ':')
					return perr(ps, "expected a colon");
				ps->p++;
			}
			if (!parse_value(ps, depth + 1))
				return false;
			skip_ws(ps);
		}
		if (ps->p == ps->end)
			return perr(ps, "unterminated collection");
		ps->p++;
		ev_add(ps->ev, obj ? EV_OEND : EV_AEND);
		return true;
	}
	if (*ps->p == '"') {
		ev = ev_add(ps->ev, EV_STR);
		return parse_string(ps, ev ? &ev->str : &(struct buf){ 0 });
	}
	for (i = 0; i < 3; i++) {
		size_t l = strlen(lits[i]);

		if ((size_t)(ps->end - ps->p) >= l && !memcmp(ps->p, lits[i], l)) {
			ps->p += l;
			ev = ev_add(ps->ev, EV_LIT);
			if (ev)
				buf_add(&ev->str, lits[i], l);
			return true;
		}
	}
	return parse_number(ps);
}

/* ---- the model of the writer's rules ---- */

struct model {
	bool obj[MAX_DEPTH + 1]; /* kind of each open level */
	bool have_key[MAX_DEPTH + 1];
	size_t depth;
	bool top_done;
	int err;
};

static bool model_value(struct model *m)
{
	if (m->err)
		return false;
	if (!m->depth) {
		if (m->top_done) {
			m->err = -EINVAL;
			return false;
		}
		m->top_done = true;
		return true;
	}
	if (m->obj[m->depth - 1]) {
		if (!m->have_key[m->depth - 1]) {
			m->err = -EINVAL;
			return false;
		}
		m->have_key[m->depth - 1] = false;
	}
	return true;
}

static bool model_open(struct model *m, bool obj)
{
	if (!model_value(m))
		return false;
	if (m->depth == MAX_DEPTH) {
		m->err = -EINVAL;
		return false;
	}
	m->obj[m->depth] = obj;
	m->have_key[m->depth] = false;
	m->depth++;
	return true;
}

static bool model_close(struct model *m, bool obj)
{
	if (m->err)
		return false;
	if (!m->depth || m->obj[m->depth - 1] != obj || m->have_key[m->depth - 1]) {
		m->err = -EINVAL;
		return false;
	}
	m->depth--;
	return true;
}

static bool model_key(struct model *m, bool null)
{
	if (m->err)
		return false;
	if (null || !m->depth || !m->obj[m->depth - 1] || m->have_key[m->depth - 1]) {
		m->err = -EINVAL;
		return false;
	}
	m->have_key[m->depth - 1] = true;
	return true;
}

/* ---- the sink ---- */

struct sink {
	struct buf out;
	size_t limit; /* fail when the output would pass it; 0 = never */
	bool failed;
};

static int sink_write(void *ctx, const void *p, size_t n)
{
	struct sink *s = ctx;

	FUZZ_CHECK(!s->failed, "writer wrote again after its sink failed");
	if (s->limit && s->out.n + n > s->limit) {
		s->failed = true;
		return -ENOSPC;
	}
	buf_add(&s->out, p, n);
	return 0;
}

/* ---- comparing ---- */

static void check_number(const struct event *want, const struct event *got)
{
	char text[64];
	char *end;

	FUZZ_CHECK(got->raw_len < sizeof(text), "number of %zu characters", got->raw_len);
	memcpy(text, got->raw, got->raw_len);
	text[got->raw_len] = '\0';
	if (want->num_kind == 0) {
		long long v = strtoll(text, &end, 10);

		FUZZ_CHECK(*end == '\0' && v == want->i, "int %lld written as %s",
			   (long long)want->i, text);
	} else if (want->num_kind == 1) {
		unsigned long long v = strtoull(text, &end, 10);

		FUZZ_CHECK(*end == '\0' && text[0] != '-' && v == want->u,
			   "uint %llu written as %s", (unsigned long long)want->u, text);
	} else if (want->num_kind == 3) {
		/* exactly the decimal: digits, a point only before a fraction
		 * without trailing zeros, as many decimals at most */
		uint64_t mag = want->i < 0 ? 0 - (uint64_t)want->i : (uint64_t)want->i, ip = 0;
		uint64_t frac = 0, scale = 1;
		const char *p = text + (want->i < 0);
		unsigned nd = 0;

		FUZZ_CHECK((want->i < 0) == (text[0] == '-'), "fixed %lld written as %s",
			   (long long)want->i, text);
		for (; *p >= '0' && *p <= '9'; p++)
			ip = ip * 10 + (uint64_t)(*p - '0');
		if (*p == '.') {
			for (p++; *p >= '0' && *p <= '9'; p++, nd++)
				frac = frac * 10 + (uint64_t)(*p - '0');
			FUZZ_CHECK(nd >= 1 && p[-1] != '0', "fixed %lld written as %s",
				   (long long)want->i, text);
		}
		FUZZ_CHECK(*p == '\0' && nd <= want->decimals, "fixed %lld/10^%u written as %s",
			   (long long)want->i, want->decimals, text);
		for (unsigned k = 0; k < want->decimals; k++)
			scale *= 10;
		for (unsigned k = nd; k < want->decimals; k++)
			frac *= 10;
		FUZZ_CHECK(ip == mag / scale && frac == mag % scale,
			   "fixed %lld/10^%u written as %s", (long long)want->i, want->decimals,
			   text);
	} else {
		double v = strtod(text, &end);

		FUZZ_CHECK(*end == '\0' && v == want->d && !signbit(v) == !signbit(want->d),
			   "double %a written as %s", want->d, text);
	}
}

static void compare(const struct events *want, const struct events *got)
{
	size_t i;

	FUZZ_CHECK(got->n == want->n, "%zu values written, %zu read back", want->n, got->n);
	for (i = 0; i < want->n; i++) {
		const struct event *w = &want->v[i], *g = &got->v[i];

		FUZZ_CHECK(w->kind == g->kind, "value %zu: kind %d written, %d read back", i,
			   (int)w->kind, (int)g->kind);
		if (w->kind == EV_KEY || w->kind == EV_STR || w->kind == EV_LIT)
			FUZZ_CHECK(w->str.n == g->str.n &&
					   (!w->str.n || !memcmp(w->str.p, g->str.p, w->str.n)),
				   "value %zu: string of %zu bytes read back as %zu bytes", i,
				   w->str.n, g->str.n);
		if (w->kind == EV_NUM && !w->any_number)
			check_number(w, g);
	}
}

/* ---- the program ---- */

static struct events want, got;

/* A string operand: 1 or 2 length bytes, then up to that many bytes. */
static size_t take_string(struct fuzz_in *in, bool wide, const uint8_t **p)
{
	size_t len = (size_t)fuzz_take(in, wide ? 2 : 1);

	if (len > in->n)
		len = in->n;
	*p = in->p;
	in->p += len;
	in->n -= len;
	return len;
}

static void want_string(enum ev_kind kind, const uint8_t *s, size_t n)
{
	struct event *ev = ev_add(&want, kind);

	if (ev)
		sanitize(s, n, &ev->str);
}

static void want_lit(const char *lit)
{
	struct event *ev = ev_add(&want, EV_LIT);

	if (ev)
		buf_add(&ev->str, lit, strlen(lit));
}

static void run_op(struct fx_json *j, struct model *m, struct fuzz_in *in, unsigned *nlong)
{
	uint8_t op = (uint8_t)fuzz_take(in, 1);
	const uint8_t *s;
	struct event *ev;
	size_t len;

	switch (op & 7) {
	case 0:
		fx_json_object_begin(j);
		if (model_open(m, true))
			ev_add(&want, EV_OBEGIN);
		break;
	case 2:
		fx_json_array_begin(j);
		if (model_open(m, false))
			ev_add(&want, EV_ABEGIN);
		break;
	case 1:
		fx_json_object_end(j);
		if (model_close(m, true))
			ev_add(&want, EV_OEND);
		break;
	case 3:
		fx_json_array_end(j);
		if (model_close(m, false))
			ev_add(&want, EV_AEND);
		break;
	case 4: {
		char *key;

		len = take_string(in, op & 0x10, &s);
		key = malloc(len + 1);
		FUZZ_CHECK(key, "out of memory");
		memcpy(key, s, len);
		key[len] = '\0';
		fx_json_key(j, op & 0x80 ? NULL : key);
		/* A key is a C string: it ends at its first NUL. */
		if (model_key(m, op & 0x80))
			want_string(EV_KEY, s, strlen(key));
		free(key);
		break;
	}
	case 5:
		len = take_string(in, op & 0x10, &s);
		if (op & 0x80) {
			fx_json_string_n(j, NULL, len);
			if (model_value(m))
				want_lit("null");
		} else if (op & 0x40) {
			char *z = malloc(len + 1);

			FUZZ_CHECK(z, "out of memory");
			memcpy(z, s, len);
			z[len] = '\0';
			fx_json_string(j, z);
			if (model_value(m))
				want_string(EV_STR, s, strlen(z));
			free(z);
		} else {
			/* An exact-size copy: a read past @n is an ASan report. */
			char *c = malloc(len ? len : 1);

			FUZZ_CHECK(c, "out of memory");
			memcpy(c, s, len);
			fx_json_string_n(j, c, len);
			if (model_value(m))
				want_string(EV_STR, s, len);
			free(c);
		}
		break;
	case 6: {
		uint64_t bits = fuzz_take(in, 8);
		int kind = (op >> 6) % 3;
		double d;

		memcpy(&d, &bits, sizeof(d));
		/* a fixed-point value: 0, 3, 6 or 9 decimals */
		unsigned decimals = ((op >> 4) & 3) * 3;

		if (kind == 1 && (op & 0x08))
			kind = 3;
		if (kind == 0)
			fx_json_int(j, (int64_t)bits);
		else if (kind == 1)
			fx_json_uint(j, bits);
		else if (kind == 3)
			fx_json_fixed(j, (int64_t)bits, decimals);
		else
			fx_json_double(j, d);
		if (!model_value(m))
			break;
		if (kind == 2 && !isfinite(d)) {
			want_lit("null");
			break;
		}
		ev = ev_add(&want, EV_NUM);
		if (ev) {
			ev->num_kind = kind;
			ev->decimals = decimals;
			ev->i = (int64_t)bits;
			ev->u = bits;
			ev->d = d;
		}
		break;
	}
	default:
		switch (op == 0xff ? 3 : (op >> 6) % 3) {
		case 0:
			fx_json_bool(j, op & 0x20);
			if (model_value(m))
				want_lit(op & 0x20 ? "true" : "false");
			break;
		case 1:
			fx_json_null(j);
			if (model_value(m))
				want_lit("null");
			break;
		case 2:
			fx_json_raw(j, "[1,{\"a\":null}]", 14);
			if (model_value(m)) {
				ev_add(&want, EV_ABEGIN);
				ev = ev_add(&want, EV_NUM);
				if (ev)
					ev->any_number = true;
				ev_add(&want, EV_OBEGIN);
				want_string(EV_KEY, (const uint8_t *)"a", 1);
				want_lit("null");
				ev_add(&want, EV_OEND);
				ev_add(&want, EV_AEND);
			}
			break;
		default: {
			uint8_t *rep;
			size_t total;

			len = take_string(in, false, &s);
			if (*nlong >= MAX_LONG || !len)
				break;
			(*nlong)++;
			/* Doubling copies: room for twice the target length. */
			rep = malloc(2 * LONG_STRING + len);
			FUZZ_CHECK(rep, "out of memory");
			memcpy(rep, s, len);
			for (total = len; total < LONG_STRING; total *= 2)
				memcpy(rep + total, rep, total);
			fx_json_string_n(j, (const char *)rep, total);
			if (model_value(m))
				want_string(EV_STR, rep, total);
			free(rep);
			break;
		}
		}
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct sink sink = { 0 };
	struct model m = { 0 };
	struct parser ps;
	struct fx_json *j;
	unsigned nlong = 0;
	uint8_t mode;
	bool ok;
	int rc;

	if (!size)
		return 0;
	mode = (uint8_t)fuzz_take(&in, 1);
	if (mode & 0x80)
		sink.limit = ((size_t)(mode & 0x7f) + 1) * 1024;
	j = fx_json_new(sink_write, &sink);
	FUZZ_CHECK(j, "out of memory");
	while (in.n) {
		run_op(j, &m, &in, &nlong);
		if (!sink.failed)
			FUZZ_CHECK(fx_json_error(j) == m.err, "error %d, the rules say %d",
				   fx_json_error(j), m.err);
	}
	rc = fx_json_finish(j);
	fx_json_free(j);
	if (!m.err && m.depth)
		m.err = -EINVAL;

	if (sink.failed) {
		FUZZ_CHECK(rc == -ENOSPC || (rc == -EINVAL && m.err == -EINVAL),
			   "sink failed, finish gave %d", rc);
	} else {
		FUZZ_CHECK(rc == m.err, "finish gave %d, the rules say %d", rc, m.err);
	}
	if (rc == 0 && m.top_done && !want.overflow) {
		ps = (struct parser){ sink.out.p, sink.out.p + sink.out.n, &got, NULL };
		ok = parse_value(&ps, 0);
		skip_ws(&ps);
		FUZZ_CHECK(ok && ps.p == ps.end, "invalid JSON (%s) at byte %zu of %zu",
			   ps.why ? ps.why : "trailing bytes", (size_t)(ps.p - sink.out.p),
			   sink.out.n);
		if (!got.overflow)
			compare(&want, &got);
	}
	if (rc == 0 && !m.top_done)
		FUZZ_CHECK(sink.out.n == 0, "output without a value");
	ev_free(&want);
	ev_free(&got);
	want.overflow = got.overflow = false;
	free(sink.out.p);
	return 0;
}
