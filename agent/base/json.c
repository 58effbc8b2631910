/* SPDX-License-Identifier: MIT */
#include "fxagent/json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_BUF_SIZE  (64 * 1024)
#define JSON_MAX_DEPTH 64

enum level_kind {
	LEVEL_ARRAY,
	LEVEL_OBJECT,
};

struct level {
	unsigned char kind;	/* enum level_kind */
	unsigned char nonempty; /* a member was written: the next one needs a comma */
	unsigned char have_key; /* object: a key was written, its value is due */
};

struct fx_json {
	fx_json_write_fn write;
	void *ctx;
	int err;
	bool top_done; /* the one top-level value was started */
	size_t depth;
	struct level stack[JSON_MAX_DEPTH];
	size_t len;
	char buf[JSON_BUF_SIZE];
};

struct fx_json *fx_json_new(fx_json_write_fn write, void *ctx)
{
	struct fx_json *j = malloc(sizeof(*j));

	if (!j)
		return NULL;
	j->write = write;
	j->ctx = ctx;
	j->err = 0;
	j->top_done = false;
	j->depth = 0;
	j->len = 0;
	return j;
}

void fx_json_free(struct fx_json *j)
{
	free(j);
}

static void fail(struct fx_json *j, int err)
{
	if (!j->err)
		j->err = err;
}

static void flush(struct fx_json *j)
{
	int rc;

	if (j->err || !j->len)
		return;
	rc = j->write(j->ctx, j->buf, j->len);
	j->len = 0;
	if (rc)
		fail(j, rc < 0 ? rc : -EIO);
}

static void put(struct fx_json *j, const void *data, size_t n)
{
	int rc;

	if (j->err)
		return;
	if (n > sizeof(j->buf) - j->len) {
		flush(j);
		if (j->err)
			return;
	}
	if (n <= sizeof(j->buf) - j->len) {
		memcpy(j->buf + j->len, data, n);
		j->len += n;
		return;
	}
	/* Larger than the whole buffer (which is empty now): straight through. */
	rc = j->write(j->ctx, data, n);
	if (rc)
		fail(j, rc < 0 ? rc : -EIO);
}

static void put_char(struct fx_json *j, char c)
{
	if (j->len == sizeof(j->buf))
		flush(j);
	if (j->err)
		return;
	j->buf[j->len++] = c;
}

/* Writes the comma a value needs and checks that a value may come here.
 * Returns false when nothing may be written. */
static bool begin_value(struct fx_json *j)
{
	struct level *l;

	if (j->err)
		return false;
	if (!j->depth) {
		if (j->top_done) {
			fail(j, -EINVAL);
			return false;
		}
		j->top_done = true;
		return true;
	}
	l = &j->stack[j->depth - 1];
	if (l->kind == LEVEL_OBJECT) {
		if (!l->have_key) {
			fail(j, -EINVAL);
			return false;
		}
		l->have_key = 0;
		return true;
	}
	if (l->nonempty)
		put_char(j, ',');
	l->nonempty = 1;
	return !j->err;
}

int fx_json_error(const struct fx_json *j)
{
	return j->err;
}

int fx_json_finish(struct fx_json *j)
{
	if (!j->err && j->depth)
		fail(j, -EINVAL);
	flush(j);
	return j->err;
}

static void open_level(struct fx_json *j, enum level_kind kind, char c)
{
	if (!begin_value(j))
		return;
	if (j->depth == JSON_MAX_DEPTH) {
		fail(j, -EINVAL);
		return;
	}
	j->stack[j->depth++] = (struct level){ .kind = (unsigned char)kind };
	put_char(j, c);
}

static void close_level(struct fx_json *j, enum level_kind kind, char c)
{
	struct level *l;

	if (j->err)
		return;
	if (!j->depth) {
		fail(j, -EINVAL);
		return;
	}
	l = &j->stack[j->depth - 1];
	if (l->kind != kind || l->have_key) {
		fail(j, -EINVAL);
		return;
	}
	j->depth--;
	put_char(j, c);
}

void fx_json_object_begin(struct fx_json *j)
{
	open_level(j, LEVEL_OBJECT, '{');
}

void fx_json_object_end(struct fx_json *j)
{
	close_level(j, LEVEL_OBJECT, '}');
}

void fx_json_array_begin(struct fx_json *j)
{
	open_level(j, LEVEL_ARRAY, '[');
}

void fx_json_array_end(struct fx_json *j)
{
	close_level(j, LEVEL_ARRAY, ']');
}

/* Length of the valid UTF-8 sequence at @s (1..4), or 0 when it is invalid;
 * then *@bad is how many bytes to replace by one U+FFFD (the maximal valid
 * prefix of a sequence, at least 1, as Unicode recommends). */
static size_t utf8_seq(const unsigned char *s, size_t n, size_t *bad)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t need, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		need = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		need = 3;
		if (c == 0xe0)
			lo = 0xa0; /* overlong */
		else if (c == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 4;
		if (c == 0xf0)
			lo = 0x90; /* overlong */
		else if (c == 0xf4)
			hi = 0x8f; /* above U+10FFFF */
	} else {
		*bad = 1;
		return 0;
	}
	for (i = 1; i < need; i++) {
		if (i >= n || s[i] < lo || s[i] > hi) {
			*bad = i;
			return 0;
		}
		lo = 0x80;
		hi = 0xbf;
	}
	return need;
}

/* The letter of a two-character escape for @c, or 0 when @c needs \u00XX. */
static char short_escape(unsigned char c)
{
	switch (c) {
	case '"':
		return '"';
	case '\\':
		return '\\';
	case '\n':
		return 'n';
	case '\t':
		return 't';
	case '\r':
		return 'r';
	case '\b':
		return 'b';
	case '\f':
		return 'f';
	default:
		return 0;
	}
}

static void put_string(struct fx_json *j, const char *str, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, run = 0;

	put_char(j, '"');
	while (i < n) {
		unsigned char c = s[i];
		char esc[6];
		size_t len, bad = 0;

		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
			i++;
			continue;
		}
		len = c < 0x80 ? 1 : utf8_seq(s + i, n - i, &bad);
		if (len > 1) {
			i += len;
			continue;
		}
		/* Here: a byte to escape or an invalid sequence. Write the clean run before it. */
		put(j, s + run, i - run);
		if (!len) {
			put(j, "\xef\xbf\xbd", 3);
			i += bad;
			run = i;
			continue;
		}
		esc[0] = '\\';
		esc[1] = short_escape(c);
		len = 2;
		if (!esc[1]) {
			/* esc is bytes with a length, not a string.
			 * NOLINTNEXTLINE(bugprone-not-null-terminated-result) */
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			len = 6;
		}
		put(j, esc, len);
		i++;
		run = i;
	}
	put(j, s + run, n - run);
	put_char(j, '"');
}

void fx_json_key(struct fx_json *j, const char *key)
{
	struct level *l;

	if (j->err)
		return;
	if (!key || !j->depth || j->stack[j->depth - 1].kind != LEVEL_OBJECT ||
	    j->stack[j->depth - 1].have_key) {
		fail(j, -EINVAL);
		return;
	}
	l = &j->stack[j->depth - 1];
	if (l->nonempty)
		put_char(j, ',');
	l->nonempty = 1;
	l->have_key = 1;
	put_string(j, key, strlen(key));
	put_char(j, ':');
}

void fx_json_string_n(struct fx_json *j, const char *s, size_t n)
{
	if (!begin_value(j))
		return;
	if (!s)
		put(j, "null", 4);
	else
		put_string(j, s, n);
}

void fx_json_string(struct fx_json *j, const char *s)
{
	fx_json_string_n(j, s, s ? strlen(s) : 0);
}

static void put_number(struct fx_json *j, const char *text, int len)
{
	if (len <= 0) {
		fail(j, -EIO);
		return;
	}
	put(j, text, (size_t)len);
}

/* "00" to "99" */
static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
				     "25262728293031323334353637383940414243444546474849"
				     "50515253545556575859606162636465666768697071727374"
				     "75767778798081828384858687888990919293949596979899";

/* The last @n decimal digits of @v, leading zeros kept, ending at @end. */
static void put_digits(char *end, uint64_t v, unsigned n)
{
	for (; n >= 2; n -= 2, v /= 100) {
		end -= 2;
		memcpy(end, digit_pairs + 2 * (v % 100), 2);
	}
	if (n)
		end[-1] = (char)('0' + v % 10);
}

static unsigned count_digits(uint64_t v)
{
	unsigned n = 1;

	for (; v >= 10000; v /= 10000)
		n += 4;
	return n + (v >= 10) + (v >= 100) + (v >= 1000);
}

/* Decimal digits of @v, with a '-' for @neg, into @b (24 bytes); returns
 * the length. By hand, two digits a step: a profile's columns are millions
 * of integers, and printf's machinery was most of the time spent writing
 * them. */
static int format_uint(char *b, uint64_t v, bool neg)
{
	unsigned n = count_digits(v);
	int len = neg ? 1 : 0;

	if (neg)
		b[0] = '-';
	put_digits(b + len + n, v, n);
	len += (int)n;
	b[len] = '\0';
	return len;
}

void fx_json_int(struct fx_json *j, int64_t v)
{
	char b[24];

	if (!begin_value(j))
		return;
	put_number(j, b, format_uint(b, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, v < 0));
}

void fx_json_uint(struct fx_json *j, uint64_t v)
{
	char b[24];

	if (!begin_value(j))
		return;
	put_number(j, b, format_uint(b, v, false));
}

void fx_json_fixed(struct fx_json *j, int64_t v, unsigned decimals)
{
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v, whole, frac;
	char b[40];
	int len;

	if (!begin_value(j))
		return;
	/* Constant divisors for the columns' scales: a multiply, not a divide. */
	switch (decimals) {
	case 3:
		whole = u / 1000, frac = u % 1000;
		break;
	case 6:
		whole = u / 1000000, frac = u % 1000000;
		break;
	default: {
		uint64_t p = 1;

		if (decimals > 9) {
			fail(j, -EINVAL);
			return;
		}
		for (unsigned i = 0; i < decimals; i++)
			p *= 10;
		whole = u / p, frac = u % p;
	}
	}
	len = format_uint(b, whole, v < 0);
	if (frac) {
		unsigned n = decimals;

		while (frac % 10 == 0) { /* trailing zeros go */
			frac /= 10;
			n--;
		}
		b[len++] = '.';
		put_digits(b + len + n, frac, n);
		len += (int)n;
		b[len] = '\0';
	}
	put_number(j, b, len);
}

/* Shortest of %.15g, %.16g, %.17g that reads back as @v (17 always does). */
static int format_double(char *b, size_t cap, double v)
{
	int len = 0;

	/* Whole numbers below 2^53 print exactly and without an exponent. */
	if (v == trunc(v) && fabs(v) < 9007199254740992.0 && cap >= 24)
		return format_uint(b, (uint64_t)fabs(v), signbit(v));
	for (int prec = 15; prec <= 17; prec++) {
		len = snprintf(b, cap, "%.*g", prec, v);
		if (prec == 17 || strtod(b, NULL) == v)
			break;
	}
	/* A locale with a decimal comma would break JSON; the agent never sets
	 * one, but the cost of making sure is one pass over a few bytes. */
	for (char *p = b; *p; p++) {
		if (*p == ',')
			*p = '.';
	}
	return len;
}

int fx_json_format_double(char *b, size_t cap, double v)
{
	if (!isfinite(v) || cap < 40)
		return -1;
	return format_double(b, cap, v);
}

void fx_json_double(struct fx_json *j, double v)
{
	char b[40];

	if (!begin_value(j))
		return;
	if (!isfinite(v)) {
		put(j, "null", 4);
		return;
	}
	put_number(j, b, format_double(b, sizeof(b), v));
}

void fx_json_bool(struct fx_json *j, bool v)
{
	if (!begin_value(j))
		return;
	if (v)
		put(j, "true", 4);
	else
		put(j, "false", 5);
}

void fx_json_null(struct fx_json *j)
{
	if (!begin_value(j))
		return;
	put(j, "null", 4);
}

void fx_json_raw(struct fx_json *j, const char *json, size_t len)
{
	if (!begin_value(j))
		return;
	put(j, json, len);
}

void fx_json_key_string(struct fx_json *j, const char *key, const char *value)
{
	fx_json_key(j, key);
	fx_json_string(j, value);
}

void fx_json_key_int(struct fx_json *j, const char *key, int64_t value)
{
	fx_json_key(j, key);
	fx_json_int(j, value);
}

void fx_json_key_double(struct fx_json *j, const char *key, double value)
{
	fx_json_key(j, key);
	fx_json_double(j, value);
}

void fx_json_key_raw(struct fx_json *j, const char *key, const char *json)
{
	fx_json_key(j, key);
	fx_json_raw(j, json, strlen(json));
}

void fx_json_key_array(struct fx_json *j, const char *key)
{
	fx_json_key(j, key);
	fx_json_array_begin(j);
}

void fx_json_key_object(struct fx_json *j, const char *key)
{
	fx_json_key(j, key);
	fx_json_object_begin(j);
}

void fx_json_key_column(struct fx_json *j, const char *key, size_t n, const char *value_json)
{
	size_t len = strlen(value_json);

	fx_json_key_array(j, key);
	for (size_t i = 0; i < n; i++)
		fx_json_raw(j, value_json, len);
	fx_json_array_end(j);
}
