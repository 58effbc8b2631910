/* SPDX-License-Identifier: MIT */
#include "fxagent/dwunwind.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/elf.h"
#include "fxagent/jitunw.h"
#include "fxagent/log.h"
#include "fxagent/window.h"

/* perf's x86 register numbers (asm/perf_regs.h) */
enum {
	PR_AX = 0,
	PR_BX = 1,
	PR_CX = 2,
	PR_DX = 3,
	PR_SI = 4,
	PR_DI = 5,
	PR_BP = 6,
	PR_SP = 7,
	PR_IP = 8,
	PR_R8 = 16,
};

/* What the callbacks need of the sample being unwound. */
struct sample_ctx {
	uint32_t tid;
	uint64_t regs[FX_DWUNWIND_NREGS];
	uint64_t sp;
	const uint8_t *stack;
	uint64_t stack_len;
	bool thread_given;
	uint64_t *ips;
	size_t n, cap;
	bool full;
	/* libdwfl takes a register it could not read as "undefined", which also
	 * marks the outermost frame: a read past the end of the copy is how we
	 * tell the two apart. */
	bool read_beyond;
	uint64_t beyond_max; /* the highest address read past the copy's end */
	bool root;	     /* the walk ended at the outermost frame */
	bool resumed;	     /* regs[16] is a return address: the walk goes on in a caller */
	uint64_t now;	     /* CLOCK_MONOTONIC ns at the start of the walk */
};

struct entry {
	uint32_t pid;
	uint64_t image;
	uint64_t generation;
	uint64_t last_use;
	Dwfl *dwfl;
	bool attached;
	struct sample_ctx *cur;
};

/* Frames compared in FX_DWUNWIND_CHECK (on the stack). */
#define FX_DWUNWIND_CHECK_FRAMES 256

#define HIST_STEP_NS 100
/* One walk in this many is timed (a power of two) */
#define FX_DWUNWIND_TIME_EVERY 8
#define HIST_BUCKETS	       2000

/* What extend() found for a thread last: the frames past its copy's end,
 * and the kernel's chain from the link on, which a later sample's must
 * equal for them to be taken again (a main loop is sampled in the same
 * frames over and over). One per slot, by tid. */
#define STITCH_SLOTS  64
#define STITCH_CHAIN  16
#define STITCH_FRAMES 48

struct stitch {
	uint32_t tid;
	uint8_t nchain, nframes;
	uint64_t image; /* the process's address space (fx_proc.image) */
	uint64_t ra_at;
	uint64_t chain[STITCH_CHAIN];
	uint64_t frames[STITCH_FRAMES];
};

struct fx_dwunwind {
	const struct fx_objects *objs;
	enum fx_dwunwind_engine engine;
	struct fx_cfitab *tables;
	struct fx_jitunw *jit;
	bool jit_on;
	uint32_t hist[HIST_BUCKETS + 1]; /* unwind times, HIST_STEP_NS wide */
	struct entry *v;
	size_t n, max;
	uint64_t tick;
	uint64_t now; /* the latest walk's time: off-CPU waits come with older ones */
	struct fx_dwunwind_stats stats;
	uint8_t live[FX_DWUNWIND_LIVE_BYTES]; /* a thread's stack past the copy (extend()) */
	struct stitch stitch[STITCH_SLOTS];
};

int fx_dwunwind_dwarf_regs(const uint64_t *regs, uint64_t mask, uint64_t out[FX_DWUNWIND_NREGS])
{
	/* DWARF number -> perf number */
	static const uint8_t perf_of[FX_DWUNWIND_NREGS] = {
		PR_AX,	   PR_DX,     PR_CX,	 PR_BX,	    PR_SI,     PR_DI,
		PR_BP,	   PR_SP,     PR_R8,	 PR_R8 + 1, PR_R8 + 2, PR_R8 + 3,
		PR_R8 + 4, PR_R8 + 5, PR_R8 + 6, PR_R8 + 7, PR_IP,
	};

	uint8_t at[PR_R8 + 8];
	unsigned k = 0;

	/* Values are packed: a register's index is the number of mask bits
	 * below its own. Counted in one pass: without POPCNT in the baseline
	 * ISA, __builtin_popcountll is a libgcc call, 17 of them a sample. */
	for (unsigned p = 0; p < sizeof(at); p++) {
		at[p] = (uint8_t)k;
		k += (unsigned)(mask >> p) & 1;
	}
	for (int d = 0; d < FX_DWUNWIND_NREGS; d++) {
		unsigned p = perf_of[d];

		if (!(mask & (1ULL << p)))
			return -EINVAL;
		out[d] = regs[at[p]];
	}
	return 0;
}

int fx_dwunwind_load_bias(int fd, uint64_t start, uint64_t pgoff, uint64_t *bias)
{
	const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	GElf_Ehdr ehdr;
	Elf *elf;
	size_t phnum;
	int ret = -ENOENT;

	fx_elf_init();
	/* Mapped: read with pread (ELF_C_READ) instead, the munmap and its TLB
	 * flush went, but the agent's peak RSS with Node.js and Java on the host
	 * rose by 2-3 MiB (bench/scale.py scenario 7, docs/performance.md). */
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || !gelf_getehdr(elf, &ehdr) || elf_getphdrnum(elf, &phnum) != 0) {
		elf_end(elf);
		return -ENOEXEC;
	}
	if (ehdr.e_type == ET_EXEC) {
		*bias = 0;
		elf_end(elf);
		return 0;
	}
	/* Two passes: the executable segment first, as a mapping of code is. */
	for (int pass = 0; pass < 2 && ret < 0; pass++) {
		for (size_t i = 0; i < phnum; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			if (pass == 0 && !(ph.p_flags & PF_X))
				continue;
			if ((ph.p_offset & ~(page - 1)) != pgoff)
				continue;
			*bias = start - (ph.p_vaddr & ~(page - 1));
			ret = 0;
			break;
		}
	}
	elf_end(elf);
	return ret;
}

/* ---- libdwfl callbacks ---- */

static int find_elf_none(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			 char **file_name, Elf **elfp)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name, (void)elfp;
	return -1;
}

/* Never look for separate debug files (or ask debuginfod) from the hot path:
 * .eh_frame, or .debug_frame of the binary itself, is what unwinding uses. */
static int find_debuginfo_none(Dwfl_Module *mod, void **userdata, const char *modname,
			       Dwarf_Addr base, const char *file_name, const char *debuglink_file,
			       GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
	(void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
	return -1;
}

static const Dwfl_Callbacks dwfl_callbacks = {
	.find_elf = find_elf_none,
	.find_debuginfo = find_debuginfo_none,
	.section_address = dwfl_offline_section_address,
};

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct entry *e = arg;

	(void)dwfl;
	if (!e->cur || e->cur->thread_given)
		return 0;
	e->cur->thread_given = true;
	*thread_argp = e;
	return (pid_t)e->cur->tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	struct entry *e = arg;

	(void)dwfl;
	if (!e->cur || (uint32_t)tid != e->cur->tid)
		return false;
	*thread_argp = e;
	return true;
}

/* Reads only the stack copy: anything else is not known at sample time. */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct entry *e = arg;
	struct sample_ctx *c = e->cur;

	(void)dwfl;
	if (!c)
		return false;
	if (addr < c->sp)
		return false; /* below the stack pointer: a register CFI says is spilled there */
	if (addr - c->sp > c->stack_len || c->stack_len - (addr - c->sp) < 8) {
		c->read_beyond = true;
		if (addr > c->beyond_max)
			c->beyond_max = addr;
		return false;
	}
	memcpy(result, c->stack + (addr - c->sp), 8);
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct entry *e = arg;

	return dwfl_thread_state_registers(thread, 0, FX_DWUNWIND_NREGS,
					   (const Dwarf_Word *)e->cur->regs);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

/* ---- the per-process cache ---- */

static void entry_clear(struct entry *e)
{
	/* @e is an element of d->v, never NULL; the analyzer takes &d->v[n]
	 * for a possible NULL in lookup().
	 * NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
	if (e->dwfl)
		dwfl_end(e->dwfl);
	memset(e, 0, sizeof(*e));
}

/* Reports the mappings of @proc not reported yet. With @strict, returns
 * -EEXIST at the first that cannot be added: usually it overlaps a module
 * already there (the address space changed under us) and a fresh Dwfl is due. */
static int report_maps(struct fx_dwunwind *d, struct entry *e, const struct fx_proc *proc,
		       bool strict)
{
	int ret = 0;

	dwfl_report_begin_add(e->dwfl);
	for (size_t i = 0; i < proc->nmaps; i++) {
		const struct fx_map *m = &proc->maps[i];
		const struct fx_object *ob = fx_objects_get(d->objs, m->object);
		uint64_t bias;
		int fd;

		if (!ob || dwfl_addrmodule(e->dwfl, m->start))
			continue;
		fd = fx_objects_dup_fd(d->objs, m->object); /* dwfl takes the fd */
		if (fd < 0)
			continue;
		if (fx_dwunwind_load_bias(fd, m->start, m->pgoff, &bias) < 0) {
			close(fd);
			continue;
		}
		if (!dwfl_report_elf(e->dwfl, ob->name, ob->path, fd, bias, true)) {
			close(fd);
			if (strict) {
				ret = -EEXIST;
				break;
			}
		}
	}
	dwfl_report_end(e->dwfl, NULL, NULL);
	return ret;
}

static int entry_build(struct fx_dwunwind *d, struct entry *e, const struct fx_proc *proc)
{
	entry_clear(e);
	e->pid = proc->pid;
	e->image = proc->image;
	e->generation = proc->generation;
	e->dwfl = dwfl_begin(&dwfl_callbacks);
	if (!e->dwfl)
		return -ENOMEM;
	report_maps(d, e, proc, false);
	/* Attaching needs a module to learn the architecture from. */
	e->attached = dwfl_attach_state(e->dwfl, NULL, (pid_t)proc->pid, &thread_callbacks, e);
	d->stats.dwfl_new++;
	return e->attached ? 0 : -ENOEXEC;
}

static struct entry *lookup(struct fx_dwunwind *d, const struct fx_proc *proc)
{
	struct entry *e = NULL;

	if (!d->v)
		return NULL; /* never: fx_dwunwind_new() failed without it */
	for (size_t i = 0; i < d->n; i++) {
		if (d->v[i].pid == proc->pid && d->v[i].dwfl) {
			e = &d->v[i];
			break;
		}
	}
	if (!e) {
		/* Entries never move: each Dwfl holds its entry's address. */
		for (size_t i = 0; i < d->n && !e; i++)
			if (!d->v[i].dwfl)
				e = &d->v[i];
		if (!e && d->n < d->max)
			e = &d->v[d->n++];
		if (!e) {
			e = &d->v[0];
			for (size_t i = 1; i < d->n; i++)
				if (d->v[i].last_use < e->last_use)
					e = &d->v[i];
			d->stats.evicted++;
		}
		entry_build(d, e, proc);
	} else if (e->image != proc->image) {
		entry_build(d, e, proc);
	} else if (e->generation != proc->generation) {
		/* New code mapped (dlopen): add it; start over if it replaced some. */
		if (report_maps(d, e, proc, true) == -EEXIST)
			entry_build(d, e, proc);
		else
			d->stats.dwfl_update++;
		e->generation = proc->generation;
	}
	e->last_use = d->tick;
	return e->attached ? e : NULL;
}

struct fx_dwunwind *fx_dwunwind_new(const struct fx_objects *objs, size_t max_procs,
				    enum fx_dwunwind_engine engine)
{
	struct fx_dwunwind *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	fx_elf_init();
	d->objs = objs;
	d->engine = engine;
	d->max = max_procs ? max_procs : 1;
	d->v = calloc(d->max, sizeof(*d->v));
	d->tables = fx_cfitab_new(objs, FX_DWUNWIND_TABLE_BYTES);
	d->jit = fx_jitunw_new();
	if (!d->v || !d->tables || !d->jit) {
		fx_dwunwind_free(d);
		return NULL;
	}
	return d;
}

void fx_dwunwind_free(struct fx_dwunwind *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		entry_clear(&d->v[i]);
	free(d->v);
	fx_cfitab_free(d->tables);
	fx_jitunw_free(d->jit);
	free(d);
}

uint64_t fx_dwunwind_mark(const struct fx_dwunwind *d)
{
	return d->tick;
}

size_t fx_dwunwind_drop_idle(struct fx_dwunwind *d, uint64_t mark)
{
	size_t n = 0;

	for (size_t i = 0; i < d->n; i++) {
		if (d->v[i].dwfl && d->v[i].last_use <= mark) {
			entry_clear(&d->v[i]);
			n++;
		}
	}
	d->stats.idle_dropped += n;
	fx_cfitab_drop_idle(d->tables, mark);
	fx_jitunw_drop_idle(d->jit, mark);
	return n;
}

void fx_dwunwind_set_jit(struct fx_dwunwind *d, bool on)
{
	d->jit_on = on;
}

void fx_dwunwind_forget(struct fx_dwunwind *d, uint32_t pid)
{
	fx_jitunw_forget(d->jit, pid);
	for (size_t i = 0; i < d->n; i++) {
		if (d->v[i].pid == pid && d->v[i].dwfl) {
			entry_clear(&d->v[i]); /* the slot is free for the next process */
			return;
		}
	}
}

static int on_frame(Dwfl_Frame *state, void *arg)
{
	struct sample_ctx *c = arg;
	Dwarf_Addr pc;
	bool activation;

	if (!dwfl_frame_pc(state, &pc, &activation))
		return DWARF_CB_ABORT;
	if (c->n == c->cap) {
		c->full = true;
		return DWARF_CB_ABORT;
	}
	/* A return address points after the call; the call is what ran. */
	c->ips[c->n++] = activation || pc == 0 ? pc : pc - 1;
	return DWARF_CB_OK;
}

/* Reads the word at @addr of the stack copy, as memory_read() does for
 * libdwfl: the same answers make the same walk. */
static bool stack_read(struct sample_ctx *c, uint64_t addr, uint64_t *out)
{
	if (addr < c->sp)
		return false;
	if (addr - c->sp > c->stack_len || c->stack_len - (addr - c->sp) < 8) {
		c->read_beyond = true;
		if (addr > c->beyond_max)
			c->beyond_max = addr;
		return false;
	}
	memcpy(out, c->stack + (addr - c->sp), 8);
	return true;
}

/* The word at @addr of the copy, without marking a read past it. */
static bool copy_word(const struct sample_ctx *c, uint64_t addr, uint64_t *out)
{
	if (addr < c->sp || addr - c->sp > c->stack_len || c->stack_len - (addr - c->sp) < 8)
		return false;
	memcpy(out, c->stack + (addr - c->sp), 8);
	return true;
}

#define WALK_FALLBACK 1

/* The rule of JIT code (a process's anonymous executable memory, object
 * @object) at @pc: from its runtime's unwinding information (JIT_CFI), else
 * by frame pointers (JIT_FP: CFA = rbp + 16, the caller's rbp at CFA - 16),
 * as V8 and the JVM with -XX:+PreserveFramePointer keep them. 0: not JIT
 * code. */
enum { JIT_CFI = 1, JIT_FP = 2 };

#define FP_RULE ((struct fx_cfi_rule){ .kind = FX_CFI_FP, .reg = 6, .off = 16, .rbp = -16 })

static int jit_rule(struct fx_dwunwind *d, const struct fx_proc *proc, uint32_t object, uint64_t pc,
		    uint64_t now, struct fx_cfi_rule *r)
{
	const struct fx_object *ob = fx_objects_get(d->objs, object);

	if (!ob || !ob->jit_pid)
		return 0;
	if (d->jit_on && fx_jitunw_find(d->jit, proc->pid, proc->image, pc, now, r) == 0) {
		d->stats.jit_by_cfi++;
		return JIT_CFI;
	}
	*r = FP_RULE;
	d->stats.jit_by_fp++;
	return JIT_FP;
}

/* Walks the stack with the compiled rules, as libdwfl would: the same
 * frames, and the same end (0: the return address was undefined or could
 * not be read; -1: an error). Returns WALK_FALLBACK, with nothing kept, at
 * the first frame the rules cannot take; but once a frame of JIT code was
 * walked by its runtime's CFI, which libdwfl does not have, the frames so
 * far are kept (-1), and a frame found by a frame-pointer guess that leads
 * nowhere is dropped. */
static int walk_tables(struct fx_dwunwind *d, const struct fx_proc *proc, struct sample_ctx *c)
{
	uint64_t pc = c->regs[16], sp = c->regs[7], bp = c->regs[6];
	bool bp_known = true, jit_cfi = false, guessed = false;
	int give_up = WALK_FALLBACK;

	for (bool first = true;; first = false) {
		uint64_t look = first && !c->resumed ? pc : pc - 1, off, base, cfa, ra, v = 0;
		struct fx_cfi_rule r;
		uint32_t object;
		int jit = 0;

		if (c->n == c->cap) {
			c->full = true;
			return 0;
		}
		c->ips[c->n++] = look;
		if (!fx_procs_resolve(proc, look, &object, &off)) {
			d->stats.left_no_map++;
			if (guessed && jit_cfi)
				c->n--;
			return give_up;
		}
		guessed = false;
		if (fx_cfitab_find(d->tables, object, off, &r) < 0 &&
		    !(jit = jit_rule(d, proc, object, look, c->now, &r))) {
			d->stats.left_no_table++;
			return give_up;
		}
		if (jit == JIT_CFI && !jit_cfi) {
			jit_cfi = true;
			give_up = -1;
		}
		if (r.kind == FX_CFI_NONE && jit_cfi) {
			/* Code without CFI called by JIT code (V8's builtins in
			 * node's text): libdwfl would lose the JIT frames, so
			 * frame pointers, as for JIT code without CFI. */
			r = FP_RULE;
			d->stats.jit_by_fp++;
		}
		if (r.kind == FX_CFI_NONE) {
			d->stats.left_no_rule++;
			return give_up;
		}
		if (r.kind == FX_CFI_OUTERMOST) {
			c->root = true;
			return 0;
		}
		if (r.kind == FX_CFI_PLT) {
			cfa = sp + 8 + ((pc & 15) >= (uint64_t)r.off ? 8 : 0);
		} else {
			if (r.reg == 7)
				base = sp;
			else if (r.kind == FX_CFI_FP && !bp_known)
				return give_up;
			else if (r.reg == 6 && bp_known)
				base = bp;
			else if (first && !c->resumed)
				base = c->regs[r.reg];
			else {
				d->stats.left_register++;
				return give_up; /* a register the rules do not follow */
			}
			cfa = base + (uint64_t)(int64_t)r.off;
			if (r.kind == FX_CFI_DEREF && !stack_read(c, cfa, &cfa))
				return give_up;
		}
		/* The stack grows down: a frame pointer that does not climb it
		 * was not one. */
		if (r.kind == FX_CFI_FP) {
			if (cfa <= sp)
				return give_up;
			guessed = true;
		}
		/* libdwfl takes a return address it cannot read as undefined;
		 * one of 0 ends the chain (a thread's start, by convention). */
		if (!stack_read(c, cfa - 8, &ra))
			return 0;
		if (ra == 0) {
			c->root = true;
			return 0;
		}
		if (r.rbp) {
			bp_known = stack_read(c, cfa + (uint64_t)(int64_t)r.rbp, &v);
			bp = v;
		}
		sp = cfa;
		pc = ra;
	}
}

/* What the rules say of @pc (a return address moved back into its call, or
 * the sampled pc): 1, it is in the outermost frame (_start, clone3's
 * child); 0, it is not, or it is in no mapping; -1, they do not know (an
 * object without a table: .debug_frame only). */
static int outermost(struct fx_dwunwind *d, const struct fx_proc *proc, uint64_t pc)
{
	uint32_t object;
	uint64_t off;

	if (!fx_procs_resolve(proc, pc, &object, &off))
		return 0;
	return fx_cfitab_outermost(d->tables, object, off);
}

/* libdwfl's walk. Returns what dwfl_getthread_frames() did (0: to an
 * undefined return address), -1 when the process has no module. */
static int walk_libdwfl(struct fx_dwunwind *d, const struct fx_proc *proc, struct sample_ctx *c)
{
	struct entry *e = proc ? lookup(d, proc) : NULL;
	int ret;

	if (!e) {
		/* No module to unwind with: the sampled address is all we know. */
		c->ips[c->n++] = c->regs[16];
		return -1;
	}
	e->cur = c;
	ret = dwfl_getthread_frames(e->dwfl, (pid_t)c->tid, on_frame, c);
	e->cur = NULL;
	if (c->n == 0) {
		c->ips[c->n++] = c->regs[16];
		ret = -1;
	}
	/* libdwfl ends at an undefined return address (0): the outermost
	 * frame's, one it could not read, or where it had no CFI; or with an
	 * error, past _start too (-1). The rules know which frame is the
	 * outermost; libdwfl is taken at its word where they do not. */
	if (!c->full) {
		int last = outermost(d, proc, c->ips[c->n - 1]);

		c->root = last == 1 || (last == -1 && ret == 0 && !c->read_beyond);
	}
	return c->root ? 0 : ret;
}

/* @c as before a walk: no frame yet, nothing read. */
static void walk_reset(struct sample_ctx *c)
{
	c->n = 0;
	c->full = c->read_beyond = c->thread_given = c->root = false;
	c->beyond_max = 0;
}

/* Whether a walk that ended with @ret reached the outermost frame: a rule
 * (or libdwfl) said the return address is undefined, or it was 0; or the copy
 * ran out where it held the whole stack (shorter than asked for: it ended at
 * the stack's top). */
static bool walk_root(const struct sample_ctx *c, int ret, const struct fx_record_sample *s)
{
	if (ret != 0 || c->full)
		return false;
	return c->root || (c->read_beyond && s->stack_dyn_size < s->stack_size);
}

/* Whether the walk stopped because the copy ran out: what extend() takes on.
 * libdwfl ends such a walk with an error (it could not read the return
 * address its rule names), the rules with 0. */
static bool walk_cut(const struct sample_ctx *c, const struct fx_record_sample *s)
{
	return !c->full && !c->root && c->read_beyond && s->stack_dyn_size >= s->stack_size;
}

/* The user part of @s's callchain: the kernel's frame-pointer walk at the
 * sample (the user's ip, then a return address per rbp link). */
static size_t user_chain(const struct fx_record_sample *s, const uint64_t **out)
{
	for (uint64_t i = 0; s->ips && i < s->nr; i++) {
		size_t n = 0;

		if (s->ips[i] != PERF_CONTEXT_USER)
			continue;
		while (i + 1 + n < s->nr && s->ips[i + 1 + n] < PERF_CONTEXT_MAX)
			n++;
		*out = s->ips + i + 1;
		return n;
	}
	return 0;
}

/* Reads [@at, @at + @len) of process @pid into @buf, a page per iovec so
 * that a read stops whole at the end of the stack's mapping. Returns the
 * bytes read from @at on, 0 on failure. */
static size_t read_live(uint32_t pid, uint64_t at, uint8_t *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote[FX_DWUNWIND_LIVE_BYTES / 4096 + 1];
	size_t n = 0, done = 0;
	ssize_t got;

	while (done < len && n < sizeof(remote) / sizeof(remote[0])) {
		size_t room = 4096 - (size_t)((at + done) & 4095);

		if (room > len - done)
			room = len - done;
		/* An address in the other process, never dereferenced here.
		 * NOLINTNEXTLINE(performance-no-int-to-ptr) */
		remote[n].iov_base = (void *)(uintptr_t)(at + done);
		remote[n++].iov_len = room;
		done += room;
	}
	local.iov_len = done;
	got = process_vm_readv((pid_t)pid, &local, 1, remote, n, 0);
	return got > 0 ? (size_t)got : 0;
}

/* Appends the kernel's chain @k[@from..@n) (return addresses) to @c's
 * frames. */
static void append_chain(struct sample_ctx *c, const uint64_t *k, size_t from, size_t n)
{
	for (size_t j = from; j < n; j++) {
		if (c->n == c->cap) {
			c->full = true;
			return;
		}
		c->ips[c->n++] = k[j] ? k[j] - 1 : 0;
	}
}

/* Walks on in a caller whose return address sits at @at, in the @len bytes
 * of d->live read from @base: its rbp is the word below (saved there by a
 * frame-pointer prologue). Writes the frames after @c's. Returns 1 when the
 * walk reached the outermost frame, -1 when it ran out of the bytes read, 0
 * otherwise. */
static int walk_live(struct fx_dwunwind *d, const struct fx_proc *proc, struct sample_ctx *c,
		     uint64_t base, size_t len, uint64_t at)
{
	struct sample_ctx e;

	if (c->n == c->cap || at < base + 8)
		return 0;
	memset(&e, 0, sizeof(e));
	e.tid = c->tid;
	e.sp = base;
	e.stack = d->live;
	e.stack_len = len;
	e.ips = c->ips + c->n;
	e.cap = c->cap - c->n;
	e.resumed = true;
	e.now = c->now;
	memcpy(&e.regs[16], d->live + (at - base), 8);
	memcpy(&e.regs[6], d->live + (at - 8 - base), 8);
	e.regs[7] = at + 8;
	if (walk_tables(d, proc, &e) == 0 && e.root) {
		c->n += e.n;
		return 1;
	}
	return e.read_beyond ? -1 : 0;
}

/* The one slot of the @len bytes of d->live (read from @base) that holds
 * @value, as an address; 0 when none or several do (a recursion's return
 * addresses repeat: which one the chain meant is not known). */
static uint64_t live_slot(const struct fx_dwunwind *d, uint64_t base, size_t len, uint64_t value)
{
	uint64_t found = 0;

	for (size_t at = 8; at + 8 <= len; at += 8) {
		if (memcmp(d->live + at, &value, 8) != 0)
			continue;
		if (found)
			return 0;
		found = base + at;
	}
	return found;
}

/* One try of extend() with @want bytes of the thread's memory from the
 * slot below @ra_at. Returns 1 (whole), 0 (not), or -1 (more memory might
 * do). Leaves @c's frames as they were unless whole. */
static int resume(struct fx_dwunwind *d, const struct fx_proc *proc,
		  const struct fx_record_sample *s, struct sample_ctx *c, uint64_t ra_at,
		  const uint64_t *k, size_t link, size_t nk, size_t want)
{
	uint64_t base = ra_at - 8, at;
	size_t n0 = c->n, got = read_live(s->pid, base, d->live, want) & ~(size_t)7;
	bool more = got == want && want < sizeof(d->live);
	int r;

	if (got < 16)
		return 0;
	if (!memcmp(d->live + 8, &k[link + 1], 8)) {
		r = walk_live(d, proc, c, base, got, ra_at);
		if (r == 1)
			d->stats.stitch_live++;
		return r < 0 && more ? -1 : r;
	}
	at = live_slot(d, base, got, k[nk - 1]);
	if (!at)
		return more ? -1 : 0;
	append_chain(c, k, link + 1, nk - 1);
	r = c->full ? 0 : walk_live(d, proc, c, base, got, at);
	if (r == 1) {
		d->stats.stitch_outer++;
		return 1;
	}
	c->n = n0;
	c->full = false;
	return r < 0 && more ? -1 : 0;
}

/* The copy ran out at @ra_at, the slot of the last frame's return address
 * (a frame bigger than the copy: libuv's 16 KiB epoll array, a parser's
 * buffer). The kernel's frame-pointer chain, taken at the sample, says what
 * that slot held if one of its links is the frame there: its rbp links are
 * followed through the copy from the sampled rbp until one is @ra_at - 8.
 * Then the thread's stack from that slot on is read from its memory now
 * (a page, then up to FX_DWUNWIND_LIVE_BYTES if the walk needs more):
 * - if the slot still holds what the kernel saw, the frames above it are
 *   the same live ones, walked by the rules to the outermost frame;
 * - else (the thread has moved on since) the kernel's chain gives the frames
 *   up to its last, and the memory the rest, from the one slot that holds
 *   the chain's last return address: the outermost frames (main's caller,
 *   a thread's start) stay put for the thread's life.
 * Where neither reaches the outermost frame, the kernel's chain from the
 * link on is the rest of the stack (perf's answer), and the stack counts as
 * cut. A thread whose last such sample had the same slot and the same chain
 * from the link on gets that sample's frames again, without a read: a main
 * loop is sampled in the same outer frames over and over, and the read was
 * a fifth of the agent's time on a busy Node.js server. Returns whether the
 * stack is whole. */
static bool extend(struct fx_dwunwind *d, const struct fx_proc *proc,
		   const struct fx_record_sample *s, struct sample_ctx *c, uint64_t ra_at)
{
	const uint64_t *k = NULL;
	size_t nk = user_chain(s, &k), link = 0, tail, n0 = c->n;
	uint64_t bp = c->regs[6];
	struct stitch *st;
	bool found = false;
	int r;

	if (nk < 2 || k[0] != c->regs[16] || !proc) {
		d->stats.cut_no_link++;
		return false;
	}
	for (; link + 1 < nk; link++) {
		uint64_t next, ra;

		if (bp + 8 == ra_at) {
			found = true;
			break;
		}
		if (!copy_word(c, bp, &next))
			break;
		/* The kernel read [bp + 8] for k[link + 1]: the copy must agree. */
		if (copy_word(c, bp + 8, &ra) && ra != k[link + 1])
			break;
		if (next <= bp)
			break; /* a chain climbs the stack */
		bp = next;
	}
	if (!found) {
		d->stats.cut_no_link++;
		return false;
	}
	d->stats.stitched++;
	tail = nk - link - 1;
	st = &d->stitch[s->tid % STITCH_SLOTS];
	if (st->tid == s->tid && st->image == proc->image && st->ra_at == ra_at &&
	    st->nchain == tail && !memcmp(st->chain, k + link + 1, tail * 8) &&
	    st->nframes <= c->cap - c->n) {
		memcpy(c->ips + c->n, st->frames, st->nframes * 8);
		c->n += st->nframes;
		d->stats.stitch_cached++;
		return true;
	}
	r = resume(d, proc, s, c, ra_at, k, link, nk, 4096);
	if (r < 0)
		r = resume(d, proc, s, c, ra_at, k, link, nk, sizeof(d->live));
	if (r == 1) {
		if (tail <= STITCH_CHAIN && c->n - n0 <= STITCH_FRAMES) {
			*st = (struct stitch){ .tid = s->tid,
					       .nchain = (uint8_t)tail,
					       .nframes = (uint8_t)(c->n - n0),
					       .image = proc->image,
					       .ra_at = ra_at };
			memcpy(st->chain, k + link + 1, tail * 8);
			memcpy(st->frames, c->ips + n0, (c->n - n0) * 8);
		}
		return true;
	}
	d->stats.stitch_fp++;
	append_chain(c, k, link + 1, nk);
	return false;
}

static void check(struct fx_dwunwind *d, const struct fx_proc *proc, const struct sample_ctx *t,
		  bool t_cut, const struct fx_record_sample *s)
{
	uint64_t ips[FX_DWUNWIND_CHECK_FRAMES];
	struct sample_ctx c = *t;
	size_t same = 0;
	int ret;

	c.ips = ips;
	c.cap = t->cap < FX_DWUNWIND_CHECK_FRAMES ? t->cap : FX_DWUNWIND_CHECK_FRAMES;
	walk_reset(&c);
	ret = walk_libdwfl(d, proc, &c);
	while (same < c.n && same < t->n && ips[same] == t->ips[same])
		same++;
	d->stats.check_samples++;
	d->stats.check_frames += c.n;
	d->stats.check_frames_same += same;
	if (same == c.n && same == t->n && !walk_root(&c, ret, s) == t_cut)
		d->stats.check_same++;
}

size_t fx_dwunwind_user(struct fx_dwunwind *d, const struct fx_proc *proc,
			const struct fx_record_sample *s, uint64_t *ips, size_t cap,
			bool *truncated)
{
	struct sample_ctx c = { .tid = s->tid, .ips = ips, .cap = cap };
	struct timespec t0 = { 0 }, t1;
	uint64_t ns;
	int ret = WALK_FALLBACK;
	bool timed;

	*truncated = false;
	if (!s->abi || !s->regs || cap == 0 ||
	    fx_dwunwind_dwarf_regs(s->regs, FX_DWUNWIND_REGS_MASK, c.regs) < 0) {
		d->stats.no_regs++;
		return 0;
	}
	d->stats.unwinds++;
	fx_cfitab_set_now(d->tables, ++d->tick);
	fx_jitunw_set_mark(d->jit, d->tick);
	c.sp = c.regs[7];
	c.stack = s->stack;
	c.stack_len = s->stack ? s->stack_dyn_size : 0;
	/* Every 8th walk is timed, for the quantiles: two clock reads a walk
	 * were 3% of the sampling thread at a big host's rate. */
	timed = (d->stats.unwinds & (FX_DWUNWIND_TIME_EVERY - 1)) == 1;
	if (timed || !s->time)
		clock_gettime(CLOCK_MONOTONIC, &t0);
	/* The sample's own time is on the same clock (attr.clockid); never
	 * before the last walk's, for the JIT re-reads' intervals. */
	c.now = s->time ? s->time : (uint64_t)t0.tv_sec * 1000000000ull + (uint64_t)t0.tv_nsec;
	if (c.now < d->now)
		c.now = d->now;
	d->now = c.now;
	if (proc && d->engine != FX_DWUNWIND_LIBDWFL)
		ret = walk_tables(d, proc, &c);
	if (ret == WALK_FALLBACK) {
		walk_reset(&c);
		ret = walk_libdwfl(d, proc, &c);
		d->stats.by_libdwfl++;
	} else {
		d->stats.by_tables++;
	}
	if (timed) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t1.tv_nsec -
		     (uint64_t)t0.tv_nsec;
		d->stats.ns += ns * FX_DWUNWIND_TIME_EVERY;
		d->hist[ns / HIST_STEP_NS < HIST_BUCKETS ? ns / HIST_STEP_NS : HIST_BUCKETS]++;
	}
	*truncated = !walk_root(&c, ret, s);
	if (d->engine == FX_DWUNWIND_CHECK)
		check(d, proc, &c, *truncated, s);
	if (walk_cut(&c, s))
		*truncated = !extend(d, proc, s, &c, c.beyond_max);
	if (*truncated)
		d->stats.truncated++;
	return c.n;
}

void fx_dwunwind_get_stats(const struct fx_dwunwind *d, struct fx_dwunwind_stats *out)
{
	*out = d->stats;
	out->live = 0;
	for (size_t i = 0; i < d->n; i++)
		out->live += d->v[i].dwfl != NULL;
}

void fx_dwunwind_jit_stats(const struct fx_dwunwind *d, struct fx_jitunw_stats *out)
{
	fx_jitunw_get_stats(d->jit, out);
}

void fx_dwunwind_table_stats(const struct fx_dwunwind *d, struct fx_cfitab_stats *out)
{
	fx_cfitab_get_stats(d->tables, out);
}

uint64_t fx_dwunwind_quantile_ns(const struct fx_dwunwind *d, double q)
{
	uint64_t total = 0, seen = 0, want;

	for (size_t i = 0; i <= HIST_BUCKETS; i++)
		total += d->hist[i];
	if (!total)
		return 0;
	want = (uint64_t)(q * (double)total);
	if (want >= total)
		want = total - 1;
	for (size_t i = 0; i <= HIST_BUCKETS; i++) {
		seen += d->hist[i];
		if (seen > want)
			return (uint64_t)i * HIST_STEP_NS;
	}
	return (uint64_t)HIST_BUCKETS * HIST_STEP_NS;
}
