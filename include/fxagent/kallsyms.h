/* SPDX-License-Identifier: MIT */
/* kallsyms: kernel symbols from /proc/kallsyms as a sorted table. */
#ifndef FXAGENT_KALLSYMS_H
#define FXAGENT_KALLSYMS_H

#include <stdint.h>
#include <stdio.h>

struct fx_kallsyms;

struct fx_ksym {
	const char *name;   /* owned by the table */
	const char *module; /* "" for the core kernel, else the module name without [] */
	uint64_t start;
	uint64_t size; /* distance to the next symbol; 0 for the last one */
};

/* Parses kallsyms text (text symbols t/T/w/W only). Returns NULL with errno set
 * (ENOMEM, or EPERM when every address reads as 0: the caller lacks CAP_SYSLOG
 * or kptr_restrict hides them). Free with fx_kallsyms_free(). */
struct fx_kallsyms *fx_kallsyms_parse(FILE *f);
/* fx_kallsyms_parse() on @path (normally "/proc/kallsyms"). */
struct fx_kallsyms *fx_kallsyms_load(const char *path);

/* fx_kallsyms_load("/proc/kallsyms"); when it fails, warns (once per
 * process: what it costs and what fixes it) and returns NULL. */
struct fx_kallsyms *fx_kallsyms_load_system(void);
void fx_kallsyms_free(struct fx_kallsyms *ks);

/* The symbol whose range contains @addr (the last one at or below it). Returns
 * 0 and fills @out, or -ENOENT for an address below the first symbol. */
int fx_kallsyms_lookup(const struct fx_kallsyms *ks, uint64_t addr, struct fx_ksym *out);

/* Lowest text address (the kernel "image base" used for relative addresses). */
uint64_t fx_kallsyms_base(const struct fx_kallsyms *ks);
size_t fx_kallsyms_count(const struct fx_kallsyms *ks);
/* Heap bytes the table holds: symbols and names. */
size_t fx_kallsyms_bytes(const struct fx_kallsyms *ks);

#endif
