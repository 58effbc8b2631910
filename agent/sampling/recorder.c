/* SPDX-License-Identifier: MIT */
#include "fxagent/recorder.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "fxagent/hash.h"
#include "fxagent/offcpu.h"
#include "fxagent/util.h"

void fx_recorder_init(struct fx_recorder *r, const struct fx_recorder_opts *opts,
		      const struct fx_record_fmt *fmt, struct fx_procs *procs,
		      struct fx_unwinder *unwinder, struct fx_window *window)
{
	memset(r, 0, sizeof(*r));
	r->opts = *opts;
	r->fmt = fmt;
	r->procs = procs;
	r->unwinder = unwinder;
	r->window = window;
}

void fx_recorder_release(struct fx_recorder *r)
{
	for (size_t i = 0; i < r->nwaits; i++)
		free(r->waits[i].frames);
	free(r->waits);
	r->waits = NULL;
	r->nwaits = r->waits_cap = r->nwaits_stacked = 0;
	fx_hashtab_free(&r->wait_index);
	free(r->waiters);
	r->waiters = NULL;
	r->nwaiters = r->waiters_cap = 0;
	fx_hashtab_free(&r->waiter_index);
}

static bool wanted(const struct fx_recorder *r, uint32_t pid)
{
	if (pid == 0)
		return r->opts.include_idle;
	if (!r->opts.pids)
		return true;
	for (size_t i = 0; i < r->opts.npids; i++)
		if (r->opts.pids[i] == pid)
			return true;
	return false;
}

void fx_recorder_set_sink(struct fx_recorder *r, const struct fx_recorder_sink *sink)
{
	r->sink = *sink;
}

/* Adds a CPU sample (@wait_ns 0) or an off-CPU wait of weight @wait_ns
 * with call path @frames to @w. Returns whether it was added. */
static bool add_sample(struct fx_window *w, uint64_t time, uint32_t pid, uint32_t tid,
		       const struct fx_window_frame *frames, size_t n, bool truncated,
		       uint64_t wait_ns)
{
	uint32_t stack;

	if (truncated)
		w->counters.truncated++;
	stack = fx_window_intern_stack(w, frames, n);
	if (stack == FX_NONE && n) {
		w->counters.dropped_stacks++;
		return false;
	}
	if (wait_ns)
		return fx_window_add_wait(w, time, pid, tid, stack, wait_ns) == 0;
	return fx_window_add_sample(w, time, pid, tid, stack) == 0;
}

/* The windows sample @s of @proc goes to: the sink's, or the one window. */
static size_t windows_of(struct fx_recorder *r, const struct fx_record_sample *s,
			 const struct fx_proc *proc, struct fx_window **routes)
{
	routes[0] = r->window;
	if (!r->sink.route)
		return 1;
	return r->sink.route(r->sink.ctx, s, proc, routes, FX_RECORDER_MAX_ROUTES);
}

/* An off-CPU wait's part of thread @tid as a sample to route, at @at. */
static void wait_sample(struct fx_record_sample *s, uint32_t pid, uint32_t tid, uint32_t tag,
			uint64_t at)
{
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	s->tid = tid;
	s->time = at;
	s->id = FX_RECORD_OFFCPU_ID | tag;
}

/* The routes of sample @s, after the checks every sample passes: 0 when it
 * is filtered out. Sets @proc (NULL for the kernel's). */
static size_t route(struct fx_recorder *r, const struct fx_record_sample *s,
		    const struct fx_proc **proc, struct fx_window **routes)
{
	size_t nroutes;

	*proc = NULL;
	if (!wanted(r, s->pid)) {
		if (s->pid)
			r->counters.filtered++;
		else
			r->counters.idle++;
		return 0;
	}
	if (s->pid) {
		*proc = fx_procs_get(r->procs, s->pid);
		/* Names the thread now, while /proc still has it. */
		fx_procs_thread(r->procs, s->pid, s->tid);
	}
	nroutes = windows_of(r, s, *proc, routes);
	if (!nroutes)
		r->counters.filtered++;
	return nroutes;
}

static void on_sample(struct fx_recorder *r, const struct perf_event_header *h)
{
	struct fx_record_sample s;
	struct fx_unwind_result res;
	struct fx_window *routes[FX_RECORDER_MAX_ROUTES];
	const struct fx_proc *proc;
	size_t nroutes;

	if (fx_record_sample(r->fmt, h, &s) < 0) {
		r->counters.bad_records++;
		return;
	}
	if (r->sink.before_sample)
		r->sink.before_sample(r->sink.ctx, s.time);
	nroutes = route(r, &s, &proc, routes);
	if (!nroutes)
		return;
	/* Unwound once, whatever the number of windows that take it. */
	fx_unwind_sample(r->unwinder, proc, &s, r->frames, FX_UNWIND_MAX_FRAMES, &res);
	for (size_t i = 0; i < nroutes; i++)
		add_sample(routes[i], s.time, s.pid, s.tid, r->frames, res.n, res.truncated, 0);
}

static uint64_t wait_hash(uint32_t tid)
{
	return fx_mix64(tid);
}

static uint64_t wait_hash_at(const void *ctx, uint32_t idx)
{
	const struct fx_recorder *r = ctx;

	return wait_hash(r->waits[idx].tid);
}

static bool wait_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct fx_recorder *r = ctx;

	return r->waits[idx].tid == *(const uint32_t *)key;
}

/* The pending wait of thread @tid, or FX_HASHTAB_NONE. */
static uint32_t find_wait(const struct fx_recorder *r, uint32_t tid)
{
	/* an index never reserved has no slots to probe */
	return r->nwaits ? fx_hashtab_find(&r->wait_index, wait_hash(tid), wait_eq, r, &tid)
			 : FX_HASHTAB_NONE;
}

static void wait_remove(struct fx_recorder *r, uint32_t i)
{
	uint32_t last = (uint32_t)r->nwaits - 1;

	free(r->waits[i].frames);
	if (r->waits[i].n)
		r->nwaits_stacked--;
	fx_hashtab_remove(&r->wait_index, wait_hash(r->waits[i].tid), i, wait_hash_at, r);
	if (i != last) {
		r->waits[i] = r->waits[last];
		fx_hashtab_renumber(&r->wait_index, wait_hash(r->waits[i].tid), last, i);
	}
	r->nwaits--;
}

static uint64_t waiter_hash_at(const void *ctx, uint32_t idx)
{
	const struct fx_recorder *r = ctx;

	return wait_hash(r->waiters[idx].tid);
}

static bool waiter_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct fx_recorder *r = ctx;

	return r->waiters[idx].tid == *(const uint32_t *)key;
}

/* Remembers where thread @tid's waits go. */
static void waiter_seen(struct fx_recorder *r, uint32_t pid, uint32_t tid, uint32_t tag)
{
	uint32_t i;

	if (r->nwaiters >= FX_RECORDER_MAX_TIMED ||
	    fx_grow(&r->waiters, &r->waiters_cap, r->nwaiters + 1, sizeof(*r->waiters)) < 0)
		return;
	r->waiters[r->nwaiters] = (struct fx_recorder_waiter){ .tid = tid, .pid = pid, .tag = tag };
	i = fx_hashtab_intern(&r->waiter_index, wait_hash(tid), &tid, (uint32_t)r->nwaiters,
			      waiter_hash_at, waiter_eq, r);
	if (i == (uint32_t)r->nwaiters)
		r->nwaiters++;
	else if (i != FX_HASHTAB_NONE)
		r->waiters[i] = (struct fx_recorder_waiter){ .tid = tid, .pid = pid, .tag = tag };
}

static void waiter_gone(struct fx_recorder *r, uint32_t tid)
{
	uint32_t i = r->nwaiters
			     ? fx_hashtab_find(&r->waiter_index, wait_hash(tid), waiter_eq, r, &tid)
			     : FX_HASHTAB_NONE;
	uint32_t last = (uint32_t)r->nwaiters - 1;

	if (i == FX_HASHTAB_NONE)
		return;
	fx_hashtab_remove(&r->waiter_index, wait_hash(tid), i, waiter_hash_at, r);
	if (i != last) {
		r->waiters[i] = r->waiters[last];
		fx_hashtab_renumber(&r->waiter_index, wait_hash(r->waiters[i].tid), last, i);
	}
	r->nwaiters--;
}

void fx_recorder_note_waiters(struct fx_recorder *r, const struct fx_window_thread_time *times,
			      size_t ntimes, uint64_t at)
{
	struct fx_window *routes[FX_RECORDER_MAX_ROUTES];

	for (size_t i = 0; i < ntimes && r->nwaiters; i++) {
		uint32_t tid = times[i].tid;
		uint32_t k = fx_hashtab_find(&r->waiter_index, wait_hash(tid), waiter_eq, r, &tid);
		const struct fx_recorder_waiter *wt;
		struct fx_record_sample s;
		size_t nroutes;

		if (k == FX_HASHTAB_NONE)
			continue;
		wt = &r->waiters[k];
		wait_sample(&s, wt->pid, wt->tid, wt->tag, at);
		nroutes = windows_of(r, &s, fx_procs_get(r->procs, wt->pid), routes);
		for (size_t j = 0; j < nroutes; j++)
			if (routes[j])
				fx_window_note_thread(routes[j], at, wt->pid, wt->tid);
	}
}

/* A drawn wait began: its stacks, if it has them, are unwound now, while
 * the process's mappings are those it waits in, and held until it ends. */
static void on_wait_start(struct fx_recorder *r, const struct perf_event_header *h)
{
	struct fx_record_offcpu o;
	struct fx_unwind_result res;
	struct fx_recorder_wait *w;
	const struct fx_proc *proc = NULL;
	uint32_t found;
	size_t pos;
	bool stacked;

	if (fx_record_offcpu(r->fmt, h, &o) < 0) {
		r->counters.bad_records++;
		return;
	}
	if (!wanted(r, o.s.pid))
		return;
	if (fx_hashtab_reserve(&r->wait_index, r->nwaits + 1, wait_hash_at, r) < 0)
		goto lost;
	pos = fx_hashtab_probe(&r->wait_index, wait_hash(o.s.tid), wait_eq, r, &o.s.tid);
	found = fx_hashtab_at(&r->wait_index, pos);
	if (found != FX_HASHTAB_NONE) {
		/* Its end was lost: the older start goes. A seeded one may have
		 * ended unseen as it was seeded (the iterator raced its switch
		 * in): it is no loss, and it ended then. */
		if (!r->waits[found].seeded)
			r->counters.waits_lost++;
		wait_remove(r, found);
		pos = fx_hashtab_probe(&r->wait_index, wait_hash(o.s.tid), wait_eq, r, &o.s.tid);
	}
	if (r->nwaits >= FX_RECORDER_MAX_TIMED ||
	    fx_grow(&r->waits, &r->waits_cap, r->nwaits + 1, sizeof(*r->waits)) < 0)
		goto lost;
	proc = fx_procs_get(r->procs, o.s.pid);
	fx_procs_thread(r->procs, o.s.pid, o.s.tid);
	waiter_seen(r, o.s.pid, o.s.tid, o.tag);
	/* Past the bound of those held with frames, it is timed only. */
	stacked = o.q && r->nwaits_stacked < FX_RECORDER_MAX_WAITS;
	w = &r->waits[r->nwaits];
	*w = (struct fx_recorder_wait){ .pid = o.s.pid,
					.tid = o.s.tid,
					.t_out = o.s.time,
					.from = o.s.time,
					.state = o.state,
					.tag = o.tag,
					.p = o.p,
					.q = stacked ? o.q : 0,
					.seeded = o.seeded };
	if (stacked) {
		fx_unwind_sample(r->unwinder, proc, &o.s, r->frames, FX_UNWIND_MAX_FRAMES, &res);
		/* The innermost frame says why it waits. */
		r->frames[res.n] =
			(struct fx_window_frame){ .object = FX_OBJ_OFFCPU, .addr = o.state };
		w->frames = malloc((res.n + 1) * sizeof(*w->frames));
		if (w->frames) {
			memcpy(w->frames, r->frames, (res.n + 1) * sizeof(*w->frames));
			w->n = (uint32_t)res.n + 1;
			w->truncated = res.truncated;
			r->nwaits_stacked++;
		} else {
			w->q = 0;
		}
	}
	fx_hashtab_put(&r->wait_index, pos, (uint32_t)r->nwaits);
	r->nwaits++;
	return;
lost:
	r->counters.waits_lost++;
}

/* Adds the part of pending wait @w from w->from to @until at time @at:
 * before @t_wake (0: not woken) in its own state, after it on a run queue.
 * Each part's time is its length over the timing probability; a wait with
 * stacks is added on them weighted by the stacks' probability too, and the
 * window scales those to the times (fx_window_fold_waits()). */
static void add_wait(struct fx_recorder *r, struct fx_recorder_wait *w, uint64_t until, uint64_t at,
		     uint64_t t_wake)
{
	struct fx_record_sample s;
	struct fx_window *routes[FX_RECORDER_MAX_ROUTES];
	const struct fx_proc *proc;
	struct wait_part {
		uint64_t from, to;
		uint32_t state;
	} part[2];
	size_t nroutes, nparts = 0;
	bool counted = false;

	if (until <= w->from)
		return;
	if (t_wake > w->from && t_wake < until && w->state != FX_OFFCPU_STATE_RUNNABLE) {
		part[nparts++] = (struct wait_part){ w->from, t_wake, w->state };
		part[nparts++] = (struct wait_part){ t_wake, until, FX_OFFCPU_STATE_WOKEN };
	} else if (t_wake && t_wake <= w->from && w->state != FX_OFFCPU_STATE_RUNNABLE) {
		/* woken before the last window's end: on a run queue since */
		part[nparts++] = (struct wait_part){ w->from, until, FX_OFFCPU_STATE_WOKEN };
	} else {
		part[nparts++] = (struct wait_part){ w->from, until, w->state };
	}
	w->from = until;
	wait_sample(&s, w->pid, w->tid, w->tag, at);
	nroutes = route(r, &s, &proc, routes);
	for (size_t i = 0; i < nparts; i++) {
		uint64_t exact = (part[i].to - part[i].from) * FX_RECORD_OFFCPU_P1 / w->p;
		uint64_t shown =
			!w->q ? 0
			: w->q == FX_RECORD_OFFCPU_P1
				? exact
				: (uint64_t)((unsigned __int128)exact * FX_RECORD_OFFCPU_P1 / w->q);

		if (!exact)
			continue;
		if (w->n)
			w->frames[w->n - 1].addr = part[i].state;
		for (size_t k = 0; k < nroutes; k++) {
			bool added = shown && add_sample(routes[k], at, w->pid, w->tid, w->frames,
							 w->n, w->truncated, shown);

			fx_window_count_wait(routes[k], at, w->pid, w->tid, part[i].state, exact,
					     added ? shown : 0);
			/* one wait, in two states: counted once */
			if (counted) {
				routes[k]->counters.waits--;
				if (!added)
					routes[k]->counters.waits_unstacked--;
			}
		}
		counted = true;
	}
	if (w->n)
		w->frames[w->n - 1].addr = w->state;
}

static void on_wait_end(struct fx_recorder *r, const struct perf_event_header *h)
{
	struct fx_record_offcpu_end e;
	uint32_t i;

	if (fx_record_offcpu_end(h, &e) < 0) {
		r->counters.bad_records++;
		return;
	}
	if (r->sink.before_sample)
		r->sink.before_sample(r->sink.ctx, e.t_in);
	i = find_wait(r, e.tid);
	if (i == FX_HASHTAB_NONE || r->waits[i].t_out != e.t_out) {
		if (wanted(r, e.pid)) {
			r->counters.waits_unpaired++;
			r->counters.waits_lost_ns += e.weight_ns;
		}
		return;
	}
	add_wait(r, &r->waits[i], e.t_in, e.t_in, e.t_wake);
	wait_remove(r, i);
}

void fx_recorder_cut_waits(struct fx_recorder *r, uint64_t end_ns)
{
	for (size_t i = 0; i < r->nwaits; i++)
		add_wait(r, &r->waits[i], end_ns, end_ns ? end_ns - 1 : 0, 0);
}

static void on_mmap2(struct fx_recorder *r, const struct perf_event_header *h)
{
	struct fx_record_mmap m;
	struct fx_mapping_info mi;

	if (fx_record_mmap2(r->fmt, h, &m) < 0) {
		r->counters.bad_records++;
		return;
	}
	if (!m.exec || m.pid == 0 || m.pid == UINT32_MAX)
		return;
	memset(&mi, 0, sizeof(mi));
	mi.pid = m.pid;
	mi.start = m.start;
	mi.end = m.start + m.len;
	mi.path = m.filename;
	if (m.has_build_id) {
		mi.build_id = m.build_id;
		mi.build_id_len = m.build_id_len;
	} else {
		mi.dev = makedev(m.maj, m.min);
		mi.ino = m.ino;
	}
	fx_procs_on_mmap(r->procs, &mi, m.pgoff);
}

static void on_exit_record(struct fx_recorder *r, const struct fx_record_task *t)
{
	uint32_t i = find_wait(r, t->tid);

	/* A thread that exits waits no more (its end never comes). */
	if (i != FX_HASHTAB_NONE)
		wait_remove(r, i);
	waiter_gone(r, t->tid);
	fx_procs_on_exit(r->procs, t->pid, t->tid);
	if (t->pid == t->tid)
		fx_unwind_forget(r->unwinder, t->pid);
}

static void on_lost(struct fx_recorder *r, const struct perf_event_header *h)
{
	struct fx_record_lost l;

	if (fx_record_lost(r->fmt, h, &l) < 0) {
		r->counters.bad_records++;
		return;
	}
	r->counters.lost_events++;
	if (r->sink.lost) {
		r->sink.lost(r->sink.ctx, l.id.time, l.lost);
		return;
	}
	r->window->counters.lost += l.lost;
	if (r->nlost < FX_RECORDER_MAX_LOST_EVENTS)
		r->lost[r->nlost++] =
			(struct fx_lost_event){ .time_ns = l.id.time, .count = l.lost };
	else
		r->lost[r->nlost - 1].count += l.lost; /* the last marker takes the rest */
}

void fx_recorder_handle(void *ctx, const struct perf_event_header *h)
{
	struct fx_recorder *r = ctx;

	switch (h->type) {
	case PERF_RECORD_SAMPLE:
		on_sample(r, h);
		break;
	case PERF_RECORD_MMAP2:
		on_mmap2(r, h);
		break;
	case FX_RECORD_OFFCPU:
		on_wait_start(r, h);
		break;
	case FX_RECORD_OFFCPU_END:
		on_wait_end(r, h);
		break;
	case PERF_RECORD_COMM: {
		struct fx_record_comm c;

		if (fx_record_comm(r->fmt, h, &c) < 0)
			r->counters.bad_records++;
		else if (c.pid)
			fx_procs_on_comm(r->procs, c.pid, c.tid, c.comm, c.exec);
		break;
	}
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT: {
		struct fx_record_task t;

		if (fx_record_task(r->fmt, h, &t) < 0)
			r->counters.bad_records++;
		else if (h->type == PERF_RECORD_FORK)
			fx_procs_on_fork(r->procs, t.pid, t.ppid, t.tid, t.ptid);
		else
			on_exit_record(r, &t);
		break;
	}
	case PERF_RECORD_LOST:
	case PERF_RECORD_LOST_SAMPLES:
		on_lost(r, h);
		break;
	default:
		break; /* MMAP (we get MMAP2), THROTTLE, ... */
	}
}
