/* SPDX-License-Identifier: MIT */
/* serve: one profile over loopback HTTP for the Firefox Profiler, as samply
 * serves its recordings.
 *
 * The profile (gzip bytes, owned by the caller, alive until fx_serve_free)
 * is served at http://ADDR:PORT/<prefix>/<name>, where <prefix> is random
 * (16 bytes from getrandom, base32): nothing else is served, every other path
 * is a 404. Responses under the prefix carry CORS headers for
 * https://profiler.firefox.com; OPTIONS answers a preflight with 204, the
 * allowed methods and the requested headers echoed; other methods get 405.
 * libmicrohttpd runs the server on its own thread, with at most 16
 * connections, each closed after 30 s without progress.
 */
#ifndef FXAGENT_SERVE_H
#define FXAGENT_SERVE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

struct fx_serve;

struct fx_serve_options {
	/* "ADDR:PORT", "ADDR", ":PORT" or NULL. The address defaults to
	 * 127.0.0.1 (an IPv6 one in brackets: "[::1]:3000"; "localhost" is
	 * 127.0.0.1); without a port the first free one in 3000-3099 is taken;
	 * port 0 takes any free port. The URL says 127.0.0.1 (or [::1]) for an
	 * address of 0.0.0.0 (or [::]). */
	const char *listen;
	/* The file name in the URL: 1-128 of A-Z a-z 0-9 - . _ ~ (so that it
	 * needs no escaping); NULL is "profile.json.gz". */
	const char *name;
};

/* Whether @word reads as a listen address (":3000", "127.0.0.1:3000",
 * "[::1]", "localhost:0") and names no file: lets "--serve ADDR" take its
 * value as a separate word, as "--serve=ADDR" does. */
bool fx_serve_is_listen(const char *word);

/* Starts serving @data (@len bytes; Content-Type application/gzip when they
 * start with gzip's magic, else application/json; never a Content-Encoding).
 * On success *out is the server and 0 is returned; else -errno with the
 * reason logged: -EINVAL for a bad address, port or name, -EADDRINUSE for a
 * port that is taken or no free port in 3000-3099. */
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
 * (in the background, in a session of its own, its output discarded; a
 * thread reaps it). Returns 0, or -ENOENT when no xdg-open was found, not
 * logged (the caller has printed the link anyway); another failure to run
 * it is logged as a warning and returned. */
int fx_serve_open_browser(const struct fx_serve *s);

/* Blocks until *@stop is nonzero (set by a SIGINT/SIGTERM handler), checking
 * it at least every 200 ms. */
void fx_serve_wait(const struct fx_serve *s, volatile sig_atomic_t *stop);

/* Stops the server and frees it (NULL is fine). */
void fx_serve_free(struct fx_serve *s);

#endif
