/* SPDX-License-Identifier: MIT */
/* Fuzz target: the YAML config loader (include/fxagent/config.h).
 *
 * Any text gives either 0 and a config within the documented ranges, or a
 * negative errno, a zeroed config and a one-line "NAME:LINE:COL: ..."
 * message. The same text parsed with a small (or no) message buffer gives
 * the same answer and a prefix of the same message, NUL-terminated in place.
 */
#include "fuzz.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fxagent/config.h"
#include "fxagent/log.h"

#define NAME "fuzz.yaml"

static bool all_zero(const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

static bool name_ok(const char *s, size_t max)
{
	size_t len = strlen(s);

	if (!len || len > max)
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
	       len;
}

static bool abs_path_ok(const char *s)
{
	return s && s[0] == '/' && strlen(s) <= 4095 && printable(s);
}

static bool has_dotdot(const char *s)
{
	const char *p = s;

	while ((p = strstr(p, "..")) != NULL) {
		if ((p == s || p[-1] == '/') && (p[2] == '/' || p[2] == '\0'))
			return true;
		p++;
	}
	return false;
}

static void check_labels(const struct fx_label *l, size_t n, const char *what)
{
	size_t i, j;

	FUZZ_CHECK(n <= FX_CONFIG_MAX_LABELS, "%s: %zu labels", what, n);
	for (i = 0; i < n; i++) {
		FUZZ_CHECK(l[i].key && name_ok(l[i].key, 64), "%s: label key", what);
		FUZZ_CHECK(l[i].value && strlen(l[i].value) <= 256 && printable(l[i].value),
			   "%s: label %s", what, l[i].key);
		for (j = 0; j < i; j++)
			FUZZ_CHECK(strcmp(l[i].key, l[j].key) != 0, "%s: label %s twice", what,
				   l[i].key);
	}
}

static void check_target(const struct fx_config *c, size_t i)
{
	const struct fx_target *t = &c->targets[i];
	size_t j;

	FUZZ_CHECK(t->name && name_ok(t->name, 64), "targets[%zu].name", i);
	for (j = 0; j < i; j++)
		FUZZ_CHECK(strcmp(t->name, c->targets[j].name) != 0, "target name %s twice",
			   t->name);
	switch (t->kind) {
	case FX_TARGET_PID:
		FUZZ_CHECK(!t->value && t->pid >= 1 && t->pid <= 4194304, "targets[%zu] pid %u", i,
			   t->pid);
		break;
	case FX_TARGET_CGROUP:
		FUZZ_CHECK(abs_path_ok(t->value) && !has_dotdot(t->value), "targets[%zu] cgroup",
			   i);
		break;
	case FX_TARGET_SYSTEMD_UNIT:
		FUZZ_CHECK(t->value && t->value[0] && t->value[0] != '.' &&
				   strlen(t->value) <= 255 && strchr(t->value, '.') &&
				   strspn(t->value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
						    "TUVWXYZ0123456789_.-:@\\") == strlen(t->value),
			   "targets[%zu] unit", i);
		break;
	case FX_TARGET_PROCESS:
		FUZZ_CHECK(t->value && t->value[0] && strlen(t->value) <= 255 &&
				   !strchr(t->value, '/') && printable(t->value),
			   "targets[%zu] process", i);
		break;
	default:
		FUZZ_CHECK(0, "targets[%zu] kind %d", i, (int)t->kind);
	}
	check_labels(t->labels, t->nlabels, t->name);
}

static void check_config(const struct fx_config *c)
{
	size_t i;

	FUZZ_CHECK(c->sampling.frequency >= 1 && c->sampling.frequency <= 10000, "frequency %u",
		   c->sampling.frequency);
	FUZZ_CHECK(c->sampling.stack_bytes >= 1024 && c->sampling.stack_bytes <= 32768 &&
			   c->sampling.stack_bytes % 8 == 0,
		   "stack_bytes %u", c->sampling.stack_bytes);
	FUZZ_CHECK(c->sampling.ring_bytes == 0 ||
			   (c->sampling.ring_bytes >= 4096 &&
			    c->sampling.ring_bytes <= (64 << 20) &&
			    !(c->sampling.ring_bytes & (c->sampling.ring_bytes - 1))),
		   "ring_bytes %llu", (unsigned long long)c->sampling.ring_bytes);
	FUZZ_CHECK(c->window.seconds >= 1 && c->window.seconds <= 3600, "window.seconds %u",
		   c->window.seconds);
	FUZZ_CHECK(c->window.max_stacks >= 1000 && c->window.max_stacks <= 10000000,
		   "max_stacks %zu", c->window.max_stacks);
	FUZZ_CHECK(c->ntargets <= FX_CONFIG_MAX_TARGETS, "%zu targets", c->ntargets);
	for (i = 0; i < c->ntargets; i++)
		check_target(c, i);
	check_labels(c->labels, c->nlabels, "labels");
	FUZZ_CHECK(fx_config_label(c, "host"), "no host label");
	FUZZ_CHECK(abs_path_ok(c->output.directory), "output.directory");
	FUZZ_CHECK(c->symbolization.ndebug_dirs <= FX_CONFIG_MAX_DEBUG_DIRS, "%zu debug dirs",
		   c->symbolization.ndebug_dirs);
	for (i = 0; i < c->symbolization.ndebug_dirs; i++)
		FUZZ_CHECK(abs_path_ok(c->symbolization.debug_dirs[i]), "debug_dirs[%zu]", i);
	FUZZ_CHECK(c->log.level >= FX_LOG_ERR && c->log.level <= FX_LOG_DEBUG, "log.level %d",
		   c->log.level);
	FUZZ_CHECK(!c->upload.url || (c->upload.url[0] && strlen(c->upload.url) <= 2048 &&
				      !strchr(c->upload.url, ' ') && printable(c->upload.url)),
		   "upload.url");
	FUZZ_CHECK(c->upload.nheaders <= FX_CONFIG_MAX_LABELS, "%zu headers", c->upload.nheaders);
	for (i = 0; i < c->upload.nheaders; i++) {
		const struct fx_label *h = &c->upload.headers[i];

		/* The uploader builds "Name: value" lines from these. */
		FUZZ_CHECK(h->key && h->key[0] && strlen(h->key) <= 64 &&
				   strspn(h->key,
					  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW"
					  "XYZ0123456789-") == strlen(h->key),
			   "header name");
		FUZZ_CHECK(h->value && h->value[0] && strlen(h->value) <= 256 &&
				   printable(h->value),
			   "header %s", h->key);
	}
	FUZZ_CHECK(!c->upload.bearer_token_file || abs_path_ok(c->upload.bearer_token_file),
		   "bearer_token_file");
	FUZZ_CHECK(!c->upload.ca_file || abs_path_ok(c->upload.ca_file), "ca_file");
	FUZZ_CHECK(!c->upload.cert_file == !c->upload.key_file, "cert_file without key_file");
	FUZZ_CHECK(!c->upload.cert_file ||
			   (abs_path_ok(c->upload.cert_file) && abs_path_ok(c->upload.key_file)),
		   "cert_file/key_file");
	FUZZ_CHECK(c->upload.connect_timeout_ms >= 100 && c->upload.connect_timeout_ms <= 600000,
		   "connect_timeout %u", c->upload.connect_timeout_ms);
	FUZZ_CHECK(c->upload.timeout_ms >= 1000 && c->upload.timeout_ms <= 3600000 &&
			   c->upload.timeout_ms >= c->upload.connect_timeout_ms,
		   "timeout %u", c->upload.timeout_ms);
	FUZZ_CHECK(c->upload.initial_backoff_ms >= 100 && c->upload.initial_backoff_ms <= 3600000,
		   "initial_backoff %llu", (unsigned long long)c->upload.initial_backoff_ms);
	FUZZ_CHECK(c->upload.max_backoff_ms >= c->upload.initial_backoff_ms &&
			   c->upload.max_backoff_ms <= 24ull * 3600000,
		   "max_backoff %llu", (unsigned long long)c->upload.max_backoff_ms);
	FUZZ_CHECK(abs_path_ok(c->spool.directory), "spool.directory");
	FUZZ_CHECK(c->spool.max_bytes >= (1ull << 20) && c->spool.max_bytes <= (1ull << 40),
		   "spool.max_bytes %llu", (unsigned long long)c->spool.max_bytes);
	FUZZ_CHECK(c->spool.max_age_s <= 365ull * 86400, "spool.max_age %llu",
		   (unsigned long long)c->spool.max_age_s);
	FUZZ_CHECK(!c->metrics.textfile || abs_path_ok(c->metrics.textfile), "metrics.textfile");
}

/* "fuzz.yaml:LINE:COL: what" for -EINVAL; "fuzz.yaml: ..." otherwise. */
static void check_message(int r, const char *err, size_t errlen)
{
	const char *p = err + strlen(NAME);
	size_t len = strnlen(err, errlen);

	FUZZ_CHECK(len < errlen, "message not NUL-terminated");
	FUZZ_CHECK(len > strlen(NAME) + 2, "message too short: '%s'", err);
	FUZZ_CHECK(!strchr(err, '\n') && !strchr(err, '\r'), "message of several lines: '%s'", err);
	FUZZ_CHECK(!strncmp(err, NAME ":", strlen(NAME) + 1), "message without the file: '%s'",
		   err);
	if (r != -EINVAL)
		return;
	/* :LINE:COL: with both numbers from 1 */
	FUZZ_CHECK(p[0] == ':' && p[1] >= '1' && p[1] <= '9', "no line in '%s'", err);
	p += 2 + strspn(p + 2, "0123456789");
	FUZZ_CHECK(p[0] == ':' && p[1] >= '1' && p[1] <= '9', "no column in '%s'", err);
	p += 2 + strspn(p + 2, "0123456789");
	FUZZ_CHECK(p[0] == ':' && p[1] == ' ' && p[2], "no message after line:col in '%s'", err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fx_config c;
	char err[1024], *small;
	size_t small_len;
	int r, r2;

	fx_log_set_level(FX_LOG_ERR);
	memset(&c, 0xa5, sizeof(c));
	r = fx_config_parse(NAME, (const char *)data, size, &c, err, sizeof(err));
	if (r == 0) {
		check_config(&c);
		fx_config_release(&c);
		FUZZ_CHECK(all_zero(&c, sizeof(c)), "config not zeroed by release");
	} else {
		FUZZ_CHECK(r == -EINVAL || r == -ENOMEM || r == -EFBIG, "unexpected error %d", r);
		FUZZ_CHECK(all_zero(&c, sizeof(c)), "config not zeroed after error %d", r);
		check_message(r, err, sizeof(err));
	}

	/* A buffer just big enough to be overrun (ASan watches its end) and no
	 * buffer at all give the same answer. */
	small_len = 1 + size % 48;
	small = malloc(small_len);
	FUZZ_CHECK(small, "out of memory");
	r2 = fx_config_parse(NAME, (const char *)data, size, &c, small, small_len);
	FUZZ_CHECK(r2 == r, "%d with a small buffer, %d with a large one", r2, r);
	if (r2 == 0) {
		fx_config_release(&c);
	} else {
		FUZZ_CHECK(strnlen(small, small_len) < small_len, "small message not terminated");
		FUZZ_CHECK(!strncmp(small, err, strlen(small)), "'%s' is not the start of '%s'",
			   small, err);
	}
	free(small);
	r2 = fx_config_parse(NAME, (const char *)data, size, &c, NULL, 0);
	FUZZ_CHECK(r2 == r, "%d without a buffer, %d with one", r2, r);
	if (r2 == 0)
		fx_config_release(&c);
	return 0;
}
