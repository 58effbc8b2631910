/* SPDX-License-Identifier: MIT */
/* kallsyms: kernel symbols from /proc/kallsyms as a sorted table. */
#ifndef FXAGENT_KALLSYMS_H
#define FXAGENT_KALLSYMS_H

#include <stdint.h>
#include <stdio.h>

struct fx_kallsyms;

/* Names are kept compressed, 64 to a block (a kernel's 120,000 names take
 * 0.7 MB instead of 3): a lookup inflates the block into a cursor, the
 * caller's, so that the table stays read-only and the next lookup nearby
 * (a window's kernel frames go in address order) costs nothing. */
#define FX_KSYM_NAME_MAX    512 /* the kernel's KSYM_NAME_LEN, NUL included */
#define FX_KSYM_BLOCK_NAMES 64
struct fx_ksym_cursor {
	const struct fx_kallsyms *table;
	uint32_t block;
	char names[FX_KSYM_BLOCK_NAMES * FX_KSYM_NAME_MAX];
};

struct fx_ksym {
	const char *name;   /* in the cursor: valid until its next lookup */
	const char *module; /* "" for the core kernel, else the module name without [] */
	uint64_t start;
	uint64_t size; /* distance to the next symbol; 0 for the last one */
};

/* Parses kallsyms text (text symbols t/T/w/W only; of the names at one
 * address only the preferred is kept: global before local, then the first;
 * a name of KSYM_NAME_LEN bytes or more is a malformed line). Returns NULL with errno set
 * (ENOMEM, or EPERM when every address reads as 0: the caller lacks CAP_SYSLOG
 * or kptr_restrict hides them). Free with fx_kallsyms_free(). */
struct fx_kallsyms *fx_kallsyms_parse(FILE *f);
/* fx_kallsyms_parse() on @path (normally "/proc/kallsyms"). */
struct fx_kallsyms *fx_kallsyms_load(const char *path);

/* fx_kallsyms_load("/proc/kallsyms"); when it fails, warns (once per
 * process: what it costs and what fixes it) and returns NULL. */
struct fx_kallsyms *fx_kallsyms_load_system(void);
void fx_kallsyms_free(struct fx_kallsyms *ks);

/* The symbol whose range contains @addr (the last one at or below it), its
 * name inflated into @cur (zero it before the first use). Returns 0 and fills
 * @out, -ENOENT for an address below the first symbol, -EIO when a block
 * does not inflate (never, but checked). */
int fx_kallsyms_lookup(const struct fx_kallsyms *ks, uint64_t addr, struct fx_ksym_cursor *cur,
		       struct fx_ksym *out);

/* Lowest text address (the kernel "image base" used for relative addresses). */
uint64_t fx_kallsyms_base(const struct fx_kallsyms *ks);
size_t fx_kallsyms_count(const struct fx_kallsyms *ks);
/* Heap bytes the table holds: addresses, compressed names, modules. */
size_t fx_kallsyms_bytes(const struct fx_kallsyms *ks);

#endif
