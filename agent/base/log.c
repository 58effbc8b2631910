/* SPDX-License-Identifier: MIT */
#include "fxagent/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

static enum fx_log_level log_level = FX_LOG_NOTICE;
static bool to_journal;

void fx_log_set_level(enum fx_log_level level)
{
	log_level = level;
}

enum fx_log_level fx_log_get_level(void)
{
	return log_level;
}

/* systemd's own rule: stderr is the journal when JOURNAL_STREAM names its
 * device and inode. INVOCATION_ID alone (a service whose stderr goes
 * elsewhere) counts too, unless stderr is a terminal: shells started by a
 * terminal that runs as a service inherit INVOCATION_ID. */
bool fx_log_journal_wanted(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
	    (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino)
		return true;
	return getenv("INVOCATION_ID") && !isatty(STDERR_FILENO);
}

void fx_log_open(void)
{
	to_journal = fx_log_journal_wanted();
}

bool fx_log_to_journal(void)
{
	return to_journal;
}

static int journal_send(enum fx_log_level level, const char *target, const char *chunk_id,
			const char *msg)
{
	char prio[16], tgt[128], chunk[128], mbuf[sizeof("MESSAGE=") + 4 * 1024];
	struct iovec iov[5];
	int n = 0;

	snprintf(mbuf, sizeof(mbuf), "MESSAGE=%s", msg);
	snprintf(prio, sizeof(prio), "PRIORITY=%d", (int)level);
	iov[n++] = (struct iovec){ mbuf, strlen(mbuf) };
	iov[n++] = (struct iovec){ prio, strlen(prio) };
	iov[n++] = (struct iovec){ (char *)"SYSLOG_IDENTIFIER=fxagent", 25 };
	if (target) {
		snprintf(tgt, sizeof(tgt), "TARGET=%s", target);
		iov[n++] = (struct iovec){ tgt, strlen(tgt) };
	}
	if (chunk_id) {
		snprintf(chunk, sizeof(chunk), "CHUNK_ID=%s", chunk_id);
		iov[n++] = (struct iovec){ chunk, strlen(chunk) };
	}
	return sd_journal_sendv(iov, n);
}

/* Messages hold names from outside (process names, paths of binaries,
 * cgroups, config values) that may hold any byte: control bytes are written
 * as \n, \t, \r or \xNN and a backslash as \\, so a message is one line
 * and cannot pass for another. @out has room for 4 times @in. */
static void escape_message(const char *in, char *out)
{
	static const char hex[] = "0123456789abcdef";

	for (; *in; in++) {
		unsigned char c = (unsigned char)*in;
		char letter = 0;

		switch (c) {
		case '\\':
			letter = '\\';
			break;
		case '\n':
			letter = 'n';
			break;
		case '\t':
			letter = 't';
			break;
		case '\r':
			letter = 'r';
			break;
		default:
			break;
		}
		if (letter) {
			*out++ = '\\';
			*out++ = letter;
		} else if (c < 0x20 || c == 0x7f) {
			*out++ = '\\';
			*out++ = 'x';
			*out++ = hex[c >> 4];
			*out++ = hex[c & 15];
		} else {
			*out++ = (char)c;
		}
	}
	*out = '\0';
}

/* Appends ": <error text of @err>" to the message in @msg (@size bytes); a
 * message too long for both is cut, so the error text is never lost. */
static void append_error(char *msg, size_t size, int err)
{
	char ebuf[128];
	const char *text = strerror_r(err, ebuf, sizeof(ebuf));
	size_t mlen = strlen(msg), tlen = strlen(text) + 2;

	if (mlen + tlen >= size)
		mlen = size - 1 - tlen; /* tlen < sizeof(ebuf) + 2, far below size */
	snprintf(msg + mlen, size - mlen, ": %s", text);
}

/* @err is 0 (no error text) or a positive errno value. */
__attribute__((format(printf, 5, 0))) static void log_va(enum fx_log_level level,
							 const char *target, const char *chunk_id,
							 int err, const char *fmt, va_list ap)
{
	char raw[1024], buf[4 * sizeof(raw)];

	if (level > log_level)
		return;
	vsnprintf(raw, sizeof(raw), fmt, ap);
	if (err)
		append_error(raw, sizeof(raw), err);
	escape_message(raw, buf);
	/* journald gone (stopping, or a test's fake environment): stderr. */
	if (to_journal && journal_send(level, target, chunk_id, buf) == 0)
		return;
	/* One fprintf per message so concurrent threads do not interleave lines. */
	fprintf(stderr, "fxagent: %s\n", buf);
}

void fx_log(enum fx_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_va(level, NULL, NULL, 0, fmt, ap);
	va_end(ap);
}

void fx_log_fields(enum fx_log_level level, const char *target, const char *chunk_id,
		   const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_va(level, target, chunk_id, 0, fmt, ap);
	va_end(ap);
}

int fx_log_errno(enum fx_log_level level, int err, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	if (err < 0)
		err = -err;
	if (!err)
		err = EIO;
	va_start(ap, fmt);
	log_va(level, NULL, NULL, err, fmt, ap);
	va_end(ap);
	errno = saved;
	return -err;
}
