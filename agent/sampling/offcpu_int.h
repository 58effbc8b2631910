/* SPDX-License-Identifier: MIT */
/* What the off-CPU BPF program (offcpu.bpf.c) and its loader (offcpu.c)
 * share: the event of one wait, its statistics and its settings. Plain
 * kernel types: the BPF side has no libc. */
#ifndef FXAGENT_OFFCPU_INT_H
#define FXAGENT_OFFCPU_INT_H

#include <linux/types.h>

#define FX_OFFCPU_STACK_MAX  32768 /* sampling.stack_bytes' upper bound */
#define FX_OFFCPU_MAX_IPS    127   /* PERF_MAX_STACK_DEPTH */
#define FX_OFFCPU_NREGS	     17	   /* FX_DWUNWIND_REGS_MASK's registers */
#define FX_OFFCPU_MAX_LEVELS 16	   /* cgroup depth searched for a target */

/* Why a thread was off the CPU: what its state was at the switch. */
enum fx_offcpu_state {
	FX_OFFCPU_SLEEP = 1,	/* TASK_INTERRUPTIBLE: a lock, a read, a sleep */
	FX_OFFCPU_DISK = 2,	/* TASK_UNINTERRUPTIBLE: mostly I/O */
	FX_OFFCPU_RUNNABLE = 3, /* preempted or yielded: waiting for a CPU */
	FX_OFFCPU_WOKEN = 4,	/* woken, on a run queue, not yet running (an END's
				   t_wake on: never a START's state) */
};

/* fx_offcpu_start.flags */
#define FX_OFFCPU_UNSTACKED                                                                        \
	1u /* over the budget, or the ring had no room for                                         \
	      the stacks: the wait is timed without them */
#define FX_OFFCPU_SEEDED                                                                           \
	2u /* waiting when the program was attached: t_out                                         \
	      is then, not the wait's start */

enum fx_offcpu_kind {
	FX_OFFCPU_START = 1, /* a drawn wait began: its stacks (unless UNSTACKED) */
	FX_OFFCPU_END = 2,   /* it ran again: the wait's length and weight */
};

/* A drawn wait's start, written at the switch out, in the thread's own
 * context: its stacks are those it waits in. An UNSTACKED one ends at
 * regs: no stacks follow. */
struct fx_offcpu_start {
	__u32 kind; /* FX_OFFCPU_START */
	__u32 pid, tid, cpu;
	__u64 t_out;		     /* CLOCK_MONOTONIC ns */
	__u32 state;		     /* enum fx_offcpu_state */
	__u32 tag;		     /* the matched cgroup's tag; ~0 without cgroup targets */
	__u32 kstack_bytes;	     /* bytes of kstack */
	__u32 uips_bytes;	     /* bytes of uips: the frame-pointer callchain */
	__u32 stack_bytes;	     /* bytes of stack copied (DWARF mode) */
	__u32 p;		     /* the probability it was drawn with, of 65536 */
	__u32 q;		     /* ... and its stacks copied with (0: UNSTACKED) */
	__u32 flags;		     /* FX_OFFCPU_UNSTACKED, FX_OFFCPU_SEEDED */
	__u64 regs[FX_OFFCPU_NREGS]; /* user registers in perf's order (DWARF mode) */
	__u64 kstack[FX_OFFCPU_MAX_IPS];
	__u64 uips[FX_OFFCPU_MAX_IPS];
	__u8 stack[FX_OFFCPU_STACK_MAX];
};

/* Its end, written when the thread is switched in again. */
struct fx_offcpu_end {
	__u32 kind; /* FX_OFFCPU_END */
	__u32 pid, tid, cpu;
	__u64 t_out, t_in;
	__u64 t_wake;	 /* when it was woken (0: not seen): from there to t_in
			    it waited for a CPU (FX_OFFCPU_WOKEN) */
	__u64 weight_ns; /* the off-CPU time it stands for: length / probability */
	__u32 state, tag;
};

/* A thread's counters, as the tally iterator writes them. */
struct fx_offcpu_tally {
	__u32 pid, tid;
	__u64 at_ns;	/* CLOCK_MONOTONIC, when read */
	__u64 start_ns; /* CLOCK_MONOTONIC, when it was created */
	__u64 on_ns;	/* its time on a CPU (se.sum_exec_runtime) */
	__u64 runq_ns;	/* on a run queue (sched_info.run_delay) */
};

/* What the loader sets, in the one entry of the settings map. */
enum fx_offcpu_filter {
	FX_OFFCPU_ALL = 0,    /* every user thread */
	FX_OFFCPU_PIDS = 1,   /* the processes in the pids map */
	FX_OFFCPU_CGROUPS = 2 /* the cgroups in the cgroups map, and below */
};

struct fx_offcpu_settings {
	__u64 min_block_ns; /* a thread whose waits last this long on average has
			       each recorded; shorter ones in proportion */
	__u64 p_scale;	    /* 2^48 / min_block_ns: a mean's probability of 65536
			       is mean * p_scale >> 32, without a division */
	__u64 budget;	    /* events per second per CPU; 0 = none written */
	__u32 stack_bytes;  /* user stack copy; 0: frame-pointer callchains */
	__u32 kernel;	    /* kernel stacks */
	__u32 filter;	    /* enum fx_offcpu_filter */
	__u32 self_pid;	    /* the agent, never watched */
	__u32 seed_slot;    /* the seeding iterator's scratch entry (past the CPUs') */
	__u32 seed_all;	    /* the iterator seeds every user thread, not only
			       those in the seeds map */
	__u32 seed_stacks;  /* stacks it may still copy; the rest UNSTACKED */
	__u32 pad;
};

/* Per CPU, summed by the loader. */
struct fx_offcpu_bpf_stats {
	__u64 waits;	    /* waits begun by watched threads, drawn or not */
	__u64 drawn;	    /* of them drawn: timed, and written unless lost */
	__u64 wait_ns;	    /* the time of those drawn that ended */
	__u64 stacked;	    /* drawn waits written with their stacks */
	__u64 unstacked;    /* drawn waits written without (over the budget) */
	__u64 lost;	    /* drawn waits the ring had no room for at all */
	__u64 lost_ns;	    /* their weights */
	__u64 seeded;	    /* waits in progress when the program was attached */
	__u64 stack_faults; /* user stack copies that read nothing */
	__u64 rng;	    /* the program's draws (xorshift64), not a count */
};

#endif
