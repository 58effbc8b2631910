/* SPDX-License-Identifier: MIT */
#include "fxagent/unwind.h"

#include <stdlib.h>

/* x86-64 kernel half of the address space. */
#define KERNEL_START 0xffff800000000000ULL

struct fx_unwinder {
	struct fx_unwind_opts opts;
	struct fx_dwunwind *dw; /* FX_UNWIND_DWARF only */
	uint64_t ips[FX_UNWIND_MAX_FRAMES];
};

struct fx_unwinder *fx_unwind_new(const struct fx_unwind_opts *opts)
{
	struct fx_unwinder *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	u->opts = *opts;
	if (opts->mode == FX_UNWIND_DWARF) {
		u->dw = fx_dwunwind_new(opts->objs, opts->max_procs, opts->engine);
		if (!u->dw) {
			free(u);
			return NULL;
		}
		fx_dwunwind_set_jit(u->dw, opts->jit);
	}
	return u;
}

void fx_unwind_free(struct fx_unwinder *u)
{
	if (!u)
		return;
	fx_dwunwind_free(u->dw);
	free(u);
}

uint64_t fx_unwind_mark(const struct fx_unwinder *u)
{
	return u->dw ? fx_dwunwind_mark(u->dw) : 0;
}

size_t fx_unwind_drop_idle(struct fx_unwinder *u, uint64_t mark)
{
	return u->dw ? fx_dwunwind_drop_idle(u->dw, mark) : 0;
}

void fx_unwind_forget(struct fx_unwinder *u, uint32_t pid)
{
	if (u->dw)
		fx_dwunwind_forget(u->dw, pid);
}

const struct fx_dwunwind *fx_unwind_dwarf(const struct fx_unwinder *u)
{
	return u->dw;
}

static struct fx_window_frame user_frame(const struct fx_proc *proc, uint64_t ip)
{
	struct fx_window_frame f = { .object = FX_OBJ_UNKNOWN, .addr = ip };
	uint32_t object;
	uint64_t offset;

	if (proc && fx_procs_resolve(proc, ip, &object, &offset)) {
		f.object = object;
		f.addr = offset;
	}
	return f;
}

void fx_unwind_sample(struct fx_unwinder *u, const struct fx_proc *proc,
		      const struct fx_record_sample *s, struct fx_window_frame *out, size_t cap,
		      struct fx_unwind_result *res)
{
	/* The callchain is innermost first; collect it that way, then reverse. */
	uint64_t ctx = PERF_CONTEXT_USER;
	size_t n = 0, first_in_ctx = 1;
	bool dwarf = u->opts.mode == FX_UNWIND_DWARF;

	res->truncated = false;
	for (uint64_t i = 0; s->ips && i < s->nr; i++) {
		uint64_t ip = s->ips[i];
		struct fx_window_frame f;

		if (ip >= PERF_CONTEXT_MAX) {
			ctx = ip;
			first_in_ctx = 1;
			continue;
		}
		if (n == cap) {
			res->truncated = true;
			break;
		}
		if (!first_in_ctx && ip > 0)
			ip--;
		first_in_ctx = 0;
		if (ctx == PERF_CONTEXT_KERNEL) {
			if (!u->opts.kernel)
				continue;
			f = (struct fx_window_frame){ .object = FX_OBJ_KERNEL, .addr = ip };
		} else if (ctx == PERF_CONTEXT_USER && !dwarf) {
			f = user_frame(proc, ip);
		} else {
			continue; /* guest or hypervisor contexts; user ones come from DWARF */
		}
		out[n++] = f;
	}
	if (dwarf && n < cap) {
		bool truncated;
		size_t k = fx_dwunwind_user(u->dw, proc, s, u->ips, cap - n, &truncated);

		for (size_t i = 0; i < k; i++)
			out[n++] = user_frame(proc, u->ips[i]);
		res->truncated |= truncated;
	}
	if (n == 0 && s->ip && cap > 0) {
		/* No callchain at all: keep at least where the sample hit. */
		if (s->ip < KERNEL_START)
			out[n++] = user_frame(proc, s->ip);
		else if (u->opts.kernel)
			out[n++] =
				(struct fx_window_frame){ .object = FX_OBJ_KERNEL, .addr = s->ip };
	}
	for (size_t i = 0; i < n / 2; i++) {
		struct fx_window_frame t = out[i];

		out[i] = out[n - 1 - i];
		out[n - 1 - i] = t;
	}
	res->n = n;
}
