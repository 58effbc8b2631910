/* SPDX-License-Identifier: MIT */
/* The off-CPU estimator on synthetic waits with the budget binding: its
 * totals are within 3.5 standard errors of the truth.
 *
 * Why: a profile's off-CPU time per thread and per stack is an estimate
 * made of two draws in the kernel (offcpu_draw.h: which waits are timed,
 * with probability p from the thread's running mean; which of those have
 * their stacks copied, with probability q under a per-CPU budget) and a
 * fold in the agent (window.h: fx_window_fold_waits()). This checks the
 * three together, on the program's own arithmetic, over many replicates.
 *
 * How: a seeded simulation of 6 threads on 2 CPUs (a FIFO run queue, a
 * 3 ms slice) makes one workload. Each thread alternates bursts on a CPU
 * with waits, each on one of 3 stacks of its own (different frequencies,
 * exponential lengths of 50 us to 20 ms on average, sleeping or
 * uninterruptible), or preempted (a 4th stack, RUNNABLE); a wait woken
 * while both CPUs are busy waits on the run queue (WOKEN). Then, for each
 * of REPLICATES seeds, the draws as offcpu.bpf.c makes them (fx_offcpu_p()
 * from the thread's running means, blocked and runnable apart;
 * fx_offcpu_keep() with a bucket and an xorshift per CPU) pick the waits,
 * and the drawn ones' parts in the window go into a struct fx_window as
 * recorder.c's add_wait() adds them. Folded (1) without the kernel's
 * times, (2) with them (the simulation's own). Read back per thread and
 * per (thread, stack), against the simulated truth:
 * (1) within 3.5 SE (of the mean of the replicates' errors) of the truth;
 * (2) per thread the truth within rounding, per stack within 3.5 SE.
 * Before the fold each sample weighs length / p / q, an unbiased
 * (Horvitz-Thompson) total per thread too; and it is not the truth within
 * rounding, so (2) would see a missing fold.
 *
 * Sizes: per stack the fold is a ratio estimator (a thread's time in a
 * state shared as its stacks' sampled weights share it), biased by O(1/n)
 * in the n stacked waits of the thread and state (towards the stacks of
 * short waits), while its standard error over R replicates goes as
 * 1/sqrt(n R). The 8 s window gives each thread's sleeping waits about 220
 * to 650 stacks; there the bias was about 1% or less, at most 1.0 SE at R = 200
 * for this seed, 1.3 SE for others (measured over 2000 to 10000
 * replicates). With a 2 s window and 8 threads (about 90 stacks a thread)
 * it was up to 4 SE, and +20% on the short waits' stacks of a thread whose
 * rare long waits made most of its time. The per-thread totals have no
 * such bias. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fxagent/offcpu.h"
#include "fxagent/window.h"
#include "offcpu_draw.h"

/* Any seed: the figures change with it, the verdicts should not
 * (-DESTIMATE_SEED=... to try another; -DREPLICATES=10000 to see the
 * biases under the standard errors). */
#ifndef ESTIMATE_SEED
#define ESTIMATE_SEED 0x6f666663707531ull
#endif
#ifndef REPLICATES
#define REPLICATES 200
#endif

#define US	  1000ull
#define MS	  1000000ull
#define T0_NS	  (1000 * MS) /* the simulation's clock starts here (0 is "none") */
#define WARMUP_NS (500 * MS)  /* before the window: the means and buckets settle */
#define WINDOW_NS (8000 * MS)
#define SLICE_NS  (3 * MS) /* a thread that ran this long is preempted if one waits */
#define MIN_BLOCK (1 * MS) /* sampling.off_cpu.min_block */
#define BUDGET	  200	   /* sampling.off_cpu.budget: stacks a second per CPU */
#define NCPU	  2
#define NTHREADS  6
#define NSTACKS	  4 /* per thread: 3 it blocks in, and PREEMPTED */
#define PREEMPTED 3
#define PID	  4000
#define TID0	  4001
#define OBJ	  7 /* the object of the synthetic frames */
#define Z_MAX	  3.5
#define MAX_SHARE 0.2 /* the budget binds: at most this share of drawn waits has stacks */

/* Where a thread blocks: how often, for how long (exponential), in what. */
struct stack_kind {
	double share;
	double mean_us;
	uint32_t state;
};

struct thread_kind {
	double burst_us; /* exponential bursts on a CPU between waits */
	struct stack_kind s[3];
};

enum { S = FX_OFFCPU_STATE_SLEEP, D = FX_OFFCPU_STATE_DISK, RUN = FX_OFFCPU_STATE_RUNNABLE };

/* Threads 0, 1, 3 and 4 wait less than min_block on average (p < 1), 2 and
 * 5 more (p = 1 mostly); 3 and 4 run longer than a slice and are
 * preempted. About 1.5 CPUs busy of 2. */
static const struct thread_kind kinds[NTHREADS] = {
	{ 50, { { 0.6, 50, S }, { 0.3, 150, S }, { 0.1, 500, D } } },
	{ 100, { { 0.5, 300, S }, { 0.3, 900, S }, { 0.2, 3000, D } } },
	{ 200, { { 0.6, 300, S }, { 0.3, 1000, S }, { 0.1, 20000, D } } },
	{ 2000, { { 0.5, 200, S }, { 0.3, 600, S }, { 0.2, 2000, D } } },
	{ 1500, { { 0.5, 500, S }, { 0.3, 1500, S }, { 0.2, 5000, S } } },
	{ 100, { { 0.6, 1000, S }, { 0.3, 2500, S }, { 0.1, 20000, D } } },
};

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1]. */
static double uniform(uint64_t *x)
{
	return ((double)(splitmix(x) >> 11) + 1) / 9007199254740992.0;
}

static uint64_t exponential_ns(uint64_t *x, double mean_us)
{
	return (uint64_t)(-log(uniform(x)) * mean_us * US) + 1;
}

/* offcpu.bpf.c's draw(): a CPU's xorshift64, its high half. */
static uint32_t draw(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return (uint32_t)(*x >> 32);
}

/* One wait of the workload, from its switch out. */
struct wait {
	uint64_t t_out, t_wake, t_in; /* t_wake: woken onto the run queue (0: not) */
	uint32_t thread, cpu, state, stack;
	int cut; /* still waiting at the window's end: t_in is that end */
};

struct workload {
	struct wait *waits; /* in the order of t_out */
	size_t nwaits, cap;
	/* the truth: each thread's times in the window */
	uint64_t on_ns[NTHREADS], runq_ns[NTHREADS], off_ns[NTHREADS];
	uint64_t stack_ns[NTHREADS][NSTACKS];
};

static const uint64_t window_start = T0_NS + WARMUP_NS, window_end = T0_NS + WARMUP_NS + WINDOW_NS;

/* The part of [from, to) in the window. */
static uint64_t in_window(uint64_t from, uint64_t to)
{
	from = from > window_start ? from : window_start;
	to = to < window_end ? to : window_end;
	return to > from ? to - from : 0;
}

/* The simulation's scheduler: per thread, what it does until when. */
enum { RUNNING, BLOCKED, QUEUED };

struct sim {
	struct workload *wl;
	uint64_t rng;
	int what[NTHREADS];
	uint64_t until[NTHREADS]; /* RUNNING: its slice's end; BLOCKED: its wake-up */
	uint64_t ran_from[NTHREADS], burst_left[NTHREADS];
	size_t open[NTHREADS]; /* its wait while not RUNNING (SIZE_MAX: none) */
	int cpu_of[NTHREADS], cur[NCPU];
	int queue[NTHREADS];
	size_t qhead, qlen;
};

static void run_on(struct sim *s, int i, int cpu, uint64_t now)
{
	s->what[i] = RUNNING;
	s->cpu_of[i] = cpu;
	s->cur[cpu] = i;
	s->ran_from[i] = now;
	s->until[i] = now + (s->burst_left[i] < SLICE_NS ? s->burst_left[i] : SLICE_NS);
	if (s->open[i] != SIZE_MAX) {
		s->wl->waits[s->open[i]].t_in = now;
		s->open[i] = SIZE_MAX;
	}
}

static void enqueue(struct sim *s, int i)
{
	s->what[i] = QUEUED;
	s->queue[(s->qhead + s->qlen) % NTHREADS] = i;
	s->qlen++;
}

/* Thread @i leaves its CPU at @now in @state on @stack: a wait begins, and
 * the first queued thread runs there. */
static void switch_out(struct sim *s, int i, uint64_t now, uint32_t state, uint32_t stack)
{
	struct workload *wl = s->wl;
	int cpu = s->cpu_of[i];

	assert_true(wl->nwaits < wl->cap);
	wl->waits[wl->nwaits] = (struct wait){ .t_out = now,
					       .thread = (uint32_t)i,
					       .cpu = (uint32_t)cpu,
					       .state = state,
					       .stack = stack };
	s->open[i] = wl->nwaits++;
	wl->on_ns[i] += in_window(s->ran_from[i], now);
	s->cur[cpu] = -1;
	s->cpu_of[i] = -1;
	if (s->qlen) {
		int next = s->queue[s->qhead];

		s->qhead = (s->qhead + 1) % NTHREADS;
		s->qlen--;
		run_on(s, next, cpu, now);
	}
}

/* Thread @i's event at @now: it wakes up, or its burst or slice ends. */
static void step(struct sim *s, int i, uint64_t now)
{
	const struct thread_kind *k = &kinds[i];
	double u, acc = 0;
	uint32_t st = 0;

	if (s->what[i] == BLOCKED) {
		int cpu = s->cur[0] < 0 ? 0 : s->cur[1] < 0 ? 1 : -1;

		if (cpu >= 0) {
			run_on(s, i, cpu, now);
			return;
		}
		if (s->open[i] != SIZE_MAX) /* (not its first wake-up) */
			s->wl->waits[s->open[i]].t_wake = now;
		enqueue(s, i);
		return;
	}
	s->burst_left[i] -= now - s->ran_from[i];
	if (s->burst_left[i] && !s->qlen) { /* a slice over, none waits: another */
		s->wl->on_ns[i] += in_window(s->ran_from[i], now);
		run_on(s, i, s->cpu_of[i], now);
		return;
	}
	if (s->burst_left[i]) {
		switch_out(s, i, now, RUN, PREEMPTED);
		enqueue(s, i);
		return;
	}
	u = uniform(&s->rng);
	while (st < 2 && u > (acc += k->s[st].share))
		st++;
	switch_out(s, i, now, k->s[st].state, st);
	s->what[i] = BLOCKED;
	s->until[i] = now + exponential_ns(&s->rng, k->s[st].mean_us);
	s->burst_left[i] = exponential_ns(&s->rng, k->burst_us);
}

/* The workload of seed @seed, and the truth about its window. */
static void simulate(struct workload *wl, uint64_t seed)
{
	struct sim s = { .wl = wl, .rng = seed, .cur = { -1, -1 } };

	wl->cap = 1 << 20;
	wl->waits = calloc(wl->cap, sizeof(*wl->waits));
	assert_non_null(wl->waits);
	/* Each thread starts blocked (not a wait of the workload: from before
	 * its start), waking within the first 10 ms. */
	for (int i = 0; i < NTHREADS; i++) {
		s.what[i] = BLOCKED;
		s.until[i] = T0_NS + exponential_ns(&s.rng, 3000) % (10 * MS);
		s.burst_left[i] = exponential_ns(&s.rng, kinds[i].burst_us);
		s.open[i] = SIZE_MAX;
		s.cpu_of[i] = -1;
	}
	for (;;) {
		int next = -1;

		for (int i = 0; i < NTHREADS; i++)
			if (s.what[i] != QUEUED && (next < 0 || s.until[i] < s.until[next]))
				next = i;
		if (s.until[next] >= window_end)
			break;
		step(&s, next, s.until[next]);
	}
	for (int i = 0; i < NTHREADS; i++) {
		if (s.what[i] == RUNNING) {
			wl->on_ns[i] += in_window(s.ran_from[i], window_end);
		} else if (s.open[i] != SIZE_MAX) {
			wl->waits[s.open[i]].t_in = window_end;
			wl->waits[s.open[i]].cut = 1;
		}
	}
	for (size_t n = 0; n < wl->nwaits; n++) {
		const struct wait *w = &wl->waits[n];
		uint64_t len = in_window(w->t_out, w->t_in);

		wl->off_ns[w->thread] += len;
		wl->stack_ns[w->thread][w->stack] += len;
		if (w->state == RUN)
			wl->runq_ns[w->thread] += len;
		else if (w->t_wake)
			wl->runq_ns[w->thread] += in_window(w->t_wake, w->t_in);
	}
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(wl->on_ns[i] + wl->off_ns[i], WINDOW_NS);
}

/* The kernel's side: per-thread means, per-CPU buckets and draws. */
#define NSTATES (RUN + 1)

struct sampler {
	uint32_t mean_ns[NTHREADS][2]; /* offcpu.bpf.c's slot: [0] blocked, [1] runnable */
	struct fx_offcpu_bucket bucket[NCPU];
	uint64_t rng[NCPU];
	/* counts over all replicates */
	uint64_t waits, drawn, drawn_p1, stacked;
	uint64_t refused; /* drawn waits the coin kept but the token bucket did not */
	uint64_t thread_drawn[NTHREADS][NSTATES], thread_stacked[NTHREADS][NSTATES];
};

static uint64_t thread_frame(uint32_t thread)
{
	return 0x10000 * (thread + 1);
}

static uint64_t stack_frame(uint32_t thread, uint32_t stack)
{
	return thread_frame(thread) + 0x100 * (stack + 1);
}

/* recorder.c's add_wait(): drawn wait @w, with probabilities @p and @q (0:
 * no stacks), into @win: its part in the window; the part after its
 * wake-up on the run queue (WOKEN); a wait cut at the window's end has no
 * wake-up yet (fx_recorder_cut_waits()). */
static void add_wait(struct fx_window *win, const struct wait *w, uint32_t p, uint32_t q)
{
	uint64_t from = w->t_out > window_start ? w->t_out : window_start;
	uint64_t until = w->t_in < window_end ? w->t_in : window_end;
	uint64_t t_wake = w->cut ? 0 : w->t_wake;
	struct part {
		uint64_t from, to;
		uint32_t state;
	} part[2];
	size_t nparts = 0;
	uint32_t tid = TID0 + w->thread;

	if (until <= from)
		return;
	if (t_wake > from && t_wake < until && w->state != RUN) {
		part[nparts++] = (struct part){ from, t_wake, w->state };
		part[nparts++] = (struct part){ t_wake, until, FX_OFFCPU_STATE_WOKEN };
	} else {
		part[nparts++] = (struct part){ from, until, w->state };
	}
	for (size_t i = 0; i < nparts; i++) {
		uint64_t exact = (part[i].to - part[i].from) * FX_OFFCPU_P1 / p;
		uint64_t shown = !q ? 0
				 : q == FX_OFFCPU_P1
					 ? exact
					 : (uint64_t)((unsigned __int128)exact * FX_OFFCPU_P1 / q);
		/* root first; the innermost frame says why it waits */
		const struct fx_window_frame frames[] = {
			{ .object = OBJ, .addr = thread_frame(w->thread) },
			{ .object = OBJ, .addr = stack_frame(w->thread, w->stack) },
			{ .object = FX_OBJ_OFFCPU, .addr = part[i].state },
		};

		if (!exact)
			continue;
		if (shown) {
			uint32_t node = fx_window_intern_stack(win, frames, 3);

			assert_int_not_equal(node, FX_NONE);
			assert_int_equal(fx_window_add_wait(win, until, PID, tid, node, shown), 0);
		}
		assert_int_equal(
			fx_window_count_wait(win, until, PID, tid, part[i].state, exact, shown), 0);
	}
}

/* One replicate: the draws of seed @seed over workload @wl, the drawn
 * waits into each of @wins[0..nwins-1]. */
static void sample(struct sampler *sm, const struct workload *wl, uint64_t seed,
		   struct fx_window *const *wins, size_t nwins)
{
	const uint64_t p_scale = (1ull << 48) / MIN_BLOCK;

	memset(sm->mean_ns, 0, sizeof(sm->mean_ns));
	memset(sm->bucket, 0, sizeof(sm->bucket));
	for (int c = 0; c < NCPU; c++)
		sm->rng[c] = splitmix(&seed) | 1;
	for (size_t n = 0; n < wl->nwaits; n++) {
		const struct wait *w = &wl->waits[n];
		uint32_t k = w->state == RUN, p, q, coin, *mean = &sm->mean_ns[w->thread][k];
		uint64_t *rng = &sm->rng[w->cpu], m;
		int keep;

		/* switch_out() */
		sm->waits++;
		if (!*mean)
			*mean = (uint32_t)MIN_BLOCK;
		p = fx_offcpu_p(*mean, MIN_BLOCK, p_scale);
		if (p < FX_OFFCPU_P1 && (draw(rng) & (FX_OFFCPU_P1 - 1)) >= p)
			continue;
		coin = draw(rng) & (FX_OFFCPU_P1 - 1);
		keep = fx_offcpu_keep(&sm->bucket[w->cpu], BUDGET, w->t_out, coin, &q);
		sm->drawn++;
		sm->drawn_p1 += p == FX_OFFCPU_P1;
		sm->stacked += (uint64_t)keep;
		sm->refused += !keep && (q == FX_OFFCPU_P1 || coin < q);
		sm->thread_drawn[w->thread][w->state]++;
		sm->thread_stacked[w->thread][w->state] += (uint64_t)keep;
		/* switch_in(): the mean follows the drawn waits; the thread's
		 * next wait begins after this one ends */
		m = *mean - *mean / 8 + (w->t_in - w->t_out) / 8;
		*mean = m > 0xffffffffull ? 0xffffffffu : (uint32_t)m;
		for (size_t i = 0; i < nwins; i++)
			add_wait(wins[i], w, p, keep ? q : 0);
	}
}

/* What a window shows, in microseconds, per thread and per (thread,
 * stack), and a bound of the rounding in each. */
struct shown {
	double thread_us[NTHREADS], stack_us[NTHREADS][NSTACKS];
	double thread_round[NTHREADS], stack_round[NTHREADS][NSTACKS];
};

/* Reads @win. @before[0..nbefore-1]: each sample's wait_us before the fold
 * (NULL: not folded). Rounding: fx_window_add_wait() rounds a weight to
 * the microsecond (at least 1), the fold scales that by its ratio and
 * rounds down again: at most ratio + 1 us a sample. */
static void read_window(const struct fx_window *win, const uint32_t *before, size_t nbefore,
			struct shown *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t n = 0; n < win->nsamples; n++) {
		const struct fx_window_sample *s = &win->samples[n];
		const struct fx_window_stack *node;
		const struct fx_window_frame *f;
		uint32_t t = s->tid - TID0;
		double round = !before ? 1 : n < nbefore ? 1 + (s->wait_us + 1.0) / before[n] : 2;

		if (!s->wait_us)
			continue;
		assert_true(t < NTHREADS);
		out->thread_us[t] += s->wait_us;
		out->thread_round[t] += round;
		node = &win->stacks[s->stack];
		assert_int_equal(win->frames[node->frame].object, FX_OBJ_OFFCPU);
		assert_int_not_equal(node->parent, FX_NONE);
		f = &win->frames[win->stacks[node->parent].frame];
		if (f->object == FX_OBJ_OFFCPU) { /* [waits without a recorded stack] */
			assert_int_equal(f->addr, FX_OFFCPU_NO_STACK);
			continue;
		}
		assert_int_equal(f->object, OBJ);
		for (uint32_t st = 0; st < NSTACKS; st++) {
			if (f->addr == stack_frame(t, st)) {
				out->stack_us[t][st] += s->wait_us;
				out->stack_round[t][st] += round;
			}
		}
	}
}

/* The errors (estimate - truth) of one total over the replicates. */
struct moments {
	double n, sum, sum2, round;
};

static void moments_add(struct moments *m, double err, double round)
{
	m->n++;
	m->sum += err;
	m->sum2 += err * err;
	m->round += round;
}

static double moments_mean(const struct moments *m)
{
	return m->sum / m->n;
}

/* The standard error of the mean error. */
static double moments_se(const struct moments *m)
{
	double mean = moments_mean(m), var = (m->sum2 - m->n * mean * mean) / (m->n - 1);

	return var > 0 ? sqrt(var / m->n) : 0;
}

enum { UNFOLDED, NO_TIMES, TIMES, NCASES };

static const char *const case_names[NCASES] = { "unfolded", "without times", "with times" };

struct results {
	struct workload wl;
	struct sampler sm;
	struct moments thread[NCASES][NTHREADS], stack[NCASES][NTHREADS][NSTACKS];
	/* per thread: the replicates whose total was further from the truth
	 * than its rounding, and the worst of them */
	unsigned missed[NCASES][NTHREADS];
	double worst_err[NCASES][NTHREADS], worst_round[NCASES][NTHREADS];
	uint64_t no_stack; /* samples on [waits without a recorded stack] */
};

static void tally(struct results *r, int c, const struct shown *sh)
{
	for (int t = 0; t < NTHREADS; t++) {
		double err = sh->thread_us[t] - (double)r->wl.off_ns[t] / US;

		moments_add(&r->thread[c][t], err, sh->thread_round[t]);
		if (fabs(err) > sh->thread_round[t] &&
		    (!r->missed[c][t]++ ||
		     fabs(err) - sh->thread_round[t] > r->worst_err[c][t] - r->worst_round[c][t])) {
			r->worst_err[c][t] = fabs(err);
			r->worst_round[c][t] = sh->thread_round[t];
		}
		for (int st = 0; st < NSTACKS; st++)
			moments_add(&r->stack[c][t][st],
				    sh->stack_us[t][st] - (double)r->wl.stack_ns[t][st] / US,
				    sh->stack_round[t][st]);
	}
}

/* Folds @win with @times and tallies it as case @c. */
static void fold(struct results *r, int c, struct fx_window *win,
		 const struct fx_window_thread_time *times, uint32_t **before, size_t *cap)
{
	size_t nbefore = win->nsamples;
	struct shown sh;

	if (*cap < nbefore) {
		*cap = nbefore * 2;
		free(*before);
		*before = malloc(*cap * sizeof(**before));
		assert_non_null(*before);
	}
	for (size_t n = 0; n < nbefore; n++)
		(*before)[n] = win->samples[n].wait_us;
	fx_window_fold_waits(win, times, times ? NTHREADS : 0);
	r->no_stack += win->nsamples - nbefore;
	read_window(win, *before, nbefore, &sh);
	tally(r, c, &sh);
}

static void replicate(struct results *r, uint64_t seed, struct fx_window win[2], uint32_t **before,
		      size_t *cap)
{
	struct fx_window *const wins[2] = { &win[0], &win[1] };
	struct fx_window_thread_time times[NTHREADS];
	struct shown sh;

	fx_window_reset(&win[0]);
	fx_window_reset(&win[1]);
	sample(&r->sm, &r->wl, seed, wins, 2);
	read_window(&win[0], NULL, 0, &sh);
	tally(r, UNFOLDED, &sh);
	fold(r, NO_TIMES, &win[0], NULL, before, cap);
	for (int t = 0; t < NTHREADS; t++)
		times[t] = (struct fx_window_thread_time){ .tid = TID0 + (uint32_t)t,
							   .alive_ns = WINDOW_NS,
							   .on_ns = r->wl.on_ns[t],
							   .runq_ns = r->wl.runq_ns[t] };
	fold(r, TIMES, &win[1], times, before, cap);
}

static int setup(void **state)
{
	uint64_t seed = ESTIMATE_SEED;
	struct results *r = calloc(1, sizeof(*r));
	struct fx_window win[2];
	uint32_t *before = NULL;
	size_t cap = 0;

	if (!r)
		return -1;
	simulate(&r->wl, splitmix(&seed));
	fx_window_init(&win[0], 0);
	fx_window_init(&win[1], 0);
	for (int k = 0; k < REPLICATES; k++)
		replicate(r, splitmix(&seed), win, &before, &cap);
	fx_window_release(&win[0]);
	fx_window_release(&win[1]);
	free(before);
	*state = r;
	return 0;
}

static int teardown(void **state)
{
	struct results *r = *state;

	free(r->wl.waits);
	free(r);
	return 0;
}

/* The budget binds hard: most drawn waits have no stacks. Most waits are
 * not drawn; of those drawn, some had p = 1, some less. */
static void test_budget_binds(void **state)
{
	const struct results *r = *state;
	const struct sampler *sm = &r->sm;
	double share = (double)sm->stacked / (double)sm->drawn, reps = REPLICATES;

	print_message("a replicate: %.0f waits, %.0f drawn (%.1f%% with p = 1), %.0f with stacks "
		      "(%.1f%% of drawn), %.1f refused by the token bucket; %.1f samples on "
		      "[waits without a recorded stack]\n",
		      (double)sm->waits / reps, (double)sm->drawn / reps,
		      100.0 * (double)sm->drawn_p1 / (double)sm->drawn, (double)sm->stacked / reps,
		      100 * share, (double)sm->refused / reps, (double)r->no_stack / reps);
	for (int t = 0; t < NTHREADS; t++)
		print_message(
			"thread %d drawn (with stacks): sleeping %.0f (%.0f), disk %.0f (%.0f), "
			"preempted %.0f (%.0f)\n",
			t, (double)sm->thread_drawn[t][S] / reps,
			(double)sm->thread_stacked[t][S] / reps,
			(double)sm->thread_drawn[t][D] / reps,
			(double)sm->thread_stacked[t][D] / reps,
			(double)sm->thread_drawn[t][RUN] / reps,
			(double)sm->thread_stacked[t][RUN] / reps);
	if (share > MAX_SHARE)
		fail_msg("the budget did not bind: %.1f%% of drawn waits have stacks (at most "
			 "%.0f%%)",
			 100 * share, 100 * MAX_SHARE);
	if (sm->drawn_p1 == 0 || sm->drawn_p1 == sm->drawn || sm->drawn * 2 > sm->waits)
		fail_msg("of %llu waits %llu drawn, %llu of them with p = 1: want most waits not "
			 "drawn, some drawn with p = 1, some with less",
			 (unsigned long long)sm->waits, (unsigned long long)sm->drawn,
			 (unsigned long long)sm->drawn_p1);
}

/* Whether the mean error of total @m (of truth @truth_us) is within Z_MAX
 * standard errors (and its rounding); prints its line. */
static int check(int c, int t, int st, double truth_us, const struct moments *m)
{
	double mean = moments_mean(m), se = moments_se(m), round = m->round / m->n;
	int ok = fabs(mean) <= Z_MAX * se + round;
	char what[32];

	if (st < 0)
		snprintf(what, sizeof(what), "thread %d", t);
	else
		snprintf(what, sizeof(what), "thread %d stack %d", t, st);
	print_message("%4s %-13s %-16s truth %9.0f us, mean %9.0f us, SE %6.1f us, z %+6.2f "
		      "(rounding %.0f us)\n",
		      ok ? "" : "FAIL", case_names[c], what, truth_us, truth_us + mean, se,
		      se > 0 ? mean / se : 0, round);
	return ok;
}

/* The totals of case @c, per thread and/or per stack, within Z_MAX SE. */
static void check_case(const struct results *r, int c, int threads, int stacks)
{
	unsigned bad = 0;

	for (int t = 0; t < NTHREADS; t++) {
		if (threads)
			bad += !check(c, t, -1, (double)r->wl.off_ns[t] / US, &r->thread[c][t]);
		for (int st = 0; stacks && st < NSTACKS; st++)
			bad += !check(c, t, st, (double)r->wl.stack_ns[t][st] / US,
				      &r->stack[c][t][st]);
	}
	if (bad)
		fail_msg("%s: %u totals further than %.1f SE from the truth (FAIL above)",
			 case_names[c], bad, Z_MAX);
}

/* (1) The estimator alone. */
static void test_without_times(void **state)
{
	check_case(*state, NO_TIMES, 1, 1);
}

/* (2) With the kernel's times: each thread's total is the truth, to
 * rounding, in every replicate; its stacks share it within 3.5 SE. */
static void test_with_times(void **state)
{
	const struct results *r = *state;

	for (int t = 0; t < NTHREADS; t++)
		if (r->missed[TIMES][t])
			fail_msg("with times: thread %d missed its truth %.0f us in %u of %d "
				 "replicates, at worst by %.0f us (rounding: %.0f us)",
				 t, (double)r->wl.off_ns[t] / US, r->missed[TIMES][t], REPLICATES,
				 r->worst_err[TIMES][t], r->worst_round[TIMES][t]);
	check_case(r, TIMES, 0, 1);
}

/* Before the fold each wait on its stack weighs length / p / q: the
 * kernel's draws alone, unbiased (so a stack is kept with probability q).
 * Per stack too, but there the sparse states' few large weights skew the
 * errors too much for a t-test at this R: checked per thread. */
static void test_unfolded_unbiased(void **state)
{
	check_case(*state, UNFOLDED, 1, 0);
}

/* The test can fail: without the fold a thread's total is not its truth
 * (test_with_times would see it missing), and the fold makes the totals
 * steadier. */
static void test_fold_needed(void **state)
{
	const struct results *r = *state;

	for (int t = 0; t < NTHREADS; t++) {
		double unfolded = moments_se(&r->thread[UNFOLDED][t]);
		double folded = moments_se(&r->thread[NO_TIMES][t]);

		print_message("thread %d: unfolded, %u of %d replicates off by more than rounding; "
			      "SE %.1f us unfolded, %.1f us folded\n",
			      t, r->missed[UNFOLDED][t], REPLICATES, unfolded, folded);
		if (r->missed[UNFOLDED][t] < REPLICATES * 9 / 10)
			fail_msg("unfolded, thread %d was within rounding of its truth in %u of %d "
				 "replicates: a missing fold could go unseen",
				 t, REPLICATES - r->missed[UNFOLDED][t], REPLICATES);
		if (folded >= unfolded)
			fail_msg("thread %d: folded SE %.1f us, unfolded %.1f us: the fold should "
				 "steady the totals",
				 t, folded, unfolded);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_budget_binds), cmocka_unit_test(test_without_times),
		cmocka_unit_test(test_with_times),   cmocka_unit_test(test_unfolded_unbiased),
		cmocka_unit_test(test_fold_needed),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
