#!/bin/bash
# Rebuilds the ELF seeds of fuzz_symbolize into ../corpus/symbolize/ from
# seed.c and seed.cc (Debian 12: gcc 12, g++ 12, clang 14, binutils 2.40).
# Shared objects without libc (-nostdlib), with code and data sharing pages
# (-z noseparate-code), keep each file a few KiB.
set -euo pipefail
cd "$(dirname "$0")"
out=../corpus/symbolize
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
pm=("-ffile-prefix-map=$PWD=/fxseed")
so=("${pm[@]}" -O2 -fPIC -shared -nostdlib "-Wl,--build-id" "-Wl,-z,noseparate-code")

gcc "${so[@]}" -g -o "$out/elf-dwarf5.so" seed.c
gcc "${so[@]}" -gdwarf-4 -o "$out/elf-dwarf4.so" seed.c
# .debug_frame instead of .eh_frame
gcc "${so[@]}" -g -fno-asynchronous-unwind-tables -fno-unwind-tables -o "$out/elf-debug-frame.so" seed.c
# compressed debug sections (SHF_COMPRESSED)
gcc "${so[@]}" -g -gz=zlib -o "$out/elf-gz.so" seed.c
# clang: DW_FORM_strx, .debug_addr, .debug_rnglists, .debug_str_offsets
clang-14 "${so[@]}" -g -gdwarf-5 -o "$out/elf-clang.so" seed.c
g++ "${so[@]}" -g -o "$out/elf-cpp.so" seed.cc
gcc "${so[@]}" -g -Wl,--build-id=none -o "$out/elf-nobid.so" seed.c
# A fixed-address executable (ET_EXEC): addresses are not offsets.
gcc "${pm[@]}" -O2 -g -nostdlib -static -no-pie -Wl,--build-id -Wl,-e,fx_seed_entry -Wl,-z,noseparate-code \
	-o "$out/elf-exec" seed.c
strip --strip-all -o "$out/elf-stripped.so" "$out/elf-dwarf5.so"
# Symbols and DWARF gone, a .gnu_debuglink left pointing at a debug file.
objcopy --only-keep-debug "$out/elf-dwarf5.so" "$tmp/elf.debug"
objcopy --strip-debug --add-gnu-debuglink="$tmp/elf.debug" "$out/elf-dwarf5.so" \
	"$out/elf-debuglink.so"
# A separate debug file itself (NOBITS code, all of the DWARF).
cp "$tmp/elf.debug" "$out/elf-only-debug.debug"
chmod 644 "$out"/*
ls -l "$out"
