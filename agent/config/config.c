/* SPDX-License-Identifier: MIT */
/* config: the API (defaults, load, parse, release) and the walk over the
 * top-level sections. How the files of agent/config/ divide the work is
 * said in config_int.h.
 */
#include "config_int.h"
#include "fxagent/log.h"
#include "fxagent/trust.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A config is a few KiB; the cap keeps a wrong path (a log file, /dev/zero)
 * from being read whole. */
#define CONFIG_MAX_BYTES (1u << 20)

static int get_config(struct ctx *x, const struct node *root)
{
	static const char *const keys[] = { "sampling", "window",	 "targets", "labels",
					    "output",	"symbolization", "log",	    "upload",
					    "spool",	"metrics" };
	const struct node *v[10], *k[10];
	int r;

	if (!root)
		return 0;
	r = cfg_get_map(x, root, "", "a mapping of sections (sampling, window, ...)", keys, 10, v,
			k);
	if (!r && v[0])
		r = cfg_get_sampling(x, v[0]);
	if (!r && v[1])
		r = cfg_get_window(x, v[1]);
	if (!r && v[2])
		r = cfg_get_targets(x, v[2]);
	if (!r && v[3])
		r = cfg_get_labels(x, v[3], "labels", x->c->labels, &x->c->nlabels);
	if (!r && v[4])
		r = cfg_get_output(x, v[4]);
	if (!r && v[5])
		r = cfg_get_symbolization(x, v[5]);
	if (!r && v[6])
		r = cfg_get_log(x, v[6]);
	if (!r && v[7])
		r = cfg_get_upload(x, v[7]);
	if (!r && v[8])
		r = cfg_get_spool(x, v[8]);
	if (!r && v[9])
		r = cfg_get_metrics(x, v[9]);
	return r;
}

int fx_config_defaults(struct fx_config *c)
{
	char host[HOST_NAME_MAX + 1];

	memset(c, 0, sizeof(*c));
	c->sampling.frequency = 99;
	c->sampling.dwarf = true;
	c->sampling.stack_bytes = 16384;
	c->sampling.kernel_stacks = true;
	c->sampling.include_idle = false;
	c->sampling.off_cpu.min_block_ms = FX_MIN_BLOCK_INTERVAL;
	c->sampling.off_cpu.budget = 250;
	c->window.seconds = 60;
	c->window.max_stacks = 200000;
	c->symbolization.demangle = true;
	c->symbolization.jit = true;
	c->symbolization.jvm_perfmap = true;
	c->symbolization.max_memory = 32ull << 20;
	c->log.level = FX_LOG_NOTICE;
	c->upload.connect_timeout_ms = 10000;
	c->upload.timeout_ms = 60000;
	c->upload.initial_backoff_ms = 1000;
	c->upload.max_backoff_ms = 300000;
	c->spool.max_bytes = 256ull << 20;
	c->spool.max_age_s = 7 * 86400;

	if (gethostname(host, sizeof(host)) || !host[0])
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	c->labels[0].key = strdup("host");
	c->labels[0].value = strdup(host);
	c->nlabels = 1;
	c->output.directory = strdup("/var/lib/fxagent/chunks");
	c->symbolization.debug_dirs[0] = strdup("/usr/lib/debug");
	c->symbolization.ndebug_dirs = 1;
	c->symbolization.debuginfod_cache = strdup("/var/lib/fxagent/debuginfod");
	c->symbolization.debuginfod_cache_max = 2ull << 30;
	c->symbolization.debuginfod_timeout_ms = 10000;
	c->symbolization.debuginfod_budget_ms = 15000;
	c->symbolization.debuginfod_retry_s = 600;
	c->spool.directory = strdup("/var/lib/fxagent/spool");
	if (!c->labels[0].key || !c->labels[0].value || !c->output.directory ||
	    !c->symbolization.debug_dirs[0] || !c->symbolization.debuginfod_cache ||
	    !c->spool.directory) {
		fx_config_release(c);
		return -ENOMEM;
	}
	return 0;
}

int fx_config_parse(const char *name, const char *text, size_t len, struct fx_config *c, char *err,
		    size_t errlen)
{
	struct ctx x = { .name = name ? name : "<config>", .err = err, .errlen = errlen, .c = c };
	struct node *root = NULL;
	int r;

	if (err && errlen)
		err[0] = '\0';
	r = fx_config_defaults(c);
	if (r)
		return cfg_nomem(&x);
	if (!text)
		text = "";
	if (len > CONFIG_MAX_BYTES) {
		fx_config_release(c);
		if (err && errlen)
			snprintf(err, errlen, "%s: expected a file of at most %u bytes, got %zu",
				 x.name, CONFIG_MAX_BYTES, len);
		return -EFBIG;
	}
	r = cfg_build_tree(&x, text, len, &root);
	if (!r)
		r = get_config(&x, root);
	cfg_node_free(root);
	if (r)
		fx_config_release(c);
	return r;
}

int fx_config_load(const char *path, struct fx_config *c, char *err, size_t errlen)
{
	static const struct fx_trust_rules rules = { .trusted = true };
	size_t len = 0, cap = 64 * 1024;
	char *buf, *p;
	ssize_t n;
	int fd, r = 0;

	memset(c, 0, sizeof(*c));
	buf = malloc(cap);
	if (!buf) {
		r = -ENOMEM;
		goto fail;
	}
	/* Not a secret (usually 0644), but it steers a root process: nobody
	 * but root or the agent's user may write it. Opened without blocking,
	 * so a FIFO or a device is refused instead of hanging the agent. */
	fd = fx_trust_open(AT_FDCWD, path, "config file", &rules, NULL, err, errlen);
	if (fd < 0) {
		r = fd;
		free(buf);
		return r;
	}
	/* Reads one byte past the cap to tell "exactly at the cap" from "over". */
	for (;;) {
		if (len == cap) {
			if (cap > CONFIG_MAX_BYTES) {
				r = -EFBIG;
				break;
			}
			cap = cap * 2 > CONFIG_MAX_BYTES ? CONFIG_MAX_BYTES + 1 : cap * 2;
			p = realloc(buf, cap);
			if (!p) {
				r = -ENOMEM;
				break;
			}
			buf = p;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = -errno;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (r)
		goto fail;
	r = fx_config_parse(path, buf, len, c, err, errlen);
	free(buf);
	return r;
fail:
	if (err && errlen) {
		if (r == -EFBIG)
			snprintf(err, errlen, "%s: expected a file of at most %u bytes, got more",
				 path, CONFIG_MAX_BYTES);
		else
			snprintf(err, errlen, "%s: cannot read: %s", path, strerror(-r));
	}
	free(buf);
	return r;
}

void fx_config_release(struct fx_config *c)
{
	size_t i, j;

	if (!c)
		return;
	for (i = 0; i < c->ntargets; i++) {
		free(c->targets[i].name);
		free(c->targets[i].value);
		for (j = 0; j < c->targets[i].nlabels; j++) {
			free(c->targets[i].labels[j].key);
			free(c->targets[i].labels[j].value);
		}
	}
	for (i = 0; i < c->nlabels; i++) {
		free(c->labels[i].key);
		free(c->labels[i].value);
	}
	free(c->output.directory);
	for (i = 0; i < c->symbolization.ndebug_dirs; i++)
		free(c->symbolization.debug_dirs[i]);
	free(c->symbolization.debuginfod_urls);
	free(c->symbolization.debuginfod_cache);
	free(c->upload.url);
	free(c->upload.s3.bucket);
	free(c->upload.s3.region);
	free(c->upload.s3.endpoint);
	free(c->upload.s3.prefix);
	free(c->upload.s3.access_key_id_file);
	free(c->upload.s3.secret_access_key_file);
	free(c->upload.s3.storage_class);
	for (i = 0; i < c->upload.nheaders; i++) {
		free(c->upload.headers[i].key);
		free(c->upload.headers[i].value);
	}
	free(c->upload.bearer_token_file);
	free(c->upload.ca_file);
	free(c->upload.cert_file);
	free(c->upload.key_file);
	free(c->spool.directory);
	free(c->metrics.textfile);
	memset(c, 0, sizeof(*c));
}

const char *fx_config_label(const struct fx_config *c, const char *key)
{
	size_t i;

	for (i = 0; i < c->nlabels; i++)
		if (!strcmp(c->labels[i].key, key))
			return c->labels[i].value;
	return NULL;
}
