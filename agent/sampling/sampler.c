/* SPDX-License-Identifier: MIT */
#include "fxagent/sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/dwunwind.h"
#include "fxagent/log.h"
#include "fxagent/offcpu.h"
#include "fxagent/ring.h"
#include "fxagent/util.h"

#define MAX_CPUS 4096

struct cpu_event {
	int fd;
	unsigned cpu;
	void *map;
	size_t map_len;
	struct fx_ring ring;
	/* drain(): the ring's next record (read, not handed out yet) */
	const struct perf_event_header *next;
	uint64_t next_time;
};

/* An event on a cgroup, writing into its CPU's ring. */
struct cg_event {
	uint64_t id;
	int fd;
	uint32_t tag;
};

struct fx_sampler {
	struct fx_sampler_opts opts;
	struct fx_record_fmt fmt;
	struct cpu_event *ev;
	unsigned nev;
	struct pollfd *pfd;
	struct cg_event *cg; /* sorted by id */
	size_t ncg, cg_cap;
	bool enabled;
	bool map_refused;	  /* a ring's mmap hit the locked-memory limits (logged) */
	struct fx_offcpu *offcpu; /* off-CPU waits, or NULL */
	struct fx_sampler_stats stats;
};

static int perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group,
			   unsigned long flags)
{
	return (int)syscall(SYS_perf_event_open, attr, pid, cpu, group, flags);
}

int fx_sampler_parse_cpus(const char *list, uint8_t *bitmap, unsigned max)
{
	const char *p = list;
	int count = 0;

	memset(bitmap, 0, (max + 7) / 8);
	while (*p && *p != '\n') {
		char *end;
		unsigned long a, b;

		errno = 0;
		a = strtoul(p, &end, 10);
		if (end == p || errno)
			return -EINVAL;
		b = a;
		p = end;
		if (*p == '-') {
			p++;
			b = strtoul(p, &end, 10);
			if (end == p || errno || b < a)
				return -EINVAL;
			p = end;
		}
		if (b >= max)
			return -EINVAL;
		for (unsigned long c = a; c <= b; c++) {
			if (!(bitmap[c / 8] & (1u << (c % 8))))
				count++;
			bitmap[c / 8] |= (uint8_t)(1u << (c % 8));
		}
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			return -EINVAL;
	}
	return count;
}

static int online_cpus(uint8_t *bitmap)
{
	char buf[4096];
	ssize_t n;
	int fd = open("/sys/devices/system/cpu/online", O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		long c = sysconf(_SC_NPROCESSORS_CONF);

		memset(bitmap, 0, MAX_CPUS / 8);
		for (long i = 0; i < c && i < MAX_CPUS; i++)
			bitmap[i / 8] |= (uint8_t)(1u << (i % 8));
		return c > 0 ? (int)c : -EINVAL;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	return fx_sampler_parse_cpus(buf, bitmap, MAX_CPUS);
}

size_t fx_sampler_record_bytes(const struct fx_sampler_opts *opts)
{
	/* Header, fixed fields and a full callchain (PERF_MAX_STACK_DEPTH 127 and
	 * context markers), plus registers and the stack copy in DWARF mode:
	 * the kernel writes the whole copy, whatever part of it is stack. */
	size_t record = 64 + 8 * 136;

	if (opts->user_regs_stack)
		record += 8 + 8 * FX_DWUNWIND_NREGS + 16 + opts->stack_bytes;
	return record;
}

size_t fx_sampler_ring_pages(const struct fx_sampler_opts *opts)
{
	return fx_ringplan_pages(opts->frequency, fx_sampler_record_bytes(opts),
				 FX_SAMPLER_DRAIN_MS, (size_t)sysconf(_SC_PAGESIZE));
}

/* Says how the ring size of @ring_pages came about, then plans the rings of
 * @cpus CPUs and checks them against this process's limits. */
static int plan(const struct fx_sampler_opts *opts, size_t ring_pages, unsigned cpus,
		struct fx_ringplan *out, char *msg, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t rule = fx_sampler_ring_pages(opts);
	struct fx_ringplan_limits lim;
	char ring[32], want[32];
	int n;

	fx_ringplan_size((uint64_t)ring_pages * page, ring, sizeof(ring));
	fx_ringplan_size((uint64_t)rule * page, want, sizeof(want));
	if (ring_pages != rule)
		n = snprintf(msg, len,
			     "perf ring per CPU: %s, from sampling.ring_size (%s for the rate)\n",
			     ring, want);
	else
		n = snprintf(msg, len,
			     "perf ring per CPU: %s, for %u Hz x %zu-byte records x %d x %d ms "
			     "between drains (at least %d records, %d pages; at most %llu MiB)\n",
			     ring, opts->frequency, fx_sampler_record_bytes(opts),
			     FX_RINGPLAN_HEADROOM, FX_SAMPLER_DRAIN_MS, FX_RINGPLAN_MIN_RECORDS,
			     FX_RINGPLAN_MIN_PAGES, FX_RINGPLAN_MAX_BYTES >> 20);
	if (n < 0 || (size_t)n >= len)
		n = 0;
	fx_ringplan_read_limits(&lim);
	fx_ringplan_make(cpus, ring_pages, page, &lim, out);
	return fx_ringplan_check(out, &lim, msg + n, len - (size_t)n);
}

int fx_sampler_plan(const struct fx_sampler_opts *opts, struct fx_ringplan *out, char *msg,
		    size_t len)
{
	uint8_t bitmap[MAX_CPUS / 8];
	int n = online_cpus(bitmap);

	if (n <= 0)
		return n < 0 ? n : -EIO;
	return plan(opts, opts->ring_pages ? opts->ring_pages : fx_sampler_ring_pages(opts),
		    (unsigned)n, out, msg, len);
}

static int permission_error(int err)
{
	struct fx_ringplan_limits lim;

	fx_ringplan_read_limits(&lim);
	return fx_log_errno(FX_LOG_ERR, err,
			    "cannot open perf events (whole-system profiling needs root or "
			    "CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8), and CAP_SYSLOG for "
			    "kernel symbols; kernel.perf_event_paranoid is %d and must be -1 "
			    "without CAP_PERFMON: sysctl kernel.perf_event_paranoid=-1; run as "
			    "root, or grant the capabilities: setcap cap_perfmon,cap_syslog+ep "
			    "fxagent)",
			    lim.paranoid);
}

/* The attributes of every event. In cgroup mode, @kind says which: the
 * per-CPU side-band dummy (owner of the ring) or a cgroup's sampling event. */
enum event_kind { EV_SYSTEM, EV_SIDEBAND, EV_CGROUP };

static void fill_attr(const struct fx_sampler_opts *opts, struct perf_event_attr *a, bool build_id,
		      enum event_kind kind)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_CPU_CLOCK;
	a->freq = 1;
	a->sample_freq = opts->frequency;
	a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
			 PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN;
	a->exclude_callchain_kernel = !opts->kernel;
	if (opts->user_regs_stack) {
		a->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
		a->sample_regs_user = FX_DWUNWIND_REGS_MASK;
		a->sample_stack_user = opts->stack_bytes;
		/* The user callchain too: where a frame is bigger than what is
		 * left of the copy, its frame-pointer links carry the walk on
		 * (dwunwind.h). */
	}
	a->disabled = 1;
	a->mmap = 1;
	a->mmap2 = 1;
	a->comm = 1;
	a->comm_exec = 1;
	a->task = 1;
	a->sample_id_all = 1;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->build_id = build_id;
	if (kind != EV_SYSTEM)
		a->sample_type |= PERF_SAMPLE_IDENTIFIER;
	if (kind == EV_SIDEBAND) {
		a->config = PERF_COUNT_SW_DUMMY;
		a->freq = 0;
		a->sample_period = 0;
	}
	if (kind == EV_CGROUP) {
		/* Side-band comes from the dummy, for every task, not only while
		 * one of the cgroup runs. */
		a->mmap = a->mmap2 = a->comm = a->comm_exec = a->task = 0;
		a->build_id = 0;
		a->disabled = 0;
	}
	/* Wake up when a quarter of the ring is used; poll's timeout does the rest. */
	a->watermark = 1;
	a->wakeup_watermark = (uint32_t)(opts->ring_pages * (size_t)sysconf(_SC_PAGESIZE) / 4);
}

static int open_cpu(struct fx_sampler *s, unsigned cpu, struct cpu_event *ev)
{
	struct perf_event_attr attr;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	int fd, ret;

	enum event_kind kind = s->opts.cgroups ? EV_SIDEBAND : EV_SYSTEM;

	fill_attr(&s->opts, &attr, s->stats.build_id, kind);
	fd = perf_event_open(&attr, -1, (int)cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0 && errno == EINVAL && s->stats.build_id) {
		/* Kernels before 5.12 do not know attr.build_id. */
		s->stats.build_id = false;
		fill_attr(&s->opts, &attr, false, kind);
		fd = perf_event_open(&attr, -1, (int)cpu, -1, PERF_FLAG_FD_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	ev->fd = fd;
	ev->cpu = cpu;
	ev->map_len = (s->opts.ring_pages + 1) * page;
	ev->map = mmap(NULL, ev->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ev->map == MAP_FAILED) {
		ret = -errno;
		/* check_rings() found the plan within the limits: other
		 * processes of this user hold perf rings too (they count
		 * against its kernel.perf_event_mlock_kb), or a limit changed. */
		if (ret == -EPERM && !s->map_refused) {
			struct fx_ringplan_limits lim;
			char rl[32];

			fx_ringplan_read_limits(&lim);
			if (lim.rlimit == UINT64_MAX)
				snprintf(rl, sizeof(rl), "unlimited");
			else
				fx_ringplan_size(lim.rlimit, rl, sizeof(rl));
			fx_log(FX_LOG_ERR,
			       "cannot map the perf ring of CPU %u (%zu KiB): over the "
			       "locked-memory limits (kernel.perf_event_mlock_kb %llu KiB per CPU "
			       "for all of this user's perf rings, then RLIMIT_MEMLOCK %s); other "
			       "processes of this user may hold perf rings: raise RLIMIT_MEMLOCK "
			       "(LimitMEMLOCK= in the systemd unit, ulimit -l) or "
			       "kernel.perf_event_mlock_kb (sysctl), or make the rings smaller "
			       "(sampling.ring_size, sampling.stack_bytes, sampling.frequency)",
			       cpu, ev->map_len / 1024, (unsigned long long)lim.mlock_kb, rl);
			s->map_refused = true;
		}
		ev->map = NULL;
		close(fd);
		ev->fd = -1;
		return ret;
	}
	ret = fx_ring_init(&ev->ring, ev->map, page, s->opts.ring_pages * page);
	if (ret < 0) {
		munmap(ev->map, ev->map_len);
		ev->map = NULL;
		close(fd);
		ev->fd = -1;
	}
	return ret;
}

/* A ring_size override under what the rate needs: said once, at open. */
static void warn_small_ring(const struct fx_sampler_opts *opts)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), rule = fx_sampler_ring_pages(opts);
	uint64_t bytes = (uint64_t)opts->ring_pages * page;
	char ring[32], want[32];

	if (opts->ring_pages >= rule)
		return;
	fx_ringplan_size(bytes, ring, sizeof(ring));
	fx_ringplan_size((uint64_t)rule * page, want, sizeof(want));
	if (bytes < (uint64_t)FX_RINGPLAN_MIN_RECORDS * fx_sampler_record_bytes(opts))
		fx_log(FX_LOG_WARN,
		       "perf rings of %s per CPU hold fewer than %d of the largest records: "
		       "samples will be lost under load (%s would do)",
		       ring, FX_RINGPLAN_MIN_RECORDS, want);
	else
		fx_log(FX_LOG_WARN,
		       "perf rings of %s per CPU (sampling.ring_size) are smaller than the %s "
		       "that %u Hz needs: samples may be lost under load",
		       ring, want, opts->frequency);
}

/* The locked memory of the rings against what this process may lock: the
 * plan goes to the info log, and one the kernel would refuse is refused
 * here, with the limits to raise, rather than by a bare EPERM of mmap. */
static int check_rings(struct fx_sampler *s, unsigned cpus)
{
	struct fx_ringplan p;
	char msg[2048];
	int ret = plan(&s->opts, s->opts.ring_pages, cpus, &p, msg, sizeof(msg));
	const char *nl = strchr(msg, '\n');

	/* Two lines: how the size came about, then the locked memory. */
	fx_log(FX_LOG_INFO, "%.*s", nl ? (int)(nl - msg) : 0, msg);
	fx_log(ret < 0 ? FX_LOG_ERR : FX_LOG_INFO, "%s", nl ? nl + 1 : msg);
	if (ret < 0)
		return ret;
	s->stats.locked = p.locked;
	return 0;
}

int fx_sampler_open(const struct fx_sampler_opts *opts, struct fx_sampler **out)
{
	uint8_t bitmap[MAX_CPUS / 8];
	struct fx_sampler *s;
	int n, ret = 0;

	if (!opts->frequency || (opts->ring_pages & (opts->ring_pages - 1)) ||
	    (opts->user_regs_stack && (!opts->stack_bytes || opts->stack_bytes % 8))) {
		fx_err("invalid sampler options: frequency must be > 0, ring pages a power of "
		       "two and the stack copy a multiple of 8 bytes");
		return -EINVAL;
	}
	n = online_cpus(bitmap);
	if (n <= 0)
		return fx_log_errno(FX_LOG_ERR, n < 0 ? -n : EIO,
				    "cannot read the list of online CPUs");
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->opts = *opts;
	if (!s->opts.ring_pages)
		s->opts.ring_pages = fx_sampler_ring_pages(opts);
	else
		warn_small_ring(opts);
	ret = check_rings(s, (unsigned)n);
	if (ret < 0)
		goto fail;
	s->stats.ring_pages = s->opts.ring_pages;
	s->stats.build_id = true;
	s->ev = calloc((size_t)n, sizeof(*s->ev));
	/* and one for the off-CPU ring (fx_sampler_set_offcpu()) */
	s->pfd = calloc((size_t)n + 1, sizeof(*s->pfd));
	if (!s->ev || !s->pfd) {
		ret = -ENOMEM;
		goto fail;
	}
	for (unsigned cpu = 0; cpu < MAX_CPUS && s->nev < (unsigned)n; cpu++) {
		if (!(bitmap[cpu / 8] & (1u << (cpu % 8))))
			continue;
		ret = open_cpu(s, cpu, &s->ev[s->nev]);
		if (ret == -ENODEV)
			continue; /* went offline meanwhile */
		if ((ret == -EACCES || ret == -EPERM) && !s->map_refused) {
			permission_error(-ret);
			goto fail;
		}
		if (ret < 0) {
			if (!s->map_refused)
				ret = fx_log_errno(FX_LOG_ERR, -ret,
						   "cannot open a cpu-clock event on CPU %u", cpu);
			goto fail;
		}
		s->pfd[s->nev] = (struct pollfd){ .fd = s->ev[s->nev].fd, .events = POLLIN };
		s->nev++;
	}
	if (!s->nev) {
		fx_err("no online CPU could be sampled");
		ret = -ENODEV;
		goto fail;
	}
	s->stats.cpus = s->nev;
	s->fmt = (struct fx_record_fmt){
		.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			       PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN,
		.sample_id_all = true,
	};
	if (opts->user_regs_stack) {
		s->fmt.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
		s->fmt.regs_user_mask = FX_DWUNWIND_REGS_MASK;
	}
	if (opts->cgroups)
		s->fmt.sample_type |= PERF_SAMPLE_IDENTIFIER;
	*out = s;
	return 0;
fail:
	fx_sampler_free(s);
	return ret;
}

void fx_sampler_free(struct fx_sampler *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->nev; i++) {
		fx_ring_release(&s->ev[i].ring);
		/* s->ev holds nev events; the analyzer loses the calloc()ed nev 0 of
		 * a fx_sampler_open() that failed early.
		 * NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
		munmap(s->ev[i].map, s->ev[i].map_len);
		close(s->ev[i].fd);
	}
	free(s->ev);
	free(s->pfd);
	for (size_t i = 0; i < s->ncg; i++)
		close(s->cg[i].fd);
	free(s->cg);
	fx_offcpu_free(s->offcpu);
	free(s);
}

static const char *ioctl_verb(unsigned long req)
{
	return req == PERF_EVENT_IOC_ENABLE ? "enable" : "disable";
}

static int ioctl_all(struct fx_sampler *s, unsigned long req)
{
	for (unsigned i = 0; i < s->nev; i++)
		if (ioctl(s->ev[i].fd, req, 0) < 0)
			return fx_log_errno(FX_LOG_ERR, errno, "cannot %s the perf event of CPU %u",
					    ioctl_verb(req), s->ev[i].cpu);
	return 0;
}

static int ioctl_cgroups(struct fx_sampler *s, unsigned long req)
{
	for (size_t i = 0; i < s->ncg; i++)
		if (ioctl(s->cg[i].fd, req, 0) < 0)
			return fx_log_errno(FX_LOG_ERR, errno, "cannot %s a cgroup's perf event",
					    ioctl_verb(req));
	return 0;
}

int fx_sampler_enable(struct fx_sampler *s)
{
	int ret = ioctl_all(s, PERF_EVENT_IOC_ENABLE);
	char why[512];

	if (ret == 0)
		ret = ioctl_cgroups(s, PERF_EVENT_IOC_ENABLE);
	s->enabled = ret == 0;
	if (s->enabled && s->offcpu && fx_offcpu_enable(s->offcpu, why, sizeof(why)) < 0) {
		fx_log(FX_LOG_WARN, "off-CPU time is not recorded: %s; CPU profiling goes on", why);
		fx_offcpu_free(s->offcpu);
		s->offcpu = NULL;
	}
	return ret;
}

int fx_sampler_disable(struct fx_sampler *s)
{
	int ret;

	if (s->offcpu)
		fx_offcpu_disable(s->offcpu);
	ret = ioctl_cgroups(s, PERF_EVENT_IOC_DISABLE);

	if (ret == 0)
		ret = ioctl_all(s, PERF_EVENT_IOC_DISABLE);
	s->enabled = false;
	return ret;
}

static int cmp_cg(const void *a, const void *b)
{
	const struct cg_event *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

int fx_sampler_add_cgroup(struct fx_sampler *s, int cgroup_fd, uint32_t tag, bool off_cpu)
{
	struct perf_event_attr attr;
	size_t first = s->ncg;
	int ret = 0;

	if (!s->opts.cgroups)
		return -EINVAL;
	fill_attr(&s->opts, &attr, false, EV_CGROUP);
	attr.disabled = !s->enabled;
	for (unsigned i = 0; i < s->nev; i++) {
		struct cg_event *e;
		int fd;

		if (fx_grow(&s->cg, &s->cg_cap, s->ncg + 1, sizeof(*s->cg)) < 0) {
			ret = -ENOMEM;
			break;
		}
		fd = perf_event_open(&attr, cgroup_fd, (int)s->ev[i].cpu, -1,
				     PERF_FLAG_PID_CGROUP | PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			ret = -errno;
			break;
		}
		e = &s->cg[s->ncg];
		*e = (struct cg_event){ .fd = fd, .tag = tag };
		if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, s->ev[i].fd) < 0 ||
		    ioctl(fd, PERF_EVENT_IOC_ID, &e->id) < 0) {
			ret = -errno;
			close(fd);
			break;
		}
		s->ncg++;
	}
	if (ret < 0) {
		while (s->ncg > first)
			close(s->cg[--s->ncg].fd);
		return ret;
	}
	qsort(s->cg, s->ncg, sizeof(*s->cg), cmp_cg);
	if (s->offcpu && off_cpu) {
		struct stat st;

		/* A cgroup v2 id is its directory's inode number. */
		if (fstat(cgroup_fd, &st) < 0 ||
		    fx_offcpu_add_cgroup(s->offcpu, (uint64_t)st.st_ino, tag) < 0)
			fx_log(FX_LOG_WARN, "off-CPU waits of a cgroup are not recorded: %s",
			       strerror(errno));
		else
			fx_offcpu_seed_cgroup(s->offcpu, cgroup_fd, tag);
	}
	return 0;
}

void fx_sampler_remove_cgroup(struct fx_sampler *s, uint32_t tag)
{
	size_t n = 0;

	if (s->offcpu)
		fx_offcpu_remove_cgroup(s->offcpu, tag);
	for (size_t i = 0; i < s->ncg; i++) {
		if (s->cg[i].tag == tag)
			close(s->cg[i].fd);
		else
			s->cg[n++] = s->cg[i];
	}
	s->ncg = n;
}

uint32_t fx_sampler_tag(const struct fx_sampler *s, uint64_t id)
{
	size_t lo = 0, hi = s->ncg;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->cg[mid].id < id)
			lo = mid + 1;
		else if (s->cg[mid].id > id)
			hi = mid;
		else
			return s->cg[mid].tag;
	}
	return UINT32_MAX;
}

const struct fx_record_fmt *fx_sampler_fmt(const struct fx_sampler *s)
{
	return &s->fmt;
}

/* Reads the next record of @e's ring into e->next, unless it is newer than
 * @cut: that one stays in the ring for the next round. */
static void peek(struct fx_sampler *s, struct cpu_event *e, uint64_t cut)
{
	const struct perf_event_header *h = fx_ring_next(&e->ring);
	const uint8_t *ahead;

	e->next = NULL;
	if (!h)
		return;
	e->next_time = fx_record_time(&s->fmt, h);
	if (e->next_time > cut) {
		fx_ring_unread(&e->ring, h);
		return;
	}
	e->next = h;
	/* The lines this record's handling reads, and the next record's, laid
	 * out as this one probably: they come in while other records are
	 * handled (fx_record_prefetch). */
	fx_record_prefetch(&s->fmt, h, (const uint8_t *)h);
	ahead = fx_ring_ahead(&e->ring, h->size);
	if (ahead) {
		__builtin_prefetch(ahead);
		fx_record_prefetch(&s->fmt, h, ahead);
	}
}

/* Hands out, in time order, everything in the rings that is not newer than
 * @cut; newer records stay in their rings for the next round. A record
 * stamped before the cut is already in its ring when the rings are read
 * after the cut, so no later round brings an older record: a process's MMAP2
 * on one CPU is not handled after its sample on another.
 *
 * Each ring is in time order (one CPU's), so this is a merge of the rings,
 * read in place: no copy of the records (at a 128-CPU host's rate a round
 * holds tens of MiB of stack copies), and each record's space goes back to
 * the kernel as soon as it has been handled. Equal times: the lower CPU
 * first. */
static int drain(struct fx_sampler *s, uint64_t cut, fx_sampler_fn fn, void *ctx)
{
	size_t dispatched = 0;

	if (s->offcpu)
		fx_offcpu_read(s->offcpu);
	for (unsigned i = 0; i < s->nev; i++) {
		fx_ring_begin(&s->ev[i].ring);
		peek(s, &s->ev[i], cut);
	}
	for (;;) {
		struct cpu_event *best = NULL;
		const struct perf_event_header *off = NULL;
		uint64_t off_time = 0;

		for (unsigned i = 0; i < s->nev; i++)
			if (s->ev[i].next && (!best || s->ev[i].next_time < best->next_time))
				best = &s->ev[i];
		/* An off-CPU wait goes before a ring's record of the same time. */
		if (s->offcpu)
			off = fx_offcpu_peek(s->offcpu, best ? best->next_time : cut, &off_time);
		if (off) {
			s->stats.records++;
			fn(ctx, off);
			fx_offcpu_pop(s->offcpu);
			dispatched++;
			continue;
		}
		if (!best)
			break;
		s->stats.records++;
		if (best->next->type == PERF_RECORD_SAMPLE)
			s->stats.samples++;
		fn(ctx, best->next);
		dispatched++;
		fx_ring_end(&best->ring);
		peek(s, best, cut);
	}
	s->stats.corrupt = 0;
	for (unsigned i = 0; i < s->nev; i++) {
		fx_ring_end(&s->ev[i].ring);
		s->stats.corrupt += s->ev[i].ring.corrupt;
	}
	return (int)dispatched;
}

int fx_sampler_poll(struct fx_sampler *s, int timeout_ms, fx_sampler_fn fn, void *ctx)
{
	struct timespec ts;
	int ret;

	if (timeout_ms != 0) {
		ret = poll(s->pfd, s->nev + (s->offcpu != NULL), timeout_ms);
		if (ret < 0 && errno != EINTR)
			return -errno;
	}
	/* The records' clock (attr.clockid) */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return drain(s, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, fn, ctx);
}

int fx_sampler_flush(struct fx_sampler *s, fx_sampler_fn fn, void *ctx)
{
	return drain(s, UINT64_MAX, fn, ctx);
}

void fx_sampler_set_offcpu(struct fx_sampler *s, struct fx_offcpu *o)
{
	fx_offcpu_free(s->offcpu);
	s->offcpu = o;
	if (o)
		s->pfd[s->nev] = (struct pollfd){ .fd = fx_offcpu_poll_fd(o), .events = POLLIN };
}

struct fx_offcpu *fx_sampler_offcpu(const struct fx_sampler *s)
{
	return s->offcpu;
}

void fx_sampler_get_stats(const struct fx_sampler *s, struct fx_sampler_stats *out)
{
	*out = s->stats;
}
