/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fxagent/json.h"

/* A sink into memory that can be told to fail. */
struct sink {
	char *data;
	size_t len, cap;
	int calls;
	int fail_at; /* 1-based call that fails with -ENOSPC; 0 = never */
};

static int sink_write(void *ctx, const void *buf, size_t len)
{
	struct sink *s = ctx;

	s->calls++;
	if (s->fail_at && s->calls >= s->fail_at)
		return -ENOSPC;
	if (s->len + len + 1 > s->cap) {
		s->cap = (s->len + len + 1) * 2;
		s->data = realloc(s->data, s->cap);
		assert_non_null(s->data);
	}
	memcpy(s->data + s->len, buf, len);
	s->len += len;
	s->data[s->len] = '\0';
	return 0;
}

static void sink_free(struct sink *s)
{
	free(s->data);
	memset(s, 0, sizeof(*s));
}

/* Writes one string of @n bytes and returns the JSON text (owned by @s). */
static const char *string_json(struct sink *s, const char *str, size_t n)
{
	struct fx_json *j = fx_json_new(sink_write, s);

	assert_non_null(j);
	s->len = 0;
	fx_json_string_n(j, str, n);
	assert_int_equal(fx_json_finish(j), 0);
	fx_json_free(j);
	return s->data;
}

static void test_control_bytes_escaped(void **state)
{
	struct sink s = { 0 };

	(void)state;
	for (int c = 0; c < 0x20; c++) {
		char in[3] = { 'a', (char)c, 'b' };
		char want[16];

		switch (c) {
		case '\n':
			strcpy(want, "\"a\\nb\"");
			break;
		case '\t':
			strcpy(want, "\"a\\tb\"");
			break;
		case '\r':
			strcpy(want, "\"a\\rb\"");
			break;
		case '\b':
			strcpy(want, "\"a\\bb\"");
			break;
		case '\f':
			strcpy(want, "\"a\\fb\"");
			break;
		default:
			snprintf(want, sizeof(want), "\"a\\u%04xb\"", c);
			break;
		}
		assert_string_equal(string_json(&s, in, 3), want);
	}
	/* DEL is not a control character for JSON: it passes through. */
	assert_string_equal(string_json(&s, "\x7f", 1), "\"\x7f\"");
	sink_free(&s);
}

static void test_quote_and_backslash(void **state)
{
	struct sink s = { 0 };

	(void)state;
	assert_string_equal(string_json(&s, "say \"hi\" \\ bye", 14),
			    "\"say \\\"hi\\\" \\\\ bye\"");
	assert_string_equal(string_json(&s, "", 0), "\"\"");
	sink_free(&s);
}

static void test_string_null_and_nul_bytes(void **state)
{
	struct sink s = { 0 };
	struct fx_json *j = fx_json_new(sink_write, &s);

	(void)state;
	fx_json_array_begin(j);
	fx_json_string(j, NULL);
	fx_json_string_n(j, "a\0b", 3);
	fx_json_array_end(j);
	assert_int_equal(fx_json_finish(j), 0);
	assert_string_equal(s.data, "[null,\"a\\u0000b\"]");
	fx_json_free(j);
	sink_free(&s);
}

static void test_valid_utf8_kept(void **state)
{
	static const char *const valid[] = {
		"caf\xc3\xa9",	    /* U+00E9 */
		"\xe2\x82\xac",	    /* U+20AC */
		"\xef\xbf\xbf",	    /* U+FFFF */
		"\xed\x9f\xbf",	    /* U+D7FF, just below the surrogates */
		"\xee\x80\x80",	    /* U+E000, just above them */
		"\xf0\x9d\x84\x9e", /* U+1D11E, 4 bytes */
		"\xf4\x8f\xbf\xbf", /* U+10FFFF, the last code point */
		"\xc2\x80\xdf\xbf", /* first and last 2-byte forms */
	};
	struct sink s = { 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
		char want[64];

		snprintf(want, sizeof(want), "\"%s\"", valid[i]);
		assert_string_equal(string_json(&s, valid[i], strlen(valid[i])), want);
	}
	sink_free(&s);
}

#define FFFD "\xef\xbf\xbd"

static void test_invalid_utf8_replaced(void **state)
{
	static const struct {
		const char *in;
		const char *want;
	} cases[] = {
		{ "a\x80z", "\"a" FFFD "z\"" },			       /* lone continuation */
		{ "\xc0\xaf", "\"" FFFD FFFD "\"" },		       /* overlong '/' */
		{ "\xc1\xbf", "\"" FFFD FFFD "\"" },		       /* overlong */
		{ "\xe0\x80\xaf", "\"" FFFD FFFD FFFD "\"" },	       /* overlong 3-byte */
		{ "\xf0\x80\x80\xaf", "\"" FFFD FFFD FFFD FFFD "\"" }, /* overlong 4-byte */
		{ "\xed\xa0\x80", "\"" FFFD FFFD FFFD "\"" },	       /* surrogate U+D800 */
		{ "\xed\xbf\xbf", "\"" FFFD FFFD FFFD "\"" },	       /* surrogate U+DFFF */
		{ "\xf4\x90\x80\x80", "\"" FFFD FFFD FFFD FFFD "\"" }, /* U+110000 */
		{ "\xf5\x80", "\"" FFFD FFFD "\"" },
		{ "\xfe\xff", "\"" FFFD FFFD "\"" },
		{ "x\xe2\x82", "\"x" FFFD "\"" },	  /* truncated at the end */
		{ "\xe2\202A", "\"" FFFD "A\"" },	  /* truncated before ASCII */
		{ "\xf0\x9d\204\"", "\"" FFFD "\\\"\"" }, /* truncated before a quote */
		{ "\xc3", "\"" FFFD "\"" },
	};
	struct sink s = { 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(string_json(&s, cases[i].in, strlen(cases[i].in)),
				    cases[i].want);
	sink_free(&s);
}

/* ---- an independent oracle for the property test below ---- */

/* Decodes one UTF-8 code point strictly; returns its length or 0. */
static size_t decode_utf8(const unsigned char *p, size_t n, uint32_t *cp)
{
	size_t len;
	uint32_t v;

	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	if ((p[0] & 0xe0) == 0xc0) {
		len = 2;
		v = p[0] & 0x1f;
	} else if ((p[0] & 0xf0) == 0xe0) {
		len = 3;
		v = p[0] & 0x0f;
	} else if ((p[0] & 0xf8) == 0xf0) {
		len = 4;
		v = p[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (p[i] & 0x3f);
	}
	if ((len == 2 && v < 0x80) || (len == 3 && v < 0x800) || (len == 4 && v < 0x10000) ||
	    v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

static bool valid_utf8(const char *s, size_t n)
{
	uint32_t cp;

	for (size_t i = 0; i < n;) {
		size_t len = decode_utf8((const unsigned char *)s + i, n - i, &cp);

		if (!len)
			return false;
		i += len;
	}
	return true;
}

/* Decodes the JSON string literal @json into @out (the escapes this writer
 * uses); fails the test on anything a JSON parser would reject. */
static size_t decode_json_string(const char *json, size_t n, char *out)
{
	size_t o = 0;

	assert_true(n >= 2 && json[0] == '"' && json[n - 1] == '"');
	for (size_t i = 1; i < n - 1; i++) {
		unsigned char c = (unsigned char)json[i];

		assert_true(c >= 0x20);
		assert_true(c != '"');
		if (c != '\\') {
			out[o++] = (char)c;
			continue;
		}
		c = (unsigned char)json[++i];
		switch (c) {
		case '"':
		case '\\':
		case '/':
			out[o++] = (char)c;
			break;
		case 'n':
			out[o++] = '\n';
			break;
		case 't':
			out[o++] = '\t';
			break;
		case 'r':
			out[o++] = '\r';
			break;
		case 'b':
			out[o++] = '\b';
			break;
		case 'f':
			out[o++] = '\f';
			break;
		case 'u': {
			unsigned int v;

			assert_true(i + 4 < n - 1);
			assert_int_equal(sscanf(json + i + 1, "%4x", &v), 1);
			assert_true(v < 0x20); /* the writer only escapes control bytes */
			out[o++] = (char)v;
			i += 4;
			break;
		}
		default:
			fail_msg("bad escape \\%c", c);
		}
	}
	return o;
}

static size_t encode_utf8(uint32_t cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Random bytes always give a valid JSON string of valid UTF-8; random valid
 * UTF-8 (with control characters) always comes back unchanged. */
static void test_random_strings(void **state)
{
	struct sink s = { 0 };
	char in[256], out[1024];
	unsigned int seed = 12345;

	(void)state;
	for (int round = 0; round < 20000; round++) {
		size_t n = 0;

		if (round & 1) {
			size_t want = (size_t)rand_r(&seed) % 40;

			for (size_t k = 0; k < want; k++) {
				uint32_t cp;

				do {
					int r = rand_r(&seed);

					/* Favour the edges: ASCII controls and high planes. */
					cp = (r & 3) == 0 ? (uint32_t)(r >> 2) % 0x40
							  : (uint32_t)(r >> 2) % 0x110000;
				} while (cp >= 0xd800 && cp <= 0xdfff);
				n += encode_utf8(cp, in + n);
			}
		} else {
			n = (size_t)rand_r(&seed) % 64;
			for (size_t k = 0; k < n; k++)
				in[k] = (char)(rand_r(&seed) & 0xff);
		}
		string_json(&s, in, n);
		assert_true(valid_utf8(s.data, s.len));
		{
			size_t m = decode_json_string(s.data, s.len, out);

			if (round & 1) {
				assert_int_equal(m, n);
				assert_memory_equal(out, in, n);
			}
		}
	}
	sink_free(&s);
}

static void test_long_string_crosses_buffer(void **state)
{
	size_t n = 300 * 1024;
	char *in = malloc(n), *out = malloc(2 * n);
	struct sink s = { 0 };

	(void)state;
	assert_non_null(in);
	assert_non_null(out);
	for (size_t i = 0; i < n; i++)
		in[i] = (char)('a' + i % 26);
	/* Escapes and a 4-byte sequence around the 64 KiB boundary. */
	memcpy(in + 65530, "\n\"\xf0\x9d\x84\x9e\\", 8);
	string_json(&s, in, n);
	assert_int_equal(decode_json_string(s.data, s.len, out), n);
	assert_memory_equal(out, in, n);
	free(in);
	free(out);
	sink_free(&s);
}

static void test_structure_and_commas(void **state)
{
	struct sink s = { 0 };
	struct fx_json *j = fx_json_new(sink_write, &s);

	(void)state;
	fx_json_object_begin(j);
	fx_json_key(j, "a");
	fx_json_array_begin(j);
	fx_json_int(j, 1);
	fx_json_bool(j, true);
	fx_json_bool(j, false);
	fx_json_null(j);
	fx_json_object_begin(j);
	fx_json_object_end(j);
	fx_json_array_begin(j);
	fx_json_array_end(j);
	fx_json_array_end(j);
	fx_json_key(j, "k\"ey");
	fx_json_raw(j, "{\"x\":[1,2]}", 11);
	fx_json_key(j, "s");
	fx_json_string(j, "v");
	fx_json_object_end(j);
	assert_int_equal(fx_json_finish(j), 0);
	assert_string_equal(
		s.data, "{\"a\":[1,true,false,null,{},[]],\"k\\\"ey\":{\"x\":[1,2]},\"s\":\"v\"}");
	fx_json_free(j);
	sink_free(&s);
}

/* Each misuse makes the writer fail with -EINVAL and stop writing. */
static void test_misuse_is_sticky_einval(void **state)
{
	enum {
		VALUE_WITHOUT_KEY,
		KEY_IN_ARRAY,
		KEY_AT_TOP,
		WRONG_END,
		END_AT_TOP,
		UNBALANCED,
		TWO_TOP_VALUES,
		KEY_WITHOUT_VALUE,
		NULL_KEY,
		NCASES
	};

	(void)state;
	for (int c = 0; c < NCASES; c++) {
		struct sink s = { 0 };
		struct fx_json *j = fx_json_new(sink_write, &s);
		size_t len;

		switch (c) {
		case VALUE_WITHOUT_KEY:
			fx_json_object_begin(j);
			fx_json_int(j, 1);
			break;
		case KEY_IN_ARRAY:
			fx_json_array_begin(j);
			fx_json_key(j, "k");
			break;
		case KEY_AT_TOP:
			fx_json_key(j, "k");
			break;
		case WRONG_END:
			fx_json_array_begin(j);
			fx_json_object_end(j);
			break;
		case END_AT_TOP:
			fx_json_array_end(j);
			break;
		case UNBALANCED:
			fx_json_array_begin(j);
			fx_json_int(j, 1);
			break;
		case TWO_TOP_VALUES:
			fx_json_int(j, 1);
			fx_json_int(j, 2);
			break;
		case KEY_WITHOUT_VALUE:
			fx_json_object_begin(j);
			fx_json_key(j, "k");
			fx_json_object_end(j);
			break;
		case NULL_KEY:
			fx_json_object_begin(j);
			fx_json_key(j, NULL);
			break;
		}
		assert_int_equal(fx_json_finish(j), -EINVAL);
		len = s.len;
		/* Sticky: nothing more is written, the error stays. */
		fx_json_string(j, "more");
		assert_int_equal(fx_json_finish(j), -EINVAL);
		assert_int_equal(s.len, len);
		fx_json_free(j);
		sink_free(&s);
	}
}

static void test_deep_nesting_fails(void **state)
{
	struct sink s = { 0 };
	struct fx_json *j = fx_json_new(sink_write, &s);
	int depth;

	(void)state;
	/* 64 levels are fine... */
	for (depth = 0; depth < 64; depth++)
		fx_json_array_begin(j);
	for (depth = 0; depth < 64; depth++)
		fx_json_array_end(j);
	assert_int_equal(fx_json_finish(j), 0);
	fx_json_free(j);

	/* ...65 are not, and the writer stays failed even once balanced. */
	s.len = 0;
	j = fx_json_new(sink_write, &s);
	for (depth = 0; depth < 65; depth++)
		fx_json_array_begin(j);
	for (depth = 0; depth < 65; depth++)
		fx_json_array_end(j);
	fx_json_int(j, 1);
	assert_int_equal(fx_json_finish(j), -EINVAL);
	assert_true(s.len <= 64);
	fx_json_free(j);
	sink_free(&s);
}

static void test_sink_failure_sticky(void **state)
{
	struct sink s = { .fail_at = 1 };
	struct fx_json *j = fx_json_new(sink_write, &s);

	(void)state;
	/* More than the internal buffer, so the sink is called before finish. */
	fx_json_array_begin(j);
	for (int i = 0; i < 100000; i++)
		fx_json_int(j, i);
	assert_int_equal(s.calls, 1);
	fx_json_array_end(j);
	assert_int_equal(fx_json_finish(j), -ENOSPC);
	assert_int_equal(fx_json_finish(j), -ENOSPC);
	/* The failed call was the only one: nothing was retried or written after. */
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.len, 0);
	fx_json_free(j);
	sink_free(&s);
}

static void test_sink_failure_on_finish(void **state)
{
	struct sink s = { .fail_at = 1 };
	struct fx_json *j = fx_json_new(sink_write, &s);

	(void)state;
	fx_json_int(j, 7);
	assert_int_equal(fx_json_finish(j), -ENOSPC);
	fx_json_free(j);
	sink_free(&s);
}

static const char *number_json(struct sink *s, int kind, double d, int64_t i, uint64_t u)
{
	struct fx_json *j = fx_json_new(sink_write, s);

	s->len = 0;
	if (kind == 0)
		fx_json_double(j, d);
	else if (kind == 1)
		fx_json_int(j, i);
	else
		fx_json_uint(j, u);
	assert_int_equal(fx_json_finish(j), 0);
	fx_json_free(j);
	return s->data;
}

static void test_numbers(void **state)
{
	static const double round_trip[] = { 0.1,
					     1.0 / 3,
					     2.0 / 3,
					     1e-300,
					     1e300,
					     -1.5e-7,
					     10.101010101010102,
					     12345.678901,
					     4.9e-324,
					     1.7976931348623157e308,
					     9007199254740993.0 * 4 };
	struct sink s = { 0 };

	(void)state;
	assert_string_equal(number_json(&s, 1, 0, INT64_MIN, 0), "-9223372036854775808");
	assert_string_equal(number_json(&s, 1, 0, INT64_MAX, 0), "9223372036854775807");
	assert_string_equal(number_json(&s, 2, 0, 0, UINT64_MAX), "18446744073709551615");
	/* Every length of integer, at the edges of each, as printf has them. */
	for (uint64_t p = 1, k = 0; k < 20; k++, p *= 10) {
		const uint64_t near[] = { p - 1, p, p + 1, p * 5 + 37 };

		for (size_t m = 0; m < 4; m++) {
			char want[32];

			snprintf(want, sizeof(want), "%llu", (unsigned long long)near[m]);
			assert_string_equal(number_json(&s, 2, 0, 0, near[m]), want);
			if (near[m] <= INT64_MAX) {
				snprintf(want, sizeof(want), "-%llu", (unsigned long long)near[m]);
				if (near[m])
					assert_string_equal(
						number_json(&s, 1, 0, -(int64_t)near[m], 0), want);
			}
		}
	}
	/* Whole numbers print as integers, without exponent or fraction. */
	assert_string_equal(number_json(&s, 0, 0.0, 0, 0), "0");
	assert_string_equal(number_json(&s, 0, 2.0, 0, 0), "2");
	assert_string_equal(number_json(&s, 0, -42.0, 0, 0), "-42");
	assert_string_equal(number_json(&s, 0, 1767268800000.0, 0, 0), "1767268800000");
	/* Short decimals stay short. */
	assert_string_equal(number_json(&s, 0, 0.1, 0, 0), "0.1");
	assert_string_equal(number_json(&s, 0, 10.101, 0, 0), "10.101");
	assert_string_equal(number_json(&s, 0, -0.5, 0, 0), "-0.5");
	/* Not representable in JSON. */
	assert_string_equal(number_json(&s, 0, NAN, 0, 0), "null");
	assert_string_equal(number_json(&s, 0, INFINITY, 0, 0), "null");
	assert_string_equal(number_json(&s, 0, -INFINITY, 0, 0), "null");
	for (size_t k = 0; k < sizeof(round_trip) / sizeof(round_trip[0]); k++) {
		const char *txt = number_json(&s, 0, round_trip[k], 0, 0);

		assert_true(strtod(txt, NULL) == round_trip[k]);
		assert_null(strpbrk(txt, ",nN")); /* no locale comma, no nan/inf */
	}
	sink_free(&s);
}

static const char *fixed_json(struct sink *s, int64_t v, unsigned decimals)
{
	struct fx_json *j = fx_json_new(sink_write, s);

	s->len = 0;
	fx_json_fixed(j, v, decimals);
	assert_int_equal(fx_json_finish(j), 0);
	fx_json_free(j);
	return s->data;
}

/* Fixed-point values (sample times: ns as ms) print as what fx_json_double
 * prints for v / 10^decimals, and read back as that double. */
static void test_fixed(void **state)
{
	static const int64_t ns[] = {
		0,	   1,  999,	1000000,   1500000,	  10101010,	    123456789,
		999999999, -1, -500000, -10101010, 60000000000ll, 86399999999999ll, 1000000001
	};
	struct sink s = { 0 }, d = { 0 };
	uint64_t x = 88172645463325252ull;
	struct fx_json *j;

	(void)state;
	assert_string_equal(fixed_json(&s, 1500000, 6), "1.5");
	assert_string_equal(fixed_json(&s, 1000000, 6), "1");
	assert_string_equal(fixed_json(&s, 1, 6), "0.000001");
	assert_string_equal(fixed_json(&s, -500000, 6), "-0.5");
	assert_string_equal(fixed_json(&s, 12345, 3), "12.345");
	assert_string_equal(fixed_json(&s, 7, 0), "7");
	for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]) + 10000; k++) {
		int64_t v;

		if (k < sizeof(ns) / sizeof(ns[0])) {
			v = ns[k];
		} else { /* xorshift: times up to a day, in ns */
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			v = (int64_t)(x % 86400000000000ull);
		}
		fixed_json(&s, v, 6);
		number_json(&d, 0, (double)v / 1e6, 0, 0);
		assert_true(strtod(s.data, NULL) == (double)v / 1e6);
		/* below 10^15 digits %.15g prints the decimal itself, unless it
		 * takes an exponent (below 1e-4) */
		if (v >= 100 || v <= -100)
			assert_string_equal(s.data, d.data);
		/* the other scales: 3 decimals (waits in us as ms), and one
		 * without a constant divisor */
		v /= 1000;
		for (unsigned dec = 3; dec <= 4; dec++) {
			fixed_json(&s, v, dec);
			number_json(&d, 0, (double)v / (dec == 3 ? 1e3 : 1e4), 0, 0);
			if (v >= 100 || v <= -100)
				assert_string_equal(s.data, d.data);
		}
	}
	/* More decimals than an int64 has: refused, as misuse is. */
	j = fx_json_new(sink_write, &s);
	fx_json_fixed(j, 1, 10);
	assert_int_equal(fx_json_finish(j), -EINVAL);
	fx_json_free(j);
	sink_free(&s);
	sink_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_control_bytes_escaped),
		cmocka_unit_test(test_quote_and_backslash),
		cmocka_unit_test(test_string_null_and_nul_bytes),
		cmocka_unit_test(test_valid_utf8_kept),
		cmocka_unit_test(test_invalid_utf8_replaced),
		cmocka_unit_test(test_random_strings),
		cmocka_unit_test(test_long_string_crosses_buffer),
		cmocka_unit_test(test_structure_and_commas),
		cmocka_unit_test(test_misuse_is_sticky_einval),
		cmocka_unit_test(test_deep_nesting_fails),
		cmocka_unit_test(test_sink_failure_sticky),
		cmocka_unit_test(test_sink_failure_on_finish),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_fixed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
