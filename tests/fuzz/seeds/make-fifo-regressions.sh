#!/bin/bash
# Rebuilds the inputs of ../regressions/symbolize/ that make the symbolizer
# open a FIFO (found by review while writing fuzz_symbolize; each one hung it
# for ever before the fix). fuzz_symbolize creates the FIFOs they name:
# "fifo" next to the object, and /tmp/fxfuzz.fifo.
# Needs gcc, binutils and dwz (Debian 12).
set -euo pipefail
cd "$(dirname "$0")"
out=../regressions/symbolize
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pm=("-ffile-prefix-map=$PWD=/fxseed")
so=("${pm[@]}" -O2 -fPIC -shared -nostdlib "-Wl,-z,noseparate-code")

# .gnu_debuglink naming "fifo": looked up next to the object.
gcc "${so[@]}" -g -o "$tmp/dl.so" seed.c
: >"$tmp/fifo"
(cd "$tmp" && objcopy --strip-debug --add-gnu-debuglink=fifo dl.so dl-fifo.so)
cp "$tmp/dl-fifo.so" "$out/hang-debuglink-fifo"

# A split-DWARF skeleton unit whose DW_AT_dwo_name is /tmp/fxfuzz.fifo
# (the name gcc gives, 16 bytes, replaced in .debug_str by one as long).
# (gcc gives each build another DWO id: the output differs, and any works.)
src=$PWD/seed.c
(cd "$tmp" && gcc "${so[@]}" -g -gsplit-dwarf -c -o fxfuzzfifo12.o "$src" &&
	gcc "${so[@]}" -o libx.so fxfuzzfifo12.o)
python3 - "$tmp/libx.so" "$out/hang-dwo-fifo" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
old, new = b"fxfuzzfifo12.dwo\0", b"/tmp/fxfuzz.fifo\0"
assert len(old) == len(new) and data.count(old) == 1
open(sys.argv[2], "wb").write(data.replace(old, new))
PY

# A dwz-compressed object whose .gnu_debugaltlink names /tmp/fxfuzz.fifo
# (no file by its build-id exists under the debug dirs).
gcc "${so[@]}" -g -gdwarf-4 -o "$tmp/a.so" seed.c
gcc "${so[@]}" -g -gdwarf-4 -o "$tmp/b.so" seed.c
(cd "$tmp" && dwz -m common.debug -M /tmp/fxfuzz.fifo a.so b.so)
cp "$tmp/a.so" "$out/hang-altlink-fifo"
chmod 644 "$out"/hang-*
ls -l "$out"
