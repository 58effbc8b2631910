/* SPDX-License-Identifier: MIT */
/* symbolize: batch symbolization of file offsets in ELF objects.
 *
 * Per object (keyed by build-id, else by path) it builds once a sorted function
 * table from .symtab (of the separate debug file when there is one) and
 * .dynsym, and opens DWARF (same file, or the debug file found by build-id under
 * the debug directories, or by .gnu_debuglink) for inline frames and file:line.
 * Results are cached by (object, offset). The network only with a debuginfod
 * client in the options: for objects with no DWARF and no local debug file,
 * within its budget per batch (fxagent/debuginfod.h).
 */
#ifndef FXAGENT_SYMBOLIZE_H
#define FXAGENT_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One function level at an address: the real function or an inlined one. */
struct fx_sym_frame {
	const char *name; /* demangled (if enabled); never NULL or empty */
	const char *file; /* source file of @line, or NULL */
	uint32_t line;	  /* line in @name's body for this level; 0 when unknown */
};

/* What one address is. All pointers are owned by the symbolizer and stay valid
 * until the next fx_symbolizer_begin_batch() or fx_symbolizer_free(). */
struct fx_sym_result {
	uint64_t rel_addr;    /* address relative to the object's image base (the lowest
				 PT_LOAD p_vaddr, page-aligned down): the profile's frame address */
	const char *sym_name; /* native symbol (the real, outer function); NULL if none */
	uint64_t sym_addr;    /* its start, relative to the image base */
	uint64_t sym_size;    /* its size; 0 if unknown */
	uint32_t n_frames;    /* >= 1 */
	/* No symbol: sym_name is made up, "<base name>+0x<file offset of the
	 * function's start>", the function's range taken from .eh_frame_hdr
	 * (so every address of one function shares the name). Beside n_frames,
	 * in its padding: results are cached by the million. */
	bool no_symbol;
	/* [0] is the real function, [1..] the functions inlined into it, the
	 * innermost (where the address really is) last. With no symbol, one frame
	 * named "<base name of the source's path>+0x<file offset>": of the
	 * function's start where an FDE covers the address (no_symbol), else of
	 * the address (sym_name NULL). One build-id may be asked for at several
	 * paths: each gets its own name. */
	const struct fx_sym_frame *frames;
};

/* How to read one object. */
struct fx_elf_source {
	int fd;		  /* readable fd of the ELF file (not consumed), or -1 to open @path */
	const char *path; /* path as the process saw it: names, debug look-ups */
	const uint8_t *build_id; /* may be NULL */
	size_t build_id_len;
};

struct fx_symbolizer_opts {
	/* NULL-terminated list of debug roots; NULL means { "/usr/lib/debug", NULL }. */
	const char *const *debug_dirs;
	bool no_demangle;
	bool no_inline; /* skip DWARF: only the function tables */
	/* The "offsets" given to fx_symbolizer_resolve() are addresses
	 * relative to the image base (a profile's frame addresses, rel_addr),
	 * not file offsets: for a debug file read in place of its binary,
	 * whose segments have no file contents. */
	bool rel_addrs;
	/* Bytes held between batches (tables, results, DWARF as the heap grew
	 * for it); 0 = 32 MiB. A batch may go over it: its results stay valid
	 * to its end, but it releases other objects' DWARF to read new. Within
	 * a batch, libdw's tables for one object's look-ups are freed as they
	 * pass a fifth of it, and built again for the addresses left. */
	uint64_t max_bytes;
	/* Asked for the debug file of an object that has no DWARF and no
	 * debug file on disk; NULL: none. Not owned; must outlive the
	 * symbolizer. A miss or failure is asked again after its retry_s, an
	 * answer deferred for the budget in the next batch. */
	struct fx_debuginfod *debuginfod;
	/* The debuginfod cache directory (made 0700 if missing), where
	 * inflated/ keeps copies of debug files with their sections inflated,
	 * to be mapped instead of read into the heap and given back after each
	 * window (the symbolizer's memory between windows is then its tables
	 * and results); NULL: none, the sections are read into the heap. */
	const char *cache_dir;
	uint64_t cache_max_bytes;   /* the whole cache's bound, 0: none */
	uint64_t inflate_min_bytes; /* debug sections worth a copy; 0: 512 KiB */
};

/* Where an object's names come from, from the best to the least. */
enum fx_sym_origin {
	FX_SYM_UNREADABLE, /* the file could not be read: addresses only */
	FX_SYM_STRIPPED,   /* .dynsym, PLT stubs and .eh_frame's ranges only */
	FX_SYM_SYMTAB,	   /* its own .symtab (and DWARF, if it has it) */
	FX_SYM_DEBUG_FILE, /* a debug file on disk (build-id, .gnu_debuglink) */
	FX_SYM_DEBUGINFOD, /* a debug file from a debuginfod server */
};

/* "unreadable", "stripped", "symtab", "debug file", "debuginfod". */
const char *fx_sym_origin_name(enum fx_sym_origin o);

struct fx_symbolizer_stats {
	uint64_t objects;    /* objects opened */
	uint64_t lookups;    /* addresses asked for */
	uint64_t cache_hits; /* answered from the (object, offset) cache */
	uint64_t unresolved; /* addresses with no symbol */
	/* Now: objects held, their heap bytes (tables, results, debug sections)
	 * and, of those, the debug sections libdw holds. */
	uint64_t objects_held;
	uint64_t bytes;
	uint64_t dwarf_bytes;
	/* Of those objects and bytes: the functions' ranges read from
	 * .eh_frame for objects without symbols (see no_symbol). */
	uint64_t fde_ranges;
	uint64_t fde_bytes;
	/* Now: objects holding DWARF; (object, offset) results cached, and
	 * their heap bytes (of bytes). */
	uint64_t dwarf_objects;
	uint64_t results;
	uint64_t results_bytes;
	/* What was let go, so far: */
	uint64_t trimmed;	  /* objects freed to stay under max_bytes */
	uint64_t evicted;	  /* objects freed for the bound on their number */
	uint64_t idle_dropped;	  /* objects freed by fx_symbolizer_drop_idle() */
	uint64_t dwarf_shed;	  /* objects' DWARF freed for max_bytes (read again on use) */
	uint64_t results_evicted; /* results dropped as their object's cache filled */
	/* libdw's tables freed within a batch, over their bound (a fifth
	 * of max_bytes), to be built again for the addresses left */
	uint64_t dwarf_tables_freed;
	/* names that could not be read again from their file (it changed or
	 * went since the object was read): those addresses got a fallback */
	uint64_t names_unread;
	/* Inflated copies of debug files: used, written (and their bytes),
	 * not written (the disk, a refused source). */
	uint64_t inflated_hits, inflated_written, inflated_bytes, inflated_errors;
};

/* Returns NULL on ENOMEM. @opts may be NULL; it is copied. */
struct fx_symbolizer *fx_symbolizer_new(const struct fx_symbolizer_opts *opts);
void fx_symbolizer_free(struct fx_symbolizer *s);

/* Starts a batch (one window). The caches are bounded (512 objects, 2^18
 * results per object) and evict only what the current batch has not used, so
 * every result of a batch stays valid until the next batch begins; a batch
 * that uses more objects than the bound holds them all until then. */
void fx_symbolizer_begin_batch(struct fx_symbolizer *s);

/* The current batch's number, for fx_symbolizer_drop_idle(). */
uint64_t fx_symbolizer_batch(const struct fx_symbolizer *s);
/* Frees every object no batch since @batch used (tables, results, debug
 * sections): what stopped running gives its memory back. (What libdw builds
 * for look-ups, CUs and line tables, several times the debug sections once
 * many CUs are touched, is freed as soon as fx_symbolizer_resolve() has
 * answered; the sections stay, and the next call builds only what its new
 * addresses need.) Then trims what is left to max_bytes. Call between
 * batches, once a window. Returns how many were freed. */
size_t fx_symbolizer_drop_idle(struct fx_symbolizer *s, uint64_t batch);

/* Resolves @n file offsets (offsets in the ELF file, as perf mappings give them:
 * addr - map_start + pgoff) of the object @src. Fills out[0..n-1] always: when
 * the object cannot be read, every entry gets the readable fallback frame.
 * Returns 0, or -errno when the object could not be read at all (the caller may
 * log it once). */
int fx_symbolizer_resolve(struct fx_symbolizer *s, const struct fx_elf_source *src,
			  const uint64_t *offsets, size_t n, struct fx_sym_result *out);

/* Where the names of @src's object come from, and the path of the debug file
 * read (*@debug_path, NULL if none; valid as results are). Call after
 * fx_symbolizer_resolve() for @src in the same batch. */
enum fx_sym_origin fx_symbolizer_origin(struct fx_symbolizer *s, const struct fx_elf_source *src,
					const char **debug_path);

void fx_symbolizer_get_stats(const struct fx_symbolizer *s, struct fx_symbolizer_stats *out);

#endif
