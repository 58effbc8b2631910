/* SPDX-License-Identifier: MIT */
/* log: the one log sink of the agent: the journal under systemd (with
 * PRIORITY= and the structured fields TARGET= and CHUNK_ID=), else stderr.
 *
 * Log once, where an error is decided; lower modules log at debug at most.
 * Hot paths (per sample) never log: they count.
 */
#ifndef FXAGENT_LOG_H
#define FXAGENT_LOG_H

#include <stdarg.h>
#include <stdbool.h>

enum fx_log_level {
	FX_LOG_ERR = 3,
	FX_LOG_WARN = 4,
	FX_LOG_NOTICE = 5,
	FX_LOG_INFO = 6,
	FX_LOG_DEBUG = 7,
};

/* Picks the sink once, at start: the journal when fx_log_journal_wanted(). */
void fx_log_open(void);
/* True when stderr is the journal's stream (JOURNAL_STREAM), or INVOCATION_ID
 * is set and stderr is not a terminal. */
bool fx_log_journal_wanted(void);
bool fx_log_to_journal(void);

/* Messages above @level are dropped. Default: FX_LOG_NOTICE. */
void fx_log_set_level(enum fx_log_level level);
enum fx_log_level fx_log_get_level(void);

/* Writes "fxagent: <message>\n" to stderr when @level is enabled. */
void fx_log(enum fx_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* fx_log with the journal fields TARGET= and CHUNK_ID= (either may be NULL);
 * on stderr only the message is written. */
void fx_log_fields(enum fx_log_level level, const char *target, const char *chunk_id,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Logs "<message>: <strerror(@err)>" like fx_log and returns -@err, for
 * "return fx_log_errno(...)" at the place an error is decided; the format
 * names what failed and never formats the error text itself ("%m" is not
 * expanded). @err is a positive errno value (a negative one is taken as its
 * absolute value); 0 is taken as EIO, so the result is always negative.
 * The error text is kept whole when the message is too long: the message is
 * cut instead. errno is preserved. Like fx_log, not async-signal-safe.
 * For a problem the agent found itself, whose message says it all (a bad
 * value, a missing mount), use fx_log and return the -errno: an appended
 * "Invalid argument" adds nothing. */
int fx_log_errno(enum fx_log_level level, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define fx_err(...)   fx_log(FX_LOG_ERR, __VA_ARGS__)
#define fx_warn(...)  fx_log(FX_LOG_WARN, __VA_ARGS__)
#define fx_info(...)  fx_log(FX_LOG_INFO, __VA_ARGS__)
#define fx_debug(...) fx_log(FX_LOG_DEBUG, __VA_ARGS__)

#endif
