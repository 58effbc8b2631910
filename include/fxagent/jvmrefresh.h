/* SPDX-License-Identifier: MIT */
/* jvmrefresh: when to ask a JVM for a fresh perf map (jvmattach.h), and
 * what to say when its JIT frames stay unnamed.
 *
 * HotSpot writes /tmp/perf-PID.map only when asked (Compiler.perfmap), as a
 * snapshot: code compiled after it has no name. The publisher asks, at a
 * window's close, a JVM whose JIT frames of that window no map line names:
 * at most once a window per process, within a time budget for all JVMs of
 * the window, and after a failure not again before a backoff (doubled after
 * each failure, up to a maximum) has passed. A JVM that may not be
 * signalled (jvmattach.h) and has no listener running is not asked; why is
 * said in the lib's status and logged once per process.
 *
 * State: one entry per process (pid and start time), at most max_procs,
 * dropped after 16 windows without a question about it.
 *
 * Threads: an fx_jvmrefresh is its owner's thread's (the publisher's);
 * nothing here is shared.
 */
#ifndef FXAGENT_JVMREFRESH_H
#define FXAGENT_JVMREFRESH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fx_jvmrefresh_opts {
	const char *proc_root;	/* "/proc" (tests may use another) */
	unsigned budget_ms;	/* a window's time for asking JVMs, all of them */
	unsigned wait_ms;	/* a listener started is waited for at most this */
	unsigned backoff_s;	/* after the first failure; doubled after each */
	unsigned backoff_max_s; /* the longest backoff */
	size_t max_procs;	/* processes remembered */
};

/* Defaults: 2 s a window, 2 s for a listener to start, 60 s to 1 h of
 * backoff, 1024 processes. */
#define FX_JVMREFRESH_DEFAULTS                                                                     \
	{                                                                                          \
		.proc_root = "/proc", .budget_ms = 2000, .wait_ms = 2000, .backoff_s = 60,         \
		.backoff_max_s = 3600, .max_procs = 1024                                           \
	}

struct fx_jvmrefresh;

/* A new state (the caller frees it with fx_jvmrefresh_free()), or NULL
 * (out of memory). @o is copied; its proc_root must outlive the state. */
struct fx_jvmrefresh *fx_jvmrefresh_new(const struct fx_jvmrefresh_opts *o);

/* A window begins: its budget starts now, and processes not asked about
 * for 16 windows are forgotten. */
void fx_jvmrefresh_begin_window(struct fx_jvmrefresh *r);

/* @pid's JIT frames went unnamed in this window. When it is a HotSpot JVM,
 * asks it for a fresh perf map, or says why not. Returns 1: the map was
 * written again (read it again); 0: not a JVM, or gone (nothing to say);
 * a negative errno: not refreshed, and *@why says why in words (valid until
 * the next fx_jvmrefresh_begin_window()). With @enabled false, only says
 * that asking is off. Logs once per process why its frames stay unnamed. */
int fx_jvmrefresh_ask(struct fx_jvmrefresh *r, pid_t pid, bool enabled, const char **why);

/* Frees @r; NULL is fine. */
void fx_jvmrefresh_free(struct fx_jvmrefresh *r);

#endif
