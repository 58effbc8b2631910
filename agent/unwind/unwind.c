/* SPDX-License-Identifier: MIT */
#include "fxagent/unwind.h"

#include <stdlib.h>

/* x86-64 kernel half of the address space. */
#define KERNEL_START 0xffff800000000000ULL

/* Bytes of compiled rules kept in frame-pointer mode, where they only say
 * which frame is the outermost: a function or two a process. */
#define FP_ROOT_TABLE_BYTES (1u << 20)

struct fx_unwinder {
	struct fx_unwind_opts opts;
	struct fx_dwunwind *dw;	 /* FX_UNWIND_DWARF only */
	struct fx_cfitab *roots; /* FX_UNWIND_FP only: is a chain's last frame the outermost? */
	uint64_t tick;		 /* FX_UNWIND_FP: samples, the roots' clock */
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
	} else if (opts->objs) {
		u->roots = fx_cfitab_new(opts->objs, FP_ROOT_TABLE_BYTES);
		if (!u->roots) {
			free(u);
			return NULL;
		}
	}
	return u;
}

void fx_unwind_free(struct fx_unwinder *u)
{
	if (!u)
		return;
	fx_dwunwind_free(u->dw);
	fx_cfitab_free(u->roots);
	free(u);
}

uint64_t fx_unwind_mark(const struct fx_unwinder *u)
{
	return u->dw ? fx_dwunwind_mark(u->dw) : u->tick;
}

size_t fx_unwind_drop_idle(struct fx_unwinder *u, uint64_t mark)
{
	if (u->roots)
		fx_cfitab_drop_idle(u->roots, mark);
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

/* Frame-pointer mode: whether the chain's last user frame, @pc (moved back
 * into its call), is the outermost one by its CFI (_start, a thread's
 * start). A chain that stops anywhere else (code without frame pointers,
 * Debian's libc among it) did not reach a root. */
static bool fp_root(struct fx_unwinder *u, const struct fx_proc *proc, uint64_t pc)
{
	uint32_t object;
	uint64_t off;

	if (!u->roots || !proc || !fx_procs_resolve(proc, pc, &object, &off))
		return false;
	fx_cfitab_set_now(u->roots, ++u->tick);
	return fx_cfitab_outermost(u->roots, object, off) == 1;
}

void fx_unwind_sample(struct fx_unwinder *u, const struct fx_proc *proc,
		      const struct fx_record_sample *s, struct fx_window_frame *out, size_t cap,
		      struct fx_unwind_result *res)
{
	/* The callchain is innermost first; collect it that way, then reverse. */
	uint64_t ctx = PERF_CONTEXT_USER, last_user = 0;
	size_t n = 0, first_in_ctx = 1;
	bool dwarf = u->opts.mode == FX_UNWIND_DWARF, user = false;

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
			user = true;
			last_user = ip;
		} else {
			continue; /* guest or hypervisor contexts; user ones come from DWARF */
		}
		out[n++] = f;
	}
	/* A user chain must end at the outermost frame to be whole; kernel
	 * threads have none. */
	if (!dwarf && user && !res->truncated && !fp_root(u, proc, last_user))
		res->truncated = true;
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
