/* SPDX-License-Identifier: MIT */
/* serve: one profile over loopback HTTP for the Firefox Profiler, as samply
 * serves its recordings.
 *
 * The profile (gzip bytes, owned by the caller, alive until fx_serve_free)
 * is served at http://ADDR:PORT/<prefix>/<name>, where <prefix> is random
 * (16 bytes from getrandom, base32): nothing else is served, every other path
 * is a 404. Responses under the prefix carry CORS headers for
 * https://profiler.firefox.com; OPTIONS answers a preflight with 204, the
 * allowed methods and the requested headers echoed. libmicrohttpd runs the
 * server on its own thread.
 */
#ifndef FXAGENT_SERVE_H
#define FXAGENT_SERVE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

struct fx_serve;

struct fx_serve_options {
	/* "ADDR:PORT", "ADDR", ":PORT" or NULL. The address defaults to
	 * 127.0.0.1 (an IPv6 one in brackets: "[::1]:3000"); without a port the
	 * first free one in 3000-3099 is taken; port 0 takes any free port. */
	const char *listen;
	const char *name; /* the file name in the URL, e.g. "profile.json.gz" */
};

/* Starts serving @data (@len bytes). On success *out is the server and 0 is
 * returned; else -errno with the reason logged (a bad address, a port that
 * is taken, no free port in 3000-3099). */
int fx_serve_start(const struct fx_serve_options *o, const void *data, size_t len,
		   struct fx_serve **out);

/* The profile's URL (http://ADDR:PORT/<prefix>/<name>) and the Firefox
 * Profiler link that loads it (https://profiler.firefox.com/from-url/<URL,
 * percent-encoded>/). Valid until fx_serve_free. */
const char *fx_serve_url(const struct fx_serve *s);
const char *fx_serve_link(const struct fx_serve *s);
/* The port actually bound (useful with port 0). */
unsigned int fx_serve_port(const struct fx_serve *s);

/* Opens the link in the user's browser with xdg-open when it is on PATH
 * (in the background, its output discarded). Returns 0, or -ENOENT when no
 * xdg-open was found (the caller has printed the link anyway). */
int fx_serve_open_browser(const struct fx_serve *s);

/* Blocks until *@stop is nonzero (set by a SIGINT/SIGTERM handler), checking
 * it at least every 200 ms. */
void fx_serve_wait(const struct fx_serve *s, volatile sig_atomic_t *stop);

/* Stops the server and frees it (NULL is fine). */
void fx_serve_free(struct fx_serve *s);

#endif
