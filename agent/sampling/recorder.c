/* SPDX-License-Identifier: MIT */
#include "fxagent/recorder.h"

#include <string.h>
#include <sys/sysmacros.h>

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

static void add_sample(struct fx_window *w, const struct fx_record_sample *s,
		       const struct fx_window_frame *frames, const struct fx_unwind_result *res)
{
	uint32_t stack;

	if (res->truncated)
		w->counters.truncated++;
	stack = fx_window_intern_stack(w, frames, res->n);
	if (stack == FX_NONE && res->n) {
		w->counters.dropped_stacks++;
		return;
	}
	fx_window_add_sample(w, s->time, s->pid, s->tid, stack);
}

static void on_sample(struct fx_recorder *r, const struct perf_event_header *h)
{
	struct fx_record_sample s;
	struct fx_unwind_result res;
	struct fx_window *routes[FX_RECORDER_MAX_ROUTES];
	const struct fx_proc *proc = NULL;
	size_t nroutes = 1;

	if (fx_record_sample(r->fmt, h, &s) < 0) {
		r->counters.bad_records++;
		return;
	}
	if (r->sink.before_sample)
		r->sink.before_sample(r->sink.ctx, s.time);
	if (!wanted(r, s.pid)) {
		if (s.pid)
			r->counters.filtered++;
		else
			r->counters.idle++;
		return;
	}
	if (s.pid) {
		proc = fx_procs_get(r->procs, s.pid);
		/* Names the thread now, while /proc still has it. */
		fx_procs_thread(r->procs, s.pid, s.tid);
	}
	routes[0] = r->window;
	if (r->sink.route)
		nroutes = r->sink.route(r->sink.ctx, &s, proc, routes, FX_RECORDER_MAX_ROUTES);
	if (!nroutes) {
		r->counters.filtered++;
		return;
	}
	/* Unwound once, whatever the number of windows that take it. */
	fx_unwind_sample(r->unwinder, proc, &s, r->frames, FX_UNWIND_MAX_FRAMES, &res);
	for (size_t i = 0; i < nroutes; i++)
		add_sample(routes[i], &s, r->frames, &res);
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
