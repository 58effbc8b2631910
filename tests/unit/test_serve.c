/* SPDX-License-Identifier: MIT */
/* serve: the profile comes back byte for byte at its URL with the CORS
 * headers the Firefox Profiler needs, a preflight is answered, nothing
 * outside the random prefix is served; the listen address is parsed, the
 * default port is searched in 3000-3099, a taken port is an error; the
 * link is the URL percent-encoded; xdg-open runs detached and is reaped.
 * Everything on loopback, through libcurl. */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "fxagent/serve.h"

#define NAME	     "profile.json.gz"
#define PREFIX_LEN   26
#define PROFILE_SIZE (300 * 1024)

static unsigned char profile[PROFILE_SIZE];
static struct fx_serve *srv; /* the group's server, on 127.0.0.1:0 */

/* ---- helpers ---- */

struct answer {
	long status;
	char *body;
	size_t len;
	char headers[8192];
	size_t hlen;
	curl_off_t content_length;
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct answer *a = arg;
	char *b = realloc(a->body, a->len + size * n + 1);

	assert_non_null(b);
	memcpy(b + a->len, p, size * n);
	a->body = b;
	a->len += size * n;
	b[a->len] = '\0';
	return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct answer *a = arg;
	size_t len = size * n;

	if (len > sizeof(a->headers) - 1 - a->hlen)
		len = sizeof(a->headers) - 1 - a->hlen;
	memcpy(a->headers + a->hlen, p, len);
	a->hlen += len;
	a->headers[a->hlen] = '\0';
	return size * n;
}

/* @method on @url with the extra request headers @hdrs (NULL-terminated);
 * NULL when the transfer failed. *@keep, when given, keeps the handle (and
 * its connection) open for the caller to clean up. */
static struct answer *request_keep(const char *method, const char *url, const char *const *hdrs,
				   CURL **keep)
{
	struct answer *a = calloc(1, sizeof(*a));
	struct curl_slist *list = NULL;
	CURL *c = curl_easy_init();
	CURLcode rc;

	assert_non_null(a);
	assert_non_null(c);
	while (hdrs && *hdrs)
		list = curl_slist_append(list, *hdrs++);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	if (!strcmp(method, "HEAD"))
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (!strcmp(method, "POST"))
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "x=1");
	else if (strcmp(method, "GET"))
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
		curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &a->content_length);
	}
	curl_slist_free_all(list);
	if (keep)
		*keep = c;
	else
		curl_easy_cleanup(c);
	if (rc != CURLE_OK) {
		print_error("%s %s: %s\n", method, url, curl_easy_strerror(rc));
		free(a);
		return NULL;
	}
	return a;
}

static struct answer *request(const char *method, const char *url, const char *const *hdrs)
{
	return request_keep(method, url, hdrs, NULL);
}

static void answer_free(struct answer *a)
{
	if (a)
		free(a->body);
	free(a);
}

/* The value of the response header @name (case-insensitive), or NULL. */
static const char *header(struct answer *a, const char *name, char *out, size_t cap)
{
	size_t n = strlen(name);
	const char *line = a->headers, *end;

	for (; *line; line = end + 1) {
		end = strchrnul(line, '\n');
		if ((size_t)(end - line) > n && !strncasecmp(line, name, n) && line[n] == ':') {
			line += n + 1;
			while (*line == ' ')
				line++;
			n = strcspn(line, "\r\n");
			if (n >= cap)
				n = cap - 1;
			memcpy(out, line, n);
			out[n] = '\0';
			return out;
		}
		if (!*end)
			break;
	}
	return NULL;
}

/* The status of @method on @url, -1 when the transfer failed. */
static long status_of(const char *method, const char *url)
{
	struct answer *a = request(method, url, NULL);
	long st = a ? a->status : -1;

	answer_free(a);
	return st;
}

/* "http://HOST:PORT" of @url, into @out. */
static void origin_of(const char *url, char *out, size_t cap)
{
	const char *slash = strchr(url + strlen("http://"), '/');

	assert_non_null(slash);
	assert_true((size_t)(slash - url) < cap);
	memcpy(out, url, (size_t)(slash - url));
	out[slash - url] = '\0';
}

/* The prefix of @url, into @out (PREFIX_LEN + 1 bytes). */
static void prefix_of(const char *url, char *out)
{
	const char *p = strchr(url + strlen("http://"), '/');

	assert_non_null(p);
	assert_int_equal(strcspn(p + 1, "/"), PREFIX_LEN);
	memcpy(out, p + 1, PREFIX_LEN);
	out[PREFIX_LEN] = '\0';
}

static int start(const char *listen, struct fx_serve **out)
{
	const struct fx_serve_options o = { .listen = listen, .name = NAME };

	*out = NULL;
	return fx_serve_start(&o, profile, sizeof(profile), out);
}

/* A GET of @s's URL returns the profile. */
static void assert_serves(const struct fx_serve *s)
{
	struct answer *a = request("GET", fx_serve_url(s), NULL);

	assert_non_null(a);
	assert_int_equal(a->status, 200);
	assert_int_equal(a->len, sizeof(profile));
	assert_memory_equal(a->body, profile, sizeof(profile));
	answer_free(a);
}

/* Another program's socket listening on 127.0.0.1:@port (0: any), its port
 * in *@bound. With SO_REUSEADDR, as servers set it, to take a port that our
 * last server left in TIME_WAIT: a listener holds the port all the same. */
static int foreign_listener(unsigned int port, unsigned int *bound)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4) < 0) {
		close(fd);
		return -1;
	}
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*bound = ntohs(sa.sin_port);
	return fd;
}

/* ---- the group's server ---- */

static int setup_server(void **state)
{
	(void)state;
	return start("127.0.0.1:0", &srv);
}

static int teardown_server(void **state)
{
	(void)state;
	fx_serve_free(srv);
	srv = NULL;
	return 0;
}

static void test_get_with_origin(void **state)
{
	const char *hdrs[] = { "Origin: https://profiler.firefox.com", NULL };
	struct answer *a;
	char v[256];

	(void)state;
	a = request("GET", fx_serve_url(srv), hdrs);
	assert_non_null(a);
	assert_int_equal(a->status, 200);
	assert_int_equal(a->len, sizeof(profile));
	assert_memory_equal(a->body, profile, sizeof(profile));
	assert_non_null(header(a, "Access-Control-Allow-Origin", v, sizeof(v)));
	assert_string_equal(v, "*");
	/* gzip bytes as they are: no Content-Encoding for a client to undo */
	assert_non_null(header(a, "Content-Type", v, sizeof(v)));
	assert_string_equal(v, "application/gzip");
	assert_null(header(a, "Content-Encoding", v, sizeof(v)));
	answer_free(a);
}

static void test_get_with_query(void **state)
{
	char url[512];

	(void)state;
	snprintf(url, sizeof(url), "%s?v=1", fx_serve_url(srv));
	assert_int_equal(status_of("GET", url), 200);
}

static void test_head(void **state)
{
	struct answer *a;
	char v[64];

	(void)state;
	a = request("HEAD", fx_serve_url(srv), NULL);
	assert_non_null(a);
	assert_int_equal(a->status, 200);
	assert_int_equal(a->len, 0);
	assert_int_equal(a->content_length, sizeof(profile));
	assert_non_null(header(a, "Access-Control-Allow-Origin", v, sizeof(v)));
	answer_free(a);
}

static void test_preflight(void **state)
{
	const char *hdrs[] = { "Origin: https://profiler.firefox.com",
			       "Access-Control-Request-Method: GET",
			       "Access-Control-Request-Headers: x-foo", NULL };
	struct answer *a;
	char v[256];

	(void)state;
	a = request("OPTIONS", fx_serve_url(srv), hdrs);
	assert_non_null(a);
	assert_int_equal(a->status, 204);
	assert_int_equal(a->len, 0);
	assert_non_null(header(a, "Access-Control-Allow-Origin", v, sizeof(v)));
	assert_string_equal(v, "*");
	assert_non_null(header(a, "Access-Control-Allow-Methods", v, sizeof(v)));
	assert_non_null(strstr(v, "GET"));
	assert_non_null(strstr(v, "HEAD"));
	assert_non_null(header(a, "Access-Control-Allow-Headers", v, sizeof(v)));
	assert_string_equal(v, "x-foo");
	assert_non_null(header(a, "Access-Control-Max-Age", v, sizeof(v)));
	assert_true(atoi(v) > 0);
	/* nothing asked, nothing granted */
	assert_null(header(a, "Access-Control-Allow-Private-Network", v, sizeof(v)));
	answer_free(a);
}

static void test_preflight_private_network(void **state)
{
	const char *hdrs[] = { "Origin: https://profiler.firefox.com",
			       "Access-Control-Request-Method: GET",
			       "Access-Control-Request-Private-Network: true", NULL };
	struct answer *a;
	char v[64];

	(void)state;
	a = request("OPTIONS", fx_serve_url(srv), hdrs);
	assert_non_null(a);
	assert_int_equal(a->status, 204);
	assert_non_null(header(a, "Access-Control-Allow-Private-Network", v, sizeof(v)));
	assert_string_equal(v, "true");
	assert_null(header(a, "Access-Control-Allow-Headers", v, sizeof(v)));
	answer_free(a);
}

static void test_outside_prefix_is_404(void **state)
{
	char origin[128], prefix[PREFIX_LEN + 1], url[512];
	struct answer *a;
	char v[64];

	(void)state;
	origin_of(fx_serve_url(srv), origin, sizeof(origin));
	prefix_of(fx_serve_url(srv), prefix);

	snprintf(url, sizeof(url), "%s/", origin);
	assert_int_equal(status_of("GET", url), 404);
	snprintf(url, sizeof(url), "%s/%s", origin, NAME);
	assert_int_equal(status_of("GET", url), 404);
	snprintf(url, sizeof(url), "%s/%.*s/%s", origin, PREFIX_LEN - 1, prefix, NAME);
	assert_int_equal(status_of("GET", url), 404);
	snprintf(url, sizeof(url), "%s/%sa/%s", origin, prefix, NAME);
	assert_int_equal(status_of("GET", url), 404);
	snprintf(url, sizeof(url), "%s/%s/%s/", origin, prefix, NAME);
	assert_int_equal(status_of("GET", url), 404);
	snprintf(url, sizeof(url), "%s/%s/", origin, prefix);
	assert_int_equal(status_of("GET", url), 404);
	snprintf(url, sizeof(url), "%s/%s", origin, prefix);
	assert_int_equal(status_of("GET", url), 404);
	snprintf(url, sizeof(url), "%s/%s/other.json", origin, prefix);
	assert_int_equal(status_of("GET", url), 404);

	/* one character of the prefix changed, at each end */
	for (size_t i = 0; i < PREFIX_LEN; i += PREFIX_LEN - 1) {
		char bad[PREFIX_LEN + 1];

		memcpy(bad, prefix, sizeof(bad));
		bad[i] = bad[i] == 'a' ? 'b' : 'a';
		snprintf(url, sizeof(url), "%s/%s/%s", origin, bad, NAME);
		assert_int_equal(status_of("GET", url), 404);
		assert_int_equal(status_of("HEAD", url), 404);
		/* and no CORS header that would let a page read the answer */
		a = request("OPTIONS", url, NULL);
		assert_non_null(a);
		assert_int_equal(a->status, 404);
		assert_null(header(a, "Access-Control-Allow-Origin", v, sizeof(v)));
		answer_free(a);
	}
	/* the server still serves */
	assert_int_equal(status_of("GET", fx_serve_url(srv)), 200);
}

static void test_other_methods(void **state)
{
	char origin[128], url[512];
	struct answer *a;
	char v[64];

	(void)state;
	a = request("POST", fx_serve_url(srv), NULL);
	assert_non_null(a);
	assert_int_equal(a->status, 405);
	assert_non_null(header(a, "Allow", v, sizeof(v)));
	assert_non_null(strstr(v, "GET"));
	answer_free(a);
	assert_int_equal(status_of("PUT", fx_serve_url(srv)), 405);
	assert_int_equal(status_of("DELETE", fx_serve_url(srv)), 405);

	origin_of(fx_serve_url(srv), origin, sizeof(origin));
	snprintf(url, sizeof(url), "%s/%s", origin, NAME);
	assert_int_equal(status_of("POST", url), 404);
	assert_int_equal(status_of("GET", fx_serve_url(srv)), 200);
}

/* A client that connects and says nothing holds one connection, not the
 * server. */
static void test_idle_client_does_not_block(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	(void)state;
	assert_true(fd >= 0);
	sa.sin_port = htons((uint16_t)fx_serve_port(srv));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(fd, "GET /", 5), 5);
	assert_serves(srv);
	close(fd);
}

static void test_link(void **state)
{
	const char *link = fx_serve_link(srv), *head = "https://profiler.firefox.com/from-url/";
	char decoded[1024];
	size_t i, o = 0, n;

	(void)state;
	assert_int_equal(strncmp(link, head, strlen(head)), 0);
	n = strlen(link);
	assert_true(n > strlen(head) + 1);
	assert_int_equal(link[n - 1], '/');
	for (i = strlen(head); i < n - 1; i++) {
		unsigned int c;

		if (link[i] == '%') {
			assert_true(isxdigit((unsigned char)link[i + 1]) &&
				    isxdigit((unsigned char)link[i + 2]));
			assert_int_equal(sscanf(link + i + 1, "%2x", &c), 1);
			/* what encodeURIComponent keeps is never escaped */
			assert_false(isalnum((int)c) || strchr("-_.!~*'()", (int)c));
			i += 2;
		} else {
			c = (unsigned char)link[i];
			assert_true(isalnum((int)c) || strchr("-_.!~*'()", (int)c));
		}
		assert_true(o < sizeof(decoded) - 1);
		decoded[o++] = (char)c;
	}
	decoded[o] = '\0';
	assert_string_equal(decoded, fx_serve_url(srv));
	/* the URL itself: http://127.0.0.1:PORT/<prefix>/NAME */
	snprintf(decoded, sizeof(decoded), "http://127.0.0.1:%u/", fx_serve_port(srv));
	assert_int_equal(strncmp(fx_serve_url(srv), decoded, strlen(decoded)), 0);
	assert_non_null(strstr(link, "%3A%2F%2F127.0.0.1%3A"));
}

/* ---- starting ---- */

static void test_prefix_is_random_base32(void **state)
{
	char p1[PREFIX_LEN + 1], p2[PREFIX_LEN + 1];
	struct fx_serve *s;

	(void)state;
	assert_int_equal(start("127.0.0.1:0", &s), 0);
	prefix_of(fx_serve_url(s), p1);
	prefix_of(fx_serve_url(srv), p2);
	assert_string_not_equal(p1, p2);
	assert_int_equal(strspn(p1, "abcdefghijklmnopqrstuvwxyz234567"), PREFIX_LEN);
	assert_int_equal(strspn(p2, "abcdefghijklmnopqrstuvwxyz234567"), PREFIX_LEN);
	fx_serve_free(s);
}

static void test_any_port(void **state)
{
	struct fx_serve *s;

	(void)state;
	assert_int_equal(start(":0", &s), 0);
	assert_true(fx_serve_port(s) > 0);
	assert_serves(s);
	fx_serve_free(s);
	assert_int_equal(start("localhost:0", &s), 0);
	assert_serves(s);
	fx_serve_free(s);
}

static void test_default_port_in_range(void **state)
{
	struct fx_serve *s1, *s2;
	unsigned int p1, p2, held;
	int ret, fd;

	(void)state;
	ret = start(NULL, &s1);
	if (ret == -EADDRINUSE) {
		print_message("every port in 3000-3099 is taken here, skipping\n");
		skip();
	}
	assert_int_equal(ret, 0);
	p1 = fx_serve_port(s1);
	assert_in_range(p1, 3000, 3099);
	assert_non_null(strstr(fx_serve_url(s1), "http://127.0.0.1:"));
	assert_serves(s1);

	/* the next one skips the taken port */
	ret = start(NULL, &s2);
	if (ret == 0) {
		p2 = fx_serve_port(s2);
		assert_in_range(p2, 3000, 3099);
		assert_int_not_equal(p2, p1);
		assert_serves(s2);
		fx_serve_free(s2);
	}
	fx_serve_free(s1);

	/* a port taken by someone else is skipped too */
	fd = foreign_listener(p1, &held);
	assert_true(fd >= 0);
	assert_int_equal(start(NULL, &s2), 0);
	assert_int_not_equal(fx_serve_port(s2), p1);
	assert_serves(s2);
	fx_serve_free(s2);
	close(fd);
}

static void test_taken_port(void **state)
{
	struct fx_serve *s1, *s2 = NULL;
	char text[64];
	unsigned int port;
	int fd;

	(void)state;
	assert_int_equal(start("127.0.0.1:0", &s1), 0);
	snprintf(text, sizeof(text), "127.0.0.1:%u", fx_serve_port(s1));
	assert_int_equal(start(text, &s2), -EADDRINUSE);
	assert_null(s2);
	snprintf(text, sizeof(text), ":%u", fx_serve_port(s1));
	assert_int_equal(start(text, &s2), -EADDRINUSE);
	assert_serves(s1);
	fx_serve_free(s1);

	fd = foreign_listener(0, &port);
	assert_true(fd >= 0);
	snprintf(text, sizeof(text), "127.0.0.1:%u", port);
	assert_int_equal(start(text, &s2), -EADDRINUSE);
	close(fd);
}

/* The connections the last server closed (TIME_WAIT) do not keep the port
 * from the next one. */
static void test_restart_on_same_port(void **state)
{
	struct fx_serve *s;
	struct answer *a;
	char text[64];
	CURL *c = NULL;

	(void)state;
	assert_int_equal(start("127.0.0.1:0", &s), 0);
	snprintf(text, sizeof(text), "127.0.0.1:%u", fx_serve_port(s));
	a = request_keep("GET", fx_serve_url(s), NULL, &c);
	assert_non_null(a);
	assert_int_equal(a->status, 200);
	answer_free(a);
	fx_serve_free(s); /* closes the kept-alive connection first */
	curl_easy_cleanup(c);
	assert_int_equal(start(text, &s), 0);
	assert_serves(s);
	fx_serve_free(s);
}

static void test_ipv6_loopback(void **state)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct fx_serve *s;
	char head[64];
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;

	(void)state;
	if (fd >= 0)
		close(fd);
	if (!ok) {
		print_message("no IPv6 loopback here, skipping\n");
		skip();
	}
	assert_int_equal(start("[::1]:0", &s), 0);
	snprintf(head, sizeof(head), "http://[::1]:%u/", fx_serve_port(s));
	assert_int_equal(strncmp(fx_serve_url(s), head, strlen(head)), 0);
	assert_serves(s);
	fx_serve_free(s);
}

static void test_bad_listen(void **state)
{
	static const char *const bad[] = {
		"nonsense:99999",
		"nonsense",
		"127.0.0.1:99999",
		"127.0.0.1:",
		"127.0.0.1:80x",
		"127.0.0.1:-1",
		"1.2.3:80",
		"::1",
		"::1:3000",
		"[::1",
		"[::1]3000",
		"[127.0.0.1]:80",
		"[nonsense]:80",
		":",
		":+80",
		"127.0.0.1:0x50",
	};
	struct fx_serve *s = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (start(bad[i], &s) != -EINVAL)
			fail_msg("'%s' was not refused", bad[i]);
		assert_null(s);
	}
}

static void test_bad_name(void **state)
{
	static const char *const bad[] = { "", "a/b", "..", "a b", "p%41", "x?y" };
	struct fx_serve_options o = { .listen = "127.0.0.1:0" };
	struct fx_serve *s = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o.name = bad[i];
		if (fx_serve_start(&o, profile, sizeof(profile), &s) != -EINVAL)
			fail_msg("the name '%s' was not refused", bad[i]);
		assert_null(s);
	}
	/* no name: a default one */
	o.name = NULL;
	assert_int_equal(fx_serve_start(&o, profile, sizeof(profile), &s), 0);
	assert_non_null(strstr(fx_serve_url(s), "/profile.json.gz"));
	assert_serves(s);
	fx_serve_free(s);
}

static void test_json_and_empty(void **state)
{
	static const char json[] = "{\"meta\":{}}";
	struct fx_serve_options o = { .listen = "127.0.0.1:0", .name = "p.json" };
	struct fx_serve *s;
	struct answer *a;
	char v[64];

	(void)state;
	assert_int_equal(fx_serve_start(&o, json, strlen(json), &s), 0);
	a = request("GET", fx_serve_url(s), NULL);
	assert_non_null(a);
	assert_int_equal(a->status, 200);
	assert_string_equal(a->body, json);
	assert_non_null(header(a, "Content-Type", v, sizeof(v)));
	assert_string_equal(v, "application/json");
	answer_free(a);
	fx_serve_free(s);

	assert_int_equal(fx_serve_start(&o, NULL, 0, &s), 0);
	a = request("GET", fx_serve_url(s), NULL);
	assert_non_null(a);
	assert_int_equal(a->status, 200);
	assert_int_equal(a->len, 0);
	answer_free(a);
	fx_serve_free(s);
}

/* ---- the browser ---- */

static char bin_dir[64];

/* Children of this process that are zombies. */
static int zombie_children(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	char path[300], buf[512], *p, state;
	int n = 0, ppid;
	FILE *f;

	assert_non_null(d);
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) &&
		    sscanf(p + 1, " %c %d", &state, &ppid) == 2 && ppid == getpid() && state == 'Z')
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

static char *slurp(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void test_open_browser(void **state)
{
	char path[PATH_MAX], script[1024], *got, *old_path;
	const char *p;
	int fd, i, session = -1;

	(void)state;
	snprintf(bin_dir, sizeof(bin_dir), "/tmp/fx-test-serve-XXXXXX");
	assert_non_null(mkdtemp(bin_dir));
	snprintf(path, sizeof(path), "%s/xdg-open", bin_dir);
	snprintf(script, sizeof(script),
		 "#!/bin/sh\n"
		 "out=$(/usr/bin/readlink /proc/$$/fd/1)\n"
		 "echo \"$out\" > %s/stdout\n"
		 "/bin/cat /proc/$$/stat > %s/stat\n"
		 "echo noise; echo noise >&2\n"
		 "printf '%%s' \"$1\" > %s/arg.tmp && /bin/mv %s/arg.tmp %s/arg\n",
		 bin_dir, bin_dir, bin_dir, bin_dir, bin_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, script, strlen(script)), (ssize_t)strlen(script));
	close(fd);

	old_path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	assert_non_null(old_path);
	setenv("PATH", bin_dir, 1);
	assert_int_equal(fx_serve_open_browser(srv), 0);
	setenv("PATH", old_path, 1);
	free(old_path);

	snprintf(path, sizeof(path), "%s/arg", bin_dir);
	for (i = 0; i < 100 && access(path, F_OK); i++)
		usleep(50 * 1000);
	got = slurp(path);
	assert_non_null(got);
	assert_string_equal(got, fx_serve_link(srv));
	snprintf(path, sizeof(path), "%s/stdout", bin_dir);
	got = slurp(path);
	assert_non_null(got);
	assert_string_equal(got, "/dev/null\n");
	/* its own session, away from the terminal's Ctrl-C */
	snprintf(path, sizeof(path), "%s/stat", bin_dir);
	got = slurp(path);
	assert_non_null(got);
	p = strrchr(got, ')');
	assert_non_null(p);
	assert_int_equal(sscanf(p + 1, " %*c %*d %*d %d", &session), 1);
	assert_int_not_equal(session, getsid(0));
	/* reaped once it exits */
	for (i = 0; i < 100 && zombie_children(); i++)
		usleep(50 * 1000);
	assert_int_equal(zombie_children(), 0);

	snprintf(script, sizeof(script), "rm -rf '%s'", bin_dir);
	assert_int_equal(system(script), 0);
}

static void test_open_browser_absent(void **state)
{
	char dir[] = "/tmp/fx-test-serve-XXXXXX";
	char *old_path;

	(void)state;
	assert_non_null(mkdtemp(dir));
	old_path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	assert_non_null(old_path);
	setenv("PATH", dir, 1);
	assert_int_equal(fx_serve_open_browser(srv), -ENOENT);
	setenv("PATH", old_path, 1);
	free(old_path);
	rmdir(dir);
}

/* ---- waiting ---- */

static volatile sig_atomic_t stop_flag;

static void *set_stop_later(void *arg)
{
	(void)arg;
	usleep(300 * 1000);
	stop_flag = 1;
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_wait(void **state)
{
	pthread_t t;
	double t0, dt;

	(void)state;
	stop_flag = 1;
	t0 = now_s();
	fx_serve_wait(srv, &stop_flag);
	assert_true(now_s() - t0 < 0.1);

	stop_flag = 0;
	assert_int_equal(pthread_create(&t, NULL, set_stop_later, NULL), 0);
	t0 = now_s();
	fx_serve_wait(srv, &stop_flag);
	dt = now_s() - t0;
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(dt >= 0.25);
	assert_true(dt < 0.3 + 0.2 + 0.3); /* one 200 ms step late at most, and slack */
}

static void test_free_null(void **state)
{
	(void)state;
	fx_serve_free(NULL);
}

int main(void)
{
	const struct CMUnitTest served[] = {
		cmocka_unit_test(test_get_with_origin),
		cmocka_unit_test(test_get_with_query),
		cmocka_unit_test(test_head),
		cmocka_unit_test(test_preflight),
		cmocka_unit_test(test_preflight_private_network),
		cmocka_unit_test(test_outside_prefix_is_404),
		cmocka_unit_test(test_other_methods),
		cmocka_unit_test(test_idle_client_does_not_block),
		cmocka_unit_test(test_link),
		cmocka_unit_test(test_prefix_is_random_base32),
		cmocka_unit_test(test_open_browser),
		cmocka_unit_test(test_open_browser_absent),
		cmocka_unit_test(test_wait),
	};
	const struct CMUnitTest starting[] = {
		cmocka_unit_test(test_any_port),      cmocka_unit_test(test_default_port_in_range),
		cmocka_unit_test(test_taken_port),    cmocka_unit_test(test_restart_on_same_port),
		cmocka_unit_test(test_ipv6_loopback), cmocka_unit_test(test_bad_listen),
		cmocka_unit_test(test_bad_name),      cmocka_unit_test(test_json_and_empty),
		cmocka_unit_test(test_free_null),
	};
	unsigned int x = 12345;
	int failed = 0;

	/* gzip's magic, then bytes of every value (NULs too) */
	for (size_t i = 0; i < sizeof(profile); i++) {
		x = x * 1103515245u + 12345u;
		profile[i] = (unsigned char)(x >> 16);
	}
	profile[0] = 0x1f;
	profile[1] = 0x8b;
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	failed +=
		cmocka_run_group_tests_name("serve served", served, setup_server, teardown_server);
	failed += cmocka_run_group_tests_name("serve starting", starting, NULL, NULL);
	curl_global_cleanup();
	return failed;
}
