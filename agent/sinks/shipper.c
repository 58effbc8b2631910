/* SPDX-License-Identifier: MIT */
#include "fxagent/shipper.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/log.h"
#include "fxagent/upload.h"
#include "fxagent/util.h"

#define FAIL_LOG_EVERY_NS (60ull * 1000000000ull)

struct fx_shipper {
	const struct fx_config *cfg;
	struct fx_spool *spool;
	struct fx_uploader *up;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* work arrived, stop asked, or the spool changed */
	bool kicked, closing, running;
	uint64_t stop_at; /* CLOCK_MONOTONIC ns when stopping began, else 0 */
	uint64_t rng;
	bool failing;
	uint64_t last_fail_log;
	struct fx_shipper_stats st;
};

static uint64_t next_random(struct fx_shipper *s)
{
	/* xorshift64*: jitter only needs to differ between agents */
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 0x2545f4914f6cdd1dULL;
}

/* Waits on the condition until @deadline (CLOCK_MONOTONIC ns), the close,
 * the start of a stop, or (with @wake_on_kick) a kick. Called with the lock
 * held. */
static void wait_until(struct fx_shipper *s, uint64_t deadline, bool wake_on_kick)
{
	uint64_t stop_at = s->stop_at;

	while (!s->closing && s->stop_at == stop_at && (!wake_on_kick || !s->kicked)) {
		uint64_t now = fx_now_ns(CLOCK_MONOTONIC);
		struct timespec ts;

		if (now >= deadline)
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		/* pthread_cond_timedwait takes CLOCK_REALTIME: add the remaining time. */
		ts.tv_sec += (time_t)((deadline - now) / 1000000000ull);
		ts.tv_nsec += (long)((deadline - now) % 1000000000ull);
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
	}
	s->kicked = false;
}

static void on_failure(struct fx_shipper *s, const struct fx_chunk_info *info,
		       const struct fx_upload_result *res)
{
	uint64_t now = fx_now_ns(CLOCK_MONOTONIC);
	struct fx_spool_stats sp;

	s->st.retried++;
	/* Once when the collector becomes unreachable, then once a minute. */
	if (s->failing && now - s->last_fail_log < FAIL_LOG_EVERY_NS)
		return;
	fx_spool_get_stats(s->spool, &sp);
	fx_log_fields(FX_LOG_WARN, info->target, info->id,
		      "cannot upload chunk %s (target %s), retrying with %" PRIu64
		      " chunks (%" PRIu64 " bytes) waiting in the spool: %s",
		      info->id, info->target, sp.pending, sp.bytes,
		      res->error[0] ? res->error : "no answer");
	s->failing = true;
	s->last_fail_log = now;
}

/* Sends the oldest pending chunk. Returns false when the collector gave no
 * answer (a RETRY), and sets *@delay_ms to the backoff before the next try. */
static bool ship_one(struct fx_shipper *s, const struct fx_chunk_info *info, uint64_t stop_at,
		     unsigned *attempt, uint64_t *delay_ms)
{
	struct fx_upload_result res;
	char why[512];
	uint64_t size;
	int fd;

	*delay_ms = 0;
	fd = fx_spool_open_chunk(s->spool, info, &size, why, sizeof(why));
	if (fd == -ENOENT) {
		fx_spool_done(s->spool, info); /* gone: nothing to send */
		return true;
	}
	if (fd == -EBADMSG) {
		fx_spool_quarantine(s->spool, info, why);
		s->st.refused++;
		return true;
	}
	if (fd < 0) {
		snprintf(res.error, sizeof(res.error), "%s", why);
		res.retry_after_ms = -1;
	} else {
		int ret = fx_upload_send(s->up, info, fd, size, stop_at, &res);

		close(fd);
		if (ret < 0) {
			/* It cannot be read now: nothing to retry. */
			fx_spool_done(s->spool, info);
			return true;
		}
	}
	if (fd >= 0 && res.outcome == FX_UPLOAD_OK) {
		fx_spool_done(s->spool, info);
		s->st.uploaded++;
		if (s->failing)
			fx_log(FX_LOG_NOTICE, "the collector answers again");
		s->failing = false;
		*attempt = 0;
		return true;
	}
	if (fd >= 0 && res.outcome == FX_UPLOAD_REJECT) {
		fx_log_fields(FX_LOG_ERR, info->target, info->id,
			      "the collector refused chunk %s (target %s, window seq %" PRId64
			      "), moving it to the spool's rejected/: HTTP %ld: %s",
			      info->id, info->target, info->seq, res.status,
			      res.body[0] ? res.body : res.error);
		fx_spool_reject(s->spool, info);
		s->st.rejected++;
		*attempt = 0;
		return true;
	}
	*delay_ms = fx_upload_backoff_ms((*attempt)++, s->cfg->upload.initial_backoff_ms,
					 s->cfg->upload.max_backoff_ms, res.retry_after_ms,
					 next_random(s));
	on_failure(s, info, &res);
	return false;
}

/* Once a stop began (s->stop_at), a request starts only while the collector
 * answers, each cut to end by stop_at: whatever the collector does, the
 * thread is done by then. A collector that did not answer gets no more
 * tries; what is left stays in the spool for the next start. */
static void *run(void *arg)
{
	struct fx_shipper *s = arg;
	unsigned attempt = 0;
	bool answering = true;

	for (;;) {
		struct fx_chunk_info info;
		uint64_t stop_at, delay_ms;
		bool closing;

		pthread_mutex_lock(&s->mu);
		stop_at = s->stop_at;
		closing = s->closing;
		pthread_mutex_unlock(&s->mu);
		if (stop_at && (!answering || fx_now_ns(CLOCK_MONOTONIC) >= stop_at))
			break;
		if (fx_spool_peek(s->spool, &info, NULL, 0) <= 0) {
			if (closing)
				break;
			pthread_mutex_lock(&s->mu);
			pthread_cond_broadcast(&s->cv); /* for fx_shipper_wait_empty */
			wait_until(s,
				   stop_at ? stop_at : fx_now_ns(CLOCK_MONOTONIC) + 1000000000ull,
				   true);
			pthread_mutex_unlock(&s->mu);
			continue;
		}
		answering = ship_one(s, &info, stop_at, &attempt, &delay_ms);
		if (!answering && !stop_at) {
			pthread_mutex_lock(&s->mu);
			wait_until(s, fx_now_ns(CLOCK_MONOTONIC) + delay_ms * 1000000ull, false);
			pthread_mutex_unlock(&s->mu);
		}
		pthread_mutex_lock(&s->mu);
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_lock(&s->mu);
	s->running = false;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* The uploader @cfg says, for @host. Returns 0 or -errno (logged). */
static int new_uploader(const struct fx_config *cfg, const char *host, struct fx_uploader **out)
{
	const char *headers[FX_CONFIG_MAX_LABELS + 1];
	char hbuf[FX_CONFIG_MAX_LABELS][512];
	char labels[1024]; /* S3 holds 2 KiB of metadata in all */
	const struct fx_upload_s3 s3 = {
		.endpoint = cfg->upload.s3.endpoint,
		.region = cfg->upload.s3.region,
		.bucket = cfg->upload.s3.bucket,
		.prefix = cfg->upload.s3.prefix,
		.access_key_id_file = cfg->upload.s3.access_key_id_file,
		.secret_access_key_file = cfg->upload.s3.secret_access_key_file,
		.storage_class = cfg->upload.s3.storage_class,
		.labels = labels,
		.path_style = cfg->upload.s3.path_style,
	};
	struct fx_upload_opts uo = {
		.url = cfg->upload.url,
		.s3 = cfg->upload.s3.bucket ? &s3 : NULL,
		.put = cfg->upload.put,
		.headers = headers,
		.bearer_token_file = cfg->upload.bearer_token_file,
		.ca_file = cfg->upload.ca_file,
		.cert_file = cfg->upload.cert_file,
		.key_file = cfg->upload.key_file,
		.insecure_skip_verify = cfg->upload.insecure_skip_verify,
		.connect_timeout_ms = cfg->upload.connect_timeout_ms,
		.timeout_ms = cfg->upload.timeout_ms,
	};

	for (size_t i = 0; i < cfg->upload.nheaders; i++) {
		snprintf(hbuf[i], sizeof(hbuf[i]), "%s: %s", cfg->upload.headers[i].key,
			 cfg->upload.headers[i].value);
		headers[i] = hbuf[i];
	}
	headers[cfg->upload.nheaders] = NULL;
	/* The config's labels, as an S3 object's metadata holds them. */
	labels[0] = '\0';
	for (size_t i = 0, n = 0; i < cfg->nlabels && n < sizeof(labels); i++) {
		int w = snprintf(labels + n, sizeof(labels) - n, "%s%s=%s", i ? "," : "",
				 cfg->labels[i].key, cfg->labels[i].value);

		if (w < 0 || (size_t)w >= sizeof(labels) - n) {
			labels[n] = '\0'; /* whole labels only */
			break;
		}
		n += (size_t)w;
	}
	return fx_upload_new(&uo, host, out);
}

int fx_shipper_check_upload(const struct fx_config *cfg, const char *host, char *msg, size_t len)
{
	struct fx_uploader *up = NULL;
	int ret = new_uploader(cfg, host, &up);

	if (ret) {
		snprintf(msg, len, "the uploader cannot start (said above)");
		return ret;
	}
	ret = fx_upload_check(up, msg, len);
	fx_upload_free(up);
	return ret;
}

int fx_shipper_start(const struct fx_config *cfg, const char *host, struct fx_shipper **out)
{
	struct fx_spool_opts so = { .directory = cfg->spool.directory,
				    .max_bytes = cfg->spool.max_bytes,
				    .max_age_s = cfg->spool.max_age_s };
	struct fx_shipper *s;
	int ret;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = cfg;
	s->rng = fx_now_ns(CLOCK_MONOTONIC) ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ULL;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	ret = fx_spool_open(&so, &s->spool);
	if (ret == 0)
		ret = new_uploader(cfg, host, &s->up);
	if (ret == 0) {
		ret = -pthread_create(&s->thread, NULL, run, s);
		if (ret < 0)
			ret = fx_log_errno(FX_LOG_ERR, -ret, "cannot start the upload thread");
	}
	if (ret < 0) {
		fx_upload_free(s->up);
		fx_spool_free(s->spool);
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->mu);
		free(s);
		return ret;
	}
	s->running = true;
	pthread_setname_np(s->thread, "fx-upload");
	*out = s;
	return 0;
}

struct fx_spool *fx_shipper_spool(struct fx_shipper *s)
{
	return s->spool;
}

void fx_shipper_kick(struct fx_shipper *s)
{
	pthread_mutex_lock(&s->mu);
	s->kicked = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

bool fx_shipper_wait_empty(struct fx_shipper *s, uint64_t timeout_ms)
{
	uint64_t deadline = fx_now_ns(CLOCK_MONOTONIC) + timeout_ms * 1000000ull;
	struct fx_spool_stats sp;

	for (;;) {
		fx_spool_get_stats(s->spool, &sp);
		if (sp.pending == 0)
			return true;
		if (fx_now_ns(CLOCK_MONOTONIC) >= deadline)
			return false;
		pthread_mutex_lock(&s->mu);
		if (!s->running) {
			pthread_mutex_unlock(&s->mu);
			return false;
		}
		/* Woken by every upload, or at the next 100 ms. */
		{
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		}
		pthread_mutex_unlock(&s->mu);
	}
}

void fx_shipper_begin_stop(struct fx_shipper *s, uint64_t deadline_ns)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	if (!s->stop_at || deadline_ns < s->stop_at)
		s->stop_at = deadline_ns ? deadline_ns : 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

void fx_shipper_stop(struct fx_shipper *s, uint64_t deadline_ns)
{
	if (!s)
		return;
	fx_shipper_begin_stop(s, deadline_ns);
	pthread_mutex_lock(&s->mu);
	s->closing = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	fx_upload_free(s->up);
	fx_spool_free(s->spool);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

void fx_shipper_get_stats(struct fx_shipper *s, struct fx_shipper_stats *out)
{
	struct fx_spool_stats sp;

	fx_spool_get_stats(s->spool, &sp);
	pthread_mutex_lock(&s->mu);
	*out = s->st;
	pthread_mutex_unlock(&s->mu);
	out->dropped = sp.dropped;
	out->pending = sp.pending;
	out->spool_bytes = sp.bytes;
}
