/* SPDX-License-Identifier: MIT */
/* record: decoding perf records into plain structs.
 *
 * Every length inside a record is checked against header.size: a bogus record
 * returns -EINVAL and is counted by the caller, never read past its end.
 * Pointers in the outputs point into the record.
 */
#ifndef FXAGENT_RECORD_H
#define FXAGENT_RECORD_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the events were opened with; decoding depends on it. */
struct fx_record_fmt {
	uint64_t sample_type;	 /* PERF_SAMPLE_* bits */
	uint64_t regs_user_mask; /* attr.sample_regs_user */
	bool sample_id_all;	 /* side-band records carry the sample_id trailer */
};

/* The sample_id trailer of side-band records (sample_id_all), as far as the
 * sample_type has it. */
struct fx_record_id {
	uint32_t pid, tid;
	uint64_t time;
	uint32_t cpu;
};

struct fx_record_sample {
	uint64_t id; /* PERF_SAMPLE_IDENTIFIER or PERF_SAMPLE_ID: the event's id */
	uint64_t ip;
	uint32_t pid, tid;
	uint64_t time;
	uint32_t cpu;
	uint64_t period;
	uint64_t nr;	      /* callchain entries */
	const uint64_t *ips;  /* callchain, context markers included */
	uint64_t abi;	      /* PERF_SAMPLE_REGS_USER abi; 0 = no registers */
	const uint64_t *regs; /* popcount(regs_user_mask) values when abi != 0 */
	uint64_t stack_size;  /* PERF_SAMPLE_STACK_USER: bytes copied */
	const uint8_t *stack;
	uint64_t stack_dyn_size; /* bytes of the copy that are valid */
};

struct fx_record_mmap {
	uint32_t pid, tid;
	uint64_t start, len, pgoff;
	uint32_t prot, flags;
	bool has_build_id;
	uint8_t build_id_len;
	uint8_t build_id[20];
	uint32_t maj, min; /* when !has_build_id */
	uint64_t ino;
	const char *filename; /* NUL-terminated within the record */
	bool exec;	      /* PERF_RECORD_MISC_MMAP_DATA not set */
	struct fx_record_id id;
};

struct fx_record_comm {
	uint32_t pid, tid;
	const char *comm;
	bool exec; /* PERF_RECORD_MISC_COMM_EXEC */
	struct fx_record_id id;
};

struct fx_record_task { /* FORK and EXIT */
	uint32_t pid, ppid, tid, ptid;
	uint64_t time;
	struct fx_record_id id;
};

struct fx_record_lost { /* LOST and LOST_SAMPLES */
	uint64_t lost;
	struct fx_record_id id;
};

/* Off-CPU waits (offcpu.h): not the kernel's records, the agent's own.
 * FX_RECORD_OFFCPU is a drawn wait's start: its state, the cgroup target's
 * tag, its two probabilities and its flags (4 bytes each, and 4 of
 * padding), then a whole PERF_RECORD_SAMPLE of the sampler's format (header
 * included) with the stacks it waits in, stamped when it left the CPU.
 * FX_RECORD_OFFCPU_END is the same wait's end: when it was woken, when it
 * ran again, its weight. */
#define FX_RECORD_OFFCPU     0x7f01
#define FX_RECORD_OFFCPU_END 0x7f02
/* In cgroup mode the inner sample's PERF_SAMPLE_IDENTIFIER is this bit and
 * the target's tag: no event of the kernel's has an id this high. */
#define FX_RECORD_OFFCPU_ID (1ull << 63)

struct fx_record_offcpu {
	uint32_t state; /* enum fx_offcpu_state_kind (offcpu.h) */
	uint32_t tag;	/* the cgroup target's tag, or UINT32_MAX */
	uint32_t p;	/* the probability it was drawn with, of FX_RECORD_OFFCPU_P1 */
	/* ... and its stacks copied with; 0: none were (over the budget): the
	 * wait is timed only, s has no callchain and no stack */
	uint32_t q;
	bool seeded; /* waiting when recording began: s.time is then */
	struct fx_record_sample s;
};
#define FX_RECORD_OFFCPU_P1	65536
#define FX_RECORD_OFFCPU_SEEDED 2u /* the flag's bit: offcpu_int.h's */

struct fx_record_offcpu_end {
	uint32_t pid, tid;
	uint64_t t_out, t_in; /* CLOCK_MONOTONIC ns: the wait */
	uint64_t t_wake;      /* woken then, on a run queue until t_in; 0: not seen */
	uint64_t weight_ns;   /* the off-CPU time it stands for */
	uint32_t state, tag;
};

int fx_record_offcpu(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
		     struct fx_record_offcpu *out);
int fx_record_offcpu_end(const struct perf_event_header *h, struct fx_record_offcpu_end *out);

int fx_record_sample(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
		     struct fx_record_sample *out);
int fx_record_mmap2(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
		    struct fx_record_mmap *out);
int fx_record_comm(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
		   struct fx_record_comm *out);
int fx_record_task(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
		   struct fx_record_task *out);
int fx_record_lost(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
		   struct fx_record_lost *out);

/* The time of any record: the sample's time (an off-CPU wait's start or end), or the trailer's for
 * side-band records; 0 when the record carries none. */
uint64_t fx_record_time(const struct fx_record_fmt *fmt, const struct perf_event_header *h);

/* Asks the CPU to fetch the lines that handling a sample laid out as @h
 * reads first (registers, the stack copy's start, its dyn_size), of the
 * record at @at: @h itself, or where the record after it begins (a guess
 * that it is laid out the same: a prefetch of the wrong line costs nothing
 * but the fetch). Reads only @h's fixed fields and callchain length. At a big
 * host's rate the rings hold tens of MiB, read back from memory: the load
 * of a sample's dyn_size alone, 16 KiB past its header, was a tenth of the
 * agent's CPU. */
void fx_record_prefetch(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
			const uint8_t *at);

#endif
