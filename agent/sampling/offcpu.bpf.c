/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/* Off-CPU waits, sampled in the kernel (loaded by offcpu.c).
 *
 * One program on the sched_switch tracepoint (BTF-typed, so it needs no
 * kprobe and no tracefs). At a switch the outgoing thread is still current:
 * its user registers, its user stack and its kernel stack are those it
 * waits in. A sampled wait copies them into the ring then (a START event);
 * when the thread is switched in again its length is known, and a small END
 * event carries it with the weight.
 *
 * Which waits are sampled: each thread (its slot, below) keeps the running
 * mean of its timed waits' lengths (blocked and runnable apart), and a wait
 * is sampled with probability p = mean / min_block (at most 1), drawn at its
 * start; its weight is length / p. A wait not drawn costs two array look-ups
 * and a draw, no helper call: it is not even timed. p is fixed before the
 * length is known, so the weights' sum is an unbiased estimate of the
 * off-CPU time (Horvitz-Thompson) whatever p is; and a thread that waits
 * long has every wait recorded, while one that switches a hundred thousand
 * times a second for microseconds costs a few copies. A per-CPU budget of
 * sampled waits per second bounds the rest: a wait it refuses is counted,
 * and so is its weight once its length is known.
 *
 * Built by clang -target bpf. The kernel structures are declared here with
 * only the fields used; CO-RE relocates them on the running kernel's BTF. */
#include <linux/bpf.h>
#include <linux/types.h>
#include <stdbool.h>

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "offcpu_int.h"

#define PF_KTHREAD	     0x00200000
#define TASK_INTERRUPTIBLE   0x0001
#define TASK_UNINTERRUPTIBLE 0x0002
#define TASK_DEAD	     0x0080
#define PAGE		     4096
#define NS_PER_S	     1000000000ull
#define P_ONE		     65536 /* probability 1 in 16-bit fixed point */

struct task_struct {
	unsigned int __state;
	unsigned int flags;
	int pid;
	int tgid;
	unsigned long nvcsw, nivcsw;
} __attribute__((preserve_access_index));

/* Before Linux 5.14 the state was a long named state. */
struct task_struct___old {
	long state;
} __attribute__((preserve_access_index));

struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
} __attribute__((preserve_access_index));

enum { NOT_SAMPLED, SAMPLED, OVER_BUDGET, RING_FULL };

/* A timed wait, in its thread's task storage. */
struct wait {
	__u64 t_out;	/* 0: not waiting */
	__u64 switches; /* the thread's switch count at t_out */
	__u32 p;	/* this wait's probability, of P_ONE */
	__u32 how;	/* NOT_SAMPLED, ... */
	__u32 state;
	__u32 tag;
};

/* What most switches read instead of the task storage, which costs two
 * helper calls a switch (about 200 ns here): a slot per thread id modulo
 * NSLOTS, in an array whose look-up the verifier inlines. A slot's mean
 * is that of the timed waits of the threads that share it: p stays fixed
 * before a wait's length is known, so the weights stay unbiased; sharing
 * only makes the draw less apt. pending counts the timed waits of its
 * threads, so a thread whose slot has none is switched in without a look-up. */
#define NSLOTS 65536
struct slot {
	/* running means of timed waits' lengths (capped): [0] blocked, [1]
	 * runnable. Kept apart: a thread preempted for microseconds between
	 * long sleeps would otherwise draw its sleeps with a small p, and
	 * their large weights make the estimate noisy. */
	__u32 mean_ns[2];
	__u32 pending;
};

struct bucket {
	__u64 last_ns;
	__u64 tokens; /* sampled waits x NS_PER_S */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct wait);
} waits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fx_offcpu_settings);
} settings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u32);
} cgroups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fx_offcpu_bpf_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bucket);
} buckets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOTS);
	__type(key, __u32);
	__type(value, struct slot);
} slots SEC(".maps");

static __always_inline struct slot *slot_of(struct task_struct *t)
{
	__u32 i = (__u32)t->pid & (NSLOTS - 1);

	return bpf_map_lookup_elem(&slots, &i);
}

/* A START is built here (too big for the BPF stack, and for a per-CPU map's
 * 32 KiB), then copied out with only the stack bytes read. One entry per
 * CPU (the loader sets how many): the program runs with interrupts off. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fx_offcpu_start);
} scratch SEC(".maps");

/* The loader sets the size before loading. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

/* The agent is woken only when the ring is a quarter full (and by its own
 * 200 ms drains): not once per event. */
static __always_inline __u64 wakeup_flag(void)
{
	__u64 size = bpf_ringbuf_query(&events, BPF_RB_RING_SIZE);

	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= size / 4 ? BPF_RB_FORCE_WAKEUP
									 : BPF_RB_NO_WAKEUP;
}

static __always_inline unsigned int task_state(struct task_struct *t)
{
	/* BTF-typed pointers: direct loads, no bpf_probe_read_kernel() */
	if (bpf_core_field_exists(t->__state))
		return t->__state;
	return (unsigned int)((struct task_struct___old *)t)->state;
}

/* Whether the running thread is watched; its cgroup target's tag in @tag. */
static __always_inline bool watched(const struct fx_offcpu_settings *cfg, __u32 tgid, __u32 *tag)
{
	*tag = ~0u;
	if (cfg->filter == FX_OFFCPU_PIDS)
		return bpf_map_lookup_elem(&pids, &tgid) != NULL;
	if (cfg->filter != FX_OFFCPU_CGROUPS)
		return true;
	/* The deepest cgroup of a target, the one nearest the thread. */
	for (int level = FX_OFFCPU_MAX_LEVELS - 1; level >= 0; level--) {
		__u64 id = bpf_get_current_ancestor_cgroup_id(level);
		__u32 *v;

		if (!id)
			continue;
		v = bpf_map_lookup_elem(&cgroups, &id);
		if (v) {
			*tag = *v;
			return true;
		}
	}
	return false;
}

/* A draw from this CPU's xorshift64: bpf_get_prandom_u32() is a helper
 * call, as dear as the rest of a wait not drawn. */
static __always_inline __u32 draw(struct fx_offcpu_bpf_stats *st)
{
	__u64 x = st->rng;

	if (!x)
		x = bpf_get_prandom_u32() | 1;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	st->rng = x;
	return (__u32)(x >> 32);
}

/* Takes one sampled wait from this CPU's budget. */
static __always_inline bool spend(const struct fx_offcpu_settings *cfg, __u64 now)
{
	__u32 zero = 0;
	struct bucket *b = bpf_map_lookup_elem(&buckets, &zero);
	__u64 cap = cfg->budget * NS_PER_S;

	if (!b || !cfg->budget)
		return false;
	if (!b->last_ns) {
		b->tokens = cap;
	} else if (now > b->last_ns) {
		__u64 add = (now - b->last_ns) * cfg->budget;

		b->tokens = add >= cap || b->tokens + add >= cap ? cap : b->tokens + add;
	}
	b->last_ns = now;
	if (b->tokens < NS_PER_S)
		return false;
	b->tokens -= NS_PER_S;
	return true;
}

/* Copies the user stack from @sp, a page at a time: the copy stops at the
 * first page that cannot be read (the end of the stack, or one swapped out),
 * as perf's does. */
static __always_inline __u32 copy_stack(struct fx_offcpu_start *e, __u64 sp, __u64 want)
{
	__u64 got = PAGE - (sp & (PAGE - 1));

	if (want > FX_OFFCPU_STACK_MAX)
		want = FX_OFFCPU_STACK_MAX;
	if (got > want)
		got = want;
	if (bpf_probe_read_user(e->stack, got & (PAGE - 1) ? got & (PAGE - 1) : PAGE,
				(const void *)sp))
		return 0;
	for (int i = 0; i < FX_OFFCPU_STACK_MAX / PAGE; i++) {
		__u64 n;

		if (got >= want || got > FX_OFFCPU_STACK_MAX - PAGE)
			break;
		n = want - got;
		/* Bounds the verifier can follow: n in 1..PAGE, got + n within
		 * the copy. */
		barrier_var(n);
		if (n > PAGE)
			n = PAGE;
		barrier_var(n);
		if (!n)
			break;
		if (bpf_probe_read_user(e->stack + got, n, (const void *)(sp + got)))
			break;
		got += n;
	}
	return (__u32)got;
}

static __always_inline void fill_regs(struct fx_offcpu_start *e, struct pt_regs *r)
{
	/* perf's order: ax bx cx dx si di bp sp ip, then r8 to r15 */
	e->regs[0] = r->ax;
	e->regs[1] = r->bx;
	e->regs[2] = r->cx;
	e->regs[3] = r->dx;
	e->regs[4] = r->si;
	e->regs[5] = r->di;
	e->regs[6] = r->bp;
	e->regs[7] = r->sp;
	e->regs[8] = r->ip;
	e->regs[9] = r->r8;
	e->regs[10] = r->r9;
	e->regs[11] = r->r10;
	e->regs[12] = r->r11;
	e->regs[13] = r->r12;
	e->regs[14] = r->r13;
	e->regs[15] = r->r14;
	e->regs[16] = r->r15;
}

/* @next runs again: a timed wait of it that began at a switch out ends. */
static __always_inline void switch_in(struct task_struct *next, __u64 *now,
				      struct fx_offcpu_bpf_stats *st)
{
	struct fx_offcpu_end *end;
	struct slot *sl;
	struct wait *w;
	__u64 d, weight, mean;
	__u32 k;

	if (next->flags & PF_KTHREAD)
		return;
	sl = slot_of(next);
	if (!sl || !sl->pending)
		return;
	w = bpf_task_storage_get(&waits, next, 0, 0);
	if (!w || !w->t_out)
		return; /* another thread of the slot's */
	__sync_fetch_and_add(&sl->pending, -1);
	*now = bpf_ktime_get_ns();
	d = *now > w->t_out ? *now - w->t_out : 0;
	/* It switched out again unseen (the program was detached between):
	 * its length is unknown. An end of length 0 closes the start. */
	if (next->nvcsw + next->nivcsw != w->switches) {
		d = 0;
		*now = w->t_out;
	}
	st->wait_ns += d;
	weight = w->p ? d * P_ONE / w->p : 0;
	/* An exponential mean over about 8 waits */
	k = w->state == FX_OFFCPU_RUNNABLE;
	mean = sl->mean_ns[k] - sl->mean_ns[k] / 8 + d / 8;
	sl->mean_ns[k] = mean > 0xffffffffull ? 0xffffffffu : (__u32)mean;
	if (w->how == SAMPLED) {
		end = bpf_ringbuf_reserve(&events, sizeof(*end), 0);
		if (!end) {
			st->ring_drops++;
			st->ring_ns += weight;
		} else {
			end->kind = FX_OFFCPU_END;
			end->pid = (__u32)next->tgid;
			end->tid = (__u32)next->pid;
			end->cpu = bpf_get_smp_processor_id();
			end->t_out = w->t_out;
			end->t_in = *now;
			end->weight_ns = weight;
			end->state = w->state;
			end->tag = w->tag;
			bpf_ringbuf_submit(end, wakeup_flag());
			st->emitted++;
			st->emitted_ns += weight;
		}
	} else if (w->how == OVER_BUDGET) {
		st->budget_ns += weight;
	} else if (w->how == RING_FULL) {
		st->ring_ns += weight;
	}
	w->t_out = 0;
	w->how = NOT_SAMPLED;
}

/* The running thread @prev leaves the CPU: a wait begins, sampled or not. */
static __always_inline void switch_out(void *ctx, const struct fx_offcpu_settings *cfg,
				       bool preempt, struct task_struct *prev, __u64 now,
				       struct fx_offcpu_bpf_stats *st)
{
	/* (now: the switch in's, or 0: read here) */
	struct fx_offcpu_start *e;
	struct slot *sl;
	struct wait *w;
	unsigned int state;
	__u32 tgid, tag, cpu, copied = 0, p, kind, k;
	__u64 size;
	long n;

	if (prev->flags & PF_KTHREAD)
		return;
	tgid = (__u32)prev->tgid;
	if (!tgid || tgid == cfg->self_pid || !watched(cfg, tgid, &tag))
		return;
	state = task_state(prev);
	if (state & TASK_DEAD)
		return; /* its last switch: no wait, an exit */
	if (preempt || !(state & (TASK_INTERRUPTIBLE | TASK_UNINTERRUPTIBLE)))
		kind = FX_OFFCPU_RUNNABLE;
	else if (state & TASK_UNINTERRUPTIBLE)
		kind = FX_OFFCPU_DISK;
	else
		kind = FX_OFFCPU_SLEEP;
	k = kind == FX_OFFCPU_RUNNABLE;
	sl = slot_of(prev);
	if (!sl)
		return;
	st->waits++;
	if (!sl->mean_ns[k]) /* a new slot's first wait is sampled */
		sl->mean_ns[k] = (__u32)cfg->min_block_ns;
	p = P_ONE;
	if (sl->mean_ns[k] < cfg->min_block_ns)
		p = (__u32)((__u64)sl->mean_ns[k] * cfg->p_scale >> 32);
	if (!p)
		p = 1;
	/* Most switches end here: a wait not drawn is neither looked up nor
	 * timed, and the mean follows the waits that are. */
	if (p < P_ONE && (draw(st) & (P_ONE - 1)) >= p)
		return;
	w = bpf_task_storage_get(&waits, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!w)
		return;
	if (!w->t_out)
		__sync_fetch_and_add(&sl->pending, 1);
	if (!now)
		now = bpf_ktime_get_ns();
	w->how = NOT_SAMPLED;
	w->switches = prev->nvcsw + prev->nivcsw;
	w->t_out = now;
	w->p = p;
	w->tag = tag;
	w->state = kind;
	if (!spend(cfg, now)) {
		st->budget_drops++;
		w->how = OVER_BUDGET;
		return;
	}
	cpu = bpf_get_smp_processor_id();
	e = bpf_map_lookup_elem(&scratch, &cpu);
	if (!e)
		return;
	e->kind = FX_OFFCPU_START;
	e->pid = tgid;
	e->tid = (__u32)prev->pid;
	e->cpu = cpu;
	e->t_out = now;
	e->state = w->state;
	e->tag = tag;
	e->p = p;
	e->kstack_bytes = 0;
	if (cfg->kernel) {
		n = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
		e->kstack_bytes = n > 0 ? (__u32)n : 0;
	}
	e->uips_bytes = 0;
	e->stack_bytes = 0;
	if (cfg->stack_bytes) {
		fill_regs(e, (struct pt_regs *)bpf_task_pt_regs(prev));
		copied = copy_stack(e, e->regs[7], cfg->stack_bytes);
		e->stack_bytes = copied;
		if (!copied)
			st->stack_faults++;
	}
	/* With a copy too: its frame-pointer links carry the walk on where a
	 * frame is bigger than the copy (dwunwind.h). */
	n = bpf_get_stack(ctx, e->uips, sizeof(e->uips), BPF_F_USER_STACK);
	e->uips_bytes = n > 0 ? (__u32)n : 0;
	size = __builtin_offsetof(struct fx_offcpu_start, stack) + (__u64)copied;
	barrier_var(size);
	if (size > sizeof(*e))
		size = sizeof(*e);
	barrier_var(size);
	if (bpf_ringbuf_output(&events, e, size, wakeup_flag())) {
		st->ring_drops++;
		w->how = RING_FULL;
		return;
	}
	w->how = SAMPLED;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(fx_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 zero = 0;
	const struct fx_offcpu_settings *cfg = bpf_map_lookup_elem(&settings, &zero);
	struct fx_offcpu_bpf_stats *st = bpf_map_lookup_elem(&stats, &zero);
	__u64 now = 0; /* read when a watched thread needs it */

	if (!cfg || !st)
		return 0;
	switch_in(next, &now, st);
	switch_out(ctx, cfg, preempt, prev, now, st);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
