/* SPDX-License-Identifier: MIT */
#include "fxagent/report.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fxagent/log.h"
#include "fxagent/jitdump.h"
#include "fxagent/jvmrefresh.h"
#include "fxagent/offcpu.h"
#include "fxagent/perfmap.h"

/* Strings made here for kernel and unknown frames, freed together. */
struct strings {
	char **v;
	size_t n, cap;
};

static const char *strings_add(struct strings *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static const char *strings_add(struct strings *s, const char *fmt, ...)
{
	va_list ap;
	char *str;

	if (s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 256;
		char **v = realloc(s->v, ncap * sizeof(*v));

		if (!v)
			return NULL;
		s->v = v;
		s->cap = ncap;
	}
	va_start(ap, fmt);
	if (vasprintf(&str, fmt, ap) < 0)
		str = NULL;
	va_end(ap);
	if (str)
		s->v[s->n++] = str;
	return str;
}

static void strings_free(struct strings *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
}

struct ctx {
	const struct fx_report_input *in;
	struct fx_sym_result *sym;   /* per window frame */
	struct fx_sym_frame *own;    /* per window frame, for kernel/unknown */
	struct fx_profile_frame *pf; /* per window frame */
	struct fx_profile_lib *libs;
	size_t nlibs;
	int32_t *lib_of_object; /* object id -> lib index */
	int32_t kernel_lib;
	struct strings strs;
	struct fx_ksym_cursor *kcur; /* NULL: kernel frames stay addresses */
	struct fx_profile_thread *threads;
	size_t nthreads;
	uint64_t jit_until; /* the last sample's time: jitdump records after it name nothing */
};

static int cmp_frame_idx(const void *a, const void *b, void *arg)
{
	const struct fx_window_frame *f = arg;
	const struct fx_window_frame *x = &f[*(const uint32_t *)a], *y = &f[*(const uint32_t *)b];

	if (x->object != y->object)
		return x->object < y->object ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void set_own(struct ctx *c, uint32_t i, const char *name, uint64_t rel)
{
	c->own[i] = (struct fx_sym_frame){ .name = name ? name : "?" };
	c->sym[i] = (struct fx_sym_result){ .rel_addr = rel, .n_frames = 1, .frames = &c->own[i] };
}

static void resolve_kernel(struct ctx *c, uint32_t i)
{
	const struct fx_window_frame *f = &c->in->window->frames[i];
	const struct fx_kallsyms *ks = c->in->kallsyms;
	uint64_t base = ks ? fx_kallsyms_base(ks) : 0;
	struct fx_ksym k;
	const char *name;

	c->pf[i] = (struct fx_profile_frame){ .lib = c->kernel_lib, .category = FX_CAT_KERNEL };
	if (!ks || !c->kcur || fx_kallsyms_lookup(ks, f->addr, c->kcur, &k) < 0) {
		set_own(c, i, strings_add(&c->strs, "[kernel]+0x%" PRIx64, f->addr),
			f->addr - base);
		return;
	}
	/* The name is the cursor's until the next lookup. */
	name = k.module[0] ? strings_add(&c->strs, "%s [%s]", k.name, k.module)
			   : strings_add(&c->strs, "%s", k.name);
	set_own(c, i, name, f->addr - base);
	c->sym[i].sym_name = name;
	c->sym[i].sym_addr = k.start - base;
	c->sym[i].sym_size = k.size;
}

static int lib_for_object(struct ctx *c, const struct fx_object *ob)
{
	struct fx_profile_lib *l;

	if (c->lib_of_object[ob->id] >= 0)
		return c->lib_of_object[ob->id];
	l = &c->libs[c->nlibs];
	*l = (struct fx_profile_lib){
		.name = ob->name,
		.path = ob->path,
		.debug_name = ob->name,
		.debug_path = ob->path,
		.build_id = ob->build_id_len ? ob->build_id : NULL,
		.build_id_len = ob->build_id_len,
		.arch = "x86_64",
	};
	c->lib_of_object[ob->id] = (int32_t)c->nlibs;
	return (int)c->nlibs++;
}

/* Where @lib's names came from, and the debug file it was read from. */
static void set_lib_symbols(struct ctx *c, int lib, const struct fx_elf_source *src,
			    uint32_t object)
{
	const char *dpath = NULL;
	enum fx_sym_origin o = fx_symbolizer_origin(c->in->symbolizer, src, &dpath);

	c->libs[lib].symbols = fx_sym_origin_name(o);
	/* Whoever reads the file now at the path (readelf, perf report) would
	 * find other functions at these addresses. */
	if (fx_objects_replaced(c->in->objs, object))
		c->libs[lib].symbols =
			strings_add(&c->strs,
				    "%s (the file at its path was deleted or replaced "
				    "since; named from the build that ran)",
				    c->libs[lib].symbols);
	if (dpath)
		c->libs[lib].debug_path = dpath;
}

/* Names from the perf map of @own's process, for the addresses the
 * jitdump left unnamed (all of them without one). Returns 0, 1 when the map
 * named some, or what fx_perfmap_open() or the read returned. */
static int perfmap_names(const struct fx_perfmap_owner *own, const uint64_t *addrs, size_t n,
			 struct fx_perfmap_hit *hits)
{
	struct fx_perfmap_stats ps = { 0 };
	struct fx_perfmap_hit *more;
	uint64_t *left;
	size_t nleft = 0, named = 0;
	int fd, ret;

	for (size_t k = 0; k < n; k++)
		nleft += !hits[k].name;
	if (!nleft)
		return 0;
	fd = fx_perfmap_open(own);
	if (fd < 0)
		return fd;
	left = malloc(nleft * sizeof(*left));
	more = calloc(nleft, sizeof(*more));
	ret = left && more ? 0 : -ENOMEM;
	for (size_t k = 0, i = 0; k < n && ret == 0; k++)
		if (!hits[k].name)
			left[i++] = addrs[k];
	if (ret == 0)
		ret = fx_perfmap_read(fd, left, nleft, more, &ps);
	for (size_t k = 0, i = 0; k < n && ret == 0; k++) {
		if (hits[k].name)
			continue;
		hits[k] = more[i];
		named += more[i].name != NULL;
		more[i++].name = NULL; /* now the hit's */
	}
	close(fd);
	if (more)
		fx_perfmap_hits_free(more, nleft);
	free(more);
	free(left);
	return ret < 0 ? ret : named > 0;
}

/* Reads the names of @n sorted @addrs of @pid's JIT code into @hits: from
 * its jitdump, and from its perf map what the jitdump does not name (runtimes
 * buffer their jitdump: its last records reach the file later, the perf map
 * line by line). Returns where they came from ("jitdump", "perf map", both)
 * or why there were none, in words. */
static const char *read_jit_names(struct ctx *c, uint32_t pid, const uint64_t *addrs, size_t n,
				  struct fx_perfmap_hit *hits)
{
	struct fx_perfmap_owner own;
	int jd, pm, ret;

	if (!c->in->jit)
		return "JIT names off (symbolization.jit)";
	ret = fx_perfmap_owner_of("/proc", (pid_t)pid, &own);
	if (ret < 0)
		return strings_add(&c->strs, "perf map not read: %s", fx_perfmap_why(ret));
	jd = fx_jitdump_open(&own);
	if (jd >= 0) {
		struct fx_jitdump_stats js = { 0 };

		ret = fx_jitdump_names(jd, NULL, 0, addrs, n, c->jit_until, hits, &js);
		close(jd);
		if (ret < 0)
			return strings_add(&c->strs, "jitdump not read: %s", strerror(-ret));
		return perfmap_names(&own, addrs, n, hits) == 1 ? "jitdump, perf map" : "jitdump";
	}
	pm = perfmap_names(&own, addrs, n, hits);
	if (pm >= 0)
		return "perf map";
	/* A jitdump refused says more than a perf map absent. */
	if (jd != -ENOENT && jd != -EAGAIN && pm == -ENOENT)
		return strings_add(&c->strs, "jitdump not read: %s",
				   jd == -EBADMSG ? "not a jitdump of the process"
						  : fx_perfmap_why(jd));
	if (pm == -ENOENT)
		return "no perf map or jitdump (start the runtime with one on: see "
		       "docs/usage.md)";
	return strings_add(&c->strs, "perf map not read: %s", fx_perfmap_why(pm));
}

static size_t count_unnamed(const struct fx_perfmap_hit *hits, size_t n)
{
	size_t left = 0;

	for (size_t k = 0; k < n; k++)
		left += !hits[k].name;
	return left;
}

/* A JVM's frames no perf map line named: it is asked for a fresh map
 * (jvmrefresh.h), and the names are read again. Returns the lib's status
 * then: @status, or the new one, with how many addresses stayed unnamed
 * and why. Other processes keep @status. */
static const char *refresh_jvm(struct ctx *c, uint32_t pid, const uint64_t *addrs, size_t n,
			       struct fx_perfmap_hit *hits, const char *status)
{
	size_t left = count_unnamed(hits, n);
	const char *why = NULL;
	int ret;

	if (!left)
		return status;
	ret = fx_jvmrefresh_ask(c->in->jvm, (pid_t)pid, c->in->jvm_ask, &why);
	if (ret == 0)
		return status;
	if (ret == 1) {
		/* The map as the JVM wrote it now: every address read again. */
		fx_perfmap_hits_free(hits, n);
		memset(hits, 0, n * sizeof(*hits));
		status = read_jit_names(c, pid, addrs, n, hits);
		left = count_unnamed(hits, n);
	}
	if (!left)
		return status;
	return strings_add(&c->strs, "%s; %zu address%s unnamed: %s", status, left,
			   left == 1 ? "" : "es", why ? why : "?");
}

/* The frames of a process's JIT code, @idx[0..n) sorted by address: named
 * from its jitdump or perf map as it is at the window's end (runtimes reuse
 * freed code; the window's frames are recent). */
static void resolve_jit(struct ctx *c, const struct fx_object *ob, const uint32_t *idx, size_t n,
			uint64_t *addrs)
{
	struct fx_perfmap_hit *hits = calloc(n + 1, sizeof(*hits));
	int lib = lib_for_object(c, ob);

	for (size_t k = 0; k < n; k++)
		addrs[k] = c->in->window->frames[idx[k]].addr;
	c->libs[lib].symbols = hits ? read_jit_names(c, ob->jit_pid, addrs, n, hits)
				    : "perf map not read: out of memory";
	if (hits && c->in->jit && c->in->jvm)
		c->libs[lib].symbols =
			refresh_jvm(c, ob->jit_pid, addrs, n, hits, c->libs[lib].symbols);
	for (size_t k = 0; k < n; k++) {
		const char *name = hits && hits[k].name ? hits[k].name : NULL;

		c->pf[idx[k]] = (struct fx_profile_frame){ .lib = lib, .category = FX_CAT_USER };
		set_own(c, idx[k],
			name ? strings_add(&c->strs, "%s", name)
			     : strings_add(&c->strs, "0x%" PRIx64, addrs[k]),
			addrs[k]);
	}
	if (hits)
		fx_perfmap_hits_free(hits, n);
	free(hits);
}

static void check_names(struct ctx *c, const struct fx_elf_source *src, int lib,
			const struct fx_sym_result *out, size_t n)
{
	const char *dpath = c->libs[lib].debug_path;
	int ret;

	/* The debug file the names came from, when it is not the object. */
	if (dpath && c->libs[lib].path && !strcmp(dpath, c->libs[lib].path))
		dpath = NULL;
	ret = fx_namecheck(src, dpath, out, n, c->in->name_check_log_left, c->in->name_check);
	if (ret < 0) {
		c->in->name_check->unnamed += n;
		fx_log_errno(FX_LOG_DEBUG, -ret, "name check: cannot read '%s' again",
			     src->path ? src->path : "?");
	}
}

static int symbolize(struct ctx *c, struct fx_report_stats *stats)
{
	const struct fx_window *w = c->in->window;
	uint32_t *idx = malloc((w->nframes + 1) * sizeof(*idx));
	uint64_t *offs = malloc((w->nframes + 1) * sizeof(*offs));
	struct fx_sym_result *out = malloc((w->nframes + 1) * sizeof(*out));
	size_t i = 0, objects = 0;

	if (!idx || !offs || !out) {
		free(idx);
		free(offs);
		free(out);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < w->nframes; k++)
		idx[k] = k;
	qsort_r(idx, w->nframes, sizeof(*idx), cmp_frame_idx, w->frames);
	for (size_t k = 0; k < w->nframes; k++) {
		uint32_t o = w->frames[idx[k]].object;

		if (o < FX_OBJ_OFFCPU && (k == 0 || w->frames[idx[k - 1]].object != o))
			objects++;
	}
	if (c->in->on_symbolize)
		c->in->on_symbolize(w->nframes, objects);
	c->jit_until = 0;
	for (size_t k = 0; k < w->nsamples; k++)
		if (w->samples[k].time_ns > c->jit_until)
			c->jit_until = w->samples[k].time_ns;
	fx_symbolizer_begin_batch(c->in->symbolizer);
	stats->addresses = w->nframes;
	stats->objects = objects;
	while (i < w->nframes) {
		uint32_t o = w->frames[idx[i]].object;
		size_t j = i, n;
		const struct fx_object *ob;

		while (j < w->nframes && w->frames[idx[j]].object == o)
			j++;
		n = j - i;
		if (o == FX_OBJ_KERNEL) {
			for (size_t k = i; k < j; k++)
				resolve_kernel(c, idx[k]);
		} else if (o == FX_OBJ_OFFCPU) {
			for (size_t k = i; k < j; k++) {
				uint64_t a = w->frames[idx[k]].addr;

				c->pf[idx[k]] =
					(struct fx_profile_frame){ .lib = -1,
								   .category = FX_CAT_OTHER };
				set_own(c, idx[k],
					a == FX_OFFCPU_NO_STACK
						? strings_add(&c->strs,
							      "[waits without a recorded stack]")
						: strings_add(&c->strs, "[off-CPU: %s]",
							      fx_offcpu_state_name((uint32_t)a)),
					0);
			}
		} else if (o != FX_OBJ_UNKNOWN && (ob = fx_objects_get(c->in->objs, o)) &&
			   ob->jit_pid) {
			resolve_jit(c, ob, idx + i, n, offs);
		} else if (o == FX_OBJ_UNKNOWN || !(ob = fx_objects_get(c->in->objs, o))) {
			for (size_t k = i; k < j; k++) {
				uint64_t a = w->frames[idx[k]].addr;

				c->pf[idx[k]] =
					(struct fx_profile_frame){ .lib = -1,
								   .category = FX_CAT_USER };
				set_own(c, idx[k], strings_add(&c->strs, "0x%" PRIx64, a), a);
			}
		} else {
			int fd = fx_objects_dup_fd(c->in->objs, o);
			struct fx_elf_source src = {
				.fd = fd,
				.path = ob->path,
				.build_id = ob->build_id_len ? ob->build_id : NULL,
				.build_id_len = ob->build_id_len,
			};
			int lib = lib_for_object(c, ob);

			for (size_t k = 0; k < n; k++)
				offs[k] = w->frames[idx[i + k]].addr;
			if (fx_symbolizer_resolve(c->in->symbolizer, &src, offs, n, out) < 0)
				stats->unreadable++;
			set_lib_symbols(c, lib, &src, o);
			if (c->in->name_check)
				check_names(c, &src, lib, out, n);
			if (fd >= 0)
				close(fd);
			for (size_t k = 0; k < n; k++) {
				c->sym[idx[i + k]] = out[k];
				c->pf[idx[i + k]] =
					(struct fx_profile_frame){ .lib = lib,
								   .category = FX_CAT_USER };
			}
		}
		i = j;
	}
	for (size_t k = 0; k < w->nframes; k++)
		c->pf[k].sym = &c->sym[k];
	free(idx);
	free(offs);
	free(out);
	return 0;
}

static int collect_threads(struct ctx *c, size_t *marker_thread)
{
	const struct fx_report_input *in = c->in;
	size_t n = 0;
	bool marker_seen = false;

	c->threads = calloc(in->nnames + 1, sizeof(*c->threads));
	if (!c->threads)
		return -ENOMEM;
	for (size_t i = 0; i < in->nnames; i++) {
		const struct fx_thread_name *nm = &in->names[i];
		bool marker = nm->pid == in->marker_pid;

		/* The agent's own process carries the markers, under its own name. */
		c->threads[n] = (struct fx_profile_thread){
			.pid = nm->pid,
			.tid = nm->tid,
			.name = marker && nm->tid == nm->pid && in->marker_name ? in->marker_name
										: nm->thread,
			.process_name = marker && in->marker_name ? in->marker_name : nm->process,
		};
		if (marker && nm->tid == nm->pid) {
			*marker_thread = n;
			marker_seen = true;
		}
		n++;
	}
	if (!marker_seen) {
		*marker_thread = n;
		c->threads[n++] = (struct fx_profile_thread){ .pid = in->marker_pid,
							      .tid = in->marker_pid,
							      .name = in->marker_name,
							      .process_name = in->marker_name };
	}
	c->nthreads = n;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* After each thread that waited, a track of its waits: "name (off-CPU)". */
static int add_wait_tracks(struct ctx *c, size_t *marker_thread)
{
	const struct fx_window *w = c->in->window;
	struct fx_profile_thread *t;
	uint64_t *keys;
	size_t nk = 0, n = 0;

	for (size_t i = 0; i < w->nsamples; i++)
		nk += w->samples[i].wait_us != 0;
	if (!nk)
		return 0;
	keys = malloc(nk * sizeof(*keys));
	t = calloc(2 * c->nthreads + 1, sizeof(*t));
	if (!keys || !t) {
		free(keys);
		free(t);
		return -ENOMEM;
	}
	nk = 0;
	for (size_t i = 0; i < w->nsamples; i++)
		if (w->samples[i].wait_us)
			keys[nk++] = (uint64_t)w->samples[i].pid << 32 | w->samples[i].tid;
	qsort(keys, nk, sizeof(*keys), cmp_u64);
	for (size_t i = 0; i < c->nthreads; i++) {
		uint64_t k = (uint64_t)c->threads[i].pid << 32 | c->threads[i].tid;

		if (i == *marker_thread)
			*marker_thread = n;
		t[n++] = c->threads[i];
		if (!bsearch(&k, keys, nk, sizeof(*keys), cmp_u64))
			continue;
		t[n] = c->threads[i];
		t[n].name = strings_add(&c->strs, "%s (off-CPU)",
					c->threads[i].name ? c->threads[i].name : "");
		t[n++].off_cpu = true;
	}
	free(keys);
	free(c->threads);
	c->threads = t;
	c->nthreads = n;
	return 0;
}

size_t fx_report_lost_markers(const struct fx_lost_event *lost, size_t n, uint64_t start_ns,
			      uint64_t end_ns, struct fx_profile_marker *out)
{
	double span_ms = end_ns > start_ns ? (double)(end_ns - start_ns) / 1e6 : 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t at = lost[i].time_ns;
		struct fx_profile_marker *m = &out[i];

		*m = (struct fx_profile_marker){ .type = FX_MARKER_LOST,
						 .count = (int64_t)lost[i].count };
		/* A ring read late, or one CPU's ring ahead of the others: the
		 * record is counted here, at the edge, and says how far off it was. */
		if (at < start_ns) {
			m->start_ms = 0;
			m->outside_ms = -(double)(start_ns - at) / 1e6;
		} else if (end_ns > start_ns && at > end_ns) {
			m->start_ms = span_ms;
			m->outside_ms = (double)(at - end_ns) / 1e6;
		} else {
			m->start_ms = (double)(at - start_ns) / 1e6;
		}
	}
	return n;
}

int fx_report_write(const struct fx_report_input *in, const char *path,
		    struct fx_report_stats *stats)
{
	const struct fx_window *w = in->window;
	size_t nobj = fx_objects_count(in->objs), nmarkers = 0, marker_thread = 0;
	struct fx_profile_marker *markers = NULL;
	struct ctx c = { .in = in, .kernel_lib = -1 };
	struct fx_profile_input pin;
	double dur_ms = (double)(in->meta.end_ns - in->meta.start_ns) / 1e6;
	char wall[96];
	int ret = -ENOMEM;

	memset(stats, 0, sizeof(*stats));
	c.sym = calloc(w->nframes + 1, sizeof(*c.sym));
	c.own = calloc(w->nframes + 1, sizeof(*c.own));
	c.pf = calloc(w->nframes + 1, sizeof(*c.pf));
	c.libs = calloc(nobj + 1, sizeof(*c.libs));
	c.lib_of_object = malloc((nobj + 1) * sizeof(*c.lib_of_object));
	markers = calloc(in->nlost + 2, sizeof(*markers));
	if (!c.sym || !c.own || !c.pf || !c.libs || !c.lib_of_object || !markers)
		goto out;
	for (size_t i = 0; i < nobj; i++)
		c.lib_of_object[i] = -1;
	for (size_t i = 0; i < w->nframes; i++) {
		if (w->frames[i].object == FX_OBJ_KERNEL) {
			c.kernel_lib = (int32_t)c.nlibs;
			c.libs[c.nlibs++] = (struct fx_profile_lib){
				.name = "[kernel.kallsyms]",
				.path = "[kernel.kallsyms]",
				.debug_name = "[kernel.kallsyms]",
				.debug_path = "[kernel.kallsyms]",
				.arch = "x86_64",
			};
			/* 32 KiB: a block of inflated kernel names. */
			c.kcur = in->kallsyms ? calloc(1, sizeof(*c.kcur)) : NULL;
			break;
		}
	}
	ret = symbolize(&c, stats);
	if (ret < 0)
		goto out;
	ret = collect_threads(&c, &marker_thread);
	if (ret == 0)
		ret = add_wait_tracks(&c, &marker_thread);
	if (ret < 0)
		goto out;
	fx_profile_wallclock(in->meta.start_time_ms,
			     in->meta.end_time_ms ? in->meta.end_time_ms
						  : in->meta.start_time_ms + dur_ms,
			     wall, sizeof(wall));
	markers[nmarkers++] = (struct fx_profile_marker){
		.type = FX_MARKER_RECORDING,
		.start_ms = 0,
		.end_ms = dur_ms,
		.text = wall,
		.count = (int64_t)w->counters.samples,
		.seq = in->seq,
		.lost = (int64_t)w->counters.lost,
		.truncated = (int64_t)w->counters.truncated,
		.target = in->meta.target,
	};
	/* What the off-CPU side shows and leaves out, where the user looks. */
	if (in->meta.off_cpu && (in->meta.waits || in->meta.waits_lost))
		markers[nmarkers++] = (struct fx_profile_marker){
			.type = FX_MARKER_OFFCPU,
			.start_ms = 0,
			.end_ms = dur_ms,
			.waits = (int64_t)in->meta.waits,
			.wait_ms = in->meta.wait_ms,
			.unstacked = (int64_t)in->meta.waits_unstacked,
			.unstacked_ms = in->meta.waits_unstacked_ms,
			.waits_lost = (int64_t)in->meta.waits_lost,
			.lost_ms = in->meta.waits_lost_ms,
		};
	nmarkers += fx_report_lost_markers(in->lost, in->nlost, in->meta.start_ns, in->meta.end_ns,
					   &markers[nmarkers]);
	pin = (struct fx_profile_input){
		.meta = in->meta,
		.window = w,
		.frames = c.pf,
		.libs = c.libs,
		.nlibs = c.nlibs,
		.threads = c.threads,
		.nthreads = c.nthreads,
		.markers = markers,
		.nmarkers = nmarkers,
		.marker_thread = marker_thread,
		.reuse_threads = in->reuse_threads,
	};
	ret = fx_profile_write_file(&pin, path, &stats->profile);
out:
	if (ret == -ENOMEM)
		fx_log(FX_LOG_ERR, "out of memory while writing the profile");
	free(markers);
	free(c.threads);
	free(c.sym);
	free(c.own);
	free(c.pf);
	free(c.libs);
	free(c.lib_of_object);
	free(c.kcur);
	strings_free(&c.strs);
	return ret;
}
