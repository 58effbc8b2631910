/* SPDX-License-Identifier: MIT */
/* Frame and stack interning: shared prefixes stored once, parents before
 * children, the stack cap counted. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fxagent/window.h"

static void test_prefix_sharing(void **state)
{
	struct fx_window w;
	struct fx_window_frame a[] = { { 1, 0x10 }, { 1, 0x20 }, { 2, 0x30 } };
	struct fx_window_frame b[] = { { 1, 0x10 }, { 1, 0x20 }, { 3, 0x40 } };
	uint32_t sa, sb, sa2;

	(void)state;
	fx_window_init(&w, 0);
	sa = fx_window_intern_stack(&w, a, 3);
	sb = fx_window_intern_stack(&w, b, 3);
	sa2 = fx_window_intern_stack(&w, a, 3);
	assert_int_equal(sa, sa2);
	assert_int_not_equal(sa, sb);
	/* main -> f shared: 2 + 1 + 1 nodes, 4 distinct frames */
	assert_int_equal(w.nstacks, 4);
	assert_int_equal(w.nframes, 4);
	assert_int_equal(w.stacks[sa].parent, w.stacks[sb].parent);
	for (size_t i = 0; i < w.nstacks; i++)
		assert_true(w.stacks[i].parent == FX_NONE || w.stacks[i].parent < i);
	/* The prefix of a is a stack of its own, the 2-frame path. */
	assert_int_equal(fx_window_intern_stack(&w, a, 2), w.stacks[sa].parent);
	assert_int_equal(fx_window_intern_stack(&w, a, 0), FX_NONE);
	fx_window_release(&w);
}

static void test_many_stacks_and_reset(void **state)
{
	struct fx_window w;
	uint32_t ids[5000];

	(void)state;
	fx_window_init(&w, 0);
	for (int i = 0; i < 5000; i++) {
		struct fx_window_frame f[] = { { 0, 1 }, { 0, (uint64_t)i + 2 } };

		ids[i] = fx_window_intern_stack(&w, f, 2);
		assert_int_equal(fx_window_add_sample(&w, (uint64_t)i, 7, 8, ids[i]), 0);
	}
	/* Interning the same again after the tables grew finds the same ids. */
	for (int i = 0; i < 5000; i++) {
		struct fx_window_frame f[] = { { 0, 1 }, { 0, (uint64_t)i + 2 } };

		assert_int_equal(fx_window_intern_stack(&w, f, 2), ids[i]);
	}
	assert_int_equal(w.nstacks, 5001);
	assert_int_equal(w.nsamples, 5000);
	assert_int_equal(w.counters.samples, 5000);
	fx_window_reset(&w);
	assert_int_equal(w.nstacks, 0);
	assert_int_equal(w.nsamples, 0);
	{
		struct fx_window_frame f[] = { { 0, 1 } };

		assert_int_equal(fx_window_intern_stack(&w, f, 1), 0);
	}
	fx_window_release(&w);
}

static void test_stack_cap(void **state)
{
	struct fx_window w;
	struct fx_window_frame a[] = { { 1, 1 }, { 1, 2 } };
	struct fx_window_frame b[] = { { 1, 1 }, { 1, 3 } };

	(void)state;
	fx_window_init(&w, 2);
	assert_int_not_equal(fx_window_intern_stack(&w, a, 2), FX_NONE);
	errno = 0;
	assert_int_equal(fx_window_intern_stack(&w, b, 2), FX_NONE);
	assert_int_equal(errno, ENOSPC);
	/* Known stacks still intern under the cap. */
	assert_int_not_equal(fx_window_intern_stack(&w, a, 2), FX_NONE);
	/* Stacks refused add no frames: the cap bounds the frames too. */
	for (uint64_t i = 0; i < 1000; i++) {
		struct fx_window_frame c[] = { { 2, i }, { 1, 1 } };

		errno = 0;
		assert_int_equal(fx_window_intern_stack(&w, c, 2), FX_NONE);
		assert_int_equal(errno, ENOSPC);
	}
	assert_int_equal(w.nframes, 2);
	assert_int_equal(w.nstacks, 2);
	fx_window_release(&w);
}

/* Paths that share prefixes, differ in one frame or in depth, and repeat
 * (so the whole-path cache answers most), across a reset: each answer is
 * the node whose chain is exactly the path, and equal paths get one node. */
static void test_paths_exact(void **state)
{
	struct fx_window w;
	uint64_t seed = 7;

	(void)state;
	fx_window_init(&w, 0);
	for (int round = 0; round < 2; round++) {
		static uint32_t first[64][64]; /* node of path (a, depth) */

		for (int i = 0; i < 20000; i++) {
			struct fx_window_frame f[12];
			size_t n, a;
			uint32_t node;

			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			a = (size_t)(seed >> 33) % 64;
			n = 1 + (size_t)(seed >> 50) % 12;
			/* path a: frames built from a's bits, so paths of
			 * neighbouring a share prefixes and differ in one frame */
			for (size_t k = 0; k < n; k++)
				f[k] = (struct fx_window_frame){ (uint32_t)(k % 3),
								 ((a >> (k % 6)) & 1) + 16 * k };
			node = fx_window_intern_stack(&w, f, n);
			assert_int_not_equal(node, FX_NONE);
			if (!first[a][n])
				first[a][n] = node + 1;
			else
				assert_int_equal(node + 1, first[a][n]);
			for (size_t k = n; k-- > 0;) {
				const struct fx_window_frame *g = &w.frames[w.stacks[node].frame];

				assert_int_equal(g->object, f[k].object);
				assert_int_equal(g->addr, f[k].addr);
				node = w.stacks[node].parent;
			}
			assert_int_equal(node, FX_NONE);
		}
		memset(first, 0, sizeof(first));
		fx_window_reset(&w);
	}
	fx_window_release(&w);
}

/* Deep paths of three threads taken in turn, each mostly its last with a
 * new tail (a recursion going deeper and back), across a reset and the
 * stack cap: each answer's chain is exactly its path, and the nodes are as
 * many as the distinct prefixes, counted in a second window that interns
 * every prefix of every path on its own. */
static void test_recent_paths(void **state)
{
	struct fx_window w, ref;
	struct fx_window_frame f[3][300];
	size_t n[3] = { 0, 0, 0 };
	uint64_t seed = 11;

	(void)state;
	fx_window_init(&w, 0);
	for (int round = 0; round < 3; round++) {
		if (round == 2) {
			/* under a cap the paths reach */
			fx_window_release(&w);
			fx_window_init(&w, 900);
		}
		fx_window_init(&ref, 0);
		for (int i = 0; i < 6000; i++) {
			int t = i % 3;
			size_t keep, k;
			uint32_t node;

			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			keep = n[t] ? (size_t)(seed >> 33) % n[t] : 0;
			n[t] = keep + 1 + (size_t)(seed >> 45) % (300 - keep);
			for (k = keep; k < n[t]; k++)
				f[t][k] = (struct fx_window_frame){ (uint32_t)t % 2,
								    0x1000 * (uint64_t)t + k +
									    ((seed >> 20) & 3) };
			errno = 0;
			node = fx_window_intern_stack(&w, f[t], n[t]);
			if (round == 2 && node == FX_NONE) {
				assert_int_equal(errno, ENOSPC);
				continue;
			}
			assert_int_not_equal(node, FX_NONE);
			for (k = n[t]; k-- > 0;) {
				const struct fx_window_frame *g = &w.frames[w.stacks[node].frame];

				assert_int_equal(g->object, f[t][k].object);
				assert_int_equal(g->addr, f[t][k].addr);
				node = w.stacks[node].parent;
			}
			assert_int_equal(node, FX_NONE);
			for (k = 1; round < 2 && k <= n[t]; k++)
				fx_window_intern_stack(&ref, f[t], k);
		}
		if (round < 2)
			assert_int_equal(w.nstacks, ref.nstacks);
		else
			assert_true(w.nstacks <= 900);
		fx_window_release(&ref);
		/* round 1: the same window, emptied: nothing recent is kept */
		fx_window_reset(&w);
	}
	fx_window_release(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prefix_sharing), cmocka_unit_test(test_many_stacks_and_reset),
		cmocka_unit_test(test_stack_cap),      cmocka_unit_test(test_paths_exact),
		cmocka_unit_test(test_recent_paths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
