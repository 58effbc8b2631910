/* SPDX-License-Identifier: MIT */
#include "fxagent/offcpu.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include "fxagent/util.h"
#include "offcpu_int.h"

/* The BPF object, compiled from offcpu.bpf.c and embedded by the build. */
extern const unsigned char fx_offcpu_bpf_obj[];
extern const size_t fx_offcpu_bpf_obj_len;

_Static_assert((int)FX_OFFCPU_SLEEP == (int)FX_OFFCPU_STATE_SLEEP &&
		       (int)FX_OFFCPU_DISK == (int)FX_OFFCPU_STATE_DISK &&
		       (int)FX_OFFCPU_RUNNABLE == (int)FX_OFFCPU_STATE_RUNNABLE,
	       "the BPF side's states are the header's");
_Static_assert(FX_OFFCPU_SEEDED == FX_RECORD_OFFCPU_SEEDED, "the seeded flag is the record's");

/* Records waiting for their turn: the ring is in the order the CPUs wrote,
 * the sampler wants time order. Bounded: past it, waits are counted as the
 * ring's drops. */
#define QUEUE_MAX 65536
/* The ring holds this long of the whole budget on every CPU (between two of
 * the sampler's drains, 200 ms), within these bounds. */
#define RING_MS 250
/* Waits in progress at attach whose stacks the iterator copies; the rest
 * are timed without (their threads' times still come from the kernel's
 * counters). The records wait in the queue until the sampler merges them,
 * a stack copy each: this bounds that to about 5 MiB. */
#define SEED_STACKS 256
#define SEEDS_MAX   65536 /* the seeds map's size */
#define RING_MIN    (256u << 10)
#define RING_MAX    (8u << 20)

struct qent {
	uint64_t time;
	struct perf_event_header *rec;
};

struct fx_offcpu {
	struct fx_offcpu_opts opts;
	struct fx_record_fmt fmt;
	struct bpf_object *obj;
	struct bpf_program *prog, *seed_prog, *tally_prog;
	struct fx_offcpu_thread *tally; /* fx_offcpu_tally()'s */
	size_t tally_cap;
	struct bpf_link *link;
	struct fx_offcpu_settings set; /* what the settings map holds */
	int settings_fd, seeds_fd;
	size_t nseeds; /* entries in the seeds map */
	struct ring_buffer *rb;
	int stats_fd, cgroups_fd, ring_fd;
	struct qent *q;
	size_t head, n, cap;
	uint64_t bad, queue_lost, queue_lost_ns;
	struct cg_tag {
		uint64_t id;
		uint32_t tag;
	} * cgs; /* the cgroups map's entries */
	size_t ncg, cg_cap;
	size_t ring_bytes;
	/* __schedule()'s text: a START's kernel stack begins above it, in the
	 * tracing that called the program, which is cut off */
	uint64_t sched_lo, sched_hi;
};

const char *fx_offcpu_state_name(uint32_t state)
{
	switch (state) {
	case FX_OFFCPU_STATE_SLEEP:
		return "sleeping";
	case FX_OFFCPU_STATE_DISK:
		return "uninterruptible (I/O)";
	case FX_OFFCPU_STATE_RUNNABLE:
		return "runnable (preempted)";
	case FX_OFFCPU_STATE_WOKEN:
		return "runnable (woken)";
	default:
		return "off-CPU";
	}
}

/* libbpf's last complaint, for the one message the caller writes. */
static char bpf_msg[256];

__attribute__((format(printf, 2, 0))) static int on_libbpf_print(enum libbpf_print_level level,
								 const char *fmt, va_list ap)
{
	char line[sizeof(bpf_msg)];
	size_t n;

	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == ' '))
		line[--n] = '\0';
	if (n)
		memcpy(bpf_msg, line, n + 1);
	return 0;
}

static int fail(int err, char *why, size_t len, const char *what)
{
	/* what to grant, where that is what is missing */
	const char *hint = err == EPERM || err == EACCES
				   ? "; loading it needs CAP_BPF and CAP_PERFMON, or root (the "
				     "packaged unit: AmbientCapabilities=CAP_BPF and "
				     "CapabilityBoundingSet=CAP_BPF added with systemctl edit)"
				   : "";

	if (bpf_msg[0])
		snprintf(why, len, "%s: %s (%s)%s", what, strerror(err), bpf_msg, hint);
	else
		snprintf(why, len, "%s: %s%s", what, strerror(err), hint);
	return -err;
}

static size_t ring_size(const struct fx_offcpu_opts *o)
{
	uint64_t rec = offsetof(struct fx_offcpu_start, stack) + o->stack_bytes + 8;
	uint64_t want = rec * o->budget * (o->cpus ? o->cpus : 1) * RING_MS / 1000;
	size_t size = RING_MIN;

	while (size < want && size < RING_MAX)
		size <<= 1;
	return size;
}

static int queue_push(struct fx_offcpu *o, struct perf_event_header *rec, uint64_t time)
{
	size_t i;

	if (o->head && o->head == o->n)
		o->head = o->n = 0;
	if (o->n - o->head >= QUEUE_MAX)
		return -ENOSPC;
	if (o->n == o->cap && o->head) {
		memmove(o->q, o->q + o->head, (o->n - o->head) * sizeof(*o->q));
		o->n -= o->head;
		o->head = 0;
	}
	if (fx_grow(&o->q, &o->cap, o->n + 1, sizeof(*o->q)) < 0)
		return -ENOMEM;
	/* The ring is nearly in time order: insertion from the back. */
	for (i = o->n; i > o->head && o->q[i - 1].time > time; i--)
		o->q[i] = o->q[i - 1];
	o->q[i] = (struct qent){ .time = time, .rec = rec };
	o->n++;
	return 0;
}

static void put_u64(uint8_t **p, uint64_t v)
{
	memcpy(*p, &v, 8);
	*p += 8;
}

/* An END as an FX_RECORD_OFFCPU_END record. */
static void on_end(struct fx_offcpu *o, const struct fx_offcpu_end *e)
{
	struct perf_event_header *rec;
	uint8_t *p;
	const size_t total = sizeof(*rec) + 8 + 32 + 8;

	rec = calloc(1, total);
	if (!rec) {
		o->queue_lost++;
		o->queue_lost_ns += e->weight_ns;
		return;
	}
	*rec = (struct perf_event_header){ .type = FX_RECORD_OFFCPU_END, .size = (uint16_t)total };
	p = (uint8_t *)(rec + 1);
	memcpy(p, &e->pid, 4);
	memcpy(p + 4, &e->tid, 4);
	p += 8;
	put_u64(&p, e->t_out);
	put_u64(&p, e->t_in);
	put_u64(&p, e->t_wake);
	put_u64(&p, e->weight_ns);
	memcpy(p, &e->state, 4);
	memcpy(p + 4, &e->tag, 4);
	if (queue_push(o, rec, e->t_in) < 0) {
		free(rec);
		o->queue_lost++;
		o->queue_lost_ns += e->weight_ns;
	}
}

/* A START as an FX_RECORD_OFFCPU record of o->fmt; an UNSTACKED one
 * (@size up to its regs) with an empty callchain and no stack. */
static void on_start(struct fx_offcpu *o, const struct fx_offcpu_start *e, size_t size)
{
	uint64_t st = o->fmt.sample_type, nr = 0;
	size_t kn = 0, un = 0, stack8 = 0, inner, total, nstack = 0;
	struct perf_event_header *rec, *in;
	const uint64_t *kips = NULL;
	bool whole = !(e->flags & FX_OFFCPU_UNSTACKED);
	uint8_t *p;

	if (whole && (size < offsetof(struct fx_offcpu_start, stack) || !e->q ||
		      e->kstack_bytes % 8 || e->kstack_bytes > sizeof(e->kstack) ||
		      e->uips_bytes % 8 || e->uips_bytes > sizeof(e->uips) ||
		      e->stack_bytes > size - offsetof(struct fx_offcpu_start, stack))) {
		o->bad++;
		return;
	}
	if (whole) {
		kn = e->kstack_bytes / 8;
		un = e->uips_bytes / 8;
		nstack = e->stack_bytes;
		kips = (const uint64_t *)e->kstack;
		for (size_t k = 0; k < kn && o->sched_lo; k++) {
			if (kips[k] >= o->sched_lo && kips[k] < o->sched_hi) {
				kips += k;
				kn -= k;
				break;
			}
		}
	}
	if (kn)
		nr += 1 + kn;
	if (un)
		nr += 1 + un;
	stack8 = (nstack + 7) & ~(size_t)7;
	inner = sizeof(*in) + 8 * 6 + 8 * nr;
	if (st & PERF_SAMPLE_IDENTIFIER)
		inner += 8;
	if (st & PERF_SAMPLE_REGS_USER)
		inner += 8 + (nstack ? 8 * FX_OFFCPU_NREGS : 0);
	if (st & PERF_SAMPLE_STACK_USER)
		inner += 8 + (stack8 ? stack8 + 8 : 0);
	total = sizeof(*rec) + 24 + inner;
	if (total > UINT16_MAX) {
		o->bad++;
		return;
	}
	rec = calloc(1, total);
	if (!rec) {
		o->queue_lost++;
		return;
	}
	*rec = (struct perf_event_header){ .type = FX_RECORD_OFFCPU, .size = (uint16_t)total };
	p = (uint8_t *)(rec + 1);
	memcpy(p, &e->state, 4);
	memcpy(p + 4, &e->tag, 4);
	memcpy(p + 8, &e->p, 4);
	memcpy(p + 12, &e->q, 4);
	memcpy(p + 16, &e->flags, 4);
	p += 24;
	in = (struct perf_event_header *)p;
	*in = (struct perf_event_header){ .type = PERF_RECORD_SAMPLE,
					  .misc = PERF_RECORD_MISC_USER,
					  .size = (uint16_t)inner };
	p += sizeof(*in);
	if (st & PERF_SAMPLE_IDENTIFIER)
		put_u64(&p, FX_RECORD_OFFCPU_ID | e->tag);
	put_u64(&p, kn ? kips[0] : un ? e->uips[0] : nstack ? e->regs[8] : 0);
	put_u64(&p, (uint64_t)e->tid << 32 | e->pid);
	put_u64(&p, e->t_out);
	put_u64(&p, e->cpu);
	put_u64(&p, 0);
	put_u64(&p, nr);
	if (kn) {
		put_u64(&p, PERF_CONTEXT_KERNEL);
		memcpy(p, kips, kn * 8);
		p += kn * 8;
	}
	if (un) {
		put_u64(&p, PERF_CONTEXT_USER);
		memcpy(p, e->uips, un * 8);
		p += un * 8;
	}
	if (st & PERF_SAMPLE_REGS_USER) {
		put_u64(&p, nstack ? PERF_SAMPLE_REGS_ABI_64 : PERF_SAMPLE_REGS_ABI_NONE);
		if (nstack) {
			memcpy(p, e->regs, 8 * FX_OFFCPU_NREGS);
			p += 8 * FX_OFFCPU_NREGS;
		}
	}
	if (st & PERF_SAMPLE_STACK_USER) {
		put_u64(&p, stack8);
		if (stack8) {
			memcpy(p, e->stack, nstack);
			p += stack8;
			put_u64(&p, nstack);
		}
	}
	if (queue_push(o, rec, e->t_out) < 0) {
		free(rec);
		o->queue_lost++;
	}
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct fx_offcpu *o = ctx;
	uint32_t kind;

	if (size < sizeof(kind)) {
		o->bad++;
		return 0;
	}
	memcpy(&kind, data, sizeof(kind));
	if (kind == FX_OFFCPU_END && size >= sizeof(struct fx_offcpu_end))
		on_end(o, data);
	else if (kind == FX_OFFCPU_START && size >= offsetof(struct fx_offcpu_start, regs))
		on_start(o, data, size);
	else
		o->bad++;
	return 0;
}

/* The text of __schedule() from /proc/kallsyms (0s when it cannot be read:
 * the tracing frames then stay). */
static void find_schedule(struct fx_offcpu *o)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	char line[512];
	bool in = false;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char sym[256], type;
		unsigned long long addr;

		if (sscanf(line, "%llx %c %255s", &addr, &type, sym) != 3)
			continue;
		if (in) {
			if (addr > o->sched_lo) {
				o->sched_hi = addr;
				break;
			}
			continue;
		}
		if (!strcmp(sym, "__schedule") && addr) {
			o->sched_lo = addr;
			in = true;
		}
	}
	fclose(f);
	if (!o->sched_hi)
		o->sched_lo = 0;
}

static int put_settings(struct fx_offcpu *o)
{
	uint32_t zero = 0;

	return bpf_map_update_elem(o->settings_fd, &zero, &o->set, BPF_ANY) < 0 ? -errno : 0;
}

static void seed_tid(struct fx_offcpu *o, uint32_t tid, uint32_t tag)
{
	if (o->seeds_fd < 0 || o->nseeds >= SEEDS_MAX)
		return;
	if (bpf_map_update_elem(o->seeds_fd, &tid, &tag, BPF_NOEXIST) == 0)
		o->nseeds++;
}

/* The threads of process @pid, to seed at attach. */
static void seed_process(struct fx_offcpu *o, uint32_t pid)
{
	char path[64];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%u/task", pid);
	dir = opendir(path);
	if (!dir)
		return; /* gone: nothing waits */
	while ((d = readdir(dir))) {
		char *end;
		unsigned long tid = strtoul(d->d_name, &end, 10);

		if (*end || !tid || tid > UINT32_MAX)
			continue;
		seed_tid(o, (uint32_t)tid, ~0u);
	}
	closedir(dir);
}

/* The threads of the cgroup open at @dfd and of those below it (at most
 * @depth levels more), read from their cgroup.threads; never through a
 * symlink. Recursion bounded by @depth, one fd a level.
 * NOLINTNEXTLINE(misc-no-recursion) */
static void seed_cgroup_dir(struct fx_offcpu *o, int dfd, uint32_t tag, int depth)
{
	int fd = openat(dfd, "cgroup.threads", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct dirent *d;
	DIR *dir;

	if (fd >= 0) {
		FILE *f = fdopen(fd, "re");
		unsigned long tid;

		if (!f) {
			close(fd);
		} else {
			while (fscanf(f, "%lu", &tid) == 1)
				if (tid && tid <= UINT32_MAX)
					seed_tid(o, (uint32_t)tid, tag);
			fclose(f);
		}
	}
	if (depth <= 0)
		return;
	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((d = readdir(dir))) {
		int sub;

		if (d->d_type != DT_DIR || d->d_name[0] == '.')
			continue;
		sub = openat(dirfd(dir), d->d_name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue;
		seed_cgroup_dir(o, sub, tag, depth - 1);
		close(sub);
	}
	closedir(dir);
}

/* Runs the iterator: each watched thread waiting now (not on a CPU) gets
 * its wait drawn from now, so that the recording counts it from its start.
 * A few threads a read, the ring drained between: their STARTs never
 * outgrow it. */
static void seed_run(struct fx_offcpu *o)
{
	size_t start = offsetof(struct fx_offcpu_start, stack) + o->opts.stack_bytes + 16;
	size_t chunk = o->ring_bytes / 2 / start;
	struct bpf_link *l;
	char buf[64];
	ssize_t n;
	int fd;

	if (!o->seed_prog || !o->link || (!o->set.seed_all && !o->nseeds))
		return;
	if (chunk > sizeof(buf))
		chunk = sizeof(buf);
	if (!chunk)
		chunk = 1;
	o->set.seed_stacks = SEED_STACKS;
	if (put_settings(o) < 0)
		return;
	l = bpf_program__attach_iter(o->seed_prog, NULL);
	fd = l ? bpf_iter_create(bpf_link__fd(l)) : -1;
	if (fd >= 0) {
		do {
			n = read(fd, buf, chunk);
			fx_offcpu_read(o);
		} while (n > 0 || (n < 0 && errno == EINTR));
		close(fd);
	}
	bpf_link__destroy(l);
	/* Seeded once: the next run (a cgroup added) seeds only its own. */
	o->set.seed_all = 0;
	o->set.seed_stacks = 0;
	put_settings(o);
	for (uint32_t tid; o->nseeds && bpf_map_get_next_key(o->seeds_fd, NULL, &tid) == 0;
	     o->nseeds--)
		bpf_map_delete_elem(o->seeds_fd, &tid);
	o->nseeds = 0;
}

/* Loads the object; without @seed, without the iterator that seeds the
 * waits in progress at attach (a kernel before 5.18 cannot load it). */
static int load(struct fx_offcpu *o, const struct fx_offcpu_opts *opts, bool seed, char *why,
		size_t len)
{
	struct bpf_object_open_opts oo = { .sz = sizeof(oo), .object_name = "fxagent_offcpu" };
	struct bpf_map *events, *settings, *scratch;
	int ret;

	bpf_msg[0] = '\0';
	o->obj = bpf_object__open_mem(fx_offcpu_bpf_obj, fx_offcpu_bpf_obj_len, &oo);
	if (!o->obj)
		return fail(errno, why, len, "cannot open the BPF object");
	events = bpf_object__find_map_by_name(o->obj, "events");
	settings = bpf_object__find_map_by_name(o->obj, "settings");
	scratch = bpf_object__find_map_by_name(o->obj, "scratch");
	o->prog = bpf_object__find_program_by_name(o->obj, "fx_switch");
	o->seed_prog = bpf_object__find_program_by_name(o->obj, "fx_seed");
	o->tally_prog = bpf_object__find_program_by_name(o->obj, "fx_tally");
	if (!events || !settings || !scratch || !o->prog || !o->seed_prog || !o->tally_prog)
		return fail(ENOENT, why, len, "the BPF object lacks its maps or programs");
	if (!seed) {
		bpf_program__set_autoload(o->seed_prog, false);
		bpf_program__set_autoload(o->tally_prog, false);
		o->seed_prog = o->tally_prog = NULL;
	}
	o->ring_bytes = ring_size(opts);
	bpf_map__set_max_entries(events, (uint32_t)o->ring_bytes);
	ret = libbpf_num_possible_cpus();
	if (ret <= 0)
		return fail(ret < 0 ? -ret : EINVAL, why, len, "cannot count the possible CPUs");
	o->set.seed_slot = (uint32_t)ret; /* one entry past the CPUs' */
	bpf_map__set_max_entries(scratch, (uint32_t)ret + 1);
	ret = bpf_object__load(o->obj);
	if (ret < 0)
		return fail(-ret, why, len, "the kernel refused the BPF program");
	o->settings_fd = bpf_map__fd(settings);
	return 0;
}

int fx_offcpu_open(const struct fx_offcpu_opts *opts, const struct fx_record_fmt *fmt,
		   struct fx_offcpu **out, char *why, size_t len)
{
	const uint64_t need = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			      PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN;
	struct fx_offcpu *o;
	int ret;

	if ((fmt->sample_type & need) != need || opts->stack_bytes > FX_OFFCPU_STACK_MAX ||
	    (opts->stack_bytes &&
	     (fmt->sample_type & (PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER)) !=
		     (PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER))) {
		snprintf(why, len, "the sampler's record format does not fit off-CPU events");
		return -EINVAL;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK) < 0) {
		snprintf(why, len, "the kernel has no BTF (/sys/kernel/btf/vmlinux: %s)",
			 strerror(errno));
		return -EOPNOTSUPP;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->opts = *opts;
	o->opts.pids = NULL;
	o->fmt = *fmt;
	o->stats_fd = o->cgroups_fd = o->settings_fd = o->seeds_fd = -1;
	libbpf_set_print(on_libbpf_print);
	ret = load(o, opts, true, why, len);
	if (ret < 0) {
		/* Without the seeding iterator: waits in progress at attach
		 * then count from their end's thread's next wait only. */
		bpf_object__close(o->obj);
		o->obj = NULL;
		ret = load(o, opts, false, why, len);
		if (ret < 0)
			goto err;
	}
	o->set = (struct fx_offcpu_settings){
		.min_block_ns = opts->min_block_ns,
		.p_scale = opts->min_block_ns ? (1ull << 48) / opts->min_block_ns : 0,
		.budget = opts->budget,
		.stack_bytes = opts->stack_bytes,
		.kernel = opts->kernel,
		.filter = opts->pids	  ? FX_OFFCPU_PIDS
			  : opts->cgroups ? FX_OFFCPU_CGROUPS
					  : FX_OFFCPU_ALL,
		.self_pid = (uint32_t)getpid(),
		.seed_slot = o->set.seed_slot,
		.seed_all = !opts->pids && !opts->cgroups,
	};
	ret = put_settings(o);
	if (ret < 0) {
		ret = fail(-ret, why, len, "cannot set the BPF program's settings");
		goto err;
	}
	o->seeds_fd = bpf_object__find_map_fd_by_name(o->obj, "seeds");
	for (size_t i = 0; opts->pids && i < opts->npids; i++) {
		uint32_t one = 1;

		if (bpf_map_update_elem(bpf_object__find_map_fd_by_name(o->obj, "pids"),
					&opts->pids[i], &one, BPF_ANY) < 0) {
			ret = fail(errno, why, len, "cannot set the processes to watch");
			goto err;
		}
		seed_process(o, opts->pids[i]);
	}
	find_schedule(o);
	o->stats_fd = bpf_object__find_map_fd_by_name(o->obj, "stats");
	o->cgroups_fd = bpf_object__find_map_fd_by_name(o->obj, "cgroups");
	o->ring_fd = bpf_object__find_map_fd_by_name(o->obj, "events");
	o->rb = ring_buffer__new(o->ring_fd, on_event, o, NULL);
	if (!o->rb) {
		ret = fail(errno, why, len, "cannot map the BPF ring");
		goto err;
	}
	*out = o;
	return 0;
err:
	fx_offcpu_free(o);
	return ret;
}

void fx_offcpu_free(struct fx_offcpu *o)
{
	if (!o)
		return;
	fx_offcpu_disable(o);
	ring_buffer__free(o->rb);
	bpf_object__close(o->obj);
	for (size_t i = o->head; i < o->n; i++)
		free(o->q[i].rec);
	free(o->q);
	free(o->cgs);
	free(o->tally);
	free(o);
}

int fx_offcpu_add_cgroup(struct fx_offcpu *o, uint64_t cgroup_id, uint32_t tag)
{
	if (fx_grow(&o->cgs, &o->cg_cap, o->ncg + 1, sizeof(*o->cgs)) < 0)
		return -ENOMEM;
	if (bpf_map_update_elem(o->cgroups_fd, &cgroup_id, &tag, BPF_ANY) < 0)
		return -errno;
	o->cgs[o->ncg++] = (struct cg_tag){ .id = cgroup_id, .tag = tag };
	return 0;
}

void fx_offcpu_seed_cgroup(struct fx_offcpu *o, int cgroup_fd, uint32_t tag)
{
	seed_cgroup_dir(o, cgroup_fd, tag, FX_OFFCPU_MAX_LEVELS);
	seed_run(o); /* now, or at fx_offcpu_enable() */
}

void fx_offcpu_remove_cgroup(struct fx_offcpu *o, uint32_t tag)
{
	size_t n = 0;

	for (size_t i = 0; i < o->ncg; i++) {
		if (o->cgs[i].tag == tag)
			bpf_map_delete_elem(o->cgroups_fd, &o->cgs[i].id);
		else
			o->cgs[n++] = o->cgs[i];
	}
	o->ncg = n;
}

int fx_offcpu_enable(struct fx_offcpu *o, char *why, size_t len)
{
	if (o->link)
		return 0;
	bpf_msg[0] = '\0';
	o->link = bpf_program__attach(o->prog);
	if (!o->link)
		return fail(errno, why, len, "cannot attach to the sched_switch tracepoint");
	seed_run(o);
	return 0;
}

void fx_offcpu_disable(struct fx_offcpu *o)
{
	bpf_link__destroy(o->link);
	o->link = NULL;
}

int fx_offcpu_poll_fd(const struct fx_offcpu *o)
{
	return o->ring_fd;
}

int fx_offcpu_read(struct fx_offcpu *o)
{
	size_t before = o->n - o->head;
	int ret = ring_buffer__consume(o->rb);

	if (ret < 0)
		return ret;
	return (int)(o->n - o->head - before);
}

const struct perf_event_header *fx_offcpu_peek(struct fx_offcpu *o, uint64_t cut, uint64_t *time)
{
	if (o->head == o->n || o->q[o->head].time > cut)
		return NULL;
	*time = o->q[o->head].time;
	return o->q[o->head].rec;
}

void fx_offcpu_pop(struct fx_offcpu *o)
{
	if (o->head < o->n)
		free(o->q[o->head++].rec);
}

void fx_offcpu_get_stats(const struct fx_offcpu *o, struct fx_offcpu_stats *out)
{
	int ncpu = libbpf_num_possible_cpus();
	struct fx_offcpu_bpf_stats *v;
	uint32_t zero = 0;

	memset(out, 0, sizeof(*out));
	out->bad = o->bad;
	out->lost = o->queue_lost;
	out->lost_ns = o->queue_lost_ns;
	out->ring_bytes = o->ring_bytes;
	if (ncpu <= 0)
		return;
	v = calloc((size_t)ncpu, sizeof(*v));
	if (!v || bpf_map_lookup_elem(o->stats_fd, &zero, v) < 0) {
		free(v);
		return;
	}
	for (int i = 0; i < ncpu; i++) {
		out->waits += v[i].waits;
		out->drawn += v[i].drawn;
		out->wait_ns += v[i].wait_ns;
		out->stacked += v[i].stacked;
		out->unstacked += v[i].unstacked;
		out->lost += v[i].lost;
		out->lost_ns += v[i].lost_ns;
		out->seeded += v[i].seeded;
		out->stack_faults += v[i].stack_faults;
	}
	free(v);
}

static int cmp_thread_tid(const void *a, const void *b)
{
	uint32_t x = ((const struct fx_offcpu_thread *)a)->tid;
	uint32_t y = ((const struct fx_offcpu_thread *)b)->tid;

	return x < y ? -1 : x > y;
}

/* Bounds one tally: a host's threads, at most (4 MiB of them). */
#define TALLY_MAX (4u << 20) / sizeof(struct fx_offcpu_tally)

ssize_t fx_offcpu_tally(struct fx_offcpu *o, const struct fx_offcpu_thread **out)
{
	struct fx_offcpu_tally rec[128];
	struct bpf_link *l;
	size_t n = 0, have = 0;
	ssize_t got;
	int fd, ret = 0;

	if (!o->tally_prog)
		return -EOPNOTSUPP;
	l = bpf_program__attach_iter(o->tally_prog, NULL);
	if (!l)
		return -errno;
	fd = bpf_iter_create(bpf_link__fd(l));
	if (fd < 0) {
		ret = -errno;
		bpf_link__destroy(l);
		return ret;
	}
	/* Whole records only: the iterator writes each at once, and a read
	 * ends between them. */
	for (;;) {
		got = read(fd, (char *)rec + have, sizeof(rec) - have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			ret = -errno;
			break;
		}
		if (got == 0)
			break;
		have += (size_t)got;
		for (size_t i = 0; i < have / sizeof(rec[0]) && n < TALLY_MAX; i++) {
			if (fx_grow(&o->tally, &o->tally_cap, n + 1, sizeof(*o->tally)) < 0) {
				ret = -ENOMEM;
				break;
			}
			o->tally[n++] = (struct fx_offcpu_thread){ .pid = rec[i].pid,
								   .tid = rec[i].tid,
								   .at_ns = rec[i].at_ns,
								   .start_ns = rec[i].start_ns,
								   .on_ns = rec[i].on_ns,
								   .runq_ns = rec[i].runq_ns };
		}
		if (ret < 0)
			break;
		memmove(rec, (char *)rec + have / sizeof(rec[0]) * sizeof(rec[0]),
			have % sizeof(rec[0]));
		have %= sizeof(rec[0]);
	}
	close(fd);
	bpf_link__destroy(l);
	if (ret < 0)
		return ret;
	qsort(o->tally, n, sizeof(*o->tally), cmp_thread_tid);
	*out = o->tally;
	return (ssize_t)n;
}
