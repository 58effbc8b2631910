/* SPDX-License-Identifier: MIT */
/* Source of the ELF seeds of fuzz_symbolize (see make-elf-seeds.sh): a few
 * functions, two levels of inlining and a loop, so that the seeds carry
 * symbols, CFI, line tables and DW_TAG_inlined_subroutine. */

static inline __attribute__((always_inline)) int leaf(int x)
{
	return x * 3 + 1;
}

static inline __attribute__((always_inline)) int middle(int x)
{
	return leaf(x) ^ leaf(x + 7);
}

static __attribute__((noinline)) int helper(int x)
{
	return middle(x) + (x & 1);
}

__attribute__((noinline)) int fx_seed_work(int n)
{
	int s = 0;

	for (int i = 0; i < n; i++)
		s += middle(i) + helper(i);
	return s;
}

int fx_seed_entry(int n)
{
	return fx_seed_work(n) + 1;
}
