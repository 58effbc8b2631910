/* SPDX-License-Identifier: MIT */
#include "fxagent/kallsyms.h"
#include "fxagent/arena.h"
#include "fxagent/log.h"
#include "fxagent/search.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A kernel has a few hundred thousand text symbols; stop well above that so a
 * bogus input file cannot take all memory. */
#define KSYMS_MAX (1u << 23)
#define ARENA_MAX ((size_t)1 << 30)

struct ksym {
	uint64_t start;
	const char *name;   /* in the arena */
	const char *module; /* in the arena; NULL for the core kernel */
	uint32_t rank;	    /* local bit | input index: among equal starts, lower is preferred */
};

struct fx_kallsyms {
	struct ksym *syms;
	size_t n, cap;
	struct fx_arena names; /* names and module names, capped at ARENA_MAX */
	uint64_t base;
};

/* Splits one line into its fields. Returns false for a malformed line. */
static bool parse_line(char *line, uint64_t *addr, char *type, char **name, size_t *name_len,
		       char **mod, size_t *mod_len)
{
	char *p = line, *end;
	unsigned long long v;

	if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
		return false;
	errno = 0;
	v = strtoull(p, &end, 16);
	if (errno || end == p || (*end != ' ' && *end != '\t'))
		return false;
	p = end;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p || (p[1] != ' ' && p[1] != '\t'))
		return false;
	*type = *p;
	p += 2;
	while (*p == ' ' || *p == '\t')
		p++;
	*name = p;
	while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
		p++;
	*name_len = (size_t)(p - *name);
	if (*name_len == 0)
		return false;
	while (*p == ' ' || *p == '\t')
		p++;
	*mod = NULL;
	*mod_len = 0;
	if (*p == '[') {
		char *close = strchr(p, ']');

		if (!close || close == p + 1)
			return false;
		*mod = p + 1;
		*mod_len = (size_t)(close - p - 1);
	} else if (*p && *p != '\n' && *p != '\r') {
		return false;
	}
	*addr = v;
	return true;
}

static int cmp_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return 0;
}

/* A copy of @s (@len bytes) in the names arena: -E2BIG past its cap. */
static int arena_add(struct fx_kallsyms *ks, const char *s, size_t len, const char **out)
{
	*out = fx_arena_strndup(&ks->names, s, len);
	return *out ? 0 : -errno;
}

static int add_sym(struct fx_kallsyms *ks, uint64_t addr, char type, const char *name,
		   size_t name_len, const char *mod, size_t mod_len, const char **last_mod)
{
	struct ksym *s;
	int ret;

	if (ks->n == ks->cap) {
		size_t cap = ks->cap ? ks->cap * 2 : 4096;
		struct ksym *p;

		if (ks->n >= KSYMS_MAX)
			return -E2BIG;
		p = realloc(ks->syms, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		ks->syms = p;
		ks->cap = cap;
	}
	s = &ks->syms[ks->n];
	s->start = addr;
	/* Among aliases prefer global over local; the input order breaks ties. */
	s->rank = (uint32_t)ks->n | ((type == 'T' || type == 'W') ? 0 : 0x80000000u);
	ret = arena_add(ks, name, name_len, &s->name);
	if (ret)
		return ret;
	s->module = NULL;
	if (mod) {
		/* Symbols of one module are contiguous: share its name with the last one. */
		if (*last_mod && strlen(*last_mod) == mod_len &&
		    memcmp(*last_mod, mod, mod_len) == 0) {
			s->module = *last_mod;
		} else {
			ret = arena_add(ks, mod, mod_len, &s->module);
			if (ret)
				return ret;
			*last_mod = s->module;
		}
	}
	ks->n++;
	return 0;
}

struct fx_kallsyms *fx_kallsyms_parse(FILE *f)
{
	struct fx_kallsyms *ks;
	char *line = NULL;
	size_t line_cap = 0, i, skipped = 0;
	const char *last_mod = NULL;
	bool any_nonzero = false, any = false;
	int ret = 0;

	ks = calloc(1, sizeof(*ks));
	if (!ks) {
		errno = ENOMEM;
		return NULL;
	}
	fx_arena_init(&ks->names, ARENA_MAX);
	while (ret == 0 && getline(&line, &line_cap, f) >= 0) {
		uint64_t addr;
		char type, *name, *mod;
		size_t name_len, mod_len;

		if (!parse_line(line, &addr, &type, &name, &name_len, &mod, &mod_len)) {
			skipped++;
			continue;
		}
		any = true;
		if (addr)
			any_nonzero = true;
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		ret = add_sym(ks, addr, type, name, name_len, mod, mod_len, &last_mod);
	}
	free(line);
	if (ret == -E2BIG) {
		fx_warn("kallsyms: more than %u symbols, ignoring the rest", KSYMS_MAX);
		ret = 0;
	}
	if (ret) {
		fx_kallsyms_free(ks);
		errno = -ret;
		return NULL;
	}
	if (any && !any_nonzero) {
		fx_kallsyms_free(ks);
		errno = EPERM;
		return NULL;
	}
	if (skipped)
		fx_debug("kallsyms: skipped %zu malformed lines", skipped);
	if (ks->n)
		qsort(ks->syms, ks->n, sizeof(*ks->syms), cmp_ksym);
	ks->base = 0;
	for (i = 0; i < ks->n; i++) {
		/* Sorted: the first core-kernel symbol is the lowest. */
		if (!ks->syms[i].module && ks->syms[i].start) {
			ks->base = ks->syms[i].start;
			break;
		}
	}
	if (!ks->base && ks->n)
		ks->base = ks->syms[0].start;
	return ks;
}

struct fx_kallsyms *fx_kallsyms_load(const char *path)
{
	struct fx_kallsyms *ks;
	FILE *f;
	int err;

	f = fopen(path, "re");
	if (!f) {
		err = errno;
		fx_log_errno(FX_LOG_DEBUG, err, "kallsyms: cannot open '%s'", path);
		errno = err;
		return NULL;
	}
	ks = fx_kallsyms_parse(f);
	err = errno;
	fclose(f);
	errno = err;
	return ks;
}

void fx_kallsyms_free(struct fx_kallsyms *ks)
{
	if (!ks)
		return;
	free(ks->syms);
	fx_arena_free(&ks->names);
	free(ks);
}

int fx_kallsyms_lookup(const struct fx_kallsyms *ks, uint64_t addr, struct fx_ksym *out)
{
	size_t lo, i, j;

	if (!ks)
		return -ENOENT;
	/* Last entry with start <= addr. */
	lo = FX_SEARCH_LAST_LE(ks->syms, ks->n, start, addr);
	if (lo == SIZE_MAX)
		return -ENOENT;
	i = lo;
	/* First of the aliases at that start: the preferred name. */
	while (i > 0 && ks->syms[i - 1].start == ks->syms[i].start)
		i--;
	j = lo + 1;
	out->name = ks->syms[i].name;
	out->module = ks->syms[i].module ? ks->syms[i].module : "";
	out->start = ks->syms[i].start;
	out->size = j < ks->n ? ks->syms[j].start - ks->syms[i].start : 0;
	return 0;
}

uint64_t fx_kallsyms_base(const struct fx_kallsyms *ks)
{
	return ks ? ks->base : 0;
}

size_t fx_kallsyms_count(const struct fx_kallsyms *ks)
{
	return ks ? ks->n : 0;
}

size_t fx_kallsyms_bytes(const struct fx_kallsyms *ks)
{
	return ks ? sizeof(*ks) + ks->cap * sizeof(*ks->syms) + fx_arena_bytes(&ks->names) : 0;
}

struct fx_kallsyms *fx_kallsyms_load_system(void)
{
	static int warned;
	struct fx_kallsyms *ks = fx_kallsyms_load("/proc/kallsyms");

	if (!ks && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		fx_log_errno(FX_LOG_WARN, errno,
			     "cannot read kernel symbols (kernel frames stay addresses; reading "
			     "/proc/kallsyms needs CAP_SYSLOG and kernel.kptr_restrict <= 1 and, "
			     "under systemd, no ProtectKernelTunables=)");
	return ks;
}
