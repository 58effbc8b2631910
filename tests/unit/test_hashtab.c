/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>

#include "fxagent/hash.h"
#include "fxagent/hashtab.h"

/* The caller's array: keys, and how they hash (spread or colliding). */
struct keys {
	uint64_t *v;
	size_t n;
	uint64_t (*hash)(uint64_t key);
};

static uint64_t spread(uint64_t key)
{
	return fx_mix64(key);
}

/* Everything in a few runs that wrap around the end of any table. */
static uint64_t clumped(uint64_t key)
{
	return UINT64_MAX - (key % 3);
}

static uint64_t hash_at(const void *ctx, uint32_t idx)
{
	const struct keys *k = ctx;

	return k->hash(k->v[idx]);
}

static bool eq(const void *ctx, uint32_t idx, const void *key)
{
	return ((const struct keys *)ctx)->v[idx] == *(const uint64_t *)key;
}

static uint32_t find(const struct fx_hashtab *h, const struct keys *k, uint64_t key)
{
	return fx_hashtab_find(h, k->hash(key), eq, k, &key);
}

/* Adds @key at the end of the array unless it is there. Returns its index. */
static uint32_t add(struct fx_hashtab *h, struct keys *k, uint64_t key)
{
	uint32_t idx = fx_hashtab_intern(h, k->hash(key), &key, (uint32_t)k->n, hash_at, eq, k);

	assert_int_not_equal(idx, FX_HASHTAB_NONE);
	if (idx == k->n)
		k->v[k->n++] = key;
	return idx;
}

static void check_shape(const struct fx_hashtab *h, const struct keys *k)
{
	assert_int_equal(h->count, k->n);
	assert_true(h->cap >= 2 * h->count);
	assert_int_equal(h->cap & (h->cap - 1), 0);
}

/* An empty table finds nothing and allocates nothing. */
static void test_empty(void **state)
{
	struct fx_hashtab h = { 0 };
	uint64_t v[1] = { 0 };
	struct keys k = { v, 0, spread };

	(void)state;
	assert_int_equal(find(&h, &k, 42), FX_HASHTAB_NONE);
	assert_int_equal(fx_hashtab_remove(&h, 1, 0, hash_at, &k), -ENOENT);
	fx_hashtab_reset(&h);
	fx_hashtab_free(&h);
	assert_null(h.slots);
}

/* Many keys: each found at its index across every growth, the load factor
 * kept at or under 1/2, a second add of a key returns its first index. */
static void test_many_keys_and_growth(void **state)
{
	enum { N = 100000 };
	struct fx_hashtab h = { 0 };
	struct keys k = { calloc(N, sizeof(uint64_t)), 0, spread };
	size_t cap = 0, growths = 0;

	(void)state;
	for (uint64_t i = 0; i < N; i++) {
		assert_int_equal(add(&h, &k, i * 4096 + 7), i);
		if (h.cap != cap) {
			cap = h.cap;
			growths++;
		}
		check_shape(&h, &k);
	}
	assert_true(growths > 10);
	for (uint64_t i = 0; i < N; i++) {
		assert_int_equal(find(&h, &k, i * 4096 + 7), i);
		assert_int_equal(add(&h, &k, i * 4096 + 7), i);
		assert_int_equal(find(&h, &k, i * 4096 + 8), FX_HASHTAB_NONE);
	}
	assert_int_equal(k.n, N);
	assert_int_equal(fx_hashtab_bytes(&h), h.cap * sizeof(uint32_t));
	fx_hashtab_free(&h);
	free(k.v);
}

/* Keys whose hashes collide (three values, at the end of the table): runs
 * wrap around, and look-ups still tell the keys apart by @eq. */
static void test_collisions(void **state)
{
	enum { N = 3000 };
	struct fx_hashtab h = { 0 };
	struct keys k = { calloc(N, sizeof(uint64_t)), 0, clumped };

	(void)state;
	for (uint64_t i = 0; i < N; i++)
		assert_int_equal(add(&h, &k, i), i);
	check_shape(&h, &k);
	for (uint64_t i = 0; i < N; i++)
		assert_int_equal(find(&h, &k, i), i);
	assert_int_equal(find(&h, &k, N), FX_HASHTAB_NONE);
	fx_hashtab_free(&h);
	free(k.v);
}

/* Reserve first, then probe, fail to store, probe again: nothing was added
 * in between. An impossible reserve leaves the table as it was. */
static void test_probe_put_and_failed_reserve(void **state)
{
	struct fx_hashtab h = { 0 };
	uint64_t v[4] = { 0 }, key = 5;
	struct keys k = { v, 0, spread };
	size_t pos, cap;

	(void)state;
	assert_int_equal(fx_hashtab_reserve(&h, 1, hash_at, &k), 0);
	pos = fx_hashtab_probe(&h, spread(key), eq, &k, &key);
	assert_int_equal(fx_hashtab_at(&h, pos), FX_HASHTAB_NONE);
	assert_int_equal(h.count, 0);
	/* Stored this time. */
	v[k.n] = key;
	fx_hashtab_put(&h, pos, (uint32_t)k.n++);
	assert_int_equal(fx_hashtab_at(&h, fx_hashtab_probe(&h, spread(key), eq, &k, &key)), 0);
	cap = h.cap;
	assert_int_equal(fx_hashtab_reserve(&h, SIZE_MAX, hash_at, &k), -ENOMEM);
	assert_int_equal(h.cap, cap);
	assert_int_equal(find(&h, &k, key), 0);
	/* Insert adds without looking: the same key twice is two entries. */
	v[k.n] = key;
	assert_int_equal(fx_hashtab_reserve(&h, 2, hash_at, &k), 0);
	fx_hashtab_insert(&h, spread(key), (uint32_t)k.n++);
	assert_int_equal(h.count, 2);
	fx_hashtab_free(&h);
}

/* Reset empties the table and keeps its memory for the next use. */
static void test_reset(void **state)
{
	enum { N = 1000 };
	struct fx_hashtab h = { 0 };
	struct keys k = { calloc(N, sizeof(uint64_t)), 0, spread };
	size_t cap;

	(void)state;
	for (uint64_t i = 0; i < N; i++)
		add(&h, &k, i);
	cap = h.cap;
	fx_hashtab_reset(&h);
	assert_int_equal(h.count, 0);
	assert_int_equal(h.cap, cap);
	for (uint64_t i = 0; i < N; i++)
		assert_int_equal(find(&h, &k, i), FX_HASHTAB_NONE);
	k.n = 0;
	for (uint64_t i = 0; i < N; i++)
		assert_int_equal(add(&h, &k, N - i), i);
	assert_int_equal(h.cap, cap);
	fx_hashtab_free(&h);
	free(k.v);
}

/* Removal with the last entry moved into the hole (as a dense array does),
 * in spread and in colliding tables: what stays is found at its new index,
 * what went is not, and the count follows. */
static void remove_half(uint64_t (*hash)(uint64_t))
{
	enum { N = 4000 };
	struct fx_hashtab h = { 0 };
	struct keys k = { calloc(N, sizeof(uint64_t)), 0, hash };

	for (uint64_t i = 0; i < N; i++)
		add(&h, &k, i);
	for (uint64_t key = 0; key < N; key += 2) {
		uint32_t i = find(&h, &k, key), last = (uint32_t)k.n - 1;

		assert_int_not_equal(i, FX_HASHTAB_NONE);
		assert_int_equal(fx_hashtab_remove(&h, hash(key), i, hash_at, &k), 0);
		if (i != last) {
			assert_int_equal(fx_hashtab_renumber(&h, hash(k.v[last]), last, i), 0);
			k.v[i] = k.v[last];
		}
		k.n--;
		assert_int_equal(find(&h, &k, key), FX_HASHTAB_NONE);
	}
	assert_int_equal(h.count, N / 2);
	for (uint64_t key = 0; key < N; key++) {
		uint32_t i = find(&h, &k, key);

		if (key % 2)
			assert_true(i != FX_HASHTAB_NONE && k.v[i] == key);
		else
			assert_int_equal(i, FX_HASHTAB_NONE);
	}
	/* Freed slots are used again. */
	for (uint64_t key = 0; key < N; key += 2)
		add(&h, &k, key);
	for (uint64_t key = 0; key < N; key++)
		assert_int_not_equal(find(&h, &k, key), FX_HASHTAB_NONE);
	check_shape(&h, &k);
	assert_int_equal(fx_hashtab_renumber(&h, hash(1), 2 * N, 1), -ENOENT);
	fx_hashtab_free(&h);
	free(k.v);
}

static void test_remove(void **state)
{
	(void)state;
	remove_half(spread);
	remove_half(clumped);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_many_keys_and_growth),
		cmocka_unit_test(test_collisions),
		cmocka_unit_test(test_probe_put_and_failed_reserve),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_remove),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
