/* SPDX-License-Identifier: MIT */
/* serve: the profile over loopback HTTP with libmicrohttpd. We bind the
 * listen socket ourselves, so the search for a free port in 3000-3099 and the
 * message about a taken one are ours; libmicrohttpd answers on its own thread.
 */
#include "fxagent/serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "fxagent/log.h"

#define PORT_FIRST	3000
#define PORT_LAST	3099
#define PREFIX_BYTES	16
#define PREFIX_LEN	26  /* base32 of 16 bytes, no padding */
#define NAME_MAX_LEN	128 /* keeps the URL and the link in fixed buffers */
#define DEFAULT_NAME	"profile.json.gz"
#define MAX_CONNECTIONS 16
#define TIMEOUT_S	30    /* an idle connection is closed after this */
#define PREFLIGHT_AGE	"600" /* s; browsers cap it lower anyway */
#define METHODS		"GET, HEAD, OPTIONS"
#define PROFILER_LINK	"https://profiler.firefox.com/from-url/"

struct fx_serve {
	struct MHD_Daemon *mhd;
	struct MHD_Response *profile; /* built once, queued for every GET */
	unsigned int port;
	char prefix[PREFIX_LEN + 1];
	char name[NAME_MAX_LEN + 1];
	char url[256];
	char link[sizeof(PROFILER_LINK) + 3 * 256 + 1];
};

/* Where to listen, from the "ADDR:PORT" text. */
struct listen_addr {
	struct sockaddr_storage sa;
	socklen_t sa_len;
	bool any_port;			     /* no port given: search PORT_FIRST..PORT_LAST */
	unsigned int port;		     /* when given */
	char host[INET6_ADDRSTRLEN + 2];     /* for messages: "127.0.0.1", "[::1]" */
	char url_host[INET6_ADDRSTRLEN + 2]; /* the same, loopback for 0.0.0.0/:: */
};

/* ---- the listen address ---- */

static int parse_port(const char *text, const char *p, unsigned int *out)
{
	unsigned long v = 0;
	size_t i, n = strlen(p);

	if (!n || n > 5 || strspn(p, "0123456789") != n)
		goto bad;
	for (i = 0; i < n; i++)
		v = v * 10 + (unsigned long)(p[i] - '0');
	if (v > 65535)
		goto bad;
	*out = (unsigned int)v;
	return 0;
bad:
	fx_err("bad listen address '%s': the port '%s' is not a number in 0-65535", text, p);
	return -EINVAL;
}

bool fx_serve_is_listen(const char *word)
{
	const char *p = word;
	size_t n;

	if (!word || !*word || access(word, F_OK) == 0)
		return false;
	if (*p == '[') {
		n = strspn(p + 1, "0123456789abcdefABCDEF:.");
		if (p[1 + n] != ']')
			return false;
		p += n + 2;
	} else if (!strncmp(p, "localhost", 9)) {
		p += 9;
	} else {
		n = strspn(p, "0123456789.");
		/* a dotted IPv4 address, not a bare number */
		if (n && !memchr(p, '.', n))
			return false;
		p += n;
	}
	if (*p == ':')
		p += 1 + strspn(p + 1, "0123456789");
	return !*p && p != word;
}

static int parse_listen(const char *text, struct listen_addr *a)
{
	char buf[128];
	char *host, *port = NULL, *end;
	struct sockaddr_in *in4 = (struct sockaddr_in *)&a->sa;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a->sa;
	int ret;

	memset(a, 0, sizeof(*a));
	a->any_port = true;
	if (!text)
		text = "";
	if (strlen(text) >= sizeof(buf)) {
		fx_err("bad listen address '%.40s...': too long", text);
		return -EINVAL;
	}
	memcpy(buf, text, strlen(text) + 1);
	host = buf;
	if (buf[0] == '[') {
		end = strchr(buf, ']');
		if (!end || (end[1] && end[1] != ':')) {
			fx_err("bad listen address '%s': expected [IPv6] or [IPv6]:PORT", text);
			return -EINVAL;
		}
		*end = '\0';
		host = buf + 1;
		if (end[1] == ':')
			port = end + 2;
		in6->sin6_family = AF_INET6;
		a->sa_len = sizeof(*in6);
		if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1) {
			fx_err("bad listen address '%s': '%s' is not an IPv6 address", text, host);
			return -EINVAL;
		}
	} else {
		port = strchr(buf, ':');
		if (port && strchr(port + 1, ':')) {
			fx_err("bad listen address '%s': an IPv6 address goes in brackets, as in "
			       "[::1]:3000",
			       text);
			return -EINVAL;
		}
		if (port)
			*port++ = '\0';
		in4->sin_family = AF_INET;
		a->sa_len = sizeof(*in4);
		if (!*host || !strcmp(host, "localhost"))
			host = "127.0.0.1";
		if (inet_pton(AF_INET, host, &in4->sin_addr) != 1) {
			fx_err("bad listen address '%s': '%s' is not an IPv4 address (an IPv6 "
			       "one goes in brackets)",
			       text, host);
			return -EINVAL;
		}
	}
	if (port) {
		ret = parse_port(text, port, &a->port);
		if (ret < 0)
			return ret;
		a->any_port = false;
	}

	/* The URL names the address bound, but a browser cannot connect to
	 * 0.0.0.0 or ::, which listen on loopback too. */
	if (a->sa.ss_family == AF_INET) {
		inet_ntop(AF_INET, &in4->sin_addr, a->host, sizeof(a->host));
		snprintf(a->url_host, sizeof(a->url_host), "%s",
			 in4->sin_addr.s_addr == htonl(INADDR_ANY) ? "127.0.0.1" : a->host);
	} else {
		char t[INET6_ADDRSTRLEN];

		inet_ntop(AF_INET6, &in6->sin6_addr, t, sizeof(t));
		snprintf(a->host, sizeof(a->host), "[%s]", t);
		snprintf(a->url_host, sizeof(a->url_host), "%s",
			 IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr) ? "[::1]" : a->host);
	}
	return 0;
}

static void set_port(struct listen_addr *a, unsigned int port)
{
	if (a->sa.ss_family == AF_INET)
		((struct sockaddr_in *)&a->sa)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)&a->sa)->sin6_port = htons((uint16_t)port);
}

/* A listening socket on @a at @port, or -errno (not logged: the port search
 * decides what a taken port means). SO_REUSEADDR only lets us bind over
 * connections in TIME_WAIT, left by the last run on the same port: Linux
 * never lets a second socket bind a port that one is listening on, so a
 * taken port still fails with EADDRINUSE. */
static int listen_on(struct listen_addr *a, unsigned int port)
{
	int fd, one = 1, ret;

	set_port(a, port);
	fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (const struct sockaddr *)&a->sa, a->sa_len) < 0 ||
	    listen(fd, MAX_CONNECTIONS) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

/* The first free port of PORT_FIRST..PORT_LAST, or the one given. */
static int bind_listen(struct listen_addr *a)
{
	unsigned int port;
	int fd;

	if (!a->any_port) {
		fd = listen_on(a, a->port);
		if (fd < 0)
			return fx_log_errno(FX_LOG_ERR, -fd, "cannot listen on %s:%u", a->host,
					    a->port);
		return fd;
	}
	for (port = PORT_FIRST; port <= PORT_LAST; port++) {
		fd = listen_on(a, port);
		if (fd != -EADDRINUSE)
			break;
	}
	if (fd == -EADDRINUSE) {
		fx_err("cannot listen on %s: no free port in %d-%d (name one, or ':0' for any)",
		       a->host, PORT_FIRST, PORT_LAST);
		return -EADDRINUSE;
	}
	if (fd < 0)
		return fx_log_errno(FX_LOG_ERR, -fd, "cannot listen on %s:%u", a->host, port);
	return fd;
}

/* The port @fd is bound to: the one searched for, or the kernel's pick for 0. */
static int bound_port(int fd, const struct listen_addr *a, unsigned int *out)
{
	struct sockaddr_in in4 = { 0 };
	struct sockaddr_in6 in6 = { 0 };
	unsigned int port;
	socklen_t len;
	int ret;

	if (a->sa.ss_family == AF_INET) {
		len = sizeof(in4);
		ret = getsockname(fd, (struct sockaddr *)&in4, &len);
		port = ntohs(in4.sin_port);
	} else {
		len = sizeof(in6);
		ret = getsockname(fd, (struct sockaddr *)&in6, &len);
		port = ntohs(in6.sin6_port);
	}
	if (ret < 0)
		return fx_log_errno(FX_LOG_ERR, errno, "cannot read the port bound on %s", a->host);
	*out = port;
	return 0;
}

/* ---- the URL ---- */

/* RFC 4648 base32, lowercase, no padding: what the prefix is spelled in. */
static void base32(const unsigned char *in, size_t len, char *out)
{
	static const char digits[] = "abcdefghijklmnopqrstuvwxyz234567";
	unsigned int acc = 0, bits = 0;
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		acc = (acc << 8) | in[i];
		bits += 8;
		while (bits >= 5) {
			bits -= 5;
			out[o++] = digits[(acc >> bits) & 31];
		}
	}
	if (bits)
		out[o++] = digits[(acc << (5 - bits)) & 31];
	out[o] = '\0';
}

static int make_prefix(char out[PREFIX_LEN + 1])
{
	unsigned char raw[PREFIX_BYTES];
	ssize_t n;

	do {
		n = getrandom(raw, sizeof(raw), 0);
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(raw))
		return fx_log_errno(FX_LOG_ERR, n < 0 ? errno : EIO,
				    "cannot draw the random prefix of the URL");
	base32(raw, sizeof(raw), out);
	return 0;
}

/* JavaScript's encodeURIComponent, which the profiler's from-url reverses. */
static void uri_component(const char *in, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *in && o + 4 <= cap; in++) {
		unsigned char c = (unsigned char)*in;

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    strchr("-_.!~*'()", c)) {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
}

/* The name goes into the URL as it is: only characters a path takes
 * unescaped, so what libmicrohttpd hands us (unescaped) compares equal. */
static bool name_ok(const char *name)
{
	size_t n = strlen(name);

	return n && n <= NAME_MAX_LEN && strcmp(name, ".") && strcmp(name, "..") &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") ==
		       n;
}

/* ---- requests ---- */

/* True for "/<prefix>" and "/<prefix>/...". The prefix is the one secret,
 * so the comparison takes the same time wherever a guess differs. */
static bool under_prefix(const struct fx_serve *s, const char *url)
{
	unsigned char diff = 0;
	size_t i;

	if (url[0] != '/' || strnlen(url + 1, PREFIX_LEN) != PREFIX_LEN)
		return false;
	for (i = 0; i < PREFIX_LEN; i++)
		diff |= (unsigned char)(url[1 + i] ^ s->prefix[i]);
	return !diff && (url[1 + PREFIX_LEN] == '/' || url[1 + PREFIX_LEN] == '\0');
}

/* A short text answer; @cors for those under the prefix, so that the
 * profiler sees the status rather than a CORS failure. */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status, const char *text,
			     bool cors)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	/* PERSISTENT: libmicrohttpd only reads the string, which is static. */
	r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO; /* closes the connection */
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
	if (cors)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, METHODS);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* The CORS preflight: whatever headers the page wants to send are fine, as
 * nothing here reads them. Chrome's private network access asks separately
 * before a public page may reach loopback. */
static enum MHD_Result preflight(struct MHD_Connection *c)
{
	const char *hdrs, *pna;
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
	MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_METHODS, METHODS);
	MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_MAX_AGE, PREFLIGHT_AGE);
	hdrs = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					   MHD_HTTP_HEADER_ACCESS_CONTROL_REQUEST_HEADERS);
	if (hdrs && *hdrs)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_HEADERS, hdrs);
	pna = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					  "Access-Control-Request-Private-Network");
	if (pna && !strcmp(pna, "true"))
		MHD_add_response_header(r, "Access-Control-Allow-Private-Network", "true");
	ret = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, r);
	MHD_destroy_response(r);
	return ret;
}

/* Every request is answered on its first call, before any body is read: a
 * body is never wanted here, and libmicrohttpd closes such a connection
 * after the answer. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	const struct fx_serve *s = cls;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)req_cls;
	if (!under_prefix(s, url))
		return reply(c, MHD_HTTP_NOT_FOUND, "not found\n", false);
	if (!strcmp(method, MHD_HTTP_METHOD_OPTIONS))
		return preflight(c);
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n", true);
	if (url[1 + PREFIX_LEN] != '/' || strcmp(url + 2 + PREFIX_LEN, s->name))
		return reply(c, MHD_HTTP_NOT_FOUND, "not found\n", true);
	/* HEAD: libmicrohttpd sends the headers and Content-Length only. */
	return MHD_queue_response(c, MHD_HTTP_OK, s->profile);
}

__attribute__((format(printf, 2, 0))) static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[256];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	fx_debug("libmicrohttpd: %s", msg);
}

/* The profile's response. Content-Type says what the bytes are, with no
 * Content-Encoding: a client (curl, a browser's "save as") then keeps the
 * gzip bytes as they are, and the profiler recognizes gzip by its magic
 * bytes whatever the type. */
static int make_profile_response(struct fx_serve *s, const void *data, size_t len)
{
	const unsigned char *b = data;
	bool gz = len >= 2 && b[0] == 0x1f && b[1] == 0x8b;

	/* PERSISTENT: the caller keeps @data alive until fx_serve_free. */
	s->profile = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_PERSISTENT);
	if (!s->profile ||
	    MHD_add_response_header(s->profile, MHD_HTTP_HEADER_CONTENT_TYPE,
				    gz ? "application/gzip" : "application/json") != MHD_YES ||
	    MHD_add_response_header(s->profile, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*") !=
		    MHD_YES)
		return fx_log_errno(FX_LOG_ERR, ENOMEM, "cannot set up the HTTP server");
	return 0;
}

/* ---- the server ---- */

/* Serves on @fd, which is consumed: closed on failure, libmicrohttpd's on
 * success. */
static int start_daemon(struct fx_serve *s, int fd, const struct listen_addr *a)
{
	struct stat st;
	ino_t ino;
	int err;

	if (fstat(fd, &st) < 0) {
		err = errno;
		close(fd);
		return fx_log_errno(FX_LOG_ERR, err, "cannot start the HTTP server");
	}
	ino = st.st_ino;
	errno = 0;
	s->mhd = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG, 0, NULL, NULL,
		on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
		MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned int)MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned int)TIMEOUT_S, MHD_OPTION_END);
	if (s->mhd)
		return 0; /* the socket is libmicrohttpd's now: MHD_stop_daemon closes it */
	err = errno ? errno : EIO;
	/* Some of its failure paths close the socket, the early ones do not: the
	 * descriptor is ours still if it is the same socket. */
	if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == ino)
		close(fd);
	return fx_log_errno(FX_LOG_ERR, err, "cannot start the HTTP server on %s:%u", a->host,
			    s->port);
}

int fx_serve_start(const struct fx_serve_options *o, const void *data, size_t len,
		   struct fx_serve **out)
{
	struct listen_addr a;
	struct fx_serve *s;
	const char *name = o->name ? o->name : DEFAULT_NAME;
	char enc[3 * sizeof(s->url) + 1];
	int fd = -1, ret;

	if (!name_ok(name)) {
		fx_err("cannot serve the profile as '%s': a name takes 1-%d of A-Z a-z 0-9 - . _ ~",
		       name, NAME_MAX_LEN);
		return -EINVAL;
	}
	ret = parse_listen(o->listen, &a);
	if (ret < 0)
		return ret;
	s = calloc(1, sizeof(*s));
	if (!s)
		return fx_log_errno(FX_LOG_ERR, ENOMEM, "cannot set up the HTTP server");
	memcpy(s->name, name, strlen(name) + 1);
	ret = make_prefix(s->prefix);
	if (ret < 0)
		goto fail;
	ret = make_profile_response(s, data, len);
	if (ret < 0)
		goto fail;
	fd = bind_listen(&a);
	if (fd < 0) {
		ret = fd;
		goto fail;
	}
	ret = bound_port(fd, &a, &s->port);
	if (ret < 0)
		goto fail;
	snprintf(s->url, sizeof(s->url), "http://%s:%u/%s/%s", a.url_host, s->port, s->prefix,
		 s->name);
	uri_component(s->url, enc, sizeof(enc));
	snprintf(s->link, sizeof(s->link), "%s%s/", PROFILER_LINK, enc);
	ret = start_daemon(s, fd, &a);
	fd = -1;
	if (ret < 0)
		goto fail;
	*out = s;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	fx_serve_free(s);
	return ret;
}

const char *fx_serve_url(const struct fx_serve *s)
{
	return s->url;
}

const char *fx_serve_link(const struct fx_serve *s)
{
	return s->link;
}

unsigned int fx_serve_port(const struct fx_serve *s)
{
	return s->port;
}

/* ---- the browser ---- */

/* The full path of @prog in $PATH, or -ENOENT. */
static int find_on_path(const char *prog, char *out, size_t cap)
{
	const char *path = getenv("PATH"), *p, *end;
	struct stat st;
	size_t n;
	int len;

	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path;; p = end + 1) {
		end = strchrnul(p, ':');
		n = (size_t)(end - p);
		/* An empty entry would be the current directory: a stray xdg-open
		 * there is not run. */
		len = n ? snprintf(out, cap, "%.*s/%s", (int)n, p, prog) : -1;
		if (len > 0 && (size_t)len < cap && stat(out, &st) == 0 && S_ISREG(st.st_mode) &&
		    access(out, X_OK) == 0)
			return 0;
		if (!*end)
			return -ENOENT;
	}
}

/* Waits for the opener, which may run as long as the browser it started,
 * so that it does not stay a zombie. */
static void *reap(void *arg)
{
	pid_t *pid = arg;

	while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
		;
	free(pid);
	return NULL;
}

int fx_serve_open_browser(const struct fx_serve *s)
{
	char path[4096];
	char *argv[] = { path, (char *)s->link, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dfl;
	pthread_t t;
	pid_t *pid;
	int ret;

	if (find_on_path("xdg-open", path, sizeof(path)) < 0)
		return -ENOENT;
	pid = malloc(sizeof(*pid)); /* the reaper's */
	if (!pid)
		return fx_log_errno(FX_LOG_WARN, ENOMEM, "cannot run '%s', open the link by hand",
				    path);
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGINT);
	sigaddset(&dfl, SIGTERM);
	sigaddset(&dfl, SIGPIPE);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	/* Its own session: the Ctrl-C that stops serving must not reach the
	 * browser the opener started. */
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
						POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	ret = posix_spawn(pid, path, &fa, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	if (ret) {
		free(pid);
		return fx_log_errno(FX_LOG_WARN, ret, "cannot run '%s', open the link by hand",
				    path);
	}
	ret = pthread_create(&t, NULL, reap, pid);
	if (ret) {
		fx_log_errno(FX_LOG_DEBUG, ret, "cannot wait for '%s', ignoring", path);
		free(pid);
		return 0;
	}
	pthread_detach(t);
	return 0;
}

void fx_serve_wait(const struct fx_serve *s, volatile sig_atomic_t *stop)
{
	const struct timespec step = { .tv_nsec = 100 * 1000 * 1000 };

	(void)s;
	while (!*stop)
		nanosleep(&step, NULL); /* a signal ends it early, and *stop is read again */
}

void fx_serve_free(struct fx_serve *s)
{
	if (!s)
		return;
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	if (s->profile)
		MHD_destroy_response(s->profile);
	free(s);
}
