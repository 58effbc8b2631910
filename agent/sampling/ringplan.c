/* SPDX-License-Identifier: MIT */
#include "fxagent/ringplan.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define KIB (1024ull)
#define MIB (1024ull * KIB)
#define GIB (1024ull * MIB)

size_t fx_ringplan_pages(unsigned frequency, size_t record_bytes, unsigned drain_ms, size_t page)
{
	/* Records one CPU writes in HEADROOM drain intervals, rounded up. */
	uint64_t records = ((uint64_t)frequency * drain_ms * FX_RINGPLAN_HEADROOM + 999) / 1000;
	size_t pages = FX_RINGPLAN_MIN_PAGES;

	if (records < FX_RINGPLAN_MIN_RECORDS)
		records = FX_RINGPLAN_MIN_RECORDS;
	while ((uint64_t)pages * page < records * record_bytes &&
	       (uint64_t)pages * 2 * page <= FX_RINGPLAN_MAX_BYTES)
		pages *= 2;
	return pages;
}

static int read_ll(const char *path, long long *out)
{
	FILE *f = fopen(path, "re");
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%lld", out) == 1;
	fclose(f);
	return ok ? 0 : -EINVAL;
}

void fx_ringplan_read_limits(struct fx_ringplan_limits *out)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { { 0 } };
	struct rlimit rl;
	long long v = 0;

	*out = (struct fx_ringplan_limits){
		.mlock_kb = 512 + (uint64_t)sysconf(_SC_PAGESIZE) / 1024,
		.paranoid = 2,
		.root = geteuid() == 0,
	};
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0)
		out->rlimit = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
	if (read_ll("/proc/sys/kernel/perf_event_mlock_kb", &v) == 0 && v >= 0)
		out->mlock_kb = (uint64_t)v;
	if (read_ll("/proc/sys/kernel/perf_event_paranoid", &v) == 0 && v >= -1 && v < 100)
		out->paranoid = (int)v;
	if (syscall(SYS_capget, &hdr, data) == 0)
		out->ipc_lock = data[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32));
}

void fx_ringplan_make(unsigned cpus, size_t ring_pages, size_t page,
		      const struct fx_ringplan_limits *lim, struct fx_ringplan *out)
{
	/* As perf_mmap() counts: pages, the allowance in whole pages. */
	uint64_t pages = (uint64_t)cpus * (ring_pages + 1);
	uint64_t allow = lim->mlock_kb / (page / KIB) * cpus;

	*out = (struct fx_ringplan){
		.cpus = cpus,
		.page = page,
		.ring_pages = ring_pages,
		.locked = pages * page,
		.allowance = allow * page,
		.charged = pages > allow ? (pages - allow) * page : 0,
	};
}

const char *fx_ringplan_size(uint64_t bytes, char *buf, size_t len)
{
	if (bytes >= GIB && bytes % GIB == 0)
		snprintf(buf, len, "%llu GiB", (unsigned long long)(bytes / GIB));
	else if (bytes >= 4 * GIB)
		snprintf(buf, len, "%.2f GiB", (double)bytes / (double)GIB);
	else if (bytes >= MIB && bytes % MIB == 0)
		snprintf(buf, len, "%llu MiB", (unsigned long long)(bytes / MIB));
	else if (bytes >= 16 * MIB)
		snprintf(buf, len, "%.2f MiB", (double)bytes / (double)MIB);
	else
		snprintf(buf, len, "%llu KiB", (unsigned long long)((bytes + KIB - 1) / KIB));
	return buf;
}

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

int fx_ringplan_check(const struct fx_ringplan *p, const struct fx_ringplan_limits *lim, char *msg,
		      size_t len)
{
	char ring[32], locked[32], allow[32], charged[32], rl[32];
	bool over = p->charged && lim->rlimit != UINT64_MAX && p->charged > lim->rlimit;
	int n;

	fx_ringplan_size((uint64_t)p->ring_pages * p->page, ring, sizeof(ring));
	fx_ringplan_size(p->locked, locked, sizeof(locked));
	fx_ringplan_size(p->allowance, allow, sizeof(allow));
	fx_ringplan_size(p->charged, charged, sizeof(charged));
	if (lim->rlimit == UINT64_MAX)
		snprintf(rl, sizeof(rl), "unlimited");
	else
		fx_ringplan_size(lim->rlimit, rl, sizeof(rl));
	if (over && !lim->ipc_lock && lim->paranoid >= 0) {
		/* With RLIMIT_MEMLOCK alone, or kernel.perf_event_mlock_kb alone. */
		uint64_t need_kib = div_up(p->charged, KIB);
		uint64_t need_mlock = div_up((uint64_t)(p->ring_pages + 1) * p->page, KIB);

		snprintf(msg, len,
			 "cannot lock the perf rings: %u CPU%s x (%s + a %zu KiB header) = %s, "
			 "more than this user may lock: kernel.perf_event_mlock_kb %llu KiB x "
			 "%u CPUs = %s, plus RLIMIT_MEMLOCK %s for the rest (%s needed); raise "
			 "RLIMIT_MEMLOCK to at least %llu KiB (LimitMEMLOCK=%lluM in the systemd "
			 "unit, ulimit -l %llu), or kernel.perf_event_mlock_kb to at least %llu "
			 "(sysctl kernel.perf_event_mlock_kb=%llu), or grant CAP_IPC_LOCK; or make "
			 "the rings smaller (sampling.ring_size, sampling.stack_bytes, "
			 "sampling.frequency)",
			 p->cpus, p->cpus == 1 ? "" : "s", ring, (size_t)(p->page / KIB), locked,
			 (unsigned long long)lim->mlock_kb, p->cpus, allow, rl, charged,
			 (unsigned long long)need_kib, (unsigned long long)div_up(p->charged, MIB),
			 (unsigned long long)need_kib, (unsigned long long)need_mlock,
			 (unsigned long long)need_mlock);
		return -EPERM;
	}
	n = snprintf(msg, len, "perf rings: %u CPU%s x (%s + a %zu KiB header) = %s locked",
		     p->cpus, p->cpus == 1 ? "" : "s", ring, (size_t)(p->page / KIB), locked);
	if (n < 0 || (size_t)n >= len)
		return over ? 1 : 0;
	if (!p->charged)
		snprintf(msg + n, len - (size_t)n,
			 ", within kernel.perf_event_mlock_kb (%llu KiB x %u CPUs = %s)",
			 (unsigned long long)lim->mlock_kb, p->cpus, allow);
	else
		snprintf(msg + n, len - (size_t)n,
			 "; %s beyond kernel.perf_event_mlock_kb (%llu KiB x %u CPUs = %s) %s "
			 "RLIMIT_MEMLOCK (%s)%s",
			 charged, (unsigned long long)lim->mlock_kb, p->cpus, allow,
			 over ? "is over" : "is charged to", rl,
			 !over		 ? ""
			 : lim->ipc_lock ? (lim->root ? ", allowed to root (CAP_IPC_LOCK)"
						      : ", allowed by CAP_IPC_LOCK")
					 : ", allowed by kernel.perf_event_paranoid -1");
	return over ? 1 : 0;
}
