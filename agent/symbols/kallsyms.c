/* SPDX-License-Identifier: MIT */
#include "fxagent/kallsyms.h"
#include "fxagent/log.h"
#include "fxagent/search.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* A kernel has a few hundred thousand text symbols; stop well above that so a
 * bogus input file cannot take all memory. */
#define KSYMS_MAX (1u << 23)
#define NAMES_MAX ((size_t)1 << 30)
#define NO_MODULE UINT32_MAX

/* One symbol while parsing. */
struct ksym {
	uint64_t start;
	uint32_t name;	 /* offset in the parse's names */
	uint32_t module; /* index in modules, NO_MODULE for the core kernel */
	uint32_t rank;	 /* local bit | input index: among equal starts, lower is preferred */
};

/* Symbols [first, next span's first) belong to one module (or none). */
struct span {
	uint64_t first;
	uint32_t module;
};

struct fx_kallsyms {
	uint64_t *start; /* n, sorted, distinct */
	size_t n;
	uint32_t *block_at; /* n_blocks + 1 offsets in z */
	uint8_t *z;	    /* each block: its names, NUL-terminated, compress()ed */
	size_t n_blocks;
	struct span *spans;
	size_t n_spans;
	char **modules;
	size_t n_modules;
	uint64_t base;
};

/* The parse's growing state. */
struct parse {
	struct ksym *syms;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
	char **modules;
	size_t n_modules, cap_modules;
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

static int grow(void **p, size_t *cap, size_t need, size_t size, size_t first)
{
	size_t c = *cap ? *cap : first;
	void *q;

	while (c < need)
		c *= 2;
	if (c == *cap)
		return 0;
	q = realloc(*p, c * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

/* @len bytes of @s and a NUL at the end of the parse's names. */
static int add_name(struct parse *ps, const char *s, size_t len, uint32_t *at)
{
	if (ps->names_len + len + 1 > NAMES_MAX)
		return -E2BIG;
	if (grow((void **)&ps->names, &ps->names_cap, ps->names_len + len + 1, 1, 1 << 16))
		return -ENOMEM;
	memcpy(ps->names + ps->names_len, s, len);
	ps->names[ps->names_len + len] = '\0';
	*at = (uint32_t)ps->names_len;
	ps->names_len += len + 1;
	return 0;
}

/* The index of module @mod: symbols of one module are contiguous, so the
 * last one is tried first. */
static int module_index(struct parse *ps, const char *mod, size_t len, uint32_t *out)
{
	size_t i = ps->n_modules;
	char *m;

	while (i-- > 0) {
		if (strlen(ps->modules[i]) == len && memcmp(ps->modules[i], mod, len) == 0) {
			*out = (uint32_t)i;
			return 0;
		}
		if (i + 8 < ps->n_modules) /* a module seen long ago: a new entry is fine */
			break;
	}
	if (ps->n_modules >= KSYMS_MAX)
		return -E2BIG;
	if (grow((void **)&ps->modules, &ps->cap_modules, ps->n_modules + 1, sizeof(char *), 16))
		return -ENOMEM;
	m = strndup(mod, len);
	if (!m)
		return -ENOMEM;
	ps->modules[ps->n_modules] = m;
	*out = (uint32_t)ps->n_modules++;
	return 0;
}

static int add_sym(struct parse *ps, uint64_t addr, char type, const char *name, size_t name_len,
		   const char *mod, size_t mod_len)
{
	struct ksym *s;
	int ret;

	if (ps->n >= KSYMS_MAX)
		return -E2BIG;
	if (grow((void **)&ps->syms, &ps->cap, ps->n + 1, sizeof(*ps->syms), 4096))
		return -ENOMEM;
	s = &ps->syms[ps->n];
	s->start = addr;
	/* Among aliases prefer global over local; the input order breaks ties. */
	s->rank = (uint32_t)ps->n | ((type == 'T' || type == 'W') ? 0 : 0x80000000u);
	s->module = NO_MODULE;
	ret = add_name(ps, name, name_len, &s->name);
	if (!ret && mod)
		ret = module_index(ps, mod, mod_len, &s->module);
	if (ret)
		return ret;
	ps->n++;
	return 0;
}

/* The sorted symbols of @ps, aliases dropped, as @ks's table: addresses,
 * module spans and the names compressed a block at a time. */
static int build(struct fx_kallsyms *ks, struct parse *ps)
{
	char *block = NULL;
	size_t z_cap = 0, z_len = 0, spans_cap = 0, i, k = 0;
	int ret = -ENOMEM;

	if (ps->n)
		qsort(ps->syms, ps->n, sizeof(*ps->syms), cmp_ksym);
	for (i = 0; i < ps->n; i++) {
		/* Sorted by rank within a start: the first is the preferred name. */
		if (k && ps->syms[k - 1].start == ps->syms[i].start)
			continue;
		ps->syms[k++] = ps->syms[i];
	}
	ks->n = k;
	ks->n_blocks = (k + FX_KSYM_BLOCK_NAMES - 1) / FX_KSYM_BLOCK_NAMES;
	ks->start = malloc((k ? k : 1) * sizeof(*ks->start));
	ks->block_at = malloc((ks->n_blocks + 1) * sizeof(*ks->block_at));
	block = malloc(FX_KSYM_BLOCK_NAMES * FX_KSYM_NAME_MAX);
	if (!ks->start || !ks->block_at || !block)
		goto out;
	for (i = 0; i < k; i++) {
		ks->start[i] = ps->syms[i].start;
		if (i == 0 || ps->syms[i].module != ps->syms[i - 1].module) {
			if (grow((void **)&ks->spans, &spans_cap, ks->n_spans + 1,
				 sizeof(*ks->spans), 8))
				goto out;
			ks->spans[ks->n_spans++] = (struct span){ i, ps->syms[i].module };
		}
	}
	for (size_t b = 0; b < ks->n_blocks; b++) {
		size_t len = 0, end = (b + 1) * FX_KSYM_BLOCK_NAMES;
		uLongf zl;

		if (end > k)
			end = k;
		for (i = b * FX_KSYM_BLOCK_NAMES; i < end; i++) {
			const char *n = ps->names + ps->syms[i].name;
			size_t l = strlen(n) + 1;

			memcpy(block + len, n, l);
			len += l;
		}
		zl = compressBound(len);
		if (z_len + zl > UINT32_MAX) {
			ret = -E2BIG;
			goto out;
		}
		if (grow((void **)&ks->z, &z_cap, z_len + zl, 1, 1 << 16))
			goto out;
		if (compress2(ks->z + z_len, &zl, (const Bytef *)block, len,
			      Z_DEFAULT_COMPRESSION) != Z_OK)
			goto out;
		ks->block_at[b] = (uint32_t)z_len;
		z_len += zl;
	}
	ks->block_at[ks->n_blocks] = (uint32_t)z_len;
	/* The exact sizes: the table lives as long as the modules do. */
	if (z_len) {
		uint8_t *z = realloc(ks->z, z_len);

		if (z)
			ks->z = z;
	}
	ks->modules = ps->modules;
	ks->n_modules = ps->n_modules;
	ps->modules = NULL;
	ps->n_modules = 0;
	ret = 0;
out:
	free(block);
	return ret;
}

static void parse_free(struct parse *ps)
{
	for (size_t i = 0; i < ps->n_modules; i++)
		free(ps->modules[i]);
	free(ps->modules);
	free(ps->syms);
	free(ps->names);
}

struct fx_kallsyms *fx_kallsyms_parse(FILE *f)
{
	struct fx_kallsyms *ks;
	struct parse ps = { 0 };
	char *line = NULL;
	size_t line_cap = 0, skipped = 0;
	bool any_nonzero = false, any = false;
	int ret = 0;

	ks = calloc(1, sizeof(*ks));
	if (!ks) {
		errno = ENOMEM;
		return NULL;
	}
	while (ret == 0 && getline(&line, &line_cap, f) >= 0) {
		uint64_t addr;
		char type, *name, *mod;
		size_t name_len, mod_len;

		if (!parse_line(line, &addr, &type, &name, &name_len, &mod, &mod_len) ||
		    name_len >= FX_KSYM_NAME_MAX || mod_len >= FX_KSYM_NAME_MAX) {
			skipped++;
			continue;
		}
		any = true;
		if (addr)
			any_nonzero = true;
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		ret = add_sym(&ps, addr, type, name, name_len, mod, mod_len);
	}
	free(line);
	if (ret == -E2BIG) {
		fx_warn("kallsyms: more than %u symbols or 1 GiB of names, ignoring the rest",
			KSYMS_MAX);
		ret = 0;
	}
	if (!ret && any && !any_nonzero)
		ret = -EPERM;
	if (!ret)
		ret = build(ks, &ps);
	parse_free(&ps);
	if (ret) {
		fx_kallsyms_free(ks);
		errno = -ret;
		return NULL;
	}
	if (skipped)
		fx_debug("kallsyms: skipped %zu malformed lines", skipped);
	ks->base = 0;
	for (size_t s = 0; s < ks->n_spans && !ks->base; s++) {
		/* Sorted: the first core-kernel symbol is the lowest. */
		if (ks->spans[s].module != NO_MODULE)
			continue;
		for (size_t i = ks->spans[s].first; i < ks->n; i++) {
			if (ks->start[i]) {
				ks->base = ks->start[i];
				break;
			}
		}
	}
	if (!ks->base && ks->n)
		ks->base = ks->start[0];
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
	for (size_t i = 0; i < ks->n_modules; i++)
		free(ks->modules[i]);
	free(ks->modules);
	free(ks->spans);
	free(ks->start);
	free(ks->block_at);
	free(ks->z);
	free(ks);
}

/* Inflates block @b into @cur unless it holds it already. */
static int inflate_block(const struct fx_kallsyms *ks, struct fx_ksym_cursor *cur, uint32_t b)
{
	uLongf len = sizeof(cur->names) - 1;

	if (cur->table == ks && cur->block == b)
		return 0;
	cur->table = NULL;
	if (uncompress((Bytef *)cur->names, &len, ks->z + ks->block_at[b],
		       ks->block_at[b + 1] - ks->block_at[b]) != Z_OK)
		return -EIO;
	cur->names[len] = '\0';
	cur->table = ks;
	cur->block = b;
	return 0;
}

static const char *module_of(const struct fx_kallsyms *ks, size_t i)
{
	size_t s = FX_SEARCH_LAST_LE(ks->spans, ks->n_spans, first, i);

	if (s == SIZE_MAX || ks->spans[s].module == NO_MODULE)
		return "";
	return ks->modules[ks->spans[s].module];
}

int fx_kallsyms_lookup(const struct fx_kallsyms *ks, uint64_t addr, struct fx_ksym_cursor *cur,
		       struct fx_ksym *out)
{
	const char *n;
	size_t i, k;

	if (!ks)
		return -ENOENT;
	/* Last entry with start <= addr (starts are distinct). */
	i = fx_search_last_le(ks->start, ks->n, sizeof(*ks->start), 0, addr);
	if (i == SIZE_MAX)
		return -ENOENT;
	if (inflate_block(ks, cur, (uint32_t)(i / FX_KSYM_BLOCK_NAMES)) < 0)
		return -EIO;
	n = cur->names;
	for (k = i % FX_KSYM_BLOCK_NAMES; k > 0; k--)
		n += strlen(n) + 1;
	out->name = n;
	out->module = module_of(ks, i);
	out->start = ks->start[i];
	out->size = i + 1 < ks->n ? ks->start[i + 1] - ks->start[i] : 0;
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
	size_t b;

	if (!ks)
		return 0;
	b = sizeof(*ks) + ks->n * sizeof(*ks->start) + (ks->n_blocks + 1) * sizeof(*ks->block_at) +
	    ks->block_at[ks->n_blocks] + ks->n_spans * sizeof(*ks->spans);
	for (size_t i = 0; i < ks->n_modules; i++)
		b += sizeof(char *) + strlen(ks->modules[i]) + 1;
	return b;
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
