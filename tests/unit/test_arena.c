/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fxagent/arena.h"

/* Pieces over many chunks keep their bytes until the arena is freed;
 * aligned pieces are aligned whatever strings came before them. */
static void test_contents_stable(void **state)
{
	enum { N = 20000 };
	struct fx_arena a = { 0 };
	char **s = calloc(N, sizeof(*s));
	uint64_t **w = calloc(N, sizeof(*w));

	(void)state;
	for (size_t i = 0; i < N; i++) {
		char buf[64];
		int n = snprintf(buf, sizeof(buf), "symbol_%zu%s", i, i % 3 ? "" : "_with_a_tail");

		s[i] = fx_arena_strndup(&a, buf, (size_t)n);
		assert_non_null(s[i]);
		w[i] = fx_arena_alloc(&a, sizeof(uint64_t) * (1 + i % 5));
		assert_non_null(w[i]);
		assert_int_equal((uintptr_t)w[i] % alignof(max_align_t), 0);
		w[i][0] = i * 0x9e3779b97f4a7c15ULL;
	}
	assert_true(fx_arena_bytes(&a) > 2 * FX_ARENA_CHUNK);
	for (size_t i = 0; i < N; i++) {
		char buf[64];

		snprintf(buf, sizeof(buf), "symbol_%zu%s", i, i % 3 ? "" : "_with_a_tail");
		assert_string_equal(s[i], buf);
		assert_true(w[i][0] == i * 0x9e3779b97f4a7c15ULL);
	}
	fx_arena_free(&a);
	assert_int_equal(fx_arena_bytes(&a), 0);
	free(s);
	free(w);
}

/* strndup copies @len bytes, stops at none of them, and ends with a NUL. */
static void test_strndup(void **state)
{
	struct fx_arena a = { 0 };
	char *p;

	(void)state;
	p = fx_arena_strndup(&a, "abc\0def", 7);
	assert_non_null(p);
	assert_memory_equal(p, "abc\0def", 8);
	p = fx_arena_strndup(&a, "xyz", 0);
	assert_string_equal(p, "");
	fx_arena_free(&a);
}

/* A piece larger than a chunk gets one of its own; the pieces before and
 * after it stay good. */
static void test_large_piece(void **state)
{
	struct fx_arena a = { 0 };
	char *small = fx_arena_strndup(&a, "before", 6), *big, *after;

	(void)state;
	big = fx_arena_alloc(&a, 3 * FX_ARENA_CHUNK);
	assert_non_null(big);
	memset(big, 'x', 3 * FX_ARENA_CHUNK);
	after = fx_arena_strndup(&a, "after", 5);
	assert_string_equal(small, "before");
	assert_string_equal(after, "after");
	assert_int_equal(big[3 * FX_ARENA_CHUNK - 1], 'x');
	assert_true(fx_arena_bytes(&a) >= 4 * FX_ARENA_CHUNK);
	fx_arena_free(&a);
}

/* Past the cap: NULL with E2BIG, never more bytes than the cap, and what
 * was handed out before stays. Freed, the arena serves again, capped. */
static void test_cap(void **state)
{
	struct fx_arena a;
	char *first, *p;
	size_t n = 0;

	(void)state;
	fx_arena_init(&a, 3 * FX_ARENA_CHUNK);
	first = fx_arena_strndup(&a, "first", 5);
	assert_non_null(first);
	errno = 0;
	while ((p = fx_arena_strndup(&a, "0123456789abcdef", 16)) != NULL)
		n++;
	assert_int_equal(errno, E2BIG);
	assert_true(n > FX_ARENA_CHUNK / 17);
	assert_true(fx_arena_bytes(&a) <= 3 * FX_ARENA_CHUNK);
	assert_string_equal(first, "first");
	/* A piece too large for the cap fails at once. */
	assert_null(fx_arena_alloc(&a, 4 * FX_ARENA_CHUNK));
	assert_int_equal(errno, E2BIG);
	fx_arena_free(&a);
	assert_non_null(fx_arena_alloc(&a, 100));
	assert_null(fx_arena_alloc(&a, 4 * FX_ARENA_CHUNK));
	fx_arena_free(&a);
}

/* A size no allocation can have: ENOMEM, and nothing changes. */
static void test_impossible_size(void **state)
{
	struct fx_arena a = { 0 };

	(void)state;
	errno = 0;
	assert_null(fx_arena_alloc(&a, SIZE_MAX - 8));
	assert_int_equal(errno, ENOMEM);
	assert_null(fx_arena_strndup(&a, "", SIZE_MAX));
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(fx_arena_bytes(&a), 0);
	fx_arena_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_contents_stable), cmocka_unit_test(test_strndup),
		cmocka_unit_test(test_large_piece),	cmocka_unit_test(test_cap),
		cmocka_unit_test(test_impossible_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
