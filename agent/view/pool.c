/* SPDX-License-Identifier: MIT */
/* The view's readers: chunks inflated and parsed on worker threads while the
 * caller's thread merges, handed back in the order they were handed in, so
 * that the merged profile is the same whatever thread was faster. A ring of
 * POOL_JOBS slots bounds the chunks in memory. */
#include "view_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fxagent/util.h"

#define POOL_JOBS    4
#define POOL_WORKERS 3

enum job_state {
	J_FREE,
	J_READY, /* bytes in, waiting for a worker */
	J_BUSY,
	J_DONE, /* parsed, waiting to be handed back in order */
};

struct job {
	enum job_state state;
	size_t seq;
	const char *name; /* the caller's, alive until it drains */
	unsigned char *data;
	size_t len, cap;
	struct vchunk c;
	int rc;
	char why[256];
};

struct view_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job jobs[POOL_JOBS];
	size_t next_in, next_out;
	bool quit;
	pthread_t workers[POOL_WORKERS];
	unsigned nworkers;
	view_meta_fn meta_cb;
	void *meta_arg;
	view_done_fn done;
	void *done_arg;
	int err; /* the first nonzero of done */
};

static void parse(struct view_pool *p, struct job *j)
{
	j->rc = view_read_chunk(j->data, j->len, &j->c, p->meta_cb, p->meta_arg, j->why,
				sizeof(j->why));
}

static void *worker(void *arg)
{
	struct view_pool *p = arg;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct job *j = NULL;

		for (size_t i = 0; i < POOL_JOBS; i++) {
			if (p->jobs[i].state == J_READY && (!j || p->jobs[i].seq < j->seq))
				j = &p->jobs[i];
		}
		if (!j && p->quit)
			break;
		if (!j) {
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		j->state = J_BUSY;
		pthread_mutex_unlock(&p->mu);
		parse(p, j);
		pthread_mutex_lock(&p->mu);
		j->state = J_DONE;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int view_pool_new(unsigned workers, view_meta_fn meta_cb, void *meta_arg, view_done_fn done,
		  void *done_arg, struct view_pool **out)
{
	struct view_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->meta_cb = meta_cb;
	p->meta_arg = meta_arg;
	p->done = done;
	p->done_arg = done_arg;
	/* No worker started (or none asked for): the caller's thread parses. */
	for (unsigned i = 0; i < workers && i < POOL_WORKERS; i++) {
		if (pthread_create(&p->workers[i], NULL, worker, p) != 0)
			break;
		p->nworkers++;
	}
	*out = p;
	return 0;
}

/* Hands back, in order, what is done; with @wait, until all is. Called with
 * the lock held; the done callback runs without it. */
static void hand_back(struct view_pool *p, bool wait)
{
	while (p->next_out < p->next_in) {
		struct job *j = &p->jobs[p->next_out % POOL_JOBS];

		if (j->state != J_DONE) {
			if (!wait)
				return;
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		pthread_mutex_unlock(&p->mu);
		if (!p->err)
			p->err = p->done(p->done_arg, j->name, &j->c, j->rc, j->why, j->len);
		pthread_mutex_lock(&p->mu);
		j->state = J_FREE;
		p->next_out++;
	}
}

int view_pool_put(struct view_pool *p, const char *name, const void *data, size_t len, int err)
{
	struct job *j;

	pthread_mutex_lock(&p->mu);
	j = &p->jobs[p->next_in % POOL_JOBS];
	/* the slot's last chunk is handed back first: the ring bounds memory */
	while (j->state != J_FREE) {
		hand_back(p, false);
		if (j->state != J_FREE)
			pthread_cond_wait(&p->cv, &p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	j->name = name;
	j->len = err ? 0 : len;
	j->rc = err;
	j->why[0] = '\0';
	if (!err && fx_grow(&j->data, &j->cap, len ? len : 1, 1) < 0)
		return -ENOMEM;
	if (!err && len)
		memcpy(j->data, data, len);
	if (!err && !p->nworkers)
		parse(p, j);
	pthread_mutex_lock(&p->mu);
	j->seq = p->next_in++;
	j->state = err || !p->nworkers ? J_DONE : J_READY;
	pthread_cond_broadcast(&p->cv);
	hand_back(p, false);
	pthread_mutex_unlock(&p->mu);
	return p->err;
}

int view_pool_drain(struct view_pool *p)
{
	pthread_mutex_lock(&p->mu);
	hand_back(p, true);
	pthread_mutex_unlock(&p->mu);
	return p->err;
}

void view_pool_free(struct view_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	hand_back(p, true);
	p->quit = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->nworkers; i++)
		pthread_join(p->workers[i], NULL);
	for (size_t i = 0; i < POOL_JOBS; i++) {
		free(p->jobs[i].data);
		view_vchunk_free(&p->jobs[i].c);
	}
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}
