#!/usr/bin/env bash
# Installs the test dependencies, builds everything in build/ with warnings as
# errors and runs every test. Integration tests need root (they skip without it).
# Exit code = ctest's; ctest's summary is the last thing printed.
set -euo pipefail

cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFX_WERROR=ON -DBUILD_TESTING=ON
cmake --build build -j "$(nproc)"
exec ctest --test-dir build --output-on-failure
