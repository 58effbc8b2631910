/* SPDX-License-Identifier: MIT */
/* Fuzz target: the perf map reader (include/fxagent/perfmap.h).
 *
 * The input: byte 0 says how many addresses (low 4 bits, 0 to 15) follow as
 * 8-byte little-endian numbers (sorted here); the rest is the map's text.
 * Checks: the text parsed in memory and read from a file (memfd, in 64 KiB
 * blocks, lines carried across them) give the same hits and counts; each
 * hit covers its address; its name is a non-empty part of the text without
 * a newline or NUL; no line is longer than the bound; every line is read or
 * skipped, and a last line without a newline is counted as partial.
 */
#include "fuzz.h"

#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fxagent/perfmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fx_perfmap_hit a[15], b[15];
	struct fx_perfmap_stats sa = { 0 }, sb = { 0 };
	uint64_t addrs[15];
	size_t n, off = fuzz_addrs(data, size, addrs, &n), newlines = 0;
	const char *text;
	size_t len;
	int fd;

	if (!off)
		return 0;
	text = (const char *)data + off;
	len = size - off;
	for (size_t i = 0; i < len; i++)
		newlines += text[i] == '\n';
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	FUZZ_CHECK(fx_perfmap_parse(text, len, addrs, n, a, &sa) == 0, "parse failed");
	fd = memfd_create("fuzz-perfmap", MFD_CLOEXEC);
	FUZZ_CHECK(fd >= 0, "memfd_create");
	FUZZ_CHECK(write(fd, text, len) == (ssize_t)len, "write");
	FUZZ_CHECK(fx_perfmap_read(fd, addrs, n, b, &sb) == 0, "read failed");
	close(fd);

	FUZZ_CHECK(sa.lines == newlines, "%llu lines read of %zu", (unsigned long long)sa.lines,
		   newlines);
	FUZZ_CHECK(sa.partial == (len && text[len - 1] != '\n'), "partial %llu",
		   (unsigned long long)sa.partial);
	FUZZ_CHECK(sa.lines == sb.lines && sa.skipped == sb.skipped && sa.partial == sb.partial,
		   "memory %llu/%llu/%llu, file %llu/%llu/%llu", (unsigned long long)sa.lines,
		   (unsigned long long)sa.skipped, (unsigned long long)sa.partial,
		   (unsigned long long)sb.lines, (unsigned long long)sb.skipped,
		   (unsigned long long)sb.partial);
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(!a[i].name == !b[i].name, "address %zu named in one reading only", i);
		if (!a[i].name)
			continue;
		FUZZ_CHECK(!strcmp(a[i].name, b[i].name) && a[i].start == b[i].start &&
				   a[i].size == b[i].size,
			   "address %zu: '%s' against '%s'", i, a[i].name, b[i].name);
		FUZZ_CHECK(a[i].size && addrs[i] >= a[i].start && addrs[i] - a[i].start < a[i].size,
			   "address %zu outside its line's range", i);
		FUZZ_CHECK(a[i].name[0] && strlen(a[i].name) <= FX_PERFMAP_MAX_LINE &&
				   !strchr(a[i].name, '\n'),
			   "address %zu: a name that is not a line's rest", i);
		FUZZ_CHECK(memmem(text, len, a[i].name, strlen(a[i].name)) != NULL,
			   "address %zu: a name not in the text", i);
	}
	fx_perfmap_hits_free(a, n);
	fx_perfmap_hits_free(b, n);
	return 0;
}
