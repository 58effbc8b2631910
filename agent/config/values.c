/* SPDX-License-Identifier: MIT */
/* The readers of config values, one per kind: whole numbers, durations and
 * sizes with units (no leading zero: YAML 1.1 reads "010" as octal), the
 * YAML 1.2 booleans, strings without control characters, names, absolute
 * paths, enumerations, and mappings of known keys. Each says what it expected
 * and what it got, at the value's position.
 */
#include "config_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (!len || len > 20)
		return false;
	for (i = 0; i < len; i++) {
		unsigned d = (unsigned char)s[i] - '0';

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

/* "010": YAML 1.1 readers take it for octal 8, we would read 10. Either
 * way not everyone reads it alike, so it is refused. */
static bool has_leading_zero(const struct node *n)
{
	return n->type == N_SCALAR && n->len >= 2 && n->str[0] == '0' && n->str[1] >= '0' &&
	       n->str[1] <= '9';
}

/* The message for such a number: what was expected, and both readings
 * ("write 10s or 8s"). */
static void leading_zero(struct ctx *x, const struct node *n, const char *path, const char *what)
{
	char buf[SHOW_BUF], dec[32] = "", oct[32] = "";
	size_t d = 0, z = 0;
	uint64_t o = 0;
	bool octal = true;

	while (d < n->len && n->str[d] >= '0' && n->str[d] <= '9') {
		octal = octal && n->str[d] <= '7' && o < (UINT64_MAX >> 3);
		o = o * 8 + (uint64_t)(n->str[d] - '0');
		d++;
	}
	while (z + 1 < d && n->str[z] == '0')
		z++;
	snprintf(dec, sizeof(dec), "%.*s%.*s", (int)(d - z < 20 ? d - z : 20), n->str + z,
		 (int)(n->len - d < 8 ? n->len - d : 8), n->str + d);
	if (octal)
		snprintf(oct, sizeof(oct), " or %llu%.*s", (unsigned long long)o,
			 (int)(n->len - d < 8 ? n->len - d : 8), n->str + d);
	if (!strcmp(oct + (octal ? 4 : 0), dec))
		oct[0] = '\0'; /* "05": the same either way */
	cfg_fail_at(x, n->line, n->col, path,
		    "expected %s, got %s (a leading zero is octal in YAML 1.1; write %s%s)", what,
		    cfg_describe(n, false, buf, sizeof(buf)), dec, oct);
}

/* A plain decimal integer from @min to @max and a multiple of @step. */
int cfg_get_uint(struct ctx *x, const struct node *n, const char *path, uint64_t min, uint64_t max,
		 uint64_t step, uint64_t *out)
{
	char what[96];
	uint64_t v;
	int r;

	r = cfg_check_node(x, n, path);
	if (r)
		return r;
	if (!has_leading_zero(n) && n->type == N_SCALAR && n->plain &&
	    parse_u64(n->str, n->len, &v) && v >= min && v <= max && v % step == 0) {
		*out = v;
		return 0;
	}
	if (step > 1)
		snprintf(what, sizeof(what), "a multiple of %llu from %llu to %llu",
			 (unsigned long long)step, (unsigned long long)min,
			 (unsigned long long)max);
	else
		snprintf(what, sizeof(what), "a whole number from %llu to %llu",
			 (unsigned long long)min, (unsigned long long)max);
	if (has_leading_zero(n)) {
		leading_zero(x, n, path, what);
		return -EINVAL;
	}
	return cfg_expected(x, n, path, what);
}

/* Only the YAML 1.2 spellings: "yes", "on" and friends mean different things
 * to different YAML libraries. */
int cfg_get_bool(struct ctx *x, const struct node *n, const char *path, bool *out)
{
	int r;

	r = cfg_check_node(x, n, path);
	if (r)
		return r;
	if (n->type == N_SCALAR && n->plain && n->len == 4 && !memcmp(n->str, "true", 4)) {
		*out = true;
		return 0;
	}
	if (n->type == N_SCALAR && n->plain && n->len == 5 && !memcmp(n->str, "false", 5)) {
		*out = false;
		return 0;
	}
	return cfg_expected(x, n, path, "true or false");
}

/* The length of the control character at @s (C0, DEL, or C1 as UTF-8),
 * else 0. */
static size_t control_len(const char *s, size_t len)
{
	unsigned char c = (unsigned char)s[0];

	if (c < 0x20 || c == 0x7f)
		return 1;
	if (c == 0xc2 && len > 1 && (unsigned char)s[1] >= 0x80 && (unsigned char)s[1] <= 0x9f)
		return 2;
	return 0;
}

/* Says which control character (@off bytes into @n) and where: an escape
 * in double quotes is not visible as such in the file's columns. */
static void control_char(struct ctx *x, const struct node *n, const char *path, size_t off)
{
	char buf[SHOW_BUF], ch[16];
	const unsigned char *p = (const unsigned char *)n->str + off;

	if (control_len(n->str + off, n->len - off) == 2)
		snprintf(ch, sizeof(ch), "\\u%04x", (unsigned)p[1]);
	else
		snprintf(ch, sizeof(ch), "\\x%02x", p[0]);
	cfg_fail_at(
		x, n->line, n->col, path,
		"expected a string without control characters, got %s (the control character %s "
		"at byte %zu)",
		cfg_show(n->str, n->len, true, buf, sizeof(buf)), ch, off + 1);
}

/* Any non-null scalar without control characters, plain or quoted (a process
 * may well be called "1234"). The result points into the node. */
int cfg_get_text(struct ctx *x, const struct node *n, const char *path, const char *what,
		 const char **s, size_t *len)
{
	size_t i;
	int r;

	r = cfg_check_node(x, n, path);
	if (r)
		return r;
	if (n->type != N_SCALAR || cfg_is_null(n))
		return cfg_expected(x, n, path, what);
	/* A newline kept by a block scalar ("|"), a "\t" or "\x01" of a quoted
	 * one: a mistake in every value here, and one that would go on into
	 * logs, headers and chunks. */
	for (i = 0; i < n->len; i++) {
		if (control_len(n->str + i, n->len - i)) {
			control_char(x, n, path, i);
			return -EINVAL;
		}
	}
	*s = n->str;
	*len = n->len;
	return 0;
}

int cfg_get_enum(struct ctx *x, const struct node *n, const char *path, const char *what,
		 const char *const *names, size_t count, size_t *idx)
{
	const char *s;
	size_t len;
	int r = cfg_get_text(x, n, path, what, &s, &len);

	for (size_t i = 0; !r && i < count; i++) {
		if (len == strlen(names[i]) && !memcmp(s, names[i], len)) {
			*idx = i;
			return 0;
		}
	}
	return r ? r : cfg_expected(x, n, path, what);
}

int cfg_get_word(struct ctx *x, const struct node *n, const char *path, const char *what,
		 size_t min, size_t max, bool (*ok)(unsigned char c, size_t i), char **out)
{
	const char *s;
	size_t len, i;
	int r;

	r = cfg_get_text(x, n, path, what, &s, &len);
	if (r)
		return r;
	for (i = 0; i < len && ok((unsigned char)s[i], i); i++)
		;
	if (len < min || len > max || i < len)
		return cfg_expected_str(x, n, path, what);
	return cfg_set_str(x, out, s, len);
}

bool cfg_is_name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_' || ch == '.' || ch == '-';
}

/* [A-Za-z0-9_.-]{1,@max}: target names and label keys. */
bool cfg_is_name(const char *s, size_t len, size_t max)
{
	size_t i;

	if (!len || len > max)
		return false;
	for (i = 0; i < len; i++)
		if (!cfg_is_name_char(s[i]))
			return false;
	return true;
}

/* An absolute path, with no ".." components if @no_dotdot. */
static bool is_abs_path(const char *s, size_t len, bool no_dotdot)
{
	size_t i = 0;

	if (!len || len > MAX_PATH_BYTES || s[0] != '/')
		return false;
	while (no_dotdot && i < len) {
		size_t start, clen;

		while (i < len && s[i] == '/')
			i++;
		start = i;
		while (i < len && s[i] != '/')
			i++;
		clen = i - start;
		if (clen == 2 && s[start] == '.' && s[start + 1] == '.')
			return false;
	}
	return true;
}

int cfg_get_abs_path(struct ctx *x, const struct node *n, const char *path, const char *what,
		     bool no_dotdot, char **out)
{
	const char *s;
	size_t len;
	int r;

	r = cfg_get_text(x, n, path, what, &s, &len);
	if (r)
		return r;
	if (!is_abs_path(s, len, no_dotdot))
		return cfg_expected_str(x, n, path, what);
	return cfg_set_str(x, out, s, len);
}

int cfg_set_str(struct ctx *x, char **out, const char *s, size_t len)
{
	char *d = cfg_dup_mem(s, len);

	if (!d)
		return cfg_nomem(x);
	free(*out);
	*out = d;
	return 0;
}

/* Checks that @n is a mapping whose keys are among @keys, each at most once,
 * and hands out the value and key node of each (NULL when absent). A null
 * value (a section whose keys are all commented out) counts as empty. */
int cfg_get_map(struct ctx *x, const struct node *n, const char *path, const char *what,
		const char *const *keys, size_t nkeys, const struct node **vals,
		const struct node **knodes)
{
	char buf[SHOW_BUF], sub[PATH_BUF], list[256];
	const char *where = *path ? path : "top level";
	size_t i, k, o = 0;
	int r;

	for (k = 0; k < nkeys; k++) {
		vals[k] = NULL;
		knodes[k] = NULL;
	}
	r = cfg_check_node(x, n, where);
	if (r)
		return r;
	if (cfg_is_null(n))
		return 0;
	if (n->type != N_MAP)
		return cfg_expected(x, n, where, what);
	for (i = 0; i + 1 < n->nkid; i += 2) {
		const struct node *key = n->kid[i];

		r = cfg_check_node(x, key, where);
		if (r)
			return r;
		if (key->type != N_SCALAR || cfg_is_null(key))
			return cfg_expected(x, key, where, "a key name");
		for (k = 0; k < nkeys; k++)
			if (key->len == strlen(keys[k]) && !memcmp(key->str, keys[k], key->len))
				break;
		if (k == nkeys) {
			for (k = 0; k < nkeys && o < sizeof(list); k++)
				o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s",
						      k ? ", " : "", keys[k]);
			cfg_child_path(sub, path,
				       cfg_show(key->str, key->len, false, buf, sizeof(buf)));
			return fail(x, key, sub, "unknown key, expected one of %s", list);
		}
		cfg_child_path(sub, path, keys[k]);
		if (vals[k])
			return fail(x, key, sub, "duplicate key (first at line %zu, column %zu)",
				    knodes[k]->line, knodes[k]->col);
		knodes[k] = key;
		vals[k] = n->kid[i + 1];
	}
	return 0;
}

struct unit {
	const char *name;
	uint64_t mul;
};

/* Largest first: printing picks the first unit that divides the value. */
static const struct unit duration_units[] = {
	{ "d", 86400000 }, { "h", 3600000 }, { "m", 60000 }, { "s", 1000 }, { "ms", 1 },
};
/* Only the binary units: "MB" means 10^6 to some and 2^20 to others, so it
 * is refused rather than guessed. */
static const struct unit size_units[] = {
	{ "TiB", 1ull << 40 },
	{ "GiB", 1ull << 30 },
	{ "MiB", 1ull << 20 },
	{ "KiB", 1ull << 10 },
};

#define NUNITS(a) (sizeof(a) / sizeof((a)[0]))

/* Digits and one of @units right after them ("10s", "256MiB"), or digits
 * alone counting as @bare each. Overflow fails: such a value is out of every
 * range anyway. */
static bool parse_units(const char *s, size_t len, const struct unit *units, size_t nunits,
			uint64_t bare, uint64_t *out)
{
	uint64_t v, mul = bare;
	size_t d = 0, i;

	while (d < len && s[d] >= '0' && s[d] <= '9')
		d++;
	if (!parse_u64(s, d, &v))
		return false;
	if (d < len) {
		for (i = 0; i < nunits; i++)
			if (len - d == strlen(units[i].name) &&
			    !memcmp(s + d, units[i].name, len - d))
				break;
		if (i == nunits)
			return false;
		mul = units[i].mul;
	}
	if (v > UINT64_MAX / mul)
		return false;
	*out = v * mul;
	return true;
}

/* parse_units() of a scalar; digits alone only when the scalar is plain (a
 * quoted "10" is a mistake, as for every other number). */
static bool parse_with_unit(const struct node *n, const struct unit *units, size_t nunits,
			    uint64_t bare, uint64_t *out)
{
	size_t d = 0;

	if (n->type != N_SCALAR || cfg_is_null(n))
		return false;
	while (d < n->len && n->str[d] >= '0' && n->str[d] <= '9')
		d++;
	if (d == n->len && !n->plain)
		return false;
	return parse_units(n->str, n->len, units, nunits, bare, out);
}

int fx_config_parse_duration(const char *s, uint64_t *ms)
{
	return parse_units(s, strlen(s), duration_units, NUNITS(duration_units), 1000, ms)
		       ? 0
		       : -EINVAL;
}

/* @v in the largest unit that divides it ("10m", "1TiB"); bytes without a unit. */
static const char *fmt_unit(uint64_t v, const struct unit *units, size_t nunits, char *buf,
			    size_t size)
{
	size_t i;

	for (i = 0; v && i < nunits; i++) {
		if (v % units[i].mul == 0) {
			snprintf(buf, size, "%llu%s", (unsigned long long)(v / units[i].mul),
				 units[i].name);
			return buf;
		}
	}
	snprintf(buf, size, "%llu", (unsigned long long)v);
	return buf;
}

/* A number with a unit, and how its error message describes it. */
struct quantity {
	const struct unit *units;
	size_t nunits;
	uint64_t bare;	   /* what a number alone counts */
	const char *noun;  /* "a duration" */
	const char *zero;  /* a @min of 0 in the message */
	const char *step;  /* a step of 1000 in the message, or NULL */
	const char *forms; /* how it is written */
};

static const struct quantity durations = {
	duration_units,
	NUNITS(duration_units),
	1000,
	"a duration",
	"0 (no limit)",
	" in whole seconds",
	"(a whole number of seconds, or with ms, s, m, h or d)",
};
static const struct quantity sizes = {
	size_units,
	NUNITS(size_units),
	1,
	"a size",
	"0",
	NULL,
	"(a whole number of bytes, or with KiB, MiB, GiB or TiB)",
};

/* A @q from @min to @max and a multiple of @step, into *@out. */
static int get_quantity(struct ctx *x, const struct node *n, const char *path,
			const struct quantity *q, uint64_t min, uint64_t max, uint64_t step,
			uint64_t *out)
{
	char what[256], lo[32], hi[32];
	uint64_t v;
	int r;

	r = cfg_check_node(x, n, path);
	if (r)
		return r;
	if (!has_leading_zero(n) && parse_with_unit(n, q->units, q->nunits, q->bare, &v) &&
	    v >= min && v <= max && v % step == 0) {
		*out = v;
		return 0;
	}
	snprintf(what, sizeof(what), "%s from %s to %s%s %s", q->noun,
		 min ? fmt_unit(min, q->units, q->nunits, lo, sizeof(lo)) : q->zero,
		 fmt_unit(max, q->units, q->nunits, hi, sizeof(hi)),
		 step == 1000 && q->step ? q->step : "", q->forms);
	if (has_leading_zero(n)) {
		leading_zero(x, n, path, what);
		return -EINVAL;
	}
	return cfg_expected(x, n, path, what);
}

/* A duration in milliseconds from @min to @max and a multiple of @step. A
 * @min of 0 is "no limit" (spool.max_age). */
int cfg_get_duration(struct ctx *x, const struct node *n, const char *path, uint64_t min,
		     uint64_t max, uint64_t step, uint64_t *out)
{
	return get_quantity(x, n, path, &durations, min, max, step, out);
}

/* A size in bytes from @min to @max. */
int cfg_get_size(struct ctx *x, const struct node *n, const char *path, uint64_t min, uint64_t max,
		 uint64_t *out)
{
	return get_quantity(x, n, path, &sizes, min, max, 1, out);
}

/* Two durations in the wrong order: @n, at @path, should be at least (or at
 * most) the other one, @other_ms. */
int cfg_duration_order(struct ctx *x, const struct node *n, const char *path, bool at_least,
		       const char *other, uint64_t other_ms)
{
	char buf[SHOW_BUF], val[32];

	return fail(x, n, path, "expected a duration of at %s %s (%s), got %s",
		    at_least ? "least" : "most", other,
		    fmt_unit(other_ms, duration_units, NUNITS(duration_units), val, sizeof(val)),
		    cfg_describe(n, false, buf, sizeof(buf)));
}

int cfg_check_optional(struct ctx *x, const struct node *n, const char *path, char **out)
{
	int r = cfg_check_node(x, n, path);

	if (r)
		return r;
	if (!cfg_is_null(n))
		return 0;
	free(*out);
	*out = NULL;
	return 1;
}

/* An absolute path whose default is none: null (or nothing) keeps it none. */
int cfg_get_opt_path(struct ctx *x, const struct node *n, const char *path, char **out)
{
	int r = cfg_check_optional(x, n, path, out);

	if (r)
		return r < 0 ? r : 0;
	return cfg_get_abs_path(x, n, path, "an absolute path", false, out);
}
