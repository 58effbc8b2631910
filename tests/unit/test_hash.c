/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "fxagent/hash.h"

/* The published FNV-1a 64 values, and murmur3's fmix64 of them. */
static void test_known_values(void **state)
{
	(void)state;
	assert_true(fx_hash_add(FX_HASH_INIT, "", 0) == 0xcbf29ce484222325ULL);
	assert_true(fx_hash_add(FX_HASH_INIT, "a", 1) == 0xaf63dc4c8601ec8cULL);
	assert_true(fx_hash_add(FX_HASH_INIT, "foobar", 6) == 0x85944171f73967e8ULL);
	assert_true(fx_mix64(0) == 0);
	assert_true(fx_mix64(1) == 0xb456bcfc34c2cb2cULL);
	assert_true(fx_mix64(0xdeadbeef) == 0xd24bd59f862a1dacULL);
	assert_true(fx_hash_bytes("", 0) == 0xefd01f60ba992926ULL);
	assert_true(fx_hash_bytes("foobar", 6) == 0x2c22194922d1672bULL);
	assert_true(fx_hash_str("foobar") == fx_hash_bytes("foobar", 6));
}

/* Equal bytes hash equal wherever they are, in one piece or in several. */
static void test_equal_input_equal_hash(void **state)
{
	char a[64], b[80];
	const char *text = "libc.so.6\0with a NUL inside";
	uint64_t h;

	(void)state;
	memcpy(a, text, 27);
	memcpy(b + 13, text, 27);
	assert_true(fx_hash_bytes(a, 27) == fx_hash_bytes(b + 13, 27));
	h = fx_hash_add(FX_HASH_INIT, text, 10);
	h = fx_hash_add(h, text + 10, 0);
	h = fx_hash_add(h, text + 10, 17);
	assert_true(fx_mix64(h) == fx_hash_bytes(text, 27));
	/* The NUL counts: these differ only after it. */
	assert_true(fx_hash_bytes("ab\0c", 4) != fx_hash_bytes("ab\0d", 4));
	assert_true(fx_hash_bytes("ab", 2) != fx_hash_bytes("ab\0", 3));
	assert_true(fx_mix64_pair(1, 2) == fx_mix64_pair(1, 2));
	assert_true(fx_mix64_pair(1, 2) != fx_mix64_pair(2, 1));
}

/* Each input bit flips about half of the output bits. */
static void test_avalanche(void **state)
{
	(void)state;
	for (uint64_t x = 1; x < 1000; x += 7) {
		unsigned total = 0;

		for (int bit = 0; bit < 64; bit++)
			total += (unsigned)__builtin_popcountll(fx_mix64(x) ^
								fx_mix64(x ^ (1ULL << bit)));
		/* 64 flips of 64 bits: 2048 on average. */
		assert_in_range(total, 1800, 2300);
	}
	for (int byte = 0; byte < 16; byte++) {
		unsigned char k[16] = { 0 }, k2[16] = { 0 };

		k2[byte] = 1;
		assert_in_range(__builtin_popcountll(fx_hash_bytes(k, 16) ^ fx_hash_bytes(k2, 16)),
				12, 52);
	}
}

/* Keys that differ in a few high bits, or are small counters, or strings
 * with one digit changed, fill the buckets a power-of-two table takes from
 * the low bits evenly. */
static void test_low_bits_spread(void **state)
{
	enum { BUCKETS = 256, KEYS = 64 * BUCKETS };
	static unsigned a[BUCKETS], b[BUCKETS], c[BUCKETS], d[BUCKETS];

	(void)state;
	for (uint32_t i = 0; i < KEYS; i++) {
		char s[32];
		int n = snprintf(s, sizeof(s), "/usr/lib/lib%u.so", i);

		a[fx_mix64(i) & (BUCKETS - 1)]++;
		b[fx_mix64((uint64_t)i << 40) & (BUCKETS - 1)]++;
		c[fx_hash_bytes(s, (size_t)n) & (BUCKETS - 1)]++;
		d[fx_mix64_pair(i & 7, 0x7f0000001000ULL + 16 * (i >> 3)) & (BUCKETS - 1)]++;
	}
	for (int i = 0; i < BUCKETS; i++) {
		/* 64 per bucket expected; a fair spread stays well inside. */
		assert_in_range(a[i], 30, 100);
		assert_in_range(b[i], 30, 100);
		assert_in_range(c[i], 30, 100);
		assert_in_range(d[i], 30, 100);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_values),
		cmocka_unit_test(test_equal_input_equal_hash),
		cmocka_unit_test(test_avalanche),
		cmocka_unit_test(test_low_bits_spread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
