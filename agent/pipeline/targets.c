/* SPDX-License-Identifier: MIT */
/* The targets of a loaded config: their windows, their cgroups (attached to
 * the sampler's cgroup events), and which windows a sample goes to. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fxagent/cgroup.h"
#include "fxagent/log.h"
#include "pipeline_int.h"

struct fx_window *pipe_targets_window_new(const struct fx_config *cfg)
{
	struct fx_window *w = malloc(sizeof(*w));

	if (w)
		fx_window_init(w, cfg->window.max_stacks);
	return w;
}

void pipe_targets_window_free(struct fx_window *w)
{
	if (!w)
		return;
	fx_window_release(w);
	free(w);
}

struct fx_window *pipe_targets_window_take(struct fx_pipeline *p, const struct fx_config *cfg)
{
	struct fx_window *w = NULL;

	pthread_mutex_lock(&p->spare_mu);
	if (p->nspare) {
		w = p->spare[--p->nspare];
		p->spare_bytes -= fx_window_bytes(w);
	}
	pthread_mutex_unlock(&p->spare_mu);
	if (!w)
		return pipe_targets_window_new(cfg);
	fx_window_reset(w);
	w->max_stacks = cfg->window.max_stacks;
	return w;
}

void pipe_targets_window_give(struct fx_pipeline *p, struct fx_window *w)
{
	size_t bytes;

	if (!w)
		return;
	bytes = fx_window_bytes(w);
	pthread_mutex_lock(&p->spare_mu);
	if (p->nspare < PIPE_SPARE_WINDOWS && bytes <= PIPE_SPARE_BYTES - p->spare_bytes) {
		p->spare[p->nspare++] = w;
		p->spare_bytes += bytes;
		w = NULL;
	}
	pthread_mutex_unlock(&p->spare_mu);
	pipe_targets_window_free(w);
}

void pipe_targets_spares_free(struct fx_pipeline *p)
{
	while (p->nspare)
		pipe_targets_window_free(p->spare[--p->nspare]);
	p->spare_bytes = 0;
}

static bool is_cgroup_kind(const struct fx_target *t)
{
	return t->kind == FX_TARGET_SYSTEMD_UNIT || t->kind == FX_TARGET_CGROUP;
}

static void gen_free(struct gen *g)
{
	for (size_t i = 0; i < g->nt; i++) {
		pipe_targets_window_free(g->t[i].win);
		free(g->t[i].lost);
		free(g->t[i].labels);
	}
	free(g->t);
	if (g->owned) {
		fx_config_release(g->owned);
		free(g->owned);
	}
	free(g);
}

/* Global labels, then the target's. */
static int set_labels(struct target_rt *t, const struct fx_config *cfg)
{
	const struct fx_target *tc = t->cfg;
	size_t k = 0;

	t->labels = calloc(cfg->nlabels + (tc ? tc->nlabels : 0) + 1, sizeof(*t->labels));
	if (!t->labels)
		return -ENOMEM;
	for (size_t l = 0; l < cfg->nlabels; l++)
		t->labels[k++] = (struct fx_profile_kv){ cfg->labels[l].key, cfg->labels[l].value };
	for (size_t l = 0; tc && l < tc->nlabels; l++)
		t->labels[k++] = (struct fx_profile_kv){ tc->labels[l].key, tc->labels[l].value };
	t->nlabels = k;
	return 0;
}

struct gen *pipe_targets_gen_new(const struct fx_config *cfg, struct fx_config *owned)
{
	size_t n = cfg->ntargets ? cfg->ntargets : 1;
	struct gen *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->cfg = cfg;
	g->refs = 1;
	g->t = calloc(n, sizeof(*g->t));
	if (!g->t)
		goto fail;
	g->nt = n;
	gethostname(g->host, sizeof(g->host) - 1);
	if (fx_config_label(cfg, "host"))
		snprintf(g->host, sizeof(g->host), "%s", fx_config_label(cfg, "host"));
	for (size_t i = 0; i < n; i++) {
		struct target_rt *t = &g->t[i];

		t->cfg = cfg->ntargets ? &cfg->targets[i] : NULL;
		t->name = t->cfg ? t->cfg->name : "system";
		t->cgroup = t->cfg && is_cgroup_kind(t->cfg);
		g->cgroup_mode |= t->cgroup;
		g->filter_procs |= t->cfg && !t->cgroup;
		t->win = pipe_targets_window_new(cfg);
		t->lost = calloc(1, sizeof(*t->lost));
		if (!t->win || !t->lost || set_labels(t, cfg) < 0)
			goto fail;
	}
	g->owned = owned;
	return g;
fail:
	g->owned = NULL; /* the caller still owns it */
	gen_free(g);
	return NULL;
}

void pipe_targets_gen_get(struct fx_pipeline *p, struct gen *g)
{
	pthread_mutex_lock(&p->gen_mu);
	g->refs++;
	pthread_mutex_unlock(&p->gen_mu);
}

void pipe_targets_gen_put(struct fx_pipeline *p, struct gen *g)
{
	bool last;

	if (!g)
		return;
	pthread_mutex_lock(&p->gen_mu);
	last = --g->refs == 0;
	pthread_mutex_unlock(&p->gen_mu);
	if (last)
		gen_free(g);
}

/* Attaches (or re-attaches, after a restart made a new directory) the cgroup
 * events of target @i. Says once when its cgroup is missing. */
static void resolve_target(struct fx_pipeline *p, size_t i)
{
	struct target_rt *t = &p->g->t[i];
	char rel[PATH_MAX];
	uint64_t id;
	int fd, ret;

	ret = fx_cgroup_resolve(p->mount, t->cfg, rel, sizeof(rel));
	if (ret == 0)
		ret = fx_cgroup_open(p->mount, rel, &fd, &id);
	if (ret < 0) {
		if (t->cg_id) {
			fx_sampler_remove_cgroup(p->sampler, (uint32_t)i);
			t->cg_id = 0;
		}
		if (!t->said_missing)
			fx_log_fields(FX_LOG_NOTICE, t->name, NULL,
				      "target %s: %s has no cgroup yet; looking again every "
				      "window",
				      t->name, t->cfg->value);
		t->said_missing = true;
		return;
	}
	snprintf(t->cg_path, sizeof(t->cg_path), "%s", rel);
	/* fx_cgroup_open() set @id: both calls return 0 or -errno, which the
	 * analyzer cannot see in cgroup.c (it tries a positive result).
	 * NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult) */
	if (id != t->cg_id) {
		if (t->cg_id)
			fx_sampler_remove_cgroup(p->sampler, (uint32_t)i);
		ret = fx_sampler_add_cgroup(p->sampler, fd, (uint32_t)i,
					    fx_config_off_cpu(p->g->cfg, t->cfg));
		if (ret < 0) {
			fx_log_fields(FX_LOG_ERR, t->name, NULL,
				      "target %s: cannot sample cgroup %s: %s", t->name, rel,
				      strerror(-ret));
			t->cg_id = 0;
		} else {
			fx_log_fields(t->said_missing || t->cg_id ? FX_LOG_NOTICE : FX_LOG_INFO,
				      t->name, NULL, "target %s: sampling cgroup %s", t->name, rel);
			t->cg_id = id;
			t->said_missing = false;
		}
	}
	close(fd);
}

void pipe_targets_resolve(struct fx_pipeline *p)
{
	for (size_t i = 0; i < p->g->nt; i++)
		if (p->g->t[i].cgroup)
			resolve_target(p, i);
}

/* Only a stat per target: the search stays at rotation. */
void pipe_targets_recheck(struct fx_pipeline *p)
{
	for (size_t i = 0; i < p->g->nt; i++) {
		struct target_rt *t = &p->g->t[i];
		uint64_t id = 0;
		int ret;

		if (!t->cgroup || !t->cg_path[0])
			continue;
		ret = fx_cgroup_id(p->mount, t->cg_path, &id);
		if ((ret == 0 && id != t->cg_id) || (ret < 0 && t->cg_id))
			resolve_target(p, i);
	}
}

/* Whether a process or pid target records off-CPU waits. */
static bool procs_off_cpu(const struct gen *g)
{
	for (size_t i = 0; i < g->nt; i++)
		if (!g->t[i].cgroup && fx_config_off_cpu(g->cfg, g->t[i].cfg))
			return true;
	return false;
}

/* process and pid targets next to cgroup ones: the root cgroup samples
 * everything, filtered here. */
int pipe_targets_add_root(struct fx_pipeline *p)
{
	uint64_t id;
	int fd, ret;

	ret = fx_cgroup_open(p->mount, "/", &fd, &id);
	if (ret == 0) {
		ret = fx_sampler_add_cgroup(p->sampler, fd, TAG_ROOT, procs_off_cpu(p->g));
		close(fd);
	}
	if (ret < 0)
		fx_log_errno(FX_LOG_ERR, -ret, "cannot sample the root cgroup for process targets");
	return ret;
}

static bool proc_matches(const struct fx_target *t, uint32_t pid, const struct fx_proc *proc)
{
	if (t->kind == FX_TARGET_PID)
		return pid == t->pid;
	if (t->kind == FX_TARGET_PROCESS && proc)
		/* comm holds at most 15 bytes of the name */
		return strncmp(proc->comm, t->value, FX_COMM_LEN - 1) == 0;
	return false;
}

size_t pipe_targets_route(void *ctx, const struct fx_record_sample *s, const struct fx_proc *proc,
			  struct fx_window **out, size_t max)
{
	struct fx_pipeline *p = ctx;
	const struct gen *g = p->g;
	/* an off-CPU wait (recorder.h): its id carries its cgroup's tag */
	bool wait = s->id & FX_RECORD_OFFCPU_ID;
	size_t n = 0;

	if (g->cgroup_mode) {
		uint32_t tag = wait ? (uint32_t)s->id : fx_sampler_tag(p->sampler, s->id);

		if (tag < g->nt) {
			if (!wait || fx_config_off_cpu(g->cfg, g->t[tag].cfg))
				out[n++] = g->t[tag].win;
			return n;
		}
		if (tag != TAG_ROOT)
			return 0;
	} else if (!g->filter_procs) {
		out[n++] = g->t[0].win; /* the whole system */
		return n;
	}
	for (size_t i = 0; i < g->nt && n < max; i++)
		if (!g->t[i].cgroup && proc_matches(g->t[i].cfg, s->pid, proc) &&
		    (!wait || fx_config_off_cpu(g->cfg, g->t[i].cfg)))
			out[n++] = g->t[i].win;
	return n;
}
