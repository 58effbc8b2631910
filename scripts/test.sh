#!/usr/bin/env bash
# Installs the test dependencies and runs every check, in three passes:
#   1. build/ with warnings as errors, and every ctest test (unit, integration,
#      fuzz corpus replays, style, clang-tidy, cppcheck, the Debian package
#      under a real systemd);
#   2. scripts/fuzz.sh: each libFuzzer target over a fixed number of inputs
#      from seed FX_FUZZ_SEED (default 1), so that a run repeats; exploring
#      with random seeds is scripts/fuzz.sh SECONDS, run by hand;
#   3. scripts/sanitize.sh: the tests again, built with ASan, UBSan and LSan.
# Integration tests need root (they skip without it). FX_TEST_PASSES picks the
# passes (default "plain fuzz sanitize"). Exit status: non-zero if any pass
# failed. The last lines are each pass's summary, ctest's last.
set -uo pipefail

cd "$(dirname "$0")/.."
passes=${FX_TEST_PASSES:-plain fuzz sanitize}
bash scripts/install-test-deps.sh || exit 1

rc=0
summary=()
logs=$(mktemp -d "${TMPDIR:-/tmp}/fxagent-test.XXXXXX")
trap 'rm -rf "$logs"' EXIT

# The lines of ctest's own summary in @1, for the end.
ctest_summary() {
	sed -n '/^[0-9]*% tests passed/,$p' "$1"
}

for pass in $passes; do
	echo "=== test.sh: $pass pass ==="
	case $pass in
	plain)
		cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFX_WERROR=ON \
			-DBUILD_TESTING=ON &&
			cmake --build build -j "$(nproc)" &&
			ctest --test-dir build --output-on-failure 2>&1 | tee "$logs/plain.log"
		r=${PIPESTATUS[0]}
		;;
	fuzz)
		FX_FUZZ_SEED=${FX_FUZZ_SEED:-1} bash scripts/fuzz.sh 2>&1 | tee "$logs/fuzz.log"
		r=${PIPESTATUS[0]}
		;;
	sanitize)
		bash scripts/sanitize.sh 2>&1 | tee "$logs/sanitize.log"
		r=${PIPESTATUS[0]}
		;;
	*)
		echo "test.sh: unknown pass '$pass' (plain, fuzz, sanitize)" >&2
		r=2
		;;
	esac
	[ "$r" = 0 ] || rc=1
	summary+=("$pass: $([ "$r" = 0 ] && echo passed || echo "FAILED (exit $r)")")
done

echo
echo "=== test.sh: summary ==="
for line in "${summary[@]}"; do
	echo "  $line"
done
if [ -s "$logs/fuzz.log" ]; then
	echo "--- fuzz ---"
	sed -n '/^target /,$p' "$logs/fuzz.log"
fi
for pass in sanitize plain; do
	if [ -s "$logs/$pass.log" ]; then
		echo "--- ctest, $pass pass ---"
		ctest_summary "$logs/$pass.log"
	fi
done
exit "$rc"
