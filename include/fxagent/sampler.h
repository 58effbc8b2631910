/* SPDX-License-Identifier: MIT */
/* sampler: one perf_event_open cpu-clock event per online CPU, and their rings.
 *
 * Each event samples every task on its CPU at `frequency` Hz with callchains
 * and carries the side-band records (MMAP2, COMM, FORK, EXIT) of that CPU.
 * fx_sampler_poll() drains every ring, orders the records of all CPUs by time
 * (each ring is ordered, the rings are not ordered with each other) and hands
 * them to a callback.
 */
#ifndef FXAGENT_SAMPLER_H
#define FXAGENT_SAMPLER_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fxagent/record.h"
#include "fxagent/ringplan.h"

/* The longest the agent's loop waits in fx_sampler_poll() (its timeout): the
 * rings are drained at least this often, and sooner when one is a quarter
 * full. The ring sizes are planned on it (ringplan.h). */
#define FX_SAMPLER_DRAIN_MS 200

struct fx_sampler_opts {
	unsigned frequency; /* Hz */
	bool kernel;	    /* kernel callchains */
	/* User stacks from registers and a stack copy of stack_bytes (a multiple
	 * of 8) for DWARF unwinding, instead of frame-pointer callchains. */
	bool user_regs_stack;
	uint32_t stack_bytes;
	/* Data pages per CPU ring, a power of two; 0 = fx_sampler_ring_pages(),
	 * sized for the rate and the records (ringplan.h). */
	size_t ring_pages;
	/* Sample only the cgroups added with fx_sampler_add_cgroup(): the
	 * per-CPU events are then side-band-only dummies whose rings the cgroup
	 * events write into, and samples carry the id of their event. */
	bool cgroups;
};

struct fx_sampler_stats {
	uint64_t records;
	uint64_t samples;
	uint64_t corrupt;  /* ring reads ended by an impossible record */
	unsigned cpus;	   /* events opened */
	size_t ring_pages; /* data pages per CPU ring */
	uint64_t locked;   /* bytes of all rings, header pages included */
	bool build_id;	   /* MMAP2 records carry build-ids */
};

typedef void (*fx_sampler_fn)(void *ctx, const struct perf_event_header *h);

struct fx_sampler;

/* Opens (disabled) one event per online CPU; offline CPUs are skipped.
 * Returns 0 and sets @out, or -errno. The rings' plan is logged at info; one
 * this process may not lock is refused before any event is opened (-EPERM,
 * the message says which limits and how to raise them). On -EACCES/-EPERM
 * from the kernel the message says which privilege is missing and how to
 * get it. */
int fx_sampler_open(const struct fx_sampler_opts *opts, struct fx_sampler **out);
void fx_sampler_free(struct fx_sampler *s);

int fx_sampler_enable(struct fx_sampler *s);
int fx_sampler_disable(struct fx_sampler *s);

const struct fx_record_fmt *fx_sampler_fmt(const struct fx_sampler *s);

/* Waits up to @timeout_ms for data (0: do not wait), then drains every ring
 * and calls @fn for each record in time order, up to the time of the call:
 * records stamped later wait for the next call, so that no record handed out
 * is older than one handed out before. Returns the number of records handed
 * out, or -errno (-EINTR is returned as 0). */
int fx_sampler_poll(struct fx_sampler *s, int timeout_ms, fx_sampler_fn fn, void *ctx);

/* Hands out everything left, held records included (after disabling).
 * Returns how many records were handed out, or -errno. */
int fx_sampler_flush(struct fx_sampler *s, fx_sampler_fn fn, void *ctx);

void fx_sampler_get_stats(const struct fx_sampler *s, struct fx_sampler_stats *out);

/* The largest record these options produce: the fixed fields, a full
 * callchain, and in DWARF mode the registers and the stack copy. */
size_t fx_sampler_record_bytes(const struct fx_sampler_opts *opts);

/* The ring size fx_sampler_open() picks when opts->ring_pages is 0:
 * fx_ringplan_pages() for opts->frequency, fx_sampler_record_bytes() and
 * FX_SAMPLER_DRAIN_MS. */
size_t fx_sampler_ring_pages(const struct fx_sampler_opts *opts);

/* The rings fx_sampler_open() would map for @opts, one per online CPU, and
 * whether this process may lock them: sets @out and writes two lines into
 * @msg (@len bytes): how the ring size was chosen, and fx_ringplan_check()'s
 * line. Returns fx_ringplan_check()'s result (0, 1 or -EPERM), or -errno when
 * the online CPUs cannot be read. Logs nothing. */
int fx_sampler_plan(const struct fx_sampler_opts *opts, struct fx_ringplan *out, char *msg,
		    size_t len);

/* Cgroup mode: samples the cgroup v2 directory open on @cgroup_fd (and the
 * cgroups below it) with one event per CPU, enabled at once if sampling is;
 * their samples' ids map to @tag (fx_sampler_tag). With @off_cpu, and an
 * off-CPU module taken, their threads' waits are watched too, tagged @tag.
 * The fd is not kept. Returns 0 or -errno. */
int fx_sampler_add_cgroup(struct fx_sampler *s, int cgroup_fd, uint32_t tag, bool off_cpu);
/* Closes the events of @tag. */
void fx_sampler_remove_cgroup(struct fx_sampler *s, uint32_t tag);
/* The tag of the event with sample id @id, or UINT32_MAX. */
uint32_t fx_sampler_tag(const struct fx_sampler *s, uint64_t id);

struct fx_offcpu;
/* Takes @o (offcpu.h): its records are merged into those handed out, in
 * time order; it is enabled and disabled with the sampler, watches the
 * cgroups added (cgroup mode), and is freed with it. An @o that cannot be
 * enabled is freed, with a warning: CPU sampling goes on. */
void fx_sampler_set_offcpu(struct fx_sampler *s, struct fx_offcpu *o);
/* The off-CPU module taken, or NULL; to read its counters and threads
 * (fx_offcpu_tally()) from the sampler's thread. */
struct fx_offcpu *fx_sampler_offcpu(const struct fx_sampler *s);

/* Parses a CPU list like "0-3,5,7-8" into a bitmap of @max bits. Returns the
 * number of CPUs set, or -EINVAL. */
int fx_sampler_parse_cpus(const char *list, uint8_t *bitmap, unsigned max);

#endif
