/* SPDX-License-Identifier: MIT */
/* ringplan: how large the perf rings are, how much memory they lock, and
 * whether the kernel lets this process lock it.
 *
 * Size: a CPU's ring must hold what that CPU writes while the sampler is not
 * reading it. The sampler reads every ring when one is a quarter full (the
 * wakeup watermark) and at least every drain interval (its poll timeout), and
 * then spends a while unwinding what it read; so a ring holds HEADROOM drain
 * intervals of records at the sampling rate (bursts, a sampler that is late
 * or descheduled), and never fewer than MIN_RECORDS of the largest records:
 * below that the kernel drops samples without a LOST record. Then rounded up
 * to a power of two of pages (the kernel wants one), at least MIN_PAGES and
 * at most MAX_BYTES (the largest sampling.ring_size). The rate is per CPU, so
 * 2 CPUs sampled at N x 99 / 2 Hz (a big host's rate, emulated) get the
 * rings that rate needs.
 *
 * Locked memory (kernel/events/core.c, perf_mmap): a ring's pages and its
 * header page count as locked. Each user may lock kernel.perf_event_mlock_kb
 * per online CPU of perf rings, summed over all of that user's processes;
 * what goes beyond is charged to the mapping process's RLIMIT_MEMLOCK, and
 * the mmap fails with EPERM past that, unless the process has CAP_IPC_LOCK
 * (root has it) or kernel.perf_event_paranoid is -1.
 */
#ifndef FXAGENT_RINGPLAN_H
#define FXAGENT_RINGPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FX_RINGPLAN_HEADROOM	2
#define FX_RINGPLAN_MIN_RECORDS 32
#define FX_RINGPLAN_MIN_PAGES	64
#define FX_RINGPLAN_MAX_BYTES	(64ull << 20)

/* Data pages of one CPU's ring for @frequency samples per second per CPU of
 * at most @record_bytes each, read at least every @drain_ms: the smallest
 * power of two of @page-byte pages that holds HEADROOM x @drain_ms of records
 * and MIN_RECORDS records, within [MIN_PAGES, MAX_BYTES]. */
size_t fx_ringplan_pages(unsigned frequency, size_t record_bytes, unsigned drain_ms, size_t page);

/* What bounds the memory this process may lock for perf rings. */
struct fx_ringplan_limits {
	uint64_t rlimit;   /* RLIMIT_MEMLOCK (soft), bytes; UINT64_MAX: unlimited */
	uint64_t mlock_kb; /* kernel.perf_event_mlock_kb, per CPU */
	int paranoid;	   /* kernel.perf_event_paranoid; -1 lifts the limits */
	bool ipc_lock;	   /* CAP_IPC_LOCK is effective: no limit applies */
	bool root;	   /* effective uid 0, for the message */
};

/* This process's limits: getrlimit(2), /proc/sys/kernel and capget(2). A
 * value that cannot be read gets the kernel's default (perf_event_mlock_kb
 * 512 KiB + a page, paranoid 2, no CAP_IPC_LOCK). */
void fx_ringplan_read_limits(struct fx_ringplan_limits *out);

struct fx_ringplan {
	unsigned cpus;	   /* rings: one per online CPU */
	size_t page;	   /* bytes */
	size_t ring_pages; /* data pages per ring */
	uint64_t locked;   /* bytes: cpus x (ring_pages + 1) pages */
	/* Bytes the user may lock without RLIMIT_MEMLOCK: perf_event_mlock_kb,
	 * in whole pages, per CPU; and what goes beyond, charged to it. */
	uint64_t allowance;
	uint64_t charged;
};

/* The plan of @cpus rings of @ring_pages data pages under @lim. */
void fx_ringplan_make(unsigned cpus, size_t ring_pages, size_t page,
		      const struct fx_ringplan_limits *lim, struct fx_ringplan *out);

/* Whether the kernel will let this process map @p's rings, assuming the user
 * locks no other perf rings meanwhile. Writes one line into @msg (@len bytes)
 * in every case: the plan and the limits; when it does not fit, also what is
 * needed and how to raise each limit. Returns 0 (fits), 1 (over the limits,
 * allowed by CAP_IPC_LOCK or perf_event_paranoid -1) or -EPERM (refused). */
int fx_ringplan_check(const struct fx_ringplan *p, const struct fx_ringplan_limits *lim, char *msg,
		      size_t len);

/* @bytes as "516 KiB", "1 MiB", "128.5 MiB", "4 GiB" into @buf; returns @buf. */
const char *fx_ringplan_size(uint64_t bytes, char *buf, size_t len);

#endif
