#!/usr/bin/env bash
# The test suite again, with fxcore, fxagent and the unit tests built with
# AddressSanitizer, UndefinedBehaviorSanitizer and LeakSanitizer
# (-DFX_SANITIZE=ON; the test workloads stay as they are).
#
#   scripts/sanitize.sh [BUILD_DIR] [-- CTEST_ARGS...]
#
# Builds BUILD_DIR (default build-asan/) as RelWithDebInfo: the optimizer the
# agent ships with, so the code checked is the code that runs and the
# integration tests' timing stays close to the plain build's; -g keeps file
# and line in every report. Then runs ctest there (the integration tests
# start BUILD_DIR/fxagent). Every sanitizer report, of any process the tests
# start, goes to a file in BUILD_DIR/sanitizer-logs. Exit status: non-zero
# when ctest failed or any report was written; the reports are printed, and
# ctest's summary is printed again last.
#
# Left out, as they do not run the sanitized code: the static and style
# checks (the same sources, checked in the plain pass) and the Debian package
# tests (package.deb, integration.package, integration.systemd: they build
# and test the package, compiled without sanitizers). FX_SANITIZE_ALL=1
# runs them too. CTEST_ARGS go to ctest (e.g. -- -L unit).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-asan
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
	build=$1
	shift
fi
[ "${1:-}" = "--" ] && shift
mkdir -p "$build"
build=$(cd "$build" && pwd)

# FX_TIME_SCALE (default 3): the integration tests' deadlines and timeouts are
# that many times longer, for the agent's slowdown under the sanitizers.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFX_SANITIZE=ON \
	-DFX_WERROR=ON -DBUILD_TESTING=ON -DFX_TIME_SCALE="${FX_TIME_SCALE:-3}" || exit 1
cmake --build "$build" -j "$(nproc)" || exit 1

# Absolute (each process writes relative to its own cwd) and writable by the
# tests' unprivileged agents (integration.privileges runs it as nobody).
logs=$build/sanitizer-logs
rm -rf "$logs"
mkdir -p "$logs"
chmod 1777 "$logs"

# Reports go to LOG.<pid> files, not stderr: the tests read the agent's
# stderr, and a report must not be lost in a test that passes anyway.
# detect_leaks: LeakSanitizer at every exit (ASan's default on x86-64, said
# explicitly). halt_on_error / -fno-sanitize-recover: the first error ends
# the process. Leak suppressions: lsan.supp beside this script, if any, holds
# only leaks of libraries outside this project, each with its evidence.
export ASAN_OPTIONS="log_path=$logs/asan:detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1"
export UBSAN_OPTIONS="log_path=$logs/ubsan:halt_on_error=1:print_stacktrace=1:report_error_type=1"
export LSAN_OPTIONS="log_path=$logs/lsan:print_suppressions=0"
# The churn and soak tests check the agent's RSS stays flat: under ASan, whose
# quarantine holds up to 256 MiB of freed memory, it does not; they skip that
# check here (LeakSanitizer checks for leaks instead) and keep the rest.
export FX_SANITIZED=1
if [ -f "$root/scripts/lsan.supp" ]; then
	LSAN_OPTIONS="$LSAN_OPTIONS:suppressions=$root/scripts/lsan.supp"
fi

skip=()
if [ "${FX_SANITIZE_ALL:-0}" != 1 ]; then
	skip=(-LE '^(static|style)$' -E '^(package\.deb|integration\.(package|systemd))$')
fi
out=$build/sanitize-ctest.log
ctest --test-dir "$build" --output-on-failure "${skip[@]}" "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}

shopt -s nullglob
reports=("$logs"/*)
if [ ${#reports[@]} -gt 0 ]; then
	echo
	echo "sanitize.sh: ${#reports[@]} sanitizer report(s) in $logs:"
	for f in "${reports[@]}"; do
		echo "==> $f <=="
		cat "$f"
	done
	echo "sanitize.sh: FAILED: the ${#reports[@]} sanitizer report(s) above" \
		"(a test can pass while a process it ran was not clean)"
	[ "$rc" != 0 ] || rc=1
else
	echo "sanitize.sh: no sanitizer reports"
fi
# ctest's summary last, as CI shows the last lines.
echo
sed -n '/^[0-9]*% tests passed/,$p' "$out"
exit "$rc"
