#!/usr/bin/env bash
# Static checks of the agent's sources (agent/**/*.c, and the headers they
# include): clang-tidy with the checked-in .clang-tidy, and cppcheck with
# .cppcheck-suppressions; that every path into the tree named in its configs,
# scripts, docs and comments exists, and every source file is on the map
# (scripts/check-paths.py); and that no two files of agent/ depend on each
# other and no function is over 120 lines (scripts/check-layout.py). Exits
# 1 on any finding, 2 when a tool is missing.
#
#   scripts/static-check.sh [--clang-tidy | --cppcheck | --paths | --layout] [BUILD_DIR]
#
# Both tools read the compiler flags from BUILD_DIR/compile_commands.json
# (default build-static/, configured here when it has none; nothing is
# compiled). CLANG_TIDY and CPPCHECK name the tools, else they are looked
# up in PATH (clang-tidy-14 first). ctest runs each as its own test:
# static.clang_tidy, static.cppcheck, static.paths, static.layout
# (tests/CMakeLists.txt). A
# false positive is suppressed where
# it is reported, with a comment saying why:
#   clang-tidy: /* NOLINTNEXTLINE(check-name): why */
#   cppcheck:   // cppcheck-suppress id   (whole-project ones in .cppcheck-suppressions)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools=(clang-tidy cppcheck paths layout)
case "${1:-}" in
--clang-tidy | --cppcheck | --paths | --layout)
	tools=("${1#--}")
	shift
	;;
-h | --help)
	sed -n '2,23s/^# \{0,1\}//p' "$0"
	exit 0
	;;
-*)
	echo "usage: $0 [--clang-tidy | --cppcheck | --paths | --layout] [BUILD_DIR]" >&2
	exit 2
	;;
esac
build=${1:-$root/build-static}
jobs=${FX_JOBS:-$(nproc)}

if [ ! -f "$build/compile_commands.json" ]; then
	cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=ON \
		-DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
fi
db=$build/compile_commands.json

need() {
	local t
	for t in "$@"; do
		if command -v "$t" >/dev/null; then
			echo "$t"
			return 0
		fi
	done
	echo "$0: none of $* found (apt-get install -y clang-tidy cppcheck)" >&2
	exit 2
}

shopt -s nullglob globstar
sources=()
for f in "$root"/agent/**/*.c; do
	# BPF programs (*.bpf.c) are built by clang for the BPF target, with
	# its attributes and libbpf's map macros: the verifier checks them.
	[[ $f == *.bpf.c ]] || sources+=("$f")
done
failed=0

run_clang_tidy() {
	local tidy out rc=0
	tidy=${CLANG_TIDY:-$(need clang-tidy-14 clang-tidy)}
	out=$(mktemp)
	# One process per file: clang-tidy 14 run over several files reports
	# false "uninitialized va_list" findings in the second and later ones.
	# "N warnings generated." is clang's count of what the filters dropped.
	printf '%s\0' "${sources[@]}" |
		xargs -0 -n1 -P "$jobs" "$tidy" -p "$build" --quiet >"$out" 2>&1 || rc=$?
	grep -Ev '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$' "$out" || true
	rm -f "$out"
	if [ "$rc" = 0 ]; then
		echo "clang-tidy: ${#sources[@]} files, no findings"
	else
		echo "clang-tidy: findings above (config: .clang-tidy)"
		failed=1
	fi
}

run_cppcheck() {
	local cppcheck rc=0
	cppcheck=${CPPCHECK:-$(need cppcheck)}
	# The compile database gives the real defines and include paths (so
	# cppcheck checks the configuration that is built, not every #ifdef);
	# the libraries teach it the POSIX/GNU, libcurl and zlib functions
	# (which ones allocate, close or must not get NULL).
	"$cppcheck" --project="$db" --file-filter="$root/agent/*" -I "$root/include" \
		--enable=warning,performance,portability --inline-suppr \
		--suppressions-list="$root/.cppcheck-suppressions" \
		--library=posix --library=gnu --library=libcurl --library=zlib \
		--error-exitcode=1 --quiet -j "$jobs" \
		--template='{file}:{line}:{column}: {severity}: {message} [{id}]' || rc=$?
	if [ "$rc" = 0 ]; then
		echo "cppcheck: ${#sources[@]} files, no findings"
	else
		echo "cppcheck: findings above (suppressions: .cppcheck-suppressions)"
		failed=1
	fi
}

# Paths into the tree that configs, scripts, docs and comments name must exist
# (scripts/check-paths.py): a rename leaves no stale reference behind.
run_paths() {
	python3 "$root/scripts/check-paths.py" || failed=1
}

# No file cycles, no function over 120 lines (scripts/check-layout.py).
run_layout() {
	python3 "$root/scripts/check-layout.py" || failed=1
}

for t in "${tools[@]}"; do
	case "$t" in
	clang-tidy) run_clang_tidy ;;
	cppcheck) run_cppcheck ;;
	paths) run_paths ;;
	layout) run_layout ;;
	esac
done
exit "$failed"
