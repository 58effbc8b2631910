/* SPDX-License-Identifier: MIT */
/*
 * Batch symbolization. Per object: a sorted function table (binary search),
 * the DWARF of the object or of its debug file (inline chains and lines, walked
 * from a per-CU sorted table of subprograms), and an (offset -> result) cache.
 * Objects are kept in a bounded LRU set. Not thread-safe: one publisher thread
 * owns a symbolizer.
 *
 * The files of agent/symbols/ and what they share, which is no part of the
 * contract (fxagent/symbolize.h is):
 *   elf_files.c  ELF files, their sections, finding an object's debug file
 *   functab.c    the function table from the ELF symbols; interned strings
 *   load.c       loading an object and its DWARF, within the memory budget
 *   dwarf.c      DWARF look-ups: CU, subprogram, inline chain, file:line
 *   cache.c      the objects kept, their result caches, eviction
 *   resolve.c    the batch resolver and the public functions
 * A function one of them lends the others is sym_<verb>.
 */
#ifndef FXAGENT_SYMBOLS_INT_H
#define FXAGENT_SYMBOLS_INT_H

#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "fxagent/arena.h"
#include "fxagent/elf.h"
#include "fxagent/hashtab.h"
#include "fxagent/symbolize.h"

#define MAX_OBJECTS 512
/* Distinct offsets cached per object before its cache is reset. */
#define MAX_RESULTS	 (1u << 18)
#define MAX_FUNCS	 (1u << 24)
#define MAX_INLINE_DEPTH 64
#define MAX_DIE_DEPTH	 32
#define PLT_ENTRY	 16 /* bytes of an x86-64 PLT stub */
/* DIEs visited per CU table and per lookup: corrupt sibling links must not
 * loop forever. */
#define MAX_DIE_STEPS	 (1u << 22)
#define MAX_LOOKUP_STEPS (1u << 16)
#define PAGE_SIZE_MIN	 4096
/* What the symbolizer holds between batches (fx_symbolizer_opts.max_bytes):
 * tables, cached results, and DWARF: the debug sections, which libdw reads
 * whole, and libdw's tables. Over it, the least recently used objects release
 * their DWARF (read again if needed), then go entirely. libc's DWARF with
 * most of its CUs touched is about 28 MiB: the default keeps it. */
#define DEFAULT_MAX_BYTES ((uint64_t)32 << 20)
/* libdw's tables (line tables, CUs, abbreviations) one object's look-ups
 * may build within a batch, as a share of max_bytes, before they are freed
 * and built anew for the addresses left: what symbolizing adds to the
 * agent's peak (6.4 MiB at the default). */
#define DWARF_TABLES_SHARE 5
/* Debug sections smaller than this are read into the heap: a copy on disk
 * is worth it for libc's 10 MB, not for a small program's few KiB. */
#define DEFAULT_INFLATE_MIN ((uint64_t)512 << 10)

/* Interned strings of one object. */
struct strpool {
	struct fx_arena mem;
	const char **v;
	size_t n, cap;
	struct fx_hashtab index;
};

/* A function of the table: 12 bytes. Its name stays in the file's string
 * table (@o->tabs[FUNC_TAB(f)]) and is read from there on first use
 * (sym_func_name): a big binary's table of names (node's is 7-12 MB) is
 * never copied to the heap. */
struct func {
	uint32_t start; /* SVMA - the object's base */
	uint32_t size;	/* FUNC_SIZE_MASK: bytes (0: unknown); above: the table */
	uint32_t name;	/* offset in the string table */
};
#define FUNC_TAB_SHIFT 30
#define FUNC_SIZE_MASK ((1u << FUNC_TAB_SHIFT) - 1)
#define FUNC_SIZE(f)   ((f)->size & FUNC_SIZE_MASK)
#define FUNC_TAB(f)    ((f)->size >> FUNC_TAB_SHIFT)
/* String tables a function table names from: the debug file's .strtab, the
 * object's .strtab and .dynstr. */
#define MAX_NAME_TABS 3
/* The biggest compressed string table copied (uncompressed): no linker
 * compresses one, a hostile file may claim any size. */
#define MAX_COPIED_TAB ((uint64_t)64 << 20)
/* The longest name read (C++ names of thousands of bytes exist). */
#define MAX_NAME_LEN (64u << 10)

/* Which file a string table is in. */
enum { NAMES_OBJECT, NAMES_DEBUG, NAMES_FILES };

/* A string table in a file, read where a name is needed. */
struct name_tab {
	uint64_t off, size; /* the section's bytes in the file */
	char *copy;	    /* the table itself, when the file's is compressed */
	uint8_t file;	    /* NAMES_OBJECT or NAMES_DEBUG */
};

/* What a file was when its tables were read: a name is read again only
 * from the same file. */
struct file_id {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	bool set;
};

/* The shown name of function @func, once read (struct object's names). */
struct func_name {
	uint32_t func;
	const char *shown;
};

/* A function's range from .eh_frame_hdr, for objects without symbols (fde.c). */
struct fde_range {
	uint64_t start, end; /* SVMA */
};

struct dfunc {
	uint64_t lo, hi;
	Dwarf_Off off;
};

/* By offsets, not DIEs: the table outlives the Dwarf that parking ends. */
struct cu {
	Dwarf_Off off;	     /* of the CU's DIE */
	struct dfunc *funcs; /* built on first use */
	size_t n_funcs;
	bool loaded;
};

struct cu_range {
	uint64_t lo, hi;
	size_t cu;
};

struct load {
	uint64_t offset, vaddr, filesz;
	bool exec;
};

struct cached {
	uint64_t offset;
	struct fx_sym_result res;
};

struct object {
	char *key;
	char *base_name;
	char *src_path; /* as first asked for */
	bool from_fd;
	int err; /* != 0: the object could not be read; every result is a fallback */
	uint64_t last_use;
	uint64_t batch; /* the batch that used it last */
	enum fx_sym_origin origin;
	/* debuginfod did not answer (a miss, an error, the budget): read the
	 * object again, asking again, from this CLOCK_MONOTONIC time (ns). */
	bool dbgd_again;
	uint64_t dbgd_again_ns;

	uint64_t base;
	struct load *loads;
	size_t n_loads;

	struct func *funcs;
	size_t n_funcs;
	struct name_tab tabs[MAX_NAME_TABS];
	size_t n_tabs;
	struct file_id ids[NAMES_FILES];
	/* Open while one resolve call reads names (-1: not open). */
	int name_fds[NAMES_FILES];
	/* A name could not be read again (the file changed or went): the
	 * object is read anew by the next batch. */
	bool names_lost;
	/* Functions named so far: their shown names, in strs. */
	struct func_name *named;
	size_t n_named, cap_named;
	struct fx_hashtab named_index;
	struct strpool strs;
	/* With no symbol table at all: the functions' ranges from .eh_frame. */
	uint32_t *fde_starts; /* SVMA - base, sorted */
	size_t n_fdes;
	uint64_t fde_last_end; /* SVMA */
	/* The frame last made for a function of the table (in res_mem): the
	 * addresses of a batch come sorted, so the next is often in it too. */
	/* the last FDE name made, keyed by the function's file offset: two
	 * segments may map different offsets to the same address */
	uint64_t fde_frame_off;
	const struct fx_sym_frame *fde_frame;
	/* PLT stubs: slot i at plt_start + 16 i, named plt_names[i] (NULL:
	 * not a JUMP_SLOT), in the string arena. */
	uint64_t plt_start;
	size_t plt_slots;
	const char **plt_names;

	/* DWARF, from the debug file or from the object itself. */
	int dw_fd;
	Elf *dw_elf;
	Dwarf *dw;
	uint64_t dw_bytes;	    /* sections, and libdw's tables as they grew */
	uint64_t dw_sections_bytes; /* of dw_bytes: what the sections took */
	/* Parked at a window's end (sym_park_dwarf): the Dwarf and its tables
	 * freed, dw_elf kept with its sections read (and inflated), and our
	 * CU tables (cus, cu_ranges) kept. */
	bool dw_parked;
	/* dw_elf is over an inflated copy mapped here (inflated.c), or NULL */
	void *dw_map;
	size_t dw_map_len;
	char *dw_path;	  /* to read it again after a release; NULL if not possible */
	char *debug_path; /* the debug file whose names are used, or NULL */
	uint8_t dw_id[FX_BUILD_ID_MAX];
	size_t dw_id_len;
	bool dw_released;
	Elf *alt_elf; /* dwz common file, when found under our debug dirs */
	Dwarf *alt_dw;
	bool cus_loaded;
	struct cu *cus;
	size_t n_cus;
	struct cu_range *cu_ranges;
	size_t n_cu_ranges;

	/* Results, reset together when the cache is full. */
	struct fx_arena res_mem;
	struct cached *cache;
	size_t n_cache, cap_cache;
	struct fx_hashtab cache_index;
};

struct fx_symbolizer {
	char **debug_dirs;
	bool no_demangle, no_inline;
	bool rel_addrs; /* "offsets" are addresses relative to the image base */
	/* MAX_OBJECTS, unless one batch uses more: its results must stay valid. */
	struct object **objects;
	size_t n_objects, cap_objects;
	uint64_t tick;
	uint64_t batch;
	uint64_t dw_bytes;
	uint64_t max_bytes;
	struct fx_debuginfod *dbgd;
	/* Inflated copies of debug files (inflated.c): the directory's fd, or
	 * -1 when there is none; the cache it is in and its bound. */
	int inflated_fd;
	char *cache_dir;
	uint64_t inflated_max_bytes;
	uint64_t inflated_min_bytes;
	struct fx_symbolizer_stats stats;
	/* The name being read (sym_func_name), MAX_NAME_LEN bytes at most. */
	char *name_buf;
	size_t name_cap;
};

struct debug_want {
	const uint8_t *id; /* build-id the debug file must have, or NULL */
	size_t id_len;
	bool check_crc;
	uint32_t crc;
	dev_t dev; /* the object itself, never its own debug file */
	ino_t ino;
	char *found; /* PATH_MAX bytes for the path found, or NULL */
};

/* A function as the load reads it, before the table is made compact. */
struct func_load {
	uint64_t start, size; /* SVMA, bytes */
	uint32_t name;	      /* offset in tabs[tab] */
	uint8_t tab;
	uint8_t local;
	uint8_t label; /* an STT_NOTYPE code label (asm entry points like _start) */
};

struct func_vec {
	struct func_load *v;
	size_t n, cap;
};

struct dw_level {
	Dwarf_Die die;
	const char *name;
	const char *file;
	uint32_t line;
};

/* ---- inflated.c ---- */

/* Opens the inflated copy of the debug file @src (@src_fd, build-id @id),
 * writing it first if there is none and the file is worth one (64-bit,
 * not relocatable, debug sections of inflated_min_bytes or more, zlib or
 * not compressed). Returns 0 with the copy's fd, mapping and Elf over it
 * in @out, or -errno: then @src is read as it is. */
struct sym_mapped {
	int fd;
	Elf *elf; /* over map (elf_memory) */
	void *map;
	size_t len;
};
int sym_inflated_open(struct fx_symbolizer *s, Elf *src, int src_fd, const uint8_t *id,
		      size_t id_len, struct sym_mapped *out);
/* Lets the pages of a mapped copy go from the agent's memory (they stay in
 * the page cache, and come back on the next touch). */
void sym_inflated_release_pages(void *map, size_t len);
/* Makes <@cache_dir>/inflated (0700) for the copies, bounded with the
 * cache at @max_bytes. A directory that cannot be the agent's alone means
 * no copies (logged at debug level). Returns 0 or -ENOMEM. */
int sym_inflated_setup(struct fx_symbolizer *s, const char *cache_dir, uint64_t max_bytes);

/* ---- elf_files.c ---- */

/* Opens @path, a regular file only, as ELF (read into memory). Returns 0
 * with *@fd_out and *@elf_out set, or -errno (-ENOEXEC: not ELF). */
int sym_open_elf(const char *path, int *fd_out, Elf **elf_out);
/* Ends *@elf and closes *@fd, either of which may be unset; unsets both. */
void sym_close_elf(int *fd, Elf **elf);
/* Whether @elf holds DWARF (.debug_info or .zdebug_info with contents). */
bool sym_has_dwarf(Elf *elf);
/* Tries the path @fmt formats as the debug file @w describes. Returns 0
 * with the file open in *@fd_out and *@elf_out, or -errno. */
int __attribute__((format(printf, 4, 5)))
sym_try_debug_path(const struct debug_want *w, int *fd_out, Elf **elf_out, const char *fmt, ...);
/* Finds the debug file of the object at @path (@elf, build-id @id of
 * @id_len bytes or NULL, the object's own @st). Returns 0 with it open in
 * *@fd_out and *@elf_out and its path in @found (PATH_MAX bytes), or
 * -ENOENT. */
int sym_find_debug_file(struct fx_symbolizer *s, const char *path, Elf *elf, const uint8_t *id,
			size_t id_len, const struct stat *st, int *fd_out, Elf **elf_out,
			char *found);
/* The debug file of build-id @id from debuginfod, as sym_find_debug_file()
 * (the file must carry the build-id). Returns 0, or -errno: -EAGAIN when it
 * was not asked for (the batch's budget is spent). */
int sym_fetch_debug_file(struct fx_symbolizer *s, const uint8_t *id, size_t id_len,
			 const struct stat *st, int *fd_out, Elf **elf_out, char *found);

/* ---- functab.c ---- */

/* The copy of @s in @p, added if new; NULL when memory ran out. */
const char *sym_pool_intern(struct strpool *p, const char *s);
void sym_pool_free(struct strpool *p);
/* Adds the function symbols of @elf's sections of @type (SHT_SYMTAB or
 * SHT_DYNSYM) to @fv, their names left in the file (@file: NAMES_OBJECT or
 * NAMES_DEBUG, open as @fd, whose identity @o keeps). Returns 0 or -ENOMEM. */
int sym_add_symbols(struct object *o, struct func_vec *fv, Elf *elf, int fd, int file,
		    Elf64_Word type);
/* Reads the PLT stubs of @elf (open as @fd) into @o, named "<symbol>@plt"
 * as perf names them (x86-64: .plt.sec's entries, or .plt's after the
 * first, 16 bytes each, in .rela.plt's order). Returns 0 or -ENOMEM. */
int sym_add_plt(struct object *o, Elf *elf, int fd);
/* The name of the PLT stub of @o holding the SVMA @addr, its start and size
 * in *@start and *@size; NULL when no stub holds it. */
const char *sym_lookup_plt(const struct object *o, uint64_t addr, uint64_t *start, uint64_t *size);
/* Sorts @fv, keeps one name per address (aliases told apart by names read
 * through @fds, the files' fds by NAMES_*), and makes it @o's compact table.
 * Returns 0 or -ENOMEM. */
int sym_finish_funcs(struct object *o, struct func_vec *fv, const int *fds);
/* The function of @o holding the SVMA @addr, or NULL. */
const struct func *sym_lookup_func(const struct object *o, uint64_t addr);
/* @f's name as shown, demangled unless the symbolizer says not to; read
 * from its file (through @src, the source asked for now, when it is the
 * same file) the first time. NULL when it cannot be read. */
const char *sym_func_name(struct fx_symbolizer *s, struct object *o,
			  const struct fx_elf_source *src, const struct func *f);
/* Closes the fds names were read through. */
void sym_close_names(struct object *o);
/* Records what the file open as @fd is, as @o's @file. */
void sym_note_file(struct object *o, int file, int fd);

/* ---- fde.c ---- */

/* Reads the functions' starts of @elf's .eh_frame_hdr (from @fd, @elf's
 * file) into @o (nothing when it is absent or of a form not read). Returns 0
 * or -ENOMEM. */
int sym_load_fdes(struct object *o, Elf *elf, int fd);
/* Whether a function of @o's .eh_frame_hdr holds the SVMA @addr: its range
 * in *@out. */
bool sym_lookup_fde(const struct object *o, uint64_t addr, struct fde_range *out);

/* ---- load.c ---- */

/* Reads the object @src into @o: segments, function table, DWARF. Returns 0
 * or -errno (-ESTALE: the file is not the one mapped). */
int sym_load_object(struct fx_symbolizer *s, struct object *o, const struct fx_elf_source *src);
/* File offset -> SVMA in @o. */
uint64_t sym_offset_to_svma(const struct object *o, uint64_t off);
/* Frees @o's DWARF and the tables that point into it. */
void sym_release_dwarf(struct fx_symbolizer *s, struct object *o);
/* sym_release_dwarf() for the budget: read again on next use. */
void sym_shed_dwarf(struct fx_symbolizer *s, struct object *o);
/* Frees @o's Dwarf and the tables its look-ups built (CUs, line tables,
 * abbreviations: they grow to several times the sections as a window's
 * addresses touch CUs), keeping the sections: sym_unpark_dwarf() begins a
 * Dwarf on them again, at no cost of reading or inflating. */
void sym_park_dwarf(struct fx_symbolizer *s, struct object *o);
void sym_unpark_dwarf(struct object *o);
/* Whether @o holds debug sections, parked or not. */
static inline bool sym_holds_dwarf(const struct object *o)
{
	return o->dw || o->dw_parked;
}
/* Reads again the DWARF shed for the budget (by its path, or @src's fd);
 * gives up for good on failure. */
void sym_reattach_dwarf(struct fx_symbolizer *s, struct object *o, const struct fx_elf_source *src);
/* Bytes malloc has handed out, all threads. */
uint64_t sym_heap_bytes(void);

/* ---- dwarf.c ---- */

/* The inline chain of @o at the SVMA @addr in @lv (MAX_INLINE_DEPTH
 * levels): the number of levels, 0 when no subprogram holds @addr. */
size_t sym_dwarf_levels(struct fx_symbolizer *s, struct object *o, uint64_t addr,
			struct dw_level *lv, const struct dfunc **df_out, const char **file_out,
			uint32_t *line_out);

/* ---- cache.c ---- */

/* The cached result of @offset in @o, or NULL; *@pos gets the slot for
 * sym_cache_add(), or SIZE_MAX when it cannot be cached. */
const struct cached *sym_cache_find(struct object *o, uint64_t offset, size_t *pos);
void sym_cache_add(struct object *o, size_t pos, uint64_t offset, const struct fx_sym_result *r);
/* The index of the least recently used object (see cache.c), or SIZE_MAX. */
size_t sym_lru_object(const struct fx_symbolizer *s, bool dwarf, bool old,
		      const struct object *skip);
void sym_object_free(struct fx_symbolizer *s, struct object *o);
/* Frees object @i; the last one takes its place. */
void sym_drop_object(struct fx_symbolizer *s, size_t i);
/* The base name of @path, as fallback frames show it. */
const char *sym_base_name_of(const char *path);
/* The object of @src, loaded if new (a failure to read it is kept as
 * o->err); NULL when memory ran out. */
struct object *sym_get_object(struct fx_symbolizer *s, const struct fx_elf_source *src);
/* Heap bytes @o holds. */
uint64_t sym_object_bytes(const struct object *o);
/* Back under max_bytes, least recently used first. */
void sym_trim(struct fx_symbolizer *s);

#endif
