/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/* Off-CPU waits, sampled in the kernel (loaded by offcpu.c).
 *
 * A program on the sched_switch tracepoint (BTF-typed, so it needs no
 * kprobe and no tracefs). At a switch the outgoing thread is still current:
 * its user registers, its user stack and its kernel stack are those it
 * waits in. A drawn wait writes a START into the ring then (with those
 * stacks, or without when over the budget: offcpu_draw.h); when the thread
 * is switched in again its length is known, and a small END carries it.
 * At the switch in, the thread's enqueue time (sched_info.last_queued,
 * in its run queue's clock, read before the scheduler clears it) says when
 * it was woken: from there it waited for a CPU, not for its event. A task
 * iterator the loader runs once at attach seeds the waits already in
 * progress then, so a thread blocked since before the recording counts from
 * its start; another reads each thread's own counters at window ends.
 *
 * Which waits are drawn, and which copied: offcpu_draw.h. A wait not drawn
 * costs two array look-ups and a draw, no helper call: it is not even timed.
 *
 * Built by clang -target bpf. The kernel structures are declared here with
 * only the fields used; CO-RE relocates them on the running kernel's BTF. */
#include <linux/bpf.h>
#include <linux/types.h>
#include <stdbool.h>

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define FX_OFFCPU_INLINE static __always_inline
#include "offcpu_draw.h"
#include "offcpu_int.h"

#define PF_EXITING	     0x00000004
#define PF_KTHREAD	     0x00200000
#define TASK_INTERRUPTIBLE   0x0001
#define TASK_UNINTERRUPTIBLE 0x0002
#define TASK_DEAD	     0x0080
#define PAGE		     4096
#define P_ONE		     FX_OFFCPU_P1

struct sched_entity {
	__u64 sum_exec_runtime;
	struct cfs_rq *cfs_rq;
} __attribute__((preserve_access_index));

struct sched_info {
	unsigned long long run_delay;
	unsigned long long last_queued;
} __attribute__((preserve_access_index));

/* A run queue: its clock, which last_queued is in. Reached through the
 * task's CFS run queue (CONFIG_FAIR_GROUP_SCHED): the per-CPU runqueues
 * symbol is not in kallsyms without CONFIG_KALLSYMS_ALL. */
struct rq {
	__u64 clock;
} __attribute__((preserve_access_index));

struct cfs_rq {
	struct rq *rq;
} __attribute__((preserve_access_index));

struct task_struct {
	unsigned int __state;
	unsigned int flags;
	int on_cpu;
	int pid;
	int tgid;
	unsigned long nvcsw, nivcsw;
	struct sched_entity se;
	struct sched_info sched_info;
	__u64 start_time;
} __attribute__((preserve_access_index));

struct seq_file;
struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));
struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} __attribute__((preserve_access_index));

/* Before Linux 5.14 the state was a long named state. */
struct task_struct___old {
	long state;
} __attribute__((preserve_access_index));

struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
} __attribute__((preserve_access_index));

enum { NOT_WRITTEN, WRITTEN, LOST };

/* A timed wait, in its thread's task storage. */
struct wait {
	__u64 t_out;	/* 0: not waiting */
	__u64 switches; /* the thread's switch count at t_out */
	__u32 p;	/* this wait's probability, of P_ONE */
	__u32 how;	/* NOT_WRITTEN, ... */
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
	__type(value, struct fx_offcpu_bucket);
} buckets SEC(".maps");

/* The threads the iterator seeds (tid -> cgroup tag), unless seed_all:
 * not preallocated, as most runs seed a few. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u32);
} seeds SEC(".maps");

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
 * CPU (the loader sets how many): the program runs with interrupts off;
 * and one more for the iterator, which may sleep. */
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

/* How a thread not running waits, from its state (and whether it was
 * preempted): enum fx_offcpu_state. */
static __always_inline __u32 wait_kind(unsigned int state, bool preempt)
{
	if (preempt || !(state & (TASK_INTERRUPTIBLE | TASK_UNINTERRUPTIBLE)))
		return FX_OFFCPU_RUNNABLE;
	return state & TASK_UNINTERRUPTIBLE ? FX_OFFCPU_DISK : FX_OFFCPU_SLEEP;
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
	__u64 d, weight, mean, t_wake;
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
	t_wake = 0;
	if (w->state != FX_OFFCPU_RUNNABLE && bpf_core_field_exists(next->se.cfs_rq)) {
		/* Woken then: on a run queue since, by its clock (the scheduler
		 * updated it for this switch; a wake-up on another CPU's queue
		 * and a migration skew it by their clocks' gap). */
		struct cfs_rq *cfs = next->se.cfs_rq; /* BTF pointers: plain loads */
		struct rq *rq = cfs ? cfs->rq : NULL;
		__u64 queued = next->sched_info.last_queued, clock = rq ? rq->clock : 0;

		if (queued && clock > queued && clock - queued < d)
			t_wake = *now - (clock - queued);
	}
	/* It switched out again unseen (the program was detached between):
	 * its length is unknown. An end of length 0 closes the start. */
	if (next->nvcsw + next->nivcsw != w->switches) {
		d = 0;
		t_wake = 0;
		*now = w->t_out;
	}
	st->wait_ns += d;
	weight = w->p ? d * P_ONE / w->p : 0;
	/* An exponential mean over about 8 waits */
	k = w->state == FX_OFFCPU_RUNNABLE;
	mean = sl->mean_ns[k] - sl->mean_ns[k] / 8 + d / 8;
	sl->mean_ns[k] = mean > 0xffffffffull ? 0xffffffffu : (__u32)mean;
	if (w->how == WRITTEN) {
		end = bpf_ringbuf_reserve(&events, sizeof(*end), 0);
		if (!end) {
			/* its START stands without an end: the agent counts it
			 * to the window's edge, and drops it at the thread's next */
			st->lost++;
			st->lost_ns += weight;
		} else {
			end->kind = FX_OFFCPU_END;
			end->pid = (__u32)next->tgid;
			end->tid = (__u32)next->pid;
			end->cpu = bpf_get_smp_processor_id();
			end->t_out = w->t_out;
			end->t_in = *now;
			end->t_wake = t_wake;
			end->weight_ns = weight;
			end->state = w->state;
			end->tag = w->tag;
			bpf_ringbuf_submit(end, wakeup_flag());
		}
	} else if (w->how == LOST) {
		st->lost_ns += weight;
	}
	w->t_out = 0;
	w->how = NOT_WRITTEN;
}

/* The START of wait @w (fields set but stacks) into the ring: with the
 * stacks in @e when @e->q, else without. Returns WRITTEN or LOST. */
static __always_inline __u32 emit_start(struct fx_offcpu_start *e, struct fx_offcpu_bpf_stats *st)
{
	__u64 size = __builtin_offsetof(struct fx_offcpu_start, stack) + (__u64)e->stack_bytes;

	if (e->q) {
		barrier_var(size);
		if (size > sizeof(*e))
			size = sizeof(*e);
		barrier_var(size);
		if (!bpf_ringbuf_output(&events, e, size, wakeup_flag())) {
			st->stacked++;
			return WRITTEN;
		}
		/* no room for the stacks: the wait is still timed */
		e->q = 0;
		e->flags |= FX_OFFCPU_UNSTACKED;
	}
	if (!bpf_ringbuf_output(&events, e, __builtin_offsetof(struct fx_offcpu_start, regs),
				wakeup_flag())) {
		st->unstacked++;
		return WRITTEN;
	}
	st->lost++;
	return LOST;
}

/* The running thread @prev leaves the CPU: a wait begins, drawn or not. */
static __always_inline void switch_out(void *ctx, const struct fx_offcpu_settings *cfg,
				       bool preempt, struct task_struct *prev, __u64 now,
				       struct fx_offcpu_bpf_stats *st)
{
	/* (now: the switch in's, or 0: read here) */
	struct fx_offcpu_bucket *b;
	struct fx_offcpu_start *e;
	struct slot *sl;
	struct wait *w;
	unsigned int state;
	__u32 tgid, tag, cpu, copied = 0, p, q, kind, k, zero = 0;
	long n;

	if (prev->flags & PF_KTHREAD)
		return;
	tgid = (__u32)prev->tgid;
	if (!tgid || tgid == cfg->self_pid || !watched(cfg, tgid, &tag))
		return;
	state = task_state(prev);
	if (state & TASK_DEAD)
		return; /* its last switch: no wait, an exit */
	kind = wait_kind(state, preempt);
	k = kind == FX_OFFCPU_RUNNABLE;
	sl = slot_of(prev);
	if (!sl)
		return;
	st->waits++;
	if (!sl->mean_ns[k]) /* a new slot's first wait is drawn */
		sl->mean_ns[k] = (__u32)cfg->min_block_ns;
	p = fx_offcpu_p(sl->mean_ns[k], cfg->min_block_ns, cfg->p_scale);
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
	st->drawn++;
	w->how = NOT_WRITTEN;
	w->switches = prev->nvcsw + prev->nivcsw;
	w->t_out = now;
	w->p = p;
	w->tag = tag;
	w->state = kind;
	cpu = bpf_get_smp_processor_id();
	e = bpf_map_lookup_elem(&scratch, &cpu);
	b = bpf_map_lookup_elem(&buckets, &zero);
	if (!e || !b)
		return;
	e->kind = FX_OFFCPU_START;
	e->pid = tgid;
	e->tid = (__u32)prev->pid;
	e->cpu = cpu;
	e->t_out = now;
	e->state = kind;
	e->tag = tag;
	e->p = p;
	e->kstack_bytes = 0;
	e->uips_bytes = 0;
	e->stack_bytes = 0;
	e->flags = 0;
	if (!fx_offcpu_keep(b, cfg->budget, now, draw(st) & (P_ONE - 1), &q)) {
		e->q = 0;
		e->flags = FX_OFFCPU_UNSTACKED;
		w->how = emit_start(e, st);
		return;
	}
	e->q = q;
	if (cfg->kernel) {
		n = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
		e->kstack_bytes = n > 0 ? (__u32)n : 0;
	}
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
	w->how = emit_start(e, st);
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

/* The user stack of another thread @t from @sp, a page at a time (as
 * copy_stack() does for the running one). */
static __always_inline __u32 copy_task_stack(struct fx_offcpu_start *e, struct task_struct *t,
					     __u64 sp, __u64 want)
{
	__u32 got = 0;

	if (want > FX_OFFCPU_STACK_MAX)
		want = FX_OFFCPU_STACK_MAX;
	for (int i = 0; i < FX_OFFCPU_STACK_MAX / PAGE; i++) {
		__u64 n = PAGE - ((sp + got) & (PAGE - 1));

		if (got >= want || got > FX_OFFCPU_STACK_MAX - PAGE)
			break;
		if (n > want - got)
			n = want - got;
		barrier_var(n);
		if (n > PAGE)
			n = PAGE;
		barrier_var(n);
		if (!n)
			break;
		if (bpf_copy_from_user_task(e->stack + got, (__u32)n, (const void *)(sp + got), t,
					    0))
			break;
		got += (__u32)n;
	}
	return got;
}

/* The frame-pointer callchain of another thread, as the kernel's user
 * callchain gives it: the ip, then the return addresses on the rbp links. */
static __always_inline __u32 walk_task_fp(struct fx_offcpu_start *e, struct task_struct *t,
					  __u64 ip, __u64 fp)
{
	__u32 n = 0;

	e->uips[n++] = ip;
	for (int i = 1; i < FX_OFFCPU_MAX_IPS; i++) {
		__u64 frame[2];

		if (!fp || fp & 7)
			break;
		if (bpf_copy_from_user_task(frame, sizeof(frame), (const void *)fp, t, 0))
			break;
		if (!frame[1] || frame[0] <= fp)
			break;
		if (n >= FX_OFFCPU_MAX_IPS)
			break;
		e->uips[n++] = frame[1];
		fp = frame[0];
	}
	return n * 8;
}

/* Each user thread not on a CPU when the program was attached is waiting:
 * its wait is drawn as it stands (p = 1), from now, with its stacks. */
SEC("iter.s/task")
int fx_seed(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	struct fx_offcpu_bpf_stats *st;
	const struct fx_offcpu_settings *cfg;
	struct fx_offcpu_start *e;
	struct pt_regs *regs;
	struct slot *sl;
	struct wait *w;
	unsigned int state;
	__u32 zero = 0, tgid, tag = ~0u, *seed, slot, kind;
	__u64 now;
	long n;

	if (!t || t->flags & (PF_KTHREAD | PF_EXITING) || t->on_cpu)
		return 0;
	cfg = bpf_map_lookup_elem(&settings, &zero);
	st = bpf_map_lookup_elem(&stats, &zero);
	tgid = (__u32)t->tgid;
	if (!cfg || !st || !tgid || tgid == cfg->self_pid)
		return 0;
	if (!cfg->seed_all) {
		__u32 tid = (__u32)t->pid;

		seed = bpf_map_lookup_elem(&seeds, &tid);
		if (!seed)
			return 0;
		tag = *seed;
	}
	state = task_state(t);
	if (state & TASK_DEAD)
		return 0;
	kind = wait_kind(state, false);
	sl = slot_of(t);
	w = bpf_task_storage_get(&waits, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!sl || !w || w->t_out)
		return 0; /* a switch out was seen first */
	slot = cfg->seed_slot;
	e = bpf_map_lookup_elem(&scratch, &slot);
	if (!e)
		return 0;
	now = bpf_ktime_get_ns();
	e->kind = FX_OFFCPU_START;
	e->pid = tgid;
	e->tid = (__u32)t->pid;
	e->cpu = bpf_get_smp_processor_id();
	e->t_out = now;
	e->state = kind;
	e->tag = tag;
	e->p = P_ONE;
	e->q = 0;
	e->flags = FX_OFFCPU_SEEDED | FX_OFFCPU_UNSTACKED;
	e->kstack_bytes = 0;
	e->uips_bytes = 0;
	e->stack_bytes = 0;
	if (cfg->seed_stacks) {
		struct fx_offcpu_settings *set = (struct fx_offcpu_settings *)cfg;

		__sync_fetch_and_add(&set->seed_stacks, -1);
		e->q = P_ONE;
		e->flags = FX_OFFCPU_SEEDED;
		if (cfg->kernel) {
			n = bpf_get_task_stack(t, e->kstack, sizeof(e->kstack), 0);
			e->kstack_bytes = n > 0 ? (__u32)n : 0;
		}
		regs = (struct pt_regs *)bpf_task_pt_regs(t);
		if (regs) {
			fill_regs(e, regs);
			if (cfg->stack_bytes)
				e->stack_bytes =
					copy_task_stack(e, t, e->regs[7], cfg->stack_bytes);
			e->uips_bytes = walk_task_fp(e, t, e->regs[8], e->regs[6]);
		}
	}
	/* Counted pending before its t_out is set: a switch in racing the
	 * iterator then closes it (its START seeded stands alone, and the
	 * agent drops it at the thread's next). */
	__sync_fetch_and_add(&sl->pending, 1);
	w->switches = t->nvcsw + t->nivcsw;
	w->p = P_ONE;
	w->tag = tag;
	w->state = kind;
	w->how = NOT_WRITTEN;
	w->t_out = now;
	w->how = emit_start(e, st);
	if (w->how == LOST)
		return 0;
	st->seeded++;
	/* a byte a seeded thread: the loader reads a few at a time, and
	 * drains the ring between */
	bpf_seq_write(ctx->meta->seq, &zero, 1);
	return 0;
}

/* Each watched user thread's own counters, for the agent to take the
 * difference of at each window's end: exact times where the drawn waits
 * only estimate them (window.h: fx_window_fold_waits()). */
SEC("iter/task")
int fx_tally(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	const struct fx_offcpu_settings *cfg;
	struct fx_offcpu_tally r;
	__u32 zero = 0, tgid;

	if (!t || t->flags & PF_KTHREAD)
		return 0;
	cfg = bpf_map_lookup_elem(&settings, &zero);
	tgid = (__u32)t->tgid;
	if (!cfg || !tgid || tgid == cfg->self_pid)
		return 0;
	if (cfg->filter == FX_OFFCPU_PIDS && !bpf_map_lookup_elem(&pids, &tgid))
		return 0;
	r.pid = tgid;
	r.tid = (__u32)t->pid;
	r.at_ns = bpf_ktime_get_ns();
	r.start_ns = t->start_time;
	r.on_ns = t->se.sum_exec_runtime;
	r.runq_ns = t->sched_info.run_delay;
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
