#!/bin/bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan, fxcore
# with coverage) and runs each one for SECONDS (default 60) on a copy of its
# seed corpus and saved crashes; the checked-in files are never modified.
#
#   scripts/fuzz.sh [SECONDS]
#
# Environment: FX_FUZZ_BUILD (build directory, default build-fuzz/ in the
# repository), FX_FUZZ_TARGETS (default: every target, jvmattach included),
# CC (default clang-14, else clang), FX_FUZZ_SEED: when set, each target runs
# a fixed number of inputs (about 40 s each on a 2-CPU machine) from that
# seed instead of SECONDS from a random one, so that a result repeats on any
# machine: CI's gate (scripts/test.sh). Without it the fuzzing explores.
# Exit status 0 when no target crashed, leaked, timed out, ran out of memory
# or tripped a sanitizer; else 1, after printing each failing input's path
# and base64 (decode it into tests/fuzz/regressions/<target>/ to keep it).
set -euo pipefail

secs=${1:-60}
if ! [[ $secs =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ]; then
	echo "usage: $0 [SECONDS]" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FX_FUZZ_BUILD:-$root/build-fuzz}
targets=${FX_FUZZ_TARGETS:-config record symbolize json chunk view perfmap jitdump listing s3list jvmattach}
cc=${CC:-}
if [ -z "$cc" ]; then
	cc=$(command -v clang-14 || command -v clang || true)
fi
if [ -z "$cc" ] || ! "$cc" --version 2>/dev/null | grep -q clang; then
	echo "fuzz.sh: needs clang with libFuzzer (apt-get install clang-14 libclang-rt-14-dev)" >&2
	exit 2
fi

# The largest input worth trying per target: a config file, a 64 KiB ring and
# its 28-byte header, a small ELF file, a program of JSON writer calls.
max_len() {
	case $1 in
	config) echo 16384 ;;
	record) echo 65564 ;;
	symbolize) echo 65536 ;;
	json) echo 8192 ;;
	listing | s3list) echo 8192 ;;
	*) echo 4096 ;;
	esac
}

# Inputs run per target with FX_FUZZ_SEED: about 40 s each at the speed
# measured on CI's machine kind (2 CPUs, Debian 12).
fixed_runs() {
	case $1 in
	config) echo 50000 ;;
	record) echo 4000000 ;;
	symbolize) echo 250000 ;;
	json) echo 40000 ;;
	chunk) echo 2000000 ;;
	view) echo 3000000 ;;
	perfmap) echo 280000 ;;
	jitdump) echo 75000 ;;
	listing) echo 2400000 ;;
	s3list) echo 500000 ;;
	jvmattach) echo 3000000 ;;
	*) echo 100000 ;;
	esac
}
seed=${FX_FUZZ_SEED:-}
if [ -n "$seed" ] && ! [[ $seed =~ ^[0-9]+$ ]]; then
	echo "fuzz.sh: FX_FUZZ_SEED must be a number" >&2
	exit 2
fi

mkdir -p "$build"
cmake -S "$root" -B "$build" -DFX_FUZZ=ON -DBUILD_TESTING=OFF \
	-DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/cmake.log" 2>&1 ||
	{ cat "$build/cmake.log" >&2; exit 1; }
build_targets=()
for t in $targets; do
	build_targets+=("fuzz_$t")
done
cmake --build "$build" -j2 --target "${build_targets[@]}"

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
summary=()
for t in $targets; do
	work=$build/fuzz-run/$t
	rm -rf "$work"
	mkdir -p "$work/corpus" "$work/artifacts"
	# A copy: libFuzzer adds what it finds to the corpus directory it is given.
	for d in "$root/tests/fuzz/corpus/$t" "$root/tests/fuzz/regressions/$t"; do
		[ -d "$d" ] || continue
		find "$d" -maxdepth 1 -type f ! -name '.*' ! -name 'README*' \
			-exec cp -t "$work/corpus" {} +
	done
	if [ -n "$seed" ]; then
		budget=(-seed="$seed" -runs="$(fixed_runs "$t")")
		what="$(fixed_runs "$t") runs from seed $seed"
	else
		budget=(-max_total_time="$secs")
		what="$secs s"
	fi
	echo "== fuzz_$t: $what, $(find "$work/corpus" -type f | wc -l) seeds, log $work/log"
	rc=0
	(cd "$work" && "$build/tests/fuzz/fuzz_$t" "${budget[@]}" \
		-max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$work/artifacts/" -print_final_stats=1 corpus) \
		>"$work/log" 2>&1 || rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
	speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -1 | cut -d' ' -f2 || true)
	result=ok
	# slow-unit-* files are reports, not failures.
	artifacts=$(find "$work/artifacts" -type f ! -name 'slow-unit-*' | sort)
	if [ "$rc" -ne 0 ] || [ -n "$artifacts" ]; then
		result=FAIL
		failed=1
		kinds=$(for a in $artifacts; do basename "$a" | cut -d- -f1; done | sort -u | paste -sd,)
		[ -n "$kinds" ] && result="FAIL ($kinds)"
		echo "fuzz_$t failed (exit $rc); the end of its log:" >&2
		tail -40 "$work/log" >&2
		for a in $artifacts; do
			echo "input: $a" >&2
			echo "base64: $(base64 -w0 "$a")" >&2
			echo "keep it: base64 -d > tests/fuzz/regressions/$t/$(basename "$a")" >&2
		done
	fi
	summary+=("$(printf '%-10s %12s %8s %8s  %s' "$t" "${runs:-?}" "${speed:-?}" "${cov:-?}" "$result")")
done

echo
printf '%-10s %12s %8s %8s  %s\n' target runs exec/s edges result
for line in "${summary[@]}"; do
	echo "$line"
done
exit $failed
