/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/* Which waits the off-CPU program times, and which of those it copies the
 * stacks of: the two draws, shared by the program (offcpu.bpf.c) and the
 * unit test of the estimator (tests/unit/test_offcpu_estimate.c), so the
 * test checks the program's own arithmetic. Plain kernel types, no libc,
 * no helper calls: the caller passes its clock and its random draws.
 *
 * 1. Timing: a wait is drawn with probability p = mean / min_block (at
 *    most 1) from the running mean of its thread's waits; a drawn wait's
 *    weight is length / p: the weights of the drawn waits are an unbiased
 *    estimate of the off-CPU time (Horvitz-Thompson), p being fixed before
 *    the length is known. Every drawn wait is timed and said, stack or not.
 * 2. Stacks: of the drawn waits, each CPU copies the stacks of at most its
 *    budget a second. Past budget x 0.8 a second (the rate of drawn waits
 *    followed as a running mean of the gaps between them) a drawn wait's
 *    stacks are copied with probability q = 0.8 budget / rate, so those
 *    copied are a random choice among the drawn, not the first of each
 *    burst; a token bucket of one second of the budget bounds bursts the
 *    mean has not followed yet. The agent weighs a copied wait's stack by
 *    1 / q, and scales them so that each thread's time in each state is
 *    that of all its drawn waits (window.h: fx_window_fold_waits()). */
#ifndef FXAGENT_OFFCPU_DRAW_H
#define FXAGENT_OFFCPU_DRAW_H

#include <linux/types.h>

#ifndef FX_OFFCPU_INLINE
#define FX_OFFCPU_INLINE static inline __attribute__((always_inline))
#endif

#define FX_OFFCPU_P1	   65536 /* probability 1 in 16-bit fixed point */
#define FX_OFFCPU_NS_PER_S 1000000000ull
#define FX_OFFCPU_GAP_MAX  FX_OFFCPU_NS_PER_S /* a rate under 1/s is "none" */
#define FX_OFFCPU_Q_SHARE  52429	      /* 0.8 of P1: the coin's share of the budget */

/* A CPU's state for the second draw. */
struct fx_offcpu_bucket {
	__u64 last_ns; /* the last drawn wait's time; 0: none yet */
	__u64 tokens;  /* copies x NS_PER_S */
	__u64 gap_ns;  /* running mean of the gaps between drawn waits */
};

/* The timing probability, of P1, for a thread whose waits last @mean_ns on
 * average; @p_scale is 2^48 / min_block_ns (a product, not a division). */
FX_OFFCPU_INLINE __u32 fx_offcpu_p(__u64 mean_ns, __u64 min_block_ns, __u64 p_scale)
{
	__u32 p = FX_OFFCPU_P1;

	if (mean_ns < min_block_ns)
		p = (__u32)(mean_ns * p_scale >> 32);
	return p ? p : 1;
}

/* A drawn wait at @now on this CPU: whether its stacks are copied, with
 * the probability that was in @q (of P1). @coin is a uniform draw in
 * [0, P1). @budget: copies a second. */
FX_OFFCPU_INLINE int fx_offcpu_keep(struct fx_offcpu_bucket *b, __u64 budget, __u64 now, __u32 coin,
				    __u32 *q)
{
	__u64 cap = budget * FX_OFFCPU_NS_PER_S, gap, want;

	*q = 0;
	if (!budget)
		return 0;
	if (!b->last_ns) {
		b->tokens = cap;
		b->gap_ns = FX_OFFCPU_GAP_MAX;
	} else if (now > b->last_ns) {
		__u64 add = (now - b->last_ns) * budget;

		b->tokens = add >= cap || b->tokens + add >= cap ? cap : b->tokens + add;
		gap = now - b->last_ns;
		if (gap > FX_OFFCPU_GAP_MAX)
			gap = FX_OFFCPU_GAP_MAX;
		/* a mean over about 16 gaps */
		b->gap_ns = b->gap_ns - b->gap_ns / 16 + gap / 16;
	} else {
		b->gap_ns -= b->gap_ns / 16; /* two at once: a gap of 0 */
	}
	b->last_ns = now;
	want = budget * b->gap_ns * FX_OFFCPU_Q_SHARE / FX_OFFCPU_NS_PER_S;
	*q = want >= FX_OFFCPU_P1 ? FX_OFFCPU_P1 : want ? (__u32)want : 1;
	if (*q < FX_OFFCPU_P1 && coin >= *q)
		return 0;
	if (b->tokens < FX_OFFCPU_NS_PER_S)
		return 0;
	b->tokens -= FX_OFFCPU_NS_PER_S;
	return 1;
}

#endif
