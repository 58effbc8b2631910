/* SPDX-License-Identifier: MIT */
/* Fuzz target: the symbolizer (symbolize.h) and the build-id reader (elf.h)
 * over an untrusted ELF file, the input itself: a binary from a container is
 * data a privileged agent reads.
 *
 * The input is written to a memfd and handed over as the mapped object's fd
 * (or, for some inputs, to a file in a private directory under the working
 * directory, opened by path).
 * Offsets asked for: the edges of the offset space, offsets spread over the
 * file's executable sections (as libelf reads them) and over the whole file.
 * A FIFO lies next to the file and at /tmp/fxfuzz.fifo: a path the binary
 * names must never be opened without checking what it is.
 * Checks: the build-id is a length within the buffer or -ENOENT/-ENOEXEC;
 * every result has frames with non-empty NUL-terminated names; an address
 * without a symbol gets exactly the "<base name>+0x<offset>" frame, or, where
 * an FDE covers it, "<base name>+0x<function start>" as its symbol and only
 * frame, the start at or before the address and within its range; asking
 * again in the same batch gives the very same results (the cache), and in
 * the next batch equal ones.
 */
#include "fuzz.h"

#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fxagent/elf.h"
#include "fxagent/log.h"
#include "fxagent/symbolize.h"

#define MAX_OFFSETS 40
#define BASE_NAME   "libfuzz.so"

struct copy {
	char *sym_name;
	uint64_t rel_addr, sym_addr, sym_size;
	uint32_t n_frames;
	char **names, **files;
	uint32_t *lines;
};

/* FIFOs that regression inputs name (tests/fuzz/seeds/make-fifo-regressions.sh):
 * opening one blocks, so a symbolizer that opens a path a binary names
 * without checking it hangs, and libFuzzer reports a timeout. */
#define GLOBAL_FIFO "/tmp/fxfuzz.fifo"

static int memfd = -1;
static char dir_path[PATH_MAX], file_path[PATH_MAX + 16], fifo_path[PATH_MAX + 16];

static void remove_files(void)
{
	unlink(file_path);
	unlink(fifo_path);
	rmdir(dir_path);
}

static size_t add_offset(uint64_t *offs, size_t n, uint64_t off)
{
	if (n < MAX_OFFSETS)
		offs[n++] = off;
	return n;
}

/* Offsets inside the sections that hold code, as far as libelf can tell. */
static size_t code_offsets(const uint8_t *data, size_t size, uint64_t *offs, size_t n)
{
	char *copy = malloc(size ? size : 1);
	Elf_Scn *scn = NULL;
	Elf *elf;

	FUZZ_CHECK(copy, "out of memory");
	memcpy(copy, data, size);
	elf = elf_memory(copy, size);
	while (elf && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		uint64_t k;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR) ||
		    sh.sh_type != SHT_PROGBITS)
			continue;
		for (k = 0; k < 6; k++)
			n = add_offset(offs, n, sh.sh_offset + sh.sh_size * k / 6);
	}
	elf_end(elf);
	free(copy);
	return n;
}

static bool same_str(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

static void check_result(const struct fx_sym_result *r, uint64_t offset, int ret)
{
	char fallback[64];
	uint32_t i;

	FUZZ_CHECK(r->n_frames >= 1 && r->n_frames <= 64 && r->frames, "%u frames", r->n_frames);
	for (i = 0; i < r->n_frames; i++) {
		const struct fx_sym_frame *f = &r->frames[i];

		/* strlen() runs to the NUL: ASan reports a name without one. */
		FUZZ_CHECK(f->name && strlen(f->name) > 0, "frame %u has no name", i);
		FUZZ_CHECK(!f->file || strlen(f->file) < 65536, "frame %u file", i);
	}
	FUZZ_CHECK(!r->sym_name || strlen(r->sym_name) > 0, "empty symbol name");
	if (r->no_symbol) {
		uint64_t start = r->rel_addr - r->sym_addr;

		FUZZ_CHECK(r->sym_addr <= r->rel_addr && start < r->sym_size && start <= offset,
			   "FDE name: address %#" PRIx64 " outside [%#" PRIx64 ", +%#" PRIx64 ")",
			   r->rel_addr, r->sym_addr, r->sym_size);
		snprintf(fallback, sizeof(fallback), BASE_NAME "+0x%" PRIx64, offset - start);
		FUZZ_CHECK(r->n_frames == 1 && !strcmp(r->frames[0].name, fallback) &&
				   !strcmp(r->sym_name, fallback),
			   "FDE name '%s', frame '%s', want '%s'", r->sym_name, r->frames[0].name,
			   fallback);
		return;
	}
	if (r->sym_name && ret == 0)
		return;
	snprintf(fallback, sizeof(fallback), BASE_NAME "+0x%" PRIx64, offset);
	/* "[unknown]" is the frame when even the fallback could not be allocated. */
	FUZZ_CHECK(!r->sym_name && r->n_frames == 1 &&
			   (!strcmp(r->frames[0].name, fallback) ||
			    !strcmp(r->frames[0].name, "[unknown]")),
		   "no symbol (resolve %d) but frame '%s'", ret, r->frames[0].name);
}

static void save(struct copy *c, const struct fx_sym_result *r)
{
	uint32_t i;

	c->sym_name = r->sym_name ? strdup(r->sym_name) : NULL;
	c->rel_addr = r->rel_addr;
	c->sym_addr = r->sym_addr;
	c->sym_size = r->sym_size;
	c->n_frames = r->n_frames;
	c->names = calloc(r->n_frames, sizeof(char *));
	c->files = calloc(r->n_frames, sizeof(char *));
	c->lines = calloc(r->n_frames, sizeof(uint32_t));
	FUZZ_CHECK(c->names && c->files && c->lines, "out of memory");
	for (i = 0; i < r->n_frames; i++) {
		c->names[i] = strdup(r->frames[i].name);
		c->files[i] = r->frames[i].file ? strdup(r->frames[i].file) : NULL;
		c->lines[i] = r->frames[i].line;
	}
}

static void same_as_saved(const struct copy *c, const struct fx_sym_result *r, size_t k)
{
	uint32_t i;

	FUZZ_CHECK(same_str(c->sym_name, r->sym_name) && c->rel_addr == r->rel_addr &&
			   c->sym_addr == r->sym_addr && c->sym_size == r->sym_size &&
			   c->n_frames == r->n_frames,
		   "offset #%zu resolved differently in the next batch", k);
	for (i = 0; i < r->n_frames; i++)
		FUZZ_CHECK(same_str(c->names[i], r->frames[i].name) &&
				   same_str(c->files[i], r->frames[i].file) &&
				   c->lines[i] == r->frames[i].line,
			   "offset #%zu frame %u differs in the next batch", k, i);
}

static void free_copy(struct copy *c)
{
	uint32_t i;

	for (i = 0; i < c->n_frames; i++) {
		free(c->names[i]);
		free(c->files[i]);
	}
	free(c->names);
	free(c->files);
	free(c->lines);
	free(c->sym_name);
}

static void check_build_id(int fd)
{
	uint8_t id[FX_BUILD_ID_MAX], small[4];
	int r, r2;

	r = fx_elf_build_id_fd(fd, id, sizeof(id));
	FUZZ_CHECK(r == -ENOENT || r == -ENOEXEC || (r > 0 && r <= (int)sizeof(id)), "build-id: %d",
		   r);
	r2 = fx_elf_build_id_fd(fd, small, sizeof(small));
	FUZZ_CHECK(r2 == (r > 4 ? 4 : r), "build-id into 4 bytes: %d, into 64: %d", r2, r);
	if (r2 > 0)
		FUZZ_CHECK(!memcmp(id, small, (size_t)r2), "build-id bytes differ");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const dirs[] = { "/nonexistent/fxagent-fuzz-debug", NULL };
	struct fx_sym_result *res, *again;
	struct copy saved[MAX_OFFSETS];
	uint64_t offs[MAX_OFFSETS], h = 1469598103934665603ull;
	struct fx_symbolizer_opts opts = { .debug_dirs = dirs };
	struct fx_elf_source src = { 0 };
	struct fx_symbolizer *s;
	size_t n = 0, i;
	int ret, ret2;

	fx_log_set_level(FX_LOG_ERR);
	elf_version(EV_CURRENT);
	if (memfd < 0) {
		char cwd[PATH_MAX - 32];

		memfd = memfd_create("fuzz-elf", MFD_CLOEXEC);
		/* In the working directory (scripts/fuzz.sh's run directory, the
		 * build tree for ctest): a crash leaves it there, not in /tmp. */
		FUZZ_CHECK(getcwd(cwd, sizeof(cwd)), "no working directory");
		snprintf(dir_path, sizeof(dir_path), "%s/fxagent-fuzz-XXXXXX", cwd);
		FUZZ_CHECK(memfd >= 0 && mkdtemp(dir_path), "cannot make a memfd or a directory");
		snprintf(file_path, sizeof(file_path), "%s/" BASE_NAME, dir_path);
		snprintf(fifo_path, sizeof(fifo_path), "%s/fifo", dir_path);
		FUZZ_CHECK(!mkfifo(fifo_path, 0600) &&
				   (!mkfifo(GLOBAL_FIFO, 0600) || errno == EEXIST),
			   "cannot make the FIFOs");
		atexit(remove_files);
	}
	FUZZ_CHECK(ftruncate(memfd, 0) == 0, "ftruncate failed");
	FUZZ_CHECK(pwrite(memfd, data, size, 0) == (ssize_t)size, "pwrite failed");
	for (i = 0; i < size; i++)
		h = (h ^ data[i]) * 1099511628211ull;
	opts.no_demangle = h & 1;
	/* The object as a mapped fd (another mount namespace, a deleted file)
	 * or, for one input in four, by path (opened again for its DWARF). */
	src.path = file_path;
	src.fd = memfd;
	if ((h & 6) == 0) {
		FILE *f = fopen(file_path, "wb");

		FUZZ_CHECK(f && fwrite(data, 1, size, f) == size && !fclose(f), "cannot write %s",
			   file_path);
		src.fd = -1;
	}

	check_build_id(memfd);

	n = add_offset(offs, n, 0);
	n = add_offset(offs, n, UINT64_MAX);
	n = add_offset(offs, n, (uint64_t)1 << 63);
	n = code_offsets(data, size, offs, n);
	for (i = 0; i < 8; i++)
		n = add_offset(offs, n, (uint64_t)size * i / 8 + (h >> (8 * i) & 0xff));

	s = fx_symbolizer_new(&opts);
	FUZZ_CHECK(s, "out of memory");
	res = calloc(n, sizeof(*res));
	again = calloc(n, sizeof(*again));
	FUZZ_CHECK(res && again, "out of memory");

	fx_symbolizer_begin_batch(s);
	ret = fx_symbolizer_resolve(s, &src, offs, n, res);
	FUZZ_CHECK(ret <= 0 && ret > -4096, "resolve: %d", ret);
	for (i = 0; i < n; i++)
		check_result(&res[i], offs[i], ret);

	/* The same batch: answered from the cache, the same pointers. */
	ret2 = fx_symbolizer_resolve(s, &src, offs, n, again);
	FUZZ_CHECK(ret2 == ret, "resolve gave %d, then %d", ret, ret2);
	for (i = 0; i < n; i++)
		FUZZ_CHECK(res[i].rel_addr == again[i].rel_addr &&
				   res[i].sym_name == again[i].sym_name &&
				   res[i].sym_addr == again[i].sym_addr &&
				   res[i].sym_size == again[i].sym_size &&
				   res[i].n_frames == again[i].n_frames &&
				   res[i].frames == again[i].frames,
			   "offset #%zu resolved differently in the same batch", i);

	/* The next batch: the same answers. */
	for (i = 0; i < n; i++)
		save(&saved[i], &res[i]);
	fx_symbolizer_begin_batch(s);
	ret2 = fx_symbolizer_resolve(s, &src, offs, n, again);
	FUZZ_CHECK(ret2 == ret, "resolve gave %d, then %d", ret, ret2);
	for (i = 0; i < n; i++) {
		check_result(&again[i], offs[i], ret2);
		same_as_saved(&saved[i], &again[i], i);
		free_copy(&saved[i]);
	}

	free(res);
	free(again);
	fx_symbolizer_free(s);
	return 0;
}
