/* SPDX-License-Identifier: MIT */
/* Fuzz target: what the attach client reads from a JVM and its /proc files
 * (include/fxagent/jvmattach.h).
 *
 * The input: byte 0 picks the reader (low 2 bits: 0 a reply, 1 a command
 * line, 2 an environment, 3 both scans on the same bytes, in turn); the
 * rest is its bytes. Checks: a reply is 0 with a code that is the first
 * line's number and a body that starts right after its newline, or -EBADMSG
 * without a write; a scan returns the verdict's block, within the enum, only
 * ever raises it, and leaves an option and a place that are NUL-terminated
 * text without control bytes; the scans say "may signal" for bytes without
 * the option names, '@' or a quote.
 */
#include "fuzz.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "fxagent/jvmattach.h"

static void check_reply(const char *s, size_t len)
{
	int code = 12345;
	size_t body = SIZE_MAX;
	int ret = fx_jvmattach_parse_reply(s, len, &code, &body);
	const char *nl = memchr(s, '\n', len);

	if (ret < 0) {
		FUZZ_CHECK(ret == -EBADMSG, "reply: %d", ret);
		FUZZ_CHECK(code == 12345 && body == SIZE_MAX, "reply: written on failure");
		return;
	}
	FUZZ_CHECK(ret == 0 && nl, "reply: %d without a first line", ret);
	FUZZ_CHECK(body == (size_t)(nl - s) + 1, "reply: body at %zu", body);
	{
		/* The first line is '-'? digits, whose value (leading zeros
		 * and all) is the code. */
		const char *p = s + (s[0] == '-');
		long long v = 0;

		FUZZ_CHECK(p < nl, "reply: no digits");
		for (; p < nl; p++) {
			FUZZ_CHECK(*p >= '0' && *p <= '9', "reply: 0x%02x in the code",
				   (unsigned char)*p);
			FUZZ_CHECK(v <= (long long)INT_MAX + 1, "reply: a code past an int taken");
			v = v * 10 + (*p - '0');
		}
		FUZZ_CHECK((s[0] == '-' ? -v : v) == code, "reply: %lld read as %d", v, code);
	}
}

static void check_text(const char *s, size_t size)
{
	FUZZ_CHECK(memchr(s, '\0', size) != NULL, "not NUL-terminated");
	for (; *s; s++)
		FUZZ_CHECK((unsigned char)*s >= 0x20 && *s != 0x7f, "a control byte 0x%02x",
			   (unsigned char)*s);
}

static void check_scan(const char *s, size_t len, bool env)
{
	struct fx_jvm_verdict v = { 0 };
	enum fx_jvm_block b =
		env ? fx_jvmattach_scan_environ(s, len, &v) : fx_jvmattach_scan_cmdline(s, len, &v);
	enum fx_jvm_block again;

	FUZZ_CHECK(b == v.block, "scan: returned %d, verdict %d", b, v.block);
	FUZZ_CHECK(b >= FX_JVM_MAY_SIGNAL && b <= FX_JVM_ATTACH_DISABLED, "scan: block %d", b);
	check_text(v.option, sizeof(v.option));
	check_text(v.where, sizeof(v.where));
	if (b == FX_JVM_MAY_SIGNAL)
		FUZZ_CHECK(!v.option[0] && !v.where[0], "scan: an option for no block");
	if (!memmem(s, len, "Xrs", 3) && !memmem(s, len, "ReduceSignalUsage", 17) &&
	    !memmem(s, len, "DisableAttachMechanism", 22) && !memchr(s, '@', len) &&
	    !memmem(s, len, "-XX:", 4) && !memchr(s, '"', len) && !memchr(s, '\'', len))
		FUZZ_CHECK(b == FX_JVM_MAY_SIGNAL, "scan: block %d from nothing", b);
	/* Scanning again never lowers it. */
	again = env ? fx_jvmattach_scan_environ(s, len, &v) : fx_jvmattach_scan_cmdline(s, len, &v);
	FUZZ_CHECK(again == b, "scan: %d, then %d", b, again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data + 1;
	size_t len = size ? size - 1 : 0;

	if (!size)
		return 0;
	switch (data[0] & 3) {
	case 0:
		check_reply(s, len);
		break;
	case 1:
		check_scan(s, len, false);
		break;
	case 2:
		check_scan(s, len, true);
		break;
	default:
		check_scan(s, len, false);
		check_scan(s, len, true);
		break;
	}
	return 0;
}
