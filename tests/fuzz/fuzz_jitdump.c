/* SPDX-License-Identifier: MIT */
/* Fuzz target: the jitdump reader (include/fxagent/jitdump.h) and the
 * compiler of the .eh_frame a runtime writes into it (cfitab.h).
 *
 * The input: byte 0 says how many addresses (low 4 bits, 0 to 15) follow as
 * 8-byte little-endian numbers (sorted here); the rest is the dump. Checks:
 * the dump named in memory and read from a file (memfd, through the
 * cursor's blocks) give the same hits and counts; each hit covers its
 * address and its name is non-empty, at most FX_JITDUMP_MAX_NAME bytes and
 * part of the dump; the records handed out lie inside the dump; each
 * unwinding info, compiled for the code of the load after it (its size cut
 * to 4 KiB), gives -EINVAL or rows that start at 0, ascend, and lie within
 * the code.
 */
#include "fuzz.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fxagent/cfitab.h"
#include "fxagent/jitdump.h"

static bool inside(const uint8_t *p, size_t n, const uint8_t *buf, size_t len)
{
	return p >= buf && n <= len && (size_t)(p - buf) <= len - n;
}

/* Every record from memory: inside the dump; unwinding infos compiled. */
static void walk(const uint8_t *dump, size_t len)
{
	struct fx_jitdump_stats st = { 0 };
	struct fx_jitdump_cursor c;
	struct fx_jitdump_record r;
	struct fx_cfi_row rows[64];
	const uint8_t *eh = NULL, *hdr = NULL;
	size_t eh_len = 0, hdr_len = 0;
	uint32_t pid;
	int ret;

	if (fx_jitdump_begin(&c, -1, dump, len, &pid) != 0)
		return;
	while ((ret = fx_jitdump_next(&c, &r, &st)) == 1) {
		if (r.id == FX_JITDUMP_CODE_LOAD) {
			FUZZ_CHECK(inside((const uint8_t *)r.name, r.name_len, dump, len) &&
					   r.name_len <= FX_JITDUMP_MAX_NAME,
				   "a name outside the dump");
			if (eh) {
				uint64_t size = r.size > 4096 ? 4096 : r.size;
				int n = fx_cfitab_compile_jit(eh, eh_len, hdr, hdr_len, size, rows,
							      64);

				FUZZ_CHECK(n == -EINVAL || (n >= 0 && n <= 64), "compiled %d", n);
				for (int i = 0; i < n; i++)
					FUZZ_CHECK((i == 0 && rows[i].start == 0) ||
							   (i > 0 &&
							    rows[i].start > rows[i - 1].start &&
							    rows[i].start < size),
						   "row %d starts at %u", i, rows[i].start);
				eh = NULL;
			}
		} else if (r.id == FX_JITDUMP_CODE_UNWINDING_INFO) {
			FUZZ_CHECK(inside(r.eh_frame, r.eh_frame_len + r.eh_frame_hdr_len, dump,
					  len) &&
					   r.eh_frame_hdr == r.eh_frame + r.eh_frame_len,
				   "unwinding info outside the dump");
			eh = r.eh_frame;
			eh_len = r.eh_frame_len;
			hdr = r.eh_frame_hdr;
			hdr_len = r.eh_frame_hdr_len;
		}
	}
	FUZZ_CHECK(ret == 0 || ret == -EBADMSG, "next: %d", ret);
	FUZZ_CHECK(c.off <= len, "the cursor past the end");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fx_perfmap_hit a[15], b[15];
	struct fx_jitdump_stats sa = { 0 }, sb = { 0 };
	uint64_t addrs[15];
	size_t n, off = fuzz_addrs(data, size, addrs, &n);
	const uint8_t *dump;
	size_t len;
	int fd;

	if (!off)
		return 0;
	dump = data + off;
	len = size - off;
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	FUZZ_CHECK(fx_jitdump_names(-1, dump, len, addrs, n, UINT64_MAX, a, &sa) == 0,
		   "names failed");
	fd = memfd_create("fuzz-jitdump", MFD_CLOEXEC);
	FUZZ_CHECK(fd >= 0, "memfd_create");
	FUZZ_CHECK(write(fd, dump, len) == (ssize_t)len, "write");
	FUZZ_CHECK(fx_jitdump_names(fd, NULL, 0, addrs, n, UINT64_MAX, b, &sb) == 0, "read failed");
	close(fd);
	FUZZ_CHECK(!memcmp(&sa, &sb, sizeof(sa)), "memory and file counted differently");
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(!a[i].name == !b[i].name, "address %zu named in one reading only", i);
		if (!a[i].name)
			continue;
		FUZZ_CHECK(!strcmp(a[i].name, b[i].name) && a[i].start == b[i].start &&
				   a[i].size == b[i].size,
			   "address %zu: '%s' against '%s'", i, a[i].name, b[i].name);
		FUZZ_CHECK(a[i].size && addrs[i] >= a[i].start && addrs[i] - a[i].start < a[i].size,
			   "address %zu outside its record's range", i);
		FUZZ_CHECK(a[i].name[0] && strlen(a[i].name) <= FX_JITDUMP_MAX_NAME &&
				   memmem(dump, len, a[i].name, strlen(a[i].name)),
			   "address %zu: a name not in the dump", i);
	}
	fx_perfmap_hits_free(a, n);
	fx_perfmap_hits_free(b, n);
	walk(dump, len);
	return 0;
}
