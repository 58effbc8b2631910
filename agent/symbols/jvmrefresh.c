/* SPDX-License-Identifier: MIT */
#include "fxagent/jvmrefresh.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fxagent/jvmattach.h"
#include "fxagent/log.h"
#include "fxagent/perfmap.h"
#include "fxagent/util.h"

/* Windows without a question after which a process is forgotten. */
#define IDLE_WINDOWS 16

struct proc {
	pid_t pid;
	int64_t start_s;
	uint64_t seen;	/* the window it was last asked about */
	uint64_t asked; /* the window it was last asked in; 0: never */
	int last;	/* what that gave */
	bool inspected; /* info holds what fx_jvmattach_inspect() said */
	bool said;	/* why its frames stay unnamed was logged */
	unsigned failures;
	uint64_t retry_ns; /* not asked before (CLOCK_MONOTONIC) */
	struct fx_jvm_info info;
	char why[320];
};

struct fx_jvmrefresh {
	struct fx_jvmrefresh_opts o;
	struct proc *v;
	size_t n;
	uint64_t window;
	uint64_t deadline_ns; /* the window's budget's end */
};

struct fx_jvmrefresh *fx_jvmrefresh_new(const struct fx_jvmrefresh_opts *o)
{
	struct fx_jvmrefresh *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->o = *o;
	if (!r->o.max_procs)
		r->o.max_procs = 1;
	r->v = calloc(r->o.max_procs, sizeof(*r->v));
	if (!r->v) {
		free(r);
		return NULL;
	}
	return r;
}

void fx_jvmrefresh_free(struct fx_jvmrefresh *r)
{
	if (!r)
		return;
	free(r->v);
	free(r);
}

void fx_jvmrefresh_begin_window(struct fx_jvmrefresh *r)
{
	size_t k = 0;

	r->window++;
	r->deadline_ns = fx_now_ns(CLOCK_MONOTONIC) + (uint64_t)r->o.budget_ms * 1000000;
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].seen + IDLE_WINDOWS >= r->window)
			r->v[k++] = r->v[i];
	r->n = k;
}

/* @own's entry, made (in place of the least recently asked about when
 * full) if there is none. */
static struct proc *entry(struct fx_jvmrefresh *r, const struct fx_perfmap_owner *own)
{
	size_t old = 0;

	for (size_t i = 0; i < r->n; i++) {
		if (r->v[i].pid == own->pid && r->v[i].start_s == own->start_s)
			return &r->v[i];
		if (r->v[i].seen < r->v[old].seen)
			old = i;
	}
	if (r->n < r->o.max_procs)
		old = r->n++;
	r->v[old] = (struct proc){ .pid = own->pid, .start_s = own->start_s };
	return &r->v[old];
}

static void say_once(struct proc *p)
{
	if (p->said)
		return;
	p->said = true;
	fx_log(FX_LOG_NOTICE, "JVM %d: JIT frames no perf map line names stay addresses: %s",
	       (int)p->pid, p->why);
}

/* After a failure: not again before the backoff. */
static void failed(struct fx_jvmrefresh *r, struct proc *p, int err, const char *msg)
{
	unsigned shift = p->failures < 16 ? p->failures : 16;
	uint64_t s = (uint64_t)r->o.backoff_s << shift;
	char what[128];

	if (s > r->o.backoff_max_s)
		s = r->o.backoff_max_s;
	p->failures++;
	p->retry_ns = fx_now_ns(CLOCK_MONOTONIC) + s * 1000000000ull;
	switch (err) {
	case -ETIMEDOUT:
		snprintf(what, sizeof(what), "no answer in time");
		break;
	case -EPERM:
		snprintf(what, sizeof(what), "its socket is not the JVM's");
		break;
	case -EEXIST:
		snprintf(what, sizeof(what),
			 "an attach file of another user is where the JVM looks; not signalled");
		break;
	case -EACCES:
		/* The socket is its user's (0600), and the JVM answers only
		 * that user and root. */
		snprintf(what, sizeof(what),
			 "the agent runs as neither root nor the JVM's user: permission denied");
		break;
	case -EPROTO:
		snprintf(what, sizeof(what), "Compiler.perfmap failed: %.96s", msg);
		break;
	case -EBADMSG:
		snprintf(what, sizeof(what), "a reply that does not parse");
		break;
	default:
		snprintf(what, sizeof(what), "%s", strerror(-err));
		break;
	}
	snprintf(p->why, sizeof(p->why),
		 "the JVM's attach listener did not write a fresh perf map (%s); asked again in "
		 "%llu s at the earliest",
		 what, (unsigned long long)s);
}

static int ask(struct fx_jvmrefresh *r, struct proc *p, const struct fx_perfmap_owner *own)
{
	uint64_t now = fx_now_ns(CLOCK_MONOTONIC), wait;
	bool may = p->info.verdict.block == FX_JVM_MAY_SIGNAL;
	char msg[128];
	int ret;

	p->asked = r->window;
	wait = now + (uint64_t)r->o.wait_ms * 1000000;
	ret = fx_jvmattach_perfmap(own, &p->info, may,
				   wait < r->deadline_ns ? wait : r->deadline_ns, r->deadline_ns,
				   msg, sizeof(msg));
	if (ret == 0) {
		fx_debug("JVM %d: wrote a fresh perf map in %.1f ms", (int)p->pid,
			 (double)(fx_now_ns(CLOCK_MONOTONIC) - now) / 1e6);
		p->failures = 0;
		p->retry_ns = 0;
		snprintf(p->why, sizeof(p->why),
			 "not in the perf map the JVM wrote when this window closed");
		return p->last = 1;
	}
	if (ret == -ESRCH)
		return p->last = 0;
	if (ret == -ENOENT) {
		/* No listener, and none may be started: nothing was asked. */
		fx_jvmattach_why(&p->info.verdict, p->why, sizeof(p->why));
	} else {
		failed(r, p, ret, msg);
	}
	say_once(p);
	return p->last = ret;
}

int fx_jvmrefresh_ask(struct fx_jvmrefresh *r, pid_t pid, bool enabled, const char **why)
{
	struct fx_perfmap_owner own;
	struct proc *p;
	int ret = fx_perfmap_owner_of(r->o.proc_root, pid, &own);

	if (ret < 0)
		return 0;
	p = entry(r, &own);
	p->seen = r->window;
	if (!p->inspected) {
		if (fx_jvmattach_inspect(&own, &p->info) < 0)
			return 0;
		p->inspected = true;
	}
	if (!p->info.hotspot)
		return 0;
	*why = p->why;
	if (!enabled) {
		snprintf(p->why, sizeof(p->why),
			 "asking the JVM for a fresh perf map is off (symbolization.jvm_perfmap)");
		return -ECANCELED;
	}
	if (p->asked == r->window)
		return p->last;
	if (fx_now_ns(CLOCK_MONOTONIC) < p->retry_ns) {
		say_once(p);
		return -EAGAIN;
	}
	if (fx_now_ns(CLOCK_MONOTONIC) >= r->deadline_ns) {
		snprintf(p->why, sizeof(p->why),
			 "not asked: this window's %u ms for asking JVMs were spent",
			 r->o.budget_ms);
		return -ETIME;
	}
	return ask(r, p, &own);
}
