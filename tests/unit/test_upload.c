/* SPDX-License-Identifier: MIT */
/* upload: URL templates, the backoff, and real sends against
 * tests/tools/fault_server.py (started here, on 127.0.0.1): bodies arrive
 * byte for byte with their headers, each kind of failure gets the outcome the
 * daemon acts on, the token never shows in a result, file:// writes the file,
 * and TLS (with a CA and client certificate made by openssl, when installed)
 * fails verification with a message that says what to set. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "fxagent/upload.h"

#define SERVER_SCRIPT FX_TEST_DATA "/../tools/fault_server.py"
#ifndef FX_PYTHON3
#define FX_PYTHON3 "python3"
#endif

#define TOKEN	   "s3cret-Token.value~x"
#define START_MS   1795230600000LL /* 2026-11-21 03:10:00 UTC */
#define CHUNK_SIZE 300000

struct server {
	pid_t pid;
	int port;
	int out_fd; /* its stdout */
	int in_fd;  /* its stdin: closing it stops the server (--stdin-eof) */
};

static struct server plain, tls;
static char dir[64];	     /* scratch directory */
static char chunk[PATH_MAX]; /* CHUNK_SIZE bytes of every value */
static char token_file[PATH_MAX];
static bool have_tls;

static const struct fx_chunk_info info = {
	.start_ms = START_MS,
	.end_ms = START_MS + 60999,
	.seq = 42,
	.id = "0123456789abcdef0123456789abcdef",
	.target = "nginx.service",
};

/* ---- helpers ---- */

/* 0600: the token files among them are secrets, refused if others can read. */
static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void sha256_of(const char *path, char out[65])
{
	char cmd[PATH_MAX + 32];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "sha256sum '%s'", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(out, 65, p));
	assert_int_equal(strlen(out), 64);
	pclose(p);
}

static void start_server(struct server *s, const char *const *extra)
{
	const char *argv[24] = { FX_PYTHON3, SERVER_SCRIPT, "--max-seconds", "120", "--stdin-eof" };
	int out[2], in[2];
	struct pollfd pfd;
	char line[64];
	size_t len = 0, argc = 5;
	ssize_t n;

	while (extra && *extra && argc < 23)
		argv[argc++] = *extra++;
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid == 0) {
		dup2(out[1], 1);
		dup2(in[0], 0);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	close(in[0]);
	s->out_fd = out[0];
	s->in_fd = in[1];
	/* "PORT <n>\n", within 15 s */
	pfd = (struct pollfd){ .fd = s->out_fd, .events = POLLIN };
	while (len < sizeof(line) - 1 && !memchr(line, '\n', len)) {
		if (poll(&pfd, 1, 15000) != 1)
			fail_msg("fault_server.py did not start (%s)", SERVER_SCRIPT);
		n = read(s->out_fd, line + len, sizeof(line) - 1 - len);
		if (n <= 0)
			fail_msg("fault_server.py exited (is %s there?)", FX_PYTHON3);
		len += (size_t)n;
	}
	line[len] = '\0';
	assert_int_equal(sscanf(line, "PORT %d", &s->port), 1);
}

static void stop_server(struct server *s)
{
	if (s->pid <= 0)
		return;
	close(s->in_fd);
	kill(s->pid, SIGTERM);
	waitpid(s->pid, NULL, 0);
	close(s->out_fd);
	s->pid = 0;
}

struct membuf {
	char data[1 << 16];
	size_t len;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct membuf *m = arg;
	size_t len = size * n;

	if (len > sizeof(m->data) - 1 - m->len)
		len = sizeof(m->data) - 1 - m->len;
	memcpy(m->data + m->len, p, len);
	m->len += len;
	m->data[m->len] = '\0';
	return size * n;
}

/* GET http://127.0.0.1:<port><path> of the plain server into @m. */
static void server_get(const char *path, struct membuf *m)
{
	char url[256];
	CURL *c = curl_easy_init();

	assert_non_null(c);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", plain.port, path);
	m->len = 0;
	m->data[0] = '\0';
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, m);
	assert_int_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_cleanup(c);
}

/* The last request the plain server received, as its JSON log entry. */
static struct membuf last_log;
static const char *last_request(void)
{
	server_get("/__log?last=1", &last_log);
	return last_log.data;
}

static void assert_contains(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("\"%s\" not in \"%s\"", needle, hay);
}

static void assert_lacks(const char *hay, const char *needle)
{
	if (strstr(hay, needle))
		fail_msg("\"%s\" unexpectedly in \"%s\"", needle, hay);
}

static struct fx_upload_opts base_opts(const char *url)
{
	return (struct fx_upload_opts){
		.url = url,
		.connect_timeout_ms = 3000,
		.timeout_ms = 10000,
	};
}

static struct fx_uploader *new_uploader(const struct fx_upload_opts *o)
{
	struct fx_uploader *u = NULL;

	assert_int_equal(fx_upload_new(o, "testhost", &u), 0);
	assert_non_null(u);
	return u;
}

static void plain_url(char *out, size_t len, const char *path)
{
	snprintf(out, len, "http://127.0.0.1:%d%s", plain.port, path);
}

/* Sends the file @path as fx_upload_send takes it: an open fd and a size. */
static int send_file(struct fx_uploader *u, const struct fx_chunk_info *ci, const char *path,
		     struct fx_upload_result *res)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ret;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	ret = fx_upload_send(u, ci, fd, (uint64_t)st.st_size, 0, res);
	close(fd);
	return ret;
}

/* Sends the test chunk to the plain server's @path; checks no token leaks. */
static void send_to(const char *path, bool put, struct fx_upload_result *res)
{
	char url[256];
	struct fx_upload_opts o;
	struct fx_uploader *u;

	plain_url(url, sizeof(url), path);
	o = base_opts(url);
	o.put = put;
	o.bearer_token_file = token_file;
	u = new_uploader(&o);
	assert_int_equal(send_file(u, &info, chunk, res), 0);
	assert_lacks(res->error, TOKEN);
	assert_lacks(res->body, TOKEN);
	fx_upload_free(u);
}

/* ---- URL templates ---- */

static void test_expand_all_placeholders(void **state)
{
	char *s;

	(void)state;
	s = fx_upload_expand_url("https://c.example/{host}/{target}/{start}-{end}/{seq}/{id}.json",
				 &info, "web-1.example");
	assert_non_null(s);
	assert_string_equal(s, "https://c.example/web-1.example/nginx.service/"
			       "20261121T031000Z-20261121T031100Z/42/"
			       "0123456789abcdef0123456789abcdef.json");
	free(s);
}

static void test_expand_escapes_values(void **state)
{
	struct fx_chunk_info odd = info;
	char *s;

	(void)state;
	snprintf(odd.target, sizeof(odd.target), "a b/c?d&e%%f#g");
	odd.seq = -1;
	odd.start_ms = -1; /* just before the epoch: floor, not truncation */
	s = fx_upload_expand_url("http://c/{target}?h={host}&s={seq}&t={start}", &odd,
				 "h\xc3\xb6st:1");
	assert_non_null(s);
	assert_string_equal(s, "http://c/a%20b%2Fc%3Fd%26e%25f%23g?h=h%C3%B6st%3A1&s=-1"
			       "&t=19691231T235959Z");
	free(s);
}

static void test_expand_braces_and_errors(void **state)
{
	char *s;

	(void)state;
	/* "{{" is a literal "{"; a "}" alone is literal. */
	s = fx_upload_expand_url("http://c/{{seq}/{seq}}", &info, "h");
	assert_non_null(s);
	assert_string_equal(s, "http://c/{seq}/42}");
	free(s);

	errno = 0;
	assert_null(fx_upload_expand_url("http://c/{hostname}", &info, "h"));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(fx_upload_expand_url("http://c/{host", &info, "h"));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(fx_upload_expand_url("http://c/{}", &info, "h"));
	assert_int_equal(errno, EINVAL);
}

/* ---- backoff ---- */

static void test_backoff_doubles_to_cap(void **state)
{
	(void)state;
	/* random 0 gives the low end d/2; random d/2 the high end d */
	assert_int_equal(fx_upload_backoff_ms(0, 1000, 60000, -1, 0), 500);
	assert_int_equal(fx_upload_backoff_ms(0, 1000, 60000, -1, 500), 1000);
	assert_int_equal(fx_upload_backoff_ms(1, 1000, 60000, -1, 1000), 2000);
	assert_int_equal(fx_upload_backoff_ms(3, 1000, 60000, -1, 4000), 8000);
	assert_int_equal(fx_upload_backoff_ms(5, 1000, 60000, -1, 16000), 32000);
	assert_int_equal(fx_upload_backoff_ms(6, 1000, 60000, -1, 30000), 60000);
	assert_int_equal(fx_upload_backoff_ms(6, 1000, 60000, -1, 0), 30000);
	/* huge attempt counts neither overflow nor loop for long */
	assert_int_equal(fx_upload_backoff_ms(4000000000u, 1000, 60000, -1, 30000), 60000);
	assert_int_equal(fx_upload_backoff_ms(100, 1, UINT64_MAX, -1, 0), UINT64_MAX / 2);
	/* initial above max: max */
	assert_int_equal(fx_upload_backoff_ms(0, 5000, 1000, -1, 500), 1000);
}

static void test_backoff_jitter_range(void **state)
{
	uint64_t r = 88172645463325252ULL, d, v, lo, hi;
	unsigned attempt, i;

	(void)state;
	for (attempt = 0; attempt < 12; attempt++) {
		d = 250ULL << attempt;
		if (d > 300000)
			d = 300000;
		lo = UINT64_MAX;
		hi = 0;
		for (i = 0; i < 2000; i++) {
			r ^= r << 13; /* xorshift64 */
			r ^= r >> 7;
			r ^= r << 17;
			v = fx_upload_backoff_ms(attempt, 250, 300000, -1, r);
			assert_in_range(v, d / 2, d);
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
		/* spread over the range, not stuck at one value */
		assert_true(hi - lo > (d - d / 2) / 2);
	}
}

static void test_backoff_retry_after_floor(void **state)
{
	(void)state;
	/* the server's Retry-After wins over a shorter wait, even over max */
	assert_int_equal(fx_upload_backoff_ms(0, 1000, 60000, 120000, 0), 120000);
	assert_int_equal(fx_upload_backoff_ms(0, 1000, 60000, 2000, 500), 2000);
	/* and does not shorten a longer one */
	assert_int_equal(fx_upload_backoff_ms(4, 1000, 60000, 2000, 8000), 16000);
	assert_int_equal(fx_upload_backoff_ms(4, 1000, 60000, 0, 0), 8000);
}

/* ---- configuration ---- */

static void test_new_rejects_bad_config(void **state)
{
	const char *clash[] = { "Content-Encoding: br", NULL };
	const char *ours[] = { "X-Fxagent-Seq: 1", NULL };
	const char *auth[] = { "Authorization: Basic eA==", NULL };
	const char *noval[] = { "X-Custom:", NULL };
	const char *crlf[] = { "X-Custom: a\r\nX-Evil: b", NULL };
	const char *noname[] = { ": value", NULL };
	struct fx_upload_opts o;
	struct fx_uploader *u = NULL;

	(void)state;
	o = base_opts("http://c/{hostname}");
	assert_int_equal(fx_upload_new(&o, "h", &u), -EINVAL);
	o = base_opts("ftp://c/{id}");
	assert_int_equal(fx_upload_new(&o, "h", &u), -EINVAL);
	/* An empty template expands to nothing: refused, not dereferenced. */
	o = base_opts("");
	assert_int_equal(fx_upload_new(&o, "h", &u), -EINVAL);
	o = base_opts("http://c/{id}");
	o.headers = clash;
	assert_int_equal(fx_upload_new(&o, "h", &u), -EINVAL);
	o.headers = ours;
	assert_int_equal(fx_upload_new(&o, "h", &u), -EINVAL);
	o.headers = noval;
	assert_int_equal(fx_upload_new(&o, "h", &u), -EINVAL);
	o.headers = crlf;
	assert_int_equal(fx_upload_new(&o, "h", &u), -EINVAL);
	o.headers = noname;
	assert_int_equal(fx_upload_new(&o, "h", &u), -EINVAL);
	/* Authorization of the user's own is fine without a token file */
	o.headers = auth;
	assert_int_equal(fx_upload_new(&o, "h", &u), 0);
	fx_upload_free(u);
	u = NULL;
	o.bearer_token_file = token_file;
	assert_int_equal(fx_upload_new(&o, "h", &u), -EINVAL);
	o = base_opts("https://c/{id}");
	o.ca_file = "/nonexistent/ca.pem";
	assert_int_equal(fx_upload_new(&o, "h", &u), -ENOENT);
	assert_null(u);
	fx_upload_free(NULL);
}

static void test_token_file_checked(void **state)
{
	char path[PATH_MAX];
	struct fx_upload_opts o = base_opts("http://c/{id}");
	struct fx_uploader *u = NULL;

	(void)state;
	snprintf(path, sizeof(path), "%s/badtoken", dir);
	o.bearer_token_file = path;
	assert_int_equal(fx_upload_new(&o, "h", &u), -ENOENT);
	write_file(path, " \n\t\n", 4);
	assert_int_equal(fx_upload_new(&o, "h", &u), -EINVAL);
	write_file(path, "two words\n", 10);
	assert_int_equal(fx_upload_new(&o, "h", &u), -EINVAL);
	assert_null(u);
}

/* ---- sends against fault_server.py ---- */

static int setup_server(void **state)
{
	(void)state;
	start_server(&plain, NULL);
	return 0;
}

static int teardown_server(void **state)
{
	(void)state;
	stop_server(&plain);
	return 0;
}

static void check_arrived(const char *method)
{
	char sha[65], want[128];
	const char *log = last_request();

	sha256_of(chunk, sha);
	snprintf(want, sizeof(want), "\"body_sha256\": \"%s\"", sha);
	assert_contains(log, want);
	snprintf(want, sizeof(want), "\"body_len\": %d", CHUNK_SIZE);
	assert_contains(log, want);
	snprintf(want, sizeof(want), "\"method\": \"%s\"", method);
	assert_contains(log, want);
	assert_contains(log, "\"path\": \"/ok/nginx.service/0123456789abcdef0123456789abcdef\"");
	assert_contains(log, "\"authorization\": \"Bearer " TOKEN "\"");
	assert_contains(log, "\"content-encoding\": \"gzip\"");
	assert_contains(log, "\"content-type\": \"application/json\"");
	assert_contains(log, "\"x-fxagent-host\": \"testhost\"");
	assert_contains(log, "\"x-fxagent-target\": \"nginx.service\"");
	assert_contains(log, "\"x-fxagent-window-start\": \"20261121T031000Z\"");
	assert_contains(log, "\"x-fxagent-window-end\": \"20261121T031100Z\"");
	assert_contains(log, "\"x-fxagent-seq\": \"42\"");
	assert_contains(log, "\"x-fxagent-chunk-id\": \"0123456789abcdef0123456789abcdef\"");
	assert_contains(log, "\"x-custom\": \"yes, really\"");
	assert_lacks(log, "\"expect\"");
}

static void send_and_check(bool put)
{
	const char *hdrs[] = { "X-Custom: yes, really", NULL };
	struct fx_upload_result res;
	struct fx_upload_opts o;
	struct fx_uploader *u;
	char url[256];

	plain_url(url, sizeof(url), "/ok/{target}/{id}");
	o = base_opts(url);
	o.put = put;
	o.headers = hdrs;
	o.bearer_token_file = token_file;
	u = new_uploader(&o);
	assert_int_equal(send_file(u, &info, chunk, &res), 0);
	assert_int_equal(res.outcome, FX_UPLOAD_OK);
	assert_int_equal(res.status, 200);
	assert_int_equal(res.retry_after_ms, -1);
	check_arrived(put ? "PUT" : "POST");
	fx_upload_free(u);
}

static void test_post_arrives_intact(void **state)
{
	(void)state;
	send_and_check(false);
}

static void test_put_arrives_intact(void **state)
{
	(void)state;
	send_and_check(true);
}

static void test_empty_chunk(void **state)
{
	char path[PATH_MAX], url[256];
	struct fx_upload_result res;
	struct fx_upload_opts o;
	struct fx_uploader *u;

	(void)state;
	snprintf(path, sizeof(path), "%s/empty", dir);
	write_file(path, "", 0);
	plain_url(url, sizeof(url), "/ok/{id}");
	o = base_opts(url);
	u = new_uploader(&o);
	assert_int_equal(send_file(u, &info, path, &res), 0);
	assert_int_equal(res.outcome, FX_UPLOAD_OK);
	assert_contains(last_request(), "\"body_len\": 0,");
	fx_upload_free(u);
}

#define CLIENT_KEY "\"client\": [\"127.0.0.1\", "

/* One handle, one connection: three chunks come from the same client port. */
static void test_connection_reused(void **state)
{
	struct fx_upload_result res;
	struct fx_upload_opts o;
	struct fx_uploader *u;
	struct membuf *log = malloc(sizeof(*log));
	const char *p;
	char url[256];
	int i, ports[3];

	(void)state;
	assert_non_null(log);
	plain_url(url, sizeof(url), "/ok/{seq}");
	o = base_opts(url);
	u = new_uploader(&o);
	for (i = 0; i < 3; i++) {
		assert_int_equal(send_file(u, &info, chunk, &res), 0);
		assert_int_equal(res.outcome, FX_UPLOAD_OK);
	}
	server_get("/__log?last=3", log);
	p = log->data;
	for (i = 0; i < 3; i++) {
		p = strstr(p, CLIENT_KEY);
		assert_non_null(p);
		p += strlen(CLIENT_KEY);
		ports[i] = atoi(p);
	}
	assert_int_equal(ports[0], ports[1]);
	assert_int_equal(ports[1], ports[2]);
	fx_upload_free(u);
	free(log);
}

static void test_500_is_retry(void **state)
{
	struct fx_upload_result res;

	(void)state;
	send_to("/500/{id}", false, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_RETRY);
	assert_int_equal(res.status, 500);
	assert_int_equal(res.retry_after_ms, -1);
	assert_contains(res.error, "HTTP 500");
	assert_contains(res.error, "http://127.0.0.1:");
}

static void test_fail_then_ok(void **state)
{
	const enum fx_upload_outcome want[] = { FX_UPLOAD_RETRY, FX_UPLOAD_RETRY, FX_UPLOAD_OK };
	struct fx_upload_result res;
	struct fx_upload_opts o;
	struct fx_uploader *u;
	char url[256];
	size_t i;

	(void)state;
	plain_url(url, sizeof(url), "/fail-then-ok:2/{id}");
	o = base_opts(url);
	u = new_uploader(&o);
	for (i = 0; i < 3; i++) {
		assert_int_equal(send_file(u, &info, chunk, &res), 0);
		assert_int_equal(res.outcome, want[i]);
		assert_int_equal(res.status, i < 2 ? 500 : 200);
	}
	fx_upload_free(u);
}

static void test_retry_after(void **state)
{
	struct fx_upload_result res;

	(void)state;
	send_to("/429:2/{id}", false, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_RETRY);
	assert_int_equal(res.status, 429);
	assert_int_equal(res.retry_after_ms, 2000);
	assert_contains(res.error, "Retry-After 2 s");

	send_to("/503:4/{id}", true, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_RETRY);
	assert_int_equal(res.status, 503);
	assert_int_equal(res.retry_after_ms, 4000);

	/*
	 * An HTTP date 3 s ahead, in whole seconds: the wait is what is left
	 * of it, 2-3 s, never more (time()'s coarse clock once made it 4 s).
	 */
	send_to("/429-date:3/{id}", false, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_RETRY);
	assert_in_range(res.retry_after_ms, 1000, 3000);

	/* a day is capped at an hour */
	send_to("/429:86400/{id}", false, &res);
	assert_int_equal(res.retry_after_ms, 3600000);

	send_to("/503/{id}", false, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_RETRY);
	assert_int_equal(res.retry_after_ms, -1);
}

static void test_4xx_is_reject(void **state)
{
	struct fx_upload_result res;

	(void)state;
	send_to("/400/{id}", false, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_REJECT);
	assert_int_equal(res.status, 400);
	/* the body, newline made a space, for the log */
	assert_string_equal(res.body, "bad chunk: fault_server rejects every request on /400 ");
	assert_contains(res.error, "HTTP 400");

	send_to("/status:413/{id}", true, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_REJECT);
	assert_int_equal(res.status, 413);

	/* 408 is the server tiring of us: transient */
	send_to("/status:408/{id}", false, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_RETRY);
}

static void test_redirect_not_followed(void **state)
{
	struct fx_upload_result res;
	struct membuf *log = malloc(sizeof(*log));

	(void)state;
	assert_non_null(log);
	server_get("/__reset", log);
	send_to("/redirect/{id}", false, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_REJECT);
	assert_int_equal(res.status, 302);
	assert_contains(res.error, "not followed");
	assert_contains(res.error, "/ok/0123456789abcdef0123456789abcdef");
	server_get("/__log", log);
	assert_null(strstr(log->data, "\"/ok/"));
	free(log);
}

static void test_hang_times_out(void **state)
{
	struct fx_upload_result res;
	struct fx_upload_opts o;
	struct fx_uploader *u;
	struct timespec t0, t1;
	char url[256];
	double secs;

	(void)state;
	plain_url(url, sizeof(url), "/hang/{id}");
	o = base_opts(url);
	o.timeout_ms = 1000;
	u = new_uploader(&o);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(send_file(u, &info, chunk, &res), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_int_equal(res.outcome, FX_UPLOAD_RETRY);
	assert_int_equal(res.status, 0);
	assert_contains(res.error, "timeout");
	assert_true(secs > 0.9 && secs < 5);
	fx_upload_free(u);
}

static void test_closed_connection_is_retry(void **state)
{
	struct fx_upload_result res;

	(void)state;
	send_to("/close/{id}", false, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_RETRY);
	assert_int_equal(res.status, 0);
	assert_true(res.error[0] != '\0');
}

static void test_connection_refused_is_retry(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct fx_upload_result res;
	struct fx_upload_opts o;
	struct fx_uploader *u;
	char url[128];
	int fd;

	(void)state;
	/* a port that was free a moment ago and has no listener */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/ok/{id}", ntohs(sa.sin_port));
	o = base_opts(url);
	u = new_uploader(&o);
	assert_int_equal(send_file(u, &info, chunk, &res), 0);
	assert_int_equal(res.outcome, FX_UPLOAD_RETRY);
	assert_int_equal(res.status, 0);
	assert_contains(res.error, "POST http://127.0.0.1:");
	fx_upload_free(u);
}

/* A collector that echoes the request: the token is cut out of the excerpt,
 * whether it fits the excerpt or is cut by its end. */
static void test_token_never_in_result(void **state)
{
	char long_token[301], path[PATH_MAX], url[256];
	struct fx_upload_result res;
	struct fx_upload_opts o;
	struct fx_uploader *u;

	(void)state;
	send_to("/echo:401/{id}", false, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_REJECT);
	assert_int_equal(res.status, 401);
	assert_contains(res.body, "Authorization: Bearer [redacted]");

	memset(long_token, 'T', 300);
	memcpy(long_token, "secret", 6);
	long_token[300] = '\0';
	snprintf(path, sizeof(path), "%s/longtoken", dir);
	write_file(path, long_token, 300);
	plain_url(url, sizeof(url), "/echo:401/{id}");
	o = base_opts(url);
	o.bearer_token_file = path;
	u = new_uploader(&o);
	assert_int_equal(send_file(u, &info, chunk, &res), 0);
	assert_int_equal(res.status, 401);
	assert_contains(res.body, "Authorization: Bearer [redacted]");
	assert_lacks(res.body, "secretTTT");
	assert_lacks(res.body, "TTTT");
	fx_upload_free(u);
}

static void test_token_reload(void **state)
{
	char path[PATH_MAX], url[256];
	struct fx_upload_result res;
	struct fx_upload_opts o;
	struct fx_uploader *u;

	(void)state;
	snprintf(path, sizeof(path), "%s/rotating", dir);
	write_file(path, "first-token\n", 12);
	plain_url(url, sizeof(url), "/ok/{id}");
	o = base_opts(url);
	o.bearer_token_file = path;
	u = new_uploader(&o);
	assert_int_equal(send_file(u, &info, chunk, &res), 0);
	assert_contains(last_request(), "\"authorization\": \"Bearer first-token\"");

	write_file(path, "second-token", 12);
	assert_int_equal(fx_upload_reload(u), 0);
	assert_int_equal(send_file(u, &info, chunk, &res), 0);
	assert_contains(last_request(), "\"authorization\": \"Bearer second-token\"");

	/* a token file gone missing keeps the token we have */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(fx_upload_reload(u), -ENOENT);
	assert_int_equal(send_file(u, &info, chunk, &res), 0);
	assert_int_equal(res.outcome, FX_UPLOAD_OK);
	assert_contains(last_request(), "\"authorization\": \"Bearer second-token\"");
	fx_upload_free(u);
}

/* ---- file:// and unreadable chunks ---- */

static void check_file_upload(bool put)
{
	char url[PATH_MAX + 32], out[PATH_MAX];
	struct fx_upload_result res;
	struct fx_upload_opts o;
	struct fx_uploader *u;
	size_t a_len, b_len;
	char *a, *b;

	snprintf(url, sizeof(url), "file://%s/{target}-{seq}.json.gz", dir);
	snprintf(out, sizeof(out), "%s/nginx.service-42.json.gz", dir);
	unlink(out);
	o = base_opts(url);
	o.put = put;
	u = new_uploader(&o);
	assert_int_equal(send_file(u, &info, chunk, &res), 0);
	assert_int_equal(res.outcome, FX_UPLOAD_OK);
	a = read_file(chunk, &a_len);
	b = read_file(out, &b_len);
	assert_non_null(b);
	assert_int_equal(a_len, b_len);
	assert_memory_equal(a, b, a_len);
	free(a);
	free(b);
	fx_upload_free(u);
}

static void test_file_url_writes(void **state)
{
	char url[PATH_MAX + 32];
	struct fx_upload_result res;
	struct fx_upload_opts o;
	struct fx_uploader *u;

	(void)state;
	check_file_upload(false);
	check_file_upload(true);
	/* a directory that is not there: try again later */
	snprintf(url, sizeof(url), "file://%s/missing/{id}", dir);
	o = base_opts(url);
	u = new_uploader(&o);
	assert_int_equal(send_file(u, &info, chunk, &res), 0);
	assert_int_equal(res.outcome, FX_UPLOAD_RETRY);
	assert_contains(res.error, "write file://");
	fx_upload_free(u);
}

static void test_unreadable_chunk(void **state)
{
	char path[PATH_MAX];
	struct fx_upload_result res;
	struct fx_upload_opts o;
	struct fx_uploader *u;
	int fd;

	(void)state;
	/* A file shorter than the size it was checked at: it shrank under us. */
	snprintf(path, sizeof(path), "%s/short", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	o = base_opts("file:///dev/null");
	u = new_uploader(&o);
	assert_int_equal(fx_upload_send(u, &info, fd, 4096, 0, &res), -EIO);
	assert_contains(res.error, "cannot read chunk");
	close(fd);
	unlink(path);
	fx_upload_free(u);
}

/* ---- TLS ---- */

static char ca_pem[PATH_MAX], cli_pem[PATH_MAX], cli_key[PATH_MAX];

static int setup_tls(void **state)
{
	char cmd[4 * PATH_MAX], srv_pem[PATH_MAX], srv_key[PATH_MAX];
	const char *args[] = { "--tls-cert",	  srv_pem, "--tls-key", srv_key,
			       "--tls-client-ca", ca_pem,  NULL };

	(void)state;
	if (system("command -v openssl >/dev/null 2>&1"))
		return 0;
	snprintf(ca_pem, sizeof(ca_pem), "%s/ca.pem", dir);
	snprintf(srv_pem, sizeof(srv_pem), "%s/srv.pem", dir);
	snprintf(srv_key, sizeof(srv_key), "%s/srv.key", dir);
	snprintf(cli_pem, sizeof(cli_pem), "%s/cli.pem", dir);
	snprintf(cli_key, sizeof(cli_key), "%s/cli.key", dir);
	/* a CA, a server certificate for 127.0.0.1 and a client certificate */
	snprintf(cmd, sizeof(cmd),
		 "(cd '%s' && set -e; k='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';"
		 "openssl req -x509 $k -keyout ca.key -out ca.pem -days 2 -subj /CN=fx-test-ca;"
		 "printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext;"
		 "openssl req $k -keyout srv.key -out srv.csr -subj /CN=127.0.0.1;"
		 "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
		 "-out srv.pem -days 2 -extfile san.ext;"
		 "openssl req $k -keyout cli.key -out cli.csr -subj /CN=fx-test-client;"
		 "openssl x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
		 "-out cli.pem -days 2) >/dev/null 2>&1",
		 dir);
	if (system(cmd) != 0)
		return -1;
	start_server(&tls, args);
	have_tls = true;
	return 0;
}

static int teardown_tls(void **state)
{
	(void)state;
	stop_server(&tls);
	return 0;
}

static void tls_send(const char *ca, bool client_cert, bool insecure, struct fx_upload_result *res)
{
	struct fx_upload_opts o;
	struct fx_uploader *u;
	char url[128];

	snprintf(url, sizeof(url), "https://127.0.0.1:%d/ok/{id}?k=v", tls.port);
	o = base_opts(url);
	o.ca_file = ca;
	o.cert_file = client_cert ? cli_pem : NULL;
	o.key_file = client_cert ? cli_key : NULL;
	o.insecure_skip_verify = insecure;
	o.bearer_token_file = token_file;
	u = new_uploader(&o);
	assert_int_equal(send_file(u, &info, chunk, res), 0);
	assert_lacks(res->error, TOKEN);
	fx_upload_free(u);
}

static void test_tls_verify_failure_says_what_to_do(void **state)
{
	struct fx_upload_result res;
	char want[96];

	(void)state;
	if (!have_tls)
		skip();
	tls_send(NULL, true, false, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_RETRY);
	assert_int_equal(res.status, 0);
	snprintf(want, sizeof(want), "TLS: certificate verify failed for https://127.0.0.1:%d/ok/",
		 tls.port);
	assert_contains(res.error, want);
	assert_contains(res.error, "set upload.ca_file");
	assert_lacks(res.error, "k=v"); /* no query in messages */
}

static void test_tls_with_ca_and_client_cert(void **state)
{
	struct fx_upload_result res;

	(void)state;
	if (!have_tls)
		skip();
	tls_send(ca_pem, true, false, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_OK);
	assert_int_equal(res.status, 200);
	/* the server wants a client certificate */
	tls_send(ca_pem, false, false, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_RETRY);
	assert_int_equal(res.status, 0);
	/* no CA, verification off */
	tls_send(NULL, true, true, &res);
	assert_int_equal(res.outcome, FX_UPLOAD_OK);
}

/* ---- main ---- */

static void make_fixtures(void)
{
	unsigned char *data = malloc(CHUNK_SIZE);
	uint32_t x = 2463534242u;
	size_t i;

	strcpy(dir, "/tmp/fx-upload-XXXXXX");
	if (!mkdtemp(dir) || !data)
		abort();
	/* every byte value, NUL and CR LF included */
	for (i = 0; i < CHUNK_SIZE; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		data[i] = i < 256 ? (unsigned char)i : (unsigned char)x;
	}
	snprintf(chunk, sizeof(chunk), "%s/chunk.json.gz", dir);
	snprintf(token_file, sizeof(token_file), "%s/token", dir);
	write_file(chunk, data, CHUNK_SIZE);
	write_file(token_file, "  " TOKEN " \n", strlen(TOKEN) + 4);
	free(data);
}

int main(void)
{
	const struct CMUnitTest pure[] = {
		cmocka_unit_test(test_expand_all_placeholders),
		cmocka_unit_test(test_expand_escapes_values),
		cmocka_unit_test(test_expand_braces_and_errors),
		cmocka_unit_test(test_backoff_doubles_to_cap),
		cmocka_unit_test(test_backoff_jitter_range),
		cmocka_unit_test(test_backoff_retry_after_floor),
		cmocka_unit_test(test_new_rejects_bad_config),
		cmocka_unit_test(test_token_file_checked),
		cmocka_unit_test(test_file_url_writes),
		cmocka_unit_test(test_unreadable_chunk),
	};
	const struct CMUnitTest http[] = {
		cmocka_unit_test(test_post_arrives_intact),
		cmocka_unit_test(test_put_arrives_intact),
		cmocka_unit_test(test_empty_chunk),
		cmocka_unit_test(test_connection_reused),
		cmocka_unit_test(test_500_is_retry),
		cmocka_unit_test(test_fail_then_ok),
		cmocka_unit_test(test_retry_after),
		cmocka_unit_test(test_4xx_is_reject),
		cmocka_unit_test(test_redirect_not_followed),
		cmocka_unit_test(test_hang_times_out),
		cmocka_unit_test(test_closed_connection_is_retry),
		cmocka_unit_test(test_connection_refused_is_retry),
		cmocka_unit_test(test_token_never_in_result),
		cmocka_unit_test(test_token_reload),
	};
	const struct CMUnitTest tls_tests[] = {
		cmocka_unit_test(test_tls_verify_failure_says_what_to_do),
		cmocka_unit_test(test_tls_with_ca_and_client_cert),
	};
	char cmd[128];
	int failed = 0;

	/* the test talks to 127.0.0.1 directly, never through a proxy */
	unsetenv("http_proxy");
	unsetenv("https_proxy");
	unsetenv("HTTPS_PROXY");
	unsetenv("all_proxy");
	unsetenv("ALL_PROXY");
	curl_global_init(CURL_GLOBAL_DEFAULT);
	make_fixtures();
	failed += cmocka_run_group_tests_name("upload pure", pure, NULL, NULL);
	failed += cmocka_run_group_tests_name("upload http", http, setup_server, teardown_server);
	failed += cmocka_run_group_tests_name("upload tls", tls_tests, setup_tls, teardown_tls);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		failed++;
	return failed;
}
