/* SPDX-License-Identifier: MIT */
#include "fxagent/service.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "fxagent/log.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_CHECKPOINT_RESTORE
#define CAP_CHECKPOINT_RESTORE 40
#endif

void fx_service_notify(const char *state)
{
	sd_notify(0, state);
}

void fx_service_notifyf(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	sd_notify(0, buf);
}

void fx_service_watchdog_init(struct fx_service_watchdog *w)
{
	uint64_t usec = 0;

	memset(w, 0, sizeof(*w));
	if (sd_watchdog_enabled(0, &usec) > 0 && usec)
		w->interval_ns = usec * 1000 / 2;
}

void fx_service_watchdog_tick(struct fx_service_watchdog *w, uint64_t now_ns)
{
	if (!w->interval_ns || now_ns - w->last_ns < w->interval_ns)
		return;
	sd_notify(0, "WATCHDOG=1");
	w->last_ns = now_ns;
}

/* What each capability buys; an agent without one still runs. CAP_SYS_ADMIN
 * stands in for CAP_PERFMON and CAP_CHECKPOINT_RESTORE, as in the kernel. */
static const struct {
	int cap;
	const char *name;
	const char *cost;
} caps[] = {
	{ CAP_PERFMON, "CAP_PERFMON",
	  "perf_event_open of every CPU may be refused (kernel.perf_event_paranoid)" },
	{ CAP_SYSLOG, "CAP_SYSLOG", "kernel frames are not named: /proc/kallsyms shows zeros" },
	{ CAP_SYS_PTRACE, "CAP_SYS_PTRACE",
	  "other users' processes: their mappings and binaries cannot be read" },
	{ CAP_CHECKPOINT_RESTORE, "CAP_CHECKPOINT_RESTORE",
	  "deleted binaries and those of containers are read by path only, if at all "
	  "(/proc/PID/map_files)" },
	{ CAP_DAC_READ_SEARCH, "CAP_DAC_READ_SEARCH",
	  "binaries and debug files this user cannot read are not symbolized" },
};

uint64_t fx_service_caps_wanted(void)
{
	uint64_t m = 0;

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		m |= 1ull << caps[i].cap;
	return m;
}

size_t fx_service_caps_explain(uint64_t effective, char *buf, size_t len)
{
	bool admin = effective & (1ull << CAP_SYS_ADMIN);
	size_t missing = 0, off = 0;

	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		int c = caps[i].cap;
		int n;

		if (effective & (1ull << c))
			continue;
		if (admin && (c == CAP_PERFMON || c == CAP_CHECKPOINT_RESTORE))
			continue;
		n = snprintf(buf + off, off < len ? len - off : 0, "%s%s (%s)", missing ? "; " : "",
			     caps[i].name, caps[i].cost);
		if (n > 0)
			off += (size_t)n;
		missing++;
	}
	return missing;
}

int fx_service_check_caps(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { { 0 } };
	char buf[1024];
	uint64_t eff;
	size_t missing;

	if (syscall(SYS_capget, &hdr, data) < 0)
		return fx_log_errno(FX_LOG_WARN, errno, "cannot read this process' capabilities");
	eff = (uint64_t)data[0].effective | (uint64_t)data[1].effective << 32;
	missing = fx_service_caps_explain(eff, buf, sizeof(buf));
	if (missing)
		fx_log(FX_LOG_WARN, "running without %zu capabilit%s: %s", missing,
		       missing == 1 ? "y" : "ies", buf);
	return (int)missing;
}
